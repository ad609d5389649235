//! Malicious and damaged snapshots, one test each: each is rejected with a warning and
//! exit 0; nothing is written outside the cache directory, which keeps its previous
//! content; no staging or temp file is left beside it. A setuid file is the exception
//! by design: the snapshot restores and the bit is dropped.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::craft::{Entry, manifest_for, object, publish, publish_entries};
use super::{Run, Scratch, key, names, strata, tree};

/// A victim: a cache directory with content, a sibling "outside" directory, a key.
struct Victim {
    scratch: Scratch,
    cache: PathBuf,
    outside: PathBuf,
    key: String,
    before: std::collections::BTreeMap<String, String>,
    outside_before: std::collections::BTreeMap<String, String>,
}

impl Victim {
    fn new() -> Self {
        let scratch = Scratch::new();
        let cache = scratch.path("work/cache");
        std::fs::create_dir_all(cache.join("actions-v1/third_party/keep")).unwrap();
        std::fs::write(cache.join("actions-v1/third_party/keep/file"), b"previous content")
            .unwrap();
        let outside = scratch.path("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("precious"), b"do not touch").unwrap();
        let key = key(&scratch, "evil");
        let before = tree(&cache);
        let outside_before = tree(&outside);
        Self { scratch, cache, outside, key, before, outside_before }
    }

    fn store(&self) -> PathBuf {
        self.scratch.path("store")
    }

    fn restore(&self) -> Run {
        let env = vec![("STRATA_STORE", self.scratch.file_store())];
        strata(
            &self.scratch,
            &[
                "snapshot",
                "restore",
                "--cache-dir",
                &self.cache.display().to_string(),
                "--key",
                &self.key,
            ],
            &env,
        )
    }

    /// Restores and checks the rejection contract; returns stderr.
    fn assert_rejected(&self, reason: &str) -> String {
        let run = self.restore();
        run.assert_ok();
        assert!(run.stderr.contains("strata: WARNING snapshot restore"), "{}", run.stderr);
        assert!(run.stderr.contains("rejected"), "{}", run.stderr);
        assert!(run.stderr.contains(reason), "expected {reason:?} in: {}", run.stderr);
        assert!(run.stderr.contains("is unchanged"), "{}", run.stderr);
        assert_eq!(tree(&self.cache), self.before, "the cache directory changed");
        assert_eq!(tree(&self.outside), self.outside_before, "something was written outside");
        let beside: Vec<String> =
            names(self.cache.parent().unwrap()).into_iter().filter(|n| n != "cache").collect();
        assert!(beside.is_empty(), "left beside the cache: {beside:?}");
        run.stderr
    }
}

fn file(path: &str, data: &[u8]) -> Entry {
    Entry::File { path: path.to_owned(), mode: 0o644, data: data.to_vec() }
}

#[test]
fn snapshot_rejects_a_dotdot_entry() {
    let v = Victim::new();
    publish_entries(
        &v.store(),
        &v.key,
        &[Entry::Dir("actions-v1"), file("actions-v1/../../outside/evil", b"x")],
    );
    v.assert_rejected("unsafe");
    assert!(!v.outside.join("evil").exists());
}

#[test]
fn snapshot_rejects_an_absolute_path() {
    let v = Victim::new();
    let target = v.outside.join("evil").display().to_string();
    publish_entries(&v.store(), &v.key, &[Entry::Dir("actions-v1"), file(&target, b"x")]);
    v.assert_rejected("absolute");
    assert!(!v.outside.join("evil").exists());
}

#[test]
fn snapshot_rejects_a_write_through_a_symlink() {
    let v = Victim::new();
    // The symlink itself sits where artifacts may be symlinks; writing below it is not.
    let link = "actions-v1/third_party/u/k/artifacts/link";
    let entries = [
        Entry::Dir("actions-v1"),
        Entry::Dir("actions-v1/third_party"),
        Entry::Dir("actions-v1/third_party/u"),
        Entry::Dir("actions-v1/third_party/u/k"),
        Entry::Dir("actions-v1/third_party/u/k/artifacts"),
        Entry::Symlink { path: link, target: v.outside.display().to_string() },
        file(&format!("{link}/evil"), b"x"),
    ];
    publish_entries(&v.store(), &v.key, &entries);
    v.assert_rejected("writing through symlinks is not allowed");
    assert!(!v.outside.join("evil").exists());
}

/// Review finding 1: a directory symlink at a layout position (a domain, unit, key, or
/// `artifacts` itself) is rejected even with nothing written through it, because the
/// engine would later save entries through it and serve HITs from outside.
#[test]
fn snapshot_rejects_a_symlink_at_a_layout_position() {
    for link in [
        "actions-v1/third_party",
        "actions-v1/custom_operator",
        "actions-v1/third_party/zlib",
        "actions-v1/third_party/zlib/k",
        "actions-v1/third_party/zlib/k/artifacts",
        "actions-v1/custom_operator/soc/op/ns/a@u/k/artifacts",
        "actions-v1/elsewhere",
    ] {
        let v = Victim::new();
        let entries = [
            Entry::Dir("actions-v1"),
            Entry::Symlink { path: link, target: v.outside.display().to_string() },
        ];
        publish_entries(&v.store(), &v.key, &entries);
        let stderr = v.assert_rejected("outside an entry's artifacts/ directory");
        assert!(stderr.contains(link), "{stderr}");
    }
}

/// Symlinked artifacts are legitimate L1 content: they restore, with any target text.
#[test]
fn snapshot_restores_symlinks_inside_artifacts() {
    let v = Victim::new();
    let entries = [
        Entry::Dir("actions-v1"),
        Entry::Dir("actions-v1/third_party"),
        Entry::Dir("actions-v1/third_party/zlib"),
        Entry::Dir("actions-v1/third_party/zlib/k"),
        Entry::Dir("actions-v1/third_party/zlib/k/artifacts"),
        Entry::Symlink {
            path: "actions-v1/third_party/zlib/k/artifacts/libz.so",
            target: "/usr/lib/libz.so.1".to_owned(),
        },
    ];
    publish_entries(&v.store(), &v.key, &entries);
    let run = v.restore();
    run.assert_ok();
    assert!(run.stderr.contains("RESTORED"), "{}", run.stderr);
    let link = v.cache.join("actions-v1/third_party/zlib/k/artifacts/libz.so");
    assert_eq!(std::fs::read_link(link).unwrap(), PathBuf::from("/usr/lib/libz.so.1"));
}

#[test]
fn snapshot_rejects_a_hard_link_to_outside() {
    let v = Victim::new();
    let target = v.outside.join("precious").display().to_string();
    let entries = [Entry::Dir("actions-v1"), Entry::HardLink { path: "actions-v1/hl", target }];
    publish_entries(&v.store(), &v.key, &entries);
    v.assert_rejected("hard links are not allowed");
}

#[test]
fn snapshot_rejects_a_device_node() {
    let v = Victim::new();
    publish_entries(
        &v.store(),
        &v.key,
        &[Entry::Dir("actions-v1"), Entry::CharDevice("actions-v1/null")],
    );
    v.assert_rejected("devices are not allowed");
}

#[test]
fn snapshot_drops_the_setuid_bit() {
    let v = Victim::new();
    let entries = [
        Entry::Dir("actions-v1"),
        Entry::File { path: "actions-v1/suid".into(), mode: 0o4755, data: b"#!/bin/sh\n".to_vec() },
        Entry::File { path: "actions-v1/sgid".into(), mode: 0o2644, data: b"x".to_vec() },
    ];
    publish_entries(&v.store(), &v.key, &entries);
    let run = v.restore();
    run.assert_ok();
    assert!(run.stderr.contains("RESTORED"), "{}", run.stderr);
    let mode = |name: &str| {
        std::fs::metadata(v.cache.join("actions-v1").join(name)).unwrap().permissions().mode()
            & 0o7777
    };
    assert_eq!(mode("suid"), 0o755);
    assert_eq!(mode("sgid"), 0o644);
}

#[test]
fn snapshot_rejects_a_file_longer_than_declared() {
    let v = Victim::new();
    let entries = [Entry::Dir("actions-v1"), file("actions-v1/big", &[7u8; 4096])];
    // The manifest and the sidecar declare 10 bytes; the archive carries 4096.
    let mut manifest = manifest_for(&entries, &v.key);
    manifest["files"][0]["size_bytes"] = 10.into();
    manifest["file_bytes"] = 10.into();
    let (bytes, digest) = object(&entries, &manifest);
    publish(&v.store(), &v.key, &bytes, &digest, 2, 10);
    v.assert_rejected("would exceed the 10 bytes");
}

#[test]
fn snapshot_rejects_a_manifest_mismatch() {
    let v = Victim::new();
    let entries = [Entry::Dir("actions-v1"), file("actions-v1/f", b"real content")];
    let mut manifest = manifest_for(&entries, &v.key);
    let other = strata::digest::Sha256Digest::of_bytes(b"other content").to_hex();
    manifest["files"][0]["sha256"] = other.into();
    let (bytes, digest) = object(&entries, &manifest);
    publish(&v.store(), &v.key, &bytes, &digest, 2, 12);
    v.assert_rejected("manifest mismatch: file actions-v1/f has digest sha256:");
}

#[test]
fn snapshot_rejects_a_truncated_object() {
    let v = Victim::new();
    let entries = [
        Entry::Dir("actions-v1"),
        file("actions-v1/f", &crate::transport::random_bytes(200_000, 9)),
    ];
    let manifest = manifest_for(&entries, &v.key);
    let (bytes, digest) = object(&entries, &manifest);
    // The sidecar describes the whole object; the store holds a truncated one.
    publish(&v.store(), &v.key, &bytes, &digest, 2, 200_000);
    std::fs::write(v.store().join(&v.key), &bytes[..bytes.len() / 2]).unwrap();
    v.assert_rejected("its sidecar declares");
    // A truncated object whose sidecar matches the truncation is caught by the stream.
    publish(&v.store(), &v.key, &bytes[..bytes.len() / 2], &digest, 2, 200_000);
    v.assert_rejected("rejected");
}

#[test]
fn snapshot_rejects_entries_outside_the_layout_and_duplicates() {
    for entries in [
        vec![Entry::Dir("actions-v1"), file(".updated", b"")],
        vec![Entry::Dir("actions-v1"), file("actions-v1/f", b"1"), file("actions-v1/f", b"2")],
        vec![Entry::Dir("actions-v1"), Entry::Dir("actions-v1/d"), file("actions-v1/d", b"1")],
    ] {
        let v = Victim::new();
        publish_entries(&v.store(), &v.key, &entries);
        v.assert_rejected("rejected");
    }
}

/// A file or a symlink at a path that an earlier entry's parent made a directory (no
/// directory entry of its own): the writer threads may not have made that directory yet
/// when the later entry comes, so the record of admitted directories must reject it.
#[test]
fn snapshot_rejects_an_entry_where_an_earlier_entry_needed_a_directory() {
    let dir = "actions-v1/third_party/u/k/artifacts/d";
    let link = Entry::Symlink { path: dir, target: "elsewhere".to_owned() };
    for later in [file(dir, b"2"), link] {
        let v = Victim::new();
        let entries = [Entry::Dir("actions-v1"), file(&format!("{dir}/f"), b"1"), later];
        publish_entries(&v.store(), &v.key, &entries);
        // Snapshots list every directory (issue 26 item 5): the directory the first entry
        // needs has no entry of its own, which rejects it before the conflict arises.
        v.assert_rejected("has no entry before it");
    }
}

#[test]
fn snapshot_rejection_is_an_annotation_under_github_actions() {
    let v = Victim::new();
    publish_entries(
        &v.store(),
        &v.key,
        &[Entry::Dir("actions-v1"), Entry::CharDevice("actions-v1/null")],
    );
    let env = vec![("STRATA_STORE", v.scratch.file_store()), ("GITHUB_ACTIONS", "true".to_owned())];
    let run = strata(
        &v.scratch,
        &[
            "snapshot",
            "restore",
            "--cache-dir",
            &v.cache.display().to_string(),
            "--key",
            &v.key,
            "--strict",
        ],
        &env,
    );
    assert_eq!(run.code, 1, "--strict turns the rejection into exit 1");
    assert!(
        run.stderr.contains("::warning title=strata snapshot restore::snapshot "),
        "{}",
        run.stderr
    );
    assert_eq!(tree(&v.cache), v.before);
}

/// Review finding 10: a small object whose sidecar declares a huge tree (a decompression
/// bomb) is rejected before it is downloaded.
#[test]
fn snapshot_rejects_a_sidecar_declaring_a_huge_expansion() {
    let v = Victim::new();
    let entries = [Entry::Dir("actions-v1"), file("actions-v1/f", b"tiny")];
    let manifest = manifest_for(&entries, &v.key);
    let (bytes, digest) = object(&entries, &manifest);
    publish(&v.store(), &v.key, &bytes, &digest, 2, 10 * 1024 * 1024 * 1024);
    v.assert_rejected("expansion (a decompression bomb?)");
}
