//! The compiler launcher (docs/launcher.md): `strata <compiler> ARGS...` as
//! `CMAKE_<LANG>_COMPILER_LAUNCHER` (or `CC="strata gcc"`), caching each C/C++ compilation
//! in the L1 cache, in its own domain (`actions-v1/compile/`, see [`entry`]).
//!
//! One run:
//! 1. [`args::classify`] the command line; anything but one compilation of one C/C++ source
//!    into one object runs the compiler unchanged (`exec`) and counts the reason;
//! 2. the key: toolchain identity (the real compiler behind any wrapper, its `--version`,
//!    and with `STRATA_TOOL_CONTENT` its bytes; memoised by stamp), the compiler name as
//!    given (clang picks its language mode from it), the arguments with paths under the
//!    base directories made relative ([`location`]), the source's digest, and the
//!    environment variables that change a compilation (`CPATH`, `C_INCLUDE_PATH`,
//!    `CPLUS_INCLUDE_PATH`, `GCC_EXEC_PREFIX`, `COMPILER_PATH`, `SOURCE_DATE_EPOCH`,
//!    `LANG`, `LC_ALL`, `LC_MESSAGES`, `LC_CTYPE`);
//! 3. direct lookup: the first candidate of the key whose headers, shadow probes and pins
//!    hold ([`entry::check`]) is a HIT: its outputs are copied out verified, the depfile
//!    rewritten for this directory, the messages replayed; the preprocessor never runs;
//! 4. otherwise a MISS: the compiler runs with the arguments unchanged (plus `-MD -MF
//!    <private file>` when the build asked for no depfile), and if it succeeds, its
//!    headers (from the dependency output), outputs and messages become a new candidate.
//!    A failed compile is never cached; a source or header using `__DATE__`, `__TIME__`
//!    or `__TIMESTAMP__` is not cached unless `SOURCE_DATE_EPOCH` fixes them.
//!
//! A cache problem never fails a build: the launcher warns and runs the compiler.

pub mod archive;
pub mod args;
pub mod depfile;
pub mod entry;
pub mod location;
mod remote;
pub mod report;
pub mod shadow;
pub mod trace;

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use memchr::memmem;

use crate::content::VerifyMemo;
use crate::content::counters::{self, COMPILE};
use crate::content::layout::CacheRoot;
use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs::{self, LockWait, Placement};

use args::{Classified, Compile, Depfile, Language};
use entry::{Candidate, CompileManifest, EntryPlace, Header, Output};
use location::Location;

/// Environment variables that change what a compilation produces (part of the key).
pub const KEY_ENVIRONMENT: &[&str] = &[
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
    "SOURCE_DATE_EPOCH",
    "LANG",
    "LC_ALL",
    "LC_MESSAGES",
    "LC_CTYPE",
];

/// Places the stored object of `output` at `dest` (mode 0644, no fsync), verified against
/// its digest unless `memo` vouches for the stored file's stamp; a file that had to be
/// hashed is remembered in `memo` as of `began`. Errors: the object is missing or its bytes
/// do not match the digest, or `dest` cannot be written (the message says which).
fn place_output(
    place: &EntryPlace,
    output: &Output,
    dest: &Path,
    memo: &mut VerifyMemo,
    began: SystemTime,
) -> Result<(), String> {
    let name = entry::object_memo_name(&output.digest);
    let placed = fs::place_file_checked(
        &place.object(&output.digest),
        dest,
        Placement { expected: output.digest, mode: 0o644, sync: false },
        &|stamp| memo.vouches(&name, stamp, &output.digest),
    )
    .map_err(|e| e.to_string())?;
    if placed.hashed {
        memo.remember(&name, placed.stamp, output.digest, began);
    }
    Ok(())
}

/// A launcher key being built: BLAKE3 over named, length-prefixed fields (`name`, a 0 byte,
/// the value's length as 8 bytes little-endian, the value), the first naming the domain
/// (`strata.compile_key`, `strata.archive_key`), so no two field sequences and no two
/// domains hash the same bytes. [`KeyBuilder::finish`] gives 64 lowercase hex.
pub(crate) struct KeyBuilder(blake3::Hasher);

impl KeyBuilder {
    /// A key of the domain `domain` (version 1).
    pub(crate) fn new(domain: &str) -> KeyBuilder {
        let mut key = KeyBuilder(blake3::Hasher::new());
        key.field(domain, b"1");
        key
    }

    /// Adds one field.
    pub(crate) fn field(&mut self, name: &str, bytes: &[u8]) {
        self.0.update(name.as_bytes());
        self.0.update(&[0]);
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    /// Adds the tool's identity: `<prefix>_version` (the real program's `--version`,
    /// memoised by stamp under the cache's memo directory), `<prefix>_content` (its bytes'
    /// digest, when [`Config::tool_content`] is set) and `<prefix>_name` (the file name the
    /// build invoked, e.g. `gcc` or `x86_64-linux-gnu-ar`). Errors: the tool cannot be run
    /// or read (the message names it).
    pub(crate) fn tool(
        &mut self,
        cache: &CacheRoot,
        config: &Config,
        resolved: &Path,
        invoked: &OsStr,
        prefix: &str,
    ) -> Result<(), String> {
        let memo_dir = cache.memo_dir();
        let version =
            crate::toolchain::tool_version(resolved, Some(&memo_dir)).map_err(|e| e.to_string())?;
        self.field(&format!("{prefix}_version"), version.as_bytes());
        if config.tool_content {
            let content = crate::toolchain::tool_content(resolved, Some(&memo_dir))
                .map_err(|e| e.to_string())?;
            self.field(&format!("{prefix}_content"), content.as_bytes());
        }
        let name = Path::new(invoked).file_name().unwrap_or(invoked);
        self.field(&format!("{prefix}_name"), name.as_bytes());
        Ok(())
    }

    /// Adds each variable of `names` that is set, as a field named after it.
    pub(crate) fn environment(&mut self, names: &[&str]) {
        for name in names {
            if let Some(value) = std::env::var_os(name) {
                self.field(name, value.as_bytes());
            }
        }
    }

    /// The key: 64 lowercase hex.
    pub(crate) fn finish(self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}

/// Environment variables that make the compiler write files the launcher does not know.
const UNCACHEABLE_ENVIRONMENT: &[&str] = &["DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"];

/// The macros whose expansion depends on the time of the compilation.
const TIME_MACROS: &[&str] = &["__DATE__", "__TIME__", "__TIMESTAMP__"];

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
    /// The remote entry tier ([`Overrides::remote`]).
    pub remote: Option<std::sync::Arc<dyn crate::content::remote::EntrySource>>,
}

impl Config {
    /// Reads `STRATA_CACHE_ROOT` (default [`crate::config::default_cache_root`]),
    /// `STRATA_BASE_DIRS`, `STRATA_DIGEST`, `STRATA_TOOL_CONTENT`
    /// `STRATA_DISABLE` and `STRATA_EXPLAIN`.
    ///
    /// # Errors
    /// A message naming the variable when a value cannot be used or no cache root can be
    /// found.
    pub fn from_env() -> Result<Self, String> {
        Self::from_env_with(&Overrides::default())
    }

    /// [`Config::from_env`] with `overrides` taking precedence.
    ///
    /// # Errors
    /// As [`Config::from_env`].
    pub fn from_env_with(overrides: &Overrides) -> Result<Self, String> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let flag = |name: &str| -> Result<bool, String> {
            match var(name) {
                Some(v) => {
                    let text = v.to_string_lossy();
                    crate::config::parse_switch(&text).map_err(|why| format!("{name}: {why}"))
                }
                None => Ok(false),
            }
        };
        let cache_root = match overrides
            .cache_root
            .clone()
            .or_else(|| var("STRATA_CACHE_ROOT").map(PathBuf::from))
        {
            Some(root) => fs::expand_tilde(&root),
            None => crate::config::default_cache_root().map_err(|e| e.to_string())?,
        };
        let base_dirs = if overrides.base_dirs.is_empty() {
            var("STRATA_BASE_DIRS")
                .map(|v| std::env::split_paths(&v).filter(|p| p.is_absolute()).collect())
                .unwrap_or_default()
        } else {
            overrides.base_dirs.iter().map(|d| fs::expand_tilde(d)).collect()
        };
        let digest = match var("STRATA_DIGEST") {
            Some(v) => v
                .to_str()
                .and_then(|t| t.parse().ok())
                .ok_or("STRATA_DIGEST must be blake3 or sha256")?,
            None => DigestAlgorithm::Blake3,
        };
        Ok(Config {
            cache_root,
            base_dirs,
            digest,
            tool_content: overrides.tool_content || flag("STRATA_TOOL_CONTENT")?,
            disabled: flag("STRATA_DISABLE")?,
            explain: flag("STRATA_EXPLAIN")?,
            remote: overrides.remote.clone(),
        })
    }
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

/// Runs `compiler` with `args` through the cache and returns the exit code to end with.
/// Messages go to standard error prefixed `strata:`; the compiler's own output passes
/// through (or is replayed on a HIT).
pub fn main(compiler: &OsStr, args: &[OsString]) -> i32 {
    main_with(compiler, args, &Overrides::default())
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
    pub remote: Option<std::sync::Arc<dyn crate::content::remote::EntrySource>>,
}

/// [`main`] with `overrides` applied to the environment's settings.
pub fn main_with(compiler: &OsStr, args: &[OsString], overrides: &Overrides) -> i32 {
    let config = match Config::from_env_with(overrides) {
        Ok(c) => c,
        Err(e) => {
            warn(&format!("{e}; running the compiler without the cache"));
            return exec(compiler, args);
        }
    };
    if config.disabled {
        return exec(compiler, args);
    }
    let cache = match CacheRoot::new(&config.cache_root) {
        Ok(c) => c,
        Err(e) => {
            warn(&format!("cache root: {e}; running the compiler without the cache"));
            return exec(compiler, args);
        }
    };
    if let Some(tool) = archive::tool_of(compiler) {
        return archive::main(&config, &cache, compiler, tool, args);
    }
    let compile = match args::classify(args) {
        Classified::Cacheable(c) => c,
        Classified::Uncacheable(reason) => {
            let what = command_line(compiler, args);
            let reason = format!("uncacheable:{}", reason.name());
            return not_cached(&config, &cache, &reason, &what, compiler, args);
        }
    };
    let source = compile.source.display();
    if output_paths(&compile).iter().any(|p| !is_regular_or_absent(p)) {
        // `-o /dev/null`, a depfile through a symlink: a HIT would replace the device or
        // the link with a file, and the saved copy could not be read back anyway.
        let reason = "uncacheable:output_not_regular_file";
        return not_cached(&config, &cache, reason, &source, compiler, args);
    }
    if let Some(name) = UNCACHEABLE_ENVIRONMENT.iter().find(|n| std::env::var_os(n).is_some()) {
        let reason = format!("uncacheable:environment_{}", name.to_lowercase());
        return not_cached(&config, &cache, &reason, &source, compiler, args);
    }
    let Some(tool) = compiler.to_str().and_then(|c| crate::toolchain::resolve_tool(c, None)) else {
        let reason = "uncacheable:compiler_not_found";
        return not_cached(&config, &cache, reason, &source, compiler, args);
    };
    if std::env::current_exe().ok().and_then(|p| fs::canonicalize(&p).ok()).as_ref() == Some(&tool)
    {
        warn(&format!(
            "the compiler {} is strata itself; give the real compiler after `strata`",
            compiler.to_string_lossy()
        ));
        return 1;
    }
    let run = Run {
        config: &config,
        cache: &cache,
        compiler,
        tool: &tool,
        args,
        compile: &compile,
        notes: std::cell::RefCell::new(Vec::new()),
    };
    match run.go() {
        Ok((code, outcome)) => {
            let name = match &outcome {
                Outcome::Hit => "hit",
                Outcome::Miss => "miss",
                Outcome::NotCached(reason) => reason,
            };
            counters::bump(&cache, COMPILE, name);
            if config.explain {
                let notes = run.notes.borrow().join("; ");
                let sep = if notes.is_empty() { "" } else { ": " };
                let _ = writeln!(std::io::stderr(), "strata: {name} {source}{sep}{notes}");
            }
            code
        }
        Err(Failed::Quietly(reason)) => {
            not_cached(&config, &cache, reason, &source, compiler, args)
        }
        Err(Failed::BeforeCompile(e)) => {
            warn(&format!("{e}; running the compiler without the cache"));
            counters::bump(&cache, COMPILE, "error");
            exec(compiler, args)
        }
    }
}

/// Count `reason`, say it under `STRATA_EXPLAIN` (`strata: <reason> <what>`, `what` being the
/// source, or the whole command when no single source was found) and run the compiler
/// unchanged.
fn not_cached(
    config: &Config,
    cache: &CacheRoot,
    reason: &str,
    what: &dyn std::fmt::Display,
    compiler: &OsStr,
    args: &[OsString],
) -> i32 {
    not_cached_in(COMPILE, config, cache, reason, what, compiler, args)
}

/// [`not_cached`] for a step of the counter domain `domain` (compile or archive).
fn not_cached_in(
    domain: &str,
    config: &Config,
    cache: &CacheRoot,
    reason: &str,
    what: &dyn std::fmt::Display,
    program: &OsStr,
    args: &[OsString],
) -> i32 {
    counters::bump(cache, domain, reason);
    if config.explain {
        let _ = writeln!(std::io::stderr(), "strata: {reason} {what}");
    }
    exec(program, args)
}

/// The command as one line, for `STRATA_EXPLAIN` when no single source names it.
fn command_line(compiler: &OsStr, args: &[OsString]) -> String {
    std::iter::once(compiler)
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A launcher failure before the compiler ran (after it ran, problems only skip the save).
#[derive(Debug)]
enum Failed {
    /// Something the user should hear about.
    BeforeCompile(String),
    /// Not the cache's business (the compiler reports it): count it under this name.
    Quietly(&'static str),
}

struct Run<'a> {
    config: &'a Config,
    cache: &'a CacheRoot,
    compiler: &'a OsStr,
    tool: &'a Path,
    args: &'a [OsString],
    compile: &'a Compile,
    /// Why candidates were passed over, for `STRATA_EXPLAIN`.
    notes: std::cell::RefCell<Vec<String>>,
}

impl Run<'_> {
    fn note(&self, text: String) {
        if self.config.explain {
            self.notes.borrow_mut().push(text);
        }
    }

    fn go(&self) -> Result<(i32, Outcome), Failed> {
        let before = |e: String| Failed::BeforeCompile(e);
        let cwd = std::env::current_dir()
            .map_err(|e| before(format!("cannot read the working directory: {e}")))?;
        let here = Location::new(&cwd, &self.config.base_dirs);
        // The first reading of the file system clock, before anything is hashed.
        let clock = FsClock::start(&cwd.join(&self.compile.object));
        let source_path = cwd.join(&self.compile.source);
        let (source_digest, source_bytes, source_stamp) =
            entry::read_header(&source_path, DigestAlgorithm::Blake3)
                .map_err(|_| Failed::Quietly("uncacheable:source_unreadable"))?;
        let key = self.key(&here, &source_digest).map_err(before)?;
        let place = EntryPlace::new(self.cache, &key);
        let began = SystemTime::now();
        let source = Source { bytes: &source_bytes, stamp: source_stamp, clock, began };
        // An output directory that does not exist: the compiler reports it, as it would
        // without the launcher (a HIT could not place the files there).
        let placeable = self.outputs(&here.cwd).iter().all(|(_, path)| {
            let parent = path.parent().unwrap_or(Path::new("/"));
            fs::metadata(parent).is_ok_and(|m| m.is_dir())
        });
        let mut memo = VerifyMemo::load(&place.memo, &place.rel);
        if !placeable {
            return Ok(self.miss(&here, &place, &key, &source, &mut memo));
        }
        let mut loaded = entry::load(&place, &key);
        let fetched = matches!(loaded, Ok(None)) && remote::fetch(self, &place);
        if fetched {
            loaded = entry::load(&place, &key);
        }
        match loaded {
            Ok(Some(manifest)) => {
                for candidate in &manifest.candidates {
                    match entry::check(candidate, &here, &mut memo, began) {
                        Ok(()) => match self.restore(&place, candidate, &here, &mut memo, began) {
                            Ok(()) => {
                                // Recency for `prune --compile-max-size`.
                                let _ = fs::touch(&place.manifest());
                                save_memo(&memo, &place);
                                if fetched {
                                    remote::count(self, remote::counter::HIT);
                                }
                                return Ok((0, Outcome::Hit));
                            }
                            Err(e) => {
                                warn(&format!(
                                    "cached result of {} unusable ({e}); compiling",
                                    place.rel
                                ));
                                break;
                            }
                        },
                        Err(why) => self.note(match why {
                            entry::Mismatch::Pinned(p) => format!("output embeds {p}"),
                            entry::Mismatch::Shadowed(p) => {
                                format!("new header {} shadows one read", p.display())
                            }
                            entry::Mismatch::Header(p) => format!("header {} changed", p.display()),
                        }),
                    }
                }
                self.note(format!("key {key}"));
            }
            Ok(None) => self.note(format!("no entry for key {key}")),
            Err(e) => warn(&format!("compile entry {} unusable ({e}); compiling", place.rel)),
        }
        let result = self.miss(&here, &place, &key, &source, &mut memo);
        save_memo(&memo, &place);
        Ok(result)
    }

    /// The key (64 hex): see the module docs.
    fn key(&self, here: &Location, source: &ContentDigest) -> Result<String, String> {
        let mut key = KeyBuilder::new("strata.compile_key");
        key.tool(self.cache, self.config, self.tool, self.compiler, "compiler")?;
        key.field(
            "language",
            match self.compile.language {
                Language::C => b"c",
                Language::Cxx => b"c++",
            },
        );
        for arg in self.args {
            key.field("arg", here.relocate_arg(arg).as_bytes());
        }
        key.field("source", source.to_string().as_bytes());
        key.environment(KEY_ENVIRONMENT);
        Ok(key.finish())
    }

    /// The files a compilation writes, with their roles, as paths here.
    fn outputs(&self, cwd: &Path) -> Vec<(String, PathBuf)> {
        let mut out = vec![("object".to_owned(), cwd.join(&self.compile.object))];
        if let Depfile::Requested { path, .. } = &self.compile.depfile {
            out.push(("depfile".to_owned(), cwd.join(path)));
        }
        for side in &self.compile.side_outputs {
            let role = side.extension().map(|e| e.to_string_lossy().into_owned());
            out.push((role.unwrap_or_else(|| "side".into()), cwd.join(side)));
        }
        out
    }

    fn restore(
        &self,
        place: &EntryPlace,
        candidate: &Candidate,
        here: &Location,
        memo: &mut VerifyMemo,
        began: SystemTime,
    ) -> Result<(), String> {
        let outputs = self.outputs(&here.cwd);
        let roles: Vec<&str> = outputs.iter().map(|(r, _)| r.as_str()).collect();
        let recorded: Vec<&str> = candidate.outputs.iter().map(|o| o.role.as_str()).collect();
        if roles != recorded {
            return Err(format!("it holds outputs {recorded:?}, the command writes {roles:?}"));
        }
        let origin = Origin::of(candidate, here);
        // Messages first: read and verified before anything is written.
        let stdout = candidate.stdout.as_ref().map(|o| read_verified(place, o)).transpose()?;
        let stderr = candidate.stderr.as_ref().map(|o| read_verified(place, o)).transpose()?;
        for (output, (_, dest)) in candidate.outputs.iter().zip(&outputs) {
            // The previous output goes first, as when the compiler rewrites it: on ext4,
            // renaming over an existing file with data makes the kernel flush the new one
            // (`auto_da_alloc`), which cost a HIT milliseconds. A HIT that fails after this
            // compiles, which writes the output again.
            let _ = fs::remove_file(dest);
            if output.role == "depfile" && origin.moves() {
                let bytes = read_verified(place, output)?;
                let rewritten = origin.depfile(&bytes)?;
                fs::write_atomic_nosync(dest, &rewritten, 0o644).map_err(|e| e.to_string())?;
                continue;
            }
            place_output(place, output, dest, memo, began)?;
        }
        if let Some(bytes) = stdout {
            let _ = std::io::stdout().write_all(&origin.text(&bytes));
        }
        if let Some(bytes) = stderr {
            let _ = std::io::stderr().write_all(&origin.text(&bytes));
        }
        Ok(())
    }

    /// Compiles, and saves the result when it can be cached. Returns the exit code.
    fn miss(
        &self,
        here: &Location,
        place: &EntryPlace,
        key: &str,
        source: &Source<'_>,
        memo: &mut VerifyMemo,
    ) -> (i32, Outcome) {
        let private_dep = match &self.compile.depfile {
            Depfile::NotRequested => tempfile::Builder::new()
                .prefix("strata-dep-")
                .suffix(".d")
                .tempfile()
                .ok()
                .map(tempfile::NamedTempFile::into_temp_path),
            Depfile::Requested { .. } => None,
        };
        let started = source.clock.marker();
        let mut cmd = self.command();
        cmd.args(self.args);
        if let Some(dep) = &private_dep {
            cmd.arg("-MD").arg("-MF").arg(dep);
        }
        let output = match cmd.stdin(Stdio::inherit()).output() {
            Ok(o) => o,
            Err(e) => {
                warn(&format!("cannot run {}: {e}", self.tool.display()));
                return (1, Outcome::NotCached("error".into()));
            }
        };
        let _ = std::io::stdout().write_all(&output.stdout);
        let _ = std::io::stderr().write_all(&output.stderr);
        let code = exit_code(output.status);
        if code != 0 {
            return (code, Outcome::NotCached("compile_failed".into()));
        }
        let run = Compiled { output: &output, private_dep: private_dep.as_deref(), started };
        let saved = self.save(here, place, key, source, &run, memo);
        match saved {
            Ok(Outcome::Miss) => {
                remote::offer(self, place);
                (0, Outcome::Miss)
            }
            Ok(outcome) => (0, outcome),
            Err(e) => {
                warn(&format!("compiled, but not cached: {e}"));
                (0, Outcome::NotCached("save_failed".into()))
            }
        }
    }

    /// The compiler command: the resolved program, with `argv[0]` as given.
    fn command(&self) -> Command {
        let mut cmd = Command::new(self.tool);
        cmd.arg0(self.compiler);
        cmd
    }

    fn save(
        &self,
        here: &Location,
        place: &EntryPlace,
        key: &str,
        source: &Source<'_>,
        run: &Compiled<'_>,
        memo: &mut VerifyMemo,
    ) -> Result<Outcome, String> {
        let (headers, absent) = match self.dependencies(here, source, run, memo)? {
            Ok(found) => found,
            Err(not_cached) => return Ok(not_cached),
        };
        let cwd = &here.cwd;
        if let Some(dir) = place.lock.parent() {
            fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        fs::create_dir_all(&self.cache.actions_dir()).map_err(|e| e.to_string())?;
        fs::create_dir_all_within(&self.cache.actions_dir(), Path::new(&place.rel), 0o755)
            .map_err(|e| e.to_string())?;
        let _lock = fs::lock_exclusive(
            &place.lock,
            LockWait::Timeout(std::time::Duration::from_secs(30)),
            &mut |_| {},
        )
        .map_err(|e| e.to_string())?;
        let (outputs, pins) = self.store_outputs(here, place)?;
        let message = |bytes: &[u8]| -> Result<Option<Output>, String> {
            if bytes.is_empty() {
                return Ok(None);
            }
            let digest = ContentDigest::of_bytes(self.config.digest, bytes);
            entry::store_bytes(place, &digest, bytes).map_err(|e| e.to_string())?;
            Ok(Some(Output { role: "message".into(), digest, size_bytes: bytes.len() as u64 }))
        };
        let stdout = message(&run.output.stdout)?;
        let stderr = message(&run.output.stderr)?;
        if !pins.is_empty() && self.args.iter().any(|a| a.as_bytes().starts_with(b"-g")) {
            warn_debug_paths_once(self.cache, cwd);
        }
        let candidate = Candidate {
            headers,
            absent,
            pins,
            origin_cwd: entry::encode_path(cwd),
            origin_base_dirs: here.base_dirs.iter().map(|b| entry::encode_path(b)).collect(),
            outputs,
            stdout,
            stderr,
            created_at: now_rfc3339(),
        };
        let mut manifest = match entry::load(place, key) {
            Ok(Some(m)) => m,
            _ => CompileManifest { key: key.to_owned(), candidates: Vec::new() },
        };
        manifest.candidates.retain(|c| {
            !(c.headers == candidate.headers
                && c.absent == candidate.absent
                && c.pins == candidate.pins)
        });
        manifest.candidates.insert(0, candidate);
        manifest.candidates.truncate(entry::MAX_CANDIDATES);
        entry::store(place, &manifest).map_err(|e| e.to_string())?;
        remove_unreferenced(place, &manifest);
        let _ = fs::touch(&self.cache.updated_marker());
        Ok(Outcome::Miss)
    }

    /// The headers the compile read (with digests) and the shadow probes, from its
    /// dependency output; `Ok(Err(outcome))` when the result must not be cached (the
    /// dependency output is not this compile's, an input changed while the compiler ran, a
    /// time macro is used).
    fn dependencies(
        &self,
        here: &Location,
        source: &Source<'_>,
        run: &Compiled<'_>,
        memo: &mut VerifyMemo,
    ) -> Result<Result<Dependencies, Outcome>, String> {
        let not_cached = |name: &str| Ok(Err(Outcome::NotCached(name.into())));
        let cwd = &here.cwd;
        let deps_text = match (&self.compile.depfile, run.private_dep) {
            (_, Some(private)) => fs::read(private).map_err(|e| e.to_string())?,
            (Depfile::Requested { system_headers: true, path }, None) => {
                fs::read(&cwd.join(path)).map_err(|e| e.to_string())?
            }
            (Depfile::Requested { system_headers: false, .. }, None) => self.all_dependencies()?,
            (Depfile::NotRequested, None) => return Err("no dependency file".into()),
        };
        let rules = depfile::parse(&deps_text)?;
        let source_abs = location::normalize(&cwd.join(&self.compile.source));
        // A dependency file that does not list the source is not this compilation's (an
        // empty one, `-MF /dev/null`, a wrapper that rewrote it): its headers are unknown.
        let describes = rules.iter().any(|r| {
            r.dependencies.iter().any(|d| location::normalize(&cwd.join(d)) == source_abs)
        });
        if !describes {
            tracing::debug!("the dependency file does not list {}", self.compile.source.display());
            return not_cached("uncacheable:incomplete_depfile");
        }
        // The source must be what the key hashed: unchanged since, and not written in the
        // clock tick the compiler started in.
        let source_now = fs::metadata(&cwd.join(&self.compile.source))
            .map(|m| fs::FileStamp::of(&m))
            .map_err(|e| e.to_string())?;
        if source_now != source.stamp || source_now.ctime_ns >= run.started {
            tracing::debug!("{}: changed while the compiler ran", self.compile.source.display());
            return not_cached("input_changed");
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut headers = Vec::new();
        let mut absent = Vec::new();
        let mut time_macros = has_time_macro(source.bytes);
        let search = shadow::search_order(&self.compile.include_dirs, cwd);
        for dep in rules.iter().flat_map(|r| &r.dependencies) {
            let abs = location::normalize(&cwd.join(dep));
            if abs == source_abs || !seen.insert(dep.clone()) {
                continue;
            }
            let (digest, bytes, stamp) = entry::read_header(&cwd.join(dep), self.config.digest)
                .map_err(|e| e.to_string())?;
            // Changed after the compiler started: the compiler may have read the old text,
            // and this digest would vouch for an object built from it.
            if stamp.ctime_ns >= run.started {
                tracing::debug!("{}: changed while the compiler ran", dep.display());
                return not_cached("input_changed");
            }
            time_macros |= has_time_macro(&bytes);
            let header = Header { path: entry::encode_path(&here.relocate_path(dep)), digest };
            // Remembered as a lookup that hashed it would (the 2 s rule applies), so the
            // first lookup from another build directory of this checkout does not hash
            // the headers again.
            let at = here.resolve(&entry::decode_path(&header.path));
            memo.remember(&entry::header_memo_name(&at), stamp, digest, source.began);
            headers.push(header);
            for probe in shadow::probes(&abs, &search) {
                // A probe in a directory given relative follows the working directory
                // (like the header paths the compiler reports there); any other is
                // relocated like an argument.
                let recorded = if probe.relative {
                    location::relative(cwd, &probe.path)
                } else {
                    here.relocate_path(&probe.path)
                };
                let probe = entry::encode_path(&recorded);
                if !absent.contains(&probe) {
                    absent.push(probe);
                }
            }
        }
        if time_macros && std::env::var_os("SOURCE_DATE_EPOCH").is_none() {
            return not_cached("uncacheable:time_macros");
        }
        Ok(Ok((headers, absent)))
    }

    /// Copies the outputs into the entry's `objects/` (under the entry lock), hashing them
    /// as they are copied; returns their records and the pins (name-encoded) they embed.
    fn store_outputs(
        &self,
        here: &Location,
        place: &EntryPlace,
    ) -> Result<(Vec<Output>, Vec<String>), String> {
        let cwd = &here.cwd;
        fs::create_dir_all(&place.dir.join("objects")).map_err(|e| e.to_string())?;
        let mut outputs = Vec::new();
        let mut embedded: Vec<Vec<u8>> = Vec::new();
        let logical_cwd = logical_working_directory(cwd);
        for (role, path) in self.outputs(cwd) {
            let tmp = crate::content::temp::TempName::new(
                crate::content::temp::Purpose::Staging,
                "object",
            )
            .path_in(&place.dir.join("objects"));
            let (digest, size) = fs::copy_new_file(&path, &tmp, 0o644, false, self.config.digest)
                .map_err(|e| format!("output {}: {e}", path.display()))?;
            if role != "depfile" {
                let bytes = fs::read(&tmp).map_err(|e| e.to_string())?;
                embedded.extend(pins_in(&bytes, here));
                // The directory by the name the shell gave it, if the compiler embedded
                // that one (GCC does, for -g): pinned as the working directory itself
                // (a pin of the alias would be moved lexically, which means nothing).
                if let Some(logical) = &logical_cwd
                    && memmem::find(&bytes, logical.as_os_str().as_bytes()).is_some()
                {
                    embedded.push(cwd.as_os_str().as_bytes().to_vec());
                }
            }
            fs::rename(&tmp, &place.object(&digest)).map_err(|e| e.to_string())?;
            outputs.push(Output { role, digest, size_bytes: size });
        }
        embedded.sort();
        embedded.dedup();
        let pins =
            embedded.iter().map(|p| entry::encode_path(Path::new(OsStr::from_bytes(p)))).collect();
        Ok((outputs, pins))
    }

    /// Every dependency, system headers included, for a build that asked for `-MMD`: a
    /// dependency-only run of the preprocessor.
    fn all_dependencies(&self) -> Result<Vec<u8>, String> {
        let tmp = tempfile::Builder::new()
            .prefix("strata-dep-")
            .suffix(".d")
            .tempfile()
            .map_err(|e| e.to_string())?
            .into_temp_path();
        let mut cmd = self.command();
        let mut skip = false;
        for arg in self.args {
            if std::mem::take(&mut skip) {
                continue;
            }
            match arg.to_str() {
                Some("-MF" | "-MT" | "-MQ" | "-o") => skip = true,
                Some("-MD" | "-MMD" | "-MP" | "-c") => {}
                Some(a) if ["-MF", "-MT", "-MQ", "-o"].iter().any(|o| a.starts_with(o)) => {}
                _ => {
                    cmd.arg(arg);
                }
            }
        }
        cmd.arg("-M").arg("-MF").arg(&tmp).stdout(Stdio::null()).stderr(Stdio::null());
        match cmd.status() {
            Ok(s) if s.success() => fs::read(&tmp).map_err(|e| e.to_string()),
            Ok(s) => Err(format!("the dependency run of the compiler failed ({s})")),
            Err(e) => Err(format!("cannot run the compiler for dependencies: {e}")),
        }
    }
}

/// `$PWD`, when it is another name of the working directory `physical` (a path through
/// a symlink, as a shell's `cd` keeps it): GCC embeds that name (`-g`'s compilation
/// directory), so it is pinned like the working directory. Paths are still resolved
/// against the physical directory, as the kernel resolves `..` in relative paths.
fn logical_working_directory(physical: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let pwd = PathBuf::from(std::env::var_os("PWD")?);
    if !pwd.is_absolute() || pwd == physical {
        return None;
    }
    let (a, b) = (fs::metadata(&pwd).ok()?, fs::metadata(physical).ok()?);
    (a.dev() == b.dev() && a.ino() == b.ino()).then_some(pwd)
}

/// The files `compile` writes, as given (relative to the working directory).
fn output_paths(compile: &Compile) -> Vec<&Path> {
    let mut out = vec![compile.object.as_path()];
    if let Depfile::Requested { path, .. } = &compile.depfile {
        out.push(path);
    }
    out.extend(compile.side_outputs.iter().map(PathBuf::as_path));
    out
}

/// True if nothing is at `path` (`lstat`) or a regular file is.
fn is_regular_or_absent(path: &Path) -> bool {
    match fs::symlink_metadata_opt(path) {
        Ok(None) => true,
        Ok(Some(meta)) => meta.is_file(),
        Err(_) => false,
    }
}

/// What one compiler run left to save.
#[derive(Clone, Copy)]
struct Compiled<'a> {
    output: &'a std::process::Output,
    /// The dependency file the launcher asked for, if the build asked for none.
    private_dep: Option<&'a Path>,
    /// [`FsClock::marker`] before the compiler started.
    started: i128,
}

/// The source as the key saw it.
struct Source<'a> {
    bytes: &'a [u8],
    stamp: fs::FileStamp,
    /// Read before the source was.
    clock: FsClock,
    /// When the lookup began (the verification memo's reference time).
    began: SystemTime,
}

/// The file system's clock, for telling whether a source or header changed while the
/// compiler ran: its change time is then not older than [`FsClock::marker`], taken just
/// before the compiler starts, and its result is not cached.
///
/// File times come from the kernel's coarse clock, so this reads that clock, not
/// `SystemTime::now()` (which runs up to a tick ahead of it): the change time of a new,
/// unnamed file beside the object (the build tree's file system; else the temporary
/// directory). The marker is a reading that has moved on from the first one, taken when
/// the launcher started (usually the launcher's own work takes that long; else it waits,
/// at most one tick, a few milliseconds), so a file written before the launcher started,
/// even in the same tick, reads as older, while anything written after the compiler
/// started does not. Where the clock does not move within 50 ms (a file system with one-
/// or two-second times) the first reading is used, which only leaves more results
/// uncached; where no file can be created, `now` less 20 ms (longer than a tick at
/// 100 Hz) stands in.
struct FsClock {
    dir: PathBuf,
    first: Option<i128>,
}

impl FsClock {
    fn start(object: &Path) -> Self {
        let dir = object.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut clock = FsClock { dir: dir.to_path_buf(), first: None };
        clock.first = clock.read().ok();
        clock
    }

    fn read(&self) -> std::io::Result<i128> {
        let file = tempfile::tempfile_in(&self.dir).or_else(|_| tempfile::tempfile())?;
        Ok(fs::FileStamp::of(&file.metadata()?).ctime_ns)
    }

    fn marker(&self) -> i128 {
        let Some(first) = self.first else {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i128);
            return now - 20_000_000;
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(50);
        loop {
            match self.read() {
                Ok(next) if next > first => return next,
                Ok(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_micros(250));
                }
                _ => return first,
            }
        }
    }
}

/// The headers a compile read and the shadow probes (name-encoded paths that must not
/// exist), from [`Run::dependencies`].
type Dependencies = (Vec<Header>, Vec<String>);

/// How a candidate's recorded paths map to this location.
struct Origin {
    /// (origin absolute prefix, here) pairs, longest origin first.
    moves: Vec<(PathBuf, PathBuf)>,
}

impl Origin {
    fn of(candidate: &Candidate, here: &Location) -> Self {
        let origin_cwd = entry::decode_path(&candidate.origin_cwd);
        let mut moves: Vec<(PathBuf, PathBuf)> = candidate
            .origin_base_dirs
            .iter()
            .map(|b| entry::decode_path(b))
            .map(|b| {
                let to = here.translate(&origin_cwd, &b);
                (b, to)
            })
            .filter(|(from, to)| from != to)
            .collect();
        moves.sort_by_key(|(from, _)| std::cmp::Reverse(from.as_os_str().len()));
        Origin { moves }
    }

    fn moves(&self) -> bool {
        !self.moves.is_empty()
    }

    fn path(&self, path: &Path) -> PathBuf {
        for (from, to) in &self.moves {
            if let Ok(rest) = path.strip_prefix(from) {
                return if rest.as_os_str().is_empty() { to.clone() } else { to.join(rest) };
            }
        }
        path.to_path_buf()
    }

    fn depfile(&self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        let mut rules = depfile::parse(bytes)?;
        for rule in &mut rules {
            for p in rule.targets.iter_mut().chain(rule.dependencies.iter_mut()) {
                *p = self.path(p);
            }
        }
        Ok(depfile::render(&rules))
    }

    fn text(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for (from, to) in &self.moves {
            let from = from.as_os_str().as_bytes();
            let to = to.as_os_str().as_bytes();
            let finder = memmem::Finder::new(from);
            let mut next = Vec::with_capacity(out.len());
            let mut last = 0;
            for at in finder.find_iter(&out) {
                next.extend_from_slice(&out[last..at]);
                next.extend_from_slice(to);
                last = at + from.len();
            }
            next.extend_from_slice(&out[last..]);
            out = next;
        }
        out
    }
}

/// Reads an object of `place` and checks its digest.
fn read_verified(place: &EntryPlace, output: &Output) -> Result<Vec<u8>, String> {
    let path = place.object(&output.digest);
    let bytes = fs::read(&path).map_err(|e| e.to_string())?;
    let actual = ContentDigest::of_bytes(output.digest.algorithm(), &bytes);
    if actual != output.digest {
        return Err(format!("{} does not have digest {}", path.display(), output.digest));
    }
    Ok(bytes)
}

/// The absolute paths of this location that `bytes` (an output) embeds: wherever the
/// working directory or a base directory (other than `/`) occurs, the whole path string
/// that starts there (up to a NUL, a control byte, a quote or white space; at most 4 KiB).
/// A lookup elsewhere must map each one to itself ([`entry::check`]), so a result naming
/// this checkout is reused only where the same paths hold.
fn pins_in(bytes: &[u8], here: &Location) -> Vec<Vec<u8>> {
    let mut roots: Vec<&[u8]> = vec![here.cwd.as_os_str().as_bytes()];
    roots.extend(here.base_dirs.iter().map(|b| b.as_os_str().as_bytes()));
    roots.retain(|r| *r != b"/" && !r.is_empty());
    let mut starts: Vec<usize> = roots.iter().flat_map(|r| memmem::find_iter(bytes, r)).collect();
    starts.sort_unstable();
    let mut found = Vec::new();
    let mut covered_to = 0;
    for start in starts {
        if start < covered_to {
            continue;
        }
        let rest = bytes.get(start..).unwrap_or_default();
        let len = rest
            .iter()
            .take(4096)
            .position(|&b| b < 0x20 || b == 0x7f || matches!(b, b'"' | b'\'' | b' '))
            .unwrap_or(rest.len().min(4096));
        let path = rest.get(..len).unwrap_or_default();
        covered_to = start + len;
        // Trailing separators name the same directory.
        let path = path.strip_suffix(b"/").unwrap_or(path);
        if !found.iter().any(|f: &Vec<u8>| f == path) {
            found.push(path.to_vec());
        }
    }
    found
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn has_time_macro(bytes: &[u8]) -> bool {
    TIME_MACROS.iter().any(|m| memmem::find(bytes, m.as_bytes()).is_some())
}

/// Removes objects no candidate references (under the entry lock).
fn remove_unreferenced(place: &EntryPlace, manifest: &CompileManifest) {
    let keep: std::collections::BTreeSet<String> = manifest
        .candidates
        .iter()
        .flat_map(|c| c.outputs.iter().chain(&c.stdout).chain(&c.stderr))
        .map(|o| o.digest.to_hex())
        .collect();
    let Ok(entries) = fs::read_dir(&place.dir.join("objects")) else { return };
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !keep.contains(&name) {
            let _ = fs::remove_file(&path);
        }
    }
}

/// Writes the entry's verification memo if it changed, without fsync: it is machine-local
/// and checked on load, so one torn by a power cut vouches for nothing (as a damaged
/// object or manifest is a MISS). The fsync of [`VerifyMemo::save`] cost a first HIT 2-3 ms.
fn save_memo(memo: &VerifyMemo, place: &EntryPlace) {
    if !memo.is_changed() {
        return;
    }
    let saved = match memo.to_bytes() {
        Ok(None) => fs::remove_file(&place.memo).map_err(|e| e.to_string()),
        Ok(Some(bytes)) => place
            .memo
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|()| fs::write_atomic_nosync(&place.memo, &bytes, 0o644))
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = saved {
        tracing::debug!("verification memo not saved: {e}");
    }
}

/// Warns once per working directory that debug information pins objects to it.
fn warn_debug_paths_once(cache: &CacheRoot, cwd: &Path) {
    let h = crate::digest::Sha256Digest::of_bytes(cwd.as_os_str().as_bytes());
    let marker = cache.local_dir().join("launcher-warned").join(h.to_hex());
    if fs::symlink_metadata_opt(&marker).ok().flatten().is_some() {
        return;
    }
    let _ = fs::create_dir_all(marker.parent().unwrap_or(cache.path()));
    let _ = fs::write_atomic_nosync(&marker, b"", 0o644);
    warn(&format!(
        "objects compiled in {} embed absolute paths of this checkout (debug information, \
         __FILE__): they are cached, but only reused where those paths are the same. Add \
         -ffile-prefix-map=<base dir>=. to the compile flags to share them across checkouts \
         (docs/launcher.md).",
        cwd.display()
    ));
}

/// Replaces this process with the compiler (the uncacheable path). Returns only on error.
fn exec(compiler: &OsStr, args: &[OsString]) -> i32 {
    let e = Command::new(compiler).args(args).exec();
    let _ = writeln!(
        std::io::stderr(),
        "strata: error: cannot run the compiler {:?}: {e} (it is not a strata subcommand \
         either; see `strata --help`)",
        compiler.to_string_lossy()
    );
    127
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1)
}

fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "strata: warning: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_the_whole_embedded_paths_under_the_location() {
        let here = Location::new(
            Path::new("/w/a/build"),
            &[PathBuf::from("/w/a/src"), PathBuf::from("/")],
        );
        let object = b"\x00/w/a/src/x.c\x00junk/w/a/build\x00\"/w/a/src/gtc/y.cc\" /usr/include/z.h\x00/w/a/src/x.c\x00";
        let pins = pins_in(object, &here);
        assert_eq!(
            pins,
            vec![b"/w/a/src/x.c".to_vec(), b"/w/a/build".to_vec(), b"/w/a/src/gtc/y.cc".to_vec()]
        );
        assert!(pins_in(b"\x00nothing here /usr/lib\x00", &here).is_empty());
    }
}
