//! Restore of an index snapshot (docs/snapshots.md "Index snapshots"): fetch the index,
//! then only the entries the local cache lacks, each verified before it is installed.
//!
//! Called by [`crate::snapshot::restore()`] for a candidate whose sidecar (already read,
//! verified and checked against the trusted producers) has kind `index`:
//! 1. download the index object; its size and digest must match the sidecar, it must
//!    decompress (at most [`MAX_INDEX_BYTES`]) to a `strata.snapshot_index` record whose
//!    content digest is the sidecar's `manifest_digest`, whose key is the candidate's and
//!    whose counts are the sidecar's. Any mismatch rejects the candidate
//!    ([`Error::Corrupt`]), so the restore falls through to the next one;
//! 2. in the cache directory itself (created if absent; no whole-directory swap), list
//!    the local entries; every indexed entry whose path is absent is fetched. Entries are
//!    grouped by store object: when the bytes needed are at least half the object (its
//!    size estimated as the furthest range the index names in it), the whole object is
//!    downloaded into a temp file; otherwise each run of adjacent ranges (at most
//!    [`MAX_RUN_BYTES`]) is one ranged GET into memory. Eight fetches run at once; each
//!    installs its entries with [`install_entry_from`] (unpacks into staging while it
//!    hashes, checks size and digest, refuses anything outside the entry, renames into
//!    place without replacing), one install per core at a time over all fetches, so the
//!    restore's memory is bounded whatever the entries' sizes;
//! 3. an entry that cannot be fetched or fails verification is skipped with a note and
//!    counted as failed: it is a MISS later, never a wrong file; the restore succeeds
//!    (without `cache-hit`), unless every entry failed and none was already present: then
//!    the candidate is rejected ([`Error::Corrupt`]) and the next one is tried;
//! 4. one `syncfs`, then the origin record (lineage for the next save) and the verified
//!    index record at `.local/snapshot-index.json` (the parent of the next save), both
//!    replaced atomically.
//!
//! Existing entries are never replaced, whatever the index says about them. A crash
//! leaves whole entries (each appears by one rename) plus staging directories under
//! `.local/`, which are not entries.

use std::collections::{BTreeMap, HashSet};
use std::io::{Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::entries;
use super::object::{Installed, install_entry, install_entry_from};
use super::record::{EntryLocation, MAX_INDEX_BYTES, SnapshotIndex, decompress_index, load_index};
use super::save::write_parent;
use crate::digest::ContentDigest;
use crate::fs;
use crate::fs::temp::{self, Purpose};
use crate::l1::layout::LOCAL_DIR;
use crate::l1::write::Durability;
use crate::parallel::{self, Permits, STORE_PARALLELISM, Workers};
use crate::progress::{Phase, Progress};
use crate::snapshot::Error;
use crate::snapshot::manifest::Sidecar;
use crate::transport::{ObjectKey, ObjectStore};

/// Most per-entry failure notes a restore reports (the count covers all).
const MAX_FAILURE_NOTES: usize = 5;

/// Longest run of adjacent entries fetched with one ranged GET, in bytes (4 MiB; the run
/// is held in memory until its entries are installed). An entry longer than this is a run
/// of its own.
pub const MAX_RUN_BYTES: u64 = 4 * 1024 * 1024;

/// What an index restore did (besides [`crate::snapshot::RestoreReport`]'s common fields).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IndexRestoreCounts {
    /// Entries the index lists.
    pub entries: u64,
    /// Of those, entries already in the cache (left as they are).
    pub present: u64,
    /// Entries fetched, verified and installed.
    pub fetched: u64,
    /// Entries that could not be fetched or failed verification (skipped; later misses).
    pub failed: u64,
    /// Bytes downloaded: the index object and every entry range or whole object.
    pub bytes_downloaded: u64,
    /// Whole store objects downloaded.
    pub whole_objects: u64,
    /// Ranged GETs sent.
    pub ranged_gets: u64,
}

/// What a verified index restore gave.
pub(crate) struct IndexRestored {
    pub counts: IndexRestoreCounts,
    /// The index record's content digest (`sha256:<hex>`).
    pub manifest_digest: crate::record::RecordDigest,
    /// The verified index record bytes (uncompressed).
    pub record: Vec<u8>,
    /// Files and bytes of the entries installed.
    pub file_count: u64,
    pub file_bytes: u64,
    pub download_seconds: f64,
    pub notes: Vec<String>,
}

/// Downloads and verifies the index object of `sidecar` (module docs, step 1).
///
/// # Errors
/// [`Error::Corrupt`] naming `key` for any mismatch or a missing object;
/// [`Error::Transport`] for store failures; [`Error::Local`] for the temp file.
pub(crate) fn fetch_index(
    store: &dyn ObjectStore,
    cache_dir: &Path,
    key: &str,
    sidecar: &Sidecar,
) -> Result<(SnapshotIndex, crate::record::RecordDigest, Vec<u8>, u64), Error> {
    if sidecar.object_size_bytes > MAX_INDEX_BYTES {
        return Err(Error::corrupt(
            key,
            format!(
                "its sidecar declares a {}-byte index object, more than the 256 MiB an index \
                 may have",
                sidecar.object_size_bytes
            ),
        ));
    }
    let object = crate::snapshot::commit::object_key(sidecar.object_name())?;
    let download = temp::temp_file_beside(cache_dir, Purpose::Download)?;
    match store.get_to_file(&object, &download) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {
            return Err(Error::corrupt(
                key,
                format!("its sidecar commits the index object {object}, which is not in the store"),
            ));
        }
        Err(e) => return Err(Error::transport("download", object.as_str(), e)),
    }
    let bytes = fs::read_capped_nofollow(&download, MAX_INDEX_BYTES)?.unwrap_or_default();
    drop(download);
    let digest = ContentDigest::of_bytes(sidecar.object_digest.algorithm(), &bytes);
    if bytes.len() as u64 != sidecar.object_size_bytes || digest != sidecar.object_digest {
        return Err(Error::corrupt(
            key,
            format!(
                "the downloaded index object ({} bytes, digest {digest}) does not match its \
                 sidecar ({} bytes, digest {})",
                bytes.len(),
                sidecar.object_size_bytes,
                sidecar.object_digest
            ),
        ));
    }
    let record = decompress_index(&bytes, key)?;
    let (index, record_digest) = load_index(&record, key).map_err(|e| match e {
        Error::Record { .. } => Error::corrupt(key, format!("its index {}", e.one_line())),
        other => other,
    })?;
    if record_digest != sidecar.manifest_digest {
        return Err(Error::corrupt(
            key,
            format!(
                "its index record has digest {record_digest}, its sidecar declares {}",
                sidecar.manifest_digest
            ),
        ));
    }
    if index.key != key
        || index.entries.len() as u64 != sidecar.entry_count
        || index.file_count() != sidecar.file_count
        || index.file_bytes() != sidecar.file_bytes
    {
        return Err(Error::corrupt(key, "its index does not match its sidecar (key or counts)"));
    }
    Ok((index, record_digest, record, bytes.len() as u64))
}

/// One request: a whole object, or one run of adjacent ranges of it.
struct Fetch<'a> {
    object: &'a str,
    /// `None`: the whole object; else the byte range `start..end`.
    range: Option<(u64, u64)>,
    /// The entries it carries.
    entries: Vec<&'a EntryLocation>,
}

/// Plans the requests for `missing` (module docs, step 2). `index` gives each object's
/// estimated size.
fn plan<'a>(index: &'a SnapshotIndex, missing: &[&'a EntryLocation]) -> Vec<Fetch<'a>> {
    let mut extent: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &index.entries {
        let end = e.offset.saturating_add(e.size_bytes);
        let slot = extent.entry(e.object.as_str()).or_default();
        *slot = (*slot).max(end);
    }
    let mut by_object: BTreeMap<&str, Vec<&EntryLocation>> = BTreeMap::new();
    for e in missing {
        by_object.entry(e.object.as_str()).or_default().push(e);
    }
    let mut fetches = Vec::new();
    for (object, mut members) in by_object {
        members.sort_by_key(|e| e.offset);
        let needed: u64 = members.iter().map(|e| e.size_bytes).sum();
        let size = extent.get(object).copied().unwrap_or(needed);
        if needed.saturating_mul(2) >= size {
            fetches.push(Fetch { object, range: None, entries: members });
            continue;
        }
        let mut current: Option<Fetch<'a>> = None;
        for e in members {
            let end = e.offset.saturating_add(e.size_bytes);
            match &mut current {
                Some(Fetch { range: Some((run_start, run_end)), entries, .. })
                    if *run_end == e.offset && end - *run_start <= MAX_RUN_BYTES =>
                {
                    *run_end = end;
                    entries.push(e);
                }
                _ => {
                    fetches.extend(current.take());
                    current =
                        Some(Fetch { object, range: Some((e.offset, end)), entries: vec![e] });
                }
            }
        }
        fetches.extend(current);
    }
    fetches
}

/// Installs the entries of `index` that `cache_dir` lacks (module docs, steps 2–4).
/// `index_bytes` is the index object's size (counted as downloaded).
///
/// # Errors
/// [`Error::Local`] if the cache directory cannot be created or listed, or the final
/// sync fails. Entry failures are counted, not errors.
pub(crate) fn install_missing(
    store: &dyn ObjectStore,
    cache_dir: &Path,
    index: &SnapshotIndex,
    index_bytes: u64,
    progress: &dyn Progress,
) -> Result<IndexRestored, Error> {
    fs::create_dir_all(cache_dir)?;
    let present: HashSet<String> = entries::list(cache_dir)?.into_iter().map(|e| e.path).collect();
    let (missing, bombs): (Vec<&EntryLocation>, Vec<&EntryLocation>) = index
        .entries
        .iter()
        .filter(|e| !present.contains(&e.path))
        .partition(|e| !expands_too_much(e));
    let mut counts = IndexRestoreCounts {
        entries: index.entries.len() as u64,
        present: (index.entries.len() - missing.len()) as u64,
        bytes_downloaded: index_bytes,
        ..IndexRestoreCounts::default()
    };
    let fetches = plan(index, &missing);
    let total: u64 = missing.iter().map(|e| e.size_bytes).sum();
    let phase = Phase::begin(progress, "restore", total);
    let downloaded = AtomicU64::new(0);
    let started = Instant::now();
    // Downloads wait on the network, installs on the CPU and the disk: many fetches, one
    // install per core at a time (each install's memory is bounded, so this bounds the
    // restore's).
    let installs = Permits::new(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let results = parallel::map(&fetches, Workers::Threads(STORE_PARALLELISM), |fetch| {
        let outcome = fetch_and_install(store, cache_dir, fetch, &downloaded, &installs);
        phase.advance(fetch.entries.iter().map(|e| e.size_bytes).sum());
        outcome
    });
    drop(phase);
    let download_seconds = started.elapsed().as_secs_f64();
    counts.bytes_downloaded += downloaded.load(Ordering::Relaxed);
    let mut failures: Vec<String> = bombs
        .iter()
        .map(|e| {
            format!(
                "{}: declares {} bytes of files for a {}-byte entry object (more than {}× \
                 expansion; a decompression bomb?)",
                e.path,
                e.file_bytes,
                e.size_bytes,
                crate::snapshot::unpack::MAX_EXPANSION_RATIO
            )
        })
        .collect();
    counts.failed = failures.len() as u64;
    let (mut file_count, mut file_bytes) = (0, 0);
    for (fetch, outcomes) in fetches.iter().zip(results) {
        match fetch.range {
            None => counts.whole_objects += 1,
            Some(_) => counts.ranged_gets += 1,
        }
        for (entry, outcome) in fetch.entries.iter().zip(outcomes) {
            match outcome {
                Ok(Installed::Installed) => {
                    counts.fetched += 1;
                    file_count += entry.file_count;
                    file_bytes += entry.file_bytes;
                }
                Ok(Installed::AlreadyPresent) => counts.present += 1,
                Err(reason) => {
                    counts.failed += 1;
                    failures.push(format!("{}: {reason}", entry.path));
                }
            }
        }
    }
    let mut notes = Vec::new();
    if !failures.is_empty() {
        // One note (shown as one warning) carries the count and the first reasons; no
        // separate log line repeats them.
        notes.push(format!(
            "{} of {} entries were skipped (not fetched or failed verification; each is a \
             cache miss later, never a wrong file): {}{}",
            failures.len(),
            missing.len() + bombs.len(),
            failures.iter().take(MAX_FAILURE_NOTES).cloned().collect::<Vec<_>>().join("; "),
            if failures.len() > MAX_FAILURE_NOTES { "; …" } else { "" }
        ));
    }
    fs::sync_filesystem(cache_dir)?;
    Ok(IndexRestored {
        counts,
        manifest_digest: crate::record::RecordDigest::default(),
        record: Vec::new(),
        file_count,
        file_bytes,
        download_seconds,
        notes,
    })
}

/// True if `entry` declares more file bytes than a snapshot of its size may unpack to
/// (the bound of full snapshots, `MAX_EXPANSION_RATIO`, applied per entry object).
pub(crate) fn expands_too_much(entry: &EntryLocation) -> bool {
    use crate::snapshot::unpack::{MAX_EXPANSION_RATIO, MIN_EXPANSION_ALLOWANCE_BYTES};
    let declared = entry.file_count.saturating_mul(512).saturating_add(entry.file_bytes);
    let allowed =
        entry.size_bytes.saturating_mul(MAX_EXPANSION_RATIO).max(MIN_EXPANSION_ALLOWANCE_BYTES);
    declared > allowed
}

/// Fetches one request and installs its entries, one after another (at most
/// `installs.count()` installs run at once over all fetches); one result per entry, in
/// order (the failure's reason as text).
///
/// A run of ranges arrives in memory (at most [`MAX_RUN_BYTES`] but for a single longer
/// entry); a whole object is downloaded into a temp file under `.local/`, and each entry
/// is streamed from its range of the file. Installs run on this fetch's thread: an
/// install (an extraction) must not run on rayon's pool (`crate::parallel`).
fn fetch_and_install(
    store: &dyn ObjectStore,
    cache_dir: &Path,
    fetch: &Fetch<'_>,
    downloaded: &AtomicU64,
    installs: &Permits,
) -> Vec<Result<Installed, String>> {
    let fail_all = |reason: String| fetch.entries.iter().map(|_| Err(reason.clone())).collect();
    let key = match ObjectKey::new(fetch.object) {
        Ok(key) => key,
        Err(e) => return fail_all(e.to_string()),
    };
    match fetch.range {
        Some((start, end)) => {
            let bytes = match store.get_range(&key, start, end) {
                Ok(bytes) => bytes,
                Err(e) => return fail_all(format!("cannot download {}: {}", fetch.object, e)),
            };
            downloaded.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            let install = |entry: &&EntryLocation| {
                let from = entry.offset.checked_sub(start).and_then(|s| usize::try_from(s).ok());
                let slice = from.and_then(|s| {
                    let end = s.checked_add(usize::try_from(entry.size_bytes).ok()?)?;
                    bytes.get(s..end)
                });
                let Some(slice) = slice else {
                    return Err(format!(
                        "{} holds {} bytes, too few for the entry's range",
                        fetch.object,
                        bytes.len()
                    ));
                };
                let _permit = installs.acquire();
                install_entry(cache_dir, entry, slice, Durability::Deferred)
                    .map_err(|e| e.one_line())
            };
            fetch.entries.iter().map(install).collect()
        }
        None => {
            let download = match whole_object(store, cache_dir, &key) {
                Ok(download) => download,
                Err(e) => return fail_all(e.one_line()),
            };
            downloaded.fetch_add(download.1, Ordering::Relaxed);
            let install = |entry: &&EntryLocation| {
                let mut file = fs::open(&download.0).map_err(|e| e.to_string())?;
                file.seek(SeekFrom::Start(entry.offset))
                    .map_err(|e| format!("{}: {e}", download.0.display()))?;
                let _permit = installs.acquire();
                install_entry_from(cache_dir, entry, &mut file, Durability::Deferred)
                    .map_err(|e| e.one_line())
            };
            fetch.entries.iter().map(install).collect()
        }
    }
}

/// Downloads the whole object `key` into a temp file under `.local/` (deleted when the
/// returned path drops); returns it and its size in bytes.
fn whole_object(
    store: &dyn ObjectStore,
    cache_dir: &Path,
    key: &ObjectKey,
) -> Result<(tempfile::TempPath, u64), Error> {
    let local = fs::create_dir_all_within(cache_dir, Path::new(LOCAL_DIR), 0o755)?;
    let (_, path) = temp::create_file(&local, Purpose::Download, "entries", 0o600)?;
    let (meta, _) =
        store.get_to_file(key, &path).map_err(|e| Error::transport("download", key.as_str(), e))?;
    Ok((path, meta.size_bytes))
}

/// Restores the index snapshot `sidecar` of `key` into `cache_dir` (module docs).
///
/// # Errors
/// As [`fetch_index`] (the candidate is rejected) and [`install_missing`].
pub(crate) fn restore_index(
    store: &dyn ObjectStore,
    cache_dir: &Path,
    key: &str,
    sidecar: &Sidecar,
    progress: &dyn Progress,
) -> Result<IndexRestored, Error> {
    let (index, manifest_digest, record, index_bytes) =
        fetch_index(store, cache_dir, key, sidecar)?;
    let mut restored = install_missing(store, cache_dir, &index, index_bytes, progress)?;
    let counts = &restored.counts;
    if counts.failed > 0 && counts.fetched == 0 && counts.present == 0 {
        // Nothing of it is here: not a restore (the next candidate is tried, and a workflow
        // is not told it has a cache).
        return Err(Error::corrupt(
            key,
            format!(
                "none of its {} entries could be fetched and verified: {}",
                counts.failed,
                restored.notes.join("; ")
            ),
        ));
    }
    write_parent(cache_dir, &record);
    restored.manifest_digest = manifest_digest;
    restored.record = record;
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::DigestAlgorithm;
    use crate::snapshot::index::names::entry_object_name;

    fn location(path: &str, object: &str, offset: u64, size_bytes: u64) -> EntryLocation {
        let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, path.as_bytes());
        EntryLocation {
            path: path.into(),
            manifest_digest: digest,
            object: object.into(),
            offset,
            size_bytes,
            digest,
            file_count: 1,
            file_bytes: 1,
        }
    }

    #[test]
    fn plans_whole_objects_for_half_or_more_and_coalesced_ranges_below() {
        let name = |seed: &[u8]| {
            entry_object_name(&ContentDigest::of_bytes(DigestAlgorithm::Blake3, seed)).unwrap()
        };
        let (pack, alone) = (name(b"pack"), name(b"alone"));
        let index = SnapshotIndex {
            key: "k".into(),
            created_at: "2026-12-01T00:00:00Z".into(),
            producer: Default::default(),
            parents: vec![],
            entries: vec![
                location("a/a/1", &pack, 0, 100),
                location("a/a/2", &pack, 100, 100),
                location("a/a/3", &pack, 200, 100),
                location("a/a/4", &pack, 300, 100),
                location("a/a/5", &pack, 400, 600),
                location("a/b/1", &alone, 0, 50),
            ],
        };
        let e = &index.entries;
        // Entries 1, 2 and 4 of the pack (300 of 1000 bytes): a run 0..200 and 300..400.
        let fetches = plan(&index, &[&e[0], &e[1], &e[3], &e[5]]);
        type Shape<'a> = (&'a str, Option<(u64, u64)>, usize);
        let shape: Vec<Shape<'_>> =
            fetches.iter().map(|f| (f.object, f.range, f.entries.len())).collect();
        let mut expected = vec![
            (pack.as_str(), Some((0, 200)), 2),
            (pack.as_str(), Some((300, 400)), 1),
            (alone.as_str(), None, 1),
        ];
        expected.sort();
        let mut shape_sorted = shape.clone();
        shape_sorted.sort();
        assert_eq!(shape_sorted, expected);
        // The decompression-bomb bound of full snapshots applies per entry object.
        let tiny = location("a/c/1", &pack, 0, 1000);
        assert!(!expands_too_much(&EntryLocation { file_bytes: (64 << 20) - 512, ..tiny.clone() }));
        assert!(expands_too_much(&EntryLocation { file_bytes: 65 << 20, ..tiny.clone() }));
        assert!(!expands_too_much(&EntryLocation {
            size_bytes: 1 << 20,
            file_bytes: 999 << 20,
            ..tiny
        }));
        // The big entry is 60 % of the pack: the whole object.
        let fetches = plan(&index, &[&e[4]]);
        assert_eq!(fetches.len(), 1);
        assert_eq!((fetches[0].range, fetches[0].entries.len()), (None, 1));
    }

    #[test]
    fn a_run_of_ranges_stops_at_the_run_bound() {
        let pack =
            entry_object_name(&ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"p")).unwrap();
        let mib = 1 << 20;
        // Twelve adjacent 1.5 MiB entries, then the rest of a 64 MiB pack.
        let mut entries: Vec<EntryLocation> = (0..12)
            .map(|i| location(&format!("a/a/{i}"), &pack, i * 3 * mib / 2, 3 * mib / 2))
            .collect();
        entries.push(location("a/a/rest", &pack, 18 * mib, 46 * mib));
        // An entry longer than the bound is a run of its own.
        entries.push(location("a/a/long", &pack, 64 * mib, 5 * mib));
        let index = SnapshotIndex {
            key: "k".into(),
            created_at: "2026-12-01T00:00:00Z".into(),
            producer: Default::default(),
            parents: vec![],
            entries,
        };
        let wanted: Vec<&EntryLocation> =
            index.entries.iter().filter(|e| e.path != "a/a/rest").collect();
        let fetches = plan(&index, &wanted);
        let runs: Vec<(Option<(u64, u64)>, usize)> =
            fetches.iter().map(|f| (f.range, f.entries.len())).collect();
        let run = |from: u64, n: u64| (Some((from * 3 * mib / 2, (from + n) * 3 * mib / 2)), 2);
        assert_eq!(
            runs,
            vec![
                run(0, 2),
                run(2, 2),
                run(4, 2),
                run(6, 2),
                run(8, 2),
                run(10, 2),
                (Some((64 * mib, 69 * mib)), 1)
            ]
        );
        assert!(
            fetches.iter().all(|f| f
                .range
                .is_some_and(|(a, b)| b - a <= MAX_RUN_BYTES || f.entries.len() == 1))
        );
    }
}
