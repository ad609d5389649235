//! Snapshots end to end through the real `strata` binary: keys, save on "runner A",
//! restore on "runner B", lookup order, gating, malicious objects, transport faults
//! (s3s-fs on 127.0.0.1 behind the fault proxy), and the composite actions run the way a
//! runner runs them.
//!
//! Every command runs with a cleared environment (PATH, a scratch HOME and what the test
//! sets), so nothing from the developer's machine leaks in. [`Run::assert_no_secret`]
//! checks captured output for the S3 test credentials.

mod actions;
mod actions_setup;
pub mod craft;
mod digests;
mod faults;
mod gating;
mod gc;
mod index;
mod index_faults;
mod lookup;
mod malicious;
mod progress;
mod reports;
mod roundtrip;
mod signing;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::transport::server::S3sServer;

/// A pinned toolchain image for keys (no warning about tags).
pub const IMAGE: &str = "registry.example/team/cc@sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// A scratch area: HOME, runners' directories, a directory store.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `file://<scratch>/store`.
    pub fn file_store(&self) -> String {
        format!("file://{}", self.path("store").display())
    }
}

/// A finished command.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("stdout is not JSON ({e}): {}\n{}", self.stdout, self.stderr)
        })
    }

    pub fn assert_ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }

    /// Neither stream contains any of `secrets`.
    pub fn assert_no_secret(&self, secrets: &[&str]) {
        for secret in secrets {
            assert!(!self.stdout.contains(secret), "secret in stdout: {}", self.stdout);
            assert!(!self.stderr.contains(secret), "secret in stderr: {}", self.stderr);
        }
    }
}

/// Runs `strata args` with a clean environment plus `env`, from the scratch directory.
pub fn strata(scratch: &Scratch, args: &[&str], env: &[(&str, String)]) -> Run {
    strata_in(scratch, scratch.dir.path(), args, env)
}

/// The command [`strata_in`] runs (for tests that start several at once).
pub fn strata_command(
    scratch: &Scratch,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, String)],
) -> Command {
    let home = scratch.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut command = Command::new(crate::strata_exe());
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("STRATA_S3_MAX_RETRIES", "2")
        // These tests fill caches with arbitrary trees and inspect whole snapshot objects:
        // they test the full format. Index snapshots are tested in `index.rs`, which sets
        // STRATA_SNAPSHOT_FORMAT=index (a test's env overrides this default).
        .env("STRATA_SNAPSHOT_FORMAT", "full")
        .current_dir(cwd);
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// The result of a finished command.
pub fn run_of(output: std::process::Output) -> Run {
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// [`strata`], from the directory `cwd`.
pub fn strata_in(scratch: &Scratch, cwd: &Path, args: &[&str], env: &[(&str, String)]) -> Run {
    run_of(strata_command(scratch, cwd, args, env).output().unwrap())
}

/// A fresh primary key for `source_hash` (same compatibility for every call).
pub fn key(scratch: &Scratch, source_hash: &str) -> String {
    let run = strata(
        scratch,
        &[
            "snapshot",
            "key",
            "--architecture",
            "x64",
            "--toolchain-image",
            IMAGE,
            "--source-hash",
            source_hash,
        ],
        &[],
    );
    run.assert_ok();
    run.stdout.lines().next().unwrap().to_owned()
}

/// Fills `<cache>/actions-v1` with a small tree (files of several sizes, an executable,
/// a symlink, a dot-file) plus machine-local state, and touches `.updated`.
pub fn fill_cache(cache: &Path, seed: u64) {
    let entry = cache.join("actions-v1/third_party/zlib").join(format!("{seed:064x}"));
    std::fs::create_dir_all(entry.join("artifacts/lib")).unwrap();
    std::fs::write(entry.join("manifest.json"), format!("{{\"seed\":{seed}}}")).unwrap();
    std::fs::write(
        entry.join("artifacts/lib/libz.a"),
        crate::transport::random_bytes(300_000, seed),
    )
    .unwrap();
    std::fs::write(entry.join("artifacts/bin-tool"), b"#!/bin/sh\necho tool\n").unwrap();
    std::fs::set_permissions(
        entry.join("artifacts/bin-tool"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(entry.join("artifacts/.dotfile"), b"dot").unwrap();
    std::os::unix::fs::symlink("libz.a", entry.join("artifacts/lib/libz-link.a")).unwrap();
    std::fs::write(cache.join("actions-v1/third_party/.last-used"), b"").unwrap();
    std::fs::create_dir_all(cache.join(".locks/entry")).unwrap();
    std::fs::write(cache.join(".locks/entry/x.lock"), b"").unwrap();
    std::fs::create_dir_all(cache.join(".local/tool-memo")).unwrap();
    std::fs::write(cache.join(".updated"), b"").unwrap();
}

/// Everything under `root` (not following symlinks): relative path → kind, mode, SHA-256
/// of the content or link text.
pub fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if !root.exists() {
        return out;
    }
    for entry in walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name() {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(root).unwrap().display().to_string();
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        let desc = if meta.file_type().is_symlink() {
            format!("link {}", std::fs::read_link(entry.path()).unwrap().display())
        } else if meta.is_dir() {
            format!("dir {:o}", meta.permissions().mode() & 0o7777)
        } else {
            let digest =
                strata::digest::Sha256Digest::of_bytes(&std::fs::read(entry.path()).unwrap());
            format!("file {:o} {digest}", meta.permissions().mode() & 0o7777)
        };
        out.insert(rel, desc);
    }
    out
}

/// The names in `dir` (sorted), or nothing if it does not exist.
pub fn names(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> =
        read.map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

/// The objects of `key` in the directory (or bucket directory) `store`, as a save names
/// them (`~<16 hex of the key's SHA-256>-<32 hex>`).
pub fn objects_of(store: &Path, key: &str) -> Vec<String> {
    names(store)
        .into_iter()
        .filter(|n| strata::snapshot::manifest::is_object_name_of(key, n))
        .collect()
}

/// The snapshot object of `key` in `store` ([`objects_of`]). Panics unless there is
/// exactly one.
pub fn object_of(store: &Path, key: &str) -> PathBuf {
    let found = objects_of(store, key);
    assert_eq!(found.len(), 1, "objects of {key} in {}: {found:?}", store.display());
    store.join(&found[0])
}

/// Environment for an S3 store on `server` with its credentials.
pub fn s3_env(server: &S3sServer, endpoint: &str, prefix: &str) -> Vec<(&'static str, String)> {
    vec![
        ("STRATA_STORE", crate::transport::server::url_for(endpoint, prefix)),
        ("AWS_ACCESS_KEY_ID", server.access_key.clone()),
        ("AWS_SECRET_ACCESS_KEY", server.secret_key.clone()),
    ]
}
