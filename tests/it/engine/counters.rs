//! Hit and miss counters per domain (issue 11 item 5): `strata action run` counts its HIT,
//! MISS and BYPASS per domain beside the launcher's compilations, and `strata stats` (text
//! and JSON) and the step summary of `strata snapshot save` show hits, misses and the hit
//! rate per domain.

use super::{CustomOp, LockHolder, RUN_TIMEOUT, TestContext, run_bounded, write_file};

fn stats(ctx: &TestContext, extra: &[&str]) -> super::RunResult {
    let mut cmd = ctx.strata();
    cmd.arg("stats").args(extra).arg("--cache-root").arg(&ctx.cache);
    let run = run_bounded(cmd, RUN_TIMEOUT);
    run.expect_code(0);
    run
}

#[test]
fn r11_action_runs_and_compilations_are_counted_per_domain() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let action = ctx.third_party("ok", &out).sh("echo ok > out/ok.txt");
    let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    ctx.run(&action).expect(&["HIT"]);
    ctx.run(&action).expect(&["HIT"]);
    // A failed build was a miss all the same.
    ctx.run(&ctx.third_party("fail", &out).sh("exit 3")).expect_code(3);
    let loc = ctx.third_party_entry("ok", &key);
    let holder = LockHolder::hold(&loc.lock);
    ctx.run(&action.clone().env("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS", "0")).expect(&["BYPASS"]);
    drop(holder);

    let (publish, state, stage) = (ctx.path("publish"), ctx.path("state"), ctx.path("stage"));
    let src = ctx.path("opsrc");
    write_file(&src.join("k.c"), "k");
    let op = CustomOp {
        unit: "u",
        soc: "s",
        operator: "op",
        action: "a",
        source: &src,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let script = "echo k > \"$0\"/k.o";
    let custom =
        ctx.custom(&op).cmd(&["sh".as_ref(), "-c".as_ref(), script.as_ref(), stage.as_os_str()]);
    ctx.run(&custom).expect(&["MISS", "SAVED"]);

    // Two compilations through the launcher: a miss, then a hit.
    write_file(&ctx.path("a.c"), "int a(void) { return 1; }\n");
    for _ in 0..2 {
        let mut cmd = ctx.strata();
        cmd.args(["compile", "--cache-root"]).arg(&ctx.cache);
        cmd.args(["--", "gcc", "-c", "a.c", "-o", "a.o"]);
        run_bounded(cmd, RUN_TIMEOUT).expect_code(0);
    }

    let json: serde_json::Value = serde_json::from_str(&stats(&ctx, &["--json"]).stdout).unwrap();
    let third = &json["third_party"];
    assert_eq!((third["hits"].as_u64(), third["misses"].as_u64()), (Some(2), Some(2)), "{json}");
    assert_eq!(third["hit_rate_percent"].as_f64(), Some(50.0), "{json}");
    assert_eq!(third["bypasses"].as_u64(), Some(1), "{json}");
    let custom = &json["custom_operator"];
    assert_eq!((custom["hits"].as_u64(), custom["misses"].as_u64()), (Some(0), Some(1)));
    assert_eq!(custom["hit_rate_percent"].as_f64(), Some(0.0), "{json}");
    let compile = &json["compile"];
    assert_eq!((compile["hits"].as_u64(), compile["misses"].as_u64()), (Some(1), Some(1)));
    assert_eq!(compile["hit_rate_percent"].as_f64(), Some(50.0), "{json}");
    assert_eq!(compile["counters"]["hit"].as_u64(), Some(1), "{json}");

    let text = stats(&ctx, &[]).stdout;
    assert!(
        text.contains(
            "third_party: 1 entries, 3 artifact bytes; 2 hits, 2 misses (50.0 % hit rate), \
             1 bypasses\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "custom_operator: 1 entries, 2 artifact bytes; 0 hits, 1 misses (0.0 % hit rate)\n"
        ),
        "{text}"
    );
    assert!(text.contains("object bytes; 1 hits, 1 misses (50.0 % hit rate)\n"), "{text}");

    // The step summary of the save that follows the build.
    let summary = ctx.path("summary.md");
    let mut cmd = ctx.strata();
    cmd.args(["snapshot", "save", "--cache-dir"]).arg(&ctx.cache);
    cmd.args(["--key", "k-1", "--store"]).arg(format!("file://{}", ctx.path("store").display()));
    cmd.env("GITHUB_STEP_SUMMARY", &summary).env("GITHUB_OUTPUT", ctx.path("output"));
    cmd.arg("--github-output");
    run_bounded(cmd, RUN_TIMEOUT).expect_code(0);
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(
        summary.contains(
            "| hit rate per domain | third_party 2/4 (50.0 %) · custom_operator 0/1 (0.0 %) · \
             compile 1/2 (50.0 %) |"
        ),
        "{summary}"
    );

    // --zero resets every domain.
    stats(&ctx, &["--zero"]);
    let json: serde_json::Value = serde_json::from_str(&stats(&ctx, &["--json"]).stdout).unwrap();
    for domain in ["third_party", "custom_operator", "compile"] {
        assert_eq!(json[domain]["hits"].as_u64(), Some(0), "{json}");
        assert_eq!(json[domain]["misses"].as_u64(), Some(0), "{json}");
        assert!(json[domain]["hit_rate_percent"].is_null(), "{json}");
    }
}
