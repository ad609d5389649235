//! Offline cleanup and whole-store verification: the store has no online garbage
//! collection; cleanup runs offline, after every consumer of the store has stopped
//! (docs/operations.md "Artifact store operations").
//!
//! [`verify_all`] checks every slot against its own manifest (whose key and spec must
//! match the slot's path). [`gc`] removes, under `<root>/artifacts-v1`:
//! * slots that do not verify (INVALID);
//! * staging directories (`.<stage>.tmp-<hex>`) left by crashed publications;
//! * anything else that is not part of the layout (files, symlinks, badly named
//!   directories; a symlink is removed itself, never followed);
//! * directories left empty by the above;
//!
//! and, under `<root>/locks`, lock files of keys that no longer have any slot and
//! everything that is not a regular `<key digest>.lock` file (symlinks, directories,
//! foreign names; a symlinked lock is removed even for a live key, since writers refuse
//! it). A key whose lock is held by a
//! running writer is skipped entirely (reported as `skipped`), so a writer that is still
//! running is never disturbed, but gc is meant to run offline: with consumers running, a
//! slot they read could be removed, and a lock file removed while a process is about to
//! open it lets two writers of one key exist. Slots that cannot be read (STORAGE_ERROR)
//! are kept and reported. `dry_run` reports the same actions without doing them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::Error;
use super::identity::{EnvDigest, KeyDigest, SpecDigest, Stage};
use super::layout::{StoreRoot, is_staging_name};
use super::store::LookupStatus;
use super::verify::{self, Problem};
use crate::fs::{self, Sharing};

/// Options of [`gc`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Report what would be removed without removing anything.
    pub dry_run: bool,
}

/// One thing gc removed (or would remove).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GcAction {
    /// `invalid_slot`, `staging`, `unexpected`, `empty_dir` or `unused_lock`.
    pub kind: &'static str,
    /// The path.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub path: PathBuf,
    /// Why.
    pub reason: String,
    /// `removed`, `would_remove` (dry run) or `failed: <error>`.
    pub result: String,
}

/// What [`gc`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    /// Removals (done, planned or failed).
    pub actions: Vec<GcAction>,
    /// Valid slots kept.
    pub kept_slots: usize,
    /// Key directories skipped because their lock is held.
    #[serde(serialize_with = "crate::fs::name::serialize_paths")]
    pub skipped: Vec<PathBuf>,
    /// Slots that could not be read (kept).
    pub unreadable: Vec<SlotReport>,
}

impl GcReport {
    /// True if some removal failed.
    pub fn has_failures(&self) -> bool {
        self.actions.iter().any(|a| a.result.starts_with("failed"))
    }
}

/// The verification result of one slot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlotReport {
    /// The slot directory.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub path: PathBuf,
    /// `hit` (valid), `invalid` or `storage_error`.
    pub status: &'static str,
    /// Why it is not valid.
    pub reason: Option<String>,
    /// Payload files (valid slots).
    pub files: usize,
    /// Payload bytes (valid slots).
    pub total_bytes: u64,
}

impl SlotReport {
    /// [`SlotReport::status`] as a [`LookupStatus`].
    pub fn lookup_status(&self) -> LookupStatus {
        [LookupStatus::Invalid, LookupStatus::StorageError]
            .into_iter()
            .find(|s| s.as_str() == self.status)
            .unwrap_or(LookupStatus::Hit)
    }
}

enum Node {
    Dir(PathBuf, String),
    Other(PathBuf, String),
}

fn children(dir: &Path) -> Result<Vec<Node>, Error> {
    let mut out = Vec::new();
    for path in fs::read_dir(dir)? {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let meta = fs::symlink_metadata(&path)?;
        if meta.is_dir() && !meta.file_type().is_symlink() {
            out.push(Node::Dir(path, name));
        } else {
            out.push(Node::Other(path, name));
        }
    }
    Ok(out)
}

/// Visits every slot-level entry of the bucket.
struct Walker<'a> {
    root: &'a StoreRoot,
}

enum Found {
    Slot { path: PathBuf, env: EnvDigest, key: KeyDigest, spec: SpecDigest, stage: Stage },
    Staging(PathBuf),
    Unexpected(PathBuf, String),
    KeyDir(PathBuf, KeyDigest),
}

impl Walker<'_> {
    fn visit(&self, found: &mut dyn FnMut(Found) -> Result<bool, Error>) -> Result<(), Error> {
        let bucket = self.root.bucket();
        match fs::symlink_metadata_opt(bucket.path())? {
            None => return Ok(()),
            Some(m) if !m.is_dir() || m.file_type().is_symlink() => {
                found(Found::Unexpected(
                    bucket.path().to_path_buf(),
                    "the bucket is not a real directory".into(),
                ))?;
                return Ok(());
            }
            Some(_) => {}
        }
        for env in children(bucket.path())? {
            let (env_path, env_digest) = match env {
                Node::Dir(p, name) => match name.parse::<EnvDigest>() {
                    Ok(d) => (p, d),
                    Err(_) => {
                        found(Found::Unexpected(p, "not an environment digest".into()))?;
                        continue;
                    }
                },
                Node::Other(p, _) => {
                    found(Found::Unexpected(p, "not a directory".into()))?;
                    continue;
                }
            };
            for key in children(&env_path)? {
                let (key_path, key_digest) = match key {
                    Node::Dir(p, name) => match name.parse::<KeyDigest>() {
                        Ok(d) => (p, d),
                        Err(_) => {
                            found(Found::Unexpected(p, "not a key digest".into()))?;
                            continue;
                        }
                    },
                    Node::Other(p, _) => {
                        found(Found::Unexpected(p, "not a directory".into()))?;
                        continue;
                    }
                };
                if !found(Found::KeyDir(key_path.clone(), key_digest))? {
                    continue;
                }
                for spec in children(&key_path)? {
                    let (spec_path, spec_digest) = match spec {
                        Node::Dir(p, name) => match name.parse::<SpecDigest>() {
                            Ok(d) => (p, d),
                            Err(_) => {
                                found(Found::Unexpected(p, "not a spec digest".into()))?;
                                continue;
                            }
                        },
                        Node::Other(p, _) => {
                            found(Found::Unexpected(p, "not a directory".into()))?;
                            continue;
                        }
                    };
                    for entry in children(&spec_path)? {
                        match entry {
                            Node::Dir(p, name) if is_staging_name(&name) => {
                                found(Found::Staging(p))?;
                            }
                            Node::Dir(p, name) => match Stage::parse(&name) {
                                Some(stage) => {
                                    found(Found::Slot {
                                        path: p,
                                        env: env_digest,
                                        key: key_digest,
                                        spec: spec_digest,
                                        stage,
                                    })?;
                                }
                                None => {
                                    found(Found::Unexpected(p, "not a stage name".into()))?;
                                }
                            },
                            Node::Other(p, _) => {
                                found(Found::Unexpected(p, "not a directory".into()))?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn check_slot(
    root: &StoreRoot,
    env: EnvDigest,
    key: KeyDigest,
    spec: SpecDigest,
    stage: Stage,
    path: PathBuf,
) -> SlotReport {
    let slot = root.bucket().slot_of(env, key, spec, stage);
    match verify::verify_slot(root, &slot, None, None) {
        Ok(v) => SlotReport {
            path,
            status: LookupStatus::Hit.as_str(),
            reason: None,
            files: v.manifest.files.len(),
            total_bytes: v.manifest.total_bytes(),
        },
        Err(Problem::Storage(reason)) => SlotReport {
            path,
            status: LookupStatus::StorageError.as_str(),
            reason: Some(reason),
            files: 0,
            total_bytes: 0,
        },
        Err(other) => SlotReport {
            path,
            status: LookupStatus::Invalid.as_str(),
            reason: Some(other.reason()),
            files: 0,
            total_bytes: 0,
        },
    }
}

/// Verifies every slot of the store at `root` against its own manifest. Reads only.
///
/// # Errors
/// [`Error::RootUnusable`] if `root` does not exist or is not a directory (a mistyped
/// root must not look like an empty, valid store); [`Error::Fs`] if the bucket cannot be
/// listed.
pub fn verify_all(root: &StoreRoot) -> Result<Vec<SlotReport>, Error> {
    require_root(root)?;
    let mut reports = Vec::new();
    Walker { root }.visit(&mut |found| {
        match found {
            Found::Slot { path, env, key, spec, stage } => {
                reports.push(check_slot(root, env, key, spec, stage, path));
            }
            Found::Unexpected(path, reason) => reports.push(SlotReport {
                path,
                status: LookupStatus::Invalid.as_str(),
                reason: Some(format!("not part of the layout: {reason}")),
                files: 0,
                total_bytes: 0,
            }),
            Found::Staging(_) | Found::KeyDir(..) => {}
        }
        Ok(true)
    })?;
    Ok(reports)
}

/// Checks that the root exists and is a directory.
fn require_root(root: &StoreRoot) -> Result<(), Error> {
    let reason = match fs::symlink_metadata_opt(root.path())? {
        None => "does not exist",
        Some(meta) if !meta.is_dir() => "is not a directory",
        Some(_) => return Ok(()),
    };
    Err(Error::RootUnusable { root: root.path().to_path_buf(), reason: reason.into() })
}

/// Removes `path` (without following symlinks); on a permission error, makes the parent
/// and every directory of the tree owner-writable and tries once more (a store shared
/// read-only with `chmod -R a-w` has no owner write bits).
fn remove_forcefully(path: &Path) -> Result<(), fs::Error> {
    match fs::remove_tree(path) {
        Err(e) if e.is_permission_denied() => {
            if let Some(parent) = path.parent() {
                fs::set_mode(parent, Sharing::Private.dir_mode())?;
            }
            let meta = fs::symlink_metadata(path)?;
            if meta.is_dir() {
                fs::set_mode(path, Sharing::Private.dir_mode())?;
                for entry in fs::walk(path) {
                    let entry = entry?;
                    if entry.kind == fs::EntryKind::Dir {
                        fs::set_mode(&entry.path, Sharing::Private.dir_mode())?;
                    }
                }
            }
            fs::remove_tree(path)
        }
        other => other,
    }
}

/// The bytes of the regular files under each slot of the store (the slots gc will verify),
/// for the progress total: one stat walk of every slot; what cannot be read counts 0.
fn slot_bytes(root: &StoreRoot) -> Result<HashMap<PathBuf, u64>, Error> {
    let mut sizes = HashMap::new();
    Walker { root }.visit(&mut |found| {
        if let Found::Slot { path, .. } = found {
            let bytes = fs::walk(&path)
                .map_while(Result::ok)
                .filter(|e| e.kind == fs::EntryKind::File)
                .map(|e| e.metadata.len())
                .sum();
            sizes.insert(path, bytes);
        }
        Ok(true)
    })?;
    Ok(sizes)
}

/// Offline cleanup of the store at `root` (see the module docs). `progress` is told of the
/// phase `verify`: the bytes of every slot's files (found by a stat walk first), advanced
/// by each slot once it is checked.
///
/// # Errors
/// [`Error::RootUnusable`] if `root` does not exist or is not a directory; [`Error::Fs`]
/// if a directory cannot be listed. Failed removals are reported in the
/// [`GcReport`], not as errors.
pub fn gc(
    root: &StoreRoot,
    options: GcOptions,
    progress: &dyn crate::progress::Progress,
) -> Result<GcReport, Error> {
    require_root(root)?;
    let sizes = slot_bytes(root)?;
    let phase = crate::progress::Phase::begin(progress, "verify", sizes.values().sum());
    let mut report = GcReport::default();
    let act = |report: &mut GcReport, kind: &'static str, path: PathBuf, reason: String| {
        record_removal(report, options, kind, path, reason)
    };
    let mut held = Vec::new();
    let mut guards = Vec::new();
    Walker { root }.visit(&mut |found| {
        match found {
            Found::KeyDir(path, key) => {
                let lock = root.lock_file(&key);
                // Only a regular lock file can be held: writers open it with O_NOFOLLOW, so
                // a symlink (dangling or not) or a directory there is held by nobody and is
                // removed with the other foreign entries of `locks/` below.
                if fs::symlink_metadata_opt(&lock)?.is_some_and(|m| m.is_file()) {
                    match fs::try_lock_existing(&lock)? {
                        Some(guard) => guards.push(guard),
                        None => {
                            held.push(path);
                            return Ok(false);
                        }
                    }
                }
            }
            Found::Slot { path, env, key, spec, stage } => {
                let slot = check_slot(root, env, key, spec, stage, path.clone());
                phase.advance(sizes.get(&path).copied().unwrap_or(0));
                match slot.status {
                    "hit" => report.kept_slots += 1,
                    "storage_error" => report.unreadable.push(slot),
                    _ => act(&mut report, "invalid_slot", path, slot.reason.unwrap_or_default()),
                }
            }
            Found::Staging(path) => {
                act(&mut report, "staging", path, "left by an interrupted publication".into())
            }
            Found::Unexpected(path, reason) => act(&mut report, "unexpected", path, reason),
        }
        Ok(true)
    })?;
    drop(phase);
    report.skipped = held;
    if !options.dry_run {
        remove_empty_dirs(root, &mut report)?;
    }
    // Our own guards would make the keys' locks look held to the check below.
    drop(guards);
    remove_unused_locks(root, &mut report, options)?;
    Ok(report)
}

/// Removes empty spec, key and environment directories (deepest first).
fn remove_empty_dirs(root: &StoreRoot, report: &mut GcReport) -> Result<(), Error> {
    let bucket = root.bucket();
    if fs::symlink_metadata_opt(bucket.path())?
        .is_none_or(|m| !m.is_dir() || m.file_type().is_symlink())
    {
        return Ok(());
    }
    for env in children(bucket.path())? {
        let Node::Dir(env_path, _) = env else { continue };
        for key in children(&env_path)? {
            let Node::Dir(key_path, _) = key else { continue };
            for spec in children(&key_path)? {
                let Node::Dir(spec_path, _) = spec else { continue };
                remove_if_empty(&spec_path, report)?;
            }
            remove_if_empty(&key_path, report)?;
        }
        remove_if_empty(&env_path, report)?;
    }
    Ok(())
}

fn remove_if_empty(dir: &Path, report: &mut GcReport) -> Result<(), Error> {
    if fs::read_dir(dir)?.is_empty() {
        let result = match remove_forcefully(dir) {
            Ok(()) => "removed".to_owned(),
            Err(e) => format!("failed: {e}"),
        };
        report.actions.push(GcAction {
            kind: "empty_dir",
            path: dir.to_path_buf(),
            reason: "empty".into(),
            result,
        });
    }
    Ok(())
}

/// Removes `path` (or, with `--dry-run`, only notes it) and records the action.
fn record_removal(
    report: &mut GcReport,
    options: GcOptions,
    kind: &'static str,
    path: PathBuf,
    reason: String,
) {
    let result = if options.dry_run {
        "would_remove".to_owned()
    } else {
        match remove_forcefully(&path) {
            Ok(()) => "removed".to_owned(),
            Err(e) => format!("failed: {e}"),
        }
    };
    report.actions.push(GcAction { kind, path, reason, result });
}

/// Cleans `<root>/locks`: removes lock files of keys that have no directory left in the
/// bucket and whose lock is free, and everything strata never uses there (`unexpected`):
/// symlinks (writers refuse them, so a symlinked lock makes every build of its key
/// PRIVATE/`lock`), directories, special files and names other than `<key digest>.lock`. A
/// `locks` that is not a real directory is removed itself.
fn remove_unused_locks(
    root: &StoreRoot,
    report: &mut GcReport,
    options: GcOptions,
) -> Result<(), Error> {
    let act = |report: &mut GcReport, kind: &'static str, path: PathBuf, reason: String| {
        record_removal(report, options, kind, path, reason)
    };
    let locks = root.locks_dir();
    match fs::symlink_metadata_opt(&locks)? {
        Some(m) if m.is_dir() && !m.file_type().is_symlink() => {}
        Some(_) => {
            let reason = "the locks directory is not a real directory (writers refuse it)";
            act(report, "unexpected", locks, reason.into());
            return Ok(());
        }
        None => return Ok(()),
    }
    let mut live = std::collections::HashSet::new();
    let bucket = root.bucket();
    if fs::symlink_metadata_opt(bucket.path())?
        .is_some_and(|m| m.is_dir() && !m.file_type().is_symlink())
    {
        for env in children(bucket.path())? {
            let Node::Dir(env_path, _) = env else { continue };
            for key in children(&env_path)? {
                let (Node::Dir(_, name) | Node::Other(_, name)) = key;
                live.insert(name);
            }
        }
    }
    for path in fs::read_dir(&locks)? {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let meta = fs::symlink_metadata(&path)?;
        let key = name.strip_suffix(".lock").filter(|k| k.parse::<KeyDigest>().is_ok());
        let Some(key) = key else {
            act(report, "unexpected", path, "not a <key digest>.lock file".into());
            continue;
        };
        if meta.file_type().is_symlink() {
            act(report, "unexpected", path, "a symlinked lock file (writers refuse it)".into());
            continue;
        }
        if !meta.is_file() {
            act(report, "unexpected", path, "a lock path that is not a regular file".into());
            continue;
        }
        if live.contains(key) {
            continue;
        }
        let Some(guard) = fs::try_lock_existing(&path)? else {
            continue; // held by a running writer
        };
        let result = if options.dry_run {
            "would_remove".to_owned()
        } else {
            match fs::remove_file(&path) {
                Ok(()) => "removed".to_owned(),
                Err(e) => format!("failed: {e}"),
            }
        };
        drop(guard);
        report.actions.push(GcAction {
            kind: "unused_lock",
            path,
            reason: "no slot of this key remains".into(),
            result,
        });
    }
    Ok(())
}
