//! L0 transfer: one ready artifact to and from an object store (issue 4 item 11;
//! docs/artifact-store.md "L0 push and pull").
//!
//! This thin orchestration layer sits above both [`crate::artifact`] (which never touches
//! the network) and [`crate::transport`] (which knows nothing about caches), so neither
//! depends on the other (DESIGN.md §2, STYLE rule 3).
//!
//! # Objects
//! One object per artifact slot, under `l0-v1/<key digest>/<spec digest>.tar.zst`
//! relative to the store URL's root or prefix: the archive of
//! [`crate::artifact::archive`] (the manifest first, then every payload file). Objects are
//! written with put-if-absent and never overwritten or deleted by strata.
//!
//! # Verification and fail-open rules
//! * [`push`] packs only a slot that verifies (every byte hashed while packed); an object
//!   already present is left alone.
//! * [`pull`] first looks locally (a local HIT needs no transfer). It downloads into the
//!   store's private root, then publishes through [`ArtifactStore::get_or_build_derived`]:
//!   the archive is checked entry by entry against its manifest and the requested key and
//!   spec while unpacked into a private directory, and the store verifies and publishes it
//!   with its usual protocol (key lock, staging, no-replace rename). A pulled artifact is
//!   therefore verified twice before use, and a corrupt object never reaches the store
//!   ([`PullOutcome::Rejected`]).
//! * Transport failures are [`Error::Transport`]; callers decide whether they are fatal
//!   (the CLI warns and carries on unless `--strict`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::artifact::{
    self, ArtifactHandle, ArtifactKey, ArtifactSpec, ArtifactStore, Disposition, Lookup, archive,
};
use crate::content::temp::{self, Purpose};
use crate::fs::{self, Sharing, StagingDir};
use crate::transport::{ObjectKey, ObjectStore, PutOutcome};

/// An L0 failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A local artifact store failure.
    #[error(transparent)]
    Artifact(#[from] artifact::Error),
    /// The object store failed.
    #[error("L0 transfer of {object} through {store} failed")]
    Transport {
        /// The store, as [`ObjectStore::describe`] prints it (no secrets).
        store: String,
        /// The object key.
        object: ObjectKey,
        /// The transport error (boxed: it is large).
        #[source]
        source: Box<crate::transport::Error>,
    },
}

impl Error {
    /// True for [`Error::Transport`]: the remote side failed (fail-open candidates).
    pub fn is_transport(&self) -> bool {
        matches!(self, Error::Transport { .. })
    }
}

impl From<fs::Error> for Error {
    fn from(e: fs::Error) -> Self {
        Error::Artifact(e.into())
    }
}

/// The advice that ends every rejection of a pulled object: it was verified right after
/// the download, so the damage may have happened in transit.
pub const MAYBE_TRANSIENT: &str = "the object was just downloaded, so this may be a \
     transient transfer error (bytes damaged in transit): retry the pull; only if every \
     retry is rejected the same way is the stored object damaged";

/// The object key of the slot of `key` and `spec`: `l0-v1/<key>/<spec>.tar.zst`.
pub fn object_key(key: &ArtifactKey, spec: &ArtifactSpec) -> ObjectKey {
    ObjectKey::new(format!("l0-v1/{}/{}.tar.zst", key.digest(), spec.digest()))
        .expect("two hex digests always form a valid object key")
}

/// What [`push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// The object was created.
    Uploaded,
    /// An object was already there; nothing was uploaded.
    AlreadyPresent,
}

/// The report of [`push`].
#[derive(Debug, Clone)]
pub struct PushReport {
    /// The object key.
    pub object: ObjectKey,
    /// What happened.
    pub outcome: PushOutcome,
    /// Archive size in bytes (0 when nothing was packed).
    pub archive_bytes: u64,
    /// Payload size in bytes.
    pub payload_bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// What [`pull`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullOutcome {
    /// The local store already had a valid slot; nothing was transferred.
    LocalHit,
    /// The object was downloaded, verified and published (or kept private, see
    /// [`PullReport::disposition`]).
    Pulled,
    /// No object under the key.
    NotInRemote,
    /// The object did not verify; nothing was published. The reason ends with
    /// [`MAYBE_TRANSIENT`]: the bytes were just downloaded.
    Rejected(String),
}

/// The report of [`pull`].
#[derive(Debug, Clone)]
pub struct PullReport {
    /// The object key.
    pub object: ObjectKey,
    /// What happened.
    pub outcome: PullOutcome,
    /// The verified local slot (local HIT, or a pull that was published).
    pub handle: Option<ArtifactHandle>,
    /// How the pulled artifact was stored (PUBLISHED, or PRIVATE when the local store is
    /// read-only or could not publish; HIT if another process published it meanwhile).
    pub disposition: Option<Disposition>,
    /// The private copy of a pull that stayed PRIVATE.
    pub private_dir: Option<PathBuf>,
    /// Why it stayed private.
    pub reason: Option<String>,
    /// Bytes downloaded.
    pub downloaded_bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Problems worth telling the user about that did not stop the pull (a local slot
    /// that is INVALID or unreadable, so the pulled artifact cannot be published over it).
    pub warnings: Vec<String>,
}

impl PullReport {
    /// The directory holding the usable artifact, if any.
    pub fn dir(&self) -> Option<PathBuf> {
        self.handle.as_ref().map(|h| h.dir()).or_else(|| self.private_dir.clone())
    }
}

/// A scratch directory `strata-l0-<16 hex>` under the private root, removed on drop.
fn scratch(store: &ArtifactStore) -> Result<StagingDir, Error> {
    let Some(root) = store.private_root() else {
        return Err(
            artifact::Error::NoPrivateRoot { root: store.root().path().to_path_buf() }.into()
        );
    };
    fs::create_dir_all(root)?;
    Ok(temp::create_dir(root, Purpose::Scratch, "l0", Sharing::Private.dir_mode())?)
}

/// Packs the local slot of `key` and `spec` and uploads it unless the object exists.
///
/// # Errors
/// [`artifact::Error::NotAvailable`] (inside [`Error::Artifact`]) if the local slot does not
/// HIT; [`Error::Transport`]; local I/O errors. Needs the store's private root for the
/// temporary archive.
pub fn push(
    store: &ArtifactStore,
    remote: &dyn ObjectStore,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
) -> Result<PushReport, Error> {
    let start = Instant::now();
    let object = object_key(key, spec);
    let transport = |source: crate::transport::Error| Error::Transport {
        store: remote.describe(),
        object: object.clone(),
        source: Box::new(source),
    };
    let handle = match store.lookup(key, spec) {
        Lookup::Hit(h) => h,
        other => {
            return Err(artifact::Error::NotAvailable {
                what: "the local artifact to push",
                status: other.status(),
                reason: other.reason().unwrap_or("not found").to_owned(),
            }
            .into());
        }
    };
    let payload_bytes = handle.manifest().total_bytes();
    if remote.head(&object).map_err(transport)?.is_some() {
        return Ok(PushReport {
            object,
            outcome: PushOutcome::AlreadyPresent,
            archive_bytes: 0,
            payload_bytes,
            seconds: start.elapsed().as_secs_f64(),
        });
    }
    let dir = scratch(store)?;
    let file = dir.path().join("artifact.tar.zst");
    let packed = archive::pack(&handle, &file)?;
    let (outcome, _) = remote.put_file_if_absent(&object, &file).map_err(transport)?;
    Ok(PushReport {
        object,
        outcome: match outcome {
            PutOutcome::Created => PushOutcome::Uploaded,
            PutOutcome::AlreadyExists => PushOutcome::AlreadyPresent,
        },
        archive_bytes: packed.archive_bytes,
        payload_bytes,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Makes the artifact of `key` and `spec` available locally: a local HIT, or a download
/// that is verified and published (module docs).
///
/// # Errors
/// [`Error::Transport`] for remote failures other than "not found"; local store errors.
/// Needs the store's private root.
pub fn pull(
    store: &ArtifactStore,
    remote: &dyn ObjectStore,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
) -> Result<PullReport, Error> {
    let start = Instant::now();
    let object = object_key(key, spec);
    let mut report = PullReport {
        object: object.clone(),
        outcome: PullOutcome::LocalHit,
        handle: None,
        disposition: None,
        private_dir: None,
        reason: None,
        downloaded_bytes: 0,
        seconds: 0.0,
        warnings: Vec::new(),
    };
    match store.lookup(key, spec) {
        Lookup::Hit(handle) => {
            report.handle = Some(handle);
            report.seconds = start.elapsed().as_secs_f64();
            return Ok(report);
        }
        Lookup::Miss => {}
        Lookup::Invalid(reason) => report.warnings.push(format!(
            "the local slot {} is invalid: {reason}; an invalid slot is never repaired or \
             replaced online, so the pulled artifact stays private; remove the slot offline \
             with `strata artifact gc --root {}`",
            store.slot(key, spec).dir().display(),
            store.root().path().display()
        )),
        Lookup::StorageError(reason) => report.warnings.push(format!(
            "the local slot {} cannot be read: {reason}; the pulled artifact stays private \
             (check the permissions of the cache root)",
            store.slot(key, spec).dir().display()
        )),
    }
    let dir = scratch(store)?;
    let file = dir.path().join("artifact.tar.zst");
    match remote.get_to_file(&object, &file) {
        Ok((meta, _)) => report.downloaded_bytes = meta.size_bytes,
        Err(e) if e.is_not_found() => {
            report.outcome = PullOutcome::NotInRemote;
            report.seconds = start.elapsed().as_secs_f64();
            return Ok(report);
        }
        Err(source) => {
            return Err(Error::Transport {
                store: remote.describe(),
                object,
                source: Box::new(source),
            });
        }
    }
    let archive_path: &Path = &file;
    let mut unpacked_into: Option<PathBuf> = None;
    let result = store.get_or_build_derived(key, spec, |dest| {
        unpacked_into = Some(dest.to_path_buf());
        archive::unpack(archive_path, dest, key, spec).map(|(manifest, _)| ((), manifest.parents))
    });
    report.seconds = start.elapsed().as_secs_f64();
    match result {
        Ok(build) => {
            report.outcome = PullOutcome::Pulled;
            report.disposition = Some(build.disposition);
            report.handle = build.handle;
            report.private_dir = build.private_dir;
            report.reason = build.reason;
            // With a slot (published, or a HIT after a lost race) the unpacked copy is
            // only a staging area: it is removed, so pulls never pile up copies in the
            // private root. A PRIVATE result keeps it (it is the result).
            if report.handle.is_some()
                && let Some(dir) = report.private_dir.take()
                && let Err(e) = fs::remove_tree(&dir)
            {
                tracing::warn!("cannot remove the pulled private copy {}: {e}", dir.display());
            }
            Ok(report)
        }
        Err(e) => {
            // A rejected or failed unpack leaves a partial private directory: remove it.
            if let Some(dir) = &unpacked_into
                && let Err(e) = fs::remove_tree(dir)
            {
                tracing::warn!("cannot remove the rejected private copy {}: {e}", dir.display());
            }
            let rejected = e
                .builder_error()
                .and_then(|b| b.downcast_ref::<artifact::Error>())
                .filter(|inner| inner.is_corrupt())
                .map(|inner| format!("{inner}; {MAYBE_TRANSIENT}"));
            match rejected {
                Some(reason) => {
                    tracing::warn!("rejected L0 object {object}: {reason}");
                    report.outcome = PullOutcome::Rejected(reason);
                    Ok(report)
                }
                None => Err(e.into()),
            }
        }
    }
}
