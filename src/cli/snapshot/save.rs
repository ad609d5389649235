//! `strata snapshot save`: the gates that need no store, one library call
//! ([`snapshot::save`], ended as a [`SaveEnd`]), then warnings, GitHub outputs, the report
//! and the exit code.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{
    EXIT_CACHE_FAILURE, StoreArgs, cache_dir, check_github_output, env, event_log, github_write,
    notice, print_json, seconds, warn,
};
use crate::cli::Failure;
use crate::cli::output::errln;
use crate::cli::store::{open, warn_incomplete_credentials};
use strata::ci::{self, EventCounts, Github};
use strata::l1::events::EventLog;
use strata::snapshot::index::GuardPolicy;
use strata::snapshot::manifest::SnapshotKind;
use strata::snapshot::{self, Producer, SaveEnd, SaveOutcome, SaveReport, SaveRequest, SkipReason};
use strata::transport::{StoreUrl, StoreUse, redact_store_url};

#[derive(Debug, Args)]
pub(crate) struct SaveArgs {
    #[command(flatten)]
    digest: crate::cli::DigestArgs,
    /// Cache directory to save [env: STRATA_CACHE_ROOT].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Primary key; empty means "no key" (the save is skipped).
    #[arg(long, value_name = "KEY")]
    key: String,
    /// Snapshot format: `index` (entry objects, only new ones uploaded, plus a small index)
    /// or `full` (the whole cache as one object) [env: STRATA_SNAPSHOT_FORMAT; default:
    /// index].
    #[arg(long, value_name = "FORMAT", value_parser = ["index", "full"])]
    format: Option<String>,
    #[command(flatten)]
    packing: super::PackingArgs,
    #[command(flatten)]
    signing: crate::cli::SigningArgs,
    #[command(flatten)]
    common: StoreArgs,
}

pub(super) fn save(args: SaveArgs) -> Result<i32, Failure> {
    let gh = Github::from_env();
    check_github_output(&gh, args.common.github_output);
    let literal_dir = cache_dir(args.cache_dir.clone())?;
    let log_path = event_log(args.common.event_log.clone());
    let events = EventLog::open(log_path.as_deref());
    let level = args.packing.level()?;
    let format = snapshot_format(args.format.as_deref())?;
    let guard = GuardPolicy::from_env(env).map_err(Failure::usage)?;
    let text = strata::config::store_url(args.common.store.as_deref()).map_err(Failure::of)?;
    // A malformed URL is refused when the store is needed: a save that skips for another
    // reason first (no key, nothing new) does not need it.
    let url: Result<StoreUrl, _> = text.parse();
    let writer_credentials = url.as_ref().map_or(true, |u| u.has_writer_credentials(&env));
    // Gates that need no store come first: a read-only consumer never opens it.
    let skip_reason = snapshot::save::local_gate(&literal_dir, Some(&args.key), writer_credentials)
        .map_err(Failure::of)?;
    let hint = url.as_ref().ok().and_then(StoreUrl::writer_credentials_hint);
    let store = match skip_reason {
        None => {
            let url = url.map_err(Failure::of)?;
            Some(open(&gh, "snapshot save", &url, &StoreUse::core("snapshot save"))?)
        }
        Some(SkipReason::NoWriterCredentials) => {
            // A writer whose secret is misnamed looks like a read-only consumer: say so.
            if let Ok(url) = &url {
                warn_incomplete_credentials(&gh, "snapshot save", url);
            }
            None
        }
        Some(_) => None,
    };
    let signing_key = args.signing.load(&gh)?;
    // The build's results so far, read before this save adds its own event.
    let counts = log_path.as_deref().map(EventCounts::read).and_then(Result::ok);
    let end = match &store {
        Some(store) => {
            let reporter = crate::cli::progress::Reporter::from_env();
            let request = SaveRequest {
                progress: &reporter,
                signing_key: signing_key.as_ref(),
                store: store.as_ref(),
                cache_dir: literal_dir.clone(),
                key: Some(args.key.clone()),
                digest: args.digest.digest,
                format,
                writer_credentials,
                compression: args.packing.compression,
                level,
                threads: args.packing.threads,
                producer: Producer::from_env_with(env),
                guard,
            };
            save_to(&request, &args.key)?
        }
        None => {
            let reason = skip_reason.unwrap_or(SkipReason::NoKey);
            let report = snapshot::save::skipped_report(&literal_dir, Some(&args.key), reason);
            SaveEnd::Report(SaveReport { kind: format, ..report })
        }
    };
    end.emit(&events);
    let store = store.as_ref().map_or_else(|| redact_store_url(&text), |s| s.describe());
    let shown = Shown { store: &store, literal_dir: &literal_dir, counts: counts.as_ref(), hint };
    match &end {
        SaveEnd::Report(report) => saved_or_skipped(&gh, &args, &end, report, &shown),
        SaveEnd::Failed { error, retries, .. } => failed(&gh, &args, error, *retries, &shown),
    }
}

/// The format from `--format`, else `STRATA_SNAPSHOT_FORMAT`, else `index`.
fn snapshot_format(flag: Option<&str>) -> Result<SnapshotKind, Failure> {
    let text = flag.map(str::to_owned).or_else(|| env("STRATA_SNAPSHOT_FORMAT"));
    match text.as_deref().map(str::trim) {
        None | Some("index") => Ok(SnapshotKind::Index),
        Some("full") => Ok(SnapshotKind::Full),
        Some(other) => Err(super::usage(
            "STRATA_SNAPSHOT_FORMAT",
            format!("{other:?} (expected index or full)"),
        )),
    }
}

/// Runs the save; a failure other than a usage error is an outcome ([`SaveEnd::Failed`])
/// with the requests the transport retried for it.
fn save_to(request: &SaveRequest<'_>, key: &str) -> Result<SaveEnd, Failure> {
    let retried_before = request.store.retried_requests();
    match snapshot::save(request) {
        Ok(report) => Ok(SaveEnd::Report(report)),
        Err(e) if e.is_usage() => Err(Failure::usage(e)),
        Err(error) => {
            let retried = request.store.retried_requests().saturating_sub(retried_before);
            let retries = u32::try_from(retried).unwrap_or(u32::MAX);
            Ok(SaveEnd::Failed { error, key: key.to_owned(), retries })
        }
    }
}

/// What every report of a save names besides the outcome.
struct Shown<'a> {
    /// The store, without secrets.
    store: &'a str,
    /// The cache directory as given.
    literal_dir: &'a std::path::Path,
    /// The build's cache results so far (from the event log).
    counts: Option<&'a EventCounts>,
    /// The variables a writer of the store sets (for a `no_writer_credentials` skip).
    hint: Option<&'static str>,
}

fn saved_or_skipped(
    gh: &Github,
    args: &SaveArgs,
    end: &SaveEnd,
    report: &SaveReport,
    shown: &Shown<'_>,
) -> Result<i32, Failure> {
    let key = report.key.clone().unwrap_or_default();
    let (status, reason) = (end.status(), end.reason());
    for note in &report.notes {
        warn(gh, "snapshot save", note);
    }
    let figures = Figures { bytes: report.object_size_bytes, seconds: report.seconds };
    write_github(gh, args, shown, (status, &reason, &key), figures, Some(report));
    if args.common.json {
        let mut value = serde_json::to_value(report)?;
        value["store"] = json!(shown.store);
        value["status"] = json!(status);
        if let SaveOutcome::Skipped { .. } = report.outcome {
            value["message"] = json!(reason);
            value["reason"] = json!(reason);
        }
        print_json(&value)?;
    } else if let SaveOutcome::Saved = report.outcome {
        errln!(
            "strata: snapshot SAVED key={key} kind={}{} files={} bytes={} pack_seconds={:.3} upload_seconds={:.3} to {}",
            report.kind.as_str(),
            index_counts(report),
            report.file_count,
            report.object_size_bytes,
            report.pack_seconds,
            report.upload_seconds,
            shown.store
        );
    }
    if let SaveOutcome::Skipped { reason: why } = report.outcome {
        let reason = match (why, shown.hint) {
            (SkipReason::NoWriterCredentials, Some(hint)) => format!("{reason} (set {hint})"),
            _ => reason.clone(),
        };
        let text = if key.is_empty() { reason.clone() } else { format!("{reason} (key {key})") };
        // A skip the producer must act on is a warning, the others are notices.
        if why == SkipReason::TooCompressible {
            warn(gh, "snapshot save skipped", &text);
        } else {
            notice(gh, "snapshot save skipped", &text);
        }
    }
    Ok(0)
}

fn failed(
    gh: &Github,
    args: &SaveArgs,
    error: &snapshot::Error,
    retries: u32,
    shown: &Shown<'_>,
) -> Result<i32, Failure> {
    let message =
        format!("{}; the build result stands, no snapshot was published", error.one_line());
    warn(gh, "snapshot save", &message);
    let figures = Figures { bytes: 0, seconds: 0.0 };
    write_github(gh, args, shown, ("error", &error.one_line(), &args.key), figures, None);
    if args.common.json {
        // The same fields as a report where they apply, so `.status`, `.outcome.status`,
        // `.key` and `.store` read alike on every outcome.
        print_json(&json!({
            "status": "error",
            "outcome": {"status": "error"},
            "error": error.one_line(),
            "message": error.one_line(),
            "reason": error.one_line(),
            "kind": snapshot_format(args.format.as_deref()).map_or("", |k| k.as_str()),
            "key": args.key,
            "cache_dir": shown.literal_dir.display().to_string(),
            "store": shown.store,
            "retries": retries,
        }))?;
    }
    Ok(if args.common.strict { EXIT_CACHE_FAILURE } else { 0 })
}

/// The size and time a save's outputs show.
#[derive(Clone, Copy)]
struct Figures {
    bytes: u64,
    seconds: f64,
}

/// With `--github-output`: the step outputs and the summary table. `outcome` is the
/// status, the reason and the key.
fn write_github(
    gh: &Github,
    args: &SaveArgs,
    shown: &Shown<'_>,
    outcome: (&str, &str, &str),
    figures: Figures,
    report: Option<&SaveReport>,
) {
    if !args.common.github_output {
        return;
    }
    let (status, reason, key) = outcome;
    let mut outputs = vec![
        ("saved", (status == "saved").to_string()),
        ("status", status.to_owned()),
        ("reason", reason.to_owned()),
        ("key", key.to_owned()),
        ("bytes", figures.bytes.to_string()),
        ("seconds", format!("{:.3}", figures.seconds)),
    ];
    if let Some(report) = report {
        outputs.push(("kind", report.kind.as_str().to_owned()));
    }
    github_write(gh, gh.set_outputs(&outputs));
    let outcome = if reason.is_empty() { status.to_owned() } else { format!("{status}: {reason}") };
    let mut rows = vec![
        ("key", key.to_owned(), true),
        ("outcome", outcome, false),
        ("size", ci::human_bytes(figures.bytes), false),
        ("time", seconds(figures.seconds), false),
    ];
    if let Some(counts) = report.and_then(|r| r.index.as_ref()) {
        rows.push(("format", "index".to_owned(), false));
        rows.push((
            "entries",
            format!(
                "{} ({} reused, {} new; {} uploaded in {} object(s))",
                counts.entries,
                counts.reused,
                counts.new,
                ci::human_bytes(counts.bytes_uploaded),
                counts.objects_uploaded
            ),
            false,
        ));
    }
    if let Some(counts) = shown.counts {
        rows.push(("build cache results", counts.describe(), false));
    }
    rows.push(("hit rate per domain", hit_rates(shown.literal_dir), false));
    github_write(gh, gh.append_summary(&ci::summary_table("strata snapshot save", &rows)));
}

/// ` entries=N reused=N new=N objects_uploaded=N bytes_uploaded=N` for an index save,
/// empty otherwise.
fn index_counts(report: &SaveReport) -> String {
    report.index.as_ref().map_or_else(String::new, |c| {
        format!(
            " entries={} reused={} new={} objects_uploaded={} bytes_uploaded={} not_carried={}",
            c.entries, c.reused, c.new, c.objects_uploaded, c.bytes_uploaded, c.not_carried
        )
    })
}

/// The cache directory's hits / lookups and hit rate per domain, for the step summary
/// (`strata::l1::counters::summary`).
fn hit_rates(cache_dir: &std::path::Path) -> String {
    match strata::l1::layout::CacheRoot::new(cache_dir) {
        Ok(cache) => strata::l1::counters::summary(&strata::l1::counters::read(&cache)),
        Err(_) => "no hits or misses counted".to_owned(),
    }
}
