//! Entry objects: one L1 entry as a verified stream of the content codec, and its
//! installation into a cache (docs/format.md "Index snapshots").
//!
//! An entry object is a snapshot stream ([`crate::snapshot::pack`]) that holds only
//! `actions-v1/`, the entry's ancestor directories and the entry directory, with the
//! manifest last naming the key `entry:<entry path>`. It is named in the store by the
//! BLAKE3 digest of its compressed bytes; a pack object is several entry objects one
//! after another (each a whole zstd stream), and an index or ref gives each one's range.
//!
//! [`install_entry_from`] reads the entry object once, as a stream: it unpacks the bytes
//! under every rule of [`crate::snapshot::unpack`] into a staging directory of the cache
//! root's machine-local `.local/` while hashing them, then requires exactly the size and
//! the BLAKE3 digest the location states and that nothing lies outside the entry's own
//! directory, and only then renames the entry into place without replacing anything: an
//! entry that is already there (a concurrent build's, or one of different content) wins.
//! Nothing of a refused object leaves the staging directory, which is deleted. Memory does
//! not grow with the entry. Staging and publication are L1's one entry writer's
//! ([`crate::l1::write`]): a single entry (a remote-tier fetch) is fsynced before it is
//! renamed into place; a restore installing many ([`Durability::Deferred`]) syncs the
//! filesystem once at the end.

use std::io::{self, Read};
use std::path::Path;

use crate::digest::{ContentDigest, ContentHasher, DigestAlgorithm};
use crate::fs::{self, RelPath};
use crate::l1::write::{Durability, Existing, NewEntry, Published};
use crate::snapshot::pack::{PackOptions, pack};
use crate::snapshot::unpack::{UnpackLimits, unpack_from};
use crate::snapshot::{CARRIED_DIR, Compression, Error};

use super::record::EntryLocation;

/// What [`pack_entry`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedEntry {
    /// Size of the entry object in bytes.
    pub size_bytes: u64,
    /// `blake3:<hex>` of its bytes.
    pub digest: ContentDigest,
    /// Regular files in the entry.
    pub file_count: u64,
    /// Sum of their sizes, in bytes.
    pub file_bytes: u64,
}

/// The manifest key of the entry object of `entry_path`.
pub fn entry_key(entry_path: &str) -> crate::snapshot::key::ManifestKey {
    crate::snapshot::key::ManifestKey::of_entry_text(entry_path)
}

/// Packs the entry `<cache_root>/actions-v1/<entry_path>` into the file `out` (created or
/// truncated): zstd at `level`, one compression thread (entries are packed side by side),
/// BLAKE3 digests.
///
/// # Errors
/// [`Error::SymlinkedLayout`] if a directory on the way is a symlink; [`Error::Local`] /
/// [`Error::Pack`] for read failures.
pub fn pack_entry(
    cache_root: &Path,
    entry_path: &str,
    out: &Path,
    level: i32,
) -> Result<PackedEntry, Error> {
    let options = PackOptions {
        level,
        threads: 1,
        digest: DigestAlgorithm::Blake3,
        subtree: Some(RelPath::new(entry_path)?),
        ..PackOptions::new(entry_key(entry_path))
    };
    let report = pack(cache_root, out, &options)?;
    Ok(PackedEntry {
        size_bytes: report.object_size_bytes,
        digest: report.object_digest,
        file_count: report.manifest.file_count(),
        file_bytes: report.manifest.file_bytes,
    })
}

/// How [`install_entry`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// The entry was unpacked, verified and renamed into place.
    Installed,
    /// An entry already exists at the path; nothing was changed.
    AlreadyPresent,
}

/// True if `rel` (a path in an entry object) is `actions-v1`, an ancestor of the entry
/// directory `prefix` (`actions-v1/<entry path>`), or inside it.
fn within_entry(rel: &str, prefix: &str) -> bool {
    rel == prefix
        || rel.strip_prefix(prefix).is_some_and(|r| r.starts_with('/'))
        || prefix.strip_prefix(rel).is_some_and(|r| r.starts_with('/'))
}

/// Installs the entry object `bytes` (the range `location` describes) into `cache_root`:
/// [`install_entry_from`] over the bytes.
///
/// # Errors
/// As [`install_entry_from`].
pub fn install_entry(
    cache_root: &Path,
    location: &EntryLocation,
    bytes: &[u8],
    durability: Durability,
) -> Result<Installed, Error> {
    if bytes.len() as u64 != location.size_bytes {
        return Err(Error::corrupt(
            &location.path,
            format!("the entry object has {} bytes, expected {}", bytes.len(), location.size_bytes),
        ));
    }
    install_entry_from(cache_root, location, &mut &bytes[..], durability)
}

/// Reads through to `inner`, hashing and counting every byte it returns.
struct Hashing<R> {
    inner: R,
    hasher: ContentHasher,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }
}

/// Installs the entry object `location` describes, read from `input` (at most
/// `location.size_bytes` bytes of it; the caller positions it at the object's start), into
/// `cache_root` (see the module docs), made durable as `durability` says. An entry already
/// at the path is left alone and nothing is read.
///
/// # Errors
/// [`Error::Corrupt`] naming the entry path if the bytes do not match the location's size
/// or digest, fail any unpack check, hold anything outside the entry, or differ from the
/// counts the location states (a digest mismatch is reported as such, whatever else the
/// bytes broke); [`Error::Local`] for local failures. Nothing is left in the cache on
/// error.
pub fn install_entry_from(
    cache_root: &Path,
    location: &EntryLocation,
    input: &mut (dyn Read + Send),
    durability: Durability,
) -> Result<Installed, Error> {
    let label = &location.path;
    let entry_rel = RelPath::new(location.path.clone())?;
    let carried = cache_root.join(CARRIED_DIR);
    let dest = entry_rel.to_path(&carried);
    if fs::symlink_metadata_opt(&dest)?.is_some() {
        return Ok(Installed::AlreadyPresent);
    }
    let local = cache_root.join(crate::l1::layout::LOCAL_DIR);
    let staging = NewEntry::in_local(&local, &carried, &location.path)?;
    let limits = UnpackLimits {
        // Directories are not counted in the location; the byte bound is exact.
        max_entries: location.file_count.saturating_mul(2).saturating_add(10_000),
        max_file_bytes: location.file_bytes,
        manifest_digest: None,
        key: Some(entry_key(&location.path)),
        compression: Some(Compression::Zstd),
        algorithm: Some(DigestAlgorithm::Blake3),
        // Entries are installed side by side, one per core: no writer threads per entry.
        inline_writes: true,
        // The staging directory is the entry directory: nothing above it is created (and
        // removed again), and it is renamed into place whole.
        subtree: Some(format!("{CARRIED_DIR}/{}", location.path)),
        object_bytes: Some(location.size_bytes),
    };
    let mut reader = Hashing {
        inner: input.take(location.size_bytes),
        hasher: ContentHasher::new(DigestAlgorithm::Blake3),
    };
    let unpacked = unpack_from(&mut reader, staging.path(), &limits, label);
    if let Err(Error::Local(e)) = unpacked {
        return Err(Error::Local(e));
    }
    // The rest of the range (nothing, after a whole stream), so that the digest covers it.
    let drained = io::copy(&mut reader, &mut io::sink());
    let Hashing { hasher, .. } = reader;
    let read = hasher.len();
    let actual = hasher.finish();
    if let Err(e) = drained {
        return Err(Error::corrupt(label, format!("cannot read the entry object: {e}")));
    }
    if read != location.size_bytes {
        return Err(Error::corrupt(
            label,
            format!("the entry object has {read} bytes, expected {}", location.size_bytes),
        ));
    }
    if actual != location.digest {
        return Err(Error::corrupt(
            label,
            format!("the entry object's digest is {actual}, expected {}", location.digest),
        ));
    }
    let report = unpacked?;
    let prefix = format!("{CARRIED_DIR}/{}", location.path);
    if let Some(outside) =
        report.manifest.entries.iter().find(|r| !within_entry(r.path().as_str(), &prefix))
    {
        return Err(Error::corrupt(
            label,
            format!("the entry object holds {}, outside the entry", outside.path()),
        ));
    }
    if report.files != location.file_count || report.file_bytes != location.file_bytes {
        return Err(Error::corrupt(
            label,
            format!(
                "the entry object holds {} files of {} bytes, the index says {} of {}",
                report.files, report.file_bytes, location.file_count, location.file_bytes
            ),
        ));
    }
    // The index (or ref) vouches for the entry by its manifest too: an object holding
    // another manifest under this path is not the entry it names.
    let manifest = super::entries::manifest_digest(staging.path())?;
    if manifest.as_ref() != Some(&location.manifest_digest) {
        let found = manifest.map_or_else(|| "none".to_owned(), |d| d.to_string());
        return Err(Error::corrupt(
            label,
            format!(
                "the entry's manifest.json has digest {found}, the index records {}",
                location.manifest_digest
            ),
        ));
    }
    if entry_rel.parent().is_none() {
        return Err(Error::corrupt(label, "an entry path has at least three components"));
    }
    match staging.publish(durability, Existing::Keep)? {
        Published::Published => Ok(Installed::Installed),
        Published::AlreadyPresent => Ok(Installed::AlreadyPresent),
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::snapshot::index::names::entry_object_name;

    fn make_entry(root: &Path, rel: &str) {
        let dir = root.join("actions-v1").join(rel);
        std::fs::create_dir_all(dir.join("artifacts/lib")).unwrap();
        std::fs::write(dir.join("manifest.json"), format!("{{\"entry\":\"{rel}\"}}")).unwrap();
        std::fs::write(dir.join("artifacts/lib/libz.a"), vec![7u8; 5000]).unwrap();
        std::os::unix::fs::symlink("libz.a", dir.join("artifacts/lib/libz.so")).unwrap();
    }

    fn location_of(rel: &str, packed: &PackedEntry) -> EntryLocation {
        EntryLocation {
            path: rel.into(),
            manifest_digest: ContentDigest::of_bytes(
                DigestAlgorithm::Blake3,
                format!("{{\"entry\":\"{rel}\"}}").as_bytes(),
            ),
            object: entry_object_name(&packed.digest).unwrap(),
            offset: 0,
            size_bytes: packed.size_bytes,
            digest: packed.digest,
            file_count: packed.file_count,
            file_bytes: packed.file_bytes,
        }
    }

    #[test]
    fn an_entry_round_trips_alone_and_nothing_else_comes_with_it() {
        let src = tempfile::tempdir().unwrap();
        let rel = "third_party/zlib/k1";
        make_entry(src.path(), rel);
        make_entry(src.path(), "third_party/zlib/k2");
        let out = src.path().join("object");
        let packed = pack_entry(src.path(), rel, &out, 3).unwrap();
        assert_eq!((packed.file_count, packed.file_bytes), (2, 5000 + 31));
        let bytes = std::fs::read(&out).unwrap();
        let location = location_of(rel, &packed);

        let dst = tempfile::tempdir().unwrap();
        assert_eq!(
            install_entry(dst.path(), &location, &bytes, Durability::Fsync).unwrap(),
            Installed::Installed
        );
        let entry = dst.path().join("actions-v1").join(rel);
        assert_eq!(std::fs::read(entry.join("artifacts/lib/libz.a")).unwrap(), vec![7u8; 5000]);
        assert_eq!(
            std::fs::read_link(entry.join("artifacts/lib/libz.so")).unwrap(),
            Path::new("libz.a")
        );
        assert!(!dst.path().join("actions-v1/third_party/zlib/k2").exists());
        assert_eq!(
            install_entry(dst.path(), &location, &bytes, Durability::Fsync).unwrap(),
            Installed::AlreadyPresent
        );
        // The staging directory is gone.
        assert_eq!(std::fs::read_dir(dst.path().join(".local")).unwrap().count(), 0);

        // Flipped byte, truncation, and a location claiming another path: all refused,
        // nothing installed.
        let other = tempfile::tempdir().unwrap();
        let mut flipped = bytes.clone();
        flipped[bytes.len() / 2] ^= 1;
        assert!(
            install_entry(other.path(), &location, &flipped, Durability::Fsync)
                .unwrap_err()
                .is_corrupt()
        );
        let short = &bytes[..bytes.len() - 1];
        let short_location = EntryLocation {
            size_bytes: short.len() as u64,
            digest: ContentDigest::of_bytes(DigestAlgorithm::Blake3, short),
            ..location.clone()
        };
        assert!(
            install_entry(other.path(), &short_location, short, Durability::Fsync)
                .unwrap_err()
                .is_corrupt()
        );
        let moved = EntryLocation { path: "third_party/zlib/k2".into(), ..location.clone() };
        assert!(
            install_entry(other.path(), &moved, &bytes, Durability::Fsync)
                .unwrap_err()
                .is_corrupt()
        );
        assert!(!other.path().join("actions-v1/third_party/zlib/k1").exists());
        assert!(!other.path().join("actions-v1/third_party/zlib/k2").exists());
    }

    /// Streamed from a file in which the object is followed by other bytes (as in a pack):
    /// exactly its range is read; a file that ends early, or a flipped byte, installs
    /// nothing and says why.
    #[test]
    fn an_entry_streams_from_its_range_of_a_larger_file() {
        let src = tempfile::tempdir().unwrap();
        let rel = "third_party/zlib/k1";
        make_entry(src.path(), rel);
        let out = src.path().join("object");
        let packed = pack_entry(src.path(), rel, &out, 3).unwrap();
        let location = location_of(rel, &packed);
        let mut bytes = std::fs::read(&out).unwrap();
        bytes.extend_from_slice(b"the next entry of the pack");
        let dst = tempfile::tempdir().unwrap();
        let mut input = &bytes[..];
        assert_eq!(
            install_entry_from(dst.path(), &location, &mut input, Durability::Fsync).unwrap(),
            Installed::Installed
        );
        assert_eq!(input, b"the next entry of the pack", "read exactly the range");
        let entry = dst.path().join("actions-v1").join(rel);
        assert_eq!(std::fs::read(entry.join("artifacts/lib/libz.a")).unwrap(), vec![7u8; 5000]);

        let size = usize::try_from(packed.size_bytes).unwrap();
        let other = tempfile::tempdir().unwrap();
        let short = &bytes[..size - 10];
        let err = install_entry_from(other.path(), &location, &mut &short[..], Durability::Fsync)
            .unwrap_err();
        assert!(err.is_corrupt() && err.one_line().contains("expected"), "{}", err.one_line());
        let mut flipped = bytes[..size].to_vec();
        flipped[size / 2] ^= 0x10;
        let err = install_entry_from(other.path(), &location, &mut &flipped[..], Durability::Fsync)
            .unwrap_err();
        assert!(err.one_line().contains("digest"), "{}", err.one_line());
        // The bytes the location names, but another manifest than it records.
        let other_manifest = EntryLocation {
            manifest_digest: ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"{}"),
            ..location.clone()
        };
        let err = install_entry_from(
            other.path(),
            &other_manifest,
            &mut &bytes[..size],
            Durability::Fsync,
        )
        .unwrap_err();
        assert!(err.one_line().contains("manifest.json has digest"), "{}", err.one_line());
        assert!(!other.path().join("actions-v1").join(rel).exists());
        let left = std::fs::read_dir(other.path().join(".local")).unwrap().count();
        assert_eq!(left, 0, "staging removed");
    }

    #[test]
    fn within_entry_accepts_ancestors_and_descendants_only() {
        let p = "actions-v1/third_party/zlib/k";
        for yes in ["actions-v1", "actions-v1/third_party", p, "actions-v1/third_party/zlib/k/a"] {
            assert!(within_entry(yes, p), "{yes}");
        }
        for no in [
            "actions-v1/third_party/zlib/k2",
            "actions-v1/custom_operator",
            "actions-v1/third_party/zlib/j/a",
        ] {
            assert!(!within_entry(no, p), "{no}");
        }
    }
}
