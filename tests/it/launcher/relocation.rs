//! Relocation with base directories: a copy of the sources at another absolute path HITs,
//! and the depfile written there names the new paths; a TU whose object embeds its path
//! (`__FILE__`) HITs across checkouts only with `-ffile-prefix-map`, and across build
//! directories of one checkout always (the embedded path is the same).

use std::path::{Path, PathBuf};

use super::{
    Launcher, TestContext, assert_same_bytes, copy_tree, depfile_rules, plain, read, require_tool,
    s, write_file,
};

/// A checkout at `<base>/proj`: `src/x.c` (includes `include/x.h`), `src/f.c` (uses
/// `__FILE__`), and an empty `build/`.
pub(super) fn checkout(base: &Path) -> PathBuf {
    let proj = base.join("proj");
    write_file(&proj.join("include/x.h"), "#define X 5\n");
    write_file(
        &proj.join("src/x.c"),
        "#include <stdio.h>\n#include \"x.h\"\nint x(void) { return printf(\"%d\", X); }\n",
    );
    write_file(
        &proj.join("src/f.c"),
        "#include \"x.h\"\nconst char *where(void) { return __FILE__; }\nint fx = X;\n",
    );
    std::fs::create_dir_all(proj.join("build")).unwrap();
    proj
}

/// A CMake-style compile of `src/<tu>.c` (absolute paths, `-MD -MT -MF`), with `extra`.
pub(super) fn cmake_style(proj: &Path, tu: &str, extra: &[String]) -> Vec<String> {
    let mut argv = vec!["gcc".to_owned(), "-O2".into(), format!("-I{}", s(&proj.join("include")))];
    argv.extend(extra.iter().cloned());
    argv.extend([
        "-MD".into(),
        "-MT".into(),
        format!("{tu}.o"),
        "-MF".into(),
        format!("{tu}.o.d"),
        "-o".into(),
        format!("{tu}.o"),
        "-c".into(),
        s(&proj.join(format!("src/{tu}.c"))),
    ]);
    argv
}

/// Runs the plain compiler, returns (object, depfile) and removes both.
fn plain_outputs(cwd: &Path, argv: &[String], tu: &str) -> (Vec<u8>, Vec<u8>) {
    plain(cwd, argv, &[]).expect_code(0);
    let (o, d) = (cwd.join(format!("{tu}.o")), cwd.join(format!("{tu}.o.d")));
    let out = (read(&o), read(&d));
    std::fs::remove_file(o).unwrap();
    std::fs::remove_file(d).unwrap();
    out
}

#[test]
fn launcher_relocated_checkout_hits_and_its_depfile_names_the_new_paths() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let base_a = ctx.path("a");
    let base_b = ctx.path("x/y");
    let a = checkout(&base_a);
    std::fs::create_dir_all(&base_b).unwrap();
    copy_tree(&a, &base_b.join("proj"));
    let b = base_b.join("proj");
    let at_a = Launcher::new(&ctx.cache).base_dirs(&[&base_a]);
    let at_b = Launcher::new(&ctx.cache).base_dirs(&[&base_b]);

    at_a.expect(&a.join("build"), &cmake_style(&a, "x", &[]), "miss");
    let argv_b = cmake_style(&b, "x", &[]);
    let (want_o, want_d) = plain_outputs(&b.join("build"), &argv_b, "x");
    at_b.expect(&b.join("build"), &argv_b, "hit");
    assert_same_bytes("x.o at the new place", &read(&b.join("build/x.o")), &want_o);
    let depfile = read(&b.join("build/x.o.d"));
    let text = String::from_utf8_lossy(&depfile);
    assert!(!text.contains(&s(&a)), "the depfile names the old checkout:\n{text}");
    assert!(text.contains(&s(&b.join("include/x.h"))), "{text}");
    assert_eq!(
        depfile_rules(&b.join("build/x.o.d")),
        strata::launcher::depfile::parse(&want_d).unwrap(),
        "the depfile says what the compiler's own would"
    );
    // Without base directories, the absolute paths differ: another key, a MISS.
    let no_base = Launcher::new(&ctx.cache);
    no_base.expect(&b.join("build"), &argv_b, "miss");
}

#[test]
fn launcher_file_macro_pins_unless_the_prefix_map_makes_it_relative() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let base_a = ctx.path("a");
    let base_b = ctx.path("x/y");
    let a = checkout(&base_a);
    std::fs::create_dir_all(&base_b).unwrap();
    copy_tree(&a, &base_b.join("proj"));
    let b = base_b.join("proj");
    let at_a = Launcher::new(&ctx.cache).base_dirs(&[&base_a]);
    let at_b = Launcher::new(&ctx.cache).base_dirs(&[&base_b]);

    // __FILE__ is the absolute source path: the object at B must name B's path.
    at_a.expect(&a.join("build"), &cmake_style(&a, "f", &[]), "miss");
    let argv_b = cmake_style(&b, "f", &[]);
    let (want_o, _) = plain_outputs(&b.join("build"), &argv_b, "f");
    at_b.expect(&b.join("build"), &argv_b, "miss");
    let got = read(&b.join("build/f.o"));
    assert_same_bytes("f.o at B", &got, &want_o);
    assert!(memchr::memmem::find(&got, s(&b.join("src/f.c")).as_bytes()).is_some());
    // Back at A, A's own result still applies (each location pins its own candidate).
    at_a.expect(&a.join("build"), &cmake_style(&a, "f", &[]), "hit");
    assert!(
        memchr::memmem::find(&read(&a.join("build/f.o")), s(&a.join("src/f.c")).as_bytes())
            .is_some()
    );

    // With -ffile-prefix-map=<base>=. the path in the object is relative: it HITs at B.
    let map = |base: &Path| vec![format!("-ffile-prefix-map={}=.", s(base))];
    at_a.expect(&a.join("build"), &cmake_style(&a, "f", &map(&base_a)), "miss");
    let argv_b = cmake_style(&b, "f", &map(&base_b));
    let (want_o, _) = plain_outputs(&b.join("build"), &argv_b, "f");
    at_b.expect(&b.join("build"), &argv_b, "hit");
    assert_same_bytes("prefix-mapped f.o at B", &read(&b.join("build/f.o")), &want_o);

    // Another build directory of checkout A: same source path, so __FILE__ is the same.
    let build2 = a.join("build2");
    std::fs::create_dir_all(&build2).unwrap();
    let argv2 = cmake_style(&a, "f", &[]);
    let (want_o, _) = plain_outputs(&build2, &argv2, "f");
    at_a.expect(&build2, &argv2, "hit");
    assert_same_bytes("f.o in build2", &read(&build2.join("f.o")), &want_o);
    at_a.expect(&build2, &cmake_style(&a, "x", &[]), "miss");
    at_a.expect(&a.join("build"), &cmake_style(&a, "x", &[]), "hit");
}

/// A warning names the source by its absolute path: the HIT in the relocated checkout
/// replays it with the new path, exactly as the compiler would print it there.
#[test]
fn launcher_replayed_messages_name_the_relocated_paths() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let base_a = ctx.path("a");
    let base_b = ctx.path("x/y");
    let a = checkout(&base_a);
    write_file(&a.join("src/w.c"), "#include \"x.h\"\nint w(void) { int unused; return X; }\n");
    std::fs::create_dir_all(&base_b).unwrap();
    copy_tree(&a, &base_b.join("proj"));
    let b = base_b.join("proj");
    let wall = ["-Wall".to_owned()];
    let cold = Launcher::new(&ctx.cache).base_dirs(&[&base_a]).expect(
        &a.join("build"),
        &cmake_style(&a, "w", &wall),
        "miss",
    );
    assert!(cold.stderr.contains(&s(&a.join("src/w.c"))), "{}", cold.stderr);
    let argv_b = cmake_style(&b, "w", &wall);
    let want = plain(&b.join("build"), &argv_b, &[]);
    want.expect_code(0);
    let warm =
        Launcher::new(&ctx.cache).base_dirs(&[&base_b]).expect(&b.join("build"), &argv_b, "hit");
    assert_eq!(warm.stderr, want.stderr, "the warning as the compiler prints it at B");
}

/// Issue 28: misses that come from embedded paths are said once per build with what to
/// add, in one EXPLAIN line per compile, and counted in `strata stats`; the advice works.
#[test]
fn launcher_misses_from_embedded_paths_are_explained_once_with_the_flag_to_add() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let base_a = ctx.path("a");
    let base_b = ctx.path("x/y");
    let a = checkout(&base_a);
    std::fs::create_dir_all(&base_b).unwrap();
    copy_tree(&a, &base_b.join("proj"));
    let b = base_b.join("proj");
    let at_a = Launcher::new(&ctx.cache).base_dirs(&[&base_a]).env("STRATA_EXPLAIN", "1");
    let at_b = Launcher::new(&ctx.cache).base_dirs(&[&base_b]).env("STRATA_EXPLAIN", "1");
    // Saved with a path of checkout A: said once for the directory, counted.
    let saved = at_a.expect(&a.join("build"), &cmake_style(&a, "f", &[]), "miss");
    assert_eq!(saved.stderr.matches("embed absolute paths of this checkout").count(), 1);
    // Two versions of the object (another -D): two candidates naming A.
    at_a.expect(&a.join("build"), &cmake_style(&a, "f", &["-DV=1".into()]), "miss");
    let other = at_a.expect(&a.join("build"), &cmake_style(&a, "f", &[]), "hit");
    assert!(!other.stderr.contains("embed absolute paths"), "once per directory");
    let first = at_b.expect(&b.join("build"), &cmake_style(&b, "f", &[]), "miss");
    let explain: Vec<&str> =
        first.stderr.lines().filter(|l| l.starts_with("strata: miss")).collect();
    assert_eq!(explain.len(), 1, "{}", first.stderr);
    assert!(
        explain[0].contains("1 candidate: 1 naming another checkout's path (")
            && explain[0].contains(&s(&a.join("src/f.c"))),
        "{}",
        explain[0]
    );
    let hint = format!("build with -ffile-prefix-map={}=.", s(&base_b));
    assert_eq!(first.stderr.matches(&hint).count(), 1, "{}", first.stderr);
    // The same build: no second hint.
    let second = at_b.expect(&b.join("build"), &cmake_style(&b, "f", &["-DV=1".into()]), "miss");
    assert!(!second.stderr.contains("hint:"), "{}", second.stderr);
    let stats = at_b.run(&b, &["stats"]);
    assert!(
        stats.stdout.contains("2 misses because the cached objects embed another checkout's path"),
        "{}",
        stats.stdout
    );
    assert!(
        stats.stdout.contains("results saved that embed this checkout's paths"),
        "{}",
        stats.stdout
    );
    // Following the advice: the object no longer names the checkout, and hits elsewhere.
    let map = |base: &Path| vec![format!("-ffile-prefix-map={}=.", s(base))];
    at_a.expect(&a.join("build"), &cmake_style(&a, "f", &map(&base_a)), "miss");
    at_b.expect(&b.join("build"), &cmake_style(&b, "f", &map(&base_b)), "hit");
}
