//! `strata artifact lookup`, `materialize`, `verify` and `gc`: reading and checking slots.

use std::path::Path;

use serde_json::{Value, json};

use super::args::{IdArgs, OptionalIdArgs, StoreArgs};
use super::{print, shown};
use crate::cli::Failure;
use crate::cli::exit::ExitCode;
use strata::artifact::{
    self, ArtifactKey, ArtifactSpec, ArtifactStore, Lookup, LookupStatus, Mode, StoreOptions,
};

/// `strata artifact lookup`: exit 0 HIT, 3 MISS, 4 INVALID, 5 STORAGE_ERROR.
pub(super) fn lookup(store: &StoreArgs, id: &IdArgs, json: bool) -> Result<i32, Failure> {
    let (key, spec) = (id.key()?, id.spec()?);
    let lookup = store.open(None)?.lookup(&key, &spec);
    print(json, &lookup_json(&lookup, &key, &spec), &lookup_text(&lookup, &key))?;
    Ok(lookup.status().exit_code())
}

/// `strata artifact materialize`: a verified copy of a HIT; exit 3/4/5 otherwise.
pub(super) fn materialize(
    store: &StoreArgs,
    id: &IdArgs,
    dest: &Path,
    json: bool,
) -> Result<i32, Failure> {
    let (key, spec) = (id.key()?, id.spec()?);
    let store = store.open(None)?;
    let dest = store.destination(dest).map_err(Failure::of)?;
    let lookup = store.lookup(&key, &spec);
    let Lookup::Hit(handle) = &lookup else {
        print(json, &lookup_json(&lookup, &key, &spec), &lookup_text(&lookup, &key))?;
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
    print(json, &value, &text)?;
    Ok(0)
}

/// `strata artifact verify`: one slot (`repeat` times with one handle) or every slot.
pub(super) fn verify(
    root: &Path,
    all: bool,
    repeat: u32,
    id: &OptionalIdArgs,
    json: bool,
) -> Result<i32, Failure> {
    let options = StoreOptions { mode: Mode::ReadOnly, ..StoreOptions::default() };
    let store = ArtifactStore::open(root, options).map_err(Failure::of)?;
    if all {
        return verify_all(&store, json);
    }
    let (key, spec) = id.key_and_spec()?;
    let start = std::time::Instant::now();
    let lookup = store.lookup(&key, &spec);
    let mut passes = vec![json!({"seconds": start.elapsed().as_secs_f64(),
        "hashed_bytes": lookup.handle().map(|h| h.manifest().total_bytes())})];
    let mut text = lookup_text(&lookup, &key);
    let mut value = lookup_json(&lookup, &key, &spec);
    let mut code = lookup.status().exit_code();
    let again = lookup.handle().map(|h| h.verify_passes(repeat.max(1) - 1)).unwrap_or_default();
    for (pass, again) in (2..).zip(again) {
        let seconds = again.elapsed.as_secs_f64();
        if let Some(report) = again.report {
            text.push_str(&format!(
                "\nstrata: re-verified in {seconds:.4}s, hashed {} of {} bytes",
                report.hashed_bytes, report.total_bytes
            ));
            passes.push(json!({"seconds": seconds, "hashed_bytes": report.hashed_bytes}));
            continue;
        }
        // Reported like the same problem found by the first pass.
        let status = again.status.as_str();
        let reason = again.reason.unwrap_or_default();
        passes.push(json!({"seconds": seconds, "hashed_bytes": null, "status": status}));
        text.push_str(&format!(
            "\nstrata: {} key={} pass={pass} reason={reason}",
            status.to_uppercase(),
            key.digest(),
        ));
        value["status"] = json!(status);
        value["reason"] = json!(reason);
        value["dir"] = Value::Null;
        value["manifest_digest"] = Value::Null;
        value["failed_pass"] = json!(pass);
        code = again.status.exit_code();
    }
    value["passes"] = json!(passes);
    print(json, &value, &text)?;
    Ok(code)
}

/// `strata artifact verify --all`: exit 4 if a slot is INVALID, 5 if one is unreadable.
fn verify_all(store: &ArtifactStore, json: bool) -> Result<i32, Failure> {
    let reports = artifact::verify_all(store.root()).map_err(Failure::of)?;
    let mut text = String::new();
    let mut code = 0;
    for r in &reports {
        text.push_str(&format!("{} {}", r.status, r.path.display()));
        if let Some(reason) = &r.reason {
            text.push_str(&format!(" ({reason})"));
        }
        text.push('\n');
        code = code.max(r.lookup_status().exit_code());
    }
    let valid = reports.iter().filter(|r| r.lookup_status() == LookupStatus::Hit).count();
    text.push_str(&format!("strata: {valid} of {} slot(s) valid", reports.len()));
    print(json, &json!({"slots": reports, "valid": valid}), &text)?;
    Ok(code)
}

/// `strata artifact gc`: exit 1 if an action failed.
pub(super) fn gc(root: &Path, dry_run: bool, json: bool) -> Result<i32, Failure> {
    let store = ArtifactStore::open(root, StoreOptions::default()).map_err(Failure::of)?;
    let report = artifact::gc(
        store.root(),
        artifact::GcOptions { dry_run },
        &crate::cli::progress::Reporter::from_env(),
    )
    .map_err(Failure::of)?;
    let mut text = String::new();
    for a in &report.actions {
        text.push_str(&format!("{} {} {} ({})\n", a.result, a.kind, a.path.display(), a.reason));
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
    print(json, &serde_json::to_value(&report).unwrap_or_default(), &text)?;
    Ok(if report.has_failures() { 1 } else { 0 })
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
