//! L0 transfer: one ready artifact to and from an object store (docs/artifact-store.md
//! "L0 objects, push and pull").
//!
//! This thin orchestration layer sits above both [`crate::artifact`] (which never touches
//! the network) and [`crate::transport`] (which knows nothing about caches), so neither
//! depends on the other (module dependencies point one way: see the crate docs).
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
use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs::temp::{self, Purpose};
use crate::fs::{self, Sharing, StagingDir};
use crate::progress::{Phase, Progress};
use crate::record::Timestamp;
use crate::record::{Envelope, Schema};
use crate::transport::{DownloadPhase, ObjectKey, ObjectStore, PutOutcome};
use crate::trust::{Producer, Signature, SigningKey, TrustPolicy};

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

/// Schema of an L0 signature record.
pub const SIGNATURE_SCHEMA: Schema =
    Schema { name: "strata.l0_signature", version: 1, features: &[] };

/// The signature domain of L0 signature records (see [`crate::trust`]).
pub const SIGNATURE_DOMAIN: &str = "strata.l0_signature";

/// Largest signature record read, in bytes.
const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;

/// What a producer signs about one L0 archive: the object's name, size and
/// BLAKE3 digest, the artifact's key, spec and manifest digests, the producer and the time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveStatement {
    /// The archive's object key.
    pub object: String,
    /// Its size in bytes.
    pub object_size_bytes: u64,
    /// Its digest (BLAKE3).
    pub object_digest: ContentDigest,
    /// The artifact's key digest (64 hex).
    pub key_digest: String,
    /// The artifact's spec digest (64 hex).
    pub spec_digest: String,
    /// The manifest record's digest (`sha256:<hex>`) inside the archive.
    pub manifest_digest: String,
    /// Signing time, UTC RFC 3339.
    pub created_at: String,
    /// Who signed (the CI context).
    pub producer: Producer,
    /// The signature over all of the above ([`ArchiveStatement::statement`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

impl ArchiveStatement {
    /// The signed bytes: the canonical JSON of the record without its signature.
    pub fn statement(&self) -> Vec<u8> {
        let unsigned = ArchiveStatement { signature: None, ..self.clone() };
        crate::record::canonical_bytes_of(&unsigned).unwrap_or_default()
    }
}

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
        outcome: match outcome {
            PutOutcome::Created => PushOutcome::Uploaded,
            PutOutcome::AlreadyExists => PushOutcome::AlreadyPresent,
        },
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
            manifest_digest: handle.manifest_digest().to_string(),
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
            outcome: match outcome {
                PutOutcome::Created => PushOutcome::Uploaded,
                PutOutcome::AlreadyExists => PushOutcome::AlreadyPresent,
            },
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

/// Size and BLAKE3 of the stored object `object` (downloaded into `scratch_dir`), or
/// `None` if it is gone.
fn stored_digest(
    remote: &dyn ObjectStore,
    object: &ObjectKey,
    scratch_dir: &Path,
) -> Result<Option<(ContentDigest, u64)>, Error> {
    let file = scratch_dir.join("stored.tar.zst");
    match remote.get_to_file(object, &file) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => return Ok(None),
        Err(source) => {
            return Err(Error::Transport {
                store: remote.describe(),
                object: object.clone(),
                source: Box::new(source),
            });
        }
    }
    let (digest, size, _) = fs::hash_file_stable(&file, DigestAlgorithm::Blake3)?;
    let _ = fs::remove_file(&file);
    Ok(Some((digest, size)))
}

/// With trusted keys in `policy`: downloads and checks the signature record of `object`
/// (signed by a trusted key, naming this object, key and spec). Returns the signed
/// statement to compare the archive with, or the reason to reject the object.
fn signed_statement(
    remote: &dyn ObjectStore,
    object: &ObjectKey,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    policy: &TrustPolicy,
    scratch_dir: &Path,
) -> Result<Result<ArchiveStatement, String>, Error> {
    let sig_object = signature_key(object);
    let file = scratch_dir.join("artifact.sig");
    let transport_err = |source| Error::Transport {
        store: remote.describe(),
        object: sig_object.clone(),
        source: Box::new(source),
    };
    // The store's size claim first: a huge record is rejected before a byte of it is
    // downloaded (what arrives is capped again below, whatever the store claimed).
    match remote.head(&sig_object).map_err(transport_err)? {
        None => {
            let rejection = crate::trust::Rejection::Unsigned;
            return Ok(Err(format!("its producer is not trusted: {rejection} (no {sig_object})")));
        }
        Some(meta) if meta.size_bytes > MAX_SIGNATURE_BYTES => {
            return Ok(Err(format!(
                "its signature record {sig_object} is larger than 64 KiB ({} bytes); not downloaded",
                meta.size_bytes
            )));
        }
        Some(_) => {}
    }
    match remote.get_to_file(&sig_object, &file) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {
            let rejection = crate::trust::Rejection::Unsigned;
            return Ok(Err(format!("its producer is not trusted: {rejection} (no {sig_object})")));
        }
        Err(source) => {
            return Err(Error::Transport {
                store: remote.describe(),
                object: sig_object,
                source: Box::new(source),
            });
        }
    }
    let Some(bytes) = fs::read_capped_nofollow(&file, MAX_SIGNATURE_BYTES)? else {
        return Ok(Err(format!("its signature record {sig_object} is larger than 64 KiB")));
    };
    let statement: ArchiveStatement = match crate::record::load_as(&bytes, &SIGNATURE_SCHEMA) {
        Ok((_, s)) => s,
        Err(e) => {
            return Ok(Err(format!(
                "its signature record {sig_object} does not load: {}",
                e.problem()
            )));
        }
    };
    if statement.object != object.as_str()
        || statement.key_digest != key.digest().to_string()
        || statement.spec_digest != spec.digest().to_string()
    {
        return Ok(Err(format!(
            "its signature record {sig_object} names another object, key or spec"
        )));
    }
    match policy.check(SIGNATURE_DOMAIN, &statement.statement(), statement.signature.as_ref()) {
        Ok(_) => Ok(Ok(statement)),
        Err(rejection) => Ok(Err(format!("its producer is not trusted: {rejection}"))),
    }
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
    trust: &Trust<'_>,
    progress: &dyn Progress,
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
    report.handle = look_locally(store, key, spec, &mut report.warnings);
    if report.handle.is_none() {
        let dir = scratch(store)?;
        let fetch = Fetch { remote, object: &object, key, spec, policy: &trust.policy, progress };
        let file = dir.path().join("artifact.tar.zst");
        let mut fetched = fetch.download(dir.path(), &file)?;
        if let Err(PullOutcome::Rejected(plain)) = &fetched
            && !trust.policy.is_empty()
        {
            // The plain object is not a trusted producer's (anyone with write access may
            // have put one there first): a trusted producer then pushed to its keyed name.
            let plain = plain.clone();
            let mut tried = Vec::new();
            for public in trust.policy.keys().iter().take(MAX_KEYED_OBJECTS) {
                let keyed = keyed_object_key(key, spec, &public.id().to_string());
                let fetch = Fetch { object: &keyed, ..fetch };
                match fetch.download(dir.path(), &file)? {
                    Ok(bytes) => {
                        report.object = keyed;
                        fetched = Ok(bytes);
                        break;
                    }
                    Err(PullOutcome::NotInRemote) => tried.push(format!("no {keyed}")),
                    Err(PullOutcome::Rejected(why)) => tried.push(format!("{keyed}: {why}")),
                    Err(other) => tried.push(format!("{keyed}: {}", other.as_str())),
                }
            }
            if fetched.is_err() {
                fetched = Err(PullOutcome::Rejected(format!(
                    "{plain}; no trusted producer's object either ({})",
                    tried.join("; ")
                )));
            }
        }
        match fetched {
            Ok(bytes) => {
                report.downloaded_bytes = bytes;
                publish_pulled(store, key, spec, &file, &mut report)?;
            }
            Err(outcome) => report.outcome = outcome,
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// The local slot, if it HITs; an INVALID or unreadable slot adds a warning (the pulled
/// artifact cannot be published over it).
fn look_locally(
    store: &ArtifactStore,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    warnings: &mut Vec<String>,
) -> Option<ArtifactHandle> {
    match store.lookup(key, spec) {
        Lookup::Hit(handle) => return Some(handle),
        Lookup::Miss => {}
        Lookup::Invalid(reason) => warnings.push(format!(
            "the local slot {} is invalid: {reason}; an invalid slot is never repaired or \
             replaced online, so the pulled artifact stays private; remove the slot offline \
             with `strata artifact gc --root {}`",
            store.slot(key, spec).dir().display(),
            store.root().path().display()
        )),
        Lookup::StorageError(reason) => warnings.push(format!(
            "the local slot {} cannot be read: {reason}; the pulled artifact stays private \
             (check the permissions of the cache root)",
            store.slot(key, spec).dir().display()
        )),
    }
    None
}

/// One object to download and check.
#[derive(Clone, Copy)]
struct Fetch<'a> {
    remote: &'a dyn ObjectStore,
    object: &'a ObjectKey,
    key: &'a ArtifactKey,
    spec: &'a ArtifactSpec,
    policy: &'a TrustPolicy,
    progress: &'a dyn Progress,
}

impl Fetch<'_> {
    /// Downloads the archive into `file` (its signature first, into `scratch_dir`, when
    /// producers are checked). `Ok(Ok(bytes))`: downloaded (and, when signed, the bytes its
    /// producer signed); `Ok(Err(outcome))`: not in the store, or rejected.
    fn download(&self, scratch_dir: &Path, file: &Path) -> Result<Result<u64, PullOutcome>, Error> {
        let (remote, object) = (self.remote, self.object);
        let signed = if self.policy.is_empty() {
            None
        } else {
            match signed_statement(remote, object, self.key, self.spec, self.policy, scratch_dir)? {
                Ok(statement) => Some(statement),
                Err(reason) => return Ok(Err(rejected(object, reason))),
            }
        };
        let phase = DownloadPhase::new(self.progress, "download");
        let fetched = remote.get_to_file_observed(object, file, &phase);
        drop(phase);
        let bytes = match fetched {
            Ok((meta, _)) => meta.size_bytes,
            Err(e) if e.is_not_found() => return Ok(Err(PullOutcome::NotInRemote)),
            Err(source) => {
                return Err(Error::Transport {
                    store: remote.describe(),
                    object: object.clone(),
                    source: Box::new(source),
                });
            }
        };
        if let Some(statement) = &signed {
            let (digest, size, _) =
                fs::hash_file_stable(file, statement.object_digest.algorithm())?;
            if digest != statement.object_digest || size != statement.object_size_bytes {
                let reason = format!(
                    "the archive ({size} bytes, {digest}) is not the one its producer signed \
                     ({} bytes, {}); {MAYBE_TRANSIENT}",
                    statement.object_size_bytes, statement.object_digest
                );
                return Ok(Err(rejected(object, reason)));
            }
        }
        Ok(Ok(bytes))
    }
}

/// A rejection of `object`, logged.
fn rejected(object: &ObjectKey, reason: String) -> PullOutcome {
    tracing::warn!("rejected L0 object {object}: {reason}");
    PullOutcome::Rejected(reason)
}

/// Publishes the downloaded archive `file` through the store: unpacked and checked into a
/// private directory, then verified and published (or kept private). A corrupt archive is
/// a rejection; its partial private directory is removed.
fn publish_pulled(
    store: &ArtifactStore,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    file: &Path,
    report: &mut PullReport,
) -> Result<(), Error> {
    let mut unpacked_into: Option<PathBuf> = None;
    let result = store.get_or_build_derived(key, spec, |dest| {
        unpacked_into = Some(dest.to_path_buf());
        archive::unpack(file, dest, key, spec).map(|(manifest, _)| ((), manifest.parents))
    });
    let e = match result {
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
            return Ok(());
        }
        Err(e) => e,
    };
    // A rejected or failed unpack leaves a partial private directory: remove it.
    if let Some(dir) = &unpacked_into
        && let Err(e) = fs::remove_tree(dir)
    {
        tracing::warn!("cannot remove the rejected private copy {}: {e}", dir.display());
    }
    let corrupt = e
        .builder_error()
        .and_then(|b| b.downcast_ref::<artifact::Error>())
        .filter(|inner| inner.is_corrupt())
        .map(|inner| format!("{inner}; {MAYBE_TRANSIENT}"));
    match corrupt {
        Some(reason) => {
            report.outcome = rejected(&report.object, reason);
            Ok(())
        }
        None => Err(e.into()),
    }
}
