//! The entries of a local L1 cache, as an index snapshot sees them.
//!
//! An entry is a directory at its domain's depth below `actions-v1/` that holds a regular
//! file `manifest.json`: `third_party/<unit>/<key>` (3), `custom_operator/<soc>/<operator>/
//! <text hash>/<action>@<unit>/<key>` (6), and the launcher's `compile/<2 hex>/<key>` (3).
//! Its identity is the BLAKE3 digest of `manifest.json`'s bytes: entries are immutable
//! once published, and a launcher entry that gains a candidate is republished with a new
//! `manifest.json`. Symlinks at layout positions, dot-names (crash leftovers, `.last-used`)
//! and directories of unknown domains are not entries and are skipped.

use std::path::{Path, PathBuf};

use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs;
use crate::l1::layout::{Domain, entry_depth};
use crate::snapshot::{CARRIED_DIR, Error};

/// The name of the file every entry holds.
pub const ENTRY_MANIFEST: &str = "manifest.json";
/// Largest entry manifest read, in bytes (anything larger is not an entry strata wrote).
const MAX_ENTRY_MANIFEST_BYTES: u64 = 64 * 1024 * 1024;

/// One entry of a local cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEntry {
    /// The entry path relative to `actions-v1/` (`/`-separated).
    pub path: String,
    /// The entry directory.
    pub dir: PathBuf,
    /// `blake3:<hex>` of its `manifest.json` bytes.
    pub manifest_digest: ContentDigest,
}

/// Depth of an entry below `actions-v1/` in the top-level directory `domain`, or `None`
/// for a directory that holds no entries.
pub fn depth_of(domain: &str) -> Option<usize> {
    match domain {
        crate::l1::counters::COMPILE => Some(3),
        other => Domain::parse(other).map(entry_depth),
    }
}

/// True if `name` can be a path component of an entry path (no dot-name: those are
/// strata's own files and crash leftovers).
fn is_layout_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.')
}

/// Every entry under `<cache_root>/actions-v1/`, sorted by path. A missing `actions-v1/`
/// is an empty cache.
///
/// # Errors
/// [`Error::SymlinkedLayout`] if `actions-v1` is a symlink or not a directory;
/// [`Error::Local`] for read failures.
pub fn list(cache_root: &Path) -> Result<Vec<LocalEntry>, Error> {
    let carried = cache_root.join(CARRIED_DIR);
    match fs::symlink_metadata_opt(&carried)? {
        None => return Ok(Vec::new()),
        Some(meta) if !meta.is_dir() => return Err(Error::SymlinkedLayout { path: carried }),
        Some(_) => {}
    }
    let mut found = Vec::new();
    for domain_dir in fs::read_dir(&carried)? {
        let Some(domain) = domain_dir.file_name().and_then(|n| n.to_str()) else { continue };
        let Some(depth) = depth_of(domain) else { continue };
        if !is_real_dir(&domain_dir)? {
            continue;
        }
        collect(&domain_dir, domain.to_owned(), depth - 1, &mut found)?;
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

fn is_real_dir(path: &Path) -> Result<bool, Error> {
    Ok(fs::symlink_metadata_opt(path)?.is_some_and(|m| m.is_dir()))
}

/// Descends `remaining` more levels below `dir` (entry path so far `rel`).
fn collect(
    dir: &Path,
    rel: String,
    remaining: usize,
    found: &mut Vec<LocalEntry>,
) -> Result<(), Error> {
    for child in fs::read_dir(dir)? {
        let Some(name) = child.file_name().and_then(|n| n.to_str()) else { continue };
        if !is_layout_name(name) || !is_real_dir(&child)? {
            continue;
        }
        let child_rel = format!("{rel}/{name}");
        if remaining > 1 {
            collect(&child, child_rel, remaining - 1, found)?;
            continue;
        }
        if let Some(manifest_digest) = manifest_digest(&child)? {
            found.push(LocalEntry { path: child_rel, dir: child, manifest_digest });
        }
    }
    Ok(())
}

/// BLAKE3 of `<entry dir>/manifest.json`, or `None` if it is missing, not a regular file
/// or too large (a half-made or foreign directory: not an entry).
///
/// # Errors
/// [`Error::Local`] for read failures other than "not found".
pub fn manifest_digest(entry_dir: &Path) -> Result<Option<ContentDigest>, Error> {
    let path = entry_dir.join(ENTRY_MANIFEST);
    let bytes = match fs::read_capped_nofollow(&path, MAX_ENTRY_MANIFEST_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(Some(ContentDigest::of_bytes(DigestAlgorithm::Blake3, &bytes)))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn entry(root: &Path, rel: &str, manifest: &str) {
        let dir = root.join("actions-v1").join(rel);
        std::fs::create_dir_all(dir.join("artifacts")).unwrap();
        std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    }

    #[test]
    fn lists_entries_of_every_domain_and_skips_the_rest() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        assert!(list(r).unwrap().is_empty());
        entry(r, "third_party/zlib/k1", "a");
        entry(r, "custom_operator/soc/op/hash/build@u/k2", "b");
        entry(r, "compile/ab/k3", "c");
        // Not entries: no manifest, a leftover, an unknown domain, too shallow.
        std::fs::create_dir_all(r.join("actions-v1/third_party/zlib/half")).unwrap();
        entry(r, "third_party/zlib/.k1.tmp-0123456789abcdef", "x");
        entry(r, "other/a/b", "x");
        std::fs::write(r.join("actions-v1/custom_operator/soc/op/hash/.last-used"), "").unwrap();
        std::os::unix::fs::symlink(
            r.join("actions-v1/third_party/zlib/k1"),
            r.join("actions-v1/third_party/zlib/link"),
        )
        .unwrap();
        let listed = list(r).unwrap();
        let paths: Vec<&str> = listed.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["compile/ab/k3", "custom_operator/soc/op/hash/build@u/k2", "third_party/zlib/k1"]
        );
        assert_eq!(
            listed[0].manifest_digest,
            ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"c")
        );
    }
}
