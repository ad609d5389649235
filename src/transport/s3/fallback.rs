//! Optional S3 features a server may lack, and what the store does instead.
//!
//! S3-compatible servers implement different subsets of the API. Ceph RGW versions, s3gw
//! and others answer a write carrying `If-None-Match: *` with `501 NotImplemented`; some
//! gateways refuse `x-amz-content-sha256: UNSIGNED-PAYLOAD` or ListObjectsV2 the same way.
//! Such an answer is never retried ([`Error::is_retryable`]); the request is sent again
//! without the feature, and the store remembers it for every later request:
//!
//! | feature | without it |
//! |---|---|
//! | `If-None-Match: *` on `PUT` and on `CompleteMultipartUpload` ([`Feature::ConditionalWrites`]) | the HEAD before every upload is the only protection: two writers racing on one key may both be told "created", and the last write wins (snapshots do not rely on it: each save writes an object of its own and reads its sidecar back) |
//! | `UNSIGNED-PAYLOAD` part bodies ([`Feature::UnsignedPayload`]) | each part is read once more to sign its SHA-256 (more CPU and disk reads per upload, nothing weaker) |
//! | ListObjectsV2 (`list-type=2`, `start-after`, continuation tokens) ([`Feature::ListObjectsV2`]) | ListObjects (version 1) with `marker=<the last key>`: the same keys, page by page |
//!
//! The first time a store falls back, one warning names the server's answer, the feature
//! and the weaker guarantee; later requests of the same store skip the feature silently.
//!
//! [`Error::is_retryable`]: crate::transport::Error::is_retryable

use std::sync::atomic::{AtomicBool, Ordering};

use crate::transport::Error;

/// An optional S3 feature (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    /// `If-None-Match: *` on writes.
    ConditionalWrites,
    /// `x-amz-content-sha256: UNSIGNED-PAYLOAD` on part uploads.
    UnsignedPayload,
    /// ListObjectsV2.
    ListObjectsV2,
}

impl Feature {
    /// What the server refused, and what is weaker without it.
    fn explain(self) -> (&'static str, &'static str) {
        match self {
            Feature::ConditionalWrites => (
                "conditional writes (the If-None-Match: * header)",
                "uploads now rely on the HEAD before each write alone: two writers racing on \
                 one key may both be told \"created\" and the last write wins (snapshots stay \
                 consistent: each save writes an object of its own and reads its sidecar back; \
                 see docs/transport.md, \"Stores without atomic conditional writes\")",
            ),
            Feature::UnsignedPayload => (
                "unsigned part bodies (x-amz-content-sha256: UNSIGNED-PAYLOAD)",
                "each part is read once more to sign its SHA-256; nothing is weaker, uploads \
                 cost more reads",
            ),
            Feature::ListObjectsV2 => (
                "ListObjectsV2 (list-type=2)",
                "listings use ListObjects version 1 with marker=<last key>; the keys are the same",
            ),
        }
    }
}

/// Which features a store's server turned out to lack (all present until it says so).
#[derive(Debug, Default)]
pub(crate) struct Lacks {
    conditional_writes: AtomicBool,
    unsigned_payload: AtomicBool,
    list_v2: AtomicBool,
}

impl Lacks {
    fn flag(&self, feature: Feature) -> &AtomicBool {
        match feature {
            Feature::ConditionalWrites => &self.conditional_writes,
            Feature::UnsignedPayload => &self.unsigned_payload,
            Feature::ListObjectsV2 => &self.list_v2,
        }
    }

    /// True if the server lacks `feature` (requests leave it out).
    pub(crate) fn lacks(&self, feature: Feature) -> bool {
        self.flag(feature).load(Ordering::Relaxed)
    }

    /// If `error` says the server does not implement what was asked
    /// ([`Error::is_not_implemented`]), records that it lacks `feature` (warning once per
    /// store, naming `store` and the answer) and returns true: the caller sends the
    /// request again without it.
    pub(crate) fn fall_back(&self, feature: Feature, store: &str, error: &Error) -> bool {
        if !error.is_not_implemented() {
            return false;
        }
        if !self.flag(feature).swap(true, Ordering::Relaxed) {
            let (what, weaker) = feature.explain();
            tracing::warn!(
                "{store} does not implement {what} (it answered: {}); continuing without it: \
                 {weaker}",
                crate::message::one_line(error)
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Attempts;

    #[test]
    fn only_a_not_implemented_answer_falls_back() {
        let lacks = Lacks::default();
        let http = |status, code: &str| Error::Http {
            method: "PUT".into(),
            location: "s3://b/k".into(),
            status,
            code: Some(code.into()),
            message: None,
            attempts: Attempts::default(),
        };
        assert!(!lacks.fall_back(Feature::ConditionalWrites, "s3://b", &http(500, "x")));
        assert!(!lacks.lacks(Feature::ConditionalWrites));
        assert!(lacks.fall_back(
            Feature::ConditionalWrites,
            "s3://b",
            &http(501, "NotImplemented")
        ));
        assert!(lacks.lacks(Feature::ConditionalWrites) && !lacks.lacks(Feature::ListObjectsV2));
    }
}
