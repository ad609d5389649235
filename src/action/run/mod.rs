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
//!
//! The stages are functions here (`start`, `look_up`, `miss`, `save`; `bypass` when the
//! entry lock is unavailable); `hit.rs` restores a HIT, `build.rs` runs the build and
//! collects what it produced, and `target.rs` holds everything that differs by domain.

mod build;
mod hit;
mod remote;
mod target;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::action::entry::{self, EntryManifest, Lookup};
use crate::action::identity::{Identity, IdentityInputs, Patterns};
use crate::action::layout::{CacheRoot, Domain, EntryLocation};
use crate::action::prepare::{entry_name, prepare};
use crate::action::{ActionKey, Error, LockKind};
use crate::content::Record;
use crate::fs::{self, LockGuard};
use crate::l1::events::{EventLog, ms};
use crate::l1::lock::{Timeouts, lock_with_events};
use crate::message::one_line;
use target::Target;

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
    /// The remote entry tier (`--remote-store`), tried on a local MISS before building and
    /// offered each new entry; `None`: local cache only.
    pub remote: Option<std::sync::Arc<dyn crate::l1::remote::EntrySource>>,
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
        /// The entry was fetched from the remote entry tier just now (a remote HIT), not
        /// found in the local cache.
        remote: bool,
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
    /// The output directory (third party) or the private stage (custom operators).
    dir: PathBuf,
    target: Target,
    include: Option<Patterns>,
    /// The resolved cache root: when it lies inside the output directory, its files are
    /// never artifacts.
    cache: CacheRoot,
    /// When the run started.
    started: Instant,
}

impl Ctx<'_> {
    fn warn(&mut self, component: &'static str, message: String) {
        self.events.emit(
            "warning",
            &[("component", component.into()), ("message", message.clone().into())],
        );
        (self.notify)(Notice::Warning { component, message });
    }

    fn publish_artifacts(&mut self, artifacts: &[Record]) -> Result<(), Error> {
        let wait = self.opts.timeouts.publish;
        let warnings = self.target.publish(&self.dir, artifacts, wait, &self.events)?;
        for w in warnings {
            self.warn("publish_state", w);
        }
        Ok(())
    }

    fn report(&self, outcome: Outcome, key: ActionKey, exit_code: i32) -> RunReport {
        RunReport { outcome, key, exit_code }
    }
}

/// The entry a run looks up and saves, and how long hashing took.
struct Entry {
    loc: EntryLocation,
    expected: EntryManifest,
    identity: Identity,
    hashed: Duration,
}

/// Runs one action (see the module docs). `notify` receives what to print, as it happens.
///
/// The cache result is counted in the cache root's machine-local counters
/// ([`crate::l1::counters`], domain `third_party` or `custom_operator`), as the
/// notice that announced it: `hit`, `miss` (whatever happens to the build after it) or
/// `bypass`. A run that stops before the lookup (a usage error, a lock timeout) counts
/// nothing.
///
/// # Errors
/// Usage errors ([`Error::is_usage`]), missing declared inputs, publication conflicts,
/// non-bypassable lock timeouts ([`Error::is_lock_timeout`]), a command that cannot start.
pub fn run(opts: &RunOptions, notify: &mut dyn FnMut(Notice)) -> Result<RunReport, Error> {
    let mut counted = None;
    let mut observe = |notice: Notice| {
        match notice {
            Notice::Hit { .. } => counted = Some("hit"),
            Notice::Miss { .. } => counted = Some("miss"),
            Notice::Bypass { .. } => counted = Some("bypass"),
            _ => {}
        }
        notify(notice);
    };
    let result = run_uncounted(opts, &mut observe);
    if let Some(name) = counted
        && let Ok(cache) = crate::l1::layout::CacheRoot::new(&opts.cache_root)
    {
        crate::l1::counters::bump(&cache, opts.domain.as_str(), name);
    }
    result
}

fn run_uncounted(opts: &RunOptions, notify: &mut dyn FnMut(Notice)) -> Result<RunReport, Error> {
    let (mut ctx, entry) = start(opts, notify)?;
    let include = ctx.include.is_some();
    let wait = opts.timeouts.action;
    let _action_lock = ctx.target.lock(&ctx.cache, &ctx.dir, include, wait, &ctx.events)?;
    let entry_lock = match lock_with_events(
        &entry.loc.lock,
        LockKind::Entry,
        opts.timeouts.entry,
        &ctx.events,
    ) {
        Ok(g) => g,
        Err(e) => return bypass(&mut ctx, &entry, format!("cache lock unavailable: {e}")),
    };
    let lookup_start = Instant::now();
    match look_up(&mut ctx, &entry)? {
        Looked::Hit(report) => Ok(report),
        Looked::Miss { keep_entry } => {
            let lookup_ms = ms(lookup_start.elapsed());
            miss(&mut ctx, &entry, entry_lock, keep_entry, lookup_ms)
        }
    }
}

/// Prepares the request, opens the event log, prepares the target and computes the
/// identity (a missing declared input fails here).
fn start<'a>(
    opts: &'a RunOptions,
    notify: &'a mut dyn FnMut(Notice),
) -> Result<(Ctx<'a>, Entry), Error> {
    let started = Instant::now();
    // The same preparation `explain` uses: checks, resolved places, identity inputs.
    let prepared = prepare(opts)?;
    let mut events = EventLog::open(opts.event_log.as_deref());
    events.set_base("domain", opts.domain.as_str());
    events.set_base("unit", opts.unit.clone());
    events.set_base("soc", opts.soc.clone());
    events.set_base("operator", opts.operator.clone());
    events.set_base("action", opts.action.clone());
    let target = Target::new(opts, &prepared);
    target.prepare(opts, &prepared.cache, &prepared.output_dir)?;
    let identity = prepared.identity()?;
    events.set_base("key", identity.key.to_string());
    let name = entry_name(opts, &identity);
    let loc = prepared.cache.entry(&name, &identity.key)?;
    let expected = EntryManifest::expected(&name, &identity);
    let hashed = identity.elapsed;
    let ctx = Ctx {
        opts,
        events,
        notify,
        dir: prepared.output_dir.clone(),
        target,
        include: prepared.include.clone(),
        cache: prepared.cache.clone(),
        started,
    };
    Ok((ctx, Entry { loc, expected, identity, hashed }))
}

/// What the lookup found.
enum Looked {
    /// Restored (and published): the run is done.
    Hit(RunReport),
    /// Build. `keep_entry`: a valid entry exists but could not be restored into the
    /// output directory, so the build must not replace it.
    Miss { keep_entry: bool },
}

/// Looks the entry up and restores a HIT. A corrupt entry or a failed restore is a
/// warning and a MISS; a publication failure is an error.
fn look_up(ctx: &mut Ctx<'_>, entry: &Entry) -> Result<Looked, Error> {
    let lookup_start = Instant::now();
    let loc = &entry.loc;
    let mut lookup = entry::lookup(loc, &entry.expected);
    let mut fetched = false;
    if matches!(lookup, Lookup::Absent) && remote::fetch(ctx, entry) {
        fetched = true;
        lookup = entry::lookup(loc, &entry.expected);
    }
    let manifest = match lookup {
        Lookup::Valid(manifest) => manifest,
        Lookup::Absent => return Ok(Looked::Miss { keep_entry: false }),
        Lookup::Invalid(reason) => {
            if fetched {
                remote::count(ctx, crate::l1::remote::counter::ERROR);
            }
            let dir = loc.dir.display();
            let message =
                format!("invalid cache entry {dir} ({reason}); rebuilding and replacing it");
            ctx.warn("validate", message);
            return Ok(Looked::Miss { keep_entry: false });
        }
    };
    let lookup_ms = ms(lookup_start.elapsed());
    let restore_start = Instant::now();
    let memo_path = ctx.cache.verify_memo(&loc.rel);
    let e = match hit::restore_hit(ctx, loc, &memo_path, &manifest.artifacts)? {
        Ok(restored) => {
            if let Some(ns) = &loc.namespace_dir {
                let _ = fs::touch(&ns.join(".last-used"));
            }
            ctx.events.emit(
                "cache_result",
                &[
                    ("status", "HIT".into()),
                    ("hash_ms", ms(entry.hashed)),
                    ("lookup_ms", lookup_ms),
                    ("restore_ms", ms(restore_start.elapsed())),
                    ("total_ms", ms(ctx.started.elapsed())),
                    ("artifacts", manifest.artifacts.len().into()),
                    ("bytes", restored.bytes.into()),
                    ("hashed_bytes", restored.hashed_bytes.into()),
                    ("vouched_files", restored.vouched_files.into()),
                    ("remote", fetched.into()),
                ],
            );
            if fetched {
                remote::count(ctx, crate::l1::remote::counter::HIT);
            }
            let key = entry.identity.key;
            (ctx.notify)(Notice::Hit { key, artifacts: manifest.artifacts.len(), remote: fetched });
            return Ok(Looked::Hit(ctx.report(Outcome::Hit, key, 0)));
        }
        Err(e) => e,
    };
    if hit::entry_at_fault(&e, &loc.dir) {
        ctx.warn("restore", format!("restore failed; rebuilding: {}", one_line(&e)));
        return Ok(Looked::Miss { keep_entry: false });
    }
    // The entry is fine; the output directory is not (a symlink or a directory in the
    // way, a permission problem). Build without replacing a good entry with whatever this
    // directory lets the build produce.
    let message = format!(
        "cannot restore into {}; building without replacing the valid entry: {}",
        ctx.dir.display(),
        one_line(&e)
    );
    ctx.warn("restore", message);
    Ok(Looked::Miss { keep_entry: true })
}

/// MISS: build, collect, publish (custom operators), then save the entry unless
/// `keep_entry`.
fn miss(
    ctx: &mut Ctx<'_>,
    entry: &Entry,
    entry_lock: LockGuard,
    keep_entry: bool,
    lookup_ms: serde_json::Value,
) -> Result<RunReport, Error> {
    let key = entry.identity.key;
    ctx.events.emit(
        "cache_result",
        &[("status", "MISS".into()), ("hash_ms", ms(entry.hashed)), ("lookup_ms", lookup_ms)],
    );
    (ctx.notify)(Notice::Miss { key });
    let (built, code) = build::build(ctx)?;
    if code != 0 {
        return Ok(ctx.report(Outcome::BuildFailed, key, code));
    }
    let Some(described) = build::collect_after(ctx, built.before, &entry.loc.parent)? else {
        return Ok(ctx.report(Outcome::Built, key, 0));
    };
    let artifacts: Vec<Record> = described.iter().map(|d| d.artifact.clone()).collect();
    ctx.publish_artifacts(&artifacts)?;
    if described.is_empty() || keep_entry {
        return Ok(ctx.report(Outcome::Built, key, 0));
    }
    let manifest = EntryManifest {
        artifacts,
        build_ms: built.elapsed.as_millis() as u64,
        created_at: crate::record::Timestamp::now().rfc3339(),
        ..entry.expected.clone()
    };
    save(ctx, entry, entry_lock, &manifest, &described, built.elapsed)
}

/// Saves the new entry (a failure is a warning: the build result stands) and touches
/// `.updated`.
fn save(
    ctx: &mut Ctx<'_>,
    entry: &Entry,
    entry_lock: LockGuard,
    manifest: &EntryManifest,
    described: &[entry::Described],
    build_time: Duration,
) -> Result<RunReport, Error> {
    let key = entry.identity.key;
    let save_start = Instant::now();
    let saved = entry::save(&entry.loc, manifest, &entry.identity.components, described);
    drop(entry_lock);
    if let Err(e) = saved {
        ctx.warn("save", format!("save failed; build result kept: {}", one_line(&e)));
        return Ok(ctx.report(Outcome::Built, key, 0));
    }
    if let Err(e) = fs::touch(&ctx.cache.updated_marker()) {
        ctx.warn("updated_marker", e.to_string());
    }
    if let Some(ns) = &entry.loc.namespace_dir {
        let _ = fs::touch(&ns.join(".last-used"));
    }
    remote::offer(ctx, entry);
    ctx.events.emit(
        "cache_result",
        &[
            ("status", "SAVED".into()),
            ("build_ms", ms(build_time)),
            ("save_ms", ms(save_start.elapsed())),
            ("total_ms", ms(ctx.started.elapsed())),
            ("artifacts", described.len().into()),
        ],
    );
    (ctx.notify)(Notice::Saved { key, artifacts: described.len(), build: build_time });
    Ok(ctx.report(Outcome::Saved, key, 0))
}

/// The entry lock is unavailable: build without reading or writing the cache (custom
/// operators still publish).
fn bypass(ctx: &mut Ctx<'_>, entry: &Entry, reason: String) -> Result<RunReport, Error> {
    let key = entry.identity.key;
    ctx.events.emit(
        "cache_result",
        &[
            ("status", "BYPASS".into()),
            ("reason", reason.clone().into()),
            ("hash_ms", ms(entry.hashed)),
            ("total_ms", ms(ctx.started.elapsed())),
        ],
    );
    (ctx.notify)(Notice::Bypass { reason });
    let (built, code) = build::build(ctx)?;
    if code != 0 {
        return Ok(ctx.report(Outcome::BuildFailed, key, code));
    }
    if ctx.target.publishes()
        && let Some(described) = build::collect_after(ctx, built.before, std::path::Path::new(""))?
    {
        let artifacts: Vec<Record> = described.iter().map(|d| d.artifact.clone()).collect();
        ctx.publish_artifacts(&artifacts)?;
    }
    Ok(ctx.report(Outcome::Bypass, key, 0))
}
