//! Save: publish the cache as a new snapshot, only when it gained something and only by a
//! trusted writer (docs/snapshots.md "Save").
//!
//! Gates, in order; each skip names its [`SkipReason`] and nothing is uploaded:
//! 1. a primary key was given (`NoKey`);
//! 2. the cache directory exists (`NoCacheDir`), its `actions-v1` is not a symlink
//!    (`SymlinkedLayout`: strata never follows it, and a restore would reject it) and it
//!    holds `.updated` (`NotUpdated`): the engine touches the marker only after saving a
//!    new entry, and restore deletes it, so an all-HIT build publishes nothing;
//! 3. writer credentials (`NoWriterCredentials`), as the store's scheme defines them
//!    ([`StoreUrl::has_writer_credentials`](crate::transport::StoreUrl::has_writer_credentials):
//!    a key pair for `s3://`, a token or user and password for `http(s)://`; a `file://`
//!    store needs none, the directory's permissions are the boundary);
//! 4. no sidecar `<key>.json` exists yet (`AlreadyExists`; snapshots are immutable).
//!
//! Write order (`commit.rs`): pack into `<parent>/.<name>.pack-*` beside the cache
//! directory ([`super::pack`]); record the sealed sidecar as a pending record under
//! `<cache dir>/.local/pending-sidecars/`; upload the object under a name of its own,
//! `~<16 hex>-<32 hex>`, with no-overwrite semantics (the transport HEADs first, then writes
//! conditionally, multipart with parallel parts above the part size, aborting incomplete
//! uploads); then upload the sidecar `<key>.json`, the commit point, which names that
//! object and binds its size and digest (`object_digest`, hashed while packing); read the sidecar back to learn which save won.
//! A save that loses (another save's sidecar is there) deletes its object and reports
//! `AlreadyExists`; one whose answers were lost reports what the store holds. The pending
//! record is removed once the outcome is known; one that outlives a failed save (the store
//! could not be cleaned up or asked) is resolved by the next save from the same cache
//! directory before it does anything else.
//!
//! `parents` comes from `.local/snapshot-origin.json`, written by the restore that filled
//! the cache. A save that passes the gates first deletes stale leftovers of killed
//! restores and saves beside the cache directory ([`super::leftovers`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::commit;
use super::commit::object_key;
use super::index::save::{IndexSave, IndexSaveCounts, save_index};
use super::key::check_key_text;
use super::leftovers;
use super::manifest::{
    Producer, SIDECAR_SCHEMA, SIDECAR_SIGNATURE_DOMAIN, Sidecar, SnapshotKind, seal,
};
use super::pack::{PackOptions, pack_observed};
use super::restore::{origin_parent, resolve_cache_dir};
use super::{CARRIED_DIR, Compression, Error, SnapshotKey};
use crate::fs;
use crate::fs::temp::{self, Purpose};
use crate::transport::ObjectStore;

/// Why a save published nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// No primary key (key preparation was unsupported, or the input was empty).
    NoKey,
    /// The cache directory does not exist.
    NoCacheDir,
    /// `<cache dir>/actions-v1` is a symlink (or not a directory): strata never packs
    /// through it (a restore would refuse the symlink anyway).
    SymlinkedLayout,
    /// No `.updated` marker: the build added no entry (e.g. every action was a HIT).
    NotUpdated,
    /// A store without writer credentials (see
    /// [`StoreUrl::writer_credentials_hint`](crate::transport::StoreUrl::writer_credentials_hint)
    /// for the variables).
    NoWriterCredentials,
    /// A snapshot already exists under the key (or another save of the same key committed
    /// first, while this one ran; its object was then withdrawn).
    AlreadyExists,
    /// The packed snapshot unpacks to more than restore accepts for its compressed size
    /// (see `restore::MAX_EXPANSION_RATIO`): every restore would refuse it.
    TooCompressible,
    /// A store garbage collection (`strata snapshot gc`) held its lease for longer than
    /// the save waits (`STRATA_GC_WAIT`, 10 min by default); see
    /// [`crate::snapshot::index::lease`].
    StoreBusy,
}

impl SkipReason {
    /// A sentence for logs.
    pub fn describe(self) -> &'static str {
        match self {
            SkipReason::NoKey => "no primary key (key preparation was unsupported or skipped)",
            SkipReason::NoCacheDir => "the cache directory does not exist",
            SkipReason::SymlinkedLayout => {
                "actions-v1 in the cache directory is a symlink (or not a directory); strata \
                 does not follow it. To keep the cache on another disk, point --cache-dir \
                 (STRATA_CACHE_ROOT) at a directory there instead"
            }
            SkipReason::NotUpdated => {
                "no .updated marker: the build added no cache entry (nothing new to publish)"
            }
            SkipReason::NoWriterCredentials => {
                "no writer credentials for the store: this job is a read-only consumer"
            }
            SkipReason::AlreadyExists => {
                "a snapshot already exists under this key (never overwritten)"
            }
            SkipReason::TooCompressible => {
                "the snapshot would unpack to more than 1000× its compressed size (e.g. large \
                 zero-filled files), which every restore refuses as a possible decompression \
                 bomb; nothing was uploaded. Keep such files out of the cache (--artifact-include)"
            }
            SkipReason::StoreBusy => {
                "a store garbage collection (strata snapshot gc) kept running while the save \
                 waited; nothing was uploaded (raise STRATA_GC_WAIT, in seconds, to wait longer)"
            }
        }
    }

    /// `no_key`, `no_cache_dir`, `symlinked_layout`, `not_updated`,
    /// `no_writer_credentials`, `already_exists`, `too_compressible`, `store_busy`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NoKey => "no_key",
            SkipReason::NoCacheDir => "no_cache_dir",
            SkipReason::SymlinkedLayout => "symlinked_layout",
            SkipReason::NotUpdated => "not_updated",
            SkipReason::NoWriterCredentials => "no_writer_credentials",
            SkipReason::AlreadyExists => "already_exists",
            SkipReason::TooCompressible => "too_compressible",
            SkipReason::StoreBusy => "store_busy",
        }
    }
}

/// What to save.
pub struct SaveRequest<'a> {
    /// The store to write.
    pub store: &'a dyn ObjectStore,
    /// The cache directory (resolved like restore's).
    pub cache_dir: PathBuf,
    /// The primary key; `None` or empty skips.
    pub key: Option<String>,
    /// Result of [`StoreUrl::has_writer_credentials`](crate::transport::StoreUrl::has_writer_credentials)
    /// for the store.
    pub writer_credentials: bool,
    /// Compression format.
    pub compression: Compression,
    /// Compression level.
    pub level: i32,
    /// zstd workers (0: one per CPU).
    pub threads: u32,
    /// Digest algorithm of the manifest's files and the object (`--digest`; a full
    /// snapshot only: entry objects always use BLAKE3).
    pub digest: crate::digest::DigestAlgorithm,
    /// `index` (entry objects plus an index, [`super::index::save`]) or `full` (one
    /// object holding the whole tree).
    pub format: SnapshotKind,
    /// Recorded in the manifest and sidecar.
    pub producer: Producer,
    /// The producer's signing key (`--signing-key`, `STRATA_SIGNING_KEY`): the sidecar is
    /// signed with it ([`Sidecar::statement`]). `None` saves an unsigned snapshot.
    pub signing_key: Option<&'a crate::trust::SigningKey>,
    /// Told of the phases `pack` and `upload` ([`crate::progress`]); [`Silent`] shows
    /// nothing.
    ///
    /// [`Silent`]: crate::progress::Silent
    pub progress: &'a dyn crate::progress::Progress,
    /// How an index save waits for a running store gc (`STRATA_GC_WAIT`;
    /// [`super::index::lease::save_guard`]). A full save takes no lease.
    pub guard: super::index::GuardPolicy,
}

/// The outcome of a save.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum SaveOutcome {
    /// A new snapshot was published.
    Saved,
    /// Nothing was published.
    Skipped {
        /// Why.
        reason: SkipReason,
    },
}

/// What a save did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SaveReport {
    /// Saved or skipped.
    pub outcome: SaveOutcome,
    /// The snapshot format (`full` or `index`).
    pub kind: SnapshotKind,
    /// For an index save that got past the gates: its entry counts and phase times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexSaveCounts>,
    /// The key.
    pub key: Option<String>,
    /// The absolute cache directory.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub cache_dir: PathBuf,
    /// Size of the uploaded object, in bytes (0 when skipped).
    pub object_size_bytes: u64,
    /// Files in the snapshot.
    pub file_count: u64,
    /// Bytes of file content in the snapshot.
    pub file_bytes: u64,
    /// Wall time of the pack, in seconds.
    pub pack_seconds: f64,
    /// Wall time of both uploads, in seconds.
    pub upload_seconds: f64,
    /// Wall time of the whole save, in seconds.
    pub seconds: f64,
    /// Transport retries.
    pub retries: u32,
    /// The manifest's digest (`sha256:<hex>`).
    pub manifest_digest: Option<crate::record::RecordDigest>,
    /// The parent snapshot's manifest digest, if the cache came from a restore.
    pub parents: Vec<crate::record::RecordDigest>,
    /// Skipped special files and similar notes.
    pub notes: Vec<String>,
}

impl SaveReport {
    fn skipped(
        reason: SkipReason,
        key: Option<String>,
        cache_dir: PathBuf,
        started: Instant,
    ) -> Self {
        Self {
            outcome: SaveOutcome::Skipped { reason },
            kind: SnapshotKind::Full,
            index: None,
            key,
            cache_dir,
            object_size_bytes: 0,
            file_count: 0,
            file_bytes: 0,
            pack_seconds: 0.0,
            upload_seconds: 0.0,
            seconds: started.elapsed().as_secs_f64(),
            retries: 0,
            manifest_digest: None,
            parents: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// Gates 1–3 (see the module docs), which need no store: the reason to skip, if any.
/// `key` is trimmed; an empty key is `NoKey`.
///
/// # Errors
/// [`Error::InvalidInput`] for a malformed key or cache directory; [`Error::Local`] if the
/// cache directory cannot be inspected.
pub fn local_gate(
    cache_dir: &Path,
    key: Option<&str>,
    writer_credentials: bool,
) -> Result<Option<SkipReason>, Error> {
    let cache_dir = resolve_cache_dir(cache_dir)?;
    let Some(key) = key.map(str::trim).filter(|k| !k.is_empty()) else {
        return Ok(Some(SkipReason::NoKey));
    };
    check_key_text("--key", key)?;
    if !fs::symlink_metadata_opt(&cache_dir)?.is_some_and(|m| m.is_dir()) {
        return Ok(Some(SkipReason::NoCacheDir));
    }
    if fs::symlink_metadata_opt(&cache_dir.join(CARRIED_DIR))?.is_some_and(|m| !m.is_dir()) {
        return Ok(Some(SkipReason::SymlinkedLayout));
    }
    if fs::symlink_metadata_opt(&cache_dir.join(crate::l1::layout::UPDATED_MARKER))?.is_none() {
        return Ok(Some(SkipReason::NotUpdated));
    }
    if !writer_credentials {
        return Ok(Some(SkipReason::NoWriterCredentials));
    }
    Ok(None)
}

/// A report for a save skipped by [`local_gate`] (nothing was touched).
pub fn skipped_report(cache_dir: &Path, key: Option<&str>, reason: SkipReason) -> SaveReport {
    let key = key.map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned);
    let cache_dir = resolve_cache_dir(cache_dir).unwrap_or_else(|_| cache_dir.to_path_buf());
    SaveReport::skipped(reason, key, cache_dir, Instant::now())
}

/// Saves the cache as a snapshot if every gate passes (see the module docs).
///
/// # Errors
/// [`Error::InvalidInput`] for a malformed key or cache directory; [`Error::Pack`],
/// [`Error::Local`] and [`Error::Transport`] for failures after the gates;
/// [`Error::Uncommitted`] for a failure that may leave this save's object in the store
/// (invisible; the next save from the cache directory deletes it). A failure never leaves a
/// visible snapshot: the sidecar is written last.
///
/// The report's `retries` counts every retried request of the save (probes, HEADs, both
/// uploads, a lost writer's cleanup), read from the store's running total.
pub fn save(request: &SaveRequest<'_>) -> Result<SaveReport, Error> {
    let retried_before = request.store.retried_requests();
    let mut report = save_uncounted(request)?;
    report.kind = request.format;
    let retried = request.store.retried_requests().saturating_sub(retried_before);
    report.retries = u32::try_from(retried).unwrap_or(u32::MAX);
    Ok(report)
}

fn save_uncounted(request: &SaveRequest<'_>) -> Result<SaveReport, Error> {
    let started = Instant::now();
    let cache_dir = resolve_cache_dir(&request.cache_dir)?;
    let key = request.key.as_deref().map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned);
    if let Some(reason) = local_gate(&cache_dir, key.as_deref(), request.writer_credentials)? {
        return Ok(SaveReport::skipped(reason, key, cache_dir, started));
    }
    let Some(key) = key else {
        return Ok(SaveReport::skipped(SkipReason::NoKey, None, cache_dir, started));
    };
    let store = request.store;
    // What earlier failed saves from this cache directory left in the store comes first.
    let mut notes = commit::resolve_pending(store, &cache_dir, std::time::SystemTime::now());
    // Leases of saves from this cache directory that were killed hold back every gc.
    notes.extend(super::index::held::resolve(store, &cache_dir, std::time::SystemTime::now()));
    let skip = |reason, notes: Vec<String>| {
        let mut report = SaveReport::skipped(reason, Some(key.clone()), cache_dir.clone(), started);
        report.notes = notes;
        Ok(report)
    };
    let sidecar_key = object_key(&format!("{key}.json"))?;
    if store
        .head(&sidecar_key)
        .map_err(|e| Error::transport("look up", sidecar_key.as_str(), e))?
        .is_some()
    {
        return skip(SkipReason::AlreadyExists, notes);
    }

    // Leftovers of killed transfers of this cache directory: all of them when none is
    // running (the transfer lock is free), else the stale ones. The lock is then held
    // (shared) until the save ends, so a later save never takes this one's files for a
    // killed one's.
    let (_transfer, stale) = leftovers::clean_and_hold(
        &cache_dir,
        std::time::SystemTime::now(),
        leftovers::Local::Create,
    );
    notes.extend(leftovers::notes(&stale));
    let parents: Vec<crate::record::RecordDigest> = origin_parent(&cache_dir).into_iter().collect();
    // Checked by the local gate above: a valid key from here on.
    let key = SnapshotKey::new(key)?;
    let gated = Gated { cache_dir, key, sidecar_key, parents, notes, started };
    match request.format {
        SnapshotKind::Full => save_full(request, gated),
        SnapshotKind::Index => save_as_index(request, gated),
    }
}

/// A save that passed the gates and housekeeping.
struct Gated {
    cache_dir: PathBuf,
    key: SnapshotKey,
    sidecar_key: crate::transport::ObjectKey,
    parents: Vec<crate::record::RecordDigest>,
    notes: Vec<String>,
    started: Instant,
}

impl Gated {
    fn skip(self, reason: SkipReason, kind: SnapshotKind) -> Result<SaveReport, Error> {
        let key = Some(self.key.as_str().to_owned());
        let mut report = SaveReport::skipped(reason, key, self.cache_dir, self.started);
        report.notes = self.notes;
        report.kind = kind;
        Ok(report)
    }
}

/// An index save ([`super::index::save`]).
fn save_as_index(request: &SaveRequest<'_>, gated: Gated) -> Result<SaveReport, Error> {
    // The lease comes first: what the save then learns about the store (which entry
    // objects it holds) stays true until the sidecar is committed, whatever a gc does.
    let Some(lease) = super::index::save_guard(request.store, &request.producer, &request.guard)?
    else {
        return gated.skip(SkipReason::StoreBusy, SnapshotKind::Index);
    };
    let (saved, lease) = super::index::lease::while_held(lease, &gated.cache_dir, || {
        save_index(&IndexSave {
            store: request.store,
            cache_dir: &gated.cache_dir,
            key: &gated.key,
            sidecar_key: &gated.sidecar_key,
            parents: &gated.parents,
            producer: &request.producer,
            signing_key: request.signing_key,
            level: request.level,
            progress: request.progress,
        })
    });
    let saved = saved?;
    if let Err(e) = lease.release() {
        // A lease left behind only delays a gc until it goes stale.
        tracing::warn!("could not release the save lease: {}", e.one_line());
    }
    let mut gated = gated;
    gated.notes.extend(saved.notes);
    match saved.published {
        commit::Published::Committed { note, .. } => gated.notes.extend(note),
        commit::Published::Lost { note } => {
            gated.notes.push(note);
            let counts = saved.counts;
            let mut report = gated.skip(SkipReason::AlreadyExists, SnapshotKind::Index)?;
            report.index = Some(counts);
            return Ok(report);
        }
    }
    let counts = saved.counts;
    Ok(SaveReport {
        outcome: SaveOutcome::Saved,
        kind: SnapshotKind::Index,
        key: Some(gated.key.as_str().to_owned()),
        cache_dir: gated.cache_dir,
        object_size_bytes: saved.object_size_bytes,
        file_count: saved.file_count,
        file_bytes: saved.file_bytes,
        pack_seconds: counts.pack_seconds,
        upload_seconds: counts.upload_seconds + counts.commit_seconds,
        seconds: gated.started.elapsed().as_secs_f64(),
        retries: saved.retries,
        manifest_digest: Some(saved.manifest_digest),
        parents: gated.parents,
        notes: gated.notes,
        index: Some(counts),
    })
}

/// A full save: the whole tree as one object.
fn save_full(request: &SaveRequest<'_>, gated: Gated) -> Result<SaveReport, Error> {
    let store = request.store;
    let Gated { cache_dir, key, sidecar_key, parents, mut notes, started } = gated;
    let skip = |reason, notes: Vec<String>| {
        let mut report =
            SaveReport::skipped(reason, Some(key.as_str().to_owned()), cache_dir.clone(), started);
        report.notes = notes;
        Ok(report)
    };
    let temp = temp::temp_file_beside(&cache_dir, Purpose::Pack)?;
    let options = PackOptions {
        compression: request.compression,
        level: request.level,
        threads: request.threads,
        digest: request.digest,
        key: super::key::ManifestKey::snapshot(&key),
        producer: request.producer.clone(),
        parents: parents.clone(),
        subtree: None,
    };
    let pack_started = Instant::now();
    let packed = pack_observed(&cache_dir, &temp, &options, request.progress)?;
    let pack_seconds = pack_started.elapsed().as_secs_f64();

    let manifest = &packed.manifest;
    let object = object_key(&commit::unique_object_name(key.as_str(), &packed.object_digest))?;
    let sidecar = Sidecar {
        key: key.as_str().to_owned(),
        object: Some(object.as_str().to_owned()),
        format: request.compression,
        kind: SnapshotKind::Full,
        object_size_bytes: packed.object_size_bytes,
        object_digest: packed.object_digest,
        manifest_digest: packed.manifest_digest.clone(),
        entry_count: manifest.entry_count(),
        file_count: manifest.file_count(),
        file_bytes: manifest.file_bytes,
        created_at: manifest.created_at.clone(),
        producer: request.producer.clone(),
        parents: parents.clone(),
        signature: None,
    };
    let sidecar = match request.signing_key {
        Some(key) => Sidecar {
            signature: Some(key.sign(SIDECAR_SIGNATURE_DOMAIN, &sidecar.statement())),
            ..sidecar
        },
        None => sidecar,
    };
    // Restore refuses such an object (a decompression-bomb bound): publishing it would
    // leave its namespace cold for every consumer.
    if super::restore::check_expansion(key.as_str(), &sidecar).is_err() {
        let _ = fs::remove_file(&temp);
        return skip(SkipReason::TooCompressible, notes);
    }
    let sidecar_bytes = seal(&SIDECAR_SCHEMA, "sidecar", &sidecar)?.to_bytes();
    let pending = commit::Pending::record(
        &cache_dir,
        &store.describe(),
        key.as_str(),
        &object,
        &sidecar_bytes,
    )?;

    let upload_started = Instant::now();
    let upload = commit::Upload {
        store,
        cache_dir: &cache_dir,
        key: &key,
        object: &object,
        packed: &temp,
        sidecar_key: &sidecar_key,
        sidecar: &sidecar_bytes,
        progress: request.progress,
    };
    let published = commit::publish(&upload, pending);
    drop(temp);
    let retries = match published? {
        commit::Published::Committed { retries, note } => {
            notes.extend(note);
            retries
        }
        commit::Published::Lost { note } => {
            notes.push(note);
            return skip(SkipReason::AlreadyExists, notes);
        }
    };
    notes.extend(packed.warnings);
    Ok(SaveReport {
        outcome: SaveOutcome::Saved,
        kind: SnapshotKind::Full,
        index: None,
        key: Some(key.as_str().to_owned()),
        cache_dir,
        object_size_bytes: packed.object_size_bytes,
        file_count: manifest.file_count(),
        file_bytes: manifest.file_bytes,
        pack_seconds,
        upload_seconds: upload_started.elapsed().as_secs_f64(),
        seconds: started.elapsed().as_secs_f64(),
        retries,
        manifest_digest: Some(packed.manifest_digest.clone()),
        parents,
        notes,
    })
}
