//! The object store a command names: the one place the command line parses a store URL
//! and opens it (snapshot restore, save and gc; artifact push and pull). The URL is parsed
//! once, here, and travels as a [`StoreUrl`] from then on; credentials, capabilities and
//! the warning for a half-set credential pair come from the transport's scheme registry.

use strata::ci::Github;
use strata::transport::{HalfPairs, ObjectStore, StoreUrl, StoreUse, TransportOptions};

use super::Failure;

/// `flag` (`--store`), else `STRATA_STORE`, else the default store, parsed.
///
/// # Errors
/// A usage failure (exit 2) for a malformed URL or no cache home for the default.
pub(crate) fn store_url(flag: Option<&str>) -> Result<StoreUrl, Failure> {
    let text = strata::config::store_url(flag).map_err(Failure::of)?;
    text.parse().map_err(Failure::of)
}

/// Warns (under `title`) about each credential pair of `url`'s scheme of which only one
/// half is set; [`open`] then ignores both halves.
pub(crate) fn warn_incomplete_credentials(gh: &Github, title: &str, url: &StoreUrl) {
    for pair in url.incomplete_credentials(&|name| std::env::var(name).ok()) {
        super::snapshot::warn(gh, title, &pair.to_string());
    }
}

/// Opens `url` for `usage`, with the transport options of the environment
/// (`STRATA_S3_*`). A credential pair set by half is a warning and is ignored: the other
/// credentials are used if complete, else the requests are anonymous (a restore of a
/// public bucket still works; a save never gets here without writer credentials).
///
/// # Errors
/// A usage failure (exit 2) for unusable settings and for a store that lacks what
/// `usage` needs ("the store … cannot list objects; snapshot gc needs listing").
pub(crate) fn open(
    gh: &Github,
    title: &str,
    url: &StoreUrl,
    usage: &StoreUse,
) -> Result<Box<dyn ObjectStore>, Failure> {
    url.check_use(usage).map_err(Failure::of)?;
    let options = TransportOptions::from_env().map_err(Failure::of)?;
    warn_incomplete_credentials(gh, title, url);
    let env = |name: &str| std::env::var(name).ok();
    url.open(&options, &env, HalfPairs::Ignore, usage).map_err(Failure::of)
}
