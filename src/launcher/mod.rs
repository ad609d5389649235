//! The compiler launcher (docs/launcher.md; seed 003, "compiler launcher"): `strata
//! <compiler> ARGS...` as `CMAKE_<LANG>_COMPILER_LAUNCHER` (or `CC="strata gcc"`), caching
//! each C/C++ compilation in the L1 cache, in its own domain (`actions-v1/compile/`, see
//! [`entry`]).
//!
//! One run ([`run`]):
//! 1. [`args::classify`] the command line; anything but one compilation of one C/C++ source
//!    into one object runs the compiler unchanged and counts the reason;
//! 2. the compiler's family ([`family`]: GCC or Clang, by what it reports, memoised);
//! 3. the key: toolchain identity (the real compiler behind any wrapper, its `--version`,
//!    and with `STRATA_TOOL_CONTENT` its bytes; memoised by stamp), the family, the
//!    compiler name as given (clang picks its language mode from it), the arguments in
//!    their record form ([`location`]) without the ones that only name outputs, the
//!    source's digest, and the family's environment variables;
//! 4. lookup: the first candidate of the key whose facts all hold here ([`check`]) is a
//!    HIT: its outputs are written for the current names and directories (`restore.rs`),
//!    its messages replayed; nothing is compiled or preprocessed;
//! 5. otherwise a MISS (`save.rs`): the compiler runs with the build's arguments, traced
//!    ([`trace`]; what it read, looked up, listed and wrote becomes the candidate's facts,
//!    [`observe`]) or, where tracing is refused, untraced with the fallback model
//!    ([`model`]); a failed compile is never cached.
//!
//! The library decides; it never prints or replaces the process. [`run`] returns a
//! [`Report`]: the messages to print and either the bytes to replay with an exit code or
//! the command to run in strata's place (`src/cli/launch.rs` does both). A cache problem
//! never fails a build: it becomes a warning and the compiler runs.

pub mod archive;
pub mod args;
pub mod check;
mod compile;
pub mod depfile;
pub mod entry;
pub mod family;
mod inputs;
pub mod location;
pub mod model;
pub mod observe;
mod remote;
pub mod report;
mod restore;
mod save;
mod stored;
pub mod trace;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::digest::DigestAlgorithm;
use crate::fs;
use crate::l1::counters::{self, COMPILE};
use crate::l1::layout::CacheRoot;
// The exit code of a finished process (`128 + signal` when killed).
use crate::process::exit_code_of as exit_code;

use args::Classified;

/// Why the launcher could not use the cache for a run (the compiler still runs).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting cannot be used (the message names the variable or flag).
    #[error("{0}")]
    Setting(String),
    /// The working directory cannot be read.
    #[error("cannot read the working directory: {0}")]
    WorkingDirectory(#[source] std::io::Error),
    /// The compiler could not be identified.
    #[error("cannot identify the compiler {}: {reason}", tool.display())]
    Toolchain {
        /// The compiler's canonical path.
        tool: PathBuf,
        /// What failed.
        reason: String,
    },
    /// A compile entry cannot be used (it is replaced by the next save).
    #[error("compile entry {entry} unusable: {reason}")]
    Entry {
        /// The entry's path relative to `actions-v1`.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A stored output cannot be handed back.
    #[error("stored output {role} unusable: {reason}")]
    Output {
        /// Its role (`object`, `depfile`, …).
        role: String,
        /// What is wrong.
        reason: String,
    },
    /// A dependency file cannot be read as one.
    #[error("dependency file {}: {reason}", path.display())]
    Depfile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The compiler could not be started.
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file system operation failed (the error names the path).
    #[error(transparent)]
    Fs(#[from] fs::Error),
    /// The entry lock was not taken in time (the message names the lock and the variable
    /// that sets the timeout).
    #[error(transparent)]
    Lock(#[from] crate::l1::lock::LockError),
}

/// Launcher settings, from the environment ([`Config::from_env`]).
#[derive(Debug, Clone)]
pub struct Config {
    /// The L1 cache root.
    pub cache_root: PathBuf,
    /// Base directories (`STRATA_BASE_DIRS`, separated by `:`).
    pub base_dirs: Vec<PathBuf>,
    /// Digest algorithm of new candidates (`STRATA_DIGEST`).
    pub digest: DigestAlgorithm,
    /// Identify the compiler by content too (`STRATA_TOOL_CONTENT` = `1`, `true`, `on`).
    pub tool_content: bool,
    /// Run the compiler without the cache (`STRATA_DISABLE` = `1`, `true`, `on`).
    pub disabled: bool,
    /// Print one line per compilation saying what happened and why (`STRATA_EXPLAIN`).
    pub explain: bool,
    /// Observe compiles with the fallback model instead of tracing them
    /// (`STRATA_TRACE=0`; for tests and for machines where tracing misbehaves).
    pub model_only: bool,
    /// Keep the tracer and the traced compiler on one CPU while it is not contended
    /// (`STRATA_TRACE_PIN`, default on; `0` turns it off).
    pub trace_pin: bool,
    /// How traced calls are stopped (`STRATA_TRACE_MECHANISM` = `auto`, the default,
    /// `notify` or `ptrace`; docs/launcher.md).
    pub trace_mechanism: trace::Mechanism,
    /// Let the preload library take file opens without a stop under notification
    /// (`STRATA_TRACE_PRELOAD`, default on; `0` turns it off; docs/launcher.md).
    pub trace_preload: bool,
    /// Use the machine's memo of input files (`STRATA_INPUT_MEMO`, default on; `0` turns
    /// it off: every MISS reads, hashes and scans every input; docs/launcher.md).
    pub input_memo: bool,
    /// The remote entry tier ([`Overrides::remote`]).
    pub remote: Option<std::sync::Arc<dyn crate::l1::remote::EntrySource>>,
    /// How long a save waits for the entry lock: L1's one entry-lock policy
    /// ([`crate::l1::lock::Timeouts::entry`], `STRATA_ENTRY_LOCK_TIMEOUT_SECONDS`, 60 s).
    pub entry_lock: fs::LockWait,
}

impl Config {
    /// Reads `STRATA_CACHE_ROOT` (default [`crate::config::default_cache_root`]),
    /// `STRATA_BASE_DIRS`, `STRATA_DIGEST`, `STRATA_TOOL_CONTENT`, `STRATA_DISABLE`,
    /// `STRATA_EXPLAIN`, `STRATA_TRACE` and `STRATA_ENTRY_LOCK_TIMEOUT_SECONDS`.
    ///
    /// # Errors
    /// [`Error::Setting`] naming the variable when a value cannot be used or no cache root
    /// can be found.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_env_with(&Overrides::default())
    }

    /// [`Config::from_env`] with `overrides` taking precedence.
    ///
    /// # Errors
    /// As [`Config::from_env`].
    pub fn from_env_with(overrides: &Overrides) -> Result<Self, Error> {
        let var = crate::config::var;
        let switch = |name: &str| -> Result<Option<bool>, Error> {
            match var(name) {
                Some(v) => crate::config::parse_switch(&v.to_string_lossy())
                    .map(Some)
                    .map_err(|why| Error::Setting(format!("{name}: {why}"))),
                None => Ok(None),
            }
        };
        let cache_root = match overrides
            .cache_root
            .clone()
            .or_else(|| var("STRATA_CACHE_ROOT").map(PathBuf::from))
        {
            Some(root) => fs::expand_tilde(&root),
            None => {
                crate::config::default_cache_root().map_err(|e| Error::Setting(e.to_string()))?
            }
        };
        let base_dirs = if overrides.base_dirs.is_empty() {
            var("STRATA_BASE_DIRS")
                .map(|v| std::env::split_paths(&v).filter(|p| p.is_absolute()).collect())
                .unwrap_or_default()
        } else {
            overrides.base_dirs.iter().map(|d| fs::expand_tilde(d)).collect()
        };
        let digest = match var("STRATA_DIGEST") {
            Some(v) => v.to_str().and_then(|t| t.parse().ok()).ok_or_else(|| {
                Error::Setting("STRATA_DIGEST must be blake3 or sha256".to_owned())
            })?,
            None => DigestAlgorithm::Blake3,
        };
        Ok(Config {
            cache_root,
            base_dirs,
            digest,
            tool_content: overrides.tool_content || switch("STRATA_TOOL_CONTENT")? == Some(true),
            disabled: switch("STRATA_DISABLE")? == Some(true),
            explain: switch("STRATA_EXPLAIN")? == Some(true),
            model_only: switch("STRATA_TRACE")? == Some(false),
            trace_pin: switch("STRATA_TRACE_PIN")? != Some(false),
            trace_mechanism: match crate::config::var_text("STRATA_TRACE_MECHANISM") {
                Some(value) => trace::Mechanism::from_arg(value.trim()).ok_or_else(|| {
                    Error::Setting(format!(
                        "STRATA_TRACE_MECHANISM must be auto, notify or ptrace (it is {value:?})"
                    ))
                })?,
                None => trace::Mechanism::Auto,
            },
            trace_preload: switch("STRATA_TRACE_PRELOAD")? != Some(false),
            input_memo: switch("STRATA_INPUT_MEMO")? != Some(false),
            remote: overrides.remote.clone(),
            entry_lock: crate::l1::lock::Timeouts::from_env()
                .map_err(|e| Error::Setting(e.to_string()))?
                .entry,
        })
    }
}

/// Settings given on the command line (`strata compile --cache-root DIR --base-dir DIR …`),
/// which take precedence over the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// The L1 cache root.
    pub cache_root: Option<PathBuf>,
    /// Base directories (replacing `STRATA_BASE_DIRS` when any is given).
    pub base_dirs: Vec<PathBuf>,
    /// Identify the compiler by content too (as `STRATA_TOOL_CONTENT`).
    pub tool_content: bool,
    /// The remote entry tier, tried when the key has no local entry and offered each new
    /// entry (built by the command line from `STRATA_REMOTE_STORE`; `None`: local only).
    pub remote: Option<std::sync::Arc<dyn crate::l1::remote::EntrySource>>,
}

/// What one launcher run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Served from the cache.
    Hit,
    /// Compiled and saved.
    Miss,
    /// Compiled, not saved, for this reason (a counter name).
    NotCached(String),
}

/// What the command line does after [`run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Replace strata with this command (`exec`): the compile is not the cache's business.
    Exec {
        /// The program as the build named it.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
    },
    /// Write these bytes (the compiler's, run or replayed) and exit with `code`.
    Exit {
        /// The exit code (a signal `s` as `128 + s`).
        code: i32,
        /// Bytes for standard output.
        stdout: Vec<u8>,
        /// Bytes for standard error.
        stderr: Vec<u8>,
    },
}

/// A line strata itself has to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A warning (`strata: warning: …`), printed before the compiler's output.
    Warning(String),
    /// The `STRATA_EXPLAIN` line (`strata: …`), printed after it.
    Explain(String),
}

/// The result of [`run`]: what to say and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Lines strata says, in order.
    pub messages: Vec<Message>,
    /// What to do.
    pub step: Step,
}

/// Collects [`Message`]s during a run.
#[derive(Debug, Default)]
pub(crate) struct Messages(std::cell::RefCell<Vec<Message>>);

impl Messages {
    pub(crate) fn warn(&self, text: impl Into<String>) {
        self.0.borrow_mut().push(Message::Warning(text.into()));
    }

    pub(crate) fn explain(&self, text: impl Into<String>) {
        self.0.borrow_mut().push(Message::Explain(text.into()));
    }

    fn take(&self) -> Vec<Message> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

/// Environment variables that make the compiler write files the launcher does not know.
const UNCACHEABLE_ENVIRONMENT: &[&str] = &["DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"];

/// Runs `compiler` with `args` through the cache (see the module docs).
pub fn run(compiler: &OsStr, args: &[OsString], overrides: &Overrides) -> Report {
    let out = Messages::default();
    let step = decide(compiler, args, overrides, &out);
    Report { messages: out.take(), step }
}

fn decide(compiler: &OsStr, args: &[OsString], overrides: &Overrides, out: &Messages) -> Step {
    let unchanged = || Step::Exec { program: compiler.to_owned(), args: args.to_vec() };
    let config = match Config::from_env_with(overrides) {
        Ok(c) => c,
        Err(e) => {
            out.warn(format!("{e}; running the compiler without the cache"));
            return unchanged();
        }
    };
    if config.disabled {
        return unchanged();
    }
    let cache = match CacheRoot::new(&config.cache_root) {
        Ok(c) => c,
        Err(e) => {
            out.warn(format!("cache root: {e}; running the compiler without the cache"));
            return unchanged();
        }
    };
    if let Some(tool) = archive::tool_of(compiler) {
        return archive::main(&config, &cache, compiler, tool, args, out);
    }
    let skip = |reason: &str, what: &dyn std::fmt::Display| {
        not_cached_in(COMPILE, &config, &cache, reason, what, out);
        unchanged()
    };
    let what = || command_line(compiler, args);
    // `strata ccache gcc …`: ccache (or another wrapper) runs the compiler; strata would
    // cache ccache's run, with its own cache as an input it cannot see.
    if crate::toolchain::is_compiler_wrapper(compiler) {
        return skip("uncacheable:compiler_is_a_wrapper", &what());
    }
    let Some(tool) = compiler.to_str().and_then(|c| crate::toolchain::resolve_tool(c, None)) else {
        return skip("uncacheable:compiler_not_found", &what());
    };
    if std::env::current_exe().ok().and_then(|p| fs::canonicalize(&p).ok()).as_ref() == Some(&tool)
    {
        out.warn(format!(
            "the compiler {} is strata itself; give the real compiler after `strata`",
            compiler.to_string_lossy()
        ));
        return Step::Exit { code: 1, stdout: Vec::new(), stderr: Vec::new() };
    }
    // A program whose preprocessor does not answer the probe is not a compiler strata
    // knows (or not a compiler at all): it runs unchanged, counted.
    let probe = match family::probe(&tool, Some(&cache.memo_dir())) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!("{}: {e}", tool.display());
            return skip("uncacheable:unknown_compiler_family", &what());
        }
    };
    let Some(kind) = probe.kind else {
        return skip("uncacheable:unknown_compiler_family", &what());
    };
    let compile = match kind.family().classify(args) {
        Classified::Cacheable(c) => c,
        Classified::Uncacheable(reason) => {
            return skip(&format!("uncacheable:{}", reason.name()), &what());
        }
    };
    let source = compile.source.display();
    if compile::output_paths(&compile).iter().any(|p| !is_regular_or_absent(p)) {
        // `-o /dev/null`, a depfile through a symlink: a HIT would replace the device or
        // the link with a file, and the saved copy could not be read back anyway.
        return skip("uncacheable:output_not_regular_file", &source);
    }
    if let Some(name) = UNCACHEABLE_ENVIRONMENT.iter().find(|n| crate::config::var_raw(n).is_some())
    {
        return skip(&format!("uncacheable:environment_{}", name.to_lowercase()), &source);
    }
    let run = compile::Run {
        config: &config,
        cache: &cache,
        compiler,
        tool: &tool,
        args,
        compile: &compile,
        family: kind.family(),
        kind,
        probe,
        out,
        notes: std::cell::RefCell::new(Vec::new()),
        inputs: std::cell::RefCell::new(inputs::InputMemo::new(&cache, config.input_memo)),
        counted: std::cell::RefCell::new(Vec::new()),
    };
    let went = run.go();
    let mut counts: Vec<(&str, &str)> = run.counted.take();
    match went {
        Ok((outcome, step)) => {
            let name = match &outcome {
                Outcome::Hit => "hit",
                Outcome::Miss => "miss",
                Outcome::NotCached(reason) => reason,
            };
            counts.push((COMPILE, name));
            counters::bump_all(&cache, &counts);
            if config.explain {
                let notes = run.notes.borrow().join("; ");
                let sep = if notes.is_empty() { "" } else { ": " };
                out.explain(format!("{name} {source}{sep}{notes}"));
            }
            step
        }
        Err(compile::Failed::Quietly(reason)) => {
            counters::bump_all(&cache, &counts);
            skip(reason, &source)
        }
        Err(compile::Failed::BeforeCompile(e)) => {
            out.warn(format!("{e}; running the compiler without the cache"));
            counts.push((COMPILE, "error"));
            counters::bump_all(&cache, &counts);
            unchanged()
        }
    }
}

/// Creates the compile entry at `place` (never through a symlink below `actions-v1/`) and
/// takes its lock with L1's entry-lock policy ([`Config::entry_lock`]), for a save.
///
/// # Errors
/// [`Error::Fs`] naming the path; [`Error::Lock`] when the lock is not taken in time.
fn lock_entry(
    cache: &CacheRoot,
    config: &Config,
    place: &entry::EntryPlace,
) -> Result<fs::LockGuard, Error> {
    fs::create_dir_all(&cache.actions_dir())?;
    fs::create_dir_all_within(&cache.actions_dir(), Path::new(place.rel.as_str()), 0o755)?;
    let events = crate::l1::events::EventLog::disabled();
    let kind = crate::l1::lock::LockKind::Entry;
    Ok(crate::l1::lock::lock_with_events(&place.lock, kind, config.entry_lock, &events)?)
}

/// Counts `reason` in the counter domain `domain` (compile or archive) and says it under
/// `STRATA_EXPLAIN` (`strata: <reason> <what>`, `what` being the source, or the whole
/// command when no single source was found).
fn not_cached_in(
    domain: &str,
    config: &Config,
    cache: &CacheRoot,
    reason: &str,
    what: &dyn std::fmt::Display,
    out: &Messages,
) {
    counters::bump(cache, domain, reason);
    if config.explain {
        out.explain(format!("{reason} {what}"));
    }
}

/// The command as one line, for `STRATA_EXPLAIN` when no single source names it.
fn command_line(compiler: &OsStr, args: &[OsString]) -> String {
    std::iter::once(compiler)
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// True if nothing is at `path` (`lstat`) or a regular file is.
fn is_regular_or_absent(path: &Path) -> bool {
    match fs::symlink_metadata_opt(path) {
        Ok(None) => true,
        Ok(Some(meta)) => meta.is_file(),
        Err(_) => false,
    }
}

/// A launcher key being built: BLAKE3 over named, length-prefixed fields, lengths
/// little-endian ([`crate::digest::FieldHasher`]), the first naming the domain
/// (`strata.compile_key`, `strata.archive_key`), so no two field sequences and no two
/// domains hash the same bytes. [`KeyBuilder::finish`] gives 64 lowercase hex.
pub(crate) struct KeyBuilder(crate::digest::FieldHasher);

impl KeyBuilder {
    /// A key of the domain `domain` (version 1).
    pub(crate) fn new(domain: &str) -> KeyBuilder {
        use crate::digest::{FieldHasher, LengthOrder};
        let hasher = FieldHasher::new(DigestAlgorithm::Blake3, LengthOrder::LittleEndian);
        let mut key = KeyBuilder(hasher);
        key.field(domain, b"1");
        key
    }

    /// Adds one field.
    pub(crate) fn field(&mut self, name: &str, bytes: &[u8]) {
        self.0.named(name, bytes);
    }

    /// Adds the tool's identity: `<prefix>_version` (the real program's `--version`,
    /// memoised by stamp under the cache's memo directory), `<prefix>_content` (its bytes'
    /// digest, when [`Config::tool_content`] is set) and `<prefix>_name` (the file name the
    /// build invoked, e.g. `gcc` or `x86_64-linux-gnu-ar`).
    ///
    /// # Errors
    /// [`Error::Toolchain`] when the tool cannot be run or read.
    pub(crate) fn tool(
        &mut self,
        cache: &CacheRoot,
        config: &Config,
        resolved: &Path,
        invoked: &OsStr,
        prefix: &str,
    ) -> Result<(), Error> {
        let memo_dir = cache.memo_dir();
        let failed = |e: crate::toolchain::Error| Error::Toolchain {
            tool: resolved.to_path_buf(),
            reason: e.to_string(),
        };
        let version = crate::toolchain::tool_version(resolved, Some(&memo_dir)).map_err(failed)?;
        self.field(&format!("{prefix}_version"), version.as_bytes());
        if config.tool_content {
            let content =
                crate::toolchain::tool_content(resolved, Some(&memo_dir)).map_err(failed)?;
            self.field(&format!("{prefix}_content"), content.as_bytes());
        }
        let name = Path::new(invoked).file_name().unwrap_or(invoked);
        self.field(&format!("{prefix}_name"), name.as_bytes());
        Ok(())
    }

    /// Adds each variable of `names` that is set, as a field named after it.
    pub(crate) fn environment(&mut self, names: &[&str]) {
        for name in names {
            if let Some(value) = crate::config::var_raw(name) {
                self.field(name, value.as_bytes());
            }
        }
    }

    /// The key: 64 lowercase hex.
    pub(crate) fn finish(self) -> entry::CompileKey {
        entry::CompileKey::unchecked(self.0.finish().to_hex())
    }
}
