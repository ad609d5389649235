//! What the compile domain holds and how it is kept bounded: the
//! launcher's part of `strata stats` and `strata action prune`.
//!
//! * [`stats`]: entries, candidates and stored bytes under `actions-v1/compile/`, and the
//!   launcher counters (domain `compile` of [`crate::l1::counters`]).
//! * [`prune`]: removes crash leftovers in compile entries (temp files of an interrupted
//!   save, `.object.tmp-<hex>` and `.strata-<random>.tmp`), entries whose manifest does not
//!   load, and, with a size limit, the least recently used entries until the domain fits.
//!   Recency is the mtime of an entry's `manifest.json`, which every save writes and every
//!   HIT touches. Every removal holds the entry lock (taken without waiting; a busy entry
//!   is kept this time) and renames the entry aside before deleting it, so a reader never
//!   sees half an entry.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use crate::content::temp::{Purpose, TempName};
use crate::fs::{self, LockWait};
use crate::l1::counters::{self, COMPILE, Counters, HitRate};
use crate::l1::layout::CacheRoot;

use super::entry::{self, COMPILE_DIR};

/// The compile domain's figures.
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
    pub remote: crate::l1::remote::RemoteCounts,
    /// The archive steps' counters (domain `archive`, [`super::archive`]); their entries
    /// are counted with the compile entries above.
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

/// Reads the compile domain of `cache` and the launcher counters.
pub fn stats(cache: &CacheRoot) -> CompileStats {
    let mut all = counters::read(cache);
    let counters = all.remove(COMPILE).unwrap_or_default();
    let rate = HitRate::of(Some(&counters));
    let remote = crate::l1::remote::RemoteCounts::of(Some(&counters));
    let archive_counters = all.remove(super::archive::ARCHIVE).unwrap_or_default();
    let archive =
        ArchiveStats { rate: HitRate::of(Some(&archive_counters)), counters: archive_counters };
    let observed = all.remove(super::save::OBSERVED).unwrap_or_default();
    let hints = all.remove(super::save::HINTS).unwrap_or_default();
    let mut out = CompileStats {
        counters,
        rate,
        remote,
        archive,
        observed,
        hints,
        ..CompileStats::default()
    };
    for e in entries(cache) {
        out.entries += 1;
        out.object_bytes += e.bytes;
        let key = e.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let place = entry::EntryPlace::new(cache, &key);
        if let Ok(Some(m)) = entry::load(&place, &key) {
            out.candidates += m.candidates.len() as u64;
        }
    }
    out
}

/// One entry directory.
#[derive(Debug, Clone)]
struct Found {
    dir: PathBuf,
    key: String,
    bytes: u64,
    used: SystemTime,
}

fn entries(cache: &CacheRoot) -> Vec<Found> {
    let mut out = Vec::new();
    let domain = cache.actions_dir().join(COMPILE_DIR);
    for prefix in fs::read_dir(&domain).unwrap_or_default() {
        if is_hidden(&prefix) || !is_dir(&prefix) {
            continue;
        }
        for dir in fs::read_dir(&prefix).unwrap_or_default() {
            if is_hidden(&dir) || !is_dir(&dir) {
                continue;
            }
            let key = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let used = fs::symlink_metadata(&dir.join("manifest.json"))
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let bytes = fs::walk(&dir)
                .filter_map(Result::ok)
                .filter(|e| e.kind == fs::EntryKind::File)
                .map(|e| e.metadata.len())
                .sum();
            out.push(Found { dir, key, bytes, used });
        }
    }
    out
}

fn is_hidden(p: &Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'))
}

fn is_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Something [`prune`] removed (or would remove with `dry_run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The path.
    pub path: PathBuf,
    /// `compile_leftover`, `compile_invalid` or `compile_evicted`.
    pub kind: &'static str,
    /// Bytes of regular files under it.
    pub bytes: u64,
}

/// What [`prune`] did.
#[derive(Debug, Clone, Default)]
pub struct PruneResult {
    /// Removed (or, with `dry_run`, would be removed).
    pub removed: Vec<Removed>,
    /// Entries kept because their lock was busy.
    pub skipped_busy: Vec<PathBuf>,
    /// Problems met; they never fail the prune.
    pub warnings: Vec<String>,
}

/// Prunes the compile domain of `cache` (see the module docs). `max_bytes`: the size the
/// domain must fit in afterwards, in bytes (`None`: no limit).
pub fn prune(cache: &CacheRoot, max_bytes: Option<u64>, dry_run: bool) -> PruneResult {
    let mut result = PruneResult::default();
    let mut live = Vec::new();
    for found in entries(cache) {
        let place = entry::EntryPlace::new(cache, &found.key);
        let Some(_guard) = try_lock(&place.lock, &found.dir, &mut result) else { continue };
        // Leftovers of interrupted saves.
        for dir in [found.dir.clone(), found.dir.join("objects")] {
            for child in fs::read_dir(&dir).unwrap_or_default() {
                let name = child.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let leftover = TempName::parse(name)
                    .is_some_and(|t| matches!(t.purpose(), Purpose::Staging | Purpose::Placement));
                if leftover {
                    let bytes = fs::symlink_metadata(&child).map(|m| m.len()).unwrap_or(0);
                    if dry_run || fs::remove_file(&child).is_ok() {
                        result.removed.push(Removed {
                            path: child,
                            kind: "compile_leftover",
                            bytes,
                        });
                    }
                }
            }
        }
        if !matches!(entry::load(&place, &found.key), Ok(Some(_))) {
            remove_entry(&found, "compile_invalid", dry_run, &mut result);
            continue;
        }
        live.push(found);
    }
    if let Some(max) = max_bytes {
        let mut total: u64 = live.iter().map(|f| f.bytes).sum();
        // Oldest first; ties by path so the result is deterministic.
        live.sort_by(|a, b| a.used.cmp(&b.used).then_with(|| a.dir.cmp(&b.dir)));
        for found in live {
            if total <= max {
                break;
            }
            let place = entry::EntryPlace::new(cache, &found.key);
            let Some(_guard) = try_lock(&place.lock, &found.dir, &mut result) else { continue };
            total = total.saturating_sub(found.bytes);
            remove_entry(&found, "compile_evicted", dry_run, &mut result);
        }
    }
    result
}

fn try_lock(lock: &Path, dir: &Path, result: &mut PruneResult) -> Option<Option<fs::LockGuard>> {
    if let Some(parent) = lock.parent()
        && let Err(e) = fs::create_dir_all(parent)
    {
        result.warnings.push(e.to_string());
        return None;
    }
    match fs::lock_exclusive(lock, LockWait::Immediately, &mut |_| {}) {
        Ok(g) => Some(Some(g)),
        Err(e) if e.is_lock_timeout() => {
            result.skipped_busy.push(dir.to_path_buf());
            None
        }
        Err(e) => {
            result.warnings.push(e.to_string());
            None
        }
    }
}

fn remove_entry(found: &Found, kind: &'static str, dry_run: bool, result: &mut PruneResult) {
    if !dry_run {
        let trash = found.dir.with_file_name(TempName::new(Purpose::Trash, &found.key).to_string());
        if let Err(e) = fs::rename(&found.dir, &trash).and_then(|()| fs::remove_tree(&trash)) {
            result.warnings.push(format!("cannot remove {}: {e}", found.dir.display()));
            return;
        }
    }
    result.removed.push(Removed { path: found.dir.clone(), kind, bytes: found.bytes });
}

/// Parses a size: bytes, or a number with `K`, `M`, `G`, `T` (powers of 1024, an optional
/// `i`/`iB`/`B` after it), e.g. `500M`, `5G`, `5GiB`.
///
/// # Errors
/// A message naming the text when it is not such a size.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("{text:?} is not a size (e.g. 500M, 5G)"))?;
    let shift = match unit.trim_end_matches('B').trim_end_matches('i') {
        "" => 0,
        "K" | "k" => 10,
        "M" | "m" => 20,
        "G" | "g" => 30,
        "T" | "t" => 40,
        _ => return Err(format!("{text:?} is not a size (e.g. 500M, 5G)")),
    };
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("5G"), Ok(5 << 30));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1KB"), Ok(1024));
        assert!(parse_size("5X").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("").is_err());
    }
}
