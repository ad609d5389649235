//! Running a build command (`strata action run`, `strata artifact get-or-build` and
//! `promote`) as a child that never outlives strata's locks unnoticed.
//!
//! While the child runs, SIGINT, SIGTERM and SIGHUP sent to strata are forwarded to it (a
//! CI cancellation or `kill <strata pid>` stops the build instead of leaving it writing
//! into an output directory whose locks strata is about to release). A signal received
//! while the child ran makes the run end like a build killed by that signal: nothing is
//! saved or published, and the exit code is 128 + the signal, even if the child chose to
//! finish successfully.
//!
//! # Limitations
//! After the first build in a process the handlers stay installed (signal-hook cannot
//! restore the default disposition safely), so a signal arriving later — during a save —
//! no longer terminates strata at once; the save finishes, which takes milliseconds.

use std::io;
use std::process::{Command, ExitStatus};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The exit code of a child killed by `signal`, as shells report it: 128 + the signal.
pub const fn killed_by(signal: i32) -> i32 {
    128 + signal
}

/// The exit code of a finished child: its own code, or [`killed_by`] its signal (1 if it
/// has neither).
pub fn exit_code_of(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(killed_by)).unwrap_or(1)
}

/// How the child ended.
#[derive(Debug, Clone, Copy)]
pub struct ChildEnd {
    /// Its exit status.
    pub status: ExitStatus,
    /// The first signal strata received (and forwarded) while the child ran.
    pub interrupted_by: Option<i32>,
}

/// Spawns `cmd`, forwards SIGINT/SIGTERM/SIGHUP to it until it exits, and waits.
///
/// # Errors
/// The spawn or wait error; failing to install the forwarding is not an error (the child
/// then simply runs without it).
pub fn run(cmd: &mut Command) -> io::Result<ChildEnd> {
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).ok();
    let mut child = cmd.spawn()?;
    let Some(mut signals) = signals else {
        return Ok(ChildEnd { status: child.wait()?, interrupted_by: None });
    };
    let handle = signals.handle();
    let pid = rustix::process::Pid::from_child(&child);
    let forwarder = std::thread::spawn(move || {
        let mut first = None;
        for sig in signals.forever() {
            first.get_or_insert(sig);
            if let Some(signal) = rustix::process::Signal::from_named_raw(sig) {
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
        first
    });
    let status = child.wait();
    handle.close();
    let interrupted_by = forwarder.join().unwrap_or(None);
    Ok(ChildEnd { status: status?, interrupted_by })
}
