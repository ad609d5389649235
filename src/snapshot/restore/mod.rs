//! Restore: find the best snapshot for a key, verify it, and replace the cache directory
//! with it atomically (docs/snapshots.md "Restore").
//!
//! Lookup order, first match wins; only keys whose sidecar `<key>.json` exists count:
//! 1. the exact key (HEAD of the sidecar: never a prefix match, which would let a newer key
//!    that merely starts with it win);
//! 2. the newest snapshot under the key's same-source prefix, then under its compatibility
//!    prefix (both derived from the key when it has strata's shape);
//! 3. the newest snapshot under each `--restore-key` prefix, in order.
//!
//! Listings follow every page. "Newest" is the largest suffix time
//! (`yyyymmddThhmmss.uuuuuuZ`, the first field of strata's suffix, compared as a time:
//! [`crate::snapshot::key::SuffixTime`]), ties broken by the whole key (byte order,
//! larger wins); keys without that field use the sidecar's `Last-Modified` at the store's
//! resolution (S3 listings: milliseconds; directory stores: the file system's), then the
//! key. A snapshot
//! whose suffix time is more than a day ahead of the clock is ignored with a note: a wrong
//! clock or a crafted key must not win every lookup.
//!
//! Candidates are tried in that order: the exact key, then each prefix's snapshots newest
//! first (a key seen at an earlier level is not tried twice). A candidate that fails
//! verification (sidecar, size, object digest, any unpack check) is recorded in
//! [`RestoreReport::rejected`] and the next one is tried, up to [`MAX_REJECTED`]
//! rejections; so one corrupt or poisoned snapshot is reported but does not block every
//! restore of its namespace. Store failures are not retried with other candidates.
//!
//! Read order for the match:
//! 1. download the sidecar (at most 1 MiB) and verify it as a record naming the matched key
//!    and, for version 2, the object it commits (`~<16 hex>-<32 hex>`; version 1 sidecars
//!    of earlier releases commit the object `<key>`);
//! 2. HEAD that object (missing, or not the declared size: the candidate is rejected),
//!    download it into `<parent>/.<name>.download-*` beside the cache directory (the
//!    transport runs parallel ranged GETs) and read it while it arrives, in order, up to
//!    the complete prefix (`snapshot/arrivals.rs`): every byte once, through the sidecar's
//!    object digest (BLAKE3, or SHA-256 for sidecars of earlier releases and
//!    `--digest sha256` saves) and into the unpacker (step 3), with nothing read twice;
//! 3. unpack into a staging directory `<parent>/.<name>.tmp-<hex>` under the checks of
//!    [`super::unpack`], bounded by the sidecar's counts, which themselves may not exceed
//!    [`MAX_EXPANSION_RATIO`] times the object size (checked before the download). The
//!    unpack's result counts only once the whole object's size and digest match the
//!    sidecar; a mismatch is the reason reported, and nothing is swapped in;
//! 4. write `.local/snapshot-origin.json` (lineage for the next save) into the staging
//!    tree, make it durable with one `syncfs` (not one fsync per file), then swap it into
//!    place (and fsync the parent): `renameat2(RENAME_EXCHANGE)` when the cache directory
//!    exists (one atomic step), else a no-replace rename; the old tree is deleted after.
//!    Without `RENAME_EXCHANGE` the old tree is renamed aside first, so for a moment the
//!    cache directory is missing, never partial.
//!
//! A candidate whose sidecar has kind `index` takes another path after step 1 (and the
//! producer check): [`super::index::restore`] verifies the index object and installs the
//! missing entries in place, with no staging tree and no swap; its `check_target`
//! refusal, lookup order and fall-through on a rejected index are the ones above.
//!
//! Any failure leaves the cache directory untouched and removes the temp file and staging
//! directory. Leftovers of killed restores and saves beside the cache directory are
//! deleted at the start of a restore once stale ([`super::leftovers`]). Before the lookup, a restore (not a lookup-only one) deletes
//! `<cache dir>/.updated`: from then on the marker means "this job added an entry".
//!
//! Because the cache directory is replaced as a whole, a restore first refuses (and
//! touches nothing, not even `.updated`) a cache directory that is or contains the current
//! directory or `$HOME`, that is a symlink or not a directory, or that holds any name
//! besides strata's own (`actions-v1`, `.locks`, `.local`, `.updated`, and strata's crash
//! leftovers): `--cache-dir .` must never delete a workspace ([`check_target`]).

mod candidates;
pub(crate) mod lookup;

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use super::arrivals::{Arrivals, ArrivingReader, FinishGuard};
use super::leftovers;
use super::manifest::{
    MAX_SIDECAR_BYTES, ORIGIN_SCHEMA, Origin, SIDECAR_SIGNATURE_DOMAIN, Sidecar, SnapshotKind, seal,
};
use super::unpack::{UnpackLimits, UnpackReport, unpack_from};
use super::{Error, SnapshotKey, manifest};
use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs::temp::{self, Purpose, is_leftover};
use crate::fs::{self, StagingDir};
use crate::l1::layout::{self, CacheRoot};
use crate::progress::{Phase, Progress};
use crate::record::Timestamp;
use crate::snapshot::commit::object_key;
pub use crate::snapshot::unpack::{MAX_EXPANSION_RATIO, MIN_EXPANSION_ALLOWANCE_BYTES};
use crate::transport::{ObjectKey, ObjectStore};
use crate::trust::TrustPolicy;
pub use lookup::MAX_FUTURE;
use lookup::{Candidate, prefixes};

/// How a snapshot was matched (the `matched-level` output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatchLevel {
    /// The exact key.
    Exact,
    /// The newest snapshot of the same sources (same-source prefix).
    SameSource,
    /// The newest compatible snapshot (compatibility prefix).
    Compatible,
    /// The newest snapshot under a `--restore-key` prefix that is neither of the above.
    Prefix,
    /// Nothing matched.
    None,
}

impl MatchLevel {
    /// `exact`, `same-source`, `compatible`, `prefix` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchLevel::Exact => "exact",
            MatchLevel::SameSource => "same-source",
            MatchLevel::Compatible => "compatible",
            MatchLevel::Prefix => "prefix",
            MatchLevel::None => "none",
        }
    }
}

/// Restore or only look up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupMode {
    /// Download, verify and swap into place.
    Restore,
    /// Find the match and stop; nothing is downloaded or changed (`--lookup-only`).
    LookupOnly,
}

/// What to restore.
pub struct RestoreRequest<'a> {
    /// The store to read.
    pub store: &'a dyn ObjectStore,
    /// The cache directory as given (`~` expanded, made absolute, symlinks resolved).
    pub cache_dir: PathBuf,
    /// The primary key.
    pub key: SnapshotKey,
    /// Extra prefixes tried after the derived ones, in order (`--restore-key`).
    pub restore_prefixes: Vec<String>,
    /// Restore or only look up.
    pub mode: LookupMode,
    /// Producers accepted (`--trusted-key`, `STRATA_TRUSTED_KEYS`). Empty: producers are
    /// not checked (and the report says so once); otherwise a candidate whose sidecar is
    /// not signed by one of these keys is passed over like a corrupt one.
    pub trust: crate::trust::TrustPolicy,
    /// Told of the phase `restore` of each candidate downloaded: the object's bytes as
    /// they are unpacked ([`crate::progress`]).
    pub progress: &'a dyn Progress,
}

/// What a restore did. A miss is `level: None` with `restored: false`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RestoreReport {
    /// How the snapshot was matched.
    pub level: MatchLevel,
    /// The matched key.
    pub matched_key: Option<String>,
    /// True if the cache directory now holds the matched snapshot.
    pub restored: bool,
    /// The absolute cache directory.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub cache_dir: PathBuf,
    /// The prefixes and keys looked up, in order.
    pub tried: Vec<String>,
    /// Candidates that failed verification and were passed over, in order.
    pub rejected: Vec<Rejected>,
    /// Of those, candidates passed over because their producer is not trusted (with
    /// trusted keys configured), at most [`MAX_UNTRUSTED`].
    pub untrusted_skipped: u64,
    /// Size of the downloaded object, in bytes.
    pub object_size_bytes: u64,
    /// Files restored.
    pub file_count: u64,
    /// Bytes of file content restored.
    pub file_bytes: u64,
    /// Wall time of the whole restore, in seconds.
    pub seconds: f64,
    /// Wall time of the object download, in seconds.
    pub download_seconds: f64,
    /// Requests retried during the restore, all of them (HEADs, listing pages, the
    /// sidecar and object downloads), including those of a failed restore.
    pub retries: u32,
    /// The restored manifest's digest (`sha256:<hex>`; for an index snapshot, the index
    /// record's).
    pub manifest_digest: Option<crate::record::RecordDigest>,
    /// The kind of the snapshot restored (`full` or `index`); `full` when nothing was (the
    /// command line's `--json` says `null` then).
    pub kind: SnapshotKind,
    /// For an index snapshot restored: its entry counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<super::index::restore::IndexRestoreCounts>,
    /// Incomplete snapshots passed over and similar notes.
    pub notes: Vec<String>,
}

/// The resolved cache directory and its parent and name.
pub(crate) fn resolve_cache_dir(given: &Path) -> Result<PathBuf, Error> {
    let root = CacheRoot::new(given).map_err(|e| Error::InvalidInput {
        what: "--cache-dir",
        reason: format!("cannot resolve {}: {e}", given.display()),
    })?;
    let path = root.path().to_path_buf();
    if path.parent().is_none() || path.file_name().is_none() {
        return Err(Error::InvalidInput {
            what: "--cache-dir",
            reason: format!("{} has no parent directory", path.display()),
        });
    }
    Ok(path)
}

/// The names a cache directory may hold (besides crash leftovers, [`is_leftover`]): what
/// the engine and restore create at the cache root.
pub const OWN_NAMES: [&str; 4] = layout::ROOT_NAMES;

/// Refuses a cache directory that a restore must not replace (see the module docs).
/// `cache_dir` is resolved (absolute, symlinks resolved); `protected` are directories that
/// must not be inside it, with their names (the current directory, `$HOME`), also
/// resolved.
///
/// # Errors
/// [`Error::UnsafeCacheDir`] with the reason; [`Error::Local`] if the directory cannot be
/// listed.
pub fn check_target(cache_dir: &Path, protected: &[(&str, PathBuf)]) -> Result<(), Error> {
    let refuse =
        |reason: String| Err(Error::UnsafeCacheDir { path: cache_dir.to_path_buf(), reason });
    for (what, dir) in protected {
        if dir == cache_dir {
            return refuse(format!("it is {what}"));
        }
        if dir.starts_with(cache_dir) {
            return refuse(format!("it contains {what} ({})", dir.display()));
        }
    }
    match fs::symlink_metadata_opt(cache_dir)? {
        None => return Ok(()),
        Some(meta) if meta.file_type().is_symlink() => {
            return refuse("it is a symlink that leads nowhere (dangling)".to_owned());
        }
        Some(meta) if !meta.is_dir() => {
            return refuse("it exists and is not a directory".to_owned());
        }
        Some(_) => {}
    }
    let foreign: Vec<String> = fs::read_dir(cache_dir)?
        .iter()
        .filter_map(|p| p.file_name().map(fs::name::encode_os))
        .filter(|name| !OWN_NAMES.contains(&name.as_str()) && !is_leftover(name))
        .collect();
    if let Some(first) = foreign.first() {
        return refuse(format!(
            "it holds {} name(s) that are not strata's (e.g. {first:?}; strata's own are {})",
            foreign.len(),
            OWN_NAMES.join(", ")
        ));
    }
    Ok(())
}

/// The current directory and `$HOME`, resolved: what a cache directory may never contain.
fn protected_dirs() -> Vec<(&'static str, PathBuf)> {
    let mut out = Vec::new();
    if let Ok(cwd) = fs::current_dir() {
        out.push(("the current directory", fs::resolve_nonstrict(&cwd).unwrap_or(cwd)));
    }
    if let Some(home) = crate::config::var("HOME").map(PathBuf::from)
        && home.is_absolute()
    {
        out.push(("$HOME", fs::resolve_nonstrict(&home).unwrap_or(home)));
    }
    out
}

/// Most candidates that may fail verification in one restore before it gives up
/// (untrusted ones are counted apart, [`MAX_UNTRUSTED`]).
pub const MAX_REJECTED: usize = 3;

/// Most candidates whose producer is not trusted that one restore passes over (each costs
/// one read of its sidecar, about 1 KB) before it gives up.
pub const MAX_UNTRUSTED: usize = 64;

/// Most time one restore spends on candidates whose producer is not trusted.
pub const MAX_UNTRUSTED_TIME: std::time::Duration = std::time::Duration::from_secs(30);

/// A candidate that failed verification and was passed over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rejected {
    /// Its key.
    pub key: String,
    /// The level it was found at.
    pub level: MatchLevel,
    /// Why it was rejected (one line).
    pub reason: String,
    /// Rejected because its producer is not trusted ([`Error::is_untrusted`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub untrusted: bool,
}

/// The advice for bytes that fail verification right after a download: the damage may
/// have happened in transit, so it is no reason to delete anything from the store (a
/// record corrupt on this machine's disk keeps the record layer's "delete it").
pub(crate) const MAYBE_TRANSIENT: &str = "this may be a transient transfer error (bytes \
     damaged in transit): retry the restore; only if every retry fails the same way is the \
     stored copy damaged";

/// Reads the candidate's sidecar into memory (one GET of at most [`MAX_SIDECAR_BYTES`]; no
/// temp file, so nothing is written beside the cache for it) and loads it.
fn read_sidecar(store: &dyn ObjectStore, found: &Candidate) -> Result<(Sidecar, String), Error> {
    if found.sidecar.size_bytes > MAX_SIDECAR_BYTES {
        return Err(Error::corrupt(&found.key, "the sidecar is larger than 1 MiB"));
    }
    let name = format!("{}.json", found.key);
    // The listing's size is the store's claim; at most the bound is read, whatever comes.
    let bytes = match store.get_small(&object_key(&name)?, MAX_SIDECAR_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            let e = crate::transport::Error::NotFound {
                location: name.clone(),
                attempts: Default::default(),
            };
            return Err(Error::transport("download", &name, e));
        }
        Err(e) if e.is_invalid_range() => {
            return Err(Error::corrupt(&found.key, "the sidecar is larger than 1 MiB"));
        }
        Err(e) => return Err(Error::transport("download", &name, e)),
    };
    let (sidecar_digest, sidecar): (_, Sidecar) = manifest::load_sidecar(&bytes).map_err(|e| {
        let problem = match &e {
            Error::Record { source, .. } => source.problem(),
            other => other.one_line(),
        };
        Error::corrupt(
            &found.key,
            format!(
                "its sidecar {name} did not verify after the download ({problem}); \
                     {MAYBE_TRANSIENT}"
            ),
        )
    })?;
    if sidecar.key != found.key {
        return Err(Error::corrupt(&found.key, format!("the sidecar names key {}", sidecar.key)));
    }
    Ok((sidecar, sidecar_digest))
}

/// For a lookup with trusted keys: reads the candidate's sidecar (into memory) and checks
/// its producer ([`check_producer`]). Without trusted keys there
/// is nothing to check.
pub(super) fn lookup_producer(
    request: &RestoreRequest<'_>,
    found: &Candidate,
) -> Result<(), Error> {
    if request.trust.is_empty() {
        return Ok(());
    }
    let (sidecar, _) = read_sidecar(request.store, found)?;
    check_producer(&request.trust, &found.key, &sidecar)
}

/// With trusted keys configured, the sidecar must carry a signature by one of them over
/// [`Sidecar::statement`]; otherwise the candidate is [`Error::Corrupt`] (passed over), with
/// the key id and the reason.
fn check_producer(trust: &TrustPolicy, key: &str, sidecar: &Sidecar) -> Result<(), Error> {
    if trust.is_empty() {
        return Ok(());
    }
    trust
        .check(SIDECAR_SIGNATURE_DOMAIN, &sidecar.statement(), sidecar.signature.as_ref())
        .map(drop)
        .map_err(|rejection| Error::Untrusted {
            object: key.to_owned(),
            reason: format!("its producer is not trusted: {rejection}"),
        })
}

/// Deletes the previous cache tree after the swap; a failure is a note naming it (the
/// restore itself succeeded).
fn discard_old_tree(old: &Path) -> Option<String> {
    fs::remove_tree(old).err().map(|e| old_tree_note(old, &e))
}

fn old_tree_note(old: &Path, e: &fs::Error) -> String {
    format!(
        "the snapshot was restored, but the previous cache tree (swapped out to {}) could not \
         be deleted: {e}; nothing reads it, delete it by hand",
        old.display()
    )
}

/// Swaps the verified `staging` tree into `cache_dir` (see the module docs, step 4).
/// Returns a note if the previous tree could not be deleted afterwards.
fn swap_into_place(staging: StagingDir, cache_dir: &Path) -> Result<Option<String>, Error> {
    match fs::symlink_metadata_opt(cache_dir)? {
        None => match fs::publish_dir(staging, cache_dir, false) {
            Ok(()) => Ok(None),
            Err((e, _staging)) => Err(e.into()),
        },
        Some(meta) if meta.is_dir() => {
            if fs::exchange(staging.path(), cache_dir)? {
                // The staging path now holds the old tree.
                return Ok(discard_old_tree(&staging.keep()));
            }
            let aside = temp::staging_beside(cache_dir, 0o700)?;
            let aside_path = aside.path().to_path_buf();
            fs::remove_tree(&aside_path)?;
            fs::rename(cache_dir, &aside_path)?;
            match fs::publish_dir(staging, cache_dir, false) {
                Ok(()) => Ok(discard_old_tree(&aside.keep())),
                Err((e, _staging)) => {
                    // Put the old tree back rather than leave nothing.
                    let _ = fs::rename(&aside_path, cache_dir);
                    let _ = aside.keep();
                    Err(e.into())
                }
            }
        }
        Some(_) => Err(Error::UnsafeCacheDir {
            path: cache_dir.to_path_buf(),
            reason: "it exists and is not a directory".to_owned(),
        }),
    }
}

/// A restore that failed: the error and what was found and tried before it (the rejected
/// candidates, the level and key of the first one), for reporting.
#[derive(Debug)]
pub struct RestoreFailure {
    /// Why nothing was restored.
    pub error: Error,
    /// The lookup so far: `level` and `matched_key` name the first candidate that was
    /// chosen (and rejected), `rejected` every rejected candidate.
    pub report: RestoreReport,
}

/// What one verified candidate gave.
pub(super) struct Restored {
    pub(super) object_size_bytes: u64,
    pub(super) file_count: u64,
    pub(super) file_bytes: u64,
    pub(super) manifest_digest: crate::record::RecordDigest,
    pub(super) note: Option<String>,
}

/// Checks the sidecar's declared sizes against [`MAX_EXPANSION_RATIO`] before anything is
/// downloaded (unpacking then enforces the declared sizes themselves).
pub(crate) fn check_expansion(key: &str, sidecar: &Sidecar) -> Result<(), Error> {
    let declared = sidecar.entry_count.saturating_mul(512).saturating_add(sidecar.file_bytes);
    let allowed = sidecar
        .object_size_bytes
        .saturating_mul(MAX_EXPANSION_RATIO)
        .max(MIN_EXPANSION_ALLOWANCE_BYTES);
    if declared > allowed {
        return Err(Error::corrupt(
            key,
            format!(
                "its sidecar declares {} entries and {} bytes of files (about {declared} bytes \
                 unpacked) for a {}-byte object: more than {MAX_EXPANSION_RATIO}× expansion \
                 (a decompression bomb?)",
                sidecar.entry_count, sidecar.file_bytes, sidecar.object_size_bytes
            ),
        ));
    }
    Ok(())
}

/// What [`download_and_unpack`] gave: the object's digest and size (of every byte that
/// arrived, in order), and the unpack's own result, which counts only if they match.
struct Streamed {
    digest: ContentDigest,
    size_bytes: u64,
    download_seconds: f64,
    unpacked: Result<UnpackReport, Error>,
}

/// Downloads `object` into the temp file `download` on one thread while `consume` reads
/// it, in order, as it arrives ([`ArrivingReader`]); the bytes `consume` leaves are read
/// too, so the digest covers the whole object, each byte read once.
///
/// # Errors
/// [`Error::Transport`] if the download failed (whatever `consume` said).
fn download_and_unpack(
    store: &dyn ObjectStore,
    object: (&ObjectKey, u64),
    download: &Path,
    algorithm: DigestAlgorithm,
    progress: &dyn Progress,
    consume: impl FnOnce(&mut (dyn std::io::Read + Send)) -> Result<UnpackReport, Error>,
) -> Result<Streamed, Error> {
    let (object, size_bytes) = object;
    let phase = Phase::begin(progress, "restore", size_bytes);
    let arrivals = Arrivals::new();
    let (fetched, unpacked, drained, reader) = std::thread::scope(|scope| {
        let fetching = scope.spawn(|| {
            let guard = FinishGuard(&arrivals);
            let started = Instant::now();
            let fetched = store.get_to_file_observed(object, download, &arrivals);
            arrivals.finish(fetched.is_ok());
            drop(guard);
            fetched.map(|_| started.elapsed().as_secs_f64())
        });
        let mut reader = ArrivingReader::new(&arrivals, download, algorithm);
        let unpacked = consume(&mut crate::progress::Reader::new(&mut reader, progress));
        let drained = reader.drain();
        let fetched = match fetching.join() {
            Ok(fetched) => fetched,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (fetched, unpacked, drained, reader)
    });
    drop(phase);
    let download_seconds = fetched.map_err(|e| Error::transport("download", object.as_str(), e))?;
    if let Err(e) = drained {
        return Err(fs::Error::io("read", download, e).into());
    }
    let (digest, size_bytes) = reader.finish();
    Ok(Streamed { digest, size_bytes, download_seconds, unpacked })
}

/// Downloads, verifies and swaps in one candidate (read order steps 1–4).
pub(super) fn restore_candidate(
    request: &RestoreRequest<'_>,
    cache_dir: &Path,
    found: &Candidate,
    report: &mut RestoreReport,
) -> Result<Restored, Error> {
    let (sidecar, _) = read_sidecar(request.store, found)?;
    check_producer(&request.trust, &found.key, &sidecar)?;
    if report.matched_key.as_deref() == Some(found.key.as_str()) {
        report.object_size_bytes = sidecar.object_size_bytes;
    }
    if sidecar.kind == SnapshotKind::Index {
        return restore_index_candidate(request, cache_dir, found, &sidecar, report);
    }
    check_expansion(&found.key, &sidecar)?;
    let object = object_key(sidecar.object_name())?;
    let stored =
        request.store.head(&object).map_err(|e| Error::transport("look up", object.as_str(), e))?;
    let Some(stored) = stored else {
        return Err(Error::corrupt(
            &found.key,
            format!("its sidecar commits the object {object}, which is not in the store"),
        ));
    };
    if stored.size_bytes != sidecar.object_size_bytes {
        return Err(Error::corrupt(
            &found.key,
            format!(
                "the object {object} has {} bytes, its sidecar declares {}",
                stored.size_bytes, sidecar.object_size_bytes
            ),
        ));
    }

    let staging = temp::staging_beside(cache_dir, 0o755)?;
    let limits = UnpackLimits {
        max_entries: sidecar.entry_count,
        max_file_bytes: sidecar.file_bytes,
        manifest_digest: Some(sidecar.manifest_digest.clone()),
        key: Some(
            crate::snapshot::key::ManifestKey::parse(&found.key)
                .map_err(|e| Error::corrupt(&found.key, e))?,
        ),
        compression: Some(sidecar.format),
        algorithm: Some(sidecar.object_digest.algorithm()),
        ..UnpackLimits::default()
    };
    let download = temp::temp_file_beside(cache_dir, Purpose::Download)?;
    let algorithm = sidecar.object_digest.algorithm();
    let streamed = download_and_unpack(
        request.store,
        (&object, sidecar.object_size_bytes),
        &download,
        algorithm,
        request.progress,
        |input| unpack_from(input, staging.path(), &limits, &found.key),
    );
    // Nothing reads the download again; deleting it now also spares the sync below its
    // dirty pages.
    drop(download);
    let streamed = streamed?;
    report.download_seconds += streamed.download_seconds;
    let (digest, size) = (streamed.digest, streamed.size_bytes);
    // The object's digest decides first: an unpack error on damaged bytes is reported as
    // the damage it is.
    if size != sidecar.object_size_bytes || digest != sidecar.object_digest {
        return Err(Error::corrupt(
            &found.key,
            format!(
                "the downloaded object ({size} bytes, digest {digest}) does not match its \
                 sidecar ({} bytes, digest {}); {MAYBE_TRANSIENT}",
                sidecar.object_size_bytes, sidecar.object_digest
            ),
        ));
    }
    let unpacked = streamed.unpacked?;
    let origin = Origin {
        key: found.key.clone(),
        manifest_digest: unpacked.manifest_digest.clone(),
        restored_at: Timestamp::now().rfc3339_seconds(),
    };
    let local = fs::create_dir_all_within(staging.path(), Path::new(layout::LOCAL_DIR), 0o755)?;
    let envelope = seal(&ORIGIN_SCHEMA, "origin", &origin)?;
    fs::write_new(&local.join(ORIGIN_FILE), &envelope.to_bytes(), 0o644)?;
    // One sync of the whole tree (not one fsync per file) before the swap: after a power
    // cut the cache directory holds the old tree or the new one, complete.
    fs::sync_filesystem(staging.path())?;
    let note = swap_into_place(staging, cache_dir)?;
    if let Some(parent) = cache_dir.parent()
        && let Err(e) = fs::fsync_dir(parent)
    {
        // The swap happened; a failed parent fsync only weakens durability.
        tracing::warn!("{e}");
    }
    Ok(Restored {
        object_size_bytes: size,
        file_count: unpacked.files,
        file_bytes: unpacked.file_bytes,
        manifest_digest: unpacked.manifest_digest,
        note,
    })
}

/// Restores an index snapshot in place ([`super::index::restore`]), then writes the origin
/// record.
fn restore_index_candidate(
    request: &RestoreRequest<'_>,
    cache_dir: &Path,
    found: &Candidate,
    sidecar: &Sidecar,
    report: &mut RestoreReport,
) -> Result<Restored, Error> {
    let restored = super::index::restore::restore_index(
        request.store,
        cache_dir,
        &found.key,
        sidecar,
        request.progress,
    )?;
    report.download_seconds += restored.download_seconds;
    let origin = Origin {
        key: found.key.clone(),
        manifest_digest: restored.manifest_digest.clone(),
        restored_at: Timestamp::now().rfc3339_seconds(),
    };
    let local = fs::create_dir_all_within(cache_dir, Path::new(layout::LOCAL_DIR), 0o755)?;
    let envelope = seal(&ORIGIN_SCHEMA, "origin", &origin)?;
    fs::write_atomic(&local.join(ORIGIN_FILE), &envelope.to_bytes(), 0o644)?;
    let note = (!restored.notes.is_empty()).then(|| restored.notes.join("; "));
    report.index = Some(restored.counts);
    Ok(Restored {
        object_size_bytes: sidecar.object_size_bytes,
        file_count: restored.file_count,
        file_bytes: restored.file_bytes,
        manifest_digest: restored.manifest_digest,
        note,
    })
}

/// Restores the best snapshot for `request` (see the module docs): the candidates in
/// lookup order (the exact key, then each prefix's snapshots newest first); a candidate
/// that fails verification is recorded in `rejected` and the next one is tried, up to
/// [`MAX_REJECTED`] rejections.
///
/// # Errors
/// A [`RestoreFailure`] holding: [`Error::InvalidInput`] for a bad key, prefix or cache
/// directory; [`Error::UnsafeCacheDir`] for a cache directory a restore must not replace
/// (nothing touched); [`Error::Transport`] for store failures; [`Error::Corrupt`] when the
/// last candidate tried failed verification and no other was restored; [`Error::Local`]
/// for local I/O. In every other error case the cache directory is untouched apart from
/// `.updated`, removed first.
pub fn restore(request: &RestoreRequest<'_>) -> Result<RestoreReport, Box<RestoreFailure>> {
    let started = Instant::now();
    let mut report = RestoreReport {
        level: MatchLevel::None,
        matched_key: None,
        restored: false,
        cache_dir: request.cache_dir.clone(),
        tried: Vec::new(),
        rejected: Vec::new(),
        untrusted_skipped: 0,
        object_size_bytes: 0,
        file_count: 0,
        file_bytes: 0,
        seconds: 0.0,
        download_seconds: 0.0,
        retries: 0,
        manifest_digest: None,
        kind: SnapshotKind::Full,
        index: None,
        notes: Vec::new(),
    };
    let retried_before = request.store.retried_requests();
    let result = restore_into(request, &mut report);
    report.seconds = started.elapsed().as_secs_f64();
    // Every request of the restore counts: HEADs, probes, listing pages, the sidecar and
    // the object, whether they succeeded, missed or failed.
    let retried = request.store.retried_requests().saturating_sub(retried_before);
    report.retries = u32::try_from(retried).unwrap_or(u32::MAX);
    match result {
        Ok(()) => Ok(report),
        Err(error) => Err(Box::new(RestoreFailure { error, report })),
    }
}

/// What `--restore-key` needs listing for, in messages.
pub const RESTORE_KEY_PURPOSE: &str = "a restore by prefix (--restore-key)";

fn restore_into(request: &RestoreRequest<'_>, report: &mut RestoreReport) -> Result<(), Error> {
    let cache_dir = resolve_cache_dir(&request.cache_dir)?;
    report.cache_dir = cache_dir.clone();
    check_target(&cache_dir, &protected_dirs())?;
    let prefixes = prefixes(&request.key, &request.restore_prefixes)?;
    if !request.restore_prefixes.is_empty() {
        // Asked for by name: a store that cannot list is refused before anything changes.
        crate::transport::listing(request.store, RESTORE_KEY_PURPOSE)
            .map_err(|e| Error::transport("list", request.store.describe(), e))?;
    }
    let mut _transfer = None;
    if request.mode == LookupMode::Restore {
        fs::remove_file(&cache_dir.join(layout::UPDATED_MARKER))?;
        // Held (shared) until the restore ends: see `leftovers`.
        let (lock, removed) =
            leftovers::clean_and_hold(&cache_dir, SystemTime::now(), leftovers::Local::Existing);
        _transfer = lock;
        report.notes.extend(leftovers::notes(&removed));
    }
    if request.trust.is_empty() && request.mode != LookupMode::LookupOnly {
        report.notes.push(
            "producers are not checked: no trusted key is configured (--trusted-key, \
             STRATA_TRUSTED_KEYS), so any writer of the store can publish a snapshot this \
             restore accepts"
                .to_owned(),
        );
    }
    // The parents of the cache directory this restore creates; removed again (if still
    // empty) unless a snapshot is restored.
    let mut created_parents: Option<fs::CreatedDirs> = None;
    let result =
        candidates::try_candidates(request, report, &cache_dir, &prefixes, &mut created_parents);
    if let Some(created) = created_parents {
        if report.restored {
            created.keep();
        } else {
            created.remove();
        }
    }
    result
}

/// The origin record's file name under `<cache root>/.local/`.
pub const ORIGIN_FILE: &str = "snapshot-origin.json";

/// The manifest digest of the snapshot the cache at `cache_dir` was restored from, if its
/// origin record exists and verifies.
pub fn origin_parent(cache_dir: &Path) -> Option<crate::record::RecordDigest> {
    let bytes = fs::read(&cache_dir.join(layout::LOCAL_DIR).join(ORIGIN_FILE)).ok()?;
    let (_, origin): (_, Origin) = manifest::load(&bytes, &ORIGIN_SCHEMA, "origin").ok()?;
    Some(origin.manifest_digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods)]
    fn only_a_directory_of_its_own_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let cache = root.join("ws/.strata-l1");
        let none: &[(&str, PathBuf)] = &[];
        assert!(check_target(&cache, none).is_ok(), "a missing directory is fine");
        std::fs::create_dir_all(cache.join("actions-v1")).unwrap();
        for name in [".locks", ".local", ".updated", ".actions-v1.tmp-0123456789abcdef"] {
            std::fs::create_dir_all(cache.join(name)).unwrap();
        }
        assert!(check_target(&cache, none).is_ok());
        let cwd = [("the current directory", root.join("ws"))];
        let err = check_target(&root.join("ws"), &cwd).unwrap_err();
        assert!(err.is_refused() && err.to_string().contains("it is the current"), "{err}");
        let err = check_target(&root, &cwd).unwrap_err();
        assert!(err.to_string().contains("it contains the current directory"), "{err}");
        std::fs::create_dir_all(cache.join(".git")).unwrap();
        let err = check_target(&cache, none).unwrap_err();
        assert!(err.to_string().contains("\".git\""), "{err}");
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).unwrap();
        let err = check_target(&root.join("dangling"), none).unwrap_err();
        assert!(err.to_string().contains("dangling"), "{err}");
        std::fs::write(root.join("file"), b"").unwrap();
        let err = check_target(&root.join("file"), none).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }

    #[test]
    fn a_failed_delete_of_the_old_tree_names_the_old_tree() {
        let e = fs::Error::io("remove", "/x/.c.tmp-0", std::io::Error::other("busy"));
        let note = old_tree_note(Path::new("/x/.c.tmp-0"), &e);
        assert!(note.contains("previous cache tree") && !note.contains("staging"), "{note}");
    }
}
