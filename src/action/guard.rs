//! Guards around the directories an action writes.
//!
//! * [`check_stage`]: a custom operator's private stage (`--output-dir`) is wiped before
//!   every build and restore, so it must not be, or contain, anything else: `/`, the home
//!   directory, the current directory, the cache root, the publish or state directory, the
//!   operator source, the repo root, a prepared input, a recipe or environment file. It
//!   must not lie inside the publish or state directory either, and an existing non-empty
//!   stage must carry strata's `.strata-stage` marker (strata creates it when it empties a
//!   stage): a directory strata did not create is never emptied.
//!   Violations are usage errors (exit 2), checked before anything is written.
//! * [`lock_dirs`]: third-party builds write into `--output-dir` and are captured by "what
//!   changed", so a build must not run while another writes below its output directory.
//!   A third-party action locks its output directory exclusively (shared when it names its
//!   outputs with `--artifact-include`: such actions may share an install prefix if their
//!   patterns are disjoint); a custom operator locks its stage, publish and state
//!   directories shared; every ancestor is locked shared (an intention lock). All locks are
//!   taken in one global path order from `/` down, so siblings run concurrently, nested
//!   directories serialise, and nothing can deadlock. A strata run started by another
//!   strata run's build (a superbuild) inherits its parent's locks through
//!   [`HELD_DIRS_VAR`] instead of waiting for them.

use std::path::{Path, PathBuf};

use crate::action::layout::CacheRoot;
use crate::action::{Error, LockKind};
use crate::fs::{self, LockGuard, LockWait};
use crate::l1::events::EventLog;
use crate::l1::lock::lock_with_events;

/// Everything a custom operator's stage must stay clear of, with a label for messages.
#[derive(Debug, Default)]
pub struct Protected {
    items: Vec<(&'static str, PathBuf)>,
}

impl Protected {
    /// Adds a path (resolved non-strictly; unresolvable paths are ignored here, the step
    /// that uses them reports them).
    pub fn add(&mut self, what: &'static str, path: &Path) {
        if let Ok(p) = fs::resolve_nonstrict(&fs::expand_tilde(path)) {
            self.items.push((what, p));
        }
    }
}

/// Checks a custom operator's stage (see the module docs).
///
/// # Errors
/// [`Error::UnsafeStage`] naming the stage and what it would destroy; [`Error::Fs`] if the
/// stage cannot be listed.
pub fn check_stage(
    stage: &Path,
    protected: &Protected,
    inside_forbidden: &[(&'static str, PathBuf)],
) -> Result<(), Error> {
    let unsafe_stage = |what: &'static str, path: &Path| Error::UnsafeStage {
        stage: stage.to_path_buf(),
        what,
        path: path.to_path_buf(),
    };
    if stage.parent().is_none() {
        return Err(unsafe_stage("the filesystem root", stage));
    }
    let mut fixed = Protected::default();
    if let Some(home) = crate::config::var("HOME") {
        fixed.add("the home directory", Path::new(&home));
    }
    if let Ok(cwd) = fs::current_dir() {
        fixed.add("the current directory", &cwd);
    }
    for (what, path) in fixed.items.iter().chain(&protected.items) {
        if path.starts_with(stage) {
            return Err(unsafe_stage(what, path));
        }
    }
    for (what, dir) in inside_forbidden {
        if stage.starts_with(dir) {
            return Err(unsafe_stage(what, dir));
        }
    }
    // Whatever else a directory may hold that no flag names (tracked sources, tools, logs):
    // strata only empties a stage it created, or an empty directory.
    match fs::symlink_metadata_opt(stage)? {
        None => {}
        Some(m) if !m.is_dir() => {
            return Err(unsafe_stage("something that is not a directory", stage));
        }
        Some(_) => {
            let children = fs::read_dir(stage)?;
            if !children.is_empty() && !stage.join(STAGE_MARKER).exists() {
                return Err(unsafe_stage(
                    "files strata did not put there (no .strata-stage marker)",
                    stage,
                ));
            }
        }
    }
    Ok(())
}

/// The marker file strata keeps in every private stage it manages: a non-empty directory
/// without it is never emptied. Never collected as an artifact.
pub const STAGE_MARKER: &str = ".strata-stage";

/// The environment variable through which strata tells the build commands it runs which
/// directories it holds locked: one absolute path per line. A nested `strata action run`
/// (a superbuild whose build runs strata again, into a subdirectory) skips the locks its
/// parent already holds instead of waiting for them forever.
pub const HELD_DIRS_VAR: &str = "STRATA_HELD_OUTPUT_DIRS";

/// The directories held by the strata processes this one runs under.
pub fn held_dirs() -> Vec<PathBuf> {
    crate::config::var_string(HELD_DIRS_VAR)
        .map(|v| v.lines().filter(|l| l.starts_with('/')).map(PathBuf::from).collect())
        .unwrap_or_default()
}

/// How [`lock_dirs`] locks a directory itself (its ancestors are always locked shared).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirLock {
    /// Exclusive: a third-party build that captures "what changed" in this directory.
    Exclusive,
    /// Shared: only an intention lock, so no exclusive holder of this directory or an
    /// ancestor builds while we write below it (custom-operator stage and publish dirs).
    Shared,
}

/// Locks each of `dirs` (see the module docs): the directory as `mode` says, each ancestor
/// shared, all in path order from `/` down, skipping what a parent strata process holds
/// ([`HELD_DIRS_VAR`]). Lock files live under `<cache root>/.locks/output/`.
///
/// # Errors
/// [`Error::LockTimeout`] (kind `action`); [`Error::Fs`] if a lock file cannot be opened.
pub fn lock_dirs(
    cache: &CacheRoot,
    dirs: &[&Path],
    mode: DirLock,
    wait: LockWait,
    events: &EventLog,
) -> Result<Vec<LockGuard>, Error> {
    let held = held_dirs();
    let is_held = |dir: &Path| held.iter().any(|h| h.starts_with(dir));
    // Every directory to lock, with its mode; exclusive wins over shared for one path.
    let mut plan: std::collections::BTreeMap<PathBuf, DirLock> = std::collections::BTreeMap::new();
    for dir in dirs {
        for ancestor in dir.ancestors().skip(1) {
            plan.entry(ancestor.to_path_buf()).or_insert(DirLock::Shared);
        }
        if mode == DirLock::Exclusive || !plan.contains_key(*dir) {
            plan.insert(dir.to_path_buf(), mode);
        }
    }
    // BTreeMap order puts every ancestor before its descendants: a fixed global order.
    let mut guards = Vec::with_capacity(plan.len());
    for (dir, how) in plan {
        if is_held(&dir) {
            continue;
        }
        let path = cache.output_lock(&dir);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        let guard = match how {
            DirLock::Exclusive => lock_with_events(&path, LockKind::Action, wait, events)?,
            DirLock::Shared => fs::lock_shared(&path, wait, &mut |_| {}).map_err(|e| match e {
                fs::Error::LockTimeout { path, waited } => {
                    Error::LockTimeout { kind: LockKind::Action, path, waited }
                }
                other => Error::Fs(other),
            })?,
        };
        guards.push(guard);
    }
    Ok(guards)
}

/// The value of [`HELD_DIRS_VAR`] for a child of this process, which holds `dirs`.
pub fn held_dirs_for_child(dirs: &[&Path]) -> String {
    let mut all: Vec<String> = held_dirs().iter().map(|p| p.display().to_string()).collect();
    all.extend(dirs.iter().map(|p| p.display().to_string()));
    all.join("\n")
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn stage_must_not_contain_protected_paths() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let mut p = Protected::default();
        p.add("a prepared input", &root.join("src/a.c"));
        p.add("the cache root", &root.join("cache"));
        let inside = [("the publish directory", root.join("pub"))];
        assert!(check_stage(&root.join("stages/op"), &p, &inside).is_ok());
        for bad in [
            root.clone(),
            root.join("src"),
            root.join("cache"),
            root.join("pub"),
            root.join("pub/x"),
            PathBuf::from("/"),
        ] {
            assert!(
                matches!(check_stage(&bad, &p, &inside), Err(Error::UnsafeStage { .. })),
                "{}",
                bad.display()
            );
        }
    }

    #[test]
    fn nested_output_dirs_exclude_each_other_siblings_do_not() {
        let d = tempfile::tempdir().unwrap();
        let cache = CacheRoot::new(&d.path().join("cache")).unwrap();
        let out = d.path().join("out");
        let events = EventLog::disabled();
        let lock =
            |dir: &Path, mode| lock_dirs(&cache, &[dir], mode, LockWait::Immediately, &events);
        let held = lock(&out.join("a"), DirLock::Exclusive).unwrap();
        assert!(lock(&out.join("b"), DirLock::Exclusive).is_ok());
        let err = lock(&out, DirLock::Exclusive).unwrap_err();
        assert!(err.is_lock_timeout(), "{err}");
        let err = lock(&out.join("a/deeper"), DirLock::Shared).unwrap_err();
        assert!(err.is_lock_timeout(), "{err}");
        drop(held);
        let shared = lock(&out.join("x"), DirLock::Shared).unwrap();
        assert!(lock(&out.join("x"), DirLock::Shared).is_ok(), "shared holders coexist");
        assert!(lock(&out, DirLock::Exclusive).unwrap_err().is_lock_timeout());
        drop(shared);
        assert!(lock(&out, DirLock::Exclusive).is_ok());
    }
}
