//! How a restore or a save ended, in the one vocabulary every report uses: the `status`
//! of the GitHub outputs and JSON, the `outcome` of the `snapshot_restore` and
//! `snapshot_save` events (docs/snapshots.md "Events"), and which rejections to warn about.
//!
//! Cache trouble is an outcome, not a failure: [`RestoreOutcome`] and [`SaveEnd`] keep the
//! error beside the report, and only a usage error (a flag the user must change) stays an
//! error.

use serde_json::Value;

use super::Error;
use super::restore::{MatchLevel, Rejected, RestoreFailure, RestoreReport};
use super::save::{SaveOutcome, SaveReport};
use crate::l1::events::EventLog;

/// How a restore ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreStatus {
    /// No key was given: nothing was looked up.
    Skipped,
    /// No snapshot matched.
    Miss,
    /// A snapshot matched (`--lookup-only`): nothing was downloaded.
    Found,
    /// A snapshot was restored whole: every entry it lists is in the cache.
    Restored,
    /// An index snapshot was restored in part: some of its entries could not be fetched
    /// or failed verification and were skipped (each a cache miss later); the report's
    /// `index` counts say how many were present, fetched and skipped.
    Partial,
    /// The store or every candidate failed; the cache directory is unchanged.
    Error,
}

impl RestoreStatus {
    /// `skipped`, `miss`, `found`, `restored`, `partial` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            RestoreStatus::Skipped => "skipped",
            RestoreStatus::Miss => "miss",
            RestoreStatus::Found => "found",
            RestoreStatus::Restored => "restored",
            RestoreStatus::Partial => "partial",
            RestoreStatus::Error => "error",
        }
    }
}

/// A finished restore: its report and, when nothing was restored for a reason other than
/// a miss, the error.
#[derive(Debug)]
pub struct RestoreOutcome {
    /// What was found, tried and restored.
    pub report: RestoreReport,
    /// Why nothing was restored (not a miss).
    pub error: Option<Error>,
}

impl RestoreOutcome {
    /// The outcome of [`super::restore()`]'s result.
    ///
    /// # Errors
    /// A usage error ([`Error::is_usage`]): the command fails instead of reporting.
    pub fn new(result: Result<RestoreReport, Box<RestoreFailure>>) -> Result<Self, Error> {
        match result {
            Ok(report) => Ok(Self { report, error: None }),
            Err(failure) if failure.error.is_usage() => Err(failure.error),
            Err(failure) => {
                let failure = *failure;
                Ok(Self { report: failure.report, error: Some(failure.error) })
            }
        }
    }

    /// The status (see [`RestoreStatus`]).
    pub fn status(&self) -> RestoreStatus {
        match (&self.error, self.report.level, self.report.restored) {
            (Some(_), _, _) => RestoreStatus::Error,
            (None, MatchLevel::None, _) => RestoreStatus::Miss,
            (None, _, true) if self.skipped_entries() > 0 => RestoreStatus::Partial,
            (None, _, true) => RestoreStatus::Restored,
            (None, _, false) => RestoreStatus::Found,
        }
    }

    /// True if the exact key was restored whole (actions/cache's `cache-hit`): an index
    /// snapshot of which an entry was skipped is [`RestoreStatus::Partial`], not a hit.
    pub fn cache_hit(&self) -> bool {
        self.report.level == MatchLevel::Exact
            && self.report.restored
            && self.skipped_entries() == 0
    }

    /// Entries of the restored index snapshot that were skipped (0 for a full snapshot).
    pub fn skipped_entries(&self) -> u64 {
        self.report.index.as_ref().map_or(0, |c| c.failed)
    }

    /// The rejected candidates to warn about one by one: all of them, except the last when
    /// the error itself is that rejection (it is reported as the error).
    pub fn rejections_to_warn(&self) -> &[Rejected] {
        let rejected = &self.report.rejected;
        let shown = match &self.error {
            Some(e) if e.is_corrupt() => rejected.len().saturating_sub(1),
            _ => rejected.len(),
        };
        rejected.get(..shown).unwrap_or_default()
    }

    /// The error on one line, empty without one.
    pub fn reason(&self) -> String {
        self.error.as_ref().map(Error::one_line).unwrap_or_default()
    }

    /// Writes the `snapshot_restore` event for the primary key `key`.
    pub fn emit(&self, events: &EventLog, key: &str) {
        let report = &self.report;
        let mut fields: Vec<(&str, Value)> = vec![
            ("outcome", self.status().as_str().into()),
            ("level", report.level.as_str().into()),
            ("key", key.into()),
            ("matched_key", report.matched_key.clone().unwrap_or_default().into()),
            ("bytes", report.object_size_bytes.into()),
            ("ms", milliseconds(report.seconds)),
        ];
        if !report.rejected.is_empty() {
            let keys: Vec<&str> = report.rejected.iter().map(|r| r.key.as_str()).collect();
            fields.push(("rejected", keys.into()));
        }
        if let Some(e) = &self.error {
            fields.push(("message", e.one_line().into()));
            fields.push(("retries", report.retries.into()));
        }
        events.emit("snapshot_restore", &fields);
    }
}

/// How a save ended: its report, or the error that stopped it (with the transport's
/// retries, which a failed save has no report to count in).
#[derive(Debug)]
pub enum SaveEnd {
    /// Saved or skipped.
    Report(SaveReport),
    /// The save failed; the build result stands and nothing was published.
    Failed {
        /// Why.
        error: Error,
        /// The primary key.
        key: String,
        /// Requests the transport retried.
        retries: u32,
    },
}

impl SaveEnd {
    /// `saved`, `skipped` or `error`.
    pub fn status(&self) -> &'static str {
        match self {
            SaveEnd::Report(report) => match report.outcome {
                SaveOutcome::Saved => "saved",
                SaveOutcome::Skipped { .. } => "skipped",
            },
            SaveEnd::Failed { .. } => "error",
        }
    }

    /// Why nothing was saved (a sentence), empty when saved.
    pub fn reason(&self) -> String {
        match self {
            SaveEnd::Report(report) => match &report.outcome {
                SaveOutcome::Saved => String::new(),
                SaveOutcome::Skipped { reason } => reason.describe().to_owned(),
            },
            SaveEnd::Failed { error, .. } => error.one_line(),
        }
    }

    /// Writes the `snapshot_save` event.
    pub fn emit(&self, events: &EventLog) {
        match self {
            SaveEnd::Report(report) => {
                let reason = match &report.outcome {
                    SaveOutcome::Skipped { reason } => reason.as_str().into(),
                    SaveOutcome::Saved => Value::Null,
                };
                events.emit(
                    "snapshot_save",
                    &[
                        ("outcome", self.status().into()),
                        ("reason", reason),
                        ("key", report.key.clone().unwrap_or_default().into()),
                        ("bytes", report.object_size_bytes.into()),
                        ("ms", milliseconds(report.seconds)),
                    ],
                );
            }
            SaveEnd::Failed { error, key, retries } => events.emit(
                "snapshot_save",
                &[
                    ("outcome", "error".into()),
                    ("key", key.clone().into()),
                    ("message", error.one_line().into()),
                    ("retries", (*retries).into()),
                ],
            ),
        }
    }
}

/// Seconds as whole milliseconds, for events.
fn milliseconds(seconds: f64) -> Value {
    ((seconds * 1000.0) as u64).into()
}
