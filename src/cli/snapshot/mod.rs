//! `strata snapshot key | restore | save | gc` (docs/snapshots.md "Command reference").
//!
//! Cache-layer problems never fail the command: an unsupported key, a transport failure or
//! a rejected snapshot is a warning (`::warning::` under GitHub Actions) and exit code 0,
//! unless `--strict` (exit 1) or, for restore, `--fail-on-cache-miss` (exit 1 when nothing
//! was restored). Malformed flags, store URLs and `STRATA_S3_*` values exit 2.

//!
//! One file per subcommand: `key`, `restore`, `save`, `gc`, `local` (pack, unpack); this one
//! holds the flags restore and save share and the warning, GitHub and store helpers.

mod gc;
mod key;
mod local;
mod restore;
mod save;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::Value;

use super::Failure;
use super::output::{errln, outln};
use crate::cli::exit;
use strata::ci::{self, Github};
use strata::snapshot::Compression;

use gc::GcArgs;
use key::KeyArgs;
use local::{PackArgs, UnpackArgs};
use restore::RestoreArgs;
use save::SaveArgs;

/// Exit code when `--fail-on-cache-miss` or `--strict` turns a cache outcome into failure.
const EXIT_CACHE_FAILURE: i32 = exit::FAILURE;

#[derive(Debug, Subcommand)]
pub(crate) enum SnapshotCommand {
    /// Compute the snapshot key and its same-source and compatibility prefixes.
    Key(KeyArgs),
    /// Restore the best snapshot for a key into a cache directory (exact key, then the
    /// newest same-source, then the newest compatible snapshot, then --restore-key
    /// prefixes).
    Restore(RestoreArgs),
    /// Save the cache directory as a new snapshot (only with a key, a .updated marker and
    /// writer credentials).
    Save(SaveArgs),
    /// Delete snapshots beyond the newest N per namespace, and the entry objects no kept
    /// index snapshot references (store garbage collection; needs writer credentials).
    Gc(GcArgs),
    /// Pack a cache directory into a local snapshot file (no store; for inspection and
    /// benchmarks).
    Pack(PackArgs),
    /// Verify and unpack a local snapshot file into a new directory (no store).
    Unpack(UnpackArgs),
}

/// Flags shared by restore and save.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// Object store URL: file:///abs/dir, s3://bucket/prefix?endpoint=…&region=… or
    /// http(s)://host/path [env: STRATA_STORE; default: file://$XDG_CACHE_HOME/strata/store]
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Append JSONL events to this file [env: STRATA_EVENT_LOG]; its cache_result counts go
    /// into the step summary.
    #[arg(long, value_name = "FILE")]
    event_log: Option<PathBuf>,
    /// Exit 1 (instead of 0 with a warning) when the store or the snapshot fails.
    #[arg(long)]
    strict: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Write outputs to $GITHUB_OUTPUT, variables to $GITHUB_ENV and a table to
    /// $GITHUB_STEP_SUMMARY.
    #[arg(long)]
    github_output: bool,
}

/// A variable of the environment; unset, empty and non-UTF-8 values count as absent.
fn env(name: &str) -> Option<String> {
    strata::config::var_text(name)
}

/// A usage error (exit 2) saying `invalid <what>: <reason>`. A library error whose
/// message already says what is invalid goes through [`Failure::of`] instead (no doubled
/// prefix).
fn usage(what: &str, reason: impl std::fmt::Display) -> Failure {
    Failure::usage(anyhow::anyhow!("invalid {what}: {reason}"))
}

/// Empty flag values (as GitHub passes unset inputs) count as absent.
fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// Prints a warning: a workflow command under GitHub Actions, else a plain line (both on
/// stderr, so stdout stays machine-readable).
pub(crate) fn warn(gh: &Github, title: &str, message: &str) {
    let line = if gh.actions {
        ci::warning(&format!("strata {title}"), message)
    } else {
        format!("strata: WARNING {title}: {message}")
    };
    errln!("{line}");
}

fn notice(gh: &Github, title: &str, message: &str) {
    let line = if gh.actions {
        ci::notice(&format!("strata {title}"), message)
    } else {
        format!("strata: {title}: {message}")
    };
    errln!("{line}");
}

/// Writes GitHub files; a failure is a warning on stderr naming the file and the cause
/// (the step's own result still stands, but later steps will not see what is missing).
fn github_write(gh: &Github, result: Result<(), ci::Error>) {
    if let Err(e) = result {
        let text = strata::message::one_line(&e);
        warn(
            gh,
            "GitHub output",
            &format!("{text}; later steps will not see these outputs (is the file writable?)"),
        );
    }
}

/// With `--github-output`, warns if `GITHUB_OUTPUT` is not set: nothing would be written.
fn check_github_output(gh: &Github, requested: bool) {
    if requested && !gh.has_output_file() {
        warn(
            gh,
            "GitHub output",
            "--github-output is set but GITHUB_OUTPUT is not: no step outputs are written \
             (outside GitHub Actions, drop --github-output or set GITHUB_OUTPUT to a file)",
        );
    }
}

/// `--store`, else `STRATA_STORE`, else the default store (`strata::config`), parsed.
fn store_url(flag: Option<String>) -> Result<strata::transport::StoreUrl, Failure> {
    crate::cli::store::store_url(flag.as_deref())
}

fn cache_dir(flag: Option<PathBuf>) -> Result<PathBuf, Failure> {
    strata::config::cache_root(flag.as_deref())
        .ok_or_else(|| usage("--cache-dir", "required (or set STRATA_CACHE_ROOT)"))
}

fn event_log(flag: Option<PathBuf>) -> Option<PathBuf> {
    strata::config::event_log(flag.as_deref())
}

fn print_json(value: &Value) -> Result<(), Failure> {
    outln!("{}", serde_json::to_string_pretty(value)?)?;
    Ok(())
}

pub(crate) fn run(cmd: SnapshotCommand) -> Result<i32, Failure> {
    super::log::init();
    match cmd {
        SnapshotCommand::Key(args) => key::key(args),
        SnapshotCommand::Restore(args) => restore::restore(args),
        SnapshotCommand::Save(args) => save::save(args),
        SnapshotCommand::Gc(args) => gc::gc(args),
        SnapshotCommand::Pack(args) => local::pack(args),
        SnapshotCommand::Unpack(args) => local::unpack(args),
    }
}

fn seconds(value: f64) -> String {
    format!("{value:.1} s")
}

/// How a snapshot is compressed: shared by `snapshot save` and `snapshot pack`.
#[derive(Debug, clap::Args)]
pub(crate) struct PackingArgs {
    /// Compression: zstd (multi-threaded) or gzip.
    #[arg(long, value_name = "FORMAT", default_value = "zstd")]
    pub(crate) compression: Compression,
    /// Compression level: zstd -7..19 (negative: fast modes), gzip 1..9 [default: zstd 1,
    /// gzip 6]. `--level -3` and `--level=-3` both work.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    level: Option<i32>,
    /// zstd worker threads [default: one per CPU].
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) threads: u32,
}

impl PackingArgs {
    /// The compression level: `--level`, else the format's default.
    ///
    /// # Errors
    /// A usage failure when the level is outside the format's range.
    pub(crate) fn level(&self) -> Result<i32, Failure> {
        let compression = self.compression;
        let level = self.level.unwrap_or_else(|| compression.default_level());
        if !compression.levels().contains(&level) {
            return Err(usage(
                "--level",
                format!("{level} is outside {:?} for {compression}", compression.levels()),
            ));
        }
        Ok(level)
    }
}
