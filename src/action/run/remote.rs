//! The remote entry tier in a run (docs/remote-tier.md): on a local MISS, try the entry
//! from [`RunOptions::remote`](super::RunOptions::remote) before building; after a new entry
//! is saved, offer it. Nothing here fails the run: a remote failure is a warning and a
//! MISS, an upload failure a warning.

use std::time::Instant;

use super::{Ctx, Entry};
use crate::l1::events::ms;
use crate::l1::remote::{FetchOutcome, OfferOutcome, counter};

/// Adds one to the remote counter `name` of the run's domain.
pub(super) fn count(ctx: &Ctx<'_>, name: &str) {
    crate::l1::counters::bump(&ctx.cache, ctx.opts.domain.as_str(), name);
}

/// Asks the remote tier for the absent entry (entry lock held). True if it installed the
/// entry, which the caller then looks up as usual.
pub(super) fn fetch(ctx: &mut Ctx<'_>, entry: &Entry) -> bool {
    let Some(source) = ctx.opts.remote.clone() else { return false };
    let started = Instant::now();
    let outcome = source.fetch(ctx.cache.path(), &entry.loc.rel);
    let status = match &outcome {
        FetchOutcome::Installed => "INSTALLED",
        FetchOutcome::Absent => "ABSENT",
        FetchOutcome::Failed(_) => "FAILED",
    };
    ctx.events.emit(
        "remote_fetch",
        &[
            ("status", status.into()),
            ("entry", entry.loc.rel.as_str().into()),
            ("fetch_ms", ms(started.elapsed())),
        ],
    );
    match outcome {
        FetchOutcome::Installed => true,
        FetchOutcome::Absent => {
            count(ctx, counter::MISS);
            false
        }
        FetchOutcome::Failed(reason) => {
            count(ctx, counter::ERROR);
            ctx.warn("remote", format!("remote entry not used; building: {reason}"));
            false
        }
    }
}

/// Offers the entry just saved to the remote tier (a producer's upload; a failure is a
/// warning).
pub(super) fn offer(ctx: &mut Ctx<'_>, entry: &Entry) {
    let Some(source) = ctx.opts.remote.clone() else { return };
    let started = Instant::now();
    let outcome = source.offer(ctx.cache.path(), &entry.loc.rel);
    let status = match &outcome {
        OfferOutcome::Uploaded => "UPLOADED",
        OfferOutcome::AlreadyPresent => "PRESENT",
        OfferOutcome::ReadOnly => return,
        OfferOutcome::Failed(_) => "FAILED",
    };
    ctx.events.emit(
        "remote_offer",
        &[
            ("status", status.into()),
            ("entry", entry.loc.rel.as_str().into()),
            ("offer_ms", ms(started.elapsed())),
        ],
    );
    match outcome {
        OfferOutcome::Uploaded => count(ctx, counter::UPLOADED),
        OfferOutcome::Failed(reason) => {
            count(ctx, counter::UPLOAD_ERROR);
            ctx.warn("remote", format!("new entry not uploaded: {reason}"));
        }
        OfferOutcome::AlreadyPresent | OfferOutcome::ReadOnly => {}
    }
}
