//! The tracee side: what `strata __strata-trace-exec COVERAGE PROGRAM ARGV0 ARGS...` does
//! before it becomes the program (`src/main.rs` calls [`prepare`], then `exec`s).
//!
//! Protocol with the tracer ([`super::run`]): the shim asks to be traced
//! (`PTRACE_TRACEME`), installs the seccomp filter (which also sets `no_new_privs`), stops
//! itself with `SIGSTOP` so the tracer can set its options, then `exec`s the program. Any
//! failure before the `exec` ends the shim with a line on stderr that starts with
//! [`FAILURE_PREFIX`] and a dedicated exit status ([`EXIT_REFUSED`], [`EXIT_EXEC_FAILED`],
//! [`EXIT_USAGE`]); the tracer recognises it because the root process ended without a
//! successful `exec`. The program never runs untraced: if tracing cannot be set up, the
//! shim exits instead of `exec`ing.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::Coverage;

/// `argv[1]` that makes the `strata` binary act as the shim.
pub const SHIM_ARG: &str = "__strata-trace-exec";
/// The start of the one stderr line a failed shim writes.
pub const FAILURE_PREFIX: &str = "strata-trace-shim: ";
/// Exit status of a shim that could not set up tracing (ptrace or seccomp refused).
pub const EXIT_REFUSED: i32 = 121;
/// Exit status of a shim whose `exec` of the program failed; the line carries the errno.
pub const EXIT_EXEC_FAILED: i32 = 122;
/// Exit status of a shim started with too few arguments.
pub const EXIT_USAGE: i32 = 123;

/// What the shim is to `exec` once tracing is set up.
#[derive(Debug)]
pub struct ShimExec {
    /// The program (a path, or a name looked up in `PATH`).
    pub program: PathBuf,
    /// Its `argv[0]`.
    pub argv0: OsString,
    /// The remaining arguments.
    pub args: Vec<OsString>,
}

/// Why the shim stops before running the program: the stderr line and the exit status.
#[derive(Debug)]
pub struct ShimFailure {
    /// The exit status ([`EXIT_REFUSED`], [`EXIT_EXEC_FAILED`] or [`EXIT_USAGE`]).
    pub exit_code: i32,
    /// The line to write to stderr (starts with [`FAILURE_PREFIX`], ends with a newline).
    pub line: String,
}

impl ShimFailure {
    fn refused(what: &str, error: impl std::fmt::Display) -> Self {
        Self {
            exit_code: EXIT_REFUSED,
            line: format!("{FAILURE_PREFIX}refused: {what}: {error}\n"),
        }
    }
}

/// Sets this process up to be traced by its parent and returns what to `exec`. `args` are
/// the arguments after [`SHIM_ARG`]: the coverage ([`Coverage::as_arg`]), the program,
/// `argv[0]`, the arguments.
///
/// # Errors
/// [`ShimFailure`] with [`EXIT_USAGE`] for missing or unknown arguments, [`EXIT_REFUSED`]
/// when `PTRACE_TRACEME`, the seccomp filter or the stop fail.
pub fn prepare(mut args: impl Iterator<Item = OsString>) -> Result<ShimExec, ShimFailure> {
    let coverage = args.next().and_then(|arg| Coverage::from_arg(arg.to_str()?));
    let (Some(coverage), Some(program), Some(argv0)) = (coverage, args.next(), args.next()) else {
        return Err(ShimFailure {
            exit_code: EXIT_USAGE,
            line: format!(
                "{FAILURE_PREFIX}usage: strata {SHIM_ARG} full|without-readlink PROGRAM ARGV0 [ARGS...]\n"
            ),
        });
    };
    let exec = ShimExec { program: PathBuf::from(program), argv0, args: args.collect() };
    if !super::SUPPORTED {
        return Err(ShimFailure::refused("tracing", super::unsupported()));
    }
    nix::sys::ptrace::traceme().map_err(|e| ShimFailure::refused("PTRACE_TRACEME", e))?;
    let program = super::syscalls::program(coverage, super::syscalls::Stop::Ptrace, None)
        .map_err(|e| ShimFailure::refused("seccomp filter", e))?;
    seccompiler::apply_filter(&program).map_err(|e| ShimFailure::refused("seccomp filter", e))?;
    nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP)
        .map_err(|e| ShimFailure::refused("SIGSTOP", e))?;
    Ok(exec)
}

/// The failure to report when `exec` of `program` returned `error`.
pub fn exec_failed(program: &Path, error: &io::Error) -> ShimFailure {
    ShimFailure {
        exit_code: EXIT_EXEC_FAILED,
        line: format!(
            "{FAILURE_PREFIX}exec failed: errno {}: {}: {error}\n",
            error.raw_os_error().unwrap_or(0),
            program.display()
        ),
    }
}

/// What the tracer makes of a root process that ended before `exec`ing: the failure the
/// shim reported on `stderr` with exit status `code`.
pub(crate) fn parse_failure(code: Option<i32>, stderr: &[u8]) -> Option<ParsedFailure> {
    let text = String::from_utf8_lossy(stderr);
    let line = text.lines().find_map(|line| line.strip_prefix(FAILURE_PREFIX))?;
    match code? {
        EXIT_REFUSED => Some(ParsedFailure::Refused(line.strip_prefix("refused: ")?.to_owned())),
        EXIT_EXEC_FAILED => {
            let rest = line.strip_prefix("exec failed: errno ")?;
            let errno = rest.split(':').next()?.parse().ok()?;
            Some(ParsedFailure::Exec(io::Error::from_raw_os_error(errno)))
        }
        _ => Some(ParsedFailure::Other(line.to_owned())),
    }
}

/// A shim failure as the tracer reads it.
#[derive(Debug)]
pub(crate) enum ParsedFailure {
    Refused(String),
    Exec(io::Error),
    Other(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tracer_reads_what_the_shim_reports() {
        let refused = ShimFailure::refused("PTRACE_TRACEME", "EPERM: Operation not permitted");
        match parse_failure(Some(refused.exit_code), refused.line.as_bytes()) {
            Some(ParsedFailure::Refused(reason)) => {
                assert_eq!(reason, "PTRACE_TRACEME: EPERM: Operation not permitted");
            }
            other => panic!("{other:?}"),
        }
        let error = io::Error::from_raw_os_error(libc::ENOENT);
        let exec = exec_failed(Path::new("/no/such/cc"), &error);
        match parse_failure(Some(exec.exit_code), exec.line.as_bytes()) {
            Some(ParsedFailure::Exec(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOENT)),
            other => panic!("{other:?}"),
        }
        // The same status without the line is not a shim failure (a program's own 121).
        assert!(parse_failure(Some(EXIT_REFUSED), b"something else\n").is_none());
    }

    #[test]
    fn missing_arguments_are_a_usage_failure_before_any_setup() {
        let failure = prepare(["full".into()].into_iter()).unwrap_err();
        assert_eq!(failure.exit_code, EXIT_USAGE);
        let failure = prepare(["most".into(), "cc".into(), "cc".into()].into_iter()).unwrap_err();
        assert_eq!(failure.exit_code, EXIT_USAGE);
        assert!(failure.line.starts_with(FAILURE_PREFIX), "{}", failure.line);
    }
}
