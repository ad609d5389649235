//! The HTTP layer the network backends share (`s3://` and `http(s)://`): the client and
//! its runtime, requests with bounded retries ([`retry`]), downloads in parallel ranged
//! parts ([`download`]), ranged and small reads into memory ([`range`]), request bodies
//! ([`payload`]) and network errors ([`errors`]).
//!
//! A backend implements [`Exchange`]: how an object key becomes a request path, how one
//! request is sent (signed, authenticated) and its error answers mapped, and how a HEAD is
//! read. Everything else — what a `206` or a `200` to a ranged GET means, retrying a body
//! that broke off, streaming into a file at offsets — is written once, here.

pub(crate) mod download;
pub(crate) mod errors;
pub(crate) mod payload;
pub(crate) mod range;
pub(crate) mod retry;

use std::future::Future;
use std::sync::Once;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::Method;

pub(crate) use download::{meta_from_headers, protocol_error};
pub(crate) use errors::{body_error, network_error, read_error_body};
pub(crate) use payload::{FileRange, Payload};
use retry::{RetryPolicy, with_retries};

use crate::digest::Sha256Digest;
use crate::transport::{Error, ObjectKey, ObjectMeta, TransferStats, TransportOptions};

/// Characters left as they are in a URI path segment or query value (RFC 3986 unreserved),
/// as SigV4 requires; everything else is percent-encoded.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// Percent-encodes one query name or value, or one path segment, the way SigV4 expects
/// (and every HTTP server decodes).
pub(crate) fn encode_component(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

/// Percent-encodes an object key for a URL path, keeping `/` between segments.
pub(crate) fn encode_key(key: &str) -> String {
    key.split('/').map(encode_component).collect::<Vec<_>>().join("/")
}

/// Installs rustls's ring crypto provider as the process default, once. Another provider
/// installed first is kept.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means a provider is already installed, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// One request: what to send and how to name it in errors and logs.
#[derive(Clone)]
pub(crate) struct Call {
    /// HTTP method.
    pub method: Method,
    /// The object's path in the backend's namespace ([`Exchange::object_path`]), or
    /// `None` for the bucket (S3) or base URL itself.
    pub target: Option<String>,
    /// Query parameters, unencoded.
    pub query: Vec<(&'static str, String)>,
    /// Extra headers to send (lower-case names; an S3 store signs them).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub payload: Payload,
    /// `s3://bucket/prefix/key` or `http://host/path/key` for errors and logs.
    pub location: String,
    /// Send `Connection: close` (a hop-by-hop header, never signed), so that the server
    /// closes the connection once it has answered ([`crate::transport::NextRequest::None`]).
    pub close_connection: bool,
}

impl Call {
    /// A request on the object `key`, with no query, headers or body.
    pub(crate) fn object(exchange: &impl Exchange, method: Method, key: &str) -> Self {
        Self {
            method,
            target: Some(exchange.object_path(key)),
            query: Vec::new(),
            headers: Vec::new(),
            payload: Payload::Empty,
            location: exchange.location(key),
            close_connection: false,
        }
    }
}

/// What every network backend holds: the client, the tuning, the retry policy and the
/// running count of retried requests.
pub(crate) struct Wire {
    /// The HTTP client (rustls with the ring provider, no redirects).
    pub client: reqwest::Client,
    /// Timeouts, retries, part size and parallelism.
    pub options: TransportOptions,
    /// Retries of one request.
    pub policy: RetryPolicy,
    /// Requests retried since the store was opened
    /// ([`crate::transport::ObjectStore::retried_requests`]).
    pub retried: AtomicU64,
}

impl Wire {
    /// A client for a store reached over `scheme` (`http`: no TLS roots are loaded), with
    /// the runtime it blocks on; its retry logs call requests `label` requests (`S3`,
    /// `HTTP`).
    ///
    /// # Errors
    /// [`Error::Setup`] if the runtime or the TLS client cannot be created.
    pub(crate) fn new(
        options: TransportOptions,
        scheme: &str,
        label: &'static str,
    ) -> Result<(Self, tokio::runtime::Runtime), Error> {
        install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .connect_timeout(options.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .user_agent(crate::PRODUCER);
        if scheme == "http" {
            // Plain HTTP and no redirects: no request of this client uses TLS, so the
            // system's root certificates are not loaded (about 150 files, milliseconds per
            // process: the remote entry tier opens a store on a compile's MISS).
            builder = builder.tls_certs_only(Vec::<reqwest::Certificate>::new());
        }
        let client =
            builder.build().map_err(|e| Error::Setup { reason: format!("HTTP client: {e}") })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("strata-transport")
            .enable_all()
            .build()
            .map_err(|e| Error::Setup { reason: format!("tokio runtime: {e}") })?;
        let policy = RetryPolicy::from_options(&options, label);
        Ok((Self { client, options, policy, retried: AtomicU64::new(0) }, runtime))
    }

    /// Requests retried since the store was opened.
    pub(crate) fn retried_requests(&self) -> u64 {
        self.retried.load(Ordering::Relaxed)
    }
}

/// The transfer statistics of an operation that started at `started`.
pub(crate) fn stats(bytes: u64, started: Instant, retries: &AtomicU32) -> TransferStats {
    TransferStats {
        bytes,
        seconds: started.elapsed().as_secs_f64(),
        retries: retries.load(Ordering::Relaxed),
    }
}

/// A network backend as the shared layer sees it.
pub(crate) trait Exchange {
    /// The client, options and counters.
    fn wire(&self) -> &Wire;

    /// The path of the object `key` in the backend's namespace (S3: prefix + key; HTTP:
    /// the path under the base URL its layout gives).
    fn object_path(&self, key: &str) -> String;

    /// `key` as messages name it (`s3://bucket/prefix/key`, `http://host/path/key`).
    fn location(&self, key: &str) -> String;

    /// Sends `call` once. Success statuses return the response (body unread); others are
    /// mapped to errors.
    ///
    /// # Errors
    /// Network errors and mapped HTTP errors.
    async fn send_once(&self, call: &Call) -> Result<reqwest::Response, Error>;

    /// HEAD of `key`: `None` when there is no such object.
    ///
    /// # Errors
    /// Network and HTTP errors.
    async fn head(&self, key: &ObjectKey, retries: &AtomicU32)
    -> Result<Option<ObjectMeta>, Error>;

    /// Sends `call` with retries, consuming the response with `read` inside each attempt
    /// (so a body that breaks off is retried too). The retries made are added to
    /// `retries` and to the store's total, whatever the outcome.
    ///
    /// # Errors
    /// The last attempt's error, with the retry count.
    async fn send<T, F, Fut>(&self, call: &Call, retries: &AtomicU32, read: F) -> Result<T, Error>
    where
        F: Fn(reqwest::Response) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let wire = self.wire();
        let made = AtomicU32::new(0);
        let result =
            with_retries(&wire.policy, call.method.as_str(), &call.location, &made, || async {
                let response = self.send_once(call).await?;
                read(response).await
            })
            .await;
        let made = made.load(Ordering::Relaxed);
        retries.fetch_add(made, Ordering::Relaxed);
        wire.retried.fetch_add(u64::from(made), Ordering::Relaxed);
        result
    }
}

/// True if `key` now holds exactly `size` bytes whose SHA-256 is `sent`: the object an
/// earlier attempt of a retried write stored (the request reached the store, its answer
/// did not, and the retry was refused because the object exists). `Ok(false)` when there
/// is no object or it differs.
///
/// # Errors
/// Network and HTTP errors of the HEAD and GET (then the write's outcome stays unknown).
pub(crate) async fn own_object_stored(
    exchange: &impl Exchange,
    key: &ObjectKey,
    size: u64,
    sent: &Sha256Digest,
    retries: &AtomicU32,
) -> Result<bool, Error> {
    let head = exchange.head(key, retries).await?;
    if head.is_none_or(|meta| meta.size_bytes != size) {
        return Ok(false);
    }
    let stored = download::stored_digest(exchange, key, retries).await?;
    let own = stored.is_some_and(|(stored_size, digest)| stored_size == size && &digest == sent);
    let location = exchange.location(key.as_str());
    if own {
        tracing::info!(
            object = %location,
            "the write was retried after a lost answer and refused; the stored object has the \
             uploaded bytes, so the earlier attempt created it"
        );
    } else {
        tracing::info!(
            object = %location,
            "the write was retried after a lost answer and refused; the stored object is not \
             the uploaded one (another writer's)"
        );
    }
    Ok(own)
}

/// A backend's [`Exchange`] and the runtime its blocking calls run on: the core reads every
/// network store answers the same way (the backends' `ObjectStore` impls call these).
pub(crate) struct Blocking<E> {
    /// The backend.
    pub exchange: E,
    /// Its runtime (two worker threads).
    pub runtime: tokio::runtime::Runtime,
}

impl<E: Exchange> Blocking<E> {
    /// HEAD of `key`.
    pub(crate) fn head(&self, key: &ObjectKey) -> Result<Option<ObjectMeta>, Error> {
        let retries = AtomicU32::new(0);
        self.runtime.block_on(self.exchange.head(key, &retries))
    }

    /// Downloads `key` into `dest` ([`download::download`]).
    pub(crate) fn download(
        &self,
        key: &ObjectKey,
        dest: &std::path::Path,
        progress: &dyn crate::transport::DownloadProgress,
    ) -> Result<(ObjectMeta, TransferStats), Error> {
        let started = Instant::now();
        let retries = AtomicU32::new(0);
        let meta = self.runtime.block_on(download::download(
            &self.exchange,
            key,
            dest,
            &retries,
            progress,
        ))?;
        let bytes = meta.size_bytes;
        Ok((meta, stats(bytes, started, &retries)))
    }

    /// Bytes `start..end` of `key` ([`range::get_range`]).
    pub(crate) fn get_range(
        &self,
        key: &ObjectKey,
        start: u64,
        end: u64,
        next: crate::transport::NextRequest,
    ) -> Result<Vec<u8>, Error> {
        let retries = AtomicU32::new(0);
        let close = next == crate::transport::NextRequest::None;
        self.runtime.block_on(range::get_range(&self.exchange, key, start, end, close, &retries))
    }

    /// The whole small object `key` ([`range::get_small`]).
    pub(crate) fn get_small(&self, key: &ObjectKey, max: u64) -> Result<Option<Vec<u8>>, Error> {
        let retries = AtomicU32::new(0);
        self.runtime.block_on(range::get_small(&self.exchange, key, max, &retries))
    }

    /// Runs an upload `put` (given the retry counter) and times it.
    pub(crate) fn upload(
        &self,
        put: impl AsyncFnOnce(&E, &AtomicU32) -> Result<(crate::transport::PutOutcome, u64), Error>,
    ) -> Result<(crate::transport::PutOutcome, TransferStats), Error> {
        let started = Instant::now();
        let retries = AtomicU32::new(0);
        let (outcome, bytes) = self.runtime.block_on(put(&self.exchange, &retries))?;
        Ok((outcome, stats(bytes, started, &retries)))
    }
}
