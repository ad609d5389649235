//! The launcher never caches what it cannot vouch for: a source or header changed while
//! the compiler ran (the object may be of the old or the new text), a dependency file that
//! does not describe the compilation, and outputs that are not regular files
//! (`-o /dev/null`, `-MF` through a symlink to `/dev/null`): the compiler's result is
//! kept, nothing is stored, and the next run compiles again.
//!
//! The edits here are made by the compiler wrapper itself: traced, they are writes of the
//! compile's own process tree to files it did not create (`uncacheable:untracked_write`);
//! observed by the fallback model (`STRATA_TRACE=0`), the changed stamps
//! (`input_changed`). Both are tested.

use std::path::Path;

use super::{
    Launcher, TestContext, assert_same_bytes, plain_object, read, require_tool, same_as_plain,
    write_file,
};
use crate::engine::write_script;

/// A compiler wrapper that runs `before` and `after` around gcc when it compiles (`-c`),
/// each only once (a flag file per hook).
fn racing_compiler(path: &Path, before: &str, after: &str) {
    write_script(
        path,
        &format!(
            "case \" $* \" in *' -c '*) ;; *) exec gcc \"$@\";; esac\n\
             if [ ! -e \"$0.before-done\" ]; then : > \"$0.before-done\"; {before}; fi\n\
             gcc \"$@\" || exit $?\n\
             if [ ! -e \"$0.after-done\" ]; then : > \"$0.after-done\"; {after}; fi\n"
        ),
    );
}

/// The two ways of observing a compile, and what each counts for a compile whose own
/// process tree edits an input.
const MODES: [(&str, &str); 2] = [("1", "uncacheable:untracked_write"), ("0", "input_changed")];

#[test]
fn launcher_a_header_changed_while_the_compiler_ran_is_not_cached() {
    require_tool("gcc", "apt-get install gcc");
    for (trace, counted) in MODES {
        let ctx = TestContext::new();
        let dir = ctx.path("proj");
        write_file(&dir.join("h.h"), "#define V 1\n");
        write_file(&dir.join("u.c"), "#include \"h.h\"\nint u(void) { return V; }\n");
        let cc = ctx.path("bin/edit-after-read");
        // An editor saves h.h after the compiler has read it.
        racing_compiler(&cc, ":", "printf '#define V 2\\n' > h.h");
        let argv = [cc.to_str().unwrap(), "-O2", "-c", "u.c", "-o", "u.o"];
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", trace);
        l.expect(&dir, &argv, counted);
        // h.h now says 2: the object of V 1 must not come back.
        let want = plain_object(&dir, &["gcc", "-O2", "-c", "u.c", "-o", "u.o"], "u.o");
        l.expect(&dir, &argv, "miss");
        assert_same_bytes("u.o with V 2", &read(&dir.join("u.o")), &want);
        l.expect(&dir, &argv, "hit");
    }
}

/// In each mode, over a project of `files`, a compiler that runs `after` once when its
/// first compile ends, with `args` after it: that compile is counted as the mode says and
/// nothing is stored; the next run is a MISS whose object (`what`) equals plain gcc's with
/// the same arguments, then a HIT.
fn changed_while_compiling(files: &[(&str, &str)], after: &str, args: &[&str], what: &str) {
    require_tool("gcc", "apt-get install gcc");
    for (trace, counted) in MODES {
        let ctx = TestContext::new();
        let dir = ctx.path("proj");
        for (path, text) in files {
            write_file(&dir.join(path), text);
        }
        let cc = ctx.path("bin/racing");
        racing_compiler(&cc, ":", after);
        let argv: Vec<&str> =
            std::iter::once(cc.to_str().unwrap()).chain(args.iter().copied()).collect();
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", trace);
        l.expect(&dir, &argv, counted);
        assert!(l.entries().is_empty(), "STRATA_TRACE={trace}: nothing stored");
        // The MISS and the HIT after it equal plain gcc now: object, depfile, output.
        let outputs: &[&str] = if args.contains(&"-MF") { &["u.o", "u.d"] } else { &["u.o"] };
        assert_eq!(same_as_plain(&l, &dir, &argv, outputs, &[]), "miss", "{what}");
        assert_eq!(same_as_plain(&l, &dir, &argv, outputs, &[]), "hit", "{what}");
    }
}

#[test]
fn launcher_a_header_that_appeared_earlier_on_the_search_path_while_the_compiler_ran_is_not_cached()
{
    // After the compiler found h.h in inc2, its directory and a new h.h appear in inc1,
    // which comes first on the search path and did not exist: an absent fact whose
    // directory was absent too, so only a look at the new directory finds the change. Now
    // inc1/h.h says 2 and is found first: the object of V 1 must not come back.
    changed_while_compiling(
        &[("inc2/h.h", "#define V 1\n"), ("u.c", "#include <h.h>\nint u(void) { return V; }\n")],
        "mkdir inc1 && printf '#define V 2\\n' > inc1/h.h",
        &["-O2", "-Iinc1", "-Iinc2", "-c", "u.c", "-o", "u.o"],
        "u.o with V 2",
    );
}

#[test]
fn launcher_a_has_include_name_that_appeared_while_the_compiler_ran_is_not_cached() {
    // The compiler found no opt.h; it exists when the compile ends.
    changed_while_compiling(
        &[(
            "u.c",
            "#if __has_include(\"opt.h\")\n#define V 2\n#else\n#define V 1\n#endif\n\
             int u(void) { return V; }\n",
        )],
        ": > opt.h",
        &["-O2", "-c", "u.c", "-o", "u.o"],
        "u.o with V 2",
    );
}

#[test]
fn launcher_a_header_removed_while_the_compiler_ran_is_not_cached() {
    // The compiler read inc1/h.h; it is gone when the compile ends, and inc2/h.h (V 1) is
    // what the same command finds now. With -MMD the model learns the headers from a
    // second run after the compile, which finds inc2/h.h.
    changed_while_compiling(
        &[
            ("inc1/h.h", "#define V 2\n"),
            ("inc2/h.h", "#define V 1\n"),
            ("u.c", "#include <h.h>\nint u(void) { return V; }\n"),
        ],
        "rm inc1/h.h",
        &["-O2", "-Iinc1", "-Iinc2", "-MMD", "-MF", "u.d", "-c", "u.c", "-o", "u.o"],
        "u.o with V 1",
    );
}

#[test]
fn launcher_a_source_changed_while_the_compiler_ran_is_not_cached() {
    require_tool("gcc", "apt-get install gcc");
    for (trace, counted) in MODES {
        let ctx = TestContext::new();
        let dir = ctx.path("proj");
        write_file(&dir.join("u.c"), "int u(void) { return 1; }\n");
        let cc = ctx.path("bin/edit-before-read");
        // The source changes after the launcher hashed it, before the compiler reads it.
        racing_compiler(&cc, "printf 'int u(void) { return 2; }\\n' > u.c", ":");
        let argv = [cc.to_str().unwrap(), "-O2", "-c", "u.c", "-o", "u.o"];
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", trace);
        l.expect(&dir, &argv, counted);
        // Back to the text the launcher hashed: its object, not the one of `return 2`.
        write_file(&dir.join("u.c"), "int u(void) { return 1; }\n");
        let want = plain_object(&dir, &["gcc", "-O2", "-c", "u.c", "-o", "u.o"], "u.o");
        l.expect(&dir, &argv, "miss");
        assert_same_bytes("u.o of return 1", &read(&dir.join("u.o")), &want);
        l.expect(&dir, &argv, "hit");
    }
}

#[test]
fn launcher_a_depfile_that_does_not_describe_the_compile_is_not_cached() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("h.h"), "#define V 1\n");
    write_file(&dir.join("u.c"), "#include \"h.h\"\nint u(void) { return V; }\n");
    let cc = ctx.path("bin/empty-depfile");
    // The dependency file comes out empty (a compiler or wrapper that lost it).
    write_script(&cc, "gcc \"$@\" || exit $?\ncase \" $* \" in *' -c '*) : > u.d;; esac");
    let argv = [cc.to_str().unwrap(), "-O2", "-MD", "-MF", "u.d", "-c", "u.c", "-o", "u.o"];
    let l = Launcher::new(&ctx.cache);
    l.expect(&dir, &argv, "uncacheable:incomplete_depfile");
    write_file(&dir.join("h.h"), "#define V 2\n");
    let want = plain_object(&dir, &["gcc", "-O2", "-c", "u.c", "-o", "u.o"], "u.o");
    l.expect(&dir, &argv, "uncacheable:incomplete_depfile");
    assert_same_bytes("u.o with V 2", &read(&dir.join("u.o")), &want);
    assert!(l.entries().is_empty());
}

#[test]
fn launcher_outputs_that_are_not_regular_files_are_not_cached() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("h.h"), "#define V 1\n");
    write_file(&dir.join("u.c"), "#include \"h.h\"\nint u(void) { return V; }\n");
    // The depfile goes to /dev/null through a symlink (so a wrong restore could only
    // replace the link, never /dev/null itself).
    std::os::unix::fs::symlink("/dev/null", dir.join("null.d")).unwrap();
    let argv = ["gcc", "-O2", "-MD", "-MF", "null.d", "-c", "u.c", "-o", "u.o"];
    let l = Launcher::new(&ctx.cache);
    for v in ["1", "2"] {
        write_file(&dir.join("h.h"), format!("#define V {v}\n"));
        let want = plain_object(&dir, &["gcc", "-O2", "-c", "u.c", "-o", "u.o"], "u.o");
        let r = l.expect(&dir, &argv, "uncacheable:output_not_regular_file");
        assert_eq!(r.stderr, "", "silently uncacheable");
        assert_same_bytes(&format!("u.o with V {v}"), &read(&dir.join("u.o")), &want);
        assert!(std::fs::symlink_metadata(dir.join("null.d")).unwrap().file_type().is_symlink());
    }
    // The object itself through a symlink to /dev/null.
    std::os::unix::fs::symlink("/dev/null", dir.join("null.o")).unwrap();
    let to_null = ["gcc", "-O2", "-c", "u.c", "-o", "null.o"];
    for _ in 0..2 {
        let r = l.expect(&dir, &to_null, "uncacheable:output_not_regular_file");
        assert_eq!(r.stderr, "");
    }
    assert!(std::fs::symlink_metadata(dir.join("null.o")).unwrap().file_type().is_symlink());
    assert!(l.entries().is_empty());
}

/// A header on a file system that keeps whole seconds (ext4 with 128-byte inodes), the
/// object on the build's own (nanoseconds): an edit while the compiler runs is stamped with
/// its second, rounded down, which is older than the clock reading taken before the
/// compile; it must still count as a change (found by a review on 2026-12-05: the fallback
/// model cached the object of the old text, and the next run handed it back). Needs root
/// for a loop mount, made in a mount namespace of its own.
#[test]
fn launcher_a_header_on_a_whole_second_file_system_changed_while_the_compiler_ran_is_not_cached() {
    require_tool("gcc", "apt-get install gcc");
    require_tool("unshare", "apt-get install util-linux");
    let ctx = TestContext::new();
    let build = ctx.path("build");
    std::fs::create_dir_all(&build).unwrap();
    std::fs::create_dir_all(ctx.path("mnt")).unwrap();
    let cc = ctx.path("bin/edit-after-read");
    racing_compiler(&cc, ":", "printf '#define V 2\\n' > h.h");
    let script = format!(
        "set -e\n\
         [ \"$(id -u)\" = 0 ] || {{ echo 'SKIP: not root'; exit 0; }}\n\
         export PATH=\"$PATH:/usr/sbin:/sbin\"\n\
         mke2fs -q -t ext4 -I 128 -F '{img}' 8M\n\
         mount -o loop '{img}' '{mnt}' || {{ echo 'SKIP: no loop mount here'; exit 0; }}\n\
         cd '{mnt}'\n\
         printf '#define V 1\\n' > h.h\n\
         printf '#include \"h.h\"\\nint u(void) {{ return V; }}\\n' > u.c\n\
         sleep 2.2\n\
         STRATA_TRACE=0 STRATA_EXPLAIN=1 '{strata}' compile --cache-root='{cache}' -- \
           '{cc}' -O2 -c u.c -o '{build}/u.o' 2>&1 | grep '^strata:' || true\n\
         stat -c 'header change time %z' h.h\n\
         cd / && umount '{mnt}'\n",
        img = ctx.path("coarse.img").display(),
        mnt = ctx.path("mnt").display(),
        strata = crate::strata_exe(),
        cache = ctx.cache.display(),
        cc = cc.display(),
        build = build.display(),
    );
    let out = std::process::Command::new("unshare").args(["-m", "sh", "-c", &script]).output();
    let out = out.expect("unshare runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A container without the right to make a mount namespace, or without loop devices:
    // nothing to test there (the CI machine has both).
    if let Some(why) = text.lines().find(|l| l.starts_with("SKIP: ")) {
        eprintln!("skipped: {why}");
        return;
    }
    if !out.status.success() && stderr.starts_with("unshare: ") {
        eprintln!("skipped: {}", stderr.trim());
        return;
    }
    assert!(out.status.success(), "{text}\n{stderr}");
    // The edit's change time has no fraction: the file system keeps whole seconds.
    assert!(text.contains(".000000000"), "{text}");
    assert!(text.contains("strata: input_changed u.c"), "{text}");
    assert!(Launcher::new(&ctx.cache).entries().is_empty(), "nothing stored: {text}");
}
