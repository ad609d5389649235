//! Hand-made snapshot objects for the malicious-snapshot tests: raw tar headers (any path,
//! any type), a manifest record consistent with the entries (a malicious producer makes
//! self-consistent snapshots), and a sidecar with the right size and SHA-256.
//!
//! Manifests and sidecars are spelled as the previous releases wrote them (manifest
//! version 1: three lists, untagged SHA-256; sidecar version 1 or 2: `object_sha256`), so
//! every test built on this module also checks that such snapshots stay readable through
//! the migrations.

use std::path::Path;

use serde_json::{Value, json};
use strata::digest::Sha256Digest;
use strata::record::Envelope;
use strata::snapshot::Producer;
use strata::snapshot::manifest::{MANIFEST_SCHEMA_V1, SIDECAR_SCHEMA_V1, SIDECAR_SCHEMA_V2};

/// One raw entry.
#[derive(Clone)]
pub enum Entry {
    Dir(&'static str),
    File {
        path: String,
        mode: u32,
        data: Vec<u8>,
    },
    /// A regular file (mode 0644) whose path is any bytes; the manifest records the path in
    /// the name encoding.
    BytesFile {
        path: Vec<u8>,
        data: Vec<u8>,
    },
    Symlink {
        path: &'static str,
        target: String,
    },
    HardLink {
        path: &'static str,
        target: String,
    },
    CharDevice(&'static str),
}

fn raw_header(kind: tar::EntryType, path: &[u8], mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(0);
    let name = &mut header.as_gnu_mut().unwrap().name;
    assert!(path.len() < name.len(), "keep crafted paths under 100 bytes");
    name[..path.len()].copy_from_slice(path);
    header
}

fn set_link(header: &mut tar::Header, target: &str) {
    let link = &mut header.as_gnu_mut().unwrap().linkname;
    link[..target.len()].copy_from_slice(target.as_bytes());
}

/// The manifest payload describing `entries` as the archive holds them.
pub fn manifest_for(entries: &[Entry], key: &str) -> Value {
    let mut directories = Vec::new();
    let mut files = Vec::new();
    let mut symlinks = Vec::new();
    let mut file_bytes = 0u64;
    for entry in entries {
        match entry {
            Entry::Dir(p) => directories.push(json!(p)),
            Entry::File { path, mode, data } => {
                file_bytes += data.len() as u64;
                files.push(json!({
                    "path": path, "size_bytes": data.len(), "executable": mode & 0o100 != 0,
                    "sha256": Sha256Digest::of_bytes(data).to_hex(),
                }));
            }
            Entry::BytesFile { path, data } => {
                file_bytes += data.len() as u64;
                files.push(json!({
                    "path": strata::fs::name::encode(path), "size_bytes": data.len(),
                    "executable": false, "sha256": Sha256Digest::of_bytes(data).to_hex(),
                }));
            }
            Entry::Symlink { path, target } => {
                symlinks.push(json!({"path": path, "target": target}))
            }
            Entry::HardLink { .. } | Entry::CharDevice(_) => {}
        }
    }
    json!({
        "key": key, "layout": "actions-v1", "created_at": "2025-01-01T00:00:00Z",
        "producer": Producer::default(), "parents": [], "directories": directories,
        "files": files, "symlinks": symlinks, "file_bytes": file_bytes,
    })
}

/// A zstd-compressed tar of `entries` followed by `manifest` (sealed) as the last entry.
/// Returns the object bytes and the manifest digest.
pub fn object(entries: &[Entry], manifest: &Value) -> (Vec<u8>, String) {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        match entry {
            Entry::Dir(p) => {
                let mut h = raw_header(tar::EntryType::Directory, p.as_bytes(), 0o755, 0);
                h.set_cksum();
                builder.append(&h, std::io::empty()).unwrap();
            }
            Entry::File { path, mode, data } => {
                let mut h =
                    raw_header(tar::EntryType::Regular, path.as_bytes(), *mode, data.len() as u64);
                h.set_cksum();
                builder.append(&h, data.as_slice()).unwrap();
            }
            Entry::BytesFile { path, data } => {
                let mut h = raw_header(tar::EntryType::Regular, path, 0o644, data.len() as u64);
                h.set_cksum();
                builder.append(&h, data.as_slice()).unwrap();
            }
            Entry::Symlink { path, target } => {
                let mut h = raw_header(tar::EntryType::Symlink, path.as_bytes(), 0o777, 0);
                set_link(&mut h, target);
                h.set_cksum();
                builder.append(&h, std::io::empty()).unwrap();
            }
            Entry::HardLink { path, target } => {
                let mut h = raw_header(tar::EntryType::Link, path.as_bytes(), 0o644, 0);
                set_link(&mut h, target);
                h.set_cksum();
                builder.append(&h, std::io::empty()).unwrap();
            }
            Entry::CharDevice(p) => {
                let mut h = raw_header(tar::EntryType::Char, p.as_bytes(), 0o666, 0);
                h.set_device_major(1).unwrap();
                h.set_device_minor(3).unwrap();
                h.set_cksum();
                builder.append(&h, std::io::empty()).unwrap();
            }
        }
    }
    let sealed = Envelope::seal(&MANIFEST_SCHEMA_V1, vec![], manifest).unwrap();
    let bytes = sealed.to_bytes();
    let mut h = raw_header(
        tar::EntryType::Regular,
        b"strata-snapshot-manifest.json",
        0o644,
        bytes.len() as u64,
    );
    h.set_cksum();
    builder.append(&h, bytes.as_slice()).unwrap();
    let tar = builder.into_inner().unwrap();
    (zstd::encode_all(tar.as_slice(), 3).unwrap(), sealed.content_digest.to_prefixed())
}

/// Writes `object` and a sidecar for it into a directory store, in the layout of the
/// earlier releases (object `<key>`, version 1 sidecar), which restores still read. `entry_count` and
/// `file_bytes` are what the sidecar declares.
pub fn publish(
    store: &Path,
    key: &str,
    object: &[u8],
    manifest_digest: &str,
    entry_count: u64,
    file_bytes: u64,
) {
    std::fs::create_dir_all(store).unwrap();
    std::fs::write(store.join(key), object).unwrap();
    let sidecar = legacy_sidecar(key, None, object, manifest_digest, entry_count, file_bytes);
    let sealed = Envelope::seal(&SIDECAR_SCHEMA_V1, vec![], &sidecar).unwrap();
    std::fs::write(store.join(format!("{key}.json")), sealed.to_bytes()).unwrap();
}

/// A sidecar payload as releases before tagged digests wrote it (`object_sha256`, untagged
/// hex), naming `object_name` if given (version 2) or none (version 1).
pub fn legacy_sidecar(
    key: &str,
    object_name: Option<&str>,
    object: &[u8],
    manifest_digest: &str,
    entry_count: u64,
    file_bytes: u64,
) -> Value {
    let mut sidecar = json!({
        "key": key, "format": "zstd", "object_size_bytes": object.len(),
        "object_sha256": Sha256Digest::of_bytes(object).to_hex(),
        "manifest_digest": manifest_digest, "entry_count": entry_count, "file_count": 0,
        "file_bytes": file_bytes, "created_at": "2025-01-01T00:00:00Z",
        "producer": Producer::default(), "parents": [],
    });
    if let Some(name) = object_name {
        sidecar["object"] = name.into();
    }
    sidecar
}

/// Writes `object` under the object name `name` and a version 2 sidecar (the previous
/// release's layout) committing it.
pub fn publish_v2(
    store: &Path,
    key: &str,
    name: &str,
    object: &[u8],
    manifest_digest: &str,
    entry_count: u64,
    file_bytes: u64,
) {
    std::fs::create_dir_all(store).unwrap();
    std::fs::write(store.join(name), object).unwrap();
    let sidecar = legacy_sidecar(key, Some(name), object, manifest_digest, entry_count, file_bytes);
    let sealed = Envelope::seal(&SIDECAR_SCHEMA_V2, vec![], &sidecar).unwrap();
    std::fs::write(store.join(format!("{key}.json")), sealed.to_bytes()).unwrap();
}

/// Crafts a self-consistent snapshot of `entries` and publishes it under `key`.
pub fn publish_entries(store: &Path, key: &str, entries: &[Entry]) {
    let manifest = manifest_for(entries, key);
    let (object, digest) = object(entries, &manifest);
    let file_bytes = manifest["file_bytes"].as_u64().unwrap();
    publish(store, key, &object, &digest, entries.len() as u64, file_bytes);
}
