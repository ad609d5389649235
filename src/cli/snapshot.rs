//! `strata snapshot key | restore | save` (docs/snapshots.md "Command reference").
//!
//! Cache-layer problems never fail the command: an unsupported key, a transport failure or
//! a rejected snapshot is a warning (`::warning::` under GitHub Actions) and exit code 0,
//! unless `--strict` (exit 1) or, for restore, `--fail-on-cache-miss` (exit 1 when nothing
//! was restored). Malformed flags, store URLs and `STRATA_S3_*` values exit 2.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::Failure;
use super::output::{errln, outln};
use strata::action::events::EventLog;
use strata::ci::{self, EventCounts, Github};
use strata::exit;
use strata::snapshot::compat::PlatformFiles;
use strata::snapshot::key::{DEFAULT_PREFIX, RunContext, event_log_path};
use strata::snapshot::restore::LookupMode;
use strata::snapshot::save::has_writer_credentials;
use strata::snapshot::{
    self, Compression, KeyRequest, MatchLevel, Producer, RestoreRequest, SaveOutcome, SaveRequest,
    SkipReason, SnapshotKey,
};
use strata::transport::{
    ObjectStore, StoreUrl, TransportOptions, incomplete_credential_pairs, open_store_with_env,
    redact_store_url,
};

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
    /// Pack a cache directory into a local snapshot file (no store; for inspection and
    /// benchmarks).
    Pack(PackArgs),
    /// Verify and unpack a local snapshot file into a new directory (no store).
    Unpack(UnpackArgs),
}

#[derive(Debug, Args)]
pub(crate) struct PackArgs {
    #[command(flatten)]
    digest: super::DigestArgs,
    /// Cache directory whose actions-v1/ is packed.
    #[arg(long, value_name = "DIR")]
    cache_dir: PathBuf,
    /// The snapshot file to write (replaced if it exists).
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// Key recorded in the manifest.
    #[arg(long, value_name = "KEY", default_value = "local")]
    key: String,
    /// Compression: zstd (multi-threaded) or gzip.
    #[arg(long, value_name = "FORMAT", default_value = "zstd")]
    compression: Compression,
    /// Compression level: zstd -7..19 (negative: fast modes), gzip 1..9 [default: zstd 1,
    /// gzip 6]. `--level -3` and `--level=-3` both work.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    level: Option<i32>,
    /// zstd worker threads [default: one per CPU].
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: u32,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UnpackArgs {
    /// The snapshot file.
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// A directory that must not exist yet; it receives actions-v1/.
    #[arg(long, value_name = "DIR")]
    dest: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Flags shared by restore and save.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// Object store URL: file:///abs/dir or s3://bucket/prefix?endpoint=…&region=…
    /// [env: STRATA_STORE; default: file://$XDG_CACHE_HOME/strata/store]
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

#[derive(Debug, Args)]
pub(crate) struct KeyArgs {
    /// Key namespace prefix [env: STRATA_SNAPSHOT_PREFIX].
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// Target architecture: x64, x86_64, amd64, arm64 or aarch64 [default: the host's].
    #[arg(long, value_name = "ARCH")]
    architecture: Option<String>,
    /// SoC (canonicalised with the alias table) [default: none].
    #[arg(long, value_name = "SOC")]
    soc: Option<String>,
    /// Extra SoC aliases: a file of `alias = canonical` lines.
    #[arg(long, value_name = "FILE")]
    soc_aliases: Option<PathBuf>,
    /// Compiler image of a nested container build (wins over everything else; prefer
    /// image@sha256:<hex>).
    #[arg(long, value_name = "IMAGE")]
    toolchain_image: Option<String>,
    /// Host tool whose `--version` output is toolchain identity (repeatable), with the
    /// OS, libc and os-release digest.
    #[arg(long, value_name = "TOOL")]
    toolchain_tool: Vec<String>,
    /// Identify the --toolchain-tool tools by content too (the digest of the executable and,
    /// for a GCC-style driver, its back ends), so toolchains printing the same `--version`
    /// never share a namespace.
    #[arg(long)]
    toolchain_tool_content: bool,
    /// CANN metadata file [env: STRATA_CANN_METADATA; default:
    /// /usr/local/Ascend/ascend-toolkit/latest/<arch>-linux/ascend_toolkit_install.info].
    #[arg(long, value_name = "FILE")]
    cann_metadata: Option<PathBuf>,
    /// The os-release file whose SHA-256 is OS identity.
    #[arg(long, value_name = "FILE", default_value = "/etc/os-release")]
    os_release: PathBuf,
    /// Source tree whose tracked files give the source hash.
    #[arg(long, value_name = "DIR", default_value = ".")]
    source_root: PathBuf,
    /// git pathspec hashed under the source root (repeatable) [default: every tracked file].
    #[arg(long, value_name = "PATHSPEC")]
    source_path: Vec<std::ffi::OsString>,
    /// A path under the source root that must exist, else the tree is unsupported
    /// (repeatable).
    #[arg(long, value_name = "PATH")]
    require: Vec<PathBuf>,
    /// Use this source hash instead of running git (letters, digits, '.', '_').
    #[arg(long, value_name = "HASH")]
    source_hash: Option<String>,
    /// The cache directory to export (absolute) as STRATA_CACHE_ROOT with --github-output.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Print one JSON object (with the compatibility descriptor) instead of three lines.
    #[arg(long)]
    json: bool,
    /// Write outputs to $GITHUB_OUTPUT and variables to $GITHUB_ENV.
    #[arg(long)]
    github_output: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// Cache directory to restore into (replaced as a whole) [env: STRATA_CACHE_ROOT].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Primary key; empty means "no key" (a notice, nothing restored).
    #[arg(long, value_name = "KEY")]
    key: String,
    /// Prefix tried after the key's own prefixes, in order (repeatable).
    #[arg(long, value_name = "PREFIX")]
    restore_key: Vec<String>,
    /// Find the match and report it; download and change nothing.
    #[arg(long)]
    lookup_only: bool,
    /// Exit 1 when no snapshot was restored (a miss or a failure).
    #[arg(long)]
    fail_on_cache_miss: bool,
    #[command(flatten)]
    trust: super::TrustArgs,
    #[command(flatten)]
    common: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct SaveArgs {
    #[command(flatten)]
    digest: super::DigestArgs,
    /// Cache directory to save [env: STRATA_CACHE_ROOT].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Primary key; empty means "no key" (the save is skipped).
    #[arg(long, value_name = "KEY")]
    key: String,
    /// Compression: zstd (multi-threaded) or gzip.
    #[arg(long, value_name = "FORMAT", default_value = "zstd")]
    compression: Compression,
    /// Compression level: zstd -7..19 (negative: fast modes), gzip 1..9 [default: zstd 1,
    /// gzip 6]. `--level -3` and `--level=-3` both work.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    level: Option<i32>,
    /// zstd worker threads [default: one per CPU].
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: u32,
    #[command(flatten)]
    signing: super::SigningArgs,
    #[command(flatten)]
    common: StoreArgs,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
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
fn warn(gh: &Github, title: &str, message: &str) {
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

/// `--store`, else `STRATA_STORE`, else the default store (`strata::config`).
fn store_url(flag: Option<String>) -> Result<String, Failure> {
    strata::config::store_url(flag.as_deref()).map_err(Failure::of)
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
        SnapshotCommand::Key(args) => key(args),
        SnapshotCommand::Restore(args) => restore(args),
        SnapshotCommand::Save(args) => save(args),
        SnapshotCommand::Pack(args) => pack(args),
        SnapshotCommand::Unpack(args) => unpack(args),
    }
}

fn key(args: KeyArgs) -> Result<i32, Failure> {
    let gh = Github::from_env();
    check_github_output(&gh, args.github_output);
    let request = KeyRequest {
        prefix: non_empty(args.prefix)
            .or_else(|| env("STRATA_SNAPSHOT_PREFIX"))
            .unwrap_or_else(|| DEFAULT_PREFIX.to_owned()),
        architecture: non_empty(args.architecture).unwrap_or_else(snapshot::compat::host_machine),
        soc: non_empty(args.soc),
        soc_aliases: args.soc_aliases.filter(|p| !p.as_os_str().is_empty()),
        toolchain_image: non_empty(args.toolchain_image),
        toolchain_tools: args.toolchain_tool.into_iter().filter(|t| !t.trim().is_empty()).collect(),
        toolchain_tool_content: args.toolchain_tool_content,
        cann_metadata: args
            .cann_metadata
            .filter(|p| !p.as_os_str().is_empty())
            .or_else(|| env("STRATA_CANN_METADATA").map(PathBuf::from)),
        platform: PlatformFiles { os_release: args.os_release },
        source_root: args.source_root,
        source_paths: args.source_path.into_iter().filter(|p| !p.is_empty()).collect(),
        require: args.require.into_iter().filter(|p| !p.as_os_str().is_empty()).collect(),
        source_hash: non_empty(args.source_hash),
        run: RunContext { run_id: env("GITHUB_RUN_ID"), attempt: env("GITHUB_RUN_ATTEMPT") },
    };

    // Exports come first, even for an unsupported key (reference §1.8 step 2).
    let abs_cache = match args.cache_dir.filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => Some(
            strata::action::CacheRoot::new(&dir)
                .map_err(|e| usage("--cache-dir", e))?
                .path()
                .to_path_buf(),
        ),
        None => None,
    };
    let events = env("STRATA_EVENT_LOG").map(PathBuf::from).or_else(|| {
        let runner_temp = env("RUNNER_TEMP").map(PathBuf::from);
        let anchor = abs_cache.clone().or_else(|| runner_temp.clone())?;
        Some(event_log_path(runner_temp.as_deref(), &anchor, env("GITHUB_JOB").as_deref()))
    });
    if args.github_output {
        let mut vars = Vec::new();
        if let Some(dir) = &abs_cache {
            vars.push(("STRATA_CACHE_ROOT", dir.display().to_string()));
        }
        if let Some(log) = &events {
            vars.push(("STRATA_EVENT_LOG", log.display().to_string()));
        }
        github_write(&gh, gh.set_env(&vars));
    }

    let report = snapshot::compute_key(&request).map_err(Failure::of)?;
    for warning in &report.warnings {
        warn(&gh, "snapshot key", warning);
    }
    if let Some(reason) = &report.reason {
        warn(
            &gh,
            "snapshot key unavailable",
            &format!("{reason}; building without a persistent L1 snapshot"),
        );
    }
    if args.github_output {
        let keys = report.keys.as_ref();
        let field = |f: fn(&snapshot::Keys) -> &String| keys.map(f).cloned().unwrap_or_default();
        let outputs = vec![
            ("supported", report.supported.to_string()),
            ("primary-key", field(|k| &k.primary_key)),
            ("same-source-prefix", field(|k| &k.same_source_prefix)),
            ("compat-prefix", field(|k| &k.compat_prefix)),
            ("source-hash", field(|k| &k.source_hash)),
            ("compat-digest", field(|k| &k.compat_digest)),
            (
                "restore-keys",
                keys.map(|k| format!("{}\n{}", k.same_source_prefix, k.compat_prefix))
                    .unwrap_or_default(),
            ),
            ("cache-dir", abs_cache.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
            ("event-log", events.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
            ("reason", report.reason.clone().unwrap_or_default()),
        ];
        github_write(&gh, gh.set_outputs(&outputs));
    }
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["cache_dir"] = json!(abs_cache.as_deref().map(strata::fs::name::display_text));
        value["event_log"] = json!(events.as_deref().map(strata::fs::name::display_text));
        print_json(&value)?;
    } else if let Some(keys) = &report.keys {
        outln!("{}\n{}\n{}", keys.primary_key, keys.same_source_prefix, keys.compat_prefix)?;
    }
    Ok(0)
}

/// Opens the store, mapping configuration problems to usage errors. A `file://` store
/// reads no credentials at all. For an `s3://` store, a credential pair of which only one
/// half is set (a misnamed or empty secret) is a warning and is ignored: the other pair is
/// used if it is complete, else the requests are anonymous (a restore of a public bucket
/// still works; a save never gets here without a complete pair, it skips with
/// `no_writer_credentials`).
fn open(gh: &Github, title: &str, url: &str) -> Result<Box<dyn ObjectStore>, Failure> {
    let options = TransportOptions::from_env().map_err(Failure::of)?;
    let ignored = warn_incomplete_pairs(gh, title, url);
    let env = |name: &str| {
        if ignored.contains(&name) { None } else { std::env::var(name).ok() }
    };
    open_store_with_env(url, &options, env).map_err(Failure::of)
}

/// Warns about each credential pair of which only one half is set (for `s3://` stores) and
/// returns the variable names to ignore.
fn warn_incomplete_pairs(gh: &Github, title: &str, url: &str) -> Vec<&'static str> {
    let mut ignored: Vec<&'static str> = Vec::new();
    if let Ok(StoreUrl::S3(_)) = url.parse::<StoreUrl>() {
        for (set, missing) in incomplete_credential_pairs(&|name| std::env::var(name).ok()) {
            warn(
                gh,
                title,
                &format!(
                    "only {set} is set ({missing} is missing or empty; a misnamed secret?): \
                     ignoring this incomplete credential pair; the other pair is used if it \
                     is complete, else the store is accessed anonymously"
                ),
            );
            ignored.extend([set, missing]);
        }
    }
    ignored
}

fn seconds(value: f64) -> String {
    format!("{value:.1} s")
}

fn restore(args: RestoreArgs) -> Result<i32, Failure> {
    let gh = Github::from_env();
    check_github_output(&gh, args.common.github_output);
    let common = args.common;
    let literal_dir = cache_dir(args.cache_dir)?;
    let log_path = event_log(common.event_log);
    let events = EventLog::open(log_path.as_deref());
    let key_text = args.key.trim().to_owned();
    let restore_keys: Vec<String> = args
        .restore_key
        .iter()
        .flat_map(|k| k.lines())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect();

    // The absolute directory is exported whatever happens next (§7.1: the spelling never
    // enters the object name; later steps build into the absolute path).
    let abs_dir = strata::action::CacheRoot::new(&literal_dir)
        .map_err(|e| usage("--cache-dir", e))?
        .path()
        .to_path_buf();
    let write_github = |shown: &Shown<'_>| {
        if !common.github_output {
            return;
        }
        github_write(&gh, gh.set_env(&[("STRATA_CACHE_ROOT", abs_dir.display().to_string())]));
        let rejected_keys: Vec<&str> = shown.rejected.iter().map(|r| r.key.as_str()).collect();
        let outputs = vec![
            (
                "cache-hit",
                (shown.level == MatchLevel::Exact && shown.status == "restored").to_string(),
            ),
            ("cache-primary-key", key_text.clone()),
            ("cache-matched-key", shown.matched.to_owned()),
            ("matched-level", shown.level.as_str().to_owned()),
            ("status", shown.status.to_owned()),
            ("reason", shown.reason.to_owned()),
            ("rejected-keys", rejected_keys.join("\n")),
            ("cache-dir", literal_dir.display().to_string()),
            ("cache-dir-absolute", abs_dir.display().to_string()),
            ("bytes", shown.bytes.to_string()),
            ("seconds", format!("{:.3}", shown.seconds)),
        ];
        github_write(&gh, gh.set_outputs(&outputs));
        let mut rows = vec![
            ("key", key_text.clone(), true),
            ("matched key", shown.matched.to_owned(), true),
            ("matched level", shown.level.as_str().to_owned(), false),
            ("outcome", shown.status.to_owned(), false),
        ];
        if !shown.reason.is_empty() {
            rows.push(("reason", shown.reason.to_owned(), false));
        }
        for rejected in shown.rejected {
            rows.push((
                "rejected",
                format!("{} ({}): {}", rejected.key, rejected.level.as_str(), rejected.reason),
                false,
            ));
        }
        rows.push(("size", ci::human_bytes(shown.bytes), false));
        rows.push(("time", seconds(shown.seconds), false));
        if let Some(path) = &log_path
            && let Ok(counts) = EventCounts::read(path)
        {
            rows.push(("build cache results so far", counts.describe(), false));
        }
        github_write(&gh, gh.append_summary(&ci::summary_table("strata snapshot restore", &rows)));
    };

    if key_text.is_empty() {
        notice(
            &gh,
            "snapshot restore",
            "no key (key preparation was unsupported or skipped): nothing restored",
        );
        write_github(&Shown {
            status: "skipped",
            level: MatchLevel::None,
            matched: "",
            bytes: 0,
            seconds: 0.0,
            reason: "no key",
            rejected: &[],
        });
        if common.json {
            print_json(
                &json!({"status": "skipped", "reason": "no key", "cache_dir": strata::fs::name::display_text(&abs_dir)}),
            )?;
        }
        return Ok(if args.fail_on_cache_miss { EXIT_CACHE_FAILURE } else { 0 });
    }
    let key: SnapshotKey = key_text.parse().map_err(|e: snapshot::Error| Failure::of(e))?;
    let url = store_url(common.store)?;
    let store = open(&gh, "snapshot restore", &url)?;
    let mode = if args.lookup_only { LookupMode::LookupOnly } else { LookupMode::Restore };
    let request = RestoreRequest {
        store: store.as_ref(),
        cache_dir: literal_dir.clone(),
        key,
        restore_prefixes: restore_keys,
        mode,
        trust: args.trust.policy()?,
    };
    let result = snapshot::restore(&request);
    let (report, error) = match result {
        Ok(report) => (report, None),
        Err(failure) if failure.error.is_usage() => {
            return Err(Failure::usage(failure.error));
        }
        Err(failure) => {
            let failure = *failure;
            (failure.report, Some(failure.error))
        }
    };
    for note in &report.notes {
        warn(&gh, "snapshot restore", note);
    }
    // Every rejected candidate is reported with its key; the last one is the error itself
    // when nothing was restored.
    let shown_rejections = match &error {
        Some(e) if e.is_corrupt() => report.rejected.len().saturating_sub(1),
        _ => report.rejected.len(),
    };
    for rejected in report.rejected.iter().take(shown_rejections) {
        warn(
            &gh,
            "snapshot restore",
            &format!(
                "{} (found at level {}); trying the next candidate",
                rejected.reason,
                rejected.level.as_str()
            ),
        );
    }
    let matched = report.matched_key.clone().unwrap_or_default();
    let status = match (&error, report.level, report.restored) {
        (Some(_), _, _) => "error",
        (None, MatchLevel::None, _) => "miss",
        (None, _, true) => "restored",
        (None, _, false) => "found",
    };
    let reason = error.as_ref().map(|e| e.one_line()).unwrap_or_default();
    let rejected_keys: Vec<&str> = report.rejected.iter().map(|r| r.key.as_str()).collect();
    let mut fields: Vec<(&str, Value)> = vec![
        ("outcome", status.into()),
        ("level", report.level.as_str().into()),
        ("key", key_text.clone().into()),
        ("matched_key", matched.clone().into()),
        ("bytes", report.object_size_bytes.into()),
        ("ms", ((report.seconds * 1000.0) as u64).into()),
    ];
    if !rejected_keys.is_empty() {
        fields.push(("rejected", json!(rejected_keys)));
    }
    if let Some(e) = &error {
        fields.push(("message", e.one_line().into()));
        fields.push(("retries", report.retries.into()));
    }
    events.emit("snapshot_restore", &fields);
    write_github(&Shown {
        status,
        level: report.level,
        matched: &matched,
        bytes: report.object_size_bytes,
        seconds: report.seconds,
        reason: &reason,
        rejected: &report.rejected,
    });
    if let Some(e) = &error {
        let state = if e.is_refused() || args.lookup_only {
            format!("nothing was touched in {}", abs_dir.display())
        } else {
            format!(
                "the cache directory {} is unchanged; only its .updated marker was reset, \
                 as at the start of every restore",
                abs_dir.display()
            )
        };
        let found = if report.rejected.is_empty() {
            String::new()
        } else {
            format!(" (found at level {})", report.level.as_str())
        };
        warn(
            &gh,
            "snapshot restore",
            &format!("{}{found}; continuing without a restored snapshot ({state})", e.one_line()),
        );
    }
    if common.json {
        let mut value = serde_json::to_value(&report)?;
        value["status"] = json!(status);
        value["cache_hit"] = json!(report.level == MatchLevel::Exact && report.restored);
        value["store"] = json!(store.describe());
        if let Some(e) = &error {
            value["error"] = json!(e.one_line());
            value["retries"] = json!(report.retries);
        }
        print_json(&value)?;
    } else {
        let line = match status {
            "miss" => Some(format!(
                "strata: snapshot MISS key={key_text} (tried {} lookups in {})",
                report.tried.len(),
                store.describe()
            )),
            "found" => Some(format!(
                "strata: snapshot FOUND level={} key={matched} bytes={} (lookup only)",
                report.level.as_str(),
                report.object_size_bytes
            )),
            "restored" => Some(format!(
                "strata: snapshot RESTORED level={} key={matched} files={} bytes={} seconds={:.3} into {}",
                report.level.as_str(),
                report.file_count,
                report.object_size_bytes,
                report.seconds,
                report.cache_dir.display()
            )),
            _ => None,
        };
        if let Some(line) = line {
            errln!("{line}");
        }
    }
    if error.is_some() {
        return Ok(if common.strict || args.fail_on_cache_miss { EXIT_CACHE_FAILURE } else { 0 });
    }
    if report.level == MatchLevel::None && args.fail_on_cache_miss {
        errln!("strata: error: no snapshot matched {key_text} and --fail-on-cache-miss is set");
        return Ok(EXIT_CACHE_FAILURE);
    }
    Ok(0)
}

/// What the GitHub outputs and the step summary of a restore show.
struct Shown<'a> {
    status: &'a str,
    level: MatchLevel,
    matched: &'a str,
    bytes: u64,
    seconds: f64,
    /// Why nothing was restored (one line), empty otherwise.
    reason: &'a str,
    rejected: &'a [snapshot::restore::Rejected],
}

fn save(args: SaveArgs) -> Result<i32, Failure> {
    let gh = Github::from_env();
    check_github_output(&gh, args.common.github_output);
    let common = args.common;
    let literal_dir = cache_dir(args.cache_dir)?;
    let log_path = event_log(common.event_log);
    let events = EventLog::open(log_path.as_deref());
    let level = check_level(args.compression, args.level)?;
    let url = store_url(common.store)?;
    let writer_credentials = has_writer_credentials(&url, env);
    // Gates that need no store come first: a read-only consumer never opens it.
    let skip_reason = snapshot::save::local_gate(&literal_dir, Some(&args.key), writer_credentials)
        .map_err(Failure::of)?;
    let store = match skip_reason {
        None => Some(open(&gh, "snapshot save", &url)?),
        Some(snapshot::save::SkipReason::NoWriterCredentials) => {
            // A writer whose secret is misnamed looks like a read-only consumer: say so.
            warn_incomplete_pairs(&gh, "snapshot save", &url);
            None
        }
        Some(_) => None,
    };
    let signing_key = args.signing.load(&gh)?;
    let request = store.as_ref().map(|store| SaveRequest {
        signing_key: signing_key.as_ref(),
        store: store.as_ref(),
        cache_dir: literal_dir.clone(),
        key: Some(args.key.clone()),
        digest: args.digest.digest,
        writer_credentials,
        compression: args.compression,
        level,
        threads: args.threads,
        producer: Producer::from_env_with(env),
    });
    let counts = log_path.as_deref().map(EventCounts::read).and_then(Result::ok);
    let write_github = |status: &str, reason: &str, key: &str, bytes: u64, secs: f64| {
        if !common.github_output {
            return;
        }
        let outputs = vec![
            ("saved", (status == "saved").to_string()),
            ("status", status.to_owned()),
            ("reason", reason.to_owned()),
            ("key", key.to_owned()),
            ("bytes", bytes.to_string()),
            ("seconds", format!("{secs:.3}")),
        ];
        github_write(&gh, gh.set_outputs(&outputs));
        let mut rows = vec![
            ("key", key.to_owned(), true),
            (
                "outcome",
                if reason.is_empty() { status.to_owned() } else { format!("{status}: {reason}") },
                false,
            ),
            ("size", ci::human_bytes(bytes), false),
            ("time", seconds(secs), false),
        ];
        if let Some(counts) = &counts {
            rows.push(("build cache results", counts.describe(), false));
        }
        github_write(&gh, gh.append_summary(&ci::summary_table("strata snapshot save", &rows)));
    };
    let retried_before = store.as_ref().map_or(0, |s| s.retried_requests());
    let result = match &request {
        Some(request) => snapshot::save(request),
        None => {
            let reason = skip_reason.unwrap_or(SkipReason::NoKey);
            Ok(snapshot::save::skipped_report(&literal_dir, Some(&args.key), reason))
        }
    };
    // A failed save has no report: its retries are counted here (a report counts its own).
    let retries = store.as_ref().map_or(0, |s| {
        u32::try_from(s.retried_requests().saturating_sub(retried_before)).unwrap_or(u32::MAX)
    });
    let describe_store = || store.as_ref().map_or_else(|| redact_store_url(&url), |s| s.describe());
    match result {
        Ok(report) => {
            let key = report.key.clone().unwrap_or_default();
            let (status, reason) = match &report.outcome {
                SaveOutcome::Saved => ("saved", String::new()),
                SaveOutcome::Skipped { reason } => ("skipped", reason.describe().to_owned()),
            };
            events.emit(
                "snapshot_save",
                &[
                    ("outcome", status.into()),
                    (
                        "reason",
                        match &report.outcome {
                            SaveOutcome::Skipped { reason } => reason.as_str().into(),
                            SaveOutcome::Saved => Value::Null,
                        },
                    ),
                    ("key", key.clone().into()),
                    ("bytes", report.object_size_bytes.into()),
                    ("ms", ((report.seconds * 1000.0) as u64).into()),
                ],
            );
            for note in &report.notes {
                warn(&gh, "snapshot save", note);
            }
            write_github(status, &reason, &key, report.object_size_bytes, report.seconds);
            if common.json {
                let mut value = serde_json::to_value(&report)?;
                value["store"] = json!(describe_store());
                value["status"] = json!(status);
                if let SaveOutcome::Skipped { .. } = report.outcome {
                    value["message"] = json!(reason);
                }
                print_json(&value)?;
            } else if status == "saved" {
                errln!(
                    "strata: snapshot SAVED key={key} files={} bytes={} pack_seconds={:.3} upload_seconds={:.3} to {}",
                    report.file_count,
                    report.object_size_bytes,
                    report.pack_seconds,
                    report.upload_seconds,
                    describe_store()
                );
            }
            if status == "skipped" {
                let shown =
                    if key.is_empty() { reason.clone() } else { format!("{reason} (key {key})") };
                // A skip the producer must act on is a warning, the others are notices.
                let needs_action = matches!(
                    report.outcome,
                    SaveOutcome::Skipped { reason: SkipReason::TooCompressible }
                );
                if needs_action {
                    warn(&gh, "snapshot save skipped", &shown);
                } else {
                    notice(&gh, "snapshot save skipped", &shown);
                }
            }
            Ok(0)
        }
        Err(e) if e.is_usage() => Err(Failure::usage(e)),
        Err(e) => {
            let message =
                format!("{}; the build result stands, no snapshot was published", e.one_line());
            warn(&gh, "snapshot save", &message);
            events.emit(
                "snapshot_save",
                &[
                    ("outcome", "error".into()),
                    ("key", args.key.clone().into()),
                    ("message", e.one_line().into()),
                    ("retries", retries.into()),
                ],
            );
            write_github("error", &e.one_line(), &args.key, 0, 0.0);
            if common.json {
                // The same fields as a report where they apply, so `.status`,
                // `.outcome.status`, `.key` and `.store` read alike on every outcome.
                print_json(&json!({
                    "status": "error",
                    "outcome": {"status": "error"},
                    "error": e.one_line(),
                    "message": e.one_line(),
                    "key": args.key,
                    "cache_dir": literal_dir.display().to_string(),
                    "store": describe_store(),
                    "retries": retries,
                }))?;
            }
            Ok(if common.strict { EXIT_CACHE_FAILURE } else { 0 })
        }
    }
}

fn check_level(compression: Compression, level: Option<i32>) -> Result<i32, Failure> {
    let level = level.unwrap_or_else(|| compression.default_level());
    if !compression.levels().contains(&level) {
        return Err(usage(
            "--level",
            format!("{level} is outside {:?} for {compression}", compression.levels()),
        ));
    }
    Ok(level)
}

fn pack(args: PackArgs) -> Result<i32, Failure> {
    let level = check_level(args.compression, args.level)?;
    let options = snapshot::pack::PackOptions {
        digest: args.digest.digest,
        compression: args.compression,
        level,
        threads: args.threads,
        key: args.key,
        producer: Producer::from_env_with(env),
        parents: Vec::new(),
    };
    let started = std::time::Instant::now();
    let report = snapshot::pack::pack(&args.cache_dir, &args.output, &options)?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        print_json(&json!({
            "output": strata::fs::name::display_text(&args.output),
            "object_size_bytes": report.object_size_bytes,
            "object_digest": report.object_digest,
            "manifest_digest": report.manifest_digest,
            "file_count": report.manifest.file_count(),
            "file_bytes": report.manifest.file_bytes,
            "seconds": seconds,
            "warnings": report.warnings,
        }))?;
    } else {
        for warning in &report.warnings {
            errln!("strata: WARNING snapshot pack: {warning}");
        }
        errln!(
            "strata: snapshot PACKED files={} file_bytes={} bytes={} digest={} seconds={seconds:.3} into {}",
            report.manifest.file_count(),
            report.manifest.file_bytes,
            report.object_size_bytes,
            report.object_digest,
            args.output.display()
        );
    }
    Ok(0)
}

fn unpack(args: UnpackArgs) -> Result<i32, Failure> {
    let started = std::time::Instant::now();
    let report = snapshot::unpack::unpack_into_new(&args.input, &args.dest)?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        print_json(&json!({
            "dest": strata::fs::name::display_text(&args.dest),
            "key": report.manifest.key,
            "manifest_digest": report.manifest_digest,
            "file_count": report.files,
            "file_bytes": report.file_bytes,
            "seconds": seconds,
        }))?;
    } else {
        errln!(
            "strata: snapshot UNPACKED key={} files={} file_bytes={} seconds={seconds:.3} into {}",
            report.manifest.key,
            report.files,
            report.file_bytes,
            args.dest.display()
        );
    }
    Ok(0)
}
