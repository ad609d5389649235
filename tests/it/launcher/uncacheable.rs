//! Uncacheable is never an error: linking, `-E`, several sources, response files and
//! time macros run the compiler unchanged (same outputs, same exit code) and count the
//! reason; `-MMD` builds get the depfile they asked for while the cache still tracks the
//! system headers the depfile leaves out.

use super::{
    Launcher, TestContext, assert_same_bytes, counts, depfile_rules, plain, plain_object, read,
    require_tool, write_file,
};

#[test]
fn launcher_uncacheable_commands_run_the_compiler_unchanged_and_count_the_reason() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(
        &dir.join("main.c"),
        "#include <stdio.h>\nint main(void) { puts(\"linked\"); return 0; }\n",
    );
    write_file(&dir.join("b.c"), "int b(void) { return 2; }\n");
    write_file(&dir.join("c.c"), "int c(void) { return 3; }\n");
    let l = Launcher::new(&ctx.cache);

    // Compile and link in one step (no -c).
    l.expect(&dir, &["gcc", "main.c", "-o", "prog"], "uncacheable:not_compile_only");
    let ran = super::run_bounded(std::process::Command::new(dir.join("prog")), super::RUN_TIMEOUT);
    assert_eq!((ran.code, ran.stdout.as_str()), (0, "linked\n"));
    // Linking objects.
    l.expect(&dir, &["gcc", "-c", "b.c", "-o", "b.o"], "miss");
    l.expect(&dir, &["gcc", "-shared", "b.o", "-o", "libb.so"], "uncacheable:not_compile_only");
    assert!(dir.join("libb.so").is_file());
    // Preprocess only: the preprocessed text on stdout, exactly the compiler's.
    let pre =
        l.expect(&dir, &["gcc", "-E", "-DWORD=expanded", "b.c"], "uncacheable:not_object_output");
    let want = plain(&dir, &["gcc", "-E", "-DWORD=expanded", "b.c"], &[]);
    assert_eq!(pre.stdout, want.stdout);
    assert!(pre.stdout.contains("int b(void)"));
    // Several sources.
    std::fs::remove_file(dir.join("b.o")).unwrap();
    l.expect(&dir, &["gcc", "-c", "b.c", "c.c"], "uncacheable:several_sources");
    assert!(dir.join("b.o").is_file() && dir.join("c.o").is_file());
    // A response file.
    write_file(&dir.join("args.rsp"), "-c c.c -o from-rsp.o\n");
    l.expect(&dir, &["gcc", "@args.rsp"], "uncacheable:response_file");
    assert!(dir.join("from-rsp.o").is_file());
    // A failing uncacheable command keeps the compiler's exit code.
    let (r, outcome) = l.compile(&dir, &["gcc", "missing.c", "-o", "nothing"]);
    assert_eq!(outcome, "uncacheable:not_compile_only");
    assert_eq!(r.code, plain(&dir, &["gcc", "missing.c", "-o", "nothing"], &[]).code);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("missing.c"), "{}", r.stderr);
    assert_eq!(
        l.counters(),
        counts(&[
            ("miss", 1),
            ("uncacheable:not_compile_only", 3),
            ("uncacheable:not_object_output", 1),
            ("uncacheable:several_sources", 1),
            ("uncacheable:response_file", 1),
        ])
    );
    assert_eq!(l.entries().len(), 1, "nothing uncacheable is stored");
}

#[test]
fn launcher_time_macros_are_not_cached_unless_source_date_epoch_fixes_them() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("stamp.h"), "#define BUILT __DATE__ \" \" __TIME__\n");
    write_file(
        &dir.join("t.c"),
        "#include \"stamp.h\"\nconst char *built(void) { return BUILT; }\n",
    );
    write_file(&dir.join("d.c"), "const char *day(void) { return __DATE__; }\n");
    let l = Launcher::new(&ctx.cache);
    for tu in ["t", "d"] {
        let argv = ["gcc", "-c", &format!("{tu}.c"), "-o", &format!("{tu}.o")].map(String::from);
        for _ in 0..2 {
            l.expect(&dir, &argv, "uncacheable:time_macros");
            assert!(dir.join(format!("{tu}.o")).is_file());
        }
        // With SOURCE_DATE_EPOCH the macros are fixed: cached, and byte-identical.
        let epoch = l.clone().env("SOURCE_DATE_EPOCH", "1700000000");
        let want = {
            plain(&dir, &argv, &[("SOURCE_DATE_EPOCH", "1700000000")]).expect_code(0);
            let b = read(&dir.join(format!("{tu}.o")));
            std::fs::remove_file(dir.join(format!("{tu}.o"))).unwrap();
            b
        };
        epoch.expect(&dir, &argv, "miss");
        epoch.expect(&dir, &argv, "hit");
        assert_same_bytes("with SOURCE_DATE_EPOCH", &read(&dir.join(format!("{tu}.o"))), &want);
        // Another epoch is another key.
        l.clone().env("SOURCE_DATE_EPOCH", "1700086400").expect(&dir, &argv, "miss");
    }
}

#[test]
fn launcher_mmd_writes_the_depfile_asked_for_and_still_tracks_system_headers() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("sys/vendor.h"), "#define VENDOR 1\n");
    write_file(&dir.join("inc/own.h"), "#define OWN 2\n");
    write_file(
        &dir.join("m.c"),
        "#include <stdio.h>\n#include <vendor.h>\n#include \"own.h\"\nint m(void) { return printf(\"%d\", VENDOR + OWN); }\n",
    );
    let argv = [
        "gcc", "-O2", "-isystem", "sys", "-Iinc", "-MMD", "-MP", "-MF", "dep/m.d", "-c", "m.c",
        "-o", "m.o",
    ];
    std::fs::create_dir_all(dir.join("dep")).unwrap();
    plain(&dir, &argv, &[]).expect_code(0);
    let want_d = read(&dir.join("dep/m.d"));
    let want_o = plain_object(&dir, &argv, "m.o");
    std::fs::remove_file(dir.join("dep/m.d")).unwrap();
    let text = String::from_utf8_lossy(&want_d);
    assert!(
        !text.contains("vendor.h") && text.contains("own.h"),
        "-MMD leaves system headers out: {text}"
    );

    let l = Launcher::new(&ctx.cache);
    l.expect(&dir, &argv, "miss");
    assert_eq!(
        read(&dir.join("dep/m.d")),
        want_d,
        "the depfile the build asked for, as gcc writes it"
    );
    std::fs::remove_file(dir.join("dep/m.d")).unwrap();
    std::fs::remove_file(dir.join("m.o")).unwrap();
    l.expect(&dir, &argv, "hit");
    assert_eq!(read(&dir.join("dep/m.d")), want_d, "the HIT writes the same depfile");
    assert_eq!(depfile_rules(&dir.join("dep/m.d")).len(), 2, "-MP's phony rule kept");
    assert_same_bytes("m.o", &read(&dir.join("m.o")), &want_o);
    // The system header (absent from the depfile) changes: a MISS.
    write_file(&dir.join("sys/vendor.h"), "#define VENDOR 10\n");
    let want_o = plain_object(&dir, &argv, "m.o");
    l.expect(&dir, &argv, "miss");
    assert_same_bytes("m.o after vendor.h changed", &read(&dir.join("m.o")), &want_o);
    l.expect(&dir, &argv, "hit");
    // -MD (system headers included) with the default depfile name beside the object.
    let md = ["gcc", "-O2", "-isystem", "sys", "-Iinc", "-MD", "-c", "m.c", "-o", "obj/m2.o"];
    std::fs::create_dir_all(dir.join("obj")).unwrap();
    plain(&dir, &md, &[]).expect_code(0);
    let want_d = read(&dir.join("obj/m2.d"));
    std::fs::remove_file(dir.join("obj/m2.d")).unwrap();
    l.expect(&dir, &md, "miss");
    assert_eq!(read(&dir.join("obj/m2.d")), want_d);
    std::fs::remove_file(dir.join("obj/m2.d")).unwrap();
    l.expect(&dir, &md, "hit");
    assert_eq!(read(&dir.join("obj/m2.d")), want_d);
}

/// `-fprofile-use` reads the profile (`<object>.gcda`), which the dependency file does not
/// list: a new profile must give a new object, so such compiles are not cached.
#[test]
fn launcher_profile_use_is_not_cached_because_the_profile_is_not_tracked() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(
        &dir.join("p.c"),
        "int work(int n) { int s = 0; for (int i = 0; i < n; i++) { if (i % 3 == 0) s += i * 7; else s ^= i; } return s; }\n\
         int cold(int n) { int s = 1; for (int i = 0; i < n; i++) s = s * 3 + i; return s; }\n\
         int main(int argc, char **argv) { (void)argv; return (argc > 1 ? work(100000) : cold(100000)) & 1; }\n",
    );
    // Instrumented build (uncacheable itself), then a profile of one workload.
    let l = Launcher::new(&ctx.cache);
    l.expect(
        &dir,
        &["gcc", "-O2", "-fprofile-generate", "-c", "p.c", "-o", "gen.o"],
        "uncacheable:uncacheable_flag",
    );
    plain(&dir, &["gcc", "-fprofile-generate", "gen.o", "-o", "prog"], &[]).expect_code(0);
    let profile = |args: &[&str]| {
        let _ = std::fs::remove_file(dir.join("gen.gcda"));
        let mut cmd = std::process::Command::new(dir.join("prog"));
        cmd.args(args).current_dir(&dir);
        super::run_bounded(cmd, super::RUN_TIMEOUT);
        std::fs::rename(dir.join("gen.gcda"), dir.join("p.gcda")).unwrap();
    };
    let argv = ["gcc", "-O2", "-fprofile-use", "-c", "p.c", "-o", "p.o"];
    let mut objects = Vec::new();
    // Observed by the fallback model: not cached (the model cannot see the profile).
    let model = l.clone().env("STRATA_TRACE", "0");
    for workload in [&[][..], &["hot"][..]] {
        profile(workload);
        let want = plain_object(&dir, &argv, "p.o");
        model.expect(&dir, &argv, "uncacheable:untracked_input");
        assert_same_bytes("p.o for this profile", &read(&dir.join("p.o")), &want);
        objects.push(want);
    }
    assert_ne!(objects[0], objects[1], "the profiles give different objects");
    assert!(l.entries().is_empty());
    // Traced: the profile read is an input. Another profile is a MISS, the first one again
    // a HIT with its own object.
    for (workload, want, outcome) in
        [(&[][..], 0, "miss"), (&["hot"][..], 1, "miss"), (&[][..], 0, "hit")]
    {
        profile(workload);
        l.expect(&dir, &argv, outcome);
        assert_same_bytes("p.o for this profile", &read(&dir.join("p.o")), &objects[want]);
    }
}

/// `STRATA_EXPLAIN=1` says why a command was not cached, for every reason (docs:
/// `strata: uncacheable:<reason> <source>`), not only for the reasons found after the
/// compiler ran; the command stands in for the source when there is no single source.
#[test]
fn launcher_explain_names_every_uncacheable_reason() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("b.c"), "int b(void) { return 2; }\n");
    write_file(&dir.join("args.rsp"), "-c b.c -o from-rsp.o\n");
    let l = Launcher::new(&ctx.cache).env("STRATA_EXPLAIN", "1");
    let line = |argv: &[&str], outcome: &str, l: &Launcher| {
        let r = l.expect(&dir, argv, outcome);
        r.stderr.lines().filter(|s| s.starts_with("strata: ")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(
        line(&["gcc", "-E", "b.c", "-o", "b.i"], "uncacheable:not_object_output", &l),
        "strata: uncacheable:not_object_output gcc -E b.c -o b.i"
    );
    assert_eq!(
        line(&["gcc", "@args.rsp"], "uncacheable:response_file", &l),
        "strata: uncacheable:response_file gcc @args.rsp"
    );
    assert!(dir.join("from-rsp.o").is_file());
    assert_eq!(
        line(
            &["gcc", "-shared", "from-rsp.o", "-o", "libb.so"],
            "uncacheable:not_compile_only",
            &l
        ),
        "strata: uncacheable:not_compile_only gcc -shared from-rsp.o -o libb.so"
    );
    let with_env = l.clone().env("DEPENDENCIES_OUTPUT", "deps.d");
    assert_eq!(
        line(
            &["gcc", "-c", "b.c", "-o", "b.o"],
            "uncacheable:environment_dependencies_output",
            &with_env
        ),
        "strata: uncacheable:environment_dependencies_output b.c"
    );
    assert_eq!(
        line(&["gcc", "-c", "b.c", "-o", "/dev/null"], "uncacheable:not_object_output", &l),
        "strata: uncacheable:not_object_output gcc -c b.c -o /dev/null"
    );
    // Another compiler cache as the program: it runs as given (here it compiles), and the
    // reason says so rather than that no compiler was found.
    require_tool("ccache", "apt-get install ccache");
    let wrapped = l.clone().env("CCACHE_DIR", dir.join("ccache-dir").to_str().unwrap());
    assert_eq!(
        line(
            &["ccache", "gcc", "-c", "b.c", "-o", "wrapped.o"],
            "uncacheable:compiler_is_a_wrapper",
            &wrapped
        ),
        "strata: uncacheable:compiler_is_a_wrapper ccache gcc -c b.c -o wrapped.o"
    );
    assert!(dir.join("wrapped.o").is_file());
}

/// `-v` prints the commands the driver runs, with its temporary files' random names, on
/// stderr (and `-###` prints them instead of running them): never replayable, never cached,
/// and the compile still runs as the build asked.
#[test]
fn launcher_verbose_driver_output_is_not_cached() {
    for cc in ["gcc", "clang"] {
        require_tool(cc, "apt-get install gcc clang");
        let ctx = TestContext::new();
        let dir = ctx.path("proj");
        write_file(&dir.join("v.c"), "int v;\n");
        let l = Launcher::new(&ctx.cache);
        for flag in ["-v", "-###"] {
            for _ in 0..2 {
                l.expect(
                    &dir,
                    &[cc, flag, "-c", "v.c", "-o", "v.o"],
                    "uncacheable:uncacheable_flag",
                );
            }
        }
        assert!(dir.join("v.o").is_file(), "{cc} -v compiled");
    }
}

/// A NUL byte does not make a header binary: GCC reads past one in a comment, so the
/// header's `#pragma GCC dependency` and a `__TIMESTAMP__` that only the scan can see (with
/// `-w` and `SOURCE_DATE_EPOCH`) are found as in any other header. (Before, a NUL in the
/// first 8 KiB skipped the scan: the first was cached and a HIT dropped the warning that
/// plain `gcc -Werror` fails on; the second handed out the header's old time stamp.)
#[test]
fn launcher_a_header_with_a_nul_byte_is_scanned_like_any_other() {
    require_tool("gcc", "apt-get install gcc");
    require_tool("clang", "apt-get install clang");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("dep.txt"), "data\n");
    write_file(&dir.join("inc/pn.h"), "/* \0 */\n#pragma GCC dependency \"../dep.txt\"\n");
    write_file(&dir.join("inc/tn.h"), "/* \0 */\nstatic const char *t = __TIMESTAMP__;\n");
    write_file(&dir.join("b.c"), "#include \"pn.h\"\nint b(void) { return 1; }\n");
    write_file(&dir.join("c.c"), "#include \"tn.h\"\nconst char *c(void) { return t; }\n");
    let l = Launcher::new(&ctx.cache);
    for cc in ["gcc", "clang"] {
        let argv = |tu: &str| {
            [cc, "-Iinc", "-w", "-c", &format!("{tu}.c"), "-o", &format!("{tu}.o")]
                .map(String::from)
        };
        l.expect(&dir, &argv("b"), "uncacheable:pragma_dependency");
        let epoch = l.clone().env("SOURCE_DATE_EPOCH", "1700000000");
        epoch.expect(&dir, &argv("c"), "uncacheable:time_macros");
    }
    assert_eq!(l.entries().len(), 0, "nothing uncacheable is stored");
}
