//! The `strata` binary: a thin shell that parses arguments, calls the library, prints
//! results and maps errors to documented exit codes (see `cli`).
//!
//! One exception comes first: `strata __strata-trace-exec …` is the tracee side of the
//! compiler launcher's tracing (`strata::launcher::trace`, its `shim` module), checked
//! before anything else runs so that nothing but the shim happens between its start and its
//! `exec` of the compiler.

mod cli;

use std::io::Write;
use std::os::unix::process::CommandExt;

use strata::launcher::trace::shim;

fn main() {
    if std::env::args_os().nth(1).is_some_and(|arg| arg == shim::SHIM_ARG) {
        std::process::exit(trace_shim());
    }
    std::process::exit(cli::main());
}

/// Sets up tracing and becomes the program; returns (the exit status) only on failure,
/// after writing the shim's one failure line to stderr for the tracer.
fn trace_shim() -> i32 {
    let failure = match shim::prepare(std::env::args_os().skip(2)) {
        Ok(exec) => {
            let error =
                std::process::Command::new(&exec.program).arg0(&exec.argv0).args(&exec.args).exec();
            shim::exec_failed(&exec.program, &error)
        }
        Err(failure) => failure,
    };
    // Nothing else can be done if stderr is gone: the exit status still tells the tracer.
    let _ = std::io::stderr().write_all(failure.line.as_bytes());
    failure.exit_code
}
