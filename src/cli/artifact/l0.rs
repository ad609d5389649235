//! `strata artifact push` and `pull`: one library call each ([`l0::push`], [`l0::pull`]
//! then [`l0::PullReport::settle`]), the `--strict` policy for transport failures, and
//! the report.

use std::path::Path;

use serde_json::json;

use super::args::{IdArgs, RemoteArgs, StoreArgs, open_remote};
use super::{print, shown};
use crate::cli::exit;
use crate::cli::output::errln;
use crate::cli::{Failure, SigningArgs, TrustArgs};
use strata::artifact::l0::{self, PullOutcome};

/// `strata artifact push`. A transport failure is a warning (exit 0) unless `--strict`.
pub(super) fn push(
    store: &StoreArgs,
    id: &IdArgs,
    remote: &RemoteArgs,
    signing: &SigningArgs,
    json: bool,
) -> Result<i32, Failure> {
    let (key, spec) = (id.key()?, id.spec()?);
    let signing_key = signing.load(&strata::ci::Github::from_env())?;
    let trust = l0::Trust {
        signing_key: signing_key.as_ref(),
        producer: strata::trust::Producer::from_env_with(|n| std::env::var(n).ok()),
        ..l0::Trust::default()
    };
    let private = store.private_root()?;
    let opened = store.open(Some(&private))?;
    let objects = open_remote(remote, "artifact push")?;
    let reporter = crate::cli::progress::Reporter::from_env();
    let report = match l0::push(&opened, objects.as_ref(), &key, &spec, &trust, &reporter) {
        Ok(report) => report,
        Err(e) => return transport_failure(e, remote, json, Skipped::Push),
    };
    let outcome = report.outcome.as_str();
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
    print(json, &value, &text)?;
    Ok(0)
}

/// What a transport failure that is not fatal (no `--strict`) means for the command.
enum Skipped {
    /// Nothing pushed: exit 0.
    Push,
    /// Treated as a miss: exit 3.
    Pull,
}

/// A failed push or pull: a local store error fails; a transport failure fails with
/// `--strict`, else it is a warning and a `transport_error` outcome.
fn transport_failure(
    e: l0::Error,
    remote: &RemoteArgs,
    json: bool,
    skipped: Skipped,
) -> Result<i32, Failure> {
    match e {
        l0::Error::Artifact(e) => Err(Failure::of(e)),
        e if remote.strict => Err(Failure::from(anyhow::Error::from(e))),
        e => {
            let message = strata::message::one_line(&e);
            let value = json!({"outcome": "transport_error", "reason": message});
            match skipped {
                Skipped::Push => {
                    errln!("strata: warning: {message} (continuing; use --strict to fail)");
                    print(json, &value, "strata: L0 push skipped")?;
                    Ok(0)
                }
                Skipped::Pull => {
                    errln!("strata: warning: {message} (treated as a miss; use --strict to fail)");
                    print(json, &value, "strata: L0 MISS (transport error)")?;
                    Ok(exit::MISS)
                }
            }
        }
    }
}

/// `strata artifact pull`. Exit 0 available (local HIT or pulled), 3 not available.
pub(super) fn pull(
    store: &StoreArgs,
    id: &IdArgs,
    remote: &RemoteArgs,
    trust: &TrustArgs,
    dest: Option<&Path>,
    json: bool,
) -> Result<i32, Failure> {
    let (key, spec) = (id.key()?, id.spec()?);
    let trust = l0::Trust { policy: trust.policy()?, ..l0::Trust::default() };
    let dest = store.destination(dest)?;
    let mut private = store.private_root()?;
    let opened = store.open(Some(&private))?;
    let objects = open_remote(remote, "artifact pull")?;
    let reporter = crate::cli::progress::Reporter::from_env();
    let report = match l0::pull(&opened, objects.as_ref(), &key, &spec, &trust, &reporter) {
        Ok(r) => r,
        Err(e) => return transport_failure(e, remote, json, Skipped::Pull),
    };
    let reason = match &report.outcome {
        PullOutcome::Pulled => report.reason.clone(),
        PullOutcome::Rejected(r) => Some(r.clone()),
        PullOutcome::LocalHit | PullOutcome::NotInRemote => None,
    };
    if let PullOutcome::Rejected(r) = &report.outcome {
        if remote.strict {
            let object = &report.object;
            return Err(Failure::from(anyhow::anyhow!("rejected L0 object {object}: {r}")));
        }
        errln!("strata: warning: rejected L0 object {}: {r}", report.object);
    }
    for warning in &report.warnings {
        errln!("strata: warning: {warning}");
    }
    let available = report.dir().is_some();
    let kept = report.settle(dest.as_ref(), &mut private).map_err(Failure::of)?;
    let outcome = report.outcome.as_str();
    let value = json!({
        "outcome": outcome, "object": report.object.as_str(), "store": objects.describe(),
        "dir": kept.dir.as_deref().map(shown), "disposition": report.disposition.map(|d| d.as_str()),
        "reason": reason, "downloaded_bytes": report.downloaded_bytes, "seconds": report.seconds,
        "dest": kept.output.as_deref().map(shown), "warnings": report.warnings,
    });
    let mut text = format!(
        "strata: L0 {} ({outcome}) key={}",
        if available { "HIT" } else { "MISS" },
        key.digest()
    );
    if let Some(dir) = &kept.dir {
        text.push_str(&format!(" dir={}", dir.display()));
    }
    if let Some(dest) = &kept.output {
        text.push_str(&format!(" dest={}", dest.display()));
    }
    print(json, &value, &text)?;
    Ok(if available { 0 } else { exit::MISS })
}
