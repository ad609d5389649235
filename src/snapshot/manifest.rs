//! The snapshot's records (DESIGN.md §4; `docs/snapshots.md` "Format"):
//!
//! * [`SnapshotManifest`] (`strata.snapshot_manifest` v1): the last entry of the tar
//!   stream, named [`MANIFEST_ENTRY`]. Every directory, regular file (relative POSIX path
//!   under the cache root, size in bytes, owner-exec bit, SHA-256) and symlink (exact text)
//!   the snapshot holds, plus the key, the producer, the creation time and `parents`: the
//!   manifest digest (`sha256:<hex>`) of the snapshot the cache was restored from, if any.
//! * [`Sidecar`] (`strata.snapshot_sidecar` v2): the object `<key>.json` uploaded after the
//!   snapshot object, the commit point. It holds what a reader checks *before* extracting:
//!   the name of the snapshot object it commits (`object`, `~<16 hex>-<32 hex>`: unique
//!   per save, so a sidecar never names another writer's bytes), that object's size and
//!   SHA-256, format, manifest digest, counts and total file bytes (the extraction bounds).
//!   Version 1 sidecars (no `object`; the object is `<key>` itself) are still read
//!   ([`load_sidecar`]).
//! * [`Origin`] (`strata.snapshot_origin` v1): written to
//!   `<cache root>/.local/snapshot-origin.json` by a restore (machine-local, never packed)
//!   so that the next save can name its parent.
//!
//! All three are canonical envelopes ([`crate::record`]): strict parsing, digest checked.

use serde::{Deserialize, Serialize};

use super::Error;
use crate::digest::Sha256Digest;
use crate::fs::RelPath;
use crate::record::{self, Envelope, Schema};

/// Schema of the manifest.
pub const MANIFEST_SCHEMA: Schema =
    Schema { name: "strata.snapshot_manifest", version: 1, features: &[] };
/// Schema of the sidecar that saves write: version 2, which names its object.
pub const SIDECAR_SCHEMA: Schema =
    Schema { name: "strata.snapshot_sidecar", version: 2, features: &[] };
/// Schema of the sidecars of earlier releases (version 1: the object is `<key>`), still
/// read by [`load_sidecar`].
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

/// Who made a snapshot: the CI context (`GITHUB_*` variables), each `null` when unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Producer {
    /// `GITHUB_REPOSITORY` (`owner/name`).
    pub repository: Option<String>,
    /// `GITHUB_SHA`: the commit the workflow ran for.
    pub sha: Option<String>,
    /// `GITHUB_WORKFLOW`.
    pub workflow: Option<String>,
    /// `GITHUB_JOB`.
    pub job: Option<String>,
    /// `GITHUB_RUN_ID`.
    pub run_id: Option<String>,
    /// `GITHUB_RUN_ATTEMPT`.
    pub run_attempt: Option<String>,
}

impl Producer {
    /// Reads the `GITHUB_*` variables through `env` (empty values are `None`).
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        Self {
            repository: get("GITHUB_REPOSITORY"),
            sha: get("GITHUB_SHA"),
            workflow: get("GITHUB_WORKFLOW"),
            job: get("GITHUB_JOB"),
            run_id: get("GITHUB_RUN_ID"),
            run_attempt: get("GITHUB_RUN_ATTEMPT"),
        }
    }
}

/// One regular file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRecord {
    /// Path relative to the cache root (`actions-v1/...`).
    pub path: RelPath,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Owner-exec bit (restored as mode 0755; otherwise 0644).
    pub executable: bool,
    /// SHA-256 of the content.
    pub sha256: Sha256Digest,
}

/// One symlink of a snapshot (restored with the same text, never followed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SymlinkRecord {
    /// Path relative to the cache root.
    pub path: RelPath,
    /// The link text.
    pub target: String,
}

/// The manifest payload (see the module docs). Lists are sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotManifest {
    /// The key the snapshot was saved under.
    pub key: String,
    /// The carried directory, `actions-v1`.
    pub layout: String,
    /// Creation time, UTC RFC 3339.
    pub created_at: String,
    /// Who made it.
    pub producer: Producer,
    /// Manifest digests (`sha256:<hex>`) of the snapshot(s) the cache grew from.
    pub parents: Vec<String>,
    /// Every directory.
    pub directories: Vec<RelPath>,
    /// Every regular file.
    pub files: Vec<FileRecord>,
    /// Every symlink.
    pub symlinks: Vec<SymlinkRecord>,
    /// Sum of the file sizes, in bytes.
    pub file_bytes: u64,
}

/// The sidecar payload (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    /// The snapshot key (the sidecar is `<key>.json`).
    pub key: String,
    /// The snapshot object this sidecar commits, `~<16 hex>-<32 hex>` (version 2; see
    /// [`is_object_name_of`]). `None` in a version 1 sidecar, whose object is `<key>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// `zstd` or `gzip`.
    pub format: super::Compression,
    /// Size of the snapshot object in bytes.
    pub object_size_bytes: u64,
    /// SHA-256 of the snapshot object's bytes.
    pub object_sha256: Sha256Digest,
    /// `content_digest` of the manifest record inside (`sha256:<hex>`).
    pub manifest_digest: String,
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
    pub parents: Vec<String>,
}

impl Sidecar {
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

/// Loads a sidecar record of either version: version 2 (must name its object, of its own
/// key) or version 1 (must not; its object is the key).
///
/// # Errors
/// [`Error::Record`] for a record that does not verify as either version;
/// [`Error::Corrupt`] for a version 2 sidecar without a valid object name of its key, or a
/// version 1 sidecar with one.
pub fn load_sidecar(bytes: &[u8]) -> Result<(Envelope, Sidecar), Error> {
    let (envelope, sidecar) = match load::<Sidecar>(bytes, &SIDECAR_SCHEMA, "sidecar") {
        Err(Error::Record {
            source: record::Error::UnknownSchema { found_name, found_version, .. },
            ..
        }) if found_name == SIDECAR_SCHEMA_V1.name
            && found_version == SIDECAR_SCHEMA_V1.version =>
        {
            let (envelope, sidecar) = load::<Sidecar>(bytes, &SIDECAR_SCHEMA_V1, "sidecar")?;
            if sidecar.object.is_some() {
                return Err(Error::corrupt(
                    &sidecar.key,
                    "its version 1 sidecar names an object (only version 2 does)",
                ));
            }
            return Ok((envelope, sidecar));
        }
        other => other?,
    };
    match &sidecar.object {
        Some(name) if is_object_name_of(&sidecar.key, name) => Ok((envelope, sidecar)),
        Some(name) => Err(Error::corrupt(
            &sidecar.key,
            format!(
                "its sidecar names the object {name:?}, which is not an object name of its key"
            ),
        )),
        None => Err(Error::corrupt(&sidecar.key, "its version 2 sidecar names no object")),
    }
}

/// The origin payload (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// The key that was restored.
    pub key: String,
    /// Its manifest digest (`sha256:<hex>`).
    pub manifest_digest: String,
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

/// The current UTC time in RFC 3339 (seconds precision).
pub(crate) fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let manifest = SnapshotManifest {
            key: "k".into(),
            layout: "actions-v1".into(),
            created_at: now_rfc3339(),
            producer: Producer::from_env_with(|n| (n == "GITHUB_RUN_ID").then(|| "7".into())),
            parents: vec![],
            directories: vec![RelPath::new("actions-v1").unwrap()],
            files: vec![FileRecord {
                path: RelPath::new("actions-v1/f").unwrap(),
                size_bytes: 0,
                executable: false,
                sha256: Sha256Digest::of_bytes(b""),
            }],
            symlinks: vec![],
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
        assert!(now_rfc3339().ends_with('Z'));
    }

    fn sidecar(key: &str, object: Option<String>) -> Sidecar {
        Sidecar {
            key: key.into(),
            object,
            format: super::super::Compression::Zstd,
            object_size_bytes: 1,
            object_sha256: Sha256Digest::of_bytes(b"x"),
            manifest_digest: format!("sha256:{}", "0".repeat(64)),
            entry_count: 1,
            file_count: 0,
            file_bytes: 0,
            created_at: now_rfc3339(),
            producer: Producer::default(),
            parents: vec![],
        }
    }

    #[test]
    fn sidecars_of_both_versions_load_and_name_their_object() {
        let name = format!("{}{}", object_name_stem("k"), "ab".repeat(16));
        let v2 = seal(&SIDECAR_SCHEMA, "sidecar", &sidecar("k", Some(name.clone()))).unwrap();
        let (_, loaded) = load_sidecar(&v2.to_bytes()).unwrap();
        assert_eq!(loaded.object_name(), name);
        let v1 = seal(&SIDECAR_SCHEMA_V1, "sidecar", &sidecar("k", None)).unwrap();
        let (envelope, loaded) = load_sidecar(&v1.to_bytes()).unwrap();
        assert_eq!((envelope.schema_version, loaded.object_name()), (1, "k"));
        // The version 1 bytes are exactly what earlier releases wrote: no `object` field.
        assert!(!String::from_utf8(v1.to_bytes()).unwrap().contains("\"object\""));
        for bad in [
            seal(&SIDECAR_SCHEMA, "sidecar", &sidecar("k", None)).unwrap(),
            seal(&SIDECAR_SCHEMA, "sidecar", &sidecar("k", Some("k".into()))).unwrap(),
            seal(&SIDECAR_SCHEMA, "sidecar", &sidecar("j", Some(name.clone()))).unwrap(),
            seal(&SIDECAR_SCHEMA_V1, "sidecar", &sidecar("k", Some(name.clone()))).unwrap(),
        ] {
            let err = load_sidecar(&bad.to_bytes()).unwrap_err();
            assert!(err.is_corrupt(), "{err}");
        }
    }
}
