//! The one entry writer of the L1 cache (docs/format.md "Write order"; DESIGN.md invariant
//! 3): every front end that puts an entry under `actions-v1/` — `strata action run`, the
//! compiler launcher (compile and archive steps) and the remote tier's installs — writes
//! through here, under one rule.
//!
//! # The rule
//! * **Nothing is written in place.** A new entry is built in a private staging directory
//!   ([`NewEntry`]) and published by one `renameat2(RENAME_NOREPLACE)`; a file added to a
//!   compile entry (an object, the manifest that names it) is written under a temp name and
//!   renamed over its name ([`replace_manifest`], [`add_file`]). A reader sees no entry, the
//!   whole old one or the whole new one.
//! * **Durable before visible** ([`Durability::Fsync`]): what a name will point at is
//!   fsynced before the rename that publishes it (a staged tree bottom-up, then the parent
//!   after the rename). Two exceptions: a batch ([`Durability::Deferred`]): an index
//!   restore installs hundreds of entries and makes them durable with one `syncfs` before
//!   it reports success, where an fsync per file would cost more than the restore; and a
//!   compile entry's files ([`add_copy`], [`add_file`], [`replace_manifest`]), which are
//!   **durable before vouched for** instead (see "Why" below).
//! * **Under the entry lock**, with the one timeout of [`crate::l1::lock::Timeouts::entry`]
//!   (`STRATA_ENTRY_LOCK_TIMEOUT_SECONDS`, default 60 s). The caller holds it; this module
//!   takes no lock.
//!
//! Why fsync although every reader verifies every byte: a verification memo vouches for a
//! file by its stamp (`crate::content::memo`), and a stamp says nothing about bytes that
//! never reached the disk (after a power cut, or a background write that failed: the page
//! cache keeps the right bytes until it evicts them, then the file reads back as zeros with
//! the same stamp). With the data durable before the name is published, a stamp stands for
//! the bytes that were verified.
//!
//! Why not for a compile entry's files: the fsync was what a compile MISS waited for on the
//! build's critical path (5-12 ms of wall time per stored file on the benchmarks' ext4 disk
//! during a build, while the compile holds a job slot; one abseil compile took 885 ms with
//! its two fsyncs and 867 ms without, medians of 15, interleaved; issue 28). Nothing
//! trusts those files unread until it has made them durable itself: the manifest is sealed
//! and checked at every read, messages and depfiles are hashed at every read, and the one
//! reader that vouches for an object by its stamp (`launcher::restore::place_output`)
//! fsyncs the stored file after hashing it and before remembering its stamp, and removes
//! it when that fsync fails (the kernel reports a failed background write to the first
//! fsync after it). An object that lost its bytes is therefore hashed, found wrong and
//! compiled again, never placed on a stamp's word.

use std::path::{Path, PathBuf};

use crate::fs::temp::{self, Purpose, TempName};
use crate::fs::{self, StagingDir};

/// When what the writer published is made durable (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync before the publishing rename (single entries and files).
    Fsync,
    /// Nothing per entry: the caller syncs the filesystem once for the whole batch
    /// ([`crate::fs::sync_filesystem`]) before it reports success.
    Deferred,
}

/// What [`NewEntry::publish`] does when an entry is already at the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// Keep it (a concurrent writer's, or one of other content, wins): the new one is
    /// dropped and [`Published::AlreadyPresent`] returned.
    Keep,
    /// Replace it (the caller found it invalid): it is renamed aside to
    /// `.<stem>.old-<16 hex>`, the new entry published, then the old one deleted; a crash
    /// in between leaves no entry (a MISS), never a partial one.
    Replace {
        /// The stem of the aside name (the entry's key).
        stem: String,
    },
}

/// How [`NewEntry::publish`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The new entry is in place.
    Published,
    /// An entry was already there and was kept ([`Existing::Keep`]).
    AlreadyPresent,
}

/// A new entry being written: a private staging directory that becomes the entry
/// directory `dest` when published (see the module docs). Dropping it deletes the
/// staging directory.
#[must_use = "a NewEntry is deleted when dropped unless published"]
#[derive(Debug)]
pub struct NewEntry {
    staging: StagingDir,
    actions_dir: PathBuf,
    rel: String,
}

impl NewEntry {
    /// A staging directory `.<key>.tmp-<16 hex>` beside the entry `<actions_dir>/<rel>`
    /// (`rel`: the entry path, `/`-separated), after creating the directories above it
    /// without passing through a symlink (the actions directory itself may be one: the
    /// user's choice).
    ///
    /// # Errors
    /// [`fs::Error::SymlinkInPath`] if a directory between the actions directory and the
    /// entry is a symlink; I/O errors naming the path.
    pub fn beside(actions_dir: &Path, rel: &str, dir_mode: u32) -> Result<Self, fs::Error> {
        fs::create_dir_all(actions_dir)?;
        let parent_rel = rel.rsplit_once('/').map_or("", |(parent, _)| parent);
        fs::create_dir_all_within(actions_dir, Path::new(parent_rel), dir_mode)?;
        let staging = temp::staging_beside(&actions_dir.join(rel), dir_mode)?;
        Ok(Self { staging, actions_dir: actions_dir.to_path_buf(), rel: rel.to_owned() })
    }

    /// A staging directory `.entry.tmp-<16 hex>` in `local_dir` (the cache root's
    /// machine-local `.local/`, created), for an entry that must not touch `actions-v1/`
    /// until it is verified (an install from a store): nothing above the entry is created
    /// before [`NewEntry::publish`].
    ///
    /// # Errors
    /// I/O errors naming the path.
    pub fn in_local(local_dir: &Path, actions_dir: &Path, rel: &str) -> Result<Self, fs::Error> {
        fs::create_dir_all(local_dir)?;
        let staging = temp::create_dir(local_dir, Purpose::Staging, "entry", 0o755)?;
        Ok(Self { staging, actions_dir: actions_dir.to_path_buf(), rel: rel.to_owned() })
    }

    /// The staging directory: the entry's contents go here.
    pub fn path(&self) -> &Path {
        self.staging.path()
    }

    /// The entry directory it becomes.
    pub fn dest(&self) -> PathBuf {
        self.actions_dir.join(&self.rel)
    }

    /// Publishes the staged entry at [`NewEntry::dest`] (see the module docs), creating
    /// the directories above it within the actions directory if they are missing.
    ///
    /// # Errors
    /// I/O errors naming the path; [`fs::Error::SymlinkInPath`] for a symlink above the
    /// entry. Nothing is published on error.
    pub fn publish(
        self,
        durability: Durability,
        existing: Existing,
    ) -> Result<Published, fs::Error> {
        let dest = self.dest();
        let parent_rel = self.rel.rsplit_once('/').map_or("", |(parent, _)| parent);
        fs::create_dir_all(&self.actions_dir)?;
        fs::create_dir_all_within(&self.actions_dir, Path::new(parent_rel), 0o755)?;
        let sync = durability == Durability::Fsync;
        match (fs::publish_dir(self.staging, &dest, sync), existing) {
            (Ok(()), _) => Ok(Published::Published),
            (Err((fs::Error::AlreadyExists { .. }, _)), Existing::Keep) => {
                Ok(Published::AlreadyPresent)
            }
            (Err((fs::Error::AlreadyExists { .. }, staging)), Existing::Replace { stem }) => {
                let parent = dest.parent().unwrap_or(&self.actions_dir);
                let old = TempName::new(Purpose::Replaced, &stem).path_in(parent);
                fs::rename(&dest, &old)?;
                let result = fs::publish_dir(staging, &dest, sync).map_err(|(e, _)| e);
                if let Err(e) = fs::remove_tree(&old) {
                    tracing::warn!("could not remove replaced entry {}: {e}", old.display());
                }
                result.map(|()| Published::Published)
            }
            (Err((e, _)), _) => Err(e),
        }
    }
}

/// Writes `bytes` as a compile entry's manifest `path`: a temp file beside it, renamed over
/// whatever `path` held (the manifest is replaced when a candidate is added), without fsync:
/// it is sealed and checked at every read (see the module docs).
///
/// # Errors
/// I/O errors naming the path.
pub fn replace_manifest(path: &Path, bytes: &[u8], mode: u32) -> Result<(), fs::Error> {
    fs::write_atomic_nosync(path, bytes, mode)
}

/// Adds the file `path` to an entry from `bytes` (its directory created): a temp file
/// beside it, renamed over its name, not fsynced (as [`add_copy`]). For content-addressed
/// files (a compile entry's `objects/<hex>`), where a file already there holds the same
/// bytes.
///
/// # Errors
/// I/O errors naming the path.
pub fn add_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), fs::Error> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write_atomic_nosync(path, bytes, mode)
}

/// Adds a copy of the file `src` to an entry's directory `dir` under the name its digest
/// gives (`name(digest)`), hashing it with `algorithm` in the same pass: a temp file in
/// `dir`, renamed into place, **not fsynced**: the compile entries' objects, which a reader
/// either hashes or, to vouch for by stamp, fsyncs first (`launcher::restore::place_output`;
/// see the module docs). Returns the digest and size in bytes.
///
/// # Errors
/// I/O errors naming the path (the message names `src` when it cannot be read).
pub fn add_copy(
    src: &Path,
    dir: &Path,
    algorithm: crate::digest::DigestAlgorithm,
    name: impl FnOnce(&crate::digest::ContentDigest) -> PathBuf,
) -> Result<(crate::digest::ContentDigest, u64), fs::Error> {
    fs::create_dir_all(dir)?;
    let tmp = TempName::new(Purpose::Staging, "object").path_in(dir);
    let copied = fs::copy_new_file(src, &tmp, 0o644, false, algorithm);
    let (digest, size) = match copied {
        Ok(done) => done,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if let Err(e) = fs::rename(&tmp, &name(&digest)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok((digest, size))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// A new entry appears whole or not at all; an entry in the way is kept or replaced as
    /// asked; the staging directory never stays behind.
    #[test]
    fn new_entries_publish_keep_or_replace() {
        let d = tempfile::tempdir().unwrap();
        let actions = d.path().join("actions-v1");
        let rel = "third_party/zlib/k1";
        let entry = NewEntry::beside(&actions, rel, 0o755).unwrap();
        std::fs::write(entry.path().join("manifest.json"), b"one").unwrap();
        let staging = entry.path().to_path_buf();
        assert!(!actions.join(rel).exists(), "nothing visible before publish");
        assert_eq!(entry.publish(Durability::Fsync, Existing::Keep).unwrap(), Published::Published);
        assert_eq!(std::fs::read(actions.join(rel).join("manifest.json")).unwrap(), b"one");
        assert!(!staging.exists());

        let local = d.path().join(".local");
        let second = NewEntry::in_local(&local, &actions, rel).unwrap();
        std::fs::write(second.path().join("manifest.json"), b"two").unwrap();
        let kept = second.publish(Durability::Deferred, Existing::Keep).unwrap();
        assert_eq!(kept, Published::AlreadyPresent);
        assert_eq!(std::fs::read(actions.join(rel).join("manifest.json")).unwrap(), b"one");
        assert_eq!(std::fs::read_dir(&local).unwrap().count(), 0, "staging removed");

        let third = NewEntry::beside(&actions, rel, 0o755).unwrap();
        std::fs::write(third.path().join("manifest.json"), b"three").unwrap();
        let replace = Existing::Replace { stem: "k1".into() };
        assert_eq!(third.publish(Durability::Fsync, replace).unwrap(), Published::Published);
        assert_eq!(std::fs::read(actions.join(rel).join("manifest.json")).unwrap(), b"three");
        let names: Vec<_> = std::fs::read_dir(actions.join("third_party/zlib"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("k1")], "no leftover beside it");
    }

    /// An install from a store creates nothing under actions-v1 until it publishes, and a
    /// symlink above the entry is refused.
    #[test]
    fn installs_touch_the_layout_only_when_published_and_never_through_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let actions = d.path().join("actions-v1");
        let entry = NewEntry::in_local(&d.path().join(".local"), &actions, "compile/ab/k").unwrap();
        assert!(!actions.exists());
        drop(entry);
        std::fs::create_dir_all(&actions).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), actions.join("compile")).unwrap();
        let entry = NewEntry::in_local(&d.path().join(".local"), &actions, "compile/ab/k").unwrap();
        assert!(entry.publish(Durability::Fsync, Existing::Keep).is_err());
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn files_are_added_and_replaced_whole() {
        let d = tempfile::tempdir().unwrap();
        let objects = d.path().join("e/objects");
        add_file(&objects.join("aa"), b"bytes", 0o644).unwrap();
        replace_manifest(&d.path().join("e/manifest.json"), b"m1", 0o644).unwrap();
        replace_manifest(&d.path().join("e/manifest.json"), b"m2", 0o644).unwrap();
        assert_eq!(std::fs::read(d.path().join("e/manifest.json")).unwrap(), b"m2");
        let src = d.path().join("lib.a");
        std::fs::write(&src, b"archive").unwrap();
        let algorithm = crate::digest::DigestAlgorithm::Blake3;
        let (digest, size) =
            add_copy(&src, &objects, algorithm, |dg| objects.join(dg.to_hex())).unwrap();
        assert_eq!(size, 7);
        assert_eq!(std::fs::read(objects.join(digest.to_hex())).unwrap(), b"archive");
        assert_eq!(std::fs::read_dir(&objects).unwrap().count(), 2, "no temp file left");
        let missing =
            add_copy(&d.path().join("none"), &objects, algorithm, |dg| objects.join(dg.to_hex()));
        assert!(missing.is_err());
        assert_eq!(std::fs::read_dir(&objects).unwrap().count(), 2, "no temp file left");
    }
}
