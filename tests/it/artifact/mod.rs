//! The artifact store (L0): CLI and library behaviour against real directories, real
//! processes (single build across 8 processes, kill -9 during publication), every INVALID
//! cause, read-only mode, promotion, the include scanner, and L0 push/pull through a
//! directory store and a real s3s-fs server.

mod concurrency;
mod invalid;
mod l0;
mod scan;
mod signing;
mod store;

use std::path::{Path, PathBuf};
use std::process::Command;

use strata::artifact::{
    ArtifactKey, ArtifactSpec, ArtifactStore, BuildKind, EnvironmentIdentity, Mode, Stage,
    StoreOptions,
};

/// The strata binary under test.
/// A GNU extension header (`././@LongLink`) of `kind` (long name, long link, pax) whose
/// size field claims `size` bytes: for archives whose headers lie about what follows.
pub fn extension_header(kind: tar::EntryType, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_cksum();
    h.as_bytes().to_vec()
}

pub fn strata() -> Command {
    Command::new(crate::strata_exe())
}

/// 64 hex characters made of `c`.
pub fn hex(c: char) -> String {
    c.to_string().repeat(64)
}

/// The source digest of trial `n` (distinct keys).
pub fn source_for(n: u32) -> String {
    format!("{n:064x}")
}

/// A unique temporary workspace with `cache/` (the root) and `private/` inside.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    pub fn private(&self) -> PathBuf {
        self.dir.path().join("private")
    }

    pub fn store(&self, mode: Mode) -> ArtifactStore {
        let options =
            StoreOptions { mode, private_root: Some(self.private()), ..StoreOptions::default() };
        ArtifactStore::open(&self.root(), options).unwrap()
    }
}

pub fn key_with(source: &str) -> ArtifactKey {
    let env = EnvironmentIdentity::new([("cc", Some(hex('a'))), ("sdk", Some(hex('e')))]).unwrap();
    ArtifactKey::new(env, source, &hex('c')).unwrap()
}

pub fn key() -> ArtifactKey {
    key_with(&hex('b'))
}

pub fn spec(stage: Stage, required: &[&str]) -> ArtifactSpec {
    ArtifactSpec::new(stage, BuildKind::Single, required).unwrap()
}

/// CLI identity flags matching [`key_with`] and a spec requiring `required`.
pub fn id_flags(root: &Path, source: &str, stage: &str, required: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--root".to_owned(),
        root.display().to_string(),
        "--env".into(),
        format!("cc={}", hex('a')),
        "--env".into(),
        format!("sdk={}", hex('e')),
        "--source".into(),
        source.to_owned(),
        "--specialization".into(),
        hex('c'),
        "--stage".into(),
        stage.to_owned(),
    ];
    for r in required {
        args.push("--require".into());
        args.push((*r).to_owned());
    }
    args
}

/// Writes a small build output: `lib/libx.a` (data), `bin/tool` (owner-exec), `meta.json`.
pub fn write_outputs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir.join("lib"))?;
    std::fs::create_dir_all(dir.join("bin"))?;
    std::fs::write(dir.join("lib/libx.a"), vec![7u8; 4096])?;
    std::fs::write(dir.join("bin/tool"), b"#!/bin/sh\necho tool\n")?;
    std::fs::set_permissions(dir.join("bin/tool"), std::fs::Permissions::from_mode(0o755))?;
    std::fs::write(dir.join("meta.json"), br#"{"ok":true}"#)
}

pub const REQUIRED: &[&str] = &["bin/tool", "lib/libx.a", "meta.json"];

/// Parses one JSON line of CLI output.
pub fn json(stdout: &[u8]) -> serde_json::Value {
    serde_json::from_slice(stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(stdout)))
}
