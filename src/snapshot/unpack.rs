//! Unpacking a snapshot into an empty staging directory, under one rule: restores stay
//! inside their target.
//!
//! The stream is read by the content layer's codec ([`crate::content::codec::extract`]),
//! which holds the rules below for snapshots and L0 archives alike; this module adds what
//! is a snapshot's own (the root `actions-v1/`, where symlinks may be, the manifest last,
//! the sidecar's bounds and digests). Every entry is checked before anything is written
//! for it; the first failure stops the unpack with [`Error::Corrupt`] (the caller deletes
//! the staging directory, so nothing of a rejected snapshot survives):
//!
//! * the path, taken as bytes, must be a [`RelPath`] (no absolute path, no `..` or `.`
//!   segment, no empty segment, no NUL), and lie under `actions-v1/`, or be the manifest.
//!   Any other byte is allowed in a name: names and symlink texts that are not UTF-8 are
//!   restored byte for byte and compared with the manifest in the name encoding
//!   ([`crate::fs::name`]);
//! * types: directories, regular files and symlinks only. Hard links, character and block
//!   devices, FIFOs, sparse files, pax global headers and anything else are rejected (not
//!   skipped);
//! * no path twice; no entry after the manifest, which must be the last one;
//! * symlinks only strictly below an entry's `artifacts/` directory
//!   ([`is_inside_entry_artifacts`]): a symlink at a layout position (`actions-v1/third_party
//!   -> /elsewhere`, a unit, a key, `artifacts` itself) is rejected, because the engine
//!   would later save entries through it;
//! * parent directories are created without passing through a symlink
//!   ([`fs::create_dir_all_within`]), so a symlink in the archive can never be written
//!   through; files are created with `O_CREAT|O_EXCL` (never through a final symlink, never
//!   over an existing path);
//! * file modes are 0644, or 0755 with the owner-exec bit: setuid, setgid and sticky bits
//!   (and group/other write) are **dropped**, not rejected; ownership and mtimes in the
//!   archive are ignored;
//! * sizes are bounded: the number of entries and the sum of file bytes may not exceed the
//!   sidecar's declared counts ([`UnpackLimits`]), checked before each file is written;
//! * only zero padding may follow the end of the tar stream;
//! * at the end, the manifest (strict record of version 2, or version 1 migrated; digest
//!   of the stored record equal to the sidecar's) must list exactly the directories, files
//!   (size, owner-exec bit, digest of the bytes actually written) and symlinks that were
//!   unpacked.
//!
//! Files are hashed once, while written, under the algorithm the sidecar's object digest
//! uses ([`UnpackLimits::algorithm`]; a manifest recording another one costs one more read
//! of the written files). The parsing thread decompresses and checks; regular files are
//! written, hashed and chmodded by a few writer threads so that decompression, hashing and
//! writing overlap. Every check above happens before a file is handed to a writer, and
//! the writers are always joined before [`unpack`] returns, so nothing is written into
//! the destination after an error is reported. Nothing is fsynced file by file (a restore
//! makes the whole tree durable with one `syncfs` before the swap).
//!
//! Symlink *targets* are kept as given (an L1 entry may record `lib.so -> /usr/lib/x.so`);
//! strata never follows them while restoring.
//!
//! # Limitations
//! GNU long-name and long-link entries are read into memory by the `tar` crate before
//! strata sees the entry; a reader in front of it (`content::codec`'s `tar_entry::ExtensionLimit`) rejects one
//! that claims more than 64 KiB, and any pax or sparse header (strata never writes them),
//! from the header alone, so a few kilobytes of zstd cannot make unpack allocate gigabytes.

use std::io::Read;
use std::path::Path;

use super::manifest::{MANIFEST_ENTRY, MAX_MANIFEST_BYTES, SnapshotManifest, load_manifest};
use super::{CARRIED_DIR, Compression, Error};
use crate::content::codec::{self, ManifestAt, ReadSpec};
use crate::content::verify::Modes;
use crate::digest::DigestAlgorithm;
use crate::fs::temp;
use crate::fs::{self, RelPath};
use crate::l1::layout::is_inside_entry_artifacts;

/// The most a snapshot may expand per byte of its object: the uncompressed size its
/// sidecar declares (512 bytes of tar header per entry plus the file bytes) must be at most
/// this multiple of the object size, or [`MIN_EXPANSION_ALLOWANCE_BYTES`], whichever is
/// larger. Build outputs compress 2–20×; the cap only stops a small object that declares
/// (and would unpack) a huge tree.
pub const MAX_EXPANSION_RATIO: u64 = 1000;

/// Declared sizes up to this many bytes are always accepted, whatever the ratio.
pub const MIN_EXPANSION_ALLOWANCE_BYTES: u64 = 64 * 1024 * 1024;

/// Bounds and expectations for [`unpack`], normally taken from the sidecar.
#[derive(Debug, Clone, Default)]
pub struct UnpackLimits {
    /// Most directories + files + symlinks.
    pub max_entries: u64,
    /// Most bytes of file content in total.
    pub max_file_bytes: u64,
    /// The manifest's record digest must equal this (`sha256:<hex>`), if given.
    pub manifest_digest: Option<crate::record::RecordDigest>,
    /// The manifest's key must equal this, if given.
    pub key: Option<crate::snapshot::key::ManifestKey>,
    /// The compression the object must use, if given.
    pub compression: Option<Compression>,
    /// The algorithm files are hashed with while written (the sidecar's object digest
    /// algorithm); `None`: the default ([`crate::content::DEFAULT_ALGORITHM`]).
    pub algorithm: Option<DigestAlgorithm>,
    /// Write files on the unpacking thread instead of a few writer threads (entry objects
    /// installed side by side; see [`ReadSpec::writer_threads`]). Default: writer threads.
    pub inline_writes: bool,
    /// Unpack only this directory of the snapshot (`actions-v1/<entry path>`), as `dest`
    /// itself: its ancestors are checked, not created ([`ReadSpec::subtree`]). Default:
    /// the whole snapshot.
    pub subtree: Option<String>,
    /// The object's size in bytes, if known ([`ReadSpec::input_bytes`]).
    pub object_bytes: Option<u64>,
}

/// What [`unpack`] restored.
#[derive(Debug, Clone)]
pub struct UnpackReport {
    /// The verified manifest.
    pub manifest: SnapshotManifest,
    /// Its record digest as stored (`sha256:<hex>`).
    pub manifest_digest: crate::record::RecordDigest,
    /// Number of regular files written.
    pub files: u64,
    /// Bytes of file content written.
    pub file_bytes: u64,
}

/// Only strictly below an entry's `artifacts/` may a snapshot hold symlinks.
fn symlink_allowed(rel: &RelPath) -> Result<(), String> {
    let in_artifacts = rel
        .as_str()
        .strip_prefix(CARRIED_DIR)
        .and_then(|r| r.strip_prefix('/'))
        .is_some_and(is_inside_entry_artifacts);
    if in_artifacts {
        return Ok(());
    }
    Err(format!(
        "{rel} is a symlink outside an entry's artifacts/ directory; only artifacts may be \
         symlinks (a symlink at a layout position would send later cache writes outside the \
         cache directory)"
    ))
}

/// Unpacks the snapshot file `object` into `dest`, an existing empty directory (see the
/// module docs for every check). `label` names the snapshot in errors (its key).
///
/// # Errors
/// [`Error::Corrupt`] for anything wrong with the snapshot; [`Error::Local`] for local
/// write failures. On error `dest` holds a partial tree: delete it.
pub fn unpack(
    object: &Path,
    dest: &Path,
    limits: &UnpackLimits,
    label: &str,
) -> Result<UnpackReport, Error> {
    let mut file = fs::open(object)?;
    unpack_from(&mut file, dest, limits, label)
}

/// [`unpack`] reading the object's bytes from `input` (a restore passes the download as
/// it arrives), to the end of the compressed stream.
///
/// # Errors
/// As [`unpack`]; a failure to read `input` is [`Error::Corrupt`] (a restore reports its
/// download's own error first).
pub fn unpack_from(
    input: &mut (dyn Read + Send),
    dest: &Path,
    limits: &UnpackLimits,
    label: &str,
) -> Result<UnpackReport, Error> {
    let spec = ReadSpec {
        what: "a strata snapshot",
        kind_of_archive: "snapshots",
        compression: limits.compression,
        manifest_name: MANIFEST_ENTRY,
        manifest_at: ManifestAt::Last,
        max_manifest_bytes: MAX_MANIFEST_BYTES,
        max_entries: limits.max_entries,
        max_file_bytes: limits.max_file_bytes,
        directories: true,
        root: Some(CARRIED_DIR),
        subtree: limits.subtree.as_deref(),
        symlink_allowed: &symlink_allowed,
        modes: Modes { dir: 0o755, file: 0o644, executable: 0o755 },
        algorithm: limits.algorithm.unwrap_or(crate::content::DEFAULT_ALGORITHM),
        writer_threads: !limits.inline_writes,
        input_bytes: limits.object_bytes,
    };
    type Parsed = ((SnapshotManifest, crate::record::RecordDigest), Vec<crate::content::Record>);
    let parse = |bytes: &[u8]| -> Result<Parsed, String> {
        let (manifest, digest) = load_manifest(bytes, label).map_err(|e| match e {
            Error::Corrupt { reason, .. } => reason,
            other => other.one_line(),
        })?;
        if let Some(expected) = &limits.manifest_digest
            && expected != &digest
        {
            return Err(format!(
                "the manifest digest {digest} differs from the sidecar's {expected}"
            ));
        }
        if manifest.layout != CARRIED_DIR {
            return Err(format!("the manifest describes layout {:?}", manifest.layout));
        }
        if let Some(key) = &limits.key
            && &manifest.key != key
        {
            return Err(format!("the manifest names another key ({})", manifest.key));
        }
        let records = manifest.entries.clone();
        Ok(((manifest, digest), records))
    };
    let extracted = codec::extract(input, dest, &spec, parse).map_err(|e| match e {
        codec::Error::Archive(reason) => Error::corrupt(label, reason),
        codec::Error::Local(e) => Error::Local(e),
    })?;
    let (manifest, manifest_digest) = extracted.manifest;
    if manifest.file_bytes != extracted.file_bytes {
        return Err(Error::corrupt(label, "manifest mismatch: the total file size differs"));
    }
    Ok(UnpackReport {
        manifest,
        manifest_digest,
        files: extracted.files,
        file_bytes: extracted.file_bytes,
    })
}

/// Unpacks a local snapshot file into `dest`, which must not exist: into a staging
/// directory beside it first, then renamed into place (no replace). Without a sidecar the
/// entry count and byte bounds are not enforced (the file is the caller's own); every
/// other check of [`unpack`] applies.
///
/// # Errors
/// As [`unpack`]; [`Error::Local`] if `dest` exists or its parent cannot be written.
pub fn unpack_into_new(object: &Path, dest: &Path) -> Result<UnpackReport, Error> {
    unpack_into_new_observed(object, dest, &crate::progress::Silent)
}

/// [`unpack_into_new`], reporting the phase `unpack` to `progress`: the object's bytes as
/// they are read.
///
/// # Errors
/// As [`unpack_into_new`].
pub fn unpack_into_new_observed(
    object: &Path,
    dest: &Path,
    progress: &dyn crate::progress::Progress,
) -> Result<UnpackReport, Error> {
    let dest = fs::absolute(dest)?;
    if fs::symlink_metadata_opt(&dest)?.is_some() {
        return Err(fs::Error::AlreadyExists { path: dest }.into());
    }
    // The parents this unpack creates go again if it fails: a rejected archive leaves
    // nothing, not even an empty directory chain.
    let created = match dest.parent() {
        Some(parent) => fs::create_dir_all_recorded(parent)?,
        None => fs::CreatedDirs::default(),
    };
    let result = unpack_into_created(object, &dest, progress);
    match &result {
        Ok(_) => created.keep(),
        Err(_) => created.remove(),
    }
    result
}

/// [`unpack_into_new_observed`] once `dest`'s parent exists.
fn unpack_into_created(
    object: &Path,
    dest: &Path,
    progress: &dyn crate::progress::Progress,
) -> Result<UnpackReport, Error> {
    let staging = temp::staging_beside(dest, 0o755)?;
    let limits =
        UnpackLimits { max_entries: u64::MAX, max_file_bytes: u64::MAX, ..UnpackLimits::default() };
    let label = object.display().to_string();
    let mut file = fs::open(object)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let phase = crate::progress::Phase::begin(progress, "unpack", size);
    let mut input = crate::progress::Reader::new(&mut file, progress);
    let report = unpack_from(&mut input, staging.path(), &limits, &label);
    drop(phase);
    let report = report?;
    fs::publish_dir(staging, dest, false).map_err(|(e, _staging)| Error::Local(e))?;
    Ok(report)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::snapshot::pack::{PackOptions, pack};
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    fn inventory(root: &Path) -> Vec<(String, String)> {
        fs::walk(root)
            .map(|e| e.unwrap())
            .map(|e| {
                let what = match e.kind {
                    fs::EntryKind::File => {
                        let mode = e.metadata.permissions().mode() & 0o7777;
                        format!("file {:o} {:?}", mode, std::fs::read(&e.path).unwrap())
                    }
                    fs::EntryKind::Dir => "dir".to_owned(),
                    fs::EntryKind::Symlink => format!("link {}", fs::read_link(&e.path).unwrap()),
                    fs::EntryKind::Special(k) => k.to_owned(),
                };
                (e.rel.as_str().to_owned(), what)
            })
            .collect()
    }

    fn limits(report: &crate::snapshot::pack::PackReport) -> UnpackLimits {
        let m = &report.manifest;
        UnpackLimits {
            max_entries: m.entry_count(),
            max_file_bytes: m.file_bytes,
            manifest_digest: Some(report.manifest_digest.clone()),
            key: Some(m.key.clone()),
            compression: None,
            algorithm: Some(report.object_digest.algorithm()),
            ..UnpackLimits::default()
        }
    }

    /// Every phase reported: label, total, bytes advanced.
    #[derive(Default)]
    struct Phases(std::sync::Mutex<Vec<(String, u64, u64)>>);

    impl crate::progress::Progress for Phases {
        fn begin(&self, label: &str, total_bytes: u64) {
            self.0.lock().unwrap().push((label.to_owned(), total_bytes, 0));
        }
        fn advance(&self, bytes: u64) {
            self.0.lock().unwrap().last_mut().unwrap().2 += bytes;
        }
        fn finish(&self) {}
    }

    #[test]
    fn pack_and_unpack_report_progress_up_to_their_totals() {
        let cache = tempfile::tempdir().unwrap();
        let entry = cache.path().join("actions-v1/third_party/u/k/artifacts");
        std::fs::create_dir_all(&entry).unwrap();
        std::fs::write(entry.join("big"), vec![3u8; 5 << 20]).unwrap();
        std::fs::write(entry.join("small"), b"abc").unwrap();
        // A leftover is not packed, nor counted.
        std::fs::write(entry.join(".big.strata-0123456789abcdef.tmp"), vec![0u8; 4096]).unwrap();
        let work = tempfile::tempdir().unwrap();
        let object = work.path().join("object");
        let phases = Phases::default();
        let options = PackOptions::new(crate::snapshot::key::ManifestKey::parse("k").unwrap());
        let report =
            crate::snapshot::pack::pack_observed(cache.path(), &object, &options, &phases).unwrap();
        let file_bytes = (5 << 20) + 3;
        assert_eq!(report.manifest.file_bytes, file_bytes);
        assert_eq!(*phases.0.lock().unwrap(), [("pack".to_owned(), file_bytes, file_bytes)]);

        let phases = Phases::default();
        unpack_into_new_observed(&object, &work.path().join("dest"), &phases).unwrap();
        let size = report.object_size_bytes;
        assert_eq!(*phases.0.lock().unwrap(), [("unpack".to_owned(), size, size)]);
    }

    fn round_trip(cache: &Path, compression: Compression) -> (PathBuf, tempfile::TempDir) {
        let work = tempfile::tempdir().unwrap();
        let object = work.path().join("object");
        let options = PackOptions {
            compression,
            level: compression.default_level(),
            ..PackOptions::new(crate::snapshot::key::ManifestKey::parse("test-key").unwrap())
        };
        let report = pack(cache, &object, &options).unwrap();
        let (digest, size) = crate::digest::ContentDigest::of_reader(
            report.object_digest.algorithm(),
            std::fs::File::open(&object).unwrap(),
        )
        .unwrap();
        assert_eq!((digest, size), (report.object_digest, report.object_size_bytes));
        let dest = work.path().join("dest");
        std::fs::create_dir(&dest).unwrap();
        let unpacked = unpack(&object, &dest, &limits(&report), "test-key").unwrap();
        assert_eq!(unpacked.manifest, report.manifest);
        (dest, work)
    }

    #[test]
    fn pack_then_unpack_gives_back_the_tree() {
        let src = tempfile::tempdir().unwrap();
        let cache = src.path();
        let entry = cache.join("actions-v1/third_party/zlib/k1");
        std::fs::create_dir_all(entry.join("artifacts/lib")).unwrap();
        std::fs::write(entry.join("manifest.json"), b"{}").unwrap();
        std::fs::write(entry.join("artifacts/lib/libz.so.1"), vec![7u8; 70_000]).unwrap();
        std::fs::write(entry.join("artifacts/tool"), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            entry.join("artifacts/tool"),
            std::fs::Permissions::from_mode(0o4775),
        )
        .unwrap();
        std::fs::write(entry.join("artifacts/.hidden"), b"").unwrap();
        symlink("libz.so.1", entry.join("artifacts/lib/libz.so")).unwrap();
        symlink("/usr/lib/libc.so", entry.join("artifacts/lib/ext.so")).unwrap();
        let long = "d".repeat(120);
        std::fs::create_dir_all(cache.join("actions-v1").join(&long).join(&long)).unwrap();
        std::fs::write(cache.join("actions-v1").join(&long).join(&long).join("f"), b"long")
            .unwrap();
        std::fs::write(cache.join("actions-v1/third_party/.last-used"), b"").unwrap();
        // Never packed: machine-local state and crash leftovers.
        std::fs::create_dir_all(cache.join(".locks/entry")).unwrap();
        std::fs::create_dir_all(cache.join(".local/tool-memo")).unwrap();
        std::fs::write(cache.join(".updated"), b"").unwrap();
        let leftover = cache.join("actions-v1/third_party/zlib/.k2.tmp-0123456789abcdef");
        std::fs::create_dir_all(leftover.join("artifacts")).unwrap();
        std::fs::write(leftover.join("artifacts/partial"), b"x").unwrap();
        std::fs::write(entry.join("artifacts/.strata-Ab12Cd.tmp"), b"x").unwrap();

        for compression in [Compression::Zstd, Compression::Gzip] {
            let (dest, _work) = round_trip(cache, compression);
            let mut expected = inventory(&cache.join("actions-v1"));
            expected.retain(|(rel, _)| !rel.contains(".k2.tmp-") && !rel.contains(".strata-"));
            for (rel, what) in expected.iter_mut() {
                if rel.ends_with("artifacts/tool") {
                    *what = what.replacen("file 4775", "file 755", 1);
                }
            }
            assert_eq!(inventory(&dest.join("actions-v1")), expected);
            let top: Vec<String> = inventory(&dest).into_iter().map(|(r, _)| r).collect();
            assert!(top.iter().all(|r| r.starts_with("actions-v1")), "{top:?}");
        }
    }

    #[test]
    fn an_empty_cache_packs_an_empty_snapshot() {
        let src = tempfile::tempdir().unwrap();
        let (dest, _work) = round_trip(src.path(), Compression::Zstd);
        assert_eq!(inventory(&dest), [("actions-v1".to_owned(), "dir".to_owned())]);
    }

    /// Bytes after the compressed tar stream, in either compression: another member or
    /// frame with data, or garbage, rejects the object as data after the tar stream (not as
    /// damage inside an earlier entry); a member of zero padding does not.
    #[test]
    fn bytes_after_the_stream_are_rejected_in_both_compressions() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("actions-v1/a")).unwrap();
        // More than one 256 KiB block of the decoder that runs ahead.
        std::fs::write(src.path().join("actions-v1/a/f"), vec![5u8; 600_000]).unwrap();
        let gzip = |data: &[u8]| {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut encoder, data).unwrap();
            encoder.finish().unwrap()
        };
        let zstd = |data: &[u8]| zstd::encode_all(data, 1).unwrap();
        for compression in [Compression::Zstd, Compression::Gzip] {
            let work = tempfile::tempdir().unwrap();
            let object = work.path().join("o");
            let options = PackOptions {
                compression,
                level: 1,
                ..PackOptions::new(crate::snapshot::key::ManifestKey::parse("k").unwrap())
            };
            pack(src.path(), &object, &options).unwrap();
            let original = std::fs::read(&object).unwrap();
            let member = |data: &[u8]| match compression {
                Compression::Zstd => zstd(data),
                Compression::Gzip => gzip(data),
            };
            for (what, tail, expect) in [
                ("garbage", b"JUNKJUNK".to_vec(), Some("after the tar stream")),
                ("data", member(b"smuggled"), Some("data after the end of the tar stream")),
                ("zero padding", member(&[0u8; 4096]), None),
            ] {
                let mut bytes = original.clone();
                bytes.extend_from_slice(&tail);
                let tampered = work.path().join(format!("tampered-{what}"));
                std::fs::write(&tampered, &bytes).unwrap();
                let dest = work.path().join(format!("dest-{what}"));
                let result = unpack_into_new(&tampered, &dest);
                match expect {
                    Some(reason) => {
                        let e = result.expect_err(&format!("{compression} {what}"));
                        let text = e.one_line();
                        assert!(text.contains(reason), "{compression} {what}: {text}");
                        assert!(!dest.exists(), "{compression} {what}");
                    }
                    None => {
                        result.unwrap();
                        assert_eq!(
                            std::fs::read(dest.join("actions-v1/a/f")).unwrap().len(),
                            600_000
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn limits_are_enforced() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("actions-v1/a")).unwrap();
        std::fs::write(src.path().join("actions-v1/a/f"), vec![1u8; 1000]).unwrap();
        let work = tempfile::tempdir().unwrap();
        let object = work.path().join("o");
        let report = pack(
            src.path(),
            &object,
            &PackOptions::new(crate::snapshot::key::ManifestKey::parse("k").unwrap()),
        )
        .unwrap();
        for (tweak, expect) in [
            (UnpackLimits { max_file_bytes: 999, ..limits(&report) }, "file content"),
            (UnpackLimits { max_entries: 2, ..limits(&report) }, "entries"),
            (
                UnpackLimits {
                    manifest_digest: Some(crate::record::RecordDigest::from_stored("sha256:00")),
                    ..limits(&report)
                },
                "digest",
            ),
            (
                UnpackLimits {
                    key: Some(crate::snapshot::key::ManifestKey::parse("other").unwrap()),
                    ..limits(&report)
                },
                "another key",
            ),
            (
                UnpackLimits { compression: Some(Compression::Gzip), ..limits(&report) },
                "expected gzip",
            ),
        ] {
            let dest = tempfile::tempdir().unwrap();
            let err = unpack(&object, dest.path(), &tweak, "k").unwrap_err();
            assert!(err.is_corrupt() && err.to_string().contains(expect), "{expect}: {err}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        #[test]
        fn random_trees_round_trip(
            files in proptest::collection::btree_map("[a-c]{1,2}(/[a-c]{1,2}){0,2}", (0usize..3000, proptest::bool::ANY), 0..12)
        ) {
            let src = tempfile::tempdir().unwrap();
            let root = src.path().join("actions-v1");
            std::fs::create_dir_all(&root).unwrap();
            for (path, (len, exec)) in &files {
                let p = root.join(path);
                // A path that is a prefix directory of another is skipped as a file.
                if p.exists() || std::fs::create_dir_all(p.parent().unwrap()).is_err() {
                    continue;
                }
                if std::fs::write(&p, vec![(*len % 251) as u8; *len]).is_err() {
                    continue;
                }
                let mode = if *exec { 0o755 } else { 0o644 };
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            let (dest, _work) = round_trip(src.path(), Compression::Zstd);
            proptest::prop_assert_eq!(inventory(&dest.join("actions-v1")), inventory(&root));
        }
    }
}
