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
//! * [`lock_output_tree`]: third-party builds write into `--output-dir` and are captured by
//!   "what changed", so two builds whose output directories *overlap* (one inside the other)
//!   would capture each other's files. The output directory is locked exclusively and every
//!   ancestor *shared* (intention locks), in path order from `/` down: siblings run
//!   concurrently, nested directories serialise, and the fixed order cannot deadlock.

use std::path::{Path, PathBuf};

use crate::action::events::EventLog;
use crate::action::layout::CacheRoot;
use crate::action::locks::lock_with_events;
use crate::action::{Error, LockKind};
use crate::fs::{self, LockGuard, LockWait};

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
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
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

/// Locks `output_dir` exclusively and its ancestors shared (see the module docs). The lock
/// files live under `<cache root>/.locks/output/`.
///
/// # Errors
/// [`Error::LockTimeout`] (kind `action`); [`Error::Fs`] if a lock file cannot be opened.
pub fn lock_output_tree(
    cache: &CacheRoot,
    output_dir: &Path,
    wait: LockWait,
    events: &EventLog,
) -> Result<Vec<LockGuard>, Error> {
    let mut chain: Vec<&Path> = output_dir.ancestors().skip(1).collect();
    chain.reverse();
    let mut guards = Vec::with_capacity(chain.len() + 1);
    for ancestor in chain {
        let path = cache.output_lock(ancestor);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        let guard = fs::lock_shared(&path, wait, &mut |_| {}).map_err(|e| match e {
            fs::Error::LockTimeout { path, waited } => {
                Error::LockTimeout { kind: LockKind::Action, path, waited }
            }
            other => Error::Fs(other),
        })?;
        guards.push(guard);
    }
    guards.push(lock_with_events(&cache.output_lock(output_dir), LockKind::Action, wait, events)?);
    Ok(guards)
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
        let held =
            lock_output_tree(&cache, &out.join("a"), LockWait::Immediately, &events).unwrap();
        assert!(lock_output_tree(&cache, &out.join("b"), LockWait::Immediately, &events).is_ok());
        let err = lock_output_tree(&cache, &out, LockWait::Immediately, &events).unwrap_err();
        assert!(err.is_lock_timeout(), "{err}");
        let err = lock_output_tree(&cache, &out.join("a/deeper"), LockWait::Immediately, &events)
            .unwrap_err();
        assert!(err.is_lock_timeout(), "{err}");
        drop(held);
        assert!(lock_output_tree(&cache, &out, LockWait::Immediately, &events).is_ok());
    }
}
