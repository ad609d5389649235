//! `snapshot save --format index` (docs/snapshots.md "Index snapshots"): upload only the
//! entries the store does not hold yet, then the index as the commit point.
//!
//! Runs after the gates and housekeeping of [`crate::snapshot::save()`] (the same gates as a
//! full save). Steps:
//! 1. list the cache's entries ([`super::entries::list`]) and count what lies under
//!    `actions-v1/` outside every entry (not carried);
//! 2. read the parent index `<cache>/.local/snapshot-index.json` (the verified record the
//!    last index restore or save of this cache wrote); an entry whose path and manifest
//!    digest equal the parent's keeps the parent's location; any other entry whose ref in
//!    the store (`~refs/`, written by the remote tier or by a save from any cache) names
//!    the same path and manifest digest, signed by this save's key when it signs, takes
//!    the ref's location. Either is kept once a HEAD of its object (one per distinct
//!    object, in parallel) shows the store still holds it with enough bytes; otherwise
//!    the entry is new;
//! 3. pack every new entry (in parallel, one per core), group them into store objects
//!    (an entry object of at least 4 MiB alone, smaller ones concatenated into packs of
//!    at most 32 MiB, named by the BLAKE3 of their bytes) and upload those with
//!    put-if-absent, eight at a time;
//! 4. write one [`EntryRef`] per new entry at [`ref_name`] with put-if-absent (signed when
//!    the save has a signing key); a ref that cannot be written is a note, not a failure:
//!    refs serve the remote entry tier, not this snapshot;
//! 5. seal the [`SnapshotIndex`], compress it, and commit it with the commit protocol of
//!    full saves (`commit.rs`: pending record, object `~<stem>-<hex>`, sidecar v4 with
//!    kind `index`, read back);
//! 6. write the index record to `.local/snapshot-index.json`, the parent of the next save.
//!
//! A crash anywhere before step 5's sidecar leaves only unreferenced entry objects and
//! refs (content-addressed, harmless; `snapshot gc` collects them) and no visible snapshot.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

use super::entries::{self, LocalEntry};
use super::names::{keyed_ref_name, ref_name};
use super::record::{
    self, EntryLocation, EntryRef, REF_SIGNATURE_DOMAIN, SnapshotIndex, seal_index, seal_ref,
};
use super::upload::{self, Uploaded};
use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs;
use crate::fs::temp::{self, Purpose};
use crate::l1::layout::LOCAL_DIR;
use crate::parallel::{self, STORE_PARALLELISM, Workers};
use crate::record::Timestamp;
use crate::snapshot::commit;
use crate::snapshot::commit::object_key;
use crate::snapshot::manifest::{
    Producer, SIDECAR_SCHEMA, SIDECAR_SIGNATURE_DOMAIN, Sidecar, SnapshotKind, seal,
};
use crate::snapshot::{CARRIED_DIR, Compression, Error};
use crate::transport::{ObjectKey, ObjectStore};

/// The file under `<cache root>/.local/` holding the index record (uncompressed, sealed)
/// of the snapshot this cache was last restored from or saved as.
pub const PARENT_INDEX_FILE: &str = "snapshot-index.json";

/// What an index save did (besides [`crate::snapshot::SaveReport`]'s common fields).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IndexSaveCounts {
    /// Entries in the snapshot.
    pub entries: u64,
    /// Entries whose object the store still holds: named by the parent index, or by the
    /// store's ref of the entry (`reused_refs` of them).
    pub reused: u64,
    /// Of `reused`, entries found through their ref in the store (uploaded by the remote
    /// tier, or by a save from another cache).
    pub reused_refs: u64,
    /// Entries packed and uploaded by this save.
    pub new: u64,
    /// Entry objects and packs this save created in the store.
    pub objects_uploaded: u64,
    /// Their bytes (the index object not included).
    pub bytes_uploaded: u64,
    /// Entry refs written (the others existed or failed; see the notes).
    pub refs_uploaded: u64,
    /// Regular files and symlinks under `actions-v1/` outside every entry (not carried).
    pub not_carried: u64,
    /// Seconds listing entries and reading the parent index.
    pub list_seconds: f64,
    /// Seconds of the HEADs confirming reused objects.
    pub check_seconds: f64,
    /// Seconds packing new entries.
    pub pack_seconds: f64,
    /// Seconds uploading entry objects and refs.
    pub upload_seconds: f64,
    /// Seconds committing the index (object, sidecar, read-back).
    pub commit_seconds: f64,
}

/// What the save of one index needs (from [`crate::snapshot::SaveRequest`]).
pub(crate) struct IndexSave<'a> {
    pub store: &'a dyn ObjectStore,
    pub cache_dir: &'a Path,
    pub key: &'a crate::snapshot::SnapshotKey,
    pub sidecar_key: &'a ObjectKey,
    pub parents: &'a [crate::record::RecordDigest],
    pub producer: &'a Producer,
    pub signing_key: Option<&'a crate::trust::SigningKey>,
    pub level: i32,
    pub progress: &'a dyn crate::progress::Progress,
}

/// How an index save ended (the caller builds the report).
pub(crate) struct IndexSaved {
    pub published: commit::Published,
    pub counts: IndexSaveCounts,
    pub object_size_bytes: u64,
    pub file_count: u64,
    pub file_bytes: u64,
    pub manifest_digest: crate::record::RecordDigest,
    pub retries: u32,
    pub notes: Vec<String>,
}

/// Saves the cache as an index snapshot (module docs).
///
/// # Errors
/// [`Error::Local`] / [`Error::Pack`] for local failures, [`Error::Transport`] when an
/// entry object cannot be uploaded or checked, and the commit protocol's errors
/// ([`commit::publish`]).
pub(crate) fn save_index(request: &IndexSave<'_>) -> Result<IndexSaved, Error> {
    let IndexSave { store, cache_dir, key, .. } = *request;
    let mut counts = IndexSaveCounts::default();
    let mut notes = Vec::new();
    let phase = Instant::now();
    let local = entries::list(cache_dir)?;
    counts.not_carried = not_carried(cache_dir, &local)?;
    if counts.not_carried > 0 {
        notes.push(format!(
            "{} file(s) under {CARRIED_DIR}/ lie outside every cache entry and are not carried \
             by an index snapshot (save with --format full to carry the whole tree)",
            counts.not_carried
        ));
    }
    let parent = read_parent(cache_dir);
    counts.list_seconds = phase.elapsed().as_secs_f64();

    let phase = Instant::now();
    let signer = request.signing_key.map(|k| k.public_key());
    let (mut locations, new, from_refs) = reuse(store, &local, parent.as_ref(), signer);
    counts.reused = locations.len() as u64;
    counts.reused_refs = from_refs;
    counts.new = new.len() as u64;
    counts.check_seconds = phase.elapsed().as_secs_f64();

    let phase = Instant::now();
    let packed = upload::pack_all(cache_dir, new, request.level, request.progress)?;
    let (objects, mut new_locations) = upload::group(cache_dir, &packed)?;
    // Every restore would refuse these (a decompression-bomb bound): they are left out.
    let before = new_locations.len();
    new_locations.retain(|l| !super::restore::expands_too_much(l));
    if new_locations.len() < before {
        notes.push(format!(
            "{} entr(ies) unpack to more than 1000× their compressed size (e.g. large \
             zero-filled files), which every restore refuses; they are not in the snapshot",
            before - new_locations.len()
        ));
        counts.new = new_locations.len() as u64;
    }
    counts.pack_seconds = phase.elapsed().as_secs_f64();

    let phase = Instant::now();
    let uploaded: Uploaded = upload::upload_all(store, &objects, request.progress)?;
    drop(objects);
    drop(packed);
    counts.objects_uploaded = uploaded.objects;
    counts.bytes_uploaded = uploaded.bytes;
    let (refs, ref_notes) = write_refs(request, &new_locations);
    counts.refs_uploaded = refs;
    notes.extend(ref_notes);
    counts.upload_seconds = phase.elapsed().as_secs_f64();
    locations.extend(new_locations);
    locations.sort_by(|a, b| a.path.cmp(&b.path));
    counts.entries = locations.len() as u64;

    let phase = Instant::now();
    let index = SnapshotIndex {
        key: key.as_str().to_owned(),
        created_at: Timestamp::now().rfc3339_seconds(),
        producer: request.producer.clone(),
        parents: request.parents.to_vec(),
        entries: locations,
    };
    let (record_bytes, manifest_digest) = seal_index(&index)?;
    let (published, object_size_bytes, retries) =
        commit_index(request, &index, &record_bytes, &manifest_digest)?;
    counts.commit_seconds = phase.elapsed().as_secs_f64();
    if let commit::Published::Committed { .. } = published {
        write_parent(cache_dir, &record_bytes);
    }
    Ok(IndexSaved {
        published,
        counts,
        object_size_bytes,
        file_count: index.file_count(),
        file_bytes: index.file_bytes(),
        manifest_digest,
        retries: retries.saturating_add(uploaded.retries),
        notes,
    })
}

/// Regular files and symlinks under `actions-v1/` that lie in no entry (dot-names, such
/// as `.last-used` and crash leftovers, are strata's own and not counted).
fn not_carried(cache_dir: &Path, local: &[LocalEntry]) -> Result<u64, Error> {
    let carried = cache_dir.join(CARRIED_DIR);
    if fs::symlink_metadata_opt(&carried)?.is_none_or(|m| !m.is_dir()) {
        return Ok(0);
    }
    let dirs: std::collections::HashSet<&Path> = local.iter().map(|e| e.dir.as_path()).collect();
    Ok(fs::count_files_pruned(&carried, |dir| dirs.contains(dir)))
}

/// The parent index, if `.local/snapshot-index.json` exists and verifies.
fn read_parent(cache_dir: &Path) -> Option<SnapshotIndex> {
    let path = cache_dir.join(LOCAL_DIR).join(PARENT_INDEX_FILE);
    let bytes = fs::read_capped_nofollow(&path, record::MAX_INDEX_BYTES).ok().flatten()?;
    match record::load_index(&bytes, &path.display().to_string()) {
        Ok((index, _)) => Some(index),
        Err(e) => {
            tracing::warn!("ignoring the parent index {}: {}", path.display(), e.one_line());
            None
        }
    }
}

/// Writes the verified index record `bytes` to `.local/snapshot-index.json` (atomic
/// replace); a failure is a warning (the next save then uploads every entry again, or
/// finds them in the store).
pub(crate) fn write_parent(cache_dir: &Path, bytes: &[u8]) {
    let result = fs::create_dir_all_within(cache_dir, Path::new(LOCAL_DIR), 0o755)
        .and_then(|dir| fs::write_atomic(&dir.join(PARENT_INDEX_FILE), bytes, 0o644));
    if let Err(e) = result {
        tracing::warn!("could not record the snapshot index for the next save: {e}");
    }
}

/// New entries up to this count look their refs up one GET each; more list `~refs/` first
/// (one request per 1,000 refs) and GET only the refs that exist.
const REF_GETS_WITHOUT_LISTING: usize = 256;

/// Splits `local` into reused locations and the entries to upload; returns both and how
/// many reused locations came from refs. A location is reused when the parent index names
/// it for the entry's path and manifest digest, or else when the store's ref of the entry
/// names it with the same manifest digest (signed by `signer` when the save signs: the
/// index vouches for what it lists), and a HEAD of its object (one per distinct object, in
/// parallel) shows the store still holds enough bytes.
fn reuse(
    store: &dyn ObjectStore,
    local: &[LocalEntry],
    parent: Option<&SnapshotIndex>,
    signer: Option<&crate::trust::PublicKey>,
) -> (Vec<EntryLocation>, Vec<LocalEntry>, u64) {
    let by_path: HashMap<&str, &EntryLocation> = parent
        .map_or_else(HashMap::new, |p| p.entries.iter().map(|e| (e.path.as_str(), e)).collect());
    let mut from_parent: Vec<(&LocalEntry, EntryLocation)> = Vec::new();
    let mut unknown: Vec<&LocalEntry> = Vec::new();
    for entry in local {
        match by_path.get(entry.path.as_str()) {
            Some(loc) if loc.manifest_digest == entry.manifest_digest => {
                from_parent.push((entry, (*loc).clone()));
            }
            _ => unknown.push(entry),
        }
    }
    let (mut reused, gone) = confirm(store, from_parent);
    // What the parent does not vouch for, or names in objects this store lacks (the parent
    // may be another store's), may still be in this store under its ref.
    unknown.extend(gone);
    let found = from_refs(store, &unknown, signer);
    let mut by_ref = Vec::new();
    let mut new = Vec::new();
    for (entry, location) in unknown.into_iter().zip(found) {
        match location {
            Some(location) => by_ref.push((entry, location)),
            None => new.push(entry.clone()),
        }
    }
    let (from_refs, gone) = confirm(store, by_ref);
    let reused_refs = from_refs.len() as u64;
    reused.extend(from_refs);
    new.extend(gone.into_iter().cloned());
    new.sort_by(|a, b| a.path.cmp(&b.path));
    (reused, new, reused_refs)
}

/// Splits `candidates` into the locations whose object the store holds with enough bytes
/// (one HEAD per distinct object, in parallel) and the entries of the others.
fn confirm<'e>(
    store: &dyn ObjectStore,
    candidates: Vec<(&'e LocalEntry, EntryLocation)>,
) -> (Vec<EntryLocation>, Vec<&'e LocalEntry>) {
    // The bytes each object must hold: the end of the furthest range that uses it.
    let mut needed: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, loc) in &candidates {
        let end = loc.offset.saturating_add(loc.size_bytes);
        let slot = needed.entry(loc.object.as_str()).or_default();
        *slot = (*slot).max(end);
    }
    let objects: Vec<(&str, u64)> = needed.into_iter().collect();
    let held = parallel::map(&objects, Workers::Threads(STORE_PARALLELISM), |(name, end)| {
        let Ok(key) = ObjectKey::new(*name) else { return false };
        match store.head(&key) {
            Ok(Some(meta)) => meta.size_bytes >= *end,
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(
                    "cannot check {name} in the store ({}); its entries are uploaded again",
                    e
                );
                false
            }
        }
    });
    let present: std::collections::HashSet<String> = objects
        .iter()
        .zip(held)
        .filter(|(_, held)| *held)
        .map(|((name, _), _)| (*name).to_owned())
        .collect();
    let (mut kept, mut gone) = (Vec::new(), Vec::new());
    for (entry, loc) in candidates {
        if present.contains(loc.object.as_str()) {
            kept.push(loc);
        } else {
            gone.push(entry);
        }
    }
    (kept, gone)
}

/// The location the store's ref of each entry names, where the ref loads, names the
/// entry's path and manifest digest and, when `signer` is given, carries its valid
/// signature; `None` for the others (absent, unreadable or not vouched for: uploaded
/// again). Failures are logged, never errors.
fn from_refs(
    store: &dyn ObjectStore,
    entries: &[&LocalEntry],
    signer: Option<&crate::trust::PublicKey>,
) -> Vec<Option<EntryLocation>> {
    if entries.is_empty() {
        return Vec::new();
    }
    // A store that cannot list (an HTTP cache server) is asked for every ref.
    let listed: Option<std::collections::HashSet<String>> = store
        .listing()
        .filter(|_| entries.len() > REF_GETS_WITHOUT_LISTING)
        .map(|listing| match listing.list(super::names::REFS_PREFIX) {
            Ok(refs) => Some(refs.into_iter().map(|m| m.key.as_str().to_owned()).collect()),
            Err(e) => {
                tracing::warn!("cannot list the entry refs ({e}); every new entry is uploaded");
                None
            }
        })
        .map(|listed| listed.unwrap_or_default());
    let vouched = |entry: &LocalEntry, name: String| -> Option<EntryLocation> {
        if listed.as_ref().is_some_and(|l| !l.contains(&name)) {
            return None;
        }
        let key = ObjectKey::new(name.clone()).ok()?;
        let bytes = match store.get_small(&key, record::MAX_REF_BYTES) {
            Ok(bytes) => bytes?,
            Err(e) => {
                tracing::warn!("cannot read the entry ref {name} ({e}); the entry is uploaded");
                return None;
            }
        };
        let entry_ref = record::load_ref(&bytes).ok()?;
        let location = &entry_ref.location;
        if location.path != entry.path || location.manifest_digest != entry.manifest_digest {
            return None;
        }
        if let Some(signer) = signer {
            let signature = entry_ref.signature.as_ref()?;
            if signature.key_id != signer.id()
                || !signer.verifies(REF_SIGNATURE_DOMAIN, &entry_ref.statement(), signature)
            {
                return None;
            }
        }
        Some(entry_ref.location)
    };
    parallel::map(entries, Workers::Threads(STORE_PARALLELISM), |entry| {
        vouched(entry, ref_name(&entry.path)).or_else(|| {
            // A signing save's own ref may sit under its key id (another writer's ref
            // held the plain name, `write_refs`).
            let signer = signer?;
            vouched(entry, keyed_ref_name(&entry.path, &signer.id().to_string()))
        })
    })
}

/// Writes one ref per new location (put-if-absent, [`STORE_PARALLELISM`] at a time);
/// returns how many were created and notes for those that failed.
fn write_refs(request: &IndexSave<'_>, locations: &[EntryLocation]) -> (u64, Vec<String>) {
    let created_at = Timestamp::now().rfc3339_seconds();
    let results = parallel::map(locations, Workers::Threads(STORE_PARALLELISM), |location| {
        let mut entry_ref = EntryRef {
            location: location.clone(),
            created_at: created_at.clone(),
            producer: request.producer.clone(),
            signature: None,
        };
        if let Some(signing_key) = request.signing_key {
            entry_ref.signature =
                Some(signing_key.sign(REF_SIGNATURE_DOMAIN, &entry_ref.statement()));
        }
        let name = ref_name(&location.path);
        let bytes = seal_ref(&entry_ref).map_err(|e| e.one_line())?;
        let key = ObjectKey::new(name.clone()).map_err(|e| e.to_string())?;
        match request.store.put_bytes_if_absent(&key, &bytes) {
            Ok((crate::transport::PutOutcome::Created, _)) => Ok(true),
            // Another writer's ref holds the plain name: a signing save's ref goes under
            // its key id too, where consumers that trust it look next (see
            // `names::keyed_ref_name`), so an unsigned ref put first never hides it.
            Ok((crate::transport::PutOutcome::AlreadyExists, _)) => match request.signing_key {
                Some(signing_key) => {
                    let keyed =
                        keyed_ref_name(&location.path, &signing_key.public_key().id().to_string());
                    let keyed_key = ObjectKey::new(keyed.clone()).map_err(|e| e.to_string())?;
                    match request.store.put_bytes_if_absent(&keyed_key, &bytes) {
                        Ok((outcome, _)) => Ok(outcome == crate::transport::PutOutcome::Created),
                        Err(e) => Err(format!("cannot upload the entry ref {keyed}: {e}")),
                    }
                }
                None => Ok(false),
            },
            Err(e) => Err(format!("cannot upload the entry ref {name}: {e}")),
        }
    });
    let mut created = 0;
    let mut failed = Vec::new();
    for result in results {
        match result {
            Ok(true) => created += 1,
            Ok(false) => {}
            Err(reason) => failed.push(reason),
        }
    }
    let mut notes = Vec::new();
    if let Some(first) = failed.first() {
        notes.push(format!(
            "{} entry ref(s) could not be written (the snapshot does not need them; the \
             remote entry tier misses those entries): {first}",
            failed.len()
        ));
    }
    (created, notes)
}

/// Compresses and commits the index (`commit.rs`); returns how the commit ended, the
/// index object's size and the retries of its upload.
fn commit_index(
    request: &IndexSave<'_>,
    index: &SnapshotIndex,
    record_bytes: &[u8],
    manifest_digest: &crate::record::RecordDigest,
) -> Result<(commit::Published, u64, u32), Error> {
    let IndexSave { store, cache_dir, key, sidecar_key, .. } = *request;
    let compressed = record::compress_index(record_bytes)
        .map_err(|e| Error::Pack { path: cache_dir.to_path_buf(), source: e })?;
    let temp = temp::temp_file_beside(cache_dir, Purpose::Pack)?;
    fs::write_atomic_nosync(&temp, &compressed, 0o600)?;
    let object_digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, &compressed);
    let object = object_key(&commit::unique_object_name(key.as_str(), &object_digest))?;
    let sidecar = Sidecar {
        key: key.as_str().to_owned(),
        object: Some(object.as_str().to_owned()),
        format: Compression::Zstd,
        kind: SnapshotKind::Index,
        object_size_bytes: compressed.len() as u64,
        object_digest,
        manifest_digest: manifest_digest.clone(),
        entry_count: index.entries.len() as u64,
        file_count: index.file_count(),
        file_bytes: index.file_bytes(),
        created_at: index.created_at.clone(),
        producer: index.producer.clone(),
        parents: index.parents.clone(),
        signature: None,
    };
    let sidecar = match request.signing_key {
        Some(signing_key) => Sidecar {
            signature: Some(signing_key.sign(SIDECAR_SIGNATURE_DOMAIN, &sidecar.statement())),
            ..sidecar
        },
        None => sidecar,
    };
    let sidecar_bytes = seal(&SIDECAR_SCHEMA, "sidecar", &sidecar)?.to_bytes();
    let pending = commit::Pending::record(
        cache_dir,
        &store.describe(),
        key.as_str(),
        &object,
        &sidecar_bytes,
    )?;
    let upload = commit::Upload {
        store,
        cache_dir,
        key,
        object: &object,
        packed: &temp,
        sidecar_key,
        sidecar: &sidecar_bytes,
        progress: &crate::progress::Silent,
    };
    let published = commit::publish(&upload, pending)?;
    let retries = match &published {
        commit::Published::Committed { retries, .. } => *retries,
        commit::Published::Lost { .. } => 0,
    };
    Ok((published, compressed.len() as u64, retries))
}
