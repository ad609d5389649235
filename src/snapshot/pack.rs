//! Packing: `<cache root>/actions-v1/` → one compressed tar stream in a file (seed 003
//! "持久化传输与信任"; `docs/snapshots.md` "Format").
//!
//! Stream layout:
//! ```text
//! object   = compress( tar( entry* || manifest || end-of-archive ) )
//! entry    = directory | regular file | symlink, path "actions-v1[/…]" relative to the
//!            cache root, in walk order (depth first, names sorted byte-wise)
//! manifest = regular file "strata-snapshot-manifest.json": a strata.snapshot_manifest record
//! ```
//! Member names and symlink texts are the exact bytes on disk (a name that is not UTF-8 is
//! stored as it is); the manifest records them in the name encoding ([`crate::fs::name`]).
//! Tar headers are GNU format (long names as GNU long-name entries), mode 0755/0644 from the
//! owner-exec bit only, uid/gid 0, mtime 0, no user names, so the same tree packs to the
//! same tar bytes. Each file is read once, by a reader thread that hashes it and hands it
//! over in 1 MiB chunks (at most 8 in flight); the calling thread writes the tar stream
//! into the compressor (zstd: one job buffer per worker). Memory does not grow with the
//! snapshot size. The output is hashed as it is written, giving the
//! object's SHA-256 without a second pass.
//!
//! Not packed: anything outside `actions-v1/` (`.locks/`, `.local/`, `.updated`), and crash
//! leftovers inside it (`.<name>.tmp-<16 hex>`, `.<name>.old-<16 hex>`,
//! `.<name>.trash-<16 hex>`, and strata's temp files `.strata-*.tmp`,
//! `.<name>.strata-*.tmp`). FIFOs, sockets and devices are skipped with a warning, and so
//! are symlinks outside an entry's `artifacts/` directory (a restore would reject them).
//! `actions-v1` itself must be a real directory: a symlinked one is an error
//! ([`Error::SymlinkedLayout`]), never an empty snapshot.
//!
//! # Limitations
//! * A file that grows while it is packed is packed with its size at `stat` time (the
//!   manifest describes exactly the packed bytes); one that shrinks aborts the pack.
//! * An artifact whose own name looks like a crash leftover is not packed; the entry that
//!   holds it then fails validation after a restore and is rebuilt (a miss, never a wrong
//!   hit).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use super::manifest::{
    FileRecord, MANIFEST_ENTRY, MANIFEST_SCHEMA, Producer, SnapshotManifest, SymlinkRecord,
};
use super::{CARRIED_DIR, Compression, Error, manifest};
use crate::content::layout::is_inside_entry_artifacts;
use crate::content::temp::is_leftover;
use crate::digest::{Hasher, Sha256Digest};
use crate::fs::{self, EntryKind, RelPath};
use crate::tar_entry;

/// Read buffer for file data, in bytes.
const BUF_BYTES: usize = 1024 * 1024;

/// How to pack.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Compression format.
    pub compression: Compression,
    /// Compression level ([`Compression::levels`]).
    pub level: i32,
    /// zstd worker threads; 0 means one per available CPU.
    pub threads: u32,
    /// The key recorded in the manifest.
    pub key: String,
    /// The producer recorded in the manifest.
    pub producer: Producer,
    /// Parent manifest digests recorded in the manifest.
    pub parents: Vec<String>,
}

impl PackOptions {
    /// zstd at its default level on every CPU, for `key`, with no producer or parents.
    pub fn new(key: impl Into<String>) -> Self {
        Self {
            compression: Compression::Zstd,
            level: Compression::Zstd.default_level(),
            threads: 0,
            key: key.into(),
            producer: Producer::default(),
            parents: Vec::new(),
        }
    }
}

/// What [`pack`] produced.
#[derive(Debug, Clone)]
pub struct PackReport {
    /// The manifest written as the last entry.
    pub manifest: SnapshotManifest,
    /// Its record digest (`sha256:<hex>`).
    pub manifest_digest: String,
    /// Size of the output file in bytes.
    pub object_size_bytes: u64,
    /// SHA-256 of the output file.
    pub object_sha256: Sha256Digest,
    /// Paths skipped, with the reason (special files).
    pub warnings: Vec<String>,
}

/// A writer that hashes and counts what passes through.
struct HashWriter<W: Write> {
    inner: W,
    hasher: Hasher,
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The compressing writer of either format.
enum Encoder<W: Write> {
    Zstd(zstd::stream::write::Encoder<'static, W>),
    Gzip(flate2::write::GzEncoder<W>),
}

impl<W: Write> Encoder<W> {
    fn new(out: W, options: &PackOptions) -> io::Result<Self> {
        match options.compression {
            Compression::Zstd => {
                let mut encoder = zstd::stream::write::Encoder::new(out, options.level)?;
                let threads = if options.threads == 0 {
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                } else {
                    options.threads as usize
                };
                encoder.multithread(u32::try_from(threads).unwrap_or(1))?;
                encoder.include_checksum(true)?;
                Ok(Encoder::Zstd(encoder))
            }
            Compression::Gzip => {
                let level = u32::try_from(options.level).unwrap_or(6);
                Ok(Encoder::Gzip(flate2::write::GzEncoder::new(
                    out,
                    flate2::Compression::new(level),
                )))
            }
        }
    }

    fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Zstd(e) => e.finish(),
            Encoder::Gzip(e) => e.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Zstd(e) => e.write(buf),
            Encoder::Gzip(e) => e.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Zstd(e) => e.flush(),
            Encoder::Gzip(e) => e.flush(),
        }
    }
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header
}

/// What the reader thread hands to the writing thread, in walk order.
enum Item {
    Dir(RelPath, PathBuf),
    Symlink {
        rel: RelPath,
        path: PathBuf,
        target: String,
    },
    /// A regular file starts; `Chunk`s of exactly `size` bytes in total and a `FileDone`
    /// follow.
    File {
        rel: RelPath,
        path: PathBuf,
        size: u64,
        executable: bool,
    },
    Chunk(Vec<u8>),
    FileDone(Sha256Digest),
    Skipped(String),
}

/// Items in flight between the threads (each chunk at most [`BUF_BYTES`]).
const QUEUE_ITEMS: usize = 8;

/// Reads exactly `size` bytes of `file`, hashing them, and sends them in chunks. Returns
/// false if the receiver is gone.
fn send_file_data(
    file: &mut File,
    path: &Path,
    size: u64,
    sender: &SyncSender<Result<Item, Error>>,
) -> Result<bool, Error> {
    let mut hasher = Hasher::new();
    let mut remaining = size;
    while remaining > 0 {
        let want = usize::try_from(remaining.min(BUF_BYTES as u64)).unwrap_or(BUF_BYTES);
        let mut chunk = vec![0u8; want];
        let mut filled = 0;
        while filled < want {
            match file.read(chunk.get_mut(filled..).unwrap_or_default()) {
                Ok(0) => {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file shrank while packing",
                    );
                    return Err(Error::Pack { path: path.to_path_buf(), source: e });
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Pack { path: path.to_path_buf(), source: e }),
            }
        }
        hasher.update(&chunk);
        remaining -= want as u64;
        if sender.send(Ok(Item::Chunk(chunk))).is_err() {
            return Ok(false);
        }
    }
    Ok(sender.send(Ok(Item::FileDone(hasher.finish()))).is_ok())
}

/// The reader thread: walks `carried`, skipping leftovers, and sends every item.
fn read_tree(
    carried: &Path,
    root_rel: &RelPath,
    sender: &SyncSender<Result<Item, Error>>,
) -> Result<(), Error> {
    let mut skipping: Option<String> = None;
    for entry in fs::walk(carried) {
        let entry = entry?;
        let inner = entry.rel.as_str();
        if let Some(prefix) = &skipping {
            if inner.len() > prefix.len()
                && inner.starts_with(prefix.as_str())
                && inner.as_bytes().get(prefix.len()) == Some(&b'/')
            {
                continue;
            }
            skipping = None;
        }
        if is_leftover(entry.rel.file_name()) {
            if entry.kind == EntryKind::Dir {
                skipping = Some(inner.to_owned());
            }
            continue;
        }
        let rel = root_rel.join(inner)?;
        let item = match entry.kind {
            EntryKind::Dir => Item::Dir(rel, entry.path),
            EntryKind::Symlink if !is_inside_entry_artifacts(inner) => Item::Skipped(format!(
                "skipped {}: a symlink outside an entry's artifacts/ directory (restores \
                 reject symlinks at layout positions; replace it with a real directory)",
                entry.path.display()
            )),
            EntryKind::Symlink => {
                let target = fs::read_link(&entry.path)?;
                Item::Symlink { rel, path: entry.path, target }
            }
            EntryKind::File => {
                let mut file = fs::open(&entry.path)?;
                let size =
                    file.metadata().map_err(|e| fs::Error::io("stat", &entry.path, e))?.len();
                let executable = fs::perm::is_owner_exec(std::os::unix::fs::PermissionsExt::mode(
                    &entry.metadata.permissions(),
                ));
                let start = Item::File { rel, path: entry.path.clone(), size, executable };
                if sender.send(Ok(start)).is_err()
                    || !send_file_data(&mut file, &entry.path, size, sender)?
                {
                    return Ok(());
                }
                continue;
            }
            EntryKind::Special(kind) => {
                Item::Skipped(format!("skipped {} ({kind})", entry.path.display()))
            }
        };
        if sender.send(Ok(item)).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// What the writing thread collects for the manifest.
#[derive(Default)]
struct Collected {
    directories: Vec<RelPath>,
    files: Vec<FileRecord>,
    symlinks: Vec<SymlinkRecord>,
    warnings: Vec<String>,
    file_bytes: u64,
}

/// The writing side: tar headers and data into the compressor, in the reader's order.
fn write_items<W: Write>(
    receiver: &Receiver<Result<Item, Error>>,
    builder: &mut tar::Builder<W>,
    collected: &mut Collected,
) -> Result<(), Error> {
    let pack_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source: io::Error| Error::Pack { path: path.clone(), source }
    };
    let mut open: Option<(RelPath, PathBuf, u64, bool)> = None;
    for item in receiver {
        match item? {
            Item::Dir(rel, path) => {
                let mut h = header(tar::EntryType::Directory, 0o755, 0);
                tar_entry::append(builder, &mut h, &rel.to_bytes(), None, io::empty())
                    .map_err(pack_err(&path))?;
                collected.directories.push(rel);
            }
            Item::Symlink { rel, path, target } => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                let bytes = fs::link_text_bytes(&target)?;
                tar_entry::append(
                    builder,
                    &mut h,
                    &rel.to_bytes(),
                    Some(bytes.as_bytes()),
                    io::empty(),
                )
                .map_err(pack_err(&path))?;
                collected.symlinks.push(SymlinkRecord { path: rel, target });
            }
            Item::File { rel, path, size, executable } => {
                let mode = if executable { 0o755 } else { 0o644 };
                let mut h = header(tar::EntryType::Regular, mode, size);
                // The header goes through the builder (long names); the data follows as
                // chunks, written straight into the stream.
                tar_entry::append(builder, &mut h, &rel.to_bytes(), None, io::empty())
                    .map_err(pack_err(&path))?;
                open = Some((rel, path, size, executable));
            }
            Item::Chunk(bytes) => {
                let path = open.as_ref().map(|o| o.1.clone()).unwrap_or_default();
                builder.get_mut().write_all(&bytes).map_err(pack_err(&path))?;
            }
            Item::FileDone(sha256) => {
                if let Some((rel, path, size, executable)) = open.take() {
                    let padding = (512 - size % 512) % 512;
                    let zeros = [0u8; 512];
                    builder
                        .get_mut()
                        .write_all(zeros.get(..padding as usize).unwrap_or_default())
                        .map_err(pack_err(&path))?;
                    collected.file_bytes += size;
                    collected.files.push(FileRecord {
                        path: rel,
                        size_bytes: size,
                        executable,
                        sha256,
                    });
                }
            }
            Item::Skipped(warning) => collected.warnings.push(warning),
        }
    }
    Ok(())
}

/// Packs `<cache_root>/actions-v1/` into the file `out` (created or truncated). A cache root
/// without `actions-v1/` packs an empty snapshot (the directory entry and the manifest).
///
/// One thread walks, reads and hashes the files; the calling thread writes the tar stream
/// into the compressor (whose workers compress); so reading, hashing and compressing
/// overlap, with at most 8 chunks of 1 MiB in flight.
///
/// # Errors
/// [`Error::SymlinkedLayout`] if `actions-v1` is a symlink or not a directory;
/// [`Error::Pack`] for read or compression failures, [`Error::Local`] for walk failures,
/// [`Error::Record`] if the manifest cannot be sealed.
pub fn pack(cache_root: &Path, out: &Path, options: &PackOptions) -> Result<PackReport, Error> {
    let pack_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source: io::Error| Error::Pack { path: path.clone(), source }
    };
    let carried = cache_root.join(CARRIED_DIR);
    if let Some(meta) = fs::symlink_metadata_opt(&carried)?
        && !meta.is_dir()
    {
        return Err(Error::SymlinkedLayout { path: carried });
    }
    let file = fs::create_truncate(out, 0o600)?;
    let hashing = HashWriter { inner: file, hasher: Hasher::new() };
    let encoder = Encoder::new(hashing, options).map_err(pack_err(out))?;
    let mut builder = tar::Builder::new(encoder);
    let root_rel = RelPath::new(CARRIED_DIR)?;
    let mut collected = Collected::default();
    let mut dir_header = header(tar::EntryType::Directory, 0o755, 0);
    tar_entry::append(
        &mut builder,
        &mut dir_header,
        root_rel.as_str().as_bytes(),
        None,
        io::empty(),
    )
    .map_err(pack_err(&carried))?;
    collected.directories.push(root_rel.clone());

    if fs::symlink_metadata_opt(&carried)?.is_some_and(|m| m.is_dir()) {
        let (sender, receiver) = sync_channel(QUEUE_ITEMS);
        let reader = {
            let carried = carried.clone();
            let root_rel = root_rel.clone();
            std::thread::spawn(move || {
                if let Err(e) = read_tree(&carried, &root_rel, &sender) {
                    let _ = sender.send(Err(e));
                }
            })
        };
        let written = write_items(&receiver, &mut builder, &mut collected);
        // Dropping the receiver stops a reader that is still sending.
        drop(receiver);
        let joined = reader.join();
        written?;
        if joined.is_err() {
            let e = io::Error::other("the snapshot reader thread panicked");
            return Err(Error::Pack { path: carried, source: e });
        }
    }

    let manifest = SnapshotManifest {
        key: options.key.clone(),
        layout: CARRIED_DIR.to_owned(),
        created_at: manifest::now_rfc3339(),
        producer: options.producer.clone(),
        parents: options.parents.clone(),
        directories: collected.directories,
        files: collected.files,
        symlinks: collected.symlinks,
        file_bytes: collected.file_bytes,
    };
    let envelope = manifest::seal(&MANIFEST_SCHEMA, "manifest", &manifest)?;
    let bytes = envelope.to_bytes();
    let mut h = header(tar::EntryType::Regular, 0o644, bytes.len() as u64);
    tar_entry::append(&mut builder, &mut h, MANIFEST_ENTRY.as_bytes(), None, bytes.as_slice())
        .map_err(pack_err(out))?;
    let encoder = builder.into_inner().map_err(pack_err(out))?;
    let mut hashing = encoder.finish().map_err(pack_err(out))?;
    hashing.flush().map_err(pack_err(out))?;
    let object_size_bytes = hashing.hasher.len();
    Ok(PackReport {
        manifest,
        manifest_digest: envelope.content_digest.to_prefixed(),
        object_size_bytes,
        object_sha256: hashing.hasher.finish(),
        warnings: collected.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftover_names() {
        let hex = "0123456789abcdef";
        for yes in [
            format!(".{}.tmp-{hex}", "a".repeat(64)),
            format!(".k.old-{hex}"),
            format!(".ns.trash-{hex}"),
            ".strata-Ab12Cd.tmp".to_owned(),
            format!(".lib.so.strata-{hex}.tmp"),
            format!(".out.strata-tmp-{hex}"),
        ] {
            assert!(is_leftover(&yes), "{yes}");
        }
        for no in [
            ".last-used",
            "manifest.json",
            ".hidden",
            "x.tmp-0123456789abcdef",
            ".a.tmp-xyz",
            "strata-unit-0123456789abcdef",
        ] {
            assert!(!is_leftover(no), "{no}");
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods)]
    fn symlinks_at_layout_positions_are_skipped_and_a_symlinked_root_is_refused() {
        let src = tempfile::tempdir().unwrap();
        let artifacts = src.path().join("actions-v1/third_party/zlib/k/artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        std::os::unix::fs::symlink("libz.so.1", artifacts.join("libz.so")).unwrap();
        std::os::unix::fs::symlink("/elsewhere", src.path().join("actions-v1/custom_operator"))
            .unwrap();
        let out = src.path().join("object");
        let report = pack(src.path(), &out, &PackOptions::new("k")).unwrap();
        let links: Vec<&str> = report.manifest.symlinks.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(links, ["actions-v1/third_party/zlib/k/artifacts/libz.so"]);
        assert!(report.warnings.iter().any(|w| w.contains("custom_operator")), "{report:?}");

        let moved = tempfile::tempdir().unwrap();
        std::fs::rename(src.path().join("actions-v1"), moved.path().join("a")).unwrap();
        std::os::unix::fs::symlink(moved.path().join("a"), src.path().join("actions-v1")).unwrap();
        let err = pack(src.path(), &out, &PackOptions::new("k")).unwrap_err();
        assert!(matches!(err, Error::SymlinkedLayout { .. }), "{err}");
    }
}
