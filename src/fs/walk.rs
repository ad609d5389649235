//! Tree walks that never follow symlinks, and the tree inventory.
//!
//! [`walk`] yields every descendant of a root (not the root itself) in a deterministic
//! order: depth-first, children sorted by file name byte-wise. Symlinks are yielded as
//! symlinks and never descended into, whatever they point at. [`inventory`] builds on it
//! and rejects special files.

use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{Error, RelPath, Result};

/// What a walked path is (from `lstat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symlink (never followed).
    Symlink,
    /// A FIFO, socket or device; the string names which.
    Special(&'static str),
}

impl EntryKind {
    /// Classifies `lstat` metadata.
    pub fn of(meta: &Metadata) -> Self {
        let ft = meta.file_type();
        if ft.is_symlink() {
            EntryKind::Symlink
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File
        } else if ft.is_fifo() {
            EntryKind::Special("fifo")
        } else if ft.is_socket() {
            EntryKind::Special("socket")
        } else if ft.is_block_device() {
            EntryKind::Special("block device")
        } else if ft.is_char_device() {
            EntryKind::Special("character device")
        } else {
            EntryKind::Special("unknown file type")
        }
    }
}

/// One walked path.
#[derive(Debug, Clone)]
pub struct WalkEntry {
    /// Path relative to the walk root.
    pub rel: RelPath,
    /// Full path (root joined with `rel`).
    pub path: PathBuf,
    /// What it is.
    pub kind: EntryKind,
    /// `lstat` metadata.
    pub metadata: Metadata,
}

/// Walks `root` without following symlinks. `root` itself must be a directory (a symlink
/// to one is followed for the root only).
///
/// # Errors
/// Each item is an [`Error::Io`] for an unreadable directory or entry. Any name is
/// allowed: [`WalkEntry::rel`] records it in the encoding of [`super::name`].
pub fn walk(root: &Path) -> impl Iterator<Item = Result<WalkEntry>> + '_ {
    walkdir::WalkDir::new(root)
        .min_depth(1)
        .follow_links(false)
        .follow_root_links(true)
        .sort_by(|a, b| a.file_name().as_encoded_bytes().cmp(b.file_name().as_encoded_bytes()))
        .into_iter()
        .map(move |item| {
            let entry = item.map_err(|e| {
                let path = e.path().unwrap_or(root).to_path_buf();
                let source = e.into_io_error().unwrap_or_else(|| std::io::Error::other("walk"));
                Error::io("walk", path, source)
            })?;
            let path = entry.path().to_path_buf();
            let metadata = entry.metadata().map_err(|e| {
                let source = e.into_io_error().unwrap_or_else(|| std::io::Error::other("stat"));
                Error::io("stat", path.clone(), source)
            })?;
            let rel_os = path.strip_prefix(root).unwrap_or(&path);
            let rel = RelPath::from_path(rel_os)?;
            Ok(WalkEntry { rel, kind: EntryKind::of(&metadata), path, metadata })
        })
}

/// Counts the regular files and symlinks under `root` (not following symlinks) whose
/// name does not start with `.`, without descending into the directories for which
/// `prune` is true. Unreadable parts are skipped (a count for a report, not a check).
pub fn count_files_pruned(root: &Path, prune: impl Fn(&Path) -> bool) -> u64 {
    walkdir::WalkDir::new(root)
        .min_depth(1)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| !(e.file_type().is_dir() && prune(e.path())))
        .filter_map(std::result::Result::ok)
        .filter(|e| !e.file_type().is_dir())
        .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"."))
        .count() as u64
}

/// What an inventory entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryKind {
    /// A regular file of `size` bytes; `executable` is its owner-exec bit.
    File {
        /// Size in bytes.
        size: u64,
        /// Owner-exec bit.
        executable: bool,
    },
    /// A directory.
    Dir,
    /// A symlink with this link text (never followed).
    Symlink {
        /// The link text exactly as stored.
        target: String,
    },
}

/// One path of a tree inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryEntry {
    /// Path relative to the inventoried root.
    pub rel: RelPath,
    /// What it is.
    pub kind: InventoryKind,
}

/// Lists everything under `root` (sorted as [`walk`]). Special files are rejected.
///
/// # Errors
/// [`Error::SpecialFile`] naming the first FIFO/socket/device; walk errors.
pub fn inventory(root: &Path) -> Result<Vec<InventoryEntry>> {
    let mut out = Vec::new();
    for entry in walk(root) {
        let entry = entry?;
        let kind = match entry.kind {
            EntryKind::File => InventoryKind::File {
                size: entry.metadata.len(),
                executable: super::perm::is_owner_exec(entry.metadata.permissions().mode()),
            },
            EntryKind::Dir => InventoryKind::Dir,
            EntryKind::Symlink => InventoryKind::Symlink { target: super::read_link(&entry.path)? },
            EntryKind::Special(kind) => return Err(Error::SpecialFile { path: entry.path, kind }),
        };
        out.push(InventoryEntry { rel: entry.rel, kind });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_is_sorted_and_does_not_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("b/inner")).unwrap();
        std::fs::write(root.join("b/inner/f"), b"x").unwrap();
        std::fs::write(root.join("a"), b"y").unwrap();
        std::os::unix::fs::symlink("b", root.join("c")).unwrap();
        let rels: Vec<String> = walk(root).map(|e| e.unwrap().rel.as_str().to_owned()).collect();
        assert_eq!(rels, ["a", "b", "b/inner", "b/inner/f", "c"]);
        let inv = inventory(root).unwrap();
        assert_eq!(inv.last().unwrap().kind, InventoryKind::Symlink { target: "b".into() });
    }

    #[test]
    fn inventory_rejects_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let err = inventory(dir.path()).unwrap_err();
        assert!(matches!(err, Error::SpecialFile { kind: "fifo", .. }), "{err}");
    }
}
