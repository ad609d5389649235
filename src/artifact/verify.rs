//! Validation of published slots and private build trees by enumerating the real tree
//! (seed 000, "布局与校验"; docs/artifact-store.md "Read order").
//!
//! Read order of a slot (every step only reads):
//! 1. chain check: every component from the canonical root down to the slot is `lstat`ed
//!    and must be a real directory (a missing one is a MISS; a symlink or a file is
//!    INVALID; a permission error is STORAGE_ERROR);
//! 2. the slot tree is walked without following anything; the top-level
//!    `artifact_manifest.json` must be a regular file; every other entry must be a directory
//!    or a regular file with a safe relative UTF-8 name; symlinks, FIFOs, sockets and
//!    devices are INVALID;
//! 3. the manifest is read (`O_NOFOLLOW`, at most 16 MiB) and loaded strictly
//!    ([`super::manifest::decode`]); its digests must equal the slot's path and, for a
//!    request, its key and spec records must equal the request's;
//! 4. the walked files must be exactly the listed files, with the listed sizes and
//!    owner-exec bits (cheap, before any hashing);
//! 5. every file is hashed in parallel (rayon), opened with `O_NOFOLLOW`, with race
//!    detection ([`crate::fs::hash_file_stable`]), and must have the listed SHA-256.
//!
//! Paths named in the manifest are never used to open files: only walked paths are opened,
//! after the walked list was found equal to the manifest's list.
//!
//! Step 5 is skipped for a file whose stamp (dev, inode, size, mtime, ctime, mode) equals
//! the stamp recorded when this same handle last hashed it (the handle's memo; see
//! [`super::ArtifactHandle::verify`] for the trust boundary).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path};
use std::sync::Mutex;

use rayon::prelude::*;

use super::identity::{ArtifactKey, ArtifactSpec, MANIFEST_NAME};
use super::layout::{SlotPath, StoreRoot};
use super::manifest::{self, FileRecord, MAX_MANIFEST_BYTES, ManifestDigest, ManifestPayload};
use crate::digest::Sha256Digest;
use crate::fs::{self, EntryKind, FileStamp, RelPath};

/// Why a slot or tree did not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Nothing there (a MISS).
    Missing,
    /// Something there, but not a valid artifact (INVALID), with the reason.
    Invalid(String),
    /// The storage could not be read (STORAGE_ERROR), with the reason.
    Storage(String),
}

impl Problem {
    pub(crate) fn reason(&self) -> String {
        match self {
            Problem::Missing => "not found".into(),
            Problem::Invalid(r) | Problem::Storage(r) => r.clone(),
        }
    }
}

/// Maps a filesystem error met while reading a slot: damage-like causes (vanished file,
/// symlink where a file was, wrong type, bad name, concurrent change) are INVALID;
/// anything else (permission, I/O) is STORAGE_ERROR.
pub(crate) fn classify(error: &fs::Error) -> Problem {
    use rustix::io::Errno;
    let damage = match error {
        fs::Error::ChangedWhileReading { .. }
        | fs::Error::UnsafePath { .. }
        | fs::Error::SpecialFile { .. }
        | fs::Error::WrongFileType { .. } => true,
        _ if error.is_not_found() => true,
        fs::Error::Io { source, .. } => {
            source.kind() == std::io::ErrorKind::InvalidInput
                || matches!(
                    source.raw_os_error(),
                    Some(code) if code == Errno::LOOP.raw_os_error() || code == Errno::NOTDIR.raw_os_error()
                )
        }
        _ => false,
    };
    if damage { Problem::Invalid(error.to_string()) } else { Problem::Storage(error.to_string()) }
}

/// Checks that every component of `rel` below `root` is a real directory (not a symlink,
/// not a file). `root` itself was canonicalised when the store was opened.
pub(crate) fn chain_check(root: &Path, rel: &Path) -> Result<(), Problem> {
    let mut current = root.to_path_buf();
    let mut components = vec![None];
    components.extend(rel.components().map(Some));
    for component in components {
        if let Some(component) = component {
            let Component::Normal(name) = component else {
                return Err(Problem::Invalid(format!(
                    "{} is not a plain relative path",
                    rel.display()
                )));
            };
            current.push(name);
        }
        match fs::symlink_metadata_opt(&current) {
            Ok(None) => return Err(Problem::Missing),
            Ok(Some(meta)) if meta.file_type().is_symlink() => {
                return Err(Problem::Invalid(format!(
                    "{} is a symlink; nothing under the store root may be reached through a symlink",
                    current.display()
                )));
            }
            Ok(Some(meta)) if !meta.is_dir() => {
                return Err(Problem::Invalid(format!("{} is not a directory", current.display())));
            }
            Ok(Some(_)) => {}
            Err(e) => return Err(classify(&e)),
        }
    }
    Ok(())
}

/// One regular file found by walking a tree.
#[derive(Debug, Clone)]
pub(crate) struct TreeFile {
    pub rel: RelPath,
    pub size_bytes: u64,
    pub executable: bool,
    pub stamp: FileStamp,
}

/// Walks `dir` (never following links). Returns the regular files sorted by path, and
/// whether a top-level manifest file was present (only allowed with `allow_manifest`).
pub(crate) fn enumerate(
    dir: &Path,
    allow_manifest: bool,
) -> Result<(Vec<TreeFile>, bool), Problem> {
    let mut files = Vec::new();
    let mut manifest_seen = false;
    for entry in fs::walk(dir) {
        let entry = entry.map_err(|e| classify(&e))?;
        let top_manifest = entry.rel.as_str() == MANIFEST_NAME;
        match entry.kind {
            EntryKind::File if top_manifest && allow_manifest => manifest_seen = true,
            EntryKind::File if top_manifest => {
                return Err(Problem::Invalid(format!(
                    "{} is reserved for the store's manifest; a build must not produce it",
                    entry.path.display()
                )));
            }
            EntryKind::File => files.push(TreeFile {
                rel: entry.rel,
                size_bytes: entry.metadata.len(),
                executable: fs::perm::is_owner_exec(entry.metadata.permissions().mode()),
                stamp: FileStamp::of(&entry.metadata),
            }),
            EntryKind::Dir if top_manifest => {
                return Err(Problem::Invalid(format!(
                    "{} is not a regular file",
                    entry.path.display()
                )));
            }
            EntryKind::Dir => {}
            EntryKind::Symlink => {
                return Err(Problem::Invalid(format!(
                    "{} is a symlink; artifacts hold only regular files and directories",
                    entry.path.display()
                )));
            }
            EntryKind::Special(kind) => {
                return Err(Problem::Invalid(format!(
                    "{} is a {kind}; artifacts hold only regular files and directories",
                    entry.path.display()
                )));
            }
        }
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((files, manifest_seen))
}

/// Per-handle memo: for each file, the stamp it had and the digest it had when hashed.
pub(crate) type Memo = Mutex<HashMap<RelPath, (FileStamp, Sha256Digest)>>;

/// Hashes `files` under `dir` in parallel and returns their records (same order). With
/// `expected`, each digest is compared and a mismatch is INVALID; with `memo`, files whose
/// stamp is unchanged since they were hashed are not read again. Returns the records and
/// the number of bytes actually hashed.
pub(crate) fn hash_files(
    dir: &Path,
    files: &[TreeFile],
    expected: Option<&[FileRecord]>,
    memo: Option<&Memo>,
) -> Result<(Vec<FileRecord>, u64), Problem> {
    let remembered: HashMap<RelPath, (FileStamp, Sha256Digest)> =
        memo.and_then(|m| m.lock().ok().map(|g| g.clone())).unwrap_or_default();
    let results: Vec<Result<(FileRecord, u64, FileStamp), Problem>> = files
        .par_iter()
        .enumerate()
        .map(|(i, file)| {
            let want = expected.and_then(|e| e.get(i)).map(|r| r.sha256);
            if let (Some(want), Some((stamp, digest))) = (want, remembered.get(&file.rel))
                && *stamp == file.stamp
                && *digest == want
            {
                let record = FileRecord {
                    executable: file.executable,
                    path: file.rel.clone(),
                    sha256: *digest,
                    size_bytes: file.size_bytes,
                };
                return Ok((record, 0, *stamp));
            }
            let path = file.rel.to_path(dir);
            let (digest, size, stamp) = fs::hash_file_stable(&path).map_err(|e| classify(&e))?;
            if size != file.size_bytes || stamp != file.stamp {
                return Err(Problem::Invalid(format!(
                    "{} changed while the tree was being verified",
                    path.display()
                )));
            }
            if let Some(want) = want
                && want != digest
            {
                return Err(Problem::Invalid(format!(
                    "{} has SHA-256 {digest}, the manifest records {want}",
                    path.display()
                )));
            }
            let record = FileRecord {
                executable: file.executable,
                path: file.rel.clone(),
                sha256: digest,
                size_bytes: size,
            };
            Ok((record, size, stamp))
        })
        .collect();
    let mut records = Vec::with_capacity(results.len());
    let mut hashed = 0;
    let mut stamps = Vec::with_capacity(results.len());
    for result in results {
        let (record, bytes, stamp) = result?;
        hashed += bytes;
        stamps.push((record.path.clone(), (stamp, record.sha256)));
        records.push(record);
    }
    if let Some(memo) = memo
        && let Ok(mut guard) = memo.lock()
    {
        guard.clear();
        guard.extend(stamps);
    }
    Ok((records, hashed))
}

/// A slot that verified.
#[derive(Debug, Clone)]
pub(crate) struct Verified {
    pub manifest: ManifestPayload,
    pub digest: ManifestDigest,
    pub key: ArtifactKey,
    pub spec: ArtifactSpec,
    pub hashed_bytes: u64,
}

/// Verifies the slot at `slot` under `root` (read order in the module docs). With
/// `request`, the manifest's key and spec must be the request's.
pub(crate) fn verify_slot(
    root: &StoreRoot,
    slot: &SlotPath,
    request: Option<(&ArtifactKey, &ArtifactSpec)>,
    memo: Option<&Memo>,
) -> Result<Verified, Problem> {
    let bucket_rel = Path::new(super::layout::Bucket::NAME);
    chain_check(root.path(), &bucket_rel.join(slot.relative()))?;
    let dir = slot.dir();
    let (files, manifest_seen) = enumerate(&dir, true)?;
    if !manifest_seen {
        return Err(Problem::Invalid(format!(
            "{} has no {MANIFEST_NAME} (an incomplete or foreign directory)",
            dir.display()
        )));
    }
    let bytes = match fs::read_capped_nofollow(&slot.manifest(), MAX_MANIFEST_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Err(Problem::Invalid(format!(
                "{} is larger than {MAX_MANIFEST_BYTES} bytes",
                slot.manifest().display()
            )));
        }
        Err(e) => return Err(classify(&e)),
    };
    let (manifest, digest) = manifest::decode(&bytes).map_err(Problem::Invalid)?;
    let (key, spec) = manifest.check().map_err(Problem::Invalid)?;
    if manifest.key_digest != slot.key()
        || manifest.spec_digest != slot.spec()
        || manifest.env_digest != slot.env()
        || spec.stage() != slot.stage()
    {
        return Err(Problem::Invalid(format!(
            "manifest of {} describes another slot (key {}, spec {}, stage {})",
            dir.display(),
            manifest.key_digest,
            manifest.spec_digest,
            spec.stage()
        )));
    }
    if let Some((want_key, want_spec)) = request
        && (key != *want_key || spec != *want_spec)
    {
        return Err(Problem::Invalid(format!(
            "manifest of {} records another key or spec than requested",
            dir.display()
        )));
    }
    compare_listing(&dir, &files, &manifest.files)?;
    let (_, hashed_bytes) = hash_files(&dir, &files, Some(&manifest.files), memo)?;
    Ok(Verified { manifest, digest, key, spec, hashed_bytes })
}

/// `dir/rel` for messages: the relative part in its recorded form (the name encoding), so
/// a name that is not UTF-8 is shown exactly, never lossily.
fn shown(dir: &Path, rel: &RelPath) -> String {
    format!("{}/{rel}", dir.display())
}

/// Compares the walked files with the manifest's list: same paths, sizes, owner-exec bits.
pub(crate) fn compare_listing(
    dir: &Path,
    actual: &[TreeFile],
    listed: &[FileRecord],
) -> Result<(), Problem> {
    let mut a = actual.iter().peekable();
    let mut l = listed.iter().peekable();
    loop {
        match (a.peek(), l.peek()) {
            (None, None) => return Ok(()),
            (Some(file), None) => {
                return Err(Problem::Invalid(format!(
                    "{} is not listed in the manifest (extra file)",
                    shown(dir, &file.rel)
                )));
            }
            (None, Some(record)) => {
                return Err(Problem::Invalid(format!(
                    "{} is listed in the manifest but missing",
                    shown(dir, &record.path)
                )));
            }
            (Some(file), Some(record)) => {
                if file.rel < record.path {
                    return Err(Problem::Invalid(format!(
                        "{} is not listed in the manifest (extra file)",
                        shown(dir, &file.rel)
                    )));
                }
                if file.rel > record.path {
                    return Err(Problem::Invalid(format!(
                        "{} is listed in the manifest but missing",
                        shown(dir, &record.path)
                    )));
                }
                if file.size_bytes != record.size_bytes {
                    return Err(Problem::Invalid(format!(
                        "{} has {} bytes, the manifest records {}",
                        shown(dir, &file.rel),
                        file.size_bytes,
                        record.size_bytes
                    )));
                }
                if file.executable != record.executable {
                    return Err(Problem::Invalid(format!(
                        "{} has owner-exec {}, the manifest records {}",
                        shown(dir, &file.rel),
                        file.executable,
                        record.executable
                    )));
                }
                a.next();
                l.next();
            }
        }
    }
}

/// Inventories a private build tree: regular files and directories only, the reserved
/// manifest name refused, every file hashed. Returns the records sorted by path.
pub(crate) fn inventory_build(dir: &Path) -> Result<Vec<FileRecord>, Problem> {
    let (files, _) = enumerate(dir, false)?;
    let (records, _) = hash_files(dir, &files, None, None)?;
    Ok(records)
}
