//! Compile entries: what one cached compilation keeps in the L1
//! cache, and how a lookup decides that a candidate still applies.
//!
//! ```text
//! <cache root>/actions-v1/compile/<first 2 hex of key>/<key>/
//!   manifest.json        strata.compile_entry record: candidates, newest first
//!   objects/<hex>        outputs by content digest (object, depfile, side outputs,
//!                        stdout, stderr), shared by the candidates
//! ```
//!
//! The key (64 hex, BLAKE3) covers the toolchain identity, the relocated arguments, the
//! source's digest and the environment that changes a compilation. Under one key, a
//! *candidate* is one result together with what it depended on:
//!
//! * `headers`: every header the compiler read (from its own dependency output), with its
//!   digest; all must still have it;
//! * `absent`: for each header, the same name in every earlier include directory, where it
//!   was not found; none may exist now (a header created there would shadow the one read:
//!   a MISS where ccache's direct mode gives a false HIT);
//! * `pins`: the absolute paths under the working or a base directory that the outputs
//!   embed (`__FILE__`, debug information); each must resolve to itself here, so an object
//!   naming `/w/a/src/x.c` is never handed to a checkout at `/w/b`;
//! * `outputs`: role, digest and size of each output; `stdout`/`stderr`: the compiler's
//!   messages, replayed on a HIT.
//!
//! Readers take no lock: `manifest.json` and every object are replaced by rename, so a
//! reader sees a whole old or a whole new file, and every byte handed back is hashed
//! against the candidate's digest on the way out (or vouched for by the entry's
//! verification memo, [`crate::content::memo`]). Writers hold the entry lock
//! (`.locks/entry/…`) while they read, extend and rewrite the manifest. Objects and the
//! manifest are not fsynced: after a power cut, a damaged object fails its digest and is a
//! MISS.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::content::VerifyMemo;
use crate::content::layout::CacheRoot;
use crate::digest::{ContentDigest, Sha256Digest};
use crate::fs::{self, FileStamp, RelPath};
use crate::record::{self, Envelope, Schema};

use super::location::Location;

/// Schema of a compile entry's manifest.
pub const COMPILE_ENTRY_SCHEMA: Schema =
    Schema { name: "strata.compile_entry", version: 1, features: &[] };

/// The domain directory under `actions-v1`.
pub const COMPILE_DIR: &str = "compile";

/// Most candidates kept under one key (the oldest are dropped).
pub const MAX_CANDIDATES: usize = 8;

/// Largest manifest read, in bytes.
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// A header a candidate read: its path (relocated: relative to the working directory when
/// it lies under a base directory; in the name encoding of [`crate::fs::name`]) and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Path, relocated and name-encoded.
    pub path: String,
    /// Content digest.
    pub digest: ContentDigest,
}

/// One output file of a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// `object`, `depfile`, or the extension of a side output (`dwo`, `gcno`, `su`).
    pub role: String,
    /// Content digest (the file is `objects/<hex>`).
    pub digest: ContentDigest,
    /// Size in bytes.
    pub size_bytes: u64,
}

/// One cached result and what it depends on (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    /// Headers read, in the order the compiler listed them.
    pub headers: Vec<Header>,
    /// Paths (name-encoded) that must not exist: relative to the working directory when
    /// the include directory was given relative or lies under a base directory, else
    /// absolute.
    pub absent: Vec<String>,
    /// Absolute paths (name-encoded) the outputs embed; each must resolve to itself.
    pub pins: Vec<String>,
    /// The working directory of the compilation that saved it (name-encoded).
    pub origin_cwd: String,
    /// Its base directories (name-encoded), to move the paths a depfile or message names.
    pub origin_base_dirs: Vec<String>,
    /// Outputs, in the order the launcher writes them.
    pub outputs: Vec<Output>,
    /// The compiler's standard output, if it wrote any.
    pub stdout: Option<Output>,
    /// The compiler's standard error, if it wrote any.
    pub stderr: Option<Output>,
    /// Save time, UTC RFC 3339.
    pub created_at: String,
}

/// The payload of `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompileManifest {
    /// The key (64 lowercase hex).
    pub key: String,
    /// Candidates, newest first.
    pub candidates: Vec<Candidate>,
}

/// Where one key's entry lives.
#[derive(Debug, Clone)]
pub struct EntryPlace {
    /// The entry directory.
    pub dir: PathBuf,
    /// Its path relative to `actions-v1` (`compile/ab/abcd…`).
    pub rel: String,
    /// The entry lock.
    pub lock: PathBuf,
    /// The entry's verification memo (machine-local).
    pub memo: PathBuf,
}

impl EntryPlace {
    /// The entry of `key` (64 hex) in `cache`.
    pub fn new(cache: &CacheRoot, key: &str) -> Self {
        let prefix = key.get(..2).unwrap_or("00");
        let rel = format!("{COMPILE_DIR}/{prefix}/{key}");
        EntryPlace {
            dir: cache.actions_dir().join(&rel),
            lock: cache.entry_lock(&rel),
            memo: cache.verify_memo(&rel),
            rel,
        }
    }

    /// `manifest.json`.
    pub fn manifest(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }

    /// The stored file of `digest`.
    pub fn object(&self, digest: &ContentDigest) -> PathBuf {
        self.dir.join("objects").join(digest.to_hex())
    }
}

/// The memo name of an object.
pub fn object_memo_name(digest: &ContentDigest) -> RelPath {
    RelPath::new(format!("objects/{}", digest.to_hex())).expect("hex is a valid relative path")
}

/// The memo name of a header (its absolute path, hashed).
pub fn header_memo_name(path: &Path) -> RelPath {
    let h = Sha256Digest::of_bytes(path.as_os_str().as_encoded_bytes());
    RelPath::new(format!("headers/{}", h.to_hex())).expect("hex is a valid relative path")
}

/// Reads the manifest at `place`. `Ok(None)` when there is none; an error (a reason) when it
/// cannot be used (the entry is then rewritten by the next save).
pub fn load(place: &EntryPlace, key: &str) -> Result<Option<CompileManifest>, String> {
    let bytes = match fs::read_capped_nofollow(&place.manifest(), MAX_MANIFEST_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err("manifest.json is larger than 16 MiB".into()),
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let (_, manifest) = record::load_as::<CompileManifest>(&bytes, &COMPILE_ENTRY_SCHEMA)
        .map_err(|e| format!("manifest.json: {e}"))?;
    if manifest.key != key {
        return Err(format!("manifest.json names key {}, not {key}", manifest.key));
    }
    Ok(Some(manifest))
}

/// Writes `manifest` at `place` (temp file and rename).
///
/// # Errors
/// I/O errors naming the path.
pub fn store(place: &EntryPlace, manifest: &CompileManifest) -> Result<(), fs::Error> {
    let path = place.manifest();
    let envelope = Envelope::seal(&COMPILE_ENTRY_SCHEMA, Vec::new(), manifest)
        .map_err(|e| fs::Error::io("encode", &path, std::io::Error::other(e.to_string())))?;
    fs::write_atomic_nosync(&path, &envelope.to_bytes(), 0o644)
}

/// Stores `bytes` as the object of their digest under `place` (`objects/` created).
///
/// # Errors
/// I/O errors naming the path.
pub fn store_bytes(
    place: &EntryPlace,
    digest: &ContentDigest,
    bytes: &[u8],
) -> Result<(), fs::Error> {
    let path = place.object(digest);
    fs::create_dir_all(path.parent().unwrap_or(&place.dir))?;
    fs::write_atomic_nosync(&path, bytes, 0o644)
}

/// Reads a header (following symlinks, as the compiler does) and returns its digest and
/// bytes, with the stamp it had; a change while reading is an error.
///
/// # Errors
/// I/O errors naming the path; [`fs::Error::ChangedWhileReading`].
pub fn read_header(
    path: &Path,
    algorithm: crate::digest::DigestAlgorithm,
) -> Result<(ContentDigest, Vec<u8>, FileStamp), fs::Error> {
    use std::io::Read;
    let mut file = fs::open(path)?;
    let before = file.metadata().map_err(|e| fs::Error::io("stat", path, e))?;
    let mut bytes = Vec::with_capacity(before.len() as usize);
    file.read_to_end(&mut bytes).map_err(|e| fs::Error::io("read", path, e))?;
    let after = file.metadata().map_err(|e| fs::Error::io("stat", path, e))?;
    let stamp = FileStamp::of(&before);
    if FileStamp::of(&after) != stamp || bytes.len() as u64 != stamp.size_bytes {
        return Err(fs::Error::ChangedWhileReading { path: path.into() });
    }
    Ok((ContentDigest::of_bytes(algorithm, &bytes), bytes, stamp))
}

/// Why a candidate does not apply here (for `STRATA_LOG=debug` and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// An embedded absolute path would differ here.
    Pinned(String),
    /// A header that would shadow a recorded one exists now.
    Shadowed(PathBuf),
    /// A header is missing, unreadable or has other content.
    Header(PathBuf),
}

/// Checks `candidate` at `here`: pins, then shadow probes, then header digests (a header
/// whose stamp the memo vouches for is not re-read). Headers read in full are remembered
/// in `memo` (from `began`).
pub fn check(
    candidate: &Candidate,
    here: &Location,
    memo: &mut VerifyMemo,
    began: SystemTime,
) -> Result<(), Mismatch> {
    let origin_cwd = decode_path(&candidate.origin_cwd);
    for pin in &candidate.pins {
        let pin_path = decode_path(pin);
        if here.translate(&origin_cwd, &pin_path) != pin_path {
            return Err(Mismatch::Pinned(pin.clone()));
        }
    }
    for absent in &candidate.absent {
        let path = here.resolve(&decode_path(absent));
        if fs::symlink_metadata_opt(&path).ok().flatten().is_some() {
            return Err(Mismatch::Shadowed(path));
        }
    }
    for header in &candidate.headers {
        let path = here.resolve(&decode_path(&header.path));
        let name = header_memo_name(&path);
        let stamp = fs::metadata(&path).map(|m| FileStamp::of(&m));
        match stamp {
            Ok(stamp) if memo.vouches(&name, &stamp, &header.digest) => continue,
            Ok(_) => {}
            Err(_) => return Err(Mismatch::Header(path)),
        }
        match read_header(&path, header.digest.algorithm()) {
            Ok((digest, _, stamp)) if digest == header.digest => {
                memo.remember(&name, stamp, digest, began);
            }
            _ => return Err(Mismatch::Header(path)),
        }
    }
    Ok(())
}

/// A name-encoded path ([`crate::fs::name`]) back as a path.
pub fn decode_path(text: &str) -> PathBuf {
    match fs::name::decode_os(text) {
        Ok(os) => PathBuf::from(os),
        Err(_) => PathBuf::from(text),
    }
}

/// The name encoding of `path`.
pub fn encode_path(path: &Path) -> String {
    fs::name::encode_os(path.as_os_str())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::digest::DigestAlgorithm;

    #[test]
    fn candidates_check_pins_probes_and_headers() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("a/src/inc")).unwrap();
        std::fs::create_dir_all(root.join("a/src/first")).unwrap();
        std::fs::create_dir_all(root.join("a/build")).unwrap();
        std::fs::write(root.join("a/src/inc/x.h"), b"int x;\n").unwrap();
        let here = Location::new(&root.join("a/build"), &[root.join("a")]);
        let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"int x;\n");
        let cand = Candidate {
            headers: vec![Header { path: "../src/inc/x.h".into(), digest }],
            absent: vec!["../src/first/x.h".into()],
            pins: vec![],
            origin_cwd: encode_path(&root.join("a/build")),
            origin_base_dirs: vec![encode_path(&root.join("a"))],
            outputs: vec![],
            stdout: None,
            stderr: None,
            created_at: String::new(),
        };
        let mut memo = VerifyMemo::new("t");
        assert_eq!(check(&cand, &here, &mut memo, SystemTime::now()), Ok(()));
        // A header created earlier on the search path shadows it.
        std::fs::write(root.join("a/src/first/x.h"), b"int y;\n").unwrap();
        assert_eq!(
            check(&cand, &here, &mut memo, SystemTime::now()),
            Err(Mismatch::Shadowed(root.join("a/src/first/x.h")))
        );
        std::fs::remove_file(root.join("a/src/first/x.h")).unwrap();
        // Changed content.
        std::fs::write(root.join("a/src/inc/x.h"), b"int z;\n").unwrap();
        assert_eq!(
            check(&cand, &here, &mut memo, SystemTime::now()),
            Err(Mismatch::Header(root.join("a/src/inc/x.h")))
        );
        // A pin on the origin's source directory fails elsewhere, holds at the origin.
        let pinned = Candidate { pins: vec![encode_path(&root.join("a/src"))], ..cand };
        std::fs::write(root.join("a/src/inc/x.h"), b"int x;\n").unwrap();
        assert_eq!(check(&pinned, &here, &mut memo, SystemTime::now()), Ok(()));
        std::fs::create_dir_all(root.join("b/build")).unwrap();
        std::fs::create_dir_all(root.join("b/src/inc")).unwrap();
        std::fs::write(root.join("b/src/inc/x.h"), b"int x;\n").unwrap();
        let there = Location::new(&root.join("b/build"), &[root.join("b")]);
        assert!(matches!(
            check(&pinned, &there, &mut memo, SystemTime::now()),
            Err(Mismatch::Pinned(_))
        ));
        let unpinned = Candidate { pins: vec![], ..pinned };
        assert_eq!(check(&unpinned, &there, &mut memo, SystemTime::now()), Ok(()));
    }
}
