//! L0 signature records: what a producer signs about one archive
//! ([`ArchiveStatement`], a `strata.l0_signature` record stored at `<object>.sig`), and
//! the check of a pulled object's record against a trust policy.

use std::path::Path;

use super::{Error, signature_key};
use crate::artifact::{ArtifactKey, ArtifactSpec};
use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs;
use crate::record::Schema;
use crate::transport::{ObjectKey, ObjectStore};
use crate::trust::{Producer, Signature, TrustPolicy};

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
    pub manifest_digest: crate::record::RecordDigest,
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

/// Size and BLAKE3 of the stored object `object` (downloaded into `scratch_dir`), or
/// `None` if it is gone.
pub(super) fn stored_digest(
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
pub(super) fn signed_statement(
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
