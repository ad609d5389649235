//! `strata artifact scan-includes`: one case per directive kind, exit codes, packaging.

use std::path::Path;

use super::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn scan(dir: &Path, source: &str, include_dirs: &[&str]) -> (i32, serde_json::Value) {
    let mut cmd = strata();
    cmd.current_dir(dir).args(["artifact", "scan-includes", "--json", source]);
    for d in include_dirs {
        cmd.args(["-I", d]);
    }
    let out = cmd.output().unwrap();
    let code = out.status.code().unwrap();
    if out.stdout.is_empty() {
        return (
            code,
            serde_json::Value::String(String::from_utf8_lossy(&out.stderr).into_owned()),
        );
    }
    (code, json(&out.stdout))
}

fn relative_files(v: &serde_json::Value) -> Vec<String> {
    v["relative_files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_owned()).collect()
}

#[test]
fn scan_quoted_angle_and_system_includes_and_package() {
    let ws = Workspace::new();
    let d = ws.path();
    write(
        &d.join("src/k.cpp"),
        "#include \"local.h\"\n#include <lib/api.h>\n#include <vector>\nint main() {}\n",
    );
    write(&d.join("src/local.h"), "#pragma once\n#include \"../include/lib/api.h\"\n");
    write(&d.join("include/lib/api.h"), "#include \"detail.h\"\n");
    std::fs::write(d.join("include/lib/detail.h"), b"// leaf \xff bytes kept\n").unwrap();
    let (code, v) = scan(d, "src/k.cpp", &["include"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["verdict"], "complete");
    assert_eq!(
        relative_files(&v),
        ["src/k.cpp", "src/local.h", "include/lib/api.h", "include/lib/detail.h"]
    );
    assert_eq!(v["system_includes"][0]["name"], "vector");
    assert_eq!(v["include_dirs"][0], "include");
    let pkg = d.join("pkg");
    let out = strata()
        .current_dir(d)
        .args(["artifact", "scan-includes", "src/k.cpp", "-I", "include", "--package"])
        .arg(&pkg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        std::fs::read(pkg.join("include/lib/detail.h")).unwrap(),
        std::fs::read(d.join("include/lib/detail.h")).unwrap()
    );
    assert!(pkg.join("src/local.h").is_file());
}

#[test]
fn scan_follows_literal_conditions_and_scans_unknown_branches() {
    let ws = Workspace::new();
    let d = ws.path();
    write(
        &d.join("a.c"),
        "#if 0\n#include \"dead.h\"\n#include MACRO\n#elif ((1))\n#include \"live.h\"\n#else\n#include \"dead.h\"\n#endif\n\
         #ifdef FEATURE\n#include \"maybe1.h\"\n#else\n#include \"maybe2.h\"\n#endif\n\
         /* #include \"commented.h\" */\n// #include \"commented.h\"\n#inc\\\nlude \"joined.h\"\n\
         const char *s = \"#include \\\"in_string.h\\\"\";\n",
    );
    for h in ["live.h", "maybe1.h", "maybe2.h", "joined.h"] {
        write(&d.join(h), "\n");
    }
    let (code, v) = scan(d, "a.c", &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(relative_files(&v), ["a.c", "live.h", "maybe1.h", "maybe2.h", "joined.h"]);
}

#[test]
fn scan_unsupported_directives_have_their_own_exit_code() {
    let cases = [
        ("#define H \"x.h\"\n#include H\n", "macro"),
        ("#include \"/usr/include/stdio.h\"\n", "relative"),
        ("#include \"nowhere.h\"\n", "unresolved"),
        ("#include_next <x.h>\n", "include_next"),
        ("#import \"x.h\"\n", "import"),
        ("#embed \"data.bin\"\n", "embed"),
    ];
    for (text, needle) in cases {
        let ws = Workspace::new();
        write(&ws.path().join("a.c"), text);
        let (code, v) = scan(ws.path(), "a.c", &[]);
        assert_eq!(code, 6, "{text}: {v}");
        assert_eq!(v["verdict"], "unsupported");
        assert!(v["reason"].as_str().unwrap().contains(needle), "{text}: {v}");
    }
}

#[test]
fn scan_symlink_below_the_common_root_is_unsupported() {
    let ws = Workspace::new();
    let d = ws.path();
    write(&d.join("real/x.h"), "\n");
    std::os::unix::fs::symlink(d.join("real"), d.join("src/alias")).unwrap_or_else(|_| {
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("src/alias")).unwrap();
    });
    write(&d.join("src/a.c"), "#include \"alias/x.h\"\n");
    let (code, v) = scan(d, "src/a.c", &[]);
    assert_eq!(code, 6, "{v}");
    assert!(v["reason"].as_str().unwrap().contains("symbolic link"), "{v}");
}

#[test]
fn scan_io_errors_and_malformed_input_are_exit_1() {
    let ws = Workspace::new();
    let (code, _) = scan(ws.path(), "missing.c", &[]);
    assert_eq!(code, 1);
    write(&ws.path().join("bad.c"), "#if 1\n#include \"x.h\"\n");
    write(&ws.path().join("x.h"), "\n");
    let (code, v) = scan(ws.path(), "bad.c", &[]);
    assert_eq!(code, 1, "{v}");
}

/// Inputs gcc reads as includes must never be answered `complete` without them: the
/// digraph `%:include`, and a block comment spanning lines on a conditional line (the
/// comment is one space, so `#if 0 /* … ⏎ … */ || 1` is true).
#[test]
fn scan_digraphs_and_multi_line_comments_in_conditions_are_followed() {
    for text in [
        "\u{feff}#include \"local.h\"\n",
        "\u{feff}%:include \"local.h\"\n",
        "%:include \"local.h\"\n",
        "  %:  include \"local.h\"\n",
        "#if 0 /* start\n end */ || 1\n#include \"local.h\"\n#endif\n",
        "#include /* a comment\n that ends here */ \"local.h\"\n",
    ] {
        let ws = Workspace::new();
        write(&ws.path().join("a.c"), text);
        write(&ws.path().join("local.h"), "\n");
        let (code, v) = scan(ws.path(), "a.c", &[]);
        assert_eq!(code, 0, "{text:?}: {v}");
        assert_eq!(relative_files(&v), ["a.c", "local.h"], "{text:?}");
    }
    // Line numbers after a multi-line comment stay right.
    let ws = Workspace::new();
    write(&ws.path().join("a.c"), "/* one\ntwo\nthree */\n#include \"gone.h\"\n");
    let (code, v) = scan(ws.path(), "a.c", &[]);
    assert_eq!((code, v["line"].as_u64()), (6, Some(4)), "{v}");
    // Trigraphs may spell a directive under -trigraphs / strict ISO modes: unsupported.
    let ws = Workspace::new();
    write(&ws.path().join("a.c"), "??=include \"local.h\"\n");
    write(&ws.path().join("local.h"), "\n");
    let (code, v) = scan(ws.path(), "a.c", &[]);
    assert_eq!(code, 6, "{v}");
    assert!(v["reason"].as_str().unwrap().contains("trigraph"), "{v}");
}

/// An include that leaves the common root of the sources and -I directories would move
/// that root (to `/` at worst) and re-root every packaged path: it is unsupported.
#[test]
fn scan_includes_escaping_the_common_root_are_unsupported() {
    let ws = Workspace::new();
    let d = ws.path();
    write(&d.join("outside/x.h"), "\n");
    write(&d.join("proj/src/a.c"), "#include \"../../outside/x.h\"\n");
    write(&d.join("proj/include/y.h"), "#include <../../outside/x.h>\n");
    let (code, v) = scan(&d.join("proj"), "src/a.c", &["include"]);
    assert_eq!(code, 6, "{v}");
    assert!(v["reason"].as_str().unwrap().contains("outside"), "{v}");
    write(&d.join("proj/src/b.c"), "#include <y.h>\n");
    let (code, v) = scan(&d.join("proj"), "src/b.c", &["include"]);
    assert_eq!(code, 6, "angle includes too: {v}");
    let pkg = d.join("pkg");
    let out = strata()
        .current_dir(d.join("proj"))
        .args(["artifact", "scan-includes", "src/a.c", "--package"])
        .arg(&pkg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    assert!(!pkg.exists(), "nothing is packaged");
    // With -I covering it, the closure is complete and rooted above both.
    let (code, v) = scan(&d.join("proj"), "src/a.c", &["../outside"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(relative_files(&v), ["proj/src/a.c", "outside/x.h"]);
}
