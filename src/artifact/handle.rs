//! [`ArtifactHandle`]: a verified published slot, and materialization out of the store
//! (docs/artifact-store.md "Handles").
//!
//! # Verification memo and its trust boundary
//!
//! A handle remembers, for each file it hashed, the file's stamp (device, inode, size,
//! mtime and ctime in nanoseconds, mode) and digest. [`ArtifactHandle::verify`] walks the
//! slot again, re-reads and re-checks the manifest, compares the listing, and re-hashes
//! only files whose stamp changed. Clones of a handle share the memo; a new lookup starts
//! with an empty one. The memo lives in memory only, for the life of the handle.
//!
//! The rule relies on the kernel updating `ctime` whenever a file's bytes or inode change,
//! which no unprivileged process can forge (`utimensat` can set mtime, never ctime). What
//! an attacker with write access to the store can still do without a re-hash being forced:
//! * write through a `MAP_SHARED` mapping made before the check (mtime/ctime are updated
//!   lazily, possibly after the check);
//! * with `CAP_SYS_TIME` (root), set the clock back and rewrite the file so size, mtime and
//!   ctime match again; or write the block device underneath the filesystem;
//! * on a network or FUSE filesystem, serve timestamps that do not follow the content.
//!
//! A writer with those powers can also replace code and manifest together, which no digest
//! check detects: writers of the root must be trusted. The first verification of
//! every handle always hashes every byte. Materialization hashes every byte it copies and
//! compares it with the manifest, memo or not, so copied bytes are always the verified ones.

use crate::content::VerifyMemo;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::Error;
use super::destination::Destination;
use super::identity::{ArtifactKey, ArtifactSpec};
use super::layout::{SlotPath, StoreRoot};
use super::manifest::{ManifestDigest, ManifestPayload};
use super::verify::{self, Memo, Problem, Verified};
use crate::content;
use crate::fs::{self, Sharing};

/// A published slot that verified against its key and spec.
///
/// Two handles are equal when they name the same slot, key, spec and root. Consumers must
/// treat [`ArtifactHandle::dir`] as immutable.
#[derive(Clone)]
pub struct ArtifactHandle {
    inner: Arc<Inner>,
}

struct Inner {
    root: StoreRoot,
    slot: SlotPath,
    key: ArtifactKey,
    spec: ArtifactSpec,
    manifest: ManifestPayload,
    digest: ManifestDigest,
    memo: Memo,
}

impl std::fmt::Debug for ArtifactHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactHandle")
            .field("dir", &self.inner.slot.dir())
            .field("manifest_digest", &self.inner.digest)
            .finish()
    }
}

impl PartialEq for ArtifactHandle {
    fn eq(&self, other: &Self) -> bool {
        self.inner.slot == other.inner.slot
            && self.inner.key == other.inner.key
            && self.inner.spec == other.inner.spec
            && self.inner.root == other.inner.root
    }
}

impl Eq for ArtifactHandle {}

/// What [`ArtifactHandle::verify`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyReport {
    /// Payload files.
    pub files: usize,
    /// Payload bytes.
    pub total_bytes: u64,
    /// Bytes actually read and hashed this time (0 when every stamp was unchanged).
    pub hashed_bytes: u64,
}

/// One pass of [`ArtifactHandle::verify_passes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyPass {
    /// Wall time of the pass.
    pub elapsed: std::time::Duration,
    /// What the pass found: HIT, or INVALID / STORAGE_ERROR as a lookup reports the same
    /// problem ([`Error::lookup_status`]).
    pub status: super::LookupStatus,
    /// The pass's report (HIT).
    pub report: Option<VerifyReport>,
    /// Why the slot no longer verifies (not HIT).
    pub reason: Option<String>,
}

/// What [`ArtifactHandle::materialize`] copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializeReport {
    /// The canonical destination.
    pub dest: PathBuf,
    /// Files copied.
    pub files: usize,
    /// Bytes copied (each hashed while copied).
    pub bytes: u64,
}

impl ArtifactHandle {
    pub(crate) fn from_verified(
        root: StoreRoot,
        slot: SlotPath,
        verified: Verified,
        memo: Memo,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                root,
                slot,
                key: verified.key,
                spec: verified.spec,
                manifest: verified.manifest,
                digest: verified.digest,
                memo,
            }),
        }
    }

    pub(crate) fn new_memo() -> Memo {
        Mutex::new(VerifyMemo::new("artifact handle"))
    }

    /// The slot directory (absolute, under the canonical root).
    pub fn dir(&self) -> PathBuf {
        self.inner.slot.dir()
    }

    /// The slot.
    pub fn slot(&self) -> &SlotPath {
        &self.inner.slot
    }

    /// The canonical store root.
    pub fn root(&self) -> &Path {
        self.inner.root.path()
    }

    /// The key.
    pub fn key(&self) -> &ArtifactKey {
        &self.inner.key
    }

    /// The spec.
    pub fn spec(&self) -> &ArtifactSpec {
        &self.inner.spec
    }

    /// The verified manifest payload.
    pub fn manifest(&self) -> &ManifestPayload {
        &self.inner.manifest
    }

    /// The manifest record's digest (what lineage refers to).
    pub fn manifest_digest(&self) -> ManifestDigest {
        self.inner.digest
    }

    /// Verifies the slot again: walk, manifest, listing, and the SHA-256 of every file whose
    /// stamp changed since this handle last hashed it (see the module docs for the rule and
    /// its trust boundary).
    ///
    /// # Errors
    /// [`Error::Corrupt`] if the slot no longer verifies or its manifest changed;
    /// [`Error::Storage`] if it cannot be read.
    pub fn verify(&self) -> Result<VerifyReport, Error> {
        let inner = &self.inner;
        let verified = verify::verify_slot(
            &inner.root,
            &inner.slot,
            Some((&inner.key, &inner.spec)),
            Some(&inner.memo),
        )
        .map_err(|p| self.problem(p))?;
        if verified.digest != inner.digest {
            return Err(Error::Corrupt {
                path: inner.slot.dir(),
                reason: format!(
                    "the manifest changed since the handle was created ({} → {})",
                    inner.digest, verified.digest
                ),
            });
        }
        Ok(VerifyReport {
            files: verified.manifest.files.len(),
            total_bytes: verified.manifest.total_bytes(),
            hashed_bytes: verified.hashed_bytes,
        })
    }

    /// Verifies the slot `passes` more times with this handle (`strata artifact verify
    /// --repeat`: passes after the first lookup re-hash only files whose stamp changed),
    /// stopping at the first pass that fails.
    pub fn verify_passes(&self, passes: u32) -> Vec<VerifyPass> {
        let mut out = Vec::new();
        for _ in 0..passes {
            let start = std::time::Instant::now();
            let verified = self.verify();
            let elapsed = start.elapsed();
            match verified {
                Ok(report) => out.push(VerifyPass {
                    elapsed,
                    status: super::LookupStatus::Hit,
                    report: Some(report),
                    reason: None,
                }),
                Err(e) => {
                    let status = e.lookup_status();
                    out.push(VerifyPass {
                        elapsed,
                        status,
                        report: None,
                        reason: Some(e.to_string()),
                    });
                    break;
                }
            }
        }
        out
    }

    fn problem(&self, problem: Problem) -> Error {
        match problem {
            Problem::Storage(reason) => Error::Storage { path: self.inner.slot.dir(), reason },
            other => Error::Corrupt { path: self.inner.slot.dir(), reason: other.reason() },
        }
    }

    /// Copies the verified payload (not the manifest) into `dest`, a new path or an empty
    /// directory outside the store root (checked after resolving symlinks, so a link
    /// outside pointing inside is refused): [`ArtifactHandle::materialize_into`] of
    /// `Destination::check`.
    ///
    /// # Errors
    /// As [`ArtifactHandle::materialize_into`].
    pub fn materialize(&self, dest: &Path) -> Result<MaterializeReport, Error> {
        let dest = Destination::check(&self.inner.root, dest)?;
        self.materialize_into(&dest)
    }

    /// Verifies the slot, then copies its payload (not the manifest) into the checked
    /// destination `dest`. Files are new files (never hard links), owner writable: mode
    /// 0600, or 0700 with owner-exec; directories 0700. Every byte copied is hashed and
    /// compared with the manifest, memo or not. The copy goes to a staging directory and is
    /// moved into place only once every file matched, so on failure `dest` holds nothing new
    /// (see [`Destination`]).
    ///
    /// # Errors
    /// [`Error::Destination`] if `dest` became unusable since it was checked;
    /// [`Error::Corrupt`] if the slot does not verify or a copied byte differs;
    /// [`Error::Fs`] for I/O errors.
    pub fn materialize_into(&self, dest: &Destination) -> Result<MaterializeReport, Error> {
        if dest.root() != &self.inner.root {
            // Checked against another store: check against this one too.
            Destination::check(&self.inner.root, dest.path())?;
        }
        self.verify()?;
        let (files, bytes) = dest.fill(|staging| self.copy_payload(staging))?;
        Ok(MaterializeReport { dest: dest.resolved().to_path_buf(), files, bytes })
    }

    /// Copies every payload file into `dest` (an empty directory), checking each one
    /// against the manifest (the content layer's [`content::verify::copy_files`]). Returns
    /// the number of files and bytes.
    fn copy_payload(&self, dest: &Path) -> Result<(usize, u64), Error> {
        let files = &self.inner.manifest.files;
        let modes = content::verify::Modes::of(Sharing::Private);
        let bytes = content::verify::copy_files(&self.inner.slot.dir(), files, dest, modes)
            .map_err(|e| match (verify::classify(&e), &e) {
                (Problem::Storage(_), _) => Error::from(e),
                (other, fs::Error::DigestMismatch { path, .. })
                | (other, fs::Error::ChangedWhileReading { path }) => {
                    Error::Corrupt { path: path.clone(), reason: other.reason() }
                }
                (other, _) => Error::Corrupt { path: self.dir(), reason: other.reason() },
            })?;
        Ok((files.len(), bytes))
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::artifact::{
        ArtifactStore, BuildKind, EnvironmentIdentity, Mode, Stage, StoreOptions,
    };
    use crate::fs::{FileStamp, RelPath};

    /// A byte flipped in the slot that the handle's memo cannot see (the documented trust
    /// boundary, e.g. a write through an old `MAP_SHARED` mapping) is caught while copying,
    /// and the destination is left without a single copied byte.
    #[test]
    fn corruption_met_while_copying_leaves_the_destination_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            mode: Mode::ReadWrite,
            private_root: Some(dir.path().join("private")),
            ..StoreOptions::default()
        };
        let store = ArtifactStore::open(&dir.path().join("cache"), options).unwrap();
        let env = EnvironmentIdentity::new([("cc", Some("1".repeat(64)))]).unwrap();
        let key = ArtifactKey::new(env, &"2".repeat(64), &"3".repeat(64)).unwrap();
        let spec = ArtifactSpec::new(Stage::Generated, BuildKind::Single, ["a", "b/c"]).unwrap();
        let handle = store
            .get_or_build(&key, &spec, |out| {
                std::fs::write(out.join("a"), b"first file")?;
                std::fs::create_dir(out.join("b"))?;
                std::fs::write(out.join("b/c"), b"second file")
            })
            .unwrap()
            .handle
            .unwrap();
        // Flip a byte and make the memo believe the file is unchanged.
        let target = handle.dir().join("b/c");
        std::fs::write(&target, b"second fil!").unwrap();
        let stamp = FileStamp::of(&std::fs::symlink_metadata(&target).unwrap());
        let rel = RelPath::new("b/c").unwrap();
        let recorded = handle.manifest().files.iter().find(|f| f.path == rel).unwrap().digest;
        let long_ago = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        handle.inner.memo.lock().unwrap().remember(&rel, stamp, recorded, long_ago);
        handle.verify().expect("the memo hides the change");
        let err = handle.materialize(&dir.path().join("new/dest")).unwrap_err();
        assert!(err.is_corrupt(), "{err}");
        assert!(!dir.path().join("new").exists(), "a failed copy left the new destination");
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let err = handle.materialize(&empty).unwrap_err();
        assert!(err.is_corrupt(), "{err}");
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "unverified bytes left");
    }
}
