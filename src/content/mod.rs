//! The content layer: trees of files described by records, verified against them, placed
//! and archived.
//!
//! Action entries, artifact slots, snapshots and L0 archives all store trees. This module
//! holds what they share, so that the rules that keep strata from ever handing back a
//! wrong file exist once:
//!
//! * [`record`]: the one file record ([`Record`]: path, kind, size, digest, owner-exec bit,
//!   link text);
//! * [`tree`]: a tree manifest's rules ([`tree::check_records`]) and the comparison of a
//!   real tree with a manifest before any hashing ([`tree::compare`]);
//! * [`verify`]: hashing the compared files in place ([`verify::check_files`]) and placing
//!   verified copies ([`verify::place_tree`], one read per file);
//! * [`codec`]: the one verified tar + zstd codec (writer and reader) of snapshots and L0
//!   archives;
//! * [`memo`]: verification memos, so a tree whose files' stamps are unchanged since a full
//!   check is not hashed again;
//!
//! It knows nothing of which cache uses it. Content digests are algorithm-tagged
//! ([`crate::digest::ContentDigest`]); new records use [`DEFAULT_ALGORITHM`] unless the
//! user chose SHA-256 (`--digest sha256` or `STRATA_DIGEST=sha256` on the command line).

pub mod codec;
pub mod memo;
pub mod record;
pub mod tree;
pub mod verify;

pub use memo::VerifyMemo;
pub use record::{FileRecord, Kind, Record};
pub use tree::{Directories, Found, Rules};
pub use verify::Checked;

use crate::digest::DigestAlgorithm;
use crate::fs;

/// The content digest algorithm of new entries, manifests and archives: BLAKE3.
pub const DEFAULT_ALGORITHM: DigestAlgorithm = DigestAlgorithm::Blake3;

/// Why a tree did not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Nothing there (a MISS).
    Missing,
    /// Something there, but not what the manifest says (INVALID), with the reason.
    Invalid(String),
    /// The storage could not be read (a storage error, not a verdict), with the reason.
    Storage(String),
}

impl Problem {
    /// The reason, for messages.
    pub fn reason(&self) -> String {
        match self {
            Problem::Missing => "not found".into(),
            Problem::Invalid(r) | Problem::Storage(r) => r.clone(),
        }
    }

    /// Maps a filesystem error met while reading a tree: damage-like causes (vanished file,
    /// symlink where a file was, wrong type, bad name, concurrent change) are
    /// [`Problem::Invalid`]; anything else (permission, I/O) is [`Problem::Storage`].
    pub fn classify(error: &fs::Error) -> Problem {
        use rustix::io::Errno;
        let damage = match error {
            fs::Error::ChangedWhileReading { .. }
            | fs::Error::UnsafePath { .. }
            | fs::Error::SpecialFile { .. }
            | fs::Error::WrongFileType { .. }
            | fs::Error::DigestMismatch { .. } => true,
            _ if error.is_not_found() => true,
            fs::Error::Io { source, .. } => {
                source.kind() == std::io::ErrorKind::InvalidInput
                    || matches!(
                        source.raw_os_error(),
                        Some(code) if code == Errno::LOOP.raw_os_error() || code == Errno::NOTDIR.raw_os_error()
                    )
            }
            _ => false,
        };
        if damage {
            Problem::Invalid(error.to_string())
        } else {
            Problem::Storage(error.to_string())
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason())
    }
}
