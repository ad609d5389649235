//! The CMake module (`cmake/strata.cmake`): a real configure and build of a small C project
//! whose objects come from `strata_cache_command` (a third_party and a custom_operator
//! action); a copy of the sources at another path HITs in a fresh build directory; the
//! program links and runs. Missing required keywords fail the configure step.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{RunResult, TestContext, require_tool, run_bounded, strata_exe, write_file};

const CMAKE_TIMEOUT: Duration = Duration::from_secs(120);

const PROJECT: &str = r#"cmake_minimum_required(VERSION 3.16)
project(strata_hello C)
include(strata)

# A third_party action: one object compiled from lib/.
set(GEN "${CMAKE_BINARY_DIR}/gen")
strata_cache_command(GREET_CMD
  DOMAIN third_party
  UNIT greet
  OUTPUT_DIR "${GEN}"
  PREPARED_INPUT "${CMAKE_SOURCE_DIR}/lib"
  RECIPE_VALUE "greeting with spaces"
  ENVIRONMENT_PROFILE bare
  ENVIRONMENT_TOOL "${CMAKE_C_COMPILER}"
  ARTIFACT_INCLUDE "*.o"
  COMMAND "${CMAKE_C_COMPILER}" -O1 -c "${CMAKE_SOURCE_DIR}/lib/greet.c"
          "-I${CMAKE_SOURCE_DIR}/lib" -o "${GEN}/greet.o")
add_custom_command(OUTPUT "${GEN}/greet.o"
  COMMAND ${GREET_CMD}
  DEPENDS "${CMAKE_SOURCE_DIR}/lib/greet.c" "${CMAKE_SOURCE_DIR}/lib/greet.h"
  VERBATIM)

# A custom_operator action published into obj/.
set(OBJ "${CMAKE_BINARY_DIR}/obj")
set(STAGE "${CMAKE_BINARY_DIR}/stage/answer")
strata_cache_command(ANSWER_CMD
  DOMAIN custom_operator
  UNIT kernels
  SOC host
  OPERATOR answer
  ACTION compile
  OPERATOR_SOURCE "${CMAKE_SOURCE_DIR}/ops/answer"
  OUTPUT_DIR "${STAGE}"
  PUBLISH_DIR "${OBJ}"
  PUBLISH_STATE_DIR "${CMAKE_BINARY_DIR}/publish_state"
  # Relative: the module makes it absolute against CMAKE_CURRENT_SOURCE_DIR.
  PREPARED_INPUT "ops/answer/answer.c"
  ENVIRONMENT_PROFILE bare
  ENVIRONMENT_TOOL "${CMAKE_C_COMPILER}"
  COMMAND "${CMAKE_C_COMPILER}" -O1 -c "${CMAKE_SOURCE_DIR}/ops/answer/answer.c" -o "${STAGE}/answer.o")
add_custom_command(OUTPUT "${OBJ}/answer.o"
  COMMAND ${ANSWER_CMD}
  DEPENDS "${CMAKE_SOURCE_DIR}/ops/answer/answer.c"
  VERBATIM)

add_executable(hello main.c "${GEN}/greet.o" "${OBJ}/answer.o")
target_include_directories(hello PRIVATE lib)
"#;

fn make_project(src: &Path) {
    write_file(&src.join("CMakeLists.txt"), PROJECT);
    write_file(&src.join("lib/greet.h"), "const char *greeting(void);\n");
    write_file(
        &src.join("lib/greet.c"),
        "#include \"greet.h\"\nconst char *greeting(void) { return \"hello from strata\"; }\n",
    );
    write_file(&src.join("ops/answer/answer.c"), "int answer(void) { return 42; }\n");
    write_file(
        &src.join("main.c"),
        "#include <stdio.h>\n#include \"greet.h\"\nint answer(void);\nint main(void) { printf(\"%s %d\\n\", greeting(), answer()); return 0; }\n",
    );
    // A real repository: the operator text is what git tracks under ops/answer.
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"],
    ] {
        let st = Command::new("git").args(args).current_dir(src).status().unwrap();
        assert!(st.success(), "git {args:?}");
    }
}

pub(super) fn cmake(ctx: &TestContext, args: &[&std::ffi::OsStr]) -> RunResult {
    let mut cmd = Command::new("cmake");
    cmd.args(args).env("STRATA_EVENT_LOG", &ctx.events).env_remove("STRATA_CACHE_ROOT");
    run_bounded(cmd, CMAKE_TIMEOUT)
}

fn configure(ctx: &TestContext, src: &Path, build: &Path) -> RunResult {
    configure_with(ctx, src, build, None, Path::new(strata_exe()))
}

/// Configures `src` into `build` with the strata module, `generator` (`-G`, default: CMake's)
/// and `strata` as `STRATA_EXECUTABLE`.
pub(super) fn configure_with(
    ctx: &TestContext,
    src: &Path,
    build: &Path,
    generator: Option<&str>,
    strata: &Path,
) -> RunResult {
    let module = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cmake");
    let mut args: Vec<std::ffi::OsString> = vec![
        "-S".into(),
        src.into(),
        "-B".into(),
        build.into(),
        format!("-DCMAKE_MODULE_PATH={}", module.display()).into(),
        format!("-DSTRATA_EXECUTABLE={}", strata.display()).into(),
        format!("-DSTRATA_CACHE_DIR={}", ctx.cache.display()).into(),
    ];
    if let Some(g) = generator {
        args.extend(["-G".into(), g.into()]);
    }
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    cmake(ctx, &args)
}

fn build_and_count(ctx: &TestContext, src: &Path, build: &Path) -> Vec<String> {
    configure(ctx, src, build).expect_code(0);
    let seen = ctx.event_statuses().len();
    cmake(ctx, &["--build".as_ref(), build.as_os_str()]).expect_code(0);
    let mut statuses = ctx.event_statuses().split_off(seen);
    statuses.sort();
    statuses
}

fn run_program(build: &Path) -> String {
    let r = run_bounded(Command::new(build.join("hello")), Duration::from_secs(10));
    r.expect_code(0);
    r.stdout
}

#[test]
fn engine_cmake_module_cold_build_misses_and_a_relocated_copy_hits() {
    require_tool("cmake", "apt-get install cmake");
    require_tool("cc", "apt-get install gcc");
    require_tool("make", "apt-get install make");
    require_tool("git", "apt-get install git");
    let ctx = TestContext::new();
    let a = ctx.path("a/src");
    make_project(&a);
    let cold = build_and_count(&ctx, &a, &ctx.path("a/build"));
    assert_eq!(cold, ["MISS", "MISS", "SAVED", "SAVED"]);
    assert_eq!(run_program(&ctx.path("a/build")), "hello from strata 42\n");

    // The same sources (and repository) at another absolute path, a fresh build directory.
    let b = ctx.path("elsewhere/b/src");
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    super::copy_tree(&a, &b);
    let warm = build_and_count(&ctx, &b, &ctx.path("elsewhere/b/build"));
    assert_eq!(warm, ["HIT", "HIT"]);
    assert_eq!(run_program(&ctx.path("elsewhere/b/build")), "hello from strata 42\n");
    for obj in ["gen/greet.o", "obj/answer.o"] {
        assert_eq!(
            std::fs::read(ctx.path("a/build").join(obj)).unwrap(),
            std::fs::read(ctx.path("elsewhere/b/build").join(obj)).unwrap(),
            "{obj} restored byte for byte"
        );
    }

    // A changed source in the copy: only its action misses.
    write_file(&b.join("ops/answer/answer.c"), "int answer(void) { return 43; }\n");
    let changed = build_and_count(&ctx, &b, &ctx.path("elsewhere/b/build2"));
    assert_eq!(changed, ["HIT", "MISS", "SAVED"]);
    assert_eq!(run_program(&ctx.path("elsewhere/b/build2")), "hello from strata 43\n");
}

#[test]
fn engine_cmake_module_missing_required_keywords_fail_the_configure() {
    require_tool("cmake", "apt-get install cmake");
    let ctx = TestContext::new();
    let cases: &[(&str, &str)] = &[
        (
            "DOMAIN third_party UNIT u ENVIRONMENT_PROFILE bare COMMAND true",
            "OUTPUT_DIR is required",
        ),
        ("DOMAIN third_party UNIT u OUTPUT_DIR o COMMAND true", "ENVIRONMENT_PROFILE is required"),
        ("DOMAIN third_party UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare", "COMMAND is required"),
        ("UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare COMMAND true", "DOMAIN is required"),
        (
            "DOMAIN third_party OUTPUT_DIR o ENVIRONMENT_PROFILE bare COMMAND true",
            "UNIT is required",
        ),
        (
            "DOMAIN other UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare COMMAND true",
            "DOMAIN must be",
        ),
        (
            "DOMAIN custom_operator UNIT u SOC s OPERATOR o ACTION a OPERATOR_SOURCE s \
             PUBLISH_STATE_DIR p OUTPUT_DIR o ENVIRONMENT_PROFILE bare COMMAND true",
            "DOMAIN custom_operator requires PUBLISH_DIR",
        ),
        (
            "DOMAIN custom_operator UNIT u SOC s ACTION a OPERATOR_SOURCE s PUBLISH_DIR p \
             PUBLISH_STATE_DIR p OUTPUT_DIR o ENVIRONMENT_PROFILE bare COMMAND true",
            "DOMAIN custom_operator requires OPERATOR",
        ),
        (
            "DOMAIN third_party UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare BOGUS x COMMAND true",
            "unknown arguments: 'BOGUS' 'x'",
        ),
        // What no generator can carry, or strata would refuse, stops the configure step.
        (
            "DOMAIN third_party UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare COMMAND echo \"a\nb\"",
            "COMMAND argument 1 contains a line break",
        ),
        (
            "DOMAIN third_party UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare \
             RECIPE_VALUE x \"a\rb\" COMMAND true",
            "RECIPE_VALUE argument 1 contains a line break",
        ),
        (
            "DOMAIN third_party UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare SET_ENV \"A=1\" \
             \"NOVALUE\" COMMAND true",
            "SET_ENV 'NOVALUE' is not NAME=VALUE",
        ),
        (
            "DOMAIN third_party UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare SET_ENV \"=1\" \
             COMMAND true",
            "SET_ENV '=1' is not NAME=VALUE",
        ),
        (
            "DOMAIN third_party UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare PREPARED_INPUT \"\" \
             COMMAND true",
            "PREPARED_INPUT argument 0 is empty",
        ),
    ];
    std::thread::scope(|s| {
        for (i, (args, needle)) in cases.iter().enumerate() {
            let ctx = &ctx;
            s.spawn(move || {
                let src = ctx.path(&format!("p{i}"));
                write_file(
                    &src.join("CMakeLists.txt"),
                    format!(
                        "cmake_minimum_required(VERSION 3.16)\nproject(p NONE)\ninclude(strata)\nstrata_cache_command(CMD {args})\n"
                    ),
                );
                let r = configure(ctx, &src, &ctx.path(&format!("p{i}/build")));
                assert_ne!(r.code, 0, "{args}: configure must fail:\n{}", r.stdout);
                assert!(
                    r.stderr.contains(&format!("strata_cache_command: {needle}")),
                    "{args}: {needle:?} not in:\n{}",
                    r.stderr
                );
            });
        }
    });
    // A STRATA_EXECUTABLE that does not exist is a configure error too.
    let src = ctx.path("noexe");
    write_file(
        &src.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(p NONE)\ninclude(strata)\nstrata_cache_command(CMD DOMAIN third_party UNIT u OUTPUT_DIR o ENVIRONMENT_PROFILE bare COMMAND true)\n",
    );
    let module = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cmake");
    let r = cmake(
        &ctx,
        &[
            "-S".as_ref(),
            src.as_os_str(),
            "-B".as_ref(),
            ctx.path("noexe/build").as_os_str(),
            format!("-DCMAKE_MODULE_PATH={}", module.display()).as_ref(),
            "-DSTRATA_EXECUTABLE=/nonexistent/strata".as_ref(),
        ],
    );
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("STRATA_EXECUTABLE ('/nonexistent/strata') does not"),
        "{}",
        r.stderr
    );
}

/// `actions/key` exports the tools its snapshot key was computed from as
/// STRATA_TOOLCHAIN_TOOLS. A project that compiles with another compiler (a wrapper script
/// standing in for `g++-13` or clang) while the key names `cc c++` gets a configure warning
/// that names the compiler to add; a compiler named in the list (by path, or by name on
/// PATH through its symlinks) and a build without the variable get none. The warning never
/// fails the configure step.
#[test]
fn engine_cmake_module_warns_when_the_snapshot_key_names_other_compilers() {
    use std::os::unix::fs::PermissionsExt;
    require_tool("cmake", "apt-get install cmake");
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let wrapper = ctx.write("bin/gcc-13", "#!/bin/sh\nexec gcc \"$@\"\n");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let src = ctx.path("p");
    write_file(
        &src.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(p C)\ninclude(strata)\n",
    );
    let module = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cmake");
    let configure = |build: &str, tools: Option<&str>, compiler: &str| {
        let mut cmd = Command::new("cmake");
        cmd.arg("-S")
            .arg(&src)
            .arg("-B")
            .arg(ctx.path(build))
            .arg(format!("-DCMAKE_MODULE_PATH={}", module.display()))
            .arg(format!("-DSTRATA_EXECUTABLE={}", strata_exe()))
            .arg(format!("-DCMAKE_C_COMPILER={compiler}"))
            .env("GITHUB_ACTIONS", "true")
            .env_remove("STRATA_CACHE_ROOT")
            .env_remove("STRATA_TOOLCHAIN_TOOLS");
        if let Some(tools) = tools {
            cmd.env("STRATA_TOOLCHAIN_TOOLS", tools);
        }
        let r = run_bounded(cmd, CMAKE_TIMEOUT);
        r.expect_code(0);
        r.stderr
            .lines()
            .filter(|l| l.starts_with("::warning title=strata toolchain-tools::"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let gcc13 = wrapper.display().to_string();

    let warned = configure("b1", Some("cc c++"), &gcc13);
    assert_eq!(warned.len(), 1, "{warned:?}");
    let line = &warned[0];
    assert!(line.contains(&format!("compiles C with {gcc13} ({gcc13})")), "{line}");
    assert!(line.contains("STRATA_TOOLCHAIN_TOOLS: 'cc c++'"), "{line}");
    assert!(line.ends_with(&format!("add {gcc13} to toolchain-tools")), "{line}");

    assert_eq!(configure("b2", Some(&format!("{gcc13}\ncmake")), &gcc13), Vec::<String>::new());
    assert_eq!(configure("b3", Some("gcc"), "gcc"), Vec::<String>::new());
    assert_eq!(configure("b4", None, &gcc13), Vec::<String>::new());
}
