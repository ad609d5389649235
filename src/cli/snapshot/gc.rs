//! `strata snapshot gc`: store garbage collection ([`strata::snapshot::gc`]): flags, the
//! writer-credential check, one library call, then the report (text on stderr, or one
//! JSON object on stdout) and the exit code: 0 when done, dry run or busy; 1 when the
//! store failed or a deletion failed; 2 for usage errors.

use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::{env, print_json, store_url, usage, warn};
use crate::cli::Failure;
use crate::cli::exit;
use crate::cli::output::errln;
use strata::ci::{Github, human_bytes};
use strata::snapshot::Producer;
use strata::snapshot::gc::{
    Class, DEFAULT_GRACE, GcReport, GcRequest, GcStatus, Mode, PURPOSE, gc as run_gc,
};
use strata::snapshot::index::lease::POLL;
use strata::transport::{Capability, StoreUse};

#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// Object store URL: file:///abs/dir or s3://bucket/prefix?endpoint=…&region=… (an
    /// http(s):// store cannot list or delete, so it cannot be collected) [env:
    /// STRATA_STORE; default: file://$XDG_CACHE_HOME/strata/store]
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Snapshots kept per namespace (compatibility prefix), newest first by the time in
    /// their key.
    #[arg(long, value_name = "N")]
    keep: usize,
    /// Prune only keys starting with this (e.g. `strata-l1` or a compatibility prefix);
    /// entry objects are collected store-wide either way.
    #[arg(long, value_name = "P")]
    prefix: Option<String>,
    /// Nothing younger is deleted from ~entries/ and ~refs/: `90s`, `30m`, `2h`, `1d` or
    /// seconds [default: 1h].
    #[arg(long, value_name = "DURATION")]
    grace: Option<String>,
    /// Wait up to this many seconds for running saves instead of reporting busy at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    wait: u64,
    /// List what would be deleted; delete nothing, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// `90s`, `30m`, `2h`, `1d` or a bare number of seconds.
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    let value: u64 = number.parse().ok()?;
    Some(Duration::from_secs(value.checked_mul(factor)?))
}

pub(super) fn gc(args: GcArgs) -> Result<i32, Failure> {
    let gh = Github::from_env();
    let grace = match &args.grace {
        Some(text) => parse_duration(text).ok_or_else(|| {
            usage("--grace", format!("{text:?} is not a duration (e.g. 90s, 30m, 2h, 1d)"))
        })?,
        None => DEFAULT_GRACE,
    };
    let url = store_url(args.store.clone())?;
    let mode = if args.dry_run { Mode::DryRun } else { Mode::Delete };
    // What a gc needs of the store is checked first: an HTTP cache server can neither list
    // nor delete, whatever the credentials.
    let usage = match mode {
        Mode::Delete => StoreUse::needing(PURPOSE, &[Capability::List, Capability::Delete]),
        Mode::DryRun => StoreUse::needing(PURPOSE, &[Capability::List]),
    };
    url.check_use(&usage).map_err(Failure::of)?;
    if mode == Mode::Delete && !url.has_writer_credentials(&env) {
        return Err(Failure::from(anyhow::anyhow!(
            "snapshot gc deletes from {url}, which needs writer credentials ({}); set them, or \
             use --dry-run to only list what would go",
            url.writer_credentials_hint().unwrap_or("none are known for this store")
        )));
    }
    let store = crate::cli::store::open(&gh, "snapshot gc", &url, &usage)?;
    let request = GcRequest {
        store: store.as_ref(),
        keep: args.keep,
        prefix: args.prefix.clone().filter(|p| !p.trim().is_empty()),
        grace,
        mode,
        wait: Duration::from_secs(args.wait),
        poll: POLL,
        holder: Producer::from_env_with(env),
    };
    let report = run_gc(&request)
        .map_err(|e| if e.is_usage() { Failure::usage(e) } else { Failure::of(e) })?;
    for warning in &report.warnings {
        warn(&gh, "snapshot gc", warning);
    }
    for (name, error) in &report.failures {
        warn(&gh, "snapshot gc", &format!("could not delete {name}: {error}"));
    }
    let described = store.describe();
    if args.json {
        print_json(&to_json(&report, &described))?;
    } else {
        print_text(&report, &described)?;
    }
    Ok(if report.failures.is_empty() { 0 } else { exit::FAILURE })
}

/// The counts per class, as (JSON field, text label, class).
const CLASSES: [(&str, &str, Class); 5] = [
    ("sidecars", "sidecars", Class::Sidecar),
    ("snapshot_objects", "snapshot objects", Class::SnapshotObject),
    ("entry_objects", "entry objects", Class::EntryObject),
    ("refs", "refs", Class::Ref),
    ("leases", "stale leases", Class::Lease),
];

fn to_json(report: &GcReport, store: &str) -> serde_json::Value {
    let counts: serde_json::Map<String, serde_json::Value> = CLASSES
        .iter()
        .map(|(field, _, class)| ((*field).to_owned(), json!(report.count(*class))))
        .collect();
    json!({
        "status": report.status,
        "store": store,
        "busy_leases": report.busy_leases,
        "deleted": counts,
        "bytes_freed": report.bytes_freed(),
        "entry_objects_referenced": report.entry_objects_referenced,
        "entry_objects_young": report.entry_objects_young,
        "sweep_skipped": report.sweep_skipped,
        "namespaces": report.namespaces,
        "deletions": report.deletions,
        "warnings": report.warnings,
        "failures": report.failures.iter().map(|(n, e)| json!({"name": n, "error": e})).collect::<Vec<_>>(),
    })
}

fn print_text(report: &GcReport, store: &str) -> Result<(), Failure> {
    if report.status == GcStatus::Busy {
        errln!(
            "strata: snapshot gc BUSY: a save (or another gc) holds a lease in {store} ({}); \
             nothing was deleted. Run again later, or wait with --wait SECONDS",
            report.busy_leases.join(", ")
        );
        return Ok(());
    }
    let dry = report.status == GcStatus::DryRun;
    let (verb, freed) = if dry { ("would delete", "to free") } else { ("deleted", "freed") };
    for deletion in &report.deletions {
        errln!("  {verb} {} ({} bytes)", deletion.name, deletion.size_bytes);
    }
    let counts: Vec<String> = CLASSES
        .iter()
        .map(|(_, label, class)| format!("{} {label}", report.count(*class)))
        .collect();
    errln!(
        "strata: snapshot gc {}: {verb} {}; {} {freed}; kept {} referenced and {} young entry \
         objects{} in {store}",
        if dry { "DRY RUN" } else { "DONE" },
        counts.join(", "),
        human_bytes(report.bytes_freed()),
        report.entry_objects_referenced,
        report.entry_objects_young,
        if report.sweep_skipped { " (sweep skipped: see the warnings)" } else { "" },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("0s"), Some(Duration::ZERO));
        for bad in ["", "h", "1x", "-1s", "1.5h", "99999999999999999999d"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
