//! The snapshot's records (`docs/snapshots.md` "Format"; envelopes as in `docs/records.md`):
//!
//! * [`SnapshotManifest`] (`strata.snapshot_manifest` v2): the last entry of the tar
//!   stream, named [`MANIFEST_ENTRY`]. `entries`: every directory, regular file (relative
//!   POSIX path under the cache root, size in bytes, owner-exec bit, algorithm-tagged
//!   digest) and symlink (exact text) the snapshot holds, as content records
//!   ([`crate::content::Record`]) sorted by path; plus the key, the producer, the creation
//!   time and `parents`: the manifest digest (`sha256:<hex>`) of the snapshot the cache was
//!   restored from, if any. Version 1 manifests (three lists, untagged SHA-256) of earlier
//!   releases are read through the migration `snapshot-manifest-1-to-2-content-records`
//!   ([`load_manifest`]).
//! * [`Sidecar`] (`strata.snapshot_sidecar` v4): the object `<key>.json` uploaded after the
//!   snapshot object, the commit point. It holds what a reader checks *before* extracting:
//!   the name of the snapshot object it commits (`object`, `~<16 hex>-<32 hex>`: unique
//!   per save, so a sidecar never names another writer's bytes), that object's size and
//!   algorithm-tagged digest (`object_digest`, `blake3:<hex>` unless the save chose
//!   SHA-256; the snapshot's file digests use the same algorithm), format, manifest digest,
//!   counts and total file bytes (the extraction bounds), and the snapshot's `kind`
//!   ([`SnapshotKind`]: one `full` object, or an `index` of entry objects). Sidecars of
//!   earlier releases are still read through the migration registry ([`load_sidecar`]):
//!   version 3 (no `kind`: full), version 2 (untagged
//!   `object_sha256`, SHA-256 by definition) and version 1 (also no `object`; the object
//!   is `<key>` itself).
//! * [`Origin`] (`strata.snapshot_origin` v1): written to
//!   `<cache root>/.local/snapshot-origin.json` by a restore (machine-local, never packed)
//!   so that the next save can name its parent.
//!
//! All three are canonical envelopes ([`crate::record`]): strict parsing, digest checked.

use serde::{Deserialize, Serialize};

use super::Error;
use crate::content::tree::{Directories, Rules};
use crate::content::{Kind, Record};
use crate::digest::{ContentDigest, Sha256Digest};
use crate::record::{self, Envelope, Schema};

/// Schema of the manifest that saves write: version 2, content records.
pub const MANIFEST_SCHEMA: Schema =
    Schema { name: "strata.snapshot_manifest", version: 2, features: &[] };
/// Schema of the manifests of earlier releases (three lists, untagged SHA-256), read
/// through the migration registry ([`load_manifest`]).
pub const MANIFEST_SCHEMA_V1: Schema =
    Schema { name: "strata.snapshot_manifest", version: 1, features: &[] };

/// What a snapshot manifest may hold: every directory listed, symlinks allowed (where the
/// unpacker allows them: inside an entry's `artifacts/`).
pub const MANIFEST_RULES: Rules =
    Rules { symlinks: true, directories: Directories::Listed, reserved: None, allow_empty: false };
/// Schema of the sidecar that saves write: version 4, which names its object, binds it by
/// an algorithm-tagged digest and says what kind of snapshot it commits ([`SnapshotKind`]).
pub const SIDECAR_SCHEMA: Schema =
    Schema { name: "strata.snapshot_sidecar", version: 4, features: &[] };
/// Schema of the sidecars of the previous release (version 3: no `kind`, always a full
/// snapshot), read through the migration `snapshot-sidecar-3-to-4-kind`.
pub const SIDECAR_SCHEMA_V3: Schema =
    Schema { name: "strata.snapshot_sidecar", version: 3, features: &[] };
/// Schema of the sidecars of the previous release (version 2: `object_sha256`), read
/// through the migration `snapshot-sidecar-2-to-3-object-digest`.
pub const SIDECAR_SCHEMA_V2: Schema =
    Schema { name: "strata.snapshot_sidecar", version: 2, features: &[] };
/// Schema of the sidecars of earlier releases (version 1: the object is `<key>`), still
/// read by [`load_sidecar`] (migrated 1 → 2 → 3 → 4).
pub const SIDECAR_SCHEMA_V1: Schema =
    Schema { name: "strata.snapshot_sidecar", version: 1, features: &[] };
/// Schema of the origin record.
pub const ORIGIN_SCHEMA: Schema =
    Schema { name: "strata.snapshot_origin", version: 1, features: &[] };

/// The tar entry name of the manifest (the last entry; never extracted to disk).
pub const MANIFEST_ENTRY: &str = "strata-snapshot-manifest.json";
/// Largest manifest read, in bytes.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024 * 1024;
/// Largest sidecar read, in bytes.
pub const MAX_SIDECAR_BYTES: u64 = 1024 * 1024;

pub use crate::trust::Producer;

/// The manifest payload (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotManifest {
    /// The key the snapshot was saved under, or `entry:<entry path>` for an entry object.
    pub key: super::key::ManifestKey,
    /// The carried directory, `actions-v1`.
    pub layout: String,
    /// Creation time, UTC RFC 3339.
    pub created_at: String,
    /// Who made it.
    pub producer: Producer,
    /// Manifest digests (`sha256:<hex>`) of the snapshot(s) the cache grew from.
    pub parents: Vec<crate::record::RecordDigest>,
    /// Every directory, regular file and symlink, sorted by path (paths relative to the
    /// cache root, `actions-v1[/…]`; files restored 0755 with owner-exec, else 0644).
    pub entries: Vec<Record>,
    /// Sum of the file sizes, in bytes.
    pub file_bytes: u64,
}

impl SnapshotManifest {
    /// Number of regular files.
    pub fn file_count(&self) -> u64 {
        self.entries.iter().filter(|e| e.kind() == Kind::File).count() as u64
    }

    /// Number of directories, files and symlinks.
    pub fn entry_count(&self) -> u64 {
        self.entries.len() as u64
    }
}

/// Loads a manifest record of version 2, or of version 1 through the production migration
/// (`docs/records.md`, "Migrations"). Returns the manifest and the digest of the record **as
/// stored** (`sha256:<hex>`: what a sidecar binds, and the lineage of a migrated record), after
/// checking [`MANIFEST_RULES`].
///
/// # Errors
/// [`Error::Record`] for a record that does not verify or migrate; [`Error::Corrupt`]
/// (labelled `label`) for one that breaks the rules.
pub fn load_manifest(
    bytes: &[u8],
    label: &str,
) -> Result<(SnapshotManifest, crate::record::RecordDigest), Error> {
    let (migrated, manifest): (_, SnapshotManifest) =
        record::load_current_as(bytes, &MANIFEST_SCHEMA)
            .map_err(|source| Error::Record { what: "manifest".to_owned(), source })?;
    crate::content::tree::check_records(&manifest.entries, &MANIFEST_RULES)
        .map_err(|reason| Error::corrupt(label, format!("the manifest is invalid: {reason}")))?;
    Ok((manifest, crate::record::RecordDigest::of(&migrated.source_digest)))
}

/// The sidecar payload (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    /// The snapshot key (the sidecar is `<key>.json`).
    pub key: String,
    /// The snapshot object this sidecar commits, `~<16 hex>-<32 hex>` (versions 2 and 3;
    /// see [`is_object_name_of`]). `None` in a version 1 sidecar, whose object is `<key>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// `zstd` or `gzip`: the compression of the object.
    pub format: super::Compression,
    /// `full` (the object is the whole cache as one tar stream) or `index` (the object is a
    /// `strata.snapshot_index` record listing entry objects; `crate::snapshot::index`).
    pub kind: SnapshotKind,
    /// Size of the snapshot object in bytes.
    pub object_size_bytes: u64,
    /// Digest of the snapshot object's bytes, tagged with its algorithm (`sha256:` for
    /// sidecars migrated from versions 1 and 2). The snapshot's files use the same one.
    pub object_digest: ContentDigest,
    /// `content_digest` of the manifest record inside (`sha256:<hex>`).
    pub manifest_digest: crate::record::RecordDigest,
    /// Number of directories, files and symlinks.
    pub entry_count: u64,
    /// Number of regular files.
    pub file_count: u64,
    /// Sum of the file sizes, in bytes (an extraction bound).
    pub file_bytes: u64,
    /// Creation time, UTC RFC 3339.
    pub created_at: String,
    /// Who made it.
    pub producer: Producer,
    /// As in the manifest.
    pub parents: Vec<crate::record::RecordDigest>,
    /// The producer's signature of everything above ([`Sidecar::statement`]), when the
    /// save was given a signing key. Absent in unsigned sidecars and in those of
    /// earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::trust::Signature>,
}

/// What a sidecar commits (sidecar version 4; older sidecars are `full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotKind {
    /// One object holding the whole `actions-v1/` tree (tar + zstd or gzip, manifest last).
    #[default]
    Full,
    /// A small index object (zstd-compressed `strata.snapshot_index` record) that lists
    /// content-addressed entry objects under `~entries/`.
    Index,
}

impl SnapshotKind {
    /// `full` or `index`.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotKind::Full => "full",
            SnapshotKind::Index => "index",
        }
    }
}

/// The signature domain of sidecars: a sidecar signature can never pass for another kind
/// of statement, nor another kind's for a sidecar.
pub const SIDECAR_SIGNATURE_DOMAIN: &str = "strata.snapshot_sidecar";

impl Sidecar {
    /// What a producer signs: the canonical JSON of this sidecar without its signature. It
    /// binds the key, the object's name, format, size and digest, the manifest digest, the
    /// counts and bounds, the producer's identity (repository, workflow, run, commit under
    /// GitHub), the creation time and the parents.
    pub fn statement(&self) -> Vec<u8> {
        let unsigned = Sidecar { signature: None, ..self.clone() };
        // Serializing a struct of strings and integers cannot fail.
        crate::record::canonical_bytes_of(&unsigned).unwrap_or_default()
    }

    /// The name of the snapshot object (relative to the store): `object`, or the key for a
    /// version 1 sidecar.
    pub fn object_name(&self) -> &str {
        self.object.as_deref().unwrap_or(&self.key)
    }
}

/// The first character of every version 2 object name. Keys never contain it (they use
/// letters, digits, `.`, `_` and `-`), so an object name is never a key, a sidecar, or
/// in the listing of a key prefix.
pub const OBJECT_NAME_MARK: char = '~';

/// The part of `key`'s object names that ties them to the key: the first 16 hex digits of
/// the SHA-256 of the key.
pub fn object_name_stem(key: &str) -> String {
    let hex = Sha256Digest::of_bytes(key.as_bytes()).to_hex();
    format!("{OBJECT_NAME_MARK}{}-", hex.get(..16).unwrap_or(&hex))
}

/// True if `name` is a version 2 object name of `key`: `~<16 hex of SHA-256(key)>-`
/// followed by 32 lowercase hex digits. The name does not grow with the key (stores that
/// map names to files limit their length).
pub fn is_object_name_of(key: &str, name: &str) -> bool {
    name.strip_prefix(&object_name_stem(key)).is_some_and(|hex| {
        hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Loads a sidecar record of any version: 3, or 2 and 1 of earlier releases through the production
/// migrations (`docs/records.md`, "Migrations"). Versions 2 and 3 must name their object, of their
/// own key; version 1 must not (its object is the key). Returns the digest of the record as stored
/// (`sha256:<hex>`) and the sidecar.
///
/// # Errors
/// [`Error::Record`] for a record that does not verify or migrate;
/// [`Error::Corrupt`] for a sidecar without a valid object name of its key where one is
/// required, or a version 1 sidecar with one.
pub fn load_sidecar(bytes: &[u8]) -> Result<(String, Sidecar), Error> {
    let (migrated, sidecar): (_, Sidecar) = record::load_current_as(bytes, &SIDECAR_SCHEMA)
        .map_err(|source| Error::Record { what: "sidecar".to_owned(), source })?;
    let from_v1 =
        migrated.migration_ids.iter().any(|id| id == record::steps::SNAPSHOT_SIDECAR_1_TO_2.id);
    let digest = migrated.source_digest.to_prefixed();
    match (&sidecar.object, from_v1) {
        (None, true) => Ok((digest, sidecar)),
        (Some(_), true) => Err(Error::corrupt(
            &sidecar.key,
            "its version 1 sidecar names an object (only later versions do)",
        )),
        (Some(name), false) if is_object_name_of(&sidecar.key, name) => Ok((digest, sidecar)),
        (Some(name), false) => Err(Error::corrupt(
            &sidecar.key,
            format!(
                "its sidecar names the object {name:?}, which is not an object name of its key"
            ),
        )),
        (None, false) => Err(Error::corrupt(&sidecar.key, "its sidecar names no object")),
    }
}

/// The origin payload (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// The key that was restored.
    pub key: String,
    /// Its manifest digest (`sha256:<hex>`).
    pub manifest_digest: crate::record::RecordDigest,
    /// When, UTC RFC 3339.
    pub restored_at: String,
}

/// Seals `payload` as a record of `schema`.
///
/// # Errors
/// [`Error::Record`] naming `what`.
pub(crate) fn seal<T: Serialize>(
    schema: &Schema,
    what: &str,
    payload: &T,
) -> Result<Envelope, Error> {
    Envelope::seal(schema, Vec::new(), payload)
        .map_err(|source| Error::Record { what: what.to_owned(), source })
}

/// Loads and verifies a record of `schema` from `bytes`.
///
/// # Errors
/// [`Error::Record`] naming `what`.
pub(crate) fn load<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    schema: &Schema,
    what: &str,
) -> Result<(Envelope, T), Error> {
    record::load_as(bytes, schema).map_err(|source| Error::Record { what: what.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RelPath;

    #[test]
    fn records_round_trip() {
        let manifest = SnapshotManifest {
            key: crate::snapshot::key::ManifestKey::parse("k").unwrap(),
            layout: "actions-v1".into(),
            created_at: crate::record::Timestamp::now().rfc3339_seconds(),
            producer: Producer::from_env_with(|n| (n == "GITHUB_RUN_ID").then(|| "7".into())),
            parents: vec![],
            entries: vec![
                Record::Directory { path: RelPath::new("actions-v1").unwrap() },
                Record::File(crate::content::FileRecord {
                    path: RelPath::new("actions-v1/f").unwrap(),
                    size_bytes: 0,
                    digest: crate::digest::ContentDigest::of_bytes(
                        crate::digest::DigestAlgorithm::Blake3,
                        b"",
                    ),
                    executable: false,
                }),
            ],
            file_bytes: 0,
        };
        let envelope = seal(&MANIFEST_SCHEMA, "manifest", &manifest).unwrap();
        let (_, back): (_, SnapshotManifest) =
            load(&envelope.to_bytes(), &MANIFEST_SCHEMA, "manifest").unwrap();
        assert_eq!(back, manifest);
        assert_eq!(back.producer.run_id.as_deref(), Some("7"));
        let err =
            load::<SnapshotManifest>(&envelope.to_bytes(), &SIDECAR_SCHEMA, "sidecar").unwrap_err();
        assert!(matches!(err, Error::Record { .. }));
        assert!(crate::record::Timestamp::now().rfc3339_seconds().ends_with('Z'));
    }

    fn sidecar(key: &str, object: Option<String>) -> Sidecar {
        Sidecar {
            key: key.into(),
            object,
            format: super::super::Compression::Zstd,
            kind: SnapshotKind::Full,
            object_size_bytes: 1,
            object_digest: ContentDigest::of_bytes(crate::digest::DigestAlgorithm::Blake3, b"x"),
            manifest_digest: crate::record::RecordDigest::from_stored(format!(
                "sha256:{}",
                "0".repeat(64)
            )),
            entry_count: 1,
            file_count: 0,
            file_bytes: 0,
            created_at: crate::record::Timestamp::now().rfc3339_seconds(),
            producer: Producer::default(),
            parents: vec![],
            signature: None,
        }
    }

    /// The payload of `sidecar` as a version 1 or 2 record spelled it: `object_sha256`
    /// (untagged hex) instead of `object_digest`.
    fn legacy_payload(sidecar: &Sidecar) -> serde_json::Value {
        let mut value = serde_json::to_value(sidecar).unwrap();
        let map = value.as_object_mut().unwrap();
        map.remove("kind").unwrap();
        let digest = map.remove("object_digest").unwrap();
        let hex = digest.as_str().unwrap().strip_prefix("sha256:").unwrap().to_owned();
        map.insert("object_sha256".into(), hex.into());
        value
    }

    #[test]
    fn sidecars_of_every_version_load_and_name_their_object() {
        let name = format!("{}{}", object_name_stem("k"), "ab".repeat(16));
        let index = Sidecar { kind: SnapshotKind::Index, ..sidecar("k", Some(name.clone())) };
        let v4 = seal(&SIDECAR_SCHEMA, "sidecar", &index).unwrap();
        let (digest, loaded) = load_sidecar(&v4.to_bytes()).unwrap();
        assert_eq!((loaded.object_name(), loaded.kind), (name.as_str(), SnapshotKind::Index));
        assert_eq!(digest, v4.content_digest.to_prefixed());
        // Version 3 (no `kind`) migrates to a full snapshot.
        let mut payload = serde_json::to_value(sidecar("k", Some(name.clone()))).unwrap();
        payload.as_object_mut().unwrap().remove("kind").unwrap();
        let v3 = seal(&SIDECAR_SCHEMA_V3, "sidecar", &payload).unwrap();
        let (digest, loaded) = load_sidecar(&v3.to_bytes()).unwrap();
        assert_eq!((loaded.object_name(), loaded.kind), (name.as_str(), SnapshotKind::Full));
        assert_eq!(digest, v3.content_digest.to_prefixed());
        assert_eq!(loaded.object_digest.algorithm(), crate::digest::DigestAlgorithm::Blake3);
        // Versions 1 and 2 (untagged SHA-256) migrate; the digest is the stored record's.
        let sha = ContentDigest::from(Sha256Digest::of_bytes(b"x"));
        let old = |object: Option<String>| Sidecar { object_digest: sha, ..sidecar("k", object) };
        let v2 =
            seal(&SIDECAR_SCHEMA_V2, "sidecar", &legacy_payload(&old(Some(name.clone())))).unwrap();
        let (digest, loaded) = load_sidecar(&v2.to_bytes()).unwrap();
        assert_eq!((loaded.object_name(), loaded.object_digest), (name.as_str(), sha));
        assert_eq!(digest, v2.content_digest.to_prefixed());
        let v1 = seal(&SIDECAR_SCHEMA_V1, "sidecar", &legacy_payload(&old(None))).unwrap();
        let (_, loaded) = load_sidecar(&v1.to_bytes()).unwrap();
        assert_eq!((loaded.object_name(), loaded.object_digest), ("k", sha));
        // The version 1 bytes are exactly what earlier releases wrote: no `object` field.
        assert!(!String::from_utf8(v1.to_bytes()).unwrap().contains("\"object\""));
        for bad in [
            seal(&SIDECAR_SCHEMA, "sidecar", &sidecar("k", None)).unwrap(),
            seal(&SIDECAR_SCHEMA, "sidecar", &sidecar("k", Some("k".into()))).unwrap(),
            seal(&SIDECAR_SCHEMA, "sidecar", &sidecar("j", Some(name.clone()))).unwrap(),
            seal(&SIDECAR_SCHEMA_V2, "sidecar", &legacy_payload(&old(None))).unwrap(),
            seal(&SIDECAR_SCHEMA_V1, "sidecar", &legacy_payload(&old(Some(name.clone())))).unwrap(),
        ] {
            let err = load_sidecar(&bad.to_bytes()).unwrap_err();
            assert!(err.is_corrupt(), "{err}");
        }
    }
}
