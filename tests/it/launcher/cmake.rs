//! Real builds through the launcher: CMake with the Ninja and the Unix Makefiles
//! generators (`CMAKE_<LANG>_COMPILER_LAUNCHER`, parallel `-j`), and a plain Makefile with
//! `CC="strata gcc"`. A cold build misses every TU, another build directory of the same
//! sources hits every TU, the objects are byte-identical to a build without the launcher,
//! and a rebuild with nothing changed runs no compile at all (the depfiles are right).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{
    Launcher, RunResult, TestContext, copy_tree, counts, require_tool, run_bounded, s, strata_exe,
    write_file,
};

const BUILD_TIMEOUT: Duration = Duration::from_secs(180);

const CMAKELISTS: &str = r#"cmake_minimum_required(VERSION 3.16)
project(launched C CXX)
add_library(util STATIC lib/u1.c lib/u2.c lib/u3.c)
target_include_directories(util PUBLIC include)
add_executable(app app/main.cpp app/greet.cpp)
target_link_libraries(app util)
"#;

/// The number of compilations of [`project`].
const TUS: u64 = 5;

fn project(src: &Path) {
    write_file(&src.join("CMakeLists.txt"), CMAKELISTS);
    write_file(
        &src.join("include/util.h"),
        "#ifdef __cplusplus\nextern \"C\" {\n#endif\nint u1(void);\nint u2(void);\nint u3(void);\n#ifdef __cplusplus\n}\n#endif\n",
    );
    for (n, v) in [("1", 1), ("2", 20), ("3", 300)] {
        write_file(
            &src.join(format!("lib/u{n}.c")),
            format!(
                "#include <string.h>\n#include \"util.h\"\nint u{n}(void) {{ return (int)strlen(\"{n}\") * {v}; }}\n"
            ),
        );
    }
    write_file(&src.join("app/greet.hpp"), "#include <string>\nstd::string greet(int n);\n");
    write_file(
        &src.join("app/greet.cpp"),
        "#include \"greet.hpp\"\nstd::string greet(int n) { return \"sum \" + std::to_string(n); }\n",
    );
    write_file(
        &src.join("app/main.cpp"),
        "#include <iostream>\n#include \"greet.hpp\"\n#include \"util.h\"\nint main() { std::cout << greet(u1() + u2() + u3()) << std::endl; }\n",
    );
}

/// Runs `program args` in `cwd` with the launcher's environment (bounded).
fn tool(l: &Launcher, cwd: &Path, program: &str, args: &[String]) -> RunResult {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(cwd);
    l.apply(&mut cmd);
    let r = run_bounded(cmd, BUILD_TIMEOUT);
    assert_eq!(r.code, 0, "{program} {args:?}\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// Configures `src` into `build` (Release) with `generator`, through the launcher or not.
fn configure(l: &Launcher, src: &Path, build: &Path, generator: &str, launcher: bool) {
    let mut args = vec![
        "-S".to_owned(),
        s(src),
        "-B".into(),
        s(build),
        "-G".into(),
        generator.into(),
        "-DCMAKE_BUILD_TYPE=Release".into(),
    ];
    if launcher {
        args.push(format!("-DCMAKE_C_COMPILER_LAUNCHER={}", strata_exe()));
        args.push(format!("-DCMAKE_CXX_COMPILER_LAUNCHER={}", strata_exe()));
    }
    tool(l, src, "cmake", &args);
}

/// Builds `build` with `-j 4` and returns what the counters gained.
fn build(l: &Launcher, build: &Path) -> BTreeMap<String, u64> {
    let before = l.counters();
    let r = tool(l, build, "cmake", &["--build".into(), ".".into(), "-j".into(), "4".into()]);
    assert!(!r.stderr.contains("strata: warning"), "{}", r.stderr);
    delta(&before, &l.counters())
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, d)| *d != 0)
        .collect()
}

/// Every object file under `dir` (relative path → bytes).
fn objects(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    crate::engine::tree_files(dir)
        .into_iter()
        .filter(|(rel, _)| {
            rel.ends_with(".o")
                && !rel.contains("CMakeFiles/CMakeScratch")
                && !rel.contains("CompilerId")
        })
        .collect()
}

fn cmake_generator(generator: &str) {
    require_tool("cmake", "apt-get install cmake");
    require_tool("g++", "apt-get install g++");
    let ctx = TestContext::new();
    let src = ctx.path("src");
    project(&src);
    let l = Launcher::new(&ctx.cache).base_dirs(&[&ctx.root]);

    // A plain build (no launcher) gives the reference objects.
    configure(&l, &src, &ctx.path("plain"), generator, false);
    assert_eq!(build(&l, &ctx.path("plain")), counts(&[]));
    let want = objects(&ctx.path("plain"));
    assert_eq!(want.len() as u64, TUS, "{:?}", want.keys().collect::<Vec<_>>());

    configure(&l, &src, &ctx.path("b1"), generator, true);
    assert_eq!(build(&l, &ctx.path("b1")), counts(&[("miss", TUS)]), "cold: every TU misses");
    assert_eq!(objects(&ctx.path("b1")), want, "objects of the cold build");
    configure(&l, &src, &ctx.path("b2"), generator, true);
    assert_eq!(build(&l, &ctx.path("b2")), counts(&[("hit", TUS)]), "another build dir: all hit");
    assert_eq!(objects(&ctx.path("b2")), want, "objects of the warm build");
    let run = run_bounded(Command::new(ctx.path("b2/app")), Duration::from_secs(10));
    assert_eq!((run.code, run.stdout.as_str()), (0, "sum 321\n"));
    // Nothing changed: the build tool runs no compile (depfiles and times are right).
    assert_eq!(build(&l, &ctx.path("b2")), counts(&[]), "a no-op rebuild compiles nothing");
    // One header used by the C++ TUs only changes: exactly those rebuild, and miss.
    write_file(
        &src.join("app/greet.hpp"),
        "#include <string>\n// changed\nstd::string greet(int n);\n",
    );
    assert_eq!(build(&l, &ctx.path("b2")), counts(&[("miss", 2)]));
    // The other build dir then hits them.
    assert_eq!(build(&l, &ctx.path("b1")), counts(&[("hit", 2)]));
}

#[test]
fn launcher_cmake_ninja_cold_misses_another_build_dir_hits() {
    require_tool("ninja", "apt-get install ninja-build");
    cmake_generator("Ninja");
}

#[test]
fn launcher_cmake_unix_makefiles_cold_misses_another_build_dir_hits() {
    require_tool("make", "apt-get install make");
    cmake_generator("Unix Makefiles");
}

const MAKEFILE: &str = r#"OBJS := obj/one.o obj/two.o obj/three.o
all: libthings.a
libthings.a: $(OBJS)
	ar rcs $@ $^
obj/%.o: src/%.c | obj
	$(CC) $(CFLAGS) -Iinclude -MMD -MP -c $< -o $@
obj:
	mkdir -p obj
clean:
	rm -rf obj libthings.a
-include $(OBJS:.o=.d)
"#;

#[test]
fn launcher_plain_makefile_with_cc_set_to_strata_gcc() {
    require_tool("make", "apt-get install make");
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let a = ctx.path("a/proj");
    write_file(&a.join("Makefile"), MAKEFILE);
    write_file(&a.join("include/things.h"), "#define BASE 7\n");
    for (i, n) in ["one", "two", "three"].iter().enumerate() {
        write_file(
            &a.join(format!("src/{n}.c")),
            format!("#include \"things.h\"\nint {n}(void) {{ return BASE + {i}; }}\n"),
        );
    }
    let l = Launcher::new(&ctx.cache);
    let make = |dir: &Path, cc: &str| {
        let before = l.counters();
        tool(&l, dir, "make", &["-j4".into(), format!("CC={cc}"), "CFLAGS=-O2".into()]);
        delta(&before, &l.counters())
    };
    let via = format!("{} gcc", strata_exe());
    assert_eq!(make(&a, "gcc"), counts(&[]));
    let want = objects(&a);
    assert_eq!(want.len(), 3);
    tool(&l, &a, "make", &["clean".into()]);
    assert_eq!(make(&a, &via), counts(&[("miss", 3)]));
    assert_eq!(objects(&a), want);
    assert_eq!(make(&a, &via), counts(&[]), "up to date: make compiles nothing");
    tool(&l, &a, "make", &["clean".into()]);
    assert_eq!(make(&a, &via), counts(&[("hit", 3)]));
    assert_eq!(objects(&a), want);
    // The dependency files the hits wrote make make track the header.
    write_file(&a.join("include/things.h"), "#define BASE 8\n");
    assert_eq!(make(&a, &via), counts(&[("miss", 3)]));
    // A copy elsewhere (relative paths: no base dirs needed) hits.
    let b = ctx.path("b/deeper/proj");
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    copy_tree(&a, &b);
    tool(&l, &b, "make", &["clean".into()]);
    assert_eq!(make(&b, &via), counts(&[("hit", 3)]));
}

/// A multi-directory project laid out like zstd's CMake build: `build/cmake/CMakeLists.txt`
/// names sources outside its own directory, so CMake names each object after the source's
/// absolute path (`CMakeFiles/core.dir/<checkout>/lib/core/b.c.o`, in `-o`, `-MT`, `-MF`).
const MULTI_CMAKELISTS: &str = r#"cmake_minimum_required(VERSION 3.16)
project(multi C)
get_filename_component(ROOT "${CMAKE_CURRENT_SOURCE_DIR}/../.." ABSOLUTE)
add_library(common STATIC ${ROOT}/lib/common/a.c ${ROOT}/lib/common/a2.c)
target_include_directories(common PUBLIC ${ROOT}/lib/common)
add_library(core STATIC ${ROOT}/lib/core/b.c ${ROOT}/lib/core/b2.c)
target_include_directories(core PUBLIC ${ROOT}/lib/core)
target_link_libraries(core common)
add_executable(app ${ROOT}/app/main.c)
target_link_libraries(app core)
add_executable(tool ${ROOT}/tools/t.c)
"#;

fn multi_project(root: &Path) {
    write_file(&root.join("build/cmake/CMakeLists.txt"), MULTI_CMAKELISTS);
    write_file(&root.join("lib/common/common.h"), "#define COMMON 1\n");
    write_file(
        &root.join("lib/common/a.c"),
        "#include \"common.h\"\nint a(void) { return COMMON; }\n",
    );
    write_file(&root.join("lib/common/a2.c"), "int a2(void) { return 2; }\n");
    write_file(&root.join("lib/core/core.h"), "#include \"common.h\"\nint b(void);\n");
    write_file(
        &root.join("lib/core/b.c"),
        "#include \"core.h\"\nint b(void) { return COMMON + 1; }\n",
    );
    write_file(
        &root.join("lib/core/b2.c"),
        "#include <string.h>\nint b2(void) { return (int)strlen(\"x\"); }\n",
    );
    write_file(
        &root.join("app/main.c"),
        "#include <stdio.h>\n#include \"core.h\"\nint main(void) { printf(\"%d\\n\", b() + COMMON); return 0; }\n",
    );
    write_file(&root.join("tools/t.h"), "#define T 3\n");
    write_file(&root.join("tools/t.c"), "#include \"t.h\"\nint main(void) { return T - 3; }\n");
}

/// The object files `ninja -n` would build in `out` (paths with `checkout` replaced by
/// `<checkout>`).
fn would_build(l: &Launcher, out: &Path, checkout: &Path) -> Vec<String> {
    let r = tool(l, out, "ninja", &["-n".into()]);
    let mut objs: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|line| line.split_once("Building C object ").map(|(_, o)| o.trim().to_owned()))
        .map(|o| o.replace(&s(checkout), "<checkout>"))
        .collect();
    objs.sort();
    objs
}

/// Objects of a build tree with the checkout's path in their names replaced.
fn objects_named(dir: &Path, checkout: &Path) -> BTreeMap<String, Vec<u8>> {
    objects(dir).into_iter().map(|(k, v)| (k.replace(&s(checkout), "<checkout>"), v)).collect()
}

/// Issue 24's real-project check: a second checkout filled from the first's entries (the
/// base directory is the checkouts' shared parent, as ccache users set `base_dir`), then a
/// header edited: ninja re-runs exactly the compiles a plain build re-runs, every object
/// equals the plain build's, and the reverted header is all HITs.
#[test]
fn launcher_cmake_second_checkout_rebuilds_exactly_what_a_plain_build_rebuilds() {
    require_tool("cmake", "apt-get install cmake");
    require_tool("ninja", "apt-get install ninja-build");
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let w = ctx.path("w");
    let (a, b, c) = (w.join("a/proj"), w.join("b/proj"), w.join("c/proj"));
    for p in [&a, &b, &c] {
        multi_project(p);
    }
    let l = Launcher::new(&ctx.cache).base_dirs(&[&w]);
    let out = |p: &Path| p.join("build/cmake/out");
    for (p, launcher) in [(&a, true), (&b, true), (&c, false)] {
        configure(&l, &p.join("build/cmake"), &out(p), "Ninja", launcher);
    }
    const ALL: u64 = 6;
    assert_eq!(build(&l, &out(&a)), counts(&[("miss", ALL)]), "the first checkout: cold");
    assert_eq!(build(&l, &out(&b)), counts(&[("hit", ALL)]), "the second: every TU hits");
    assert_eq!(build(&l, &out(&c)), counts(&[]), "the plain reference");
    assert_eq!(objects_named(&out(&b), &b), objects_named(&out(&c), &c));
    // The depfiles the HITs wrote name the second checkout's headers: the same edit
    // makes ninja re-run the same compiles in both.
    for p in [&b, &c] {
        write_file(&p.join("lib/common/common.h"), "#define COMMON 2\n");
    }
    let want = would_build(&l, &out(&c), &c);
    assert_eq!(want.len(), 3, "a.c, b.c and main.c include common.h: {want:?}");
    assert_eq!(would_build(&l, &out(&b), &b), want);
    assert_eq!(build(&l, &out(&b)), counts(&[("miss", 3)]));
    assert_eq!(build(&l, &out(&c)), counts(&[]));
    assert_eq!(objects_named(&out(&b), &b), objects_named(&out(&c), &c));
    // Reverted: the earlier results come back.
    for p in [&b, &c] {
        write_file(&p.join("lib/common/common.h"), "#define COMMON 1\n");
    }
    assert_eq!(would_build(&l, &out(&b), &b), want);
    assert_eq!(build(&l, &out(&b)), counts(&[("hit", 3)]));
    assert_eq!(build(&l, &out(&c)), counts(&[]));
    assert_eq!(objects_named(&out(&b), &b), objects_named(&out(&c), &c));
    // A header only one TU reads.
    for p in [&b, &c] {
        write_file(&p.join("tools/t.h"), "#define T 4\n");
    }
    assert_eq!(would_build(&l, &out(&b), &b), would_build(&l, &out(&c), &c));
    assert_eq!(would_build(&l, &out(&b), &b).len(), 1);
}

/// A project whose objects embed paths: a `__FILE__` macro in a header, `__FILE__` in
/// sources, a source generated into the build directory, and debug information
/// (RelWithDebInfo). `USE_STRATA` turns the launcher on through the module; without it the
/// build gets the same `-ffile-prefix-map` options from `strata_prefix_map_options()` and
/// no launcher (the plain reference with the same effective flags). `NO_MAP` calls
/// `strata_enable_launcher(NO_PREFIX_MAP)`.
const RELOCATABLE_CMAKELISTS: &str = r#"cmake_minimum_required(VERSION 3.16)
project(relocatable C CXX)
include(@MODULE@)
if(USE_STRATA AND NO_MAP)
  strata_enable_launcher(NO_PREFIX_MAP)
elseif(USE_STRATA)
  strata_enable_launcher()
else()
  strata_prefix_map_options(maps)
  add_compile_options(${maps})
endif()
file(WRITE ${CMAKE_BINARY_DIR}/gen/generated.c
     "const char *generated_file(void) { return __FILE__; }\n")
add_library(util STATIC lib/where.c lib/u1.c ${CMAKE_BINARY_DIR}/gen/generated.c)
target_include_directories(util PUBLIC include)
add_executable(app app/main.cpp)
target_link_libraries(app util)
"#;

/// The compilations of [`relocatable_project`].
const RELOCATABLE_TUS: u64 = 4;

fn relocatable_project(src: &Path) {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("cmake/strata.cmake");
    write_file(
        &src.join("CMakeLists.txt"),
        RELOCATABLE_CMAKELISTS.replace("@MODULE@", &s(&module)),
    );
    write_file(
        &src.join("include/check.h"),
        "#ifdef __cplusplus\nextern \"C\" {\n#endif\nint check_failed(const char *file, int line);\n\
         const char *where_file(void);\nconst char *generated_file(void);\nint u1(int);\n\
         #ifdef __cplusplus\n}\n#endif\n\
         #define CHECK(x) ((x) ? 0 : check_failed(__FILE__, __LINE__))\n",
    );
    write_file(
        &src.join("lib/where.c"),
        "#include <stdio.h>\n#include \"check.h\"\n\
         int check_failed(const char *file, int line) { fprintf(stderr, \"%s:%d\\n\", file, line); return 1; }\n\
         const char *where_file(void) { return __FILE__; }\n",
    );
    write_file(
        &src.join("lib/u1.c"),
        "#include \"check.h\"\nint u1(int n) { return CHECK(n > 0) + n; }\n",
    );
    write_file(
        &src.join("app/main.cpp"),
        "#include <iostream>\n#include \"check.h\"\n\
         int main() { std::cout << where_file() << ' ' << generated_file() << ' ' << u1(41) + CHECK(true) << std::endl; }\n",
    );
}

/// The compile commands of a Ninja build directory (`ninja -t commands`), each with the
/// launcher's part (`… compile … --`) removed, sorted.
fn compile_commands_without_launcher(l: &Launcher, build: &Path) -> Vec<String> {
    let r = tool(l, build, "ninja", &["-t".into(), "commands".into()]);
    let mut out: Vec<String> = r
        .stdout
        .lines()
        .filter(|line| line.contains(" -c "))
        .map(|line| match line.find(" -- ") {
            Some(at) if line.starts_with(strata_exe()) => line[at + 4..].to_owned(),
            _ => line.to_owned(),
        })
        .collect();
    out.sort();
    out
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// `strata_enable_launcher()`'s default set-up makes objects that embed paths relocatable:
/// a fresh checkout at another path (deeper, other parent names), with the first
/// checkout's cache, hits every compile, and every object is byte-identical to a plain
/// build with the same effective flags there, which is itself identical to the plain build
/// of the first checkout. The opt-outs (`-DSTRATA_PREFIX_MAP=OFF`, `NO_PREFIX_MAP`) add no
/// map, and the objects then name the checkout's absolute path.
#[test]
fn launcher_cmake_prefix_map_fresh_checkout_at_another_path_hits_all_equal_to_plain() {
    require_tool("cmake", "apt-get install cmake");
    require_tool("ninja", "apt-get install ninja-build");
    require_tool("g++", "apt-get install g++");
    let ctx = TestContext::new();
    let a = ctx.path("runner-1/proj");
    let b = ctx.path("runner-2/work/deeper/proj");
    relocatable_project(&a);
    relocatable_project(&b);
    let l = Launcher::new(&ctx.cache);
    let configure = |checkout: &Path, build: &str, extra: &[&str]| {
        let mut args = vec![
            "-S".to_owned(),
            s(checkout),
            "-B".into(),
            s(&checkout.join(build)),
            "-G".into(),
            "Ninja".into(),
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo".into(),
            format!("-DSTRATA_EXECUTABLE={}", strata_exe()),
            format!("-DSTRATA_CACHE_DIR={}", s(&ctx.cache)),
        ];
        args.extend(extra.iter().map(|e| (*e).to_owned()));
        tool(&l, checkout, "cmake", &args)
    };
    let app_output = |build: &Path| {
        let run = run_bounded(Command::new(build.join("app")), Duration::from_secs(10));
        (run.code, run.stdout)
    };
    let want_output = (0, "./lib/where.c ./gen/generated.c 41\n".to_owned());

    // Checkout a: the plain reference, then (same build directory, made anew) strata cold.
    configure(&a, "build", &["-DUSE_STRATA=OFF"]);
    assert_eq!(build(&l, &a.join("build")), counts(&[]));
    let plain_a = objects(&a.join("build"));
    assert_eq!(plain_a.len() as u64, RELOCATABLE_TUS, "{:?}", plain_a.keys().collect::<Vec<_>>());
    assert_eq!(app_output(&a.join("build")), want_output, "paths in the plain build");
    let plain_a_commands = compile_commands_without_launcher(&l, &a.join("build"));
    assert!(plain_a_commands.iter().all(|c| c.contains(&format!("-ffile-prefix-map={}=.", s(&a)))));
    std::fs::remove_dir_all(a.join("build")).unwrap();
    let configured = configure(&a, "build", &["-DUSE_STRATA=ON"]);
    assert!(
        configured.stdout.contains("are mapped to relative paths in objects (-ffile-prefix-map"),
        "{}",
        configured.stdout
    );
    assert_eq!(build(&l, &a.join("build")), counts(&[("miss", RELOCATABLE_TUS)]), "cold");
    assert_eq!(objects(&a.join("build")), plain_a, "objects of the cold build at a");
    assert_eq!(compile_commands_without_launcher(&l, &a.join("build")), plain_a_commands);

    // Checkout b: plain there gives the same objects as at a (nothing names a checkout).
    configure(&b, "build", &["-DUSE_STRATA=OFF"]);
    assert_eq!(build(&l, &b.join("build")), counts(&[]));
    let plain_b = objects(&b.join("build"));
    assert_eq!(plain_b, plain_a, "plain objects with the maps do not depend on the checkout");
    let plain_b_commands = compile_commands_without_launcher(&l, &b.join("build"));
    std::fs::remove_dir_all(b.join("build")).unwrap();
    // strata at b, with a's cache: every compile hits, every object equals plain's.
    configure(&b, "build", &["-DUSE_STRATA=ON"]);
    assert_eq!(
        build(&l, &b.join("build")),
        counts(&[("hit", RELOCATABLE_TUS)]),
        "a fresh checkout at another path"
    );
    assert_eq!(objects(&b.join("build")), plain_b, "objects of the relocated HITs");
    assert_eq!(compile_commands_without_launcher(&l, &b.join("build")), plain_b_commands);
    assert_eq!(app_output(&b.join("build")), want_output);
    for (name, bytes) in &plain_b {
        for root in [&a, &b, &ctx.root] {
            assert!(!contains(bytes, &s(root)), "{name} names {}", root.display());
        }
    }
    // Another build directory of that checkout, by another name (the same depth: keys hold
    // paths relative to the build directory): its name is in neither the objects nor the keys.
    configure(&b, "out", &["-DUSE_STRATA=ON"]);
    let elsewhere = b.join("out");
    assert_eq!(
        build(&l, &elsewhere),
        counts(&[("hit", RELOCATABLE_TUS)]),
        "another build directory"
    );
    assert_eq!(objects(&elsewhere), plain_b, "objects in another build directory");

    // Opting out: no map, and the objects name the checkout (here with debug information,
    // so every one of them).
    for (build_dir, extra) in
        [("build-off", "-DSTRATA_PREFIX_MAP=OFF"), ("build-no-map", "-DNO_MAP=ON")]
    {
        let configured = configure(&b, build_dir, &["-DUSE_STRATA=ON", extra]);
        assert!(!configured.stdout.contains("-ffile-prefix-map"), "{}", configured.stdout);
        let dir = b.join(build_dir);
        // Not `build`: objects that name their directory make the launcher warn.
        tool(&l, &dir, "cmake", &["--build".into(), ".".into(), "-j".into(), "4".into()]);
        let commands = compile_commands_without_launcher(&l, &dir);
        assert_eq!(commands.len() as u64, RELOCATABLE_TUS);
        assert!(commands.iter().all(|c| !c.contains("-ffile-prefix-map")), "{commands:?}");
        let got = objects(&dir);
        assert_eq!(got.len() as u64, RELOCATABLE_TUS);
        assert!(got.values().all(|o| contains(o, &s(&b))), "{extra}: objects name {}", b.display());
        let run = app_output(&dir);
        assert_eq!(run.0, 0);
        let want = format!("{}/lib/where.c {}/gen/generated.c 41\n", s(&b), s(&dir));
        assert_eq!(run.1, want, "{extra}");
    }
}
