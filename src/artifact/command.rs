//! The build command of `strata artifact get-or-build` and `promote`: a program and its
//! arguments, run with `STRATA_ARTIFACT_OUT` set to the private build directory it fills.
//!
//! The command runs through [`crate::process::run`], like the action engine's: SIGINT,
//! SIGTERM and SIGHUP sent to strata are forwarded to it, and a signal received while it
//! ran fails the build (exit 128 + the signal) even if the command then finished
//! successfully, so nothing is published from a build that was asked to stop.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use crate::process::killed_by;

/// The variable naming the directory the command writes its outputs into.
pub const OUT_VAR: &str = "STRATA_ARTIFACT_OUT";

/// Where the command's standard output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandStdout {
    /// strata's own standard output.
    Inherit,
    /// strata's standard error (when strata's standard output carries JSON).
    Stderr,
}

/// A build command (see the module docs).
#[derive(Debug, Clone)]
pub struct BuildCommand {
    argv: Vec<OsString>,
    stdout: CommandStdout,
}

/// A build command that did not succeed: it could not start, exited with a non-zero code,
/// was killed by a signal, or strata received a signal while it ran.
#[derive(Debug, Clone, thiserror::Error)]
#[error("build command {program:?} {how}")]
pub struct CommandFailed {
    /// The program, in the name encoding of [`crate::fs::name`].
    pub program: String,
    /// What happened, e.g. `exited with 3`.
    pub how: String,
    /// The exit code strata ends with: the command's own, 128 + a signal, or 127 when it
    /// could not start.
    pub code: i32,
}

impl BuildCommand {
    /// The command `argv` (program first; arguments are bytes, passed on exactly).
    pub fn new(argv: Vec<OsString>, stdout: CommandStdout) -> Self {
        Self { argv, stdout }
    }

    /// Runs the command with [`OUT_VAR`] set to `out_dir` and waits for it.
    ///
    /// # Errors
    /// [`CommandFailed`] unless the command exits 0 and strata received no signal.
    pub fn run(&self, out_dir: &Path) -> Result<(), CommandFailed> {
        let argv0 = self.argv.first().cloned().unwrap_or_default();
        let program = crate::fs::name::encode_os(&argv0);
        let failed = |how: String, code: i32| CommandFailed { program: program.clone(), how, code };
        let mut process = Command::new(&argv0);
        process.args(self.argv.iter().skip(1)).env(OUT_VAR, out_dir);
        if self.stdout == CommandStdout::Stderr {
            process.stdout(std::io::stderr());
        }
        let end = crate::process::run(&mut process)
            .map_err(|e| failed(format!("could not start: {e}"), 127))?;
        if let Some(signal) = end.interrupted_by {
            return Err(failed(
                format!(
                    "was interrupted: strata received signal {signal} and forwarded it; \
                     nothing is published"
                ),
                killed_by(signal),
            ));
        }
        if end.status.success() {
            return Ok(());
        }
        Err(match (end.status.code(), end.status.signal()) {
            (Some(code), _) => failed(format!("exited with {code}"), code),
            (None, Some(signal)) => {
                failed(format!("was killed by signal {signal}"), killed_by(signal))
            }
            _ => failed("failed".into(), 1),
        })
    }
}
