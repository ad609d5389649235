//! The arguments `strata artifact` subcommands share: the local store, the artifact's
//! identity, the remote store, and their conversion into library values.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::cli::Failure;
use strata::artifact::{
    ArtifactKey, ArtifactSpec, ArtifactStore, BuildKind, Destination, EnvironmentIdentity, Mode,
    PrivateRoot, Stage, StoreOptions,
};
use strata::fs::LockWait;
use strata::transport::{ObjectStore, StoreUse};

#[derive(Debug, Args)]
pub(crate) struct OutArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    #[command(flatten)]
    pub(super) digest: crate::cli::DigestArgs,
    /// Cache root (resolved once; created on first write).
    #[arg(long, env = "STRATA_ARTIFACT_ROOT", value_name = "DIR")]
    pub(super) root: PathBuf,
    /// Read-only: create, lock and modify nothing under the root; misses build privately.
    /// An empty STRATA_ARTIFACT_READ_ONLY counts as unset.
    #[arg(long, env = "STRATA_ARTIFACT_READ_ONLY", value_parser = parse_read_only, default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub(super) read_only: bool,
    /// Directory for private builds and transfers, outside the cache root. By default a
    /// fresh directory under $TMPDIR (removed unless it holds a PRIVATE result).
    #[arg(long, env = "STRATA_ARTIFACT_PRIVATE_ROOT", value_name = "DIR")]
    pub(super) private_root: Option<PathBuf>,
    /// Seconds to wait for a key lock before building privately; 0 waits forever
    /// [default: 3600]. An empty STRATA_ARTIFACT_LOCK_TIMEOUT counts as unset.
    #[arg(long, env = "STRATA_ARTIFACT_LOCK_TIMEOUT", value_parser = parse_lock_timeout, value_name = "SECONDS")]
    pub(super) lock_timeout: Option<LockTimeout>,
}

/// Default wait for a key lock, in seconds.
const DEFAULT_LOCK_TIMEOUT_SECONDS: u64 = 3600;

/// `--lock-timeout`: seconds, or unset (an empty environment variable).
#[derive(Debug, Clone, Copy)]
pub(super) struct LockTimeout(Option<u64>);

/// Parses `--read-only` / `STRATA_ARTIFACT_READ_ONLY` ([`strata::config::parse_switch`]).
fn parse_read_only(text: &str) -> Result<bool, String> {
    strata::config::parse_switch(text)
}

/// Parses `--lock-timeout` / `STRATA_ARTIFACT_LOCK_TIMEOUT`: whole seconds; empty means
/// unset (the default).
fn parse_lock_timeout(text: &str) -> Result<LockTimeout, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(LockTimeout(None));
    }
    text.parse::<u64>()
        .map(|s| LockTimeout(Some(s)))
        .map_err(|e| format!("{text:?} is not a whole number of seconds ({e})"))
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum StageArg {
    Generated,
    Ready,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum KindArg {
    Single,
    Distributed,
}

#[derive(Debug, Args)]
pub(crate) struct IdArgs {
    /// Environment component digest NAME=SHA256 (repeatable; at least one).
    #[arg(long = "env", value_name = "NAME=SHA256", required = true)]
    pub(super) env: Vec<String>,
    /// Source digest (64 lowercase hex).
    #[arg(long, value_name = "SHA256")]
    pub(super) source: String,
    /// Specialization digest (64 lowercase hex).
    #[arg(long, value_name = "SHA256")]
    pub(super) specialization: String,
    /// Stage.
    #[arg(long, value_enum, default_value = "generated")]
    pub(super) stage: StageArg,
    /// Build kind.
    #[arg(long, value_enum, default_value = "single")]
    pub(super) kind: KindArg,
    /// Required relative path (repeatable; at least one). A file name is bytes: a name that
    /// is not UTF-8 is given as it is and recorded in the name encoding (`\xHH`).
    #[arg(long, value_name = "PATH", required = true)]
    pub(super) require: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct OptionalIdArgs {
    /// Environment component digest NAME=SHA256 (repeatable).
    #[arg(long = "env", value_name = "NAME=SHA256")]
    pub(super) env: Vec<String>,
    /// Source digest.
    #[arg(long, value_name = "SHA256")]
    pub(super) source: Option<String>,
    /// Specialization digest.
    #[arg(long, value_name = "SHA256")]
    pub(super) specialization: Option<String>,
    /// Stage.
    #[arg(long, value_enum, default_value = "generated")]
    pub(super) stage: StageArg,
    /// Build kind.
    #[arg(long, value_enum, default_value = "single")]
    pub(super) kind: KindArg,
    /// Required relative path (repeatable; any bytes, like `--require` elsewhere).
    #[arg(long, value_name = "PATH")]
    pub(super) require: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct RemoteArgs {
    /// Object store URL (file:///abs/dir, s3://bucket/prefix?... or http(s)://host/path).
    /// By default
    /// file://$XDG_CACHE_HOME/strata/store.
    #[arg(long = "store", env = "STRATA_STORE", value_name = "URL")]
    pub(super) store: Option<String>,
    /// Fail (exit 1) on transport failures and rejected objects instead of warning.
    #[arg(long)]
    pub(super) strict: bool,
}

impl IdArgs {
    pub(super) fn key(&self) -> Result<ArtifactKey, Failure> {
        key_from(&self.env, &self.source, &self.specialization)
    }

    pub(super) fn spec(&self) -> Result<ArtifactSpec, Failure> {
        spec_from(self.stage.stage(), self.kind, &self.require)
    }
}

impl OptionalIdArgs {
    /// The key and spec; a usage error unless `--source` and `--specialization` are given.
    pub(super) fn key_and_spec(&self) -> Result<(ArtifactKey, ArtifactSpec), Failure> {
        let (Some(source), Some(specialization)) = (&self.source, &self.specialization) else {
            return Err(Failure::usage(anyhow::anyhow!(
                "give --all, or the key and spec flags (--env, --source, --specialization, --require)"
            )));
        };
        let key = key_from(&self.env, source, specialization)?;
        Ok((key, spec_from(self.stage.stage(), self.kind, &self.require)?))
    }
}

impl StageArg {
    fn stage(self) -> Stage {
        match self {
            StageArg::Generated => Stage::Generated,
            StageArg::Ready => Stage::BinaryReady,
        }
    }
}

pub(super) fn key_from(
    env: &[String],
    source: &str,
    specialization: &str,
) -> Result<ArtifactKey, Failure> {
    let mut components = Vec::new();
    for item in env {
        let Some((name, digest)) = item.split_once('=') else {
            return Err(Failure::usage(anyhow::anyhow!("--env {item:?} must be NAME=SHA256")));
        };
        components.push((name.to_owned(), (!digest.is_empty()).then(|| digest.to_owned())));
    }
    let environment = EnvironmentIdentity::new(components).map_err(Failure::usage)?;
    ArtifactKey::new(environment, source, specialization).map_err(Failure::usage)
}

pub(super) fn spec_from(
    stage: Stage,
    kind: KindArg,
    require: &[OsString],
) -> Result<ArtifactSpec, Failure> {
    let kind = match kind {
        KindArg::Single => BuildKind::Single,
        KindArg::Distributed => BuildKind::Distributed,
    };
    ArtifactSpec::new(stage, kind, recorded_paths(require)).map_err(Failure::usage)
}

/// Relative paths given on the command line (raw bytes) in their recorded form (the name
/// encoding of `strata::fs::name`).
pub(super) fn recorded_paths(paths: &[OsString]) -> Vec<String> {
    paths.iter().map(|p| strata::fs::name::encode_os(p)).collect()
}

impl StoreArgs {
    pub(super) fn open(&self, private: Option<&PrivateRoot>) -> Result<ArtifactStore, Failure> {
        let options = StoreOptions {
            digest: self.digest.digest,
            mode: if self.read_only { Mode::ReadOnly } else { Mode::ReadWrite },
            private_root: private.map(|p| p.path().to_path_buf()),
            lock_wait: match self
                .lock_timeout
                .and_then(|t| t.0)
                .unwrap_or(DEFAULT_LOCK_TIMEOUT_SECONDS)
            {
                0 => LockWait::Forever,
                s => LockWait::Timeout(Duration::from_secs(s)),
            },
        };
        ArtifactStore::open(&self.root, options).map_err(Failure::of)
    }

    /// A private root for this invocation (`--private-root`, else a temporary one).
    pub(super) fn private_root(&self) -> Result<PrivateRoot, Failure> {
        PrivateRoot::new(self.private_root.as_deref()).map_err(Failure::of)
    }

    /// Checks a destination (`--dest`, `--output`) before anything is built, downloaded or
    /// created (nothing is created by the check).
    pub(super) fn destination(&self, path: Option<&Path>) -> Result<Option<Destination>, Failure> {
        let Some(path) = path else { return Ok(None) };
        let store =
            ArtifactStore::open(&self.root, StoreOptions::default()).map_err(Failure::of)?;
        store.destination(path).map(Some).map_err(Failure::of)
    }
}

/// The object store of `--store` / `STRATA_STORE` / the default store, for `purpose`
/// (`artifact push`, `artifact pull`), opened as every command opens its store
/// ([`crate::cli::store::open`]).
pub(super) fn open_remote(
    args: &RemoteArgs,
    purpose: &'static str,
) -> Result<Box<dyn ObjectStore>, Failure> {
    let url = crate::cli::store::store_url(args.store.as_deref())?;
    let gh = strata::ci::Github::from_env();
    crate::cli::store::open(&gh, purpose, &url, &StoreUse::core(purpose))
}
