//! Entries: manifest, validation, restore and save (seed 003 "条目与产物生命周期";
//! docs/format.md "Action entry").
//!
//! Read order (a HIT):
//! 1. `manifest.json` must be a regular file of at most 16 MiB that loads as a
//!    `strata.action_entry` v1 record (strict parse, schema, digest: see [`crate::record`]);
//! 2. its domain, unit, action names, key and namespace must equal the request;
//! 3. the real tree under `artifacts/` is enumerated (never by opening paths the manifest
//!    names) and must hold exactly the recorded files (same size and owner-exec bit) and
//!    symlinks (same text), plus the directories leading to them, and nothing else;
//! 4. restore reads each cached file once: it copies it while hashing and renames the copy
//!    into place only if the SHA-256 matches (so a flipped byte never reaches the output),
//!    or, if the entry's verification memo ([`crate::verify_memo`], under
//!    `.local/verify-memo/`) vouches for the file's current stamp (device, inode, size,
//!    mtime, ctime, mode all unchanged since a full check), copies it with
//!    `copy_file_range` without hashing. Either way the file's stamp must not change
//!    during the copy. Files hashed in full are remembered in the memo for the next HIT.
//!
//! Any failure in 1–3 is [`Lookup::Invalid`] with a reason and in 4 an error: the caller
//! turns both into a MISS with a warning, rebuilds, and replaces the entry.
//!
//! Before step 1, every component from `<cache root>/actions-v1` down to the entry is
//! checked with `lstat` (3 or 6 calls): a symlinked component (a domain, unit, namespace,
//! key) makes the entry [`Lookup::Invalid`], so a HIT is never served from outside the
//! cache root; a save creates those components with [`fs::create_dir_all_within`], which
//! refuses to pass through a symlink, so no entry is ever written outside it either.
//! (`actions-v1` itself and the cache root are the user's choice and may be symlinks.)
//!
//! Write order (a save, under the entry lock): stage a sibling `.<key>.tmp-<hex>` directory,
//! copy each artifact while hashing and compare with the digest taken when it was
//! described, write both records, fsync everything, publish with
//! `renameat2(RENAME_NOREPLACE)`. An invalid entry in the way is first renamed to
//! `.<key>.old-<hex>` and deleted after the new one is in place; a crash in between leaves
//! no entry (a MISS), never a partial one.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::action::identity::Components;
use crate::action::layout::EntryLocation;
use crate::action::{ActionKey, Domain, Error};
use crate::content::temp::{self, Purpose, TempName};
use crate::digest::{ContentDigest, Sha256Digest};
use crate::fs::{self, InventoryKind, Placement, RelPath, Sharing};
use crate::record::{self, Envelope, Schema};
use crate::verify_memo::VerifyMemo;

/// Schema of an entry manifest.
pub const ENTRY_SCHEMA: Schema = Schema { name: "strata.action_entry", version: 1, features: &[] };
/// Schema of an entry's identity record.
pub const IDENTITY_SCHEMA: Schema =
    Schema { name: "strata.action_identity", version: 1, features: &[] };
/// Largest manifest read, in bytes.
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// One artifact of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Artifact {
    /// A regular file.
    File {
        /// Path relative to the output root.
        path: RelPath,
        /// Size in bytes.
        size_bytes: u64,
        /// SHA-256 of the content.
        sha256: Sha256Digest,
        /// Owner-exec bit.
        executable: bool,
    },
    /// A symlink, stored with its exact text.
    Symlink {
        /// Path relative to the output root.
        path: RelPath,
        /// The link text.
        target: String,
    },
}

impl Artifact {
    /// The relative path.
    pub fn path(&self) -> &RelPath {
        match self {
            Artifact::File { path, .. } | Artifact::Symlink { path, .. } => path,
        }
    }
}

/// The payload of `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryManifest {
    /// Domain.
    pub domain: Domain,
    /// `--unit`.
    pub unit: String,
    /// `--soc`.
    pub soc: Option<String>,
    /// `--operator`.
    pub operator: Option<String>,
    /// `--action`.
    pub action: Option<String>,
    /// The action key.
    pub key: ActionKey,
    /// Namespace of custom operators.
    pub operator_text_hash: Option<Sha256Digest>,
    /// Component hash.
    pub prepared_input_hash: Sha256Digest,
    /// Component hash.
    pub recipe_hash: Sha256Digest,
    /// Component hash.
    pub compiler_environment_hash: Sha256Digest,
    /// Artifacts, sorted by path, paths unique.
    pub artifacts: Vec<Artifact>,
    /// Wall time of the build command, in milliseconds.
    pub build_ms: u64,
    /// Save time, UTC RFC 3339.
    pub created_at: String,
}

impl EntryManifest {
    /// What a valid entry for this request must record (no artifacts yet, no build time):
    /// the manifest a lookup compares against, completed by the save.
    pub fn expected(
        name: &crate::action::layout::EntryName<'_>,
        identity: &crate::action::Identity,
    ) -> Self {
        EntryManifest {
            domain: name.domain,
            unit: name.unit.to_owned(),
            soc: name.soc.map(str::to_owned),
            operator: name.operator.map(str::to_owned),
            action: name.action.map(str::to_owned),
            key: identity.key,
            operator_text_hash: identity.operator_text_hash,
            prepared_input_hash: identity.prepared_input_hash,
            recipe_hash: identity.recipe_hash,
            compiler_environment_hash: identity.compiler_environment_hash,
            artifacts: Vec::new(),
            build_ms: 0,
            created_at: String::new(),
        }
    }
}

/// Result of looking an entry up.
#[derive(Debug)]
pub enum Lookup {
    /// No entry directory.
    Absent,
    /// An entry that must not be used, and why.
    Invalid(String),
    /// A structurally valid entry; content is verified during restore.
    Valid(Box<EntryManifest>),
}

/// Looks up and structurally validates the entry at `loc` against `expected`
/// (read order steps 1–3).
pub fn lookup(loc: &EntryLocation, expected: &EntryManifest) -> Lookup {
    match layout_components(loc) {
        Ok(false) => return Lookup::Absent,
        Ok(true) => {}
        Err(reason) => return Lookup::Invalid(reason),
    }
    match validate(&loc.dir, expected) {
        Ok(m) => Lookup::Valid(Box::new(m)),
        Err(reason) => Lookup::Invalid(reason),
    }
}

/// `lstat`s each component from the actions directory down to the entry (inclusive):
/// `Ok(true)` if all are real directories, `Ok(false)` if one does not exist, `Err` with the
/// reason if one is a symlink or not a directory.
fn layout_components(loc: &EntryLocation) -> Result<bool, String> {
    let mut current = loc.actions_dir.clone();
    for component in loc.rel.split('/') {
        current.push(component);
        match fs::symlink_metadata_opt(&current) {
            Ok(None) => return Ok(false),
            Ok(Some(m)) if m.file_type().is_symlink() => {
                return Err(format!(
                    "{} is a symlink; strata never follows symlinks inside the cache layout \
                     (replace it with a real directory)",
                    current.display()
                ));
            }
            Ok(Some(m)) if !m.is_dir() => {
                return Err(format!("{} is not a directory", current.display()));
            }
            Ok(Some(_)) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(true)
}

fn validate(dir: &Path, expected: &EntryManifest) -> Result<EntryManifest, String> {
    let manifest_path = dir.join("manifest.json");
    let meta = fs::symlink_metadata_opt(&manifest_path)
        .map_err(|e| e.to_string())?
        .ok_or("manifest.json is missing")?;
    if !meta.is_file() {
        return Err("manifest.json is not a regular file".into());
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(format!("manifest.json is {} bytes, over the 16 MiB limit", meta.len()));
    }
    let bytes = fs::read(&manifest_path).map_err(|e| e.to_string())?;
    let (_, m) = record::load_as::<EntryManifest>(&bytes, &ENTRY_SCHEMA)
        .map_err(|e| format!("manifest.json: {}", crate::action::run::chain(&e)))?;
    if m.domain != expected.domain
        || m.unit != expected.unit
        || m.soc != expected.soc
        || m.operator != expected.operator
        || m.action != expected.action
    {
        return Err("manifest names another domain, unit or action".into());
    }
    if m.key != expected.key || m.operator_text_hash != expected.operator_text_hash {
        return Err("manifest records another key".into());
    }
    if m.artifacts.is_empty() {
        return Err("manifest lists no artifacts".into());
    }
    if m.artifacts.windows(2).any(|w| w.first().map(Artifact::path) >= w.get(1).map(Artifact::path))
    {
        return Err("manifest artifacts are not sorted and unique".into());
    }
    check_tree(&dir.join("artifacts"), &m.artifacts)?;
    Ok(m)
}

/// Compares the real tree under `root` with `artifacts` (sizes, exec bits, link texts; no
/// content hashing). The walk's order (names byte-wise, depth first) and the manifest's
/// (recorded paths as text) differ (`foo/y` before `foo-1/x` in one, after it in the
/// other), so the two are compared as sets, never zipped.
fn check_tree(root: &Path, artifacts: &[Artifact]) -> Result<(), String> {
    match fs::symlink_metadata_opt(root) {
        Ok(Some(m)) if m.is_dir() => {}
        _ => return Err("artifacts/ is missing or not a directory".into()),
    }
    let inventory = fs::inventory(root).map_err(|e| e.to_string())?;
    let mut dirs = std::collections::BTreeSet::new();
    for a in artifacts {
        let mut p = a.path().parent();
        while let Some(d) = p {
            p = d.parent();
            dirs.insert(d);
        }
    }
    let mut expected: std::collections::BTreeMap<&RelPath, &Artifact> =
        artifacts.iter().map(|a| (a.path(), a)).collect();
    for item in &inventory {
        match &item.kind {
            InventoryKind::Dir if dirs.contains(&item.rel) => continue,
            InventoryKind::Dir => {
                return Err(format!("unexpected directory artifacts/{}", item.rel));
            }
            _ => {}
        }
        let Some(want) = expected.remove(&item.rel) else {
            return Err(format!("unexpected file artifacts/{}", item.rel));
        };
        match (want, &item.kind) {
            (
                Artifact::File { size_bytes, executable, .. },
                InventoryKind::File { size, executable: x },
            ) if size == size_bytes && x == executable => {}
            (Artifact::Symlink { target, .. }, InventoryKind::Symlink { target: t })
                if t == target => {}
            _ => return Err(format!("artifacts/{} differs from the manifest", item.rel)),
        }
    }
    if let Some(missing) = expected.keys().next() {
        return Err(format!("artifacts/{missing} is missing"));
    }
    Ok(())
}

/// What a [`restore`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restored {
    /// Bytes of regular files placed.
    pub bytes: u64,
    /// Of those, bytes hashed (the rest were vouched for by the verification memo).
    pub hashed_bytes: u64,
    /// Files placed on the memo's word (their stamps unchanged since a full check).
    pub vouched_files: usize,
}

/// Restores `artifacts` from the entry at `entry_dir` into `dest_root`: files first (in
/// parallel, each read once: verified while copied, or copied unhashed when `memo` vouches
/// for its unchanged stamp), then symlinks. Parent directories are created without passing
/// through symlinks. Restored files get the current time as mtime. On success `memo`
/// remembers the files hashed in full and forgets paths the entry no longer has.
///
/// # Errors
/// [`crate::fs::Error::DigestMismatch`] for a corrupt artifact,
/// [`crate::fs::Error::ChangedWhileReading`] for one changed during the copy; I/O errors
/// naming paths.
pub fn restore(
    entry_dir: &Path,
    artifacts: &[Artifact],
    dest_root: &Path,
    memo: &mut VerifyMemo,
) -> Result<Restored, Error> {
    let src_root = entry_dir.join("artifacts");
    fs::create_dir_all(dest_root)?;
    let files: Vec<(&RelPath, &Sha256Digest, bool)> = artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::File { path, sha256, executable, .. } => Some((path, sha256, *executable)),
            Artifact::Symlink { .. } => None,
        })
        .collect();
    let began = SystemTime::now();
    let known: &VerifyMemo = memo;
    let results: Vec<Result<fs::Placed, Error>> =
        crate::parallel::map(&files, |(path, sha256, executable)| {
            let dest = place_parent(dest_root, path)?;
            let opts = Placement {
                expected: Some(**sha256),
                mode: Sharing::Shared.file_mode(*executable),
                sync: false,
            };
            let digest = ContentDigest::from(**sha256);
            let vouched = |stamp: &fs::FileStamp| known.vouches(path, stamp, &digest);
            Ok(fs::place_file_checked(&path.to_path(&src_root), &dest, opts, &vouched)?)
        });
    let mut placed = Vec::with_capacity(results.len());
    for r in results {
        placed.push(r?);
    }
    let mut restored = Restored::default();
    for ((path, sha256, _), p) in files.iter().zip(&placed) {
        restored.bytes += p.size_bytes;
        if p.hashed {
            restored.hashed_bytes += p.size_bytes;
            memo.remember(path, p.stamp, ContentDigest::from(**sha256), began);
        } else {
            restored.vouched_files += 1;
        }
    }
    let listed: std::collections::HashSet<&RelPath> = files.iter().map(|f| f.0).collect();
    memo.retain(|rel| listed.contains(rel));
    for a in artifacts {
        if let Artifact::Symlink { path, target } = a {
            let dest = place_parent(dest_root, path)?;
            fs::place_symlink_atomic(target, &dest)?;
        }
    }
    Ok(restored)
}

/// Creates the parent directories of `rel` under `root` (never through a symlink) and
/// returns the destination path.
pub(crate) fn place_parent(root: &Path, rel: &RelPath) -> Result<PathBuf, Error> {
    if let Some(parent) = rel.parent() {
        fs::create_dir_all_within(root, &parent.to_relative_path(), Sharing::Shared.dir_mode())?;
    }
    Ok(rel.to_path(root))
}

/// An artifact found after a build, with the file it was read from.
#[derive(Debug, Clone)]
pub struct Described {
    /// The record.
    pub artifact: Artifact,
    /// Where its bytes are.
    pub source: PathBuf,
}

/// Saves a new entry at `loc` (write order in the module docs). Call under the entry lock.
///
/// # Errors
/// I/O errors; [`crate::fs::Error::SymlinkInPath`] if a directory between the actions
/// directory and the entry is a symlink; [`crate::fs::Error::DigestMismatch`] if an
/// artifact changed since it was described. Nothing is published on error.
pub fn save(
    loc: &EntryLocation,
    manifest: &EntryManifest,
    components: &Components,
    described: &[Described],
) -> Result<(), Error> {
    // The actions directory may be a symlink (the user's choice); nothing below it may.
    fs::create_dir_all(&loc.actions_dir)?;
    let parent_rel = loc.rel.rsplit_once('/').map_or("", |(parent, _)| parent);
    fs::create_dir_all_within(&loc.actions_dir, Path::new(parent_rel), Sharing::Shared.dir_mode())?;
    let staging = temp::staging_beside(&loc.dir, Sharing::Shared.dir_mode())?;
    let art_root = staging.path().join("artifacts");
    fs::create_dir_all(&art_root)?;
    for d in described {
        let dest = place_parent(&art_root, d.artifact.path())?;
        match &d.artifact {
            Artifact::File { sha256, executable, .. } => {
                let mut file = fs::create_new(&dest, Sharing::Shared.file_mode(*executable))?;
                let (digest, _) = fs::copy_verified(&d.source, &mut file, &dest)?;
                if digest != *sha256 {
                    return Err(fs::Error::DigestMismatch {
                        path: d.source.clone(),
                        expected: *sha256,
                        actual: digest,
                    }
                    .into());
                }
                fs::set_mode(&dest, Sharing::Shared.file_mode(*executable))?;
            }
            Artifact::Symlink { target, .. } => fs::symlink(target, &dest)?,
        }
    }
    write_record(
        &staging.path().join("manifest.json"),
        &ENTRY_SCHEMA,
        manifest,
        WriteMode::CreateNew,
    )?;
    write_record(
        &staging.path().join("identity.json"),
        &IDENTITY_SCHEMA,
        components,
        WriteMode::CreateNew,
    )?;
    match fs::publish_dir(staging, &loc.dir, true) {
        Ok(()) => Ok(()),
        Err((fs::Error::AlreadyExists { .. }, staging)) => {
            // An invalid entry is in the way: move it aside, publish, delete it.
            let old =
                TempName::new(Purpose::Replaced, &manifest.key.to_string()).path_in(&loc.parent);
            fs::rename(&loc.dir, &old)?;
            let result = fs::publish_dir(staging, &loc.dir, true).map_err(|(e, _)| e);
            if let Err(e) = fs::remove_tree(&old) {
                tracing::warn!("could not remove replaced entry {}: {e}", old.display());
            }
            Ok(result?)
        }
        Err((e, _)) => Err(e.into()),
    }
}

/// How [`write_record`] writes its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteMode {
    /// A new file (fails if it exists), fsynced: records inside a staging directory.
    CreateNew,
    /// Temp file, fsync, rename over the old one: mutable state files.
    ReplaceAtomically,
}

/// Seals `payload` as a record of `schema` and writes it (mode 0644).
pub(crate) fn write_record<T: Serialize>(
    path: &Path,
    schema: &Schema,
    payload: &T,
    mode: WriteMode,
) -> Result<(), Error> {
    let env = Envelope::seal(schema, Vec::new(), payload)
        .map_err(|source| Error::Record { path: path.into(), source })?;
    let bytes = env.to_bytes();
    match mode {
        WriteMode::CreateNew => fs::write_new(path, &bytes, Sharing::Shared.file_mode(false))?,
        WriteMode::ReplaceAtomically => {
            fs::write_atomic(path, &bytes, Sharing::Shared.file_mode(false))?
        }
    }
    Ok(())
}

/// Reads an entry's identity record (for explain).
///
/// # Errors
/// I/O or record errors.
pub fn read_identity(entry_dir: &Path) -> Result<Components, Error> {
    let path = entry_dir.join("identity.json");
    let bytes = fs::read(&path)?;
    record::load_as::<Components>(&bytes, &IDENTITY_SCHEMA)
        .map(|(_, c)| c)
        .map_err(|source| Error::Record { path, source })
}

/// Reads an entry's manifest without checking it against a request (for explain/prune).
///
/// # Errors
/// I/O or record errors.
pub fn read_manifest(entry_dir: &Path) -> Result<EntryManifest, Error> {
    let path = entry_dir.join("manifest.json");
    let bytes = fs::read(&path)?;
    record::load_as::<EntryManifest>(&bytes, &ENTRY_SCHEMA)
        .map(|(_, m)| m)
        .map_err(|source| Error::Record { path, source })
}
