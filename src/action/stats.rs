//! `strata stats`: what an L1 cache root holds.
//!
//! Counts entries and artifact bytes per domain, operator-text namespaces, dot-named
//! leftovers of interrupted saves, and reports whether `.updated` is set, with each
//! domain's hits, misses and hit rate from the machine-local counters
//! ([`crate::l1::counters`]). It only reads.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::action::Domain;
use crate::action::layout::CacheRoot;
use crate::content::temp::{Purpose, TempName};
use crate::fs::{self, EntryKind};
use crate::l1::counters::{self, HitRate};

/// Per-domain figures.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DomainStats {
    /// Entries (directories holding a `manifest.json`).
    pub entries: u64,
    /// Bytes of regular files under the entries' `artifacts/`.
    pub artifact_bytes: u64,
    /// `strata action run` hits, misses and the hit rate on this machine (JSON: `hits`,
    /// `misses`, `hit_rate_percent`).
    #[serde(flatten)]
    pub rate: HitRate,
    /// Actions built without the cache (e.g. the entry lock was unavailable).
    pub bypasses: u64,
    /// The remote entry tier's counts (docs/remote-tier.md).
    pub remote: crate::l1::remote::RemoteCounts,
}

/// What a cache root holds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CacheStats {
    /// The resolved cache root.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub cache_root: PathBuf,
    /// Third-party entries.
    pub third_party: DomainStats,
    /// Custom-operator entries.
    pub custom_operator: DomainStats,
    /// Operator-text namespaces.
    pub operator_namespaces: u64,
    /// Dot-named leftovers (`.tmp-`, `.old-`, `.trash-`) that `prune` would remove.
    pub leftovers: u64,
    /// True if `.updated` exists (a snapshot save would upload).
    pub updated_marker: bool,
    /// Problems met while reading (unreadable directories…).
    pub warnings: Vec<String>,
}

/// Reads the figures of `cache_root`.
pub fn stats(cache_root: &Path) -> CacheStats {
    let mut out = CacheStats::default();
    let cache = match CacheRoot::new(cache_root) {
        Ok(c) => c,
        Err(e) => {
            out.warnings.push(e.to_string());
            return out;
        }
    };
    out.cache_root = cache.path().to_path_buf();
    if !fs::metadata(cache.path()).is_ok_and(|m| m.is_dir()) {
        out.warnings.push(format!(
            "cache root {} does not exist or is not a directory",
            cache.path().display()
        ));
        return out;
    }
    out.updated_marker = fs::symlink_metadata_opt(&cache.updated_marker()).ok().flatten().is_some();
    let counted = counters::read(&cache);
    for domain in [Domain::ThirdParty, Domain::CustomOperator] {
        let counts = counted.get(domain.as_str());
        let mut d = DomainStats {
            rate: HitRate::of(counts),
            bypasses: counts.and_then(|c| c.get("bypass")).copied().unwrap_or(0),
            remote: crate::l1::remote::RemoteCounts::of(counts),
            ..DomainStats::default()
        };
        let root = cache.domain_dir(domain);
        let present = fs::symlink_metadata_opt(&root).ok().flatten().is_some();
        for entry in fs::walk(&root).filter(|_| present) {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    out.warnings.push(e.to_string());
                    continue;
                }
            };
            let rel = entry.rel.as_str();
            let name = entry.rel.file_name();
            let hidden = rel.split('/').any(|c| c.starts_with('.'));
            match entry.kind {
                EntryKind::Dir if is_leftover(name) => out.leftovers += 1,
                EntryKind::File if name == "manifest.json" && !hidden => d.entries += 1,
                EntryKind::File if !hidden && rel.contains("/artifacts/") => {
                    d.artifact_bytes += entry.metadata.len();
                }
                EntryKind::File if name == ".last-used" && domain == Domain::CustomOperator => {
                    out.operator_namespaces += 1;
                }
                _ => {}
            }
        }
        match domain {
            Domain::ThirdParty => out.third_party = d,
            Domain::CustomOperator => out.custom_operator = d,
        }
    }
    out
}

/// The leftovers `action prune` removes (see `prune::leftover_kind`).
fn is_leftover(name: &str) -> bool {
    TempName::parse(name).is_some_and(|t| {
        matches!(t.purpose(), Purpose::Staging | Purpose::Replaced | Purpose::Trash)
    })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn counts_entries_bytes_and_leftovers() {
        let d = tempfile::tempdir().unwrap();
        let e = d.path().join("actions-v1/third_party/u/k1");
        std::fs::create_dir_all(e.join("artifacts/sub")).unwrap();
        std::fs::write(e.join("manifest.json"), b"{}").unwrap();
        std::fs::write(e.join("artifacts/sub/a.o"), vec![0u8; 100]).unwrap();
        std::fs::create_dir_all(
            d.path().join("actions-v1/third_party/u/.k2.tmp-0123456789abcdef/artifacts"),
        )
        .unwrap();
        std::fs::write(
            d.path().join("actions-v1/third_party/u/.k2.tmp-0123456789abcdef/artifacts/x"),
            b"zz",
        )
        .unwrap();
        // Similar names are not leftovers (the old test counted any `.tmp-`).
        std::fs::create_dir_all(d.path().join("actions-v1/third_party/u/.k3.tmp-xyz")).unwrap();
        let s = stats(d.path());
        assert_eq!(
            s.third_party,
            DomainStats { entries: 1, artifact_bytes: 100, ..DomainStats::default() }
        );
        assert_eq!(s.leftovers, 1);
        assert!(!s.updated_marker);
    }
}
