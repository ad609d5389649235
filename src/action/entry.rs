//! Entries: manifest, validation, restore and save (docs/format.md, "`manifest.json`").
//!
//! Read order (a HIT):
//! 1. `manifest.json` must be a regular file of at most 16 MiB that loads as a
//!    `strata.action_entry` v2 record, or a v1 record migrated to v2 (strict parse, schema,
//!    digest: see [`crate::record`]); its artifacts are content records
//!    ([`crate::content::Record`]) whose digests name their algorithm (BLAKE3 for new
//!    entries unless `--digest sha256`; SHA-256 in entries of earlier releases);
//! 2. its domain, unit, action names, key and namespace must equal the request;
//! 3. the real tree under `artifacts/` is enumerated (never by opening paths the manifest
//!    names) and must hold exactly the recorded files (same size and owner-exec bit) and
//!    symlinks (same text), plus the directories leading to them, and nothing else;
//! 4. restore reads each cached file once: it copies it while hashing and renames the copy
//!    into place only if the digest matches (so a flipped byte never reaches the output),
//!    or, if the entry's verification memo ([`crate::content::memo`], under
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
//! Write order (a save, under the entry lock), through L1's one entry writer
//! ([`crate::l1::write`]): stage a sibling `.<key>.tmp-<hex>` directory, copy each artifact
//! while hashing and compare with the digest taken when it was described, write both
//! records, fsync everything, publish with `renameat2(RENAME_NOREPLACE)`. An invalid entry
//! in the way is first renamed to `.<key>.old-<hex>` and deleted after the new one is in
//! place; a crash in between leaves no entry (a MISS), never a partial one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::action::identity::Components;
use crate::action::layout::EntryLocation;
use crate::action::{ActionKey, Domain, Error};
use crate::content::verify::{Checked, Modes};
use crate::content::{self, Directories, FileRecord, Record, Rules, VerifyMemo, tree};
use crate::digest::Sha256Digest;
use crate::fs::{self, RelPath, Sharing};
use crate::l1::write::{Durability, Existing, NewEntry};
use crate::record::{self, Envelope, Schema};

/// Schema of an entry manifest. Version 1 (untagged SHA-256 digests) is read through the
/// production migration [`crate::record::steps::ENTRY_1_TO_2`].
pub const ENTRY_SCHEMA: Schema = Schema { name: "strata.action_entry", version: 2, features: &[] };
/// Schema of an entry's identity record.
pub const IDENTITY_SCHEMA: Schema =
    Schema { name: "strata.action_identity", version: 1, features: &[] };
/// Largest manifest read, in bytes.
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// What an entry's artifact list may hold: files and symlinks, directories implied, at
/// least one artifact.
pub const ENTRY_RULES: Rules =
    Rules { symlinks: true, directories: Directories::Implied, reserved: None, allow_empty: false };

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
    /// Artifacts (files and symlinks; content records), sorted by path, paths unique.
    pub artifacts: Vec<Record>,
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
    let (_, m) = record::load_current_as::<EntryManifest>(&bytes, &ENTRY_SCHEMA)
        .map_err(|e| format!("manifest.json: {}", crate::message::one_line(&e)))?;
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
    tree::check_records(&m.artifacts, &ENTRY_RULES).map_err(|e| format!("manifest.json: {e}"))?;
    tree::compare(&dir.join("artifacts"), &m.artifacts, &ENTRY_RULES).map_err(|p| p.reason())?;
    Ok(m)
}

/// What a [`restore`] did: bytes placed, bytes hashed, files vouched for by the memo.
pub type Restored = Checked;

/// Restores `artifacts` from the entry at `entry_dir` into `dest_root` with
/// [`content::verify::place_tree`]: files first (in parallel, each read once: verified while
/// copied, or copied unhashed when `memo` vouches for its unchanged stamp), then symlinks.
/// Parent directories are created without passing through symlinks. Restored files get the
/// current time as mtime. On success `memo` remembers the files hashed in full and forgets
/// paths the entry no longer has.
///
/// # Errors
/// [`crate::fs::Error::DigestMismatch`] for a corrupt artifact,
/// [`crate::fs::Error::ChangedWhileReading`] for one changed during the copy; I/O errors
/// naming paths.
pub fn restore(
    entry_dir: &Path,
    artifacts: &[Record],
    dest_root: &Path,
    memo: &mut VerifyMemo,
) -> Result<Restored, Error> {
    let src_root = entry_dir.join("artifacts");
    let modes = Modes::of(Sharing::Shared);
    Ok(content::verify::place_tree(&src_root, artifacts, dest_root, modes, memo)?)
}

/// Creates the parent directories of `rel` under `root` (never through a symlink) and
/// returns the destination path.
pub(crate) fn place_parent(root: &Path, rel: &RelPath) -> Result<PathBuf, Error> {
    Ok(content::verify::place_parent(root, rel, Sharing::Shared.dir_mode())?)
}

/// An artifact found after a build, with the file it was read from.
#[derive(Debug, Clone)]
pub struct Described {
    /// The record.
    pub artifact: Record,
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
    let staging = NewEntry::beside(&loc.actions_dir, &loc.rel, Sharing::Shared.dir_mode())?;
    let art_root = staging.path().join("artifacts");
    fs::create_dir_all(&art_root)?;
    for d in described {
        let dest = place_parent(&art_root, d.artifact.path())?;
        match &d.artifact {
            Record::File(FileRecord { digest, executable, .. }) => {
                let mode = Sharing::Shared.file_mode(*executable);
                content::verify::copy_in(&d.source, &dest, digest, mode)?;
            }
            Record::Symlink { target, .. } => fs::symlink(target, &dest)?,
            Record::Directory { .. } => {
                fs::create_dir_all_within(
                    &art_root,
                    &d.artifact.path().to_relative_path(),
                    Sharing::Shared.dir_mode(),
                )?;
            }
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
    // An invalid entry in the way is moved aside, and deleted once the new one is in.
    let existing = Existing::Replace { stem: manifest.key.to_string() };
    staging.publish(Durability::Fsync, existing)?;
    Ok(())
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
    record::load_current_as::<EntryManifest>(&bytes, &ENTRY_SCHEMA)
        .map(|(_, m)| m)
        .map_err(|source| Error::Record { path, source })
}
