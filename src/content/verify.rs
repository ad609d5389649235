//! Hashing the files of a tree that [`super::tree::compare`] found equal to its manifest,
//! and placing verified copies of them elsewhere.
//!
//! * [`check_files`] hashes each found file in place (in parallel, opened with
//!   `O_NOFOLLOW`, with the stamp checked before and after: [`fs::hash_file_stable`]) and
//!   compares it with its record's digest, under the record's algorithm. A file a
//!   [`VerifyMemo`] vouches for (stamp unchanged since a full check) is not read.
//! * [`place_tree`] copies the files to another root, each read once: hashed while copied
//!   and renamed into place only if the digest matches, or copied with `copy_file_range`
//!   unhashed when the memo vouches for it; then the symlinks and listed directories.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::Problem;
use super::memo::VerifyMemo;
use super::record::{FileRecord, Record};
use super::tree::Found;
use crate::fs::{self, FileStamp, Placement, RelPath};

/// What a verification or placement read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checked {
    /// Bytes of regular files covered.
    pub bytes: u64,
    /// Of those, bytes hashed (the rest were vouched for by the memo).
    pub hashed_bytes: u64,
    /// Files accepted on the memo's word.
    pub vouched_files: usize,
}

/// Hashes the regular files `found` (from [`super::tree::compare`] over `root` and
/// `records`) and compares each with its record. With `memo`, files it vouches for are not
/// read, and on success the memo remembers every file hashed in full (if its stamp is old
/// enough, see [`super::memo::MIN_STAMP_AGE`]) and forgets paths no longer listed.
///
/// # Errors
/// [`Problem::Invalid`] for a digest mismatch or a file that changed since it was walked;
/// [`Problem::classify`] of read errors.
pub fn check_files(
    root: &Path,
    records: &[Record],
    found: &[Found],
    memo: Option<&mut VerifyMemo>,
) -> Result<Checked, Problem> {
    let began = SystemTime::now();
    let known: Option<&VerifyMemo> = memo.as_deref();
    let results: Vec<Result<(u64, bool), Problem>> =
        crate::parallel::map(found, crate::parallel::Workers::Pool, |f| {
            let Some(Record::File(FileRecord { path, size_bytes, digest, .. })) =
                records.get(f.index)
            else {
                return Err(Problem::Invalid("a found file has no file record".into()));
            };
            if known.is_some_and(|m| m.vouches(path, &f.stamp, digest)) {
                return Ok((*size_bytes, false));
            }
            let real = path.to_path(root);
            let (actual, size, stamp) = fs::hash_file_stable(&real, digest.algorithm())
                .map_err(|e| Problem::classify(&e))?;
            if size != *size_bytes || stamp != f.stamp {
                return Err(Problem::Invalid(format!(
                    "{} changed while the tree was being verified",
                    real.display()
                )));
            }
            if actual != *digest {
                return Err(Problem::Invalid(format!(
                    "{} has digest {actual}, the manifest records {digest}",
                    real.display()
                )));
            }
            Ok((size, true))
        });
    let mut checked = Checked::default();
    let mut hashed = Vec::new();
    for (f, result) in found.iter().zip(results) {
        let (size, was_hashed) = result?;
        checked.bytes += size;
        if was_hashed {
            checked.hashed_bytes += size;
            hashed.push(f);
        } else {
            checked.vouched_files += 1;
        }
    }
    if let Some(memo) = memo {
        remember(memo, records, hashed.iter().map(|f| (f.index, f.stamp)), began);
    }
    Ok(checked)
}

fn remember(
    memo: &mut VerifyMemo,
    records: &[Record],
    hashed: impl Iterator<Item = (usize, FileStamp)>,
    began: SystemTime,
) {
    for (index, stamp) in hashed {
        if let Some(Record::File(FileRecord { path, digest, .. })) = records.get(index) {
            memo.remember(path, stamp, *digest, began);
        }
    }
    let listed: HashSet<&RelPath> = records.iter().map(Record::path).collect();
    memo.retain(|rel| listed.contains(rel));
}

/// Creates the parent directories of `rel` under `root` (never through a symlink, mode
/// `dir_mode`) and returns the destination path.
///
/// # Errors
/// [`fs::Error::SymlinkInPath`] and I/O errors naming the path.
pub fn place_parent(root: &Path, rel: &RelPath, dir_mode: u32) -> Result<PathBuf, fs::Error> {
    if let Some(parent) = rel.parent() {
        fs::create_dir_all_within(root, &parent.to_relative_path(), dir_mode)?;
    }
    Ok(rel.to_path(root))
}

/// Permission bits of placed files and directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    /// Mode of a placed directory.
    pub dir: u32,
    /// Mode of a placed file without owner-exec.
    pub file: u32,
    /// Mode of a placed file with owner-exec.
    pub executable: u32,
}

impl Modes {
    /// The modes of `sharing`.
    pub fn of(sharing: fs::Sharing) -> Self {
        Self {
            dir: sharing.dir_mode(),
            file: sharing.file_mode(false),
            executable: sharing.file_mode(true),
        }
    }
}

/// Places the tree `records` from `src_root` (which [`super::tree::compare`] found equal to
/// them) under `dest_root`: files first (in parallel, each read once, verified while copied
/// or vouched for by `memo`, the source's stamp unchanged during the copy), then symlinks,
/// then listed directories. Existing files and symlinks at the destinations are replaced
/// atomically; parent directories are created without passing through symlinks. Placed
/// files get the current time as mtime. On success `memo` remembers the files hashed in
/// full and forgets paths no longer listed.
///
/// # Errors
/// [`fs::Error::DigestMismatch`] for a corrupt file (nothing is renamed over its
/// destination), [`fs::Error::ChangedWhileReading`], I/O errors naming paths.
pub fn place_tree(
    src_root: &Path,
    records: &[Record],
    dest_root: &Path,
    modes: Modes,
    memo: &mut VerifyMemo,
) -> Result<Checked, fs::Error> {
    fs::create_dir_all(dest_root)?;
    let files: Vec<(usize, &Record)> =
        records.iter().enumerate().filter(|(_, r)| matches!(r, Record::File(_))).collect();
    let began = SystemTime::now();
    let known: &VerifyMemo = memo;
    let results: Vec<Result<fs::Placed, fs::Error>> =
        crate::parallel::map(&files, crate::parallel::Workers::Pool, |(_, r)| {
            let Record::File(FileRecord { path, digest, executable, .. }) = r else {
                return Err(fs::Error::WrongFileType { path: PathBuf::new(), expected: "file" });
            };
            let dest = place_parent(dest_root, path, modes.dir)?;
            let mode = if *executable { modes.executable } else { modes.file };
            let opts = Placement { expected: *digest, mode, sync: false };
            let vouched = |stamp: &FileStamp| known.vouches(path, stamp, digest);
            fs::place_file_checked(&path.to_path(src_root), &dest, opts, &vouched)
        });
    let mut checked = Checked::default();
    let mut hashed = Vec::new();
    for ((index, _), result) in files.iter().zip(results) {
        let placed = result?;
        checked.bytes += placed.size_bytes;
        if placed.hashed {
            checked.hashed_bytes += placed.size_bytes;
            hashed.push((*index, placed.stamp));
        } else {
            checked.vouched_files += 1;
        }
    }
    remember(memo, records, hashed.into_iter(), began);
    for r in records {
        match r {
            Record::Symlink { path, target } => {
                let dest = place_parent(dest_root, path, modes.dir)?;
                fs::place_symlink_atomic(target, &dest)?;
            }
            Record::Directory { path } => {
                fs::create_dir_all_within(dest_root, &path.to_relative_path(), modes.dir)?;
            }
            Record::File(_) => {}
        }
    }
    Ok(checked)
}

/// Copies the files `files` (paths relative to `src_root`) into new files under `dest_root`
/// (an empty directory): parent directories first (mode `modes.dir`, never through a
/// symlink), then every file in parallel with [`copy_in`] (mode from its owner-exec bit),
/// each hashed while copied and compared with its record. Returns the bytes copied.
///
/// # Errors
/// As [`copy_in`], naming the source file; the first error stops the copy (the caller
/// discards `dest_root`).
pub fn copy_files(
    src_root: &Path,
    files: &[FileRecord],
    dest_root: &Path,
    modes: Modes,
) -> Result<u64, fs::Error> {
    for file in files {
        if let Some(parent) = file.path.parent() {
            fs::create_dir_all_within(dest_root, &parent.to_relative_path(), modes.dir)?;
        }
    }
    let results = crate::parallel::map(files, crate::parallel::Workers::Pool, |file| {
        let mode = if file.executable { modes.executable } else { modes.file };
        let src = file.path.to_path(src_root);
        let size = copy_in(&src, &file.path.to_path(dest_root), &file.digest, mode)?;
        if size != file.size_bytes {
            let actual = file.digest;
            return Err(fs::Error::DigestMismatch { path: src, expected: file.digest, actual });
        }
        Ok(size)
    });
    results.into_iter().sum()
}

/// Copies the regular file `src` into the new file `dest` (which must not exist; its parent
/// must) while hashing under `expected`'s algorithm, and fails unless the bytes match
/// `expected`. `src` is opened with `O_NOFOLLOW` and must not change while
/// read. Used to take a described output into a staging tree.
///
/// # Errors
/// [`fs::Error::DigestMismatch`] (also for a size change); [`fs::Error::ChangedWhileReading`];
/// I/O errors naming the path.
pub fn copy_in(
    src: &Path,
    dest: &Path,
    expected: &crate::digest::ContentDigest,
    mode: u32,
) -> Result<u64, fs::Error> {
    let (actual, size) = fs::copy_new_file(src, dest, mode, false, expected.algorithm())?;
    if actual != *expected {
        return Err(fs::Error::DigestMismatch { path: src.into(), expected: *expected, actual });
    }
    Ok(size)
}
