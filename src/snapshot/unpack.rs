//! Unpacking a snapshot into an empty staging directory, under DESIGN.md invariant 4:
//! restores stay inside their target.
//!
//! Every entry is checked before anything is written for it; the first failure stops the
//! unpack with [`Error::Corrupt`] (the caller deletes the staging directory, so nothing of
//! a rejected snapshot survives):
//!
//! * the path, taken as bytes, must be a [`RelPath`] (no absolute path, no `..` or `.`
//!   segment, no empty segment, no NUL), and lie under `actions-v1/`, or be the manifest.
//!   Any other byte is allowed in a name: names and symlink texts that are not UTF-8 are
//!   restored byte for byte and compared with the manifest in the name encoding
//!   ([`crate::fs::name`]);
//! * types: directories, regular files and symlinks only. Hard links, character and block
//!   devices, FIFOs, sparse files, pax global headers and anything else are rejected (not
//!   skipped);
//! * no path twice; no entry after the manifest, which must be the last one;
//! * symlinks only strictly below an entry's `artifacts/` directory
//!   ([`is_inside_entry_artifacts`]): a symlink at a layout position (`actions-v1/third_party
//!   -> /elsewhere`, a unit, a key, `artifacts` itself) is rejected, because the engine
//!   would later save entries through it;
//! * parent directories are created without passing through a symlink
//!   ([`fs::create_dir_all_within`]), so a symlink in the archive can never be written
//!   through; files are created with `O_CREAT|O_EXCL` (never through a final symlink, never
//!   over an existing path);
//! * file modes are 0644, or 0755 with the owner-exec bit: setuid, setgid and sticky bits
//!   (and group/other write) are **dropped**, not rejected; ownership and mtimes in the
//!   archive are ignored;
//! * sizes are bounded: the number of entries and the sum of file bytes may not exceed the
//!   sidecar's declared counts ([`UnpackLimits`]), checked before each file is written;
//! * at the end, the manifest (strict record, digest equal to the sidecar's) must list
//!   exactly the directories, files (size, owner-exec bit, SHA-256 of the bytes actually
//!   written) and symlinks that were unpacked.
//!
//! The parsing thread decompresses and checks; regular files are written, hashed and
//! chmodded by a few writer threads (`writer.rs`) so that decompression, hashing and
//! writing overlap. Every check above happens before a file is handed to a writer, and
//! the writers are always joined before [`unpack`] returns, so nothing is written into
//! the destination after an error is reported.
//!
//! Symlink *targets* are kept as given (an L1 entry may record `lib.so -> /usr/lib/x.so`);
//! strata never follows them while restoring.
//!
//! # Limitations
//! GNU long-name and long-link entries are read into memory by the `tar` crate before
//! strata sees the entry; a reader in front of it (`tar_entry::ExtensionLimit`) rejects one
//! that claims more than 64 KiB, and any pax or sparse header (strata never writes them),
//! from the header alone, so a few kilobytes of zstd cannot make unpack allocate gigabytes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::manifest::{
    FileRecord, MANIFEST_ENTRY, MANIFEST_SCHEMA, MAX_MANIFEST_BYTES, SnapshotManifest,
    SymlinkRecord,
};
use super::writer::{FeedError, WriteError, WriterPool};
use super::{CARRIED_DIR, Compression, Error, manifest};
use crate::content::layout::is_inside_entry_artifacts;
use crate::content::temp;
use crate::fs::{self, RelPath};

const BUF_BYTES: usize = 1024 * 1024;

/// Bounds and expectations for [`unpack`], normally taken from the sidecar.
#[derive(Debug, Clone, Default)]
pub struct UnpackLimits {
    /// Most directories + files + symlinks.
    pub max_entries: u64,
    /// Most bytes of file content in total.
    pub max_file_bytes: u64,
    /// The manifest's record digest must equal this (`sha256:<hex>`), if given.
    pub manifest_digest: Option<String>,
    /// The manifest's key must equal this, if given.
    pub key: Option<String>,
    /// The compression the object must use, if given.
    pub compression: Option<Compression>,
}

/// What [`unpack`] restored.
#[derive(Debug, Clone)]
pub struct UnpackReport {
    /// The verified manifest.
    pub manifest: SnapshotManifest,
    /// Its record digest (`sha256:<hex>`).
    pub manifest_digest: String,
    /// Number of regular files written.
    pub files: u64,
    /// Bytes of file content written.
    pub file_bytes: u64,
}

/// State of one unpack.
struct Unpacker<'a> {
    dest: &'a Path,
    object: String,
    limits: &'a UnpackLimits,
    known_dirs: HashSet<String>,
    seen: HashSet<String>,
    directories: BTreeSet<RelPath>,
    files: BTreeMap<RelPath, FileRecord>,
    symlinks: BTreeMap<RelPath, SymlinkRecord>,
    /// Files and symlinks unpacked so far (true for a symlink).
    non_dirs: HashMap<String, bool>,
    entries: u64,
    file_bytes: u64,
    pool: WriterPool,
}

/// Why the entry loop stopped early.
enum Stop {
    /// A check failed.
    Error(Error),
    /// A writer failed; its error comes from [`WriterPool::finish`].
    Writer,
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Error(e)
    }
}

impl Unpacker<'_> {
    fn corrupt(&self, reason: impl Into<String>) -> Error {
        Error::corrupt(self.object.clone(), reason)
    }

    /// Maps a failure to create a path: a symlink or non-directory in the way is the
    /// archive's fault; anything else is local.
    fn create_error(&self, rel: &str, e: fs::Error) -> Error {
        match e {
            fs::Error::SymlinkInPath { link, .. } => self.corrupt(format!(
                "{rel}: {} is a symlink; writing through symlinks is not allowed",
                link.strip_prefix(self.dest).unwrap_or(&link).display()
            )),
            fs::Error::NotADirectory { component, .. } => self.corrupt(format!(
                "{rel}: {} is not a directory",
                component.strip_prefix(self.dest).unwrap_or(&component).display()
            )),
            fs::Error::Io { ref source, .. } if source.kind() == io::ErrorKind::AlreadyExists => {
                self.corrupt(format!("{rel}: conflicts with an earlier entry"))
            }
            other => Error::Local(other),
        }
    }

    /// Creates directory `dir` (and its parents) inside the destination.
    fn ensure_dir(&mut self, dir: &RelPath) -> Result<PathBuf, Error> {
        let rel = dir.as_str();
        let path = dir.to_path(self.dest);
        if self.known_dirs.contains(rel) {
            return Ok(path);
        }
        let mut prefix_end = 0;
        for component in rel.split('/') {
            prefix_end += component.len();
            let prefix = rel.get(..prefix_end).unwrap_or(rel);
            match self.non_dirs.get(prefix) {
                Some(true) => {
                    return Err(self.corrupt(format!(
                        "{rel}: {prefix} is a symlink; writing through symlinks is not allowed"
                    )));
                }
                Some(false) => {
                    return Err(self.corrupt(format!("{rel}: {prefix} is a file, not a directory")));
                }
                None => {}
            }
            prefix_end += 1;
        }
        fs::create_dir_all_within(self.dest, &dir.to_relative_path(), 0o755)
            .map_err(|e| self.create_error(rel, e))?;
        let mut current = rel;
        loop {
            if !self.known_dirs.insert(current.to_owned()) {
                break;
            }
            match current.rsplit_once('/') {
                Some((parent, _)) => current = parent,
                None => break,
            }
        }
        Ok(path)
    }

    fn ensure_parent(&mut self, rel: &RelPath) -> Result<(), Error> {
        if let Some(parent) = rel.parent() {
            self.ensure_dir(&parent)?;
        }
        Ok(())
    }

    fn count_entry(&mut self) -> Result<(), Error> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(self.corrupt(format!(
                "more than the {} entries its sidecar declares",
                self.limits.max_entries
            )));
        }
        Ok(())
    }

    fn file(
        &mut self,
        rel: RelPath,
        mode: u32,
        size: u64,
        data: &mut dyn Read,
    ) -> Result<(), Stop> {
        self.count_entry()?;
        if self.file_bytes.saturating_add(size) > self.limits.max_file_bytes {
            return Err(Stop::Error(self.corrupt(format!(
                "{rel}: {size} bytes would exceed the {} bytes of file content its sidecar \
                 declares",
                self.limits.max_file_bytes
            ))));
        }
        self.ensure_parent(&rel)?;
        if self.pool.failed() {
            return Err(Stop::Writer);
        }
        let path = rel.to_path(self.dest);
        self.non_dirs.insert(rel.as_str().to_owned(), false);
        self.file_bytes += size;
        let executable = fs::perm::is_owner_exec(mode);
        match self.pool.write_file(rel, path, executable, size, data) {
            Ok(()) => Ok(()),
            Err(FeedError::Archive(reason)) => Err(Stop::Error(self.corrupt(reason))),
            Err(FeedError::WriterStopped) => Err(Stop::Writer),
        }
    }

    fn symlink(&mut self, rel: RelPath, target: &[u8]) -> Result<(), Error> {
        self.count_entry()?;
        let in_artifacts = rel
            .as_str()
            .strip_prefix(CARRIED_DIR)
            .and_then(|r| r.strip_prefix('/'))
            .is_some_and(is_inside_entry_artifacts);
        if !in_artifacts {
            return Err(self.corrupt(format!(
                "{rel} is a symlink outside an entry's artifacts/ directory; only artifacts \
                 may be symlinks (a symlink at a layout position would send later cache \
                 writes outside the cache directory)"
            )));
        }
        if target.is_empty() || target.contains(&0) {
            return Err(self.corrupt(format!("{rel}: empty or invalid symlink text")));
        }
        // Any bytes: the text is recorded in the name encoding and put back byte for byte.
        let target = fs::name::encode(target);
        self.ensure_parent(&rel)?;
        fs::symlink(&target, &rel.to_path(self.dest))
            .map_err(|e| self.create_error(rel.as_str(), e))?;
        self.non_dirs.insert(rel.as_str().to_owned(), true);
        self.symlinks.insert(rel.clone(), SymlinkRecord { path: rel, target });
        Ok(())
    }

    fn directory(&mut self, rel: RelPath) -> Result<(), Error> {
        self.count_entry()?;
        self.ensure_dir(&rel)?;
        self.directories.insert(rel);
        Ok(())
    }

    /// Compares what was unpacked with the manifest.
    fn check_manifest(&self, manifest: &SnapshotManifest) -> Result<(), Error> {
        if manifest.layout != CARRIED_DIR {
            return Err(
                self.corrupt(format!("the manifest describes layout {:?}", manifest.layout))
            );
        }
        if let Some(key) = &self.limits.key
            && &manifest.key != key
        {
            return Err(self.corrupt(format!("the manifest names another key ({})", manifest.key)));
        }
        let dirs: BTreeSet<RelPath> = manifest.directories.iter().cloned().collect();
        if let Some(extra) = self.directories.symmetric_difference(&dirs).next() {
            let side = if dirs.contains(extra) {
                "missing from the archive"
            } else {
                "not in the manifest"
            };
            return Err(self.corrupt(format!("manifest mismatch: directory {extra} is {side}")));
        }
        let listed: BTreeMap<&RelPath, &FileRecord> =
            manifest.files.iter().map(|f| (&f.path, f)).collect();
        if listed.len() != manifest.files.len() {
            return Err(self.corrupt("manifest mismatch: a file is listed twice"));
        }
        for (path, actual) in &self.files {
            match listed.get(path) {
                None => {
                    return Err(self.corrupt(format!(
                        "manifest mismatch: file {path} is not in the manifest"
                    )));
                }
                Some(expected) if expected.size_bytes != actual.size_bytes => {
                    return Err(self.corrupt(format!(
                        "manifest mismatch: file {path} has {} bytes, the manifest declares {}",
                        actual.size_bytes, expected.size_bytes
                    )));
                }
                Some(expected) if expected.sha256 != actual.sha256 => {
                    return Err(self.corrupt(format!(
                        "manifest mismatch: file {path} has SHA-256 {}, the manifest declares {}",
                        actual.sha256, expected.sha256
                    )));
                }
                Some(expected) if expected.executable != actual.executable => {
                    return Err(self.corrupt(format!(
                        "manifest mismatch: file {path} has another owner-exec bit"
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(missing) = listed.keys().find(|p| !self.files.contains_key(**p)) {
            return Err(self.corrupt(format!(
                "manifest mismatch: file {missing} is missing from the archive"
            )));
        }
        let links: BTreeMap<&RelPath, &SymlinkRecord> =
            manifest.symlinks.iter().map(|s| (&s.path, s)).collect();
        let same_links = links.len() == self.symlinks.len()
            && self
                .symlinks
                .iter()
                .all(|(p, s)| links.get(p).is_some_and(|m| m.target == s.target));
        if !same_links {
            return Err(self.corrupt("manifest mismatch: the symlinks differ"));
        }
        if manifest.file_bytes != self.file_bytes {
            return Err(self.corrupt("manifest mismatch: the total file size differs"));
        }
        Ok(())
    }
}

/// Wraps `input` (the object's bytes, named `label` in errors) in the decoder its magic
/// number names.
fn open_decoder<'r>(
    input: Box<dyn Read + 'r>,
    label: &str,
    limits: &UnpackLimits,
) -> Result<Box<dyn Read + 'r>, Error> {
    let mut reader = BufReader::with_capacity(BUF_BYTES, input);
    let head = reader
        .fill_buf()
        .map_err(|e| Error::corrupt(label, format!("cannot read the object: {e}")))?;
    let Some(format) = Compression::detect(head) else {
        return Err(Error::corrupt(label, "neither zstd nor gzip (unknown magic number)"));
    };
    if let Some(expected) = limits.compression
        && expected != format
    {
        return Err(Error::corrupt(
            label,
            format!("the object is {format}, its sidecar says {expected}"),
        ));
    }
    let decoder: Box<dyn Read + 'r> = match format {
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(reader)
                .map_err(|e| Error::corrupt(label, format!("cannot start zstd: {e}")))?,
        ),
        Compression::Gzip => Box::new(flate2::bufread::GzDecoder::new(reader)),
    };
    Ok(Box::new(BufReader::with_capacity(BUF_BYTES, decoder)))
}

/// Unpacks the snapshot file `object` into `dest`, an existing empty directory (see the
/// module docs for every check). `label` names the snapshot in errors (its key).
///
/// # Errors
/// [`Error::Corrupt`] for anything wrong with the snapshot; [`Error::Local`] for local
/// write failures. On error `dest` holds a partial tree: delete it.
pub fn unpack(
    object: &Path,
    dest: &Path,
    limits: &UnpackLimits,
    label: &str,
) -> Result<UnpackReport, Error> {
    let mut file = fs::open(object)?;
    unpack_from(&mut file, dest, limits, label)
}

/// [`unpack`] reading the object's bytes from `input` (a restore passes the download as
/// it arrives). Reads only as far as the archive goes: the caller reads any rest (a
/// restore hashes the whole object).
///
/// # Errors
/// As [`unpack`]; a failure to read `input` is [`Error::Corrupt`] (a restore reports its
/// download's own error first).
pub fn unpack_from(
    input: &mut dyn Read,
    dest: &Path,
    limits: &UnpackLimits,
    label: &str,
) -> Result<UnpackReport, Error> {
    let reader = open_decoder(Box::new(input), label, limits)?;
    let mut state = Unpacker {
        dest,
        object: label.to_owned(),
        limits,
        known_dirs: HashSet::from([String::new()]),
        seen: HashSet::new(),
        directories: BTreeSet::new(),
        files: BTreeMap::new(),
        symlinks: BTreeMap::new(),
        non_dirs: HashMap::new(),
        entries: 0,
        file_bytes: 0,
        pool: WriterPool::new(),
    };
    let looped = read_entries(&mut state, reader);
    // Always wait for the writers, so that nothing writes into `dest` after we return.
    let pool = std::mem::replace(&mut state.pool, WriterPool::empty());
    let written = pool.finish();
    let found = match looped {
        Ok(found) => found,
        Err(Stop::Error(e)) => return Err(e),
        Err(Stop::Writer) => None,
    };
    let records = written.map_err(|e| match e {
        WriteError::Exists(rel) => state.corrupt(format!("{rel}: conflicts with an earlier entry")),
        WriteError::Io(e) => Error::Local(e),
    })?;
    state.files = records.into_iter().map(|r| (r.path.clone(), r)).collect();
    let Some((manifest, manifest_digest)) = found else {
        return Err(state
            .corrupt("no manifest at the end: the object is truncated or not a strata snapshot"));
    };
    state.check_manifest(&manifest)?;
    Ok(UnpackReport {
        manifest,
        manifest_digest,
        files: state.files.len() as u64,
        file_bytes: state.file_bytes,
    })
}

/// Reads and applies every entry; returns the manifest and its digest if one was found.
fn read_entries(
    state: &mut Unpacker<'_>,
    reader: Box<dyn Read + '_>,
) -> Result<Option<(SnapshotManifest, String)>, Stop> {
    let limits = state.limits;
    // A long-name header's claimed size must not decide what is held in memory.
    let mut archive = tar::Archive::new(crate::tar_entry::ExtensionLimit::new(reader, "snapshots"));
    let mut found: Option<(SnapshotManifest, String)> = None;
    let entries =
        archive.entries().map_err(|e| state.corrupt(format!("cannot read the archive: {e}")))?;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| state.corrupt(format!("cannot read the archive: {e}")))?;
        if found.is_some() {
            return Err(state.corrupt("an entry follows the manifest, which must be last").into());
        }
        let raw = entry.path_bytes().into_owned();
        // Names are bytes: the path is recorded in the name encoding, and every check below
        // (relative, no `.`/`..`, no empty segment, no NUL) holds for the bytes themselves.
        let text = fs::name::encode(&raw);
        let kind = entry.header().entry_type();
        let trimmed = if kind.is_dir() { raw.strip_suffix(b"/").unwrap_or(&raw) } else { &raw };
        let rel = RelPath::from_bytes(trimmed).map_err(|e| match e {
            fs::Error::UnsafePath { reason, .. } => {
                state.corrupt(format!("entry path {text:?} is unsafe ({reason})"))
            }
            other => state.corrupt(format!("entry path {text:?}: {other}")),
        })?;
        if !state.seen.insert(rel.as_str().to_owned()) {
            return Err(state.corrupt(format!("{rel} appears twice")).into());
        }
        if rel.as_str() == MANIFEST_ENTRY {
            if !kind.is_file() || entry.size() > MAX_MANIFEST_BYTES {
                return Err(state
                    .corrupt("the manifest entry is not a file of at most 64 MiB")
                    .into());
            }
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| state.corrupt(format!("cannot read the manifest: {e}")))?;
            let (envelope, parsed) =
                manifest::load::<SnapshotManifest>(&bytes, &MANIFEST_SCHEMA, "manifest")
                    .map_err(|e| state.corrupt(e.one_line()))?;
            let digest = envelope.content_digest.to_prefixed();
            if let Some(expected) = &limits.manifest_digest
                && expected != &digest
            {
                return Err(state
                    .corrupt(format!(
                        "the manifest digest {digest} differs from the sidecar's {expected}"
                    ))
                    .into());
            }
            found = Some((parsed, digest));
            continue;
        }
        let inside = rel.as_str() == CARRIED_DIR
            || rel.as_str().strip_prefix(CARRIED_DIR).is_some_and(|r| r.starts_with('/'));
        if !inside {
            return Err(state.corrupt(format!("{rel} is outside {CARRIED_DIR}/")).into());
        }
        let header_type = entry.header().entry_type().as_byte();
        if kind.is_dir() {
            state.directory(rel)?;
        } else if kind.is_symlink() {
            let target = entry.link_name_bytes().map(|t| t.into_owned()).unwrap_or_default();
            state.symlink(rel, &target)?;
        } else if kind.is_file() {
            let mode = entry.header().mode().map_err(|e| state.corrupt(format!("{rel}: {e}")))?;
            let size = entry.size();
            state.file(rel, mode, size, &mut entry)?;
        } else {
            let what = if kind.is_hard_link() {
                "a hard link; hard links are not allowed".to_owned()
            } else if kind.is_character_special() || kind.is_block_special() {
                "a device node; devices are not allowed".to_owned()
            } else if kind.is_fifo() {
                "a FIFO; FIFOs are not allowed".to_owned()
            } else {
                format!("an entry of unsupported type {:?}", char::from(header_type))
            };
            return Err(state.corrupt(format!("{rel} is {what}")).into());
        }
    }
    Ok(found)
}

/// Unpacks a local snapshot file into `dest`, which must not exist: into a staging
/// directory beside it first, then renamed into place (no replace). Without a sidecar the
/// entry count and byte bounds are not enforced (the file is the caller's own); every
/// other check of [`unpack`] applies.
///
/// # Errors
/// As [`unpack`]; [`Error::Local`] if `dest` exists or its parent cannot be written.
pub fn unpack_into_new(object: &Path, dest: &Path) -> Result<UnpackReport, Error> {
    let dest = fs::absolute(dest)?;
    if fs::symlink_metadata_opt(&dest)?.is_some() {
        return Err(fs::Error::AlreadyExists { path: dest }.into());
    }
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent)?;
    }
    let staging = temp::staging_beside(&dest, 0o755)?;
    let limits =
        UnpackLimits { max_entries: u64::MAX, max_file_bytes: u64::MAX, ..UnpackLimits::default() };
    let label = object.display().to_string();
    let report = unpack(object, staging.path(), &limits, &label)?;
    fs::publish_dir(staging, &dest, false).map_err(|(e, _staging)| Error::Local(e))?;
    Ok(report)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::snapshot::pack::{PackOptions, pack};
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::fs::symlink;

    fn inventory(root: &Path) -> Vec<(String, String)> {
        fs::walk(root)
            .map(|e| e.unwrap())
            .map(|e| {
                let what = match e.kind {
                    fs::EntryKind::File => {
                        let mode = e.metadata.permissions().mode() & 0o7777;
                        format!("file {:o} {:?}", mode, std::fs::read(&e.path).unwrap())
                    }
                    fs::EntryKind::Dir => "dir".to_owned(),
                    fs::EntryKind::Symlink => format!("link {}", fs::read_link(&e.path).unwrap()),
                    fs::EntryKind::Special(k) => k.to_owned(),
                };
                (e.rel.as_str().to_owned(), what)
            })
            .collect()
    }

    fn limits(report: &crate::snapshot::pack::PackReport) -> UnpackLimits {
        let m = &report.manifest;
        UnpackLimits {
            max_entries: (m.directories.len() + m.files.len() + m.symlinks.len()) as u64,
            max_file_bytes: m.file_bytes,
            manifest_digest: Some(report.manifest_digest.clone()),
            key: Some(m.key.clone()),
            compression: None,
        }
    }

    fn round_trip(cache: &Path, compression: Compression) -> (PathBuf, tempfile::TempDir) {
        let work = tempfile::tempdir().unwrap();
        let object = work.path().join("object");
        let options = PackOptions {
            compression,
            level: compression.default_level(),
            ..PackOptions::new("test-key")
        };
        let report = pack(cache, &object, &options).unwrap();
        let (digest, size) = fs::hash_file(&object).unwrap();
        assert_eq!((digest, size), (report.object_sha256, report.object_size_bytes));
        let dest = work.path().join("dest");
        std::fs::create_dir(&dest).unwrap();
        let unpacked = unpack(&object, &dest, &limits(&report), "test-key").unwrap();
        assert_eq!(unpacked.manifest, report.manifest);
        (dest, work)
    }

    #[test]
    fn pack_then_unpack_gives_back_the_tree() {
        let src = tempfile::tempdir().unwrap();
        let cache = src.path();
        let entry = cache.join("actions-v1/third_party/zlib/k1");
        std::fs::create_dir_all(entry.join("artifacts/lib")).unwrap();
        std::fs::write(entry.join("manifest.json"), b"{}").unwrap();
        std::fs::write(entry.join("artifacts/lib/libz.so.1"), vec![7u8; 70_000]).unwrap();
        std::fs::write(entry.join("artifacts/tool"), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            entry.join("artifacts/tool"),
            std::fs::Permissions::from_mode(0o4775),
        )
        .unwrap();
        std::fs::write(entry.join("artifacts/.hidden"), b"").unwrap();
        symlink("libz.so.1", entry.join("artifacts/lib/libz.so")).unwrap();
        symlink("/usr/lib/libc.so", entry.join("artifacts/lib/ext.so")).unwrap();
        let long = "d".repeat(120);
        std::fs::create_dir_all(cache.join("actions-v1").join(&long).join(&long)).unwrap();
        std::fs::write(cache.join("actions-v1").join(&long).join(&long).join("f"), b"long")
            .unwrap();
        std::fs::write(cache.join("actions-v1/third_party/.last-used"), b"").unwrap();
        // Never packed: machine-local state and crash leftovers.
        std::fs::create_dir_all(cache.join(".locks/entry")).unwrap();
        std::fs::create_dir_all(cache.join(".local/tool-memo")).unwrap();
        std::fs::write(cache.join(".updated"), b"").unwrap();
        let leftover = cache.join("actions-v1/third_party/zlib/.k2.tmp-0123456789abcdef");
        std::fs::create_dir_all(leftover.join("artifacts")).unwrap();
        std::fs::write(leftover.join("artifacts/partial"), b"x").unwrap();
        std::fs::write(entry.join("artifacts/.strata-Ab12Cd.tmp"), b"x").unwrap();

        for compression in [Compression::Zstd, Compression::Gzip] {
            let (dest, _work) = round_trip(cache, compression);
            let mut expected = inventory(&cache.join("actions-v1"));
            expected.retain(|(rel, _)| !rel.contains(".k2.tmp-") && !rel.contains(".strata-"));
            for (rel, what) in expected.iter_mut() {
                if rel.ends_with("artifacts/tool") {
                    *what = what.replacen("file 4775", "file 755", 1);
                }
            }
            assert_eq!(inventory(&dest.join("actions-v1")), expected);
            let top: Vec<String> = inventory(&dest).into_iter().map(|(r, _)| r).collect();
            assert!(top.iter().all(|r| r.starts_with("actions-v1")), "{top:?}");
        }
    }

    #[test]
    fn an_empty_cache_packs_an_empty_snapshot() {
        let src = tempfile::tempdir().unwrap();
        let (dest, _work) = round_trip(src.path(), Compression::Zstd);
        assert_eq!(inventory(&dest), [("actions-v1".to_owned(), "dir".to_owned())]);
    }

    #[test]
    fn limits_are_enforced() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("actions-v1/a")).unwrap();
        std::fs::write(src.path().join("actions-v1/a/f"), vec![1u8; 1000]).unwrap();
        let work = tempfile::tempdir().unwrap();
        let object = work.path().join("o");
        let report = pack(src.path(), &object, &PackOptions::new("k")).unwrap();
        for (tweak, expect) in [
            (UnpackLimits { max_file_bytes: 999, ..limits(&report) }, "file content"),
            (UnpackLimits { max_entries: 2, ..limits(&report) }, "entries"),
            (
                UnpackLimits { manifest_digest: Some("sha256:00".into()), ..limits(&report) },
                "digest",
            ),
            (UnpackLimits { key: Some("other".into()), ..limits(&report) }, "another key"),
            (
                UnpackLimits { compression: Some(Compression::Gzip), ..limits(&report) },
                "sidecar says",
            ),
        ] {
            let dest = tempfile::tempdir().unwrap();
            let err = unpack(&object, dest.path(), &tweak, "k").unwrap_err();
            assert!(err.is_corrupt() && err.to_string().contains(expect), "{expect}: {err}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        #[test]
        fn random_trees_round_trip(
            files in proptest::collection::btree_map("[a-c]{1,2}(/[a-c]{1,2}){0,2}", (0usize..3000, proptest::bool::ANY), 0..12)
        ) {
            let src = tempfile::tempdir().unwrap();
            let root = src.path().join("actions-v1");
            std::fs::create_dir_all(&root).unwrap();
            for (path, (len, exec)) in &files {
                let p = root.join(path);
                // A path that is a prefix directory of another is skipped as a file.
                if p.exists() || std::fs::create_dir_all(p.parent().unwrap()).is_err() {
                    continue;
                }
                if std::fs::write(&p, vec![(*len % 251) as u8; *len]).is_err() {
                    continue;
                }
                let mode = if *exec { 0o755 } else { 0o644 };
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            let (dest, _work) = round_trip(src.path(), Compression::Zstd);
            proptest::prop_assert_eq!(inventory(&dest.join("actions-v1")), inventory(&root));
        }
    }
}
