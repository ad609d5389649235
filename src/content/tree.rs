//! A tree manifest and the comparison of a real tree with it, before any hashing.
//!
//! A manifest is a list of [`Record`]s sorted by path (code-point order of the recorded
//! text), each path once. [`check_records`] enforces that and the [`Rules`] of the manifest
//! kind; [`compare`] walks a real tree (never following anything) and requires exactly the
//! listed paths with the listed kind, size, owner-exec bit and link text. Only walked paths
//! are ever opened afterwards, never paths named by a manifest.
//!
//! The walk's order (names byte-wise, depth first) and the manifest's order (recorded paths
//! as text) differ (`foo/y` comes before `foo-1/x` in one and after it in the other), so the
//! two are compared as sets, never zipped.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::Problem;
use super::record::{FileRecord, Kind, Record};
use crate::fs::{self, EntryKind, FileStamp, RelPath};

/// How directories appear in a manifest kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directories {
    /// Not listed: a directory is allowed exactly when it leads to a listed path (entries,
    /// artifacts). An empty directory is therefore an extra path.
    Implied,
    /// Every directory is listed (snapshots, which carry empty directories).
    Listed,
    /// Not listed, and any directory may exist, empty or not (artifact slots, whose
    /// identity is their files alone).
    Ignored,
}

/// What a manifest kind may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Whether symlink records are allowed.
    pub symlinks: bool,
    /// How directories appear.
    pub directories: Directories,
    /// A top-level file name that belongs to the container, not the content (an artifact
    /// slot's own manifest file): it is never listed, and [`compare`] skips it.
    pub reserved: Option<&'static str>,
    /// Whether an empty manifest is allowed.
    pub allow_empty: bool,
}

/// Checks that `records` is a manifest of a kind with `rules`: sorted by path with no
/// duplicates, only allowed kinds, nothing below a file or symlink, the reserved name not
/// listed at the top level.
///
/// # Errors
/// A reason, naming the first offending path (the caller reports the manifest INVALID).
pub fn check_records(records: &[Record], rules: &Rules) -> Result<(), String> {
    if records.is_empty() && !rules.allow_empty {
        return Err("the manifest lists nothing".into());
    }
    if let Some(pair) = records.windows(2).find(|w| match (w.first(), w.get(1)) {
        (Some(a), Some(b)) => a.path() >= b.path(),
        _ => false,
    }) {
        let path = pair.get(1).map(|r| r.path().to_string()).unwrap_or_default();
        return Err(format!("the manifest is not sorted by path or lists {path} twice"));
    }
    let mut leaves: BTreeSet<&RelPath> = BTreeSet::new();
    for r in records {
        match r.kind() {
            Kind::Symlink if !rules.symlinks => {
                return Err(format!("{} is a symlink; this manifest kind holds none", r.path()));
            }
            Kind::Directory if rules.directories != Directories::Listed => {
                return Err(format!("{} is a directory record; directories are implied", r.path()));
            }
            Kind::File | Kind::Symlink => {
                leaves.insert(r.path());
            }
            Kind::Directory => {}
        }
        if let Some(reserved) = rules.reserved
            && r.path().as_str() == reserved
        {
            return Err(format!("{reserved} is reserved for the container's own manifest"));
        }
    }
    for r in records {
        let mut parent = r.path().parent();
        while let Some(p) = parent {
            if leaves.contains(&p) {
                return Err(format!("{} lies below {p}, which is not a directory", r.path()));
            }
            parent = p.parent();
        }
    }
    if rules.directories == Directories::Listed {
        // Every directory is listed: a path whose parent is not is a manifest that leaves
        // directories out.
        let listed: BTreeSet<&RelPath> =
            records.iter().filter(|r| r.kind() == Kind::Directory).map(Record::path).collect();
        if let Some(r) =
            records.iter().find(|r| r.path().parent().is_some_and(|p| !listed.contains(&p)))
        {
            let parent = r.path().parent().map(|p| p.to_string()).unwrap_or_default();
            return Err(format!(
                "{} lies in {parent}, which the manifest does not list (every directory is listed)",
                r.path()
            ));
        }
    }
    Ok(())
}

/// A regular file found by [`compare`]: the index of its record and its stamp as walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Index into the records given to [`compare`].
    pub index: usize,
    /// The file's stamp when walked.
    pub stamp: FileStamp,
}

/// Walks `root` (never following links) and requires exactly what `records` lists (a
/// manifest that passed [`check_records`] with `rules`): every path present with the same
/// kind, file size, owner-exec bit and link text, and nothing else (directories as the
/// rules say; FIFOs, sockets and devices are never allowed). No file is read. Returns the
/// regular files in record order.
///
/// # Errors
/// [`Problem::Invalid`] naming the first difference (`root/<path>`);
/// [`Problem::Storage`] when the tree cannot be read ([`Problem::classify`]).
pub fn compare(root: &Path, records: &[Record], rules: &Rules) -> Result<Vec<Found>, Problem> {
    match fs::symlink_metadata_opt(root) {
        Ok(Some(m)) if m.is_dir() => {}
        Ok(Some(_)) => {
            return Err(Problem::Invalid(format!("{} is not a directory", root.display())));
        }
        Ok(None) => return Err(Problem::Invalid(format!("{} is missing", root.display()))),
        Err(e) => return Err(Problem::classify(&e)),
    }
    let mut expected: BTreeMap<&RelPath, usize> =
        records.iter().enumerate().map(|(i, r)| (r.path(), i)).collect();
    let mut implied: BTreeSet<RelPath> = BTreeSet::new();
    if rules.directories == Directories::Implied {
        for r in records {
            let mut p = r.path().parent();
            while let Some(d) = p {
                p = d.parent();
                implied.insert(d);
            }
        }
    }
    let shown = |rel: &RelPath| format!("{}/{rel}", root.display());
    let mut found = Vec::new();
    for entry in fs::walk(root) {
        let entry = entry.map_err(|e| Problem::classify(&e))?;
        if entry.kind == EntryKind::File
            && rules.reserved.is_some_and(|name| entry.rel.as_str() == name)
        {
            continue;
        }
        if entry.kind == EntryKind::Dir
            && (rules.directories == Directories::Ignored || implied.contains(&entry.rel))
        {
            continue;
        }
        let Some(index) = expected.remove(&entry.rel) else {
            let what = match entry.kind {
                EntryKind::Dir => "directory",
                EntryKind::Special(kind) => kind,
                _ => "file",
            };
            return Err(Problem::Invalid(format!(
                "{} is not listed in the manifest (extra {what})",
                shown(&entry.rel)
            )));
        };
        let record = records.get(index).ok_or_else(|| Problem::Invalid("index".into()))?;
        let meta = &entry.metadata;
        let same = match (record, entry.kind) {
            (Record::File(FileRecord { size_bytes, executable, .. }), EntryKind::File) => {
                if meta.len() != *size_bytes {
                    return Err(Problem::Invalid(format!(
                        "{} has {} bytes, the manifest records {size_bytes}",
                        shown(&entry.rel),
                        meta.len()
                    )));
                }
                let x = fs::perm::is_owner_exec(meta.permissions().mode());
                if x != *executable {
                    return Err(Problem::Invalid(format!(
                        "{} has owner-exec {x}, the manifest records {executable}",
                        shown(&entry.rel)
                    )));
                }
                found.push(Found { index, stamp: FileStamp::of(meta) });
                true
            }
            (Record::Symlink { target, .. }, EntryKind::Symlink) => {
                let text = fs::read_link(&entry.path).map_err(|e| Problem::classify(&e))?;
                if text != *target {
                    return Err(Problem::Invalid(format!(
                        "{} links to {text}, the manifest records {target}",
                        shown(&entry.rel)
                    )));
                }
                true
            }
            (Record::Directory { .. }, EntryKind::Dir) => true,
            _ => false,
        };
        if !same {
            let is = match entry.kind {
                EntryKind::File => "file",
                EntryKind::Dir => "directory",
                EntryKind::Symlink => "symlink",
                EntryKind::Special(kind) => kind,
            };
            return Err(Problem::Invalid(format!(
                "{} is a {is}, the manifest records a {}",
                shown(&entry.rel),
                record.kind().as_str()
            )));
        }
    }
    if let Some(missing) = expected.keys().next() {
        return Err(Problem::Invalid(format!(
            "{} is listed in the manifest but missing",
            shown(missing)
        )));
    }
    found.sort_by_key(|f| f.index);
    Ok(found)
}
