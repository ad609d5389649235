//! One preparation of an action request for everything that computes its key:
//! `strata action run`, `strata action explain`, and any later caller.
//!
//! [`prepare`] checks the request, resolves the places strata itself writes (the cache
//! root, the output directory, and for custom operators the publish and publish-state
//! directories) and builds the [`IdentityInputs`] from [`RunOptions`] alone:
//!
//! * those places, and the event log file, are never walked as prepared inputs
//!   ([`IdentityInputs::skip_dirs`]): an output directory inside a `--prepared-input`
//!   directory holds the build's products, not its inputs, so a rebuild (or a restore) does
//!   not change the key;
//! * the recipe's `--output-dir` and `--artifact-include` records come from the same
//!   [`RunOptions`] fields `run` acts on, so they cannot disagree with what is cached.
//!
//! Because `run` and `explain` both call [`PreparedAction::identity`] on the result of
//! [`prepare`], explain reports exactly the key run looks up; a test compares them over a
//! table of flag combinations (`tests/it/engine/explain.rs`).
//!
//! Preparing writes nothing (the tool-version memo under the cache root aside, which
//! [`PreparedAction::identity`] may refresh).

use std::path::PathBuf;

use crate::action::identity::{self, Identity, IdentityInputs, Patterns};
use crate::action::layout::{CacheRoot, Domain, EntryName};
use crate::action::{Error, RunOptions};
use crate::fs;

/// A checked request with its places resolved (see the module docs).
#[derive(Debug, Clone)]
pub struct PreparedAction {
    /// The cache root (`~` expanded, absolute, symlinks resolved).
    pub cache: CacheRoot,
    /// `--output-dir`, resolved the same way (it need not exist yet).
    pub output_dir: PathBuf,
    /// Custom operators: `--publish-dir` and `--publish-state-dir`, resolved.
    pub publish: Option<(PathBuf, PathBuf)>,
    /// `--artifact-include` patterns, if any were given.
    pub include: Option<Patterns>,
    /// The identity inputs, with the places above in `skip_dirs`.
    pub identity_inputs: IdentityInputs,
}

impl PreparedAction {
    /// Computes the identity (hashing every declared input; the tool-version memo under
    /// the cache root may be refreshed).
    ///
    /// # Errors
    /// Identity errors: a missing or unreadable declared input, an unknown tool, an
    /// invalid glob.
    pub fn identity(&self) -> Result<Identity, Error> {
        identity::compute(&self.identity_inputs, Some(&self.cache.memo_dir()))
    }
}

/// The entry name of `opts` under `identity` (where its entry lives).
pub fn entry_name<'a>(opts: &'a RunOptions, identity: &'a Identity) -> EntryName<'a> {
    EntryName {
        domain: opts.domain,
        unit: &opts.unit,
        soc: opts.soc.as_deref(),
        operator: opts.operator.as_deref(),
        action: opts.action.as_deref(),
        operator_text_hash: identity.operator_text_hash.as_ref(),
    }
}

/// Checks `opts` and prepares its identity inputs (see the module docs).
///
/// # Errors
/// [`Error::EmptyCommand`]; [`Error::MissingFlag`] for a custom operator without
/// `--operator-source`, `--publish-dir`, `--publish-state-dir`, `--soc`, `--operator` or
/// `--action`; an invalid `--artifact-include` glob; [`Error::WorkingDirectoryMissing`];
/// a path that cannot be resolved.
pub fn prepare(opts: &RunOptions) -> Result<PreparedAction, Error> {
    if opts.identity.command.is_empty() {
        return Err(Error::EmptyCommand);
    }
    let custom = opts.domain == Domain::CustomOperator;
    if custom {
        for (value, flag) in [
            (opts.identity.operator_source.is_some(), "--operator-source"),
            (opts.publish_dir.is_some(), "--publish-dir"),
            (opts.publish_state_dir.is_some(), "--publish-state-dir"),
            (opts.soc.is_some(), "--soc"),
            (opts.operator.is_some(), "--operator"),
            (opts.action.is_some(), "--action"),
        ] {
            if !value {
                return Err(Error::MissingFlag { domain: opts.domain, flag });
            }
        }
    }
    let cache = CacheRoot::new(&opts.cache_root)?;
    let output_dir = fs::resolve_nonstrict(&fs::expand_tilde(&opts.output_dir))?;
    let publish = match (&opts.publish_dir, &opts.publish_state_dir) {
        (Some(p), Some(s)) if custom => Some((
            fs::resolve_nonstrict(&fs::expand_tilde(p))?,
            fs::resolve_nonstrict(&fs::expand_tilde(s))?,
        )),
        _ => None,
    };
    let include = if opts.artifact_include.is_empty() {
        None
    } else {
        Some(Patterns::new(&opts.artifact_include)?)
    };
    if let Some(dir) = &opts.identity.working_directory
        && !fs::metadata(dir).is_ok_and(|m| m.is_dir())
    {
        // `run` creates a third-party output directory before building: building in it is
        // fine even before it exists.
        let created_by_run =
            !custom && fs::resolve_nonstrict(&fs::expand_tilde(dir)).is_ok_and(|d| d == output_dir);
        if !created_by_run {
            return Err(Error::WorkingDirectoryMissing { path: dir.clone() });
        }
    }
    let mut identity_inputs = opts.identity.clone();
    identity_inputs.output_dir = Some(opts.output_dir.clone());
    identity_inputs.artifact_include = opts.artifact_include.clone();
    let mut skip = vec![cache.path().to_path_buf(), output_dir.clone()];
    skip.extend(publish.iter().flat_map(|(d, s)| [d.clone(), s.clone()]));
    if let Some(log) = &opts.event_log {
        skip.push(fs::resolve_nonstrict(&fs::expand_tilde(log))?);
    }
    identity_inputs.skip_dirs = skip;
    Ok(PreparedAction { cache, output_dir, publish, include, identity_inputs })
}
