//! Reading files without following symlinks, with race detection.
//!
//! Stores that verify trees they do not fully trust (a cache root other processes write to)
//! open every file with `O_NOFOLLOW`, so a file swapped for a symlink after the walk is an
//! error rather than a read of whatever the link points at. [`hash_file_stable`] also
//! compares the file's metadata before and after reading ([`FileStamp`]) and the path's
//! metadata afterwards, so a file changed or replaced while it was read is reported
//! ([`Error::ChangedWhileReading`]) instead of yielding a digest of bytes that are no longer
//! there.
//!
//! # Limitations
//! The stamp detects changes made through the ordinary write path. Writes through a shared
//! memory mapping established before the read may update `mtime`/`ctime` late, and anyone
//! who can set the system clock or edit the block device can forge a stamp. Stamps are a race
//! detector and a cache key inside one process, never an identity.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::OFlags;

use super::{Error, Result};
use crate::digest::{ContentDigest, ContentHasher, DigestAlgorithm};

/// The metadata that changes when a file's bytes change: device, inode, size, modification
/// and status-change times (nanoseconds since the epoch), and permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStamp {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size`, bytes.
    pub size_bytes: u64,
    /// `st_mtime` in nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// `st_ctime` in nanoseconds since the Unix epoch.
    pub ctime_ns: i128,
    /// `st_mode` (type and permission bits).
    pub mode: u32,
}

impl FileStamp {
    /// The stamp of `metadata` (from `stat`, `lstat` or `fstat`).
    pub fn of(metadata: &Metadata) -> Self {
        Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size_bytes: metadata.size(),
            mtime_ns: i128::from(metadata.mtime()) * 1_000_000_000
                + i128::from(metadata.mtime_nsec()),
            ctime_ns: i128::from(metadata.ctime()) * 1_000_000_000
                + i128::from(metadata.ctime_nsec()),
            mode: metadata.mode(),
        }
    }
}

/// The stored form of a [`FileStamp`] in memo records: `device`, `inode`, `size_bytes`,
/// `mtime_ns`, `ctime_ns` (signed 64-bit nanoseconds) and `mode`. A stamp whose times do
/// not fit 64 bits is not stored (serialising it fails).
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredStamp {
    device: u64,
    inode: u64,
    size_bytes: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    mode: u32,
}

impl serde::Serialize for FileStamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::Error as _;
        let time = |ns: i128| i64::try_from(ns).map_err(|_| S::Error::custom("time out of range"));
        StoredStamp {
            device: self.dev,
            inode: self.ino,
            size_bytes: self.size_bytes,
            mtime_ns: time(self.mtime_ns)?,
            ctime_ns: time(self.ctime_ns)?,
            mode: self.mode,
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for FileStamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = StoredStamp::deserialize(d)?;
        Ok(FileStamp {
            dev: s.device,
            ino: s.inode,
            size_bytes: s.size_bytes,
            mtime_ns: i128::from(s.mtime_ns),
            ctime_ns: i128::from(s.ctime_ns),
            mode: s.mode,
        })
    }
}

impl FileStamp {
    /// True if the times fit the stored form (64-bit nanoseconds), so the stamp can be
    /// remembered in a memo record.
    pub fn is_storable(&self) -> bool {
        i64::try_from(self.mtime_ns).is_ok() && i64::try_from(self.ctime_ns).is_ok()
    }
}

/// Opens `path` read-only with `O_NOFOLLOW | O_CLOEXEC`: a symlink as the last component is
/// an error (`ELOOP`), never followed.
///
/// # Errors
/// [`Error::Io`] with op "open".
pub fn open_nofollow(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::CLOEXEC).bits() as i32)
        .open(path)
        .map_err(|e| Error::io("open", path, e))
}

/// Reads the regular file at `path` (not following a final symlink) if it holds at most
/// `max_bytes` bytes. `Ok(None)` means it is larger; at most `max_bytes + 1` bytes are read.
///
/// # Errors
/// [`Error::Io`] with op "open" or "read"; reading something that is not a regular file is
/// an `InvalidInput` I/O error.
pub fn read_capped_nofollow(path: &Path, max_bytes: u64) -> Result<Option<Vec<u8>>> {
    let file = open_nofollow(path)?;
    let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    if !meta.is_file() {
        return Err(Error::io(
            "read",
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
        ));
    }
    // Sized from the stat (one read instead of a doubling series), still capped.
    let hint = meta.len().min(max_bytes).saturating_add(1);
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", path, e))?;
    if bytes.len() as u64 > max_bytes { Ok(None) } else { Ok(Some(bytes)) }
}

/// Hashes the regular file at `path` without following a final symlink, and checks that it
/// did not change while being read: `fstat` before and after reading must agree on the
/// [`FileStamp`], and `lstat` of the path afterwards must name the same inode with the same
/// stamp. Returns the digest, the number of bytes read and the stamp.
///
/// # Errors
/// [`Error::ChangedWhileReading`] when the checks fail; [`Error::Io`] for open/read errors
/// (a symlink is `ELOOP`; something other than a regular file is `InvalidInput`).
pub fn hash_file_stable(
    path: &Path,
    algorithm: DigestAlgorithm,
) -> Result<(ContentDigest, u64, FileStamp)> {
    let mut file = open_nofollow(path)?;
    let before = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    if !before.is_file() {
        return Err(Error::io(
            "read",
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
        ));
    }
    let mut hasher = ContentHasher::new(algorithm);
    hasher
        .update_reader_sized(&mut file, Some(before.len()))
        .map_err(|e| Error::io("read", path, e))?;
    let stamp = check_unchanged(&file, path, &before, hasher.len())?;
    let size = hasher.len();
    Ok((hasher.finish(), size, stamp))
}

fn check_unchanged(file: &File, path: &Path, before: &Metadata, read: u64) -> Result<FileStamp> {
    let after = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    let stamp = FileStamp::of(before);
    let now = super::symlink_metadata(path)?;
    if FileStamp::of(&after) != stamp || FileStamp::of(&now) != stamp || read != stamp.size_bytes {
        return Err(Error::ChangedWhileReading { path: path.into() });
    }
    Ok(stamp)
}

/// Copies the regular file `src` (not following a final symlink) into a new file `dest`
/// (which must not exist) with permission bits `mode`, hashing the bytes as they are copied.
/// `src` must not change while it is read (as [`hash_file_stable`]). With `sync`, `dest` is
/// fsynced. Returns the digest and size of the bytes written.
///
/// # Errors
/// [`Error::ChangedWhileReading`]; [`Error::Io`] naming `src` or `dest`.
pub fn copy_new_file(
    src: &Path,
    dest: &Path,
    mode: u32,
    sync: bool,
    algorithm: DigestAlgorithm,
) -> Result<(ContentDigest, u64)> {
    let mut input = open_nofollow(src)?;
    let before = input.metadata().map_err(|e| Error::io("stat", src, e))?;
    if !before.is_file() {
        return Err(Error::io(
            "read",
            src,
            io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
        ));
    }
    let mut output = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags((OFlags::NOFOLLOW | OFlags::CLOEXEC).bits() as i32)
        .open(dest)
        .map_err(|e| Error::io("create", dest, e))?;
    let (digest, size) = super::copy::copy_hashing(&mut input, src, &mut output, dest, algorithm)?;
    check_unchanged(&input, src, &before, size)?;
    // The umask may have cleared bits of `mode`; set them exactly.
    output
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .map_err(|e| Error::io("chmod", dest, e))?;
    if sync {
        output.sync_all().map_err(|e| Error::io("fsync", dest, e))?;
    }
    Ok((digest, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nofollow_reads_refuse_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, b"hello").unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let (digest, size, stamp) = hash_file_stable(&real, DigestAlgorithm::Sha256).unwrap();
        assert_eq!(digest, ContentDigest::of_bytes(DigestAlgorithm::Sha256, b"hello"));
        assert_eq!((size, stamp.size_bytes), (5, 5));
        assert!(hash_file_stable(&dir.path().join("link"), DigestAlgorithm::Blake3).is_err());
        assert!(read_capped_nofollow(&dir.path().join("link"), 10).is_err());
        assert_eq!(read_capped_nofollow(&real, 5).unwrap().unwrap(), b"hello");
        assert_eq!(read_capped_nofollow(&real, 4).unwrap(), None);
        assert!(
            hash_file_stable(dir.path(), DigestAlgorithm::Blake3).is_err(),
            "a directory is not a regular file"
        );
    }

    #[test]
    fn copy_new_file_sets_mode_and_refuses_existing() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::write(&src, b"data").unwrap();
        let dest = dir.path().join("dest");
        let (digest, size) =
            copy_new_file(&src, &dest, 0o700, true, DigestAlgorithm::Sha256).unwrap();
        assert_eq!((digest, size), (ContentDigest::of_bytes(DigestAlgorithm::Sha256, b"data"), 4));
        let mode = std::fs::metadata(&dest).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        assert!(copy_new_file(&src, &dest, 0o600, false, DigestAlgorithm::Sha256).is_err());
    }
}
