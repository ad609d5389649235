//! Archives: one published artifact as a single file for L0 transfer (issue 4 item 11;
//! docs/artifact-store.md "L0 objects").
//!
//! # Format
//! A zstd-compressed (level 3) POSIX tar stream holding, in this order:
//! 1. `artifact_manifest.json`: the slot's manifest record, byte for byte;
//! 2. every payload file, in manifest order (sorted by path), as a regular-file entry
//!    with mode 0600 (0700 with owner-exec), uid/gid 0, mtime 0 and no user/group names,
//!    so packing the same artifact twice gives the same bytes.
//!
//! No directory, link or device entries. Long paths use the GNU long-name extension
//! (accepted up to 64 KiB when reading); no pax or sparse headers (rejected when reading).
//! Entry names are the files' exact bytes (a name that is not UTF-8 is stored as it is on
//! disk); the manifest records them in the name encoding ([`crate::fs::name`]), and each
//! entry must carry exactly the bytes its manifest path decodes to.
//!
//! # Checking an archive ([`unpack`])
//! The first entry must be the manifest (at most 16 MiB), which must load strictly and
//! name exactly the expected key and spec. Each following entry must be the next listed
//! file (same path, same size, regular file); it is written as a new file (never through a
//! symlink) while hashed, and its SHA-256 must match. Any extra, missing, reordered or
//! other-type entry, a damaged stream, or anything but zero padding after the tar stream's
//! end (in the zstd stream or in further frames) rejects the archive
//! ([`Error::InvalidArchive`]). Entry modes, owners and times are not read: the manifest's
//! owner-exec bit decides each file's mode.
//! Paths come from the manifest's validated [`crate::fs::RelPath`]s, so nothing is written
//! outside the destination.

use std::io::{self, Read, Write};
use std::path::Path;

use super::Error;
use super::handle::ArtifactHandle;
use super::identity::{ArtifactKey, ArtifactSpec, MANIFEST_NAME};
use super::manifest::{self, MAX_MANIFEST_BYTES, ManifestDigest, ManifestPayload};
use crate::digest::ContentHasher;
use crate::fs::{self, Sharing};
use crate::tar_entry;

/// zstd level used for archives.
pub const ZSTD_LEVEL: i32 = 3;

/// What [`pack`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackReport {
    /// Payload files.
    pub files: usize,
    /// Payload bytes (uncompressed).
    pub payload_bytes: u64,
    /// Size of the archive file in bytes.
    pub archive_bytes: u64,
}

/// A reader that hashes what passes through it.
struct HashingReader<R> {
    inner: R,
    hasher: ContentHasher,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> Error {
    Error::InvalidArchive { path: path.to_path_buf(), reason: reason.into() }
}

fn header(size: u64, mode: u32) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

/// Packs the artifact of `handle` into a new file `dest` (format in the module docs). The
/// slot is verified first, and every byte packed is hashed and compared with the manifest.
/// `dest` must not exist; on error it may be left partial (the caller removes it).
///
/// # Errors
/// [`Error::Corrupt`] if the slot does not verify or changes while packed; [`Error::Fs`].
pub fn pack(handle: &ArtifactHandle, dest: &Path) -> Result<PackReport, Error> {
    handle.verify()?;
    let slot = handle.dir();
    let manifest_path = slot.join(MANIFEST_NAME);
    let manifest_bytes =
        fs::read_capped_nofollow(&manifest_path, MAX_MANIFEST_BYTES)?.ok_or_else(|| {
            Error::Corrupt { path: manifest_path.clone(), reason: "too large".into() }
        })?;
    let (payload, digest) = manifest::decode(&manifest_bytes)
        .map_err(|reason| Error::Corrupt { path: manifest_path.clone(), reason })?;
    if digest != handle.manifest_digest() {
        return Err(Error::Corrupt {
            path: manifest_path,
            reason: "the manifest changed since the slot was verified".into(),
        });
    }
    let file = fs::create_new(dest, 0o600)?;
    let io_err = |e: io::Error| Error::from(fs::Error::io("write", dest, e));
    let mut encoder = zstd::Encoder::new(file, ZSTD_LEVEL).map_err(io_err)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    if threads > 1 {
        encoder.multithread(threads).map_err(io_err)?;
    }
    let mut builder = tar::Builder::new(encoder);
    builder.mode(tar::HeaderMode::Deterministic);
    let mut h = header(manifest_bytes.len() as u64, 0o600);
    tar_entry::append(
        &mut builder,
        &mut h,
        MANIFEST_NAME.as_bytes(),
        None,
        manifest_bytes.as_slice(),
    )
    .map_err(io_err)?;
    for record in &payload.files {
        let src = record.path.to_path(&slot);
        let input = fs::open_nofollow(&src)?;
        let mut reader = HashingReader {
            inner: input.take(record.size_bytes),
            hasher: ContentHasher::new(record.digest.algorithm()),
        };
        let mut h = header(record.size_bytes, Sharing::Private.file_mode(record.executable));
        tar_entry::append(&mut builder, &mut h, &record.path.to_bytes(), None, &mut reader)
            .map_err(io_err)?;
        let size = reader.hasher.len();
        let digest = reader.hasher.finish();
        if digest != record.digest || size != record.size_bytes {
            return Err(Error::Corrupt {
                path: src,
                reason: "the file changed while it was packed".into(),
            });
        }
    }
    let encoder = builder.into_inner().map_err(io_err)?;
    let file = encoder.finish().map_err(io_err)?;
    fs::sync_file(&file, dest)?;
    let archive_bytes = file.metadata().map_err(|e| fs::Error::io("stat", dest, e))?.len();
    Ok(PackReport {
        files: payload.files.len(),
        payload_bytes: payload.total_bytes(),
        archive_bytes,
    })
}

/// Checks the archive `archive` against `key` and `spec` while unpacking its payload into
/// `dest` (an existing empty directory; module docs). Returns the archived manifest and its
/// digest.
///
/// # Errors
/// [`Error::InvalidArchive`] for anything that does not match; [`Error::Fs`] for local I/O.
pub fn unpack(
    archive: &Path,
    dest: &Path,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
) -> Result<(ManifestPayload, ManifestDigest), Error> {
    let file = fs::open_nofollow(archive)?;
    let decoder =
        zstd::Decoder::new(file).map_err(|e| invalid(archive, format!("not zstd: {e}")))?;
    let mut tar = tar::Archive::new(crate::tar_entry::ExtensionLimit::new(decoder, "L0 archives"));
    let mut entries =
        tar.entries().map_err(|e| invalid(archive, format!("not a tar stream: {e}")))?;
    let mut next = || -> Result<Option<tar::Entry<'_, ArchiveReader>>, Error> {
        match entries.next() {
            None => Ok(None),
            Some(Ok(entry)) => Ok(Some(entry)),
            Some(Err(e)) => Err(invalid(archive, format!("damaged tar stream: {e}"))),
        }
    };
    let Some(mut first) = next()? else {
        return Err(invalid(archive, "empty archive"));
    };
    if first.path_bytes().as_ref() != MANIFEST_NAME.as_bytes()
        || first.header().entry_type() != tar::EntryType::Regular
    {
        return Err(invalid(archive, format!("the first entry is not {MANIFEST_NAME}")));
    }
    if first.size() > MAX_MANIFEST_BYTES {
        return Err(invalid(archive, "the manifest is larger than 16 MiB"));
    }
    let mut manifest_bytes = Vec::new();
    first
        .read_to_end(&mut manifest_bytes)
        .map_err(|e| invalid(archive, format!("damaged manifest entry: {e}")))?;
    drop(first);
    let (payload, digest) =
        manifest::decode_received(&manifest_bytes).map_err(|reason| invalid(archive, reason))?;
    if payload.key != key.record() || payload.spec != spec.record() {
        return Err(invalid(archive, "the archive holds another key or spec than requested"));
    }
    for record in &payload.files {
        let Some(mut entry) = next()? else {
            return Err(invalid(archive, format!("{} is missing", record.path)));
        };
        if entry.path_bytes().as_ref() != record.path.to_bytes().as_slice() {
            return Err(invalid(
                archive,
                format!(
                    "expected {} next, found {:?}",
                    record.path,
                    fs::name::encode(entry.path_bytes().as_ref())
                ),
            ));
        }
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(invalid(archive, format!("{} is not a regular file entry", record.path)));
        }
        if entry.size() != record.size_bytes {
            return Err(invalid(
                archive,
                format!(
                    "{} has {} bytes, the manifest records {}",
                    record.path,
                    entry.size(),
                    record.size_bytes
                ),
            ));
        }
        if let Some(parent) = record.path.parent() {
            fs::create_dir_all_within(
                dest,
                &parent.to_relative_path(),
                Sharing::Private.dir_mode(),
            )?;
        }
        let target = record.path.to_path(dest);
        let mut out = fs::create_new(&target, Sharing::Private.file_mode(record.executable))?;
        let mut hasher = ContentHasher::new(record.digest.algorithm());
        let mut buf = vec![0u8; 1024 * 1024];
        loop {
            let n = match entry.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(invalid(archive, format!("damaged data of {}: {e}", record.path)));
                }
            };
            let chunk = buf.get(..n).unwrap_or_default();
            hasher.update(chunk);
            out.write_all(chunk).map_err(|e| fs::Error::io("write", &target, e))?;
        }
        fs::set_mode(&target, Sharing::Private.file_mode(record.executable))?;
        let size = hasher.len();
        let got = hasher.finish();
        if got != record.digest || size != record.size_bytes {
            return Err(invalid(
                archive,
                format!("{} has digest {got}, the manifest records {}", record.path, record.digest),
            ));
        }
    }
    if let Some(extra) = next()? {
        return Err(invalid(
            archive,
            format!("unexpected extra entry {:?}", fs::name::encode(extra.path_bytes().as_ref())),
        ));
    }
    // After the end-of-archive block only zero padding may follow, in this zstd stream or
    // in further frames; anything else (data hidden after the end, garbage after the
    // frame) rejects the archive.
    let mut rest = tar.into_inner().into_inner();
    let mut buf = vec![0u8; 64 * 1024];
    let mut trailing_bytes = 0u64;
    loop {
        let n = match rest.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(invalid(archive, format!("damaged data after the tar stream: {e}")));
            }
        };
        trailing_bytes += n as u64;
        if trailing_bytes > MAX_TRAILING_ZERO_BYTES
            || buf.get(..n).unwrap_or_default().iter().any(|b| *b != 0)
        {
            return Err(invalid(archive, "data after the end of the tar stream"));
        }
    }
    Ok((payload, digest))
}

/// Zero padding accepted after the tar end-of-archive block, in bytes (tar implementations
/// pad to a record of at most 20 blocks; 1 MiB is far above that).
const MAX_TRAILING_ZERO_BYTES: u64 = 1024 * 1024;

/// What the `tar` crate reads an L0 archive from.
type ArchiveReader =
    crate::tar_entry::ExtensionLimit<zstd::Decoder<'static, io::BufReader<std::fs::File>>>;
