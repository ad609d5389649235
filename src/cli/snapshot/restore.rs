//! `strata snapshot restore`: one library call ([`snapshot::restore`], classified by
//! [`RestoreOutcome`]), then warnings, GitHub outputs, the report and the exit code.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{
    EXIT_CACHE_FAILURE, StoreArgs, cache_dir, check_github_output, event_log, github_write, notice,
    print_json, seconds, store_url, usage, warn,
};
use crate::cli::Failure;
use crate::cli::output::errln;
use strata::ci::{self, EventCounts, Github};
use strata::l1::events::EventLog;
use strata::snapshot::restore::{LookupMode, Rejected};
use strata::snapshot::{
    self, MatchLevel, RestoreOutcome, RestoreRequest, RestoreStatus, SnapshotKey,
};
use strata::transport::{Capability, StoreUse};

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
    trust: crate::cli::TrustArgs,
    #[command(flatten)]
    common: StoreArgs,
}

/// Where a restore goes and what it reports against: the directory as given and made
/// absolute, the primary key, the event log.
struct Place {
    literal_dir: PathBuf,
    abs_dir: PathBuf,
    key_text: String,
    log_path: Option<PathBuf>,
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
    rejected: &'a [Rejected],
    /// The entry counts of an index snapshot restored.
    index: Option<&'a strata::snapshot::index::restore::IndexRestoreCounts>,
    /// The exact key restored whole ([`RestoreOutcome::cache_hit`]).
    cache_hit: bool,
}

pub(super) fn restore(args: RestoreArgs) -> Result<i32, Failure> {
    let gh = Github::from_env();
    check_github_output(&gh, args.common.github_output);
    let literal_dir = cache_dir(args.cache_dir.clone())?;
    // The absolute directory is exported whatever happens next (§7.1: the spelling never
    // enters the object name; later steps build into the absolute path).
    let abs_dir = strata::action::CacheRoot::new(&literal_dir)
        .map_err(|e| usage("--cache-dir", e))?
        .path()
        .to_path_buf();
    let place = Place {
        literal_dir,
        abs_dir,
        key_text: args.key.trim().to_owned(),
        log_path: event_log(args.common.event_log.clone()),
    };
    let events = EventLog::open(place.log_path.as_deref());
    if place.key_text.is_empty() {
        return no_key(&gh, &args, &place);
    }
    let key: SnapshotKey = place.key_text.parse().map_err(Failure::of)?;
    let url = store_url(args.common.store.clone())?;
    let restore_prefixes = restore_keys(&args.restore_key);
    // A restore by prefix lists the store: one that cannot is refused before anything.
    let usage = if restore_prefixes.is_empty() {
        StoreUse::core("snapshot restore")
    } else {
        StoreUse::needing(strata::snapshot::restore::RESTORE_KEY_PURPOSE, &[Capability::List])
    };
    let store = crate::cli::store::open(&gh, "snapshot restore", &url, &usage)?;
    let request = RestoreRequest {
        store: store.as_ref(),
        cache_dir: place.literal_dir.clone(),
        key,
        restore_prefixes,
        mode: if args.lookup_only { LookupMode::LookupOnly } else { LookupMode::Restore },
        trust: args.trust.policy()?,
        progress: &crate::cli::progress::Reporter::from_env(),
    };
    let outcome = RestoreOutcome::new(snapshot::restore(&request)).map_err(Failure::usage)?;
    warn_about_candidates(&gh, &outcome);
    outcome.emit(&events, &place.key_text);
    let matched = outcome.report.matched_key.clone().unwrap_or_default();
    write_github(&gh, &args, &place, &shown(&outcome, &matched, &outcome.reason()));
    warn_about_error(&gh, &args, &place, &outcome);
    print_outcome(&args, &place, &outcome, &store.describe())?;
    exit_code(&args, &place, &outcome)
}

/// `--restore-key` values, one per line (a value with newlines counts as several).
fn restore_keys(flags: &[String]) -> Vec<String> {
    flags
        .iter()
        .flat_map(|k| k.lines())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

/// An empty key: a notice, nothing restored.
fn no_key(gh: &Github, args: &RestoreArgs, place: &Place) -> Result<i32, Failure> {
    notice(
        gh,
        "snapshot restore",
        "no key (key preparation was unsupported or skipped): nothing restored",
    );
    let shown = Shown {
        status: RestoreStatus::Skipped.as_str(),
        level: MatchLevel::None,
        matched: "",
        bytes: 0,
        seconds: 0.0,
        reason: "no key",
        rejected: &[],
        index: None,
        cache_hit: false,
    };
    write_github(gh, args, place, &shown);
    if args.common.json {
        let dir = strata::fs::name::display_text(&place.abs_dir);
        print_json(&json!({"status": "skipped", "reason": "no key", "cache_dir": dir}))?;
    }
    Ok(if args.fail_on_cache_miss { EXIT_CACHE_FAILURE } else { 0 })
}

fn shown<'a>(outcome: &'a RestoreOutcome, matched: &'a str, reason: &'a str) -> Shown<'a> {
    Shown {
        status: outcome.status().as_str(),
        level: outcome.report.level,
        matched,
        bytes: outcome.report.object_size_bytes,
        seconds: outcome.report.seconds,
        reason,
        rejected: &outcome.report.rejected,
        index: outcome.report.index.as_ref(),
        cache_hit: outcome.cache_hit(),
    }
}

/// The notes of a restore and the candidates it passed over.
fn warn_about_candidates(gh: &Github, outcome: &RestoreOutcome) {
    for note in &outcome.report.notes {
        warn(gh, "snapshot restore", note);
    }
    // Snapshots not signed by a trusted key can be many (anyone with write access can
    // add them): the first few are warned one by one, the rest counted.
    const UNTRUSTED_WARNED: usize = 3;
    let mut untrusted = 0;
    for rejected in outcome.rejections_to_warn() {
        if rejected.untrusted {
            untrusted += 1;
            if untrusted > UNTRUSTED_WARNED {
                continue;
            }
        }
        let level = rejected.level.as_str();
        let message =
            format!("{} (found at level {level}); trying the next candidate", rejected.reason);
        warn(gh, "snapshot restore", &message);
    }
    if untrusted > UNTRUSTED_WARNED {
        let more = untrusted - UNTRUSTED_WARNED;
        let message = format!(
            "and {more} more snapshot(s) not signed by a trusted key were passed over (each \
             cost one read of its sidecar; rejected-keys lists them)"
        );
        warn(gh, "snapshot restore", &message);
    }
}

/// Why nothing was restored, and what that left in the cache directory.
fn warn_about_error(gh: &Github, args: &RestoreArgs, place: &Place, outcome: &RestoreOutcome) {
    let report = &outcome.report;
    let Some(e) = &outcome.error else { return };
    let abs_dir = place.abs_dir.display();
    let state = if e.is_refused() || args.lookup_only {
        format!("nothing was touched in {abs_dir}")
    } else if strata::fs::symlink_metadata_opt(&place.abs_dir).ok().flatten().is_none() {
        format!("the cache directory {abs_dir} does not exist and was not created")
    } else {
        format!(
            "the cache directory {abs_dir} is unchanged; only its .updated marker was reset, \
             as at the start of every restore"
        )
    };
    let found = if report.rejected.is_empty() {
        String::new()
    } else {
        format!(" (found at level {})", report.level.as_str())
    };
    let message =
        format!("{}{found}; continuing without a restored snapshot ({state})", e.one_line());
    warn(gh, "snapshot restore", &message);
}

/// With `--github-output`: `STRATA_CACHE_ROOT`, the step outputs and the summary table.
fn write_github(gh: &Github, args: &RestoreArgs, place: &Place, shown: &Shown<'_>) {
    if !args.common.github_output {
        return;
    }
    let abs_dir = place.abs_dir.display().to_string();
    github_write(gh, gh.set_env(&[("STRATA_CACHE_ROOT", abs_dir.clone())]));
    let rejected_keys: Vec<&str> = shown.rejected.iter().map(|r| r.key.as_str()).collect();
    let cache_hit = shown.cache_hit;
    let outputs = vec![
        ("cache-hit", cache_hit.to_string()),
        ("cache-primary-key", place.key_text.clone()),
        ("cache-matched-key", shown.matched.to_owned()),
        ("matched-level", shown.level.as_str().to_owned()),
        ("status", shown.status.to_owned()),
        ("reason", shown.reason.to_owned()),
        ("rejected-keys", rejected_keys.join("\n")),
        ("cache-dir", place.literal_dir.display().to_string()),
        ("cache-dir-absolute", abs_dir),
        ("bytes", shown.bytes.to_string()),
        ("seconds", format!("{:.3}", shown.seconds)),
    ];
    github_write(gh, gh.set_outputs(&outputs));
    let mut rows = vec![
        ("key", place.key_text.clone(), true),
        ("matched key", shown.matched.to_owned(), true),
        ("matched level", shown.level.as_str().to_owned(), false),
        ("outcome", shown.status.to_owned(), false),
    ];
    if !shown.reason.is_empty() {
        rows.push(("reason", shown.reason.to_owned(), false));
    }
    for rejected in shown.rejected {
        let text = format!("{} ({}): {}", rejected.key, rejected.level.as_str(), rejected.reason);
        rows.push(("rejected", text, false));
    }
    rows.push(("size", ci::human_bytes(shown.bytes), false));
    if let Some(c) = shown.index {
        let text = format!(
            "{} in the index: {} present, {} fetched ({}), {} skipped",
            c.entries,
            c.present,
            c.fetched,
            ci::human_bytes(c.bytes_downloaded),
            c.failed
        );
        rows.push(("entries", text, false));
    }
    rows.push(("time", seconds(shown.seconds), false));
    if let Some(path) = &place.log_path
        && let Ok(counts) = EventCounts::read(path)
    {
        rows.push(("build cache results so far", counts.describe(), false));
    }
    github_write(gh, gh.append_summary(&ci::summary_table("strata snapshot restore", &rows)));
}

/// The result: one JSON object with `--json`, else one line on stderr.
fn print_outcome(
    args: &RestoreArgs,
    place: &Place,
    outcome: &RestoreOutcome,
    store: &str,
) -> Result<(), Failure> {
    let report = &outcome.report;
    let status = outcome.status();
    if args.common.json {
        let mut value = serde_json::to_value(report)?;
        value["status"] = json!(status.as_str());
        value["cache_hit"] = json!(outcome.cache_hit());
        value["store"] = json!(store);
        // A lookup or a miss reads no sidecar: the kind is not known, and is not guessed.
        if !matches!(status, RestoreStatus::Restored | RestoreStatus::Partial) {
            value["kind"] = serde_json::Value::Null;
        }
        if let Some(e) = &outcome.error {
            value["error"] = json!(e.one_line());
            value["retries"] = json!(report.retries);
        }
        return print_json(&value);
    }
    let matched = report.matched_key.as_deref().unwrap_or_default();
    let level = report.level.as_str();
    let line = match status {
        RestoreStatus::Miss => format!(
            "strata: snapshot MISS key={} (tried {} lookups in {store})",
            place.key_text,
            report.tried.len(),
        ),
        RestoreStatus::Found => format!(
            "strata: snapshot FOUND level={level} key={matched} bytes={} (lookup only)",
            report.object_size_bytes
        ),
        RestoreStatus::Restored | RestoreStatus::Partial => format!(
            "strata: snapshot {} level={level} key={matched} kind={}{} files={} bytes={} seconds={:.3} into {}",
            if status == RestoreStatus::Partial { "PARTIAL" } else { "RESTORED" },
            report.kind.as_str(),
            report.index.as_ref().map_or_else(String::new, |c| format!(
                " entries={} present={} fetched={} failed={} bytes_downloaded={}",
                c.entries, c.present, c.fetched, c.failed, c.bytes_downloaded
            )),
            report.file_count,
            report.object_size_bytes,
            report.seconds,
            report.cache_dir.display()
        ),
        RestoreStatus::Skipped | RestoreStatus::Error => return Ok(()),
    };
    errln!("{line}");
    Ok(())
}

/// 0, or 1 for an error with `--strict` or `--fail-on-cache-miss`, or a miss with
/// `--fail-on-cache-miss`.
fn exit_code(args: &RestoreArgs, place: &Place, outcome: &RestoreOutcome) -> Result<i32, Failure> {
    if outcome.error.is_some() {
        let fail = args.common.strict || args.fail_on_cache_miss;
        return Ok(if fail { EXIT_CACHE_FAILURE } else { 0 });
    }
    if outcome.report.level == MatchLevel::None && args.fail_on_cache_miss {
        let key = &place.key_text;
        errln!("strata: error: no snapshot matched {key} and --fail-on-cache-miss is set");
        return Ok(EXIT_CACHE_FAILURE);
    }
    Ok(0)
}
