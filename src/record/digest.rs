//! [`RecordDigest`]: the digest of a record, as the records that name another record store
//! it (a snapshot sidecar's `manifest_digest`, an index's parents, an L0 signature's
//! manifest).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;

/// The digest of a record: its envelope's `content_digest`, `sha256:<64 lowercase hex>`
/// ([`crate::record::Envelope::compute_digest`]).
///
/// Stored as that string (serde transparent: the bytes of a `String` field). Reading does
/// not check the form: a stored digest is compared with the digest of the record it names,
/// and one that is malformed simply matches nothing (the reader's error then names both).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RecordDigest(String);

impl RecordDigest {
    /// The record digest of SHA-256 `digest`.
    pub fn of(digest: &Sha256Digest) -> Self {
        RecordDigest(digest.to_prefixed())
    }

    /// A digest as stored (not checked; see the type's docs).
    pub fn from_stored(text: impl Into<String>) -> Self {
        RecordDigest(text.into())
    }

    /// The stored text, `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RecordDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Sha256Digest> for RecordDigest {
    fn from(digest: Sha256Digest) -> Self {
        RecordDigest::of(&digest)
    }
}

impl PartialEq<str> for RecordDigest {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_digests_are_stored_as_the_prefixed_string() {
        let sha = Sha256Digest::of_bytes(b"");
        let d = RecordDigest::of(&sha);
        assert_eq!(d.as_str(), format!("sha256:{}", sha.to_hex()));
        assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"sha256:{}\"", sha.to_hex()));
        // Read back as stored, even when malformed (the comparison refuses it later).
        let odd: RecordDigest = serde_json::from_str("\"sha256:00\"").unwrap();
        assert_eq!(odd, RecordDigest::from_stored("sha256:00"));
        assert_ne!(odd, d);
    }
}
