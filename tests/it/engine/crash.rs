//! Crash safety (DESIGN.md invariant 3): `kill -9` at random points while an entry is being
//! saved (or an invalid one replaced) never leaves a partial entry behind: afterwards there
//! is no entry, the old invalid one, or a complete one; the next run never fails because of
//! leftovers; `strata action prune` removes them.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use super::{TestContext, load_manifest, random_bytes, tree_files};

const TRIALS: usize = 50;

/// What a killed run left where the entry belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    NoEntry,
    Complete,
    OldInvalid,
}

fn classify(entry: &Path, expected: &[(String, Vec<u8>)]) -> Left {
    if !entry.exists() {
        return Left::NoEntry;
    }
    if std::fs::read(entry.join("manifest.json")).is_ok_and(|m| m == b"[]") {
        return Left::OldInvalid;
    }
    // Anything else must be complete: a verified manifest and every artifact byte.
    let m = load_manifest(entry);
    assert_eq!(m.artifacts.len(), expected.len(), "partial entry at {}", entry.display());
    assert_eq!(tree_files(&entry.join("artifacts")), expected, "partial entry bytes");
    Left::Complete
}

/// Staging directories and moved-aside entries under the cache.
fn leftovers(ctx: &TestContext) -> usize {
    ctx.cache_dirs_containing(".tmp-").len() + ctx.cache_dirs_containing(".old-").len()
}

#[test]
fn engine_crash_kill_9_during_save_never_leaves_a_partial_entry() {
    let started = Instant::now();
    let ctx = TestContext::new();
    let src = ctx.path("src");
    for i in 0..24 {
        ctx.write(&format!("src/f{i:02}.bin"), random_bytes(192 * 1024, i));
    }
    let expected = tree_files(&src);
    let out = ctx.path("out");
    let action = ctx.third_party("crash", &out).cmd(&[
        "cp".as_ref(),
        "-R".as_ref(),
        src.join(".").as_os_str(),
        out.as_os_str(),
    ]);

    // Calibrate: the wall time of a complete MISS + save.
    let mut full = Duration::ZERO;
    let mut key = String::new();
    for _ in 0..2 {
        if ctx.cache.exists() {
            std::fs::remove_dir_all(&ctx.cache).unwrap();
        }
        let _ = std::fs::remove_dir_all(&out);
        let t = Instant::now();
        key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
        full = full.max(t.elapsed());
    }
    let entry = ctx.third_party_entry("crash", &key).dir;
    let window_ms = (full.as_millis() as u64 * 3 / 2).max(20);

    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let mut tally = std::collections::BTreeMap::<String, usize>::new();
    for trial in 0..TRIALS {
        // Even trials save a new entry, odd ones replace an invalid one.
        let replacing = trial % 2 == 1;
        if entry.exists() {
            if replacing {
                std::fs::write(entry.join("manifest.json"), "[]").unwrap();
            } else {
                std::fs::remove_dir_all(&entry).unwrap();
            }
        } else if replacing {
            // No entry to replace: make one that is invalid.
            std::fs::create_dir_all(entry.join("artifacts")).unwrap();
            std::fs::write(entry.join("manifest.json"), "[]").unwrap();
        }
        let _ = std::fs::remove_dir_all(&out);
        let leftovers_before = leftovers(&ctx);

        let delay = Duration::from_millis(rng.u64(0..=window_ms));
        let mut cmd = ctx.command(&action, &["action", "run"]);
        cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(delay);
        // The whole group: strata and the `cp` it may be running.
        let _ = kill_process_group(Pid::from_child(&child), Signal::KILL);
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "killed strata did not exit");
            std::thread::sleep(Duration::from_millis(2));
        }
        let left = classify(&entry, &expected);
        *tally.entry(format!("{left:?}")).or_default() += 1;
        if leftovers(&ctx) > leftovers_before {
            *tally.entry("killed during save".into()).or_default() += 1;
        }

        // A normal run now: never a failure, never a partial HIT, always the right bytes.
        let _ = std::fs::remove_dir_all(&out);
        let r = ctx.run(&action);
        let (statuses, warnings): (&[&str], usize) = match left {
            Left::NoEntry => (&["MISS", "SAVED"], 0),
            Left::Complete => (&["HIT"], 0),
            Left::OldInvalid => (&["MISS", "SAVED"], 1),
        };
        assert_eq!(
            (r.code, r.statuses(), r.warnings().len()),
            (0, statuses.to_vec(), warnings),
            "trial {trial} (delay {delay:?}, left {left:?}):\n{}",
            r.stderr
        );
        assert_eq!(tree_files(&out), expected, "trial {trial}: output bytes");
        assert_eq!(classify(&entry, &expected), Left::Complete);
    }
    eprintln!("crash trials: {tally:?} in {:?} (window {window_ms} ms)", started.elapsed());
    assert!(
        tally.get("killed during save").copied().unwrap_or(0) > 0,
        "no kill landed during a save; the calibration is off: {tally:?}"
    );

    // prune removes every leftover; the entry survives and still HITs.
    let before = leftovers(&ctx);
    let p = ctx.prune(&["--json"]);
    p.expect_code(0);
    let report: serde_json::Value = serde_json::from_str(&p.stdout).unwrap();
    assert_eq!(report["removed"].as_array().unwrap().len(), before, "{}", p.stdout);
    assert!(ctx.cache_dirs_containing(".tmp-").is_empty());
    assert!(ctx.cache_dirs_containing(".old-").is_empty());
    let _ = std::fs::remove_dir_all(&out);
    ctx.run(&action).expect(&["HIT"]);
    assert_eq!(tree_files(&out), expected);
}
