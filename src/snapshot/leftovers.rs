//! Stale temp files and staging directories beside a cache directory.
//!
//! A restore or save works beside the cache directory `<parent>/<name>`:
//! `<parent>/.<name>.download-<random>`, `.<name>.sidecar-<random>` and
//! `.<name>.pack-<random>` temp files, and `.<name>.tmp-<16 hex>` staging directories
//! (spelled by [`crate::fs::temp`])
//! (which also briefly hold the previous tree after a swap). A process that is killed
//! leaves them behind; nothing ever reads them. [`remove_stale`] deletes the ones that
//! have not been modified for [`STALE_AFTER`], at the start of the next restore or save of
//! the same cache directory. Index snapshots work inside `<cache dir>/.local/` instead
//! (`.entry.tmp-<hex>` staging directories of entries being installed, `.entry.pack-*` and
//! `.entries.pack-*` entry objects and packs being uploaded, `.entries.download-*` whole
//! objects being fetched): those are deleted by the same rule.
//!
//! **The transfer lock** tells a killed process's leftovers from a running one's at once:
//! every save, restore and remote-tier fetch or upload of a cache directory holds a shared
//! `flock` on the directory `<cache dir>/.local` itself while it works ([`TransferLock`];
//! no lock file, so a failed restore still leaves the cache directory as it was); the
//! kernel drops it when the process dies, `kill -9` included. A save or restore that finds
//! the lock free (it gets it exclusively, so no transfer of this cache directory is
//! running) deletes every leftover at once, whatever its age; otherwise only those
//! untouched for [`STALE_AFTER`].
//!
//! # Limitations
//! Without the transfer lock (a cache directory that does not exist yet; a process of a
//! release before it) staleness is judged by modification time: a transfer that writes
//! nothing for an hour would lose its temp file (and fail, as a warning). Only names with
//! this cache directory's `<name>` are considered, so neighbouring caches are left alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::fs;
use crate::fs::temp::{Purpose, TempName};

/// How long a leftover must have been untouched before it is deleted.
pub const STALE_AFTER: Duration = Duration::from_secs(60 * 60);

/// What a leftover name says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leftover {
    /// A temp file: `.<name>.download-`, `.sidecar-` or `.pack-<random>`.
    File,
    /// A staging directory: `.<name>.tmp-<16 hex>`.
    Dir,
}

/// What `file_name` is if it is exactly one of strata's leftover names for the cache
/// directory named `name` ([`TempName`]; anything else, even similar, is left alone).
fn is_leftover_of(file_name: &str, name: &str) -> Option<Leftover> {
    let parsed = TempName::parse(file_name).filter(|t| t.stem() == Some(name))?;
    match parsed.purpose() {
        Purpose::Staging => Some(Leftover::Dir),
        Purpose::Download | Purpose::Sidecar | Purpose::Pack => Some(Leftover::File),
        _ => None,
    }
}

/// Deletes leftovers of `cache_dir` (absolute) older than `stale_after` as of `now`;
/// returns the paths deleted. Problems (an unreadable parent, a failed delete) are
/// skipped: this is housekeeping and never fails a restore or save.
pub fn remove_stale(cache_dir: &Path, now: SystemTime, stale_after: Duration) -> Vec<PathBuf> {
    let (Some(parent), Some(name)) =
        (cache_dir.parent(), cache_dir.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let mut removed = remove_stale_in(parent, &[name], now, stale_after);
    // Index snapshots stage entries, packs and downloads inside `<cache dir>/.local/`.
    let local = cache_dir.join(crate::l1::layout::LOCAL_DIR);
    removed.extend(remove_stale_in(&local, &LOCAL_STEMS, now, stale_after));
    removed
}

/// The stems of the temp names index saves and restores, and the remote tier, use under
/// `.local/` (`ref`: a ref being uploaded).
const LOCAL_STEMS: [&str; 3] = ["entry", "entries", "ref"];

/// A shared hold on a cache directory's transfer lock (see the module docs), released on
/// drop or when the process dies.
#[must_use = "the transfer lock is released when dropped"]
#[derive(Debug)]
pub struct TransferLock {
    _guard: fs::LockGuard,
}

impl TransferLock {
    /// Takes the transfer lock of `cache_dir` shared (waiting up to 30 s for a cleaner
    /// that holds it exclusively). `None` when `cache_dir/.local` does not exist (and
    /// `create` is [`Local::Existing`], or the cache directory does not exist) or the lock
    /// cannot be taken: the caller goes on without it.
    pub fn hold(cache_dir: &Path, create: Local) -> Option<TransferLock> {
        let local = local_dir(cache_dir, create)?;
        let wait = fs::LockWait::Timeout(Duration::from_secs(30));
        fs::lock_directory(&local, false, wait).ok().map(|guard| TransferLock { _guard: guard })
    }
}

/// Whether taking the transfer lock may create `<cache dir>/.local`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// Create it (saves and the remote tier write there anyway).
    Create,
    /// Only if it exists (a restore changes nothing in the cache directory until it
    /// succeeds).
    Existing,
}

/// `<cache dir>/.local` if it is a directory (created first when `create` says so and the
/// cache directory exists); `None` otherwise.
fn local_dir(cache_dir: &Path, create: Local) -> Option<PathBuf> {
    let local = cache_dir.join(crate::l1::layout::LOCAL_DIR);
    let is_dir = |p: &Path| fs::symlink_metadata_opt(p).ok().flatten().is_some_and(|m| m.is_dir());
    if is_dir(&local) {
        return Some(local);
    }
    if create == Local::Existing || !is_dir(cache_dir) {
        return None;
    }
    fs::create_dir_all_within(cache_dir, Path::new(crate::l1::layout::LOCAL_DIR), 0o755).ok()
}

/// Housekeeping at the start of a save or restore of `cache_dir`: deletes its leftovers
/// (all of them when no other transfer of the cache directory is running, see the module
/// docs; else those older than [`STALE_AFTER`]) and returns the transfer lock, held shared
/// for the rest of the operation, with the paths deleted.
pub fn clean_and_hold(
    cache_dir: &Path,
    now: SystemTime,
    create: Local,
) -> (Option<TransferLock>, Vec<PathBuf>) {
    let sole = local_dir(cache_dir, create)
        .and_then(|local| fs::lock_directory(&local, true, fs::LockWait::Immediately).ok());
    let stale_after = if sole.is_some() { Duration::ZERO } else { STALE_AFTER };
    let removed = remove_stale(cache_dir, now, stale_after);
    drop(sole);
    (TransferLock::hold(cache_dir, create), removed)
}

/// Deletes the leftovers in `dir` whose stem is one of `stems` (see [`remove_stale`]).
fn remove_stale_in(
    dir: &Path,
    stems: &[&str],
    now: SystemTime,
    stale_after: Duration,
) -> Vec<PathBuf> {
    let Ok(children) = fs::read_dir(dir) else { return Vec::new() };
    let mut removed = Vec::new();
    for path in children {
        let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        let Some(kind) = stems.iter().find_map(|stem| is_leftover_of(file_name, stem)) else {
            continue;
        };
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        let right_type = match kind {
            Leftover::File => meta.is_file(),
            Leftover::Dir => meta.is_dir(),
        };
        if !right_type {
            continue;
        }
        let age = meta.modified().ok().and_then(|m| now.duration_since(m).ok());
        if (stale_after.is_zero() || age.is_some_and(|age| age >= stale_after))
            && fs::remove_tree(&path).is_ok()
        {
            removed.push(path);
        }
    }
    removed
}

/// A note for each deleted leftover.
pub fn notes(removed: &[PathBuf]) -> Vec<String> {
    removed
        .iter()
        .map(|p| {
            format!(
                "removed {}, a leftover of an interrupted restore, save or remote transfer",
                p.display()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_cache_directorys_labels_count() {
        for yes in [
            ".cache.download-a1B2c3",
            ".cache.pack-xYz123",
            ".cache.sidecar-y00000",
            ".cache.tmp-0123456789abcdef",
            // Names this release makes (16 hex digits instead of tempfile's 6).
            ".cache.download-0123456789abcdef",
            ".cache.pack-0123456789abcdef",
        ] {
            assert!(is_leftover_of(yes, "cache").is_some(), "{yes}");
        }
        for no in [
            "cache",
            ".cache",
            ".cache.download-",
            ".cache.download-dir",
            ".cache.tmp-notahex",
            ".cache.tmp-0123456789ABCDEF",
            ".cache.pack-x",
            ".other.download-abc",
            ".cache.old-0123456789abcdef",
            ".cachex.pack-abc",
            "cache.pack-abc",
        ] {
            assert!(is_leftover_of(no, "cache").is_none(), "{no}");
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods)]
    fn stale_leftovers_are_removed_fresh_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(dir.path().join(".cache.download-abc123"), b"x").unwrap();
        std::fs::create_dir_all(dir.path().join(".cache.tmp-0123456789abcdef/actions-v1")).unwrap();
        std::fs::write(dir.path().join(".other.pack-abc"), b"x").unwrap();
        let soon = SystemTime::now() + Duration::from_secs(10);
        assert!(remove_stale(&cache, soon, STALE_AFTER).is_empty(), "all fresh");
        let later = SystemTime::now() + STALE_AFTER + Duration::from_secs(10);
        let mut removed = remove_stale(&cache, later, STALE_AFTER);
        removed.sort();
        assert_eq!(
            removed,
            [
                dir.path().join(".cache.download-abc123"),
                dir.path().join(".cache.tmp-0123456789abcdef")
            ]
        );
        assert!(dir.path().join(".other.pack-abc").exists());
        assert!(cache.exists());
        assert_eq!(notes(&removed).len(), 2);
    }

    /// A leftover of every kind that can stand inside a cache directory (as this release
    /// names it, and as the current release named it) is never packed; a similar name that
    /// is not strata's is packed like any other.
    #[test]
    #[allow(clippy::disallowed_methods)]
    fn every_leftover_kind_is_skipped_by_pack() {
        use crate::snapshot::pack::{PackOptions, pack};
        let src = tempfile::tempdir().unwrap();
        let unit = src.path().join("actions-v1/third_party/zlib");
        let artifacts = unit.join("k1/artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        std::fs::write(artifacts.join("a.o"), b"a").unwrap();
        let mut leftovers: Vec<String> = Purpose::ALL
            .iter()
            .filter(|p| **p != Purpose::Scratch)
            .map(|p| TempName::new(*p, "k2").to_string())
            .collect();
        leftovers.extend(
            [
                ".strata-Ab12Cd.tmp",
                ".strata-0123456789abcdef.tmp",
                ".strata-tmp-0123456789abcdef",
                ".k2.download-Ab12Cd",
                ".k2.old-0123456789abcdef",
            ]
            .map(str::to_owned),
        );
        for name in &leftovers {
            std::fs::create_dir_all(unit.join(name)).unwrap();
            std::fs::write(unit.join(name).join("partial"), b"x").unwrap();
            std::fs::write(artifacts.join(name), b"x").unwrap();
        }
        let similar = [".k3.tmp-xyz", ".k3.old-0123456789ABCDEF", ".x.strata-abc.tmp"];
        for name in similar {
            std::fs::write(artifacts.join(name), b"user").unwrap();
        }
        let work = tempfile::tempdir().unwrap();
        let report = pack(
            src.path(),
            &work.path().join("o"),
            &PackOptions::new(crate::snapshot::key::ManifestKey::parse("k").unwrap()),
        )
        .unwrap();
        let packed: Vec<String> =
            report.manifest.entries.iter().map(|e| e.path().as_str().to_owned()).collect();
        for name in &leftovers {
            assert!(!packed.iter().any(|p| p.contains(name.as_str())), "{name} packed: {packed:?}");
        }
        for name in similar {
            let path = format!("actions-v1/third_party/zlib/k1/artifacts/{name}");
            assert!(packed.contains(&path), "{path} not packed: {packed:?}");
        }
        assert!(packed.contains(&"actions-v1/third_party/zlib/k1/artifacts/a.o".to_owned()));
    }
}
