//! [`Error`]: what can go wrong computing keys, packing, unpacking, restoring and saving.
//!
//! Callers classify with predicates ([`Error::is_usage`], [`Error::is_corrupt`],
//! [`Error::is_transport`]), never by message text. No variant holds a
//! credential: transport errors are already secret-free.

use std::io;
use std::path::PathBuf;

use crate::{fs, record, transport};

/// A snapshot failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A flag or input is malformed (a usage error: exit code 2).
    #[error("invalid {what}: {reason}")]
    InvalidInput {
        /// The flag or value, e.g. `--prefix`.
        what: &'static str,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// The object store failed (network, permission, missing bucket).
    #[error("cannot {operation} {object}")]
    Transport {
        /// What was attempted ("list", "download", "upload", …).
        operation: &'static str,
        /// The object key or prefix.
        object: String,
        /// The transport's error (names the location, never a secret); boxed to keep
        /// results small.
        #[source]
        source: Box<transport::Error>,
    },
    /// A local file or directory could not be read or written.
    #[error(transparent)]
    Local(#[from] fs::Error),
    /// Packing the cache failed while reading or compressing.
    #[error("cannot pack {}", path.display())]
    Pack {
        /// The file or directory being packed, or the output file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A snapshot failed verification: its bytes, an entry, or its manifest are not what
    /// they must be. Nothing was written outside the staging directory.
    #[error("snapshot {object} rejected: {reason}")]
    Corrupt {
        /// The snapshot key or file.
        object: String,
        /// What was wrong.
        reason: String,
    },
    /// A snapshot whose producer is not trusted: with trusted keys configured, its sidecar
    /// is unsigned, signed by another key, or its signature does not verify. Passed over
    /// like [`Error::Corrupt`] (and [`Error::is_corrupt`] is true), but counted apart: an
    /// untrusted snapshot costs one read of its sidecar and never uses up the budget of
    /// corrupt candidates ([`Error::is_untrusted`]).
    #[error("snapshot {object} rejected: {reason}")]
    Untrusted {
        /// The snapshot key.
        object: String,
        /// Why its producer is not trusted.
        reason: String,
    },
    /// `<cache dir>/actions-v1` is a symlink (or another non-directory): strata packs and
    /// restores only a real directory, so that no cache write can leave the cache
    /// directory.
    #[error(
        "{} is not a real directory (a symlink?); strata does not follow it. To keep the \
         cache on another disk, point --cache-dir (STRATA_CACHE_ROOT) at a directory there \
         instead of symlinking actions-v1",
        path.display()
    )]
    SymlinkedLayout {
        /// The `actions-v1` path.
        path: PathBuf,
    },
    /// The cache directory is not one a restore may replace (it is or contains the
    /// current directory or `$HOME`, holds names strata does not own, is a dangling
    /// symlink or not a directory). Nothing was touched.
    #[error(
        "refusing to restore into {}: {reason}. A restore replaces the cache directory as a \
         whole; point --cache-dir (STRATA_CACHE_ROOT) at a directory of its own, e.g. \
         <workspace>/.strata-l1",
        path.display()
    )]
    UnsafeCacheDir {
        /// The cache directory (absolute).
        path: PathBuf,
        /// Why it was refused.
        reason: String,
    },
    /// A save failed at a point where its snapshot object may be left in the store. The
    /// object is invisible to restores (no sidecar commits it) and is named in a pending
    /// record under the cache directory, so the next save from that directory deletes it —
    /// or, if the sidecar did arrive, finds the snapshot committed.
    #[error(
        "cannot save {key}: {what}; its object {object} may remain in the store, invisible \
         to restores, and the next save from this cache directory deletes it (recorded in {})",
        pending.display()
    )]
    Uncommitted {
        /// The snapshot key.
        key: String,
        /// What went wrong, in a few words.
        what: String,
        /// The object that may remain.
        object: String,
        /// The pending record that names it.
        pending: PathBuf,
        /// The store failure.
        #[source]
        source: Box<Error>,
    },
    /// A lease (`crate::snapshot::index::lease`) went unrenewed for its whole time to live,
    /// so others may have taken it for a crashed holder's: the work it protected stops.
    #[error(
        "the lease {lease} went unrenewed for {ttl_seconds} s (its time to live), so a \
         concurrent save or gc may have ignored it; stopping here. Run the command again"
    )]
    LeaseExpired {
        /// The lease's object name.
        lease: String,
        /// Its time to live, in seconds.
        ttl_seconds: u64,
    },
    /// A record (manifest, sidecar, origin) could not be encoded or did not verify.
    #[error("snapshot {what} is not a valid record")]
    Record {
        /// Which record.
        what: String,
        /// The record error.
        #[source]
        source: record::Error,
    },
}

impl Error {
    /// A [`Error::Corrupt`] for `object`.
    pub(crate) fn corrupt(object: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Corrupt { object: object.into(), reason: reason.into() }
    }

    /// A [`Error::Transport`].
    pub(crate) fn transport(
        operation: &'static str,
        object: impl Into<String>,
        source: transport::Error,
    ) -> Self {
        Error::Transport { operation, object: object.into(), source: Box::new(source) }
    }

    /// True for malformed flags or inputs, and for a store that lacks what the command
    /// needs (exit code 2).
    pub fn is_usage(&self) -> bool {
        match self {
            Error::InvalidInput { .. } => true,
            Error::Transport { source, .. } => source.is_unsupported(),
            _ => false,
        }
    }

    /// True if a snapshot or record failed verification (bad bytes, unsafe entries, a
    /// manifest mismatch).
    pub fn is_corrupt(&self) -> bool {
        match self {
            Error::Corrupt { .. } | Error::Untrusted { .. } => true,
            Error::Record { source, .. } => source.is_corrupt(),
            _ => false,
        }
    }

    /// True if the cache directory was refused before anything was touched
    /// ([`Error::UnsafeCacheDir`]).
    pub fn is_refused(&self) -> bool {
        matches!(self, Error::UnsafeCacheDir { .. })
    }

    /// True if the object store failed.
    pub fn is_transport(&self) -> bool {
        match self {
            Error::Transport { .. } => true,
            Error::Uncommitted { source, .. } => source.is_transport(),
            _ => false,
        }
    }

    /// Retries the transport made before failing (0 for other errors).
    pub fn retries(&self) -> u32 {
        match self {
            Error::Transport { source, .. } => source.retries(),
            Error::Uncommitted { source, .. } => source.retries(),
            _ => 0,
        }
    }

    /// True if a snapshot was passed over because its producer is not trusted
    /// ([`Error::Untrusted`]).
    pub fn is_untrusted(&self) -> bool {
        matches!(self, Error::Untrusted { .. })
    }

    /// The message and all its causes on one line (`a: b: c`), for warnings and
    /// annotations that must stay on one line.
    pub fn one_line(&self) -> String {
        crate::message::one_line(self)
    }
}
