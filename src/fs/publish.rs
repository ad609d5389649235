//! No-replace publication of staged directories, and fsync helpers.
//!
//! Write order for a published directory (readers never see partial state, and nothing
//! published is modified in place):
//! 1. build the tree in a [`StagingDir`] beside the destination (same filesystem);
//! 2. [`fsync_tree`]: every file, then every directory bottom-up;
//! 3. [`rename_noreplace`] the staging directory onto the destination;
//! 4. fsync the destination's parent so the rename itself is durable.
//!
//! A crash before step 3 leaves only a staging directory (named `.<name>.tmp-<random>`),
//! which readers never look at and prune removes; a crash after it leaves a complete tree.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, RenameFlags, renameat_with};

use super::{Error, Result};

/// Renames `from` to `to` only if `to` does not exist (`renameat2(RENAME_NOREPLACE)`).
///
/// On filesystems without `RENAME_NOREPLACE` (`EINVAL`), falls back to checking for `to`
/// and then renaming; that fallback is racy against a concurrent creator, which the caller's
/// lock must exclude.
///
/// # Errors
/// [`Error::AlreadyExists`] if `to` exists (even an empty directory); [`Error::Rename`].
pub fn rename_noreplace(from: &Path, to: &Path) -> Result<()> {
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::EXIST) => Err(Error::AlreadyExists { path: to.into() }),
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => {
            if fs::symlink_metadata(to).is_ok() {
                return Err(Error::AlreadyExists { path: to.into() });
            }
            fs::rename(from, to).map_err(|e| Error::Rename {
                from: from.into(),
                to: to.into(),
                source: e,
            })
        }
        Err(errno) => Err(Error::Rename {
            from: from.into(),
            to: to.into(),
            source: io::Error::from_raw_os_error(errno.raw_os_error()),
        }),
    }
}

/// Renames `from` to `to` only if `to` does not exist, with no fallback: a filesystem
/// without `renameat2(RENAME_NOREPLACE)` is an error, never a check-then-rename (which could
/// replace an empty directory created in between).
///
/// # Errors
/// [`Error::AlreadyExists`] if `to` exists (even an empty directory);
/// [`Error::NoReplaceUnsupported`] for `EINVAL`/`ENOSYS`; [`Error::Rename`].
pub fn rename_noreplace_strict(from: &Path, to: &Path) -> Result<()> {
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::EXIST) => Err(Error::AlreadyExists { path: to.into() }),
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => {
            Err(Error::NoReplaceUnsupported { path: to.into() })
        }
        Err(errno) => Err(Error::Rename {
            from: from.into(),
            to: to.into(),
            source: io::Error::from_raw_os_error(errno.raw_os_error()),
        }),
    }
}

/// Atomically swaps two existing paths (`renameat2(RENAME_EXCHANGE)`): afterwards `a` names
/// what `b` named and the other way round. Readers of either path see the old or the new
/// object, never a missing one. Both must be on one filesystem.
///
/// On filesystems or kernels without `RENAME_EXCHANGE` (`EINVAL`, `ENOSYS`) this returns
/// `Ok(false)` and changes nothing; the caller falls back to two renames.
///
/// # Errors
/// [`Error::Rename`] naming both paths.
pub fn exchange(a: &Path, b: &Path) -> Result<bool> {
    match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => Ok(false),
        Err(errno) => Err(Error::Rename {
            from: a.into(),
            to: b.into(),
            source: io::Error::from_raw_os_error(errno.raw_os_error()),
        }),
    }
}

/// fsyncs a directory (makes its entries durable).
///
/// # Errors
/// [`Error::Io`] with op "fsync".
pub fn fsync_dir(path: &Path) -> Result<()> {
    let dir = File::open(path).map_err(|e| Error::io("open", path, e))?;
    dir.sync_all().map_err(|e| Error::io("fsync", path, e))
}

/// Makes everything written to the filesystem that holds `path` durable in one call
/// (`syncfs(2)`): one journal commit instead of one fsync per file. Used before a
/// restored tree is swapped into place; other writers' data on that filesystem is flushed
/// too.
///
/// # Errors
/// [`Error::Io`] with op "open" or "syncfs" naming `path`.
pub fn sync_filesystem(path: &Path) -> Result<()> {
    let dir = File::open(path).map_err(|e| Error::io("open", path, e))?;
    rustix::fs::syncfs(&dir)
        .map_err(|e| Error::io("syncfs", path, io::Error::from_raw_os_error(e.raw_os_error())))
}

/// fsyncs every regular file under `root`, then every directory bottom-up, then `root`.
/// Symlinks are skipped (their creation is made durable by their directory's fsync).
///
/// # Errors
/// [`Error::Io`] naming the path.
pub fn fsync_tree(root: &Path) -> Result<()> {
    let mut dirs = Vec::new();
    for entry in super::walk(root) {
        let entry = entry?;
        match entry.kind {
            super::EntryKind::File => {
                let f = File::open(&entry.path).map_err(|e| Error::io("open", &entry.path, e))?;
                f.sync_all().map_err(|e| Error::io("fsync", &entry.path, e))?;
            }
            super::EntryKind::Dir => dirs.push(entry.path),
            _ => {}
        }
    }
    for dir in dirs.iter().rev() {
        fsync_dir(dir)?;
    }
    fsync_dir(root)
}

/// A self-deleting directory: a private staging directory beside its final destination,
/// removed on drop unless published or kept, or a private scratch directory. This is the
/// one self-deleting directory type; `crate::fs::temp` names and creates them.
#[must_use = "a StagingDir is deleted when dropped"]
#[derive(Debug)]
pub struct StagingDir {
    path: Option<PathBuf>,
}

impl StagingDir {
    /// Creates the directory `path` with permission bits `mode`; `None` if the name is
    /// taken. The parent must exist. Names come from `crate::fs::temp` (which also
    /// offers `staging_beside`, the usual way to get one).
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`.
    pub fn create(path: &Path, mode: u32) -> Result<Option<Self>> {
        match fs::create_dir(path) {
            Ok(()) => {
                let dir = Self { path: Some(path.to_path_buf()) };
                super::set_mode(path, mode)?;
                Ok(Some(dir))
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(Error::io("create staging directory", path, e)),
        }
    }

    /// The staging directory.
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// Leaves the directory in place (for tests of crash leftovers).
    pub fn keep(mut self) -> PathBuf {
        self.path.take().unwrap_or_default()
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if let Some(path) = self.path.take()
            && let Err(e) = super::remove_tree(&path)
        {
            tracing::warn!("could not remove staging directory {}: {e}", path.display());
        }
    }
}

/// Publishes a staging directory at `dest`: fsync the tree, no-replace rename, fsync the
/// parent. On failure the staging directory is handed back inside the error's `Err` so the
/// caller decides (dropping it deletes it).
///
/// # Errors
/// [`Error::AlreadyExists`] if `dest` exists; I/O errors naming the path.
pub fn publish_dir(
    staging: StagingDir,
    dest: &Path,
    sync: bool,
) -> Result<(), (Error, StagingDir)> {
    if sync && let Err(e) = fsync_tree(staging.path()) {
        return Err((e, staging));
    }
    if let Err(e) = rename_noreplace(staging.path(), dest) {
        return Err((e, staging));
    }
    let mut staging = staging;
    staging.path = None;
    if sync && let Some(parent) = dest.parent() {
        // The rename happened; a failed parent fsync only weakens durability.
        if let Err(e) = fsync_dir(parent) {
            tracing::warn!("{e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noreplace_refuses_even_empty_dir() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("entry");
        fs::create_dir(&dest).unwrap();
        let staging = StagingDir::create(&dir.path().join(".entry.tmp-1"), 0o755).unwrap().unwrap();
        assert!(StagingDir::create(staging.path(), 0o755).unwrap().is_none(), "name taken");
        fs::write(staging.path().join("f"), b"x").unwrap();
        let staged_path = staging.path().to_path_buf();
        let (err, staging) = publish_dir(staging, &dest, true).unwrap_err();
        assert!(matches!(err, Error::AlreadyExists { .. }));
        assert!(staged_path.exists());
        drop(staging);
        assert!(!staged_path.exists(), "staging dir must be removed on drop");
        fs::remove_dir(&dest).unwrap();
        let staging = StagingDir::create(&dir.path().join(".entry.tmp-2"), 0o755).unwrap().unwrap();
        fs::write(staging.path().join("f"), b"y").unwrap();
        publish_dir(staging, &dest, true).unwrap();
        assert_eq!(fs::read(dest.join("f")).unwrap(), b"y");
    }

    #[test]
    fn exchange_swaps_two_directories() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::create_dir(&a).unwrap();
        fs::create_dir(&b).unwrap();
        fs::write(a.join("fa"), b"a").unwrap();
        fs::write(b.join("fb"), b"b").unwrap();
        if exchange(&a, &b).unwrap() {
            assert!(a.join("fb").exists() && b.join("fa").exists());
        }
        let err = exchange(&a, &dir.path().join("missing")).unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }
}
