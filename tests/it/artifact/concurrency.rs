//! Across processes: one build for 8 concurrent `get-or-build` calls, and kill -9 at random
//! points of publication never leaves a partial HIT or a blocked key.

use std::process::Stdio;
use std::time::{Duration, Instant};

use strata::artifact::{LookupStatus, Mode, Stage};

use super::*;

#[test]
fn eight_processes_one_build() {
    let ws = Workspace::new();
    let counter = ws.path().join("builds.log");
    let flags = id_flags(&ws.root(), &hex('b'), "generated", &["out.bin"]);
    let script = format!(
        "echo $$ >> '{}'; sleep 0.5; head -c 100000 /dev/urandom > \"$STRATA_ARTIFACT_OUT/out.bin\"",
        counter.display()
    );
    let children: Vec<_> = (0..8)
        .map(|_| {
            strata()
                .args(["artifact", "get-or-build", "--json"])
                .args(&flags)
                .args(["--", "sh", "-c", &script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut dispositions = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        dispositions.push(json(&out.stdout)["disposition"].as_str().unwrap().to_owned());
    }
    let builds = std::fs::read_to_string(&counter).unwrap();
    assert_eq!(builds.lines().count(), 1, "exactly one build: {builds}");
    dispositions.sort();
    assert_eq!(dispositions.iter().filter(|d| *d == "published").count(), 1, "{dispositions:?}");
    assert_eq!(dispositions.iter().filter(|d| *d == "hit").count(), 7, "{dispositions:?}");
}

/// 50 trials (each bounded by the time of one full run, about 60 s in all): each starts a publication of a fresh key with many
/// files and kills the process with SIGKILL at a random moment between start and the time
/// a full run takes. Afterwards the key is a MISS or a HIT that verifies completely; then
/// a normal run on the same key must finish promptly (no stuck lock), and gc cleans up.
#[test]
fn kill_9_during_publication_never_leaves_a_partial_hit() {
    let ws = Workspace::new();
    // 300 files of 16 KiB: publication copies, hashes and fsyncs each one.
    let script = "cd \"$STRATA_ARTIFACT_OUT\" && mkdir -p d && \
                  head -c 4915200 /dev/urandom | split -d -a 3 -b 16384 - d/f && echo done > marker";
    let run = |source: &str| {
        let flags = id_flags(&ws.root(), source, "generated", &["marker", "d/f299"]);
        let mut cmd = strata();
        cmd.args(["artifact", "get-or-build", "--json", "--lock-timeout", "20"])
            .args(&flags)
            .args(["--private-root", ws.private().to_str().unwrap()])
            .args(["--", "sh", "-c", script]);
        cmd
    };
    // Calibrate: how long does one complete run take?
    let start = Instant::now();
    let out = run(&source_for(100_000)).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let full = start.elapsed();
    let store = ws.store(Mode::ReadOnly);
    let s = spec(Stage::Generated, &["d/f299", "marker"]);
    let mut trials = 0u32;
    let (mut hits, mut misses) = (0, 0);
    while trials < 50 {
        let source = source_for(trials);
        let mut child = run(&source).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let delay = full.mul_f64(fastrand::f64() * 1.1);
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let lookup = store.lookup(&key_with(&source), &s);
        match lookup.status() {
            LookupStatus::Hit => {
                let handle = lookup.handle().unwrap();
                assert_eq!(handle.manifest().files.len(), 301);
                assert_eq!(std::fs::read_to_string(handle.dir().join("marker")).unwrap(), "done\n");
                hits += 1;
            }
            LookupStatus::Miss => misses += 1,
            other => panic!("trial {trials}: a crash left a visible {other:?} slot: {lookup:?}"),
        }
        trials += 1;
    }
    assert!(trials >= 50);
    eprintln!("kill -9: {trials} trials, {hits} complete HITs, {misses} MISSes");
    // Nothing blocks later runs: each killed key publishes (or HITs) promptly now.
    for n in [0, trials / 2, trials - 1] {
        let started = Instant::now();
        let out = run(&source_for(n)).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let d = json(&out.stdout)["disposition"].as_str().unwrap().to_owned();
        assert!(d == "published" || d == "hit", "{d}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "a dead process's lock blocked a later run"
        );
    }
    let out = strata()
        .args(["artifact", "gc", "--json", "--root", ws.root().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = strata()
        .args(["artifact", "verify", "--all", "--root", ws.root().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}
