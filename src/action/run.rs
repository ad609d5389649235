//! `strata action run`: one cache-aware build action (seed 003 "构建流程"; spec/engine.md §4).
//!
//! 1. Validate the request (command present; custom operators need `--soc`, `--operator`,
//!    `--action`, `--operator-source`, `--publish-dir`, `--publish-state-dir`) and prepare
//!    its identity inputs with [`prepare`](fn@crate::action::prepare::prepare), the one
//!    preparation `explain` shares.
//! 2. Compute the identity (a missing or unreadable declared input fails here, exit 1).
//! 3. Take the *action lock*: per action for custom operators (in the publish state
//!    directory), per output directory for third-party builds (in the cache root; the
//!    reference had none and let two builds write one directory, §11 W15). Timeout → exit
//!    75.
//! 4. Take the *entry lock*. Anything wrong with it (timeout, unwritable cache) →
//!    **BYPASS**: build without reading or writing the cache.
//! 5. Look the entry up. Valid → **HIT**: restore (custom operators: into the wiped
//!    private stage, then publish). A corrupt artifact, or any restore error, is a warning
//!    and falls through to MISS; a publication failure (ownership conflict, an output
//!    changed outside its owner, …) is a hard error, as on the MISS path. Third party: the
//!    artifacts a failed restore placed count as built, so the new entry still holds them
//!    when an incremental build leaves them alone.
//! 6. **MISS**: run the command (stdio inherited, `--set-env` applied, non-CLOEXEC file
//!    descriptors such as a make jobserver inherited; strata's own lock descriptors are
//!    CLOEXEC). A failing build returns its own exit code and saves nothing. Then collect
//!    the artifacts, publish them (custom operators; failures are fatal), save the entry
//!    (failures are warnings), and touch `.updated` only when an entry was saved.
//!
//! Lock order: action, entry, publish.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::action::artifacts::{self, Selection};
use crate::action::entry::{self, Described, EntryManifest, Lookup, Restored};
use crate::action::events::{EventLog, ms};
use crate::action::guard::DirLock;
use crate::action::identity::{IdentityInputs, Patterns};
use crate::action::layout::{Domain, EntryLocation};
use crate::action::locks::{Timeouts, lock_with_events};
use crate::action::prepare::{entry_name, prepare};
use crate::action::publish::{ActionId, Publisher, action_lock_path};
use crate::action::{ActionKey, Error, LockKind, guard};
use crate::content::Record;
use crate::content::VerifyMemo;
use crate::fs::{self, RelPath};
use crate::message::one_line;

/// One `strata action run` request.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `--cache-root`.
    pub cache_root: PathBuf,
    /// `--domain`.
    pub domain: Domain,
    /// `--unit`.
    pub unit: String,
    /// `--soc`.
    pub soc: Option<String>,
    /// `--operator`.
    pub operator: Option<String>,
    /// `--action`.
    pub action: Option<String>,
    /// `--output-dir` (custom operators: the private stage, wiped by strata).
    pub output_dir: PathBuf,
    /// `--publish-dir`.
    pub publish_dir: Option<PathBuf>,
    /// `--publish-state-dir`.
    pub publish_state_dir: Option<PathBuf>,
    /// `--artifact-include`.
    pub artifact_include: Vec<String>,
    /// Identity inputs, including the command.
    pub identity: IdentityInputs,
    /// Lock timeouts.
    pub timeouts: Timeouts,
    /// `--event-log` / `STRATA_EVENT_LOG`.
    pub event_log: Option<PathBuf>,
    /// Content digest algorithm of a new entry's records (`--digest` / `STRATA_DIGEST`;
    /// [`crate::content::DEFAULT_ALGORITHM`] unless the user chose SHA-256). Entries already
    /// stored keep theirs.
    pub digest: crate::digest::DigestAlgorithm,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Restored from the cache.
    Hit,
    /// Built and saved a new entry.
    Saved,
    /// Built, but nothing was saved (the reason is in the warnings).
    Built,
    /// Built without the cache because the entry lock was unavailable.
    Bypass,
    /// The build command failed; nothing saved or published.
    BuildFailed,
}

/// What the caller should print, in order, as it happens.
#[derive(Debug, Clone)]
pub enum Notice {
    /// A HIT.
    Hit {
        /// The key.
        key: ActionKey,
        /// Artifacts restored.
        artifacts: usize,
    },
    /// A MISS, before the build starts.
    Miss {
        /// The key.
        key: ActionKey,
    },
    /// An entry was saved.
    Saved {
        /// The key.
        key: ActionKey,
        /// Artifacts saved.
        artifacts: usize,
        /// Build wall time.
        build: Duration,
    },
    /// Building without the cache.
    Bypass {
        /// Why.
        reason: String,
    },
    /// Something went wrong in the cache; the build goes on.
    Warning {
        /// Which step.
        component: &'static str,
        /// What happened.
        message: String,
    },
    /// The build was killed by a signal, or strata received one (and forwarded it to the
    /// build); nothing is saved.
    Signal {
        /// The signal number.
        signal: i32,
        /// True if strata itself received the signal.
        interrupted: bool,
    },
}

/// The result of [`run`].
#[derive(Debug, Clone)]
pub struct RunReport {
    /// How it ended.
    pub outcome: Outcome,
    /// The action key.
    pub key: ActionKey,
    /// The process exit code to use: 0, or the build's own code (128 + signal when it was
    /// killed by a signal).
    pub exit_code: i32,
}

struct Ctx<'a> {
    opts: &'a RunOptions,
    events: EventLog,
    notify: &'a mut dyn FnMut(Notice),
    stage_or_output: PathBuf,
    publish: Option<(PathBuf, PathBuf)>,
    action_id: Option<ActionId>,
    include: Option<Patterns>,
    /// Record paths a failed HIT restore may have placed into the output directory.
    /// They are outputs of this very key, so the rebuild's entry must hold them even if an
    /// incremental build leaves them untouched.
    partially_restored: Vec<RelPath>,
    /// The resolved cache root: when it lies inside the output directory, its files are
    /// never artifacts.
    cache_root: PathBuf,
}

impl Ctx<'_> {
    fn warn(&mut self, component: &'static str, message: String) {
        self.events.emit(
            "warning",
            &[("component", component.into()), ("message", message.clone().into())],
        );
        (self.notify)(Notice::Warning { component, message });
    }

    fn publisher(&self) -> Option<Publisher<'_>> {
        self.publish.as_ref().map(|(dir, state)| Publisher {
            publish_dir: dir,
            state_dir: state,
            lock_wait: self.opts.timeouts.publish,
            events: &self.events,
        })
    }

    fn publish_artifacts(&mut self, stage: &Path, artifacts: &[Record]) -> Result<(), Error> {
        let warnings = match (self.publisher(), &self.action_id) {
            (Some(p), Some(id)) => p.publish(id, stage, artifacts)?,
            _ => Vec::new(),
        };
        for w in warnings {
            self.warn("publish_state", w);
        }
        Ok(())
    }
}

/// Runs one action (see the module docs). `notify` receives what to print, as it happens.
///
/// # Errors
/// Usage errors ([`Error::is_usage`]), missing declared inputs, publication conflicts,
/// non-bypassable lock timeouts ([`Error::is_lock_timeout`]), a command that cannot start.
pub fn run(opts: &RunOptions, notify: &mut dyn FnMut(Notice)) -> Result<RunReport, Error> {
    let started = Instant::now();
    let custom = opts.domain == Domain::CustomOperator;
    // The same preparation `explain` uses: checks, resolved places, identity inputs.
    let prepared = prepare(opts)?;
    let (cache, output_dir) = (prepared.cache.clone(), prepared.output_dir.clone());
    if !custom {
        fs::create_dir_all(&output_dir)?;
    }

    let mut events = EventLog::open(opts.event_log.as_deref());
    events.set_base("domain", opts.domain.as_str());
    events.set_base("unit", opts.unit.clone());
    events.set_base("soc", opts.soc.clone());
    events.set_base("operator", opts.operator.clone());
    events.set_base("action", opts.action.clone());

    if custom {
        let mut protected = guard::Protected::default();
        protected.add("the cache root", cache.path());
        for p in [&opts.identity.operator_source, &opts.identity.repo_root].into_iter().flatten() {
            protected.add("a declared input directory", p);
        }
        for p in opts.identity.prepared_inputs.iter().chain(&opts.identity.recipe_files) {
            protected.add("a declared input", p);
        }
        for p in &opts.identity.environment_files {
            protected.add("an environment file", p);
        }
        let mut inside = Vec::new();
        if let Some((dir, state)) = &prepared.publish {
            protected.add("the publish directory", dir);
            protected.add("the publish state directory", state);
            inside.push(("the publish directory", dir.clone()));
            inside.push(("the publish state directory", state.clone()));
        }
        guard::check_stage(&output_dir, &protected, &inside)?;
    }
    let identity = prepared.identity()?;
    let key = identity.key;
    events.set_base("key", key.to_string());
    let name = entry_name(opts, &identity);
    let loc = cache.entry(&name, &key)?;
    let action_id = custom.then(|| ActionId {
        unit: opts.unit.clone(),
        soc: opts.soc.clone().unwrap_or_default(),
        operator: opts.operator.clone().unwrap_or_default(),
        action: opts.action.clone().unwrap_or_default(),
    });

    let mut ctx = Ctx {
        opts,
        events,
        notify,
        stage_or_output: output_dir.clone(),
        publish: prepared.publish,
        action_id,
        include: prepared.include,
        partially_restored: Vec::new(),
        cache_root: cache.path().to_path_buf(),
    };

    // Action lock.
    let _action_lock = match (&ctx.publish, &ctx.action_id) {
        (Some((publish_dir, state)), Some(id)) => {
            let action = lock_with_events(
                &action_lock_path(state, id),
                LockKind::Action,
                opts.timeouts.action,
                &ctx.events,
            )?;
            let dirs = [output_dir.as_path(), publish_dir.as_path(), state.as_path()];
            let mut guards = match guard::lock_dirs(
                &cache,
                &dirs,
                DirLock::Shared,
                opts.timeouts.action,
                &ctx.events,
            ) {
                Ok(g) => g,
                Err(e) if e.is_lock_timeout() => return Err(e),
                // A cache root we cannot write: intention locks are best effort here.
                Err(_) => Vec::new(),
            };
            guards.push(action);
            Some(guards)
        }
        _ => {
            let mode = if ctx.include.is_some() { DirLock::Shared } else { DirLock::Exclusive };
            match guard::lock_dirs(
                &cache,
                &[output_dir.as_path()],
                mode,
                opts.timeouts.action,
                &ctx.events,
            ) {
                Ok(g) => Some(g),
                Err(e) if e.is_lock_timeout() => return Err(e),
                // A cache root we cannot write: the entry lock will fail too, and we BYPASS.
                Err(_) => None,
            }
        }
    };

    let hash_ms = ms(identity.elapsed);
    let entry_lock =
        match lock_with_events(&loc.lock, LockKind::Entry, opts.timeouts.entry, &ctx.events) {
            Ok(g) => g,
            Err(e) => {
                let reason = format!("cache lock unavailable: {e}");
                ctx.events.emit(
                    "cache_result",
                    &[
                        ("status", "BYPASS".into()),
                        ("reason", reason.clone().into()),
                        ("hash_ms", hash_ms),
                        ("total_ms", ms(started.elapsed())),
                    ],
                );
                (ctx.notify)(Notice::Bypass { reason });
                return bypass(&mut ctx, key);
            }
        };

    let lookup_start = Instant::now();
    let expected = EntryManifest::expected(&name, &identity);
    let mut keep_entry = false;
    match entry::lookup(&loc, &expected) {
        Lookup::Valid(manifest) => {
            let lookup_ms = ms(lookup_start.elapsed());
            let restore_start = Instant::now();
            let memo_path = cache.verify_memo(&loc.rel);
            match restore_hit(&mut ctx, &loc, &memo_path, &manifest.artifacts)? {
                Ok(restored) => {
                    if let Some(ns) = &loc.namespace_dir {
                        let _ = fs::touch(&ns.join(".last-used"));
                    }
                    ctx.events.emit(
                        "cache_result",
                        &[
                            ("status", "HIT".into()),
                            ("hash_ms", hash_ms),
                            ("lookup_ms", lookup_ms),
                            ("restore_ms", ms(restore_start.elapsed())),
                            ("total_ms", ms(started.elapsed())),
                            ("artifacts", manifest.artifacts.len().into()),
                            ("bytes", restored.bytes.into()),
                            ("hashed_bytes", restored.hashed_bytes.into()),
                            ("vouched_files", restored.vouched_files.into()),
                        ],
                    );
                    (ctx.notify)(Notice::Hit { key, artifacts: manifest.artifacts.len() });
                    return Ok(RunReport { outcome: Outcome::Hit, key, exit_code: 0 });
                }
                Err(e) if entry_at_fault(&e, &loc.dir) => {
                    ctx.warn("restore", format!("restore failed; rebuilding: {}", one_line(&e)));
                }
                Err(e) => {
                    // The entry is fine; the output directory is not (a symlink or a
                    // directory in the way, a permission problem). Build without replacing
                    // a good entry with whatever this directory lets the build produce.
                    keep_entry = true;
                    ctx.warn(
                        "restore",
                        format!(
                            "cannot restore into {}; building without replacing the valid entry: {}",
                            ctx.stage_or_output.display(),
                            one_line(&e)
                        ),
                    );
                }
            }
        }
        Lookup::Invalid(reason) => {
            ctx.warn(
                "validate",
                format!(
                    "invalid cache entry {} ({reason}); rebuilding and replacing it",
                    loc.dir.display()
                ),
            );
        }
        Lookup::Absent => {}
    }

    // MISS.
    let lookup_ms = ms(lookup_start.elapsed());
    ctx.events.emit(
        "cache_result",
        &[("status", "MISS".into()), ("hash_ms", hash_ms), ("lookup_ms", lookup_ms)],
    );
    (ctx.notify)(Notice::Miss { key });
    let (build, code) = build(&mut ctx)?;
    if code != 0 {
        return Ok(RunReport { outcome: Outcome::BuildFailed, key, exit_code: code });
    }
    let Some(described) = collect_after(&mut ctx, build.before, &loc.parent)? else {
        return Ok(RunReport { outcome: Outcome::Built, key, exit_code: 0 });
    };
    let artifacts: Vec<Record> = described.iter().map(|d| d.artifact.clone()).collect();
    ctx.publish_artifacts(&ctx.stage_or_output.clone(), &artifacts)?;
    if described.is_empty() || keep_entry {
        return Ok(RunReport { outcome: Outcome::Built, key, exit_code: 0 });
    }
    let save_start = Instant::now();
    let manifest = EntryManifest {
        artifacts,
        build_ms: build.elapsed.as_millis() as u64,
        created_at: now_rfc3339(),
        ..expected
    };
    let saved = entry::save(&loc, &manifest, &identity.components, &described);
    drop(entry_lock);
    match saved {
        Ok(()) => {
            if let Err(e) = fs::touch(&cache.updated_marker()) {
                ctx.warn("updated_marker", e.to_string());
            }
            if let Some(ns) = &loc.namespace_dir {
                let _ = fs::touch(&ns.join(".last-used"));
            }
            ctx.events.emit(
                "cache_result",
                &[
                    ("status", "SAVED".into()),
                    ("build_ms", ms(build.elapsed)),
                    ("save_ms", ms(save_start.elapsed())),
                    ("total_ms", ms(started.elapsed())),
                    ("artifacts", described.len().into()),
                ],
            );
            (ctx.notify)(Notice::Saved { key, artifacts: described.len(), build: build.elapsed });
            Ok(RunReport { outcome: Outcome::Saved, key, exit_code: 0 })
        }
        Err(e) => {
            ctx.warn("save", format!("save failed; build result kept: {}", one_line(&e)));
            Ok(RunReport { outcome: Outcome::Built, key, exit_code: 0 })
        }
    }
}

/// Restores a HIT and, for custom operators, publishes it. `Ok(Err(_))`: the entry could
/// not be restored, and the caller rebuilds. `Err(_)`: publication failed (ownership
/// conflict, an output changed by hand, corrupt state, lock timeout, I/O), which a rebuild
/// would only meet again after wasting a build, so it is fatal as on the MISS path.
///
/// The entry's verification memo at `memo_path` is read (an unusable one is ignored) and,
/// after a successful restore that hashed something new, rewritten atomically; a memo that
/// cannot be written is only logged (the next HIT verifies in full).
fn restore_hit(
    ctx: &mut Ctx<'_>,
    loc: &EntryLocation,
    memo_path: &Path,
    artifacts: &[Record],
) -> Result<Result<Restored, Error>, Error> {
    let custom = ctx.publish.is_some();
    if custom {
        wipe(&ctx.stage_or_output)?;
    }
    let mut memo = VerifyMemo::load(memo_path, &loc.rel);
    let restored = match entry::restore(&loc.dir, artifacts, &ctx.stage_or_output, &mut memo) {
        Ok(restored) => {
            if memo.is_changed()
                && let Err(e) = memo.save(memo_path, fs::Sharing::Shared.file_mode(false))
            {
                tracing::debug!("verification memo not written: {e}");
            }
            restored
        }
        Err(e) => {
            if custom {
                let _ = wipe(&ctx.stage_or_output);
            } else {
                ctx.partially_restored = artifacts.iter().map(|a| a.path().clone()).collect();
            }
            return Ok(Err(e));
        }
    };
    if let Err(e) = ctx.publish_artifacts(&ctx.stage_or_output.clone(), artifacts) {
        let _ = wipe(&ctx.stage_or_output);
        return Err(e);
    }
    Ok(Ok(restored))
}

/// True if a restore failure lies with the entry (a digest mismatch, an unreadable entry
/// file) rather than with the destination.
fn entry_at_fault(e: &Error, entry_dir: &Path) -> bool {
    match e {
        Error::Fs(fs::Error::DigestMismatch { .. }) => true,
        Error::Fs(
            fs::Error::ChangedWhileReading { path } | fs::Error::WrongFileType { path, .. },
        ) => path.starts_with(entry_dir),
        Error::Fs(fs::Error::Io { path, .. }) => path.starts_with(entry_dir),
        _ => false,
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

struct Build {
    elapsed: Duration,
    before: Option<artifacts::Before>,
}

fn build(ctx: &mut Ctx<'_>) -> Result<(Build, i32), Error> {
    let custom = ctx.publish.is_some();
    let before = if custom {
        wipe(&ctx.stage_or_output)?;
        None
    } else if ctx.include.is_none() {
        let mut before = artifacts::snapshot(&ctx.stage_or_output)?;
        before.forget(&ctx.partially_restored);
        Some(before)
    } else {
        None
    };
    let opts = ctx.opts;
    let argv = &opts.identity.command;
    let program = argv.first().ok_or(Error::EmptyCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(argv.iter().skip(1));
    for e in &opts.identity.set_env {
        cmd.env(e.name(), e.value());
    }
    // A strata run inside this build inherits the directory locks this run holds.
    let mut held: Vec<&Path> = vec![ctx.stage_or_output.as_path()];
    if let Some((publish_dir, state)) = &ctx.publish {
        held.push(publish_dir);
        held.push(state);
    }
    cmd.env(guard::HELD_DIRS_VAR, guard::held_dirs_for_child(&held));
    if let Some(dir) = &opts.identity.working_directory {
        cmd.current_dir(dir);
    }
    let start = Instant::now();
    let end = crate::process::run(&mut cmd)
        .map_err(|source| Error::Spawn { program: program.into(), source })?;
    let elapsed = start.elapsed();
    let status = end.status;
    // A signal strata received (and forwarded) ends the run like a build killed by it:
    // nothing is saved, even if the build finished anyway.
    let killed_by = end.interrupted_by.or(std::os::unix::process::ExitStatusExt::signal(&status));
    let code = match (killed_by, status.code()) {
        (Some(sig), _) => {
            (ctx.notify)(Notice::Signal { signal: sig, interrupted: end.interrupted_by.is_some() });
            128 + sig
        }
        (None, Some(c)) => c,
        (None, None) => 1,
    };
    Ok((Build { elapsed, before }, code))
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
fn collect_after(
    ctx: &mut Ctx<'_>,
    before: Option<artifacts::Before>,
    unit_dir: &Path,
) -> Result<Option<Vec<Described>>, Error> {
    let root = ctx.stage_or_output.clone();
    // An incremental build leaves up-to-date outputs alone; those that earlier entries of
    // this unit captured are still outputs, so the new entry holds them too (otherwise a
    // HIT in a clean directory would restore an incomplete set).
    let previous = if before.is_some() { previous_outputs(unit_dir) } else { HashSet::new() };
    let selection = match (&ctx.include, &before) {
        (Some(p), _) => Selection::Include(p),
        (None, Some(b)) => Selection::ChangedSince(b, &previous),
        (None, None) => Selection::All,
    };
    let custom = ctx.publish.is_some();
    let cache_root = ctx.cache_root.clone();
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
            Ok(if custom { Some(d) } else { None })
        }
        Ok(d) => {
            // Untouched files with no earlier entry to vouch for them (a first build into
            // a directory that already had content): possibly outputs the entry lacks.
            if let Some(b) = &before
                && previous.is_empty()
            {
                let mut untouched = b.untouched(&root, &d);
                untouched.retain(|p| !p.to_path(&root).starts_with(&cache_root));
                if let Some(first) = untouched.first() {
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
            }
            Ok(Some(d))
        }
        // Custom operators must publish what they built: the error is fatal.
        Err(e) if custom => Err(e),
        Err(e) => {
            ctx.warn(
                "collect",
                format!("cannot collect artifacts; nothing saved: {}", one_line(&e)),
            );
            Ok(None)
        }
    }
}

fn bypass(ctx: &mut Ctx<'_>, key: ActionKey) -> Result<RunReport, Error> {
    let (build, code) = build(ctx)?;
    if code != 0 {
        return Ok(RunReport { outcome: Outcome::BuildFailed, key, exit_code: code });
    }
    if ctx.publish.is_some()
        && let Some(described) = collect_after(ctx, build.before, Path::new(""))?
    {
        let artifacts: Vec<Record> = described.iter().map(|d| d.artifact.clone()).collect();
        ctx.publish_artifacts(&ctx.stage_or_output.clone(), &artifacts)?;
    }
    Ok(RunReport { outcome: Outcome::Bypass, key, exit_code: 0 })
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
