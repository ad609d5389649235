//! The HTTP cache-server backend ([`HttpStore`]): the plain protocol of WebDAV servers
//! (nginx's dav module, Apache's mod_dav, sccache's WebDAV storage), ccache's HTTP storage
//! and bazel-remote's HTTP API — GET, HEAD and PUT of whole objects under a base URL.
//!
//! Requests (through the shared layer, `wire`):
//! * HEAD for existence and size (`Content-Length`); 404 is "no such object";
//! * downloads and ranged reads as on S3: `Range: bytes=a-b`, and a server that ignores
//!   `Range` (bazel-remote, nginx with `max_ranges 0`) answers `200` with the whole object,
//!   from which the range is kept (`wire::download`, `wire::range`);
//! * uploads: HEAD (an existing object → `AlreadyExists`), then one `PUT` of the whole
//!   object streamed from the file, with `If-None-Match: *` (a `412` means another writer
//!   got there first; after a retried `PUT`, the stored object is first compared with the
//!   bytes sent, `wire::own_object_stored`). A WebDAV server that answers `409 Conflict`
//!   (the object's parent collection is missing) gets `MKCOL` of each parent, then the
//!   `PUT` again ([`put`]). (nginx answers such a `PUT` with `500` instead; it needs
//!   `create_full_put_path on`, as ccache's guide for nginx sets it.)
//!
//! Authentication: `Authorization: Bearer` from `STRATA_HTTP_TOKEN`, or basic from
//! `STRATA_HTTP_USER` and `STRATA_HTTP_PASSWORD` ([`HttpConfig`]); TLS with rustls, as the
//! S3 backend.
//!
//! # Limitations
//! * No listing and no deletion ([`crate::transport::Capability`]): `snapshot gc`, restore
//!   by prefix and leases cannot use such a store (refused when it is opened for them).
//! * Put-if-absent is a HEAD, then a `PUT` carrying `If-None-Match: *`. A server that
//!   ignores the condition (nginx 1.22's dav module does; measured in
//!   `tests/it/transport/contract.rs`) replaces an object that a second writer uploads
//!   between the HEAD and the `PUT`; the last writer wins, and every object is still
//!   written whole. Snapshots and refs do not depend on it (see docs/transport.md).
//! * No multipart upload: an object goes up in one `PUT`, which must fit in
//!   `STRATA_S3_TIMEOUT_SECONDS` and in the server's body limit (nginx
//!   `client_max_body_size`, bazel-remote `--max_blob_size`; a `413` says so).

mod config;
mod put;

use std::sync::atomic::AtomicU32;

use reqwest::{Method, StatusCode};

pub use config::HttpConfig;
pub(crate) use config::{has_writer_credentials, incomplete_credential_pairs};

use crate::transport::wire::{Blocking, Call, Exchange, Wire, meta_from_headers, network_error};
use crate::transport::{
    Attempts, Capabilities, DeleteObjects, Error, ListObjects, NextRequest, ObjectKey, ObjectMeta,
    ObjectStore, PutOutcome, TransferStats, TransportOptions,
};

/// The parts of a store that async code borrows.
pub(crate) struct Inner {
    config: HttpConfig,
    wire: Wire,
}

/// What a cache server's error status means for `method`, beyond its reason phrase.
fn status_hint(method: &str, status: StatusCode) -> Option<&'static str> {
    match (method, status.as_u16()) {
        ("PUT", 404) => Some(
            "the server has no such place for uploads: check the store URL's path and that the \
             server takes PUT there",
        ),
        ("PUT" | "MKCOL", 405) => Some(
            "the server does not take uploads at this URL (nginx: dav_methods PUT MKCOL; a \
             read-only server cannot be written)",
        ),
        ("PUT", 409) => Some(
            "the server refuses to create the object here: its parent collection is missing \
             and could not be made (WebDAV: enable create_full_put_path on nginx, or MKCOL)",
        ),
        ("PUT", 500) => Some(
            "if the object's directory does not exist on the server, create it or let the \
             server do so (nginx answers 500 to a PUT below a missing directory: enable \
             create_full_put_path)",
        ),
        (_, 413) => Some(
            "the object is larger than the server takes (nginx: client_max_body_size; \
             bazel-remote: --max_blob_size)",
        ),
        (_, 507) => Some("the server has no space left for the object"),
        _ => None,
    }
}

/// Maps a non-success answer to `method` on `location` to an [`Error`]. A 404 to a read is
/// [`Error::NotFound`]; to a write it is an error of its own (see [`status_hint`]).
fn error_from_status(method: &str, location: &str, status: StatusCode, anonymous: bool) -> Error {
    let attempts = Attempts::default();
    let reason = status.canonical_reason().map(str::to_owned);
    match status.as_u16() {
        404 if matches!(method, "GET" | "HEAD") => {
            Error::NotFound { location: location.to_owned(), attempts }
        }
        401 | 403 => Error::AccessDenied {
            method: method.to_owned(),
            location: location.to_owned(),
            status: status.as_u16(),
            code: reason,
            message: None,
            anonymous,
            backend: crate::transport::Backend::Http,
            attempts,
        },
        code => Error::Http {
            method: method.to_owned(),
            location: location.to_owned(),
            status: code,
            code: reason,
            message: status_hint(method, status).map(str::to_owned),
            attempts,
        },
    }
}

impl Exchange for Inner {
    fn wire(&self) -> &Wire {
        &self.wire
    }

    fn object_path(&self, key: &str) -> String {
        self.config.object_path(key)
    }

    fn location(&self, key: &str) -> String {
        self.config.location(key)
    }

    async fn send_once(&self, call: &Call) -> Result<reqwest::Response, Error> {
        let url = self.config.request_url(call.target.as_deref());
        let method = call.method.as_str();
        let mut builder = self.wire.client.request(call.method.clone(), url);
        if let Some(auth) = &self.config.auth {
            let mut value =
                reqwest::header::HeaderValue::from_str(&auth.header_value()).map_err(|_| {
                    Error::InvalidConfig {
                        name: "STRATA_HTTP_TOKEN/STRATA_HTTP_USER/STRATA_HTTP_PASSWORD".to_owned(),
                        value: String::new(),
                        reason: "the credentials hold characters an HTTP header cannot carry"
                            .into(),
                    }
                })?;
            value.set_sensitive(true);
            builder = builder.header(reqwest::header::AUTHORIZATION, value);
        }
        for (name, value) in &call.headers {
            builder = builder.header(*name, value.as_str());
        }
        if call.close_connection {
            builder = builder.header(reqwest::header::CONNECTION, "close");
        }
        let response = call
            .payload
            .clone()
            .attach(builder)
            .send()
            .await
            .map_err(|e| network_error(method, &call.location, e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        // The body of an error answer (an HTML page, usually) says nothing the status does
        // not; it is read (bounded) only so that the connection can be reused.
        drop(crate::transport::wire::read_error_body(response).await);
        Err(error_from_status(method, &call.location, status, self.config.is_anonymous()))
    }

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
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A store on an HTTP cache server under one base URL. See the module docs.
pub struct HttpStore {
    net: Blocking<Inner>,
}

impl std::fmt::Debug for HttpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HttpStore({})", self.net.exchange.config.describe())
    }
}

impl HttpStore {
    /// Creates the HTTP client and runtime for `config`.
    ///
    /// # Errors
    /// [`Error::Setup`] if the runtime or the TLS client cannot be created.
    pub fn new(config: HttpConfig, options: TransportOptions) -> Result<Self, Error> {
        let (wire, runtime) = Wire::new(options, config.base.scheme(), "HTTP")?;
        Ok(Self { net: Blocking { exchange: Inner { config, wire }, runtime } })
    }
}

impl ObjectStore for HttpStore {
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
        let put = self
            .net
            .upload(async |inner, retries| put::upload_file(inner, key, src, retries).await)?;
        if put.0 == PutOutcome::Created {
            progress.advance(put.1.bytes);
        }
        Ok(put)
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
        Capabilities::NONE
    }

    fn listing(&self) -> Option<&dyn ListObjects> {
        None
    }

    fn deleting(&self) -> Option<&dyn DeleteObjects> {
        None
    }

    fn retried_requests(&self) -> u64 {
        self.net.exchange.wire.retried_requests()
    }

    fn describe(&self) -> String {
        self.net.exchange.config.describe()
    }
}
