//! `strata action prune`: one prune over every domain of a cache root (docs/operations.md
//! "Pruning").
//!
//! Action domains (`third_party`, `custom_operator`):
//! * For every `custom_operator/<soc>/<operator>/`, keep the newest N operator-text
//!   namespaces (default 2) with every action inside them, and remove the rest. Recency is
//!   the mtime of `<namespace>/.last-used`, which every HIT and save touches (falling back
//!   to the namespace directory's mtime). N ≤ 0 disables this part.
//! * Remove crash leftovers where strata leaves them: save staging directories
//!   (`.<key>.tmp-<hex>`) and entries moved aside during replacement (`.<key>.old-<hex>`)
//!   beside the entries of a unit/action, and namespaces moved aside by an interrupted
//!   prune (`.<hash>.trash-<hex>`) beside the namespaces of an operator. The inside of an
//!   entry is never looked at: artifact names are the build's, whatever they look like.
//!
//! The compile domain (the launcher's entries, compile and archive steps alike):
//! * crash leftovers inside compile entries (temp files of an interrupted save,
//!   `.object.tmp-<hex>` and `.strata-<random>.tmp`), entries whose manifest does not load
//!   (asked of the domain's format, [`CompileFormat`]), and, with a size limit, the least
//!   recently used entries until the domain fits. Recency is the mtime of an entry's
//!   `manifest.json`, which every save writes and every HIT touches.
//!
//! Every domain:
//! * Remove verification memos (`.local/verify-memo/`) whose entry no longer exists (pruned,
//!   replaced, removed by hand or by a snapshot restore), and memos that do not load or sit
//!   under another entry's name: they vouch for nothing.
//!
//! Safety: an entry is removed only while its entry lock is held (taken without waiting,
//! [`crate::l1::lock::try_entry_lock`]; a busy lock means the entry is in use, and it, or
//! its whole namespace, is kept this time). A leftover is removed only if the entry lock of
//! the key it belongs to is free. Entries and namespaces are first renamed aside, then
//! deleted, so a crash leaves a `.trash-` leftover, never a half-deleted entry that could
//! look valid. Lock files are never deleted. Published outputs (outside the cache) are
//! never touched. Third-party entries are not pruned.
//!
//! Run it only after a successful complete build: HITs and saves refresh a namespace's
//! recency, so only then is every namespace the build uses among the newest (after a failed
//! build, one it still needs may not have been refreshed). It never fails: problems are
//! reported as warnings and the exit code stays 0. Removing anything but memos touches
//! `.updated`, so the next trusted snapshot save uploads the compacted cache.

mod compile;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use crate::content::VerifyMemo;
use crate::fs::temp::{Purpose, TempName};
use crate::fs::{self, LockGuard, RelPath};
use crate::l1::layout::{CacheRoot, Domain};
use crate::l1::lock::try_entry_lock;

pub(crate) use compile::entries as compile_entries;

/// Default number of operator-text versions kept per SoC/operator.
pub const DEFAULT_MAX_OPERATOR_VERSIONS: i64 = 2;

/// What prune removed (or would remove with `--dry-run`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Removal {
    /// The removed directory.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub path: PathBuf,
    /// `operator_version`, `staging_leftover`, `replaced_entry`, `trash`, `verify_memo`,
    /// `compile_leftover`, `compile_invalid` or `compile_evicted`.
    pub kind: &'static str,
    /// Bytes of regular files under it.
    pub bytes: u64,
}

/// The result of a prune.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PruneReport {
    /// What went (or would go).
    pub removed: Vec<Removal>,
    /// Namespaces kept because an entry lock was busy.
    #[serde(serialize_with = "crate::fs::name::serialize_paths")]
    pub skipped_busy: Vec<PathBuf>,
    /// Problems met; they never fail the prune.
    pub warnings: Vec<String>,
    /// True if nothing was actually removed because of `--dry-run`.
    pub dry_run: bool,
}

/// What [`prune`] is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneOptions {
    /// Operator-text versions kept per SoC/operator (≤ 0: all).
    pub max_operator_versions: i64,
    /// The size the compile domain must fit in afterwards, in bytes (`None`: no limit).
    pub compile_max_bytes: Option<u64>,
    /// Only report what would be removed.
    pub dry_run: bool,
}

/// The compile domain's entry format, as prune and stats need it (implemented by the
/// launcher, which owns the format: `crate::launcher::report::Format`).
pub trait CompileFormat {
    /// The number of candidates the compile entry of `key` holds, or `None` when its
    /// manifest does not load (a damaged entry, or one of an older version).
    fn candidates(&self, cache: &CacheRoot, key: &str) -> Option<u64>;
}

/// Prunes every domain of `cache_root` (see the module docs).
pub fn prune(
    cache_root: &Path,
    options: &PruneOptions,
    compile: &dyn CompileFormat,
) -> PruneReport {
    let dry_run = options.dry_run;
    let mut report = PruneReport { dry_run, ..PruneReport::default() };
    let cache = match CacheRoot::new(cache_root) {
        Ok(c) => c,
        Err(e) => {
            report.warnings.push(e.to_string());
            return report;
        }
    };
    if !fs::metadata(cache.path()).is_ok_and(|m| m.is_dir()) {
        report.warnings.push(format!(
            "cache root {} does not exist or is not a directory; nothing to prune",
            cache.path().display()
        ));
        return report;
    }
    if options.max_operator_versions > 0 {
        let custom = cache.domain_dir(Domain::CustomOperator);
        for soc in subdirs(&custom, &mut report) {
            for op in subdirs(&soc, &mut report) {
                prune_operator(&cache, &op, options.max_operator_versions, dry_run, &mut report);
            }
        }
    }
    leftovers(&cache, dry_run, &mut report);
    stale_memos(&cache, dry_run, &mut report);
    compile::prune(&cache, options.compile_max_bytes, compile, dry_run, &mut report);
    // Memos are machine-local and never packed: removing one does not change a snapshot.
    if !dry_run
        && report.removed.iter().any(|r| r.kind != "verify_memo")
        && let Err(e) = fs::touch(&cache.updated_marker())
    {
        report.warnings.push(e.to_string());
    }
    report
}

pub(super) fn subdirs(dir: &Path, report: &mut PruneReport) -> Vec<PathBuf> {
    match fs::read_dir(dir) {
        Ok(children) => children
            .into_iter()
            .filter(|p| !is_hidden(p) && fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
            .collect(),
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => {
            report.warnings.push(e.to_string());
            Vec::new()
        }
    }
}

pub(super) fn is_hidden(p: &Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'))
}

fn recency(ns: &Path) -> SystemTime {
    let marker = ns.join(".last-used");
    fs::symlink_metadata(&marker)
        .or_else(|_| fs::symlink_metadata(ns))
        .and_then(|m| m.modified().map_err(|e| fs::Error::io("stat", ns, e)))
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

fn prune_operator(
    cache: &CacheRoot,
    op_dir: &Path,
    keep: i64,
    dry_run: bool,
    report: &mut PruneReport,
) {
    let mut namespaces: Vec<(SystemTime, PathBuf)> =
        subdirs(op_dir, report).into_iter().map(|ns| (recency(&ns), ns)).collect();
    // Newest first; ties broken by name so the result is deterministic.
    namespaces.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let keep = usize::try_from(keep).unwrap_or(usize::MAX);
    for (_, ns) in namespaces.into_iter().skip(keep) {
        match remove_namespace(cache, &ns, dry_run) {
            Ok(Some(bytes)) => {
                report.removed.push(Removal { path: ns, kind: "operator_version", bytes })
            }
            Ok(None) => report.skipped_busy.push(ns),
            Err(e) => report.warnings.push(format!("cannot prune {}: {e}", ns.display())),
        }
    }
}

/// Locks every entry of the namespace, then moves it aside and deletes it. `Ok(None)` if
/// an entry lock is busy.
fn remove_namespace(cache: &CacheRoot, ns: &Path, dry_run: bool) -> Result<Option<u64>, fs::Error> {
    let actions = cache.actions_dir();
    let mut guards: Vec<LockGuard> = Vec::new();
    for action_dir in fs::read_dir(ns)? {
        if is_hidden(&action_dir) || !fs::symlink_metadata(&action_dir)?.is_dir() {
            continue;
        }
        for entry in fs::read_dir(&action_dir)? {
            let Ok(rel) = entry.strip_prefix(&actions) else { continue };
            let rel = rel.to_string_lossy().into_owned();
            match try_entry_lock(&cache.entry_lock(&rel))? {
                Some(g) => guards.push(g),
                None => return Ok(None),
            }
        }
    }
    let bytes = tree_bytes(ns);
    if dry_run {
        return Ok(Some(bytes));
    }
    let name = ns.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let trash = ns.with_file_name(TempName::new(Purpose::Trash, &name).to_string());
    fs::rename(ns, &trash)?;
    fs::remove_tree(&trash)?;
    drop(guards);
    Ok(Some(bytes))
}

pub(super) fn tree_bytes(dir: &Path) -> u64 {
    fs::walk(dir)
        .filter_map(Result::ok)
        .filter(|e| e.kind == fs::EntryKind::File)
        .map(|e| e.metadata.len())
        .sum()
}

/// The report kind and stem of a leftover prune removes: a staging directory
/// (`.<key>.tmp-<hex>`), a replaced entry (`.<key>.old-<hex>`) or a namespace being
/// trashed (`.<name>.trash-<hex>`), as [`TempName`] spells them.
fn leftover_kind(name: &str) -> Option<(&'static str, String)> {
    let parsed = TempName::parse(name)?;
    let kind = match parsed.purpose() {
        Purpose::Staging => "staging_leftover",
        Purpose::Replaced => "replaced_entry",
        Purpose::Trash => "trash",
        _ => return None,
    };
    Some((kind, parsed.stem()?.to_owned()))
}

/// Looks for leftovers only where strata creates them: beside entries
/// (`third_party/<unit>/`, `custom_operator/<soc>/<operator>/<namespace>/<action>/`) and
/// beside namespaces (`custom_operator/<soc>/<operator>/`). Never inside an entry: an
/// artifact directory may have any name, including one that looks like a leftover.
fn leftovers(cache: &CacheRoot, dry_run: bool, report: &mut PruneReport) {
    let mut parents = subdirs(&cache.domain_dir(Domain::ThirdParty), report);
    for soc in subdirs(&cache.domain_dir(Domain::CustomOperator), report) {
        for op in subdirs(&soc, report) {
            for ns in subdirs(&op, report) {
                parents.extend(subdirs(&ns, report));
            }
            parents.push(op);
        }
    }
    for dir in parents {
        leftovers_in(cache, &dir, dry_run, report);
    }
}

fn leftovers_in(cache: &CacheRoot, dir: &Path, dry_run: bool, report: &mut PruneReport) {
    let children = match fs::read_dir(dir) {
        Ok(c) => c,
        Err(e) if e.is_not_found() => return,
        Err(e) => {
            report.warnings.push(e.to_string());
            return;
        }
    };
    for child in children {
        let Ok(meta) = fs::symlink_metadata(&child) else { continue };
        if !meta.is_dir() {
            continue;
        }
        let name = child.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some((kind, stem)) = leftover_kind(&name) else { continue };
        // The entry lock of the key this leftover belongs to must be free.
        let guard = if kind == "trash" {
            None
        } else {
            let entry = dir.join(&stem);
            let Ok(rel) = entry.strip_prefix(cache.actions_dir()) else { continue };
            match fs::try_lock_existing(&cache.entry_lock(&rel.to_string_lossy())) {
                Ok(Some(g)) => Some(g),
                Ok(None) => {
                    // Busy, or the lock file does not exist (never used): only the latter is safe.
                    if fs::symlink_metadata_opt(&cache.entry_lock(&rel.to_string_lossy()))
                        .ok()
                        .flatten()
                        .is_some()
                    {
                        report.skipped_busy.push(child);
                        continue;
                    }
                    None
                }
                Err(e) => {
                    report.warnings.push(e.to_string());
                    continue;
                }
            }
        };
        let bytes = tree_bytes(&child);
        if !dry_run && let Err(e) = fs::remove_tree(&child) {
            report.warnings.push(e.to_string());
            continue;
        }
        drop(guard);
        report.removed.push(Removal { path: child, kind, bytes });
    }
}

/// Removes the memos in `.local/verify-memo/` that vouch for nothing: unreadable or invalid
/// ones, ones stored under another entry's name, and ones whose entry (a directory with a
/// `manifest.json`) no longer exists. Losing a memo only costs one full verification.
fn stale_memos(cache: &CacheRoot, dry_run: bool, report: &mut PruneReport) {
    let dir = cache.local_dir().join("verify-memo");
    let files = match fs::read_dir(&dir) {
        Ok(files) => files,
        Err(e) if e.is_not_found() => return,
        Err(e) => {
            report.warnings.push(e.to_string());
            return;
        }
    };
    for path in files {
        if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let live = VerifyMemo::subject_at(&path).is_some_and(|rel| {
            cache.verify_memo(&rel) == path
                && RelPath::new(rel.as_str()).is_ok()
                && fs::symlink_metadata(&cache.actions_dir().join(&rel).join("manifest.json"))
                    .is_ok_and(|m| m.is_file())
        });
        if live {
            continue;
        }
        let bytes = fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(0);
        if !dry_run && let Err(e) = fs::remove_file(&path) {
            report.warnings.push(e.to_string());
            continue;
        }
        report.removed.push(Removal { path, kind: "verify_memo", bytes });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftover_names() {
        let key = "a".repeat(64);
        assert_eq!(
            leftover_kind(&format!(".{key}.tmp-0123456789abcdef")),
            Some(("staging_leftover", key.clone()))
        );
        assert_eq!(
            leftover_kind(&format!(".{key}.old-0123456789abcdef")),
            Some(("replaced_entry", key.clone()))
        );
        assert_eq!(leftover_kind(".ns.trash-0123456789abcdef"), Some(("trash", "ns".to_owned())));
        // Other temp names are not prune's to remove beside entries.
        assert_eq!(leftover_kind(".k.strata-tmp-0123456789abcdef"), None);
        assert_eq!(leftover_kind(".last-used"), None);
        assert_eq!(leftover_kind("x.tmp-0123456789abcdef"), None);
    }
}
