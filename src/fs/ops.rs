//! Thin wrappers over `std::fs` whose errors name the path and the operation.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{Error, Result};

/// Reads a whole file.
///
/// # Errors
/// [`Error::Io`] with op "read".
pub fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| Error::io("read", path, e))
}

/// Reads a whole file as UTF-8.
///
/// # Errors
/// [`Error::Io`] with op "read" (invalid UTF-8 is `InvalidData`).
pub fn read_to_string(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| Error::io("read", path, e))
}

/// Reads a small text file of a pseudo file system (`/proc/...`), which reports a size of 0:
/// into a buffer of 8 KiB at once, so a file of up to that size takes two `read` calls
/// rather than the eight of [`read_to_string`]'s probing from 32 bytes up.
///
/// # Errors
/// [`Error::Io`] with op "read"; invalid UTF-8 is an `InvalidData` error.
pub fn read_proc(path: &Path) -> Result<String> {
    let mut text = String::with_capacity(8192);
    File::open(path)
        .and_then(|mut file| std::io::Read::read_to_string(&mut file, &mut text))
        .map_err(|e| Error::io("read", path, e))?;
    Ok(text)
}

/// Opens a file for reading.
///
/// # Errors
/// [`Error::Io`] with op "open".
pub fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| Error::io("open", path, e))
}

/// Opens `path` for reading and writing, creating it (mode 0644 before umask) if missing;
/// existing contents are kept.
///
/// # Errors
/// [`Error::Io`] with op "open for update".
pub fn open_update(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)
        .map_err(|e| Error::io("open for update", path, e))
}

/// Creates a new file (fails if it exists) with `mode` (before umask).
///
/// # Errors
/// [`Error::Io`] with op "create".
pub fn create_new(path: &Path, mode: u32) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| Error::io("create", path, e))
}

/// Opens `path` for writing, creating it with `mode` (before umask) if missing and
/// truncating it to 0 bytes if present. Does not follow a final symlink's absence check:
/// callers choose `path` (a download destination they own).
///
/// # Errors
/// [`Error::Io`] with op "create".
pub fn create_truncate(path: &Path, mode: u32) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(|e| Error::io("create", path, e))
}

/// Positioned write: writes all of `bytes` at byte `offset` of `file` (which was opened
/// from `path`) without moving the file cursor, so several tasks can fill disjoint ranges
/// of one file concurrently.
///
/// # Errors
/// [`Error::Io`] with op "write".
pub fn write_at(file: &File, path: &Path, bytes: &[u8], offset: u64) -> Result<()> {
    file.write_all_at(bytes, offset).map_err(|e| Error::io("write", path, e))
}

/// Positioned read: fills all of `buf` from byte `offset` of `file` (opened from `path`)
/// without moving the file cursor.
///
/// # Errors
/// [`Error::Io`] with op "read" (`UnexpectedEof` if the file ends before `buf` is full).
pub fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<()> {
    file.read_exact_at(buf, offset).map_err(|e| Error::io("read", path, e))
}

/// Sets the length of `file` (opened from `path`) to `len_bytes`, extending with zeros or
/// truncating. Never pass a length that untrusted input declares (an archive header, a
/// manifest, a sidecar, an HTTP `Content-Length`): a file grows only by bytes that arrived.
///
/// # Errors
/// [`Error::Io`] with op "resize".
pub fn set_len(file: &File, path: &Path, len_bytes: u64) -> Result<()> {
    file.set_len(len_bytes).map_err(|e| Error::io("resize", path, e))
}

/// fsyncs an open file (data and metadata).
///
/// # Errors
/// [`Error::Io`] with op "fsync".
pub fn sync_file(file: &File, path: &Path) -> Result<()> {
    file.sync_all().map_err(|e| Error::io("fsync", path, e))
}

/// `lstat`: metadata of the path itself, not following a final symlink.
///
/// # Errors
/// [`Error::Io`] with op "stat".
pub fn symlink_metadata(path: &Path) -> Result<Metadata> {
    fs::symlink_metadata(path).map_err(|e| Error::io("stat", path, e))
}

/// `lstat`, with "not found" mapped to `None`.
///
/// # Errors
/// [`Error::Io`] for errors other than not-found.
pub fn symlink_metadata_opt(path: &Path) -> Result<Option<Metadata>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}

/// `stat`: metadata following symlinks.
///
/// # Errors
/// [`Error::Io`] with op "stat".
pub fn metadata(path: &Path) -> Result<Metadata> {
    fs::metadata(path).map_err(|e| Error::io("stat", path, e))
}

/// The text of a symlink, in recorded form ([`super::name`]: any bytes, losslessly).
///
/// # Errors
/// [`Error::Io`] with op "read link".
pub fn read_link(path: &Path) -> Result<String> {
    let target = fs::read_link(path).map_err(|e| Error::io("read link", path, e))?;
    Ok(super::name::encode_os(target.as_os_str()))
}

/// Decodes a symlink text in recorded form to the bytes to put on disk.
///
/// # Errors
/// [`Error::UnsafePath`] if `text` is not a canonical text of the name encoding.
pub fn link_text_bytes(text: &str) -> Result<std::ffi::OsString> {
    super::name::decode_os(text)
        .map_err(|reason| Error::UnsafePath { path: text.to_owned(), reason })
}

/// Creates a directory and its parents.
///
/// # Errors
/// [`Error::Io`] with op "create directory".
pub fn create_dir_all(path: &Path) -> Result<()> {
    fs::create_dir_all(path).map_err(|e| Error::io("create directory", path, e))
}

/// Directories an operation created for its destination (see [`create_dir_all_recorded`]):
/// [`CreatedDirs::remove`] takes them away again when the operation fails, so a refused
/// destination leaves no trace.
#[must_use = "a failed operation removes the directories it created"]
#[derive(Debug, Default)]
pub struct CreatedDirs {
    /// Created directories, top-down.
    dirs: Vec<std::path::PathBuf>,
}

impl CreatedDirs {
    /// Removes the recorded directories bottom-up, each only if empty (what another process
    /// put there meanwhile stays); a failure is logged, never returned.
    pub fn remove(self) {
        for dir in self.dirs.iter().rev() {
            if let Err(e) = remove_dir_if_empty(dir) {
                tracing::warn!("could not remove {}: {e}", dir.display());
            }
        }
    }

    /// The operation succeeded: the directories stay.
    pub fn keep(self) {}
}

/// [`create_dir_all`] that records which directories it created (the missing ancestors of
/// `path` and `path` itself, top-down), for [`CreatedDirs::remove`].
///
/// # Errors
/// [`Error::Io`] with op "create directory" (the directories created before the failure
/// are removed again).
pub fn create_dir_all_recorded(path: &Path) -> Result<CreatedDirs> {
    let mut missing = Vec::new();
    let mut current = Some(path);
    while let Some(dir) = current {
        match fs::symlink_metadata(dir) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(dir.to_path_buf());
                current = dir.parent();
            }
            Err(e) => return Err(Error::io("inspect", dir, e)),
        }
    }
    let mut created = CreatedDirs::default();
    for dir in missing.into_iter().rev() {
        match create_dir(&dir) {
            Ok(true) => created.dirs.push(dir),
            Ok(false) => {}
            Err(e) => {
                created.remove();
                return Err(e);
            }
        }
    }
    Ok(created)
}

/// Creates one directory; `Ok(false)` if it already existed.
///
/// # Errors
/// [`Error::Io`] with op "create directory".
pub fn create_dir(path: &Path) -> Result<bool> {
    match fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::io("create directory", path, e)),
    }
}

/// Removes a file or symlink; a missing path is not an error.
///
/// # Errors
/// [`Error::Io`] with op "remove".
pub fn remove_file(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", path, e)),
    }
}

/// Removes the directory `path` only if it is empty. Returns `true` if it was removed;
/// `false` if it is not empty, missing, or not a directory.
///
/// # Errors
/// [`Error::Io`] with op "remove directory" for other failures (e.g. permissions).
pub fn remove_dir_if_empty(path: &Path) -> Result<bool> {
    match fs::remove_dir(path) {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound
                    | io::ErrorKind::DirectoryNotEmpty
                    | io::ErrorKind::NotADirectory
            ) || e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::io("remove directory", path, e)),
    }
}

/// Removes whatever is at `path` (file, symlink or directory tree) without following
/// symlinks; a missing path is not an error.
///
/// # Errors
/// [`Error::Io`] with op "remove".
pub fn remove_tree(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("stat", path, e)),
        Ok(m) if m.is_dir() => match fs::remove_dir_all(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", path, e)),
        },
        Ok(_) => remove_file(path),
    }
}

/// Plain `rename(2)` (replaces a file destination).
///
/// # Errors
/// [`Error::Rename`].
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to).map_err(|e| Error::Rename { from: from.into(), to: to.into(), source: e })
}

/// Lists a directory: the full paths of its children, sorted by name.
///
/// # Errors
/// [`Error::Io`] with op "list".
pub fn read_dir(path: &Path) -> Result<Vec<PathBuf>> {
    let iter = fs::read_dir(path).map_err(|e| Error::io("list", path, e))?;
    let mut out = Vec::new();
    for entry in iter {
        out.push(entry.map_err(|e| Error::io("list", path, e))?.path());
    }
    out.sort();
    Ok(out)
}

/// Sets the permission bits of `path` (follows symlinks; never call it on one).
///
/// # Errors
/// [`Error::Io`] with op "chmod".
pub fn set_mode(path: &Path, mode: u32) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io("chmod", path, e))
}

/// Creates a symlink at `link` with text `target` (in recorded form, decoded to its exact
/// bytes).
///
/// # Errors
/// [`Error::UnsafePath`] if `target` is not a canonical recorded text; [`Error::Io`] with
/// op "create symlink".
pub fn symlink(target: &str, link: &Path) -> Result<()> {
    let bytes = link_text_bytes(target)?;
    std::os::unix::fs::symlink(bytes, link).map_err(|e| Error::io("create symlink", link, e))
}

/// Creates `path` if missing and sets its modification time to now.
///
/// # Errors
/// [`Error::Io`] with op "touch".
pub fn touch(path: &Path) -> Result<()> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .open(path)
        .map_err(|e| Error::io("touch", path, e))?;
    file.set_modified(SystemTime::now()).map_err(|e| Error::io("touch", path, e))
}

/// Writes `bytes` to `path` atomically: a temp file in the same directory, fsync, rename.
/// Readers see either the old or the new content, never a mix. The file gets `mode`.
///
/// # Errors
/// [`Error::Io`] / [`Error::Rename`] naming the temp file or the destination.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    replace_with(path, bytes, mode, true)
}

/// [`write_atomic`] without the fsync: readers still see a whole old or a whole new file,
/// but after a power cut the new one may be empty or damaged. For files whose content is
/// checked against a digest before use (the launcher's compile entries).
///
/// # Errors
/// As [`write_atomic`].
pub fn write_atomic_nosync(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    replace_with(path, bytes, mode, false)
}

fn replace_with(path: &Path, bytes: &[u8], mode: u32, sync: bool) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".strata-")
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(|e| Error::io("create temporary file in", dir, e))?;
    tmp.write_all(bytes).map_err(|e| Error::io("write", tmp.path(), e))?;
    if sync {
        tmp.as_file().sync_all().map_err(|e| Error::io("fsync", tmp.path(), e))?;
    }
    tmp.persist(path).map_err(|e| Error::Rename {
        from: e.file.path().into(),
        to: path.into(),
        source: e.error,
    })?;
    Ok(())
}

/// Writes `bytes` into a new file at `path` (fails if it exists) and fsyncs it.
///
/// # Errors
/// [`Error::Io`] with op "create" or "write".
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut file = create_new(path, mode)?;
    file.write_all(bytes).map_err(|e| Error::io("write", path, e))?;
    file.sync_all().map_err(|e| Error::io("fsync", path, e))
}

/// The current working directory.
///
/// # Errors
/// [`Error::Io`] with op "read the current directory".
pub fn current_dir() -> Result<PathBuf> {
    std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))
}

/// Resolves every symlink in `path` strictly (the path must exist).
///
/// # Errors
/// [`Error::Io`] with op "resolve" (`ELOOP` for a symlink loop, `ENOENT` for a dangling link).
pub fn canonicalize(path: &Path) -> Result<PathBuf> {
    fs::canonicalize(path).map_err(|e| Error::io("resolve", path, e))
}

/// Opens `path` for appending without ever blocking (`O_WRONLY|O_APPEND|O_CREAT|O_NONBLOCK`,
/// mode 0644): a FIFO without a reader fails to open (`ENXIO`) instead of hanging, and a
/// full pipe makes writes fail instead of wait.
///
/// # Errors
/// [`Error::Io`] with op "open for appending".
pub fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| Error::io("open for appending", path, e))
}

/// Creates the new file `path` with `mode` (before umask) and returns it open for writing
/// with a guard that deletes it when dropped (unless kept); `None` if the name is taken.
/// Used for downloads, packs and puts that must live on the destination's filesystem;
/// `crate::fs::temp` names them (dot-named, never packed).
///
/// # Errors
/// [`Error::Io`] with op "create temporary file" naming `path`.
pub fn temp_file_at(path: &Path, mode: u32) -> Result<Option<(File, tempfile::TempPath)>> {
    match OpenOptions::new().write(true).create_new(true).mode(mode).open(path) {
        Ok(file) => match tempfile::TempPath::try_from_path(path) {
            Ok(guard) => Ok(Some((file, guard))),
            Err(e) => {
                let _ = fs::remove_file(path);
                Err(Error::io("create temporary file", path, e))
            }
        },
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(Error::io("create temporary file", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positioned_writes_fill_disjoint_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = create_truncate(&path, 0o644).unwrap();
        set_len(&file, &path, 6).unwrap();
        write_at(&file, &path, b"def", 3).unwrap();
        write_at(&file, &path, b"abc", 0).unwrap();
        sync_file(&file, &path).unwrap();
        assert_eq!(read(&path).unwrap(), b"abcdef");
        let mut buf = [0u8; 2];
        let reader = open(&path).unwrap();
        read_exact_at(&reader, &path, &mut buf, 2).unwrap();
        assert_eq!(&buf, b"cd");
        let err = read_exact_at(&reader, &path, &mut buf, 5).unwrap_err();
        assert!(err.to_string().contains("cannot read"), "{err}");
        // Truncation on re-open.
        drop(create_truncate(&path, 0o644).unwrap());
        assert_eq!(read(&path).unwrap(), b"");
    }

    #[test]
    fn only_empty_directories_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join("full");
        create_dir_all(&full.join("sub")).unwrap();
        assert!(!remove_dir_if_empty(&full).unwrap());
        assert!(remove_dir_if_empty(&full.join("sub")).unwrap());
        assert!(remove_dir_if_empty(&full).unwrap());
        assert!(!remove_dir_if_empty(&full).unwrap(), "missing");
        let file = dir.path().join("f");
        write_new(&file, b"x", 0o644).unwrap();
        assert!(!remove_dir_if_empty(&file).unwrap(), "not a directory");
        assert!(file.exists());
    }
}
