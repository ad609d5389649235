//! The compile domain's part of prune (see the parent module): leftovers inside compile
//! entries, entries whose manifest does not load, and the least recently used entries
//! beyond a size limit.

use std::path::PathBuf;
use std::time::SystemTime;

use super::{CompileFormat, PruneReport, Removal, is_hidden, tree_bytes};
use crate::fs::temp::{Purpose, TempName};
use crate::fs::{self, LockGuard};
use crate::l1::layout::CacheRoot;
use crate::l1::lock::try_entry_lock;

/// One compile entry directory.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The entry directory.
    pub(crate) dir: PathBuf,
    /// Its key (the directory's name).
    pub(crate) key: String,
    /// Bytes of regular files under it.
    pub(crate) bytes: u64,
    /// When it was last used (its manifest's mtime).
    pub(crate) used: SystemTime,
}

/// Every entry directory of the compile domain (`compile/<2 hex>/<key>`; dot-names and
/// anything but directories skipped).
pub(crate) fn entries(cache: &CacheRoot) -> Vec<Found> {
    let is_dir = |p: &PathBuf| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let mut out = Vec::new();
    for prefix in fs::read_dir(&cache.compile_dir()).unwrap_or_default() {
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
            let bytes = tree_bytes(&dir);
            out.push(Found { dir, key, bytes, used });
        }
    }
    out
}

/// Prunes the compile domain of `cache` into `report`. `max_bytes`: the size the domain
/// must fit in afterwards, in bytes (`None`: no limit).
pub(super) fn prune(
    cache: &CacheRoot,
    max_bytes: Option<u64>,
    format: &dyn CompileFormat,
    dry_run: bool,
    report: &mut PruneReport,
) {
    let mut live = Vec::new();
    for found in entries(cache) {
        let Some(_guard) = lock(cache, &found, report) else { continue };
        // Leftovers of interrupted saves.
        for dir in [found.dir.clone(), found.dir.join("objects")] {
            for child in fs::read_dir(&dir).unwrap_or_default() {
                let name = child.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let leftover = TempName::parse(name)
                    .is_some_and(|t| matches!(t.purpose(), Purpose::Staging | Purpose::Placement));
                if leftover {
                    let bytes = fs::symlink_metadata(&child).map(|m| m.len()).unwrap_or(0);
                    if dry_run || fs::remove_file(&child).is_ok() {
                        let kind = "compile_leftover";
                        report.removed.push(Removal { path: child, kind, bytes });
                    }
                }
            }
        }
        if format.candidates(cache, &found.key).is_none() {
            remove_entry(&found, "compile_invalid", dry_run, report);
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
            let Some(_guard) = lock(cache, &found, report) else { continue };
            total = total.saturating_sub(found.bytes);
            remove_entry(&found, "compile_evicted", dry_run, report);
        }
    }
}

/// The entry lock of `found`, taken without waiting; `None` (noted in `report`) when it is
/// busy or cannot be taken.
fn lock(cache: &CacheRoot, found: &Found, report: &mut PruneReport) -> Option<LockGuard> {
    let rel = CacheRoot::compile_entry_rel(&found.key);
    match try_entry_lock(&cache.entry_lock(&rel)) {
        Ok(Some(g)) => Some(g),
        Ok(None) => {
            report.skipped_busy.push(found.dir.clone());
            None
        }
        Err(e) => {
            report.warnings.push(e.to_string());
            None
        }
    }
}

fn remove_entry(found: &Found, kind: &'static str, dry_run: bool, report: &mut PruneReport) {
    if !dry_run {
        let trash = found.dir.with_file_name(TempName::new(Purpose::Trash, &found.key).to_string());
        if let Err(e) = fs::rename(&found.dir, &trash).and_then(|()| fs::remove_tree(&trash)) {
            report.warnings.push(format!("cannot remove {}: {e}", found.dir.display()));
            return;
        }
    }
    report.removed.push(Removal { path: found.dir.clone(), kind, bytes: found.bytes });
}
