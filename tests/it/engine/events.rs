//! The JSONL event log: one `cache_result` per outcome with key, domain, unit and integer
//! millisecond durations; lock waits; an unusable log never changes an outcome.

use std::time::Duration;

use serde_json::Value;

use super::{LockHolder, RUN_TIMEOUT, TestContext, wait_bounded};

fn read_events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn assert_ms(e: &Value, field: &str) -> u64 {
    e[field].as_u64().unwrap_or_else(|| panic!("{field} is not a non-negative integer in {e}"))
}

#[test]
fn engine_events_miss_saved_hit_with_keys_and_millisecond_durations() {
    let ctx = TestContext::new();
    let log = ctx.path("logs/flag.jsonl");
    let out = ctx.path("out");
    let action = ctx
        .third_party("ev", &out)
        .flag("--event-log", &log)
        .sh("sleep 0.3; echo x > out/a; echo yy > out/b");
    let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    ctx.run(&action).expect(&["HIT"]);
    assert!(ctx.events().is_empty(), "--event-log takes precedence over STRATA_EVENT_LOG");

    let results: Vec<Value> =
        read_events(&log).into_iter().filter(|e| e["event"] == "cache_result").collect();
    let statuses: Vec<&str> = results.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["MISS", "SAVED", "HIT"]);
    for e in &results {
        assert_eq!(e["key"], key.as_str(), "{e}");
        assert_eq!(e["domain"], "third_party", "{e}");
        assert_eq!(e["unit"], "ev", "{e}");
        assert!(e["pid"].as_u64().is_some() && e["ts_ms"].as_u64().is_some(), "{e}");
    }
    let (miss, saved, hit) = (&results[0], &results[1], &results[2]);
    assert_ms(miss, "hash_ms");
    assert_ms(miss, "lookup_ms");
    let build_ms = assert_ms(saved, "build_ms");
    assert!((300..10_000).contains(&build_ms), "build_ms={build_ms} for a 0.3 s build");
    assert_ms(saved, "save_ms");
    assert!(assert_ms(saved, "total_ms") >= build_ms);
    assert_eq!(saved["artifacts"], 2);
    for f in ["hash_ms", "lookup_ms", "restore_ms", "total_ms"] {
        assert_ms(hit, f);
    }
    assert_eq!((hit["artifacts"].as_u64(), hit["bytes"].as_u64()), (Some(2), Some(5)));
}

#[test]
fn engine_events_unwritable_log_never_changes_the_outcome() {
    let ctx = TestContext::new();
    let file = ctx.write("plain-file", "x");
    let dir = ctx.path("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    let bad_logs = [file.join("events.jsonl"), dir.clone(), "/proc/1/no/such/log.jsonl".into()];
    for (i, bad) in bad_logs.iter().enumerate() {
        let out = ctx.path(&format!("out{i}"));
        let by_flag = ctx.third_party(&format!("u{i}"), &out).flag("--event-log", bad).cmd(&[
            "sh".as_ref(),
            "-c".as_ref(),
            "echo x > \"$0\"/a".as_ref(),
            out.as_os_str(),
        ]);
        ctx.run(&by_flag).expect(&["MISS", "SAVED"]);
        ctx.run(&by_flag).expect(&["HIT"]);
        let by_env = ctx.third_party(&format!("v{i}"), &out).env("STRATA_EVENT_LOG", bad).cmd(&[
            "sh".as_ref(),
            "-c".as_ref(),
            "echo y > \"$0\"/b".as_ref(),
            out.as_os_str(),
        ]);
        ctx.run(&by_env).expect(&["MISS", "SAVED"]);
        ctx.run(&by_env).expect(&["HIT"]);
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn engine_events_lock_wait_and_timeout_are_logged() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let action = ctx.third_party("wait", &out).sh("echo x > out/a");
    let explained = ctx.explain(&action, true);
    let key: Value = serde_json::from_str(&explained.stdout).unwrap();
    let loc = ctx.third_party_entry("wait", key["key"].as_str().unwrap());

    // Held until strata reports waiting (at 1 s), with a 30 s timeout: then lock_acquired.
    let holder = LockHolder::hold(&loc.lock);
    let child = ctx.spawn(&action.clone().env("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS", "30"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !ctx.events().iter().any(|e| e["event"] == "lock_wait") {
        assert!(std::time::Instant::now() < deadline, "no lock_wait event");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    drop(holder);
    wait_bounded(child, RUN_TIMEOUT).expect(&["MISS", "SAVED"]);
    // Held throughout with a 0.2 s timeout: lock_timeout, then BYPASS.
    let _holder = LockHolder::hold(&loc.lock);
    ctx.run(&action.clone().env("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS", "0.2")).expect(&["BYPASS"]);

    let locks: Vec<(String, u64)> = ctx
        .events()
        .into_iter()
        .filter(|e| e["event"].as_str().unwrap().starts_with("lock_"))
        .map(|e| {
            assert_eq!(e["lock"], "entry", "{e}");
            assert_eq!(e["path"], loc.lock.display().to_string().as_str(), "{e}");
            (e["event"].as_str().unwrap().to_owned(), assert_ms(&e, "waited_ms"))
        })
        .collect();
    let names: Vec<&str> = locks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["lock_wait", "lock_acquired", "lock_timeout"]);
    assert!((1000..2000).contains(&locks[0].1), "{locks:?}");
    assert!((locks[0].1 + 100..30_000).contains(&locks[1].1), "{locks:?}");
    assert!((200..5_000).contains(&locks[2].1), "{locks:?}");
}
