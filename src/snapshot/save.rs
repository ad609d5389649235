//! Save: publish the cache as a new snapshot, only when it gained something and only by a
//! trusted writer (seed 003 "准备、恢复和保存操作", "持久化传输与信任"; reference §3).
//!
//! Gates, in order; each skip names its [`SkipReason`] and nothing is uploaded:
//! 1. a primary key was given (`NoKey`);
//! 2. the cache directory exists (`NoCacheDir`), its `actions-v1` is not a symlink
//!    (`SymlinkedLayout`: strata never follows it, and a restore would reject it) and it
//!    holds `.updated` (`NotUpdated`): the engine touches the marker only after saving a
//!    new entry, and restore deletes it, so an all-HIT build publishes nothing;
//! 3. writer credentials (`NoWriterCredentials`): an `s3://` store needs `HW_OBS_AK` +
//!    `HW_OBS_SK` or `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY`
//!    ([`has_writer_credentials`]); a `file://` store needs none (the directory's
//!    permissions are the boundary);
//! 4. nothing exists under the key yet (`AlreadyExists`; snapshots are immutable). An
//!    object without its sidecar is an interrupted save: see below.
//!
//! Write order: pack into `<parent>/.<name>.pack-*` beside the cache directory
//! ([`super::pack`]); upload the object with no-overwrite semantics (the transport HEADs
//! first, then writes conditionally, multipart with parallel parts above the part size,
//! aborting incomplete uploads); then upload the sidecar `<key>.json`, the commit point.
//! If the sidecar cannot be uploaded, the object is deleted again (best effort): without
//! its sidecar it is invisible to restores anyway.
//!
//! The sealed sidecar is written to `<cache dir>/.local/pending-sidecars/<sha256(key)>.json`
//! before the object is uploaded and removed once it is. So when a save dies (or cannot
//! delete its object) between the two uploads, the next save under the same key from the
//! same cache directory finds the object without a sidecar, downloads it, checks its size
//! and SHA-256 against the pending sidecar and uploads the sidecar: the snapshot is
//! complete. Without a matching pending sidecar it skips with `IncompleteUpload`, whose
//! message says what to do.
//!
//! `parents` comes from `.local/snapshot-origin.json`, written by the restore that filled
//! the cache. A save that passes the gates first deletes stale leftovers of killed
//! restores and saves beside the cache directory ([`super::leftovers`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::key::check_key_text;
use super::leftovers::{self, STALE_AFTER};
use super::manifest::{Producer, SIDECAR_SCHEMA, Sidecar, seal};
use super::pack::{PackOptions, pack};
use super::restore::{origin_parent, resolve_cache_dir};
use super::{CARRIED_DIR, Compression, Error};
use crate::digest::Sha256Digest;
use crate::fs;
use crate::transport::{ObjectKey, ObjectStore, PutOutcome, StoreUrl};

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
    /// An `s3://` store without writer credentials.
    NoWriterCredentials,
    /// A snapshot already exists under the key.
    AlreadyExists,
    /// The object exists without its sidecar (an earlier save was interrupted) and this
    /// cache directory cannot complete it (no matching pending sidecar).
    IncompleteUpload,
    /// The packed snapshot unpacks to more than restore accepts for its compressed size
    /// (see `restore::MAX_EXPANSION_RATIO`): every restore would refuse it.
    TooCompressible,
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
                "no writer credentials (HW_OBS_AK + HW_OBS_SK, or AWS_ACCESS_KEY_ID + \
                 AWS_SECRET_ACCESS_KEY): this job is a read-only consumer"
            }
            SkipReason::AlreadyExists => {
                "a snapshot already exists under this key (never overwritten)"
            }
            SkipReason::IncompleteUpload => {
                "the snapshot object exists under this key without its sidecar <key>.json: an \
                 earlier save was interrupted after uploading it, and this cache directory \
                 holds no matching pending sidecar to complete it with (snapshots are never \
                 overwritten). Delete the object <key> from the store and save again, or save \
                 under a new key (actions/key makes a new one every run); until then restores \
                 ignore it"
            }
            SkipReason::TooCompressible => {
                "the snapshot would unpack to more than 1000× its compressed size (e.g. large \
                 zero-filled files), which every restore refuses as a possible decompression \
                 bomb; nothing was uploaded. Keep such files out of the cache (--artifact-include)"
            }
        }
    }

    /// `no_key`, `no_cache_dir`, `symlinked_layout`, `not_updated`,
    /// `no_writer_credentials`, `already_exists`, `incomplete_upload`, `too_compressible`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NoKey => "no_key",
            SkipReason::NoCacheDir => "no_cache_dir",
            SkipReason::SymlinkedLayout => "symlinked_layout",
            SkipReason::NotUpdated => "not_updated",
            SkipReason::NoWriterCredentials => "no_writer_credentials",
            SkipReason::AlreadyExists => "already_exists",
            SkipReason::IncompleteUpload => "incomplete_upload",
            SkipReason::TooCompressible => "too_compressible",
        }
    }
}

/// True if a save to `store_url` may proceed: always for a directory store; for an `s3://`
/// store, when `env` has both `HW_OBS_AK` and `HW_OBS_SK`, or both `AWS_ACCESS_KEY_ID` and
/// `AWS_SECRET_ACCESS_KEY` (non-empty). A malformed URL is `true` here and fails later
/// with its own error.
pub fn has_writer_credentials(store_url: &str, env: impl Fn(&str) -> Option<String>) -> bool {
    match store_url.parse::<StoreUrl>() {
        Ok(StoreUrl::S3(_)) => {
            let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
            (set("HW_OBS_AK") && set("HW_OBS_SK"))
                || (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
        }
        _ => true,
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
    /// Result of [`has_writer_credentials`] for the store.
    pub writer_credentials: bool,
    /// Compression format.
    pub compression: Compression,
    /// Compression level.
    pub level: i32,
    /// zstd workers (0: one per CPU).
    pub threads: u32,
    /// Recorded in the manifest and sidecar.
    pub producer: Producer,
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
    pub manifest_digest: Option<String>,
    /// The parent snapshot's manifest digest, if the cache came from a restore.
    pub parents: Vec<String>,
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

fn object_key(name: &str) -> Result<ObjectKey, Error> {
    ObjectKey::new(name).map_err(|e| Error::InvalidInput { what: "--key", reason: e.to_string() })
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
    if fs::symlink_metadata_opt(&cache_dir.join(".updated"))?.is_none() {
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
/// [`Error::Local`] and [`Error::Transport`] for failures after the gates. A failure never
/// leaves a visible snapshot: the sidecar is written last.
pub fn save(request: &SaveRequest<'_>) -> Result<SaveReport, Error> {
    let started = Instant::now();
    let cache_dir = resolve_cache_dir(&request.cache_dir)?;
    let key = request.key.as_deref().map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned);
    if let Some(reason) = local_gate(&cache_dir, key.as_deref(), request.writer_credentials)? {
        return Ok(SaveReport::skipped(reason, key, cache_dir, started));
    }
    let Some(key) = key else {
        return Ok(SaveReport::skipped(SkipReason::NoKey, None, cache_dir, started));
    };
    let skip =
        |reason| Ok(SaveReport::skipped(reason, Some(key.clone()), cache_dir.clone(), started));
    let object = object_key(&key)?;
    let sidecar_key = object_key(&format!("{key}.json"))?;
    let store = request.store;
    let head =
        |k: &ObjectKey| store.head(k).map_err(|e| Error::transport("look up", k.as_str(), e));
    if head(&sidecar_key)?.is_some() {
        return skip(SkipReason::AlreadyExists);
    }
    if let Some(meta) = head(&object)? {
        return complete_interrupted(store, &cache_dir, &key, meta.size_bytes, started);
    }

    let stale = leftovers::remove_stale(&cache_dir, std::time::SystemTime::now(), STALE_AFTER);
    let parents: Vec<String> = origin_parent(&cache_dir).into_iter().collect();
    let temp = fs::temp_path_beside(&cache_dir, "pack")?;
    let options = PackOptions {
        compression: request.compression,
        level: request.level,
        threads: request.threads,
        key: key.clone(),
        producer: request.producer.clone(),
        parents: parents.clone(),
    };
    let pack_started = Instant::now();
    let packed = pack(&cache_dir, &temp, &options)?;
    let pack_seconds = pack_started.elapsed().as_secs_f64();

    let manifest = &packed.manifest;
    let sidecar = Sidecar {
        key: key.clone(),
        format: request.compression,
        object_size_bytes: packed.object_size_bytes,
        object_sha256: packed.object_sha256,
        manifest_digest: packed.manifest_digest.clone(),
        entry_count: (manifest.directories.len() + manifest.files.len() + manifest.symlinks.len())
            as u64,
        file_count: manifest.files.len() as u64,
        file_bytes: manifest.file_bytes,
        created_at: manifest.created_at.clone(),
        producer: request.producer.clone(),
        parents: parents.clone(),
    };
    // Restore refuses such an object (a decompression-bomb bound): publishing it would
    // leave its namespace cold for every consumer.
    if super::restore::check_expansion(&key, &sidecar).is_err() {
        let _ = fs::remove_file(&temp);
        return Ok(SaveReport::skipped(SkipReason::TooCompressible, Some(key), cache_dir, started));
    }
    // The sidecar is kept locally until it is uploaded, so that a save interrupted between
    // the two uploads can be completed by the next one.
    let pending = pending_sidecar_path(&cache_dir, &key)?;
    let envelope = seal(&SIDECAR_SCHEMA, "sidecar", &sidecar)?;
    fs::write_atomic(&pending, &envelope.to_bytes(), 0o600)?;

    let upload_started = Instant::now();
    let (outcome, stats) = store
        .put_file_if_absent(&object, &temp)
        .map_err(|e| Error::transport("upload", &key, e))?;
    if outcome == PutOutcome::AlreadyExists {
        forget_pending(&pending);
        return skip(SkipReason::AlreadyExists);
    }
    drop(temp);
    let commit = store
        .put_file_if_absent(&sidecar_key, &pending)
        .map_err(|e| Error::transport("upload", sidecar_key.as_str(), e));
    let retries = match commit {
        Ok((PutOutcome::Created, sidecar_stats)) => stats.retries + sidecar_stats.retries,
        Ok((PutOutcome::AlreadyExists, _)) => {
            forget_pending(&pending);
            return skip(SkipReason::AlreadyExists);
        }
        Err(e) => {
            if let Err(cleanup) = store.delete(&object) {
                tracing::warn!(
                    "could not delete the uncommitted snapshot object {key}: {cleanup}; the \
                     next save under this key completes it from {}",
                    pending.display()
                );
            } else {
                forget_pending(&pending);
            }
            return Err(e);
        }
    };
    forget_pending(&pending);
    Ok(SaveReport {
        outcome: SaveOutcome::Saved,
        key: Some(key),
        cache_dir,
        object_size_bytes: packed.object_size_bytes,
        file_count: manifest.files.len() as u64,
        file_bytes: manifest.file_bytes,
        pack_seconds,
        upload_seconds: upload_started.elapsed().as_secs_f64(),
        seconds: started.elapsed().as_secs_f64(),
        retries,
        manifest_digest: Some(packed.manifest_digest.clone()),
        parents,
        notes: leftovers::notes(&stale).into_iter().chain(packed.warnings).collect(),
    })
}

/// Where a save keeps the sidecar of `key` until it is uploaded:
/// `<cache dir>/.local/pending-sidecars/<sha256 of the key>.json` (machine-local, never
/// packed). The directory is created.
fn pending_sidecar_path(cache_dir: &Path, key: &str) -> Result<PathBuf, Error> {
    let dir = fs::create_dir_all_within(cache_dir, Path::new(".local/pending-sidecars"), 0o755)?;
    Ok(dir.join(format!("{}.json", Sha256Digest::of_bytes(key.as_bytes()).to_hex())))
}

fn forget_pending(path: &Path) {
    if let Err(e) = fs::remove_file(path) {
        tracing::warn!("{e}");
    }
}

/// The object under `key` exists without its sidecar: an earlier save was interrupted
/// between the two uploads. If this cache directory holds that save's pending sidecar and
/// the stored object matches it (size, then the SHA-256 of a full download), the sidecar is
/// uploaded now and the snapshot is complete; otherwise the save is skipped as
/// [`SkipReason::IncompleteUpload`], whose message says what to do.
fn complete_interrupted(
    store: &dyn ObjectStore,
    cache_dir: &Path,
    key: &str,
    object_size_bytes: u64,
    started: Instant,
) -> Result<SaveReport, Error> {
    let skip = || {
        Ok(SaveReport::skipped(
            SkipReason::IncompleteUpload,
            Some(key.to_owned()),
            cache_dir.to_path_buf(),
            started,
        ))
    };
    let pending = pending_sidecar_path(cache_dir, key)?;
    let Ok(bytes) = fs::read(&pending) else { return skip() };
    let Ok((_, sidecar)) = super::manifest::load::<Sidecar>(&bytes, &SIDECAR_SCHEMA, "sidecar")
    else {
        return skip();
    };
    if sidecar.key != key || sidecar.object_size_bytes != object_size_bytes {
        return skip();
    }
    let object = object_key(key)?;
    let upload_started = Instant::now();
    let download = fs::temp_path_beside(cache_dir, "download")?;
    let (_, stats) =
        store.get_to_file(&object, &download).map_err(|e| Error::transport("download", key, e))?;
    let (digest, size) = fs::hash_file(&download)?;
    drop(download);
    if digest != sidecar.object_sha256 || size != sidecar.object_size_bytes {
        return skip();
    }
    let sidecar_key = object_key(&format!("{key}.json"))?;
    let (outcome, sidecar_stats) = store
        .put_file_if_absent(&sidecar_key, &pending)
        .map_err(|e| Error::transport("upload", sidecar_key.as_str(), e))?;
    forget_pending(&pending);
    if outcome == PutOutcome::AlreadyExists {
        return Ok(SaveReport::skipped(
            SkipReason::AlreadyExists,
            Some(key.to_owned()),
            cache_dir.to_path_buf(),
            started,
        ));
    }
    Ok(SaveReport {
        outcome: SaveOutcome::Saved,
        key: Some(key.to_owned()),
        cache_dir: cache_dir.to_path_buf(),
        object_size_bytes: sidecar.object_size_bytes,
        file_count: sidecar.file_count,
        file_bytes: sidecar.file_bytes,
        pack_seconds: 0.0,
        upload_seconds: upload_started.elapsed().as_secs_f64(),
        seconds: started.elapsed().as_secs_f64(),
        retries: stats.retries + sidecar_stats.retries,
        manifest_digest: Some(sidecar.manifest_digest),
        parents: sidecar.parents,
        notes: vec![format!(
            "completed the interrupted save of {key}: the object was already uploaded and \
             matches the pending sidecar ({size} bytes, SHA-256 {digest}); uploaded its \
             sidecar"
        )],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_credentials() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
        };
        let s3 = "s3://bucket/prefix";
        assert!(has_writer_credentials("file:///tmp/store", env(&[])));
        assert!(!has_writer_credentials(s3, env(&[])));
        assert!(!has_writer_credentials(s3, env(&[("HW_OBS_AK", "a")])));
        assert!(!has_writer_credentials(s3, env(&[("HW_OBS_AK", "a"), ("HW_OBS_SK", " ")])));
        assert!(has_writer_credentials(s3, env(&[("HW_OBS_AK", "a"), ("HW_OBS_SK", "b")])));
        assert!(has_writer_credentials(
            s3,
            env(&[("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b")])
        ));
    }
}
