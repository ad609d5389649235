//! Issue 9 item 3: a toolchain identified by content. Two runners whose compiler prints the
//! same `--version` but writes other bytes (the issue's `fakecc`) share a key when tools are
//! identified by version text only, and never with `--environment-tool-content` (action run)
//! or `--toolchain-tool-content` (snapshot key).

use std::path::{Path, PathBuf};

use super::TestContext;

/// A directory holding an executable `fakecc` that prints `fakecc 9.1` for `--version` and
/// otherwise writes `word` to its last argument.
fn fakecc(dir: &Path, word: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("fakecc");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'fakecc 9.1'; exit 0; fi\nfor last; do :; done\necho {word} > \"$last\"\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir.to_path_buf()
}

fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut p = dir.as_os_str().to_owned();
    p.push(":");
    p.push(std::env::var_os("PATH").unwrap_or_default());
    p
}

#[test]
fn engine_tool_content_tells_apart_compilers_with_the_same_version_text() {
    let ctx = TestContext::new();
    let good = fakecc(&ctx.path("good"), "GOOD");
    let evil = fakecc(&ctx.path("evil"), "EVIL");
    let out = ctx.path("out");
    let run = |bin: &Path, content: bool| {
        let mut action = ctx
            .third_party("fake", &out)
            .flag("--environment-tool", "fakecc")
            .env("PATH", path_with(bin))
            .cmd(&["fakecc".as_ref(), out.join("o.txt").as_os_str()]);
        if content {
            action = action.flag("--environment-tool-content", "fakecc");
        }
        if out.exists() {
            std::fs::remove_dir_all(&out).unwrap();
        }
        std::fs::create_dir_all(&out).unwrap();
        let r = ctx.run(&action);
        assert_eq!(r.code, 0, "{}", r.stderr);
        (r.key(), std::fs::read_to_string(out.join("o.txt")).unwrap())
    };
    // Version text only: the same key, and EVIL's entry is a HIT for the good runner.
    let (k_evil, built) = run(&evil, false);
    assert_eq!(built.trim(), "EVIL");
    let (k_good, got) = run(&good, false);
    assert_eq!(k_good, k_evil, "the weakness content identity removes");
    assert_eq!(got.trim(), "EVIL", "a HIT of the other compiler's output");
    // By content: different keys, each runner gets its own compiler's output.
    let (k_evil_c, built) = run(&evil, true);
    assert_eq!(built.trim(), "EVIL");
    let (k_good_c, got) = run(&good, true);
    assert_ne!(k_good_c, k_evil_c);
    assert_eq!(got.trim(), "GOOD");
    // Memoised by stamp: the memo exists, and a rerun gives the same key (a HIT).
    let memos: Vec<_> = std::fs::read_dir(ctx.cache.join(".local/tool-memo"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("content-"))
        .collect();
    assert_eq!(memos.len(), 2, "{memos:?}");
    let (again, got) = run(&good, true);
    assert_eq!((again, got.trim().to_owned()), (k_good_c, "GOOD".to_owned()));
}

#[test]
fn snapshot_key_tool_content_separates_namespaces_of_same_version_tools() {
    let ctx = TestContext::new();
    let good = fakecc(&ctx.path("good"), "GOOD");
    let evil = fakecc(&ctx.path("evil"), "EVIL");
    let key = |bin: &Path, content: bool| {
        let mut cmd = ctx.strata();
        cmd.args(["snapshot", "key", "--architecture", "x64", "--toolchain-tool", "fakecc"])
            .args(["--source-hash", &"a".repeat(64), "--json"])
            .env("PATH", path_with(bin));
        if content {
            cmd.arg("--toolchain-tool-content");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["keys"]["compat_digest"].as_str().unwrap_or_else(|| panic!("{v}")).to_owned()
    };
    assert_eq!(key(&good, false), key(&evil, false));
    assert_ne!(key(&good, true), key(&evil, true));
    assert_eq!(key(&good, true), key(&good, true), "deterministic");
}
