//! The one file record: what a tree manifest says about one path (docs/format.md "Content
//! records").
//!
//! Entries, artifact manifests and snapshot manifests all describe trees with this type. In
//! JSON a record is an object tagged by `kind`:
//!
//! ```text
//! {"kind":"file","path":"lib/a.so","size_bytes":1234,"digest":"blake3:<64 hex>","executable":false}
//! {"kind":"symlink","path":"lib/a.so.1","target":"a.so"}
//! {"kind":"directory","path":"include"}
//! ```
//!
//! `path` is a relative POSIX path in the name encoding ([`crate::fs::name`]); `target` is
//! link text in the same encoding (never followed); `digest` is an algorithm-tagged content
//! digest ([`ContentDigest`]); `executable` is the owner-exec bit, the only permission bit
//! that is part of identity (files are restored 0644 or 0755, directories 0755).

use serde::{Deserialize, Serialize};

use crate::digest::ContentDigest;
use crate::fs::RelPath;

/// One regular file: the file record every manifest uses (an artifact manifest lists
/// only these, without the `kind` tag).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRecord {
    /// Relative POSIX path (name encoding).
    pub path: RelPath,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Digest of the bytes, tagged with its algorithm.
    pub digest: ContentDigest,
    /// Owner-exec bit.
    pub executable: bool,
}

/// One path of a tree and what must be there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Record {
    /// A regular file.
    File(FileRecord),
    /// A symlink, stored with its exact text and never followed.
    Symlink {
        /// Relative POSIX path (name encoding).
        path: RelPath,
        /// The link text (name encoding).
        target: String,
    },
    /// A directory (listed only by manifests that carry empty directories).
    Directory {
        /// Relative POSIX path (name encoding).
        path: RelPath,
    },
}

/// The kind of a [`Record`], for messages and rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A symlink.
    Symlink,
    /// A directory.
    Directory,
}

impl Kind {
    /// `file`, `symlink` or `directory`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Symlink => "symlink",
            Kind::Directory => "directory",
        }
    }
}

impl Record {
    /// The relative path.
    pub fn path(&self) -> &RelPath {
        match self {
            Record::File(FileRecord { path, .. })
            | Record::Symlink { path, .. }
            | Record::Directory { path } => path,
        }
    }

    /// The kind.
    pub fn kind(&self) -> Kind {
        match self {
            Record::File(_) => Kind::File,
            Record::Symlink { .. } => Kind::Symlink,
            Record::Directory { .. } => Kind::Directory,
        }
    }

    /// Size in bytes of a file; 0 for the other kinds.
    pub fn size_bytes(&self) -> u64 {
        self.as_file().map_or(0, |f| f.size_bytes)
    }

    /// The file record, if this is a file.
    pub fn as_file(&self) -> Option<&FileRecord> {
        match self {
            Record::File(f) => Some(f),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::DigestAlgorithm;

    fn file(path: &str) -> Record {
        Record::File(FileRecord {
            path: RelPath::new(path).unwrap(),
            size_bytes: 3,
            digest: ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"abc"),
            executable: true,
        })
    }

    #[test]
    fn json_shape_is_tagged_by_kind() {
        let json = serde_json::to_string(&file("a/b")).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"file","path":"a/b","size_bytes":3,"digest":"blake3:6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85","executable":true}"#
        );
        let link = Record::Symlink { path: RelPath::new("l").unwrap(), target: "../x".into() };
        assert_eq!(
            serde_json::to_string(&link).unwrap(),
            r#"{"kind":"symlink","path":"l","target":"../x"}"#
        );
        let back: Record = serde_json::from_str(&json).unwrap();
        assert_eq!(back, file("a/b"));
    }

    #[test]
    fn unknown_fields_kinds_and_untagged_digests_are_rejected() {
        for bad in [
            r#"{"kind":"file","path":"a","size_bytes":1,"digest":"blake3:00","executable":false}"#,
            r#"{"kind":"fifo","path":"a"}"#,
            r#"{"kind":"symlink","path":"a","target":"b","extra":1}"#,
            r#"{"kind":"directory","path":"../a"}"#,
            r#"{"path":"a","target":"b"}"#,
        ] {
            assert!(serde_json::from_str::<Record>(bad).is_err(), "{bad}");
        }
        let untagged = format!(
            r#"{{"kind":"file","path":"a","size_bytes":0,"digest":"{}","executable":false}}"#,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(serde_json::from_str::<Record>(&untagged).is_err(), "a new record is tagged");
    }
}
