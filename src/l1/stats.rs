//! `strata stats`: what an L1 cache root holds, one report over every domain.
//!
//! Counts entries and artifact bytes of the action domains, operator-text namespaces,
//! dot-named leftovers of interrupted saves, the compile domain's entries, candidates
//! (asked of its format, [`CompileFormat`]) and stored bytes, and reports whether
//! `.updated` is set, with each domain's hits, misses and hit rate from the machine-local
//! counters ([`crate::l1::counters`]). It only reads.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::fs::temp::{Purpose, TempName};
use crate::fs::{self, EntryKind};
use crate::l1::counters::{
    self, ARCHIVE, COMPILE, COMPILE_HINTS, COMPILE_OBSERVED, Counters, HitRate,
};
use crate::l1::layout::{CacheRoot, Domain};
use crate::l1::prune::CompileFormat;
use crate::l1::remote::RemoteCounts;

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
    pub remote: RemoteCounts,
}

/// The compile domain's figures (the compiler launcher's entries).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CompileStats {
    /// Entries (keys).
    pub entries: u64,
    /// Candidates over all entries.
    pub candidates: u64,
    /// Bytes of stored outputs (`objects/`).
    pub object_bytes: u64,
    /// Launcher counters: `hit`, `miss`, `compile_failed`, `uncacheable:<reason>`, …
    pub counters: Counters,
    /// Hits, misses and the hit rate (JSON: `hits`, `misses`, `hit_rate_percent`).
    #[serde(flatten)]
    pub rate: HitRate,
    /// The remote entry tier's counts (docs/remote-tier.md).
    pub remote: RemoteCounts,
    /// The archive steps' counters (domain `archive`); their entries are counted with the
    /// compile entries above.
    pub archive: ArchiveStats,
    /// How compiles that ran were observed (domain `compile_observed`): `trace` (the
    /// compiler's process tree traced) and `model` (tracing refused here: the fallback
    /// model, docs/launcher.md).
    pub observed: Counters,
    /// Hints (domain `compile_hints`): `embedded_path_miss` (MISSes because the cached
    /// objects embed another checkout's path), `saved_pinned` (results saved that name
    /// this checkout's paths).
    pub hints: Counters,
}

/// The archive steps' counters.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ArchiveStats {
    /// `hit`, `miss`, `archive_failed`, `uncacheable:<reason>`, …
    pub counters: Counters,
    /// Hits, misses and the hit rate (JSON: `hits`, `misses`, `hit_rate_percent`).
    #[serde(flatten)]
    pub rate: HitRate,
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
    /// The compile domain.
    pub compile: CompileStats,
}

/// Reads the figures of `cache_root`; `compile` reads the compile domain's entries.
pub fn stats(cache_root: &Path, compile: &dyn CompileFormat) -> CacheStats {
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
    let mut counted = counters::read(&cache);
    for domain in [Domain::ThirdParty, Domain::CustomOperator] {
        let counts = counted.get(domain.as_str());
        let mut d = DomainStats {
            rate: HitRate::of(counts),
            bypasses: counts.and_then(|c| c.get("bypass")).copied().unwrap_or(0),
            remote: RemoteCounts::of(counts),
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
    out.compile = compile_stats(&cache, &mut counted, compile);
    out
}

/// The compile domain of `cache` and the launcher's counter domains (taken from `counted`).
fn compile_stats(
    cache: &CacheRoot,
    counted: &mut counters::ByDomain,
    format: &dyn CompileFormat,
) -> CompileStats {
    let counters = counted.remove(COMPILE).unwrap_or_default();
    let archive = counted.remove(ARCHIVE).unwrap_or_default();
    let mut out = CompileStats {
        rate: HitRate::of(Some(&counters)),
        remote: RemoteCounts::of(Some(&counters)),
        counters,
        archive: ArchiveStats { rate: HitRate::of(Some(&archive)), counters: archive },
        observed: counted.remove(COMPILE_OBSERVED).unwrap_or_default(),
        hints: counted.remove(COMPILE_HINTS).unwrap_or_default(),
        ..CompileStats::default()
    };
    for e in super::prune::compile_entries(cache) {
        out.entries += 1;
        out.object_bytes += e.bytes;
        out.candidates += format.candidates(cache, &e.key).unwrap_or(0);
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

    struct NoCompileEntries;

    impl CompileFormat for NoCompileEntries {
        fn candidates(&self, _: &CacheRoot, _: &str) -> Option<u64> {
            None
        }
    }

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
        let s = stats(d.path(), &NoCompileEntries);
        assert_eq!(
            s.third_party,
            DomainStats { entries: 1, artifact_bytes: 100, ..DomainStats::default() }
        );
        assert_eq!(s.leftovers, 1);
        assert!(!s.updated_marker);
    }
}
