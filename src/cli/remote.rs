//! The remote entry tier's settings (docs/remote-tier.md): `--remote-store`,
//! `--remote-write` and the signing and trust flags of `action run`, and the environment
//! alone for the compiler launcher. Builds `strata::remote::RemoteTier`,
//! the one implementation of `strata::l1::remote::EntrySource`.

use std::sync::Arc;

use super::output::errln;
use super::{Failure, SigningArgs, TrustArgs};
use strata::l1::remote::EntrySource;
use strata::remote::{RemoteConfig, RemoteTier};

/// The flags of the remote entry tier.
#[derive(Debug, clap::Args)]
pub(crate) struct RemoteArgs {
    /// On a local MISS, fetch the entry from this object store (file:///abs/dir,
    /// s3://bucket/prefix?endpoint=… or http(s)://host/path), verified, before building; a
    /// remote failure is a MISS with a warning [env: STRATA_REMOTE_STORE; timeout per
    /// request STRATA_REMOTE_TIMEOUT seconds, default 5].
    #[arg(long, value_name = "URL")]
    remote_store: Option<String>,
    /// Upload each new entry to the remote store (needs writer credentials; refs are
    /// signed with --signing-key / STRATA_SIGNING_KEY when given) [env:
    /// STRATA_REMOTE_WRITE=1].
    #[arg(long)]
    remote_write: bool,
    #[command(flatten)]
    signing: SigningArgs,
    #[command(flatten)]
    trust: TrustArgs,
}

impl RemoteArgs {
    /// The tier, or `None` when no remote store is configured.
    ///
    /// # Errors
    /// A usage failure for an unusable `STRATA_REMOTE_TIMEOUT`, trusted key or signing key.
    pub(crate) fn tier(&self) -> Result<Option<Arc<dyn EntrySource>>, Failure> {
        let flag_store = self.remote_store.clone().filter(|u| !u.trim().is_empty());
        let env = |name: &str| match name {
            "STRATA_REMOTE_STORE" if flag_store.is_some() => flag_store.clone(),
            "STRATA_REMOTE_WRITE" if self.remote_write => Some("1".into()),
            _ => strata::config::var_text(name),
        };
        let Some(mut config) =
            RemoteConfig::from_env_with(env).map_err(|e| Failure::usage(anyhow::anyhow!(e)))?
        else {
            return Ok(None);
        };
        config.trust = self.trust.policy()?;
        let signing_key =
            if config.write { self.signing.load(&strata::ci::Github::from_env())? } else { None };
        Ok(Some(Arc::new(RemoteTier::new(config, signing_key))))
    }
}

/// The launcher's tier: from `STRATA_REMOTE_STORE`, `STRATA_REMOTE_WRITE`,
/// `STRATA_REMOTE_TIMEOUT`, `STRATA_TRUSTED_KEYS` and (when writing) `STRATA_SIGNING_KEY`.
/// Reads no file and opens nothing (the store is opened on the first local MISS). An
/// unusable value is a warning and no tier: the launcher never fails a compilation over
/// its cache.
pub(crate) fn launcher_tier() -> Option<Arc<dyn EntrySource>> {
    let config = match RemoteConfig::from_env_with(strata::config::var_text) {
        Ok(config) => config?,
        Err(e) => {
            errln!("strata: warning: {e}; the remote store is not used");
            return None;
        }
    };
    let mut signing_key = None;
    if config.write
        && let Some(text) = strata::config::var_text("STRATA_SIGNING_KEY")
    {
        match strata::trust::SigningKey::parse(&text, "STRATA_SIGNING_KEY") {
            Ok(key) => signing_key = Some(key),
            Err(e) => {
                errln!("strata: warning: {e}; the remote store is not used");
                return None;
            }
        }
    }
    Some(Arc::new(RemoteTier::new(config, signing_key)))
}
