//! The S3-compatible backend (AWS S3, Huawei OBS, MinIO, s3s): reqwest over rustls (ring
//! provider) and SigV4 header signing.
//!
//! Each [`S3Store`] owns a tokio runtime with two worker threads and blocks on it, so the
//! [`ObjectStore`] trait stays synchronous. Requests:
//! * HEAD/GET/DELETE on `prefix/key`; downloads are a HEAD for the size, then one GET for
//!   objects up to the part size or parallel ranged GETs written at their offsets
//!   ([`get`]); a range read into memory is one ranged GET ([`range`]);
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
//! Every request has a timeout and bounded retries ([`retry`]); errors are mapped by
//! [`response`].
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
mod get;
mod list;
mod multipart;
mod put;
mod range;
mod response;
mod retry;
mod sign;

use std::sync::Once;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use reqwest::Method;

pub use config::{Credentials, S3Config, incomplete_credential_pairs};
use response::{error_from_response, network_error};
use retry::{RetryPolicy, with_retries};
use sign::{Payload, UnsignedRequest};

use crate::transport::{
    Error, ObjectKey, ObjectMeta, ObjectStore, PutOutcome, TransferStats, TransportOptions,
};

/// Installs rustls's ring crypto provider as the process default, once. Another provider
/// installed first is kept.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means a provider is already installed, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// One S3 request: what to send and how to name it in errors and logs.
#[derive(Clone)]
pub(crate) struct Call {
    /// HTTP method.
    pub method: Method,
    /// Full object name in the bucket (with the store prefix), or `None` for the bucket.
    pub full_key: Option<String>,
    /// Query parameters, unencoded.
    pub query: Vec<(&'static str, String)>,
    /// Extra headers to send and sign (lower-case names).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub payload: Payload,
    /// `s3://bucket/prefix/key` for errors and logs.
    pub location: String,
    /// Send `Connection: close` (not signed: a hop-by-hop header), so that the server
    /// closes the connection once it has answered. See [`ObjectStore::get_range_last`].
    pub close_connection: bool,
}

impl Call {
    /// A request on an object, with no query, headers or body.
    pub(crate) fn object(inner: &Inner, method: Method, key: &str) -> Self {
        Self {
            method,
            full_key: Some(inner.config.full_key(key)),
            query: Vec::new(),
            headers: Vec::new(),
            payload: Payload::Empty,
            location: inner.config.location(key),
            close_connection: false,
        }
    }
}

/// The parts of a store that async code borrows.
pub(crate) struct Inner {
    pub config: S3Config,
    pub client: reqwest::Client,
    pub options: TransportOptions,
    pub policy: RetryPolicy,
    /// Requests retried since the store was opened ([`ObjectStore::retried_requests`]).
    pub retried: AtomicU64,
    /// Optional S3 features this server turned out to lack ([`fallback`]).
    pub lacks: fallback::Lacks,
}

impl Inner {
    /// Sends `call` once. Success statuses return the response (body unread); others are
    /// mapped to errors.
    ///
    /// # Errors
    /// Network errors and mapped HTTP errors (see [`response`]).
    pub(crate) async fn send_once(&self, call: &Call) -> Result<reqwest::Response, Error> {
        let url = self.config.request_url(call.full_key.as_deref(), &call.query);
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
        let mut builder = signed.into_builder(&self.client);
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

    /// Sends `call` with retries, consuming the response with `read` inside each attempt
    /// (so a body that breaks off is retried too). The retries made are added to
    /// `retries` and to the store's total, whatever the outcome.
    ///
    /// # Errors
    /// The last attempt's error, with the retry count.
    pub(crate) async fn send<T, F, Fut>(
        &self,
        call: &Call,
        retries: &AtomicU32,
        read: F,
    ) -> Result<T, Error>
    where
        F: Fn(reqwest::Response) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let made = AtomicU32::new(0);
        let result =
            with_retries(&self.policy, call.method.as_str(), &call.location, &made, || async {
                let response = self.send_once(call).await?;
                read(response).await
            })
            .await;
        let made = made.load(Ordering::Relaxed);
        retries.fetch_add(made, Ordering::Relaxed);
        self.retried.fetch_add(u64::from(made), Ordering::Relaxed);
        result
    }

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

    /// HEAD of `key`: `None` on 404 (after checking that the bucket exists).
    pub(crate) async fn head(
        &self,
        key: &ObjectKey,
        retries: &AtomicU32,
    ) -> Result<Option<ObjectMeta>, Error> {
        let call = Call::object(self, Method::HEAD, key.as_str());
        let location = call.location.clone();
        let result = self
            .send(&call, retries, |response| {
                let location = location.clone();
                async move { get::meta_from_headers(key, &location, "HEAD", response.headers()) }
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

/// A copy of a HEAD's error without a body (an [`Error::Http`] or [`Error::AccessDenied`]
/// with no code), for [`Inner::head`].
fn clone_head_error(e: &Error) -> Error {
    match e {
        Error::AccessDenied { method, location, status, message, anonymous, attempts, .. } => {
            Error::AccessDenied {
                method: method.clone(),
                location: location.clone(),
                status: *status,
                code: None,
                message: message.clone(),
                anonymous: *anonymous,
                attempts: *attempts,
            }
        }
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
    inner: Inner,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Store({})", self.inner.config.describe())
    }
}

impl S3Store {
    /// Creates the HTTP client and runtime for `config`.
    ///
    /// # Errors
    /// [`Error::Setup`] if the runtime or the TLS client cannot be created.
    pub fn new(config: S3Config, options: TransportOptions) -> Result<Self, Error> {
        install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .connect_timeout(options.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .user_agent(crate::PRODUCER);
        if config.endpoint.scheme() == "http" {
            // Plain HTTP and no redirects: no request of this client uses TLS, so the
            // system's root certificates are not loaded (about 150 files, milliseconds per
            // process: the remote entry tier opens a store on a compile's MISS).
            builder = builder.tls_certs_only(Vec::<reqwest::Certificate>::new());
        }
        let client =
            builder.build().map_err(|e| Error::Setup { reason: format!("HTTP client: {e}") })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("strata-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::Setup { reason: format!("tokio runtime: {e}") })?;
        let policy = RetryPolicy::from_options(&options);
        let inner = Inner {
            config,
            client,
            options,
            policy,
            retried: AtomicU64::new(0),
            lacks: fallback::Lacks::default(),
        };
        Ok(Self { inner, runtime })
    }

    /// The resolved configuration (credentials redacted in `Debug`).
    pub fn config(&self) -> &S3Config {
        &self.inner.config
    }
}

fn stats(bytes: u64, started: Instant, retries: &AtomicU32) -> TransferStats {
    TransferStats {
        bytes,
        seconds: started.elapsed().as_secs_f64(),
        retries: retries.load(Ordering::Relaxed),
    }
}

impl ObjectStore for S3Store {
    fn head(&self, key: &ObjectKey) -> Result<Option<ObjectMeta>, Error> {
        let retries = AtomicU32::new(0);
        self.runtime.block_on(self.inner.head(key, &retries))
    }

    fn get_to_file_observed(
        &self,
        key: &ObjectKey,
        dest: &std::path::Path,
        progress: &dyn crate::transport::DownloadProgress,
    ) -> Result<(ObjectMeta, TransferStats), Error> {
        let started = Instant::now();
        let retries = AtomicU32::new(0);
        let meta =
            self.runtime.block_on(get::download(&self.inner, key, dest, &retries, progress))?;
        let bytes = meta.size_bytes;
        Ok((meta, stats(bytes, started, &retries)))
    }

    fn put_file_if_absent_observed(
        &self,
        key: &ObjectKey,
        src: &std::path::Path,
        progress: &dyn crate::progress::Progress,
    ) -> Result<(PutOutcome, TransferStats), Error> {
        let started = Instant::now();
        let retries = AtomicU32::new(0);
        let (outcome, bytes) =
            self.runtime.block_on(put::upload(&self.inner, key, src, &retries, progress))?;
        Ok((outcome, stats(bytes, started, &retries)))
    }

    fn get_range(&self, key: &ObjectKey, start: u64, end: u64) -> Result<Vec<u8>, Error> {
        let retries = AtomicU32::new(0);
        self.runtime.block_on(range::get_range(&self.inner, key, start, end, false, &retries))
    }

    fn get_range_last(&self, key: &ObjectKey, start: u64, end: u64) -> Result<Vec<u8>, Error> {
        let retries = AtomicU32::new(0);
        self.runtime.block_on(range::get_range(&self.inner, key, start, end, true, &retries))
    }

    fn get_small(&self, key: &ObjectKey, max_bytes: u64) -> Result<Option<Vec<u8>>, Error> {
        let retries = AtomicU32::new(0);
        self.runtime.block_on(range::get_small(&self.inner, key, max_bytes, &retries))
    }

    fn put_bytes_if_absent(
        &self,
        key: &ObjectKey,
        bytes: &[u8],
    ) -> Result<(PutOutcome, TransferStats), Error> {
        let started = Instant::now();
        let retries = AtomicU32::new(0);
        let body = bytes::Bytes::copy_from_slice(bytes);
        let (outcome, sent) =
            self.runtime.block_on(put::upload_bytes(&self.inner, key, body, &retries))?;
        Ok((outcome, stats(sent, started, &retries)))
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, Error> {
        let retries = AtomicU32::new(0);
        self.runtime.block_on(list::list_all(&self.inner, prefix, &retries))
    }

    fn delete(&self, key: &ObjectKey) -> Result<(), Error> {
        self.inner.require_credentials("delete", key.as_str())?;
        let retries = AtomicU32::new(0);
        let call = Call::object(&self.inner, Method::DELETE, key.as_str());
        self.runtime.block_on(async {
            match self.inner.send(&call, &retries, |_| async { Ok(()) }).await {
                Err(e) if e.is_not_found() => Ok(()),
                other => other,
            }
        })
    }

    fn retried_requests(&self) -> u64 {
        self.inner.retried.load(Ordering::Relaxed)
    }

    fn describe(&self) -> String {
        self.inner.config.describe()
    }
}
