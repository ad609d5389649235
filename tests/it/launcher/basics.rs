//! HIT and MISS with g++ and clang: the second compile is a HIT whose
//! object is byte-identical to a plain compile of the same command, the compiler's
//! messages (warnings on stderr, text on stdout) are replayed on the HIT, and a failing
//! compile exits with the compiler's code, shows its error and is never cached.

use super::{
    Launcher, TestContext, assert_same_bytes, counts, plain, plain_object, read, require_tool,
    write_file,
};

const WARNS: &str = r#"#include <cstdio>
#include "answer.h"
int main() {
    int unused = 3;
    std::printf("%d\n", ANSWER);
    return 0;
}
"#;

const BROKEN: &str = "int f() { return undeclared_name; }\n";

#[test]
fn launcher_gxx_hit_is_byte_identical_replays_warnings_and_failures_are_never_cached() {
    require_tool("g++", "apt-get install g++");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("a.cpp"), WARNS);
    write_file(&dir.join("answer.h"), "#define ANSWER 42\n");
    let argv = ["g++", "-Wall", "-O2", "-c", "a.cpp", "-o", "a.o"];
    let plain_run = plain(&dir, &argv, &[]);
    plain_run.expect_code(0);
    assert!(plain_run.stderr.contains("unused variable"), "{}", plain_run.stderr);
    let want = read(&dir.join("a.o"));
    std::fs::remove_file(dir.join("a.o")).unwrap();

    let l = Launcher::new(&ctx.cache);
    let cold = l.expect(&dir, &argv, "miss");
    assert_same_bytes("a.o after the MISS", &read(&dir.join("a.o")), &want);
    assert_eq!(cold.stderr, plain_run.stderr, "the MISS passes the compiler's messages through");
    assert_eq!(cold.stdout, plain_run.stdout);

    // The object is still there (a rebuild): the HIT replaces it.
    let warm = l.expect(&dir, &argv, "hit");
    assert_same_bytes("a.o after the HIT", &read(&dir.join("a.o")), &want);
    assert_eq!(warm.stderr, plain_run.stderr, "the HIT replays the warning exactly");
    assert_eq!(warm.stdout, plain_run.stdout);
    std::fs::remove_file(dir.join("a.o")).unwrap();
    l.expect(&dir, &argv, "hit");
    assert_same_bytes("a.o after a HIT into a clean dir", &read(&dir.join("a.o")), &want);
    assert_eq!(l.entries().len(), 1);

    // A failing compile: the compiler's exit code and error; never cached.
    write_file(&dir.join("bad.cpp"), BROKEN);
    let bad = ["g++", "-c", "bad.cpp", "-o", "bad.o"];
    let plain_bad = plain(&dir, &bad, &[]);
    assert_ne!(plain_bad.code, 0);
    for round in 0..2 {
        let (r, outcome) = l.compile(&dir, &bad);
        assert_eq!((r.code, outcome.as_str()), (plain_bad.code, "compile_failed"), "round {round}");
        assert!(r.stderr.contains("undeclared_name"), "{}", r.stderr);
        assert_eq!(r.stderr, plain_bad.stderr, "the compiler's error, nothing else");
        assert!(!dir.join("bad.o").exists());
    }
    assert_eq!(l.entries().len(), 1, "a failed compile leaves no entry");
    // Fixed, it compiles and is cached.
    write_file(&dir.join("bad.cpp"), "int f() { return 1; }\n");
    l.expect(&dir, &bad, "miss");
    l.expect(&dir, &bad, "hit");
    assert_eq!(
        l.counters(),
        counts(&[("hit", 3), ("miss", 2), ("compile_failed", 2)]),
        "the whole run, counted"
    );
}

/// A compiler wrapper that writes to stdout: the HIT replays stdout and stderr, each to
/// its own stream.
#[test]
fn launcher_replays_stdout_and_stderr_of_a_compiler_wrapper() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    let wrapper = ctx.path("bin/chatty-cc");
    crate::engine::write_script(
        &wrapper,
        "echo 'chatty-cc: on stdout'\necho 'chatty-cc: on stderr' >&2\nexec gcc \"$@\"",
    );
    write_file(&dir.join("x.c"), "int x(void) { return 7; }\n");
    let argv = [wrapper.to_str().unwrap(), "-c", "x.c", "-o", "x.o"];
    let want = plain_object(&dir, &argv, "x.o");
    let l = Launcher::new(&ctx.cache);
    let cold = l.expect(&dir, &argv, "miss");
    assert_eq!(
        (cold.stdout.as_str(), cold.stderr.as_str()),
        ("chatty-cc: on stdout\n", "chatty-cc: on stderr\n")
    );
    let warm = l.expect(&dir, &argv, "hit");
    assert_eq!(
        (warm.stdout.as_str(), warm.stderr.as_str()),
        ("chatty-cc: on stdout\n", "chatty-cc: on stderr\n")
    );
    assert_same_bytes("x.o", &read(&dir.join("x.o")), &want);
}

/// clang, with the C++ driver mode picked from argv[0] (`clang++`).
#[test]
fn launcher_clang_hit_and_miss() {
    require_tool("clang", "apt-get install clang (scripts/test.sh installs it)");
    require_tool("clang++", "apt-get install clang (scripts/test.sh installs it)");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("a.cpp"), WARNS);
    write_file(&dir.join("answer.h"), "#define ANSWER 42\n");
    let argv = ["clang++", "-Wall", "-O2", "-c", "a.cpp", "-o", "a.o"];
    let plain_run = plain(&dir, &argv, &[]);
    plain_run.expect_code(0);
    let want = read(&dir.join("a.o"));
    std::fs::remove_file(dir.join("a.o")).unwrap();
    let l = Launcher::new(&ctx.cache);
    l.expect(&dir, &argv, "miss");
    assert_same_bytes("clang++ MISS", &read(&dir.join("a.o")), &want);
    let warm = l.expect(&dir, &argv, "hit");
    assert_same_bytes("clang++ HIT", &read(&dir.join("a.o")), &want);
    assert_eq!(warm.stderr, plain_run.stderr);
    // The header changes: a MISS.
    write_file(&dir.join("answer.h"), "#define ANSWER 43\n");
    l.expect(&dir, &argv, "miss");
    // argv[0] picks the driver mode: clang++ compiles a .c file as C++ (mangled name),
    // clang as C. Same arguments otherwise, so each must be its own key.
    write_file(&dir.join("m.c"), "int twice(int x) { return 2 * x; }\n");
    for (driver, symbol) in [("clang++", "_Z5twicei"), ("clang", "twice")] {
        let argv = [driver, "-O2", "-Wno-deprecated", "-c", "m.c", "-o", "m.o"];
        let want = plain_object(&dir, &argv, "m.o");
        assert!(memchr::memmem::find(&want, format!("\0{symbol}\0").as_bytes()).is_some());
        l.expect(&dir, &argv, "miss");
        l.expect(&dir, &argv, "hit");
        assert_same_bytes(&format!("m.o by {driver}"), &read(&dir.join("m.o")), &want);
    }
    // A relocated checkout (CMake-style absolute paths, -MD): a HIT with a depfile that
    // names the new place.
    let (base_a, base_b) = (ctx.path("a"), ctx.path("b/c"));
    let a = super::relocation::checkout(&base_a);
    std::fs::create_dir_all(&base_b).unwrap();
    super::copy_tree(&a, &base_b.join("proj"));
    let b = base_b.join("proj");
    let clang = |proj: &std::path::Path| {
        let mut argv = super::relocation::cmake_style(proj, "x", &[]);
        argv[0] = "clang".into();
        argv
    };
    Launcher::new(&ctx.cache).base_dirs(&[&base_a]).expect(&a.join("build"), &clang(&a), "miss");
    plain(&b.join("build"), &clang(&b), &[]).expect_code(0);
    let want = read(&b.join("build/x.o"));
    let want_d = super::depfile_rules(&b.join("build/x.o.d"));
    std::fs::remove_file(b.join("build/x.o")).unwrap();
    std::fs::remove_file(b.join("build/x.o.d")).unwrap();
    Launcher::new(&ctx.cache).base_dirs(&[&base_b]).expect(&b.join("build"), &clang(&b), "hit");
    assert_same_bytes("clang x.o at B", &read(&b.join("build/x.o")), &want);
    assert_eq!(super::depfile_rules(&b.join("build/x.o.d")), want_d);
}

/// The side outputs the flags ask for (`.dwo`, `.su`, `.gcno`) come back on a HIT with the
/// object: byte-identical to the compiler's, and for `--coverage` (whose object and
/// `.gcno` carry a per-compile stamp, so no two compiles agree) the pair of the MISS.
#[test]
fn launcher_side_outputs_are_restored_with_the_object() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(
        &dir.join("src/w.c"),
        "int w(int x) { int a[8] = {0}; a[x & 7] = x; return a[3]; }\n",
    );
    std::fs::create_dir_all(dir.join("obj")).unwrap();
    let l = Launcher::new(&ctx.cache);
    let files = |outputs: &[&str]| outputs.iter().map(|o| read(&dir.join(o))).collect::<Vec<_>>();
    let remove = |outputs: &[&str]| {
        for o in outputs {
            std::fs::remove_file(dir.join(o)).unwrap();
        }
    };

    let argv =
        ["gcc", "-O1", "-g", "-gsplit-dwarf", "-fstack-usage", "-c", "src/w.c", "-o", "obj/w.o"];
    let outputs = ["obj/w.o", "obj/w.dwo", "obj/w.su"];
    plain(&dir, &argv, &[]).expect_code(0);
    let want = files(&outputs);
    remove(&outputs);
    l.expect(&dir, &argv, "miss");
    remove(&outputs);
    l.expect(&dir, &argv, "hit");
    for (o, want) in outputs.iter().zip(&want) {
        assert_same_bytes(o, &read(&dir.join(o)), want);
    }

    let argv = ["gcc", "-O1", "--coverage", "-c", "src/w.c", "-o", "obj/c.o"];
    let outputs = ["obj/c.o", "obj/c.gcno"];
    l.expect(&dir, &argv, "miss");
    let want = files(&outputs);
    remove(&outputs);
    l.expect(&dir, &argv, "hit");
    for (o, want) in outputs.iter().zip(&want) {
        assert_same_bytes(o, &read(&dir.join(o)), want);
    }
}

/// The output directory does not exist: the compiler's own error and exit code, nothing
/// from the cache, even when an entry for the command exists (from a copy of the project
/// where the directory does exist).
#[test]
fn launcher_a_missing_output_directory_fails_like_the_compiler() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let a = ctx.path("a/proj");
    write_file(&a.join("x.c"), "int x(void) { return 1; }\n");
    std::fs::create_dir_all(a.join("obj")).unwrap();
    let argv = ["gcc", "-O2", "-MD", "-c", "x.c", "-o", "obj/x.o"];
    let l = Launcher::new(&ctx.cache);
    l.expect(&a, &argv, "miss");
    let b = ctx.path("b/proj");
    write_file(&b.join("x.c"), "int x(void) { return 1; }\n");
    let want = plain(&b, &argv, &[]);
    assert_ne!(want.code, 0);
    let (r, outcome) = l.compile(&b, &argv);
    assert_eq!((r.code, outcome.as_str()), (want.code, "compile_failed"));
    assert_eq!(r.stderr, want.stderr, "the compiler's error only");
}

/// A misspelled option of `strata compile` is a usage error (exit 2) naming it, not a
/// compiler called `--bogus` that cannot be run; nothing is compiled or counted.
#[test]
fn launcher_compile_rejects_an_unknown_option_before_the_compiler() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("x.c"), "int x(void) { return 1; }\n");
    let l = Launcher::new(&ctx.cache);
    let r = l.run(&dir, &["compile", "--cache-rot", "c", "gcc", "-c", "x.c", "-o", "x.o"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("unknown option \"--cache-rot\" of `strata compile`"),
        "{}",
        r.stderr
    );
    assert!(!dir.join("x.o").exists());
    assert_eq!(l.counters(), counts(&[]));
    // After `--` the first word is the compiler, whatever it looks like.
    let r = l.run(&dir, &["compile", "--", "gcc", "-c", "x.c", "-o", "x.o"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(l.counters(), counts(&[("miss", 1)]));
}
