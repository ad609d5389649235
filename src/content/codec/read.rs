//! Reading an archive of the codec into a directory, under every rule of the
//! [module docs](super) ([`extract`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::Compression;
use super::tar_entry::ExtensionLimit;
use super::writers::{DirSpec, FeedError, WriteError, WriterPool};
use crate::content::record::{FileRecord, Record};
use crate::content::verify::Modes;
use crate::digest::DigestAlgorithm;
use crate::fs::{self, RelPath};

/// Most bytes buffered in front of the decompressor, in bytes (1 MiB; less for a smaller
/// input of known size, [`ReadSpec::input_bytes`]).
const INPUT_BUF_BYTES: usize = super::CHUNK_BYTES;
/// Bytes buffered behind the decompressor when it runs on the parsing thread (64 KiB): tar
/// headers are read in 512-byte blocks through it, file contents in chunks at least this
/// large go past it. A fresh buffer is zeroed once, so this is paid per archive (entry
/// objects are many and small). With writer threads the decompressor runs ahead on its
/// own thread instead (`ahead.rs`).
const OUTPUT_BUF_BYTES: usize = 64 * 1024;

/// Zero padding accepted after the tar end-of-archive block, in bytes (tar implementations
/// pad to a record of at most 20 blocks; 1 MiB is far above that).
pub const MAX_TRAILING_ZERO_BYTES: u64 = 1024 * 1024;

/// Why an archive could not be extracted.
#[derive(Debug)]
pub enum Error {
    /// The archive is damaged or breaks a rule (the reason, one line, naming the entry).
    Archive(String),
    /// A local failure writing the tree.
    Local(fs::Error),
}

impl From<fs::Error> for Error {
    fn from(e: fs::Error) -> Self {
        Error::Local(e)
    }
}

/// Where the container's manifest entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestAt {
    /// The first entry; every following entry must be the next listed record (L0 archives).
    First,
    /// The last entry; entries come in any order before it (snapshots).
    Last,
}

/// A container's rules for [`extract`].
pub struct ReadSpec<'a> {
    /// What the archive is, for messages: "a strata snapshot", "an L0 archive".
    pub what: &'static str,
    /// The same, plural (for the extension limit's messages): "snapshots", "L0 archives".
    pub kind_of_archive: &'static str,
    /// The compression the input must use, if the container knows it.
    pub compression: Option<Compression>,
    /// The manifest entry's name.
    pub manifest_name: &'a str,
    /// Where the manifest is.
    pub manifest_at: ManifestAt,
    /// Largest manifest entry read, in bytes.
    pub max_manifest_bytes: u64,
    /// Most directory, file and symlink entries (the manifest not counted).
    pub max_entries: u64,
    /// Most bytes of file content in total.
    pub max_file_bytes: u64,
    /// Whether directory entries are allowed.
    pub directories: bool,
    /// Every path must be this directory or lie below it, if given.
    pub root: Option<&'a str>,
    /// The directory of the archive that `dest` stands for, if given: every path must be
    /// one of its ancestors or itself (directory entries, checked but not created: `dest`
    /// exists) or lie below it (written relative to `dest`). Records keep the archive's
    /// paths. Without it `dest` is the archive's root.
    pub subtree: Option<&'a str>,
    /// Whether a symlink may be at a path: `Err(why not)` rejects the archive.
    pub symlink_allowed: &'a dyn Fn(&RelPath) -> Result<(), String>,
    /// Modes of written directories and files.
    pub modes: Modes,
    /// The algorithm files are hashed with while written when the manifest comes last (the
    /// container's expectation; a manifest that records another algorithm makes the
    /// written files be read once more under it). With the manifest first, each file is
    /// hashed with its record's algorithm.
    pub algorithm: DigestAlgorithm,
    /// Whether files are written by a few writer threads, so that decompression, hashing
    /// and writing overlap (one large tree), or on the reading thread through one reused
    /// buffer (many small trees installed side by side, where the callers already use
    /// the cores and writer threads per tree would only add memory).
    pub writer_threads: bool,
    /// The input's size in bytes, if known: a small input gets a buffer of its size.
    pub input_bytes: Option<u64>,
}

/// What [`extract`] wrote and verified.
#[derive(Debug)]
pub struct Extracted<M> {
    /// The container's parsed manifest.
    pub manifest: M,
    /// Its records, as the parser returned them (equal to what was written).
    pub records: Vec<Record>,
    /// Regular files written.
    pub files: u64,
    /// Bytes of file content written.
    pub file_bytes: u64,
}

enum Stop {
    Error(Error),
    /// A writer failed; its error comes from [`WriterPool::finish`].
    Writer,
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Error(e)
    }
}

fn bad(reason: impl Into<String>) -> Error {
    Error::Archive(reason.into())
}

struct State<'a, M> {
    dest: &'a Path,
    spec: &'a ReadSpec<'a>,
    known_dirs: HashSet<String>,
    /// Directories that came with an entry of their own (archives that hold directories
    /// must list every one, parents before children: [`State::check_parent_listed`]).
    listed_dirs: HashSet<String>,
    non_dirs: HashMap<String, bool>,
    seen: HashSet<String>,
    entries: u64,
    file_bytes: u64,
    pool: WriterPool,
    /// Directories and symlinks written (files come back from the pool).
    written: Vec<Record>,
    manifest: Option<(M, Vec<Record>)>,
    /// With the manifest first: index of the record the next entry must be.
    next: usize,
    /// How directories are made.
    dirs: DirSpec,
    /// With writer threads: directories admitted and not yet handed to a writer, parents
    /// first (they go with the next file; the rest are made at the end).
    pending: Vec<PathBuf>,
}

impl<M> State<'_, M> {
    /// Where `rel` is written, relative to the destination: `None` for the subtree and its
    /// ancestors (nothing to create), else `rel` below the subtree, or `rel` itself
    /// without one. A path outside the subtree is the archive's fault.
    fn local(&self, rel: &RelPath) -> Result<Option<RelPath>, Error> {
        let Some(subtree) = self.spec.subtree else { return Ok(Some(rel.clone())) };
        let text = rel.as_str();
        if subtree == text || subtree.strip_prefix(text).is_some_and(|r| r.starts_with('/')) {
            return Ok(None);
        }
        match text.strip_prefix(subtree).and_then(|r| r.strip_prefix('/')) {
            Some(below) => Ok(Some(RelPath::new(below)?)),
            None => Err(bad(format!("{rel} is outside {subtree}/"))),
        }
    }

    /// The file system path of `rel` ([`State::local`]); `None` for a directory that is
    /// not created.
    fn path_of(&self, rel: &RelPath) -> Result<Option<PathBuf>, Error> {
        Ok(self.local(rel)?.map(|local| local.to_path(self.dest)))
    }

    /// Maps a failure to create a path: a symlink or non-directory in the way is the
    /// archive's fault; anything else is local.
    fn create_error(&self, rel: &str, e: fs::Error) -> Error {
        match e {
            fs::Error::SymlinkInPath { link, .. } => bad(format!(
                "{rel}: {} is a symlink; writing through symlinks is not allowed",
                link.strip_prefix(self.dest).unwrap_or(&link).display()
            )),
            fs::Error::NotADirectory { component, .. } => bad(format!(
                "{rel}: {} is not a directory",
                component.strip_prefix(self.dest).unwrap_or(&component).display()
            )),
            fs::Error::Io { ref source, .. } if source.kind() == io::ErrorKind::AlreadyExists => {
                bad(format!("{rel}: conflicts with an earlier entry"))
            }
            other => Error::Local(other),
        }
    }

    /// Admits directory `dir` (and its parents) inside the destination, never through a
    /// symlink or file an earlier entry made: with writer threads they join
    /// [`State::pending`] (the next file's writer makes them), else they are made here.
    fn ensure_dir(&mut self, dir: &RelPath) -> Result<(), Error> {
        let rel = dir.as_str();
        if self.known_dirs.contains(rel) {
            return Ok(());
        }
        self.check_no_leaf_in(dir)?;
        self.make_dir(dir)
    }

    /// Rejects a path through a symlink or a file an earlier entry made.
    fn check_no_leaf_in(&self, dir: &RelPath) -> Result<(), Error> {
        let rel = dir.as_str();
        let mut prefix_end = 0;
        for component in rel.split('/') {
            prefix_end += component.len();
            let prefix = rel.get(..prefix_end).unwrap_or(rel);
            match self.non_dirs.get(prefix) {
                Some(true) => {
                    return Err(bad(format!(
                        "{rel}: {prefix} is a symlink; writing through symlinks is not allowed"
                    )));
                }
                Some(false) => {
                    return Err(bad(format!("{rel}: {prefix} is a file, not a directory")));
                }
                None => {}
            }
            prefix_end += 1;
        }
        Ok(())
    }

    /// The part of [`State::ensure_dir`] after its checks: admits (and with inline writes
    /// makes) `dir` and its missing parents.
    fn make_dir(&mut self, dir: &RelPath) -> Result<(), Error> {
        let rel = dir.as_str();
        if self.spec.writer_threads {
            // The private destination holds only what this extraction made, so the record
            // of admitted directories decides: the missing ones, top-down.
            let mut missing = Vec::new();
            let mut current = rel;
            while !self.known_dirs.contains(current) {
                missing.push(current);
                match current.rsplit_once('/') {
                    Some((parent, _)) => current = parent,
                    None => break,
                }
            }
            for name in missing.into_iter().rev() {
                if let Some(local) = self.local(&RelPath::new(name)?)? {
                    self.pending.push(local.to_path(self.dest));
                }
            }
        } else if let Some(local) = self.local(dir)? {
            // A parent this extraction already made (or checked) is a real directory of
            // the private destination: only the last component is new, so skip the walk
            // from the root (one `lstat` per component per directory).
            let parent_known = dir.parent().is_some_and(|p| self.known_dirs.contains(p.as_str()));
            if parent_known {
                let path = local.to_path(self.dest);
                fs::create_dir_in_checked_parent(&path, self.dirs.mode, self.dirs.chmod)
                    .map_err(|e| self.create_error(rel, e))?;
            } else {
                let within = local.to_relative_path();
                fs::create_dir_all_within(self.dest, &within, self.spec.modes.dir)
                    .map_err(|e| self.create_error(rel, e))?;
            }
        }
        let mut current = rel;
        while self.known_dirs.insert(current.to_owned()) {
            match current.rsplit_once('/') {
                Some((parent, _)) => current = parent,
                None => break,
            }
        }
        Ok(())
    }

    /// Makes the [`State::pending`] directories here (a symlink's parent must exist now;
    /// the rest at the end). One a writer is making too is accepted as it finds it.
    fn make_pending(&mut self) -> Result<(), Error> {
        for dir in std::mem::take(&mut self.pending) {
            self.dirs.make(&dir).map_err(|e| {
                let rel = dir.strip_prefix(self.dest).unwrap_or(&dir).display().to_string();
                self.create_error(&rel, e)
            })?;
        }
        Ok(())
    }

    fn ensure_parent(&mut self, rel: &RelPath) -> Result<(), Error> {
        if let Some(parent) = rel.parent() {
            // A symlink or file in the way is the more telling reason; then the listing.
            if !self.known_dirs.contains(parent.as_str()) {
                self.check_no_leaf_in(&parent)?;
            }
            self.check_parent_listed(rel)?;
            self.ensure_dir(&parent)?;
        }
        Ok(())
    }

    /// In an archive that holds directories ([`ReadSpec::directories`]), every entry's
    /// parent must have come before it as a directory entry of its own: parents are never
    /// made up, so what is unpacked is exactly what the archive (and its manifest) lists.
    fn check_parent_listed(&self, rel: &RelPath) -> Result<(), Error> {
        if !self.spec.directories {
            return Ok(());
        }
        match rel.parent() {
            Some(parent) if !self.listed_dirs.contains(parent.as_str()) => Err(bad(format!(
                "{rel}: its directory {parent} has no entry before it ({} list every \
                 directory, parents first)",
                self.spec.kind_of_archive
            ))),
            _ => Ok(()),
        }
    }

    /// The archive's root ([`ReadSpec::root`]) must be a directory entry.
    fn check_not_root(&self, rel: &RelPath, kind: &str) -> Result<(), Error> {
        match self.spec.root {
            Some(root) if rel.as_str() == root => {
                Err(bad(format!("{rel} is a {kind}; it must be a directory")))
            }
            _ => Ok(()),
        }
    }

    fn count_entry(&mut self) -> Result<(), Error> {
        self.entries += 1;
        if self.entries > self.spec.max_entries {
            return Err(bad(format!(
                "more than the {} entries its sidecar declares",
                self.spec.max_entries
            )));
        }
        Ok(())
    }

    /// With the manifest first: the record this entry must be (path, kind, size).
    fn expect_next(
        &mut self,
        rel: &RelPath,
        kind: &str,
        size: u64,
    ) -> Result<Option<usize>, Error> {
        let Some((_, records)) = &self.manifest else { return Ok(None) };
        if self.spec.manifest_at != ManifestAt::First {
            return Ok(None);
        }
        let Some(record) = records.get(self.next) else {
            return Err(bad(format!("unexpected extra entry {rel}")));
        };
        if record.path() != rel {
            return Err(bad(format!("expected {} next, found {rel}", record.path())));
        }
        if record.kind().as_str() != kind {
            return Err(bad(format!(
                "{rel} is a {kind} entry, the manifest records a {}",
                record.kind().as_str()
            )));
        }
        if record.size_bytes() != size {
            return Err(bad(format!(
                "{rel} has {size} bytes, the manifest records {}",
                record.size_bytes()
            )));
        }
        self.next += 1;
        Ok(Some(self.next - 1))
    }

    fn file(
        &mut self,
        rel: RelPath,
        mode: u32,
        size: u64,
        data: &mut dyn Read,
    ) -> Result<(), Stop> {
        let index = self.expect_next(&rel, "file", size)?;
        self.check_not_root(&rel, "file")?;
        self.count_entry()?;
        if self.file_bytes.saturating_add(size) > self.spec.max_file_bytes {
            return Err(Stop::Error(bad(format!(
                "{rel}: {size} bytes would exceed the {} bytes of file content its sidecar \
                 declares",
                self.spec.max_file_bytes
            ))));
        }
        if self.known_dirs.contains(rel.as_str()) {
            return Err(Stop::Error(bad(format!("{rel}: conflicts with an earlier entry"))));
        }
        self.ensure_parent(&rel)?;
        if self.pool.failed() {
            return Err(Stop::Writer);
        }
        let algorithm = index
            .and_then(|i| self.manifest.as_ref().and_then(|(_, r)| r.get(i)))
            .and_then(Record::as_file)
            .map_or(self.spec.algorithm, |f| f.digest.algorithm());
        let Some(path) = self.path_of(&rel)? else {
            return Err(Stop::Error(bad(format!("{rel} is a file where a directory must be"))));
        };
        self.non_dirs.insert(rel.as_str().to_owned(), false);
        self.file_bytes += size;
        let executable = fs::perm::is_owner_exec(mode);
        let mode = if executable { self.spec.modes.executable } else { self.spec.modes.file };
        let dirs = std::mem::take(&mut self.pending);
        let file = super::writers::NewFile { rel, path, executable, mode, algorithm, dirs };
        match self.pool.write_file(file, size, data) {
            Ok(()) => Ok(()),
            Err(FeedError::Archive(reason)) => Err(Stop::Error(bad(reason))),
            Err(FeedError::WriterStopped) => Err(Stop::Writer),
        }
    }

    fn symlink(&mut self, rel: RelPath, target: &[u8]) -> Result<(), Error> {
        self.expect_next(&rel, "symlink", 0)?;
        self.check_not_root(&rel, "symlink")?;
        self.count_entry()?;
        (self.spec.symlink_allowed)(&rel).map_err(bad)?;
        if target.is_empty() || target.contains(&0) {
            return Err(bad(format!("{rel}: empty or invalid symlink text")));
        }
        // Any bytes: the text is recorded in the name encoding and put back byte for byte.
        let target = fs::name::encode(target);
        let Some(path) = self.path_of(&rel)? else {
            return Err(bad(format!("{rel} is a symlink where a directory must be")));
        };
        if self.known_dirs.contains(rel.as_str()) {
            return Err(bad(format!("{rel}: conflicts with an earlier entry")));
        }
        self.ensure_parent(&rel)?;
        self.make_pending()?;
        if self.spec.writer_threads
            && let Some(parent) = path.parent().filter(|p| *p != self.dest)
        {
            // A writer may not have made the parent yet (it went with an earlier file).
            self.dirs.make(parent).map_err(|e| self.create_error(rel.as_str(), e))?;
        }
        fs::symlink(&target, &path).map_err(|e| self.create_error(rel.as_str(), e))?;
        self.non_dirs.insert(rel.as_str().to_owned(), true);
        self.written.push(Record::Symlink { path: rel, target });
        Ok(())
    }

    fn directory(&mut self, rel: RelPath) -> Result<(), Error> {
        if !self.spec.directories {
            return Err(bad(format!(
                "{rel} is a directory entry; {} hold none",
                self.spec.kind_of_archive
            )));
        }
        self.expect_next(&rel, "directory", 0)?;
        self.count_entry()?;
        if let Some(parent) = rel.parent()
            && !self.known_dirs.contains(parent.as_str())
        {
            self.check_no_leaf_in(&parent)?;
        }
        self.check_parent_listed(&rel)?;
        self.ensure_dir(&rel)?;
        self.listed_dirs.insert(rel.as_str().to_owned());
        self.written.push(Record::Directory { path: rel });
        Ok(())
    }
}

/// Wraps `input` in the decoder its magic number names.
fn open_decoder<'r>(
    input: &'r mut (dyn Read + Send),
    spec: &ReadSpec<'_>,
) -> Result<Box<dyn Read + Send + 'r>, Error> {
    let capacity = spec.input_bytes.map_or(INPUT_BUF_BYTES, |n| {
        usize::try_from(n).unwrap_or(INPUT_BUF_BYTES).clamp(4096, INPUT_BUF_BYTES)
    });
    let mut reader = BufReader::with_capacity(capacity, input);
    let head = reader.fill_buf().map_err(|e| bad(format!("cannot read the object: {e}")))?;
    let Some(format) = Compression::detect(head) else {
        return Err(bad("neither zstd nor gzip (unknown magic number)"));
    };
    if let Some(expected) = spec.compression
        && expected != format
    {
        return Err(bad(format!("the object is {format}, expected {expected}")));
    }
    let decoder: Box<dyn Read + Send + 'r> = match format {
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(reader)
                .map_err(|e| bad(format!("cannot start zstd: {e}")))?,
        ),
        // Every member: bytes after the first one (another member, or garbage) reach the
        // trailing-data check instead of being ignored.
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(reader)),
    };
    Ok(decoder)
}

/// Reads the archive in `input` into `dest` (an existing empty directory) under every rule
/// of the [module docs](super) and `spec`. `parse` gets the manifest entry's bytes and
/// returns the container's manifest and its records (sorted by path, checked with
/// [`crate::content::tree::check_records`]), or why it is refused. Reads `input` to the
/// end of the compressed stream.
///
/// # Errors
/// [`Error::Archive`] for anything wrong with the archive (naming the entry);
/// [`Error::Local`] for local write failures. On error `dest` holds a partial tree: the
/// caller deletes it. The writer threads are joined before this returns.
///
/// # Panics
/// In debug builds, when called on a thread of rayon's pool (`crate::parallel`: the
/// writers hash on the pool, so extracting there can deadlock).
pub fn extract<M>(
    input: &mut (dyn Read + Send),
    dest: &Path,
    spec: &ReadSpec<'_>,
    parse: impl FnMut(&[u8]) -> Result<(M, Vec<Record>), String>,
) -> Result<Extracted<M>, Error> {
    crate::parallel::assert_off_pool("archive extraction");
    let decoder = open_decoder(input, spec)?;
    if spec.writer_threads {
        std::thread::scope(|scope| {
            super::ahead::read_ahead(scope, decoder, |ahead| extract_from(ahead, dest, spec, parse))
        })
    } else {
        extract_from(BufReader::with_capacity(OUTPUT_BUF_BYTES, decoder), dest, spec, parse)
    }
}

/// [`extract`] of the decoded tar stream `decoded`.
fn extract_from<M>(
    decoded: impl Read,
    dest: &Path,
    spec: &ReadSpec<'_>,
    parse: impl FnMut(&[u8]) -> Result<(M, Vec<Record>), String>,
) -> Result<Extracted<M>, Error> {
    let mut archive = tar::Archive::new(ExtensionLimit::new(decoded, spec.kind_of_archive));
    let dirs = DirSpec {
        root: dest.to_path_buf(),
        mode: spec.modes.dir,
        chmod: !fs::perm::umask_keeps(spec.modes.dir) || is_setgid(dest),
    };
    let mut state = State {
        dest,
        spec,
        known_dirs: HashSet::from([String::new()]),
        listed_dirs: HashSet::new(),
        non_dirs: HashMap::new(),
        seen: HashSet::new(),
        entries: 0,
        file_bytes: 0,
        pool: if spec.writer_threads { WriterPool::new(&dirs) } else { WriterPool::inline(&dirs) },
        written: Vec::new(),
        manifest: None,
        next: 0,
        dirs,
        pending: Vec::new(),
    };
    let looped = read_entries(&mut state, &mut archive, parse);
    // Always wait for the writers, so that nothing writes into `dest` after we return.
    let pool = std::mem::replace(&mut state.pool, WriterPool::empty());
    let written = pool.finish();
    match looped {
        Ok(()) => {}
        Err(Stop::Error(e)) => return Err(e),
        Err(Stop::Writer) => {}
    }
    if written.is_ok() {
        // Directories no file followed (empty ones, the last ones).
        state.make_pending()?;
    }
    let files = written.map_err(|e| match e {
        WriteError::Exists(rel) => bad(format!("{rel}: conflicts with an earlier entry")),
        WriteError::Io(e) => Error::Local(e),
    })?;
    let Some((manifest, records)) = state.manifest.take() else {
        return Err(match spec.manifest_at {
            ManifestAt::Last => {
                bad(format!("no manifest at the end: the object is truncated or not {}", spec.what))
            }
            ManifestAt::First => bad("empty archive"),
        });
    };
    if spec.manifest_at == ManifestAt::First
        && let Some(missing) = records.get(state.next)
    {
        return Err(bad(format!("{} is missing", missing.path())));
    }
    check_trailing(archive.into_inner().into_inner())?;
    let file_count = files.len() as u64;
    let mut actual = std::mem::take(&mut state.written);
    actual.extend(files.into_iter().map(Record::File));
    compare(&records, actual, |path| state.path_of(path))?;
    Ok(Extracted { manifest, records, files: file_count, file_bytes: state.file_bytes })
}

/// True if `dir` has the setgid bit (or cannot be examined: then assume it has).
fn is_setgid(dir: &Path) -> bool {
    fs::symlink_metadata(dir)
        .map_or(true, |m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o2000 != 0)
}

/// After the end-of-archive block only zero padding may follow, in this compressed stream
/// or in further frames; anything else (data hidden after the end, garbage after the
/// frame) rejects the archive.
fn check_trailing(mut rest: impl Read) -> Result<(), Error> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut trailing_bytes = 0u64;
    loop {
        let n = match rest.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(bad(format!("damaged data after the tar stream: {e}"))),
        };
        trailing_bytes += n as u64;
        if trailing_bytes > MAX_TRAILING_ZERO_BYTES
            || buf.get(..n).unwrap_or_default().iter().any(|b| *b != 0)
        {
            return Err(bad("data after the end of the tar stream"));
        }
    }
}

/// Requires the written records to equal the manifest's. A file hashed under another
/// algorithm than its record names (the container expected another) is read once more
/// from where it was written (`path_of`) under the record's.
fn compare(
    listed: &[Record],
    actual: Vec<Record>,
    path_of: impl Fn(&RelPath) -> Result<Option<PathBuf>, Error>,
) -> Result<(), Error> {
    let mut actual: BTreeMap<RelPath, Record> =
        actual.into_iter().map(|r| (r.path().clone(), r)).collect();
    let mut expected: BTreeMap<&RelPath, &Record> = BTreeMap::new();
    for r in listed {
        if expected.insert(r.path(), r).is_some() {
            return Err(bad(format!("manifest mismatch: {} is listed twice", r.path())));
        }
    }
    for (path, want) in &expected {
        let Some(got) = actual.remove(*path) else {
            return Err(bad(format!(
                "manifest mismatch: {} {path} is missing from the archive",
                want.kind().as_str()
            )));
        };
        let mismatch = |what: String| Err(bad(format!("manifest mismatch: {what}")));
        match (*want, &got) {
            (Record::Directory { .. }, Record::Directory { .. }) => {}
            (Record::Symlink { target: a, .. }, Record::Symlink { target: b, .. }) => {
                if a != b {
                    return mismatch(format!(
                        "symlink {path} links to {b}, the manifest records {a}"
                    ));
                }
            }
            (Record::File(want), Record::File(got)) => {
                if want.size_bytes != got.size_bytes {
                    return mismatch(format!(
                        "file {path} has {} bytes, the manifest declares {}",
                        got.size_bytes, want.size_bytes
                    ));
                }
                if want.executable != got.executable {
                    return mismatch(format!("file {path} has another owner-exec bit"));
                }
                let digest = if got.digest.algorithm() == want.digest.algorithm() {
                    got.digest
                } else {
                    let Some(written) = path_of(path)? else {
                        return mismatch(format!("file {path} was not written"));
                    };
                    let (d, _, _) = fs::hash_file_stable(&written, want.digest.algorithm())?;
                    d
                };
                if digest != want.digest {
                    return mismatch(format!(
                        "file {path} has digest {digest}, the manifest declares {}",
                        want.digest
                    ));
                }
            }
            (want, got) => {
                return mismatch(format!(
                    "{path} is a {} in the archive, the manifest records a {}",
                    got.kind().as_str(),
                    want.kind().as_str()
                ));
            }
        }
    }
    if let Some((path, got)) = actual.into_iter().next() {
        return Err(bad(format!(
            "manifest mismatch: {} {path} is not in the manifest",
            got.kind().as_str()
        )));
    }
    Ok(())
}

fn read_entries<M, R: Read>(
    state: &mut State<'_, M>,
    archive: &mut tar::Archive<R>,
    mut parse: impl FnMut(&[u8]) -> Result<(M, Vec<Record>), String>,
) -> Result<(), Stop> {
    let spec = state.spec;
    let entries = archive.entries().map_err(|e| bad(format!("cannot read the archive: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(format!("cannot read the archive: {e}")))?;
        if state.manifest.is_some() && spec.manifest_at == ManifestAt::Last {
            return Err(bad("an entry follows the manifest, which must be last").into());
        }
        let raw = entry.path_bytes().into_owned();
        // Names are bytes: the path is recorded in the name encoding, and every check below
        // (relative, no `.`/`..`, no empty segment, no NUL) holds for the bytes themselves.
        let text = fs::name::encode(&raw);
        let kind = entry.header().entry_type();
        let trimmed = if kind.is_dir() { raw.strip_suffix(b"/").unwrap_or(&raw) } else { &raw };
        let rel = RelPath::from_bytes(trimmed).map_err(|e| match e {
            fs::Error::UnsafePath { reason, .. } => {
                bad(format!("entry path {text:?} is unsafe ({reason})"))
            }
            other => bad(format!("entry path {text:?}: {other}")),
        })?;
        if !state.seen.insert(rel.as_str().to_owned()) {
            return Err(bad(format!("{rel} appears twice")).into());
        }
        let is_manifest = rel.as_str() == spec.manifest_name;
        if spec.manifest_at == ManifestAt::First && state.manifest.is_none() && !is_manifest {
            return Err(bad(format!("the first entry is not {}", spec.manifest_name)).into());
        }
        if is_manifest {
            if !kind.is_file() || entry.size() > spec.max_manifest_bytes {
                return Err(bad(format!(
                    "the manifest entry is not a file of at most {} bytes",
                    spec.max_manifest_bytes
                ))
                .into());
            }
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| bad(format!("cannot read the manifest: {e}")))?;
            state.manifest = Some(parse(&bytes).map_err(bad)?);
            continue;
        }
        if let Some(root) = spec.root {
            let inside = rel.as_str() == root
                || rel.as_str().strip_prefix(root).is_some_and(|r| r.starts_with('/'));
            if !inside {
                return Err(bad(format!("{rel} is outside {root}/")).into());
            }
        }
        if kind.is_dir() {
            state.directory(rel)?;
        } else if kind.is_symlink() {
            let target = entry.link_name_bytes().map(|t| t.into_owned()).unwrap_or_default();
            state.symlink(rel, &target)?;
        } else if kind.is_file() {
            let mode = entry.header().mode().map_err(|e| bad(format!("{rel}: {e}")))?;
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
                format!("an entry of unsupported type {:?}", char::from(kind.as_byte()))
            };
            return Err(bad(format!("{rel} is {what}")).into());
        }
    }
    Ok(())
}

/// The file records among `records` (for containers that count them).
pub fn file_records(records: &[Record]) -> impl Iterator<Item = &FileRecord> {
    records.iter().filter_map(Record::as_file)
}
