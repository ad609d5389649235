//! `strata action prune`: bounded operator history and crash leftovers.
//!
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
//! * Remove verification memos (`.local/verify-memo/`) whose entry no longer exists (pruned,
//!   replaced, removed by hand or by a snapshot restore), and memos that do not load or sit
//!   under another entry's name: they vouch for nothing.
//!
//! Safety: an entry is removed only while its entry lock is held (taken without waiting;
//! a busy lock means the entry is in use, and its whole namespace is kept this time). A
//! leftover is removed only if the entry lock of the key it belongs to is free. Namespaces
//! are first renamed aside, then deleted, so a crash leaves a `.trash-` leftover, never a
//! half-deleted namespace that could look valid. Lock files are never deleted. Published
//! outputs (outside the cache) are never touched. Third-party entries are not pruned.
//!
//! Run it only after a successful complete build: HITs and saves refresh a namespace's
//! recency, so only then is every namespace the build uses among the newest (after a failed
//! build, one it still needs may not have been refreshed). It never fails: problems are
//! reported as warnings and the exit code stays 0. Removing anything touches `.updated`,
//! so the next trusted snapshot save uploads the compacted cache.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use crate::action::layout::CacheRoot;
use crate::action::{Domain, Error};
use crate::content::VerifyMemo;
use crate::content::temp::{Purpose, TempName};
use crate::fs::{self, LockGuard, LockWait, RelPath};

/// Default number of operator-text versions kept per SoC/operator.
pub const DEFAULT_MAX_OPERATOR_VERSIONS: i64 = 2;

/// What prune removed (or would remove with `--dry-run`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Removal {
    /// The removed directory.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub path: PathBuf,
    /// `operator_version`, `staging_leftover`, `replaced_entry`, `trash` or `verify_memo`.
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

/// `strata action prune`: [`prune`], then the compiler launcher's compile entries
/// ([`crate::launcher::report::prune`]: crash leftovers, entries whose manifest does not
/// load, and with `compile_max_size` (bytes) the least recently used entries until they
/// fit), in one report. Removing compile entries touches `.updated`, as removing action
/// entries does.
pub fn prune_all(
    cache_root: &Path,
    max_operator_versions: i64,
    compile_max_size: Option<u64>,
    dry_run: bool,
) -> PruneReport {
    let mut report = prune(cache_root, max_operator_versions, dry_run);
    let Ok(cache) = crate::l1::layout::CacheRoot::new(cache_root) else { return report };
    let compile = crate::launcher::report::prune(&cache, compile_max_size, dry_run);
    if !dry_run
        && !compile.removed.is_empty()
        && let Err(e) = fs::touch(&cache.updated_marker())
    {
        report.warnings.push(e.to_string());
    }
    report.removed.extend(compile.removed.into_iter().map(|r| Removal {
        path: r.path,
        kind: r.kind,
        bytes: r.bytes,
    }));
    report.skipped_busy.extend(compile.skipped_busy);
    report.warnings.extend(compile.warnings);
    report
}

/// Prunes `cache_root` (see the module docs).
pub fn prune(cache_root: &Path, max_operator_versions: i64, dry_run: bool) -> PruneReport {
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
    if max_operator_versions > 0 {
        let custom = cache.domain_dir(Domain::CustomOperator);
        for soc in subdirs(&custom, &mut report) {
            for op in subdirs(&soc, &mut report) {
                prune_operator(&cache, &op, max_operator_versions, dry_run, &mut report);
            }
        }
    }
    leftovers(&cache, dry_run, &mut report);
    stale_memos(&cache, dry_run, &mut report);
    // Memos are machine-local and never packed: removing one does not change a snapshot.
    if !dry_run
        && report.removed.iter().any(|r| r.kind != "verify_memo")
        && let Err(e) = fs::touch(&cache.updated_marker())
    {
        report.warnings.push(e.to_string());
    }
    report
}

fn subdirs(dir: &Path, report: &mut PruneReport) -> Vec<PathBuf> {
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

fn is_hidden(p: &Path) -> bool {
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
fn remove_namespace(cache: &CacheRoot, ns: &Path, dry_run: bool) -> Result<Option<u64>, Error> {
    let actions = cache.actions_dir();
    let mut guards: Vec<LockGuard> = Vec::new();
    for action_dir in fs::read_dir(ns)? {
        if is_hidden(&action_dir) || !fs::symlink_metadata(&action_dir)?.is_dir() {
            continue;
        }
        for entry in fs::read_dir(&action_dir)? {
            let Ok(rel) = entry.strip_prefix(&actions) else { continue };
            let rel = rel.to_string_lossy().into_owned();
            let lock = cache.entry_lock(&rel);
            if let Some(parent) = lock.parent() {
                fs::create_dir_all(parent)?;
            }
            match fs::lock_exclusive(&lock, LockWait::Immediately, &mut |_| {}) {
                Ok(g) => guards.push(g),
                Err(e) if e.is_lock_timeout() => return Ok(None),
                Err(e) => return Err(e.into()),
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

fn tree_bytes(dir: &Path) -> u64 {
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
