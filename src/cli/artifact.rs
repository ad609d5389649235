//! `strata artifact lookup | get-or-build | materialize | promote | verify | gc | push |
//! pull | scan-includes` (docs/artifact-store.md "Command line").
//!
//! Exit codes (all subcommands): 0 success; 1 error; 2 usage error; 3 MISS / not
//! available; 4 INVALID; 5 STORAGE_ERROR; 6 scan-includes "unsupported"; a build command's
//! own exit code (128 + signal when killed) for `get-or-build` and `promote`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use super::Failure;
use super::output::{errln, outln};
use strata::artifact::{
    self, ArtifactBuild, ArtifactKey, ArtifactSpec, ArtifactStore, BuildCommand, BuildKind,
    CommandStdout, Destination, EnvironmentIdentity, Lookup, LookupStatus, Mode, Stage,
    StoreOptions, include,
};
use strata::content::temp::{self, Purpose};
use strata::exit::{self, ExitCode};
use strata::fs::{self, LockWait};
use strata::l0::{self, PullOutcome, PushOutcome};
use strata::transport::{TransportOptions, open_store};

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

#[derive(Debug, Args)]
pub(crate) struct OutArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    #[command(flatten)]
    digest: super::DigestArgs,
    /// Cache root (resolved once; created on first write).
    #[arg(long, env = "STRATA_ARTIFACT_ROOT", value_name = "DIR")]
    root: PathBuf,
    /// Read-only: create, lock and modify nothing under the root; misses build privately.
    /// An empty STRATA_ARTIFACT_READ_ONLY counts as unset.
    #[arg(long, env = "STRATA_ARTIFACT_READ_ONLY", value_parser = parse_read_only, default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    read_only: bool,
    /// Directory for private builds and transfers, outside the cache root. By default a
    /// fresh directory under $TMPDIR (removed unless it holds a PRIVATE result).
    #[arg(long, env = "STRATA_ARTIFACT_PRIVATE_ROOT", value_name = "DIR")]
    private_root: Option<PathBuf>,
    /// Seconds to wait for a key lock before building privately; 0 waits forever
    /// [default: 3600]. An empty STRATA_ARTIFACT_LOCK_TIMEOUT counts as unset.
    #[arg(long, env = "STRATA_ARTIFACT_LOCK_TIMEOUT", value_parser = parse_lock_timeout, value_name = "SECONDS")]
    lock_timeout: Option<LockTimeout>,
}

/// Default wait for a key lock, in seconds.
const DEFAULT_LOCK_TIMEOUT_SECONDS: u64 = 3600;

/// `--lock-timeout`: seconds, or unset (an empty environment variable).
#[derive(Debug, Clone, Copy)]
struct LockTimeout(Option<u64>);

/// Parses `--read-only` / `STRATA_ARTIFACT_READ_ONLY` like clap's boolish values
/// (`1 true yes on y t` / `0 false no off n f`, any case); empty means unset (false).
fn parse_read_only(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" | "off" | "n" | "f" => Ok(false),
        "1" | "true" | "yes" | "on" | "y" | "t" => Ok(true),
        _ => Err(format!("{text:?} is not a boolean (use true or false)")),
    }
}

/// Parses `--lock-timeout` / `STRATA_ARTIFACT_LOCK_TIMEOUT`: whole seconds; empty means
/// unset (the default).
fn parse_lock_timeout(text: &str) -> Result<LockTimeout, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(LockTimeout(None));
    }
    text.parse::<u64>()
        .map(|s| LockTimeout(Some(s)))
        .map_err(|e| format!("{text:?} is not a whole number of seconds ({e})"))
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StageArg {
    Generated,
    Ready,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum KindArg {
    Single,
    Distributed,
}

#[derive(Debug, Args)]
pub(crate) struct IdArgs {
    /// Environment component digest NAME=SHA256 (repeatable; at least one).
    #[arg(long = "env", value_name = "NAME=SHA256", required = true)]
    env: Vec<String>,
    /// Source digest (64 lowercase hex).
    #[arg(long, value_name = "SHA256")]
    source: String,
    /// Specialization digest (64 lowercase hex).
    #[arg(long, value_name = "SHA256")]
    specialization: String,
    /// Stage.
    #[arg(long, value_enum, default_value = "generated")]
    stage: StageArg,
    /// Build kind.
    #[arg(long, value_enum, default_value = "single")]
    kind: KindArg,
    /// Required relative path (repeatable; at least one). A file name is bytes: a name that
    /// is not UTF-8 is given as it is and recorded in the name encoding (`\xHH`).
    #[arg(long, value_name = "PATH", required = true)]
    require: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct OptionalIdArgs {
    /// Environment component digest NAME=SHA256 (repeatable).
    #[arg(long = "env", value_name = "NAME=SHA256")]
    env: Vec<String>,
    /// Source digest.
    #[arg(long, value_name = "SHA256")]
    source: Option<String>,
    /// Specialization digest.
    #[arg(long, value_name = "SHA256")]
    specialization: Option<String>,
    /// Stage.
    #[arg(long, value_enum, default_value = "generated")]
    stage: StageArg,
    /// Build kind.
    #[arg(long, value_enum, default_value = "single")]
    kind: KindArg,
    /// Required relative path (repeatable; any bytes, like `--require` elsewhere).
    #[arg(long, value_name = "PATH")]
    require: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct RemoteArgs {
    /// Object store URL (file:///abs/dir or s3://bucket/prefix?...). By default
    /// file://$XDG_CACHE_HOME/strata/store.
    #[arg(long = "store", env = "STRATA_STORE", value_name = "URL")]
    store: Option<String>,
    /// Fail (exit 1) on transport failures and rejected objects instead of warning.
    #[arg(long)]
    strict: bool,
}

impl IdArgs {
    fn key(&self) -> Result<ArtifactKey, Failure> {
        key_from(&self.env, &self.source, &self.specialization)
    }

    fn spec(&self) -> Result<ArtifactSpec, Failure> {
        let stage = match self.stage {
            StageArg::Generated => Stage::Generated,
            StageArg::Ready => Stage::BinaryReady,
        };
        spec_from(stage, self.kind, &self.require)
    }
}

fn key_from(env: &[String], source: &str, specialization: &str) -> Result<ArtifactKey, Failure> {
    let mut components = Vec::new();
    for item in env {
        let Some((name, digest)) = item.split_once('=') else {
            return Err(Failure::usage(anyhow::anyhow!("--env {item:?} must be NAME=SHA256")));
        };
        components.push((name.to_owned(), (!digest.is_empty()).then(|| digest.to_owned())));
    }
    let environment = EnvironmentIdentity::new(components).map_err(Failure::usage)?;
    ArtifactKey::new(environment, source, specialization).map_err(Failure::usage)
}

fn spec_from(stage: Stage, kind: KindArg, require: &[OsString]) -> Result<ArtifactSpec, Failure> {
    let kind = match kind {
        KindArg::Single => BuildKind::Single,
        KindArg::Distributed => BuildKind::Distributed,
    };
    ArtifactSpec::new(stage, kind, recorded_paths(require)).map_err(Failure::usage)
}

/// Relative paths given on the command line (raw bytes) in their recorded form (the name
/// encoding of `strata::fs::name`).
fn recorded_paths(paths: &[OsString]) -> Vec<String> {
    paths.iter().map(|p| strata::fs::name::encode_os(p)).collect()
}

/// A private root for this invocation: the given one, or a fresh `strata-artifact-<16 hex>`
/// under $TMPDIR (a self-deleting [`fs::StagingDir`]) that is removed on drop unless kept.
struct PrivateRoot {
    path: PathBuf,
    temporary: Option<fs::StagingDir>,
    keep: bool,
}

impl PrivateRoot {
    fn new(given: Option<&Path>) -> Result<Self, Failure> {
        match given {
            Some(p) => Ok(Self { path: p.to_path_buf(), temporary: None, keep: true }),
            None => {
                let dir =
                    temp::create_dir(&std::env::temp_dir(), Purpose::Scratch, "artifact", 0o700)?;
                Ok(Self { path: dir.path().to_path_buf(), temporary: Some(dir), keep: false })
            }
        }
    }

    /// True if what is inside outlives this process (an explicit or kept private root).
    fn survives(&self) -> bool {
        self.temporary.is_none() || self.keep
    }
}

impl Drop for PrivateRoot {
    fn drop(&mut self) {
        if self.keep
            && let Some(dir) = self.temporary.take()
        {
            let _kept = dir.keep();
        }
    }
}

impl StoreArgs {
    fn open(&self, private: Option<&PrivateRoot>) -> Result<ArtifactStore, Failure> {
        let options = StoreOptions {
            digest: self.digest.digest,
            mode: if self.read_only { Mode::ReadOnly } else { Mode::ReadWrite },
            private_root: private.map(|p| p.path.clone()),
            lock_wait: match self
                .lock_timeout
                .and_then(|t| t.0)
                .unwrap_or(DEFAULT_LOCK_TIMEOUT_SECONDS)
            {
                0 => LockWait::Forever,
                s => LockWait::Timeout(Duration::from_secs(s)),
            },
        };
        ArtifactStore::open(&self.root, options).map_err(Failure::of)
    }

    /// Checks a destination (`--dest`, `--output`) before anything is built, downloaded or
    /// created (nothing is created by the check).
    fn destination(&self, path: Option<&Path>) -> Result<Option<Destination>, Failure> {
        let Some(path) = path else { return Ok(None) };
        let store =
            ArtifactStore::open(&self.root, StoreOptions::default()).map_err(Failure::of)?;
        store.destination(path).map(Some).map_err(Failure::of)
    }
}

fn print(json: bool, value: &Value, text: &str) -> Result<(), Failure> {
    if json { outln!("{value}") } else { outln!("{text}") }
}

fn lookup_json(lookup: &Lookup, key: &ArtifactKey, spec: &ArtifactSpec) -> Value {
    json!({
        "status": lookup.status().as_str(),
        "key": key.digest().to_string(),
        "spec": spec.digest().to_string(),
        "stage": spec.stage().as_str(),
        "dir": lookup.handle().map(|h| shown(&h.dir())),
        "manifest_digest": lookup.handle().map(|h| h.manifest_digest().to_string()),
        "reason": lookup.reason(),
    })
}

fn lookup_text(lookup: &Lookup, key: &ArtifactKey) -> String {
    let mut text =
        format!("strata: {} key={}", lookup.status().as_str().to_uppercase(), key.digest());
    if let Some(h) = lookup.handle() {
        text.push_str(&format!(" dir={}", h.dir().display()));
    }
    if let Some(r) = lookup.reason() {
        text.push_str(&format!(" reason={r}"));
    }
    text
}

/// The build command of get-or-build and promote; with `--json` its stdout goes to stderr
/// so that stdout carries only strata's JSON object.
fn build_command(command: Vec<OsString>, json: bool) -> BuildCommand {
    let stdout = if json { CommandStdout::Stderr } else { CommandStdout::Inherit };
    BuildCommand::new(command, stdout)
}

fn build_failure(e: artifact::Error) -> Failure {
    if let Some(failed) = e.build_command_failure() {
        return Failure { code: failed.code, error: anyhow::Error::new(failed.clone()) };
    }
    Failure::of(e)
}

/// A path in JSON output (`strata::fs::name::display_text`: as it is when UTF-8, else in
/// the name encoding); serde would fail on a path that is not UTF-8.
fn shown(path: &Path) -> String {
    strata::fs::name::display_text(path)
}

fn build_report<T>(
    build: &ArtifactBuild<T>,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    kept: &Kept,
) -> (Value, String) {
    let value = json!({
        "disposition": build.disposition.as_str(),
        "key": key.digest().to_string(),
        "spec": spec.digest().to_string(),
        "stage": spec.stage().as_str(),
        "dir": kept.dir.as_deref().map(shown),
        "manifest_digest": build.handle.as_ref().map(|h| h.manifest_digest().to_string()),
        "private_dir": kept.private_dir.as_deref().map(shown),
        "output": kept.output.as_deref().map(shown),
        "reason": build.reason,
        "failure": build.failure.map(|f| f.as_str()),
        "warnings": build.warnings,
    });
    let mut text = format!(
        "strata: {} key={} stage={}",
        build.disposition.as_str().to_uppercase(),
        key.digest(),
        spec.stage()
    );
    if let Some(dir) = &kept.dir {
        text.push_str(&format!(" dir={}", dir.display()));
    }
    if let Some(output) = &kept.output {
        text.push_str(&format!(" output={}", output.display()));
    }
    if let Some(f) = build.failure {
        text.push_str(&format!(" failure={}", f.as_str()));
    }
    if let Some(r) = &build.reason {
        text.push_str(&format!(" reason={r}"));
    }
    for w in &build.warnings {
        text.push_str(&format!("\nstrata: warning: {w}"));
    }
    (value, text)
}

/// The paths a build report may name: only those that still exist when strata exits.
struct Kept {
    /// The slot (HIT, PUBLISHED) or the surviving private build (PRIVATE).
    dir: Option<PathBuf>,
    /// The private build directory, if it survives.
    private_dir: Option<PathBuf>,
    /// The filled `--output` directory.
    output: Option<PathBuf>,
}

/// After a build: copy to --output, drop the private build when it was published, and
/// work out which paths outlive this process.
fn finish_build<T>(
    build: &ArtifactBuild<T>,
    output: Option<&Destination>,
    keep_private: bool,
    private: &mut PrivateRoot,
) -> Result<Kept, Failure> {
    let mut copied = None;
    if let Some(dest) = output {
        let report = match (&build.handle, &build.private_dir) {
            (Some(handle), _) => Some(handle.materialize_into(dest)),
            (None, Some(dir)) => Some(dest.copy_tree(dir)),
            (None, None) => None,
        };
        if let Some(report) = report {
            copied = Some(report.map_err(Failure::of)?.dest);
        }
    }
    let mut private_dir = build.private_dir.clone();
    match (&build.handle, &build.private_dir) {
        (Some(_), Some(dir)) if !keep_private => {
            let _ = fs::remove_tree(dir);
            private_dir = None;
        }
        (Some(_), Some(_)) => private.keep = true,
        (None, Some(_)) if output.is_none() => private.keep = true,
        _ => {}
    }
    if !private.survives() {
        private_dir = None;
    }
    let dir = build.handle.as_ref().map(|h| h.dir()).or_else(|| private_dir.clone());
    Ok(Kept { dir, private_dir, output: copied })
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
        ArtifactCommand::Lookup { store, id, out } => {
            let (key, spec) = (id.key()?, id.spec()?);
            let store = store.open(None)?;
            let lookup = store.lookup(&key, &spec);
            print(out.json, &lookup_json(&lookup, &key, &spec), &lookup_text(&lookup, &key))?;
            Ok(lookup.status().exit_code())
        }
        ArtifactCommand::GetOrBuild { store, id, output, keep_private, out, command } => {
            let (key, spec) = (id.key()?, id.spec()?);
            let output = store.destination(output.as_deref())?;
            let mut private = PrivateRoot::new(store.private_root.as_deref())?;
            let store = store.open(Some(&private))?;
            let command = build_command(command, out.json);
            let build =
                store.get_or_build(&key, &spec, |dir| command.run(dir)).map_err(build_failure)?;
            let kept = finish_build(&build, output.as_ref(), keep_private, &mut private)?;
            let (value, text) = build_report(&build, &key, &spec, &kept);
            print(out.json, &value, &text)?;
            Ok(0)
        }
        ArtifactCommand::Materialize { store, id, dest, out } => {
            let (key, spec) = (id.key()?, id.spec()?);
            let store = store.open(None)?;
            let dest = store.destination(&dest).map_err(Failure::of)?;
            let lookup = store.lookup(&key, &spec);
            let Lookup::Hit(handle) = &lookup else {
                print(out.json, &lookup_json(&lookup, &key, &spec), &lookup_text(&lookup, &key))?;
                return Ok(lookup.status().exit_code());
            };
            let report = handle.materialize_into(&dest).map_err(Failure::of)?;
            let value = json!({
                "status": "hit", "key": key.digest().to_string(), "spec": spec.digest().to_string(),
                "dir": shown(&handle.dir()), "dest": shown(&report.dest), "files": report.files, "bytes": report.bytes,
            });
            let text = format!(
                "strata: MATERIALIZED key={} files={} bytes={} dest={}",
                key.digest(),
                report.files,
                report.bytes,
                report.dest.display()
            );
            print(out.json, &value, &text)?;
            Ok(0)
        }
        ArtifactCommand::Promote { store, id, ready_require, output, out, command } => {
            let key = id.key()?;
            let generated = spec_from(Stage::Generated, id.kind, &id.require)?;
            let ready = generated
                .with_stage_and_more(Stage::BinaryReady, recorded_paths(&ready_require))
                .map_err(Failure::usage)?;
            let output = store.destination(output.as_deref())?;
            let mut private = PrivateRoot::new(store.private_root.as_deref())?;
            let store = store.open(Some(&private))?;
            let command = build_command(command, out.json);
            let (parent, build) = store
                .promote(&key, &generated, &ready, |dir| command.run(dir))
                .map_err(build_failure)?;
            let kept = finish_build(&build, output.as_ref(), false, &mut private)?;
            let (mut value, text) = build_report(&build, &key, &ready, &kept);
            value["parent"] = json!(parent.manifest_digest().to_string());
            print(out.json, &value, &text)?;
            Ok(0)
        }
        ArtifactCommand::Verify { root, all, repeat, id, out } => {
            verify(root, all, repeat, id, out.json)
        }
        ArtifactCommand::Gc { root, dry_run, out } => {
            let store = ArtifactStore::open(&root, StoreOptions::default()).map_err(Failure::of)?;
            let report =
                artifact::gc(store.root(), artifact::GcOptions { dry_run }).map_err(Failure::of)?;
            let mut text = String::new();
            for a in &report.actions {
                text.push_str(&format!(
                    "{} {} {} ({})\n",
                    a.result,
                    a.kind,
                    a.path.display(),
                    a.reason
                ));
            }
            for s in &report.skipped {
                text.push_str(&format!("skipped {} (its key lock is held)\n", s.display()));
            }
            text.push_str(&format!(
                "strata: gc kept {} valid slot(s), {} action(s){}",
                report.kept_slots,
                report.actions.len(),
                if dry_run { " (dry run)" } else { "" }
            ));
            print(out.json, &serde_json::to_value(&report).unwrap_or_default(), &text)?;
            Ok(if report.has_failures() { 1 } else { 0 })
        }
        ArtifactCommand::Push { store, id, remote, signing, out } => {
            let (key, spec) = (id.key()?, id.spec()?);
            let signing_key = signing.load(&strata::ci::Github::from_env())?;
            let trust = l0::Trust {
                signing_key: signing_key.as_ref(),
                producer: strata::trust::Producer::from_env_with(|n| std::env::var(n).ok()),
                ..l0::Trust::default()
            };
            let private = PrivateRoot::new(store.private_root.as_deref())?;
            let store = store.open(Some(&private))?;
            let objects = open_remote(&remote)?;
            match l0::push(&store, objects.as_ref(), &key, &spec, &trust) {
                Ok(report) => {
                    let outcome = match report.outcome {
                        PushOutcome::Uploaded => "uploaded",
                        PushOutcome::AlreadyPresent => "already_present",
                    };
                    let value = json!({
                        "outcome": outcome, "object": report.object.as_str(), "store": objects.describe(),
                        "archive_bytes": report.archive_bytes, "payload_bytes": report.payload_bytes,
                        "seconds": report.seconds, "signed": report.signed,
                    });
                    let text = format!(
                        "strata: L0 push {outcome} object={} bytes={} store={}",
                        report.object,
                        report.archive_bytes,
                        objects.describe()
                    );
                    print(out.json, &value, &text)?;
                    Ok(0)
                }
                Err(l0::Error::Artifact(e)) => Err(Failure::of(e)),
                Err(e) if remote.strict => Err(Failure::from(anyhow::Error::from(e))),
                Err(e) => {
                    let message = strata::message::one_line(&e);
                    errln!("strata: warning: {message} (continuing; use --strict to fail)");
                    print(
                        out.json,
                        &json!({"outcome": "transport_error", "reason": message}),
                        "strata: L0 push skipped",
                    )?;
                    Ok(0)
                }
            }
        }
        ArtifactCommand::Pull { store, id, remote, trust, dest, out } => {
            let (key, spec) = (id.key()?, id.spec()?);
            let trust = l0::Trust { policy: trust.policy()?, ..l0::Trust::default() };
            let dest = store.destination(dest.as_deref())?;
            let mut private = PrivateRoot::new(store.private_root.as_deref())?;
            let store = store.open(Some(&private))?;
            let objects = open_remote(&remote)?;
            let report = match l0::pull(&store, objects.as_ref(), &key, &spec, &trust) {
                Ok(r) => r,
                Err(l0::Error::Artifact(e)) => return Err(Failure::of(e)),
                Err(e) if remote.strict => return Err(Failure::from(anyhow::Error::from(e))),
                Err(e) => {
                    let message = strata::message::one_line(&e);
                    errln!("strata: warning: {message} (treated as a miss; use --strict to fail)");
                    let value = json!({"outcome": "transport_error", "reason": message});
                    print(out.json, &value, "strata: L0 MISS (transport error)")?;
                    return Ok(exit::MISS);
                }
            };
            let (outcome, reason) = match &report.outcome {
                PullOutcome::LocalHit => ("local_hit", None),
                PullOutcome::Pulled => ("pulled", report.reason.clone()),
                PullOutcome::NotInRemote => ("not_in_store", None),
                PullOutcome::Rejected(r) => ("rejected", Some(r.clone())),
            };
            if let PullOutcome::Rejected(r) = &report.outcome {
                if remote.strict {
                    return Err(Failure::from(anyhow::anyhow!(
                        "rejected L0 object {}: {r}",
                        report.object
                    )));
                }
                errln!("strata: warning: rejected L0 object {}: {r}", report.object);
            }
            for warning in &report.warnings {
                errln!("strata: warning: {warning}");
            }
            let available = report.dir();
            if report.handle.is_none() && report.private_dir.is_some() && dest.is_none() {
                private.keep = true;
            }
            let mut filled = None;
            if let (Some(dest), Some(dir)) = (&dest, &available) {
                let copied = match &report.handle {
                    Some(h) => h.materialize_into(dest),
                    None => dest.copy_tree(dir),
                };
                filled = Some(copied.map_err(Failure::of)?.dest);
            }
            // Report only directories that outlive this process.
            let dir = match &report.handle {
                Some(h) => Some(h.dir()),
                None => report.private_dir.clone().filter(|_| private.survives()),
            };
            let value = json!({
                "outcome": outcome, "object": report.object.as_str(), "store": objects.describe(),
                "dir": dir.as_deref().map(shown), "disposition": report.disposition.map(|d| d.as_str()),
                "reason": reason, "downloaded_bytes": report.downloaded_bytes, "seconds": report.seconds,
                "dest": filled.as_deref().map(shown), "warnings": report.warnings,
            });
            let mut text = format!(
                "strata: L0 {} ({outcome}) key={}",
                if available.is_some() { "HIT" } else { "MISS" },
                key.digest()
            );
            if let Some(dir) = &dir {
                text.push_str(&format!(" dir={}", dir.display()));
            }
            if let Some(dest) = &filled {
                text.push_str(&format!(" dest={}", dest.display()));
            }
            print(out.json, &value, &text)?;
            Ok(if available.is_some() { 0 } else { exit::MISS })
        }
        ArtifactCommand::ScanIncludes { sources, include_dirs, package, out } => {
            match include::scan(&sources, &include_dirs).map_err(Failure::of)? {
                include::Verdict::Unsupported(u) => {
                    let value = json!({"verdict": "unsupported", "file": shown(&u.file), "line": u.line, "reason": u.reason});
                    let text = format!(
                        "strata: unsupported {}:{}: {}",
                        u.file.display(),
                        u.line,
                        u.reason
                    );
                    print(out.json, &value, &text)?;
                    Ok(exit::UNSUPPORTED)
                }
                include::Verdict::Closure(closure) => {
                    if let Some(dest) = &package {
                        include::package(&closure, dest).map_err(Failure::of)?;
                    }
                    let value = json!({
                        "verdict": "complete",
                        "common_root": shown(&closure.common_root),
                        "files": closure.files.iter().map(|f| shown(f)).collect::<Vec<_>>(),
                        "relative_files": closure.relative_files,
                        "include_dirs": closure.relative_include_dirs,
                        "system_includes": closure.system_includes,
                        "package": package.as_deref().map(shown),
                    });
                    let mut text = String::new();
                    for f in &closure.files {
                        text.push_str(&format!("{}\n", f.display()));
                    }
                    for s in &closure.system_includes {
                        text.push_str(&format!(
                            "system <{}> ({}:{})\n",
                            s.name,
                            s.file.display(),
                            s.line
                        ));
                    }
                    text.push_str(&format!("strata: complete, {} file(s)", closure.files.len()));
                    print(out.json, &value, &text)?;
                    Ok(0)
                }
            }
        }
    }
}

fn open_remote(args: &RemoteArgs) -> Result<Box<dyn strata::transport::ObjectStore>, Failure> {
    let url = strata::config::store_url(args.store.as_deref()).map_err(Failure::usage)?;
    let options = TransportOptions::from_env().map_err(Failure::usage)?;
    open_store(&url, &options).map_err(Failure::usage)
}

fn verify(
    root: PathBuf,
    all: bool,
    repeat: u32,
    id: OptionalIdArgs,
    json_out: bool,
) -> Result<i32, Failure> {
    let store = ArtifactStore::open(
        &root,
        StoreOptions { mode: Mode::ReadOnly, ..StoreOptions::default() },
    )
    .map_err(Failure::of)?;
    if !all {
        let (Some(source), Some(specialization)) = (&id.source, &id.specialization) else {
            return Err(Failure::usage(anyhow::anyhow!(
                "give --all, or the key and spec flags (--env, --source, --specialization, --require)"
            )));
        };
        let key = key_from(&id.env, source, specialization)?;
        let stage = match id.stage {
            StageArg::Generated => Stage::Generated,
            StageArg::Ready => Stage::BinaryReady,
        };
        let spec = spec_from(stage, id.kind, &id.require)?;
        let start = std::time::Instant::now();
        let lookup = store.lookup(&key, &spec);
        let mut passes = vec![json!({"seconds": start.elapsed().as_secs_f64(),
            "hashed_bytes": lookup.handle().map(|h| h.manifest().total_bytes())})];
        let mut text = lookup_text(&lookup, &key);
        let mut value = lookup_json(&lookup, &key, &spec);
        let mut code = lookup.status().exit_code();
        if let Some(handle) = lookup.handle() {
            for pass in 1..repeat.max(1) {
                let start = std::time::Instant::now();
                let seconds = || start.elapsed().as_secs_f64();
                match handle.verify() {
                    Ok(report) => {
                        text.push_str(&format!(
                            "\nstrata: re-verified in {:.4}s, hashed {} of {} bytes",
                            seconds(),
                            report.hashed_bytes,
                            report.total_bytes
                        ));
                        passes.push(
                            json!({"seconds": seconds(), "hashed_bytes": report.hashed_bytes}),
                        );
                    }
                    Err(e) => {
                        // Reported like the same problem found by the first pass.
                        let status = if e.is_corrupt() {
                            LookupStatus::Invalid
                        } else {
                            LookupStatus::StorageError
                        };
                        let reason = e.to_string();
                        passes.push(json!({"seconds": seconds(), "hashed_bytes": null, "status": status.as_str()}));
                        text.push_str(&format!(
                            "\nstrata: {} key={} pass={} reason={reason}",
                            status.as_str().to_uppercase(),
                            key.digest(),
                            pass + 1
                        ));
                        value["status"] = json!(status.as_str());
                        value["reason"] = json!(reason);
                        value["dir"] = Value::Null;
                        value["manifest_digest"] = Value::Null;
                        value["failed_pass"] = json!(pass + 1);
                        code = status.exit_code();
                        break;
                    }
                }
            }
        }
        value["passes"] = json!(passes);
        print(json_out, &value, &text)?;
        return Ok(code);
    }
    let reports = artifact::verify_all(store.root()).map_err(Failure::of)?;
    let mut text = String::new();
    let mut code = 0;
    for r in &reports {
        text.push_str(&format!("{} {}", r.status, r.path.display()));
        if let Some(reason) = &r.reason {
            text.push_str(&format!(" ({reason})"));
        }
        text.push('\n');
        code = code.max(match r.status {
            "invalid" => exit::INVALID,
            "storage_error" => exit::STORAGE_ERROR,
            _ => 0,
        });
    }
    let valid = reports.iter().filter(|r| r.status == "hit").count();
    text.push_str(&format!("strata: {valid} of {} slot(s) valid", reports.len()));
    print(json_out, &json!({"slots": reports, "valid": valid}), &text)?;
    Ok(code)
}
