//! Where the artifact store keeps things: a typed path chain, one type per level, whose
//! top directory carries the layout version (docs/artifact-store.md "On-disk layout").
//!
//! ```text
//! <root>/                                  canonical absolute path (resolved at open)
//!   locks/<key digest>.lock                one per key, mode 0600, never unlinked online
//!   artifacts-v1/                          the bucket (versioned)
//!     <env digest>/<key digest>/<spec digest>/
//!       generated/ | ready/                the slot (mode 0700): payload + artifact_manifest.json
//!       .<stage>.tmp-<16 hex>/             staging of a publication (crash leftover if seen)
//! ```
//!
//! [`StoreRoot`] → [`Bucket`] → [`SlotPath`]. Bumping the layout version means renaming
//! `artifacts-v1` in [`Bucket::NAME`]; the tests to update are those that spell the path:
//! `tests/it/artifact/store.rs` (`layout_is_documented`) and the unit test below.

use std::path::{Path, PathBuf};

use crate::fs::temp::{Purpose, TempName};

use super::identity::{ArtifactKey, ArtifactSpec, EnvDigest, KeyDigest, SpecDigest, Stage};

/// The canonical root of an artifact store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreRoot {
    path: PathBuf,
}

impl StoreRoot {
    /// Wraps an already canonical path (see [`super::ArtifactStore::open`]).
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// The root directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `<root>/locks`.
    pub fn locks_dir(&self) -> PathBuf {
        self.path.join("locks")
    }

    /// `<root>/locks/<key>.lock`.
    pub fn lock_file(&self, key: &KeyDigest) -> PathBuf {
        self.locks_dir().join(format!("{key}.lock"))
    }

    /// The artifact bucket.
    pub fn bucket(&self) -> Bucket {
        Bucket { path: self.path.join(Bucket::NAME) }
    }

    /// True if `path` (canonical) is the root or inside it.
    pub fn contains(&self, path: &Path) -> bool {
        path.starts_with(&self.path)
    }
}

/// The versioned directory that holds every slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    path: PathBuf,
}

impl Bucket {
    /// The bucket's directory name. Changing it invalidates every stored artifact.
    pub const NAME: &'static str = "artifacts-v1";

    /// `<root>/artifacts-v1`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The slot of `key` and `spec`.
    pub fn slot(&self, key: &ArtifactKey, spec: &ArtifactSpec) -> SlotPath {
        self.slot_of(key.environment().digest(), key.digest(), spec.digest(), spec.stage())
    }

    /// The slot named by digests.
    pub fn slot_of(
        &self,
        env: EnvDigest,
        key: KeyDigest,
        spec: SpecDigest,
        stage: Stage,
    ) -> SlotPath {
        SlotPath { bucket: self.path.clone(), env, key, spec, stage }
    }
}

/// The directory of one published stage: `<bucket>/<env>/<key>/<spec>/<stage>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPath {
    bucket: PathBuf,
    env: EnvDigest,
    key: KeyDigest,
    spec: SpecDigest,
    stage: Stage,
}

impl SlotPath {
    /// The path relative to the bucket: `<env>/<key>/<spec>/<stage>`.
    pub fn relative(&self) -> PathBuf {
        self.spec_relative().join(self.stage.as_str())
    }

    /// `<env>/<key>/<spec>` relative to the bucket.
    pub fn spec_relative(&self) -> PathBuf {
        PathBuf::from(self.env.to_string()).join(self.key.to_string()).join(self.spec.to_string())
    }

    /// The slot directory.
    pub fn dir(&self) -> PathBuf {
        self.bucket.join(self.relative())
    }

    /// The spec directory (parent of the slot and of its staging directories).
    pub fn spec_dir(&self) -> PathBuf {
        self.bucket.join(self.spec_relative())
    }

    /// The bucket directory.
    pub fn bucket_dir(&self) -> &Path {
        &self.bucket
    }

    /// The manifest inside the slot.
    pub fn manifest(&self) -> PathBuf {
        self.dir().join(super::identity::MANIFEST_NAME)
    }

    /// The key digest.
    pub fn key(&self) -> KeyDigest {
        self.key
    }

    /// The spec digest.
    pub fn spec(&self) -> SpecDigest {
        self.spec
    }

    /// The environment digest.
    pub fn env(&self) -> EnvDigest {
        self.env
    }

    /// The stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }
}

/// True if `name` is a staging directory name (`.<stage>.tmp-<16 hex>`,
/// [`Purpose::Staging`]).
pub fn is_staging_name(name: &str) -> bool {
    TempName::parse(name).is_some_and(|t| t.purpose() == Purpose::Staging)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::identity::{BuildKind, EnvironmentIdentity};

    #[test]
    fn slot_path_spells_the_documented_layout() {
        let env = EnvironmentIdentity::new([("cc", Some("1".repeat(64)))]).unwrap();
        let key = ArtifactKey::new(env, &"2".repeat(64), &"3".repeat(64)).unwrap();
        let spec = ArtifactSpec::new(Stage::BinaryReady, BuildKind::Single, ["bin/app"]).unwrap();
        let root = StoreRoot::new(PathBuf::from("/r"));
        let slot = root.bucket().slot(&key, &spec);
        let expected = format!(
            "/r/artifacts-v1/{}/{}/{}/ready",
            key.environment().digest(),
            key.digest(),
            spec.digest()
        );
        assert_eq!(slot.dir(), PathBuf::from(expected));
        assert_eq!(
            root.lock_file(&key.digest()),
            PathBuf::from(format!("/r/locks/{}.lock", key.digest()))
        );
        assert!(is_staging_name(".ready.tmp-0123456789abcdef"));
        assert!(!is_staging_name("ready"));
        assert!(!is_staging_name(".ready.tmp-xyz"));
        assert!(!is_staging_name(".ready.old-0123456789abcdef"));
    }
}
