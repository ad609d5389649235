//! Does a candidate still apply here? Every fact it recorded must hold now
//! ([`super::entry`]); this is the whole cost of a HIT besides placing the outputs, so it is
//! built to be cheap:
//!
//! * facts about names (absent, present) are grouped by the directory that holds them; a
//!   directory whose stamp (device, inode, size, mtime, ctime) is the one it had when all of
//!   its group's facts were last verified, at least 2 s after its last change, vouches for
//!   them (a directory gains, loses or renames an entry only by changing its mtime and
//!   ctime), so each group costs one `stat`; only a changed directory has its names looked
//!   up one by one;
//! * input files whose stamp the memo vouches for are not read; others are hashed.
//!
//! Both memos live in the entry's verification memo ([`crate::content::memo`]),
//! machine-local: on another machine the first HIT checks everything once.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::content::VerifyMemo;
use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs::{self, FileStamp};

use super::entry::{self, Candidate, Kind, Names};
use super::inputs::InputMemo;
use super::location::{Location, Spelled};

/// Why a candidate does not apply here (for `STRATA_EXPLAIN` and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// An output embeds an absolute path that would differ here.
    Pinned(String),
    /// The outputs depend on the object's name, which differs here.
    Names(String),
    /// A recorded path has no place here (anchored at a `$PWD` there is none of).
    Unplaceable(String),
    /// A path that was absent exists now.
    Appeared(PathBuf),
    /// A path that existed is gone or changed kind.
    Changed(PathBuf),
    /// An input is missing, unreadable or has other content.
    Input(PathBuf),
    /// Two inputs that were two files are one file now (a link replaced a copy): Clang
    /// names a file it reaches twice by the first name it used, in debug information and
    /// messages, so the outputs would differ.
    Aliased(PathBuf),
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Pinned(p) => write!(f, "output embeds {p}"),
            Mismatch::Names(o) => write!(f, "its outputs name the object {o}"),
            Mismatch::Unplaceable(p) => write!(f, "{p} has no place here"),
            Mismatch::Appeared(p) => write!(f, "{} exists now", p.display()),
            Mismatch::Changed(p) => write!(f, "{} changed kind", p.display()),
            Mismatch::Input(p) => write!(f, "{} changed", p.display()),
            Mismatch::Aliased(p) => {
                write!(f, "{} is now the same file as another input", p.display())
            }
        }
    }
}

/// One line about why every candidate was passed over, by kind with a count and the first
/// example: `2 candidates: 1 naming another checkout's path (/w/a/x.c), 1 with an input
/// that changed (/w/inc/x.h)`.
pub fn summary(passed_over: &[Mismatch]) -> String {
    if passed_over.is_empty() {
        return "no candidate".to_owned();
    }
    let kind = |m: &Mismatch| match m {
        Mismatch::Pinned(_) => "naming another checkout's path",
        Mismatch::Names(_) => "naming another object",
        Mismatch::Unplaceable(_) => "with a path that has no place here",
        Mismatch::Appeared(_) => "with a path that exists now",
        Mismatch::Changed(_) => "with a path that changed kind",
        Mismatch::Input(_) => "with an input that changed",
        Mismatch::Aliased(_) => "with two inputs that are one file now",
    };
    let example = |m: &Mismatch| match m {
        Mismatch::Pinned(p) | Mismatch::Names(p) | Mismatch::Unplaceable(p) => p.clone(),
        Mismatch::Appeared(p)
        | Mismatch::Changed(p)
        | Mismatch::Input(p)
        | Mismatch::Aliased(p) => p.display().to_string(),
    };
    let mut groups: Vec<(&str, usize, String)> = Vec::new();
    for m in passed_over {
        match groups.iter_mut().find(|(k, _, _)| *k == kind(m)) {
            Some(group) => group.1 += 1,
            None => groups.push((kind(m), 1, example(m))),
        }
    }
    let n = passed_over.len();
    let parts: Vec<String> =
        groups.iter().map(|(k, count, e)| format!("{count} {k} ({e})")).collect();
    format!("{n} candidate{}: {}", if n == 1 { "" } else { "s" }, parts.join(", "))
}

/// Checks `candidate` at `here`: names, pins, then facts about names (grouped by
/// directory), then input digests. Files hashed and directories verified are remembered in
/// `memo` (from `began`). `object` is the object's path as given now.
///
/// # Errors
/// The first [`Mismatch`] found.
pub fn check(
    candidate: &Candidate,
    here: &Location,
    object: &Path,
    depfile: Option<&Path>,
    memo: &mut VerifyMemo,
    inputs: &mut InputMemo,
    began: SystemTime,
) -> Result<(), Mismatch> {
    if let Some(name) = &candidate.object_name
        && here.encode(object.as_os_str()) != *name
    {
        return Err(Mismatch::Names(name.clone()));
    }
    if !candidate.pins.is_empty() {
        let origin = candidate.origin.location();
        for pin in &candidate.pins {
            let path = entry::decode_path(pin);
            let moved = here.here(&origin.spell(path.as_os_str()));
            if moved.as_deref() != Some(path.as_os_str()) {
                return Err(Mismatch::Pinned(pin.clone()));
            }
        }
    }
    let place = |text: &str| -> Result<PathBuf, Mismatch> {
        let spelled = Spelled::decode(text).map_err(|_| Mismatch::Unplaceable(text.into()))?;
        let path = here.here(&spelled).ok_or_else(|| Mismatch::Unplaceable(text.into()))?;
        Ok(here.absolute(Path::new(&path)))
    };
    // The directories this compile writes its outputs into change on every HIT: their
    // facts are checked name by name and never remembered (the memo would be rewritten on
    // every HIT).
    let written: Vec<PathBuf> = [Some(object), depfile]
        .into_iter()
        .flatten()
        .filter_map(|p| here.absolute(p).parent().map(Path::to_path_buf))
        .collect();
    let written_ids: Vec<(u64, u64)> =
        written.iter().filter_map(|w| fs::metadata(w).ok().map(|m| dir_id(&m))).collect();
    for group in &candidate.names {
        let dir = place(&group.dir)?;
        // One stat per directory: its stamp, and whether it is one the compile writes into.
        let meta = fs::metadata(&dir).ok();
        let is_written = written.contains(&dir)
            || meta.as_ref().is_some_and(|m| written_ids.contains(&dir_id(m)));
        let memo = if is_written { None } else { Some(&mut *memo) };
        check_group(&dir, meta.as_ref(), group, memo, began)?;
    }
    let mut files = rustc_hash::FxHashSet::default();
    for input in &candidate.inputs {
        let path = place(&input.path)?;
        let stamp = check_input(&path, &input.digest, memo, inputs, began)?;
        if !distinct_file(&stamp, &mut files) {
            return Err(Mismatch::Aliased(path));
        }
    }
    for listed in &candidate.listed {
        let path = place(&listed.path)?;
        if listing_digest(&path, listed.digest.algorithm()).as_ref() != Some(&listed.digest) {
            return Err(Mismatch::Changed(path));
        }
    }
    Ok(())
}

/// Checks one directory's facts: vouched for by its stamp, else one by one.
fn check_group(
    dir: &Path,
    meta: Option<&std::fs::Metadata>,
    group: &Names,
    memo: Option<&mut VerifyMemo>,
    began: SystemTime,
) -> Result<(), Mismatch> {
    let stamp = meta.map(FileStamp::of);
    let digest = group_digest(group);
    let name = entry::directory_memo_name(dir, &digest);
    if let (Some(stamp), Some(memo)) = (&stamp, memo.as_deref())
        && memo.vouches(&name, stamp, &digest)
    {
        return Ok(());
    }
    if stamp.is_some() || !group.present.is_empty() {
        for absent in &group.absent {
            let path = dir.join(entry::decode_path(absent));
            if fs::symlink_metadata_opt(&path).ok().flatten().is_some() {
                return Err(Mismatch::Appeared(path));
            }
        }
    }
    for present in &group.present {
        let path = dir.join(entry::decode_path(&present.name));
        let now = match present.kind {
            Kind::Symlink => fs::symlink_metadata_opt(&path).ok().flatten(),
            _ => fs::metadata(&path).ok(),
        };
        if now.is_none_or(|meta| kind_of(&meta) != present.kind) {
            return Err(Mismatch::Changed(path));
        }
    }
    // Remembered only if the directory did not change while it was checked.
    if let Some(stamp) = stamp
        && let Some(memo) = memo
        && fs::metadata(dir).ok().map(|m| FileStamp::of(&m)) == Some(stamp)
    {
        memo.remember_if_settled(&name, stamp, digest, began);
    }
    Ok(())
}

/// What `meta` is, as a [`Kind`].
pub fn kind_of(meta: &std::fs::Metadata) -> Kind {
    let t = meta.file_type();
    if t.is_dir() {
        Kind::Directory
    } else if t.is_file() {
        Kind::File
    } else if t.is_symlink() {
        Kind::Symlink
    } else {
        Kind::Other
    }
}

/// A directory's identity: device and inode.
fn dir_id(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// The digest of a directory's facts.
fn group_digest(group: &Names) -> ContentDigest {
    let mut bytes = Vec::with_capacity(64 * (group.absent.len() + group.present.len()));
    for absent in &group.absent {
        bytes.extend_from_slice(b"a\0");
        bytes.extend_from_slice(absent.as_bytes());
        bytes.push(0);
    }
    for present in &group.present {
        bytes.extend_from_slice(format!("p\0{:?}\0", present.kind).as_bytes());
        bytes.extend_from_slice(present.name.as_bytes());
        bytes.push(0);
    }
    ContentDigest::of_bytes(DigestAlgorithm::Blake3, &bytes)
}

/// Checks one input file: its stamp vouched for by the entry's memo, else by the machine's
/// memo of inputs ([`InputMemo`]), else a large file's digest from the machine's memo of
/// large files ([`super::save::shared_digest`]), else its bytes hashed (and remembered in
/// both memos).
fn check_input(
    path: &Path,
    digest: &ContentDigest,
    memo: &mut VerifyMemo,
    inputs: &mut InputMemo,
    began: SystemTime,
) -> Result<FileStamp, Mismatch> {
    let name = entry::header_memo_name(path);
    let meta = match fs::metadata(path) {
        Ok(m) if m.is_file() => m,
        _ => return Err(Mismatch::Input(path.to_path_buf())),
    };
    let stamp = FileStamp::of(&meta);
    if memo.vouches(&name, &stamp, digest) {
        return Ok(stamp);
    }
    if inputs.digest(path, &stamp, digest.algorithm()) == Some(*digest) {
        memo.remember(&name, stamp, *digest, began);
        return Ok(stamp);
    }
    if meta.len() >= super::save::SHARED_MEMO_BYTES {
        return match super::save::shared_digest(&inputs.tool_memo, path, digest.algorithm()) {
            Ok(d) if d == *digest => {
                memo.remember(&name, stamp, d, began);
                Ok(stamp)
            }
            _ => Err(Mismatch::Input(path.to_path_buf())),
        };
    }
    match entry::read_input(path, digest.algorithm()) {
        Ok((actual, _, stamp)) if actual == *digest => {
            memo.remember(&name, stamp, actual, began);
            inputs.remember_digest(path, stamp, actual, began);
            Ok(stamp)
        }
        _ => Err(Mismatch::Input(path.to_path_buf())),
    }
}

/// False when `stamp` is of a file without an execute bit whose device and inode are already
/// in `seen` (which it is added to): two inputs of one compile that are one file. Clang keeps
/// one entry per file (by device and inode) and names it by the first path it was reached
/// through, in debug information and messages, so whether two include paths are one file
/// changes its outputs. A MISS whose inputs are one file under two names is not cached, and
/// a candidate whose inputs have become one file does not apply. Programs (execute bits
/// set) are left out: a driver runs itself again under another name (`clang++` and the
/// `clang` it links to), which does not change any output.
pub(super) fn distinct_file(
    stamp: &FileStamp,
    seen: &mut rustc_hash::FxHashSet<(u64, u64)>,
) -> bool {
    stamp.mode & 0o111 != 0 || seen.insert((stamp.dev, stamp.ino))
}

/// The digest of a directory's entry names (sorted, one per line), or `None` if it cannot
/// be read.
pub fn listing_digest(dir: &Path, algorithm: DigestAlgorithm) -> Option<ContentDigest> {
    let mut names: Vec<Vec<u8>> = fs::read_dir(dir)
        .ok()?
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.as_bytes().to_vec()))
        .collect();
    names.sort();
    Some(ContentDigest::of_bytes(algorithm, &names.join(&b'\n')))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::launcher::entry::{Input, Origin, Present};

    #[test]
    fn facts_hold_until_a_name_appears_or_an_input_changes() {
        let d = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("a/src/inc")).unwrap();
        std::fs::create_dir_all(root.join("a/build")).unwrap();
        std::fs::write(root.join("a/src/inc/x.h"), b"int x;\n").unwrap();
        let here = Location::with_pwd(&root.join("a/build"), None, &[root.join("a")]);
        let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"int x;\n");
        let cand = Candidate {
            observed_by: "trace".into(),
            inputs: vec![Input { path: "\\c1/src/inc/x.h".into(), digest }],
            names: vec![
                Names {
                    dir: "\\c1/src".into(),
                    absent: vec!["x.h".into()],
                    present: vec![Present { name: "inc".into(), kind: Kind::Directory }],
                },
                Names { dir: "../src/inc".into(), absent: vec!["x.h.gch".into()], present: vec![] },
            ],
            listed: vec![],
            pins: vec![],
            object_name: None,
            origin: Origin::of(&here),
            outputs: vec![],
            depfile: None,
            stdout: None,
            stderr: None,
            created_at: String::new(),
        };
        let mut memo = VerifyMemo::new("t");
        let mut inputs = InputMemo::at(&root.join("memo"));
        let obj = Path::new("x.o");
        assert_eq!(
            check(&cand, &here, obj, None, &mut memo, &mut inputs, SystemTime::now()),
            Ok(())
        );
        std::fs::write(root.join("a/src/x.h"), b"int y;\n").unwrap();
        assert_eq!(
            check(&cand, &here, obj, None, &mut memo, &mut inputs, SystemTime::now()),
            Err(Mismatch::Appeared(root.join("a/src/x.h")))
        );
        std::fs::remove_file(root.join("a/src/x.h")).unwrap();
        std::fs::write(root.join("a/build/../src/inc/x.h.gch"), b"").unwrap();
        assert_eq!(
            check(&cand, &here, obj, None, &mut memo, &mut inputs, SystemTime::now()),
            Err(Mismatch::Appeared(root.join("a/build/../src/inc/x.h.gch")))
        );
        std::fs::remove_file(root.join("a/src/inc/x.h.gch")).unwrap();
        std::fs::write(root.join("a/src/inc/x.h"), b"int z;\n").unwrap();
        assert_eq!(
            check(&cand, &here, obj, None, &mut memo, &mut inputs, SystemTime::now()),
            Err(Mismatch::Input(root.join("a/src/inc/x.h")))
        );
        // Another checkout: the same facts hold there unless an output is pinned.
        std::fs::write(root.join("a/src/inc/x.h"), b"int x;\n").unwrap();
        std::fs::create_dir_all(root.join("b/build")).unwrap();
        std::fs::create_dir_all(root.join("b/src/inc")).unwrap();
        std::fs::write(root.join("b/src/inc/x.h"), b"int x;\n").unwrap();
        let there = Location::with_pwd(&root.join("b/build"), None, &[root.join("b")]);
        assert_eq!(
            check(&cand, &there, obj, None, &mut memo, &mut inputs, SystemTime::now()),
            Ok(())
        );
        let pinned = Candidate { pins: vec![entry::encode_path(&root.join("a/src"))], ..cand };
        assert_eq!(
            check(&pinned, &here, obj, None, &mut memo, &mut inputs, SystemTime::now()),
            Ok(())
        );
        assert!(matches!(
            check(&pinned, &there, obj, None, &mut memo, &mut inputs, SystemTime::now()),
            Err(Mismatch::Pinned(_))
        ));
    }
}
