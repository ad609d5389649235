//! Regressions from the fresh-user review of the engine (each test names the finding).

use super::{CustomOp, RUN_TIMEOUT, TestContext, write_file, write_script};

/// A custom operator's stage that contains a prepared input, the working directory, the
/// publish directory or the cache root is refused before anything is wiped (exit 2).
#[test]
fn engine_review_unsafe_stages_are_refused_and_nothing_is_deleted() {
    let ctx = TestContext::new();
    let src = ctx.write("src/z.c", "int z;\n");
    let source = ctx.path("ops/op");
    write_file(&source.join("k.c"), "k\n");
    let (publish, state) = (ctx.path("build/pub"), ctx.path("build/state"));
    for (stage, what) in [
        (ctx.path("src"), "a declared input"),
        (ctx.path(""), "the current directory"),
        (ctx.path("build"), "the publish directory"),
        (ctx.path("build/pub/stage"), "the publish directory"),
        (ctx.path("ops"), "a declared input directory"),
    ] {
        let op = CustomOp {
            unit: "u",
            soc: "s",
            operator: "op",
            action: "a",
            source: &source,
            stage: &stage,
            publish: &publish,
            state: &state,
        };
        let action = ctx.custom(&op).flag("--prepared-input", &src).sh("true");
        let r = ctx.run(&action);
        r.expect_code(2).expect_stderr("refusing to use").expect_stderr(what);
        assert!(src.exists(), "the prepared input survived {}", stage.display());
        assert!(source.join("k.c").exists());
    }
}

/// The output directory and the artifact patterns are identity: changing either is a MISS,
/// never a HIT that restores a differently captured entry.
#[test]
fn engine_review_output_dir_and_patterns_are_identity() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let script = "mkdir -p \"$0\"; echo a > \"$0\"/lib.a; echo so > \"$0\"/lib.so";
    let base = ctx.third_party("u", &out).cmd(&["sh", "-c", script, out.to_str().unwrap()]);
    let k1 =
        ctx.run(&base.clone().flag("--artifact-include", "*.a")).expect(&["MISS", "SAVED"]).key();
    let both = base.clone().flag("--artifact-include", "*.a").flag("--artifact-include", "*.so");
    let k2 = ctx.run(&both).expect(&["MISS", "SAVED"]).key();
    assert_ne!(k1, k2);
    let other = ctx.path("elsewhere");
    let moved = ctx.third_party("u", &other).cmd(&["sh", "-c", script, out.to_str().unwrap()]);
    let k3 = ctx.run(&moved.flag("--artifact-include", "*.a")).key();
    assert_ne!(k1, k3, "another --output-dir is another action");
}

/// Overlapping output directories of concurrent third-party builds serialise: the outer
/// build never captures the inner build's files.
#[test]
fn engine_review_nested_output_dirs_do_not_capture_each_other() {
    let ctx = TestContext::new();
    let outer = ctx.path("out");
    let inner = ctx.path("out/sub");
    std::fs::create_dir_all(&inner).unwrap();
    let a = ctx.third_party("outer", &outer).cmd(&[
        "sh",
        "-c",
        "sleep 0.6; echo a > \"$0\"/a",
        outer.to_str().unwrap(),
    ]);
    let b = ctx.third_party("inner", &inner).cmd(&[
        "sh",
        "-c",
        "echo b > \"$0\"/b",
        inner.to_str().unwrap(),
    ]);
    let first = ctx.spawn(&a);
    std::thread::sleep(std::time::Duration::from_millis(150));
    let second = ctx.spawn(&b);
    let ra = super::wait_bounded(first, RUN_TIMEOUT);
    let rb = super::wait_bounded(second, RUN_TIMEOUT);
    ra.expect_code(0);
    rb.expect_code(0);
    let entry = ctx.third_party_entry("outer", &ra.key());
    let manifest = super::load_manifest(&entry.dir);
    let paths: Vec<_> = manifest.artifacts.iter().map(|x| x.path().as_str().to_owned()).collect();
    assert_eq!(paths, ["a"], "the outer entry must not hold sub/b");
}

/// A misspelled flag is a usage error, not the start of the build command.
#[test]
fn engine_review_misspelled_flag_is_a_usage_error() {
    let ctx = TestContext::new();
    let mut cmd = ctx.strata();
    cmd.args(["action", "run", "--cache-root"]).arg(ctx.path("c")).args([
        "--domain",
        "third_party",
        "--unit",
        "u",
        "--output-dir",
        "o",
        "--environment-profile",
        "bare",
        "--prepared-inputs",
        "src",
        "--",
        "true",
    ]);
    let r = super::run_bounded(cmd, RUN_TIMEOUT);
    r.expect_code(2).expect_stderr("--prepared-inputs");
    assert!(!r.stderr.contains("strata: MISS"), "{}", r.stderr);
}

/// The compiler the command runs is toolchain identity even when it is not `cc`/`c++`.
#[test]
fn engine_review_the_commands_compiler_is_identity() {
    let ctx = TestContext::new();
    let bin = ctx.path("bin");
    let out = ctx.path("out");
    let fake = |version: &str| {
        write_script(
            &bin.join("gcc"),
            &format!(
                "if [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\necho obj > \"$2\"\n"
            ),
        );
    };
    fake("fakegcc 1.0");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let action = ctx.third_party("u", &out).env("PATH", &path).cmd(&[
        "gcc",
        "-o",
        out.join("z.o").to_str().unwrap(),
    ]);
    let k1 = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    ctx.run(&action).expect(&["HIT"]);
    fake("fakegcc 2.0");
    let k2 = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    assert_ne!(k1, k2);
}

/// A FIFO without a reader as the event log must not hang the build.
#[test]
fn engine_review_fifo_event_log_does_not_hang() {
    let ctx = TestContext::new();
    let fifo = ctx.path("events.fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let out = ctx.path("out");
    let action = ctx.third_party("u", &out).env("STRATA_EVENT_LOG", &fifo).cmd(&[
        "sh",
        "-c",
        "mkdir -p \"$0\"; echo x > \"$0\"/x",
        out.to_str().unwrap(),
    ]);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
}

/// Someone else editing a published output is a hard error on the next HIT, and the edit
/// is not silently overwritten.
#[test]
fn engine_review_edited_published_output_is_a_hard_error() {
    let ctx = TestContext::new();
    let source = ctx.path("ops/op");
    write_file(&source.join("k.c"), "k\n");
    let (stage, publish, state) = (ctx.path("stage"), ctx.path("pub"), ctx.path("state"));
    let op = CustomOp {
        unit: "u",
        soc: "s",
        operator: "op",
        action: "a",
        source: &source,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let action = ctx.custom(&op).cmd(&["sh", "-c", "echo o > \"$0\"/o.o", stage.to_str().unwrap()]);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    write_file(&publish.join("o.o"), "tampered\n");
    let r = ctx.run(&action);
    r.expect_code(1).expect_stderr("changed outside its owning action");
    assert_eq!(std::fs::read(publish.join("o.o")).unwrap(), b"tampered\n");
}

/// A signal sent to strata alone (not its process group) reaches the build, and the run
/// ends as interrupted: exit 128 + 15, nothing saved, `.updated` untouched.
#[test]
fn engine_review_sigterm_to_strata_is_forwarded_to_the_build() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let marker = ctx.path("got-term");
    // The build traps TERM, records it, and still finishes successfully.
    let script = "trap 'echo term > \"$1\"' TERM; mkdir -p \"$0\"; echo x > \"$0\"/x; \
                  i=0; while [ $i -lt 100 ] && [ ! -s \"$1\" ]; do sleep 0.05; i=$((i+1)); done; exit 0";
    let action = ctx.third_party("u", &out).cmd(&[
        "sh",
        "-c",
        script,
        out.to_str().unwrap(),
        marker.to_str().unwrap(),
    ]);
    let child = ctx.spawn(&action);
    // Wait until the build is running, then signal strata only.
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    while !out.join("x").exists() {
        assert!(std::time::Instant::now() < deadline, "the build never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let r = super::wait_bounded(child, RUN_TIMEOUT);
    r.expect_code(128 + 15).expect_stderr("interrupted by signal 15");
    assert_eq!(std::fs::read_to_string(&marker).unwrap_or_default().trim(), "term");
    assert!(!r.stderr.contains("SAVED"), "{}", r.stderr);
    assert!(!ctx.updated_marker().exists());
}

/// Second review, B1/B2: the compiler behind a ccache masquerade link, after a wrapper
/// (`ccache gcc`), or on a `--set-env PATH=` is the one whose version is identity.
#[test]
fn engine_review_compilers_behind_wrappers_are_identity() {
    let ctx = TestContext::new();
    let (mask, bin, real, opt) =
        (ctx.path("mask"), ctx.path("bin"), ctx.path("real"), ctx.path("opt"));
    let gcc = |dir: &std::path::Path, version: &str| {
        write_script(
            &dir.join("gcc"),
            &format!(
                "if [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\necho '{version}' > \"$2\"\n"
            ),
        );
    };
    // A ccache-like wrapper: its own --version, otherwise it runs the real gcc.
    write_script(
        &bin.join("ccache"),
        &format!(
            "if [ \"$1\" = --version ]; then echo 'ccache 4.7'; exit 0; fi\n\
             [ \"$(basename \"$0\")\" = ccache ] && shift\nexec {}/gcc \"$@\"\n",
            real.display()
        ),
    );
    std::fs::create_dir_all(&mask).unwrap();
    std::os::unix::fs::symlink(bin.join("ccache"), mask.join("gcc")).unwrap();
    gcc(&real, "realgcc 12");
    gcc(&opt, "optgcc 1");
    let path = |dirs: &[&std::path::Path]| {
        let mut v: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        v.push(std::env::var("PATH").unwrap());
        v.join(":")
    };
    let out = ctx.path("out");
    let o = out.join("a.o");
    let cases = [
        (
            "masquerade",
            ctx.third_party("m", &out).env("PATH", path(&[&mask, &real])).cmd(&[
                "gcc",
                "-o",
                o.to_str().unwrap(),
            ]),
        ),
        (
            "wrapper",
            ctx.third_party("w", &out).env("PATH", path(&[&bin, &real])).cmd(&[
                "ccache",
                "gcc",
                "-o",
                o.to_str().unwrap(),
            ]),
        ),
        (
            "set-env",
            ctx.third_party("s", &out)
                .env("PATH", path(&[&real]))
                .flag("--set-env", format!("PATH={}", path(&[&opt])))
                .cmd(&["gcc", "-o", o.to_str().unwrap()]),
        ),
    ];
    let mut keys = Vec::new();
    for (_, action) in &cases {
        keys.push(ctx.run(action).expect(&["MISS", "SAVED"]).key());
        ctx.run(action).expect(&["HIT"]);
    }
    gcc(&real, "realgcc 13");
    gcc(&opt, "optgcc 2");
    for ((name, action), old) in cases.iter().zip(keys) {
        let r = ctx.run(action);
        assert_eq!(r.statuses(), ["MISS", "SAVED"], "{name}: {}", r.stderr);
        assert_ne!(r.key(), old, "{name}");
    }
}

/// Second review, B3: an incremental rebuild that leaves an up-to-date output alone still
/// saves a complete entry (outputs earlier entries of the unit captured are kept), so a
/// HIT into an empty directory restores everything.
#[test]
fn engine_review_incremental_rebuild_keeps_untouched_outputs_in_the_entry() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let src = ctx.write("src/lib.c", "v1\n");
    // Like make: the header is generated once; the library is rebuilt from the source.
    let script = "mkdir -p \"$0/include\" \"$0/lib\"; \
                  [ -e \"$0/include/h.h\" ] || echo header > \"$0/include/h.h\"; \
                  cat \"$1\" > \"$0/lib/libx.a\"";
    let action = ctx.third_party("lib", &out).flag("--prepared-input", &src).cmd(&[
        "sh",
        "-c",
        script,
        out.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    std::fs::write(&src, "v2\n").unwrap();
    let r = ctx.run(&action);
    r.expect(&["MISS", "SAVED"]);
    assert!(r.warnings().is_empty(), "{}", r.stderr);
    std::fs::remove_dir_all(&out).unwrap();
    ctx.run(&action).expect(&["HIT"]);
    assert_eq!(std::fs::read_to_string(out.join("include/h.h")).unwrap(), "header\n");
    assert_eq!(std::fs::read_to_string(out.join("lib/libx.a")).unwrap(), "v2\n");
}

/// Second review, B4: a valid entry is not replaced when the trouble is in the output
/// directory (a symlink in the way): the build runs, and the entry stays complete.
#[test]
fn engine_review_destination_trouble_never_replaces_a_valid_entry() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let script = "mkdir -p \"$0/lib\"; echo lib > \"$0/lib/libx.a\"; echo top > \"$0/top\"";
    let action = ctx.third_party("u", &out).cmd(&["sh", "-c", script, out.to_str().unwrap()]);
    let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    let entry = ctx.third_party_entry("u", &key);
    let before = std::fs::read(entry.dir.join("manifest.json")).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let elsewhere = ctx.path("user-dir");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join("lib")).unwrap();
    let r = ctx.run(&action);
    r.expect_code(0).expect_stderr("without replacing the valid entry");
    assert!(!r.stderr.contains("SAVED"), "{}", r.stderr);
    assert_eq!(std::fs::read(entry.dir.join("manifest.json")).unwrap(), before);
}

/// Second review, B5: a non-empty stage strata did not create (no `.strata-stage` marker)
/// is never emptied, whatever it holds; one strata created is reused freely.
#[test]
fn engine_review_only_strata_stages_are_emptied() {
    let ctx = TestContext::new();
    let source = ctx.path("ops/op");
    write_file(&source.join("k.c"), "k\n");
    let (publish, state) = (ctx.path("build/pub"), ctx.path("build/state"));
    let foreign = ctx.path("docs");
    write_file(&foreign.join("README"), "user data\n");
    let op = |stage: &std::path::Path| {
        let op = CustomOp {
            unit: "u",
            soc: "s",
            operator: "op",
            action: "a",
            source: &source,
            stage,
            publish: &publish,
            state: &state,
        };
        ctx.custom(&op).cmd(&["sh", "-c", "echo o > \"$0\"/o.o", stage.to_str().unwrap()])
    };
    let r = ctx.run(&op(&foreign));
    r.expect_code(2).expect_stderr(".strata-stage");
    assert_eq!(std::fs::read_to_string(foreign.join("README")).unwrap(), "user data\n");
    let stage = ctx.path("build/stages/op");
    ctx.run(&op(&stage)).expect(&["MISS", "SAVED"]);
    assert!(stage.join(".strata-stage").exists());
    ctx.run(&op(&stage)).expect(&["HIT"]);
    assert_eq!(std::fs::read_to_string(publish.join("o.o")).unwrap(), "o\n");
    assert!(!publish.join(".strata-stage").exists(), "the marker is never published");
}

/// Second review, B6 and B9: a superbuild whose build runs strata again into a
/// subdirectory does not wait for its own parent's locks, and neither the inner action's
/// outputs nor a cache root inside the output directory end up in the outer entry.
#[test]
fn engine_review_nested_strata_runs_neither_deadlock_nor_capture_each_other() {
    let ctx = TestContext::new();
    let out = ctx.path("super");
    let cache = out.join("cache");
    let inner = format!(
        "{strata} action run --cache-root {cache} --domain third_party --unit inner \
         --output-dir {out}/sub --environment-profile bare -- sh -c 'echo inner > {out}/sub/i'",
        strata = super::strata_exe(),
        cache = cache.display(),
        out = out.display(),
    );
    let script =
        format!("mkdir -p {out}/sub && {inner} && echo outer > {out}/o", out = out.display());
    let outer = super::Action::default()
        .flag("--cache-root", &cache)
        .flag("--domain", "third_party")
        .flag("--unit", "outer")
        .flag("--output-dir", &out)
        .flag("--environment-profile", "bare")
        .env("STRATA_ACTION_LOCK_TIMEOUT_SECONDS", "5")
        .cmd(&["sh", "-c", &script]);
    let started = std::time::Instant::now();
    let r = ctx.run(&outer);
    r.expect_code(0);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "waited for its own locks");
    assert!(r.stderr.contains("unit=inner"), "{}", r.stderr);
    let key = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("strata: SAVED domain=third_party unit=outer key="))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    assert!(!r.stderr.contains("not rewritten"), "strata's own cache is not output: {}", r.stderr);
    let manifest = super::load_manifest(&cache.join("actions-v1/third_party/outer").join(&key));
    let paths: Vec<_> = manifest.artifacts.iter().map(|a| a.path().as_str().to_owned()).collect();
    assert!(paths.contains(&"o".to_owned()), "{paths:?}");
    assert!(paths.iter().all(|p| !p.starts_with("cache/")), "cache files captured: {paths:?}");
}

/// Second review, B8: a checkout reached through a symlinked directory relocates like any
/// other: the root as given and its resolved form both normalise.
#[test]
fn engine_review_symlinked_checkout_still_relocates() {
    let ctx = TestContext::new();
    for ws in ["real/a", "real/b"] {
        ctx.write(&format!("{ws}/src/x.c"), "int x;\n");
    }
    std::os::unix::fs::symlink(ctx.path("real"), ctx.path("lnk")).unwrap();
    let run = |ws: std::path::PathBuf| {
        let out = ws.join("out");
        let src = ws.join("src/x.c");
        let action = ctx
            .third_party("x", &out)
            .flag("--normalize-path", &ws)
            .flag("--prepared-input", &src)
            .cmd(&[
                "sh",
                "-c",
                "mkdir -p \"$1\" && cp \"$0\" \"$1/x.o\"",
                src.to_str().unwrap(),
                out.to_str().unwrap(),
            ]);
        ctx.run(&action)
    };
    let first = run(ctx.path("real/a"));
    first.expect(&["MISS", "SAVED"]);
    let through_link = run(ctx.path("lnk/b"));
    through_link.expect(&["HIT"]);
    assert_eq!(through_link.key(), first.key());
}
