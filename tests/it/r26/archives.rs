//! Item 5: archive checks left open, on real tarballs (zstd tar, crafted entry by entry,
//! with a self-consistent manifest, as a malicious producer would make them): a snapshot
//! without directory entries, a snapshot whose only entry is a file named `actions-v1`, and
//! the parent directories a rejected `snapshot unpack` (or restore) created.

use std::path::Path;

use crate::snapshot::craft::{Entry, manifest_for, object, publish_entries};
use crate::snapshot::{Scratch, key, strata};

fn arg(path: &Path) -> String {
    path.display().to_string()
}

fn file(path: &str, data: &[u8]) -> Entry {
    Entry::File { path: path.to_owned(), mode: 0o644, data: data.to_vec() }
}

/// Writes a crafted snapshot object of `entries` (manifest listing exactly them) to a file.
fn tarball(scratch: &Scratch, name: &str, entries: &[Entry]) -> std::path::PathBuf {
    let manifest = manifest_for(entries, "crafted");
    let (bytes, _) = object(entries, &manifest);
    let path = scratch.path(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn unpack(scratch: &Scratch, input: &Path, dest: &Path) -> crate::snapshot::Run {
    strata(scratch, &["snapshot", "unpack", "--input", &arg(input), "--dest", &arg(dest)], &[])
}

#[test]
fn r26_snapshot_archives_must_list_every_directory_and_have_a_directory_root() {
    let scratch = Scratch::new();
    let entry = "actions-v1/third_party/zlib/k1";
    // Files only: the parents would be made up although the manifest must list them.
    let no_dirs = tarball(
        &scratch,
        "no-dirs.tar.zst",
        &[
            file(&format!("{entry}/manifest.json"), b"{}"),
            file(&format!("{entry}/artifacts/a.o"), b"a"),
        ],
    );
    let run = unpack(&scratch, &no_dirs, &scratch.path("out1"));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("has no entry before it"), "{}", run.stderr);
    assert!(!scratch.path("out1").exists());
    // Some directories listed, one left out in the middle.
    let gap = tarball(
        &scratch,
        "gap.tar.zst",
        &[
            Entry::Dir("actions-v1"),
            Entry::Dir("actions-v1/third_party"),
            file("actions-v1/third_party/zlib/k1/manifest.json", b"{}"),
        ],
    );
    let run = unpack(&scratch, &gap, &scratch.path("out2"));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("actions-v1/third_party/zlib has no entry before it")
            || run.stderr.contains("its directory actions-v1/third_party/zlib/k1 has no entry"),
        "{}",
        run.stderr
    );
    // The only entry is a file named actions-v1.
    let root_file = tarball(&scratch, "root-file.tar.zst", &[file("actions-v1", b"not a tree")]);
    let run = unpack(&scratch, &root_file, &scratch.path("out3"));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("actions-v1 is a file; it must be a directory"), "{}", run.stderr);
    assert!(!scratch.path("out3").exists());
    // A well-formed snapshot of the same files still unpacks.
    let good = tarball(
        &scratch,
        "good.tar.zst",
        &[
            Entry::Dir("actions-v1"),
            Entry::Dir("actions-v1/third_party"),
            Entry::Dir("actions-v1/third_party/zlib"),
            Entry::Dir("actions-v1/third_party/zlib/k1"),
            file("actions-v1/third_party/zlib/k1/manifest.json", b"{}"),
        ],
    );
    let run = unpack(&scratch, &good, &scratch.path("out4"));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read(scratch.path("out4/actions-v1/third_party/zlib/k1/manifest.json")).unwrap(),
        b"{}"
    );

    // A restore of the snapshot without directory entries rejects it too.
    let store = scratch.path("store");
    let k = key(&scratch, "nodirs");
    publish_entries(&store, &k, &[file(&format!("{entry}/manifest.json"), b"{}")]);
    let cache = scratch.path("restore/cache");
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &arg(&cache), "--key", &k, "--json"],
        &[("STRATA_STORE", scratch.file_store())],
    );
    let report = run.json();
    assert_eq!(report["status"], "error", "{report}");
    assert!(report["error"].as_str().unwrap().contains("has no entry before it"), "{report}");
}

#[test]
fn r26_a_rejected_unpack_or_restore_leaves_no_directories_it_created() {
    let scratch = Scratch::new();
    let bad = tarball(&scratch, "bad.tar.zst", &[file("actions-v1", b"x")]);
    let dest = scratch.path("new/a/b/dest");
    let run = unpack(&scratch, &bad, &dest);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!scratch.path("new").exists(), "{}", run.stderr);
    // A directory that existed before stays.
    std::fs::create_dir_all(scratch.path("old")).unwrap();
    let run = unpack(&scratch, &bad, &scratch.path("old/x/dest"));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(scratch.path("old").is_dir() && !scratch.path("old/x").exists());

    // A restore whose only candidate is rejected removes the parents of the cache
    // directory it created for the staging tree.
    let store = scratch.path("store");
    let k = key(&scratch, "rootfile");
    publish_entries(&store, &k, &[file("actions-v1", b"x")]);
    let cache = scratch.path("fresh/runner/cache");
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &arg(&cache), "--key", &k, "--json"],
        &[("STRATA_STORE", scratch.file_store())],
    );
    assert_eq!(run.json()["status"], "error", "{}", run.stdout);
    assert!(!scratch.path("fresh").exists(), "{}", run.stderr);
}
