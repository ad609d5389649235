//! Object stores: moving whole files under [`ObjectKey`]s.
//!
//! Transport knows nothing about caches, actions or snapshots: it puts a local file (or a
//! small buffer) under a key, gets a key into a local file (or a byte range of it into
//! memory) and answers HEAD — the core every backend has ([`ObjectStore`]) — and, where the
//! backend can, lists and deletes ([`capability`]). Three backends, one file (or folder)
//! each, all opened through the scheme registry ([`StoreUrl::open`], `registry.rs`):
//!
//! * `file:///abs/dir` (or a bare absolute path): a local directory ([`FsStore`]);
//!   objects are files under the root, the key is the relative path.
//! * `s3://bucket/prefix?endpoint=…&region=…&addressing=path|virtual|auto`: any
//!   S3-compatible service (AWS S3, Huawei OBS, MinIO) over HTTPS or HTTP with SigV4
//!   header signing ([`S3Store`]).
//! * `http(s)://host/path?layout=flat|bazel`: an HTTP build-cache server (WebDAV such as
//!   nginx's, ccache's HTTP storage, bazel-remote) with GET/HEAD/PUT of whole objects
//!   ([`HttpStore`]); no listing, no deletion.
//!
//! The S3 and HTTP backends share one HTTP layer (`wire`: client and runtime, retries,
//! ranged and parallel downloads, small reads). See `docs/transport.md` for the URL,
//! credential and tuning reference.
//!
//! # Invariants
//! * **Never overwrite**: [`ObjectStore::put_file_if_absent`] (and
//!   [`ObjectStore::put_bytes_if_absent`]) publishes with `renameat2(RENAME_NOREPLACE)` on a
//!   directory store, and with a HEAD check plus a conditional write (`If-None-Match: *`)
//!   on S3 and HTTP stores. A server that ignores the condition (or checks it apart from
//!   the write) leaves a small race between the check and the write; see
//!   `docs/transport.md`.
//! * **The truth about retried writes**: a conditional write that was retried after a lost
//!   answer and then refused compares the stored object with the bytes it sent and reports
//!   `Created` when they are its own (`wire::own_object_stored`).
//! * **Secrets never leave memory**: credentials live in [`Secret`], whose
//!   `Debug` and `Display` print `***`; no error, log line or [`ObjectStore::describe`]
//!   output contains one, nor a signature or an `Authorization` header.
//! * Downloads write the destination file (or return the bytes of a range,
//!   [`ObjectStore::get_range`]); the caller verifies their content (the store only checks
//!   sizes).
//!
//! # Limitations
//! * The trait is synchronous. The network backends own a small tokio runtime and block
//!   on it, so they must not be called from inside another tokio runtime's async context.
//! * Credentials come from environment variables only (no shared config files, no instance
//!   metadata service).

pub mod capability;
mod error;
mod fs;
mod http;
mod key;
mod options;
mod registry;
mod s3;
mod secret;
mod url;
mod wire;

use std::path::Path;
use std::time::SystemTime;

pub use capability::{
    Capabilities, Capability, DeleteObjects, ListObjects, StoreUse, deleting, listing,
};
pub use error::{Attempts, Backend, Error, NetworkErrorKind, NetworkPhase};
pub use fs::FsStore;
pub use http::{HttpConfig, HttpStore};
pub use key::{MAX_KEY_BYTES, ObjectKey};
pub use options::TransportOptions;
pub use registry::{HalfPairs, IncompleteCredentials, open_store, open_store_with_env};
pub use s3::{Credentials, S3Config, S3Store};
pub use secret::Secret;
pub use url::{Addressing, HttpUrl, Layout, S3Url, StoreUrl, redact_store_url};

/// The longest range [`ObjectStore::get_range`] reads in one call: 256 MiB.
pub const MAX_RANGE_BYTES: u64 = 256 * 1024 * 1024;

/// Checks the bounds of a [`ObjectStore::get_range`] call on `location` before any request.
///
/// # Errors
/// [`Error::InvalidRange`] if `start > end` or the range is longer than [`MAX_RANGE_BYTES`].
pub(crate) fn check_range(location: &str, start: u64, end: u64) -> Result<(), Error> {
    let reason = if start > end {
        "the start lies after the end".to_owned()
    } else if end - start > MAX_RANGE_BYTES {
        format!(
            "longer than the {MAX_RANGE_BYTES} bytes (256 MiB) one ranged read may return; read it in smaller ranges"
        )
    } else {
        return Ok(());
    };
    Err(Error::InvalidRange { location: location.to_owned(), start, end, reason })
}

/// What a store knows about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The object's key (relative to the store's root or prefix).
    pub key: ObjectKey,
    /// Size of the object in bytes.
    pub size_bytes: u64,
    /// When the object was last written (file mtime, or S3 `Last-Modified`, 1 s resolution
    /// on HEAD).
    pub last_modified: SystemTime,
    /// The S3 entity tag as the server sent it (usually a quoted hex string); `None` on a
    /// directory store.
    pub etag: Option<String>,
}

/// The result of [`ObjectStore::put_file_if_absent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The object did not exist and now holds the file's bytes.
    Created,
    /// An object already existed under the key; it was left unchanged and nothing (or, if
    /// the conditional write lost a race, nothing visible) was uploaded.
    AlreadyExists,
}

/// Measurements of one transfer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TransferStats {
    /// Payload bytes moved (0 when nothing was transferred, e.g. [`PutOutcome::AlreadyExists`]).
    pub bytes: u64,
    /// Wall-clock duration of the whole operation, in seconds.
    pub seconds: f64,
    /// Requests that were retried after a retryable failure, summed over all parts.
    pub retries: u32,
}

/// Told, during a download, which bytes of the destination file are already written, so
/// that a reader can consume the file while it is still arriving (a snapshot restore
/// hashes and unpacks the object as it downloads).
///
/// The store calls [`DownloadProgress::written`] from any thread, for ranges in any order
/// (parallel ranged GETs finish out of order). A range is reported once, after its bytes
/// are written to the file with positioned writes (so a `pread` of it, by the same process,
/// sees them); ranges never overlap. A part that is retried is reported only once it has
/// completed. If the download fails, some ranges may never be reported.
pub trait DownloadProgress: Sync {
    /// The object was found and holds `size_bytes` bytes; called once, before any
    /// [`DownloadProgress::written`] (never for a missing object). Does nothing unless
    /// implemented.
    fn started(&self, size_bytes: u64) {
        let _ = size_bytes;
    }

    /// Bytes `start..end` (offsets in the object and in the destination file) are written.
    fn written(&self, start: u64, end: u64);
}

/// A [`DownloadProgress`] that ignores every report.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl DownloadProgress for NoProgress {
    fn written(&self, _start: u64, _end: u64) {}
}

/// A [`DownloadProgress`] that reports one download as a phase of a
/// [`Progress`](crate::progress::Progress): it begins the phase `label` with the object's
/// size when the store found the object, advances it by every written range, and finishes
/// it when dropped (if it began).
pub struct DownloadPhase<'a> {
    progress: &'a dyn crate::progress::Progress,
    label: &'static str,
    begun: std::sync::atomic::AtomicBool,
}

impl<'a> DownloadPhase<'a> {
    /// A phase `label` of `progress`, begun when the download starts.
    pub fn new(progress: &'a dyn crate::progress::Progress, label: &'static str) -> Self {
        Self { progress, label, begun: std::sync::atomic::AtomicBool::new(false) }
    }
}

impl DownloadProgress for DownloadPhase<'_> {
    fn started(&self, size_bytes: u64) {
        if !self.begun.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.progress.begin(self.label, size_bytes);
        }
    }

    fn written(&self, start: u64, end: u64) {
        self.progress.advance(end.saturating_sub(start));
    }
}

impl Drop for DownloadPhase<'_> {
    fn drop(&mut self) {
        if *self.begun.get_mut() {
            self.progress.finish();
        }
    }
}

/// A [`DownloadProgress`] that reports the length of every written range to a
/// [`Progress`](crate::progress::Progress) (whose phase the caller begins and finishes).
pub(crate) struct Advancing<'a>(pub &'a dyn crate::progress::Progress);

impl DownloadProgress for Advancing<'_> {
    fn written(&self, start: u64, end: u64) {
        self.0.advance(end.saturating_sub(start));
    }
}

/// What a caller says about its connection to the store after a ranged read
/// ([`ObjectStore::get_range_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NextRequest {
    /// More requests may follow: keep the connection.
    #[default]
    Likely,
    /// This is the last request the process makes of the store (the remote entry tier's
    /// entry object): an HTTP backend sends `Connection: close`, so the server closes the
    /// connection once it has answered and sends the answer's tail at once. Over a
    /// kept-alive connection a server that leaves Nagle's algorithm on (s3s-fs does) holds
    /// the last segment of a large answer until the client acknowledges the earlier ones,
    /// and Linux delays that acknowledgement by up to 40 ms once a connection carries
    /// requests and answers in turn. Closing costs nothing when no request follows; a
    /// later request on the same store opens a new connection. A directory store ignores it.
    None,
}

/// A place that holds immutable objects under [`ObjectKey`]s: the core every backend has
/// (head, get, ranged get, small get, put-if-absent), and the optional capabilities it
/// declares ([`ObjectStore::capabilities`], [`ObjectStore::listing`],
/// [`ObjectStore::deleting`]).
///
/// Implementations are [`FsStore`], [`S3Store`] and [`HttpStore`]; [`StoreUrl::open`]
/// picks one from a store URL. Every method is blocking.
pub trait ObjectStore: Send + Sync {
    /// Metadata of `key`, or `None` if there is no such object.
    ///
    /// # Errors
    /// Network, permission or I/O failures (never "not found": that is `Ok(None)`).
    fn head(&self, key: &ObjectKey) -> Result<Option<ObjectMeta>, Error>;

    /// Downloads `key` into `dest`, which the store creates or truncates. On error `dest`
    /// may hold partial data; the caller deletes it. The caller verifies the content.
    ///
    /// # Errors
    /// [`Error::NotFound`] (see [`Error::is_not_found`]) if there is no such object;
    /// network, permission and I/O errors.
    fn get_to_file(
        &self,
        key: &ObjectKey,
        dest: &Path,
    ) -> Result<(ObjectMeta, TransferStats), Error> {
        self.get_to_file_observed(key, dest, &NoProgress)
    }

    /// [`ObjectStore::get_to_file`], reporting to `progress` which ranges of `dest` are
    /// written as they complete (see [`DownloadProgress`]).
    ///
    /// # Errors
    /// As [`ObjectStore::get_to_file`].
    fn get_to_file_observed(
        &self,
        key: &ObjectKey,
        dest: &Path,
        progress: &dyn DownloadProgress,
    ) -> Result<(ObjectMeta, TransferStats), Error>;

    /// Uploads the file `src` under `key` unless an object already exists there; never
    /// overwrites (HEAD first, then a conditional write where the store supports one).
    /// `Created` means `key` holds `src`'s bytes because of this call, also when a retry was
    /// refused because an earlier attempt whose answer was lost had stored them (checked by
    /// size and SHA-256).
    ///
    /// # Errors
    /// [`Error::MissingCredentials`] for an S3 store without credentials; network,
    /// permission and I/O errors. An existing object is `Ok(PutOutcome::AlreadyExists)`.
    fn put_file_if_absent(
        &self,
        key: &ObjectKey,
        src: &Path,
    ) -> Result<(PutOutcome, TransferStats), Error> {
        self.put_file_if_absent_observed(key, src, &crate::progress::Silent)
    }

    /// [`ObjectStore::put_file_if_absent`], reporting the bytes sent to `progress` with
    /// [`Progress::advance`](crate::progress::Progress::advance) as they are stored: each
    /// chunk copied on a directory store, each part (or the single `PUT`) once the S3
    /// server accepted it. Only `advance` is called: the caller begins and finishes the
    /// phase. Nothing is reported when the object already exists.
    ///
    /// # Errors
    /// As [`ObjectStore::put_file_if_absent`].
    fn put_file_if_absent_observed(
        &self,
        key: &ObjectKey,
        src: &Path,
        progress: &dyn crate::progress::Progress,
    ) -> Result<(PutOutcome, TransferStats), Error>;

    /// Bytes `start..end` of the object `key` (offsets in bytes, `end` exclusive), exactly
    /// `end - start` of them: a short answer is an error, never a short `Vec`. An empty
    /// range (`start == end`) still checks that the object exists and is at least `end`
    /// bytes long. At most [`MAX_RANGE_BYTES`] are read in one call. A directory store
    /// reads with `pread`; an S3 or HTTP store sends one `GET` with
    /// `Range: bytes=start-(end-1)` (retried like every request) and accepts a `206` whose
    /// `Content-Range` names the range asked for, or a `200` with the whole object (a
    /// server that ignores `Range`), from which it keeps the range. The caller verifies the
    /// content (the store only checks lengths).
    ///
    /// # Errors
    /// [`Error::InvalidRange`] (see [`Error::is_invalid_range`]) if `start > end`, if the
    /// range is longer than [`MAX_RANGE_BYTES`], or if it reaches past the end of the object;
    /// [`Error::NotFound`] if there is no such object; network, permission and I/O errors
    /// ([`Error::Protocol`] when the server's answer does not match the range).
    fn get_range(&self, key: &ObjectKey, start: u64, end: u64) -> Result<Vec<u8>, Error> {
        self.get_range_with(key, start, end, NextRequest::Likely)
    }

    /// [`ObjectStore::get_range`], saying whether more requests follow ([`NextRequest`]).
    ///
    /// # Errors
    /// As [`ObjectStore::get_range`].
    fn get_range_with(
        &self,
        key: &ObjectKey,
        start: u64,
        end: u64,
        next: NextRequest,
    ) -> Result<Vec<u8>, Error>;

    /// The whole object `key` if it holds at most `max_bytes` bytes (at most
    /// [`MAX_RANGE_BYTES`]), or `None` if there is no such object: for small records
    /// (refs). An S3 store sends one `GET` (no `HEAD` first, so a miss or a hit costs one
    /// round trip), refuses a `Content-Length` above `max_bytes` before reading the body and
    /// never reads more than `max_bytes` of it; a directory store reads the file. The
    /// caller verifies the content.
    ///
    /// # Errors
    /// [`Error::InvalidRange`] (see [`Error::is_invalid_range`]) if the object holds more
    /// than `max_bytes` bytes or `max_bytes` exceeds [`MAX_RANGE_BYTES`]; network,
    /// permission and I/O errors.
    fn get_small(&self, key: &ObjectKey, max_bytes: u64) -> Result<Option<Vec<u8>>, Error>;

    /// Stores `bytes` under `key` unless an object already exists there, with the
    /// never-overwrite guarantees of [`ObjectStore::put_file_if_absent`] (same outcomes,
    /// including `Created` after a refused retry of a write whose answer was lost). Meant
    /// for small objects (refs, leases, indexes): a directory store publishes a temp file
    /// with `renameat2(RENAME_NOREPLACE)`; an S3 store sends a HEAD, then one conditional
    /// `PUT` of the whole buffer (no multipart upload, whatever the part size).
    ///
    /// # Errors
    /// As [`ObjectStore::put_file_if_absent`].
    fn put_bytes_if_absent(
        &self,
        key: &ObjectKey,
        bytes: &[u8],
    ) -> Result<(PutOutcome, TransferStats), Error>;

    /// What the backend can do beyond the core ([`Capability`]); the same set as
    /// [`StoreUrl::capabilities`] for the URL it was opened from.
    fn capabilities(&self) -> Capabilities;

    /// Listing, if the backend has it ([`Capability::List`]). Features that need it ask
    /// with [`listing`] (an error naming the store and the use) when they start.
    fn listing(&self) -> Option<&dyn ListObjects>;

    /// Deletion, if the backend has it ([`Capability::Delete`]); see [`deleting`].
    fn deleting(&self) -> Option<&dyn DeleteObjects>;

    /// Requests this store has retried since it was opened, over every operation and
    /// thread (always 0 for a directory store, which has nothing to retry). A caller that
    /// reports the retries of one operation takes the difference before and after it, so
    /// that HEADs, probes, listing pages and downloads all count, whether they succeeded,
    /// missed or failed. Operations run concurrently on one store are counted together.
    fn retried_requests(&self) -> u64;

    /// A one-line human description, e.g.
    /// `s3://bucket/prefix (endpoint http://127.0.0.1:9000, region us-east-1, path-style)`.
    /// Never contains a secret.
    fn describe(&self) -> String;
}
