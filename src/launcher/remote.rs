//! The remote entry tier in the launcher (docs/remote-tier.md): a key with no local entry
//! is fetched from [`Config::remote`](super::Config::remote) when one is configured, then
//! checked candidate by candidate like any local entry; a new entry is offered to it. With
//! no tier configured, none of this runs (no syscall is added to the hit path).

use super::compile::Run;
use super::entry::EntryPlace;
use crate::l1::counters::{self, COMPILE};
use crate::l1::remote::{FetchOutcome, OfferOutcome};

pub(super) use crate::l1::remote::counter;

/// Adds one to the launcher's remote counter `name`.
pub(super) fn count(run: &Run<'_>, name: &str) {
    counters::bump(run.cache, COMPILE, name);
}

/// Fetches the absent entry at `place`; true if it was installed.
pub(super) fn fetch(run: &Run<'_>, place: &EntryPlace) -> bool {
    let Some(source) = &run.config.remote else { return false };
    match source.fetch(run.cache.path(), &place.rel) {
        FetchOutcome::Installed => true,
        FetchOutcome::Absent => {
            count(run, counter::MISS);
            run.note(format!("no remote entry for {}", place.rel));
            false
        }
        FetchOutcome::Failed(reason) => {
            count(run, counter::ERROR);
            run.out.warn(format!("remote entry not used; compiling: {reason}"));
            false
        }
    }
}

/// Offers the entry just saved at `place` (a failure is a warning).
pub(super) fn offer(run: &Run<'_>, place: &EntryPlace) {
    let Some(source) = &run.config.remote else { return };
    match source.offer(run.cache.path(), &place.rel) {
        OfferOutcome::Uploaded => count(run, counter::UPLOADED),
        OfferOutcome::Failed(reason) => {
            count(run, counter::UPLOAD_ERROR);
            run.out.warn(format!("compiled and cached locally, not uploaded: {reason}"));
        }
        OfferOutcome::AlreadyPresent | OfferOutcome::ReadOnly => {}
    }
}
