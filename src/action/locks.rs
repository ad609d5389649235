//! Lock policy and acquisition for actions: the three timeouts (entry, action, publish),
//! read from `STRATA_*_LOCK_TIMEOUT_SECONDS`, and [`lock_with_events`], which takes a lock
//! and reports waits to the event log (docs/format.md "Locks").

use std::path::Path;
use std::time::Duration;

use crate::action::events::{EventLog, ms};
use crate::action::{Error, LockKind};
use crate::fs::{self, LockGuard, LockProgress, LockWait};

/// Lock timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Entry lock (default 60 s; timeout → BYPASS).
    pub entry: LockWait,
    /// Action lock (default 120 s; timeout → exit 75).
    pub action: LockWait,
    /// Publish lock (default 120 s; timeout → exit 75).
    pub publish: LockWait,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            entry: LockWait::Timeout(Duration::from_secs(60)),
            action: LockWait::Timeout(Duration::from_secs(120)),
            publish: LockWait::Timeout(Duration::from_secs(120)),
        }
    }
}

impl Timeouts {
    /// Defaults overridden by `STRATA_ENTRY_LOCK_TIMEOUT_SECONDS`,
    /// `STRATA_ACTION_LOCK_TIMEOUT_SECONDS`, `STRATA_PUBLISH_LOCK_TIMEOUT_SECONDS`: a
    /// non-negative number of seconds (decimals allowed) or `inf`; `0` means one attempt.
    ///
    /// # Errors
    /// [`Error::InvalidEnvironment`] for anything else, such as `60s` (a typo never silently
    /// becomes the default).
    pub fn from_env() -> Result<Self, Error> {
        let d = Self::default();
        Ok(Self {
            entry: parse_timeout("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS")?.unwrap_or(d.entry),
            action: parse_timeout("STRATA_ACTION_LOCK_TIMEOUT_SECONDS")?.unwrap_or(d.action),
            publish: parse_timeout("STRATA_PUBLISH_LOCK_TIMEOUT_SECONDS")?.unwrap_or(d.publish),
        })
    }
}

fn parse_timeout(name: &'static str) -> Result<Option<LockWait>, Error> {
    let Ok(value) = std::env::var(name) else { return Ok(None) };
    let text = value.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if text == "inf" {
        return Ok(Some(LockWait::Forever));
    }
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Some(if s == 0.0 {
            LockWait::Immediately
        } else {
            LockWait::Timeout(Duration::from_secs_f64(s))
        })),
        _ => Err(Error::InvalidEnvironment {
            name,
            value,
            expected: "a non-negative number of seconds or `inf`",
        }),
    }
}

/// Takes a lock, reporting waits to the event log.
///
/// # Errors
/// [`Error::LockTimeout`] on timeout; [`Error::Fs`] if the lock file cannot be opened.
pub fn lock_with_events(
    path: &Path,
    kind: LockKind,
    wait: LockWait,
    events: &EventLog,
) -> Result<LockGuard, Error> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let path_text = path.display().to_string();
    let mut report = |p: LockProgress| {
        let (event, waited) = match p {
            LockProgress::Waiting(w) => ("lock_wait", w),
            LockProgress::Acquired(w) => ("lock_acquired", w),
            LockProgress::TimedOut(w) => ("lock_timeout", w),
        };
        events.emit(
            event,
            &[
                ("lock", kind.as_str().into()),
                ("path", path_text.clone().into()),
                ("waited_ms", ms(waited)),
            ],
        );
    };
    fs::lock_exclusive(path, wait, &mut report).map_err(|e| match e {
        fs::Error::LockTimeout { path, waited } => Error::LockTimeout { kind, path, waited },
        other => Error::Fs(other),
    })
}
