//! `prepared_input_hash`: what is compiled.
//!
//! For input number `i` (label `input[i]`), in order:
//!
//! 1. If the path as given is a symlink: record `(input[i], "symlink:" + text)`, then
//!    follow it.
//! 2. The resolved path must exist ([`Error::PreparedInputMissing`] otherwise; a dangling
//!    top-level symlink fails here).
//! 3. A regular file records `(input[i]/<basename of the resolved path>, file hash)`.
//! 4. A directory is walked without following symlinks, in sorted order. Entries whose
//!    relative path matches an exclude are skipped, and an excluded directory's whole
//!    subtree is skipped with it. Regular files record `(input[i]/<rel>, file hash)`. A
//!    symlink records `(input[i]/<rel>, "symlink:" + text)` and then what it resolves to:
//!    `(input[i]/<rel>/content, file hash)` for a file or the full hash of the directory
//!    for a directory; a dangling link is [`Error::SymlinkTargetMissing`] and a cycle
//!    [`crate::fs::Error::SymlinkCycle`]. FIFOs, sockets and devices record
//!    `(input[i]/<rel>, "special:<kind>")`. Empty directories record nothing.
//!
//! Symlink text is normalised like any other text, so an
//! absolute in-tree link survives relocation; its resolved content is hashed separately,
//! so normalising the text never hides a change.
//!
//! File hash: SHA-256 of the raw bytes, except for files that look like text ([`looks_text`])
//! and are valid UTF-8 and contain a normalisation root: those are hashed after
//! normalisation. Files over 64 MiB are always hashed raw (streamed), so memory stays
//! bounded; a root inside such a file makes relocation a MISS, never a false HIT.
//!
//! Unreadable inputs are errors, never skipped. Files are hashed in parallel (rayon).

use std::path::{Path, PathBuf};

use super::glob::Patterns;
use super::normalize::Normalizer;
use super::records::Records;
use crate::action::Error;
use crate::digest::Sha256Digest;
use crate::fs::{self, EntryKind};

/// Files larger than this are hashed raw without normalisation (bytes).
pub const NORMALIZE_LIMIT_BYTES: u64 = 64 * 1024 * 1024;

const TEXT_EXTENSIONS: &[&str] = &[
    "c", "cc", "cpp", "cxx", "h", "hh", "hpp", "hxx", "py", "sh", "cmake", "json", "ini", "txt",
    "yaml", "yml", "toml", "md",
];

/// The "looks text" rule: no NUL byte, and either a known source/text extension (or the
/// name `CMakeLists.txt`) or valid UTF-8.
pub fn looks_text(name: &str, data: &[u8]) -> bool {
    if data.contains(&0) {
        return false;
    }
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let known =
        name == "CMakeLists.txt" || ext.is_some_and(|e| TEXT_EXTENSIONS.contains(&e.as_str()));
    known || std::str::from_utf8(data).is_ok()
}

/// Hashes one semantic file under the rule in the module docs. `rule_name` is the file
/// name the text rule looks at.
///
/// # Errors
/// [`Error::Fs`] naming the file.
pub fn semantic_file_hash(
    path: &Path,
    rule_name: &str,
    normalizer: &Normalizer,
) -> Result<Sha256Digest, Error> {
    if normalizer.is_empty() {
        return Ok(fs::hash_file(path)?.0);
    }
    let size = fs::metadata(path)?.len();
    if size > NORMALIZE_LIMIT_BYTES {
        return Ok(fs::hash_file(path)?.0);
    }
    let data = fs::read(path)?;
    Ok(hash_bytes_normalized(&data, rule_name, normalizer))
}

/// Hashes bytes under the same rule as [`semantic_file_hash`].
pub fn hash_bytes_normalized(
    data: &[u8],
    rule_name: &str,
    normalizer: &Normalizer,
) -> Sha256Digest {
    if normalizer.may_apply(data)
        && looks_text(rule_name, data)
        && let Ok(text) = std::str::from_utf8(data)
    {
        return Sha256Digest::of_bytes(normalizer.apply(text).as_bytes());
    }
    Sha256Digest::of_bytes(data)
}

/// A file whose hash is still to be computed.
struct Job {
    name: String,
    path: PathBuf,
    rule_name: String,
}

struct Walker<'a> {
    excludes: &'a Patterns,
    /// Absolute paths never walked: directories with their subtrees (cache root, outputs)
    /// and files (the event log).
    skip_dirs: &'a [PathBuf],
    normalizer: &'a Normalizer,
    /// Canonical directories currently being hashed (cycle detection).
    stack: Vec<PathBuf>,
}

/// Computes the prepared-input records for the ordered inputs.
///
/// # Errors
/// See the module docs.
pub fn prepared_input_records(
    inputs: &[PathBuf],
    excludes: &Patterns,
    skip_dirs: &[PathBuf],
    normalizer: &Normalizer,
) -> Result<Records, Error> {
    let mut walker = Walker { excludes, skip_dirs, normalizer, stack: Vec::new() };
    walker.inputs(inputs)
}

impl Walker<'_> {
    fn inputs(&mut self, inputs: &[PathBuf]) -> Result<Records, Error> {
        let mut records = Records::new();
        let mut jobs = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let label = format!("input[{i}]");
            let abs = fs::absolute(input)?;
            if let Some(meta) = fs::symlink_metadata_opt(&abs)?
                && meta.file_type().is_symlink()
            {
                let text = fs::read_link(&abs)?;
                records.push(label.clone(), format!("symlink:{}", self.normalizer.apply(&text)));
            }
            let resolved = fs::resolve_nonstrict(&abs)?;
            let Some(meta) = fs::symlink_metadata_opt(&resolved)? else {
                return Err(Error::PreparedInputMissing { path: abs });
            };
            if meta.is_dir() {
                self.dir(&resolved, &label, &mut records, &mut jobs)?;
            } else if meta.is_file() {
                let base = resolved.file_name().map(fs::name::encode_os).unwrap_or_default();
                jobs.push(Job { name: format!("{label}/{base}"), path: resolved, rule_name: base });
            } else {
                records.push(label, format!("special:{}", special_kind(&meta)));
            }
        }
        let hashed: Vec<Result<(String, Sha256Digest), Error>> =
            crate::parallel::map(&jobs, crate::parallel::Workers::Pool, |job| {
                semantic_file_hash(&job.path, &job.rule_name, self.normalizer)
                    .map(|d| (job.name.clone(), d))
            });
        for item in hashed {
            let (name, digest) = item?;
            records.push(name, digest.to_hex());
        }
        Ok(records)
    }

    fn dir(
        &mut self,
        dir: &Path,
        label: &str,
        records: &mut Records,
        jobs: &mut Vec<Job>,
    ) -> Result<(), Error> {
        self.stack.push(dir.to_path_buf());
        let mut walk = walkdir_sorted(dir);
        while let Some(entry) = walk.next() {
            let entry = entry?;
            let rel = entry.rel.as_str();
            if self.skip_dirs.contains(&entry.path) {
                walk.skip_subtree(&entry.path);
                continue;
            }
            if self.excludes.is_match_rel(&entry.rel) {
                if entry.kind == EntryKind::Dir {
                    walk.skip_subtree(&entry.path);
                }
                continue;
            }
            let name = format!("{label}/{rel}");
            match entry.kind {
                EntryKind::Dir => {}
                EntryKind::File => jobs.push(Job {
                    name,
                    path: entry.path.clone(),
                    rule_name: entry.rel.file_name().to_owned(),
                }),
                EntryKind::Symlink => {
                    let text = fs::read_link(&entry.path)?;
                    records.push(name.clone(), format!("symlink:{}", self.normalizer.apply(&text)));
                    self.symlink_content(&entry.path, &text, &name, records, jobs)?;
                }
                EntryKind::Special(kind) => records.push(name, format!("special:{kind}")),
            }
        }
        self.stack.pop();
        Ok(())
    }

    fn symlink_content(
        &mut self,
        link: &Path,
        text: &str,
        name: &str,
        records: &mut Records,
        jobs: &mut Vec<Job>,
    ) -> Result<(), Error> {
        let target = match fs::canonicalize(link) {
            Ok(t) => t,
            Err(fs::Error::Io { source, .. }) if source.raw_os_error() == Some(40) => {
                // ELOOP: a chain of links that never ends.
                let target = fs::link_text_bytes(text).map_or_else(|_| text.into(), PathBuf::from);
                return Err(fs::Error::SymlinkCycle { path: link.into(), target }.into());
            }
            Err(e) if e.is_not_found() => {
                return Err(Error::SymlinkTargetMissing {
                    link: link.to_path_buf(),
                    target: text.to_owned(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let meta = fs::metadata(&target)?;
        let content = format!("{name}/content");
        if meta.is_file() {
            let rule = target.file_name().map(fs::name::encode_os).unwrap_or_default();
            jobs.push(Job { name: content, path: target, rule_name: rule });
        } else if meta.is_dir() {
            if self.stack.contains(&target) {
                return Err(fs::Error::SymlinkCycle { path: link.into(), target }.into());
            }
            let mut nested = Walker {
                excludes: self.excludes,
                skip_dirs: self.skip_dirs,
                normalizer: self.normalizer,
                stack: std::mem::take(&mut self.stack),
            };
            let sub = nested.inputs(std::slice::from_ref(&target));
            self.stack = nested.stack;
            records.push(content, sub?.hash().to_hex());
        } else {
            records.push(content, format!("special:{}", special_kind(&meta)));
        }
        Ok(())
    }
}

fn special_kind(meta: &std::fs::Metadata) -> &'static str {
    match EntryKind::of(meta) {
        EntryKind::Special(kind) => kind,
        EntryKind::Symlink => "symlink",
        EntryKind::Dir => "directory",
        EntryKind::File => "file",
    }
}

/// A sorted walk that can skip the subtree of an excluded directory.
struct SortedWalk<'a> {
    inner: Box<dyn Iterator<Item = fs::Result<fs::WalkEntry>> + 'a>,
    skip: Option<PathBuf>,
}

fn walkdir_sorted(dir: &Path) -> SortedWalk<'_> {
    SortedWalk { inner: Box::new(fs::walk(dir)), skip: None }
}

impl SortedWalk<'_> {
    fn skip_subtree(&mut self, dir: &Path) {
        self.skip = Some(dir.to_path_buf());
    }

    fn next(&mut self) -> Option<fs::Result<fs::WalkEntry>> {
        loop {
            let item = self.inner.next()?;
            if let (Some(skip), Ok(entry)) = (&self.skip, &item) {
                if entry.path.starts_with(skip) {
                    continue;
                }
                self.skip = None;
            }
            return Some(item);
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::fs as stdfs;
    use std::os::unix::fs::symlink;

    fn records(inputs: &[PathBuf], roots: &[String]) -> Result<Records, Error> {
        let ex = Patterns::excludes_with::<&str>(&[]).unwrap();
        prepared_input_records(inputs, &ex, &[], &Normalizer::new(roots))
    }

    #[test]
    fn relocation_and_change() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        for root in [a.path(), b.path()] {
            stdfs::create_dir_all(root.join("src/inc")).unwrap();
            stdfs::write(
                root.join("src/a.c"),
                format!("#include \"{}/src/inc/x.h\"\n", root.display()),
            )
            .unwrap();
            stdfs::write(root.join("src/inc/x.h"), b"int x;\n").unwrap();
            stdfs::create_dir_all(root.join("src/.git")).unwrap();
            stdfs::write(root.join("src/.git/HEAD"), root.display().to_string()).unwrap();
        }
        let ra = records(&[a.path().join("src")], &[a.path().display().to_string()]).unwrap();
        let rb = records(&[b.path().join("src")], &[b.path().display().to_string()]).unwrap();
        assert_eq!(ra.hash(), rb.hash());
        assert_eq!(ra.len(), 2, "{ra:?}");
        stdfs::write(b.path().join("src/inc/x.h"), b"int y;\n").unwrap();
        let rb2 = records(&[b.path().join("src")], &[b.path().display().to_string()]).unwrap();
        assert_ne!(ra.hash(), rb2.hash());
    }

    #[test]
    fn symlink_cycle_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        stdfs::create_dir(d.path().join("x")).unwrap();
        symlink("..", d.path().join("x/up")).unwrap();
        let err = records(&[d.path().join("x")], &[]).unwrap_err();
        assert!(err.to_string().contains("cycle"), "{err}");
    }

    #[test]
    fn dangling_link_and_missing_input_are_errors() {
        let d = tempfile::tempdir().unwrap();
        stdfs::create_dir(d.path().join("x")).unwrap();
        symlink("nowhere", d.path().join("x/l")).unwrap();
        assert!(matches!(
            records(&[d.path().join("x")], &[]),
            Err(Error::SymlinkTargetMissing { .. })
        ));
        assert!(matches!(
            records(&[d.path().join("nope")], &[]),
            Err(Error::PreparedInputMissing { .. })
        ));
    }

    #[test]
    fn binary_and_non_utf8_are_byte_exact() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().display().to_string();
        let bin = [root.as_bytes(), b"\0\xff"].concat();
        stdfs::write(d.path().join("blob.c"), &bin).unwrap();
        let r = records(&[d.path().join("blob.c")], std::slice::from_ref(&root)).unwrap();
        assert_eq!(r.iter().next().unwrap().value, Sha256Digest::of_bytes(&bin).to_hex());
        let latin1 = [root.as_bytes(), b"/x \xe9"].concat();
        stdfs::write(d.path().join("l.txt"), &latin1).unwrap();
        let r = records(&[d.path().join("l.txt")], &[root]).unwrap();
        assert_eq!(r.iter().next().unwrap().value, Sha256Digest::of_bytes(&latin1).to_hex());
    }

    #[test]
    fn excluded_directory_skips_subtree() {
        let d = tempfile::tempdir().unwrap();
        stdfs::create_dir_all(d.path().join("build/sub")).unwrap();
        stdfs::write(d.path().join("build/sub/o.o"), b"x").unwrap();
        stdfs::write(d.path().join("keep.c"), b"y").unwrap();
        let ex = Patterns::excludes_with(&["build"]).unwrap();
        let r = prepared_input_records(&[d.path().to_path_buf()], &ex, &[], &Normalizer::default())
            .unwrap();
        let names: Vec<_> = r.iter().map(|r| r.name.clone()).collect();
        assert_eq!(names, ["input[0]/keep.c"]);
    }
}
