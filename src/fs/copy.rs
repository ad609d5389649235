//! Hashing files, copying while hashing, and atomic placement.
//!
//! Placement writes a temp file in the destination directory, verifies the bytes written
//! against the expected SHA-256 *before* the rename, and only then renames over the
//! destination. So a destination path either keeps its old content or gets verified bytes:
//! never a partial or wrong file (DESIGN.md invariant 1).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use super::{Error, Result};
use crate::digest::{Hasher, Sha256Digest};

/// SHA-256 and size in bytes of the file at `path` (following symlinks).
///
/// # Errors
/// [`Error::Io`] with op "read".
pub fn hash_file(path: &Path) -> Result<(Sha256Digest, u64)> {
    let file = File::open(path).map_err(|e| Error::io("read", path, e))?;
    Sha256Digest::of_reader(file).map_err(|e| Error::io("read", path, e))
}

/// Copies `src` into the open file `dest` while hashing, returning the digest and size of
/// the bytes written. Memory use is one 256 KiB buffer whatever the file size.
///
/// # Errors
/// [`Error::Io`] naming `src` (read) or `dest_path` (write).
pub fn copy_verified(src: &Path, dest: &mut File, dest_path: &Path) -> Result<(Sha256Digest, u64)> {
    let mut input = File::open(src).map_err(|e| Error::io("read", src, e))?;
    let mut hasher = Hasher::new();
    crate::digest::with_buffer(|buf| {
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
    /// Expected SHA-256 of the source; a mismatch aborts before anything is renamed.
    pub expected: Option<Sha256Digest>,
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
pub fn place_file_atomic(src: &Path, dest: &Path, opts: Placement) -> Result<(Sha256Digest, u64)> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".strata-")
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(|e| Error::io("create temporary file in", dir, e))?;
    let tmp_path = tmp.path().to_path_buf();
    let (digest, size) = copy_verified(src, tmp.as_file_mut(), &tmp_path)?;
    if let Some(expected) = opts.expected
        && expected != digest
    {
        return Err(Error::DigestMismatch { path: src.into(), expected, actual: digest });
    }
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
    Ok((digest, size))
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

    #[test]
    fn place_rejects_wrong_digest_and_leaves_dest() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let dest = dir.path().join("dest");
        fs::write(&src, b"new").unwrap();
        fs::write(&dest, b"old").unwrap();
        let wrong = Sha256Digest::of_bytes(b"other");
        let opts = Placement { expected: Some(wrong), mode: 0o644, sync: false };
        let err = place_file_atomic(&src, &dest, opts).unwrap_err();
        assert!(err.is_corrupt());
        assert_eq!(fs::read(&dest).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "temp file left behind");
        let right = Placement { expected: Some(Sha256Digest::of_bytes(b"new")), ..opts };
        place_file_atomic(&src, &dest, right).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"new");
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
