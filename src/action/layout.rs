//! Where one action entry lives: the names that place an entry ([`EntryName`]) and the
//! resulting paths ([`EntryLocation`]). The cache-root layout itself (directory names,
//! component encoding, locks, memos) is L1's, [`crate::l1::layout`];
//! this module adds what needs an [`ActionKey`].

use std::path::PathBuf;

use crate::action::{ActionKey, Error};
use crate::digest::Sha256Digest;
use crate::l1::layout::{EntryPath, encode_component};

pub use crate::l1::layout::{CacheRoot, Domain};

/// The names that place an entry.
#[derive(Debug, Clone)]
pub struct EntryName<'a> {
    /// Domain.
    pub domain: Domain,
    /// `--unit`.
    pub unit: &'a str,
    /// `--soc` (custom operators).
    pub soc: Option<&'a str>,
    /// `--operator` (custom operators).
    pub operator: Option<&'a str>,
    /// `--action` (custom operators).
    pub action: Option<&'a str>,
    /// Namespace (custom operators).
    pub operator_text_hash: Option<&'a Sha256Digest>,
}

/// Where one entry lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryLocation {
    /// The entry directory.
    pub dir: PathBuf,
    /// The actions directory (`<root>/actions-v1`) the entry lives under.
    pub actions_dir: PathBuf,
    /// Its path relative to the actions directory.
    pub rel: EntryPath,
    /// Its lock file.
    pub lock: PathBuf,
    /// The directory holding all keys of this unit/action (the entry's parent).
    pub parent: PathBuf,
    /// The operator-text namespace directory (custom operators).
    pub namespace_dir: Option<PathBuf>,
}

impl CacheRoot {
    /// The location of the entry for `name` and `key` (defined here, beside
    /// [`EntryLocation`], because it needs an [`ActionKey`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an unusable name; [`Error::MissingFlag`] if a custom
    /// operator lacks `--soc`, `--operator`, `--action` or its namespace.
    pub fn entry(&self, name: &EntryName<'_>, key: &ActionKey) -> Result<EntryLocation, Error> {
        let unit = encode_component("--unit", name.unit)?;
        let (parent_rel, namespace_rel) = match name.domain {
            Domain::ThirdParty => (format!("third_party/{unit}"), None),
            Domain::CustomOperator => {
                fn need<'v>(v: Option<&'v str>, flag: &'static str) -> Result<&'v str, Error> {
                    v.ok_or(Error::MissingFlag { domain: Domain::CustomOperator, flag })
                }
                let soc = encode_component("--soc", need(name.soc, "--soc")?)?;
                let op = encode_component("--operator", need(name.operator, "--operator")?)?;
                let action = encode_component("--action", need(name.action, "--action")?)?;
                let ns = name.operator_text_hash.ok_or(Error::MissingFlag {
                    domain: Domain::CustomOperator,
                    flag: "--operator-source",
                })?;
                let ns_rel = format!("custom_operator/{soc}/{op}/{ns}");
                // The unit is part of the action identity; it joins the action name so that
                // two units with the same action name stay apart.
                (format!("{ns_rel}/{action}@{unit}"), Some(ns_rel))
            }
        };
        let rel = EntryPath::built(format!("{parent_rel}/{key}"));
        let actions = self.actions_dir();
        Ok(EntryLocation {
            dir: actions.join(&rel),
            lock: self.entry_lock(&rel),
            parent: actions.join(&parent_rel),
            namespace_dir: namespace_rel.map(|n| actions.join(n)),
            actions_dir: actions,
            rel,
        })
    }
}
