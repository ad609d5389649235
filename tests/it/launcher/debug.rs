//! `-g` without a prefix map: the object embeds the build directory, so it is cached but
//! pinned there (a relocated checkout MISSes), and the launcher warns once per directory.

use super::{
    Launcher, TestContext, assert_same_bytes, copy_tree, plain, read, require_tool, write_file,
};

const WARNING: &str = "embed absolute paths of this checkout (debug information, __FILE__)";

#[test]
fn launcher_debug_info_pins_to_the_directory_and_warns_once_per_directory() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let a = ctx.path("a/proj");
    write_file(&a.join("one.c"), "int one(void) { return 1; }\n");
    write_file(&a.join("two.c"), "int two(void) { return 2; }\n");
    let b = ctx.path("b/proj");
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    copy_tree(&a, &b);
    let at_a = Launcher::new(&ctx.cache).base_dirs(&[&ctx.path("a")]);
    let at_b = Launcher::new(&ctx.cache).base_dirs(&[&ctx.path("b")]);
    let tu = |n: &str| {
        ["gcc", "-g", "-O1", "-c"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("{n}.c"), "-o".into(), format!("{n}.o")])
            .collect::<Vec<_>>()
    };
    let warnings = |stderr: &str| stderr.matches(WARNING).count();

    let first = at_a.expect(&a, &tu("one"), "miss");
    assert_eq!(warnings(&first.stderr), 1, "{}", first.stderr);
    assert!(first.stderr.contains(a.to_str().unwrap()), "{}", first.stderr);
    assert!(first.stderr.contains("-ffile-prefix-map"), "the warning says what to do");
    let second = at_a.expect(&a, &tu("two"), "miss");
    assert_eq!(
        warnings(&second.stderr),
        0,
        "warned again in the same directory:\n{}",
        second.stderr
    );
    let hit = at_a.expect(&a, &tu("one"), "hit");
    assert_eq!(warnings(&hit.stderr), 0, "{}", hit.stderr);

    // In the relocated checkout the cached object would name /…/a/proj: a MISS, with the
    // right object, and one warning for this directory.
    let want = {
        plain(&b, &tu("one"), &[]).expect_code(0);
        let bytes = read(&b.join("one.o"));
        std::fs::remove_file(b.join("one.o")).unwrap();
        bytes
    };
    let there = at_b.expect(&b, &tu("one"), "miss");
    assert_same_bytes("one.o in the other checkout", &read(&b.join("one.o")), &want);
    assert_eq!(warnings(&there.stderr), 1, "{}", there.stderr);
    let again = at_b.expect(&b, &tu("two"), "miss");
    assert_eq!(warnings(&again.stderr), 0, "{}", again.stderr);
    at_b.expect(&b, &tu("one"), "hit");
    at_a.expect(&a, &tu("one"), "hit");

    // With the prefix map the object no longer embeds the directory: no warning, and
    // shared across the checkouts.
    let mapped = |base: &std::path::Path, n: &str| {
        let mut v = tu(n);
        v.insert(1, format!("-ffile-prefix-map={}=.", base.display()));
        v
    };
    let m = at_a.expect(&a, &mapped(&ctx.path("a"), "one"), "miss");
    assert_eq!(warnings(&m.stderr), 0, "{}", m.stderr);
    at_b.expect(&b, &mapped(&ctx.path("b"), "one"), "hit");
}

/// The build enters its directory through a symlink (a shell's `cd` keeps `PWD` as the
/// logical path, and GCC embeds that one): the object is pinned to the path it holds, so
/// a copy of the project elsewhere (same relative command, same key) does not get an
/// object whose debug information names the first directory.
#[test]
fn launcher_a_working_directory_reached_through_a_symlink_pins_the_path_gcc_embeds() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let real = ctx.path("real/proj");
    write_file(&real.join("g.c"), "int g(void) { return 1; }\n");
    std::os::unix::fs::symlink(ctx.path("real"), ctx.path("link")).unwrap();
    let logical = ctx.path("link/proj");
    let b = ctx.path("b/proj");
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    copy_tree(&real, &b);
    let argv = ["gcc", "-g", "-O1", "-c", "g.c", "-o", "g.o"];
    let l = Launcher::new(&ctx.cache);
    let first = l.clone().env("PWD", &logical).expect(&logical, &argv, "miss");
    assert_eq!(first.stderr.matches(WARNING).count(), 1, "{}", first.stderr);
    assert!(
        memchr::memmem::find(&read(&real.join("g.o")), logical.to_str().unwrap().as_bytes())
            .is_some()
    );
    let want = {
        plain(&b, &argv, &[]).expect_code(0);
        let bytes = read(&b.join("g.o"));
        std::fs::remove_file(b.join("g.o")).unwrap();
        bytes
    };
    l.expect(&b, &argv, "miss");
    assert_same_bytes("g.o in the copy", &read(&b.join("g.o")), &want);
    // Back through the symlink: its own result.
    l.clone().env("PWD", &logical).expect(&logical, &argv, "hit");
}
