//! Runs one command under `strata::launcher::trace` and prints what tracing it cost and saw
//! (issue 25's per-TU measurements):
//!
//! ```text
//! cargo build --release --bin strata --example trace
//! target/release/examples/trace [--plain | --full] [--ptrace | --notify] [--events] -- gcc -O2 -c big.cpp -o big.o
//! ```
//!
//! The shim is the `strata` binary of the same build (`target/release/strata`, two
//! directories up from this example), or the one `STRATA_TRACE_SHIM` names. The summary
//! line (stderr) gives the exit status, the system call stops, the events by operation, the
//! absent paths (events and distinct paths), the reasons the record is incomplete, and the
//! wall time. `--plain` runs the command untraced from the same process (the baseline for
//! comparisons, e.g. with hyperfine); `--full` traces `readlink` too; `--ptrace` and
//! `--notify` choose the mechanism (default: the launcher's, notification where the kernel
//! has it); `--events` lists every event.

#![allow(clippy::print_stderr)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

use strata::launcher::trace::{self, Coverage, Mechanism, Observed, Request, Shim};

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let split =
        args.iter().position(|a| a == "--").ok_or("usage: trace [OPTIONS] -- COMMAND...")?;
    let command = args.split_off(split + 1);
    let (plain, full, list) = (
        args.iter().any(|a| a == "--plain"),
        args.iter().any(|a| a == "--full"),
        args.iter().any(|a| a == "--events"),
    );
    let mechanism = if args.iter().any(|a| a == "--ptrace") {
        Mechanism::Ptrace
    } else if args.iter().any(|a| a == "--notify") {
        Mechanism::Notify
    } else {
        Mechanism::Auto
    };
    let (program, rest) = command.split_first().ok_or("no command after --")?;
    let started = Instant::now();
    if plain {
        let status = Command::new(program).args(rest).status()?;
        eprintln!("plain: {status} in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
        return Ok(ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1)));
    }
    let shim = match std::env::var_os("STRATA_TRACE_SHIM") {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .ok_or("no build directory")?
            .join("strata"),
    };
    let program_path = PathBuf::from(program);
    let mut request = Request::new(&program_path, program, rest);
    request.shim = Shim::Binary(&shim);
    request.mechanism = mechanism;
    if full {
        request.coverage = Coverage::Full;
    }
    let traced = trace::run(&request)?;
    let elapsed = started.elapsed();
    let mut by_op: BTreeMap<String, usize> = BTreeMap::new();
    for event in &traced.events {
        let name = format!("{:?}", event.op);
        let name = name.split([' ', '{', '(']).next().unwrap_or_default().to_owned();
        *by_op.entry(name).or_default() += 1;
    }
    let absent: Vec<_> = traced.events.iter().filter(|e| e.observed == Observed::Absent).collect();
    let distinct_absent: BTreeSet<_> = absent.iter().map(|e| &e.path).collect();
    if list {
        for event in &traced.events {
            eprintln!("{event:?}");
        }
    }
    eprintln!(
        "traced: {} in {:.1} ms; stops {}; events {} {by_op:?}; absent {} ({} distinct paths); \
         incomplete {:?}",
        traced.status,
        elapsed.as_secs_f64() * 1e3,
        traced.stops,
        traced.events.len(),
        absent.len(),
        distinct_absent.len(),
        traced.incomplete
    );
    Ok(ExitCode::from(u8::try_from(traced.status.code().unwrap_or(1)).unwrap_or(1)))
}
