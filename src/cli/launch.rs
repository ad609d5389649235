//! `strata <compiler> ...` and `strata compile ...`: runs the launcher
//! ([`strata::launcher::run`]) and does what it decided: prints strata's own lines, writes
//! the compiler's output (run or replayed) and exits with its code, or replaces this process
//! with the compiler when the compile is not the cache's business.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::process::CommandExt;

use strata::launcher::{Message, Overrides, Step};

/// Runs `compiler` with `args` through the launcher; returns the exit code (only returns
/// after an `exec` that failed, or a finished compile).
pub(crate) fn main_with(compiler: &OsStr, args: &[OsString], overrides: &Overrides) -> i32 {
    let report = strata::launcher::run(compiler, args, overrides);
    let mut stderr = std::io::stderr().lock();
    let exec = matches!(report.step, Step::Exec { .. });
    for message in &report.messages {
        match message {
            Message::Warning(text) => say(&mut stderr, &format!("strata: warning: {text}")),
            // Before an `exec` everything is said first: nothing runs after it.
            Message::Explain(text) if exec => say(&mut stderr, &format!("strata: {text}")),
            Message::Explain(_) => {}
        }
    }
    let code = match report.step {
        Step::Exec { program, args } => {
            let _ = stderr.flush();
            drop(stderr);
            let e = std::process::Command::new(&program).args(&args).exec();
            let mut stderr = std::io::stderr().lock();
            say(
                &mut stderr,
                &format!(
                    "strata: error: cannot run the compiler {:?}: {e} (it is not a strata \
                     subcommand either; see `strata --help`)",
                    program.to_string_lossy()
                ),
            );
            127
        }
        Step::Exit { code, stdout, stderr: bytes } => {
            let _ = std::io::stdout().lock().write_all(&stdout);
            let _ = stderr.write_all(&bytes);
            code
        }
    };
    let mut stderr = std::io::stderr().lock();
    for message in report.messages.iter().filter(|_| !exec) {
        if let Message::Explain(text) = message {
            say(&mut stderr, &format!("strata: {text}"));
        }
    }
    code
}

/// Writes `line` and a newline to stderr in one `write`, so that the lines of compiles
/// running at once (`make -j`, `ninja`) do not interleave within a line (a pipe takes up to
/// 4 KiB in one piece).
fn say(stderr: &mut impl Write, line: &str) {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let _ = stderr.write_all(&bytes);
}
