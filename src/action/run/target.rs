//! Where an action's build writes, by domain: what differs between `third_party` and
//! `custom_operator` while an action runs, in one enum instead of a domain test at every
//! step.
//!
//! | step | third_party ([`Target::OutputDir`]) | custom_operator ([`Target::Stage`]) |
//! |---|---|---|
//! | before anything | create `--output-dir` | check the private stage ([`guard::check_stage`]) |
//! | action lock | the output directory: exclusive, shared with `--artifact-include` | the action lock in the state directory; the stage, publish and state directories shared |
//! | before a restore or a build | nothing | empty the stage |
//! | a restore that failed | the files it placed count as built | empty the stage |
//! | artifacts after a build | what changed since just before it (or `--artifact-include`) | everything in the stage (or `--artifact-include`) |
//! | nothing to collect, or collecting fails | nothing saved, a warning | published as it is; collecting must not fail |
//! | after a HIT or a build | nothing | publish into the shared directory |

use std::path::{Path, PathBuf};

use crate::action::artifacts::{self, Before};
use crate::action::guard::{self, DirLock};
use crate::action::layout::CacheRoot;
use crate::action::prepare::PreparedAction;
use crate::action::publish::{ActionId, Publisher, action_lock_path};
use crate::action::{Domain, Error, LockKind, RunOptions};
use crate::content::Record;
use crate::fs::{self, LockGuard, LockWait, RelPath};
use crate::l1::events::EventLog;
use crate::l1::lock::lock_with_events;

/// Where the build writes (see the module docs).
#[derive(Debug)]
pub(super) enum Target {
    /// `third_party`: `--output-dir`, which may hold other files.
    OutputDir {
        /// Record paths a failed HIT restore may have placed into the output directory.
        /// They are outputs of this very key, so the rebuild's entry must hold them even
        /// if an incremental build leaves them untouched.
        partially_restored: Vec<RelPath>,
    },
    /// `custom_operator`: a private stage strata empties, published into a shared
    /// directory with ownership.
    Stage {
        /// `--publish-dir`, resolved.
        publish_dir: PathBuf,
        /// `--publish-state-dir`, resolved.
        state_dir: PathBuf,
        /// Who owns what this action publishes.
        id: ActionId,
    },
}

impl Target {
    /// The target of a prepared request ([`crate::action::prepare::prepare`] has checked
    /// that a custom operator names its publish directories and its action).
    pub(super) fn new(opts: &RunOptions, prepared: &PreparedAction) -> Self {
        match (&prepared.publish, opts.domain) {
            (Some((publish_dir, state_dir)), Domain::CustomOperator) => Target::Stage {
                publish_dir: publish_dir.clone(),
                state_dir: state_dir.clone(),
                id: ActionId {
                    unit: opts.unit.clone(),
                    soc: opts.soc.clone().unwrap_or_default(),
                    operator: opts.operator.clone().unwrap_or_default(),
                    action: opts.action.clone().unwrap_or_default(),
                },
            },
            _ => Target::OutputDir { partially_restored: Vec::new() },
        }
    }

    /// True if what is built or restored is published: a stage must publish what it
    /// built (even nothing, which withdraws its earlier outputs), so collecting its
    /// artifacts must not fail.
    pub(super) fn publishes(&self) -> bool {
        matches!(self, Target::Stage { .. })
    }

    /// Before anything is hashed or written: creates the output directory, or checks the
    /// stage against everything it must not destroy.
    ///
    /// # Errors
    /// [`Error::UnsafeStage`]; I/O errors.
    pub(super) fn prepare(
        &self,
        opts: &RunOptions,
        cache: &CacheRoot,
        dir: &Path,
    ) -> Result<(), Error> {
        let Target::Stage { publish_dir, state_dir, .. } = self else {
            fs::create_dir_all(dir)?;
            return Ok(());
        };
        let identity = &opts.identity;
        let mut protected = guard::Protected::default();
        protected.add("the cache root", cache.path());
        for p in [&identity.operator_source, &identity.repo_root].into_iter().flatten() {
            protected.add("a declared input directory", p);
        }
        for p in identity.prepared_inputs.iter().chain(&identity.recipe_files) {
            protected.add("a declared input", p);
        }
        for p in &identity.environment_files {
            protected.add("an environment file", p);
        }
        protected.add("the publish directory", publish_dir);
        protected.add("the publish state directory", state_dir);
        let inside = [
            ("the publish directory", publish_dir.clone()),
            ("the publish state directory", state_dir.clone()),
        ];
        guard::check_stage(dir, &protected, &inside)
    }

    /// Takes the action lock (see the module docs). `None`: the cache root cannot be
    /// written, so the directory locks are skipped (the entry lock fails too, and the run
    /// bypasses the cache).
    ///
    /// # Errors
    /// [`Error::LockTimeout`] (exit 75); the custom operator's action lock may fail with
    /// I/O errors.
    pub(super) fn lock(
        &self,
        cache: &CacheRoot,
        dir: &Path,
        include: bool,
        wait: LockWait,
        events: &EventLog,
    ) -> Result<Option<Vec<LockGuard>>, Error> {
        let Target::Stage { publish_dir, state_dir, id } = self else {
            let mode = if include { DirLock::Shared } else { DirLock::Exclusive };
            return match guard::lock_dirs(cache, &[dir], mode, wait, events) {
                Ok(g) => Ok(Some(g)),
                Err(e) if e.is_lock_timeout() => Err(e),
                // A cache root we cannot write: the entry lock will fail too, and we BYPASS.
                Err(_) => Ok(None),
            };
        };
        let action =
            lock_with_events(&action_lock_path(state_dir, id), LockKind::Action, wait, events)?;
        let dirs = [dir, publish_dir.as_path(), state_dir.as_path()];
        let mut guards = match guard::lock_dirs(cache, &dirs, DirLock::Shared, wait, events) {
            Ok(g) => g,
            Err(e) if e.is_lock_timeout() => return Err(e),
            // A cache root we cannot write: intention locks are best effort here.
            Err(_) => Vec::new(),
        };
        guards.push(action);
        Ok(Some(guards))
    }

    /// Empties a stage before a restore or a build (an output directory is left alone).
    ///
    /// # Errors
    /// I/O errors.
    pub(super) fn empty(&self, dir: &Path) -> Result<(), Error> {
        match self {
            Target::Stage { .. } => wipe(dir),
            Target::OutputDir { .. } => Ok(()),
        }
    }

    /// After a restore of `artifacts` into `dir` failed: a stage is emptied; in an output
    /// directory, what the restore placed counts as built.
    pub(super) fn restore_failed(&mut self, dir: &Path, artifacts: &[Record]) {
        match self {
            Target::Stage { .. } => {
                let _ = wipe(dir);
            }
            Target::OutputDir { partially_restored } => {
                *partially_restored = artifacts.iter().map(|a| a.path().clone()).collect();
            }
        }
    }

    /// Just before the build: empties a stage; in an output directory without
    /// `--artifact-include`, records what is there, so that what the build changes can be
    /// told apart.
    ///
    /// # Errors
    /// I/O errors.
    pub(super) fn before_build(&self, dir: &Path, include: bool) -> Result<Option<Before>, Error> {
        match self {
            Target::Stage { .. } => wipe(dir).map(|()| None),
            Target::OutputDir { .. } if include => Ok(None),
            Target::OutputDir { partially_restored } => {
                let mut before = artifacts::snapshot(dir)?;
                before.forget(partially_restored);
                Ok(Some(before))
            }
        }
    }

    /// The directories this run holds locked while the build runs: a strata run inside
    /// the build inherits them.
    pub(super) fn held_dirs<'a>(&'a self, dir: &'a Path) -> Vec<&'a Path> {
        let mut held = vec![dir];
        if let Target::Stage { publish_dir, state_dir, .. } = self {
            held.push(publish_dir);
            held.push(state_dir);
        }
        held
    }

    /// Publishes `artifacts` from the stage `dir` (nothing for an output directory).
    /// Returns warnings to show.
    ///
    /// # Errors
    /// Publication errors (ownership conflicts, changed outputs, lock timeouts, I/O).
    pub(super) fn publish(
        &self,
        dir: &Path,
        artifacts: &[Record],
        wait: LockWait,
        events: &EventLog,
    ) -> Result<Vec<String>, Error> {
        let Target::Stage { publish_dir, state_dir, id } = self else { return Ok(Vec::new()) };
        let publisher = Publisher { publish_dir, state_dir, lock_wait: wait, events };
        publisher.publish(id, dir, artifacts)
    }
}

/// Empties a custom operator's stage (already checked by [`guard::check_stage`]) and marks
/// it as strata's.
fn wipe(dir: &Path) -> Result<(), Error> {
    fs::remove_tree(dir)?;
    fs::create_dir_all(dir)?;
    fs::write_new(&dir.join(guard::STAGE_MARKER), b"", 0o644)?;
    Ok(())
}
