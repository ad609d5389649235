//! Archives: one published artifact as a single file for L0 transfer
//! (docs/artifact-store.md "L0 objects").
//!
//! # Format
//! A stream of the content layer's codec ([`crate::content::codec`]): zstd (level 3), tar,
//! holding, in this order:
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
//! The codec's reader checks every rule of [`crate::content::codec`]. Specific to L0: the
//! first entry must be the manifest (at most 16 MiB), which must load strictly and name
//! exactly the expected key and spec; no directory or symlink entries. Each following
//! entry must be the next listed file (same path, same size, regular file), checked before
//! it is written; it is written as a new file (never through a symlink) while hashed with
//! its record's algorithm, and the digest must match. Any extra, missing, reordered or
//! other-type entry, a damaged stream, or anything but zero padding after the tar stream's
//! end (in the zstd stream or in further frames) rejects the archive
//! ([`Error::InvalidArchive`]). Owners and times are not read; files get the private modes
//! (0600, 0700 with owner-exec) and the owner-exec bit must be the manifest's.

use std::path::Path;

use super::Error;
use super::handle::ArtifactHandle;
use super::identity::{ArtifactKey, ArtifactSpec, MANIFEST_NAME};
use super::manifest::{self, MAX_MANIFEST_BYTES, ManifestDigest, ManifestPayload};
use crate::content::Record;
use crate::content::codec::{self, ArchiveWriter, Compression, ManifestAt, ReadSpec, WriteOptions};
use crate::content::verify::Modes;
use crate::fs::{self, Sharing};

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

fn invalid(path: &Path, reason: impl Into<String>) -> Error {
    Error::InvalidArchive { path: path.to_path_buf(), reason: reason.into() }
}

/// Packs the artifact of `handle` into a new file `dest` (format in the module docs). The
/// slot is verified first, and every byte packed is hashed (once, as it is copied into the
/// stream) and compared with the manifest. `dest` must not exist; on error it may be left
/// partial (the caller removes it).
///
/// `progress` is told of the phase `pack`: the payload's bytes as they are read.
///
/// # Errors
/// [`Error::Corrupt`] if the slot does not verify or changes while packed; [`Error::Fs`].
pub fn pack(
    handle: &ArtifactHandle,
    dest: &Path,
    progress: &dyn crate::progress::Progress,
) -> Result<PackReport, Error> {
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
    let io_err = |e: std::io::Error| Error::from(fs::Error::io("write", dest, e));
    let options = WriteOptions {
        compression: Compression::Zstd,
        level: ZSTD_LEVEL,
        threads: 0,
        object_digest: crate::content::DEFAULT_ALGORITHM,
    };
    let mut writer = ArchiveWriter::new(file, &options).map_err(io_err)?;
    let _phase = crate::progress::Phase::begin(progress, "pack", payload.total_bytes());
    writer
        .small_file(MANIFEST_NAME.as_bytes(), Sharing::Private.file_mode(false), &manifest_bytes)
        .map_err(io_err)?;
    for record in &payload.files {
        let src = record.path.to_path(&slot);
        let input = crate::progress::Reader::new(fs::open_nofollow(&src)?, progress);
        let mode = Sharing::Private.file_mode(record.executable);
        let got = writer
            .file(&record.path, record.size_bytes, mode, input, record.digest.algorithm())
            .map_err(|e| Error::Corrupt {
                path: src.clone(),
                reason: format!("cannot pack it ({e}); it changed while it was packed?"),
            })?;
        if got != record.digest {
            return Err(Error::Corrupt {
                path: src,
                reason: "the file changed while it was packed".into(),
            });
        }
    }
    let written = writer.finish().map_err(io_err)?;
    fs::sync_file(&written.out, dest)?;
    Ok(PackReport {
        files: payload.files.len(),
        payload_bytes: payload.total_bytes(),
        archive_bytes: written.object_size_bytes,
    })
}

/// L0 archives hold no symlinks.
fn no_symlinks(rel: &crate::fs::RelPath) -> Result<(), String> {
    Err(format!("{rel} is a symlink; L0 archives hold regular files only"))
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
    let mut file = fs::open_nofollow(archive)?;
    let read_spec = ReadSpec {
        what: "an L0 archive",
        kind_of_archive: "L0 archives",
        compression: Some(Compression::Zstd),
        manifest_name: MANIFEST_NAME,
        manifest_at: ManifestAt::First,
        max_manifest_bytes: MAX_MANIFEST_BYTES,
        max_entries: u64::MAX,
        max_file_bytes: u64::MAX,
        directories: false,
        root: None,
        subtree: None,
        symlink_allowed: &no_symlinks,
        modes: Modes::of(Sharing::Private),
        algorithm: crate::content::DEFAULT_ALGORITHM,
        writer_threads: true,
        input_bytes: None,
    };
    let parse = |bytes: &[u8]| {
        let (payload, digest) = manifest::decode_received(bytes)?;
        if payload.key != key.record() || payload.spec != spec.record() {
            return Err("the archive holds another key or spec than requested".to_owned());
        }
        let records = payload.files.iter().cloned().map(Record::File).collect();
        Ok(((payload, digest), records))
    };
    let extracted = codec::extract(&mut file, dest, &read_spec, parse).map_err(|e| match e {
        codec::Error::Archive(reason) => invalid(archive, reason),
        codec::Error::Local(e) => Error::from(e),
    })?;
    Ok(extracted.manifest)
}
