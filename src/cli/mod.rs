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
mod key;
mod log;
mod output;
mod snapshot;

use output::errln;

use clap::{Parser, Subcommand};

/// `--digest`: the content digest algorithm of new records, shared by every command that
/// writes entries, manifests or archives.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DigestArgs {
    /// Content digest algorithm of new entries, artifact manifests, snapshots and archives:
    /// blake3 or sha256. Records already stored keep theirs (every digest names its
    /// algorithm), so both kinds can be read at any time.
    #[arg(long, env = "STRATA_DIGEST", value_name = "ALGORITHM", default_value = "blake3")]
    pub(crate) digest: strata::digest::DigestAlgorithm,
}

/// Exit code for usage errors.
pub const EXIT_USAGE: i32 = 2;
/// Exit code for lock timeouts (`EX_TEMPFAIL`).
pub const EXIT_LOCK_TIMEOUT: i32 = 75;

/// strata: a layered, content-verified build cache for CI.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about, max_term_width = 100)]
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
    /// What an L1 cache root holds: entries, bytes, namespaces, leftovers.
    Stats {
        /// Cache root [env: STRATA_CACHE_ROOT].
        #[arg(long, value_name = "DIR")]
        cache_root: Option<std::path::PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
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
        Failure { code: 1, error: e.into() }
    }
}

/// Parses arguments and runs the command; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { 0 };
        }
    };
    let result = match cli.command {
        Command::Action(cmd) => action::run(*cmd),
        Command::Stats { cache_root, json } => action::stats(cache_root, json),
        Command::Artifact(cmd) => artifact::run(*cmd),
        Command::Snapshot(cmd) => snapshot::run(*cmd),
        Command::Key(cmd) => key::run(cmd),
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

/// Maps a library action error to its exit code.
pub(crate) fn action_failure(e: strata::action::Error) -> Failure {
    let code = if e.is_lock_timeout() {
        EXIT_LOCK_TIMEOUT
    } else if e.is_usage() {
        EXIT_USAGE
    } else {
        1
    };
    Failure { code, error: e.into() }
}
