//! `strata artifact lookup | get-or-build | materialize | promote | verify | gc | push |
//! pull | scan-includes` (docs/artifact-store.md "Command line").
//!
//! Exit codes (all subcommands, [`strata::exit`]): 0 success; 1 error; 2 usage error; 3
//! MISS / not available; 4 INVALID; 5 STORAGE_ERROR; 6 scan-includes "unsupported"; a build
//! command's own exit code (128 + signal when killed) for `get-or-build` and `promote`.
//!
//! One file per group: `args` (shared flags), `build` (get-or-build, promote), `slots`
//! (lookup, materialize, verify, gc), `l0` (push, pull), `scan` (scan-includes).

mod args;
mod build;
mod l0;
mod scan;
mod slots;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::{Value, json};

use super::Failure;
use super::output::outln;
use args::{IdArgs, OptionalIdArgs, OutArgs, RemoteArgs, StoreArgs};

#[derive(Debug, Subcommand)]
pub(crate) enum ArtifactCommand {
    /// Look up and verify one slot; writes nothing. Exit 0 HIT, 3 MISS, 4 INVALID, 5
    /// STORAGE_ERROR.
    Lookup {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        id: IdArgs,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Return the artifact, running CMD only when no valid slot can be used. CMD writes
    /// its outputs into $STRATA_ARTIFACT_OUT (a fresh private directory).
    GetOrBuild {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        id: IdArgs,
        /// Copy the result (from the slot or the private build) into this empty or new
        /// directory outside the cache root.
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// Keep the private build directory after a successful publication.
        #[arg(long)]
        keep_private: bool,
        #[command(flatten)]
        out: OutArgs,
        /// The build command.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Copy a verified artifact into an empty or new directory outside the cache root
    /// (no manifest, owner-writable). Exit 3/4/5 when the slot does not HIT.
    Materialize {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        id: IdArgs,
        /// Destination directory.
        #[arg(long, value_name = "DIR")]
        dest: PathBuf,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Promote GENERATED to BINARY_READY: materialize the generated artifact into
    /// $STRATA_ARTIFACT_OUT, run CMD there, publish the ready stage. The spec flags
    /// describe the generated stage (--stage is ignored).
    Promote {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        id: IdArgs,
        /// Extra files the ready stage requires (repeatable; any bytes, like --require);
        /// the ready spec requires these plus the generated spec's files.
        #[arg(long = "ready-require", value_name = "PATH", required = true)]
        ready_require: Vec<OsString>,
        /// Copy the ready result into this empty or new directory.
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
        #[command(flatten)]
        out: OutArgs,
        /// The build command.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Verify one slot (with key and spec flags) or every slot (--all). Reads only.
    /// Exit 0 valid, 3 MISS, 4 INVALID, 5 STORAGE_ERROR.
    Verify {
        /// Cache root.
        #[arg(long, env = "STRATA_ARTIFACT_ROOT", value_name = "DIR")]
        root: PathBuf,
        /// Verify every slot against its own manifest.
        #[arg(long, conflicts_with_all = ["env", "source", "specialization", "require"])]
        all: bool,
        /// Verify the one slot this many times with one handle, reporting seconds and
        /// bytes hashed per pass (passes after the first re-hash only changed files).
        #[arg(long, default_value_t = 1, value_name = "N", conflicts_with = "all")]
        repeat: u32,
        #[command(flatten)]
        id: OptionalIdArgs,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Offline cleanup: invalid slots, crash leftovers (staging), unexpected entries,
    /// empty directories, unused lock files. Stop every writer and consumer first.
    Gc {
        /// Cache root.
        #[arg(long, env = "STRATA_ARTIFACT_ROOT", value_name = "DIR")]
        root: PathBuf,
        /// List what would be removed without removing it.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Upload one published artifact to the L0 object store (never overwrites). A
    /// transport failure is a warning (exit 0) unless --strict.
    Push {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        id: IdArgs,
        #[command(flatten)]
        remote: RemoteArgs,
        #[command(flatten)]
        signing: super::SigningArgs,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Make one artifact available locally from the L0 object store (verified before
    /// use). Exit 0 available (local HIT or pulled), 3 not available (not in the store,
    /// rejected, or a transport failure without --strict).
    Pull {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        id: IdArgs,
        #[command(flatten)]
        remote: RemoteArgs,
        #[command(flatten)]
        trust: super::TrustArgs,
        /// Also materialize the artifact into this empty or new directory.
        #[arg(long, value_name = "DIR")]
        dest: Option<PathBuf>,
        #[command(flatten)]
        out: OutArgs,
    },
    /// List the closure of local quoted includes of SOURCES (conservatively). Exit 0
    /// complete, 6 unsupported input (compile privately), 1 I/O error or malformed input.
    ScanIncludes {
        /// Source files.
        #[arg(required = true, value_name = "SOURCE")]
        sources: Vec<PathBuf>,
        /// Include directory, searched in order (repeatable).
        #[arg(short = 'I', long = "include-dir", value_name = "DIR")]
        include_dirs: Vec<PathBuf>,
        /// Copy the closure into this new or empty directory, keeping the relative layout.
        #[arg(long, value_name = "DIR")]
        package: Option<PathBuf>,
        #[command(flatten)]
        out: OutArgs,
    },
}

impl ArtifactCommand {
    /// True if `--json` was given.
    fn json(&self) -> bool {
        match self {
            ArtifactCommand::Lookup { out, .. }
            | ArtifactCommand::GetOrBuild { out, .. }
            | ArtifactCommand::Materialize { out, .. }
            | ArtifactCommand::Promote { out, .. }
            | ArtifactCommand::Verify { out, .. }
            | ArtifactCommand::Gc { out, .. }
            | ArtifactCommand::Push { out, .. }
            | ArtifactCommand::Pull { out, .. }
            | ArtifactCommand::ScanIncludes { out, .. } => out.json,
        }
    }
}

/// Runs one artifact subcommand. With `--json`, every outcome prints exactly one JSON
/// object on stdout, errors included: `{"status":"error","error":"…","exit_code":N}` (the
/// message is also printed on stderr, as without `--json`).
pub(crate) fn run(cmd: ArtifactCommand) -> Result<i32, Failure> {
    let json = cmd.json();
    let result = dispatch(cmd);
    if json && let Err(failure) = &result {
        let value = json!({
            "status": "error",
            "error": format!("{:#}", failure.error),
            "exit_code": failure.code,
        });
        print(true, &value, "")?;
    }
    result
}

fn dispatch(cmd: ArtifactCommand) -> Result<i32, Failure> {
    match cmd {
        ArtifactCommand::Lookup { store, id, out } => slots::lookup(&store, &id, out.json),
        ArtifactCommand::GetOrBuild { store, id, output, keep_private, out, command } => {
            build::get_or_build(&store, &id, output.as_deref(), keep_private, command, out.json)
        }
        ArtifactCommand::Materialize { store, id, dest, out } => {
            slots::materialize(&store, &id, &dest, out.json)
        }
        ArtifactCommand::Promote { store, id, ready_require, output, out, command } => {
            let ready = build::ReadyStage { require: &ready_require, output: output.as_deref() };
            build::promote(&store, &id, &ready, command, out.json)
        }
        ArtifactCommand::Verify { root, all, repeat, id, out } => {
            slots::verify(&root, all, repeat, &id, out.json)
        }
        ArtifactCommand::Gc { root, dry_run, out } => slots::gc(&root, dry_run, out.json),
        ArtifactCommand::Push { store, id, remote, signing, out } => {
            l0::push(&store, &id, &remote, &signing, out.json)
        }
        ArtifactCommand::Pull { store, id, remote, trust, dest, out } => {
            l0::pull(&store, &id, &remote, &trust, dest.as_deref(), out.json)
        }
        ArtifactCommand::ScanIncludes { sources, include_dirs, package, out } => {
            scan::scan_includes(&sources, &include_dirs, package.as_deref(), out.json)
        }
    }
}

/// Prints `value` (with `--json`) or `text`.
fn print(json: bool, value: &Value, text: &str) -> Result<(), Failure> {
    if json { outln!("{value}") } else { outln!("{text}") }
}

/// A path in JSON output (`strata::fs::name::display_text`: as it is when UTF-8, else in
/// the name encoding); serde would fail on a path that is not UTF-8.
fn shown(path: &Path) -> String {
    strata::fs::name::display_text(path)
}
