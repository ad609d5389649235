//! The lock policy of the L1 cache (docs/format.md "Locks"): the three lock kinds, their
//! timeouts, read from `STRATA_*_LOCK_TIMEOUT_SECONDS` ([`Timeouts::from_env`]), and
//! [`lock_with_events`], which takes a lock and reports waits to the event log.
//!
//! One policy for every writer of an entry: `strata action run`, the compiler launcher's
//! compile and archive saves and the remote tier's installs all hold the entry lock
//! (`.locks/entry/<sha256(entry path)>.lock`) with the entry timeout ([`Timeouts::entry`],
//! default 60 s, `STRATA_ENTRY_LOCK_TIMEOUT_SECONDS`); what a timeout means is the
//! caller's (the engine builds without the cache, the launcher compiles without saving).
//! Maintenance never waits: prune takes entry locks with [`LockWait::Immediately`] and
//! keeps a busy entry ([`try_entry_lock`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{self, LOCK_TIMEOUT, Timeout};
use crate::fs::{self, LockGuard, LockProgress, LockWait};
use crate::l1::events::{EventLog, ms};

/// Which lock (for messages, events and the timeout variable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// The entry lock (`.locks/entry/…`).
    Entry,
    /// The action lock (per action for custom operators, per output directory for
    /// third-party builds).
    Action,
    /// The publish lock of a publish state directory.
    Publish,
}

impl LockKind {
    /// `entry`, `action` or `publish`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Entry => "entry",
            LockKind::Action => "action",
            LockKind::Publish => "publish",
        }
    }

    /// The variable that sets this lock's timeout.
    pub fn timeout_variable(self) -> &'static str {
        match self {
            LockKind::Entry => "STRATA_ENTRY_LOCK_TIMEOUT_SECONDS",
            LockKind::Action => "STRATA_ACTION_LOCK_TIMEOUT_SECONDS",
            LockKind::Publish => "STRATA_PUBLISH_LOCK_TIMEOUT_SECONDS",
        }
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The wait ran out.
    #[error(
        "timed out after {:.3}s waiting for the {kind} lock {} (raise {} or check for a hung \
         build holding it)",
        waited.as_secs_f64(),
        path.display(),
        kind.timeout_variable()
    )]
    Timeout {
        /// Which lock.
        kind: LockKind,
        /// The lock file.
        path: PathBuf,
        /// How long was waited.
        waited: Duration,
    },
    /// The lock file could not be opened (the error names it).
    #[error(transparent)]
    Fs(#[from] fs::Error),
}

/// Lock timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Entry lock (default 60 s).
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
    /// [`config::Error::InvalidValue`] for anything else, such as `60s` (a typo never
    /// silently becomes the default).
    pub fn from_env() -> Result<Self, config::Error> {
        let d = Self::default();
        let read = |kind: LockKind, default: LockWait| -> Result<LockWait, config::Error> {
            let name = kind.timeout_variable();
            Ok(match config::timeout_var(name, &LOCK_TIMEOUT)? {
                None => default,
                Some(Timeout::Never) => LockWait::Forever,
                Some(Timeout::After(d)) if d.is_zero() => LockWait::Immediately,
                Some(Timeout::After(d)) => LockWait::Timeout(d),
            })
        };
        Ok(Self {
            entry: read(LockKind::Entry, d.entry)?,
            action: read(LockKind::Action, d.action)?,
            publish: read(LockKind::Publish, d.publish)?,
        })
    }
}

/// Takes a lock (creating its directory), reporting waits to the event log.
///
/// # Errors
/// [`LockError::Timeout`] on timeout; [`LockError::Fs`] if the lock file cannot be opened.
pub fn lock_with_events(
    path: &Path,
    kind: LockKind,
    wait: LockWait,
    events: &EventLog,
) -> Result<LockGuard, LockError> {
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
        fs::Error::LockTimeout { path, waited } => LockError::Timeout { kind, path, waited },
        other => LockError::Fs(other),
    })
}

/// Takes the entry lock `path` without waiting, for maintenance: `Ok(None)` when another
/// process holds it (the entry is in use and is left alone).
///
/// # Errors
/// [`fs::Error`] naming the path if the lock file cannot be created or opened.
pub fn try_entry_lock(path: &Path) -> Result<Option<LockGuard>, fs::Error> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::lock_exclusive(path, LockWait::Immediately, &mut |_| {}) {
        Ok(g) => Ok(Some(g)),
        Err(e) if e.is_lock_timeout() => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lock kind takes the same forms: seconds, `0` (one attempt), `inf`; and refuses
    /// a typo with the variable named.
    #[test]
    fn timeouts_parse_the_one_rule() {
        let parse = |text: &str| config::parse_timeout(text, &LOCK_TIMEOUT);
        assert_eq!(parse(" 2.5 "), Ok(Timeout::After(Duration::from_millis(2500))));
        assert_eq!(parse("0"), Ok(Timeout::After(Duration::ZERO)));
        assert_eq!(parse("inf"), Ok(Timeout::Never));
        for bad in ["60s", "-1", "nan", "", "1e400"] {
            assert_eq!(parse(bad), Err(LOCK_TIMEOUT.expected), "{bad:?}");
        }
    }
}
