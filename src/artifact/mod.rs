//! L0: the immutable, content-verified artifact store with stage promotion (user reference
//! in `docs/artifact-store.md`).
//!
//! An *artifact* is the final output of a whole build, stored under its [`ArtifactKey`]
//! (environment identity, source digest, specialisation digest) in a *slot* selected by its
//! [`ArtifactSpec`] (stage, build kind, required files). A slot is published once, by a
//! no-replace rename of a verified, fsynced staging directory, and never modified. Every
//! HIT re-verifies the real tree against the slot's manifest, byte for byte.
//!
//! Submodules:
//! * `identity`: keys, specs, environment identity and their digests;
//! * `layout`: the typed path chain under the root;
//! * `manifest`: the artifact manifest record;
//! * `verify`: validation by enumerating the real tree;
//! * `handle`: verified handles, the per-handle verification memo, materialization;
//! * `destination`: checking destinations outside the store before anything runs, and
//!   filling them through a staging directory (never with unverified bytes);
//! * `command`: the build command of get-or-build and promote (signals forwarded);
//! * `flight`: in-process single-flight;
//! * `store`: lookup, get_or_build, promotion, read-only mode;
//! * `private`: the private root of one invocation and what survives it;
//! * `publish`: the write order of a publication;
//! * `gc`: offline cleanup;
//! * [`archive`]: packing a ready artifact for L0 transfer (tar + zstd) and checking one;
//! * [`l0`]: L0 transfer, one ready artifact pushed to and pulled from an object store
//!   (through [`crate::transport`]'s store trait);
//! * [`include`](mod@include): the conservative include scanner for extern packaging.
//!
//! Only [`l0`] reaches an object store; everything else works on the local store.
//!
//! # Invariants
//! * No false HIT: a HIT needs the manifest to load strictly, to name exactly the requested
//!   key and spec and the slot's own path, and every file of the real tree to be listed with
//!   its size, owner-exec bit and SHA-256.
//! * Nothing published is modified, repaired or replaced online.
//! * Read-only stores create, lock and modify nothing under the root.
//! * Cache trouble never fails a build: it makes the result PRIVATE.
//!
//! # Limitations
//! * Writers must be trusted: a digest detects damage, not a writer replacing files and
//!   manifest together. Payloads hold regular files only (no symlinks); empty directories
//!   carry no meaning.
//! * Requires Linux `flock` and `renameat2(RENAME_NOREPLACE)` on the root's filesystem;
//!   without them every build stays PRIVATE.
//! * Writers with different UIDs are unsupported (slots are 0700).

pub mod archive;
mod command;
mod destination;
mod flight;
mod gc;
mod handle;
mod identity;
pub mod include;
pub mod l0;
mod layout;
mod manifest;
mod private;
mod publish;
mod store;
mod verify;

use std::path::PathBuf;
use std::sync::Arc;

pub use command::{BuildCommand, CommandFailed, CommandStdout, OUT_VAR};
pub use destination::Destination;
pub use gc::{GcAction, GcOptions, GcReport, SlotReport, gc, verify_all};
pub use handle::{ArtifactHandle, MaterializeReport, VerifyPass, VerifyReport};
pub use identity::{
    ARTIFACT_SCHEMA, ArtifactKey, ArtifactSpec, BuildKind, EnvDigest, EnvironmentIdentity,
    EnvironmentRecord, IDENTITY_SCHEMA, KeyDigest, KeyRecord, MANIFEST_NAME, SpecDigest,
    SpecRecord, Stage,
};
pub use layout::{Bucket, SlotPath, StoreRoot};
pub use manifest::{
    FileRecord, MANIFEST_SCHEMA, MAX_MANIFEST_BYTES, ManifestDigest, ManifestPayload,
};
pub use private::{Kept, PrivateBuild, PrivateRoot, settle};
pub use store::{
    ArtifactBuild, ArtifactStore, BuildFailure, Disposition, Lookup, LookupStatus, Mode,
    StoreOptions,
};

/// The error type a builder may return (any error, boxed).
pub type BuilderError = Box<dyn std::error::Error + Send + Sync>;

/// An artifact store failure.
///
/// Cheap to clone (causes are shared), so one failure can wake every waiter of a coalesced
/// request.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A digest in an identity is not 64 lowercase hex characters.
    #[error("{field} is not a full SHA-256 digest (64 lowercase hex characters)")]
    InvalidDigest {
        /// Which digest.
        field: String,
        /// The parse error.
        #[source]
        source: crate::digest::Error,
    },
    /// The environment or key identity is incomplete or malformed.
    #[error("invalid artifact identity: {reason}")]
    InvalidIdentity {
        /// Why.
        reason: String,
    },
    /// The spec is malformed.
    #[error("invalid artifact spec: {reason}")]
    InvalidSpec {
        /// Why.
        reason: String,
    },
    /// The manifest would exceed 16 MiB.
    #[error(
        "the artifact manifest would be {size_bytes} bytes for {files} files, above the 16 MiB limit; split the artifact"
    )]
    ManifestTooLarge {
        /// Encoded size in bytes.
        size_bytes: u64,
        /// Files listed.
        files: usize,
    },
    /// A build is needed but the store has no private root.
    #[error("an artifact build is needed but no private root outside the cache root {} was given (set --private-root or STRATA_ARTIFACT_PRIVATE_ROOT)", root.display())]
    NoPrivateRoot {
        /// The cache root.
        root: PathBuf,
    },
    /// The private root is the cache root or inside it.
    #[error("private root {} must be outside the cache root {}", private_root.display(), root.display())]
    PrivateRootInsideStore {
        /// The resolved private root.
        private_root: PathBuf,
        /// The cache root.
        root: PathBuf,
    },
    /// The cache root to verify or clean up does not exist or is not a directory.
    #[error("cache root {} {reason}; check --root or STRATA_ARTIFACT_ROOT", root.display())]
    RootUnusable {
        /// The cache root.
        root: PathBuf,
        /// Why ("does not exist", "is not a directory").
        reason: String,
    },
    /// A materialization destination is unusable.
    #[error("cannot use {} as a destination: {reason}", path.display())]
    Destination {
        /// The destination as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The builder produced something the store cannot accept.
    #[error("build output in {} is invalid: {reason}", dir.display())]
    InvalidBuildOutput {
        /// The private build directory (kept for inspection).
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// The builder failed.
    #[error("the artifact builder failed")]
    Builder {
        /// The builder's error.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// A builder asked for the request it is building.
    #[error(
        "the builder of artifact key {key} spec {spec} recursively requested its own in-flight build"
    )]
    RecursiveRequest {
        /// Key digest.
        key: KeyDigest,
        /// Spec digest.
        spec: SpecDigest,
    },
    /// A builder asked for another spec of the key whose lock its thread holds.
    #[error("the builder of artifact key {key} requested another spec of the same key while holding {}; build the other spec before or after, not inside", lock.display())]
    RecursiveLock {
        /// Key digest.
        key: KeyDigest,
        /// The lock file.
        lock: PathBuf,
    },
    /// An artifact needed for the operation is not available.
    #[error("{what} is not available ({}): {reason}", status.as_str())]
    NotAvailable {
        /// What was needed.
        what: &'static str,
        /// The lookup status.
        status: LookupStatus,
        /// The lookup reason.
        reason: String,
    },
    /// A verified handle no longer verifies, or copied bytes differ.
    #[error("artifact at {} is corrupt: {reason}", path.display())]
    Corrupt {
        /// The slot or file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The store could not be read.
    #[error("artifact store at {} cannot be read: {reason}", path.display())]
    Storage {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An archive (L0 object) is malformed or does not match its manifest.
    #[error("artifact archive {} is invalid: {reason}", path.display())]
    InvalidArchive {
        /// The archive file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A source file's conditional structure is broken (include scanner).
    #[error("{}:{line}: {reason}", path.display())]
    MalformedSource {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// Why.
        reason: String,
    },
    /// A filesystem operation failed.
    #[error(transparent)]
    Fs(Arc<crate::fs::Error>),
    /// A record could not be encoded.
    #[error(transparent)]
    Record(Arc<crate::record::Error>),
}

impl From<crate::fs::Error> for Error {
    fn from(e: crate::fs::Error) -> Self {
        Error::Fs(Arc::new(e))
    }
}

impl From<crate::record::Error> for Error {
    fn from(e: crate::record::Error) -> Self {
        Error::Record(Arc::new(e))
    }
}

impl Error {
    /// True for errors in what the caller asked for (identity, spec, destination, private
    /// root): fixing the request fixes them.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::InvalidDigest { .. }
                | Error::InvalidIdentity { .. }
                | Error::InvalidSpec { .. }
                | Error::NoPrivateRoot { .. }
                | Error::PrivateRootInsideStore { .. }
                | Error::Destination { .. }
                | Error::RootUnusable { .. }
        )
    }

    /// True if the data read was damaged ([`Error::Corrupt`], [`Error::InvalidArchive`]).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::Corrupt { .. } | Error::InvalidArchive { .. })
    }

    /// True if a needed artifact is not there ([`Error::NotAvailable`]).
    pub fn is_not_available(&self) -> bool {
        matches!(self, Error::NotAvailable { .. })
    }

    /// The lookup status of an artifact that was needed but not available
    /// ([`Error::NotAvailable`]): MISS, INVALID or STORAGE_ERROR.
    pub fn not_available_status(&self) -> Option<LookupStatus> {
        match self {
            Error::NotAvailable { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The builder's own error, if this is [`Error::Builder`].
    pub fn builder_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            Error::Builder { source } => Some(source.as_ref()),
            _ => None,
        }
    }

    /// How a lookup reports this problem with a slot: [`LookupStatus::Invalid`] when the
    /// data is damaged ([`Error::is_corrupt`]), else [`LookupStatus::StorageError`].
    pub fn lookup_status(&self) -> LookupStatus {
        if self.is_corrupt() { LookupStatus::Invalid } else { LookupStatus::StorageError }
    }

    /// The failure of a [`BuildCommand`] builder, if this is one.
    pub fn build_command_failure(&self) -> Option<&CommandFailed> {
        self.builder_error().and_then(|b| b.downcast_ref::<CommandFailed>())
    }
}
