//! Locks and exit codes (DESIGN.md §5): entry lock timeout → BYPASS, action and publish lock
//! timeouts → 75, usage errors → 2 before anything runs, the build's own code, 128 + signal,
//! 1 naming the path for a missing declared input.

use std::path::Path;
use std::time::{Duration, Instant};

use strata::action::layout::CacheRoot;
use strata::action::publish::{ActionId, action_lock_path};

use super::{Action, CustomOp, LockHolder, TestContext, count_lines, write_file};

/// A third_party action that counts its runs and writes `out/f.txt`.
fn counting(ctx: &TestContext, unit: &str) -> Action {
    let counter = ctx.path(&format!("{unit}.count"));
    let script = format!(
        "echo run >> '{}'; echo built > '{}/f.txt'",
        counter.display(),
        ctx.path(unit).display()
    );
    ctx.third_party(unit, &ctx.path(unit)).sh(&script)
}

fn runs(ctx: &TestContext, unit: &str) -> usize {
    count_lines(&ctx.path(&format!("{unit}.count")))
}

/// The seconds printed in a lock timeout message.
fn waited_in(stderr: &str) -> f64 {
    let rest = stderr.split("timed out after ").nth(1).unwrap();
    rest.split('s').next().unwrap().parse().unwrap()
}

fn explain_key(ctx: &TestContext, action: &Action) -> String {
    let r = ctx.explain(action, true);
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    v["key"].as_str().unwrap().to_owned()
}

#[test]
fn engine_locks_entry_lock_timeout_bypasses_the_cache_and_still_builds() {
    let ctx = TestContext::new();
    let action = counting(&ctx, "busy").env("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS", "0.2");
    let key = explain_key(&ctx, &action);
    let loc = ctx.third_party_entry("busy", &key);
    let holder = LockHolder::hold(&loc.lock);
    let t = Instant::now();
    let r = ctx.run(&action);
    let waited = t.elapsed();
    r.expect(&["BYPASS"]).expect_stderr(&loc.lock.display().to_string());
    assert!(waited >= Duration::from_millis(200), "waited {waited:?}");
    assert_eq!(runs(&ctx, "busy"), 1, "the build ran without the cache");
    assert_eq!(std::fs::read(ctx.path("busy/f.txt")).unwrap(), b"built\n");
    assert!(!loc.dir.exists(), "nothing saved on BYPASS");
    assert!(!ctx.updated_marker().exists());
    let bypass: Vec<_> =
        ctx.events().into_iter().filter(|e| e["event"] == "cache_result").collect();
    assert_eq!(bypass.len(), 1);
    assert_eq!(bypass[0]["status"], "BYPASS");
    assert_eq!(bypass[0]["key"], key.as_str());
    assert!(bypass[0]["reason"].as_str().unwrap().contains("entry lock"));
    assert!(bypass[0]["hash_ms"].as_u64().is_some(), "{}", bypass[0]);
    assert!(bypass[0]["total_ms"].as_u64().is_some_and(|t| t >= 200), "{}", bypass[0]);

    assert_eq!(
        ctx.redact(&r.stderr),
        "strata: BYPASS domain=third_party unit=busy reason=cache lock unavailable: timed out \
         after 0.200s waiting for the entry lock [ROOT]/cache/.locks/entry/[KEY].lock (raise \
         STRATA_ENTRY_LOCK_TIMEOUT_SECONDS or check for a hung build holding it)\n"
            .replace("0.200s", &format!("{:.3}s", waited_in(&r.stderr)))
    );

    drop(holder);
    let r = ctx.run(&action);
    assert_eq!(
        ctx.redact(&r.stderr),
        "strata: MISS domain=third_party unit=busy key=[KEY]\n\
         strata: SAVED domain=third_party unit=busy key=[KEY] artifacts=1 build_seconds=[S]\n"
    );
    let r = ctx.run(&action);
    assert_eq!(
        ctx.redact(&r.stderr),
        "strata: HIT domain=third_party unit=busy key=[KEY] artifacts=1\n"
    );
    assert_eq!(runs(&ctx, "busy"), 2);
}

#[test]
fn engine_locks_action_publish_and_output_lock_timeouts_exit_75() {
    let ctx = TestContext::new();
    let source = ctx.path("op/src");
    write_file(&source.join("k.c"), "k");
    let (stage, publish, state) = (ctx.path("stage"), ctx.path("publish"), ctx.path("state"));
    let counter = ctx.path("op.count");
    let op = CustomOp {
        unit: "u",
        soc: "s",
        operator: "o",
        action: "a",
        source: &source,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let script = format!("echo run >> '{}'; echo k > '{}/k.o'", counter.display(), stage.display());
    let action = ctx.custom(&op).sh(&script);
    let id =
        ActionId { unit: "u".into(), soc: "s".into(), operator: "o".into(), action: "a".into() };

    // The action lock: exit 75 before anything is built, naming the lock and the variable.
    let lock = action_lock_path(&state, &id);
    let holder = LockHolder::hold(&lock);
    let r = ctx.run(&action.clone().env("STRATA_ACTION_LOCK_TIMEOUT_SECONDS", "0.2"));
    r.expect_code(75)
        .expect_stderr(&lock.display().to_string())
        .expect_stderr("STRATA_ACTION_LOCK_TIMEOUT_SECONDS");
    assert_eq!(count_lines(&counter), 0);
    drop(holder);

    // The publish lock: the build runs, publication times out, nothing is saved.
    let lock = state.join(".publish.lock");
    let holder = LockHolder::hold(&lock);
    let r = ctx.run(&action.clone().env("STRATA_PUBLISH_LOCK_TIMEOUT_SECONDS", "0.2"));
    r.expect_code(75).expect_stderr(&lock.display().to_string());
    assert_eq!(r.statuses(), ["MISS"]);
    assert!(!publish.join("k.o").exists());
    drop(holder);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    assert_eq!(count_lines(&counter), 2);

    // Third party: the per-output-directory lock.
    let tp = counting(&ctx, "tp").env("STRATA_ACTION_LOCK_TIMEOUT_SECONDS", "0.2");
    let lock = CacheRoot::new(&ctx.cache).unwrap().output_lock(&ctx.path("tp"));
    let holder = LockHolder::hold(&lock);
    ctx.run(&tp).expect_code(75).expect_stderr(&lock.display().to_string());
    assert_eq!(runs(&ctx, "tp"), 0);
    drop(holder);
    ctx.run(&tp).expect(&["MISS", "SAVED"]);
}

#[test]
fn engine_locks_timeout_values_are_validated() {
    let ctx = TestContext::new();
    for var in [
        "STRATA_ENTRY_LOCK_TIMEOUT_SECONDS",
        "STRATA_ACTION_LOCK_TIMEOUT_SECONDS",
        "STRATA_PUBLISH_LOCK_TIMEOUT_SECONDS",
    ] {
        for bad in ["60s", "-1", "nan", "1e999", "ten"] {
            let r = ctx.run(&counting(&ctx, "t").env(var, bad));
            r.expect_code(2).expect_stderr(var);
            assert!(r.statuses().is_empty(), "{var}={bad}: nothing runs:\n{}", r.stderr);
        }
    }
    assert_eq!(runs(&ctx, "t"), 0);
    for good in ["0", "0.5", "inf", "", " 2 "] {
        ctx.run(&counting(&ctx, "t").env("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS", good)).expect_code(0);
    }
}

#[test]
fn engine_exit_codes_of_failing_and_killed_builds() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let r = ctx.run(&ctx.third_party("fail", &out).sh("echo partial > out/f; exit 3"));
    assert_eq!((r.code, r.statuses()), (3, vec!["MISS"]), "{}", r.stderr);
    let r = ctx.run(&ctx.third_party("kill", &out).sh("echo partial > out/g; kill -9 $$"));
    assert_eq!((r.code, r.statuses()), (137, vec!["MISS"]), "{}", r.stderr);
    r.expect_stderr("strata: build command killed by signal 9");
    let r = ctx.run(&ctx.third_party("term", &out).sh("kill -TERM $$"));
    assert_eq!(r.code, 128 + 15, "{}", r.stderr);
    // Nothing was saved, and the snapshot gate stays closed.
    assert!(!ctx.cache.join("actions-v1/third_party/fail").exists());
    assert!(!ctx.cache.join("actions-v1/third_party/kill").exists());
    assert!(!ctx.updated_marker().exists());
    assert_eq!(ctx.event_statuses(), ["MISS", "MISS", "MISS"]);
}

#[test]
fn engine_exit_codes_of_usage_errors_and_missing_inputs() {
    let ctx = TestContext::new();
    let base = counting(&ctx, "usage");
    ctx.run(&base).expect(&["MISS", "SAVED"]);

    // A malformed --set-env is a usage error even though the entry would HIT.
    for bad in ["NOEQUALS", "=value"] {
        let r = ctx.run(&base.clone().flag("--set-env", bad));
        r.expect_code(2).expect_stderr(bad);
        assert!(r.statuses().is_empty(), "{}", r.stderr);
    }
    ctx.run(&base).expect(&["HIT"]);
    assert_eq!(runs(&ctx, "usage"), 1);

    // A declared input that does not exist: exit 1 naming the path, before building.
    let missing = ctx.path("no/such/header.h");
    for flag in ["--prepared-input", "--recipe-file", "--environment-file"] {
        let r = ctx.run(&base.clone().flag(flag, &missing));
        r.expect_code(1).expect_stderr(&missing.display().to_string());
        assert!(r.statuses().is_empty(), "{flag}: {}", r.stderr);
    }
    ctx.run(&base.clone().flag("--environment-tool", "no-such-compiler-xyz"))
        .expect_code(1)
        .expect_stderr("no-such-compiler-xyz");
    assert_eq!(runs(&ctx, "usage"), 1);

    // Custom operators need their publication flags: usage errors.
    let source = ctx.path("opsrc");
    std::fs::create_dir_all(&source).unwrap();
    let flags = [
        ("--soc", "s".into()),
        ("--operator", "o".into()),
        ("--action", "a".into()),
        ("--operator-source", source.into_os_string()),
        ("--publish-dir", ctx.path("pub").into_os_string()),
        ("--publish-state-dir", ctx.path("state").into_os_string()),
    ];
    for skip in ["--publish-dir", "--publish-state-dir", "--operator-source", "--soc"] {
        let mut a = Action::default()
            .flag("--cache-root", &ctx.cache)
            .flag("--domain", "custom_operator")
            .flag("--unit", "usage")
            .flag("--output-dir", ctx.path("stage"))
            .flag("--environment-profile", "bare");
        for (flag, value) in flags.iter().filter(|(f, _)| *f != skip) {
            a = a.flag(flag, value);
        }
        let r = ctx.run(&a.sh("echo k > stage/k.o"));
        r.expect_code(2).expect_stderr(&format!("the custom_operator domain requires {skip}"));
    }
    // No build command at all.
    let mut cmd = ctx.strata();
    cmd.args([
        "action",
        "run",
        "--domain",
        "third_party",
        "--unit",
        "x",
        "--environment-profile",
        "bare",
    ])
    .arg("--cache-root")
    .arg(&ctx.cache)
    .arg("--output-dir")
    .arg(ctx.path("x"));
    super::run_bounded(cmd, super::RUN_TIMEOUT).expect_code(2);
    assert!(!Path::new(&ctx.path("pub")).exists(), "nothing was published");
}
