//! The directory store: objects are regular files under a root directory.
//!
//! Layout: the object `a/b/c` is the file `<root>/a/b/c`. The root is created on the first
//! upload. A put copies into a temp file `.strata-<random>.tmp` in the destination
//! directory, fsyncs it, publishes it with `renameat2(RENAME_NOREPLACE)` and fsyncs the
//! directory, so readers never see a partial object and nothing is ever overwritten
//! (immutable publication). Listings skip those temp files.
//!
//! # Limitations
//! * A crash between creating a temp file and publishing it leaves the temp file behind;
//!   it is invisible to [`ListObjects::list`] and harmless, but takes space until removed.
//! * Keys whose segments collide with a file used as a directory (`a` and `a/b`) cannot
//!   both exist; the second put fails with an I/O error.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use super::{
    Advancing, Capabilities, DeleteObjects, DownloadProgress, Error, ListObjects, NextRequest,
    ObjectKey, ObjectMeta, ObjectStore, PutOutcome, StoreUrl, TransferStats, check_range,
};
use crate::fs as localfs;
use crate::fs::temp::{self, Purpose, TempName};

const COPY_BUF_BYTES: usize = 256 * 1024;

/// A store in a local directory. See the module docs for the layout.
#[derive(Debug, Clone)]
pub struct FsStore {
    root: PathBuf,
}

impl FsStore {
    /// A store rooted at `root` (an absolute path; it need not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, key: &ObjectKey) -> PathBuf {
        self.root.join(key.as_str())
    }

    /// Opens the object `key` for reading, with its metadata and path.
    ///
    /// # Errors
    /// [`Error::NotFound`] if there is no such file (or a path segment is a file, or the
    /// path is a directory); other I/O errors.
    fn open_object(&self, key: &ObjectKey) -> Result<(File, std::fs::Metadata, PathBuf), Error> {
        let src = self.path_of(key);
        let not_found = |src: &Path| Error::NotFound {
            location: src.display().to_string(),
            attempts: Default::default(),
        };
        let file = match localfs::open(&src) {
            Ok(file) => file,
            Err(e) if e.is_not_found() => return Err(not_found(&src)),
            // `a/b` when `a` is a file: no such object.
            Err(localfs::Error::Io { source, .. })
                if source.kind() == io::ErrorKind::NotADirectory =>
            {
                return Err(not_found(&src));
            }
            Err(e) => return Err(e.into()),
        };
        let metadata = file.metadata().map_err(|e| localfs::Error::io("stat", &src, e))?;
        if !metadata.is_file() {
            return Err(not_found(&src));
        }
        Ok((file, metadata, src))
    }

    /// Publishes a new object under `key` unless one exists: `fill` writes the content into
    /// a temp file in the destination directory (returning the bytes written), which is
    /// fsynced and renamed into place without replacing anything.
    fn publish(
        &self,
        key: &ObjectKey,
        fill: impl FnOnce(&mut File, &Path) -> Result<u64, Error>,
    ) -> Result<(PutOutcome, TransferStats), Error> {
        let started = Instant::now();
        let dest = self.path_of(key);
        let done = |outcome, bytes| {
            let stats =
                TransferStats { bytes, seconds: started.elapsed().as_secs_f64(), retries: 0 };
            Ok((outcome, stats))
        };
        if localfs::symlink_metadata_opt(&dest)?.is_some() {
            return done(PutOutcome::AlreadyExists, 0);
        }
        localfs::create_dir_all(&self.root)?;
        let dir = match Path::new(key.as_str()).parent() {
            Some(parent) if !parent.as_os_str().is_empty() => {
                localfs::create_dir_all_within(&self.root, parent, 0o755)?
            }
            _ => self.root.clone(),
        };
        let (mut file, temp) = temp::create_file(&dir, Purpose::Placement, "", 0o644)?;
        let temp_path = temp.to_path_buf();
        let bytes = fill(&mut file, &temp_path)?;
        localfs::sync_file(&file, &temp_path)?;
        drop(file);
        match localfs::rename_noreplace(&temp, &dest) {
            Ok(()) => {
                // The name now belongs to the published object: do not delete it on drop.
                temp.keep().map_err(|e| localfs::Error::io("keep", &temp_path, e.error))?;
                localfs::fsync_dir(&dir)?;
                done(PutOutcome::Created, bytes)
            }
            // Lost a race with another writer: theirs stays, our temp file is deleted.
            Err(localfs::Error::AlreadyExists { .. }) => done(PutOutcome::AlreadyExists, 0),
            Err(e) => Err(e.into()),
        }
    }

    fn meta_of(key: ObjectKey, metadata: &std::fs::Metadata) -> ObjectMeta {
        ObjectMeta {
            key,
            size_bytes: metadata.len(),
            last_modified: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            etag: None,
        }
    }
}

/// Copies all of `input` (opened from `src`) into `output` (opened from `dest`), reporting
/// each chunk to `progress` once written; returns the bytes copied.
fn copy_stream(
    input: &mut File,
    src: &Path,
    output: &mut File,
    dest: &Path,
    progress: &dyn DownloadProgress,
) -> Result<u64, Error> {
    let mut buf = vec![0u8; COPY_BUF_BYTES];
    let mut total = 0u64;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(localfs::Error::io("read", src, e).into()),
        };
        let chunk = buf.get(..n).unwrap_or_default();
        output.write_all(chunk).map_err(|e| localfs::Error::io("write", dest, e))?;
        progress.written(total, total + n as u64);
        total += n as u64;
    }
}

/// A put's temp file ([`Purpose::Placement`], `.strata-<random>.tmp`): never an object.
fn is_temp_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(TempName::parse)
        .is_some_and(|t| t.purpose() == Purpose::Placement)
}

impl ObjectStore for FsStore {
    fn head(&self, key: &ObjectKey) -> Result<Option<ObjectMeta>, Error> {
        match localfs::symlink_metadata_opt(&self.path_of(key)) {
            Ok(Some(metadata)) if metadata.is_file() => {
                Ok(Some(Self::meta_of(key.clone(), &metadata)))
            }
            Ok(_) => Ok(None),
            // `a/b` when `a` is a file: no such object.
            Err(localfs::Error::Io { source, .. })
                if source.kind() == io::ErrorKind::NotADirectory =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn get_to_file_observed(
        &self,
        key: &ObjectKey,
        dest: &Path,
        progress: &dyn DownloadProgress,
    ) -> Result<(ObjectMeta, TransferStats), Error> {
        let started = Instant::now();
        let (mut input, metadata, src) = self.open_object(key)?;
        let mut output = localfs::create_truncate(dest, 0o644)?;
        progress.started(metadata.len());
        let bytes = copy_stream(&mut input, &src, &mut output, dest, progress)?;
        let meta = Self::meta_of(key.clone(), &metadata);
        let stats = TransferStats { bytes, seconds: started.elapsed().as_secs_f64(), retries: 0 };
        Ok((meta, stats))
    }

    fn get_range_with(
        &self,
        key: &ObjectKey,
        start: u64,
        end: u64,
        _next: NextRequest,
    ) -> Result<Vec<u8>, Error> {
        check_range(&self.path_of(key).display().to_string(), start, end)?;
        let (file, metadata, src) = self.open_object(key)?;
        let size = metadata.len();
        if end > size {
            return Err(Error::InvalidRange {
                location: src.display().to_string(),
                start,
                end,
                reason: format!("the object holds only {size} bytes"),
            });
        }
        // check_range bounds the length by MAX_RANGE_BYTES, which fits in usize.
        let length = usize::try_from(end - start).unwrap_or(usize::MAX);
        let mut buf = vec![0u8; length];
        localfs::read_exact_at(&file, &src, &mut buf, start)?;
        Ok(buf)
    }

    fn get_small(&self, key: &ObjectKey, max_bytes: u64) -> Result<Option<Vec<u8>>, Error> {
        let location = self.path_of(key).display().to_string();
        check_range(&location, 0, max_bytes)?;
        let (file, metadata, src) = match self.open_object(key) {
            Ok(opened) => opened,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let size = metadata.len();
        if size > max_bytes {
            return Err(Error::InvalidRange {
                location,
                start: 0,
                end: max_bytes,
                reason: format!(
                    "the object holds {size} bytes, more than the {max_bytes} read whole"
                ),
            });
        }
        let mut buf = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)];
        localfs::read_exact_at(&file, &src, &mut buf, 0)?;
        Ok(Some(buf))
    }

    fn put_file_if_absent_observed(
        &self,
        key: &ObjectKey,
        src: &Path,
        progress: &dyn crate::progress::Progress,
    ) -> Result<(PutOutcome, TransferStats), Error> {
        self.publish(key, |file, temp_path| {
            let mut input = localfs::open(src)?;
            copy_stream(&mut input, src, file, temp_path, &Advancing(progress))
        })
    }

    fn put_bytes_if_absent(
        &self,
        key: &ObjectKey,
        bytes: &[u8],
    ) -> Result<(PutOutcome, TransferStats), Error> {
        self.publish(key, |file, temp_path| {
            file.write_all(bytes).map_err(|e| localfs::Error::io("write", temp_path, e))?;
            Ok(bytes.len() as u64)
        })
    }

    fn capabilities(&self) -> Capabilities {
        StoreUrl::directory(&self.root).capabilities()
    }

    fn listing(&self) -> Option<&dyn ListObjects> {
        Some(self)
    }

    fn deleting(&self) -> Option<&dyn DeleteObjects> {
        Some(self)
    }

    fn retried_requests(&self) -> u64 {
        0
    }

    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }
}

impl ListObjects for FsStore {
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, Error> {
        // Walk only the deepest directory the prefix names.
        let start_rel = prefix.rfind('/').map_or("", |i| prefix.get(..i).unwrap_or_default());
        let start =
            if start_rel.is_empty() { self.root.clone() } else { self.root.join(start_rel) };
        match localfs::symlink_metadata_opt(&start)? {
            Some(m) if m.is_dir() => {}
            _ => return Ok(Vec::new()),
        }
        let mut out = Vec::new();
        for entry in localfs::walk(&start) {
            let entry = match entry {
                Ok(entry) => entry,
                // Deleted between the directory read and its `lstat` (a concurrent gc or
                // lease release): not in the listing, as on S3.
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            };
            if entry.kind != localfs::EntryKind::File || is_temp_name(&entry.path) {
                continue;
            }
            let rel = if start_rel.is_empty() {
                entry.rel.as_str().to_owned()
            } else {
                format!("{start_rel}/{}", entry.rel.as_str())
            };
            if !rel.starts_with(prefix) {
                continue;
            }
            match ObjectKey::new(rel) {
                Ok(key) => out.push(Self::meta_of(key, &entry.metadata)),
                Err(e) => tracing::warn!("skipping {}: {e}", entry.path.display()),
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

impl DeleteObjects for FsStore {
    fn delete(&self, key: &ObjectKey) -> Result<(), Error> {
        let path = self.path_of(key);
        match localfs::symlink_metadata_opt(&path)? {
            Some(m) if m.is_dir() => Ok(()),
            _ => Ok(localfs::remove_file(&path)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised() {
        // Written by the current release (tempfile) and by this one (TempName).
        assert!(is_temp_name(Path::new("/x/.strata-Ab12Cd.tmp")));
        assert!(is_temp_name(Path::new("/x/.strata-0123456789abcdef.tmp")));
        assert!(!is_temp_name(Path::new("/x/strata-Ab12Cd.tmp")));
        assert!(!is_temp_name(Path::new("/x/.strata-Ab12Cd")));
        assert!(!is_temp_name(Path::new("/x/.strata-abc.tmp")));
    }
}
