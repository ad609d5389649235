//! `strata action explain`: with the flags of `run`, name the identity records that differ
//! from the nearest existing entry, in text and JSON, without writing to the cache.

use std::path::Path;

use serde_json::Value;

use super::{Action, CustomOp, TestContext, write_file, write_script};

fn tree(root: &Path, header: &str, tool_version: &str) {
    write_file(&root.join("src/main.c"), "#include \"foo.h\"\nint f(void) { return FOO; }\n");
    write_file(&root.join("src/inc/foo.h"), header);
    write_script(&root.join("tools/fake-cxx"), &format!("echo '{tool_version}'"));
}

fn action(ctx: &TestContext, root: &Path, second_value: &str) -> Action {
    action_of(ctx, "explained", root, second_value)
}

fn action_of(ctx: &TestContext, unit: &str, root: &Path, second_value: &str) -> Action {
    ctx.third_party(unit, &root.join("out"))
        .flag("--prepared-input", root.join("src"))
        .flag("--recipe-value", "CMAKE_BUILD_TYPE=Release")
        .flag("--recipe-value", second_value)
        .flag("--environment-tool", root.join("tools/fake-cxx"))
        .flag("--normalize-path", root)
        .cmd(&["sh".to_owned(), "-c".to_owned(), format!("echo o > {}/out/f.o", root.display())])
}

/// Every file under the cache except the machine-local tool memo, with its size.
fn cache_listing(ctx: &TestContext) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    for e in walkdir::WalkDir::new(&ctx.cache).sort_by_file_name() {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(&ctx.cache).unwrap().to_string_lossy().into_owned();
        if !rel.starts_with(".local") {
            v.push((rel, e.metadata().unwrap().len()));
        }
    }
    v
}

/// The human lines and the JSON differences, asserting both agree on the verdict.
fn explain_both(ctx: &TestContext, a: &Action) -> (String, Value) {
    let human = ctx.explain(a, false);
    human.expect_code(0);
    let json = ctx.explain(a, true);
    json.expect_code(0);
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    (human.stdout, v)
}

#[test]
fn engine_explain_names_the_component_that_changed() {
    let ctx = TestContext::new();
    let root = ctx.path("checkout");
    tree(&root, "#define FOO 1\n", "fake-cxx 1.0");
    let saved = ctx.run(&action(&ctx, &root, "BUILD_GMOCK=ON"));
    let key = saved.expect(&["MISS", "SAVED"]).key();
    let entry = ctx.third_party_entry("explained", &key).dir;
    let listing = cache_listing(&ctx);

    // Unchanged: HIT, and a relocated copy too.
    let (text, json) = explain_both(&ctx, &action(&ctx, &root, "BUILD_GMOCK=ON"));
    assert!(
        text.contains(&format!(
            "HIT: an entry for this key exists at {} and is structurally valid",
            entry.display()
        )),
        "{text}"
    );
    assert!(text.contains(&format!("key={key}")), "{text}");
    assert_eq!((json["verdict"].as_str(), json["key"].as_str()), (Some("hit"), Some(key.as_str())));
    let moved = ctx.path("moved/checkout");
    tree(&moved, "#define FOO 1\n", "fake-cxx 1.0");
    let (text, _) = explain_both(&ctx, &action(&ctx, &moved, "BUILD_GMOCK=ON"));
    assert!(text.contains("HIT:"), "{text}");

    // One change at a time, each named, with the same differences in JSON.
    let cases: [(&str, &str, &str, &str, &str, &str); 4] = [
        (
            "#define FOO 2\n",
            "fake-cxx 1.0",
            "BUILD_GMOCK=ON",
            "prepared input input[0]/inc/foo.h changed",
            "prepared_input",
            "input[0]/inc/foo.h",
        ),
        (
            "#define FOO 1\n",
            "fake-cxx 1.0",
            "BUILD_GMOCK=OFF",
            "recipe recipe_value[1] differs (\"BUILD_GMOCK=ON\" → \"BUILD_GMOCK=OFF\")",
            "recipe",
            "recipe_value[1]",
        ),
        (
            "#define FOO 1\n",
            "fake-cxx 2.0",
            "BUILD_GMOCK=ON",
            "tool fake-cxx version differs",
            "environment",
            "tool:fake-cxx",
        ),
        (
            "#define FOO 1\n/* new */\n",
            "fake-cxx 1.0",
            "BUILD_GMOCK=ON",
            "prepared input input[0]/inc/foo.h changed",
            "prepared_input",
            "input[0]/inc/foo.h",
        ),
    ];
    for (i, (header, tool, value, line, component, name)) in cases.iter().enumerate() {
        let r = ctx.path(&format!("case{i}"));
        tree(&r, header, tool);
        let (text, json) = explain_both(&ctx, &action(&ctx, &r, value));
        assert!(text.contains(&format!("MISS: nearest entry {key}")), "{text}");
        assert!(text.contains("(saved ") && text.contains(", 1 difference)"), "{text}");
        assert!(text.lines().any(|l| l.trim() == *line), "case {i}: {line:?} not in:\n{text}");
        assert_eq!(json["verdict"], "nearest");
        assert_eq!(json["nearest_key"], key.as_str(), "the nearest entry is the saved one");
        assert_eq!(json["key"].as_str().unwrap().len(), 64);
        assert_ne!(json["key"], key.as_str());
        let diffs = json["differences"].as_array().unwrap();
        assert_eq!(diffs.len(), 1, "{json}");
        assert_eq!(
            (
                diffs[0]["component"].as_str(),
                diffs[0]["name"].as_str(),
                diffs[0]["change"].as_str()
            ),
            (Some(*component), Some(*name), Some("changed"))
        );
        assert_ne!(diffs[0]["old"], diffs[0]["new"]);
    }
    // The whole human report, redacted.
    let r = ctx.path("case0");
    let text = ctx.explain(&action(&ctx, &r, "BUILD_GMOCK=ON"), false).stdout;
    assert_eq!(
        ctx.redact(&text),
        "strata: explain domain=third_party unit=explained key=[KEY]\n\
         MISS: nearest entry [KEY] (saved [TIME], 1 difference) at \
         [ROOT]/cache/actions-v1/third_party/explained/[KEY]\n  \
         prepared input input[0]/inc/foo.h changed\n"
    );

    // Two changes at once: both named.
    let r = ctx.path("two");
    tree(&r, "#define FOO 3\n", "fake-cxx 1.0");
    let (text, json) = explain_both(&ctx, &action(&ctx, &r, "BUILD_GMOCK=OFF"));
    assert!(text.contains(", 2 differences)"), "{text}");
    assert!(text.contains("prepared input input[0]/inc/foo.h changed"), "{text}");
    assert!(text.contains("recipe recipe_value[1] differs"), "{text}");
    assert_eq!(json["differences"].as_array().unwrap().len(), 2);

    assert_eq!(cache_listing(&ctx), listing, "explain never writes to the cache");

    // An existing but damaged entry is named as such.
    std::fs::write(entry.join("manifest.json"), "null").unwrap();
    let (text, json) = explain_both(&ctx, &action(&ctx, &root, "BUILD_GMOCK=ON"));
    assert!(text.contains("exists but is invalid"), "{text}");
    assert_eq!(json["verdict"], "invalid");
    // No entry for the unit at all.
    let other = action_of(&ctx, "never-built", &root, "BUILD_GMOCK=ON");
    let (text, json) = explain_both(&ctx, &other);
    assert!(text.contains("no entry for this unit/action yet"), "{text}");
    assert_eq!(json["verdict"], "no_entries");
}

#[test]
fn engine_explain_names_a_changed_operator_text() {
    let ctx = TestContext::new();
    let source = ctx.path("ops/conv");
    write_file(&source.join("kernel.c"), "/* v1 */\n");
    write_file(&source.join("tiling.h"), "/* tiling */\n");
    let (stage, publish, state) = (ctx.path("stage"), ctx.path("publish"), ctx.path("state"));
    let op = CustomOp {
        unit: "ops",
        soc: "soc1",
        operator: "conv",
        action: "compile",
        source: &source,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let action = ctx.custom(&op).cmd(&[
        "sh".as_ref(),
        "-c".as_ref(),
        "echo o > \"$0\"/conv.o".as_ref(),
        stage.as_os_str(),
    ]);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    write_file(&source.join("kernel.c"), "/* v2 */\n");
    let (text, json) = explain_both(&ctx, &action);
    assert!(text.lines().any(|l| l.trim() == "operator text kernel.c changed"), "{text}");
    let diffs = json["differences"].as_array().unwrap();
    assert_eq!(diffs.len(), 1, "{json}");
    assert_eq!(diffs[0]["component"], "operator_text");
}

/// One row of [`r7_explain_and_run_name_the_same_key`]: a name, the action (built in a
/// fresh context) and what to change between the two runs without changing the key.
type KeyCase = (&'static str, fn(&TestContext) -> Action, fn(&TestContext));

fn unchanged(_: &TestContext) {}

/// Issue 7 item 5: `explain` prepares identity with the very function `run` uses, so over
/// every flag combination that decides what is walked or recorded, explain names the key
/// run looks up: before the first run (the key run then saves under) and after it (a HIT
/// on the key run HITs). The first row is the example: `--output-dir` inside a
/// `--prepared-input` directory, where explain used to report "input[0]/out/o.txt added".
#[test]
fn r7_explain_and_run_name_the_same_key() {
    let cases: [KeyCase; 8] = [
        (
            "output dir inside the prepared input",
            |ctx| {
                ctx.write("src/a.c", "int a;\n");
                ctx.third_party("u", &ctx.path("src/out"))
                    .flag("--prepared-input", ctx.path("src"))
                    .cmd(&[
                        "sh",
                        "-c",
                        "echo o > \"$0\"/o.txt",
                        ctx.path("src/out").to_str().unwrap(),
                    ])
            },
            unchanged,
        ),
        (
            "working directory = a not yet existing output dir inside the input",
            |ctx| {
                ctx.write("src/a.c", "int a;\n");
                ctx.third_party("u", &ctx.path("src/build"))
                    .flag("--prepared-input", ctx.path("src"))
                    .flag("--working-directory", ctx.path("src/build"))
                    .sh("echo o > o.txt")
            },
            unchanged,
        ),
        (
            "cache root and event log inside the prepared input",
            |ctx| {
                ctx.write("a.c", "int a;\n");
                ctx.third_party("u", &ctx.path("out")).flag("--prepared-input", &ctx.root).cmd(&[
                    "sh",
                    "-c",
                    "echo o > \"$0\"/o.txt",
                    ctx.path("out").to_str().unwrap(),
                ])
            },
            unchanged,
        ),
        (
            "--exclude, with the excluded file edited between runs",
            |ctx| {
                ctx.write("src/a.c", "int a;\n");
                ctx.write("src/notes.tmp", "1\n");
                ctx.third_party("u", &ctx.path("out"))
                    .flag("--prepared-input", ctx.path("src"))
                    .flag("--exclude", "*.tmp")
                    .cmd(&["sh", "-c", "echo o > \"$0\"/o.txt", ctx.path("out").to_str().unwrap()])
            },
            |ctx| {
                ctx.write("src/notes.tmp", "2\n");
            },
        ),
        (
            "--normalize-path, --set-env, --recipe-value, --artifact-include",
            |ctx| {
                ctx.write("src/a.c", "int a;\n");
                ctx.third_party("u", &ctx.path("src/out"))
                    .flag("--prepared-input", ctx.path("src"))
                    .flag("--normalize-path", &ctx.root)
                    .flag("--set-env", "MODE=fast")
                    .flag("--recipe-value", "-O2")
                    .flag("--artifact-include", "*.txt")
                    .cmd(&[
                        "sh",
                        "-c",
                        "echo \"$MODE\" > \"$0\"/o.txt",
                        ctx.path("src/out").to_str().unwrap(),
                    ])
            },
            unchanged,
        ),
        (
            "a tilde output dir inside the input",
            |ctx| {
                ctx.write("home/src/a.c", "int a;\n");
                ctx.third_party("u", Path::new("~/src/out"))
                    .flag("--prepared-input", "~/src")
                    .env("HOME", ctx.path("home"))
                    .sh("echo o > \"$HOME\"/src/out/o.txt")
            },
            unchanged,
        ),
        (
            "custom operator: stage, publish and state dirs inside the prepared input",
            |ctx| {
                ctx.write("src/kernel.c", "/* k */\n");
                ctx.write("ops/conv/tiling.h", "/* t */\n");
                let (source, stage) = (ctx.path("ops/conv"), ctx.path("src/stage"));
                let (publish, state) = (ctx.path("src/publish"), ctx.path("src/state"));
                let op = CustomOp {
                    unit: "ops",
                    soc: "soc1",
                    operator: "conv",
                    action: "compile",
                    source: &source,
                    stage: &stage,
                    publish: &publish,
                    state: &state,
                };
                ctx.custom(&op).flag("--prepared-input", ctx.path("src")).cmd(&[
                    "sh",
                    "-c",
                    "echo o > \"$0\"/conv.o",
                    stage.to_str().unwrap(),
                ])
            },
            unchanged,
        ),
        (
            "custom operator with the cache root inside the prepared input",
            |ctx| {
                ctx.write("kernel.c", "/* k */\n");
                ctx.write("ops/conv/tiling.h", "/* t */\n");
                let (source, stage) = (ctx.path("ops/conv"), ctx.path("stage"));
                let (publish, state) = (ctx.path("publish"), ctx.path("state"));
                let op = CustomOp {
                    unit: "ops",
                    soc: "soc1",
                    operator: "conv",
                    action: "compile",
                    source: &source,
                    stage: &stage,
                    publish: &publish,
                    state: &state,
                };
                ctx.custom(&op)
                    .flag("--prepared-input", &ctx.root)
                    .flag("--exclude", "ops/**")
                    .cmd(&["sh", "-c", "echo o > \"$0\"/conv.o", stage.to_str().unwrap()])
            },
            unchanged,
        ),
    ];
    for (name, build, between) in cases {
        let ctx = TestContext::new();
        let action = build(&ctx);
        let before = ctx.explain(&action, true);
        before.expect_code(0);
        let before: Value = serde_json::from_str(&before.stdout).unwrap();
        assert_eq!(before["verdict"], "no_entries", "{name}: {before}");
        let saved = ctx.run(&action);
        saved.expect(&["MISS", "SAVED"]);
        let key = saved.key();
        assert_eq!(before["key"], key.as_str(), "{name}: explain before the run");
        between(&ctx);
        let hit = ctx.run(&action);
        hit.expect(&["HIT"]);
        assert_eq!(hit.key(), key, "{name}: the second run");
        let (text, after) = explain_both(&ctx, &action);
        assert_eq!(
            (after["verdict"].as_str(), after["key"].as_str()),
            (Some("hit"), Some(key.as_str())),
            "{name}: explain after the runs\n{text}"
        );
        assert!(text.contains(&format!("key={key}")) && text.contains("HIT:"), "{name}: {text}");
    }
}
