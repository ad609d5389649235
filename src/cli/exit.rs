//! Process exit codes of the `strata` command line (docs/reference.md "Exit codes",
//! docs/artifact-store.md "Exit codes", docs/snapshots.md "Exit codes"), and [`ExitCode`],
//! the one place each library error says which code it maps to. The library knows no exit
//! codes: its errors offer predicates (`is_usage`, `is_lock_timeout`, …) and this module,
//! part of the command line, maps them.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | [`FAILURE`]: any other error (a missing input, a publication conflict, …) |
//! | 2 | [`USAGE`]: a flag, variable or value the user must change |
//! | 3 | [`MISS`]: `strata artifact`: no slot, or the artifact is not available |
//! | 4 | [`INVALID`]: `strata artifact`: a slot that does not verify |
//! | 5 | [`STORAGE_ERROR`]: `strata artifact`: the store cannot be read |
//! | 6 | [`UNSUPPORTED`]: `strata artifact scan-includes`: the input cannot be packaged |
//! | 75 | [`LOCK_TIMEOUT`]: a lock that cannot be bypassed timed out (`EX_TEMPFAIL`) |
//! | 128 + n | [`strata::process::killed_by`]: a build command was killed by signal n |
//!
//! A build command that fails with its own code makes strata exit with that code.

/// Exit code of errors that are not usage errors.
pub(crate) const FAILURE: i32 = 1;
/// Exit code of usage errors.
pub(crate) const USAGE: i32 = 2;
/// `strata artifact`: MISS or not available.
pub(crate) const MISS: i32 = 3;
/// `strata artifact`: INVALID slot(s).
pub(crate) const INVALID: i32 = 4;
/// `strata artifact`: STORAGE_ERROR.
pub(crate) const STORAGE_ERROR: i32 = 5;
/// `strata artifact scan-includes`: the input cannot be packaged.
pub(crate) const UNSUPPORTED: i32 = 6;
/// A lock timeout that cannot be bypassed (`EX_TEMPFAIL`).
pub(crate) const LOCK_TIMEOUT: i32 = 75;

/// A result or error that maps to one process exit code (see the module docs).
pub(crate) trait ExitCode {
    /// The process exit code for this value.
    fn exit_code(&self) -> i32;
}

/// [`USAGE`] if `usage`, else [`FAILURE`].
pub(crate) fn usage_or_failure(usage: bool) -> i32 {
    if usage { USAGE } else { FAILURE }
}

impl ExitCode for strata::config::Error {
    fn exit_code(&self) -> i32 {
        usage_or_failure(self.is_usage())
    }
}

impl ExitCode for strata::action::Error {
    /// [`LOCK_TIMEOUT`] for a lock timeout, [`USAGE`] for usage errors, else [`FAILURE`].
    fn exit_code(&self) -> i32 {
        if self.is_lock_timeout() { LOCK_TIMEOUT } else { usage_or_failure(self.is_usage()) }
    }
}

impl ExitCode for strata::artifact::LookupStatus {
    /// 0 HIT, [`MISS`], [`INVALID`], [`STORAGE_ERROR`].
    fn exit_code(&self) -> i32 {
        use strata::artifact::LookupStatus;
        match self {
            LookupStatus::Hit => 0,
            LookupStatus::Miss => MISS,
            LookupStatus::Invalid => INVALID,
            LookupStatus::StorageError => STORAGE_ERROR,
        }
    }
}

impl ExitCode for strata::artifact::Error {
    /// [`USAGE`] for usage errors; for an artifact that was needed but not available (the
    /// slot to push, the generated stage to promote), the code of its lookup; a failed
    /// build command's own code; else [`FAILURE`].
    fn exit_code(&self) -> i32 {
        if self.is_usage() {
            USAGE
        } else if let Some(status) = self.not_available_status() {
            status.exit_code()
        } else if let Some(failed) = self.build_command_failure() {
            failed.exit_code()
        } else {
            FAILURE
        }
    }
}

impl ExitCode for strata::snapshot::Error {
    fn exit_code(&self) -> i32 {
        usage_or_failure(self.is_usage())
    }
}

impl ExitCode for strata::transport::Error {
    fn exit_code(&self) -> i32 {
        usage_or_failure(self.is_usage())
    }
}

impl ExitCode for strata::artifact::CommandFailed {
    /// The command's own code, 128 + a signal, or 127 when it could not start.
    fn exit_code(&self) -> i32 {
        self.code
    }
}
