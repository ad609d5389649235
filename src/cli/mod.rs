//! Command-line interface: clap argument structs (one file per subcommand group), each
//! turned into one library call; printing and exit codes live here.
//!
//! Exit codes (docs/reference.md "Exit codes"): 0 success (HIT, MISS + successful build,
//! BYPASS + successful build); the build's own code when it fails (128 + signal when it
//! was killed by a signal); 1 other errors; 2 usage errors; 75 a lock timeout that cannot
//! be bypassed; `strata artifact` adds 3 MISS / not available, 4 INVALID, 5 STORAGE_ERROR
//! and 6 "unsupported" (scan-includes), see `docs/artifact-store.md`;
//! `strata snapshot …` exits 0 for every fail-open outcome, 1 with `--strict` or
//! `--fail-on-cache-miss` (docs/snapshots.md "Exit codes"), 2 for usage errors.

// Output goes through `output` (never `print!`/`eprint!`, which panic on a closed pipe).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod action;
mod artifact;
pub(crate) mod exit;
mod key;
mod launch;
mod log;
mod output;
mod progress;
mod remote;
mod snapshot;
mod stats;
mod store;

use output::{errln, outln};

use clap::{Parser, Subcommand};
use exit::ExitCode;

/// `--digest`: the content digest algorithm of new records, shared by every command that
/// writes entries, manifests or archives.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DigestArgs {
    /// Content digest algorithm of new entries, artifact manifests, snapshots and archives:
    /// blake3 or sha256. Records already stored keep theirs (every digest names its
    /// algorithm), so both kinds can be read at any time.
    #[arg(
        long,
        env = "STRATA_DIGEST",
        value_name = "ALGORITHM",
        default_value = "blake3",
        value_parser = parse_digest
    )]
    pub(crate) digest: strata::digest::DigestAlgorithm,
}

fn parse_digest(text: &str) -> Result<strata::digest::DigestAlgorithm, String> {
    text.parse().map_err(|_| {
        "use blake3 or sha256 (given with --digest or the STRATA_DIGEST variable)".to_owned()
    })
}

/// `--signing-key`: a producer's key, shared by `snapshot save` and `artifact push`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SigningArgs {
    /// Sign what is published with this secret key file (from `strata key generate`). Or
    /// put the key file's content in STRATA_SIGNING_KEY (a CI secret; never printed, masked
    /// under GitHub Actions). An unusable key fails before anything is published.
    #[arg(long, value_name = "FILE")]
    signing_key: Option<std::path::PathBuf>,
}

impl SigningArgs {
    /// The key to sign with, if any.
    pub(crate) fn load(
        &self,
        gh: &strata::ci::Github,
    ) -> Result<Option<strata::trust::SigningKey>, Failure> {
        signing_key(gh, self.signing_key.as_deref())
    }
}

/// `--trusted-key`: the producers a consumer accepts, shared by `snapshot restore` and
/// `artifact pull`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TrustArgs {
    /// A producer's public key (`strata-ed25519:<key id>:<base64>`, as `strata key
    /// generate` prints it); repeatable, e.g. the old and the new key during a rotation.
    /// When any is given (here or in STRATA_TRUSTED_KEYS, separated by commas or
    /// newlines), only what one of them signed is accepted; the rest is passed over like a
    /// corrupt object.
    #[arg(long, value_name = "KEY")]
    trusted_key: Vec<String>,
}

impl TrustArgs {
    /// The trust policy (`--trusted-key` and `STRATA_TRUSTED_KEYS`).
    pub(crate) fn policy(&self) -> Result<strata::trust::TrustPolicy, Failure> {
        trust_policy(&self.trusted_key)
    }
}

/// The trust policy of a restore: `--trusted-key` values and `STRATA_TRUSTED_KEYS`.
///
/// # Errors
/// A usage failure naming the key text that is not a public key.
fn trust_policy(flags: &[String]) -> Result<strata::trust::TrustPolicy, Failure> {
    let usage = Failure::usage;
    let mut keys = Vec::new();
    for flag in flags {
        keys.push(flag.parse().map_err(usage)?);
    }
    if let Some(list) = strata::config::var_text("STRATA_TRUSTED_KEYS") {
        keys.extend(strata::trust::TrustPolicy::parse_list(&list).map_err(usage)?);
    }
    Ok(strata::trust::TrustPolicy::new(keys))
}

/// The signing key of a save: `--signing-key FILE`, else the key text in
/// `STRATA_SIGNING_KEY` (masked first under GitHub Actions, so no later log line can show
/// it). Neither: an unsigned save.
///
/// # Errors
/// A failure naming the file or variable (never the key) when the key cannot be used.
fn signing_key(
    gh: &strata::ci::Github,
    file: Option<&std::path::Path>,
) -> Result<Option<strata::trust::SigningKey>, Failure> {
    if let Some(file) = file {
        let path = strata::fs::expand_tilde(file);
        return strata::trust::SigningKey::load(&path).map(Some).map_err(Failure::from);
    }
    let Some(text) = strata::config::var_text("STRATA_SIGNING_KEY") else {
        return Ok(None);
    };
    if gh.actions {
        // The runner masks the secret as a whole; mask the key material on its own too.
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let material = line.strip_prefix(strata::trust::SECRET_KEY_PREFIX).unwrap_or(line);
            outln!("{}", strata::ci::add_mask(material))?;
        }
    }
    strata::trust::SigningKey::parse(&text, "STRATA_SIGNING_KEY").map(Some).map_err(Failure::from)
}

/// What `strata --version` (and `-V`) prints after `strata `: the crate version, the
/// commit it was built from (12 hex digits, `unknown` outside a git checkout) and the
/// target triple, e.g. `0.1.0 (commit 0123456789ab, target aarch64-unknown-linux-musl)`.
/// Both come from `build.rs`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("STRATA_GIT_COMMIT"),
    ", target ",
    env!("STRATA_TARGET"),
    ")"
);

/// strata: a layered, content-verified build cache for CI.
#[derive(Debug, Parser)]
#[command(name = "strata", version = VERSION, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// L1 action cache: run, explain, prune.
    #[command(subcommand)]
    Action(Box<action::ActionCommand>),
    /// What an L1 cache root holds: entries, bytes, namespaces, leftovers; launcher hits,
    /// misses and why compilations were not cached.
    Stats {
        /// Cache root [env: STRATA_CACHE_ROOT; default: $XDG_CACHE_HOME/strata/cache].
        #[arg(long, value_name = "DIR")]
        cache_root: Option<std::path::PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Reset the launcher counters (hits, misses, reasons) and print nothing else.
        #[arg(long)]
        zero: bool,
    },
    /// L0 artifact store: lookup, get-or-build, materialize, promote, verify, gc, push,
    /// pull, scan-includes.
    #[command(subcommand)]
    Artifact(Box<artifact::ArtifactCommand>),
    /// L1 snapshots between machines: key, restore, save.
    #[command(subcommand)]
    Snapshot(Box<snapshot::SnapshotCommand>),
    /// Producer signing keys: generate.
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// Compile through the L1 cache (the compiler launcher): `strata compile [OPTIONS] [--]
    /// <compiler> ARGS...`. `strata <compiler> ARGS...` is the same with the settings from
    /// the environment; CMake's `strata_enable_launcher()` writes this form.
    Compile {
        /// Cache root [env: STRATA_CACHE_ROOT; default: $XDG_CACHE_HOME/strata/cache].
        #[arg(long, value_name = "DIR")]
        cache_root: Option<std::path::PathBuf>,
        /// A base directory: absolute paths below it are made relative to the working
        /// directory in keys, so a checkout at another path hits (repeatable; replaces
        /// STRATA_BASE_DIRS, which separates directories with `:`).
        #[arg(long, value_name = "DIR")]
        base_dir: Vec<std::path::PathBuf>,
        /// Identify the compiler by content too (its driver's and back ends' bytes), not
        /// only by `--version` [env: STRATA_TOOL_CONTENT=1].
        #[arg(long)]
        tool_content: bool,
        /// The compiler and its arguments, passed on exactly.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            required = true,
            value_name = "COMPILER"
        )]
        command: Vec<std::ffi::OsString>,
    },
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    /// Exit code.
    pub code: i32,
    /// The error.
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure { code: exit::FAILURE, error: e.into() }
    }
}

impl Failure {
    /// A library error with the exit code it maps to ([`exit::ExitCode`]).
    pub(crate) fn of<E: ExitCode + Into<anyhow::Error>>(error: E) -> Self {
        Failure { code: error.exit_code(), error: error.into() }
    }

    /// A usage error (exit 2), whatever the error.
    pub(crate) fn usage(error: impl Into<anyhow::Error>) -> Self {
        Failure { code: exit::USAGE, error: error.into() }
    }
}

/// Parses arguments and runs the command; returns the process exit code.
pub fn main() -> i32 {
    let mut argv = std::env::args_os().skip(1);
    if let Some(first) = argv.next()
        && is_compiler(&first)
    {
        let args: Vec<std::ffi::OsString> = argv.collect();
        let overrides =
            strata::launcher::Overrides { remote: remote::launcher_tier(), ..Default::default() };
        return launch::main_with(&first, &args, &overrides);
    }
    // `strata compile` runs once per compilation: parse its few options without building
    // the whole clap tree; anything unusual (help, a typo) goes to clap below.
    if let Some((mut overrides, command)) = fast_compile_args(std::env::args_os().skip(1))
        && let Some((compiler, args)) = command.split_first()
    {
        overrides.remote = remote::launcher_tier();
        return launch::main_with(compiler, args, &overrides);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { exit::USAGE } else { 0 };
        }
    };
    let result = match cli.command {
        Command::Action(cmd) => action::run(*cmd),
        Command::Stats { cache_root, json, zero } => stats::stats(cache_root, json, zero),
        Command::Artifact(cmd) => artifact::run(*cmd),
        Command::Snapshot(cmd) => snapshot::run(*cmd),
        Command::Key(cmd) => key::run(cmd),
        Command::Compile { cache_root, base_dir, tool_content, mut command } => {
            let separated = command.first().is_some_and(|c| c == "--");
            if separated {
                command.remove(0);
            }
            let Some(compiler) = command.first().cloned() else {
                errln!("strata: error: `strata compile` needs the compiler and its arguments");
                return exit::USAGE;
            };
            if !separated && compiler.to_string_lossy().starts_with('-') {
                errln!(
                    "strata: error: unknown option {:?} of `strata compile` (its options are \
                     --cache-root DIR, --base-dir DIR and --tool-content, before the \
                     compiler; write `strata compile -- <compiler> ...` for a compiler whose \
                     name begins with `-`)",
                    compiler.to_string_lossy()
                );
                return exit::USAGE;
            }
            let remote = remote::launcher_tier();
            let overrides = strata::launcher::Overrides {
                cache_root,
                base_dirs: base_dir,
                tool_content,
                remote,
            };
            return launch::main_with(&compiler, &command[1..], &overrides);
        }
    };
    match result {
        Ok(code) => code,
        Err(f) => {
            errln!("strata: error: {}", f.error);
            for cause in f.error.chain().skip(1) {
                errln!("  caused by: {cause}");
            }
            f.code
        }
    }
}

/// `compile [--cache-root DIR] [--base-dir DIR]... [--] COMPILER ARGS...` with nothing
/// else before the compiler, as `strata_enable_launcher()` writes it; `None` otherwise.
fn fast_compile_args(
    mut argv: impl Iterator<Item = std::ffi::OsString>,
) -> Option<(strata::launcher::Overrides, Vec<std::ffi::OsString>)> {
    if argv.next()? != "compile" {
        return None;
    }
    let mut overrides = strata::launcher::Overrides::default();
    let mut argv = argv.peekable();
    while let Some(arg) = argv.peek() {
        let text = arg.to_str()?;
        if text == "--" {
            argv.next();
            break;
        }
        if !text.starts_with('-') {
            break;
        }
        if text == "--tool-content" {
            argv.next();
            overrides.tool_content = true;
            continue;
        }
        let (name, joined) = match text.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(std::path::PathBuf::from(v))),
            None => (text.to_owned(), None),
        };
        argv.next();
        let value = match joined {
            Some(v) => v,
            None => std::path::PathBuf::from(argv.next()?),
        };
        match name.as_str() {
            "--cache-root" => overrides.cache_root = Some(value),
            "--base-dir" => overrides.base_dirs.push(value),
            _ => return None,
        }
    }
    let command: Vec<_> = argv.collect();
    (!command.is_empty()).then_some((overrides, command))
}

/// True if `first`, strata's first argument, names a compiler rather than a subcommand
/// or option: `strata gcc -c a.c` runs the launcher (docs/launcher.md); subcommand names and
/// `help` win.
fn is_compiler(first: &std::ffi::OsStr) -> bool {
    let Some(text) = first.to_str() else { return true };
    if text.starts_with('-') || text == "help" {
        return false;
    }
    // The derived name check: building the whole clap command tree to list the names cost
    // more than a tenth of a millisecond on every compile.
    !<Command as clap::Subcommand>::has_subcommand(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    /// Every subcommand name (and `help`, and options) stays a subcommand; anything else is
    /// a compiler for the launcher.
    #[test]
    fn subcommands_win_over_compilers() {
        use clap::CommandFactory;
        let names: Vec<String> =
            Cli::command().get_subcommands().map(|c| c.get_name().to_owned()).collect();
        assert!(names.len() >= 5, "{names:?}");
        for name in names.iter().map(String::as_str).chain(["help", "--help", "-V"]) {
            assert!(!is_compiler(OsStr::new(name)), "{name} must not launch a compiler");
        }
        for compiler in ["gcc", "cc", "c++", "/usr/bin/g++", "clang-16", "x86_64-linux-gnu-gcc"] {
            assert!(is_compiler(OsStr::new(compiler)), "{compiler} must launch the compiler");
        }
    }
}
