//! What an entry holds and how it comes back: symlink artifacts of every kind (relative,
//! absolute in-tree, external, to a directory), permission bits, fresh mtimes, and the
//! two selection modes (changed files, `--artifact-include`).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::SystemTime;

use super::{CustomOp, TestContext, tree_files, write_file};

/// Every symlink under `dir` as (relative path, link text), sorted.
fn links(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.path_is_symlink() {
            let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read_link(e.path()).unwrap().to_string_lossy().into_owned()));
        }
    }
    out
}

const LINKS_SCRIPT: &str = r#"set -e
out="$0"
mkdir -p "$out/lib/real" "$out/include/sub" "$out/bin"
echo elf > "$out/lib/real/libz.so.1"
echo hdr > "$out/include/sub/z.h"
ln -s real/libz.so.1 "$out/lib/libz.so"
ln -s "$out/lib/real/libz.so.1" "$out/lib/libabs.so"
ln -s /usr/lib "$out/lib/system"
ln -s ../include "$out/lib/inc"
printf '#!/bin/sh\necho tool\n' > "$out/bin/tool"
chmod 4755 "$out/bin/tool"
echo data > "$out/lib/data.txt"
chmod 600 "$out/lib/data.txt"
"#;

#[test]
fn engine_artifacts_symlinks_modes_and_mtimes_round_trip() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let action = ctx.third_party("links", &out).cmd(&[
        "sh".as_ref(),
        "-c".as_ref(),
        LINKS_SCRIPT.as_ref(),
        out.as_os_str(),
    ]);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    let files = tree_files(&out);
    let link_texts = links(&out);
    assert_eq!(link_texts.len(), 4);

    std::fs::remove_dir_all(&out).unwrap();
    let before = SystemTime::now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    ctx.run(&action).expect(&["HIT"]);
    assert_eq!(links(&out), link_texts, "every link comes back with its exact text");
    assert_eq!(tree_files(&out), files);
    let tool = std::fs::metadata(out.join("bin/tool")).unwrap();
    assert_eq!(tool.permissions().mode() & 0o7777, 0o755, "exec kept, setuid dropped");
    let data = std::fs::metadata(out.join("lib/data.txt")).unwrap();
    assert_eq!(data.permissions().mode() & 0o7777, 0o644, "normalised to the shared mode");
    assert!(tool.modified().unwrap() > before, "restored files are new to make/ninja");
    let out_tool = std::process::Command::new(out.join("bin/tool")).output().unwrap();
    assert_eq!(out_tool.stdout, b"tool\n");
    // The entry itself is shareable read-only: directories 0755, files 0644/0755.
    let entry = ctx.cache.join("actions-v1/third_party/links");
    for e in walkdir::WalkDir::new(&entry) {
        let e = e.unwrap();
        if e.path_is_symlink() {
            continue;
        }
        let mode = e.metadata().unwrap().mode() & 0o7777;
        let ok =
            if e.file_type().is_dir() { mode == 0o755 } else { mode == 0o644 || mode == 0o755 };
        assert!(ok, "{} has mode {mode:o}", e.path().display());
    }
}

#[test]
fn engine_artifacts_custom_operator_publishes_symlinks() {
    let ctx = TestContext::new();
    let source = ctx.path("ops/links");
    write_file(&source.join("k.c"), "k");
    let (stage, publish, state) = (ctx.path("stage"), ctx.path("publish"), ctx.path("state"));
    let op = CustomOp {
        unit: "u",
        soc: "s",
        operator: "links",
        action: "a",
        source: &source,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let action = ctx.custom(&op).cmd(&[
        "sh".as_ref(),
        "-c".as_ref(),
        LINKS_SCRIPT.as_ref(),
        stage.as_os_str(),
    ]);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    let expected_links: Vec<(String, String)> =
        links(&stage).into_iter().filter(|(p, _)| p != "lib/libabs.so").collect();
    let published = links(&publish);
    assert_eq!(
        published.iter().filter(|(p, _)| p != "lib/libabs.so").cloned().collect::<Vec<_>>(),
        expected_links
    );
    assert_eq!(std::fs::read(publish.join("lib/libz.so")).unwrap(), b"elf\n");
    assert_eq!(std::fs::read(publish.join("lib/inc/sub/z.h")).unwrap(), b"hdr\n");
    std::fs::remove_dir_all(ctx.path("publish")).unwrap();
    std::fs::remove_dir_all(ctx.path("state")).unwrap();
    ctx.run(&action).expect(&["HIT"]);
    assert_eq!(links(&publish), published);
}

#[test]
fn engine_artifacts_selection_changed_files_or_include_patterns() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    write_file(&out.join("old/stale.a"), "left over from an older build");
    write_file(&out.join("keep.txt"), "not ours");
    // Changed-files selection: only what the build wrote is cached.
    let changed = ctx.third_party("changed", &out).sh("mkdir -p out/lib; echo new > out/lib/new.a");
    ctx.run(&changed).expect(&["MISS", "SAVED"]);
    // Include patterns: every match, touched or not.
    let include = ctx
        .third_party("include", &out)
        .flag("--artifact-include", "*.a")
        .sh("mkdir -p out/lib; echo new2 > out/lib/new2.a");
    ctx.run(&include).expect(&["MISS", "SAVED"]);

    std::fs::remove_dir_all(&out).unwrap();
    ctx.run(&changed).expect(&["HIT"]);
    assert_eq!(tree_files(&out), [("lib/new.a".to_owned(), b"new\n".to_vec())]);
    std::fs::remove_dir_all(&out).unwrap();
    ctx.run(&include).expect(&["HIT"]);
    let names: Vec<String> = tree_files(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["lib/new.a", "lib/new2.a", "old/stale.a"]);

    // Units are path components that never collide: `a/b` and `a_b` are two entries.
    let o2 = ctx.path("o2");
    ctx.run(&ctx.third_party("a/b", &o2).sh("echo 1 > o2/f")).expect(&["MISS", "SAVED"]);
    ctx.run(&ctx.third_party("a_b", &o2).sh("echo 1 > o2/f")).expect(&["MISS", "SAVED"]);
    ctx.run(&ctx.third_party("a/b", &o2).sh("echo 1 > o2/f")).expect(&["HIT"]);

    // `~` in --output-dir is the home directory.
    let home = ctx.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let tilde = ctx
        .third_party("tilde", Path::new("~/built"))
        .env("HOME", &home)
        .sh("echo t > \"$HOME/built/t.txt\"");
    ctx.run(&tilde).expect(&["MISS", "SAVED"]);
    std::fs::remove_dir_all(home.join("built")).unwrap();
    ctx.run(&tilde).expect(&["HIT"]);
    assert_eq!(std::fs::read(home.join("built/t.txt")).unwrap(), b"t\n");
}
