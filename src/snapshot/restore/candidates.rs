//! The candidate loop of a restore ([`super`]'s module docs): each candidate in
//! lookup order until one restores, with the budget of candidates it may pass over.
//!
//! Corrupt candidates count against [`MAX_REJECTED`]; candidates whose producer is not
//! trusted (with trusted keys configured) cost one read of their sidecar each and count
//! apart, against [`MAX_UNTRUSTED`] and [`MAX_UNTRUSTED_TIME`], so that snapshots anyone
//! with write access can add never hide the newest trusted one (issue 26 item 1).

use std::path::Path;
use std::time::Instant;

use super::lookup::{Candidate, candidates};
use super::{
    LookupMode, MAX_REJECTED, MAX_UNTRUSTED, MAX_UNTRUSTED_TIME, MatchLevel, Rejected,
    RestoreReport, RestoreRequest, lookup_producer, restore_candidate,
};
use crate::fs;
use crate::snapshot::Error;
use crate::snapshot::manifest::SnapshotKind;

/// What the candidates passed over so far cost: corrupt ones count against
/// [`MAX_REJECTED`]; untrusted ones (one sidecar read each) against [`MAX_UNTRUSTED`] and
/// [`MAX_UNTRUSTED_TIME`], so that snapshots anyone with write access can add never hide
/// the newest trusted one.
#[derive(Default)]
struct Budget {
    corrupt: usize,
    untrusted: usize,
    untrusted_time: std::time::Duration,
    last: Option<Error>,
}

impl Budget {
    /// Records the rejection `e` of `candidate` (which took `spent`); `Err` when the
    /// restore must give up.
    fn reject(
        &mut self,
        report: &mut RestoreReport,
        candidate: Candidate,
        e: Error,
        spent: std::time::Duration,
    ) -> Result<(), Error> {
        report.rejected.push(Rejected {
            key: candidate.key,
            level: candidate.level,
            reason: e.one_line(),
            untrusted: e.is_untrusted(),
        });
        if e.is_untrusted() {
            self.untrusted += 1;
            self.untrusted_time += spent;
            report.untrusted_skipped = self.untrusted as u64;
            if self.untrusted >= MAX_UNTRUSTED || self.untrusted_time >= MAX_UNTRUSTED_TIME {
                return Err(Error::Untrusted {
                    object: report.matched_key.clone().unwrap_or_default(),
                    reason: format!(
                        "passed over {} snapshots not signed by a trusted key ({:.1}s of \
                         sidecar reads) without finding one that is; a restore stops there (at \
                         most {MAX_UNTRUSTED} such snapshots, {} s), so that snapshots any \
                         writer of the store can add cannot make it slow: a trusted \
                         producer's next save restores again, or delete the unsigned \
                         snapshots (rejected-keys lists them)",
                        self.untrusted,
                        self.untrusted_time.as_secs_f64(),
                        MAX_UNTRUSTED_TIME.as_secs()
                    ),
                });
            }
        } else {
            self.corrupt += 1;
            if self.corrupt >= MAX_REJECTED {
                return Err(e);
            }
        }
        self.last = Some(e);
        Ok(())
    }
}

/// The candidate loop of [`restore_into`]: each candidate in lookup order until one
/// restores (see the module docs).
pub(super) fn try_candidates(
    request: &RestoreRequest<'_>,
    report: &mut RestoreReport,
    cache_dir: &Path,
    prefixes: &[(String, MatchLevel)],
    created_parents: &mut Option<fs::CreatedDirs>,
) -> Result<(), Error> {
    let mut seen = std::collections::HashSet::new();
    let mut budget = Budget::default();
    let mut step = 0;
    while let Some(found) = candidates(request, prefixes, step, report)? {
        step += 1;
        for candidate in found {
            if !seen.insert(candidate.key.clone()) {
                continue;
            }
            if report.matched_key.is_none() {
                report.level = candidate.level;
                report.matched_key = Some(candidate.key.clone());
                report.object_size_bytes = candidate.object_size_bytes.unwrap_or(0);
            }
            let started = Instant::now();
            if request.mode == LookupMode::LookupOnly {
                // With trusted keys, a match must be one restore would accept from its
                // producer; the sidecar is read into memory, so a lookup still writes
                // nothing beside the cache.
                match lookup_producer(request, &candidate) {
                    Ok(()) => {
                        report.level = candidate.level;
                        report.matched_key = Some(candidate.key);
                        return Ok(());
                    }
                    Err(e) if e.is_corrupt() => {
                        budget.reject(report, candidate, e, started.elapsed())?;
                        report.matched_key = None;
                        report.level = MatchLevel::None;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            if let Some(parent) = cache_dir.parent()
                && created_parents.is_none()
            {
                *created_parents = Some(fs::create_dir_all_recorded(parent)?);
            }
            match restore_candidate(request, cache_dir, &candidate, report) {
                Ok(restored) => {
                    report.level = candidate.level;
                    report.matched_key = Some(candidate.key);
                    report.restored = true;
                    report.object_size_bytes = restored.object_size_bytes;
                    report.file_count = restored.file_count;
                    report.file_bytes = restored.file_bytes;
                    report.manifest_digest = Some(restored.manifest_digest);
                    report.kind = if report.index.is_some() {
                        SnapshotKind::Index
                    } else {
                        SnapshotKind::Full
                    };
                    report.notes.extend(restored.note);
                    if budget.untrusted > 0 {
                        report.notes.push(format!(
                            "passed over {} newer snapshot(s) not signed by a trusted key \
                             (one sidecar read each, {:.1}s in all) before this trusted one",
                            budget.untrusted,
                            budget.untrusted_time.as_secs_f64()
                        ));
                    }
                    return Ok(());
                }
                Err(e) if e.is_corrupt() => {
                    budget.reject(report, candidate, e, started.elapsed())?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    match budget.last {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
