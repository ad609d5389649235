//! Compile entries: what one cached compilation keeps in the L1 cache (docs/format.md
//! "Compile entries").
//!
//! ```text
//! <cache root>/actions-v1/compile/<first 2 hex of key>/<key>/
//!   manifest.json        strata.compile_entry v2 record: candidates, newest first
//!   objects/<hex>        outputs by content digest (object, side outputs, messages),
//!                        shared by the candidates
//! ```
//!
//! The key (64 hex, BLAKE3) covers the toolchain identity, the family, the arguments (in
//! their record form, output names left out), the source's digest and the environment that
//! changes a compilation. Under one key, a *candidate* is one result together with
//! everything the compile looked at, as facts that must all still hold for a HIT:
//!
//! * `inputs`: every file it read (headers, `.incbin` data, a precompiled header, the
//!   programs it ran), with its digest;
//! * `names`, by directory: every name it looked up and did not find (a header in an
//!   earlier include directory, `__has_include("opt.h")`, `x.h.gch` next to each header):
//!   none may exist; names it looked up that existed and were not read (include
//!   directories), with what they were;
//! * `listed`: directories whose entries it read, with the digest of the names;
//! * `pins`: the absolute paths under the working or a base directory that the outputs
//!   embed (`__FILE__`, debug information); each must name itself here;
//! * `object_name`: the object's path at the origin, when an output depends on it;
//! * `outputs`, `depfile`, `stdout`/`stderr`: what a HIT writes and replays.
//!
//! Paths are in their record form ([`super::location::Spelled`]): relative to the working
//! directory, anchored to it when under a base directory, else absolute.
//!
//! `observed_by` says how the facts were learnt: `trace` (the compiler's process tree was
//! traced: exactly what it touched) or `model` (where tracing is refused: the dependency
//! output and the family's model of include search; see [`super::model`]).
//!
//! Readers take no lock: `manifest.json` and every object are replaced by rename (L1's one
//! entry writer, [`crate::l1::write`], without fsync), so a reader sees a whole old or a
//! whole new file, and every byte handed back is hashed against the candidate's digest on
//! the way out (or vouched for by the entry's verification memo, [`crate::content::memo`],
//! which remembers an object only once the HIT that hashed it has fsynced it). Writers hold the entry lock while they read, extend and
//! rewrite the manifest. A version 1 manifest (strata before issue 24)
//! holds no observed facts: it loads as no entry, and the next save replaces it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::{ContentDigest, Sha256Digest};
use crate::fs::{self, FileStamp, RelPath};
use crate::l1::layout::{CacheRoot, EntryPath};
use crate::record::{self, Envelope, Schema};

use super::Error;
use super::location::Location;

/// Schema of a compile entry's manifest.
pub const COMPILE_ENTRY_SCHEMA: Schema =
    Schema { name: "strata.compile_entry", version: 2, features: &[] };

pub use crate::l1::layout::COMPILE_DIR;

/// Most candidates kept under one key. Candidates used on this machine are kept first,
/// most recently used first (the entry's verification memo remembers the order), then the
/// newest: a header edited and reverted, or two branches built in turn, find their
/// earlier result however many edits came in between, up to this many distinct ones.
pub const MAX_CANDIDATES: usize = 16;

/// Largest manifest read, in bytes.
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// A file a candidate read: its path (record form) and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Path, in record form.
    pub path: String,
    /// Content digest (of the file; of its sorted names for a listed directory).
    pub digest: ContentDigest,
}

/// What a looked-up path was, for a fact of [`Names::present`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A directory (following symlinks).
    Directory,
    /// A regular file (following symlinks) that was not read.
    File,
    /// Something else (a device, a fifo, a socket).
    Other,
    /// A symbolic link, looked at without following it.
    Symlink,
}

/// A name that existed when the compile looked it up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Present {
    /// The name (one path component, name-encoded).
    pub name: String,
    /// What it was.
    pub kind: Kind,
}

/// The facts about names in one directory: what must not exist there and what must exist
/// as it was. A HIT checks a group with one `stat` of the directory when the verification
/// memo vouches for the directory's stamp ([`super::check`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Names {
    /// The directory, in record form (`.` for the working directory).
    pub dir: String,
    /// Names (one component each, name-encoded) that must not exist in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<String>,
    /// Names that must exist in it as they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub present: Vec<Present>,
}

/// One output file of a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// `object`; `depfile` (a verbatim depfile); the extension of a file named after the
    /// object (`dwo`, `gcno`, `su`, `ci`); `file` for a file at [`Output::path`]; `message`
    /// for stdout/stderr.
    pub role: String,
    /// Content digest (the file is `objects/<hex>`).
    pub digest: ContentDigest,
    /// Size in bytes.
    pub size_bytes: u64,
    /// For role `file`: where it goes (record form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// How a HIT writes the depfile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DepfileRecord {
    /// `rendered`: written anew by the family's depfile writer for the current targets and
    /// paths (the compiler's own file was checked to be exactly what the writer renders);
    /// `verbatim`: the stored `depfile` output, only where the names and places are the
    /// origin's.
    pub form: String,
    /// The dependencies in the compiler's order, source first, in record form.
    pub deps: Vec<String>,
    /// `-MP` phony rules.
    pub phony: bool,
    /// For the `verbatim` form: the targets the stored file names (name-encoded bytes),
    /// which the current command must give too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
}

/// Where a candidate was saved: what maps its paths to another place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// The physical working directory (name-encoded).
    pub cwd: String,
    /// The logical one, if the compile used it (name-encoded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pwd: Option<String>,
    /// Every spelling of the base directories (name-encoded).
    pub bases: Vec<String>,
}

impl Origin {
    /// The record of `here`.
    pub fn of(here: &Location) -> Self {
        Origin {
            cwd: encode_path(&here.cwd),
            pwd: here.pwd.as_deref().map(encode_path),
            bases: here.base_spellings().map(encode_path).collect(),
        }
    }

    /// The location it describes (nothing looked up on disk).
    pub fn location(&self) -> Location {
        Location::recorded(
            decode_path(&self.cwd),
            self.pwd.as_deref().map(decode_path),
            self.bases.iter().map(|b| decode_path(b)).collect(),
        )
    }
}

/// One cached result and everything it depends on (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    /// `trace` or `model`.
    pub observed_by: String,
    /// Files read, with digests, in the order first read.
    pub inputs: Vec<Input>,
    /// Names looked up, by directory: absent ones, and present ones that were not read.
    pub names: Vec<Names>,
    /// Directories whose names were read.
    pub listed: Vec<Input>,
    /// Absolute paths (name-encoded) the outputs embed; each must name itself here.
    pub pins: Vec<String>,
    /// The object's path at the origin (record form), when an output depends on it: the
    /// candidate applies only where the object has that path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_name: Option<String>,
    /// Where it was saved.
    pub origin: Origin,
    /// Outputs, in the order the launcher writes them.
    pub outputs: Vec<Output>,
    /// The depfile, when the build asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depfile: Option<DepfileRecord>,
    /// The compiler's standard output, if it wrote any.
    pub stdout: Option<Output>,
    /// The compiler's standard error, if it wrote any.
    pub stderr: Option<Output>,
    /// Save time, UTC RFC 3339.
    pub created_at: String,
}

impl Candidate {
    /// A short stable name of this candidate (16 hex of BLAKE3 over its save time, its
    /// outputs' digests and the number of its facts), for the memo's record of which
    /// candidates were used. Cheap: it is computed on every lookup.
    pub fn id(&self) -> String {
        let mut h = blake3::Hasher::new();
        h.update(self.created_at.as_bytes());
        for o in self.outputs.iter().chain(&self.stdout).chain(&self.stderr) {
            h.update(o.digest.as_bytes());
        }
        h.update(&(self.inputs.len() as u64).to_le_bytes());
        h.update(&(self.names.len() as u64).to_le_bytes());
        h.update(self.inputs.last().map_or(&[][..], |i| i.digest.as_bytes()));
        h.finalize().to_hex()[..16].to_owned()
    }

    /// True if the two have the same facts (a new save replaces the old one).
    pub fn same_facts(&self, other: &Candidate) -> bool {
        self.inputs == other.inputs
            && self.names == other.names
            && self.listed == other.listed
            && self.pins == other.pins
            && self.object_name == other.object_name
    }
}

/// The key of an entry of the compile domain (a compile or an archive step): 64 lowercase
/// hex, the BLAKE3 field hash of what the step depends on (`super::KeyBuilder`). Stored
/// as that string (the manifest's `key` field) and named by the entry's directory,
/// `compile/<first 2 hex>/<key>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CompileKey(String);

impl CompileKey {
    /// `text` as a key if it is 64 lowercase hex characters.
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| CompileKey(text.to_owned()))
    }

    /// A key as produced by the key builder, or as named by an entry directory found on
    /// disk (which a manifest that names another key then refuses): not checked.
    pub(crate) fn unchecked(text: String) -> Self {
        CompileKey(text)
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CompileKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The payload of `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompileManifest {
    /// The key.
    pub key: CompileKey,
    /// Candidates, newest first.
    pub candidates: Vec<Candidate>,
}

impl CompileManifest {
    /// The candidates in the order a lookup tries them: those `used` names (most recently
    /// used first), then the others, newest first.
    pub fn lookup_order<'a>(&'a self, used: &[String]) -> Vec<&'a Candidate> {
        let ids: Vec<String> = self.candidates.iter().map(Candidate::id).collect();
        let mut order: Vec<&Candidate> = Vec::with_capacity(self.candidates.len());
        for u in used {
            if let Some(k) = ids.iter().position(|id| id == u) {
                order.push(&self.candidates[k]);
            }
        }
        for (k, c) in self.candidates.iter().enumerate() {
            if !used.contains(&ids[k]) {
                order.push(c);
            }
        }
        order
    }

    /// Adds `candidate` as the newest, replacing one with the same facts, and keeps at most
    /// [`MAX_CANDIDATES`]: the new one, then those `used` names in that order, then the
    /// newest of the rest.
    pub fn add(&mut self, candidate: Candidate, used: &[String]) {
        self.candidates.retain(|c| !c.same_facts(&candidate));
        let old = std::mem::take(&mut self.candidates);
        let ids: Vec<String> = old.iter().map(Candidate::id).collect();
        let mut keep: Vec<usize> = Vec::new();
        for u in used {
            if let Some(k) = ids.iter().position(|id| id == u)
                && !keep.contains(&k)
            {
                keep.push(k);
            }
        }
        for k in 0..old.len() {
            if !keep.contains(&k) {
                keep.push(k);
            }
        }
        keep.truncate(MAX_CANDIDATES - 1);
        keep.sort_unstable();
        self.candidates.push(candidate);
        for (k, c) in old.into_iter().enumerate() {
            if keep.contains(&k) {
                self.candidates.push(c);
            }
        }
    }
}

/// Where one key's entry lives.
#[derive(Debug, Clone)]
pub struct EntryPlace {
    /// The entry directory.
    pub dir: PathBuf,
    /// Its path relative to `actions-v1` (`compile/ab/abcd…`).
    pub rel: EntryPath,
    /// The entry lock.
    pub lock: PathBuf,
    /// The entry's verification memo (machine-local).
    pub memo: PathBuf,
}

impl EntryPlace {
    /// The entry of `key` in `cache`.
    pub fn new(cache: &CacheRoot, key: &CompileKey) -> Self {
        let rel = CacheRoot::compile_entry_rel(key.as_str());
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

/// The memo name of an input file (its absolute path, hashed).
pub fn header_memo_name(path: &Path) -> RelPath {
    let h = Sha256Digest::of_bytes(path.as_os_str().as_encoded_bytes());
    RelPath::new(format!("headers/{}", h.to_hex())).expect("hex is a valid relative path")
}

/// The memo name of a group of facts about the names in one directory (its absolute path
/// and the facts' digest, hashed).
pub fn directory_memo_name(dir: &Path, facts: &ContentDigest) -> RelPath {
    let mut bytes = dir.as_os_str().as_encoded_bytes().to_vec();
    bytes.push(0);
    bytes.extend_from_slice(facts.to_hex().as_bytes());
    let h = Sha256Digest::of_bytes(&bytes);
    RelPath::new(format!("dirs/{}", h.to_hex())).expect("hex is a valid relative path")
}

/// Reads the manifest at `place`. `Ok(None)` when there is none, or when it is an older
/// version of the record (it holds no observed facts; the next save replaces it).
///
/// # Errors
/// [`Error::Entry`] when it cannot be used (the entry is then rewritten by the next save).
pub fn load(place: &EntryPlace, key: &CompileKey) -> Result<Option<CompileManifest>, Error> {
    let unusable = |reason: String| Error::Entry { entry: place.rel.to_string(), reason };
    let bytes = match fs::read_capped_nofollow(&place.manifest(), MAX_MANIFEST_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(unusable("manifest.json is larger than 16 MiB".into())),
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(unusable(e.to_string())),
    };
    let manifest = match record::load_payload_as::<CompileManifest>(&bytes, &COMPILE_ENTRY_SCHEMA) {
        Ok(manifest) => manifest,
        Err(record::Error::UnknownSchema { found_name, found_version, .. })
            if found_name == COMPILE_ENTRY_SCHEMA.name
                && found_version < COMPILE_ENTRY_SCHEMA.version =>
        {
            return Ok(None);
        }
        Err(e) => return Err(unusable(format!("manifest.json: {e}"))),
    };
    if manifest.key != *key {
        return Err(unusable(format!("manifest.json names key {}, not {key}", manifest.key)));
    }
    Ok(Some(manifest))
}

/// Writes `manifest` at `place`: a temp file renamed over the old one, without fsync (it is
/// sealed and checked at every read), after the objects it names
/// ([`crate::l1::write::replace_manifest`]).
///
/// # Errors
/// I/O errors naming the path.
pub fn store(place: &EntryPlace, manifest: &CompileManifest) -> Result<(), fs::Error> {
    let path = place.manifest();
    let bytes = Envelope::seal_to_bytes(&COMPILE_ENTRY_SCHEMA, Vec::new(), manifest)
        .map_err(|e| fs::Error::io("encode", &path, std::io::Error::other(e.to_string())))?;
    crate::l1::write::replace_manifest(&path, &bytes, 0o644)
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
    crate::l1::write::add_file(&place.object(digest), bytes, 0o644)
}

/// Reads a file (following symlinks, as the compiler does) and returns its digest and
/// bytes, with the stamp it had; a change while reading is an error.
///
/// # Errors
/// I/O errors naming the path; [`fs::Error::ChangedWhileReading`].
pub fn read_input(
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
mod tests {
    use super::*;
    use crate::digest::DigestAlgorithm;

    #[test]
    fn compile_keys_are_64_lowercase_hex_stored_as_plain_strings() {
        let hex = "0123456789abcdef".repeat(4);
        let key = CompileKey::parse(&hex).unwrap();
        assert_eq!(key.as_str(), hex);
        assert_eq!(CompileKey::parse(&hex.to_uppercase()), None);
        assert_eq!(CompileKey::parse(&hex[1..]), None);
        assert_eq!(CompileKey::parse(&format!("{}g", &hex[1..])), None);
        // The manifest's bytes are those of a `key: String` field.
        let manifest = CompileManifest { key, candidates: vec![] };
        let json = serde_json::to_string(&manifest).unwrap();
        assert_eq!(json, format!(r#"{{"key":"{hex}","candidates":[]}}"#));
        assert_eq!(serde_json::from_str::<CompileManifest>(&json).unwrap(), manifest);
    }

    fn candidate(n: u8) -> Candidate {
        Candidate {
            observed_by: "trace".into(),
            inputs: vec![Input {
                path: format!("h{n}.h"),
                digest: ContentDigest::of_bytes(DigestAlgorithm::Blake3, &[n]),
            }],
            names: vec![],
            listed: vec![],
            pins: vec![],
            object_name: None,
            origin: Origin { cwd: "/w".into(), pwd: None, bases: vec![] },
            outputs: vec![],
            depfile: None,
            stdout: None,
            stderr: None,
            created_at: String::new(),
        }
    }

    /// The candidates kept are the ones used, then the newest; a used one survives any
    /// number of newer ones.
    #[test]
    fn candidates_are_kept_by_use_then_age() {
        let mut m = CompileManifest { key: CompileKey::unchecked("k".into()), candidates: vec![] };
        m.add(candidate(0), &[]);
        let used = vec![candidate(0).id()];
        for n in 1..40 {
            m.add(candidate(n), &used);
        }
        assert_eq!(m.candidates.len(), MAX_CANDIDATES);
        assert_eq!(m.candidates[0], candidate(39), "the newest first");
        assert!(m.candidates.contains(&candidate(0)), "the used one is kept");
        assert!(!m.candidates.contains(&candidate(1)), "the oldest unused one is not");
        let order = m.lookup_order(&used);
        assert_eq!(*order[0], candidate(0), "the used one is tried first");
        assert_eq!(*order[1], candidate(39));
        // The same facts again replace the old candidate.
        m.add(candidate(39), &used);
        assert_eq!(m.candidates.iter().filter(|c| **c == candidate(39)).count(), 1);
    }
}
