//! `strata::launcher::trace` against real programs: gcc, g++, clang, `as`, `/bin/sh`, and
//! small C programs compiled here with gcc that make exactly the calls that trip tracers
//! (vfork, clone3, threads, `openat2`, `statx`, `execveat`, directory descriptors, `chdir`,
//! paths across page boundaries, a static binary, 32-bit system calls, `io_uring`).
//!
//! Each run calls [`trace::run`] in this process, on a thread of its own (the tracer must be
//! the thread that spawned the shim), with cargo's `strata` binary as the shim, bounded by
//! [`RUN_TIMEOUT`].
//!
//! Every test runs with ptrace; the ones in [`notify`] run the same test again with seccomp
//! user notification ([`Mechanism::Notify`]), and the ones in [`preload`] once more with the
//! preload library taking file opens without a stop: every way must give the same record.

use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use strata::launcher::trace::{
    self, Coverage, Error, Event, Mechanism, Observed, Op, Request, Shim, Traced,
};

use super::{RUN_TIMEOUT, TestContext, require_tool, write_file};

thread_local! {
    /// The mechanism the test on this thread traces with ([`Mechanism::Ptrace`] unless a
    /// wrapper in [`notify`] set it).
    static MECHANISM: Cell<Mechanism> = const { Cell::new(Mechanism::Ptrace) };
    /// Whether the test on this thread gives the run the preload library (set by the
    /// wrappers in [`preload`], with [`Mechanism::Notify`]).
    static PRELOAD: Cell<bool> = const { Cell::new(false) };
}

/// The preload library, written once per test process under a directory of its own.
fn preload_library() -> &'static Path {
    static LIBRARY: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> = std::sync::OnceLock::new();
    &LIBRARY
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let path = trace::preload::library(dir.path()).expect("the preload library");
            (dir, path)
        })
        .1
}

/// Calls macro `$again` with every test of this file that runs under each mechanism (all
/// but the ones about the shim and the preload library's own).
macro_rules! every_trace_test {
    ($again:ident) => {
        $again!(
            trace_gcc_c_records_inputs_absent_lookups_and_the_object,
            trace_gxx_c_records_inputs_absent_lookups_and_the_object,
            trace_clang_c_records_inputs_absent_lookups_and_the_object,
            trace_gcc_pipe_records_the_processes_of_the_pipeline,
            trace_shell_script_wrapper_records_the_interpreter_and_the_real_compiler,
            trace_follows_vfork_clone3_posix_spawn_and_threads,
            trace_resolves_dirfd_and_cwd_relative_paths_of_every_kind_of_call,
            trace_full_coverage_records_readlink,
            trace_reads_path_arguments_up_to_unmapped_pages_and_across_pages,
            trace_a_static_binary_has_no_loader_event,
            trace_captures_stdout_and_stderr_byte_for_byte_and_inherits_stdin,
            trace_propagates_exit_codes_and_signals_and_delivers_signals,
            trace_waits_for_descendants_that_outlive_the_root_and_kills_them_after_linger,
            trace_reports_a_program_that_cannot_be_run,
            trace_marks_what_it_cannot_observe_as_incomplete,
            trace_reads_a_working_directory_afresh_after_it_was_renamed,
            trace_runs_the_tree_on_the_tracers_cpu_and_gives_the_tracer_its_mask_back,
        );
    };
}

/// The tests that run again under seccomp user notification: every test of this file but
/// the ones about the shim (which only ptrace uses).
mod notify {
    use super::{MECHANISM, Mechanism};

    macro_rules! again_under_notification {
        ($($test:ident),* $(,)?) => {$(
            #[test]
            fn $test() {
                MECHANISM.set(Mechanism::Notify);
                super::$test();
            }
        )*};
    }

    every_trace_test!(again_under_notification);
}

/// The tests of [`notify`] once more with the preload library: opens for reading made
/// through libc's `open` family are logged by the library and pass the filter.
mod preload {
    use super::{MECHANISM, Mechanism, PRELOAD};

    macro_rules! again_with_the_preload_library {
        ($($test:ident),* $(,)?) => {$(
            #[test]
            fn $test() {
                MECHANISM.set(Mechanism::Notify);
                PRELOAD.set(true);
                super::$test();
            }
        )*};
    }

    every_trace_test!(again_with_the_preload_library);
}

/// The shim every run uses: cargo's build of `strata` (the test binary is not strata).
fn shim() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_strata"))
}

/// What a traced run is given beyond the command line.
#[derive(Clone, Copy)]
struct Setup<'a> {
    coverage: Coverage,
    linger: Duration,
    shim: &'a Path,
    pin: bool,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Self {
            coverage: Coverage::default(),
            linger: trace::DEFAULT_LINGER,
            shim: shim(),
            pin: true,
        }
    }
}

/// Runs `argv` (argv[0] is also the program, looked up in `PATH` unless it has a `/`) in
/// `dir`, traced, on a thread of its own; fails the test after [`RUN_TIMEOUT`].
fn try_traced(dir: &Path, argv: &[&str], setup: Setup<'_>) -> Result<Traced, Error> {
    let dir = dir.to_owned();
    let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let shim = setup.shim.to_owned();
    let mechanism = MECHANISM.get();
    let preload = PRELOAD.get().then(preload_library);
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let program = PathBuf::from(&argv[0]);
        let mut request = Request::new(&program, &argv[0], &argv[1..]);
        request.current_dir = Some(&dir);
        request.shim = Shim::Binary(&shim);
        request.mechanism = mechanism;
        request.coverage = setup.coverage;
        request.linger = setup.linger;
        request.pin = setup.pin;
        request.preload = preload;
        let _ = send.send(trace::run(&request));
    });
    receive.recv_timeout(RUN_TIMEOUT).expect("the traced run did not end within RUN_TIMEOUT")
}

/// [`try_traced`] that must succeed with exit status 0 and a complete record.
fn traced(dir: &Path, argv: &[&str]) -> Traced {
    traced_with(dir, argv, Setup::default())
}

fn traced_with(dir: &Path, argv: &[&str], setup: Setup<'_>) -> Traced {
    let t = try_traced(dir, argv, setup).unwrap_or_else(|e| panic!("{argv:?}: {e:?}"));
    assert!(
        t.status.success(),
        "{argv:?}: {}\nstderr: {}",
        t.status,
        String::from_utf8_lossy(&t.stderr)
    );
    assert_eq!(t.incomplete, Vec::<String>::new(), "{argv:?}");
    t
}

/// Compiles the C program `source` with gcc into `<dir>/<name>` (extra flags after).
fn compile_c(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    require_tool("gcc", "apt-get install gcc");
    let src = dir.join(format!("{name}.c"));
    write_file(&src, source);
    let exe = dir.join(name);
    let out = Command::new("gcc")
        .args(["-O1", "-Wall", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(flags)
        .output()
        .unwrap();
    assert!(out.status.success(), "gcc {name}.c: {}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// The events naming exactly `path` (byte for byte, no normalisation).
fn at<'a>(t: &'a Traced, path: &Path) -> Vec<&'a Event> {
    t.events.iter().filter(|e| e.path.as_os_str() == path.as_os_str()).collect()
}

/// The one event naming `path` with an op for which `pick` holds; fails listing the events
/// on `path` otherwise.
fn one<'a>(t: &'a Traced, path: &Path, pick: impl Fn(&Op) -> bool) -> &'a Event {
    let on_path = at(t, path);
    let picked: Vec<_> = on_path.iter().filter(|e| pick(&e.op)).collect();
    assert!(!picked.is_empty(), "no matching event on {}: {on_path:#?}", path.display());
    picked[0]
}

fn is_file(observed: &Observed) -> bool {
    matches!(observed, Observed::File(_))
}

/// The process id of the root (the shim's first `execve`).
fn root_pid(t: &Traced) -> u32 {
    t.events.iter().find(|e| e.op == Op::Exec).expect("an exec event").pid
}

/// A project with two include directories, a quoted header, `__has_include("opt.h")`
/// (absent everywhere) and `.incbin "data.bin"` (read by the assembler).
fn compiler_project(ctx: &TestContext, source_name: &str) -> PathBuf {
    let dir = ctx.path("proj");
    write_file(&dir.join("inc1/a.h"), "#include \"b.h\"\n#define A 1\n");
    write_file(&dir.join("inc2/b.h"), "#define B 2\n");
    write_file(&dir.join("data.bin"), b"\x01\x02\x03\x04");
    write_file(
        &dir.join("src").join(source_name),
        "#include \"a.h\"\n#include <stddef.h>\n\
         #if __has_include(\"opt.h\")\n#error opt.h must be absent\n#endif\n\
         __asm__(\".section .rodata\\n.globl blob\\nblob:\\n.incbin \\\"data.bin\\\"\\n.previous\");\n\
         int f(void) { return A + B + (int)sizeof(size_t); }\n",
    );
    dir
}

/// The depfile's paths (after the target), absolute against `dir`.
fn depfile_paths(dir: &Path, depfile: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(depfile).unwrap().replace("\\\n", " ");
    let (_, deps) = text.split_once(": ").unwrap();
    deps.split_whitespace().map(|p| dir.join(p)).collect()
}

/// One compiler's record of [`compiler_project`]: the source, every header in its depfile,
/// `opt.h` absent in the quote directory and both `-I` directories, `b.h` absent in the
/// first directory searched, the `.incbin` input, the object and the depfile written; with
/// `gch` the absent `.gch` probes gcc makes for the main file's includes.
fn check_compiler(compiler: &str, source_name: &str, gch: bool) {
    require_tool(compiler, "apt-get install gcc g++ clang");
    let ctx = TestContext::new();
    let dir = compiler_project(&ctx, source_name);
    let source = format!("src/{source_name}");
    let argv =
        [compiler, "-O1", "-Iinc1", "-Iinc2", "-MD", "-MF", "out.d", "-c", &source, "-o", "out.o"];
    let t = traced(&dir, &argv);
    assert!(dir.join("out.o").is_file());

    let deps = depfile_paths(&dir, &dir.join("out.d"));
    assert!(deps.len() >= 4, "{deps:?}"); // the source, a.h, b.h, stddef.h
    for dep in &deps {
        let read = one(&t, dep, |op| *op == Op::OpenRead);
        assert!(is_file(&read.observed), "{compiler}: {} {:?}", dep.display(), read.observed);
    }
    let opened_source = one(&t, &dir.join(&source), |op| *op == Op::OpenRead);
    assert!(opened_source.cwd_relative);
    assert_eq!(opened_source.given, OsStr::new(&source));

    for searched in ["src", "inc1", "inc2"] {
        let probe = one(&t, &dir.join(searched).join("opt.h"), |op| {
            matches!(op, Op::OpenRead | Op::Stat { .. } | Op::Access)
        });
        assert_eq!(probe.observed, Observed::Absent, "{compiler}: opt.h in {searched}");
    }
    if gch {
        // gcc looks for a precompiled header in each directory before the header itself,
        // for the includes of the main file (a PCH can only come first).
        for probe in ["src/a.h.gch", "inc1/a.h.gch"] {
            let e = one(&t, &dir.join(probe), |op| matches!(op, Op::Stat { .. }));
            assert_eq!(e.observed, Observed::Absent, "{compiler}: {probe}");
        }
    }
    // b.h, included from inc1/a.h, is looked for in inc1 first (absent), found in inc2.
    let shadow = one(&t, &dir.join("inc1/b.h"), |op| matches!(op, Op::OpenRead | Op::Stat { .. }));
    assert_eq!(shadow.observed, Observed::Absent, "{compiler}");
    let incbin = one(&t, &dir.join("data.bin"), |op| *op == Op::OpenRead);
    assert!(is_file(&incbin.observed));

    let object = dir.join("out.o");
    let written = t.events.iter().any(|e| {
        (e.path == object && matches!(e.op, Op::OpenWrite { create: true, .. }))
            || matches!(&e.op, Op::Rename { to } if *to == object)
    });
    assert!(written, "{compiler}: nothing wrote out.o: {:#?}", at(&t, &object));
    let depfile = dir.join("out.d");
    assert!(t.events.iter().any(|e| e.path == depfile && matches!(e.op, Op::OpenWrite { .. })));
}

#[test]
fn trace_gcc_c_records_inputs_absent_lookups_and_the_object() {
    check_compiler("gcc", "main.c", true);
}

#[test]
fn trace_gxx_c_records_inputs_absent_lookups_and_the_object() {
    check_compiler("g++", "main.cpp", true);
}

#[test]
fn trace_clang_c_records_inputs_absent_lookups_and_the_object() {
    check_compiler("clang", "main.c", false);
}

#[test]
fn trace_gcc_pipe_records_the_processes_of_the_pipeline() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = compiler_project(&ctx, "main.c");
    let t = traced(&dir, &["gcc", "-pipe", "-Iinc1", "-Iinc2", "-c", "src/main.c", "-o", "p.o"]);
    // cc1 reads the source, `as` (another process, fed by the pipe) the .incbin and writes
    // the object.
    let source = one(&t, &dir.join("src/main.c"), |op| *op == Op::OpenRead);
    let incbin = one(&t, &dir.join("data.bin"), |op| *op == Op::OpenRead);
    let object = one(&t, &dir.join("p.o"), |op| matches!(op, Op::OpenWrite { create: true, .. }));
    assert_ne!(source.pid, incbin.pid);
    assert_eq!(incbin.pid, object.pid);
    let programs: Vec<String> = t
        .events
        .iter()
        .filter(|e| e.op == Op::Exec && is_file(&e.observed))
        .filter_map(|e| Some(e.path.file_name()?.to_string_lossy().into_owned()))
        .collect();
    assert!(programs.iter().any(|p| p == "cc1"), "{programs:?}");
    assert!(programs.iter().any(|p| p.ends_with("as")), "{programs:?}");
}

#[test]
fn trace_shell_script_wrapper_records_the_interpreter_and_the_real_compiler() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("w");
    write_file(&dir.join("x.c"), "int x(void) { return 1; }\n");
    let wrapper = dir.join("cc-wrapper");
    write_file(&wrapper, "#!/bin/sh\nexec gcc \"$@\"\n");
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let t = traced(&dir, &[wrapper.to_str().unwrap(), "-c", "x.c", "-o", "x.o"]);
    let script = one(&t, &wrapper, |op| *op == Op::Exec);
    assert!(is_file(&script.observed));
    // The kernel opens /bin/sh for the #! line: the tracer records it from the script.
    let interpreter = one(&t, Path::new("/bin/sh"), |op| *op == Op::Exec);
    assert_eq!(interpreter.given, OsStr::new("/bin/sh"));
    assert_eq!(interpreter.pid, script.pid);
    let gcc_found = t.events.iter().any(|e| {
        e.op == Op::Exec && e.path.file_name() == Some(OsStr::new("gcc")) && is_file(&e.observed)
    });
    assert!(gcc_found, "sh's exec of gcc (found in PATH) is recorded");
    one(&t, &dir.join("x.c"), |op| *op == Op::OpenRead);
    one(&t, &dir.join("x.o"), |op| matches!(op, Op::OpenWrite { create: true, truncate: true }));
}

const TREE_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
static void *thread_main(void *arg) { (void)arg; close(open("by-thread.txt", O_RDONLY)); return 0; }
int main(void) {
    pid_t v = vfork();
    if (v == 0) { open("by-vfork-child.txt", O_RDONLY); _exit(0); }
    waitpid(v, 0, 0);
    struct clone_args args; memset(&args, 0, sizeof args); args.exit_signal = SIGCHLD;
    long c = syscall(SYS_clone3, &args, sizeof args);
    if (c == 0) { open("by-clone3-child.txt", O_RDONLY); _exit(0); }
    if (c < 0) return 10;
    waitpid((pid_t)c, 0, 0);
    pid_t s; char *argv[] = {"cat", "by-posix-spawn.txt", 0};
    if (posix_spawn(&s, "/bin/cat", 0, 0, argv, environ) != 0) return 11;
    waitpid(s, 0, 0);
    pthread_t t; pthread_create(&t, 0, thread_main, 0); pthread_join(t, 0);
    return 0;
}
"#;

#[test]
fn trace_follows_vfork_clone3_posix_spawn_and_threads() {
    let ctx = TestContext::new();
    let dir = ctx.path("tree");
    let exe = compile_c(&dir, "tree", TREE_C, &["-pthread"]);
    write_file(&dir.join("by-posix-spawn.txt"), "spawned\n");
    write_file(&dir.join("by-thread.txt"), "");
    let t = traced(&dir, &[exe.to_str().unwrap()]);
    let root = root_pid(&t);
    for (name, present) in [
        ("by-vfork-child.txt", false),
        ("by-clone3-child.txt", false),
        ("by-posix-spawn.txt", true),
        ("by-thread.txt", true),
    ] {
        let e = one(&t, &dir.join(name), |op| *op == Op::OpenRead);
        assert_ne!(e.pid, root, "{name} was opened by another process or thread");
        assert!(e.cwd_relative, "{name}");
        assert_eq!(is_file(&e.observed), present, "{name}: {:?}", e.observed);
        assert_eq!(e.observed == Observed::Absent, !present, "{name}");
    }
    assert_eq!(t.stdout, b"spawned\n");
}

const PATHS_C: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
int main(void) {
    char buf[64]; struct stat st; struct statx sx; struct statfs sf;
    int d = open("d", O_RDONLY | O_DIRECTORY);
    if (d < 0) return 2;
    close(openat(d, "f.txt", O_RDONLY));                       /* dirfd-relative */
    close(openat(AT_FDCWD, "g.txt", O_RDONLY));                /* cwd-relative */
    close(open("d/../g.txt", O_RDONLY));                       /* kept as given */
    struct open_how how; memset(&how, 0, sizeof how); how.flags = O_RDONLY;
    close(syscall(SYS_openat2, d, "f.txt", &how, sizeof how));
    how.flags = O_WRONLY | O_CREAT; how.mode = 0644;
    close(syscall(SYS_openat2, d, "made-by-openat2.txt", &how, sizeof how));
    statx(AT_FDCWD, "link", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx);
    statx(d, "f.txt", 0, STATX_BASIC_STATS, &sx);
    statx(d, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx);       /* fstat: no event */
    fstat(d, &st);                                             /* no event */
    fstatat(AT_FDCWD, "absent/x.h.gch", &st, 0);
    lstat("link", &st);
    access("d/f.txt", R_OK);
    readlink("link", buf, sizeof buf);
    DIR *listing = opendir("d"); while (readdir(listing)) {} closedir(listing);
    mkdir("newdir", 0755); rmdir("newdir");
    close(creat("tmp.txt", 0644));
    rename("tmp.txt", "renamed.txt"); link("renamed.txt", "hard.txt");
    symlinkat("renamed.txt", d, "sym"); truncate("hard.txt", 0);
    chmod("hard.txt", 0600); utimensat(AT_FDCWD, "hard.txt", 0, 0);
    chown("hard.txt", -1, -1); lchown("link", -1, -1);
    int w = open("hard.txt", O_WRONLY);
    fchmod(w, 0644); fchown(w, -1, -1); futimens(w, 0); close(w);
    unlink("hard.txt"); unlinkat(d, "sym", 0);
    mknod("fifo", S_IFIFO | 0600, 0); stat("fifo", &st);
    statfs(".", &sf);
    getxattr("g.txt", "user.x", buf, sizeof buf); setxattr("g.txt", "user.x", "v", 1, 0);
    close(openat(d, ".", O_TMPFILE | O_WRONLY, 0600));
    close(open("g.txt", O_PATH));
    pid_t child = fork();
    if (child == 0) {
        char *argv[] = {"prog", 0}; char *envp[] = {0};
        syscall(SYS_execveat, d, "prog", argv, envp, 0);
        _exit(20);
    }
    int status; waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 3;
    child = fork();
    if (child == 0) {
        int fd = openat(d, "prog", O_RDONLY | O_CLOEXEC);
        char *argv[] = {"prog", 0}; char *envp[] = {0};
        syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH);
        _exit(21);
    }
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
    int top = open(".", O_RDONLY | O_DIRECTORY);
    if (chdir("d") != 0) return 5;
    close(open("after-chdir.txt", O_RDONLY));
    fchdir(top);
    close(open("after-fchdir.txt", O_RDONLY));
    return 0;
}
"#;

#[test]
fn trace_resolves_dirfd_and_cwd_relative_paths_of_every_kind_of_call() {
    let ctx = TestContext::new();
    let dir = ctx.path("paths");
    let exe = compile_c(&dir, "paths", PATHS_C, &[]);
    write_file(&dir.join("d/f.txt"), "f");
    write_file(&dir.join("g.txt"), "g");
    write_file(&dir.join("d/after-chdir.txt"), "");
    std::fs::copy("/bin/true", dir.join("d/prog")).unwrap();
    std::os::unix::fs::symlink("d/f.txt", dir.join("link")).unwrap();
    let t = traced(&dir, &[exe.to_str().unwrap()]);
    let p = |rel: &str| dir.join(rel);

    let e = one(&t, &p("d/f.txt"), |op| *op == Op::OpenRead);
    assert!(!e.cwd_relative && e.given == "f.txt" && is_file(&e.observed), "{e:?}");
    let e = one(&t, &p("g.txt"), |op| *op == Op::OpenRead);
    assert!(e.cwd_relative && e.given == "g.txt");
    // Joined as a string: `..` stays.
    let unnormalised = PathBuf::from(format!("{}/d/../g.txt", dir.display()));
    let e = one(&t, &unnormalised, |op| *op == Op::OpenRead);
    assert!(is_file(&e.observed));
    assert_eq!(
        at(&t, &p("d/f.txt")).iter().filter(|e| e.op == Op::OpenRead).count(),
        2,
        "openat + openat2"
    );
    let e = one(&t, &p("d/made-by-openat2.txt"), |op| matches!(op, Op::OpenWrite { .. }));
    assert_eq!(e.op, Op::OpenWrite { create: true, truncate: false });
    assert_eq!(e.observed, Observed::Absent);

    let e = one(&t, &p("link"), |op| *op == Op::Stat { follow: false });
    assert_eq!(e.observed, Observed::Symlink("d/f.txt".into()));
    let stats: Vec<_> =
        at(&t, &p("d/f.txt")).into_iter().filter(|e| matches!(e.op, Op::Stat { .. })).collect();
    assert_eq!(stats.len(), 1, "statx by dirfd; the AT_EMPTY_PATH statx and fstat make no event");
    assert!(!t.events.iter().any(|e| matches!(e.op, Op::Stat { .. }) && e.given.is_empty()));
    let e = one(&t, &p("absent/x.h.gch"), |op| *op == Op::Stat { follow: true });
    assert_eq!(e.observed, Observed::Absent);
    let e = one(&t, &p("d/f.txt"), |op| *op == Op::Access);
    assert!(is_file(&e.observed));
    assert!(
        at(&t, &p("link")).iter().all(|e| e.op != Op::Readlink),
        "readlink is not traced by default"
    );

    let e = one(&t, &p("d"), |op| *op == Op::ListDirectory);
    assert!(matches!(e.observed, Observed::Directory(_)) && e.given.is_empty());
    assert_eq!(one(&t, &p("newdir"), |op| *op == Op::Mkdir).observed, Observed::Absent);
    assert!(matches!(
        one(&t, &p("newdir"), |op| *op == Op::Rmdir).observed,
        Observed::Directory(_)
    ));
    one(&t, &p("tmp.txt"), |op| *op == Op::OpenWrite { create: true, truncate: true });
    one(&t, &p("tmp.txt"), |op| *op == Op::Rename { to: p("renamed.txt") });
    one(&t, &p("renamed.txt"), |op| *op == Op::Link { to: p("hard.txt") });
    let e = one(&t, &p("d/sym"), |op| matches!(op, Op::Symlink { .. }));
    assert_eq!(e.op, Op::Symlink { target: "renamed.txt".into() });
    for op in [Op::Truncate, Op::Chmod, Op::SetTimes, Op::Unlink] {
        one(&t, &p("hard.txt"), |o| *o == op);
    }
    assert!(matches!(one(&t, &p("d/sym"), |op| *op == Op::Unlink).observed, Observed::Symlink(_)));
    for op in [Op::Chown, Op::Chmod, Op::SetTimes] {
        // The path call, then the descriptor call (fchmod, fchown, futimens).
        assert_eq!(at(&t, &p("hard.txt")).iter().filter(|e| e.op == op).count(), 2, "{op:?}");
    }
    assert_eq!(
        one(&t, &p("link"), |op| *op == Op::Chown).observed,
        Observed::Symlink("d/f.txt".into())
    );
    assert_eq!(one(&t, &p("fifo"), |op| *op == Op::Mknod).observed, Observed::Absent);
    assert_eq!(
        one(&t, &p("fifo"), |op| *op == Op::Stat { follow: true }).observed,
        Observed::Other
    );
    assert!(matches!(one(&t, &p("."), |op| *op == Op::StatFs).observed, Observed::Directory(_)));
    one(&t, &p("g.txt"), |op| *op == Op::Xattr { write: false });
    one(&t, &p("g.txt"), |op| *op == Op::Xattr { write: true });
    let e = one(&t, &p("d/."), |op| matches!(op, Op::OpenWrite { .. }));
    assert_eq!(
        e.op,
        Op::OpenWrite { create: true, truncate: false },
        "O_TMPFILE names the directory"
    );
    assert!(
        is_file(&one(&t, &p("g.txt"), |op| *op == Op::Stat { follow: true }).observed),
        "O_PATH"
    );

    // execveat by dirfd and by descriptor (AT_EMPTY_PATH: the descriptor's path).
    let execs = at(&t, &p("d/prog")).into_iter().filter(|e| e.op == Op::Exec).collect::<Vec<_>>();
    assert_eq!(execs.len(), 2, "{execs:#?}");
    assert_eq!(execs[0].given, "prog");
    assert_eq!(execs[1].given, "");
    assert!(execs.iter().all(|e| is_file(&e.observed)));

    // chdir then relative opens; fchdir back.
    let e = one(&t, &p("d"), |op| *op == Op::Chdir);
    assert!(e.cwd_relative);
    assert!(is_file(&one(&t, &p("d/after-chdir.txt"), |op| *op == Op::OpenRead).observed));
    one(&t, &dir, |op| *op == Op::Chdir); // fchdir: the descriptor's path
    assert_eq!(
        one(&t, &p("after-fchdir.txt"), |op| *op == Op::OpenRead).observed,
        Observed::Absent
    );
}

#[test]
fn trace_full_coverage_records_readlink() {
    let ctx = TestContext::new();
    let dir = ctx.path("rl");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink("target.txt", dir.join("link")).unwrap();
    let setup = Setup { coverage: Coverage::Full, ..Setup::default() };
    let t = traced_with(&dir, &["readlink", "link"], setup);
    assert_eq!(t.stdout, b"target.txt\n");
    let e = one(&t, &dir.join("link"), |op| *op == Op::Readlink);
    assert_eq!(e.observed, Observed::Symlink("target.txt".into()));
    let lean = traced(&dir, &["readlink", "link"]);
    assert!(at(&lean, &dir.join("link")).iter().all(|e| e.op != Op::Readlink));
}

const PAGES_C: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(0, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(m + 2 * page, page, PROT_NONE);
    const char *name = argv[1];
    size_t n = strlen(name) + 1;
    char *at_end = m + 2 * page - n;          /* NUL is the last byte before PROT_NONE */
    memcpy(at_end, name, n);
    char *across = m + page - n / 2;          /* crosses from page 0 into page 1 */
    memcpy(across, name, n);
    close(open(at_end, O_RDONLY));
    close(open(across, O_RDONLY));
    syscall(SYS_openat, AT_FDCWD, 0, O_RDONLY); /* NULL: EFAULT, no lookup, no event */
    return 0;
}
"#;

#[test]
fn trace_reads_path_arguments_up_to_unmapped_pages_and_across_pages() {
    let ctx = TestContext::new();
    let dir = ctx.path("pages");
    let exe = compile_c(&dir, "pages", PAGES_C, &[]);
    let name = "sub/".repeat(40) + "page-edge.txt";
    write_file(&dir.join(&name), "x");
    let t = traced(&dir, &[exe.to_str().unwrap(), &name]);
    let opens = at(&t, &dir.join(&name));
    assert_eq!(opens.len(), 2, "{opens:#?}");
    assert!(opens.iter().all(|e| e.op == Op::OpenRead && e.given == OsStr::new(&name)));
}

#[test]
fn trace_a_static_binary_has_no_loader_event() {
    let ctx = TestContext::new();
    let dir = ctx.path("static");
    let exe = compile_c(
        &dir,
        "static-prog",
        "#include <fcntl.h>\n#include <unistd.h>\nint main(void) { close(open(\"static.txt\", O_RDONLY)); return 0; }\n",
        &["-static"],
    );
    write_file(&dir.join("static.txt"), "s");
    let t = traced(&dir, &[exe.to_str().unwrap()]);
    assert!(is_file(&one(&t, &dir.join("static.txt"), |op| *op == Op::OpenRead).observed));
    let execs: Vec<_> = t.events.iter().filter(|e| e.op == Op::Exec).map(|e| &e.path).collect();
    assert_eq!(execs, [&exe], "no PT_INTERP, no loader");
    let dynamic = traced(&dir, &["/bin/true"]);
    let execs: Vec<_> = dynamic.events.iter().filter(|e| e.op == Op::Exec).collect();
    assert_eq!(execs.len(), 2, "/bin/true and its loader: {execs:#?}");
    assert!(execs[1].path.to_string_lossy().contains("ld-linux"), "{execs:#?}");
}

const OUTPUT_C: &str = r#"
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void) {
    static unsigned char out[200000], err[150000];
    for (size_t i = 0; i < sizeof out; i++) out[i] = (unsigned char)(i * 7);
    for (size_t i = 0; i < sizeof err; i++) err[i] = (unsigned char)(i * 13 + 1);
    /* Interleaved, both far beyond a pipe's buffer. */
    for (size_t i = 0; i < 50; i++) {
        write(1, out + i * 4000, 4000);
        write(2, err + i * 3000, 3000);
    }
    struct stat st; fstat(0, &st);
    printf("stdin %lu %lu\n", (unsigned long)st.st_dev, (unsigned long)st.st_ino);
    return 0;
}
"#;

#[test]
fn trace_captures_stdout_and_stderr_byte_for_byte_and_inherits_stdin() {
    let ctx = TestContext::new();
    let dir = ctx.path("out");
    let exe = compile_c(&dir, "output", OUTPUT_C, &[]);
    let t = traced(&dir, &[exe.to_str().unwrap()]);
    let want_out: Vec<u8> = (0..200_000usize).map(|i| (i * 7) as u8).collect();
    let want_err: Vec<u8> = (0..150_000usize).map(|i| (i * 13 + 1) as u8).collect();
    let stdin = std::fs::metadata("/proc/self/fd/0").unwrap();
    let stdin_line = format!(
        "stdin {} {}\n",
        std::os::unix::fs::MetadataExt::dev(&stdin),
        std::os::unix::fs::MetadataExt::ino(&stdin)
    );
    let (out, line) = t.stdout.split_at(200_000);
    assert!(out == want_out.as_slice(), "stdout differs");
    assert_eq!(String::from_utf8_lossy(line), stdin_line);
    assert!(t.stderr == want_err, "stderr differs ({} bytes)", t.stderr.len());
}

#[test]
fn trace_propagates_exit_codes_and_signals_and_delivers_signals() {
    let ctx = TestContext::new();
    let dir = ctx.path("sig");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |script: &str| try_traced(&dir, &["sh", "-c", script], Setup::default()).unwrap();
    assert_eq!(run("exit 7").status.code(), Some(7));
    let killed = run("kill -TERM $$");
    assert_eq!((killed.status.code(), killed.status.signal()), (None, Some(libc::SIGTERM)));
    // A handler runs: the tracer passes the signal on.
    let handled = run("trap 'echo handled' USR1; kill -USR1 $$; echo after");
    assert_eq!(handled.stdout, b"handled\nafter\n");
    // A child killed by a signal; the root goes on and its later calls are recorded.
    let child =
        run("sleep 30 & kill -KILL $!; wait $!; echo $?; cat after-kill.txt 2>/dev/null; true");
    assert_eq!(child.stdout, b"137\n");
    assert!(child.status.success());
    assert_eq!(
        one(&child, &dir.join("after-kill.txt"), |op| *op == Op::OpenRead).observed,
        Observed::Absent
    );
    // Under ptrace a group-stop (job control) does not hang the trace: the process is
    // resumed (with PTRACE_TRACEME a group-stop cannot be kept). Under notification the
    // process stays stopped until a SIGCONT, as it would untraced.
    if MECHANISM.get() == Mechanism::Ptrace {
        let stopped = run("kill -STOP $$; echo resumed");
        assert_eq!(stopped.stdout, b"resumed\n");
    } else {
        let stopped = run("sh -c 'kill -STOP $$; echo resumed' & sleep 0.3; kill -CONT $!; wait");
        assert_eq!(stopped.stdout, b"resumed\n");
    }
}

#[test]
fn trace_waits_for_descendants_that_outlive_the_root_and_kills_them_after_linger() {
    let ctx = TestContext::new();
    let dir = ctx.path("daemon");
    write_file(&dir.join("late.txt"), "late\n");
    // Within the linger: the grandchild's late read is in the record.
    let t = traced(&dir, &["sh", "-c", "(sleep 0.3; cat late.txt) & echo started"]);
    assert_eq!(t.stdout, b"started\nlate\n");
    assert!(is_file(&one(&t, &dir.join("late.txt"), |op| *op == Op::OpenRead).observed));
    // A daemon-like grandchild (double fork, stdout kept open): killed after the linger,
    // and the record is marked incomplete.
    let setup = Setup { linger: Duration::from_millis(300), ..Setup::default() };
    let started = Instant::now();
    let t =
        try_traced(&dir, &["sh", "-c", "(sh -c 'sleep 30; cat late.txt' &) ; echo started"], setup)
            .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(t.status.success());
    assert_eq!(t.stdout, b"started\n");
    assert_eq!(t.incomplete.len(), 1, "{:?}", t.incomplete);
    assert!(t.incomplete[0].contains("were still running 300 ms after"), "{:?}", t.incomplete);
    assert!(at(&t, &dir.join("late.txt")).is_empty());
    // A descendant that never makes a traced call (it spins) and whose parent ended, still
    // holding stdout. ptrace knows it from its fork and kills it; notification never hears
    // of it, and gives up after the linger and the pipes' bound: the record is incomplete
    // either way, the run ends, and the program ran once.
    let spin = compile_c(&dir, "spin", SPIN_C, &[]);
    let started = Instant::now();
    let t = try_traced(&dir, &[spin.to_str().unwrap()], setup).unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(t.status.success());
    assert!(t.incomplete[0].contains("were still running 300 ms after"), "{:?}", t.incomplete);
    if MECHANISM.get() == Mechanism::Ptrace {
        assert_eq!(t.incomplete.len(), 1, "{:?}", t.incomplete);
    } else {
        assert!(
            t.incomplete.iter().any(|i| i.contains("its stdout stayed open")),
            "{:?}",
            t.incomplete
        );
    }
}

/// Forks a child that spins without a system call for 8 s, holding stdout, and ends.
const SPIN_C: &str = r#"
#include <time.h>
#include <unistd.h>
int main(void) {
    if (fork() == 0) {
        volatile unsigned long i = 0;
        time_t end = time(0) + 8; /* vDSO: no system call */
        while (time(0) < end) i++;
        _exit(0);
    }
    return 0;
}
"#;

#[test]
fn trace_reports_a_program_that_cannot_be_run() {
    let ctx = TestContext::new();
    let dir = ctx.path("missing");
    std::fs::create_dir_all(&dir).unwrap();
    match try_traced(&dir, &["./no-such-compiler", "-c", "x.c"], Setup::default()) {
        Err(Error::Spawn { program, source }) => {
            assert_eq!(program, Path::new("./no-such-compiler"));
            assert_eq!(source.raw_os_error(), Some(libc::ENOENT));
        }
        other => panic!("{other:?}"),
    }
}

/// A shim in front of the shim: installs a seccomp filter that makes `SYSCALL` fail with
/// `ERRNO` (as a container's profile or a kernel without the feature would), then `exec`s
/// the real strata shim with the same arguments.
fn denying_shim(dir: &Path, name: &str, syscall: &str, errno: &str) -> PathBuf {
    let source = format!(
        r#"
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {{
    (void)argc;
    struct sock_filter code[] = {{
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, {syscall}, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | {errno}),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    }};
    struct sock_fprog prog = {{ sizeof code / sizeof code[0], code }};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 90;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return 91;
    execv("{strata}", argv);
    return 92;
}}
"#,
        strata = shim().display()
    );
    compile_c(dir, name, &source, &[])
}

#[test]
fn trace_refused_where_ptrace_or_seccomp_is_denied_and_the_program_does_not_run() {
    let ctx = TestContext::new();
    let dir = ctx.path("refused");
    let no_ptrace = denying_shim(&dir, "no-ptrace", "SYS_ptrace", "EPERM");
    let no_seccomp = denying_shim(&dir, "no-seccomp", "SYS_seccomp", "EINVAL");
    for (shim, what) in [(&no_ptrace, "PTRACE_TRACEME"), (&no_seccomp, "seccomp filter")] {
        let setup = Setup { shim, ..Setup::default() };
        let result = try_traced(&dir, &["sh", "-c", "echo ran > ran.txt"], setup);
        match result {
            Err(e @ Error::Refused { .. }) => {
                assert!(e.is_refused());
                let Error::Refused { program, reason } = &e else { unreachable!() };
                assert_eq!(program, Path::new("sh"));
                assert!(reason.starts_with(what), "{reason}");
                assert!(e.to_string().starts_with("cannot trace sh: "), "{e}");
            }
            other => panic!("{}: {other:?}", shim.display()),
        }
        assert!(!dir.join("ran.txt").exists(), "the program ran untraced under {}", shim.display());
    }
    let missing = dir.join("no-such-shim");
    let setup = Setup { shim: &missing, ..Setup::default() };
    let result = try_traced(&dir, &["sh", "-c", "echo ran > ran.txt"], setup);
    assert!(matches!(&result, Err(e) if e.is_refused()), "{result:?}");
    assert!(!dir.join("ran.txt").exists());
}

const UNOBSERVABLE_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/io_uring.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    if (strcmp(argv[1], "uring") == 0) {
        struct io_uring_params p; memset(&p, 0, sizeof p);
        long fd = syscall(SYS_io_uring_setup, 4, &p);
        if (fd >= 0) close((int)fd);
    } else if (strcmp(argv[1], "handle") == 0) {
        char space[sizeof(struct file_handle) + 128]; struct file_handle *h = (void *)space;
        h->handle_bytes = 128; int mount_id;
        name_to_handle_at(AT_FDCWD, ".", h, &mount_id, 0);
    } else if (strcmp(argv[1], "untraced") == 0) {
        long c = syscall(SYS_clone, CLONE_UNTRACED | SIGCHLD, 0, 0, 0, 0);
        if (c == 0) _exit(0);
        waitpid((pid_t)c, 0, 0);
    } else if (strcmp(argv[1], "int80") == 0) {
#ifdef __x86_64__
        long ret; /* 32-bit getpid (20) through int 0x80 */
        __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
#endif
    } else if (strcmp(argv[1], "gone") == 0) {
        mkdir("gone", 0755);
        if (chdir("gone") != 0 || rmdir("../gone") != 0) return 2;
        open("relative.txt", O_RDONLY);
    }
    return 0;
}
"#;

#[test]
fn trace_marks_what_it_cannot_observe_as_incomplete() {
    let ctx = TestContext::new();
    let dir = ctx.path("unobservable");
    let exe = compile_c(&dir, "unobservable", UNOBSERVABLE_C, &[]);
    let mut cases = vec![
        ("uring", "io_uring"),
        ("handle", "opens files by handle"),
        ("gone", "working directory of process"),
    ];
    if MECHANISM.get() == Mechanism::Ptrace {
        cases.push(("untraced", "CLONE_UNTRACED"));
    } else {
        // A child started with CLONE_UNTRACED is under the filter like any other.
        let t = try_traced(&dir, &[exe.to_str().unwrap(), "untraced"], Setup::default()).unwrap();
        assert!(t.status.success(), "untraced: {}", t.status);
        assert_eq!(t.incomplete, Vec::<String>::new());
    }
    if cfg!(target_arch = "x86_64") {
        cases.push(("int80", "another ABI"));
    }
    for (mode, needle) in cases {
        let t = try_traced(&dir, &[exe.to_str().unwrap(), mode], Setup::default()).unwrap();
        assert!(t.status.success(), "{mode}: {}", t.status);
        assert_eq!(t.incomplete.len(), 1, "{mode}: {:?}", t.incomplete);
        assert!(t.incomplete[0].contains(needle), "{mode}: {:?}", t.incomplete);
    }
}

const MOVED_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    if (chdir("a/b") != 0) return 2;
    close(open("before.txt", O_RDONLY));
    if (rename("../../a", "../../c") != 0) return 3;   /* the working directory moves */
    close(open("x.txt", O_RDONLY));
    return 0;
}
"#;

#[test]
fn trace_reads_a_working_directory_afresh_after_it_was_renamed() {
    let ctx = TestContext::new();
    let dir = ctx.path("moved");
    let exe = compile_c(&dir, "moved", MOVED_C, &[]);
    write_file(&dir.join("a/b/x.txt"), "x");
    let t = traced(&dir, &[exe.to_str().unwrap()]);
    assert_eq!(
        one(&t, &dir.join("a/b/before.txt"), |op| *op == Op::OpenRead).observed,
        Observed::Absent
    );
    one(&t, &dir.join("a/b/../../a"), |op| *op == Op::Rename { to: dir.join("a/b/../../c") });
    let e = one(&t, &dir.join("c/b/x.txt"), |op| *op == Op::OpenRead);
    assert!(is_file(&e.observed) && e.cwd_relative);
    assert!(at(&t, &dir.join("a/b/x.txt")).is_empty());
}

/// `Cpus_allowed_list` of `/proc/thread-self/status` (this thread's CPU mask).
fn allowed_here() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")).unwrap();
    line.split_once(':').unwrap().1.trim().to_owned()
}

/// The number of CPUs a `Cpus_allowed_list` value (`0-3,5`) names.
fn cpus_in(list: &str) -> usize {
    list.split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// Traces `grep Cpus_allowed_list /proc/self/status` with `pin`, on a thread of its own;
/// returns the tracer thread's mask before and after, and what the tracee printed.
fn traced_mask(pin: bool) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_owned();
    let mechanism = MECHANISM.get();
    let handle = std::thread::spawn(move || {
        let before = allowed_here();
        let argv: Vec<OsString> =
            ["grep", "Cpus_allowed_list", "/proc/self/status"].map(OsString::from).to_vec();
        let program = PathBuf::from("grep");
        let mut request = Request::new(&program, &argv[0], &argv[1..]);
        request.current_dir = Some(&dir_path);
        request.shim = Shim::Binary(shim());
        request.mechanism = mechanism;
        request.pin = pin;
        let traced = trace::run(&request).unwrap();
        assert!(traced.status.success());
        let printed = String::from_utf8(traced.stdout).unwrap();
        let printed = printed.split_once(':').unwrap().1.trim().to_owned();
        (before, allowed_here(), printed)
    });
    handle.join().unwrap()
}

#[test]
fn trace_runs_the_tree_on_the_tracers_cpu_and_gives_the_tracer_its_mask_back() {
    let (before, after, tracee) = traced_mask(true);
    assert_eq!(after, before, "the tracer's thread must get its mask back");
    if cpus_in(&before) >= 2 {
        assert_eq!(cpus_in(&tracee), 1, "pinned tracee mask {tracee} (tracer had {before})");
    } else {
        assert_eq!(tracee, before);
    }
    let (before, after, tracee) = traced_mask(false);
    assert_eq!((after.as_str(), tracee.as_str()), (before.as_str(), before.as_str()));
}

/// Runs `argv` in `dir` under notification, with the preload library or without.
fn notified(dir: &Path, argv: &[&str], preload: bool) -> Traced {
    MECHANISM.set(Mechanism::Notify);
    PRELOAD.set(preload);
    try_traced(dir, argv, Setup::default()).unwrap_or_else(|e| panic!("{argv:?}: {e:?}"))
}

/// The events of `t` that name a file under `dir`, as (op, path, given, observed).
fn under(t: &Traced, dir: &Path) -> Vec<(Op, PathBuf, OsString, Observed)> {
    let mut events: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.path.starts_with(dir))
        .map(|e| (e.op.clone(), e.path.clone(), e.given.clone(), e.observed.clone()))
        .collect();
    events.sort_by(|a, b| a.1.cmp(&b.1));
    events
}

/// The library takes the opens for reading of a dynamically linked program: the record is
/// the one the stops give (same events, same observations, relative names joined to the
/// working directory), with at least one stop fewer per file, and the library itself
/// (which the dynamic loader opens) is in no event.
#[test]
fn trace_preload_takes_opens_without_stops_and_records_what_stops_record() {
    let ctx = TestContext::new();
    let dir = ctx.path("preload-opens");
    let mut argv = vec!["cat".to_owned()];
    for i in 0..40 {
        write_file(&dir.join(format!("f{i}.txt")), format!("{i}\n"));
        argv.push(if i % 2 == 0 {
            format!("f{i}.txt")
        } else {
            format!("{}/f{i}.txt", dir.display())
        });
    }
    argv.push("missing.txt".to_owned());
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let stopped = notified(&dir, &argv, false);
    let logged = notified(&dir, &argv, true);
    assert_eq!(stopped.status.code(), Some(1), "cat fails on the missing file");
    assert_eq!(logged.stdout, stopped.stdout);
    assert_eq!(logged.stderr, stopped.stderr);
    assert_eq!(logged.incomplete, Vec::<String>::new());
    let events = under(&logged, &dir);
    assert_eq!(events, under(&stopped, &dir));
    assert_eq!(events.len(), 41, "{events:#?}");
    assert!(
        events
            .iter()
            .any(|(_, _, given, observed)| given == "missing.txt" && *observed == Observed::Absent)
    );
    // 41 opens without a stop; the dynamic loader's open of the library is one more stop.
    assert!(
        logged.stops + 40 <= stopped.stops,
        "{} stops with the library, {} without",
        logged.stops,
        stopped.stops
    );
    let library = preload_library().to_string_lossy().into_owned();
    assert!(
        !stopped
            .events
            .iter()
            .chain(&logged.events)
            .any(|e| e.path.to_string_lossy().contains(&library))
    );
}

/// The library takes `stat`, `lstat` and `access` too: a file, a directory, a missing name,
/// a name under a missing directory, a symbolic link and a dangling one, relative and
/// absolute, give the events and observations the stops give (an `lstat` of a link reads
/// its target), with a stop fewer for each call.
#[test]
fn trace_preload_takes_stat_and_access_and_records_what_stops_record() {
    require_tool("python3", "apt-get install python3");
    let ctx = TestContext::new();
    let dir = ctx.path("preload-stat");
    write_file(&dir.join("file.txt"), "file\n");
    write_file(&dir.join("sub/inner.txt"), "inner\n");
    std::os::unix::fs::symlink("file.txt", dir.join("link")).unwrap();
    std::os::unix::fs::symlink("nowhere", dir.join("dangling")).unwrap();
    let absolute = dir.join("file.txt").to_string_lossy().into_owned();
    let script = format!(
        r#"
import os
for name in ["file.txt", "sub", "missing", "link", "dangling", "gone/x", {absolute:?}]:
    for look in (os.stat, os.lstat):
        try:
            look(name)
        except OSError:
            pass
    os.access(name, os.R_OK)
print("looked")
"#
    );
    write_file(&dir.join("look.py"), &script);
    let argv = ["python3", "look.py"];
    let stopped = notified(&dir, &argv, false);
    let logged = notified(&dir, &argv, true);
    assert!(stopped.status.success(), "{}", String::from_utf8_lossy(&stopped.stderr));
    assert_eq!(logged.stdout, b"looked\n");
    assert_eq!(logged.incomplete, Vec::<String>::new());
    let events = under(&logged, &dir);
    let names = ["file.txt", "sub", "missing", "link", "dangling", "gone/x", &absolute];
    let looks = |op: Op| {
        events.iter().filter(|e| e.0 == op && names.contains(&&*e.2.to_string_lossy())).count()
    };
    assert_eq!(looks(Op::Stat { follow: true }), 7, "{events:#?}");
    assert_eq!(looks(Op::Stat { follow: false }), 7, "{events:#?}");
    assert_eq!(looks(Op::Access), 7, "{events:#?}");
    assert_eq!(events, under(&stopped, &dir));
    // Which observations are the calls' own results (an absence found so needs no second
    // look after the compile): a `stat`'s and an `open`'s, never an `access`'s (a `stat`
    // made just before it) nor a stop's.
    let missing = |t: &Traced, op: Op| {
        t.events.iter().find(|e| e.op == op && e.given == "missing").map(|e| e.by_call)
    };
    assert_eq!(missing(&logged, Op::Stat { follow: true }), Some(true));
    assert_eq!(missing(&logged, Op::Access), Some(false));
    assert_eq!(missing(&stopped, Op::Stat { follow: true }), Some(false));
    let link = events.iter().find(|e| e.0 == Op::Stat { follow: false } && e.2 == "link");
    assert_eq!(link.map(|e| &e.3), Some(&Observed::Symlink("file.txt".into())));
    assert!(events.iter().any(|e| e.2 == "gone/x" && e.3 == Observed::Absent));
    assert!(
        logged.stops + 21 <= stopped.stops,
        "{} stops with the library, {} without",
        logged.stops,
        stopped.stops
    );
}

const NAMES_C: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static void said(const char *what, int ret) { printf("%s %d %d\n", what, ret < 0 ? -1 : 0, ret < 0 ? errno : 0); }
int main(int argc, char **argv) {
    (void)argc;
    struct stat st;
    char *bad = (char *)1;
    said("open-bad-name", open(bad, O_RDONLY));
    said("stat-bad-name", stat(bad, &st));
    said("lstat-bad-name", lstat(bad, &st));
    said("access-bad-name", access(bad, R_OK));
    said("stat-bad-buffer", stat("file.txt", (struct stat *)1));
    said("open-empty", open("", O_RDONLY));
    char *unended = malloc(5000);
    memset(unended, 'a', 5000);
    said("open-no-nul", open(unended, O_RDONLY));
    char component[301];
    memset(component, 'c', 300);
    component[300] = 0;
    said("open-long-component", open(component, O_RDONLY));
    int fd = open(argv[1], O_RDONLY);
    said("open-long-relative", fd);
    close(fd);
    fd = open(argv[2], O_RDONLY);
    said("open-long-absolute", fd);
    close(fd);
    said("stat-long-absolute", stat(argv[2], &st));
    said("open-short", open("file.txt", O_RDONLY));
    return 0;
}
"#;

/// The library reads a name after its call: names the kernel cannot read (`EFAULT`: a bad
/// pointer, or a good name with a bad `stat` buffer) fail as they do without the library
/// and are recorded as their stops record them, a name without a NUL within `PATH_MAX` or
/// an empty one looks nothing up, and names too long for a slot (here 600 and 3,000 bytes)
/// are logged through the text arena without a stop: the same output and events as with
/// stops only.
#[test]
fn trace_preload_reads_names_after_the_call_bad_pointers_and_long_names() {
    let ctx = TestContext::new();
    let dir = ctx.path("preload-names");
    write_file(&dir.join("file.txt"), "file\n");
    let relative = format!("{}long.txt", format!("{}/", "r".repeat(99)).repeat(6));
    write_file(&dir.join(&relative), "relative\n");
    let absolute = dir.join(format!("{}long.txt", format!("{}/", "a".repeat(199)).repeat(15)));
    write_file(&absolute, "absolute\n");
    let exe = compile_c(&dir, "names", NAMES_C, &[]);
    let argv = [exe.to_str().unwrap(), &relative, absolute.to_str().unwrap()];
    let stopped = notified(&dir, &argv, false);
    let logged = notified(&dir, &argv, true);
    let printed = String::from_utf8_lossy(&logged.stdout).into_owned();
    for line in [
        "open-bad-name -1 14",
        "stat-bad-name -1 14",
        "access-bad-name -1 14",
        "stat-bad-buffer -1 14",
        "open-empty -1 2",
        "open-no-nul -1 36",
        "open-long-component -1 36",
        "open-long-relative 0 0",
        "open-long-absolute 0 0",
        "stat-long-absolute 0 0",
        "open-short 0 0",
    ] {
        assert!(printed.lines().any(|l| l == line), "{line:?} not in\n{printed}");
    }
    assert_eq!(logged.stdout, stopped.stdout);
    assert_eq!(logged.incomplete, Vec::<String>::new());
    assert_eq!(stopped.incomplete, Vec::<String>::new());
    let events = under(&logged, &dir);
    assert_eq!(events, under(&stopped, &dir));
    let long = |t: &Traced, path: &Path| at(t, path).len();
    assert_eq!(long(&logged, &dir.join(&relative)), 1);
    assert_eq!(long(&logged, &absolute), 2, "the open and the stat");
    // Seven calls need no stop with the library (the empty name, the one without a NUL,
    // the long component, the long names and the short one); the bad names and the bad
    // buffer stop on their second try as they do without it, and the loader's open of the
    // library is one stop more.
    assert!(
        logged.stops + 6 <= stopped.stops,
        "{} stops with the library, {} without",
        logged.stops,
        stopped.stops
    );
}

const FOPEN_EXECVP_C: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void read_with(const char *name, const char *mode) {
    FILE *f = fopen(name, mode);
    if (!f) { printf("fopen %s %s: errno %d\n", name, mode, errno); return; }
    char line[64] = {0};
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    printf("fopen %s %s: %s", name, mode, line);
    fclose(f);
}
int main(int argc, char **argv) {
    (void)argc;
    read_with("file.txt", "r");
    read_with("file.txt", "rb");
    read_with("file.txt", "re");
    read_with("missing.txt", "r");
    read_with("sub", "r");
    FILE *w = fopen("written.txt", "w");
    fputs("written\n", w);
    fclose(w);
    read_with("written.txt", "r+");
    const char *names[] = {argv[1], "strata-no-such-program", 0};
    for (int i = 0; names[i]; i++) {
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            char *args[] = {(char *)names[i], "from-execvp", 0};
            execvp(names[i], args);
            printf("execvp %s: errno %d\n", names[i], errno);
            fflush(stdout);
            _exit(127);
        }
        int status;
        waitpid(child, &status, 0);
        printf("exit %d\n", WEXITSTATUS(status));
    }
    return 0;
}
"#;

/// The library takes `fopen` for reading (`r`, `rb`, `re`: the FILE reads as libc's would
/// give, a missing file and a directory fail or read as they do) and hands other modes to
/// libc; it takes `execvp`'s search of `PATH`, looking at each candidate without a stop and
/// making the `execve` only where one is there (a script found in the last of four
/// directories, a name found nowhere). The output and the events are those of the stops.
#[test]
fn trace_preload_takes_fopen_for_reading_and_the_path_search_of_execvp() {
    let ctx = TestContext::new();
    let dir = ctx.path("preload-fopen");
    write_file(&dir.join("file.txt"), "file line\n");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let bins: Vec<PathBuf> = (0..4).map(|i| dir.join(format!("bin{i}"))).collect();
    for bin in &bins {
        std::fs::create_dir_all(bin).unwrap();
    }
    let tool = bins[3].join("strata-found-tool");
    write_file(&tool, "#!/bin/sh\necho \"tool $1\"\n");
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let exe = compile_c(&dir, "fopen-execvp", FOPEN_EXECVP_C, &[]);
    let path = std::env::join_paths(bins.iter().map(PathBuf::as_path).chain([Path::new("/bin")]))
        .unwrap()
        .into_string()
        .unwrap();
    let script = format!("PATH={path} exec {} strata-found-tool", exe.display());
    let argv = ["sh", "-c", &script];
    let stopped = notified(&dir, &argv, false);
    let logged = notified(&dir, &argv, true);
    let printed = String::from_utf8_lossy(&logged.stdout).into_owned();
    let want = "fopen file.txt r: file line\nfopen file.txt rb: file line\n\
                fopen file.txt re: file line\nfopen missing.txt r: errno 2\nfopen sub r: \
                fopen written.txt r+: written\ntool from-execvp\nexit 0\n\
                execvp strata-no-such-program: errno 2\nexit 127\n";
    assert_eq!(printed, want);
    assert_eq!(logged.stdout, stopped.stdout);
    assert_eq!(logged.incomplete, Vec::<String>::new());
    assert_eq!(stopped.incomplete, Vec::<String>::new());
    // What the reads found (the written file and the directory itself change meanwhile).
    let reads = |t: &Traced| -> Vec<(PathBuf, Observed)> {
        let named = ["file.txt", "missing.txt", "sub"].map(|n| dir.join(n));
        let mut v: Vec<_> = t
            .events
            .iter()
            .filter(|e| named.contains(&e.path))
            .map(|e| (e.path.clone(), e.observed.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup();
        v
    };
    assert_eq!(reads(&logged).len(), 3, "{:#?}", reads(&logged));
    // The same facts (the candidates are looked at by `stat` with the library, at the
    // `execve` stop without it; the found one is an exec in both).
    let absent_in_bins = |t: &Traced| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = t
            .events
            .iter()
            .filter(|e| {
                e.observed == Observed::Absent && bins.iter().any(|b| e.path.starts_with(b))
            })
            .map(|e| e.path.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(absent_in_bins(&logged), absent_in_bins(&stopped));
    assert_eq!(absent_in_bins(&logged).len(), 7, "3 for the tool, 4 for the missing name");
    assert_eq!(reads(&logged), reads(&stopped));
    let execs = |t: &Traced| t.events.iter().filter(|e| e.op == Op::Exec && e.path == tool).count();
    assert_eq!((execs(&logged), execs(&stopped)), (1, 1));
    // Five `fopen`s for reading and seven failed `execve`s need no stop.
    assert!(
        logged.stops + 12 <= stopped.stops,
        "{} stops with the library, {} without",
        logged.stops,
        stopped.stops
    );
}

/// A process that replaces or closes the log's descriptor before it starts a program: the
/// library in that program finds no log (the descriptor is not the launcher's memfd any
/// more), so its opens stop, and nothing is written into the file now at that number.
#[test]
fn trace_preload_log_descriptor_replaced_or_closed_falls_back_to_stops() {
    let ctx = TestContext::new();
    let dir = ctx.path("preload-replaced");
    write_file(&dir.join("input.txt"), "input\n");
    write_file(&dir.join("victim.txt"), "victim\n");
    for redirect in ["<>victim.txt", "<&-"] {
        let script = format!(
            "fd=${{STRATA_TRACE_LOG%%:*}}; test -n \"$fd\" || exit 9; eval \"exec $fd{redirect}\"; cat input.txt"
        );
        let t = notified(&dir, &["bash", "-c", &script], true);
        assert!(
            t.status.success(),
            "{redirect}: {} {}",
            t.status,
            String::from_utf8_lossy(&t.stderr)
        );
        assert_eq!(t.stdout, b"input\n");
        assert_eq!(t.incomplete, Vec::<String>::new(), "{redirect}");
        assert_eq!(at(&t, &dir.join("input.txt")).len(), 1, "{redirect}: {:#?}", t.events);
        assert_eq!(std::fs::read_to_string(dir.join("victim.txt")).unwrap(), "victim\n");
    }
}

/// What a process of the compile does to the log itself: a slot reserved and never
/// committed (a process that died inside an open) and a committed slot that does not
/// parse each make the record incomplete.
#[test]
fn trace_preload_unfinished_or_damaged_log_slots_make_the_record_incomplete() {
    require_tool("python3", "apt-get install python3");
    let ctx = TestContext::new();
    let dir = ctx.path("preload-damaged");
    let script = r#"
import mmap, os, sys
fd = int(os.environ["STRATA_TRACE_LOG"].split(":")[0])
m = mmap.mmap(fd, 32 << 20)
index = int.from_bytes(m[8:12], "little")
m[8:12] = (index + 1).to_bytes(4, "little")
slot = 4096 + 512 * index
if sys.argv[1] == "damaged":
    m[slot + 8:slot + 12] = (99).to_bytes(4, "little")
    m[slot:slot + 4] = (1).to_bytes(4, "little")
if sys.argv[1] == "rewound":
    m[0:16] = bytes(16)
    m[slot:slot + 4] = (1).to_bytes(4, "little")
    open("input.txt").read()
"#;
    write_file(&dir.join("log.py"), script);
    write_file(&dir.join("input.txt"), "input\n");
    let cases = [
        ("unfinished", "never logged as done"),
        ("damaged", "does not parse"),
        ("rewound", "wrote into the preload library's log"),
    ];
    for (mode, needle) in cases {
        let t = notified(&dir, &["python3", "log.py", mode], true);
        assert!(t.status.success(), "{mode}: {}", String::from_utf8_lossy(&t.stderr));
        assert_eq!(t.incomplete.len(), 1, "{mode}: {:?}", t.incomplete);
        assert!(t.incomplete[0].contains(needle), "{mode}: {:?}", t.incomplete);
    }
}

/// A library the dynamic loader cannot load (here a damaged file; elsewhere a 32-bit
/// program of the tree) makes it print an error naming the library into the program's
/// stderr: the program runs again without the library, and its output is its own.
#[test]
fn trace_preload_the_loader_cannot_load_is_dropped_and_the_output_is_the_programs() {
    let ctx = TestContext::new();
    let dir = ctx.path("preload-broken");
    let broken = dir.join("libbroken.so");
    write_file(&broken, "not an ELF file\n");
    write_file(&dir.join("input.txt"), "input\n");
    let t = cat_input_with_preload(&dir, &broken);
    assert!(!t.events.iter().any(|e| e.path == broken), "{:#?}", t.events);
}

/// `cat input.txt; echo done >&2` in `dir`, traced under notification with `library` as
/// the preload library: asserts that the output, the errors and the record are the
/// program's own, as without the library.
fn cat_input_with_preload(dir: &Path, library: &Path) -> Traced {
    let argv: Vec<OsString> =
        ["sh", "-c", "cat input.txt; echo done >&2"].iter().map(OsString::from).collect();
    let program = PathBuf::from("sh");
    let mut request = Request::new(&program, &argv[0], &argv[1..]);
    request.current_dir = Some(dir);
    request.mechanism = Mechanism::Notify;
    request.preload = Some(library);
    let t = trace::run(&request).unwrap();
    let name = library.display();
    assert!(t.status.success(), "{name}: {}", String::from_utf8_lossy(&t.stderr));
    assert_eq!(t.stdout, b"input\n", "{name}");
    assert_eq!(String::from_utf8_lossy(&t.stderr), "done\n", "{name}");
    assert_eq!(t.incomplete, Vec::<String>::new(), "{name}");
    assert_eq!(at(&t, &dir.join("input.txt")).len(), 1, "{name}");
    t
}

/// A library that needs another library the dynamic loader cannot load makes it refuse to
/// start the program at all, with a message that names the other library only: here
/// `libc.so` (what a musl-linked library needs, and on a glibc system a linker script: the
/// published binaries' library did this before it was linked without libraries) and a
/// library that is nowhere. The program runs again without the library; its output is its
/// own.
#[test]
fn trace_preload_a_library_whose_dependency_cannot_load_is_dropped() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("preload-needs");
    write_file(&dir.join("input.txt"), "input\n");
    write_file(&dir.join("stub.c"), "int strata_stub;\n");
    let gcc = |args: &[&str]| {
        let out = Command::new("gcc").current_dir(&dir).args(args).output().unwrap();
        assert!(out.status.success(), "gcc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    for (soname, message) in [
        ("libc.so", "invalid ELF header"),
        ("libstrata-test-missing.so.1", "cannot open shared object file"),
    ] {
        // The stub gives the library its DT_NEEDED and is then out of the loader's reach.
        gcc(&["-shared", "-fPIC", "-o", "stub.so", &format!("-Wl,-soname,{soname}"), "stub.c"]);
        let library = dir.join(format!("libneeds-{soname}.so"));
        let out = library.to_str().unwrap();
        gcc(&["-shared", "-fPIC", "-o", out, "stub.c", "-Wl,--no-as-needed", "./stub.so"]);
        // Without the rerun, the loader's own words.
        let plain = Command::new("sh")
            .current_dir(&dir)
            .env("LD_PRELOAD", &library)
            .args(["-c", "true"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&plain.stderr);
        assert_eq!(plain.status.code(), Some(127), "{soname}: {said}");
        assert!(said.contains(message) && !said.contains("libneeds"), "{soname}: {said}");
        cat_input_with_preload(&dir, &library);
    }
}

const REDIRECT_C: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
/* Opens of inc/v.h read alt/v.h: a user's own LD_PRELOAD library with an open override. */
int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int mode = va_arg(ap, int);
    va_end(ap);
    int (*next)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    if (strcmp(path, "inc/v.h") == 0) path = "alt/v.h";
    return next(path, flags, mode);
}
"#;

/// A library of the user's own that overrides `open` keeps working with the preload
/// library in every order: listed before it (the launcher's order: it calls this one as
/// its next `open`), and listed after it by a process of the compile (this one would hide
/// it, so the compile runs again without the preload library). The output is always the
/// override's, as without strata.
#[test]
fn trace_preload_keeps_a_users_open_override_in_either_order() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("preload-override");
    write_file(&dir.join("inc/v.h"), "inc\n");
    write_file(&dir.join("alt/v.h"), "alt\n");
    write_file(&dir.join("redirect.c"), REDIRECT_C);
    let library = dir.join("libredirect.so");
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(dir.join("redirect.c"))
        .arg("-ldl")
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let lib = library.to_str().unwrap();
    // The third: a variable of 5,000 bytes between the log's and `LD_PRELOAD`, which the
    // library must pass over to find the user's library after its own.
    let long = "x".repeat(5000);
    let scripts = [
        format!("LD_PRELOAD=\"{lib}:$LD_PRELOAD\" cat inc/v.h"),
        format!("LD_PRELOAD=\"$LD_PRELOAD:{lib}\" cat inc/v.h"),
        format!(
            "exec env -i STRATA_TRACE_LOG=\"$STRATA_TRACE_LOG\" LONG={long} \
             LD_PRELOAD=\"$LD_PRELOAD:{lib}\" /bin/cat inc/v.h"
        ),
    ];
    for script in scripts {
        let order = &script[..40];
        let t = notified(&dir, &["sh", "-c", &script], true);
        assert!(t.status.success(), "{order}: {}", String::from_utf8_lossy(&t.stderr));
        assert_eq!(String::from_utf8_lossy(&t.stdout), "alt\n", "{order}");
        assert_eq!(t.incomplete, Vec::<String>::new(), "{order}");
        assert_eq!(at(&t, &dir.join("alt/v.h")).len(), 1, "{order}: {:#?}", t.events);
        assert!(at(&t, &dir.join("inc/v.h")).is_empty(), "{order}");
    }
}
