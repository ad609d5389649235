//! Packing: `<cache root>/actions-v1/` → one compressed tar stream in a file
//! (`docs/snapshots.md` "Format").
//!
//! Stream layout:
//! ```text
//! object   = compress( tar( entry* || manifest || end-of-archive ) )
//! entry    = directory | regular file | symlink, path "actions-v1[/…]" relative to the
//!            cache root, in walk order (depth first, names sorted byte-wise)
//! manifest = regular file "strata-snapshot-manifest.json": a strata.snapshot_manifest record
//! ```
//! The stream is written by the content layer's codec ([`crate::content::codec`]: exact-byte
//! names, deterministic GNU headers, mode 0755/0644 from the owner-exec bit only); the
//! manifest records names in the name encoding ([`crate::fs::name`]) and file digests under
//! the chosen algorithm ([`PackOptions::digest`], BLAKE3 by default). Each file is read
//! once, by a reader thread that hashes it and hands it over in 1 MiB chunks (at most 8 in
//! flight); the calling thread writes the tar stream into the compressor (zstd: one job
//! buffer per worker). Memory does not grow with the snapshot size. The compressed output
//! is hashed (same algorithm) as it is written, giving the object digest without a second
//! pass.
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
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use super::manifest::{MANIFEST_ENTRY, MANIFEST_SCHEMA, Producer, SnapshotManifest};
use super::{CARRIED_DIR, Compression, Error, manifest};
use crate::content::codec::{ArchiveWriter, CHUNK_BYTES, WriteOptions};
use crate::content::{FileRecord, Record};
use crate::digest::{ContentDigest, ContentHasher, DigestAlgorithm};
use crate::fs::temp::is_leftover;
use crate::fs::{self, EntryKind, RelPath};
use crate::l1::layout::is_inside_entry_artifacts;
use crate::progress::{Phase, Progress, Silent};
use crate::record::Timestamp;

/// How to pack.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Compression format.
    pub compression: Compression,
    /// Compression level ([`Compression::levels`]).
    pub level: i32,
    /// zstd worker threads; 0 means one per available CPU.
    pub threads: u32,
    /// Digest algorithm of the files in the manifest and of the object (the sidecar's
    /// `object_digest`).
    pub digest: DigestAlgorithm,
    /// The key recorded in the manifest.
    pub key: super::key::ManifestKey,
    /// The producer recorded in the manifest.
    pub producer: Producer,
    /// Parent manifest digests recorded in the manifest.
    pub parents: Vec<crate::record::RecordDigest>,
    /// Pack only this directory below `actions-v1/` (an entry path such as
    /// `third_party/zlib/<key>`), preceded by its ancestor directories: an entry object of
    /// an index snapshot (`crate::snapshot::index`). `None`: the whole tree.
    pub subtree: Option<RelPath>,
}

impl PackOptions {
    /// zstd at its default level on every CPU, BLAKE3, for `key`, with no producer or
    /// parents.
    pub fn new(key: super::key::ManifestKey) -> Self {
        Self {
            compression: Compression::Zstd,
            level: Compression::Zstd.default_level(),
            threads: 0,
            digest: crate::content::DEFAULT_ALGORITHM,
            key,
            producer: Producer::default(),
            parents: Vec::new(),
            subtree: None,
        }
    }
}

/// What [`pack`] produced.
#[derive(Debug, Clone)]
pub struct PackReport {
    /// The manifest written as the last entry.
    pub manifest: SnapshotManifest,
    /// Its record digest (`sha256:<hex>`).
    pub manifest_digest: crate::record::RecordDigest,
    /// Size of the output file in bytes.
    pub object_size_bytes: u64,
    /// Digest of the output file's bytes ([`PackOptions::digest`]).
    pub object_digest: ContentDigest,
    /// Paths skipped, with the reason (special files).
    pub warnings: Vec<String>,
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
    FileDone(ContentDigest),
    Skipped(String),
}

/// Items in flight between the threads (each chunk at most [`CHUNK_BYTES`]).
const QUEUE_ITEMS: usize = 8;

/// Reads exactly `size` bytes of `file`, hashing them (the only time they are hashed),
/// and sends them in chunks. Returns false if the receiver is gone.
fn send_file_data(
    file: &mut File,
    path: &Path,
    size: u64,
    reading: &Reading<'_>,
    sender: &SyncSender<Result<Item, Error>>,
) -> Result<bool, Error> {
    let algorithm = reading.algorithm;
    let mut hasher = ContentHasher::new(algorithm);
    let mut remaining = size;
    while remaining > 0 {
        let want = usize::try_from(remaining.min(CHUNK_BYTES as u64)).unwrap_or(CHUNK_BYTES);
        let mut chunk = vec![0u8; want];
        file.read_exact(&mut chunk).map_err(|e| {
            let e = if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(e.kind(), "the file shrank while packing")
            } else {
                e
            };
            Error::Pack { path: path.to_path_buf(), source: e }
        })?;
        hasher.update(&chunk);
        remaining -= want as u64;
        reading.progress.advance(want as u64);
        if sender.send(Ok(Item::Chunk(chunk))).is_err() {
            return Ok(false);
        }
    }
    Ok(sender.send(Ok(Item::FileDone(hasher.finish()))).is_ok())
}

/// What the reader thread needs besides the tree.
struct Reading<'a> {
    algorithm: DigestAlgorithm,
    progress: &'a dyn Progress,
}

/// The bytes of the regular files [`read_tree`] will read under `carried` (leftovers
/// skipped), for the progress total; a walk error counts what was seen so far (the pack's
/// own walk reports it).
fn file_bytes_to_read(carried: &Path) -> u64 {
    fs::walk(carried)
        .map_while(Result::ok)
        .filter(|e| e.kind == EntryKind::File)
        .filter(|e| !e.rel.as_str().split('/').any(is_leftover))
        .map(|e| e.metadata.len())
        .sum()
}

/// The reader thread: walks `walked` (`actions-v1/`, or the subtree `layout_prefix` below
/// it), skipping leftovers, and sends every item.
fn read_tree(
    walked: &Path,
    root_rel: &RelPath,
    layout_prefix: Option<&RelPath>,
    reading: &Reading<'_>,
    sender: &SyncSender<Result<Item, Error>>,
) -> Result<(), Error> {
    let mut skipping: Option<String> = None;
    for entry in fs::walk(walked) {
        let entry = entry?;
        let inner = entry.rel.as_str();
        let in_layout = match layout_prefix {
            Some(prefix) => format!("{}/{inner}", prefix.as_str()),
            None => inner.to_owned(),
        };
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
            EntryKind::Symlink if !is_inside_entry_artifacts(&in_layout) => Item::Skipped(format!(
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
                    || !send_file_data(&mut file, &entry.path, size, reading, sender)?
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
    entries: Vec<Record>,
    warnings: Vec<String>,
    file_bytes: u64,
}

fn pack_err(path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |source: io::Error| Error::Pack { path: path.to_path_buf(), source }
}

/// The writing side: entries into the codec, in the reader's order.
fn write_items(
    receiver: &Receiver<Result<Item, Error>>,
    writer: &mut ArchiveWriter<File>,
    collected: &mut Collected,
) -> Result<(), Error> {
    let mut open: Option<(RelPath, PathBuf, u64, bool)> = None;
    for item in receiver {
        match item? {
            Item::Dir(rel, path) => {
                writer.directory(&rel).map_err(pack_err(&path))?;
                collected.entries.push(Record::Directory { path: rel });
            }
            Item::Symlink { rel, path, target } => {
                writer.symlink(&rel, &target).map_err(pack_err(&path))?;
                collected.entries.push(Record::Symlink { path: rel, target });
            }
            Item::File { rel, path, size, executable } => {
                let mode = if executable { 0o755 } else { 0o644 };
                writer.begin_file(&rel, size, mode).map_err(pack_err(&path))?;
                open = Some((rel, path, size, executable));
            }
            Item::Chunk(bytes) => {
                let path = open.as_ref().map(|o| o.1.clone()).unwrap_or_default();
                writer.file_data(&bytes).map_err(pack_err(&path))?;
            }
            Item::FileDone(digest) => {
                if let Some((rel, path, size, executable)) = open.take() {
                    writer.end_file().map_err(pack_err(&path))?;
                    collected.file_bytes += size;
                    collected.entries.push(Record::File(FileRecord {
                        path: rel,
                        size_bytes: size,
                        digest,
                        executable,
                    }));
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
    pack_observed(cache_root, out, options, &Silent)
}

/// [`pack`], reporting the phase `pack` to `progress`: its total is the bytes of the files
/// to pack (one stat walk of the tree before the pack), advanced as they are read.
///
/// # Errors
/// As [`pack`].
pub fn pack_observed(
    cache_root: &Path,
    out: &Path,
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<PackReport, Error> {
    let carried = cache_root.join(CARRIED_DIR);
    if let Some(meta) = fs::symlink_metadata_opt(&carried)?
        && !meta.is_dir()
    {
        return Err(Error::SymlinkedLayout { path: carried });
    }
    let file = fs::create_truncate(out, 0o600)?;
    let write_options = WriteOptions {
        compression: options.compression,
        level: options.level,
        threads: options.threads,
        object_digest: options.digest,
    };
    let mut writer = ArchiveWriter::new(file, &write_options).map_err(pack_err(out))?;
    let mut root_rel = RelPath::new(CARRIED_DIR)?;
    let mut collected = Collected::default();
    writer.directory(&root_rel).map_err(pack_err(&carried))?;
    collected.entries.push(Record::Directory { path: root_rel.clone() });
    let mut walked = carried.clone();
    if let Some(subtree) = &options.subtree {
        // The ancestors of the subtree, then the subtree itself, each as a directory; none
        // may be a symlink (a layout position).
        for part in subtree.as_str().split('/') {
            root_rel = root_rel.join(part)?;
            walked = walked.join(part);
            if !fs::symlink_metadata(&walked)?.is_dir() {
                return Err(Error::SymlinkedLayout { path: walked });
            }
            writer.directory(&root_rel).map_err(pack_err(&walked))?;
            collected.entries.push(Record::Directory { path: root_rel.clone() });
        }
    }

    if fs::symlink_metadata_opt(&walked)?.is_some_and(|m| m.is_dir()) {
        crate::parallel::assert_off_pool("snapshot pack");
        let phase = Phase::begin(progress, "pack", file_bytes_to_read(&walked));
        let (sender, receiver) = sync_channel(QUEUE_ITEMS);
        let reading = Reading { algorithm: options.digest, progress };
        let prefix = options.subtree.as_ref();
        let (written, joined) = std::thread::scope(|scope| {
            let reader = scope.spawn(|| {
                if let Err(e) = read_tree(&walked, &root_rel, prefix, &reading, &sender) {
                    let _ = sender.send(Err(e));
                }
                drop(sender);
            });
            let written = write_items(&receiver, &mut writer, &mut collected);
            // Dropping the receiver stops a reader that is still sending.
            drop(receiver);
            (written, reader.join())
        });
        drop(phase);
        written?;
        if joined.is_err() {
            let e = io::Error::other("the snapshot reader thread panicked");
            return Err(Error::Pack { path: walked, source: e });
        }
    }

    let mut entries = collected.entries;
    entries.sort_by(|a, b| a.path().cmp(b.path()));
    let manifest = SnapshotManifest {
        key: options.key.clone(),
        layout: CARRIED_DIR.to_owned(),
        created_at: Timestamp::now().rfc3339_seconds(),
        producer: options.producer.clone(),
        parents: options.parents.clone(),
        entries,
        file_bytes: collected.file_bytes,
    };
    let envelope = manifest::seal(&MANIFEST_SCHEMA, "manifest", &manifest)?;
    let bytes = envelope.to_bytes();
    writer.small_file(MANIFEST_ENTRY.as_bytes(), 0o644, &bytes).map_err(pack_err(out))?;
    let written = writer.finish().map_err(pack_err(out))?;
    Ok(PackReport {
        manifest,
        manifest_digest: crate::record::RecordDigest::of(&envelope.content_digest),
        object_size_bytes: written.object_size_bytes,
        object_digest: written.object_digest,
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
        let report = pack(
            src.path(),
            &out,
            &PackOptions::new(crate::snapshot::key::ManifestKey::parse("k").unwrap()),
        )
        .unwrap();
        let links: Vec<&str> = report
            .manifest
            .entries
            .iter()
            .filter(|e| matches!(e, Record::Symlink { .. }))
            .map(|l| l.path().as_str())
            .collect();
        assert_eq!(links, ["actions-v1/third_party/zlib/k/artifacts/libz.so"]);
        assert!(report.warnings.iter().any(|w| w.contains("custom_operator")), "{report:?}");

        let moved = tempfile::tempdir().unwrap();
        std::fs::rename(src.path().join("actions-v1"), moved.path().join("a")).unwrap();
        std::os::unix::fs::symlink(moved.path().join("a"), src.path().join("actions-v1")).unwrap();
        let err = pack(
            src.path(),
            &out,
            &PackOptions::new(crate::snapshot::key::ManifestKey::parse("k").unwrap()),
        )
        .unwrap_err();
        assert!(matches!(err, Error::SymlinkedLayout { .. }), "{err}");
    }
}
