//! The new entries of an index save: each packed as an entry object (in parallel, one
//! per core), grouped into store objects (an object of at least [`ALONE_BYTES`] alone,
//! smaller ones concatenated into packs of at most [`PACK_BYTES`]), and uploaded with
//! put-if-absent, [`STORE_PARALLELISM`] at a time.
//!
//! Every temp file lives in `<cache root>/.local/` (machine-local, never carried) and is
//! deleted when its guard drops, whatever happens.

use std::io::Write as _;
use std::path::Path;

use super::entries::LocalEntry;
use super::names::entry_object_name;
use super::object::{PackedEntry, pack_entry};
use super::record::EntryLocation;
use crate::digest::{ContentDigest, ContentHasher, DigestAlgorithm};
use crate::fs;
use crate::fs::temp::{self, Purpose};
use crate::parallel::{self, STORE_PARALLELISM, Workers};
use crate::progress::{Phase, Progress};
use crate::snapshot::Error;
use crate::transport::{ObjectKey, ObjectStore, PutOutcome};

/// Entry objects of at least this many bytes are stored alone (4 MiB).
pub const ALONE_BYTES: u64 = 4 * 1024 * 1024;
/// A pack of smaller entry objects is closed before it would exceed this size (32 MiB).
pub const PACK_BYTES: u64 = 32 * 1024 * 1024;

/// One new entry, packed into a temp file.
pub(crate) struct Packed {
    /// The entry.
    pub entry: LocalEntry,
    /// What [`pack_entry`] wrote.
    pub packed: PackedEntry,
    /// The entry object (deleted on drop).
    pub file: tempfile::TempPath,
}

/// Packs `entries` of `cache_root` (zstd `level`) into temp files under `.local/`, one
/// thread per core; reports each entry's bytes to the phase `pack`.
///
/// # Errors
/// The first entry that could not be packed ([`pack_entry`]'s errors).
pub(crate) fn pack_all(
    cache_root: &Path,
    entries: Vec<LocalEntry>,
    level: i32,
    progress: &dyn Progress,
) -> Result<Vec<Packed>, Error> {
    let local =
        fs::create_dir_all_within(cache_root, Path::new(crate::l1::layout::LOCAL_DIR), 0o755)?;
    // The phase counts file bytes (an estimate from `lstat`; the pack reads them).
    let total: u64 = entries
        .iter()
        .flat_map(|e| fs::walk(&e.dir))
        .filter_map(Result::ok)
        .filter(|item| item.metadata.is_file())
        .map(|item| item.metadata.len())
        .sum();
    let phase = Phase::begin(progress, "pack", total);
    // Plain threads, not rayon's pool: each pack waits on its reader thread, which hashes
    // on the pool (`crate::parallel`).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results = parallel::map(&entries, Workers::Threads(cores), |entry| -> Result<_, Error> {
        let (_, file) = temp::create_file(&local, Purpose::Pack, "entry", 0o600)?;
        let packed = pack_entry(cache_root, &entry.path, &file, level)?;
        phase.advance(packed.file_bytes);
        Ok((packed, file))
    });
    drop(phase);
    let mut out = Vec::with_capacity(entries.len());
    for (entry, result) in entries.into_iter().zip(results) {
        let (packed, file) = result?;
        out.push(Packed { entry, packed, file });
    }
    Ok(out)
}

/// One store object to upload: a temp file and its name.
pub(crate) struct StoreObject {
    /// `~entries/<2 hex>/<64 hex>`.
    pub name: String,
    /// Its bytes (an entry object's own temp file, or a pack).
    pub path: std::path::PathBuf,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// The pack file, when this object is one (deleted on drop).
    _pack: Option<tempfile::TempPath>,
}

/// Groups `packed` into store objects (module docs) and gives every entry its location.
/// Returns the objects and the locations, in the order of `packed`.
///
/// # Errors
/// [`Error::Local`] if a pack cannot be written.
pub(crate) fn group(
    cache_root: &Path,
    packed: &[Packed],
) -> Result<(Vec<StoreObject>, Vec<EntryLocation>), Error> {
    let local = cache_root.join(crate::l1::layout::LOCAL_DIR);
    let mut objects = Vec::new();
    let mut locations: Vec<Option<EntryLocation>> = vec![None; packed.len()];
    let location = |p: &Packed, object: &str, offset: u64| EntryLocation {
        path: p.entry.path.clone(),
        manifest_digest: p.entry.manifest_digest,
        object: object.to_owned(),
        offset,
        size_bytes: p.packed.size_bytes,
        digest: p.packed.digest,
        file_count: p.packed.file_count,
        file_bytes: p.packed.file_bytes,
    };
    let mut small: Vec<usize> = Vec::new();
    for (i, p) in packed.iter().enumerate() {
        if p.packed.size_bytes >= ALONE_BYTES {
            let name = object_name(&p.packed.digest)?;
            locations[i] = Some(location(p, &name, 0));
            objects.push(StoreObject {
                name,
                path: p.file.to_path_buf(),
                size_bytes: p.packed.size_bytes,
                _pack: None,
            });
        } else {
            small.push(i);
        }
    }
    let mut start = 0;
    while start < small.len() {
        let mut end = start;
        let mut size = 0u64;
        while end < small.len()
            && (end == start || size + packed[small[end]].packed.size_bytes <= PACK_BYTES)
        {
            size += packed[small[end]].packed.size_bytes;
            end += 1;
        }
        let members = &small[start..end];
        if let [only] = members {
            let p = &packed[*only];
            let name = object_name(&p.packed.digest)?;
            locations[*only] = Some(location(p, &name, 0));
            objects.push(StoreObject {
                name,
                path: p.file.to_path_buf(),
                size_bytes: size,
                _pack: None,
            });
        } else {
            let (file, path) = temp::create_file(&local, Purpose::Pack, "entries", 0o600)?;
            let digest = concatenate(file, &path, members.iter().map(|&i| &packed[i]))?;
            let name = object_name(&digest)?;
            let mut offset = 0;
            for &i in members {
                locations[i] = Some(location(&packed[i], &name, offset));
                offset += packed[i].packed.size_bytes;
            }
            objects.push(StoreObject {
                name,
                path: path.to_path_buf(),
                size_bytes: size,
                _pack: Some(path),
            });
        }
        start = end;
    }
    Ok((objects, locations.into_iter().flatten().collect()))
}

fn object_name(digest: &ContentDigest) -> Result<String, Error> {
    entry_object_name(digest)
        .ok_or_else(|| Error::corrupt("entry object", format!("{digest} is not a BLAKE3 digest")))
}

/// Writes the entry objects of `members` one after another into `file` (at `path`),
/// hashing the bytes as they are written; returns the pack's BLAKE3 digest.
fn concatenate<'a>(
    file: std::fs::File,
    path: &Path,
    members: impl Iterator<Item = &'a Packed>,
) -> Result<ContentDigest, Error> {
    let mut hasher = ContentHasher::new(DigestAlgorithm::Blake3);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    for member in members {
        let bytes = fs::read(&member.file)?;
        hasher.update(&bytes);
        out.write_all(&bytes).map_err(|e| fs::Error::io("write", path, e))?;
    }
    out.flush().map_err(|e| fs::Error::io("write", path, e))?;
    Ok(hasher.finish())
}

/// What [`upload_all`] moved.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Uploaded {
    /// Objects this save created.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Objects the store already held (same name, so same bytes).
    pub already_there: u64,
    /// Transport retries.
    pub retries: u32,
}

/// Uploads `objects` with put-if-absent, [`STORE_PARALLELISM`] at a time; reports bytes to
/// the phase `upload`.
///
/// # Errors
/// [`Error::Transport`] for the first object that could not be uploaded (nothing is
/// committed then; the objects already uploaded stay, unreferenced).
pub(crate) fn upload_all(
    store: &dyn ObjectStore,
    objects: &[StoreObject],
    progress: &dyn Progress,
) -> Result<Uploaded, Error> {
    let total = objects.iter().map(|o| o.size_bytes).sum();
    let phase = Phase::begin(progress, "upload", total);
    let results = parallel::map(objects, Workers::Threads(STORE_PARALLELISM), |object| {
        let key = ObjectKey::new(object.name.clone())
            .map_err(|e| Error::transport("upload", object.name.as_str(), e))?;
        let put = store
            .put_file_if_absent(&key, &object.path)
            .map_err(|e| Error::transport("upload", object.name.as_str(), e))?;
        phase.advance(object.size_bytes);
        Ok::<_, Error>((put, object.size_bytes))
    });
    drop(phase);
    let mut uploaded = Uploaded::default();
    for result in results {
        let ((outcome, stats), size) = result?;
        uploaded.retries = uploaded.retries.saturating_add(stats.retries);
        match outcome {
            PutOutcome::Created => {
                uploaded.objects += 1;
                uploaded.bytes += size;
            }
            PutOutcome::AlreadyExists => uploaded.already_there += 1,
        }
    }
    Ok(uploaded)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::digest::ContentDigest;

    fn packed(dir: &Path, path: &str, size: usize) -> Packed {
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let (_, file) = temp::create_file(dir, Purpose::Pack, "entry", 0o600).unwrap();
        std::fs::write(&file, &bytes).unwrap();
        let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, &bytes);
        Packed {
            entry: LocalEntry {
                path: path.into(),
                dir: dir.join(path),
                manifest_digest: ContentDigest::of_bytes(DigestAlgorithm::Blake3, path.as_bytes()),
            },
            packed: PackedEntry { size_bytes: size as u64, digest, file_count: 1, file_bytes: 1 },
            file,
        }
    }

    #[test]
    fn big_entries_stand_alone_and_small_ones_share_a_pack_named_by_its_digest() {
        let root = tempfile::tempdir().unwrap();
        let local = root.path().join(".local");
        std::fs::create_dir_all(&local).unwrap();
        let all = vec![
            packed(&local, "a/a/1", 1000),
            packed(&local, "a/a/2", ALONE_BYTES as usize),
            packed(&local, "a/a/3", 3000),
        ];
        let (objects, locations) = group(root.path(), &all).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(locations.len(), 3);
        let big = &locations[1];
        assert_eq!((big.offset, big.object.as_str()), (0, objects[0].name.as_str()));
        assert_eq!(
            Some(big.digest),
            crate::snapshot::index::names::entry_object_digest(&big.object)
        );
        // The pack holds 1 then 3, back to back; its name is the digest of its bytes, and
        // each range's bytes are the entry object's.
        let pack = std::fs::read(&objects[1].path).unwrap();
        assert_eq!(pack.len(), 4000);
        assert_eq!(
            crate::snapshot::index::names::entry_object_digest(&objects[1].name),
            Some(ContentDigest::of_bytes(DigestAlgorithm::Blake3, &pack))
        );
        for (location, p) in [(&locations[0], &all[0]), (&locations[2], &all[2])] {
            let range = location.offset as usize..(location.offset + location.size_bytes) as usize;
            assert_eq!(location.object, objects[1].name);
            assert_eq!(pack[range], std::fs::read(&p.file).unwrap()[..]);
        }
        assert_eq!((locations[0].offset, locations[2].offset), (0, 1000));
    }
}
