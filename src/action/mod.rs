//! L1: the persistent action cache.
//!
//! One *entry* per build action, stored under its [`ActionKey`]: the action's output files
//! (*artifacts*) and a manifest record listing each one's relative POSIX path, size and
//! SHA-256. `strata action run` computes the key ([`identity`]), and then either restores
//! a verified entry (HIT) or runs the build and saves a new entry (MISS). See
//! `docs/engine.md` for the user guide and `docs/format.md` for the on-disk format.
//!
//! Submodules:
//! * [`identity`]: action keys and their components; [`prepare`]: the one preparation of a
//!   request's identity inputs that `run` and `explain` share;
//! * [`layout`]: where an entry lives (the cache-root layout names are
//!   [`crate::l1::layout`]'s);
//! * [`entry`]: entry manifests, validation, restore and save;
//! * [`artifacts`]: finding and describing what a build produced;
//! * [`publish`]: custom-operator publication into a shared directory with ownership;
//! * [`run`](mod@run): the `run` algorithm; [`guard`]: stage safety and output-directory
//!   locks (lock timeouts and acquisition are [`crate::l1::lock`]'s, the event log
//!   [`crate::l1::events`]);
//! * [`explain`]: diagnosis (prune and stats are L1's, over every domain:
//!   [`crate::l1::prune`], [`crate::l1::stats`]).
//!
//! # Invariants
//! * No false HIT: a HIT needs a verified manifest for the exact key and every artifact
//!   byte matching its SHA-256; anything else is a MISS with a warning, then a rebuild and
//!   a safe replacement.
//! * Cache trouble never fails a build, except a publication ownership conflict, which
//!   would corrupt shared output.

pub mod artifacts;
pub mod entry;
pub mod explain;
pub mod guard;
pub mod identity;
pub mod layout;
pub mod prepare;
pub mod publish;
pub mod run;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::l1::lock::LockKind;
pub use identity::{ActionKey, Identity, IdentityInputs, Profile};
pub use layout::{CacheRoot, Domain, EntryLocation};
pub use run::{Outcome, RunOptions, RunReport, run};

/// One `--set-env NAME=VALUE` override, validated when parsed (not right before building,
/// where a malformed value would pass on a HIT and fail only on a MISS).
/// The value is bytes, like any environment value (a path whose names are not UTF-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetEnv {
    name: String,
    value: OsString,
}

impl SetEnv {
    /// Parses `NAME=VALUE`: NAME is non-empty UTF-8 and has no `=` or NUL; VALUE is any
    /// bytes but NUL.
    ///
    /// # Errors
    /// [`Error::InvalidSetEnv`] naming the text (in the name encoding of
    /// [`crate::fs::name`]).
    pub fn parse(text: impl AsRef<OsStr>) -> Result<Self, Error> {
        let bytes = text.as_ref().as_bytes();
        let split = bytes.iter().position(|b| *b == b'=');
        if let Some(at) = split
            && let (Some(name), Some(value)) = (bytes.get(..at), bytes.get(at + 1..))
            && let Ok(name) = std::str::from_utf8(name)
            && !name.is_empty()
            && !name.contains('\0')
            && !value.contains(&0)
        {
            return Ok(Self { name: name.to_owned(), value: OsStr::from_bytes(value).to_owned() });
        }
        Err(Error::InvalidSetEnv { text: crate::fs::name::encode(bytes) })
    }

    /// The variable name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value.
    pub fn value(&self) -> &OsStr {
        &self.value
    }

    /// `NAME=VALUE`, exactly as given (bytes).
    pub fn text(&self) -> Vec<u8> {
        [self.name.as_bytes(), b"=", self.value.as_bytes()].concat()
    }
}

/// An action-cache failure. Variants name the path, key or flag involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem operation failed.
    #[error(transparent)]
    Fs(#[from] crate::fs::Error),
    /// A record could not be sealed or parsed.
    #[error("record {}", path.display())]
    Record {
        /// The record file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::record::Error,
    },
    /// A `--prepared-input` does not exist.
    #[error("prepared input does not exist: {} (declared inputs are never skipped; fix the path or the --prepared-input flag)", path.display())]
    PreparedInputMissing {
        /// The path as given (absolute).
        path: PathBuf,
    },
    /// A symlink inside a prepared input is dangling.
    #[error("symlink {} points at {target:?}, which does not exist", link.display())]
    SymlinkTargetMissing {
        /// The link.
        link: PathBuf,
        /// Its text.
        target: String,
    },
    /// A `--recipe-file` is missing or not a regular file.
    #[error("recipe file does not exist or is not a regular file: {}", path.display())]
    RecipeFileMissing {
        /// The path as given.
        path: PathBuf,
    },
    /// An `--environment-file` is missing or not a regular file.
    #[error("compiler environment file does not exist or is not a regular file: {}", path.display())]
    EnvironmentFileMissing {
        /// The path.
        path: PathBuf,
    },
    /// An `--operator-source` directory is missing.
    #[error("operator source directory does not exist: {}", path.display())]
    OperatorSourceMissing {
        /// The path as given.
        path: PathBuf,
    },
    /// An `--environment-tool` cannot be found.
    #[error("environment tool {tool:?} not found (give a path or put it on PATH)")]
    ToolNotFound {
        /// The tool as given.
        tool: String,
    },
    /// A tool could not be identified (its `--version` failed, or it cannot be read).
    #[error(transparent)]
    Toolchain(#[from] crate::toolchain::Error),
    /// A `--set-env` value is not `NAME=VALUE`.
    #[error("--set-env expects NAME=VALUE, got {text:?}")]
    InvalidSetEnv {
        /// The text given.
        text: String,
    },
    /// A glob pattern does not compile.
    #[error("invalid glob pattern {pattern:?}: {reason}")]
    InvalidGlob {
        /// The pattern.
        pattern: String,
        /// The parser's complaint.
        reason: String,
    },
    /// A name that becomes a path component is unusable.
    #[error("invalid {what} {value:?}: {reason}")]
    InvalidName {
        /// Which flag (`--unit`, `--soc`, …).
        what: &'static str,
        /// The value.
        value: String,
        /// Why.
        reason: &'static str,
    },
    /// A flag the domain needs is missing.
    #[error("the {domain} domain requires {flag}")]
    MissingFlag {
        /// The domain.
        domain: Domain,
        /// The missing flag.
        flag: &'static str,
    },
    /// No build command was given.
    #[error("missing build command after --")]
    EmptyCommand,
    /// The build command could not be started.
    #[error("cannot start the build command {}", program.display())]
    Spawn {
        /// `argv[0]`.
        program: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A symlink among the artifacts points inside the output but at nothing.
    #[error("symlink artifact {} points at {target:?} inside the output directory, which does not exist", link.display())]
    ArtifactLinkDangling {
        /// The link.
        link: PathBuf,
        /// Its text.
        target: String,
    },
    /// Two actions claim one published path.
    #[error("artifact ownership collision on {}: owned by {owner}, requested by {requester}; two actions must not produce the same output path", path.display())]
    OwnershipConflict {
        /// The published path.
        path: PathBuf,
        /// The action that owns it.
        owner: String,
        /// The action that wants it.
        requester: String,
    },
    /// A published file was modified by something other than its owning action.
    #[error("published artifact {} changed outside its owning action {owner}; delete that file (the action publishes it again) or restore what it published", path.display())]
    PublishedArtifactChanged {
        /// The published path.
        path: PathBuf,
        /// The owning action.
        owner: String,
    },
    /// Publication state that cannot be trusted.
    #[error("publication state {} is corrupt ({reason}); delete {} and the publish directory to rebuild them", path.display(), state_dir.display())]
    PublishStateCorrupt {
        /// The state file.
        path: PathBuf,
        /// The state directory.
        state_dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// A lock that must not be bypassed timed out.
    #[error("timed out after {:.3}s waiting for the {kind} lock {} (raise {} or check for a hung build holding it)", waited.as_secs_f64(), path.display(), kind.timeout_variable())]
    LockTimeout {
        /// Which lock.
        kind: LockKind,
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        waited: Duration,
    },
    /// A custom operator's stage would wipe something that is not a stage.
    #[error("refusing to use {} as the private stage (--output-dir of a custom_operator action): strata empties it before every build and restore, and it is or contains {what} {}; give each action its own dedicated directory", stage.display(), path.display())]
    UnsafeStage {
        /// The stage.
        stage: PathBuf,
        /// What it would destroy ("a prepared input", "the publish directory", …).
        what: &'static str,
        /// That path.
        path: PathBuf,
    },
    /// `--working-directory` does not exist.
    #[error("working directory {} does not exist (--working-directory)", path.display())]
    WorkingDirectoryMissing {
        /// The path.
        path: PathBuf,
    },
    /// A setting in the environment cannot be used (the message names the variable).
    #[error(transparent)]
    Config(#[from] crate::config::Error),
}

impl From<crate::l1::layout::InvalidName> for Error {
    fn from(e: crate::l1::layout::InvalidName) -> Self {
        Error::InvalidName { what: e.what, value: e.value, reason: e.reason }
    }
}

impl From<crate::l1::lock::LockError> for Error {
    fn from(e: crate::l1::lock::LockError) -> Self {
        match e {
            crate::l1::lock::LockError::Timeout { kind, path, waited } => {
                Error::LockTimeout { kind, path, waited }
            }
            crate::l1::lock::LockError::Fs(e) => Error::Fs(e),
        }
    }
}

impl Error {
    /// True for lock timeouts (exit code 75).
    pub fn is_lock_timeout(&self) -> bool {
        matches!(self, Error::LockTimeout { .. })
    }

    /// True for errors in how strata was invoked (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::InvalidSetEnv { .. }
                | Error::InvalidGlob { .. }
                | Error::InvalidName { .. }
                | Error::UnsafeStage { .. }
                | Error::MissingFlag { .. }
                | Error::EmptyCommand
                | Error::Config(_)
        )
    }
}
