//! Finding and describing what a build produced.
//!
//! Selection ([`Selection`]):
//! * with `--artifact-include` patterns: every file and symlink under the output root whose
//!   relative path matches, whether or not this build touched it (the entry reproduces the
//!   output state the patterns name);
//! * custom operators without patterns: everything in the freshly wiped private stage;
//! * third party without patterns: every file or symlink that is new or whose `lstat`
//!   signature (kind, size, mtime, ctime, inode, link text) changed since just before the
//!   build, plus the paths a failed HIT restore of the same key may have placed (see
//!   [`Before::forget`]).
//!
//! Symlink closure: a selected symlink whose text resolves *lexically* inside the output
//! root pulls in its target — a file, a symlink (followed along the chain) or a directory
//! (all files and symlinks under it).
//! A target inside the root that does not exist is [`Error::ArtifactLinkDangling`]. A link
//! pointing outside the root is kept as a link and nothing else (its location, not its
//! resolution, is what must be inside the root).
//!
//! FIFOs, sockets and devices are never artifacts.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::action::Error;
use crate::action::entry::Described;
use crate::action::identity::Patterns;
use crate::content::{FileRecord, Record};
use crate::digest::DigestAlgorithm;
use crate::fs::temp::{Purpose, TempName};
use crate::fs::{self, EntryKind, RelPath};

/// An `lstat` signature used to notice changed outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Signature {
    kind: &'static str,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    inode: u64,
    link: Option<String>,
}

/// The state of an output directory before a build.
#[derive(Debug, Default)]
pub struct Before(HashMap<RelPath, Signature>);

impl Before {
    /// Treats `paths` as changed by the build even if their signature is unchanged (e.g.
    /// files a failed restore placed just before the build, which an incremental build
    /// then keeps).
    pub fn forget(&mut self, paths: &[RelPath]) {
        for p in paths {
            self.0.remove(p);
        }
    }

    /// Paths recorded before the build that still exist and were not selected: outputs an
    /// incremental build left alone, which an entry captured by "what changed" lacks.
    pub fn untouched(&self, root: &Path, selected: &[Described]) -> Vec<RelPath> {
        let chosen: std::collections::HashSet<&RelPath> =
            selected.iter().map(|d| d.artifact.path()).collect();
        let mut out: Vec<RelPath> = self
            .0
            .keys()
            .filter(|p| !chosen.contains(p))
            .filter(|p| fs::symlink_metadata_opt(&p.to_path(root)).ok().flatten().is_some())
            .cloned()
            .collect();
        out.sort();
        out
    }
}

/// How artifacts are selected.
#[derive(Debug)]
pub enum Selection<'a> {
    /// Files and symlinks matching these patterns.
    Include(&'a Patterns),
    /// Every file and symlink.
    All,
    /// Files and symlinks that are new or changed since `Before`, plus those at `also`
    /// (outputs earlier entries of the same unit captured that still exist).
    ChangedSince(&'a Before, &'a HashSet<RelPath>),
}

/// Records the signatures of everything under `root` (an absent root is empty).
///
/// # Errors
/// Walk errors naming the path.
pub fn snapshot(root: &Path) -> Result<Before, Error> {
    let mut map = HashMap::new();
    if fs::symlink_metadata_opt(root)?.is_none() {
        return Ok(Before(map));
    }
    for entry in fs::walk(root) {
        let entry = entry?;
        if let Some(sig) = signature(&entry)? {
            map.insert(entry.rel, sig);
        }
    }
    Ok(Before(map))
}

fn signature(entry: &fs::WalkEntry) -> Result<Option<Signature>, Error> {
    let m = &entry.metadata;
    let (kind, link) = match entry.kind {
        EntryKind::File => ("file", None),
        EntryKind::Symlink => ("symlink", Some(fs::read_link(&entry.path)?)),
        _ => return Ok(None),
    };
    Ok(Some(Signature {
        kind,
        size: m.size(),
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        inode: m.ino(),
        link,
    }))
}

/// Selects and describes the artifacts under `root`, sorted by path, hashing files with
/// `algorithm` (the algorithm of the new entry's content records).
///
/// # Errors
/// [`Error::ArtifactLinkDangling`]; read errors naming the path.
pub fn collect(
    root: &Path,
    selection: &Selection<'_>,
    algorithm: DigestAlgorithm,
) -> Result<Vec<Described>, Error> {
    let mut all: BTreeMap<RelPath, fs::WalkEntry> = BTreeMap::new();
    let mut selected: BTreeSet<RelPath> = BTreeSet::new();
    for entry in fs::walk(root) {
        let entry = entry?;
        let is_candidate = matches!(entry.kind, EntryKind::File | EntryKind::Symlink)
            && !is_placement_temp(entry.rel.file_name());
        if is_candidate {
            let pick = match selection {
                Selection::Include(p) => p.is_match_rel(&entry.rel),
                Selection::All => true,
                Selection::ChangedSince(before, also) => {
                    also.contains(&entry.rel)
                        || before.0.get(&entry.rel) != signature(&entry)?.as_ref()
                }
            };
            if pick {
                selected.insert(entry.rel.clone());
            }
        }
        all.insert(entry.rel.clone(), entry);
    }
    // Symlink closure.
    let mut queue: Vec<RelPath> = selected.iter().cloned().collect();
    while let Some(rel) = queue.pop() {
        let Some(entry) = all.get(&rel) else { continue };
        if entry.kind != EntryKind::Symlink {
            continue;
        }
        let text = fs::read_link(&entry.path)?;
        let Some(target) = lexical_target(root, &rel, &text) else { continue };
        match all.get(&target) {
            None => {
                return Err(Error::ArtifactLinkDangling { link: entry.path.clone(), target: text });
            }
            Some(t) if t.kind == EntryKind::Dir => {
                let prefix = format!("{}/", target.as_str());
                for (r, e) in all.iter().filter(|(r, _)| r.as_str().starts_with(&prefix)) {
                    if matches!(e.kind, EntryKind::File | EntryKind::Symlink)
                        && selected.insert(r.clone())
                    {
                        queue.push(r.clone());
                    }
                }
            }
            Some(t) if matches!(t.kind, EntryKind::File | EntryKind::Symlink) => {
                if selected.insert(target.clone()) {
                    queue.push(target);
                }
            }
            Some(_) => {}
        }
    }
    let mut out = Vec::with_capacity(selected.len());
    for rel in selected {
        let Some(entry) = all.get(&rel) else { continue };
        let artifact = match entry.kind {
            EntryKind::File => {
                let (digest, size_bytes, _) = fs::hash_file_stable(&entry.path, algorithm)?;
                Record::File(FileRecord {
                    path: rel,
                    size_bytes,
                    digest,
                    executable: fs::perm::is_owner_exec(entry.metadata.permissions().mode()),
                })
            }
            EntryKind::Symlink => {
                Record::Symlink { path: rel, target: fs::read_link(&entry.path)? }
            }
            _ => continue,
        };
        out.push(Described { artifact, source: entry.path.clone() });
    }
    Ok(out)
}

/// True for the temporary names strata's own atomic placement uses
/// ([`Purpose::Placement`]: `.strata-*.tmp`, `.<name>.strata-<hex>.tmp`; a process killed
/// mid-placement can leave one behind) and for the stage marker `.strata-stage`: none of
/// them is ever an artifact.
fn is_placement_temp(name: &str) -> bool {
    TempName::parse(name).is_some_and(|t| t.purpose() == Purpose::Placement)
        || name == crate::action::guard::STAGE_MARKER
}

/// The target of the link at `rel` with text `text`, relative to `root`, if it lies inside
/// `root` (resolved lexically: `..` and `.` applied without touching the filesystem).
fn lexical_target(root: &Path, rel: &RelPath, text: &str) -> Option<RelPath> {
    let link_dir: PathBuf = match rel.parent() {
        Some(p) => p.to_path(root),
        None => root.to_path_buf(),
    };
    // `text` is in recorded form; the link's real bytes decide where it points.
    let target = PathBuf::from(fs::link_text_bytes(text).ok()?);
    let joined = if target.is_absolute() { target } else { link_dir.join(target) };
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in joined.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => parts.clear(),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop();
            }
            Component::Normal(n) => parts.push(n),
        }
    }
    let normalized: PathBuf = std::iter::once(std::ffi::OsStr::new("/")).chain(parts).collect();
    let inside = normalized.strip_prefix(root).ok()?;
    if inside.as_os_str().is_empty() {
        return None;
    }
    RelPath::from_path(inside).ok()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn paths(d: &[Described]) -> Vec<String> {
        d.iter().map(|x| x.artifact.path().as_str().to_owned()).collect()
    }

    #[test]
    fn changed_only_and_closure() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("old.txt"), b"x").unwrap();
        std::fs::create_dir_all(root.join("lib/real")).unwrap();
        std::fs::write(root.join("lib/real/libz.so.1"), b"elf").unwrap();
        let before = snapshot(&root).unwrap();
        symlink("real/libz.so.1", root.join("lib/libz.so")).unwrap();
        symlink("/usr/lib/libc.so", root.join("lib/ext.so")).unwrap();
        symlink("real", root.join("lib/realdir")).unwrap();
        let got = collect(
            &root,
            &Selection::ChangedSince(&before, &HashSet::new()),
            DigestAlgorithm::Blake3,
        )
        .unwrap();
        assert_eq!(paths(&got), ["lib/ext.so", "lib/libz.so", "lib/real/libz.so.1", "lib/realdir"]);
        let all = collect(&root, &Selection::All, DigestAlgorithm::Blake3).unwrap();
        assert_eq!(all.len(), 5);
    }

    #[test]
    fn forgotten_paths_count_as_changed() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("restored.a"), b"x").unwrap();
        std::fs::write(root.join("other.a"), b"y").unwrap();
        let mut before = snapshot(&root).unwrap();
        before.forget(&[RelPath::new("restored.a").unwrap(), RelPath::new("gone.a").unwrap()]);
        let got = collect(
            &root,
            &Selection::ChangedSince(&before, &HashSet::new()),
            DigestAlgorithm::Blake3,
        )
        .unwrap();
        assert_eq!(paths(&got), ["restored.a"]);
    }

    #[test]
    fn include_and_dangling() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("a.a"), b"x").unwrap();
        std::fs::write(root.join("b.o"), b"y").unwrap();
        let p = Patterns::new(&["*.a"]).unwrap();
        assert_eq!(
            paths(&collect(&root, &Selection::Include(&p), DigestAlgorithm::Blake3).unwrap()),
            ["a.a"]
        );
        symlink("gone", root.join("l.a")).unwrap();
        assert!(matches!(
            collect(&root, &Selection::Include(&p), DigestAlgorithm::Blake3),
            Err(Error::ArtifactLinkDangling { .. })
        ));
    }

    #[test]
    fn placement_temps_are_never_artifacts() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join(".strata-Ab12Cd.tmp"), b"partial").unwrap();
        std::fs::write(root.join(".x.o.strata-0123456789abcdef.tmp"), b"partial").unwrap();
        std::fs::write(root.join("x.o"), b"whole").unwrap();
        std::fs::write(root.join(".hidden.tmp"), b"user file").unwrap();
        let got = collect(&root, &Selection::All, DigestAlgorithm::Blake3).unwrap();
        assert_eq!(paths(&got), [".hidden.tmp", "x.o"]);
    }

    #[test]
    fn lexical_targets() {
        let root = Path::new("/out");
        let rel = RelPath::new("a/l").unwrap();
        assert_eq!(lexical_target(root, &rel, "x").unwrap().as_str(), "a/x");
        assert_eq!(lexical_target(root, &rel, "../b").unwrap().as_str(), "b");
        assert_eq!(lexical_target(root, &rel, "/out/c").unwrap().as_str(), "c");
        assert!(lexical_target(root, &rel, "../../etc").is_none());
        assert!(lexical_target(root, &rel, "..").is_none());
    }
}
