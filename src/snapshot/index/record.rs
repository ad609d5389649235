//! The records of index snapshots (docs/format.md "Index snapshots"; envelopes as in
//! docs/records.md):
//!
//! * [`SnapshotIndex`] (`strata.snapshot_index` v1): what an index snapshot holds, one
//!   [`IndexEntry`] per L1 entry, sorted by path. Stored zstd-compressed as the object its
//!   sidecar (version 4, kind `index`) names; the sidecar's `manifest_digest` is this
//!   record's content digest.
//! * [`EntryRef`] (`strata.entry_ref` v1): where the entry of one action key lives in the
//!   store, for the remote entry tier (`~refs/<2 hex>/<sha256(path)>.json`, plain JSON).
//!   Signed by the producer when it has a signing key (domain [`REF_SIGNATURE_DOMAIN`]).

use serde::{Deserialize, Serialize};

use crate::digest::ContentDigest;
use crate::record::Schema;
use crate::snapshot::Error;
use crate::snapshot::manifest::{Producer, load, seal};

/// Schema of the index record.
pub const INDEX_SCHEMA: Schema =
    Schema { name: "strata.snapshot_index", version: 1, features: &[] };
/// Schema of the entry ref record.
pub const REF_SCHEMA: Schema = Schema { name: "strata.entry_ref", version: 1, features: &[] };
/// The signature domain of entry refs.
pub const REF_SIGNATURE_DOMAIN: &str = "strata.entry_ref";
/// Largest index object read (compressed or not), in bytes.
pub const MAX_INDEX_BYTES: u64 = 256 * 1024 * 1024;
/// Largest ref read, in bytes.
pub const MAX_REF_BYTES: u64 = 64 * 1024;

/// Where one L1 entry's object lies in the store and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryLocation {
    /// The entry path relative to `actions-v1/` (`third_party/<unit>/<key>`,
    /// `custom_operator/…/<key>`, `compile/<2 hex>/<key>`).
    pub path: String,
    /// `blake3:<hex>` of the entry's `manifest.json` bytes: the entry's identity.
    pub manifest_digest: ContentDigest,
    /// The store object holding the entry object (`~entries/<2 hex>/<64 hex>`, a single
    /// entry object or a pack of several).
    pub object: String,
    /// Offset of the entry object inside `object`, in bytes.
    pub offset: u64,
    /// Size of the entry object, in bytes.
    pub size_bytes: u64,
    /// `blake3:<hex>` of the entry object's bytes (`offset..offset + size_bytes`).
    pub digest: ContentDigest,
    /// Regular files in the entry.
    pub file_count: u64,
    /// Sum of the entry's file sizes, in bytes (an extraction bound).
    pub file_bytes: u64,
}

/// Alias: an index lists entry locations.
pub type IndexEntry = EntryLocation;

/// The index record payload (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotIndex {
    /// The snapshot key.
    pub key: String,
    /// Creation time, UTC RFC 3339.
    pub created_at: String,
    /// Who made it.
    pub producer: Producer,
    /// The record digests (`sha256:<hex>`) of the snapshot(s) the cache was restored from.
    pub parents: Vec<crate::record::RecordDigest>,
    /// Every entry, sorted by path, no path twice.
    pub entries: Vec<EntryLocation>,
}

impl SnapshotIndex {
    /// Sum of the entries' file counts.
    pub fn file_count(&self) -> u64 {
        self.entries.iter().map(|e| e.file_count).sum()
    }

    /// Sum of the entries' file bytes.
    pub fn file_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.file_bytes).sum()
    }

    /// Checks what serde cannot: entries sorted by path with no path twice, each path a
    /// relative POSIX path without `.`/`..`, each location inside an entry object name.
    ///
    /// # Errors
    /// The reason, for [`Error::Corrupt`].
    pub fn check(&self) -> Result<(), String> {
        let mut previous: Option<&str> = None;
        for entry in &self.entries {
            check_location(entry)?;
            if previous.is_some_and(|p| p >= entry.path.as_str()) {
                return Err(format!(
                    "the index lists {:?} out of order or twice (entries must be sorted by path)",
                    entry.path
                ));
            }
            previous = Some(&entry.path);
        }
        Ok(())
    }
}

/// Checks one location: a valid entry path, a BLAKE3 entry-object name, digests under
/// BLAKE3, and a range that does not overflow.
///
/// # Errors
/// The reason.
pub fn check_location(entry: &EntryLocation) -> Result<(), String> {
    crate::l1::layout::EntryPath::parse(&entry.path)?;
    if super::names::entry_object_digest(&entry.object).is_none() {
        return Err(format!("{}: {:?} is not an entry object name", entry.path, entry.object));
    }
    if entry.offset.checked_add(entry.size_bytes).is_none() || entry.size_bytes == 0 {
        return Err(format!("{}: the byte range is invalid", entry.path));
    }
    for digest in [&entry.digest, &entry.manifest_digest] {
        if digest.algorithm() != crate::digest::DigestAlgorithm::Blake3 {
            return Err(format!("{}: {digest} is not a BLAKE3 digest", entry.path));
        }
    }
    Ok(())
}

/// The entry ref payload (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryRef {
    /// Where the entry is.
    pub location: EntryLocation,
    /// When the ref was written, UTC RFC 3339.
    pub created_at: String,
    /// Who wrote it.
    pub producer: Producer,
    /// The producer's signature of everything above ([`EntryRef::statement`]), when it had
    /// a signing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::trust::Signature>,
}

impl EntryRef {
    /// What a producer signs: the canonical JSON of this ref without its signature.
    pub fn statement(&self) -> Vec<u8> {
        let unsigned = EntryRef { signature: None, ..self.clone() };
        crate::record::canonical_bytes_of(&unsigned).unwrap_or_default()
    }
}

/// Seals `index` as a `strata.snapshot_index` record; returns its bytes and content digest
/// (`sha256:<hex>`).
///
/// # Errors
/// [`Error::Record`].
pub fn seal_index(index: &SnapshotIndex) -> Result<(Vec<u8>, crate::record::RecordDigest), Error> {
    let envelope = seal(&INDEX_SCHEMA, "snapshot index", index)?;
    Ok((envelope.to_bytes(), crate::record::RecordDigest::of(&envelope.content_digest)))
}

/// Loads an index record from `bytes` (uncompressed) and checks it
/// ([`SnapshotIndex::check`]); returns it with its content digest (`sha256:<hex>`).
///
/// # Errors
/// [`Error::Record`] for a record that does not verify; [`Error::Corrupt`] naming `label`
/// for one whose entries are malformed.
pub fn load_index(
    bytes: &[u8],
    label: &str,
) -> Result<(SnapshotIndex, crate::record::RecordDigest), Error> {
    let (envelope, index): (_, SnapshotIndex) = load(bytes, &INDEX_SCHEMA, "snapshot index")?;
    index.check().map_err(|reason| Error::corrupt(label, reason))?;
    Ok((index, crate::record::RecordDigest::of(&envelope.content_digest)))
}

/// Seals `entry_ref` as a `strata.entry_ref` record.
///
/// # Errors
/// [`Error::Record`].
pub fn seal_ref(entry_ref: &EntryRef) -> Result<Vec<u8>, Error> {
    Ok(seal(&REF_SCHEMA, "entry ref", entry_ref)?.to_bytes())
}

/// Loads a ref record and checks its location ([`check_location`]).
///
/// # Errors
/// [`Error::Record`] or [`Error::Corrupt`] naming the entry path.
pub fn load_ref(bytes: &[u8]) -> Result<EntryRef, Error> {
    let (_, entry_ref): (_, EntryRef) = load(bytes, &REF_SCHEMA, "entry ref")?;
    check_location(&entry_ref.location)
        .map_err(|reason| Error::corrupt(&entry_ref.location.path, reason))?;
    Ok(entry_ref)
}

/// Compresses an index record for the store (zstd level 3).
///
/// # Errors
/// I/O errors of the encoder (none in practice).
pub fn compress_index(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::bulk::compress(bytes, 3)
}

/// Decompresses an index object of at most [`MAX_INDEX_BYTES`].
///
/// # Errors
/// [`Error::Corrupt`] naming `label` if it is not zstd or expands beyond the bound.
pub fn decompress_index(bytes: &[u8], label: &str) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let decoder = zstd::stream::read::Decoder::new(bytes)
        .map_err(|e| Error::corrupt(label, format!("the index object is not zstd: {e}")))?;
    use std::io::Read as _;
    decoder
        .take(MAX_INDEX_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::corrupt(label, format!("the index object does not decompress: {e}")))?;
    if out.len() as u64 > MAX_INDEX_BYTES {
        return Err(Error::corrupt(label, "the index expands beyond 256 MiB"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::DigestAlgorithm;

    fn location(path: &str) -> EntryLocation {
        let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, path.as_bytes());
        EntryLocation {
            path: path.into(),
            manifest_digest: ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"m"),
            object: super::super::names::entry_object_name(&digest).unwrap(),
            offset: 0,
            size_bytes: 10,
            digest,
            file_count: 1,
            file_bytes: 5,
        }
    }

    #[test]
    fn index_round_trips_and_rejects_disorder_and_bad_locations() {
        let index = SnapshotIndex {
            key: "k".into(),
            created_at: "2026-12-01T00:00:00Z".into(),
            producer: Producer::default(),
            parents: vec![],
            entries: vec![location("compile/ab/x"), location("third_party/z/k")],
        };
        let (bytes, digest) = seal_index(&index).unwrap();
        let packed = compress_index(&bytes).unwrap();
        let (back, back_digest) =
            load_index(&decompress_index(&packed, "k").unwrap(), "k").unwrap();
        assert_eq!((back, back_digest), (index.clone(), digest));
        assert_eq!((index.file_count(), index.file_bytes()), (2, 10));

        let twice =
            SnapshotIndex { entries: vec![location("a/b/c"), location("a/b/c")], ..index.clone() };
        let (bytes, _) = seal_index(&twice).unwrap();
        assert!(load_index(&bytes, "k").unwrap_err().is_corrupt());
        for bad in [
            EntryLocation { path: "../x".into(), ..location("a") },
            EntryLocation { object: "~refs/ab/cd".into(), ..location("a") },
            EntryLocation { size_bytes: 0, ..location("a") },
            EntryLocation { offset: u64::MAX, ..location("a") },
            EntryLocation {
                digest: ContentDigest::of_bytes(DigestAlgorithm::Sha256, b"a"),
                ..location("a")
            },
        ] {
            assert!(check_location(&bad).is_err(), "{bad:?}");
        }
        assert!(decompress_index(b"not zstd", "k").unwrap_err().is_corrupt());
    }

    #[test]
    fn refs_round_trip() {
        let entry_ref = EntryRef {
            location: location("third_party/z/k"),
            created_at: "2026-12-01T00:00:00Z".into(),
            producer: Producer::default(),
            signature: None,
        };
        let bytes = seal_ref(&entry_ref).unwrap();
        assert_eq!(load_ref(&bytes).unwrap(), entry_ref);
        assert!(!entry_ref.statement().is_empty());
    }
}
