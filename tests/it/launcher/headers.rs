//! Direct mode and headers: a changed header MISSes exactly the TUs that include it; a
//! header newly created earlier on the include path (shadowing the one read) is a MISS —
//! where ccache's direct mode, in the same scenario, gives a false HIT.

use std::path::Path;
use std::process::Command;

use super::{
    Launcher, RUN_TIMEOUT, TestContext, assert_same_bytes, copy_tree, plain_object, read,
    require_tool, run_bounded, same_as_plain, scrub, write_file,
};

#[test]
fn launcher_a_changed_header_misses_exactly_the_tus_that_include_it() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("inc/h1.h"), "#define ONE 1\n");
    write_file(&dir.join("inc/h2.h"), "#define TWO 2\n");
    write_file(
        &dir.join("src/a.c"),
        "#include \"h1.h\"\n#include \"h2.h\"\nint a(void) { return ONE + TWO; }\n",
    );
    write_file(&dir.join("src/b.c"), "#include \"h2.h\"\nint b(void) { return TWO; }\n");
    write_file(&dir.join("src/c.c"), "#include <stddef.h>\nsize_t c(void) { return 3; }\n");
    let l = Launcher::new(&ctx.cache);
    let tu = |name: &str| {
        vec![
            "gcc".to_owned(),
            "-O2".into(),
            "-Iinc".into(),
            "-c".into(),
            format!("src/{name}.c"),
            "-o".into(),
            format!("{name}.o"),
        ]
    };
    for name in ["a", "b", "c"] {
        l.expect(&dir, &tu(name), "miss");
    }
    for name in ["a", "b", "c"] {
        l.expect(&dir, &tu(name), "hit");
    }
    // Same content rewritten (new mtime): still a HIT (content, not time, decides).
    write_file(&dir.join("inc/h1.h"), "#define ONE 1\n");
    l.expect(&dir, &tu("a"), "hit");
    // h1.h changes: only a.c includes it.
    write_file(&dir.join("inc/h1.h"), "#define ONE 100\n");
    let outcomes: Vec<String> = ["a", "b", "c"].iter().map(|n| l.compile(&dir, &tu(n)).1).collect();
    assert_eq!(outcomes, ["miss", "hit", "hit"]);
    let want = plain_object(&dir, &tu("a"), "a.o");
    l.expect(&dir, &tu("a"), "hit");
    assert_same_bytes("a.o after h1.h changed", &read(&dir.join("a.o")), &want);
    // h2.h changes: a.c and b.c.
    write_file(&dir.join("inc/h2.h"), "#define TWO 200\n");
    let outcomes: Vec<String> = ["a", "b", "c"].iter().map(|n| l.compile(&dir, &tu(n)).1).collect();
    assert_eq!(outcomes, ["miss", "miss", "hit"]);
    // A header removed: a MISS that fails like the compiler does, and is not cached.
    std::fs::remove_file(dir.join("inc/h1.h")).unwrap();
    let (r, outcome) = l.compile(&dir, &tu("a"));
    assert_eq!((r.code != 0, outcome.as_str()), (true, "compile_failed"), "{}", r.stderr);
    assert!(r.stderr.contains("h1.h"), "{}", r.stderr);
}

/// The shadowing scenario: `-Iinc1 -Iinc2`, `same.h` found in inc2; then `inc1/same.h` is
/// created.
fn shadow_project(dir: &Path) -> Vec<String> {
    write_file(&dir.join("inc2/same.h"), "#define WHICH 2\n");
    std::fs::create_dir_all(dir.join("inc1")).unwrap();
    write_file(&dir.join("src/s.c"), "#include \"same.h\"\nint which(void) { return WHICH; }\n");
    ["gcc", "-O2", "-Iinc1", "-Iinc2", "-c", "src/s.c", "-o", "s.o"].map(String::from).to_vec()
}

#[test]
fn launcher_a_new_header_that_shadows_the_one_read_is_a_miss() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    let argv = shadow_project(&dir);
    let l = Launcher::new(&ctx.cache);
    let old = plain_object(&dir, &argv, "s.o");
    l.expect(&dir, &argv, "miss");
    l.expect(&dir, &argv, "hit");
    assert_same_bytes("s.o (inc2/same.h)", &read(&dir.join("s.o")), &old);
    write_file(&dir.join("inc1/same.h"), "#define WHICH 1\n");
    let new = plain_object(&dir, &argv, "s.o");
    assert_ne!(old, new, "the new header changes the object");
    l.expect(&dir, &argv, "miss");
    assert_same_bytes("s.o after inc1/same.h appeared", &read(&dir.join("s.o")), &new);
    l.expect(&dir, &argv, "hit");
    assert_same_bytes("s.o (inc1/same.h)", &read(&dir.join("s.o")), &new);
    // The shadowing header goes away again: the first result applies again.
    std::fs::remove_file(dir.join("inc1/same.h")).unwrap();
    l.expect(&dir, &argv, "hit");
    assert_same_bytes("s.o (inc2/same.h again)", &read(&dir.join("s.o")), &old);
    // A symlink counts as a file there.
    std::os::unix::fs::symlink(dir.join("inc2/same.h"), dir.join("inc1/same.h")).unwrap();
    l.expect(&dir, &argv, "miss");
}

/// The same, in a copy of the project at another path with relative paths and no base
/// directories (the key has no absolute path, so the copy shares the entry): the shadow
/// probes must be checked in the copy, not where the entry was saved.
#[test]
fn launcher_shadow_probes_apply_where_the_build_runs_not_where_it_was_saved() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let a = ctx.path("a/proj");
    let argv = shadow_project(&a);
    let l = Launcher::new(&ctx.cache);
    l.expect(&a, &argv, "miss");
    let b = ctx.path("b/proj");
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    copy_tree(&a, &b);
    std::fs::remove_file(b.join("s.o")).unwrap();
    l.expect(&b, &argv, "hit");
    // In the copy only, a header now shadows inc2/same.h.
    write_file(&b.join("inc1/same.h"), "#define WHICH 1\n");
    let new = plain_object(&b, &argv, "s.o");
    l.expect(&b, &argv, "miss");
    assert_same_bytes("s.o in the copy", &read(&b.join("s.o")), &new);
    // The original is untouched: still its own HIT.
    l.expect(&a, &argv, "hit");
}

/// ccache's direct mode in the same scenario returns the old object (the documented false
/// hit strata avoids).
#[test]
fn launcher_ccache_direct_mode_hits_falsely_where_strata_misses() {
    require_tool("ccache", "apt-get install ccache (scripts/test.sh installs it)");
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    let argv = shadow_project(&dir);
    let ccache_dir = ctx.path("ccache");
    let ccache = |args: &[&str]| {
        let mut cmd = Command::new("ccache");
        cmd.args(args).current_dir(&dir);
        scrub(&mut cmd);
        cmd.env("CCACHE_DIR", &ccache_dir)
            .env("CCACHE_CONFIGPATH", ctx.path("ccache.conf"))
            .env("CCACHE_DIRECT", "1")
            // Headers written just before the compile must not turn direct mode off.
            .env("CCACHE_SLOPPINESS", "include_file_mtime,include_file_ctime");
        run_bounded(cmd, RUN_TIMEOUT)
    };
    let through: Vec<&str> = argv.iter().map(String::as_str).collect();
    let old = plain_object(&dir, &argv, "s.o");
    ccache(&through).expect_code(0);
    ccache(&through).expect_code(0);
    let stats = ccache(&["--print-stats"]);
    assert_eq!(stat(&stats.stdout, "direct_cache_hit"), 1, "{}", stats.stdout);
    write_file(&dir.join("inc1/same.h"), "#define WHICH 1\n");
    let new = plain_object(&dir, &argv, "s.o");
    ccache(&through).expect_code(0);
    let stats = ccache(&["--print-stats"]);
    assert_eq!(stat(&stats.stdout, "direct_cache_hit"), 2, "ccache hits: {}", stats.stdout);
    let got = read(&dir.join("s.o"));
    assert_eq!(got, old, "ccache hands back the object built with inc2/same.h");
    assert_ne!(got, new);
    // strata, same scenario, same state: a MISS with the right object.
    std::fs::remove_file(dir.join("inc1/same.h")).unwrap();
    let l = Launcher::new(&ctx.cache);
    l.expect(&dir, &argv, "miss");
    l.expect(&dir, &argv, "hit");
    write_file(&dir.join("inc1/same.h"), "#define WHICH 1\n");
    l.expect(&dir, &argv, "miss");
    assert_same_bytes("strata's s.o", &read(&dir.join("s.o")), &new);
}

/// A counter of `ccache --print-stats` (tab-separated `name value` lines).
fn stat(text: &str, name: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in ccache stats:\n{text}"))
}

/// The build directory is a symlink and the shell's `PWD` names it through the link: a
/// relative `..` path goes where the kernel takes it (the link's target's parent), and the
/// lookup must check the header the compiler read there, not a lexical look-alike.
#[test]
fn launcher_relative_headers_resolve_as_the_kernel_does_in_a_symlinked_build_dir() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let scratch = ctx.path("scratch");
    std::fs::create_dir_all(scratch.join("b1")).unwrap();
    write_file(&scratch.join("include/x.h"), "#define X 1\n");
    write_file(&scratch.join("src/a.c"), "#include \"x.h\"\nint a(void) { return X; }\n");
    // The look-alike where a lexical `proj/build/..` would lead.
    write_file(&ctx.path("proj/include/x.h"), "#define X 1\n");
    write_file(&ctx.path("proj/src/a.c"), "#include \"x.h\"\nint a(void) { return X; }\n");
    std::os::unix::fs::symlink(scratch.join("b1"), ctx.path("proj/build")).unwrap();
    let build = ctx.path("proj/build");
    let argv = ["gcc", "-O2", "-I../include", "-c", "../src/a.c", "-o", "a.o"];
    let l = Launcher::new(&ctx.cache).env("PWD", &build);
    l.expect(&build, &argv, "miss");
    l.expect(&build, &argv, "hit");
    write_file(&scratch.join("include/x.h"), "#define X 2\n");
    let want = plain_object(&build, &argv, "a.o");
    l.expect(&build, &argv, "miss");
    assert_same_bytes("a.o with the header gcc read", &read(&build.join("a.o")), &want);
}

/// A MISS writes no verification memo for its entry (a cold build would create a file per
/// compile for it); the first HIT, from another build directory of the checkout, vouches
/// for the headers through the machine's memo of inputs, places outputs equal to a plain
/// compile's, and writes the entry's memo, which then vouches for each header by its stamp.
#[test]
fn launcher_the_first_hit_writes_the_verification_memo_a_miss_does_not() {
    use strata::content::VerifyMemo;
    use strata::digest::{ContentDigest, DigestAlgorithm};
    use strata::launcher::entry::{EntryPlace, header_memo_name};
    require_tool("gcc", "apt-get install gcc");
    require_tool("clang", "apt-get install clang");
    let ctx = TestContext::new();
    // stdio.h is far older than the memo's 2 s rule, so the HIT remembers it.
    let stdio = Path::new("/usr/include/stdio.h");
    let stamp = strata::fs::FileStamp::of(&std::fs::metadata(stdio).unwrap());
    let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, &read(stdio));
    for cc in ["gcc", "clang"] {
        let dir = ctx.path(cc);
        write_file(
            &dir.join("src/a.c"),
            "#include <stdio.h>\nint a(void) { return puts(\"a\"); }\n",
        );
        for build in ["b1", "b2"] {
            std::fs::create_dir_all(dir.join(build)).unwrap();
        }
        let l = Launcher::new(&ctx.cache.join(cc)).base_dirs(&[&dir]);
        let argv = [cc, "-O2", "-MD", "-MF", "a.o.d", "-c", "../src/a.c", "-o", "a.o"];
        l.expect(&dir.join("b1"), &argv, "miss");
        let entries = l.entries();
        assert_eq!(entries.len(), 1);
        let root = strata::action::layout::CacheRoot::new(&ctx.cache.join(cc)).unwrap();
        let place = EntryPlace::new(&root, &entries[0].compile_key());
        assert!(!place.memo.exists(), "{cc}: a MISS wrote {}", place.memo.display());
        let outcome = same_as_plain(&l, &dir.join("b2"), &argv, &["a.o", "a.o.d"], &[]);
        assert_eq!(outcome, "hit", "{cc}");
        let memo = VerifyMemo::load(&place.memo, &place.rel);
        assert!(
            memo.vouches(&header_memo_name(stdio), &stamp, &digest),
            "{cc}: the memo at {} does not vouch for {} after the HIT",
            place.memo.display(),
            stdio.display()
        );
        let outcome = same_as_plain(&l, &dir.join("b1"), &argv, &["a.o", "a.o.d"], &[]);
        assert_eq!(outcome, "hit", "{cc}");
    }
}

/// The machine's memo of headers (`.local/input-memo`): a MISS that read a settled header
/// remembers its digest and that its text holds no time macro, so the next compile that
/// includes it does not read it again; an edited header has another stamp and is read and
/// scanned again, whatever the memo says, and the objects equal plain compiles throughout.
#[test]
fn launcher_the_machine_memo_of_headers_never_hides_an_edit() {
    require_tool("gcc", "apt-get install gcc");
    require_tool("clang", "apt-get install clang");
    let ctx = TestContext::new();
    let compilers = ["gcc", "clang"];
    for cc in compilers {
        let dir = ctx.path(cc);
        write_file(&dir.join("inc/t.h"), "#define T \"one\"\n");
        write_file(&dir.join("src/a.c"), "#include \"t.h\"\nconst char *a(void) { return T; }\n");
        write_file(&dir.join("src/b.c"), "#include \"t.h\"\nconst char *b(void) { return T; }\n");
    }
    // Older than the memo's 2 s rule for racy stamps when the compiles start.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    for cc in compilers {
        let dir = ctx.path(cc);
        let cache = ctx.path(&format!("cache-{cc}"));
        let l = Launcher::new(&cache);
        let tu = |name: &str| {
            [cc, "-O2", "-Iinc", "-c", &format!("src/{name}.c"), "-o", &format!("{name}.o")]
                .map(str::to_owned)
        };
        l.expect(&dir, &tu("a"), "miss");
        let memos = std::fs::read_dir(cache.join(".local/input-memo")).map(|d| d.count());
        assert!(memos.is_ok_and(|n| n >= 1), "{cc}: no memo under .local/input-memo after a MISS");
        l.expect(&dir, &tu("b"), "miss");
        assert_same_bytes("b.o", &read(&dir.join("b.o")), &plain_object(&dir, &tu("b"), "b.o"));
        // STRATA_INPUT_MEMO=0: another cache root gets no memo.
        let off_cache = ctx.path(&format!("cache-without-memo-{cc}"));
        Launcher::new(&off_cache).env("STRATA_INPUT_MEMO", "0").expect(&dir, &tu("a"), "miss");
        assert!(
            !off_cache.join(".local/input-memo").exists(),
            "{cc}: a memo with STRATA_INPUT_MEMO=0"
        );
        // The header gains a time macro's name (never expanded: only the scan sees it).
        write_file(&dir.join("inc/t.h"), "#define T \"two\"\n#if 0\n__TIME__\n#endif\n");
        let (r, outcome) = l.compile(&dir, &tu("b"));
        assert_eq!(
            (r.code, outcome.as_str()),
            (0, "uncacheable:time_macros"),
            "{cc}: {}",
            r.stderr
        );
        // Back to its old bytes (a new stamp): content decides, b is a HIT again.
        write_file(&dir.join("inc/t.h"), "#define T \"one\"\n");
        l.expect(&dir, &tu("b"), "hit");
        assert_same_bytes("b.o", &read(&dir.join("b.o")), &plain_object(&dir, &tu("b"), "b.o"));
    }
}

/// An include directory spelled as the working directory, `//` and a `..` (as a build
/// system that joins `${CMAKE_CURRENT_SOURCE_DIR}/` and `/sub/../E` writes it): the facts
/// about it are recorded relative to the working directory, never as the absolute path
/// `/sub/../E` that stripping the directory and one `/` leaves. A header created later
/// where the compiler searches is a MISS; every run writes what a plain compile writes
/// (object, depfile, messages), with gcc and clang.
#[test]
fn launcher_a_doubled_slash_after_the_working_directory_keeps_facts_in_place() {
    require_tool("gcc", "apt-get install gcc");
    require_tool("clang", "apt-get install clang");
    let ctx = TestContext::new();
    for cc in ["gcc", "clang"] {
        let dir = ctx.path(cc);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::create_dir_all(dir.join("E")).unwrap();
        write_file(&dir.join("inc/x.h"), "#define X 1\n");
        write_file(&dir.join("a.c"), "#include \"x.h\"\nint a(void) { return X; }\n");
        let l = Launcher::new(&ctx.path(&format!("cache-{cc}")));
        let include = format!("-I{}//sub/../E", dir.display());
        let argv = [cc, &include, "-Iinc", "-MD", "-c", "a.c", "-o", "a.o"];
        let run = || same_as_plain(&l, &dir, &argv, &["a.o", "a.d"], &[]);
        assert_eq!(run(), "miss", "{cc}");
        assert_eq!(run(), "hit", "{cc}");
        // The compiler's first directory is <dir>/sub/../E, that is <dir>/E.
        write_file(&dir.join("E/x.h"), "#define X 2\n");
        assert_eq!(run(), "miss", "{cc}: a header where the compiler searches first");
        assert_eq!(run(), "hit", "{cc}");
    }
}

/// Two include paths that are one file (a symlink or a hard link to a header also included
/// by its own name) against two copies with the same bytes: Clang names a file it reaches
/// twice by the first path it used, in debug information, so the object differs though
/// every input has the same content. A compile whose inputs are one file under two names is
/// not cached, and a candidate saved with two files does not apply once they are one; every
/// run writes what a plain compile writes (object, depfile, messages), with gcc and clang.
#[test]
fn launcher_inputs_that_become_one_file_are_not_a_hit() {
    require_tool("gcc", "apt-get install gcc");
    require_tool("clang", "apt-get install clang");
    let ctx = TestContext::new();
    let header = "#ifndef H_H\n#define H_H\nstatic inline int h(void) { return 1; }\n#endif\n";
    for cc in ["gcc", "clang"] {
        let dir = ctx.path(cc);
        write_file(&dir.join("inc/h.h"), header);
        write_file(&dir.join("other/hl.h"), header);
        write_file(
            &dir.join("a.c"),
            "#include \"inc/h.h\"\n#include \"hl.h\"\nint a(void) { return h(); }\n",
        );
        let l = Launcher::new(&ctx.path(&format!("cache-{cc}")));
        let argv = [cc, "-g", "-Iother", "-MD", "-c", "a.c", "-o", "a.o"];
        let run = || same_as_plain(&l, &dir, &argv, &["a.o", "a.d"], &[]);
        let link = dir.join("other/hl.h");
        // Two copies: cached.
        assert_eq!(run(), "miss", "{cc}");
        assert_eq!(run(), "hit", "{cc}");
        // The copy becomes a symlink to the header: not that HIT, and not cached.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("../inc/h.h", &link).unwrap();
        assert_eq!(run(), "uncacheable:aliased_inputs", "{cc}: symlink");
        // A hard link: the same.
        std::fs::remove_file(&link).unwrap();
        std::fs::hard_link(dir.join("inc/h.h"), &link).unwrap();
        assert_eq!(run(), "uncacheable:aliased_inputs", "{cc}: hard link");
        // A copy again: the first candidate applies.
        std::fs::remove_file(&link).unwrap();
        write_file(&link, header);
        assert_eq!(run(), "hit", "{cc}: a copy again");
    }
}

#[test]
fn launcher_a_search_directory_dropped_as_a_duplicate_is_not_cached() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("inc3/h.h"), "#define V 3\n");
    write_file(&dir.join("other/h.h"), "#define V 2\n");
    write_file(&dir.join("u.c"), "#include <h.h>\nint u(void) { return V; }\n");
    std::fs::create_dir_all(dir.join("inc1")).unwrap();
    // inc2 is inc1: gcc drops it as a duplicate and never looks into it.
    std::os::unix::fs::symlink("inc1", dir.join("inc2")).unwrap();
    let argv = ["gcc", "-O2", "-Iinc1", "-Iinc2", "-Iinc3", "-c", "u.c", "-o", "u.o"];
    let l = Launcher::new(&ctx.cache);
    l.expect(&dir, &argv, "uncacheable:duplicate_search_directory");
    assert!(l.entries().is_empty());
    // Now inc2 is another directory, searched before inc3: its h.h (V 2) is found.
    std::fs::remove_file(dir.join("inc2")).unwrap();
    std::os::unix::fs::symlink("other", dir.join("inc2")).unwrap();
    assert_eq!(same_as_plain(&l, &dir, &argv, &["u.o"], &[]), "miss");
    assert_eq!(same_as_plain(&l, &dir, &argv, &["u.o"], &[]), "hit");
}

/// The fallback model (`STRATA_TRACE=0`): what the compiler skips on its search path (an
/// include directory that is a file, a name there that is a dangling symlink) is no fact
/// of the model, so such a compile is not cached; once it is a real header, it is found.
#[test]
fn launcher_the_model_does_not_cache_what_the_compiler_skips_on_its_search_path() {
    require_tool("gcc", "apt-get install gcc");
    type Setup = fn(&Path);
    let cases: [(&str, Setup, Setup); 2] = [
        (
            "inc1 is a file",
            |dir| write_file(&dir.join("inc1"), ""),
            |dir| {
                std::fs::remove_file(dir.join("inc1")).unwrap();
                write_file(&dir.join("inc1/h.h"), "#define V 1\n");
            },
        ),
        (
            "inc1/h.h is a dangling symlink",
            |dir| {
                std::fs::create_dir_all(dir.join("inc1")).unwrap();
                std::os::unix::fs::symlink("missing.h", dir.join("inc1/h.h")).unwrap();
            },
            |dir| write_file(&dir.join("inc1/missing.h"), "#define V 1\n"),
        ),
    ];
    for (what, before, after) in cases {
        let ctx = TestContext::new();
        let dir = ctx.path("proj");
        write_file(&dir.join("inc2/h.h"), "#define V 2\n");
        write_file(&dir.join("u.c"), "#include <h.h>\nint u(void) { return V; }\n");
        before(&dir);
        let argv = ["gcc", "-O2", "-Iinc1", "-Iinc2", "-c", "u.c", "-o", "u.o"];
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", "0");
        l.expect(&dir, &argv, "uncacheable:model_odd_search_path");
        assert!(l.entries().is_empty(), "{what}");
        after(&dir);
        assert_eq!(same_as_plain(&l, &dir, &argv, &["u.o"], &[]), "miss", "{what}");
        assert_eq!(same_as_plain(&l, &dir, &argv, &["u.o"], &[]), "hit", "{what}");
    }
}

/// `<dir>/h.h.gch` precompiled from `#define V 1`, then `<dir>/h.h` changed to `V 2`: gcc
/// still uses the precompiled one where it applies.
fn stale_precompiled_header(dir: &Path) {
    write_file(&dir.join("h.h"), "#define V 1\n");
    let pch = ["gcc", "-O2", "-x", "c-header", "h.h", "-o", "h.h.gch"];
    assert!(Command::new(pch[0]).args(&pch[1..]).current_dir(dir).status().unwrap().success());
    write_file(&dir.join("h.h"), "#define V 2\n");
}

/// The fallback model (`STRATA_TRACE=0`): a precompiled header for a forced include
/// (`-include h.h` with `h.h.gch` beside it) is used without the dependency output naming
/// either file, so the model probes for it itself and does not cache while one exists.
#[test]
fn launcher_the_model_does_not_cache_a_forced_include_with_a_precompiled_header() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    // The header changes; the precompiled one (V 1) is still what gcc uses.
    stale_precompiled_header(&dir);
    write_file(&dir.join("u.c"), "int u(void) { return V; }\n");
    let argv = ["gcc", "-O2", "-include", "h.h", "-c", "u.c", "-o", "u.o"];
    let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", "0");
    l.expect(&dir, &argv, "uncacheable:model_precompiled_header");
    assert!(l.entries().is_empty());
    std::fs::remove_file(dir.join("h.h.gch")).unwrap();
    assert_eq!(same_as_plain(&l, &dir, &argv, &["u.o"], &[]), "miss");
    assert_eq!(same_as_plain(&l, &dir, &argv, &["u.o"], &[]), "hit");
}

/// The fallback model: a first `#include` that names its header through a macro
/// (`#define HDR "h.h"` / `#include HDR`) may be served by a stale `h.h.gch`, and the
/// dependency output then names neither file: not cached while the model cannot tell which
/// precompiled header applies. Traced, the compile is cached and right.
#[test]
fn launcher_the_model_does_not_cache_a_computed_first_include() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    stale_precompiled_header(&dir);
    write_file(&dir.join("u.c"), "#define HDR \"h.h\"\n#include HDR\nint u(void) { return V; }\n");
    let argv = ["gcc", "-O2", "-c", "u.c", "-o", "u.o"];
    let model = Launcher::new(&ctx.cache).env("STRATA_TRACE", "0");
    model.expect(&dir, &argv, "uncacheable:model_unseen_input");
    std::fs::remove_file(dir.join("h.h.gch")).unwrap();
    model.expect(&dir, &argv, "uncacheable:model_unseen_input");
    assert!(model.entries().is_empty());
    let traced = Launcher::new(&ctx.cache);
    assert_eq!(same_as_plain(&traced, &dir, &argv, &["u.o"], &[]), "miss");
    assert_eq!(same_as_plain(&traced, &dir, &argv, &["u.o"], &[]), "hit");
}

/// The fallback model: a header found in a search directory spelled through a symlink
/// (`-isystem <dir>/link-to-sys`) is named by its canonical path in the dependency output.
/// The model matches the directory by that path too, so a header created later earlier on
/// the path (`-Iinc1`) is a MISS, equal to plain gcc, never the old object.
#[test]
fn launcher_the_model_matches_a_search_directory_spelled_through_a_symlink() {
    require_tool("gcc", "apt-get install gcc");
    for spelled in ["link-to-sys", "sub/../sys"] {
        let ctx = TestContext::new();
        let dir = ctx.path("proj");
        write_file(&dir.join("sys/h.h"), "#define V 2\n");
        std::fs::create_dir_all(dir.join("inc1")).unwrap();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::os::unix::fs::symlink("sys", dir.join("link-to-sys")).unwrap();
        write_file(&dir.join("u.c"), "#include <h.h>\nint u(void) { return V; }\n");
        let system = dir.join(spelled);
        let argv: Vec<String> = ["gcc", "-O2", "-Iinc1", "-isystem", system.to_str().unwrap()]
            .into_iter()
            .chain(["-c", "u.c", "-o", "u.o"])
            .map(str::to_owned)
            .collect();
        let model = Launcher::new(&ctx.cache).env("STRATA_TRACE", "0");
        assert_eq!(same_as_plain(&model, &dir, &argv, &["u.o"], &[]), "miss", "{spelled}");
        assert_eq!(same_as_plain(&model, &dir, &argv, &["u.o"], &[]), "hit", "{spelled}");
        write_file(&dir.join("inc1/h.h"), "#define V 1\n");
        assert_eq!(same_as_plain(&model, &dir, &argv, &["u.o"], &[]), "miss", "{spelled}");
    }
}

/// The fallback model, C++: a project header created later with the name of a standard
/// header (`inc1/vector`) earlier on the path (`-Iinc1`) is a MISS, equal to plain g++.
#[test]
fn launcher_the_model_sees_a_new_project_header_shadow_a_standard_one() {
    require_tool("g++", "apt-get install g++");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    std::fs::create_dir_all(dir.join("inc1")).unwrap();
    write_file(
        &dir.join("u.cc"),
        "#include <vector>\n#ifndef V_MARK\n#define V_MARK 2\n#endif\nint u() { return V_MARK; }\n",
    );
    let argv = ["g++", "-O2", "-Iinc1", "-c", "u.cc", "-o", "u.o"];
    let model = Launcher::new(&ctx.cache).env("STRATA_TRACE", "0");
    assert_eq!(same_as_plain(&model, &dir, &argv, &["u.o"], &[]), "miss");
    assert_eq!(same_as_plain(&model, &dir, &argv, &["u.o"], &[]), "hit");
    write_file(&dir.join("inc1/vector"), "#define V_MARK 1\n");
    assert_eq!(same_as_plain(&model, &dir, &argv, &["u.o"], &[]), "miss");
}
