//! Verification memos: which files of a tree were fully hashed, and the stamps they had
//! then, so a later read of the same unchanged files need not hash them again
//! (docs/format.md "Verification memo"). It never weakens the rule that a HIT needs every
//! byte to match: a memo only stands for a full check of files whose stamps are unchanged.
//!
//! A memo maps a file's relative path to the [`FileStamp`] (device, inode, size, mtime,
//! ctime, mode) it had when its bytes were last hashed and found equal to a recorded digest,
//! and that digest. A file is *vouched for* only if its stamp now is equal in every field
//! and the digest the caller expects is the one remembered; anything else means a full
//! verification.
//!
//! # Persistence
//! A memo is written in a compact binary form with a BLAKE3 checksum (v2, `binary` below;
//! strict parse), with temp file + rename, never modified in place; a `strata.verify_memo`
//! v1 record (what strata wrote before) is still read. A memo that is missing, unreadable, corrupt
//! or names another subject loads as empty (everything is verified in full); one that
//! cannot be written costs only a full verification next time. Read-only modes may read a
//! memo but never write one (read-only means read-only).
//!
//! The one rule of every stamp memo strata keeps under a cache root (this one, and the
//! toolchain's memos of a tool's `--version` and content, `crate::toolchain`): a stamp is
//! the six fields of [`FileStamp`] (device, inode, size, mtime, ctime, mode; in records
//! its serde form, in this memo's binary form the same six in that order), a memo file is read capped at [`MAX_MEMO_BYTES`] without following a symlink
//! ([`read_memo`]) and written whole without fsync ([`write_memo`]): memos are
//! machine-local, sealed (a record's digest, this memo's checksum) and checked on load, so one torn by a power cut vouches for
//! nothing, and what they vouch for (an entry's files) was made durable before it was
//! published (`crate::l1::write`).
//!
//! # Racy stamps
//! Timestamps have a granularity (a kernel tick on ext4/xfs, 1 s or 2 s on some
//! filesystems), so a file changed twice within one granule can keep its stamp. As in
//! git's "racy clean" rule, a stamp is remembered only if the file's mtime and ctime are at
//! least [`MIN_STAMP_AGE`] older than the moment its verification began; a younger file
//! is verified in full every time until it has aged.
//!
//! # Trust
//! Stamps detect changes made through the ordinary write path. Anyone who can write the
//! memo (the cache root's owner) can already write the entry it describes; anyone who can
//! set the clock and write the file, or edit the block device, can forge a stamp. Within
//! those limits a vouched-for file holds the bytes that were verified.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::digest::ContentDigest;
use crate::fs::{self, FileStamp, RelPath};
use crate::record::{self, Schema};

/// Schema of a verification memo record.
pub const VERIFY_MEMO_SCHEMA: Schema =
    Schema { name: "strata.verify_memo", version: 1, features: &[] };

/// How much older than the start of its verification a file's mtime and ctime must be for
/// its stamp to be remembered (covers the coarsest common timestamp granularity, FAT's 2 s).
pub const MIN_STAMP_AGE: Duration = Duration::from_secs(2);

/// Largest memo file read, in bytes (a larger one is ignored).
pub const MAX_MEMO_BYTES: u64 = 16 * 1024 * 1024;

/// Reads the memo file `path`: `None` when it is missing, unreadable, a symlink or larger
/// than [`MAX_MEMO_BYTES`] (a memo that cannot be read vouches for nothing).
pub fn read_memo(path: &Path) -> Option<Vec<u8>> {
    match fs::read_capped_nofollow(path, MAX_MEMO_BYTES) {
        Ok(bytes) => bytes,
        Err(e) => {
            if !e.is_not_found() {
                tracing::debug!("memo ignored: {e}");
            }
            None
        }
    }
}

/// Writes the memo record `bytes` to `path` (its directory created): a temp file renamed
/// over it, without fsync (see the module docs).
///
/// # Errors
/// I/O errors naming the path.
pub fn write_memo(path: &Path, bytes: &[u8], mode: u32) -> Result<(), fs::Error> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write_atomic_nosync(path, bytes, mode)
}

/// The payload of a memo record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoRecord {
    /// What the memo is about (e.g. an entry's path relative to `actions-v1`).
    subject: String,
    /// Remembered files, sorted by path.
    files: Vec<MemoFile>,
    /// Which of the subject's parts were used, most recently used first (the compiler
    /// launcher's candidates; [`VerifyMemo::mark_used`]). Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    used: Vec<String>,
}

/// One remembered file: its path and digest, and its stamp in the one stored form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct MemoFile {
    path: RelPath,
    digest: ContentDigest,
    #[serde(flatten)]
    stamp: FileStamp,
}

/// A verification memo of one subject (in memory).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyMemo {
    subject: String,
    files: BTreeMap<RelPath, (FileStamp, ContentDigest)>,
    used: Vec<String>,
    changed: bool,
}

impl VerifyMemo {
    /// An empty memo about `subject`.
    pub fn new(subject: &str) -> Self {
        Self {
            subject: subject.to_owned(),
            files: BTreeMap::new(),
            used: Vec::new(),
            changed: false,
        }
    }

    /// Loads the memo at `path` about `subject`. Missing, unreadable, oversized, corrupt
    /// (any record error) or about another subject: an empty memo.
    pub fn load(path: &Path, subject: &str) -> Self {
        let mut memo = Self::new(subject);
        let Some(bytes) = read_memo(path) else { return memo };
        match decode(&bytes) {
            Ok(stored) if stored.subject == subject => {
                memo.files = stored.files;
                memo.used = stored.used;
            }
            Ok(_) => tracing::debug!("verification memo {} names another subject", path.display()),
            Err(e) => tracing::debug!("verification memo {} ignored: {e}", path.display()),
        }
        memo
    }

    /// The subject of the memo stored at `path`, or `None` if it is missing, unreadable,
    /// oversized or not a valid memo (such a memo vouches for nothing).
    pub fn subject_at(path: &Path) -> Option<String> {
        let bytes = read_memo(path)?;
        decode(&bytes).ok().map(|stored| stored.subject)
    }

    /// True if `rel` was verified to have `digest` while it had exactly `stamp`.
    pub fn vouches(&self, rel: &RelPath, stamp: &FileStamp, digest: &ContentDigest) -> bool {
        self.files.get(rel).is_some_and(|(s, d)| s == stamp && d == digest)
    }

    /// The digest remembered for `rel` if it was remembered with exactly `stamp`.
    pub fn recall(&self, rel: &RelPath, stamp: &FileStamp) -> Option<ContentDigest> {
        self.files.get(rel).filter(|(s, _)| s == stamp).map(|(_, d)| *d)
    }

    /// The parts marked used ([`VerifyMemo::mark_used`]), most recently used first.
    pub fn used(&self) -> &[String] {
        &self.used
    }

    /// Marks the part `id` (an opaque name, e.g. a candidate's id) as the most recently
    /// used; keeps at most `keep` names. Changes the memo only if `id` was not first.
    pub fn mark_used(&mut self, id: &str, keep: usize) {
        if self.used.first().map(String::as_str) == Some(id) {
            return;
        }
        self.used.retain(|u| u != id);
        self.used.insert(0, id.to_owned());
        self.used.truncate(keep);
        self.changed = true;
    }

    /// Number of files remembered.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True if nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Records that `rel`, with `stamp`, was hashed and found to have `digest`, in a
    /// verification that began at `began`. A stamp younger than [`MIN_STAMP_AGE`] before
    /// `began` is not remembered (and any older entry for `rel` is dropped).
    pub fn remember(
        &mut self,
        rel: &RelPath,
        stamp: FileStamp,
        digest: ContentDigest,
        began: SystemTime,
    ) {
        if self.would_remember(&stamp, began) {
            if self.files.get(rel) != Some(&(stamp, digest)) {
                self.files.insert(rel.clone(), (stamp, digest));
                self.changed = true;
            }
        } else {
            self.forget(rel);
        }
    }

    /// Whether [`VerifyMemo::remember`] would keep `stamp` for a verification that began at
    /// `began` (the stamp is old enough), so that a caller can make the file durable first
    /// only when it will be vouched for.
    pub fn would_remember(&self, stamp: &FileStamp, began: SystemTime) -> bool {
        let cutoff = settled_before(began);
        stamp.is_storable() && stamp.mtime_ns < cutoff && stamp.ctime_ns < cutoff
    }

    /// [`VerifyMemo::remember`], except that a stamp too young to remember leaves an older
    /// entry in place (it no longer matches, so it vouches for nothing) instead of dropping
    /// it: for things that change on every use (a build directory the compile writes into),
    /// so the memo is not rewritten each time.
    pub fn remember_if_settled(
        &mut self,
        rel: &RelPath,
        stamp: FileStamp,
        digest: ContentDigest,
        began: SystemTime,
    ) {
        let cutoff = settled_before(began);
        if stamp.mtime_ns < cutoff && stamp.ctime_ns < cutoff {
            self.remember(rel, stamp, digest, began);
        }
    }

    /// Drops what is remembered about `rel`.
    pub fn forget(&mut self, rel: &RelPath) {
        if self.files.remove(rel).is_some() {
            self.changed = true;
        }
    }

    /// Keeps only the paths for which `keep` is true.
    pub fn retain(&mut self, keep: impl Fn(&RelPath) -> bool) {
        let before = self.files.len();
        self.files.retain(|rel, _| keep(rel));
        self.changed |= self.files.len() != before;
    }

    /// True if the memo differs from what was loaded.
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// Writes the memo to `path` ([`write_memo`]: whole, no fsync), creating its
    /// directory; an empty memo removes `path` instead.
    ///
    /// # Errors
    /// I/O errors naming the path.
    pub fn save(&self, path: &Path, mode: u32) -> Result<(), fs::Error> {
        let bytes = self.to_bytes().map_err(|e| {
            fs::Error::io("encode verification memo", path, std::io::Error::other(e.to_string()))
        })?;
        let Some(bytes) = bytes else {
            return match fs::remove_file(path) {
                Err(e) if !e.is_not_found() => Err(e),
                _ => Ok(()),
            };
        };
        write_memo(path, &bytes, mode)
    }

    /// The stored form of the memo (a `strata.verify_memo` record, what [`VerifyMemo::save`]
    /// writes), or `None` when it remembers nothing (stored as no file).
    ///
    /// # Errors
    /// A record error if the memo cannot be encoded.
    pub fn to_bytes(&self) -> Result<Option<Vec<u8>>, record::Error> {
        if self.files.is_empty() && self.used.is_empty() {
            return Ok(None);
        }
        Ok(Some(binary::encode(&self.subject, &self.files, &self.used)))
    }
}

/// The newest mtime and ctime (nanoseconds since the epoch) a stamp may have to be
/// remembered by a verification that began at `began`: [`MIN_STAMP_AGE`] before it.
fn settled_before(began: SystemTime) -> i128 {
    began
        .checked_sub(MIN_STAMP_AGE)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128)
}

/// A memo as stored: subject, files, used parts.
struct Stored {
    subject: String,
    files: BTreeMap<RelPath, (FileStamp, ContentDigest)>,
    used: Vec<String>,
}

/// Decodes a stored memo in either form: binary (v2, what is written) or a
/// `strata.verify_memo` v1 record (what strata wrote before; still read).
fn decode(bytes: &[u8]) -> Result<Stored, String> {
    if bytes.starts_with(binary::MAGIC) {
        return binary::decode(bytes);
    }
    let r = record::load_payload_as::<MemoRecord>(bytes, &VERIFY_MEMO_SCHEMA)
        .map_err(|e| e.to_string())?;
    Ok(Stored {
        files: r.files.iter().map(|f| (f.path.clone(), (f.stamp, f.digest))).collect(),
        subject: r.subject,
        used: r.used,
    })
}

/// The binary form of a memo (docs/format.md "Verification memo"). A HIT of the compiler
/// launcher loads one memo of a few hundred files; as a JSON record (strict parse, hex
/// digits, SHA-256 of the envelope) that was the largest part of the HIT's own code in
/// profiles; this form needs bounds checks and one BLAKE3 pass.
///
/// Layout, integers little-endian: [`MAGIC`] (8 bytes); `u32` subject length, subject
/// (UTF-8); `u32` count of used parts, each `u16` length and UTF-8 bytes; `u32` count of
/// files, each `u16` path length, path (a [`RelPath`], strictly ascending), `u8` digest
/// algorithm (1 BLAKE3, 2 SHA-256), 32 digest bytes, `u64` device, `u64` inode, `u64` size
/// in bytes, `i64` mtime and `i64` ctime in nanoseconds, `u32` mode; then the 32-byte
/// BLAKE3 of everything before it. Anything else (short, long, bad checksum, unsorted or
/// unsafe path, unknown algorithm) is rejected whole.
mod binary {
    use std::collections::BTreeMap;

    use crate::digest::{CONTENT_DIGEST_LEN, ContentDigest, DigestAlgorithm};
    use crate::fs::{FileStamp, RelPath};

    use super::Stored;

    /// First bytes of a binary memo: `STRVMEM` and the version, 2.
    pub(super) const MAGIC: &[u8; 8] = b"STRVMEM\x02";

    /// Bytes of the trailing checksum.
    const SUM: usize = 32;

    fn algorithm_id(a: DigestAlgorithm) -> u8 {
        match a {
            DigestAlgorithm::Blake3 => 1,
            DigestAlgorithm::Sha256 => 2,
        }
    }

    fn checksum(bytes: &[u8]) -> [u8; SUM] {
        *ContentDigest::of_bytes(DigestAlgorithm::Blake3, bytes).as_bytes()
    }

    /// Encodes a memo. Strings longer than the length fields allow are left out (a path
    /// over 64 KiB is remembered by no memo; a subject over 4 GiB cannot exist).
    pub(super) fn encode(
        subject: &str,
        files: &BTreeMap<RelPath, (FileStamp, ContentDigest)>,
        used: &[String],
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + files.len() * 140);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(subject.len() as u32).to_le_bytes());
        out.extend_from_slice(subject.as_bytes());
        let used: Vec<&String> = used.iter().filter(|u| u16::try_from(u.len()).is_ok()).collect();
        out.extend_from_slice(&(used.len() as u32).to_le_bytes());
        for u in used {
            out.extend_from_slice(&(u.len() as u16).to_le_bytes());
            out.extend_from_slice(u.as_bytes());
        }
        let kept: Vec<_> = files
            .iter()
            .filter(|(path, (stamp, _))| {
                u16::try_from(path.as_str().len()).is_ok() && stamp.is_storable()
            })
            .collect();
        out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
        for (path, (stamp, digest)) in kept {
            out.extend_from_slice(&(path.as_str().len() as u16).to_le_bytes());
            out.extend_from_slice(path.as_str().as_bytes());
            out.push(algorithm_id(digest.algorithm()));
            out.extend_from_slice(digest.as_bytes());
            out.extend_from_slice(&stamp.dev.to_le_bytes());
            out.extend_from_slice(&stamp.ino.to_le_bytes());
            out.extend_from_slice(&stamp.size_bytes.to_le_bytes());
            out.extend_from_slice(&(stamp.mtime_ns as i64).to_le_bytes());
            out.extend_from_slice(&(stamp.ctime_ns as i64).to_le_bytes());
            out.extend_from_slice(&stamp.mode.to_le_bytes());
        }
        let sum = checksum(&out);
        out.extend_from_slice(&sum);
        out
    }

    /// Reads fields off a byte slice; every read fails past the end.
    struct Reader<'a>(&'a [u8]);

    impl<'a> Reader<'a> {
        fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
            if self.0.len() < n {
                return Err("truncated".into());
            }
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            Ok(head)
        }
        fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
            Ok(self.take(N)?.try_into().expect("length taken"))
        }
        fn u16(&mut self) -> Result<usize, String> {
            Ok(usize::from(u16::from_le_bytes(self.array()?)))
        }
        fn u32(&mut self) -> Result<usize, String> {
            usize::try_from(u32::from_le_bytes(self.array()?)).map_err(|e| e.to_string())
        }
        fn u64(&mut self) -> Result<u64, String> {
            Ok(u64::from_le_bytes(self.array()?))
        }
        fn i64(&mut self) -> Result<i64, String> {
            Ok(i64::from_le_bytes(self.array()?))
        }
        fn string(&mut self, len: usize) -> Result<String, String> {
            String::from_utf8(self.take(len)?.to_vec()).map_err(|_| "a string is not UTF-8".into())
        }
    }

    /// Decodes a binary memo (see the module docs for what is rejected).
    pub(super) fn decode(bytes: &[u8]) -> Result<Stored, String> {
        let body_len = bytes.len().checked_sub(SUM).ok_or("truncated")?;
        let (body, sum) = bytes.split_at(body_len);
        if body.len() < MAGIC.len() || checksum(body) != sum {
            return Err("checksum mismatch (damaged or truncated)".into());
        }
        let mut r = Reader(&body[MAGIC.len()..]);
        let len = r.u32()?;
        let subject = r.string(len)?;
        let count = r.u32()?;
        let mut used = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let len = r.u16()?;
            used.push(r.string(len)?);
        }
        let count = r.u32()?;
        let mut files = BTreeMap::new();
        let mut last: Option<RelPath> = None;
        for _ in 0..count {
            let len = r.u16()?;
            let path = RelPath::new(r.string(len)?).map_err(|e| e.to_string())?;
            if last.as_ref().is_some_and(|l| *l >= path) {
                return Err(format!("paths not strictly ascending at {path}"));
            }
            let algorithm = match r.array::<1>()?[0] {
                1 => DigestAlgorithm::Blake3,
                2 => DigestAlgorithm::Sha256,
                other => return Err(format!("unknown digest algorithm {other}")),
            };
            let digest = ContentDigest::from_bytes(algorithm, r.array::<CONTENT_DIGEST_LEN>()?);
            let stamp = FileStamp {
                dev: r.u64()?,
                ino: r.u64()?,
                size_bytes: r.u64()?,
                mtime_ns: i128::from(r.i64()?),
                ctime_ns: i128::from(r.i64()?),
                mode: u32::from_le_bytes(r.array()?),
            };
            files.insert(path.clone(), (stamp, digest));
            last = Some(path);
        }
        if !r.0.is_empty() {
            return Err("trailing bytes".into());
        }
        Ok(Stored { subject, files, used })
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn stamp(ns: i128) -> FileStamp {
        FileStamp { dev: 1, ino: 2, size_bytes: 3, mtime_ns: ns, ctime_ns: ns, mode: 0o100644 }
    }

    #[test]
    fn vouches_only_for_the_same_stamp_and_digest_and_survives_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m/memo.json");
        let rel = RelPath::new("lib/a.a").unwrap();
        let digest = ContentDigest::from(crate::digest::Sha256Digest::of_bytes(b"x"));
        let other = ContentDigest::from(crate::digest::Sha256Digest::of_bytes(b"y"));
        let began = UNIX_EPOCH + Duration::from_secs(100);
        let old = stamp(90_000_000_000);
        let mut memo = VerifyMemo::new("entry");
        memo.remember(&rel, old, digest, began);
        assert!(memo.is_changed());
        memo.save(&path, 0o644).unwrap();
        assert_eq!(Some(std::fs::read(&path).unwrap()), memo.to_bytes().unwrap());
        assert_eq!(VerifyMemo::new("empty").to_bytes().unwrap(), None);
        let loaded = VerifyMemo::load(&path, "entry");
        assert!(loaded.vouches(&rel, &old, &digest));
        assert!(!loaded.is_changed());
        assert!(!loaded.vouches(&rel, &old, &other));
        for changed in [
            FileStamp { ino: 9, ..old },
            FileStamp { dev: 9, ..old },
            FileStamp { size_bytes: 9, ..old },
            FileStamp { mtime_ns: old.mtime_ns + 1, ..old },
            FileStamp { ctime_ns: old.ctime_ns + 1, ..old },
            FileStamp { mode: 0o100755, ..old },
        ] {
            assert!(!loaded.vouches(&rel, &changed, &digest), "{changed:?}");
        }
        // Another subject, a corrupt or truncated file: empty.
        assert!(VerifyMemo::load(&path, "other").is_empty());
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(VerifyMemo::load(&path, "entry").is_empty());
        for at in [0, 8, 20, bytes.len() - 40, bytes.len() - 1] {
            let mut edited = bytes.clone();
            edited[at] ^= 1;
            std::fs::write(&path, &edited).unwrap();
            assert!(VerifyMemo::load(&path, "entry").is_empty(), "byte {at} flipped");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        std::fs::write(&path, &longer).unwrap();
        assert!(VerifyMemo::load(&path, "entry").is_empty(), "a trailing byte");
    }

    #[test]
    fn young_stamps_are_not_remembered() {
        let rel = RelPath::new("a").unwrap();
        let digest = ContentDigest::from(crate::digest::Sha256Digest::of_bytes(b"x"));
        let began = UNIX_EPOCH + Duration::from_secs(100);
        let mut memo = VerifyMemo::new("entry");
        assert!(!memo.would_remember(&stamp(99_000_000_000), began));
        memo.remember(&rel, stamp(99_000_000_000), digest, began);
        assert!(memo.is_empty() && !memo.is_changed());
        assert!(memo.would_remember(&stamp(97_999_999_999), began));
        memo.remember(&rel, stamp(97_999_999_999), digest, began);
        assert_eq!(memo.len(), 1);
        // A younger stamp for the same file drops the older one.
        memo.remember(&rel, stamp(99_500_000_000), digest, began);
        assert!(memo.is_empty());
    }

    #[test]
    fn a_v1_record_written_before_still_loads_and_a_rewrite_is_binary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memo.json");
        let digest = ContentDigest::from(crate::digest::Sha256Digest::of_bytes(b"x"));
        let old = stamp(90_000_000_000);
        // The payload exactly as earlier releases wrote it (one object per file: path,
        // digest and the six stamp fields).
        let v1: serde_json::Value = serde_json::from_str(&format!(
            r#"{{"files":[{{"ctime_ns":90000000000,"device":1,"digest":"{digest}","inode":2,"mode":33188,"mtime_ns":90000000000,"path":"lib/a.a","size_bytes":3}}],"subject":"entry","used":["c1"]}}"#
        ))
        .unwrap();
        let sealed = record::Envelope::seal(&VERIFY_MEMO_SCHEMA, Vec::new(), &v1).unwrap();
        std::fs::write(&path, sealed.to_bytes()).unwrap();
        let loaded = VerifyMemo::load(&path, "entry");
        assert!(loaded.vouches(&RelPath::new("lib/a.a").unwrap(), &old, &digest));
        assert_eq!(loaded.used(), ["c1".to_owned()]);
        assert_eq!(VerifyMemo::subject_at(&path).as_deref(), Some("entry"));
        let rewritten = loaded.to_bytes().unwrap().unwrap();
        assert!(rewritten.starts_with(binary::MAGIC));
        std::fs::write(&path, &rewritten).unwrap();
        assert_eq!(VerifyMemo::load(&path, "entry"), loaded);
        assert_eq!(VerifyMemo::subject_at(&path).as_deref(), Some("entry"));
    }
}
