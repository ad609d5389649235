//! The artifact manifest: the completion marker of a slot, written last
//! (docs/artifact-store.md "Manifest").
//!
//! A `strata.artifact_manifest` v1 record ([`crate::record`]) whose payload is
//! [`ManifestPayload`]: the full key and spec records, their digests, the environment digest,
//! the lineage (`parents`: manifest digests this artifact derives from) and one
//! [`FileRecord`] per payload file, sorted by path. The manifest itself and directories are
//! not listed. At most [`MAX_MANIFEST_BYTES`] are written or read.
//!
//! Comparison is strict: the stored bytes must be the canonical encoding (the record loader
//! rejects anything else), so a re-formatted marker is INVALID (comparing re-encodings
//! would accept edits the parser normalises away).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Error;
use super::identity::{
    ArtifactKey, ArtifactSpec, EnvDigest, KeyDigest, KeyRecord, MANIFEST_NAME, SpecDigest,
    SpecRecord,
};
pub use crate::content::FileRecord;
use crate::digest::{ContentDigest, Sha256Digest};
use crate::fs::RelPath;
use crate::record::{self, Envelope, Schema};

/// Schema of the artifact manifest. Version 1 (untagged SHA-256 file digests) is read through
/// the production migration [`crate::record::steps::ARTIFACT_MANIFEST_1_TO_2`].
pub const MANIFEST_SCHEMA: Schema =
    Schema { name: "strata.artifact_manifest", version: 2, features: &[] };
/// Largest manifest written or read, in bytes (16 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// The digest of a manifest record (its envelope `content_digest`), stored as
/// `sha256:<64 lowercase hex>`. Lineage (`parents`) is a list of these.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ManifestDigest(Sha256Digest);

impl ManifestDigest {
    /// The underlying SHA-256.
    pub fn digest(&self) -> Sha256Digest {
        self.0
    }
}

impl fmt::Display for ManifestDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_prefixed())
    }
}

impl fmt::Debug for ManifestDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ManifestDigest({})", self.0.to_prefixed())
    }
}

impl Serialize for ManifestDigest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_prefixed())
    }
}

impl<'de> Deserialize<'de> for ManifestDigest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Sha256Digest::parse_prefixed(&text).map(Self).map_err(serde::de::Error::custom)
    }
}

/// The manifest payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestPayload {
    /// Environment digest (first path level).
    pub env_digest: EnvDigest,
    /// Payload files sorted by path (code-point order), no duplicates.
    pub files: Vec<FileRecord>,
    /// The key record.
    pub key: KeyRecord,
    /// Key digest (second path level).
    pub key_digest: KeyDigest,
    /// Manifests this artifact was derived from (a BINARY_READY artifact names its
    /// GENERATED parent). Empty for a first-stage artifact.
    pub parents: Vec<ManifestDigest>,
    /// The spec record.
    pub spec: SpecRecord,
    /// Spec digest (third path level).
    pub spec_digest: SpecDigest,
}

impl ManifestPayload {
    /// Assembles the payload for `key`, `spec`, `files` (any order) and `parents`.
    pub fn new(
        key: &ArtifactKey,
        spec: &ArtifactSpec,
        mut files: Vec<FileRecord>,
        parents: Vec<ManifestDigest>,
    ) -> Self {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Self {
            env_digest: key.environment().digest(),
            files,
            key: key.record(),
            key_digest: key.digest(),
            parents,
            spec: spec.record(),
            spec_digest: spec.digest(),
        }
    }

    /// Total payload size in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size_bytes).sum()
    }

    /// Checks the payload's internal consistency: files sorted and unique, no file named
    /// like the manifest at the top level, digests equal to those recomputed from the key
    /// and spec records, every required file listed. Returns the key and spec.
    ///
    /// # Errors
    /// A reason (the caller reports INVALID).
    pub fn check(&self) -> Result<(ArtifactKey, ArtifactSpec), String> {
        if let Some(pair) = self.files.windows(2).find(|w| match (w.first(), w.get(1)) {
            (Some(a), Some(b)) => a.path >= b.path,
            _ => false,
        }) {
            let path = pair.get(1).map(|f| f.path.as_str()).unwrap_or_default();
            return Err(format!("manifest files are not sorted and unique at {path:?}"));
        }
        if self.files.iter().any(|f| f.path.as_str() == MANIFEST_NAME) {
            return Err(format!("manifest lists the reserved name {MANIFEST_NAME:?} as a file"));
        }
        let key = ArtifactKey::from_record(&self.key).map_err(|e| e.to_string())?;
        let spec = ArtifactSpec::from_record(&self.spec).map_err(|e| e.to_string())?;
        if key.digest() != self.key_digest {
            return Err(format!(
                "manifest key_digest {} does not match its key record (digest {})",
                self.key_digest,
                key.digest()
            ));
        }
        if key.environment().digest() != self.env_digest {
            return Err(format!(
                "manifest env_digest {} does not match the environment of its key record \
                 (digest {})",
                self.env_digest,
                key.environment().digest()
            ));
        }
        if spec.digest() != self.spec_digest {
            return Err(format!(
                "manifest spec_digest {} does not match its spec record (digest {})",
                self.spec_digest,
                spec.digest()
            ));
        }
        let missing: Vec<&str> = spec
            .required()
            .iter()
            .filter(|r| self.files.binary_search_by(|f| f.path.cmp(r)).is_err())
            .map(|r| r.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(format!("missing required files: {missing:?}"));
        }
        Ok((key, spec))
    }

    /// Seals the payload as a record and returns its stored bytes and digest.
    ///
    /// # Errors
    /// [`Error::ManifestTooLarge`] above [`MAX_MANIFEST_BYTES`]; [`Error::Record`].
    pub fn seal(&self) -> Result<(Vec<u8>, ManifestDigest), Error> {
        let envelope = Envelope::seal(&MANIFEST_SCHEMA, vec![], self)?;
        let bytes = envelope.to_bytes();
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(Error::ManifestTooLarge {
                size_bytes: bytes.len() as u64,
                files: self.files.len(),
            });
        }
        Ok((bytes, ManifestDigest(envelope.content_digest)))
    }
}

/// Loads stored manifest bytes strictly (UTF-8, duplicate keys, integers, envelope,
/// schema, digest, canonical bytes, payload shape) and checks the payload
/// ([`ManifestPayload::check`]).
///
/// # Errors
/// A reason (the caller reports INVALID).
pub fn decode(bytes: &[u8]) -> Result<(ManifestPayload, ManifestDigest), String> {
    decode_with(bytes, describe_record_error)
}

/// [`decode`] for a manifest that arrived in an archive (an L0 object) rather than from a
/// slot: a record error names the problem only, without the advice for a stored slot
/// (`strata artifact gc`); the caller adds its own.
///
/// # Errors
/// A reason.
pub fn decode_received(bytes: &[u8]) -> Result<(ManifestPayload, ManifestDigest), String> {
    decode_with(bytes, record::Error::problem)
}

fn decode_with(
    bytes: &[u8],
    describe: fn(&record::Error) -> String,
) -> Result<(ManifestPayload, ManifestDigest), String> {
    let migrated = record::MigrationRegistry::production()
        .load_migrated(bytes, &MANIFEST_SCHEMA, &[])
        .map_err(|e| format!("manifest does not load: {}", describe(&e)))?;
    let envelope = &migrated.envelope;
    let payload: ManifestPayload =
        envelope.payload_as().map_err(|e| match diagnose(&envelope.payload) {
            Some(problem) => format!("manifest payload {problem}"),
            None => format!("manifest does not load: {e}"),
        })?;
    payload.check()?;
    // The digest of the record as stored (before any migration): lineage names it, and a
    // stored record never changes.
    Ok((payload, ManifestDigest(migrated.source_digest)))
}

/// What to do about a manifest the record layer rejects: the slot is INVALID, and
/// `strata artifact gc` (offline) is the way to remove it — never a hand edit.
const GC_HINT: &str = "the slot is INVALID; remove it offline with `strata artifact gc`";

/// The record layer's reason, worded for an artifact manifest: damaged or hand-edited
/// bytes point to `strata artifact gc` instead of "delete it".
fn describe_record_error(error: &record::Error) -> String {
    match error {
        record::Error::Utf8 { offset, .. } => {
            format!("not valid UTF-8 (first bad byte at offset {offset}); {GC_HINT}")
        }
        record::Error::Syntax { line, column, message } => {
            format!("not valid JSON at line {line} column {column}: {message}; {GC_HINT}")
        }
        record::Error::DuplicateKey { key, path } => {
            format!("duplicate key {key:?} at {path:?}; {GC_HINT}")
        }
        record::Error::DigestMismatch { recorded, computed } => format!(
            "record digest mismatch: recorded {}, computed {} (damaged or edited); {GC_HINT}",
            recorded.to_prefixed(),
            computed.to_prefixed()
        ),
        record::Error::NonCanonical { offset } => format!(
            "bytes are not the canonical encoding (first difference at byte {offset}; \
             re-formatted or edited); {GC_HINT}"
        ),
        other => format!("{other}; {GC_HINT}"),
    }
}

/// Finds the first payload field that does not have its type and names it with its value
/// (`field files[3].path "../x": …`), so an INVALID reason says what is wrong instead of
/// "payload … does not match its type". `None` if every field checked is fine.
fn diagnose(payload: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    fn check<T: serde::de::DeserializeOwned>(
        map: &serde_json::Map<String, Value>,
        prefix: &str,
        name: &str,
    ) -> Option<String> {
        let Some(value) = map.get(name) else {
            return Some(format!("field {prefix}{name} is missing"));
        };
        let error = T::deserialize(value).err()?;
        let mut shown = value.to_string();
        if shown.len() > 100 {
            shown = format!("{}…", shown.chars().take(100).collect::<String>());
        }
        Some(format!("field {prefix}{name} {shown}: {error}"))
    }
    fn unknown(
        map: &serde_json::Map<String, Value>,
        prefix: &str,
        known: &[&str],
    ) -> Option<String> {
        map.keys()
            .find(|k| !known.contains(&k.as_str()))
            .map(|k| format!("has an unknown field {prefix}{k}"))
    }
    let Value::Object(map) = payload else {
        return Some("is not a JSON object".into());
    };
    if let Some(Value::Array(files)) = map.get("files") {
        for (index, file) in files.iter().enumerate() {
            let prefix = format!("files[{index}].");
            let Value::Object(file) = file else {
                return Some(format!("field files[{index}] is not an object"));
            };
            let problem = check::<RelPath>(file, &prefix, "path")
                .or_else(|| check::<ContentDigest>(file, &prefix, "digest"))
                .or_else(|| check::<u64>(file, &prefix, "size_bytes"))
                .or_else(|| check::<bool>(file, &prefix, "executable"))
                .or_else(|| {
                    unknown(file, &prefix, &["digest", "executable", "path", "size_bytes"])
                });
            if problem.is_some() {
                return problem;
            }
        }
    }
    check::<EnvDigest>(map, "", "env_digest")
        .or_else(|| check::<Vec<FileRecord>>(map, "", "files"))
        .or_else(|| check::<KeyRecord>(map, "", "key"))
        .or_else(|| check::<KeyDigest>(map, "", "key_digest"))
        .or_else(|| check::<Vec<ManifestDigest>>(map, "", "parents"))
        .or_else(|| check::<SpecRecord>(map, "", "spec"))
        .or_else(|| check::<SpecDigest>(map, "", "spec_digest"))
        .or_else(|| {
            let known =
                ["env_digest", "files", "key", "key_digest", "parents", "spec", "spec_digest"];
            unknown(map, "", &known)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::identity::{BuildKind, EnvironmentIdentity, Stage};
    use serde_json::json;

    pub(crate) fn sample() -> ManifestPayload {
        let env = EnvironmentIdentity::new([("cc", Some("1".repeat(64)))]).unwrap();
        let key = ArtifactKey::new(env, &"2".repeat(64), &"3".repeat(64)).unwrap();
        let spec = ArtifactSpec::new(Stage::Generated, BuildKind::Single, ["a.txt"]).unwrap();
        let file = |p: &str| FileRecord {
            executable: false,
            path: RelPath::new(p).unwrap(),
            digest: ContentDigest::of_bytes(crate::digest::DigestAlgorithm::Blake3, p.as_bytes()),
            size_bytes: 1,
        };
        ManifestPayload::new(&key, &spec, vec![file("b/c"), file("a.txt")], vec![])
    }

    #[test]
    fn seal_decode_round_trip_and_strictness() {
        let payload = sample();
        assert_eq!(payload.files[0].path.as_str(), "a.txt");
        let (bytes, digest) = payload.seal().unwrap();
        let (back, back_digest) = decode(&bytes).unwrap();
        assert_eq!((back, back_digest), (payload.clone(), digest));
        // Re-formatted bytes (same value) are rejected: comparison is byte-exact.
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        assert!(decode(&pretty).is_err());
        // A duplicate key deep inside is rejected.
        let text = String::from_utf8(bytes.clone()).unwrap();
        let dup =
            text.replacen("\"executable\":false", "\"executable\":false,\"executable\":false", 1);
        assert!(decode(dup.as_bytes()).unwrap_err().contains("duplicate"));
    }

    #[test]
    fn bad_paths_and_digests_are_named_with_their_field() {
        let (bytes, _) = sample().seal().unwrap();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        for (field, bad, needle) in [
            ("path", json!("../x"), "files[0].path \"../x\""),
            ("path", json!("/abs"), "files[0].path \"/abs\""),
            ("path", json!("a\\b"), "files[0].path"),
            ("path", json!("a//b"), "files[0].path \"a//b\""),
            ("path", json!("a\u{0}b"), "files[0].path"),
            ("digest", json!("A".repeat(64)), "files[0].digest"),
            ("digest", json!(format!("blake3:{}", "A".repeat(64))), "files[0].digest"),
        ] {
            let mut payload = value["payload"].clone();
            payload["files"][0][field] = bad;
            let sealed = Envelope::seal(&MANIFEST_SCHEMA, vec![], &payload).unwrap();
            let reason = decode(&sealed.to_bytes()).unwrap_err();
            assert!(reason.contains(needle), "{reason}");
            assert!(!reason.contains("does not match its type"), "{reason}");
        }
        let mut payload = value["payload"].clone();
        payload["env_digest"] = json!("zz");
        let sealed = Envelope::seal(&MANIFEST_SCHEMA, vec![], &payload).unwrap();
        assert!(decode(&sealed.to_bytes()).unwrap_err().contains("field env_digest \"zz\""));
        // Damaged records point to gc, never to a hand deletion.
        let mut damaged = bytes.clone();
        damaged[40] ^= 1;
        let reason = decode(&damaged).unwrap_err();
        assert!(reason.contains("strata artifact gc") && !reason.contains("delete"), "{reason}");
    }

    #[test]
    fn check_catches_inconsistent_payloads() {
        let mut p = sample();
        p.files.swap(0, 1);
        assert!(p.check().unwrap_err().contains("sorted"));
        let mut p = sample();
        p.files.retain(|f| f.path.as_str() != "a.txt");
        assert!(p.check().unwrap_err().contains("missing required"));
        let mut p = sample();
        p.spec_digest = SpecDigest::from_digest(Sha256Digest::of_bytes(b"x"));
        assert!(p.check().unwrap_err().contains("spec_digest"));
        let mut p = sample();
        p.key.source = Sha256Digest::of_bytes(b"other");
        assert!(p.check().unwrap_err().contains("key_digest"));
        let mut p = sample();
        p.env_digest = EnvDigest::from_digest(Sha256Digest::of_bytes(b"x"));
        let err = p.check().unwrap_err();
        assert!(err.contains("env_digest") && !err.contains("key_digest"), "{err}");
    }
}
