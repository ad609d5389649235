//! A closed stdout or stderr is not a crash (issue 7 item 9).
//!
//! `KEY=$(strata snapshot key ... | head -n 1)` exited 101 with a broken-pipe panic in
//! about 1 run in 40 (`println!` panics on `EPIPE`, Rust ignores `SIGPIPE`), and `bash -eo
//! pipefail` failed the job. Every command here runs with stdout, stderr or both being a
//! pipe whose reader is already closed (so every write fails with `EPIPE`), and must end
//! with the exit status it has with open streams, without a panic.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::engine::{TestContext, write_file};
use crate::snapshot::IMAGE;

/// Which standard streams are closed pipes.
#[derive(Debug, Clone, Copy)]
enum Closed {
    Stdout,
    Stderr,
    Both,
}

/// How one run ended: exit code (128 + signal when killed), stderr when it was open.
#[derive(Debug)]
struct Ended {
    code: i32,
    stderr: String,
}

/// A pipe whose read end is already closed: writes to the returned end fail with EPIPE.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

/// Reads `stream` (if piped) to its end on a thread.
fn drain<R: Read + Send + 'static>(stream: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut stream) = stream {
            let _ = stream.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Runs `command` with `closed` streams (the others piped), bounded to 60 s.
fn run_closed(mut command: Command, closed: Closed) -> Ended {
    command.stdin(Stdio::null());
    let (out, err) = match closed {
        Closed::Stdout => (closed_pipe(), Stdio::piped()),
        Closed::Stderr => (Stdio::piped(), closed_pipe()),
        Closed::Both => (closed_pipe(), closed_pipe()),
    };
    command.stdout(out).stderr(err);
    let mut child = command.spawn().unwrap();
    let t_out = drain(child.stdout.take());
    let t_err = drain(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("strata did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = t_out.join();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    let code = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
        (Some(c), _) => c,
        (_, Some(signal)) => 128 + signal,
        _ => -1,
    };
    Ended { code, stderr }
}

/// One command of the table: a name, how to build it, the exit status it must end with.
struct Case {
    name: &'static str,
    command: Command,
    code: i32,
}

fn strata(ctx: &TestContext, args: &[&str]) -> Command {
    let mut command = ctx.strata();
    command.args(args);
    command
}

fn args_with(base: &[&str], extra: &[String]) -> Vec<String> {
    base.iter().map(|s| (*s).to_owned()).chain(extra.iter().cloned()).collect()
}

/// `strata action run|explain` flags of a small third-party action writing `out/o.txt`.
fn action_flags(ctx: &TestContext) -> Vec<String> {
    let out = ctx.path("out").display().to_string();
    vec![
        "--cache-root".into(),
        ctx.cache.display().to_string(),
        "--domain".into(),
        "third_party".into(),
        "--unit".into(),
        "u".into(),
        "--output-dir".into(),
        out.clone(),
        "--prepared-input".into(),
        ctx.path("src").display().to_string(),
        "--environment-profile".into(),
        "bare".into(),
        "--".into(),
        "sh".into(),
        "-c".into(),
        "echo o > \"$0\"/o.txt".into(),
        out,
    ]
}

fn artifact_flags(root: &Path) -> Vec<String> {
    crate::artifact::id_flags(root, &crate::artifact::hex('b'), "ready", &["meta.json"])
}

/// Every kind of output: results on stdout (text and JSON), HIT lines and warnings on
/// stderr, help, usage errors and failures.
fn cases(ctx: &TestContext) -> Vec<Case> {
    let key = [
        "snapshot",
        "key",
        "--architecture",
        "x64",
        "--toolchain-image",
        IMAGE,
        "--source-hash",
        "abc",
    ];
    let run = args_with(&["action", "run"], &action_flags(ctx));
    let explain = args_with(&["action", "explain"], &action_flags(ctx));
    let explain_json = args_with(&["action", "explain", "--json"], &action_flags(ctx));
    let l0_root = ctx.path("l0");
    let lookup = args_with(&["artifact", "lookup", "--json"], &artifact_flags(&l0_root));
    let lookup_text = args_with(&["artifact", "lookup"], &artifact_flags(&l0_root));
    let cache = ctx.cache.display().to_string();
    let command = |args: &[String]| {
        let mut c = ctx.strata();
        c.args(args);
        c
    };
    let mut missing = run.clone();
    let input = missing.iter().position(|a| a == "--prepared-input").unwrap();
    missing[input + 1] = ctx.path("no-such-input").display().to_string();
    vec![
        Case { name: "snapshot key", command: strata(ctx, &key), code: 0 },
        Case {
            name: "snapshot key --json",
            command: strata(ctx, &[&key[..], &["--json"]].concat()),
            code: 0,
        },
        Case { name: "action run (HIT)", command: command(&run), code: 0 },
        Case { name: "action explain", command: command(&explain), code: 0 },
        Case { name: "action explain --json", command: command(&explain_json), code: 0 },
        Case { name: "action run (missing input, exit 1)", command: command(&missing), code: 1 },
        Case { name: "stats", command: strata(ctx, &["stats", "--cache-root", &cache]), code: 0 },
        Case {
            name: "stats --json",
            command: strata(ctx, &["stats", "--json", "--cache-root", &cache]),
            code: 0,
        },
        Case {
            name: "action prune",
            command: strata(ctx, &["action", "prune", "--cache-root", &cache]),
            code: 0,
        },
        Case { name: "artifact lookup --json (MISS, exit 3)", command: command(&lookup), code: 3 },
        Case { name: "artifact lookup (MISS, exit 3)", command: command(&lookup_text), code: 3 },
        Case { name: "--help", command: strata(ctx, &["--help"]), code: 0 },
        Case { name: "--version", command: strata(ctx, &["--version"]), code: 0 },
        Case { name: "snapshot --help", command: strata(ctx, &["snapshot", "--help"]), code: 0 },
        Case { name: "usage error (exit 2)", command: strata(ctx, &["action", "nope"]), code: 2 },
    ]
}

#[test]
fn r7_closed_stdout_or_stderr_keeps_the_exit_status() {
    let ctx = TestContext::new();
    write_file(&ctx.path("src/a.c"), "int a;\n");
    // The action is saved first, so `action run` below is a HIT (its line goes to stderr).
    let mut first = ctx.strata();
    first.args(args_with(&["action", "run"], &action_flags(&ctx)));
    let saved = crate::engine::run_bounded(first, Duration::from_secs(60));
    saved.expect(&["MISS", "SAVED"]);
    // The exit status each case has with open streams: the reference for the table.
    for case in cases(&ctx) {
        let open = crate::engine::run_bounded(case.command, Duration::from_secs(60));
        assert_eq!(open.code, case.code, "{} with open streams: {}", case.name, open.stderr);
    }
    for closed in [Closed::Stdout, Closed::Stderr, Closed::Both] {
        for case in cases(&ctx) {
            let ended = run_closed(case.command, closed);
            assert!(
                !ended.stderr.contains("panicked"),
                "{} {closed:?}: {}",
                case.name,
                ended.stderr
            );
            assert_eq!(
                ended.code, case.code,
                "{} with {closed:?} closed (101 is a panic): {}",
                case.name, ended.stderr
            );
        }
    }
    // The HIT still restored its output with both streams closed.
    std::fs::remove_file(ctx.path("out/o.txt")).unwrap();
    let mut hit = ctx.strata();
    hit.args(args_with(&["action", "run"], &action_flags(&ctx)));
    assert_eq!(run_closed(hit, Closed::Both).code, 0);
    assert_eq!(std::fs::read_to_string(ctx.path("out/o.txt")).unwrap(), "o\n");
}

/// The documented pipeline, `strata snapshot key ... | head -n 1`, under `bash -o
/// pipefail`: a bounded number of rounds, every one exits 0 with the primary key.
#[test]
fn r7_snapshot_key_piped_into_head_exits_zero() {
    let ctx = TestContext::new();
    let script = format!(
        "set -o pipefail; for i in $(seq 40); do \
           k=$(\"$0\" snapshot key --architecture x64 --toolchain-image '{IMAGE}' --source-hash abc | head -n 1) \
             || {{ echo \"round $i: exit $?\" >&2; exit 1; }}; \
           [ ${{#k}} -gt 20 ] || {{ echo \"round $i: key $k\" >&2; exit 1; }}; \
         done"
    );
    let mut command = Command::new("bash");
    command.arg("-c").arg(script).arg(crate::strata_exe()).current_dir(&ctx.root);
    let run = crate::engine::run_bounded(command, Duration::from_secs(120));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}
