//! `operator_text_hash`: the per-revision namespace of a custom operator's sources. It is a
//! directory level in the entry path, not part of the action key: a changed operator text with
//! identical prepared inputs gives a new namespace and therefore a MISS, and prune keeps the newest
//! N namespaces.
//!
//! Candidates: with `--repo-root` containing the source, the files git tracks under it
//! (`git -c safe.directory=* -C <repo_root> ls-files -z -- <source>`, so a container's
//! "dubious ownership" check does not silently switch to a different file set). When git
//! is unavailable, fails, or tracks nothing there (an untracked operator directory), the
//! source directory is walked instead (default excludes apply), so two untracked operators
//! never share the namespace of an empty listing.
//!
//! Records: `(<path relative to the source>, sha256 of the raw bytes)` for files — text and
//! binary alike — and `(<path>, "symlink:" + text)` for symlinks, keyed by the link's own
//! path (not by its target's). A missing source directory is
//! [`Error::OperatorSourceMissing`]. Paths and link texts are recorded in the name encoding
//! ([`crate::fs::name`]): a file whose name is not UTF-8 counts like any other.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::glob::Patterns;
use super::records::Records;
use crate::action::Error;
use crate::fs::{self, EntryKind};

/// Computes the operator-text records for `source`.
///
/// # Errors
/// [`Error::OperatorSourceMissing`]; read errors.
pub fn operator_text_records(source: &Path, repo_root: Option<&Path>) -> Result<Records, Error> {
    let resolved = fs::resolve_nonstrict(source)?;
    if !fs::metadata(&resolved).is_ok_and(|m| m.is_dir()) {
        return Err(Error::OperatorSourceMissing { path: source.to_path_buf() });
    }
    let tracked = repo_root.and_then(|root| git_tracked(root, &resolved)).filter(|v| !v.is_empty());
    let mut records = Records::new();
    match tracked {
        Some(files) => {
            for path in files {
                let Some(meta) = fs::symlink_metadata_opt(&path)? else { continue };
                let Ok(rel) = path.strip_prefix(&resolved) else { continue };
                let rel = fs::name::encode_os(rel.as_os_str());
                add(&mut records, &rel, &path, EntryKind::of(&meta))?;
            }
        }
        None => {
            let excludes = Patterns::excludes_with::<&str>(&[])?;
            for entry in fs::walk(&resolved) {
                let entry = entry?;
                if excludes.is_match_rel(&entry.rel) {
                    continue;
                }
                add(&mut records, entry.rel.as_str(), &entry.path, entry.kind)?;
            }
        }
    }
    Ok(records)
}

fn add(records: &mut Records, rel: &str, path: &Path, kind: EntryKind) -> Result<(), Error> {
    match kind {
        EntryKind::File => records.push(rel, fs::hash_file(path)?.0.to_hex()),
        EntryKind::Symlink => records.push(rel, format!("symlink:{}", fs::read_link(path)?)),
        _ => {}
    }
    Ok(())
}

/// Files git tracks under `source` (absolute paths), or `None` if git cannot answer.
fn git_tracked(repo_root: &Path, source: &Path) -> Option<Vec<PathBuf>> {
    let root = fs::resolve_nonstrict(repo_root).ok()?;
    let rel = source.strip_prefix(&root).ok()?;
    let rel_text = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let out = Command::new("git")
        .args(["-c", "safe.directory=*", "-C"])
        .arg(&root)
        .args(["ls-files", "-z", "--"])
        .arg(rel_text)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut files = Vec::new();
    for item in out.stdout.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        files.push(root.join(std::ffi::OsStr::from_bytes(item)));
    }
    files.sort();
    Some(files)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn untracked_operators_do_not_share_a_namespace() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path();
        assert!(
            Command::new("git").args(["init", "-q"]).current_dir(repo).status().unwrap().success()
        );
        for (op, body) in [("op_a", "a"), ("op_b", "b")] {
            std::fs::create_dir(repo.join(op)).unwrap();
            std::fs::write(repo.join(op).join("k.cpp"), body).unwrap();
        }
        let a = operator_text_records(&repo.join("op_a"), Some(repo)).unwrap();
        let b = operator_text_records(&repo.join("op_b"), Some(repo)).unwrap();
        assert_ne!(a.hash(), b.hash());
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn tracked_files_only_when_git_answers() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path();
        let git = |args: &[&str]| {
            assert!(Command::new("git").args(args).current_dir(repo).status().unwrap().success())
        };
        git(&["init", "-q"]);
        std::fs::create_dir(repo.join("op")).unwrap();
        std::fs::write(repo.join("op/k.cpp"), "x").unwrap();
        git(&["add", "op/k.cpp"]);
        std::fs::write(repo.join("op/untracked.o"), "junk").unwrap();
        let r = operator_text_records(&repo.join("op"), Some(repo)).unwrap();
        let names: Vec<_> = r.iter().map(|r| r.name.clone()).collect();
        assert_eq!(names, ["k.cpp"]);
        assert!(matches!(
            operator_text_records(&repo.join("missing"), Some(repo)),
            Err(Error::OperatorSourceMissing { .. })
        ));
    }
}
