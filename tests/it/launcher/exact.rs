//! Launcher, part 1 (issue 24): a HIT writes exactly what a plain compile of the same state
//! would write, with GCC and with Clang, and the lookup sees every way the compile could
//! have found another file. Each step of each scenario runs the plain compiler and the
//! launcher on the same state ([`same_as_plain`]): object, depfile, messages and the files
//! left behind must be equal byte for byte, whatever the outcome; the outcome is asserted
//! too (a HIT where the state is the same, a MISS where it changed).

use std::path::{Path, PathBuf};

use super::{Launcher, TestContext, copy_tree, require_tool, s, same_as_plain, write_file};

/// The C compilers of every scenario, each with both ways of observing a MISS: traced
/// (`STRATA_TRACE=1`) and the fallback model (`STRATA_TRACE=0`).
fn c_compilers() -> [(&'static str, &'static str); 4] {
    require_tool("gcc", "apt-get install gcc");
    require_tool("clang", "apt-get install clang");
    [("gcc", "1"), ("gcc", "0"), ("clang", "1"), ("clang", "0")]
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| (*a).to_owned()).collect()
}

/// Two checkouts of one project under a shared parent (`w/a/proj`, `w/b/proj`), the parent
/// being the base directory, as ccache users set `base_dir`: a HIT in the second writes the
/// second's paths into the depfile and messages, in every depfile form and for a path that
/// needs escaping.
#[test]
fn launcher_relocated_hits_write_the_current_checkouts_paths() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let w = ctx.path("w");
        let a = w.join("a/proj");
        write_file(
            &a.join("inc dir$#/x.h"),
            "static int unused_helper(void) { return 1; }\n#define X 5\n",
        );
        write_file(&a.join("src/x.c"), "#include \"x.h\"\nint x(void) { return X; }\n");
        std::fs::create_dir_all(a.join("build")).unwrap();
        let b = w.join("b/proj");
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        copy_tree(&a, &b);
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode).base_dirs(&[&w]);
        let forms = |p: &Path| -> Vec<(Vec<String>, Vec<&'static str>)> {
            let inc = format!("-I{}", s(&p.join("inc dir$#")));
            let src = s(&p.join("src/x.c"));
            let obj_abs = s(&p.join("build/abs.o"));
            vec![
                (
                    args(&[
                        cc, "-Wall", &inc, "-MD", "-MT", "x.o", "-MF", "x.o.d", "-o", "x.o", "-c",
                        &src,
                    ]),
                    vec!["x.o", "x.o.d"],
                ),
                (
                    args(&[
                        cc,
                        "-Wall",
                        &inc,
                        "-MMD",
                        "-MP",
                        "-MT",
                        "custom target",
                        "-MF",
                        "y.d",
                        "-o",
                        "y.o",
                        "-c",
                        &src,
                    ]),
                    vec!["y.o", "y.d"],
                ),
                (
                    args(&[cc, "-Wall", &inc, "-MD", "-MF", "abs.d", "-o", &obj_abs, "-c", &src]),
                    vec!["abs.o", "abs.d"],
                ),
                (
                    args(&[
                        cc, "-Wall", &inc, "-MD", "-MQ", "q $tgt#", "-MF", "q.d", "-o", "q.o",
                        "-c", &src,
                    ]),
                    vec!["q.o", "q.d"],
                ),
                (
                    args(&[
                        cc,
                        "-g",
                        &format!("-ffile-prefix-map={}=.", s(p)),
                        &inc,
                        "-MD",
                        "-MF",
                        "g.d",
                        "-o",
                        "g.o",
                        "-c",
                        &src,
                    ]),
                    vec!["g.o", "g.d"],
                ),
            ]
        };
        for (n, ((mut argv_a, outs), (mut argv_b, _))) in
            forms(&a).into_iter().zip(forms(&b)).enumerate()
        {
            // Each form its own key (output names alone do not make one).
            argv_a.insert(1, format!("-DFORM={n}"));
            argv_b.insert(1, format!("-DFORM={n}"));
            assert_eq!(same_as_plain(&l, &a.join("build"), &argv_a, &outs, &[]), "miss", "{cc}");
            assert_eq!(same_as_plain(&l, &b.join("build"), &argv_b, &outs, &[]), "hit", "{cc}");
        }
    }
}

/// A project whose header search goes through every kind of directory: quote includes
/// next to the includer, `-include` from the working directory, `CPATH`,
/// `C_INCLUDE_PATH`, `-iprefix`/`-iwithprefix`/`-iwithprefixbefore`, `--sysroot` (the
/// built-in directories under it), `#include_next`, `__has_include`. For each, a new file
/// that the compiler would now find instead makes the next lookup a MISS, and everything
/// the launcher writes equals a plain compile.
#[test]
fn launcher_new_files_anywhere_on_the_search_path_are_misses() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        // (setup files, argv, env, file to create afterwards)
        type Case = (
            &'static [(&'static str, &'static str)],
            Vec<String>,
            Vec<(&'static str, &'static str)>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            // A quote include searches the including file's directory first.
            (
                &[
                    ("src/a.c", "#include \"cfg.h\"\nint a = CFG;\n"),
                    ("build/cfg.h", "#define CFG 1\n"),
                ],
                args(&[cc, "-Ibuild", "-c", "src/a.c", "-o", "a.o"]),
                vec![],
                "src/cfg.h",
            ),
            // -include looks in the working directory first.
            (
                &[("src/b.c", "int b = PRE;\n"), ("inc/pre.h", "#define PRE 1\n")],
                args(&[cc, "-include", "pre.h", "-Iinc", "-c", "src/b.c", "-o", "b.o"]),
                vec![],
                "pre.h",
            ),
            // CPATH directories, in order.
            (
                &[("src/c.c", "#include <cp.h>\nint c = CP;\n"), ("cp2/cp.h", "#define CP 1\n")],
                args(&[cc, "-c", "src/c.c", "-o", "c.o"]),
                vec![("CPATH", "cp1:cp2")],
                "cp1/cp.h",
            ),
            // C_INCLUDE_PATH directories, in order.
            (
                &[("src/d.c", "#include <ci.h>\nint d = CI;\n"), ("ci2/ci.h", "#define CI 1\n")],
                args(&[cc, "-c", "src/d.c", "-o", "d.o"]),
                vec![("C_INCLUDE_PATH", "ci1:ci2")],
                "ci1/ci.h",
            ),
            // -iwithprefixbefore is searched like -I, before -iwithprefix (like -idirafter).
            (
                &[
                    ("src/e.c", "#include <pw.h>\nint e = PW;\n"),
                    ("pre/late/pw.h", "#define PW 1\n"),
                ],
                args(&[
                    cc,
                    "-iprefix",
                    "pre/",
                    "-iwithprefix",
                    "late",
                    "-iwithprefixbefore",
                    "early",
                    "-c",
                    "src/e.c",
                    "-o",
                    "e.o",
                ]),
                vec![],
                "pre/early/pw.h",
            ),
            // The built-in directories under a sysroot: <sysroot>/usr/local/include comes
            // before <sysroot>/usr/include.
            (
                &[
                    ("src/f.c", "#include <sys1.h>\nint f = SYS1;\n"),
                    ("sysroot/usr/include/sys1.h", "#define SYS1 1\n"),
                ],
                args(&[cc, "--sysroot=sysroot", "-c", "src/f.c", "-o", "f.o"]),
                vec![],
                "sysroot/usr/local/include/sys1.h",
            ),
            // #include_next continues after the wrapper's directory: a new header between
            // the two is found by it.
            (
                &[
                    ("src/g.c", "#include <w.h>\nint g = W + W1;\n"),
                    ("inc1/w.h", "#include_next <w.h>\n#define W1 1\n"),
                    ("inc3/w.h", "#define W 3\n"),
                ],
                args(&[cc, "-Iinc1", "-Iinc2", "-Iinc3", "-c", "src/g.c", "-o", "g.o"]),
                vec![],
                "inc2/w.h",
            ),
            // A lookup that found nothing: __has_include.
            (
                &[(
                    "src/h.c",
                    "#if __has_include(\"opt.h\")\n#include \"opt.h\"\n#endif\n#ifndef OPT\n#define OPT 0\n#endif\nint h = OPT;\n",
                )],
                args(&[cc, "-c", "src/h.c", "-o", "h.o"]),
                vec![],
                "src/opt.h",
            ),
        ];
        for (files, argv, env, later) in cases {
            for (path, text) in files {
                write_file(&p.join(path), text);
            }
            let out = std::path::Path::new(argv.last().unwrap()).to_path_buf();
            let out = [out.to_str().unwrap()];
            assert_eq!(same_as_plain(&l, &p, &argv, &out, &env), "miss", "{cc} {argv:?}");
            assert_eq!(same_as_plain(&l, &p, &argv, &out, &env), "hit", "{cc} {argv:?}");
            let text = if later.ends_with(".h") {
                "#define CFG 2\n#define PRE 2\n#define CP 2\n#define CI 2\n#define PW 2\n#define SYS1 2\n#define W 2\n#define OPT 2\n"
            } else {
                ""
            };
            write_file(&p.join(later), text);
            assert_eq!(
                same_as_plain(&l, &p, &argv, &out, &env),
                "miss",
                "{cc} {argv:?} after {later}"
            );
            assert_eq!(
                same_as_plain(&l, &p, &argv, &out, &env),
                "hit",
                "{cc} {argv:?} after {later}"
            );
        }
    }
}

/// A `<...>` include never searches `-iquote` directories: a new file there is no reason
/// to compile again, and whatever the outcome the outputs equal a plain compile.
#[test]
fn launcher_angle_includes_do_not_see_iquote_directories() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("src/a.c"), "#include <q.h>\nint a = Q;\n");
        write_file(&p.join("id/q.h"), "#define Q 1\n");
        // The -iquote directory exists (a directory that appears changes the search list:
        // the compiler looks for it, so that is a MISS).
        std::fs::create_dir_all(p.join("qd")).unwrap();
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        let argv = args(&[cc, "-iquote", "qd", "-Iid", "-c", "src/a.c", "-o", "a.o"]);
        assert_eq!(same_as_plain(&l, &p, &argv, &["a.o"], &[]), "miss");
        write_file(&p.join("qd/q.h"), "#define Q 2\n");
        let outcome = same_as_plain(&l, &p, &argv, &["a.o"], &[]);
        // Traced, exactly what the compiler looked at; the model is conservative.
        let want: &[&str] = if mode == "1" { &["hit"] } else { &["hit", "miss"] };
        assert!(want.contains(&outcome.as_str()), "{cc} {mode}: {outcome}");
    }
}

/// `d3/../h.h` where `d3` is a symlink is the file the kernel finds (`..` of the link's
/// target), not `h.h` next to the source: a change there is a MISS, a change of the decoy
/// is not.
#[test]
fn launcher_paths_are_resolved_as_the_kernel_does() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("src/a.c"), "#include \"d3/../h.h\"\nint a = H;\n");
        write_file(&p.join("src/h.h"), "#define H 1\n");
        write_file(&p.join("real/h.h"), "#define H 2\n");
        std::fs::create_dir_all(p.join("real/sub")).unwrap();
        std::os::unix::fs::symlink(p.join("real/sub"), p.join("src/d3")).unwrap();
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        let argv = args(&[cc, "-MD", "-c", "src/a.c", "-o", "a.o"]);
        let outs = ["a.o", "a.d"];
        assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "miss");
        assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "hit");
        write_file(&p.join("src/h.h"), "#define H 3\n");
        assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "hit", "the decoy is not read");
        write_file(&p.join("real/h.h"), "#define H 4\n");
        assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "miss", "the file read changed");
    }
}

/// A working directory entered through a symlink (`$PWD` logical) with the base directory
/// given the same way: a second checkout entered the same way finds the same key and HITs.
#[test]
fn launcher_a_symlinked_working_directory_keeps_its_keys() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let mut argvs = Vec::new();
        for name in ["a", "b"] {
            let real = ctx.path(&format!("real-{name}/proj"));
            write_file(&real.join("inc/x.h"), "#define X 1\n");
            write_file(&real.join("src/x.c"), "#include \"x.h\"\nint x = X;\n");
            std::fs::create_dir_all(real.join("build")).unwrap();
            std::os::unix::fs::symlink(
                ctx.path(&format!("real-{name}")),
                ctx.path(&format!("link-{name}")),
            )
            .unwrap();
            let logical = ctx.path(&format!("link-{name}/proj"));
            let argv = args(&[
                cc,
                &format!("-I{}", s(&logical.join("inc"))),
                "-MD",
                "-MF",
                "x.d",
                "-c",
                &s(&logical.join("src/x.c")),
                "-o",
                "x.o",
            ]);
            argvs.push((logical, argv));
        }
        let mut outcomes = Vec::new();
        for (logical, argv) in &argvs {
            let l = Launcher::new(&ctx.cache)
                .env("STRATA_TRACE", mode)
                .base_dirs(&[logical.as_path()])
                .env("PWD", logical.join("build"));
            let build = logical.join("build");
            outcomes.push(same_as_plain(
                &l,
                &build,
                argv,
                &["x.o", "x.d"],
                &[("PWD", build.to_str().unwrap())],
            ));
        }
        assert_eq!(outcomes, ["miss", "hit"], "{cc}");
    }
}

/// Time macros: `__TIMESTAMP__` is the source's mtime even with `SOURCE_DATE_EPOCH` (GCC),
/// and Clang before 16 fixes none of them from it: never cached where the compiler does not
/// make them reproducible; `__DATE__` with GCC and `SOURCE_DATE_EPOCH` is.
#[test]
fn launcher_time_macros_are_cached_only_where_the_compiler_fixes_them() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("t.c"), "const char *t = __TIMESTAMP__;\n");
        // __DATE__ only: two compiles a moment apart give the same bytes (but at midnight).
        write_file(&p.join("d.c"), "const char *d = __DATE__;\n");
        write_file(&p.join("tm.c"), "const char *tm = __TIME__;\n");
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        let epoch = [("SOURCE_DATE_EPOCH", "86400")];
        let t = args(&[cc, "-c", "t.c", "-o", "t.o"]);
        assert_eq!(same_as_plain(&l, &p, &t, &["t.o"], &epoch), "uncacheable:time_macros", "{cc}");
        // A later mtime: the plain compile embeds another string, and so does the launcher.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        write_file(&p.join("t.c"), "const char *t = __TIMESTAMP__;\n");
        assert_eq!(same_as_plain(&l, &p, &t, &["t.o"], &epoch), "uncacheable:time_macros", "{cc}");
        let d = args(&[cc, "-c", "d.c", "-o", "d.o"]);
        let first = same_as_plain(&l, &p, &d, &["d.o"], &epoch);
        if cc == "gcc" {
            assert_eq!(first, "miss");
            assert_eq!(same_as_plain(&l, &p, &d, &["d.o"], &epoch), "hit");
        } else {
            // Clang 14 (Debian 12) ignores SOURCE_DATE_EPOCH; Clang 16+ honours it.
            assert!(first == "uncacheable:time_macros" || first == "miss", "{first}");
        }
        assert_eq!(same_as_plain(&l, &p, &d, &["d.o"], &[]), "uncacheable:time_macros", "{cc}");
        // __TIME__ without the epoch: never cached (no byte comparison: the second ticks).
        let (r, outcome) = l.compile(&p, &args(&[cc, "-c", "tm.c", "-o", "tm.o"]));
        assert_eq!((r.code, outcome.as_str()), (0, "uncacheable:time_macros"), "{cc}");
    }
}

/// Options the launcher adds go before `--` (after it every argument is a file; Clang has
/// it, GCC refuses it, and so does the launcher's run of GCC).
#[test]
fn launcher_compiles_with_the_end_of_options_marker() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("test1.c"), "int t1 = 1;\n");
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        for (argv, outs) in [
            (args(&[cc, "-c", "--", "test1.c"]), vec!["test1.o"]),
            (args(&[cc, "-c", "-MD", "-o", "t.o", "--", "test1.c"]), vec!["t.o", "t.d"]),
        ] {
            if cc == "gcc" {
                assert_eq!(same_as_plain(&l, &p, &argv, &[], &[]), "compile_failed", "{argv:?}");
                continue;
            }
            assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "miss", "{argv:?}");
            assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "hit", "{argv:?}");
        }
    }
}

/// The names of the outputs are not part of the key: another `-o`, `-MF`, `-MT` or `-MQ`
/// HITs, and the HIT writes the outputs under the current names with a depfile naming the
/// current targets.
#[test]
fn launcher_renamed_outputs_hit_with_the_current_names() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("inc/x.h"), "#define X 1\n");
        write_file(&p.join("src/x.c"), "#include \"x.h\"\nint x = X;\n");
        std::fs::create_dir_all(p.join("out/deep dir")).unwrap();
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        let steps: Vec<(Vec<String>, Vec<&str>, &str)> = vec![
            (
                args(&[cc, "-Iinc", "-MD", "-MP", "-c", "src/x.c", "-o", "x.o"]),
                vec!["x.o", "x.d"],
                "miss",
            ),
            (
                args(&[cc, "-Iinc", "-MD", "-MP", "-c", "src/x.c", "-o", "out/y.o"]),
                vec!["out/y.o", "out/y.d"],
                "hit",
            ),
            (
                args(&[
                    cc,
                    "-Iinc",
                    "-MD",
                    "-MP",
                    "-MF",
                    "out/deep dir/z.dep",
                    "-MT",
                    "a b",
                    "-MQ",
                    "$c#",
                    "-c",
                    "src/x.c",
                    "-o",
                    "out/deep dir/z.o",
                ]),
                vec!["out/deep dir/z.o", "out/deep dir/z.dep"],
                "hit",
            ),
        ];
        for (argv, outs, want) in steps {
            assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), want, "{cc} {argv:?}");
        }
    }
}

/// A header edited many times and reverted, or two branches built in turn: the earlier
/// result is still there, because candidates are kept by use, not by age.
#[test]
fn launcher_a_revert_after_many_edits_hits() {
    require_tool("gcc", "apt-get install gcc");
    let mode = "1";
    let ctx = TestContext::new();
    let p = ctx.path("proj");
    write_file(&p.join("x.h"), "#define X 0\n");
    write_file(&p.join("x.c"), "#include \"x.h\"\nint x = X;\n");
    let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
    let argv = args(&["gcc", "-MD", "-c", "x.c", "-o", "x.o"]);
    let outs = ["x.o", "x.d"];
    assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "miss");
    assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "hit");
    for n in 1..=20 {
        write_file(&p.join("x.h"), format!("#define X {n}\n"));
        assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "miss", "edit {n}");
    }
    write_file(&p.join("x.h"), "#define X 0\n");
    assert_eq!(same_as_plain(&l, &p, &argv, &outs, &[]), "hit", "the revert");
}

/// Compilers are put in a family by what they report, not by their name: Clang called
/// `aarch64-linux-gnu-gcc` writes Clang's depfile, GCC called `bisheng` writes GCC's; a
/// HIT writes what each writes (the two wrap and escape depfiles differently).
#[test]
fn launcher_families_are_known_by_what_the_compiler_reports() {
    let [(gcc, _), _, (clang, _), _] = c_compilers();
    let mode = "1";
    let ctx = TestContext::new();
    let bin = ctx.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let which = |t: &str| -> PathBuf {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {t}"))
            .output()
            .unwrap();
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    std::os::unix::fs::symlink(which(clang), bin.join("aarch64-linux-gnu-gcc")).unwrap();
    std::os::unix::fs::symlink(which(gcc), bin.join("bisheng")).unwrap();
    std::os::unix::fs::symlink(which(gcc), bin.join("cc")).unwrap();
    let p = ctx.path("proj");
    let long = "a-directory-with-a-rather-long-name/and-another-long-subdirectory-name";
    write_file(&p.join(long).join("x.h"), "#define X 1\n");
    write_file(&p.join("src/x.c"), "#include \"x.h\"\nint x = X;\n");
    let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
    for cc in ["aarch64-linux-gnu-gcc", "bisheng", "cc"] {
        let exe = s(&bin.join(cc));
        let argv = args(&[&exe, &format!("-I{long}"), "-MD", "-MP", "-c", "src/x.c", "-o", "x.o"]);
        assert_eq!(same_as_plain(&l, &p, &argv, &["x.o", "x.d"], &[]), "miss", "{cc}");
        assert_eq!(same_as_plain(&l, &p, &argv, &["x.o", "x.d"], &[]), "hit", "{cc}");
    }
}

/// Another checkout built in a build directory of another name (CMake's `build-debug` in
/// one, `build` in the other; the benchmark's `cold-strata-1` and `warm-strata-1`): the
/// compiler looks up the components of its working directory, and a fact that
/// `<checkout>/build-a` is a directory made every HIT there impossible. The working
/// directory and the output directories are implied by where the compile runs.
#[test]
fn launcher_another_checkout_with_another_build_directory_name_hits() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let w = ctx.path("w");
        let a = w.join("a/proj");
        write_file(&a.join("inc/x.h"), "#define X 5\n");
        write_file(
            &a.join("src/x.c"),
            "#include \"x.h\"\n#include \"gen.h\"\nint x(void) { return X + G; }\n",
        );
        write_file(&a.join("build-a/gen/gen.h"), "#define G 2\n");
        let b = w.join("b/proj");
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        copy_tree(&a, &b);
        std::fs::rename(b.join("build-a"), b.join("build-b")).unwrap();
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode).base_dirs(&[&w]);
        let argv = |p: &Path| {
            args(&[
                cc,
                &format!("-ffile-prefix-map={}=.", s(p)),
                &format!("-I{}", s(&p.join("inc"))),
                "-Igen",
                "-MD",
                "-MT",
                "obj/x.o",
                "-MF",
                "obj/x.o.d",
                "-o",
                "obj/x.o",
                "-c",
                &s(&p.join("src/x.c")),
            ])
        };
        std::fs::create_dir_all(a.join("build-a/obj")).unwrap();
        std::fs::create_dir_all(b.join("build-b/obj")).unwrap();
        let outs = ["obj/x.o", "obj/x.o.d"];
        // As a shell started by ninja or make runs the compiler: `$PWD` names the build
        // directory, and gcc's getpwd() stats it.
        let (pwd_a, pwd_b) = (s(&a.join("build-a")), s(&b.join("build-b")));
        assert_eq!(
            same_as_plain(&l, &a.join("build-a"), &argv(&a), &outs, &[("PWD", &pwd_a)]),
            "miss",
            "{cc} {mode}"
        );
        assert_eq!(
            same_as_plain(&l, &b.join("build-b"), &argv(&b), &outs, &[("PWD", &pwd_b)]),
            "hit",
            "{cc} {mode}"
        );
    }
}

/// Names made from the object's that the object holds: `-gsplit-dwarf` writes the `.dwo`
/// name into it (`DW_AT_dwo_name`), with or without a directory in `-o`. A candidate made
/// under one object name is not a HIT under another (the object would send a debugger to
/// the other object's `.dwo`); under the same name it is.
#[test]
fn launcher_split_dwarf_objects_hit_only_under_their_own_name() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("s.c"), "int f(int a) { return a + 1; }\n");
        std::fs::create_dir_all(p.join("o1")).unwrap();
        std::fs::create_dir_all(p.join("o2")).unwrap();
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        for (first, second) in [("o1/a", "o2/b"), ("a", "b")] {
            let argv = |stem: &str| {
                let o = format!("{stem}.o");
                args(&[cc, "-g", "-gsplit-dwarf", "-c", "s.c", "-o", &o])
            };
            let outs = |stem: &str| [format!("{stem}.o"), format!("{stem}.dwo")];
            let (o1, o2) = (outs(first), outs(second));
            let o1: Vec<&str> = o1.iter().map(String::as_str).collect();
            let o2: Vec<&str> = o2.iter().map(String::as_str).collect();
            let got = same_as_plain(&l, &p, &argv(first), &o1, &[]);
            assert!(got == "miss" || got == "hit", "{cc} {mode} {first}: {got}");
            assert_eq!(same_as_plain(&l, &p, &argv(first), &o1, &[]), "hit", "{cc} {mode}");
            assert_eq!(same_as_plain(&l, &p, &argv(second), &o2, &[]), "miss", "{cc} {mode}");
            assert_eq!(same_as_plain(&l, &p, &argv(second), &o2, &[]), "hit", "{cc} {mode}");
        }
    }
}

/// Clang's `-frecord-command-line` (and `-grecord-command-line`, and the gcc spellings
/// clang takes as aliases) writes the whole command line into the object, `-o`, `-MF` and
/// `-MT` included: other names are another key, never a HIT holding the old ones.
#[test]
fn launcher_a_recorded_command_line_keys_the_output_names() {
    require_tool("clang", "apt-get install clang");
    for flag in ["-frecord-command-line", "-frecord-gcc-switches"] {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("s.c"), "int f(int a) { return a + 1; }\n");
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", "1");
        let argv = |d: &str, t: &str, o: &str| {
            args(&["clang", flag, "-MD", "-MF", d, "-MT", t, "-c", "s.c", "-o", o])
        };
        let one = argv("one.d", "tgtone", "x.o");
        assert_eq!(same_as_plain(&l, &p, &one, &["x.o", "one.d"], &[]), "miss", "{flag}");
        assert_eq!(same_as_plain(&l, &p, &one, &["x.o", "one.d"], &[]), "hit", "{flag}");
        let two = argv("two.d", "tgttwo", "x.o");
        assert_eq!(same_as_plain(&l, &p, &two, &["x.o", "two.d"], &[]), "miss", "{flag}");
        let three = argv("two.d", "tgttwo", "y.o");
        assert_eq!(same_as_plain(&l, &p, &three, &["y.o", "two.d"], &[]), "miss", "{flag}");
        assert_eq!(same_as_plain(&l, &p, &three, &["y.o", "two.d"], &[]), "hit", "{flag}");
    }
}

/// A time macro no scan of the text sees: a name made by token pasting, or split by a line
/// splice. The compiler says when it expands one (`-Wdate-time`, which the launcher adds on
/// a MISS): never cached without `SOURCE_DATE_EPOCH`, and what runs prints and writes what
/// a plain compile does (the probe's warning never reaches the build), with `-Werror` too.
/// With GCC and `SOURCE_DATE_EPOCH`, a pasted `__DATE__` is reproducible and cached.
#[test]
fn launcher_time_macros_made_by_pasting_or_splicing_are_found() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        let paste = "#define CAT(a, b) a##b\n#define X(a, b) CAT(a, b)\n";
        write_file(&p.join("pt.c"), format!("{paste}const char *t = X(__TI, ME__);\n"));
        write_file(&p.join("sp.c"), "const char *t = __TI\\\nME__;\n");
        write_file(&p.join("pd.c"), format!("{paste}const char *d = X(__DA, TE__);\n"));
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        for (file, flags) in [("pt", &[][..]), ("sp", &[][..]), ("pt", &["-Werror", "-Wall"][..])] {
            let mut argv = args(&[cc]);
            argv.extend(args(flags));
            argv.extend(args(&["-c", &format!("{file}.c"), "-o", &format!("{file}.o")]));
            for round in 0..2 {
                let (r, outcome) = l.compile(&p, &argv);
                assert_eq!(
                    (r.code, outcome.as_str()),
                    (0, "uncacheable:time_macros"),
                    "{cc} {mode} {argv:?} round {round}: {}",
                    r.stderr
                );
                assert!(!r.stderr.contains("date-time"), "{cc} {mode}: {}", r.stderr);
            }
        }
        let d = args(&[cc, "-c", "pd.c", "-o", "pd.o"]);
        let epoch = [("SOURCE_DATE_EPOCH", "86400")];
        assert_eq!(same_as_plain(&l, &p, &d, &["pd.o"], &[]), "uncacheable:time_macros", "{cc}");
        if cc == "gcc" {
            assert_eq!(same_as_plain(&l, &p, &d, &["pd.o"], &epoch), "miss", "{mode}");
            assert_eq!(same_as_plain(&l, &p, &d, &["pd.o"], &epoch), "hit", "{mode}");
        }
    }
}

/// `__has_include` and `#pragma GCC dependency` spelled across a comment or a line splice
/// (translation phases 2 and 3 come before the preprocessor reads them): the fallback
/// model's scan sees them as the compiler does, so a header that appears later is a MISS.
#[test]
fn launcher_has_include_across_comments_and_splices_is_seen() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        std::fs::create_dir_all(p.join("i1")).unwrap();
        std::fs::create_dir_all(p.join("i2")).unwrap();
        let tail = "#include <opt.h>\n#else\n#define O 0\n#endif\nint v = O;\n";
        write_file(&p.join("m.c"), format!("#if __has_include /**/ (<opt.h>)\n{tail}"));
        write_file(&p.join("n.c"), format!("#if __has_include\\\n(<opt.h>)\n{tail}"));
        write_file(&p.join("k.c"), format!("#if __has_\\\ninclude(<opt.h>)\n{tail}"));
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        let _ = std::fs::remove_file(p.join("i1/opt.h"));
        for f in ["m", "n", "k"] {
            let argv =
                args(&[cc, "-Ii1", "-Ii2", "-c", &format!("{f}.c"), "-o", &format!("{f}.o")]);
            assert_eq!(
                same_as_plain(&l, &p, &argv, &[&format!("{f}.o")], &[]),
                "miss",
                "{cc} {mode} {f}"
            );
            assert_eq!(
                same_as_plain(&l, &p, &argv, &[&format!("{f}.o")], &[]),
                "hit",
                "{cc} {mode} {f}"
            );
        }
        write_file(&p.join("i1/opt.h"), "#define O 7\n");
        for f in ["m", "n", "k"] {
            let argv =
                args(&[cc, "-Ii1", "-Ii2", "-c", &format!("{f}.c"), "-o", &format!("{f}.o")]);
            assert_eq!(
                same_as_plain(&l, &p, &argv, &[&format!("{f}.o")], &[]),
                "miss",
                "{cc} {mode} {f}"
            );
        }
        std::fs::remove_file(p.join("i1/opt.h")).unwrap();
    }
}

/// Time macros hidden from the compiler's warning: a pragma that ignores `-Wdate-time`, a
/// system header (GCC does not warn there), `-fno-diagnostics-show-option`, `--no-warnings`.
/// Traced, the compile reading the time zone gives it away (the C library reads it to
/// format a local time), which nothing in the source can hide: never cached, and the
/// build sees what a plain compile prints.
#[test]
fn launcher_time_macros_hidden_from_the_warning_are_found_by_the_trace() {
    for cc in ["gcc", "clang"] {
        require_tool(cc, "apt-get install gcc clang");
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        let paste = "#define CAT(a, b) a##b\n#define X(a, b) CAT(a, b)\n";
        let pragma = if cc == "gcc" { "GCC" } else { "clang" };
        write_file(
            &p.join("pr.c"),
            format!(
                "#pragma {pragma} diagnostic ignored \"-Wdate-time\"\n{paste}const char *t = X(__TI, ME__);\n"
            ),
        );
        write_file(&p.join("sys/s.h"), format!("{paste}static const char *t = X(__TI, ME__);\n"));
        write_file(&p.join("sy.c"), "#include <s.h>\nconst char *u(void) { return t; }\n");
        write_file(&p.join("pt.c"), format!("{paste}const char *t = X(__TI, ME__);\n"));
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", "1");
        let cases: [&[&str]; 4] = [
            &["-c", "pr.c", "-o", "pr.o"],
            &["-isystem", "sys", "-c", "sy.c", "-o", "sy.o"],
            &["-fno-diagnostics-show-option", "-c", "pt.c", "-o", "pt.o"],
            &["-Wp,-w", "-c", "pt.c", "-o", "pt2.o"],
        ];
        for case in cases {
            let mut argv = args(&[cc]);
            argv.extend(args(case));
            for round in 0..2 {
                let (r, outcome) = l.compile(&p, &argv);
                assert_eq!(
                    (r.code, outcome.as_str()),
                    (0, "uncacheable:time_macros"),
                    "{argv:?} round {round}: {}",
                    r.stderr
                );
                assert!(!r.stderr.contains("reproducible"), "{argv:?}: {}", r.stderr);
            }
        }
    }
}

/// The fallback model caches ordinary C++: libstdc++'s headers (`<type_traits>` pastes
/// `__has_##_NTYPE`, a type name, and `<string>`'s headers hold many string literals) are
/// neither refused as a pasted `__has_include` nor scanned in quadratic time (a MISS of such
/// a TU once took seconds in the model).
#[test]
fn launcher_model_caches_a_tu_of_the_cxx_standard_library() {
    for cxx in ["g++", "clang++"] {
        require_tool(cxx, "apt-get install g++ clang");
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(
            &p.join("s.cc"),
            "#include <type_traits>\n#include <string>\n#include <map>\n#include <vector>\n\
             std::map<std::string, std::vector<int>> m;\n\
             int f() { return std::is_same_v<int, long> ? 1 : (int)m.size(); }\n",
        );
        let argv = args(&[cxx, "-std=c++17", "-O2", "-c", "s.cc", "-o", "s.o"]);
        let model = Launcher::new(&ctx.cache).env("STRATA_TRACE", "0");
        assert_eq!(same_as_plain(&model, &p, &argv, &["s.o"], &[]), "miss", "{cxx}");
        assert_eq!(same_as_plain(&model, &p, &argv, &["s.o"], &[]), "hit", "{cxx}");
    }
}

/// `--output FILE` and `--output=FILE` are `-o`: the object is where the build asked, and a
/// HIT writes it there (it wrote `./s.o` from the MISS before). Unknown long options are
/// not cached; a recorded command line without a requested depfile is not either (the
/// launcher's private `-MD -MF` would be recorded in the object).
#[test]
fn launcher_long_output_option_and_unknown_long_options() {
    for (cc, mode) in c_compilers() {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("s.c"), "int f(int a) { return a + 1; }\n");
        std::fs::create_dir_all(p.join("x")).unwrap();
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        for form in [&["--output=x/s.o"][..], &["--output", "x/s.o"][..]] {
            let _ = std::fs::remove_dir_all(&ctx.cache);
            write_file(&p.join("s.o"), "OLD");
            let mut argv = args(&[cc, "-c", "s.c"]);
            argv.extend(args(form));
            assert_eq!(
                same_as_plain(&l, &p, &argv, &["x/s.o"], &[]),
                "miss",
                "{cc} {mode} {form:?}"
            );
            assert_eq!(
                same_as_plain(&l, &p, &argv, &["x/s.o"], &[]),
                "hit",
                "{cc} {mode} {form:?}"
            );
            assert_eq!(std::fs::read_to_string(p.join("s.o")).unwrap(), "OLD", "{form:?}");
        }
        let unknown = args(&[cc, "--no-warnings", "-c", "s.c", "-o", "u.o"]);
        assert_eq!(same_as_plain(&l, &p, &unknown, &["u.o"], &[]), "uncacheable:uncacheable_flag");
        if cc == "clang" {
            let rec = args(&[cc, "-frecord-command-line", "-c", "s.c", "-o", "r.o"]);
            assert_eq!(same_as_plain(&l, &p, &rec, &["r.o"], &[]), "uncacheable:uncacheable_flag");
        }
    }
}

/// The fallback model cannot follow `__has_include` through a macro (`#define HI
/// __has_include`) or a pasted name, nor `.incbin` split into two string literals or in
/// upper case: it does not cache them (traced, they are observed).
#[test]
fn launcher_model_refuses_what_its_scan_cannot_follow() {
    for cc in ["gcc", "clang"] {
        require_tool(cc, "apt-get install gcc clang");
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("data.bin"), "AAAA");
        let sources = [
            (
                "al",
                "#define HI __has_include\n#if HI(\"opt.h\")\nint x = 1;\n#else\nint x = 0;\n#endif\n",
            ),
            (
                "pa",
                "#define CAT(a, b) a##b\n#if CAT(__has_, include)(\"opt.h\")\nint x = 1;\n#else\nint x = 0;\n#endif\n",
            ),
            ("sp", "__asm__(\".section .rodata\\n.inc\" \"bin \\\"data.bin\\\"\\n.text\");\n"),
            ("up", "__asm__(\".section .rodata\\n.INCBIN \\\"data.bin\\\"\\n.text\");\n"),
        ];
        let model = Launcher::new(&ctx.cache).env("STRATA_TRACE", "0");
        for (name, text) in sources {
            write_file(&p.join(format!("{name}.c")), text);
            let argv = args(&[cc, "-c", &format!("{name}.c"), "-o", &format!("{name}.o")]);
            let outs = [format!("{name}.o")];
            let outs: Vec<&str> = outs.iter().map(String::as_str).collect();
            assert_eq!(
                same_as_plain(&model, &p, &argv, &outs, &[]),
                "uncacheable:model_unseen_input",
                "{cc} {name}"
            );
        }
    }
}
