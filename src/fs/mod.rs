//! Filesystem primitives: the only module that touches the filesystem.
//!
//! Every error carries the path it concerns (see [`Error`]); `clippy.toml` bans direct
//! `std::fs` calls elsewhere. The pieces:
//!
//! * [`ops`]: thin wrappers over `std::fs` that attach the path and operation to errors;
//! * [`RelPath`] and path helpers: validated relative POSIX paths that cannot escape their
//!   root, non-strict resolution, `~` expansion;
//! * [`name`]: the name encoding that records any file name or symlink text (bytes) as
//!   UTF-8 text, injectively and losslessly;
//! * [`walk`](mod@walk) / [`inventory`]: sorted tree walks that never follow symlinks; the inventory
//!   rejects special files (FIFOs, sockets, devices);
//! * [`copy`]: copy-while-hashing, atomic placement of files and symlinks (temp + rename),
//!   directory creation that refuses to pass through symlinks;
//! * [`publish`]: `renameat2(RENAME_NOREPLACE)`, fsync of files, directories and parents,
//!   and the [`StagingDir`] guard;
//! * [`lock`]: `flock` locks with polling and a timeout;
//! * [`temp`]: the one spelling (and parser) of strata's temp and crash-leftover names,
//!   and the self-deleting staging directories made with them;
//! * [`perm`]: the two permission policies (private and shared).
//!
//! # Invariants
//! * Walks never follow symlinks; a symlink is reported as a symlink with its link text.
//! * Nothing in this module writes through a symlinked directory component under a root it
//!   was given ([`copy::create_dir_all_within`]).
//! * Publication never replaces an existing path ([`publish::rename_noreplace`]).
//!
//! # Limitations
//! * `flock` is node-local: two machines sharing a network filesystem do not exclude each
//!   other. Caches must live on node-local disks (one cache directory per machine;
//!   snapshots move caches between machines).
//! * Names are bytes: a name that is not valid UTF-8 is recorded with `\xHH` escapes
//!   ([`name`]), never rejected or skipped. Only NUL and `/` cannot appear in a name.

#![allow(clippy::disallowed_methods)]

pub mod copy;
pub mod lock;
pub mod name;
pub mod nofollow;
pub mod ops;
pub mod path;
pub mod perm;
pub mod publish;
pub mod temp;
pub mod walk;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::digest::ContentDigest;

pub use copy::{
    Placed, Placement, copy_verified, create_dir_all_within, create_dir_in_checked_parent,
    hash_file, place_file_atomic, place_file_checked, place_symlink_atomic,
};
pub use lock::{
    LockGuard, LockProgress, LockWait, lock_directory, lock_exclusive, lock_exclusive_nofollow,
    lock_shared, try_lock_existing, write_atomic_locked,
};
pub use nofollow::{
    FileStamp, copy_new_file, hash_file_stable, open_nofollow, read_capped_nofollow,
};
pub use ops::*;
pub use path::{RelPath, absolute, expand_tilde, resolve_nonstrict};
pub use perm::Sharing;
pub use publish::{
    StagingDir, exchange, fsync_dir, fsync_tree, publish_dir, rename_noreplace,
    rename_noreplace_strict, sync_filesystem,
};
pub use walk::{
    EntryKind, InventoryEntry, InventoryKind, WalkEntry, count_files_pruned, inventory, walk,
};

/// Result alias for this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A filesystem failure, always naming the path involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O call failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was attempted ("read", "create directory", …).
        op: &'static str,
        /// The path it was attempted on.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A rename failed.
    #[error("cannot rename {} to {}", from.display(), to.display())]
    Rename {
        /// Source path.
        from: PathBuf,
        /// Destination path.
        to: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Publication found its destination occupied.
    #[error("{} already exists; strata never replaces published data", path.display())]
    AlreadyExists {
        /// The occupied destination.
        path: PathBuf,
    },
    /// A FIFO, socket or device node where only files, directories and symlinks are allowed.
    #[error("{} is a {kind}; strata only handles regular files, directories and symlinks (remove it or exclude it)", path.display())]
    SpecialFile {
        /// The offending path.
        path: PathBuf,
        /// "fifo", "socket", "block device", "character device" or "unknown file type".
        kind: &'static str,
    },
    /// Resolving symlinks came back to a directory already being visited.
    #[error("symlink cycle: {} leads back to {}", path.display(), target.display())]
    SymlinkCycle {
        /// The symlink that closes the cycle.
        path: PathBuf,
        /// The directory it leads back to.
        target: PathBuf,
    },
    /// A path that must be a safe relative POSIX path is not.
    #[error("{path:?} is not a safe relative path: {reason}")]
    UnsafePath {
        /// The offending text.
        path: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A directory component on the way to a destination is a symlink.
    #[error("{} is a symlink on the way to {}; strata never writes through symlinks", link.display(), path.display())]
    SymlinkInPath {
        /// The destination being written.
        path: PathBuf,
        /// The symlinked component.
        link: PathBuf,
    },
    /// A component on the way to a destination exists but is not a directory.
    #[error("{} is not a directory (needed on the way to {})", component.display(), path.display())]
    NotADirectory {
        /// The destination being written.
        path: PathBuf,
        /// The offending component.
        component: PathBuf,
    },
    /// Bytes read did not have the expected digest (both tagged with their algorithm).
    #[error("{} has digest {actual}, expected {expected}", path.display())]
    DigestMismatch {
        /// The file read.
        path: PathBuf,
        /// The digest it should have had.
        expected: ContentDigest,
        /// The digest it had.
        actual: ContentDigest,
    },
    /// A file changed or was replaced while it was being read.
    #[error("{} changed or was replaced while it was being read", path.display())]
    ChangedWhileReading {
        /// The file.
        path: PathBuf,
    },
    /// The filesystem cannot rename without replacing (`renameat2(RENAME_NOREPLACE)` gave
    /// `EINVAL` or `ENOSYS`).
    #[error("the filesystem holding {} does not support renameat2(RENAME_NOREPLACE); put the store on a local Linux filesystem (ext4, xfs, btrfs, tmpfs)", path.display())]
    NoReplaceUnsupported {
        /// The destination of the rename.
        path: PathBuf,
    },
    /// A path exists but is not what it must be (a lock file that is not a regular file).
    #[error("{} is not a {expected}", path.display())]
    WrongFileType {
        /// The path.
        path: PathBuf,
        /// What it must be ("regular file", "directory").
        expected: &'static str,
    },
    /// A lock could not be acquired in time.
    #[error("timed out after {:.3}s waiting for lock {} (another strata process holds it)", waited.as_secs_f64(), path.display())]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        waited: Duration,
    },
}

impl Error {
    /// Wraps an `io::Error` with the operation and path.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io { op, path: path.into(), source }
    }

    /// True if the underlying cause is "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { source, .. } | Error::Rename { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// True for [`Error::LockTimeout`].
    pub fn is_lock_timeout(&self) -> bool {
        matches!(self, Error::LockTimeout { .. })
    }

    /// True if the data read was not what it should have been (digest mismatch).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::DigestMismatch { .. })
    }

    /// True if the underlying cause is a permission error (`EACCES`, `EPERM`, `EROFS`).
    pub fn is_permission_denied(&self) -> bool {
        match self {
            Error::Io { source, .. } | Error::Rename { source, .. } => {
                source.kind() == io::ErrorKind::PermissionDenied
                    || source.kind() == io::ErrorKind::ReadOnlyFilesystem
            }
            _ => false,
        }
    }

    /// The OS error number of the underlying I/O error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } | Error::Rename { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}
