//! The remote entry tier as the engine and the launcher see it (docs/remote-tier.md): a
//! source of single L1 entries that a local MISS may try before building, and that a new
//! entry may be offered to.
//!
//! This layer defines only the interface, so that `crate::action` and `crate::launcher`
//! never touch the network: the implementation that knows an object store is
//! `crate::remote::RemoteTier`, built by the command line from
//! `--remote-store` / `STRATA_REMOTE_STORE` and handed down.
//!
//! Contract: nothing an [`EntrySource`] does fails a build. A fetch that cannot complete
//! (no such entry, a timeout, a 5xx, a refused request, corrupt bytes, a ref that is not
//! signed by a trusted key) is [`FetchOutcome::Absent`] or [`FetchOutcome::Failed`], and
//! the caller builds as on any MISS; an installed entry is validated again by the caller's
//! normal lookup before anything is restored from it.

use std::path::Path;

use crate::l1::layout::EntryPath;

/// What [`EntrySource::fetch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchOutcome {
    /// The entry is now under `<cache root>/actions-v1/<entry path>`, verified against the
    /// store's record of it (or a concurrent process installed it first). The caller looks
    /// it up again as on any HIT.
    Installed,
    /// The store holds no entry for this path (no ref): a plain MISS, no warning.
    Absent,
    /// The store could not be asked, or what it gave was refused; the reason names the
    /// store object and what went wrong, for one warning line. A MISS.
    Failed(String),
}

/// What [`EntrySource::offer`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferOutcome {
    /// The entry object and its ref were uploaded.
    Uploaded,
    /// The store already had a ref for this path (first writer wins); nothing was uploaded.
    AlreadyPresent,
    /// This source does not write (a read-only consumer): nothing was attempted.
    ReadOnly,
    /// The upload failed; the reason names the store object and what went wrong. A
    /// warning only: the local entry stands.
    Failed(String),
}

/// Where single L1 entries can be fetched from and offered to (see the module docs).
///
/// Implementations are blocking, bounded in time, and must be cheap to construct: the
/// launcher builds one per compilation when a remote store is configured, so a store
/// connection is only opened by the first [`fetch`](EntrySource::fetch) or
/// [`offer`](EntrySource::offer).
pub trait EntrySource: std::fmt::Debug + Send + Sync {
    /// Fetches the entry at `entry_path` (relative to `actions-v1/`, `/`-separated, e.g.
    /// `third_party/zlib/<key>` or `compile/ab/<key>`) into `cache_root`, verified, without
    /// replacing anything already there. Called with the entry's lock held, when the
    /// entry directory is absent.
    fn fetch(&self, cache_root: &Path, entry_path: &EntryPath) -> FetchOutcome;

    /// Offers the entry just saved at `entry_path` in `cache_root` to the store (packed and
    /// uploaded when this source writes and the store has no entry for that path yet).
    fn offer(&self, cache_root: &Path, entry_path: &EntryPath) -> OfferOutcome;
}

/// Counter names ([`crate::l1::counters`]) of the remote tier, per domain.
pub mod counter {
    /// A local MISS that the remote tier turned into a HIT.
    pub const HIT: &str = "remote_hit";
    /// A local MISS the store had no entry for.
    pub const MISS: &str = "remote_miss";
    /// A local MISS whose remote fetch failed (timeout, 5xx, corrupt, untrusted): a MISS
    /// with a warning.
    pub const ERROR: &str = "remote_error";
    /// An entry uploaded by a producer.
    pub const UPLOADED: &str = "remote_uploaded";
    /// An offer that failed (a warning).
    pub const UPLOAD_ERROR: &str = "remote_upload_error";
}

/// The remote-tier counters of one domain, for `strata stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteCounts {
    /// Local MISSes the store turned into HITs.
    pub hits: u64,
    /// Local MISSes the store had no entry for.
    pub misses: u64,
    /// Local MISSes whose fetch failed (each with a warning).
    pub errors: u64,
    /// New entries uploaded.
    pub uploaded: u64,
    /// Uploads that failed (each with a warning).
    pub upload_errors: u64,
}

impl RemoteCounts {
    /// The remote counters among a domain's `counters` (none: all zero).
    pub fn of(counters: Option<&crate::l1::counters::Counters>) -> Self {
        let count = |name: &str| counters.and_then(|c| c.get(name)).copied().unwrap_or(0);
        Self {
            hits: count(counter::HIT),
            misses: count(counter::MISS),
            errors: count(counter::ERROR),
            uploaded: count(counter::UPLOADED),
            upload_errors: count(counter::UPLOAD_ERROR),
        }
    }

    /// True if the tier never ran for the domain.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `remote: 3 hits, 1 misses, 0 errors, 2 uploaded, 0 upload errors`.
    pub fn describe(&self) -> String {
        format!(
            "remote: {} hits, {} misses, {} errors, {} uploaded, {} upload errors",
            self.hits, self.misses, self.errors, self.uploaded, self.upload_errors
        )
    }
}
