//! Launcher, part 2 (issue 25): a HIT only when everything the compiler looked at is
//! unchanged, observed by tracing its process tree; complete outputs; and the fallback
//! model where tracing is refused. Every step compares with a plain compile of the same
//! state ([`same_as_plain`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    Launcher, TestContext, counters, require_tool, run_bounded, same_as_plain, strata_exe,
    tree_names, write_file,
};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| (*a).to_owned()).collect()
}

/// `STRATA_TRACE` values: traced, and the fallback model.
const TRACED: &str = "1";
const MODEL: &str = "0";

/// Data an assembler directive reads (`.incbin`): the depfile never names it, the trace
/// sees `as` open it. So is data with the name of a machine file (`*.so`, a `gconv/`
/// directory) outside the system's library directories: an edit is a MISS.
#[test]
fn launcher_incbin_data_is_an_input() {
    for cc in ["gcc", "clang"] {
        require_tool(cc, "apt-get install gcc clang");
        for name in ["data.bin", "plugin.so", "gconv/libblob.so.1"] {
            let ctx = TestContext::new();
            let p = ctx.path("proj");
            write_file(&p.join(name), "one");
            write_file(
                &p.join("blob.c"),
                format!(
                    "__asm__(\".section .rodata\\n.global blob\\nblob: .incbin \\\"{name}\\\"\\n\");\n"
                ),
            );
            let argv = args(&[cc, "-c", "blob.c", "-o", "blob.o"]);
            let traced = Launcher::new(&ctx.cache).env("STRATA_TRACE", TRACED);
            let case = format!("{cc} {name}");
            assert_eq!(same_as_plain(&traced, &p, &argv, &["blob.o"], &[]), "miss", "{case}");
            assert_eq!(same_as_plain(&traced, &p, &argv, &["blob.o"], &[]), "hit", "{case}");
            write_file(&p.join(name), "two!");
            assert_eq!(same_as_plain(&traced, &p, &argv, &["blob.o"], &[]), "miss", "{case}");
            if name != "data.bin" {
                continue;
            }
            let model = Launcher::new(&ctx.cache).env("STRATA_TRACE", MODEL);
            write_file(&p.join(name), "three");
            assert_eq!(
                same_as_plain(&model, &p, &argv, &["blob.o"], &[]),
                "uncacheable:model_unseen_input",
                "{cc}: the model cannot vouch for it"
            );
        }
    }
}

/// A precompiled header in use: GCC's depfile names neither the `.gch` nor the headers in
/// it. Traced, the `.gch` is an input: editing the header and rebuilding the `.gch` (as
/// CMake's `target_precompile_headers` does) is a MISS.
#[test]
fn launcher_a_precompiled_header_in_use_is_an_input() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let p = ctx.path("proj");
    let pch = |value: u32| {
        write_file(&p.join("pch.h"), format!("#define P {value}\n"));
        let r = super::plain(&p, &["gcc", "-x", "c-header", "pch.h", "-o", "pch.h.gch"], &[]);
        r.expect_code(0);
    };
    pch(1);
    write_file(&p.join("main.c"), "#include \"pch.h\"\nint m = P;\n");
    let argv = args(&["gcc", "-MD", "-c", "main.c", "-o", "main.o"]);
    let outs = ["main.o", "main.d"];
    let traced = Launcher::new(&ctx.cache).env("STRATA_TRACE", TRACED);
    assert_eq!(same_as_plain(&traced, &p, &argv, &outs, &[]), "miss");
    assert_eq!(same_as_plain(&traced, &p, &argv, &outs, &[]), "hit");
    pch(2);
    assert_eq!(same_as_plain(&traced, &p, &argv, &outs, &[]), "miss", "a rebuilt .gch");
    let model = Launcher::new(&ctx.path("model-cache")).env("STRATA_TRACE", MODEL);
    assert_eq!(
        same_as_plain(&model, &p, &argv, &outs, &[]),
        "uncacheable:model_precompiled_header"
    );
    // Clang's -include-pch: traced, an input; the model does not cache it.
    require_tool("clang", "apt-get install clang");
    let r = super::plain(&p, &["clang", "-x", "c-header", "pch.h", "-o", "pch.h.pch"], &[]);
    r.expect_code(0);
    let argv = args(&["clang", "-include-pch", "pch.h.pch", "-c", "main.c", "-o", "c.o"]);
    assert_eq!(same_as_plain(&traced, &p, &argv, &["c.o"], &[]), "miss");
    assert_eq!(same_as_plain(&traced, &p, &argv, &["c.o"], &[]), "hit");
    assert_eq!(same_as_plain(&model, &p, &argv, &["c.o"], &[]), "uncacheable:untracked_input");
}

/// The files a plain run of `argv` in `dir` creates (then removed).
fn created_by_plain(dir: &Path, argv: &[String]) -> Vec<PathBuf> {
    let before = tree_names(dir);
    super::plain(dir, argv, &[]).expect_code(0);
    let created: Vec<PathBuf> =
        tree_names(dir).into_iter().filter(|p| !before.contains(p)).collect();
    for p in &created {
        std::fs::remove_file(dir.join(p)).unwrap();
    }
    created
}

/// Outputs the flags ask for beside the object, which only a trace discovers: a HIT writes
/// each one byte for byte; the model does not cache them.
#[test]
fn launcher_a_hit_writes_every_file_the_compiler_wrote() {
    require_tool("gcc", "apt-get install gcc");
    require_tool("clang", "apt-get install clang");
    let cases: [(&str, &[&str], usize); 5] = [
        ("gcc", &["-fcallgraph-info"], 2),
        ("gcc", &["-Wa,-adhln=x.lst"], 2),
        ("gcc", &["-aux-info", "x.aux"], 2),
        ("gcc", &["-fdump-tree-original"], 2),
        ("clang", &["-MJ", "x.json"], 2),
    ];
    for (cc, flags, files) in cases {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(
            &p.join("x.c"),
            "int f(int a) { return a * 3; }\nint g(void) { return f(2); }\n",
        );
        let mut argv = args(&[cc, "-O1"]);
        argv.extend(args(flags));
        argv.extend(args(&["-c", "x.c", "-o", "x.o"]));
        let created = created_by_plain(&p, &argv);
        assert_eq!(created.len(), files, "{argv:?}: {created:?}");
        let outs: Vec<&str> = created.iter().map(|c| c.to_str().unwrap()).collect();
        let traced = Launcher::new(&ctx.cache).env("STRATA_TRACE", TRACED);
        assert_eq!(same_as_plain(&traced, &p, &argv, &outs, &[]), "miss", "{argv:?}");
        assert_eq!(same_as_plain(&traced, &p, &argv, &outs, &[]), "hit", "{argv:?}");
        // The model (with its own cache: the traced entry would be a HIT) cannot.
        let model = Launcher::new(&ctx.path("model-cache")).env("STRATA_TRACE", MODEL);
        assert_eq!(
            same_as_plain(&model, &p, &argv, &outs, &[]),
            "uncacheable:untracked_output",
            "{argv:?}"
        );
    }
}

/// `#pragma GCC dependency` compares mtimes and warns: the messages depend on what no fact
/// records, so it is not cached (and what runs says what a plain compile says).
#[test]
fn launcher_pragma_gcc_dependency_is_not_cached() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let p = ctx.path("proj");
    write_file(&p.join("x.c"), "#pragma GCC dependency \"dep.txt\"\nint x;\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_file(&p.join("dep.txt"), "newer than x.c\n");
    let argv = args(&["gcc", "-c", "x.c", "-o", "x.o"]);
    for mode in [TRACED, MODEL] {
        let l = Launcher::new(&ctx.cache).env("STRATA_TRACE", mode);
        let outcome = same_as_plain(&l, &p, &argv, &["x.o"], &[]);
        let want = if mode == TRACED {
            "uncacheable:pragma_dependency"
        } else {
            "uncacheable:model_unseen_input"
        };
        assert_eq!(outcome, want);
    }
}

/// A program in front of strata that denies `ptrace` with EPERM (as a container's seccomp
/// profile does), then runs the rest of its arguments.
fn no_ptrace(dir: &Path) -> PathBuf {
    require_tool("gcc", "apt-get install gcc");
    let source = r#"
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof code / sizeof code[0], code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 90;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return 91;
    execv(argv[1], argv + 1);
    return 92;
}
"#;
    write_file(&dir.join("no-ptrace.c"), source);
    let exe = dir.join("no-ptrace");
    let out =
        Command::new("gcc").arg("-o").arg(&exe).arg(dir.join("no-ptrace.c")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// Where ptrace is refused, the launcher falls back to the model: it says so once per
/// build, counts each compile's mode, explains it, caches what the model can vouch for and
/// not what it cannot (a precompiled header, `.incbin`), and a HIT still equals a plain
/// compile.
#[test]
fn launcher_falls_back_to_the_model_where_tracing_is_refused() {
    let ctx = TestContext::new();
    let p = ctx.path("proj");
    let front = no_ptrace(&ctx.path("bin"));
    write_file(&p.join("inc/x.h"), "#define X 1\n");
    write_file(&p.join("a.c"), "#include \"x.h\"\nint a = X;\n");
    write_file(&p.join("b.c"), "#include \"x.h\"\nint b = X + 1;\n");
    write_file(&p.join("data.bin"), "bytes");
    write_file(&p.join("blob.c"), "__asm__(\".incbin \\\"data.bin\\\"\");\n");
    // Notification does not need ptrace: this is about the machines where ptrace is the
    // mechanism (Linux before 5.8) or asked for.
    let l = Launcher::new(&ctx.cache)
        .env("STRATA_EXPLAIN", "1")
        .env("STRATA_TRACE_MECHANISM", "ptrace");
    let run = |argv: &[&str]| {
        let mut cmd = Command::new(&front);
        cmd.arg(strata_exe()).args(argv).current_dir(&p);
        l.apply(&mut cmd);
        let r = run_bounded(cmd, super::RUN_TIMEOUT);
        assert_eq!(r.code, 0, "{argv:?}: {}", r.stderr);
        r
    };
    let first = run(&["gcc", "-Iinc", "-c", "a.c", "-o", "a.o"]);
    assert_eq!(
        first.stderr.matches("tracing the compiler is refused here").count(),
        1,
        "{}",
        first.stderr
    );
    assert!(first.stderr.contains("strata: miss a.c: "), "{}", first.stderr);
    assert!(
        first.stderr.contains("observed by the model: tracing is refused (PTRACE_TRACEME"),
        "{}",
        first.stderr
    );
    let second = run(&["gcc", "-Iinc", "-c", "b.c", "-o", "b.o"]);
    assert!(!second.stderr.contains("warning"), "said once per build: {}", second.stderr);
    let hit = run(&["gcc", "-Iinc", "-c", "a.c", "-o", "a.o"]);
    assert!(
        hit.stderr.contains("strata: hit a.c: observed by the model (no trace)"),
        "{}",
        hit.stderr
    );
    let blob = run(&["gcc", "-c", "blob.c", "-o", "blob.o"]);
    assert!(
        blob.stderr.contains("strata: uncacheable:model_unseen_input blob.c"),
        "{}",
        blob.stderr
    );
    // The counters: compiles and how they were observed.
    let c = counters(&ctx.cache);
    assert_eq!((c.get("miss"), c.get("hit")), (Some(&2), Some(&1)), "{c:?}");
    assert_eq!(c.get("uncacheable:model_unseen_input"), Some(&1), "{c:?}");
    let root = strata::action::layout::CacheRoot::new(&ctx.cache).unwrap();
    let observed = strata::l1::counters::read(&root).remove("compile_observed").unwrap();
    assert_eq!(observed.get("model"), Some(&3), "{observed:?}");
    assert_eq!(observed.get("trace"), None, "{observed:?}");
    let stats = l.run(&p, &["stats"]);
    assert!(
        stats
            .stdout
            .contains("compiles observed: 0 traced, 3 by the fallback model (tracing refused or STRATA_TRACE=0)"),
        "{}",
        stats.stdout
    );
    // The same compile traced afterwards: the model's candidate is a HIT there too.
    let traced = Launcher::new(&ctx.cache).env("STRATA_TRACE_MECHANISM", "ptrace");
    assert_eq!(
        same_as_plain(
            &traced,
            &p,
            &args(&["gcc", "-Iinc", "-c", "a.c", "-o", "a.o"]),
            &["a.o"],
            &[]
        ),
        "hit"
    );
}

/// `scripts/bench/notif-floor`, built here: a seccomp user-notification supervisor that lets
/// every file-system call of its program's tree go on, as another tool observing the build
/// (or a container runtime's syscall interception) does.
fn outer_supervisor(dir: &Path) -> PathBuf {
    require_tool("gcc", "apt-get install gcc");
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench");
    std::fs::create_dir_all(dir).unwrap();
    let exe = dir.join("notif-floor");
    let out = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(bench.join("notif-floor.c"))
        .arg("-I")
        .arg(&bench)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// Under another seccomp supervisor (a filter with a listener), whose `USER_NOTIF` overrules
/// a tracer's stops: the launcher does not trace (only one listener per process; a ptrace
/// filter under it would see nothing) but observes with the model, and a ptrace asked for
/// explicitly sees no stop at all, which makes the compile uncacheable instead of a record
/// with no inputs. Every result equals a plain compile.
#[test]
fn launcher_under_another_seccomp_supervisor_never_records_an_empty_trace() {
    let ctx = TestContext::new();
    let p = ctx.path("proj");
    let outer = outer_supervisor(&ctx.path("bin"));
    write_file(&p.join("inc/x.h"), "#define X 1\n");
    write_file(&p.join("a.c"), "#include \"x.h\"\nint a = X;\n");
    let argv = args(&["gcc", "-Iinc", "-c", "a.c", "-o", "a.o"]);
    let want = super::plain_object(&p, &argv, "a.o");
    let run = |l: &Launcher| {
        let mut cmd = Command::new(&outer);
        cmd.arg("-u").arg(strata_exe()).args(&argv).current_dir(&p);
        l.apply(&mut cmd);
        let r = run_bounded(cmd, super::RUN_TIMEOUT);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(std::fs::read(p.join("a.o")).unwrap(), want);
        r.stderr
    };
    let auto = Launcher::new(&ctx.cache).env("STRATA_EXPLAIN", "1");
    let first = run(&auto);
    assert!(
        first.contains("tracing is refused (the launcher runs under another seccomp supervisor"),
        "{first}"
    );
    assert!(first.contains("strata: miss a.c: "), "{first}");
    let hit = run(&auto);
    assert!(hit.contains("strata: hit a.c: observed by the model (no trace)"), "{hit}");
    let ptrace = Launcher::new(&ctx.path("cache2"))
        .env("STRATA_EXPLAIN", "1")
        .env("STRATA_TRACE_MECHANISM", "ptrace");
    for _ in 0..2 {
        let stderr = run(&ptrace);
        assert!(stderr.contains("strata: uncacheable:trace_incomplete a.c"), "{stderr}");
        assert!(stderr.contains("no system call stopped"), "{stderr}");
    }
    // Outside the supervisor the same cache's entry is a HIT by the trace.
    assert_eq!(same_as_plain(&auto, &p, &argv, &["a.o"], &[]), "hit");
}

/// An output the compiler appends to (`-fopt-info-…=FILE` opens it with `O_APPEND` and no
/// `O_TRUNC`) holds what was there before the compile: a HIT cannot repeat that, so it is
/// not cached, whether the file existed at the MISS or not, and every run writes what a
/// plain compile writes.
#[test]
fn launcher_an_output_the_compiler_appends_to_is_not_cached() {
    require_tool("gcc", "apt-get install gcc");
    for flag in ["-fopt-info-all=opt.txt", "-fopt-info-missed=opt.txt"] {
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(
            &p.join("s.c"),
            "int f(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }\n",
        );
        let argv = args(&["gcc", "-O2", flag, "-c", "s.c", "-o", "s.o"]);
        let junk = "JUNK FROM AN EARLIER BUILD\n";
        // What plain gcc leaves in opt.txt when it held `junk`, and when it did not exist.
        write_file(&p.join("opt.txt"), junk);
        super::plain(&p, &argv, &[]).expect_code(0);
        let want_appended = std::fs::read(p.join("opt.txt")).unwrap();
        assert!(want_appended.starts_with(junk.as_bytes()), "{flag}: gcc appends");
        std::fs::remove_file(p.join("opt.txt")).unwrap();
        super::plain(&p, &argv, &[]).expect_code(0);
        let want_fresh = std::fs::read(p.join("opt.txt")).unwrap();
        let traced = Launcher::new(&ctx.cache).env("STRATA_TRACE", TRACED);
        for round in 0..2 {
            std::fs::remove_file(p.join("opt.txt")).unwrap();
            let (got, outcome) = traced.compile(&p, &argv);
            assert_eq!(got.code, 0, "{flag}: {}", got.stderr);
            assert_eq!(outcome, "uncacheable:untracked_write", "{flag}, round {round}");
            assert_eq!(std::fs::read(p.join("opt.txt")).unwrap(), want_fresh, "{flag}");
            write_file(&p.join("opt.txt"), junk);
            let (got, outcome) = traced.compile(&p, &argv);
            assert_eq!(got.code, 0, "{flag}: {}", got.stderr);
            assert_eq!(outcome, "uncacheable:untracked_write", "{flag}, round {round}");
            assert_eq!(std::fs::read(p.join("opt.txt")).unwrap(), want_appended, "{flag}");
        }
    }
}

/// Both tracing mechanisms through the launcher: a compile cached under one is a HIT under
/// the other (the same facts), a header created earlier on the search path is a MISS under
/// either, and every result equals a plain compile, with gcc and with clang.
#[test]
fn launcher_ptrace_and_notification_record_the_same_facts() {
    for cc in ["gcc", "clang"] {
        require_tool(cc, "apt-get install gcc clang");
        let ctx = TestContext::new();
        let p = ctx.path("proj");
        write_file(&p.join("inc2/x.h"), "#define X 2\n");
        std::fs::create_dir_all(p.join("inc1")).unwrap();
        write_file(&p.join("a.c"), "#include <x.h>\nint a = X;\n");
        let argv = args(&[cc, "-Iinc1", "-Iinc2", "-MD", "-c", "a.c", "-o", "a.o"]);
        let with = |mechanism: &str| {
            Launcher::new(&ctx.cache)
                .env("STRATA_TRACE_MECHANISM", mechanism)
                .env("STRATA_EXPLAIN", "1")
        };
        let (notify, ptrace) = (with("notify"), with("ptrace"));
        assert_eq!(same_as_plain(&notify, &p, &argv, &["a.o", "a.d"], &[]), "miss", "{cc}");
        assert_eq!(same_as_plain(&ptrace, &p, &argv, &["a.o", "a.d"], &[]), "hit", "{cc}");
        write_file(&p.join("inc1/x.h"), "#define X 1\n");
        assert_eq!(same_as_plain(&ptrace, &p, &argv, &["a.o", "a.d"], &[]), "miss", "{cc}");
        assert_eq!(same_as_plain(&notify, &p, &argv, &["a.o", "a.d"], &[]), "hit", "{cc}");
        std::fs::remove_file(p.join("inc1/x.h")).unwrap();
        assert_eq!(same_as_plain(&notify, &p, &argv, &["a.o", "a.d"], &[]), "hit", "{cc}");
    }
}
