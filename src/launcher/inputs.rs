//! The machine's memo of input files, shared by every compile under one cache root
//! (docs/launcher.md "What a MISS costs"; seed 003, "compiler launcher").
//!
//! A C++ compile reads a few hundred headers, and every compile of a build reads mostly the
//! same ones. Without a shared memo each MISS read, hashed and scanned every one of them
//! again, and the first HIT of each entry on a new machine hashed them again too. This memo
//! remembers, per header, the digest it had with an exact [`FileStamp`], so one compile's
//! work stands for the next one's while the file is unchanged.
//!
//! # What is remembered
//! One [`VerifyMemo`] per directory of headers, subject `input-memo-v1 <directory>` (the
//! directory's absolute path in the name encoding), stored at
//! `<cache root>/.local/input-memo/<sha256 of the subject, 64 hex>.memo`, machine-local and
//! never packed. In it, for a file `N` of that directory (its name in the name encoding):
//! * `c/N`: the stamp and digest of `N`, hashed in full by a MISS whose scan of its text
//!   found no time macro and no `#pragma GCC dependency` (or that found it binary): a MISS
//!   may take both the digest and "nothing found" from it;
//! * `d/N`: the stamp and digest of `N`, hashed in full by a HIT's check (not scanned): a
//!   HIT may take the digest from it, a MISS may not.
//!
//! The rules are the verification memo's ([`crate::content::memo`]): a stamp is remembered
//! only when its mtime and ctime are 2 s older than the start of the compile (racy stamps),
//! a stamp vouches only when all six fields are equal, and a memo that is missing, damaged
//! or about another directory vouches for nothing. Writers do not lock: two compiles that
//! add to one directory's memo at once both rename a whole file over it, the last one
//! wins, and what the other added is hashed again by a later compile.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rustc_hash::FxHashMap as HashMap;

use crate::content::VerifyMemo;
use crate::digest::{ContentDigest, DigestAlgorithm, Sha256Digest};
use crate::fs::{self, FileStamp, RelPath};
use crate::l1::layout::CacheRoot;

/// Subject prefix of a directory's memo; a new layout gets a new version.
const SUBJECT: &str = "input-memo-v1";

/// The memos of the input directories one launcher run touched (see the module docs).
#[derive(Debug)]
pub struct InputMemo {
    /// `<cache root>/.local/tool-memo`: the memo of large files ([`super::save::shared_digest`]).
    pub tool_memo: PathBuf,
    /// `<cache root>/.local/input-memo`.
    dir: PathBuf,
    /// Loaded memos by directory (the bytes of the inputs' directory's absolute path; a
    /// hash of bytes, not of `Path` components, as it is asked once per input).
    dirs: HashMap<Vec<u8>, VerifyMemo>,
    /// False with `STRATA_INPUT_MEMO=0`: nothing is read or remembered.
    enabled: bool,
}

/// What a name in a directory's memo stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// Hashed by a MISS, its text scan found nothing.
    Clean,
    /// Hashed by a HIT, not scanned.
    Digest,
}

impl Mark {
    fn prefix(self) -> &'static str {
        match self {
            Mark::Clean => "c/",
            Mark::Digest => "d/",
        }
    }
}

impl InputMemo {
    /// The memos of the cache root `cache` (nothing is read until a file is asked about);
    /// with `enabled` false (`STRATA_INPUT_MEMO=0`) it vouches for nothing and remembers
    /// nothing.
    pub fn new(cache: &CacheRoot, enabled: bool) -> Self {
        Self { enabled, ..Self::at(&cache.local_dir()) }
    }

    /// The memos under `local` (a cache root's `.local` directory).
    pub fn at(local: &Path) -> Self {
        Self {
            tool_memo: local.join("tool-memo"),
            dir: local.join("input-memo"),
            dirs: HashMap::default(),
            enabled: true,
        }
    }

    /// The digest (of `algorithm`) remembered for the file `path` (absolute) with exactly
    /// `stamp`, by a MISS whose scan of it found nothing; `None` otherwise.
    pub fn clean(
        &mut self,
        path: &Path,
        stamp: &FileStamp,
        algorithm: DigestAlgorithm,
    ) -> Option<ContentDigest> {
        self.recall(path, stamp, algorithm, &[Mark::Clean])
    }

    /// The digest (of `algorithm`) remembered for the file `path` (absolute) with exactly
    /// `stamp`, scanned or not; `None` otherwise.
    pub fn digest(
        &mut self,
        path: &Path,
        stamp: &FileStamp,
        algorithm: DigestAlgorithm,
    ) -> Option<ContentDigest> {
        self.recall(path, stamp, algorithm, &[Mark::Clean, Mark::Digest])
    }

    /// Remembers that a MISS hashed `path` (absolute), with `stamp`, to `digest` and that
    /// its text scan found nothing (or that it is binary); `began` is when the compile's
    /// lookup began (a younger stamp is not remembered).
    pub fn remember_clean(
        &mut self,
        path: &Path,
        stamp: FileStamp,
        digest: ContentDigest,
        began: SystemTime,
    ) {
        let Some((memo, name)) = self.slot(path, Mark::Clean) else { return };
        memo.remember(&name, stamp, digest, began);
        // A HIT's entry for the same file says less: dropped.
        if let Some(other) = name_in_memo(path, Mark::Digest) {
            memo.forget(&other);
        }
    }

    /// Remembers that a HIT's check hashed `path` (absolute), with `stamp`, to `digest`
    /// (unless a MISS already remembered the same).
    pub fn remember_digest(
        &mut self,
        path: &Path,
        stamp: FileStamp,
        digest: ContentDigest,
        began: SystemTime,
    ) {
        if self.clean(path, &stamp, digest.algorithm()) == Some(digest) {
            return;
        }
        let Some((memo, name)) = self.slot(path, Mark::Digest) else { return };
        memo.remember(&name, stamp, digest, began);
    }

    /// Writes every memo that changed (a memo that cannot be written only costs hashing
    /// again later; said at debug level).
    pub fn save(&self) {
        for (dir, memo) in &self.dirs {
            let dir = Path::new(std::ffi::OsStr::from_bytes(dir));
            if memo.is_changed()
                && let Err(e) = memo.save(&self.file(&subject(dir)), 0o644)
            {
                tracing::debug!("input memo of {} not saved: {e}", dir.display());
            }
        }
    }

    fn recall(
        &mut self,
        path: &Path,
        stamp: &FileStamp,
        algorithm: DigestAlgorithm,
        marks: &[Mark],
    ) -> Option<ContentDigest> {
        marks.iter().find_map(|&mark| {
            let (memo, name) = self.slot(path, mark)?;
            memo.recall(&name, stamp).filter(|d| d.algorithm() == algorithm)
        })
    }

    /// The memo of `path`'s directory (loaded on first use) and `path`'s name in it.
    fn slot(&mut self, path: &Path, mark: Mark) -> Option<(&mut VerifyMemo, RelPath)> {
        if !self.enabled {
            return None;
        }
        let (dir, name) = (path.parent()?, name_in_memo(path, mark)?);
        let key = dir.as_os_str().as_bytes();
        if !self.dirs.contains_key(key) {
            let subject = subject(dir);
            let memo = VerifyMemo::load(&self.file(&subject), &subject);
            self.dirs.insert(key.to_vec(), memo);
        }
        Some((self.dirs.get_mut(key)?, name))
    }

    fn file(&self, subject: &str) -> PathBuf {
        let h = Sha256Digest::of_bytes(subject.as_bytes());
        self.dir.join(format!("{}.memo", h.to_hex()))
    }
}

/// The name of `path`'s file in its directory's memo with `mark`: `c/N` or `d/N`, `N` the
/// file name in the name encoding; `None` for a path without a file name.
fn name_in_memo(path: &Path, mark: Mark) -> Option<RelPath> {
    let file = path.file_name()?;
    RelPath::new(format!("{}{}", mark.prefix(), fs::name::encode_os(file))).ok()
}

fn subject(dir: &Path) -> String {
    format!("{SUBJECT} {}", fs::name::encode_os(dir.as_os_str()))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn stamp(path: &Path) -> FileStamp {
        FileStamp::of(&std::fs::metadata(path).unwrap())
    }

    #[test]
    fn a_header_is_vouched_for_by_its_exact_stamp_across_runs() {
        let d = tempfile::tempdir().unwrap();
        let header = d.path().join("inc/x.h");
        std::fs::create_dir_all(header.parent().unwrap()).unwrap();
        std::fs::write(&header, b"int x;\n").unwrap();
        let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"int x;\n");
        let later = SystemTime::now() + Duration::from_secs(10);
        let local = d.path().join(".local");
        let s = stamp(&header);

        let mut first = InputMemo::at(&local);
        assert_eq!(first.clean(&header, &s, DigestAlgorithm::Blake3), None);
        first.remember_clean(&header, s, digest, later);
        first.save();

        // Another run (another compile) reads it back; only the exact stamp vouches, and
        // only for the algorithm it was hashed with.
        let mut second = InputMemo::at(&local);
        assert_eq!(second.clean(&header, &s, DigestAlgorithm::Blake3), Some(digest));
        assert_eq!(second.digest(&header, &s, DigestAlgorithm::Blake3), Some(digest));
        assert_eq!(second.clean(&header, &s, DigestAlgorithm::Sha256), None);
        let touched = FileStamp { ctime_ns: s.ctime_ns + 1, ..s };
        assert_eq!(second.clean(&header, &touched, DigestAlgorithm::Blake3), None);
        let other = d.path().join("inc/y.h");
        assert_eq!(second.clean(&other, &s, DigestAlgorithm::Blake3), None);
    }

    #[test]
    fn a_hit_s_digest_never_stands_for_a_miss_s_scan() {
        let d = tempfile::tempdir().unwrap();
        let header = d.path().join("t.h");
        std::fs::write(&header, b"const char *t = __TIME__;\n").unwrap();
        let digest =
            ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"const char *t = __TIME__;\n");
        let later = SystemTime::now() + Duration::from_secs(10);
        let local = d.path().join(".local");
        let s = stamp(&header);
        let mut memo = InputMemo::at(&local);
        memo.remember_digest(&header, s, digest, later);
        memo.save();
        let mut again = InputMemo::at(&local);
        assert_eq!(again.digest(&header, &s, DigestAlgorithm::Blake3), Some(digest));
        assert_eq!(again.clean(&header, &s, DigestAlgorithm::Blake3), None);
    }

    #[test]
    fn a_young_stamp_or_a_damaged_memo_vouches_for_nothing() {
        let d = tempfile::tempdir().unwrap();
        let header = d.path().join("y.h");
        std::fs::write(&header, b"int y;\n").unwrap();
        let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"int y;\n");
        let local = d.path().join(".local");
        let s = stamp(&header);
        // Written just now: within 2 s of the compile's start, not remembered.
        let mut memo = InputMemo::at(&local);
        memo.remember_clean(&header, s, digest, SystemTime::now());
        assert_eq!(memo.clean(&header, &s, DigestAlgorithm::Blake3), None);

        let later = SystemTime::now() + Duration::from_secs(10);
        memo.remember_clean(&header, s, digest, later);
        memo.save();
        let files: Vec<PathBuf> = std::fs::read_dir(local.join("input-memo"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1);
        let mut bytes = std::fs::read(&files[0]).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        std::fs::write(&files[0], &bytes).unwrap();
        assert_eq!(InputMemo::at(&local).clean(&header, &s, DigestAlgorithm::Blake3), None);
    }
}
