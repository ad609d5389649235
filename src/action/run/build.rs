//! Running the build command and collecting what it produced.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{Ctx, Notice};
use crate::action::artifacts::{self, Selection};
use crate::action::entry::{self, Described};
use crate::action::{Error, guard};
use crate::fs::{self, RelPath};
use crate::message::one_line;
use crate::process::killed_by;

/// A finished build.
pub(super) struct Built {
    /// Its wall time.
    pub(super) elapsed: Duration,
    /// The output directory as it was just before (third party, without
    /// `--artifact-include`).
    pub(super) before: Option<artifacts::Before>,
}

/// Runs the build command (signals forwarded, [`crate::process::run`]) and returns it with
/// its exit code: 0, the command's own, or 128 + a signal (the command was killed, or
/// strata received the signal while it ran: nothing is saved either way).
///
/// # Errors
/// [`Error::EmptyCommand`]; [`Error::Spawn`] if it cannot start; I/O errors preparing the
/// target.
pub(super) fn build(ctx: &mut Ctx<'_>) -> Result<(Built, i32), Error> {
    let before = ctx.target.before_build(&ctx.dir, ctx.include.is_some())?;
    let identity = &ctx.opts.identity;
    let program = identity.command.first().ok_or(Error::EmptyCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(identity.command.iter().skip(1));
    for e in &identity.set_env {
        cmd.env(e.name(), e.value());
    }
    // A strata run inside this build inherits the directory locks this run holds.
    cmd.env(guard::HELD_DIRS_VAR, guard::held_dirs_for_child(&ctx.target.held_dirs(&ctx.dir)));
    if let Some(dir) = &identity.working_directory {
        cmd.current_dir(dir);
    }
    let start = Instant::now();
    let end = crate::process::run(&mut cmd)
        .map_err(|source| Error::Spawn { program: program.into(), source })?;
    let elapsed = start.elapsed();
    let status = end.status;
    // A signal strata received (and forwarded) ends the run like a build killed by it:
    // nothing is saved, even if the build finished anyway.
    let killed = end.interrupted_by.or(std::os::unix::process::ExitStatusExt::signal(&status));
    let code = match (killed, status.code()) {
        (Some(signal), _) => {
            let interrupted = end.interrupted_by.is_some();
            (ctx.notify)(Notice::Signal { signal, interrupted });
            killed_by(signal)
        }
        (None, Some(c)) => c,
        (None, None) => 1,
    };
    Ok((Built { elapsed, before }, code))
}

/// Record paths recorded by the existing entries under `unit_dir` (one unit's keys).
/// Unreadable entries are skipped: this only widens what a new entry captures.
fn previous_outputs(unit_dir: &Path) -> HashSet<RelPath> {
    let mut out = HashSet::new();
    let Ok(entries) = fs::read_dir(unit_dir) else { return out };
    for dir in entries {
        if dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        if let Ok(m) = entry::read_manifest(&dir) {
            out.extend(m.artifacts.into_iter().map(|a| a.path().clone()));
        }
    }
    out
}

/// Collects artifacts after a successful build. `Ok(None)`: nothing to save (warned).
/// A target that publishes gets what was collected, even nothing; failing to collect is
/// fatal for it.
pub(super) fn collect_after(
    ctx: &mut Ctx<'_>,
    before: Option<artifacts::Before>,
    unit_dir: &Path,
) -> Result<Option<Vec<Described>>, Error> {
    let root = ctx.dir.clone();
    // An incremental build leaves up-to-date outputs alone; those that earlier entries of
    // this unit captured are still outputs, so the new entry holds them too (otherwise a
    // HIT in a clean directory would restore an incomplete set).
    let previous = if before.is_some() { previous_outputs(unit_dir) } else { HashSet::new() };
    let selection = match (&ctx.include, &before) {
        (Some(p), _) => Selection::Include(p),
        (None, Some(b)) => Selection::ChangedSince(b, &previous),
        (None, None) => Selection::All,
    };
    let cache_root = ctx.cache.path().to_path_buf();
    let collected = artifacts::collect(&root, &selection, ctx.opts.digest)
        .map(|d| d.into_iter().filter(|a| !a.source.starts_with(&cache_root)).collect::<Vec<_>>());
    match collected {
        Ok(d) if d.is_empty() => {
            ctx.warn(
                "collect",
                format!(
                    "the build succeeded but produced no cacheable artifacts in {}; nothing saved (check --artifact-include)",
                    root.display()
                ),
            );
            Ok(ctx.target.publishes().then_some(d))
        }
        Ok(d) => {
            if let Some(b) = &before
                && previous.is_empty()
            {
                warn_untouched(ctx, b, &root, &d);
            }
            Ok(Some(d))
        }
        // A target that publishes must publish what it built: the error is fatal.
        Err(e) if ctx.target.publishes() => Err(e),
        Err(e) => {
            let message = format!("cannot collect artifacts; nothing saved: {}", one_line(&e));
            ctx.warn("collect", message);
            Ok(None)
        }
    }
}

/// Warns about files the build did not rewrite when no earlier entry vouches for them (a
/// first build into a directory that already had content): possibly outputs the entry
/// lacks.
fn warn_untouched(ctx: &mut Ctx<'_>, before: &artifacts::Before, root: &Path, d: &[Described]) {
    let mut untouched = before.untouched(root, d);
    let cache_root = ctx.cache.path();
    untouched.retain(|p| !p.to_path(root).starts_with(cache_root));
    let Some(first) = untouched.first() else { return };
    let message = format!(
        "{} file(s) already in {} were not rewritten by this build (e.g. {first}) and \
         are not in the entry; a HIT into an empty directory restores only what this \
         build wrote. Name the outputs with --artifact-include, or build into an empty \
         directory",
        untouched.len(),
        root.display()
    );
    ctx.warn("collect", message);
}
