//! L0 transfer: one ready artifact to and from an object store (docs/artifact-store.md
//! "L0 objects, push and pull").
//!
//! The part of the artifact store that reaches an object store, through
//! [`crate::transport`]'s store trait (which knows nothing about caches): the rest of
//! [`crate::artifact`] works on the local store only.
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

mod pull;
mod signature;

use std::path::PathBuf;
use std::time::Instant;

use crate::artifact::{
    self, ArtifactHandle, ArtifactKey, ArtifactSpec, ArtifactStore, Disposition, Lookup, archive,
};
use crate::digest::DigestAlgorithm;
use crate::fs::temp::{self, Purpose};
use crate::fs::{self, Sharing, StagingDir};
use crate::progress::{Phase, Progress};
use crate::record::Envelope;
use crate::record::Timestamp;
use crate::transport::{ObjectKey, ObjectStore, PutOutcome};
use crate::trust::{Producer, SigningKey, TrustPolicy};

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

/// The object key a producer whose key id is `key_id` (16 hex) pushes the slot to when
/// another writer's object or signature already holds [`object_key`]:
/// `l0-v1/<key>/<spec>.<key id>.tar.zst`. Consumers with trusted keys look there (one
/// small read of its signature per trusted key) when the plain object is not a trusted
/// producer's, so an object anyone with write access puts first never hides a trusted one.
pub fn keyed_object_key(key: &ArtifactKey, spec: &ArtifactSpec, key_id: &str) -> ObjectKey {
    ObjectKey::new(format!("l0-v1/{}/{}.{key_id}.tar.zst", key.digest(), spec.digest()))
        .expect("hex digests and a hex key id always form a valid object key")
}

/// Most keyed objects ([`keyed_object_key`]) a pull tries after a plain object it does not
/// trust.
pub const MAX_KEYED_OBJECTS: usize = 8;

/// The object key of the producer signature of the archive at `object`:
/// `<object>.sig` (a `strata.l0_signature` record).
pub fn signature_key(object: &ObjectKey) -> ObjectKey {
    ObjectKey::new(format!("{}.sig", object.as_str()))
        .expect("an object key with a suffix is still a valid object key")
}

pub use pull::pull;
pub use signature::{ArchiveStatement, SIGNATURE_DOMAIN, SIGNATURE_SCHEMA};
use signature::{signed_statement, stored_digest};

/// How [`push`] signs and [`pull`] checks producers.
#[derive(Debug, Default)]
pub struct Trust<'a> {
    /// Sign pushed archives with this key (`--signing-key`, `STRATA_SIGNING_KEY`).
    pub signing_key: Option<&'a SigningKey>,
    /// Accept pulled archives only if signed by one of these keys (empty: not checked).
    pub policy: TrustPolicy,
    /// Recorded in signatures.
    pub producer: Producer,
}

/// What [`push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// The object was created.
    Uploaded,
    /// An object was already there; nothing was uploaded.
    AlreadyPresent,
}

impl From<PutOutcome> for PushOutcome {
    fn from(put: PutOutcome) -> Self {
        match put {
            PutOutcome::Created => PushOutcome::Uploaded,
            PutOutcome::AlreadyExists => PushOutcome::AlreadyPresent,
        }
    }
}

impl PushOutcome {
    /// `uploaded` or `already_present`.
    pub fn as_str(self) -> &'static str {
        match self {
            PushOutcome::Uploaded => "uploaded",
            PushOutcome::AlreadyPresent => "already_present",
        }
    }
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
    /// True if a signature record was uploaded for the object by this push.
    pub signed: bool,
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

impl PullOutcome {
    /// `local_hit`, `pulled`, `not_in_store` or `rejected`.
    pub fn as_str(&self) -> &'static str {
        match self {
            PullOutcome::LocalHit => "local_hit",
            PullOutcome::Pulled => "pulled",
            PullOutcome::NotInRemote => "not_in_store",
            PullOutcome::Rejected(_) => "rejected",
        }
    }
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

    /// After the pull: fills `dest` from the slot or the private copy, keeps a temporary
    /// private root that holds the only copy when there is no `dest`, and says which paths
    /// outlive the process ([`artifact::settle`]). Whether an artifact is available at all
    /// is [`PullReport::dir`].
    ///
    /// # Errors
    /// As [`artifact::settle`].
    pub fn settle(
        &self,
        dest: Option<&artifact::Destination>,
        private: &mut artifact::PrivateRoot,
    ) -> Result<artifact::Kept, artifact::Error> {
        let dir = self.private_dir.as_deref();
        artifact::settle(self.handle.as_ref(), dir, dest, artifact::PrivateBuild::Remove, private)
    }
}

/// A scratch directory `strata-l0-<16 hex>` under the private root, removed on drop.
pub(super) fn scratch(store: &ArtifactStore) -> Result<StagingDir, Error> {
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
    trust: &Trust<'_>,
    progress: &dyn Progress,
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
    if let Some(signing_key) = trust.signing_key {
        return push_signed(store, remote, &handle, (key, spec), signing_key, trust, progress).map(
            |mut report| {
                report.seconds = start.elapsed().as_secs_f64();
                report
            },
        );
    }
    if remote.head(&object).map_err(transport)?.is_some() {
        return Ok(PushReport {
            object,
            outcome: PushOutcome::AlreadyPresent,
            archive_bytes: 0,
            payload_bytes,
            seconds: start.elapsed().as_secs_f64(),
            signed: false,
        });
    }
    let dir = scratch(store)?;
    let file = dir.path().join("artifact.tar.zst");
    let packed = archive::pack(&handle, &file, progress)?;
    let phase = Phase::begin(progress, "upload", packed.archive_bytes);
    let put = remote.put_file_if_absent_observed(&object, &file, progress);
    drop(phase);
    let (outcome, _) = put.map_err(transport)?;
    Ok(PushReport {
        object,
        outcome: outcome.into(),
        archive_bytes: packed.archive_bytes,
        payload_bytes,
        seconds: start.elapsed().as_secs_f64(),
        signed: false,
    })
}

/// A signed push (module docs): the archive and its signature record go to the plain
/// object key when the slot is free there (or already holds this producer's signature of
/// these bytes); when another writer's object or signature holds it, to the producer's
/// keyed object ([`keyed_object_key`]), where consumers that trust the producer look next.
fn push_signed(
    store: &ArtifactStore,
    remote: &dyn ObjectStore,
    handle: &ArtifactHandle,
    (key, spec): (&ArtifactKey, &ArtifactSpec),
    signing_key: &SigningKey,
    trust: &Trust<'_>,
    progress: &dyn Progress,
) -> Result<PushReport, Error> {
    let payload_bytes = handle.manifest().total_bytes();
    let dir = scratch(store)?;
    let file = dir.path().join("artifact.tar.zst");
    let packed = archive::pack(handle, &file, progress)?;
    let (digest, size, _) = fs::hash_file_stable(&file, DigestAlgorithm::Blake3)?;
    let own = TrustPolicy::new([signing_key.public_key().clone()]);
    let plain = object_key(key, spec);
    let keyed = keyed_object_key(key, spec, &signing_key.public_key().id().to_string());
    let mut last = None;
    for object in [plain, keyed] {
        let transport = |source: crate::transport::Error| Error::Transport {
            store: remote.describe(),
            object: object.clone(),
            source: Box::new(source),
        };
        let sig_object = signature_key(&object);
        // This producer's signature of these very bytes: nothing to do.
        if let Ok(statement) = signed_statement(remote, &object, key, spec, &own, dir.path())?
            && statement.object_digest == digest
            && statement.object_size_bytes == size
            && remote.head(&object).map_err(transport)?.is_some()
        {
            return Ok(PushReport {
                object,
                outcome: PushOutcome::AlreadyPresent,
                archive_bytes: 0,
                payload_bytes,
                seconds: 0.0,
                signed: false,
            });
        }
        if remote.head(&sig_object).map_err(transport)?.is_some() {
            // Another writer's signature holds the name: this producer's goes elsewhere.
            last = Some(object);
            continue;
        }
        let phase = Phase::begin(progress, "upload", packed.archive_bytes);
        let put = remote.put_file_if_absent_observed(&object, &file, progress);
        drop(phase);
        let (outcome, _) = put.map_err(transport)?;
        if outcome == PutOutcome::AlreadyExists {
            // An object is there already. It is this producer's bytes only if its size
            // and BLAKE3 match: otherwise another writer's, and the keyed name is used.
            let stored = stored_digest(remote, &object, dir.path())?;
            if stored != Some((digest, size)) {
                last = Some(object);
                continue;
            }
        }
        let mut record = ArchiveStatement {
            object: object.as_str().to_owned(),
            object_size_bytes: size,
            object_digest: digest,
            key_digest: key.digest().to_string(),
            spec_digest: spec.digest().to_string(),
            manifest_digest: crate::record::RecordDigest::of(&handle.manifest_digest().digest()),
            created_at: Timestamp::now().rfc3339_seconds(),
            producer: trust.producer.clone(),
            signature: None,
        };
        record.signature = Some(signing_key.sign(SIGNATURE_DOMAIN, &record.statement()));
        let sealed = Envelope::seal(&SIGNATURE_SCHEMA, Vec::new(), &record)
            .map_err(|e| Error::Artifact(artifact::Error::from(e)))?;
        let sig_file = dir.path().join("artifact.sig");
        let _ = fs::remove_file(&sig_file);
        fs::write_new(&sig_file, &sealed.to_bytes(), 0o600)?;
        let sig_transport = |source| Error::Transport {
            store: remote.describe(),
            object: sig_object.clone(),
            source: Box::new(source),
        };
        let (sig_outcome, _) =
            remote.put_file_if_absent(&sig_object, &sig_file).map_err(sig_transport)?;
        if sig_outcome == PutOutcome::AlreadyExists {
            last = Some(object);
            continue;
        }
        return Ok(PushReport {
            object,
            outcome: outcome.into(),
            archive_bytes: packed.archive_bytes,
            payload_bytes,
            seconds: 0.0,
            signed: true,
        });
    }
    // Both names hold other writers' signatures (someone squats the keyed name too).
    let object = last.unwrap_or_else(|| keyed_object_key(key, spec, "0"));
    Err(Error::Transport {
        store: remote.describe(),
        object: object.clone(),
        source: Box::new(crate::transport::Error::Protocol {
            method: "PUT".into(),
            location: object.as_str().to_owned(),
            reason: "another writer's signature record already holds both the plain and this \
                     producer's keyed name of the slot; delete the records that are not this \
                     producer's from the store"
                .into(),
            retryable: false,
            attempts: crate::transport::Attempts::default(),
        }),
    })
}
