//! Every line strata prints goes through here: a closed stdout or stderr
//! is not a crash.
//!
//! Rust ignores `SIGPIPE`, so writing to a pipe whose reader has gone (`strata snapshot key
//! | head -n 1`) fails with `EPIPE`, and `println!` turns that failure into a panic (exit
//! 101, which `bash -eo pipefail` reports as a failed step). Here:
//!
//! * [`out`] (the [`outln!`] macro) writes one line to stdout. A closed stdout (`EPIPE`)
//!   is quiet: the line is dropped, the command goes on and exits with the status it
//!   would have had. Any other failure (a full disk behind `> file`) is returned, so the
//!   command fails naming stdout rather than pretending it printed its result.
//! * [`err`] (the [`errln!`] macro) writes one line to stderr and ignores every failure:
//!   diagnostics never change an outcome, and there is nowhere left to report them.
//!
//! `print!`, `println!`, `eprint!` and `eprintln!` are denied in the command line
//! (`clippy::print_stdout`, `clippy::print_stderr`), so no path of the binary can panic on
//! output.

use std::fmt;
use std::io::{self, Write};

use super::Failure;

/// Writes `args` and a newline to stdout and flushes; a closed stdout is not an error
/// (see the module docs).
///
/// # Errors
/// A [`Failure`] (exit 1) naming stdout for any other write failure.
pub(crate) fn out(args: fmt::Arguments<'_>) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    let written = stdout.write_fmt(args).and_then(|()| stdout.write_all(b"\n"));
    match written.and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure {
            code: 1,
            error: anyhow::Error::new(e).context(
                "cannot write the result to stdout (check where stdout is redirected, e.g. a \
                 full disk)",
            ),
        }),
    }
}

/// Writes `args` and a newline to stderr; every failure is ignored (see the module docs).
pub(crate) fn err(args: fmt::Arguments<'_>) {
    let mut stderr = io::stderr().lock();
    let _ = stderr.write_fmt(args).and_then(|()| stderr.write_all(b"\n"));
    let _ = stderr.flush();
}

/// `println!` that never panics: [`out`] with `format!` arguments; evaluates to
/// `Result<(), Failure>`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::output::out(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: [`err`] with `format!` arguments.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::output::err(format_args!($($arg)*))
    };
}

pub(crate) use {errln, outln};
