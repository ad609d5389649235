//! Validation of published slots and private build trees by enumerating the real tree
//! (docs/artifact-store.md "Read order").
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
//!    detection ([`crate::fs::hash_file_stable`]), and must have the listed digest (under
//!    the algorithm the digest names: BLAKE3 in new manifests, SHA-256 in those of earlier
//!    releases).
//!
//! Steps 4 and 5 are the content layer's [`crate::content::tree::compare`] and
//! [`crate::content::verify::check_files`].
//!
//! Paths named in the manifest are never used to open files: only walked paths are opened,
//! after the walked list was found equal to the manifest's list.
//!
//! Step 5 is skipped for a file whose stamp (dev, inode, size, mtime, ctime, mode) equals
//! the stamp recorded when this same handle last hashed it (the handle's in-memory
//! [`VerifyMemo`], with its racy-stamp rule; see [`super::ArtifactHandle::verify`] for the
//! trust boundary).

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path};
use std::sync::Mutex;

use super::identity::{ArtifactKey, ArtifactSpec, MANIFEST_NAME};
use super::layout::{SlotPath, StoreRoot};
use super::manifest::{self, FileRecord, MAX_MANIFEST_BYTES, ManifestDigest, ManifestPayload};
pub(crate) use crate::content::Problem;
use crate::content::{self, Directories, Record, Rules, VerifyMemo, tree};
use crate::digest::DigestAlgorithm;
use crate::fs::{self, EntryKind, FileStamp, RelPath};

/// What a slot may hold: regular files, any directories, its own manifest at the top.
pub(crate) const SLOT_RULES: Rules = Rules {
    symlinks: false,
    directories: Directories::Ignored,
    reserved: Some(MANIFEST_NAME),
    allow_empty: true,
};

/// [`Problem::classify`].
pub(crate) fn classify(error: &fs::Error) -> Problem {
    Problem::classify(error)
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

/// Per-handle memo (in memory only): the content layer's [`VerifyMemo`].
pub(crate) type Memo = Mutex<VerifyMemo>;

/// The manifest's files as content records.
pub(crate) fn records_of(files: &[FileRecord]) -> Vec<Record> {
    files.iter().cloned().map(Record::File).collect()
}

/// Hashes the walked `files` under `dir` in parallel with `algorithm` and returns their
/// records (same order). A file that changed since it was walked is INVALID.
pub(crate) fn hash_new(
    dir: &Path,
    files: &[TreeFile],
    algorithm: DigestAlgorithm,
) -> Result<Vec<FileRecord>, Problem> {
    let hashed = crate::parallel::map(files, crate::parallel::Workers::Pool, |file| {
        let path = file.rel.to_path(dir);
        let (digest, size, stamp) =
            fs::hash_file_stable(&path, algorithm).map_err(|e| classify(&e))?;
        if size != file.size_bytes || stamp != file.stamp {
            return Err(Problem::Invalid(format!(
                "{} changed while the tree was being read",
                path.display()
            )));
        }
        Ok(FileRecord {
            executable: file.executable,
            path: file.rel.clone(),
            digest,
            size_bytes: size,
        })
    });
    hashed.into_iter().collect()
}

/// Compares the tree at `dir` with `files` (listing first, then every byte; with `memo`,
/// files it vouches for are not read). Returns the bytes hashed.
pub(crate) fn check_tree(
    dir: &Path,
    files: &[FileRecord],
    memo: Option<&Memo>,
) -> Result<u64, Problem> {
    let records = records_of(files);
    tree::check_records(&records, &SLOT_RULES).map_err(Problem::Invalid)?;
    let found = tree::compare(dir, &records, &SLOT_RULES)?;
    let checked = match memo.map(Mutex::lock) {
        Some(Ok(mut guard)) => {
            content::verify::check_files(dir, &records, &found, Some(&mut guard))?
        }
        _ => content::verify::check_files(dir, &records, &found, None)?,
    };
    Ok(checked.hashed_bytes)
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
    match fs::symlink_metadata_opt(&slot.manifest()) {
        Ok(Some(meta)) if meta.is_file() => {}
        Ok(Some(_)) => {
            return Err(Problem::Invalid(format!(
                "{} is not a regular file",
                slot.manifest().display()
            )));
        }
        Ok(None) => {
            return Err(Problem::Invalid(format!(
                "{} has no {MANIFEST_NAME} (an incomplete or foreign directory)",
                dir.display()
            )));
        }
        Err(e) => return Err(classify(&e)),
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
    let hashed_bytes = check_tree(&dir, &manifest.files, memo)?;
    Ok(Verified { manifest, digest, key, spec, hashed_bytes })
}

/// Inventories a private build tree: regular files and directories only, the reserved
/// manifest name refused, every file hashed with `algorithm`. Returns the records sorted by path.
pub(crate) fn inventory_build(
    dir: &Path,
    algorithm: DigestAlgorithm,
) -> Result<Vec<FileRecord>, Problem> {
    let (files, _) = enumerate(dir, false)?;
    hash_new(dir, &files, algorithm)
}
