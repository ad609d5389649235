//! `<cache>/.updated` (the snapshot save gate) appears only when an entry was newly saved:
//! not on a HIT, a BYPASS, a failed or killed build, a build with nothing to cache, a
//! publication conflict or an explain.

use super::{CustomOp, LockHolder, TestContext, write_file};

#[test]
fn engine_updated_marker_only_after_a_new_entry() {
    let ctx = TestContext::new();
    let marker = ctx.updated_marker();
    let out = ctx.path("out");
    let absent = |what: &str| assert!(!marker.exists(), "{what} must not create .updated");

    ctx.run(&ctx.third_party("fail", &out).sh("echo x > out/f; exit 3")).expect_code(3);
    absent("a failed build");
    ctx.run(&ctx.third_party("kill", &out).sh("echo x > out/g; kill -9 $$")).expect_code(137);
    absent("a killed build");
    let nothing = ctx.run(&ctx.third_party("nothing", &out).sh("true"));
    nothing.expect(&["MISS"]);
    assert!(nothing.stderr.contains("produced no cacheable artifacts"), "{}", nothing.stderr);
    absent("a build with no artifacts");

    let action = ctx.third_party("ok", &out).sh("echo ok > out/ok.txt");
    ctx.explain(&action, false).expect_code(0);
    absent("explain");
    let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    assert!(marker.is_file(), "a saved entry creates .updated");

    std::fs::remove_file(&marker).unwrap();
    ctx.run(&action).expect(&["HIT"]);
    absent("a HIT");

    let loc = ctx.third_party_entry("ok", &key);
    let holder = LockHolder::hold(&loc.lock);
    ctx.run(&action.clone().env("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS", "0")).expect(&["BYPASS"]);
    drop(holder);
    absent("a BYPASS");

    // Replacing an invalid entry is a new save.
    std::fs::write(loc.dir.join("manifest.json"), "{}").unwrap();
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    assert!(marker.is_file(), "a replaced entry creates .updated");
    std::fs::remove_file(&marker).unwrap();

    // Custom operators: a publication conflict saves nothing.
    let (publish, state) = (ctx.path("publish"), ctx.path("state"));
    let src = ctx.path("opsrc");
    write_file(&src.join("k.c"), "k");
    let custom = |operator: &'static str, stage: &'static str| {
        let stage = ctx.path(stage);
        let op = CustomOp {
            unit: "u",
            soc: "s",
            operator,
            action: "a",
            source: &src,
            stage: &stage,
            publish: &publish,
            state: &state,
        };
        ctx.custom(&op).cmd(&[
            "sh".as_ref(),
            "-c".as_ref(),
            "echo \"$1\" > \"$0\"/same.o".as_ref(),
            stage.as_os_str(),
            operator.as_ref(),
        ])
    };
    ctx.run(&custom("first", "stage1")).expect(&["MISS", "SAVED"]);
    assert!(marker.is_file());
    std::fs::remove_file(&marker).unwrap();
    ctx.run(&custom("second", "stage2"))
        .expect_code(1)
        .expect_stderr("artifact ownership collision");
    absent("a publication conflict");
    ctx.run(&custom("first", "stage1")).expect(&["HIT"]);
    absent("a custom operator HIT");
}
