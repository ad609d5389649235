//! Hashing files, copying while hashing, and atomic placement.
//!
//! Placement writes a temp file in the destination directory, verifies the bytes written
//! against the expected SHA-256 *before* the rename, and only then renames over the
//! destination. So a destination path either keeps its old content or gets verified bytes:
//! never a partial or wrong file.
//!
//! [`place_file_checked`] is the one-pass form a HIT uses: it reads the source once,
//! hashing while copying, or — when the caller vouches for the source's [`FileStamp`] (a
//! verification memo, see [`crate::content::memo`]) — copies it with `copy_file_range`
//! (which the kernel may turn into a reflink) without hashing. Either way the source's
//! stamp must be the same before and after the copy.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use super::{Error, FileStamp, Result};
use crate::digest::{ContentDigest, ContentHasher, DigestAlgorithm, Sha256Digest};

/// SHA-256 and size in bytes of the file at `path` (following symlinks).
///
/// # Errors
/// [`Error::Io`] with op "read".
pub fn hash_file(path: &Path) -> Result<(Sha256Digest, u64)> {
    let file = File::open(path).map_err(|e| Error::io("read", path, e))?;
    Sha256Digest::of_reader(file).map_err(|e| Error::io("read", path, e))
}

/// Copies `src` into the open file `dest` while hashing with `algorithm`, returning the
/// digest and size of the bytes written. Memory use is one 256 KiB buffer whatever the file size.
///
/// # Errors
/// [`Error::Io`] naming `src` (read) or `dest_path` (write).
pub fn copy_verified(
    src: &Path,
    dest: &mut File,
    dest_path: &Path,
    algorithm: DigestAlgorithm,
) -> Result<(ContentDigest, u64)> {
    let mut input = File::open(src).map_err(|e| Error::io("read", src, e))?;
    copy_hashing(&mut input, src, dest, dest_path, algorithm)
}

/// Copies the open file `input` (read from `src`) into `dest` while hashing.
///
/// The thread's buffer is used at the file's size (whole pages, one more byte for the
/// read that finds the end; at most [`crate::digest::BUFFER_BYTES`]): a launcher copies one
/// object of tens of KB per process, and each page of a buffer it never fills is a page
/// fault, a few microseconds in a virtual machine.
pub(super) fn copy_hashing(
    input: &mut File,
    src: &Path,
    dest: &mut File,
    dest_path: &Path,
    algorithm: DigestAlgorithm,
) -> Result<(ContentDigest, u64)> {
    let mut hasher = ContentHasher::new(algorithm);
    let size = input.metadata().map_err(|e| Error::io("stat", src, e))?.len();
    let buffer_bytes = usize::try_from(size.saturating_add(1))
        .unwrap_or(usize::MAX)
        .next_multiple_of(4096)
        .min(crate::digest::BUFFER_BYTES);
    crate::digest::with_buffer_of(buffer_bytes, |buf| {
        loop {
            let n = match input.read(buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("read", src, e)),
            };
            let chunk = buf.get(..n).unwrap_or_default();
            hasher.update(chunk);
            dest.write_all(chunk).map_err(|e| Error::io("write", dest_path, e))?;
        }
    })?;
    let size = hasher.len();
    Ok((hasher.finish(), size))
}

/// Options for [`place_file_atomic`].
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// Expected digest of the source (its algorithm is the one hashed with); a mismatch
    /// aborts before anything is renamed.
    pub expected: ContentDigest,
    /// Permission bits of the placed file.
    pub mode: u32,
    /// fsync the file before the rename.
    pub sync: bool,
}

/// Copies `src` to `dest` atomically: temp file beside `dest`, copy while hashing, check
/// the digest, chmod, optional fsync, rename over `dest`. The placed file gets the current
/// time as its mtime (so make/ninja see restored outputs as new). The parent of `dest`
/// must exist.
///
/// # Errors
/// [`Error::DigestMismatch`] (nothing is renamed, the temp file is removed); I/O errors
/// naming the path; renaming over a directory fails.
pub fn place_file_atomic(src: &Path, dest: &Path, opts: Placement) -> Result<u64> {
    let mut tmp = temp_beside(dest)?;
    let tmp_path = tmp.path().to_path_buf();
    let algorithm = opts.expected.algorithm();
    let (digest, size) = copy_verified(src, tmp.as_file_mut(), &tmp_path, algorithm)?;
    if opts.expected != digest {
        return Err(Error::DigestMismatch {
            path: src.into(),
            expected: opts.expected,
            actual: digest,
        });
    }
    publish_temp(tmp, dest, opts)?;
    Ok(size)
}

/// A private (0600) temp file beside `dest`, removed on drop unless persisted.
fn temp_beside(dest: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    tempfile::Builder::new()
        .prefix(".strata-")
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(|e| Error::io("create temporary file in", dir, e))
}

/// The end of a placement: chmod to `opts.mode`, optional fsync, rename over `dest`.
fn publish_temp(tmp: tempfile::NamedTempFile, dest: &Path, opts: Placement) -> Result<()> {
    let tmp_path = tmp.path().to_path_buf();
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(opts.mode))
        .map_err(|e| Error::io("chmod", &tmp_path, e))?;
    if opts.sync {
        tmp.as_file().sync_all().map_err(|e| Error::io("fsync", &tmp_path, e))?;
    }
    tmp.persist(dest).map_err(|e| Error::Rename {
        from: tmp_path,
        to: dest.into(),
        source: e.error,
    })?;
    Ok(())
}

/// What [`place_file_checked`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// Bytes placed.
    pub size_bytes: u64,
    /// True if the bytes were hashed while copied (and matched the expected digest); false
    /// if the caller vouched for the source's stamp and the kernel copied them unhashed.
    pub hashed: bool,
    /// The source's stamp, the same before and after the copy.
    pub stamp: FileStamp,
}

/// Copies the regular file `src` to `dest` atomically in one read of `src`: temp file
/// beside `dest`; then, if `opts.expected` is set and `vouched` accepts the source's stamp,
/// a kernel copy (`copy_file_range`, no hashing), otherwise a copy while hashing that must
/// give `opts.expected`; then the source's stamp is checked again (a change during the copy
/// is an error), chmod, optional fsync, rename over `dest`. `src` is opened with
/// `O_NOFOLLOW`. The placed file gets the current time as its mtime. The parent of `dest`
/// must exist.
///
/// # Errors
/// [`Error::DigestMismatch`]; [`Error::ChangedWhileReading`] if the source changed during
/// the copy; [`Error::WrongFileType`] if `src` is not a regular file; I/O errors naming the
/// path (reading `src`, or writing the temp file). Nothing is renamed on error and the
/// temp file is removed.
pub fn place_file_checked(
    src: &Path,
    dest: &Path,
    opts: Placement,
    vouched: &(dyn Fn(&FileStamp) -> bool + Sync),
) -> Result<Placed> {
    let mut input = super::open_nofollow(src)?;
    let before = input.metadata().map_err(|e| Error::io("stat", src, e))?;
    if !before.is_file() {
        return Err(Error::WrongFileType { path: src.into(), expected: "regular file" });
    }
    let stamp = FileStamp::of(&before);
    let mut tmp = temp_beside(dest)?;
    let tmp_path = tmp.path().to_path_buf();
    let (size_bytes, hashed) = match opts.expected {
        _ if vouched(&stamp) => {
            // `io::copy` between two files is `copy_file_range` on Linux (falling back to
            // read/write where the kernel cannot).
            let n = io::copy(&mut input, tmp.as_file_mut())
                .map_err(|e| Error::io("copy into", &tmp_path, e))?;
            (n, false)
        }
        expected => {
            let algorithm = expected.algorithm();
            let (digest, n) =
                copy_hashing(&mut input, src, tmp.as_file_mut(), &tmp_path, algorithm)?;
            if expected != digest {
                return Err(Error::DigestMismatch { path: src.into(), expected, actual: digest });
            }
            (n, true)
        }
    };
    let after = input.metadata().map_err(|e| Error::io("stat", src, e))?;
    if FileStamp::of(&after) != stamp || size_bytes != stamp.size_bytes {
        return Err(Error::ChangedWhileReading { path: src.into() });
    }
    publish_temp(tmp, dest, opts)?;
    Ok(Placed { size_bytes, hashed, stamp })
}

/// Creates a symlink with text `target` (in recorded form, see [`super::name`]) at `dest`
/// atomically (temp name, then rename over `dest`). An existing file or symlink at `dest`
/// is replaced; a directory is not.
///
/// # Errors
/// [`Error::UnsafePath`] for a text that is not canonical; I/O errors naming the path.
pub fn place_symlink_atomic(target: &str, dest: &Path) -> Result<()> {
    let target = super::link_text_bytes(target)?;
    let dir = dest.parent().unwrap_or(Path::new("."));
    let name = dest.file_name().unwrap_or_default();
    for _ in 0..16 {
        // The temporary name keeps the destination's bytes (names need not be UTF-8).
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".strata-{:016x}.tmp", fastrand::u64(..)));
        let tmp = dir.join(tmp_name);
        match std::os::unix::fs::symlink(&target, &tmp) {
            Ok(()) => {
                return fs::rename(&tmp, dest).map_err(|e| {
                    let _ = fs::remove_file(&tmp);
                    Error::Rename { from: tmp.clone(), to: dest.into(), source: e }
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io("create symlink", tmp, e)),
        }
    }
    Err(Error::io("create symlink", dest, io::Error::other("no free temporary name")))
}

/// Creates the directory `path` (mode `dir_mode`, exactly) whose parent the caller has
/// already made or checked to be a real directory it controls (e.g. a private staging
/// tree being filled by one extraction). An existing real directory is accepted; a file or
/// symlink there is an error, never followed. `chmod: false` skips the `chmod` after the
/// `mkdir`: only for a caller that knows the `mkdir` gives exactly `dir_mode` (the umask
/// keeps it, [`super::perm::umask_keeps`], and no setgid directory is above `path`).
///
/// # Errors
/// [`Error::NotADirectory`] / [`Error::SymlinkInPath`] when something else is at `path`;
/// I/O errors naming the path.
pub fn create_dir_in_checked_parent(path: &Path, dir_mode: u32, chmod: bool) -> Result<()> {
    match std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), dir_mode).create(path)
    {
        Ok(()) if !chmod => Ok(()),
        Ok(()) => fs::set_permissions(path, fs::Permissions::from_mode(dir_mode))
            .map_err(|e| Error::io("chmod", path, e)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let m = fs::symlink_metadata(path).map_err(|e| Error::io("stat", path, e))?;
            if m.file_type().is_symlink() {
                return Err(Error::SymlinkInPath { path: path.into(), link: path.into() });
            }
            if !m.is_dir() {
                return Err(Error::NotADirectory { path: path.into(), component: path.into() });
            }
            Ok(())
        }
        Err(e) => Err(Error::io("create directory", path, e)),
    }
}

/// Creates `root/rel` and every missing directory between, refusing to pass through a
/// symlink or a non-directory. `root` itself is trusted (the caller resolved it). Each
/// created directory gets `dir_mode`.
///
/// # Errors
/// [`Error::SymlinkInPath`], [`Error::NotADirectory`], or an I/O error.
pub fn create_dir_all_within(root: &Path, rel: &Path, dir_mode: u32) -> Result<PathBuf> {
    let mut current = root.to_path_buf();
    for comp in rel.components() {
        let Component::Normal(name) = comp else {
            return Err(Error::UnsafePath {
                path: super::name::encode_os(rel.as_os_str()),
                reason: "not a plain relative path",
            });
        };
        current.push(name);
        match fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::SymlinkInPath { path: root.join(rel), link: current });
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::NotADirectory { path: root.join(rel), component: current });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::create_dir(&current) {
                Ok(()) => {
                    fs::set_permissions(&current, fs::Permissions::from_mode(dir_mode))
                        .map_err(|e| Error::io("chmod", &current, e))?;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // Raced with another creator; re-check it is a real directory.
                    let m = fs::symlink_metadata(&current)
                        .map_err(|e| Error::io("stat", &current, e))?;
                    if !m.is_dir() {
                        return Err(Error::NotADirectory {
                            path: root.join(rel),
                            component: current,
                        });
                    }
                }
                Err(e) => return Err(Error::io("create directory", &current, e)),
            },
            Err(e) => return Err(Error::io("stat", &current, e)),
        }
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blake3(bytes: &[u8]) -> ContentDigest {
        ContentDigest::of_bytes(DigestAlgorithm::Blake3, bytes)
    }

    #[test]
    fn place_rejects_wrong_digest_and_leaves_dest() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let dest = dir.path().join("dest");
        fs::write(&src, b"new").unwrap();
        fs::write(&dest, b"old").unwrap();
        let wrong = blake3(b"other");
        let opts = Placement { expected: wrong, mode: 0o644, sync: false };
        let err = place_file_atomic(&src, &dest, opts).unwrap_err();
        assert!(err.is_corrupt());
        assert_eq!(fs::read(&dest).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "temp file left behind");
        // The expected digest's algorithm is the one hashed with.
        let sha = ContentDigest::of_bytes(DigestAlgorithm::Sha256, b"new");
        let right = Placement { expected: sha, ..opts };
        place_file_atomic(&src, &dest, right).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"new");
    }

    #[test]
    fn checked_placement_hashes_unless_vouched() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let dest = dir.path().join("dest");
        fs::write(&src, b"cached").unwrap();
        let wrong = Placement { expected: blake3(b"other"), mode: 0o644, sync: false };
        // Not vouched: hashed, and a wrong digest places nothing.
        let err = place_file_checked(&src, &dest, wrong, &|_| false).unwrap_err();
        assert!(err.is_corrupt(), "{err}");
        assert!(!dest.exists());
        let right = Placement { expected: blake3(b"cached"), ..wrong };
        let placed = place_file_checked(&src, &dest, right, &|_| false).unwrap();
        assert!(placed.hashed);
        assert_eq!((placed.size_bytes, fs::read(&dest).unwrap()), (6, b"cached".to_vec()));
        // Vouched for this exact stamp: copied unhashed, still a faithful copy.
        let stamp = placed.stamp;
        fs::remove_file(&dest).unwrap();
        let placed = place_file_checked(&src, &dest, right, &|s| *s == stamp).unwrap();
        assert!(!placed.hashed);
        assert_eq!(fs::read(&dest).unwrap(), b"cached");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "temp file left behind");
        // A symlink as the source is refused, never followed.
        std::os::unix::fs::symlink(&src, dir.path().join("link")).unwrap();
        assert!(place_file_checked(&dir.path().join("link"), &dest, right, &|_| true).is_err());
    }

    #[test]
    fn create_within_refuses_symlinked_component() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("evil")).unwrap();
        let err = create_dir_all_within(dir.path(), Path::new("evil/sub"), 0o755).unwrap_err();
        assert!(matches!(err, Error::SymlinkInPath { .. }), "{err}");
        assert!(!outside.path().join("sub").exists());
        let made = create_dir_all_within(dir.path(), Path::new("ok/sub"), 0o755).unwrap();
        assert!(made.is_dir());
    }

    #[test]
    fn symlink_placement_replaces_file() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("l");
        fs::write(&dest, b"x").unwrap();
        place_symlink_atomic("target/text", &dest).unwrap();
        assert_eq!(fs::read_link(&dest).unwrap(), Path::new("target/text"));
    }
}
