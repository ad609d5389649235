//! Argument fidelity through the CMake module (issue 7, item 4): every argument of
//! `strata_cache_command` reaches strata and the wrapped command exactly as a plain
//! `add_custom_command(... VERBATIM)` passes it — `;`, empty arguments, spaces, quotes,
//! backslashes, `$`, `#`, unbalanced brackets and generator expressions — through
//! `add_custom_command(COMMAND ${CMD})` and ExternalProject's `BUILD_COMMAND ${CMD}`, with the
//! Ninja and Unix Makefiles generators. The comparison is against the same command run by a
//! plain custom command in the same project, never against a hand-written expectation.

use std::path::{Path, PathBuf};

use super::cmake::{cmake, configure_with};
use super::{TestContext, require_tool, strata_exe, write_file, write_script};

/// Arguments that a plain `add_custom_command(... VERBATIM)` passes to a command with both
/// generators. (`|`, `<`, `>`, `$<ANGLE-R>` are shell operators there, `$(X)` and line
/// breaks break Ninja's or Make's files: those are not arguments plain CMake can pass.)
const TRICKY: &[&str] = &[
    "a;b",
    "",
    "a b",
    "\"q\"",
    "'s'",
    r"back\slash",
    "$HOME",
    "$$",
    "#hash",
    "$<CONFIG>",
    "$<SEMICOLON>",
    r"trail\",
    "ü€ 中",
    "x[y",
    "]z",
    r"a\;b",
    "$<1:x;y>",
    "$<JOIN:a;b,+>",
    "$<IF:1,a;b,c>",
    "$<$<CONFIG:Debug>:-g;-O0>",
    "%",
    "%%",
    "`id`",
    "&",
    "*",
    "~",
    "!",
    "(",
    r"\",
    r"\\",
    "'",
    "\"",
    "--",
    "-",
    "${",
    "$<",
    "$<0:a",
    r"$<x\",
    "$<x[",
    "$<a;b",
    "\t",
    " ",
    ";",
    ";;",
    "x]==]y",
    "[[a]]",
    "[==[",
    "$ENV{HOME}",
    "@HOME@",
    r"\;",
    r"\$<SEMICOLON>",
    "{}",
];

/// A path component that needs every kind of care (`;`, brackets, space, `#`, `$`).
const ODD_NAME: &str = "odd;name [x] #$";

/// `value` as a CMake bracket argument.
fn bracket(value: &str) -> String {
    assert!(!value.contains("]=====]"));
    format!("[=====[{value}]=====]")
}

/// Writes `argv <dir>` : the arguments after the first, NUL-terminated, to `<dir>/args.bin`,
/// and the values of `L0`, `L1`, … (as long as they are set) to `<dir>/env.bin`.
const ARGV_SCRIPT: &str = r#"dir=$1; shift
mkdir -p "$dir"
: > "$dir/args.bin"
for a in "$@"; do printf '%s\0' "$a" >> "$dir/args.bin"; done
: > "$dir/env.bin"
i=0
while eval "[ -n \"\${L$i+set}\" ]"; do eval "printf '%s\0' \"\$L$i\"" >> "$dir/env.bin"; i=$((i+1)); done"#;

fn fidelity_project(src: &Path) {
    write_script(&src.join("argv.sh"), ARGV_SCRIPT);
    write_file(&src.join(format!("{ODD_NAME}.txt")), "declared input\n");
    write_script(&src.join(format!("{ODD_NAME} tool")), "echo 'odd tool 1.0'");
    std::fs::create_dir_all(src.join(format!("{ODD_NAME} dir"))).unwrap();
    let args: String = TRICKY.iter().map(|a| format!(" {}", bracket(a))).collect();
    let set_env: String = TRICKY
        .iter()
        .enumerate()
        .map(|(i, a)| format!(" {}", bracket(&format!("L{i}={a}"))))
        .collect();
    let odd_file = bracket(&format!("{ODD_NAME}.txt"));
    let odd_dir = bracket(&format!("{ODD_NAME} dir"));
    let text = format!(
        r#"cmake_minimum_required(VERSION 3.16)
project(fidelity NONE)
include(strata)
include(ExternalProject)

set(PLAIN "${{CMAKE_BINARY_DIR}}/plain")
add_custom_command(OUTPUT "${{PLAIN}}/args.bin"
  COMMAND "${{CMAKE_SOURCE_DIR}}/argv.sh" "${{PLAIN}}"{args}
  VERBATIM)
add_custom_target(plain ALL DEPENDS "${{PLAIN}}/args.bin")

set(OUT "${{CMAKE_BINARY_DIR}}/out")
strata_cache_command(CMD DOMAIN third_party UNIT fidelity OUTPUT_DIR "${{OUT}}"
  ENVIRONMENT_PROFILE bare
  PREPARED_INPUT argv.sh {odd_file}
  RECIPE_FILE {odd_file}
  RECIPE_VALUE{args}
  ENVIRONMENT_FILE {odd_file}
  ENVIRONMENT_VALUE{args}
  ENVIRONMENT_TOOL "${{CMAKE_SOURCE_DIR}}/{ODD_NAME} tool"
  NORMALIZE_PATH {odd_dir}
  ARTIFACT_INCLUDE "*.bin" "a;b"
  EXCLUDE "x;y"
  SET_ENV{set_env}
  COMMAND "${{CMAKE_SOURCE_DIR}}/argv.sh" "${{OUT}}"{args})
add_custom_command(OUTPUT "${{OUT}}/args.bin" COMMAND ${{CMD}} VERBATIM)
add_custom_target(wrapped ALL DEPENDS "${{OUT}}/args.bin")

set(EP_OUT "${{CMAKE_BINARY_DIR}}/ep_out")
strata_cache_command(EP_CMD DOMAIN third_party UNIT fidelity_ep OUTPUT_DIR "${{EP_OUT}}"
  ENVIRONMENT_PROFILE bare PREPARED_INPUT argv.sh ARTIFACT_INCLUDE "*.bin"
  SET_ENV{set_env}
  COMMAND "${{CMAKE_SOURCE_DIR}}/argv.sh" "${{EP_OUT}}"{args})
ExternalProject_Add(ep SOURCE_DIR "${{CMAKE_SOURCE_DIR}}" DOWNLOAD_COMMAND "" CONFIGURE_COMMAND ""
  INSTALL_COMMAND "" BUILD_COMMAND ${{EP_CMD}})
"#
    );
    write_file(&src.join("CMakeLists.txt"), text);
}

/// NUL-terminated strings of `path`.
fn nul_strings(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(bytes.last(), Some(&0), "{} is not NUL-terminated", path.display());
    bytes[..bytes.len() - 1]
        .split(|b| *b == 0)
        .map(|s| String::from_utf8(s.to_vec()).unwrap())
        .collect()
}

/// A `STRATA_EXECUTABLE` that records its arguments in `<dir>/<unit>.argv` and runs strata.
fn recording_strata(ctx: &TestContext) -> (PathBuf, PathBuf) {
    let dir = ctx.path("argv");
    std::fs::create_dir_all(&dir).unwrap();
    let script = ctx.path("bin/strata-recording");
    write_script(
        &script,
        &format!(
            r#"unit=
for a in "$@"; do case $a in --unit=*) unit=${{a#--unit=}};; esac; done
: > '{dir}/'"$unit.argv"
for a in "$@"; do printf '%s\0' "$a" >> '{dir}/'"$unit.argv"; done
exec '{strata}' "$@""#,
            dir = dir.display(),
            strata = strata_exe()
        ),
    );
    (script, dir)
}

fn build(
    ctx: &TestContext,
    src: &Path,
    build: &Path,
    generator: &str,
    strata: &Path,
) -> Vec<String> {
    configure_with(ctx, src, build, Some(generator), strata).expect_code(0);
    let seen = ctx.event_statuses().len();
    cmake(ctx, &["--build".as_ref(), build.as_os_str()]).expect_code(0);
    let mut statuses = ctx.event_statuses().split_off(seen);
    statuses.sort();
    statuses
}

#[test]
fn engine_cmake_module_passes_every_argument_as_plain_add_custom_command_does() {
    require_tool("cmake", "apt-get install cmake");
    require_tool("make", "apt-get install make");
    require_tool("ninja", "apt-get install ninja-build");
    for generator in ["Ninja", "Unix Makefiles"] {
        let ctx = TestContext::new();
        let src = ctx.path("src");
        fidelity_project(&src);
        let (strata, argv_dir) = recording_strata(&ctx);
        let b1 = ctx.path("b1");
        let cold = build(&ctx, &src, &b1, generator, &strata);
        assert_eq!(cold, ["MISS", "MISS", "SAVED", "SAVED"], "{generator}");

        // What plain CMake passes: the table with its generator expressions evaluated.
        let plain = nul_strings(&b1.join("plain/args.bin"));
        assert_eq!(plain.len(), TRICKY.len(), "{generator}: {plain:?}");
        for (got, want) in plain.iter().zip(TRICKY) {
            if !want.contains("$<") {
                assert_eq!(got, want, "{generator}: plain add_custom_command");
            }
        }
        assert_eq!(plain[9], "", "$<CONFIG> of a single-config build without a build type");
        assert_eq!(plain[10], ";");
        assert_eq!(plain[17], "a+b");

        // The wrapped command receives the same arguments and environment values, through
        // add_custom_command and through ExternalProject.
        for out in ["out", "ep_out"] {
            assert_eq!(nul_strings(&b1.join(out).join("args.bin")), plain, "{generator} {out}");
            assert_eq!(nul_strings(&b1.join(out).join("env.bin")), plain, "{generator} {out} env");
        }

        // strata itself receives every flag value exactly.
        let mut want: Vec<String> = vec![
            "action".into(),
            "run".into(),
            format!("--cache-root={}", ctx.cache.display()),
            "--domain=third_party".into(),
            "--unit=fidelity".into(),
            format!("--output-dir={}", b1.join("out").display()),
            "--environment-profile=bare".into(),
            format!("--prepared-input={}", src.join("argv.sh").display()),
            format!("--prepared-input={}/{ODD_NAME}.txt", src.display()),
            format!("--recipe-file={}/{ODD_NAME}.txt", src.display()),
        ];
        want.extend(plain.iter().map(|v| format!("--recipe-value={v}")));
        want.push(format!("--environment-file={}/{ODD_NAME}.txt", src.display()));
        want.extend(plain.iter().map(|v| format!("--environment-value={v}")));
        want.push(format!("--environment-tool={}/{ODD_NAME} tool", src.display()));
        want.extend([
            format!("--normalize-path={}", src.display()),
            format!("--normalize-path={}", b1.display()),
            format!("--normalize-path={}/{ODD_NAME} dir", src.display()),
            "--artifact-include=*.bin".into(),
            "--artifact-include=a;b".into(),
            "--exclude=x;y".into(),
        ]);
        want.extend(plain.iter().enumerate().map(|(i, v)| format!("--set-env=L{i}={v}")));
        want.extend([
            "--".into(),
            src.join("argv.sh").display().to_string(),
            b1.join("out").display().to_string(),
        ]);
        want.extend(plain.iter().cloned());
        assert_eq!(nul_strings(&argv_dir.join("fidelity.argv")), want, "{generator}");

        // A second build tree HITs both actions and restores the same bytes.
        let b2 = ctx.path("b2");
        let warm = build(&ctx, &src, &b2, generator, &strata);
        assert_eq!(warm, ["HIT", "HIT"], "{generator}");
        for out in ["out", "ep_out"] {
            for file in ["args.bin", "env.bin"] {
                assert_eq!(
                    std::fs::read(b2.join(out).join(file)).unwrap(),
                    std::fs::read(b1.join("plain/args.bin")).unwrap(),
                    "{generator}: restored {out}/{file}"
                );
            }
        }
    }
}

/// The issue's example: a `;` inside `sh -c` and inside a `SET_ENV` value.
#[test]
fn engine_cmake_module_keeps_a_semicolon_inside_sh_c_and_set_env() {
    require_tool("cmake", "apt-get install cmake");
    require_tool("make", "apt-get install make");
    require_tool("ninja", "apt-get install ninja-build");
    for generator in ["Ninja", "Unix Makefiles"] {
        let ctx = TestContext::new();
        let src = ctx.path("src");
        write_file(&src.join("in.txt"), "first line\n");
        write_file(
            &src.join("CMakeLists.txt"),
            r#"cmake_minimum_required(VERSION 3.16)
project(semicolon NONE)
include(strata)
set(OUT "${CMAKE_BINARY_DIR}/gen")
configure_file(in.txt "${OUT}/in.txt" COPYONLY)
strata_cache_command(CMD DOMAIN third_party UNIT gen OUTPUT_DIR "${OUT}" PREPARED_INPUT in.txt
  ENVIRONMENT_PROFILE bare ARTIFACT_INCLUDE "first.txt" "second.txt" "l.txt" SET_ENV "L=a;b"
  COMMAND sh -c "cat in.txt > first.txt; printf 'second\\n' > second.txt; printf %s \"$L\" > l.txt")
add_custom_command(OUTPUT ${OUT}/first.txt ${OUT}/second.txt ${OUT}/l.txt COMMAND ${CMD}
  WORKING_DIRECTORY ${OUT} VERBATIM)
add_custom_target(gen ALL DEPENDS ${OUT}/first.txt ${OUT}/second.txt)
"#,
        );
        let strata = Path::new(strata_exe());
        for (build_dir, statuses) in [("b1", &["MISS", "SAVED"][..]), ("b2", &["HIT"])] {
            let b = ctx.path(build_dir);
            assert_eq!(
                build(&ctx, &src, &b, generator, strata),
                statuses,
                "{generator} {build_dir}"
            );
            let read = |f: &str| std::fs::read_to_string(b.join("gen").join(f)).unwrap();
            assert_eq!(read("first.txt"), "first line\n", "{generator} {build_dir}");
            assert_eq!(read("second.txt"), "second\n", "{generator} {build_dir}");
            assert_eq!(read("l.txt"), "a;b", "{generator} {build_dir}");
        }
    }
}

/// A path value that starts with a generator expression (`$<TARGET_FILE:gen>`, `$<1:...>`) is
/// known only when the build system is generated: the module passes it as written instead of
/// prefixing it with the source or binary directory (which made strata fail with "prepared
/// input does not exist: <src>/<src>/in.txt"), and the input it names is really identity.
#[test]
fn engine_cmake_module_passes_a_generator_expression_path_unchanged() {
    require_tool("cmake", "apt-get install cmake");
    require_tool("ninja", "apt-get install ninja-build");
    let ctx = TestContext::new();
    let src = ctx.path("src");
    write_file(&src.join("in.txt"), "first\n");
    write_file(&src.join("recipe.txt"), "recipe\n");
    write_file(
        &src.join("CMakeLists.txt"),
        r#"cmake_minimum_required(VERSION 3.16)
project(genex_paths NONE)
include(strata)
set(OUT "${CMAKE_BINARY_DIR}/gen")
file(MAKE_DIRECTORY "${OUT}")
strata_cache_command(CMD DOMAIN third_party UNIT gen OUTPUT_DIR "$<1:${OUT}>"
  PREPARED_INPUT "$<1:${CMAKE_CURRENT_SOURCE_DIR}/in.txt>"
  RECIPE_FILE "$<$<BOOL:1>:${CMAKE_SOURCE_DIR}/recipe.txt>"
  ENVIRONMENT_FILE "$<1:${CMAKE_SOURCE_DIR}/recipe.txt>"
  ENVIRONMENT_PROFILE bare ARTIFACT_INCLUDE "copy.txt"
  COMMAND cp "${CMAKE_SOURCE_DIR}/in.txt" copy.txt)
add_custom_command(OUTPUT ${OUT}/copy.txt COMMAND ${CMD} WORKING_DIRECTORY ${OUT} VERBATIM)
add_custom_target(gen ALL DEPENDS ${OUT}/copy.txt)
"#,
    );
    let strata = Path::new(strata_exe());
    let b1 = ctx.path("b1");
    assert_eq!(build(&ctx, &src, &b1, "Ninja", strata), ["MISS", "SAVED"]);
    assert_eq!(std::fs::read_to_string(b1.join("gen/copy.txt")).unwrap(), "first\n");
    let b2 = ctx.path("b2");
    assert_eq!(build(&ctx, &src, &b2, "Ninja", strata), ["HIT"]);
    assert_eq!(std::fs::read_to_string(b2.join("gen/copy.txt")).unwrap(), "first\n");
    // The declared input is identity: a change misses.
    write_file(&src.join("in.txt"), "second\n");
    let b3 = ctx.path("b3");
    assert_eq!(build(&ctx, &src, &b3, "Ninja", strata), ["MISS", "SAVED"]);
    assert_eq!(std::fs::read_to_string(b3.join("gen/copy.txt")).unwrap(), "second\n");
}

/// Issue 9 item 3 in the CMake module: `ENVIRONMENT_TOOL_CONTENT` passes
/// `--environment-tool-content`, and `STRATA_TOOL_CONTENT ON` adds the project's compilers
/// to it; the action still HITs from a second build tree.
#[test]
fn engine_cmake_module_passes_tool_content_identity() {
    require_tool("cmake", "apt-get install cmake");
    require_tool("ninja", "apt-get install ninja-build");
    require_tool("cc", "apt-get install gcc");
    let ctx = TestContext::new();
    let src = ctx.path("src");
    write_file(&src.join("in.txt"), "first\n");
    write_file(
        &src.join("CMakeLists.txt"),
        r#"cmake_minimum_required(VERSION 3.16)
project(tool_content C)
set(STRATA_TOOL_CONTENT ON)
include(strata)
set(OUT "${CMAKE_BINARY_DIR}/tc")
file(MAKE_DIRECTORY "${OUT}")
strata_cache_command(CMD DOMAIN third_party UNIT tc OUTPUT_DIR "${OUT}"
  PREPARED_INPUT in.txt ENVIRONMENT_PROFILE bare ENVIRONMENT_TOOL_CONTENT cat
  ARTIFACT_INCLUDE "copy.txt"
  COMMAND cp "${CMAKE_SOURCE_DIR}/in.txt" copy.txt)
add_custom_command(OUTPUT ${OUT}/copy.txt COMMAND ${CMD} WORKING_DIRECTORY ${OUT} VERBATIM)
add_custom_target(tc ALL DEPENDS ${OUT}/copy.txt)
"#,
    );
    let (strata, argv_dir) = recording_strata(&ctx);
    let b1 = ctx.path("b1");
    assert_eq!(build(&ctx, &src, &b1, "Ninja", &strata), ["MISS", "SAVED"]);
    let argv = nul_strings(&argv_dir.join("tc.argv"));
    let cache = std::fs::read_to_string(b1.join("CMakeCache.txt")).unwrap();
    let compiler = cache
        .lines()
        .find_map(|l| l.strip_prefix("CMAKE_C_COMPILER:").and_then(|l| l.split_once('=')))
        .map(|(_, v)| v.to_owned())
        .unwrap();
    let content: Vec<&String> =
        argv.iter().filter(|a| a.starts_with("--environment-tool-content=")).collect();
    assert_eq!(
        content,
        [
            &"--environment-tool-content=cat".to_owned(),
            &format!("--environment-tool-content={compiler}")
        ],
        "{argv:?}"
    );
    let b2 = ctx.path("b2");
    assert_eq!(build(&ctx, &src, &b2, "Ninja", &strata), ["HIT"]);
}
