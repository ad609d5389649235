//! Artifact identity: environment (toolchain) identity, [`ArtifactKey`] and [`ArtifactSpec`]
//! (docs/artifact-store.md "Identity").
//!
//! # Digest rule
//!
//! Every identity digest is the SHA-256 of the canonical JSON bytes (see [`crate::record`]:
//! sorted keys, integers only, no whitespace) of a three-element array
//! `[<domain tag>, <version>, <record>]`:
//!
//! | digest | tag | record |
//! |---|---|---|
//! | environment | `"strata.environment"`, 1 | `{"<component>": "<64 hex>", ...}` |
//! | key | `"strata.artifact_key"`, 1 | [`KeyRecord`]: environment components and schema, source, specialization |
//! | spec | `"strata.artifact_spec"`, 1 | [`SpecRecord`]: stage, kind, sorted required files |
//!
//! This keeps the semantics of pypto's artifact cache (`pypto.jit.artifact_cache`, which strata's
//! store generalises) without its byte format: the tag separates the three kinds of digest; every
//! value is typed by its field (a string is never an integer, a list is never a map); a component,
//! the source digest, the specialization digest or the record version changes the key digest; the
//! order of required files does not change the spec digest. pypto's typed
//! `["pypto.identity",1,[...]]` encoding is *not* reproduced, so digests are not interchangeable
//! with Python stores (strata reads none of them).
//!
//! Keys and specs are also stored as canonical records inside the artifact manifest
//! ([`super::manifest`]), so a slot names its full identity, not only its digests.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Error;
use crate::digest::Sha256Digest;
use crate::fs::RelPath;
use crate::record;

/// Version of the environment identity record, stored as `schema` inside the key record.
pub const IDENTITY_SCHEMA: u32 = 1;
/// Version of the key and spec records (part of both digests).
pub const ARTIFACT_SCHEMA: u32 = 1;
/// The name of the artifact manifest inside a slot; reserved as a top-level payload path.
pub const MANIFEST_NAME: &str = "artifact_manifest.json";

macro_rules! digest_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Sha256Digest);

        impl $name {
            /// The underlying SHA-256.
            pub fn digest(&self) -> Sha256Digest {
                self.0
            }

            /// Wraps a SHA-256 (for digests read back from a trusted record).
            pub fn from_digest(digest: Sha256Digest) -> Self {
                Self(digest)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = crate::digest::Error;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                text.parse().map(Self)
            }
        }
    };
}

digest_newtype!(
    /// Digest of an [`EnvironmentIdentity`] (64 lowercase hex; first path level of a slot).
    EnvDigest
);
digest_newtype!(
    /// Digest of an [`ArtifactKey`] (64 lowercase hex; names the key's lock and directory).
    ///
    /// ```
    /// use strata::artifact::KeyDigest;
    /// let text = "ab".repeat(32);
    /// let digest: KeyDigest = text.parse().unwrap();
    /// assert_eq!(digest.to_string(), text);
    /// ```
    KeyDigest
);
digest_newtype!(
    /// Digest of an [`ArtifactSpec`] (64 lowercase hex; selects the slot of a key).
    SpecDigest
);

fn identity_digest(tag: &str, version: u32, record: &serde_json::Value) -> Sha256Digest {
    let framed = json!([tag, version, record]);
    // Identity records hold strings and integers only, so encoding cannot fail; an error
    // would be a programming error in this file, caught by the unit tests.
    record::canonical_sha256(&framed).unwrap_or_else(|_| Sha256Digest::of_bytes(b""))
}

fn parse_digest(field: &str, text: &str) -> Result<Sha256Digest, Error> {
    text.parse().map_err(|source| Error::InvalidDigest { field: field.to_owned(), source })
}

/// A component name of an environment identity: 1 to 64 characters of `[a-z0-9_.-]`,
/// starting with a letter or digit (for example `compiler`, `sdk`, `runtime`).
fn check_component_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidIdentity {
            reason: format!(
                "environment component name {name:?} must be 1-64 characters of [a-z0-9_.-] \
                 starting with a letter or digit"
            ),
        })
    }
}

/// The identity of the build environment (toolchain): named components, each the full
/// SHA-256 of something the build depends on (compiler binary, SDK inventory, runtime
/// library), plus the identity schema.
///
/// Usable only when at least one component is given and none is missing; there is no
/// partial identity. The store validates the representation only: the caller decides
/// what the components cover.
///
/// ```
/// use strata::artifact::EnvironmentIdentity;
/// let hex = "0".repeat(64);
/// let env = EnvironmentIdentity::new([("compiler", Some(hex.as_str()))]).unwrap();
/// assert_eq!(env.components().len(), 1);
/// assert!(EnvironmentIdentity::new([("compiler", None::<&str>)]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentIdentity {
    components: BTreeMap<String, Sha256Digest>,
}

impl EnvironmentIdentity {
    /// Builds an identity from `(name, digest)` pairs; `None` marks a component whose
    /// identity could not be established.
    ///
    /// # Errors
    /// [`Error::InvalidIdentity`] for no components, a missing (`None`) component, a bad or
    /// repeated name; [`Error::InvalidDigest`] for a digest that is not 64 lowercase hex.
    pub fn new<N: AsRef<str>, D: AsRef<str>>(
        components: impl IntoIterator<Item = (N, Option<D>)>,
    ) -> Result<Self, Error> {
        let mut map = BTreeMap::new();
        for (name, digest) in components {
            let name = name.as_ref();
            check_component_name(name)?;
            let Some(digest) = digest else {
                return Err(Error::InvalidIdentity {
                    reason: format!(
                        "environment component {name:?} has no identity; a usable toolchain \
                         identity needs every component"
                    ),
                });
            };
            let digest = parse_digest(&format!("environment component {name:?}"), digest.as_ref())?;
            if map.insert(name.to_owned(), digest).is_some() {
                return Err(Error::InvalidIdentity {
                    reason: format!("environment component {name:?} is given twice"),
                });
            }
        }
        if map.is_empty() {
            return Err(Error::InvalidIdentity {
                reason: "the environment identity has no components; give at least one \
                         (e.g. --env compiler=<sha256>)"
                    .into(),
            });
        }
        Ok(Self { components: map })
    }

    /// The components, sorted by name.
    pub fn components(&self) -> &BTreeMap<String, Sha256Digest> {
        &self.components
    }

    /// The environment digest (see the module docs).
    pub fn digest(&self) -> EnvDigest {
        let record = serde_json::to_value(&self.components).unwrap_or_default();
        EnvDigest(identity_digest("strata.environment", IDENTITY_SCHEMA, &record))
    }
}

/// The stored form of an environment identity inside a key record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentRecord {
    /// Component name → 64-hex digest.
    pub components: BTreeMap<String, Sha256Digest>,
    /// [`IDENTITY_SCHEMA`].
    pub schema: u32,
}

/// The stored form of an [`ArtifactKey`] (payload of the key record and the `key` field of
/// the manifest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecord {
    /// The environment identity.
    pub environment: EnvironmentRecord,
    /// [`ARTIFACT_SCHEMA`].
    pub schema: u32,
    /// Source digest.
    pub source: Sha256Digest,
    /// Specialization digest.
    pub specialization: Sha256Digest,
}

/// What an artifact is: the environment that builds it, the digest of its sources and the
/// digest of its specialisation (options, target, configuration). All three are required
/// and validated when the key is built.
///
/// ```
/// use strata::artifact::{ArtifactKey, EnvironmentIdentity};
/// let hex = |c: char| c.to_string().repeat(64);
/// let env = EnvironmentIdentity::new([("compiler", Some(hex('a')))]).unwrap();
/// let key = ArtifactKey::new(env.clone(), &hex('b'), &hex('c')).unwrap();
/// assert_eq!(key.digest().to_string().len(), 64);
/// assert!(ArtifactKey::new(env.clone(), "unknown", &hex('c')).is_err());
/// assert!(ArtifactKey::new(env, &hex('b')[..16], &hex('c')).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactKey {
    environment: EnvironmentIdentity,
    source: Sha256Digest,
    specialization: Sha256Digest,
}

impl ArtifactKey {
    /// Builds a key; `source` and `specialization` must be 64 lowercase hex characters.
    ///
    /// # Errors
    /// [`Error::InvalidDigest`] naming the field.
    pub fn new(
        environment: EnvironmentIdentity,
        source: &str,
        specialization: &str,
    ) -> Result<Self, Error> {
        Ok(Self {
            environment,
            source: parse_digest("source digest", source)?,
            specialization: parse_digest("specialization digest", specialization)?,
        })
    }

    /// The environment identity.
    pub fn environment(&self) -> &EnvironmentIdentity {
        &self.environment
    }

    /// The source digest.
    pub fn source(&self) -> Sha256Digest {
        self.source
    }

    /// The specialization digest.
    pub fn specialization(&self) -> Sha256Digest {
        self.specialization
    }

    /// The stored form.
    pub fn record(&self) -> KeyRecord {
        KeyRecord {
            environment: EnvironmentRecord {
                components: self.environment.components.clone(),
                schema: IDENTITY_SCHEMA,
            },
            schema: ARTIFACT_SCHEMA,
            source: self.source,
            specialization: self.specialization,
        }
    }

    /// Rebuilds a key from its stored form.
    ///
    /// # Errors
    /// [`Error::InvalidIdentity`] for another schema or an empty environment.
    pub fn from_record(record: &KeyRecord) -> Result<Self, Error> {
        if record.schema != ARTIFACT_SCHEMA || record.environment.schema != IDENTITY_SCHEMA {
            return Err(Error::InvalidIdentity {
                reason: format!(
                    "key record has artifact schema {} and identity schema {}; this build \
                     reads {ARTIFACT_SCHEMA} and {IDENTITY_SCHEMA} (the current schema)",
                    record.schema, record.environment.schema
                ),
            });
        }
        let environment = EnvironmentIdentity::new(
            record.environment.components.iter().map(|(n, d)| (n.as_str(), Some(d.to_hex()))),
        )?;
        Ok(Self { environment, source: record.source, specialization: record.specialization })
    }

    /// The key digest (see the module docs).
    pub fn digest(&self) -> KeyDigest {
        let record = serde_json::to_value(self.record()).unwrap_or_default();
        KeyDigest(identity_digest("strata.artifact_key", ARTIFACT_SCHEMA, &record))
    }
}

/// The stage of an artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Stage {
    /// Validated, self-contained generated sources and configuration (`generated`).
    #[serde(rename = "generated")]
    Generated,
    /// Everything needed to load without compiling (`ready`).
    #[serde(rename = "ready")]
    BinaryReady,
}

impl Stage {
    /// `generated` or `ready`: the slot directory name and the stored value.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Generated => "generated",
            Stage::BinaryReady => "ready",
        }
    }

    /// Parses [`Stage::as_str`] output.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "generated" => Some(Stage::Generated),
            "ready" => Some(Stage::BinaryReady),
            _ => None,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an artifact was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BuildKind {
    /// One build (`single`).
    #[serde(rename = "single")]
    Single,
    /// A parent assembled from several child builds (`distributed`).
    #[serde(rename = "distributed")]
    Distributed,
}

impl BuildKind {
    /// `single` or `distributed`.
    pub fn as_str(self) -> &'static str {
        match self {
            BuildKind::Single => "single",
            BuildKind::Distributed => "distributed",
        }
    }
}

/// The stored form of an [`ArtifactSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecRecord {
    /// Build kind.
    pub kind: BuildKind,
    /// Required files, sorted by code point, no duplicates.
    pub required_files: Vec<RelPath>,
    /// [`ARTIFACT_SCHEMA`].
    pub schema: u32,
    /// Stage.
    pub stage: Stage,
}

/// Which slot of a key to use and what it must contain: the stage, the build kind and a
/// non-empty, duplicate-free list of required relative paths (a minimum: the artifact may
/// hold other files, and every file is verified). The spec digest is part of the slot path,
/// so a changed spec is a clean MISS and the old spec's slot stays usable.
///
/// ```
/// use strata::artifact::{ArtifactSpec, BuildKind, Stage};
/// let a = ArtifactSpec::new(Stage::Generated, BuildKind::Single, ["b.txt", "a.txt"]).unwrap();
/// let b = ArtifactSpec::new(Stage::Generated, BuildKind::Single, ["a.txt", "b.txt"]).unwrap();
/// assert_eq!(a.digest(), b.digest());
/// assert!(ArtifactSpec::new(Stage::Generated, BuildKind::Single, ["a", "a"]).is_err());
/// assert!(ArtifactSpec::new(Stage::Generated, BuildKind::Single, ["../x"]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactSpec {
    stage: Stage,
    kind: BuildKind,
    required: Vec<RelPath>,
}

impl ArtifactSpec {
    /// Builds a spec; required paths are validated ([`RelPath`]: relative, normalised, no
    /// `..`, no backslash), must not be the top-level manifest name, must be non-empty and
    /// duplicate-free (duplicates are rejected, not collapsed), and are stored sorted.
    ///
    /// # Errors
    /// [`Error::InvalidSpec`] with the reason.
    pub fn new<P: AsRef<str>>(
        stage: Stage,
        kind: BuildKind,
        required: impl IntoIterator<Item = P>,
    ) -> Result<Self, Error> {
        let mut paths = Vec::new();
        for text in required {
            let text = text.as_ref();
            let path = RelPath::new(text).map_err(|e| Error::InvalidSpec {
                // The error names the path itself ("\"../x\" is not a safe relative path").
                reason: format!("required path {e}"),
            })?;
            if path.as_str() == MANIFEST_NAME {
                return Err(Error::InvalidSpec {
                    reason: format!("required path {MANIFEST_NAME:?} is reserved for the manifest"),
                });
            }
            paths.push(path);
        }
        if paths.is_empty() {
            return Err(Error::InvalidSpec {
                reason: "required files must be nonempty and unique: the list is empty".into(),
            });
        }
        paths.sort();
        if let Some(pair) = paths.windows(2).find(|w| w.first() == w.get(1)) {
            let dup = pair.first().map(|p| p.as_str().to_owned()).unwrap_or_default();
            return Err(Error::InvalidSpec {
                reason: format!("required files must be nonempty and unique: {dup:?} repeats"),
            });
        }
        Ok(Self { stage, kind, required: paths })
    }

    /// The stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The build kind.
    pub fn kind(&self) -> BuildKind {
        self.kind
    }

    /// Required paths, sorted.
    pub fn required(&self) -> &[RelPath] {
        &self.required
    }

    /// The stored form.
    pub fn record(&self) -> SpecRecord {
        SpecRecord {
            kind: self.kind,
            required_files: self.required.clone(),
            schema: ARTIFACT_SCHEMA,
            stage: self.stage,
        }
    }

    /// Rebuilds a spec from its stored form (re-validating it).
    ///
    /// # Errors
    /// [`Error::InvalidSpec`].
    pub fn from_record(record: &SpecRecord) -> Result<Self, Error> {
        if record.schema != ARTIFACT_SCHEMA {
            return Err(Error::InvalidSpec {
                reason: format!(
                    "spec record has schema {}, this build reads {ARTIFACT_SCHEMA}",
                    record.schema
                ),
            });
        }
        let spec =
            Self::new(record.stage, record.kind, record.required_files.iter().map(|p| p.as_str()))?;
        if spec.required != record.required_files {
            return Err(Error::InvalidSpec { reason: "required files are not sorted".into() });
        }
        Ok(spec)
    }

    /// The spec digest (see the module docs).
    pub fn digest(&self) -> SpecDigest {
        let record = serde_json::to_value(self.record()).unwrap_or_default();
        SpecDigest(identity_digest("strata.artifact_spec", ARTIFACT_SCHEMA, &record))
    }

    /// This spec with other required paths added (a BINARY_READY spec derived from a
    /// GENERATED one: its required files plus the binaries).
    ///
    /// # Errors
    /// [`Error::InvalidSpec`] for an invalid path, a path this spec already requires, or a
    /// path given twice: duplicates are rejected, never collapsed.
    pub fn with_stage_and_more<P: AsRef<str>>(
        &self,
        stage: Stage,
        more: impl IntoIterator<Item = P>,
    ) -> Result<Self, Error> {
        let mut all: Vec<String> = self.required.iter().map(|p| p.as_str().to_owned()).collect();
        for p in more {
            let p = p.as_ref();
            if self.required.iter().any(|r| r.as_str() == p) {
                return Err(Error::InvalidSpec {
                    reason: format!(
                        "{p:?} is already a required file of the {} spec; list each path once",
                        self.stage.as_str()
                    ),
                });
            }
            all.push(p.to_owned());
        }
        Self::new(stage, self.kind, all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(c: char) -> String {
        c.to_string().repeat(64)
    }

    fn env() -> EnvironmentIdentity {
        EnvironmentIdentity::new([("compiler", Some(hex('1'))), ("sdk", Some(hex('2')))]).unwrap()
    }

    #[test]
    fn a_bad_required_path_is_named_once() {
        let err = ArtifactSpec::new(Stage::BinaryReady, BuildKind::Single, ["../x"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid artifact spec: required path \"../x\" is not a safe relative path: has a \
             `.` or `..` segment"
        );
    }

    #[test]
    fn key_validation_rejects_bad_digests_and_missing_identity() {
        for bad in ["unknown", &hex('a')[..16], &hex('A'), "../escape", ""] {
            let err = ArtifactKey::new(env(), bad, &hex('c')).unwrap_err();
            assert!(
                err.to_string().contains("SHA-256") || err.to_string().contains("digest"),
                "{err}"
            );
            assert!(matches!(err, Error::InvalidDigest { .. }));
            assert!(ArtifactKey::new(env(), &hex('c'), bad).is_err());
        }
        assert!(matches!(
            EnvironmentIdentity::new(Vec::<(&str, Option<&str>)>::new()),
            Err(Error::InvalidIdentity { .. })
        ));
        assert!(EnvironmentIdentity::new([("cc", Some("1234"))]).is_err());
        assert!(EnvironmentIdentity::new([("CC", Some(hex('1')))]).is_err());
        assert!(
            EnvironmentIdentity::new([("cc", Some(hex('1'))), ("cc", Some(hex('1')))]).is_err()
        );
    }

    #[test]
    fn key_digest_changes_with_every_field_and_round_trips() {
        let base = ArtifactKey::new(env(), &hex('a'), &hex('b')).unwrap();
        let other_env =
            EnvironmentIdentity::new([("compiler", Some(hex('1'))), ("sdk", Some(hex('3')))])
                .unwrap();
        let variants = [
            ArtifactKey::new(other_env, &hex('a'), &hex('b')).unwrap(),
            ArtifactKey::new(env(), &hex('c'), &hex('b')).unwrap(),
            ArtifactKey::new(env(), &hex('a'), &hex('c')).unwrap(),
            // Swapping source and specialization must not collide.
            ArtifactKey::new(env(), &hex('b'), &hex('a')).unwrap(),
        ];
        for v in &variants {
            assert_ne!(v.digest(), base.digest());
        }
        assert_eq!(ArtifactKey::from_record(&base.record()).unwrap(), base);
        // The environment digest and the key digest are domain-separated.
        assert_ne!(base.environment().digest().digest(), base.digest().digest());
    }

    #[test]
    fn spec_rules_match_the_reference() {
        for bad in
            ["../escape", "/abs", "a/../b", "a//b", "a/./b", "a/", "a\\b", "", ".", MANIFEST_NAME]
        {
            assert!(
                matches!(
                    ArtifactSpec::new(Stage::Generated, BuildKind::Single, [bad]),
                    Err(Error::InvalidSpec { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(
            ArtifactSpec::new(
                Stage::Generated,
                BuildKind::Single,
                [format!("sub/{MANIFEST_NAME}")]
            )
            .is_ok()
        );
        let err =
            ArtifactSpec::new(Stage::Generated, BuildKind::Single, Vec::<&str>::new()).unwrap_err();
        assert!(err.to_string().contains("nonempty and unique"), "{err}");
        let g = ArtifactSpec::new(Stage::Generated, BuildKind::Single, ["k/source.pto", "cfg.py"])
            .unwrap();
        assert_eq!(g.required()[0].as_str(), "cfg.py");
        let r =
            ArtifactSpec::new(Stage::BinaryReady, BuildKind::Single, ["k/source.pto", "cfg.py"])
                .unwrap();
        let d =
            ArtifactSpec::new(Stage::Generated, BuildKind::Distributed, ["k/source.pto", "cfg.py"])
                .unwrap();
        let more = g.with_stage_and_more(Stage::Generated, ["bin"]).unwrap();
        let err = g.with_stage_and_more(Stage::BinaryReady, ["cfg.py"]).unwrap_err();
        assert!(err.to_string().contains("already a required file"), "{err}");
        assert!(g.with_stage_and_more(Stage::BinaryReady, ["bin", "bin"]).is_err());
        let digests = [g.digest(), r.digest(), d.digest(), more.digest()];
        for (i, a) in digests.iter().enumerate() {
            for b in digests.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
        assert_eq!(ArtifactSpec::from_record(&g.record()).unwrap(), g);
    }

    #[test]
    fn digest_is_the_documented_framing() {
        let spec = ArtifactSpec::new(Stage::Generated, BuildKind::Single, ["a"]).unwrap();
        let expected = Sha256Digest::of_bytes(
            br#"["strata.artifact_spec",1,{"kind":"single","required_files":["a"],"schema":1,"stage":"generated"}]"#,
        );
        assert_eq!(spec.digest().digest(), expected);
    }
}
