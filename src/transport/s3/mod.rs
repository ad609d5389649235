//! The S3-compatible backend (AWS S3, Huawei OBS, MinIO, s3s): reqwest over rustls (ring
//! provider) and SigV4 header signing.
//!
//! Each [`S3Store`] owns a tokio runtime with two worker threads and blocks on it, so the
//! [`ObjectStore`] trait stays synchronous. Requests:
//! * HEAD/GET/DELETE on `prefix/key`; downloads are a HEAD for the size, then one GET for
//!   objects up to the part size or parallel ranged GETs written at their offsets
//!   (`wire::download`); a range read into memory is one ranged GET (`wire::range`);
//! * uploads are a HEAD (existing object → `AlreadyExists`), then one `PUT` with
//!   `If-None-Match: *` below the part size (always, for a buffer in memory), or a multipart upload whose completion
//!   carries `If-None-Match: *` ([`put`], [`multipart`]); a 412 means `AlreadyExists`,
//!   except after a retry, when the stored object is first compared with what was sent
//!   (an earlier attempt whose answer was lost may have stored it);
//! * LIST is ListObjectsV2 following continuation tokens ([`list`]).
//!
//! A server that lacks an optional feature (`If-None-Match: *` writes, `UNSIGNED-PAYLOAD`
//! parts, ListObjectsV2) and says so (HTTP 501, or the code `NotImplemented`) gets the
//! same request without it, once per store and feature, with one warning that says which
//! guarantee is weaker ([`fallback`]).
//!
//! Every request has a timeout and bounded retries (`wire::retry`); errors are mapped by
//! [`response`]. This module implements the shared layer's `Exchange` (`wire`): the
//! object path (prefix + key), SigV4 signing, S3's error answers and the HEAD probes.
//!
//! # Limitations
//! * A server that ignores `If-None-Match` (older MinIO, some OBS versions) is protected
//!   only by the HEAD check, and one that checks it apart from the write (s3s-fs) has the
//!   same gap: two writers racing on one key may both upload and the last one wins.
//!   Snapshots do not rely on it (each save writes an object of its own and reads its
//!   sidecar back, `crate::snapshot`).
//! * A HEAD answered 404 cannot tell a missing bucket from a missing key (HEAD has no
//!   body), so [`ObjectStore::head`] probes with a one-byte GET before reporting a miss.

mod config;
mod fallback;
mod list;
mod multipart;
mod put;
mod response;
mod sign;

use std::sync::atomic::AtomicU32;
use std::time::SystemTime;

use reqwest::Method;

pub(crate) use config::incomplete_credential_pairs;
pub use config::{Credentials, S3Config};
use response::error_from_response;
use sign::UnsignedRequest;

use crate::transport::wire::{Blocking, Call, Exchange, Wire, meta_from_headers, network_error};
use crate::transport::{
    Capabilities, DeleteObjects, Error, ListObjects, NextRequest, ObjectKey, ObjectMeta,
    ObjectStore, PutOutcome, TransferStats, TransportOptions,
};

/// The parts of a store that async code borrows.
pub(crate) struct Inner {
    pub config: S3Config,
    /// Client, options, retry policy and the retry count.
    pub wire: Wire,
    /// Optional S3 features this server turned out to lack ([`fallback`]).
    pub lacks: fallback::Lacks,
}

impl Exchange for Inner {
    fn wire(&self) -> &Wire {
        &self.wire
    }

    fn object_path(&self, key: &str) -> String {
        self.config.full_key(key)
    }

    fn location(&self, key: &str) -> String {
        self.config.location(key)
    }

    async fn send_once(&self, call: &Call) -> Result<reqwest::Response, Error> {
        let url = self.config.request_url(call.target.as_deref(), &call.query);
        let request = UnsignedRequest::new(
            call.method.clone(),
            url,
            call.headers.clone(),
            call.payload.clone(),
        );
        let signed = match &self.config.credentials {
            Some(credentials) => {
                request.sign(credentials, &self.config.region, SystemTime::now())?
            }
            None => request.anonymous()?,
        };
        let method = call.method.as_str();
        let mut builder = signed.into_builder(&self.wire.client);
        if call.close_connection {
            builder = builder.header(reqwest::header::CONNECTION, "close");
        }
        let response =
            builder.send().await.map_err(|e| network_error(method, &call.location, e))?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(error_from_response(method, &call.location, &self.config, response).await)
        }
    }

    /// HEAD of `key`: `None` on 404 (after checking that the bucket exists).
    async fn head(
        &self,
        key: &ObjectKey,
        retries: &AtomicU32,
    ) -> Result<Option<ObjectMeta>, Error> {
        let call = Call::object(self, Method::HEAD, key.as_str());
        let location = call.location.clone();
        let result = self
            .send(&call, retries, |response| {
                let location = location.clone();
                async move { meta_from_headers(key, &location, "HEAD", response.headers()) }
            })
            .await;
        match result {
            Ok(meta) => Ok(Some(meta)),
            Err(
                ref e @ (Error::Http { status: 400, code: None, .. }
                | Error::AccessDenied { code: None, .. }),
            ) => {
                // A HEAD's error has no body, so no code to say what is wrong (a wrong
                // region, a bad signature, …): a one-byte GET carries one.
                let mut probe = Call::object(self, Method::GET, key.as_str());
                probe.headers.push(("range", "bytes=0-0".to_owned()));
                match self.send(&probe, retries, |_| async { Ok(()) }).await {
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e),
                    // The GET was accepted where the HEAD was not: report the HEAD's answer.
                    Ok(()) => Err(clone_head_error(e)),
                }
            }
            Err(e) if e.is_not_found() => {
                // HEAD has no body: a one-byte GET tells NoSuchBucket from NoSuchKey.
                let mut probe = Call::object(self, Method::GET, key.as_str());
                probe.headers.push(("range", "bytes=0-0".to_owned()));
                match self.send(&probe, retries, |_| async { Ok(()) }).await {
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e),
                    // Created between the HEAD and the probe: report the miss the HEAD saw.
                    Ok(()) => Ok(None),
                }
            }
            Err(e) => Err(e),
        }
    }
}

impl Inner {
    /// Fails with [`Error::MissingCredentials`] unless the store has credentials.
    pub(crate) fn require_credentials(
        &self,
        operation: &'static str,
        key: &str,
    ) -> Result<(), Error> {
        if self.config.credentials.is_none() {
            return Err(Error::MissingCredentials {
                operation,
                location: self.config.location(key),
            });
        }
        Ok(())
    }
}

/// A copy of a HEAD's error without a body (an [`Error::Http`] or [`Error::AccessDenied`]
/// with no code), for [`Inner::head`].
fn clone_head_error(e: &Error) -> Error {
    match e {
        Error::AccessDenied {
            method,
            location,
            status,
            message,
            anonymous,
            backend,
            attempts,
            ..
        } => Error::AccessDenied {
            method: method.clone(),
            location: location.clone(),
            status: *status,
            code: None,
            message: message.clone(),
            anonymous: *anonymous,
            backend: *backend,
            attempts: *attempts,
        },
        Error::Http { method, location, status, message, attempts, .. } => Error::Http {
            method: method.clone(),
            location: location.clone(),
            status: *status,
            code: None,
            message: message.clone(),
            attempts: *attempts,
        },
        other => Error::Setup { reason: other.to_string() },
    }
}

/// A store in one bucket under one prefix. See the module docs.
pub struct S3Store {
    net: Blocking<Inner>,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Store({})", self.net.exchange.config.describe())
    }
}

impl S3Store {
    /// Creates the HTTP client and runtime for `config`.
    ///
    /// # Errors
    /// [`Error::Setup`] if the runtime or the TLS client cannot be created.
    pub fn new(config: S3Config, options: TransportOptions) -> Result<Self, Error> {
        let (wire, runtime) = Wire::new(options, config.endpoint.scheme(), "S3")?;
        let exchange = Inner { config, wire, lacks: fallback::Lacks::default() };
        Ok(Self { net: Blocking { exchange, runtime } })
    }

    /// The resolved configuration (credentials redacted in `Debug`).
    pub fn config(&self) -> &S3Config {
        &self.net.exchange.config
    }
}

impl ObjectStore for S3Store {
    fn head(&self, key: &ObjectKey) -> Result<Option<ObjectMeta>, Error> {
        self.net.head(key)
    }

    fn get_to_file_observed(
        &self,
        key: &ObjectKey,
        dest: &std::path::Path,
        progress: &dyn crate::transport::DownloadProgress,
    ) -> Result<(ObjectMeta, TransferStats), Error> {
        self.net.download(key, dest, progress)
    }

    fn put_file_if_absent_observed(
        &self,
        key: &ObjectKey,
        src: &std::path::Path,
        progress: &dyn crate::progress::Progress,
    ) -> Result<(PutOutcome, TransferStats), Error> {
        self.net
            .upload(async |inner, retries| put::upload(inner, key, src, retries, progress).await)
    }

    fn get_range_with(
        &self,
        key: &ObjectKey,
        start: u64,
        end: u64,
        next: NextRequest,
    ) -> Result<Vec<u8>, Error> {
        self.net.get_range(key, start, end, next)
    }

    fn get_small(&self, key: &ObjectKey, max_bytes: u64) -> Result<Option<Vec<u8>>, Error> {
        self.net.get_small(key, max_bytes)
    }

    fn put_bytes_if_absent(
        &self,
        key: &ObjectKey,
        bytes: &[u8],
    ) -> Result<(PutOutcome, TransferStats), Error> {
        let body = bytes::Bytes::copy_from_slice(bytes);
        self.net.upload(async |inner, retries| put::upload_bytes(inner, key, body, retries).await)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::of(&crate::transport::Capability::ALL)
    }

    fn listing(&self) -> Option<&dyn ListObjects> {
        Some(self)
    }

    fn deleting(&self) -> Option<&dyn DeleteObjects> {
        Some(self)
    }

    fn retried_requests(&self) -> u64 {
        self.net.exchange.wire.retried_requests()
    }

    fn describe(&self) -> String {
        self.net.exchange.config.describe()
    }
}

impl ListObjects for S3Store {
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, Error> {
        let retries = AtomicU32::new(0);
        self.net.runtime.block_on(list::list_all(&self.net.exchange, prefix, &retries))
    }
}

impl DeleteObjects for S3Store {
    fn delete(&self, key: &ObjectKey) -> Result<(), Error> {
        self.net.exchange.require_credentials("delete", key.as_str())?;
        let retries = AtomicU32::new(0);
        let call = Call::object(&self.net.exchange, Method::DELETE, key.as_str());
        self.net.runtime.block_on(async {
            match self.net.exchange.send(&call, &retries, |_| async { Ok(()) }).await {
                Err(e) if e.is_not_found() => Ok(()),
                other => other,
            }
        })
    }
}
