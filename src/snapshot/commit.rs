//! The commit protocol of a save: an object of its own, a sidecar that binds it, and the
//! truth about what happened when the store's answers are lost (`docs/snapshots.md` "Save",
//! `docs/transport.md` "No overwrite, and its race").
//!
//! # Names
//! A save uploads its snapshot object under a name no other save uses,
//! `~<16 hex>-<32 hex>` ([`unique_object_name`]: a digest of the key, then a hash of the
//! object's SHA-256, the process id, the time and random bits; short, so that stores which
//! map names to files accept it whatever the key's length), then the sidecar `<key>.json`
//! (version 3), which names that object and records its size and digest. Only the sidecar is contended. So however
//! two saves of one key interleave — even on a store whose `If-None-Match: *` is a check
//! followed by a separate write (s3s-fs, older MinIO and OBS) — every sidecar a reader can
//! see names a complete object written by the same save: no interleaving leaves a key
//! whose sidecar and object disagree.
//!
//! # Commit ([`publish`])
//! 1. upload the object with put-if-absent. On an error the object is deleted again
//!    (best effort; its name is ours alone, so this never touches another save's data);
//! 2. upload the sidecar with put-if-absent, then **read it back** and compare the bytes:
//!    * ours: committed, whatever the upload call reported (an error whose answer was
//!      lost included);
//!    * another save's: that save won the key; ours is withdrawn (our object deleted) and
//!      the save reports `already_exists`. On a store without atomic conditional writes
//!      this also catches the case where both uploads "succeeded" and theirs landed last;
//!    * none, after an upload error: the object is deleted and the error reported;
//!    * unreadable (the store is failing): nothing more is deleted, see below.
//!
//! # Pending records
//! Before the object is uploaded, the sealed sidecar is written to
//! `<cache dir>/.local/pending-sidecars/<sha256 of store and key>-<32 hex>.json` (the hex
//! from the object's name, so each save has its own) and locked
//! (`flock`) for as long as the save runs. It is removed as soon as the outcome is known,
//! and kept only when the save could not tell or could not clean up (the process was
//! killed; the object could not be deleted; the sidecar could not be read back): then the
//! error says so and names the record. Every later save from the same cache directory
//! to the same store first resolves the records no live save holds ([`resolve_pending`]):
//! if the store's sidecar is the recorded one the earlier save did commit (a note says
//! so); otherwise the recorded object is deleted. Either way the record goes. Records for
//! other stores are left to their own saves and deleted after [`PENDING_EXPIRY`].
//!
//! # Limitations
//! * On a store without atomic conditional writes, two saves of one key can both read
//!   their own sidecar back (the second write lands after the first save's check): both
//!   report `saved`, the store keeps the one that landed last, and the other's object stays
//!   behind, invisible (a bucket lifecycle rule collects it). A reader never sees a
//!   mismatched pair.
//! * A request that the store executes long after the client gave up on it (a delayed
//!   duplicate) can in principle land a sidecar whose object its save already deleted;
//!   restores then reject that key as corrupt (with its reason) and fall back to other
//!   snapshots.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::Error;
use super::manifest::{MAX_SIDECAR_BYTES, load_sidecar};
use crate::digest::{ContentDigest, Sha256Digest};
use crate::fs;
use crate::fs::temp::{self, Purpose};
use crate::progress::Phase;
use crate::transport::{ObjectKey, ObjectStore, PutOutcome};

/// The directory of pending records, relative to the cache directory.
pub const PENDING_DIR: &str = ".local/pending-sidecars";

/// How long a pending record of another store (or an unreadable one) is kept.
pub const PENDING_EXPIRY: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Most pending records resolved by one save (each costs a few requests).
const MAX_RESOLVED: usize = 16;

/// A name for the snapshot object of `key` that no other save uses:
/// `~<16 hex of SHA-256(key)>-<32 hex>` ([`super::manifest::is_object_name_of`]), the last
/// part being the first 16 bytes of the SHA-256 of the object's digest, the process id,
/// the time in nanoseconds and 128 random bits.
pub(crate) fn unique_object_name(key: &str, object_digest: &ContentDigest) -> String {
    let nanos =
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = format!(
        "{}\n{}\n{nanos}\n{:016x}{:016x}",
        object_digest.to_hex(),
        std::process::id(),
        fastrand::u64(..),
        fastrand::u64(..)
    );
    let hex = Sha256Digest::of_bytes(seed.as_bytes()).to_hex();
    format!("{}{}", super::manifest::object_name_stem(key), hex.get(..32).unwrap_or(&hex))
}

/// The pending record file of the save of `key` to the store `store_id`
/// ([`ObjectStore::describe`]) that uploads `object`:
/// `<64 hex of SHA-256(store_id, key)>-<the object name's last 32 hex>.json`. Every save
/// has its own, so a record a save could not resolve is never overwritten by the next.
fn pending_name(store_id: &str, key: &str, object: &str) -> String {
    let unique = object.get(object.len().saturating_sub(32)..).unwrap_or(object);
    format!("{}-{unique}.json", store_key_digest(store_id, key))
}

fn store_key_digest(store_id: &str, key: &str) -> String {
    Sha256Digest::of_bytes(format!("{store_id}\n{key}").as_bytes()).to_hex()
}

/// A pending record held by the running save (see the module docs).
pub(crate) struct Pending {
    path: PathBuf,
    lock: fs::LockGuard,
}

impl Pending {
    /// Writes and locks the pending record of the save of `key` to `store_id` that uploads
    /// `object`, holding `sidecar`.
    ///
    /// # Errors
    /// [`Error::Local`] if `.local/pending-sidecars` or the record cannot be written.
    pub(crate) fn record(
        cache_dir: &Path,
        store_id: &str,
        key: &str,
        object: &ObjectKey,
        sidecar: &[u8],
    ) -> Result<Self, Error> {
        let dir = fs::create_dir_all_within(cache_dir, Path::new(PENDING_DIR), 0o755)?;
        let path = dir.join(pending_name(store_id, key, object.as_str()));
        let lock = fs::write_atomic_locked(&path, sidecar, 0o600)?;
        Ok(Self { path, lock })
    }

    /// The save's outcome is known: the record is deleted.
    pub(crate) fn forget(self) {
        if let Err(e) = fs::remove_file(&self.path) {
            tracing::warn!("{e}");
        }
        drop(self.lock);
    }

    /// The record must outlive this save; returns its path (the lock is released).
    pub(crate) fn keep(self) -> PathBuf {
        drop(self.lock);
        self.path
    }
}

/// How a [`publish`] ended without an error.
pub(crate) enum Published {
    /// The sidecar in the store is this save's: the snapshot is committed.
    Committed {
        /// Transport retries of both uploads.
        retries: u32,
        /// Something the user should know (an error the read-back overruled).
        note: Option<String>,
    },
    /// Another save's sidecar holds the key; this save's object was withdrawn.
    Lost {
        /// What happened, for the report.
        note: String,
    },
}

/// Reads the sidecar `name` back: its bytes, or `None` if it does not exist.
fn read_back(
    store: &dyn ObjectStore,
    cache_dir: &Path,
    name: &ObjectKey,
) -> Result<Option<Vec<u8>>, Error> {
    let temp = temp::temp_file_beside(cache_dir, Purpose::Sidecar)?;
    match store.get_to_file(name, &temp) {
        Ok((meta, _)) if meta.size_bytes > MAX_SIDECAR_BYTES => Ok(Some(Vec::new())),
        Ok(_) => Ok(Some(fs::read(&temp)?)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(Error::transport("read back", name.as_str(), e)),
    }
}

/// Deletes this save's `object` after it lost the key or failed; the pending record goes
/// if the delete worked and is kept (its path returned) if not.
/// A store without deletion (an HTTP cache server) keeps the object: named by no
/// sidecar, it is invisible to restores; the record goes.
fn withdraw(store: &dyn ObjectStore, object: &ObjectKey, pending: Pending) -> Option<PathBuf> {
    let Some(deleting) = store.deleting() else {
        tracing::debug!("{object} stays in {}, which cannot delete objects", store.describe());
        pending.forget();
        return None;
    };
    match deleting.delete(object) {
        Ok(()) => {
            pending.forget();
            None
        }
        Err(e) => {
            // Every caller reports the kept record (an error or a note): no log line of
            // its own, so the failure is told once.
            tracing::debug!("could not delete the uncommitted snapshot object {object}: {e}");
            Some(pending.keep())
        }
    }
}

/// What to upload and where (see the module docs).
pub(crate) struct Upload<'a> {
    /// The store.
    pub store: &'a dyn ObjectStore,
    /// The cache directory (temp files go beside it).
    pub cache_dir: &'a Path,
    /// The snapshot key.
    pub key: &'a crate::snapshot::SnapshotKey,
    /// This save's object name ([`unique_object_name`]).
    pub object: &'a ObjectKey,
    /// The packed snapshot.
    pub packed: &'a Path,
    /// `<key>.json`.
    pub sidecar_key: &'a ObjectKey,
    /// The sealed sidecar's bytes, as in the pending record.
    pub sidecar: &'a [u8],
    /// Told of the object's bytes as they are uploaded (phase `upload`).
    pub progress: &'a dyn crate::progress::Progress,
}

/// Uploads the object and commits it with the sidecar (module docs, "Commit").
///
/// # Errors
/// [`Error::Transport`] when the save failed and left nothing behind;
/// [`Error::Uncommitted`] when it failed and its object may remain (the pending record is
/// kept and named).
pub(crate) fn publish(upload: &Upload<'_>, pending: Pending) -> Result<Published, Error> {
    let Upload { store, key, object, packed, progress, .. } = *upload;
    let size = fs::metadata(packed).map(|m| m.len()).unwrap_or(0);
    let phase = Phase::begin(progress, "upload", size);
    let put = store.put_file_if_absent_observed(object, packed, progress);
    drop(phase);
    let retries = match put {
        Ok((PutOutcome::Created, stats)) => stats.retries,
        Ok((PutOutcome::AlreadyExists, _)) => {
            // The name is this save's alone: someone else's bytes are there. Leave them.
            pending.forget();
            return Err(Error::corrupt(
                key.as_str(),
                format!(
                    "the store already holds an object named {object} that this save did not \
                     write; nothing was published (save again)"
                ),
            ));
        }
        Err(e) => {
            let error = Error::transport("upload", object.as_str(), e);
            return match withdraw(store, object, pending) {
                None => Err(error),
                Some(path) => Err(upload.uncommitted("the upload failed", path, error)),
            };
        }
    };
    commit(upload, pending, retries)
}

/// Uploads the sidecar, the commit point; whatever the upload reported, the sidecar read
/// back from the store decides. `retries`: those of the object's upload.
fn commit(upload: &Upload<'_>, pending: Pending, retries: u32) -> Result<Published, Error> {
    let Upload { store, cache_dir, key, object, sidecar_key, .. } = *upload;
    let outcome = store.put_file_if_absent(sidecar_key, &pending.path);
    let stored = read_back(store, cache_dir, sidecar_key);
    match outcome {
        Ok((PutOutcome::Created, stats)) => {
            let retries = retries + stats.retries;
            match stored {
                Ok(stored) if upload.is_ours(&stored) => {
                    pending.forget();
                    Ok(Published::Committed { retries, note: None })
                }
                Ok(Some(_)) => upload.lost(
                    pending,
                    "both conditional writes were accepted: this store does not make them \
                     atomic, and the other sidecar landed last",
                ),
                Ok(None) => {
                    let withdrawn = match withdraw(store, object, pending) {
                        None => "this save's object was withdrawn".to_owned(),
                        Some(path) => format!(
                            "this save's object {object} could not be deleted; the next save \
                             from this cache directory deletes it (recorded in {})",
                            path.display()
                        ),
                    };
                    Err(Error::corrupt(
                        key.as_str(),
                        format!(
                            "its sidecar {sidecar_key} was uploaded but is gone when read back \
                             (deleted by someone else?); {withdrawn}"
                        ),
                    ))
                }
                Err(e) => {
                    // The conditional write said Created, which is final on a store with
                    // atomic conditional writes.
                    pending.forget();
                    Ok(Published::Committed {
                        retries,
                        note: Some(format!(
                            "the sidecar {sidecar_key} was uploaded, but reading it back to \
                             confirm failed: {}",
                            e.one_line()
                        )),
                    })
                }
            }
        }
        Ok((PutOutcome::AlreadyExists, _)) => match stored {
            Ok(stored) if upload.is_ours(&stored) => {
                pending.forget();
                Ok(Published::Committed { retries, note: None })
            }
            _ => upload.lost(pending, "its sidecar was already there"),
        },
        Err(e) => {
            let retries = retries + e.retries();
            let error = Error::transport("upload", sidecar_key.as_str(), e);
            sidecar_failed(upload, pending, retries, error, stored)
        }
    }
}

/// The sidecar upload reported `error`: the sidecar read back (`stored`) still decides.
fn sidecar_failed(
    upload: &Upload<'_>,
    pending: Pending,
    retries: u32,
    error: Error,
    stored: Result<Option<Vec<u8>>, Error>,
) -> Result<Published, Error> {
    match stored {
        Ok(stored) if upload.is_ours(&stored) => {
            pending.forget();
            Ok(Published::Committed {
                retries,
                note: Some(format!(
                    "the sidecar upload reported an error ({}), but the sidecar in \
                     the store is this save's: the snapshot is committed",
                    error.one_line()
                )),
            })
        }
        Ok(Some(_)) => upload.lost(pending, "its sidecar arrived while ours failed"),
        Ok(None) => match withdraw(upload.store, upload.object, pending) {
            None => Err(error),
            Some(path) => Err(upload.uncommitted("the sidecar upload failed", path, error)),
        },
        Err(_) => Err(upload.uncommitted(
            "the sidecar upload failed and the store cannot tell whether it arrived",
            pending.keep(),
            error,
        )),
    }
}

impl Upload<'_> {
    /// True if the sidecar read back is this save's.
    fn is_ours(&self, stored: &Option<Vec<u8>>) -> bool {
        stored.as_deref() == Some(self.sidecar)
    }

    /// A failed save whose object may remain in the store, recorded in `pending`.
    fn uncommitted(&self, what: &str, pending: PathBuf, source: Error) -> Error {
        Error::Uncommitted {
            key: self.key.as_str().to_owned(),
            what: what.to_owned(),
            object: self.object.as_str().to_owned(),
            pending,
            source: Box::new(source),
        }
    }

    /// Another save committed the key first: this save's object is withdrawn.
    fn lost(&self, pending: Pending, why: &str) -> Result<Published, Error> {
        let (key, object) = (self.key, self.object);
        let withdrawn = if self.store.deleting().is_some() {
            "was withdrawn"
        } else {
            "stays in the store, which cannot delete objects (named by no sidecar, no restore \
             sees it)"
        };
        let mut note = format!(
            "another save published {key} first ({why}); its snapshot stands and this save's \
             object {object} {withdrawn}"
        );
        if let Some(path) = withdraw(self.store, object, pending) {
            note.push_str(&format!(
                ", except that deleting it failed: the next save from this cache directory \
                 deletes it (recorded in {})",
                path.display()
            ));
        }
        Ok(Published::Lost { note })
    }
}

/// Resolves the pending records that earlier saves from `cache_dir` to `store` left and no
/// running save holds (module docs, "Pending records"); deletes records of other stores
/// and unreadable ones older than [`PENDING_EXPIRY`] as of `now`. Returns notes for the
/// report. Never fails: this is housekeeping, and a store failure stops it until the next
/// save.
pub(crate) fn resolve_pending(
    store: &dyn ObjectStore,
    cache_dir: &Path,
    now: SystemTime,
) -> Vec<String> {
    let dir = cache_dir.join(PENDING_DIR);
    let Ok(paths) = fs::read_dir(&dir) else { return Vec::new() };
    let store_id = store.describe();
    let mut notes = Vec::new();
    let mut resolved = 0;
    for path in paths {
        if resolved >= MAX_RESOLVED {
            break;
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        let expired = || {
            fs::symlink_metadata_opt(&path)
                .ok()
                .flatten()
                .and_then(|m| m.modified().ok())
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > PENDING_EXPIRY)
        };
        // Held by a running save (or a temp file being written): not ours to touch.
        let Ok(Some(lock)) = fs::try_lock_existing(&path) else { continue };
        let record = fs::read(&path).ok().and_then(|bytes| {
            let (_, sidecar) = load_sidecar(&bytes).ok()?;
            Some((bytes, sidecar))
        });
        let Some((bytes, sidecar)) = record.filter(|(_, s)| s.object.is_some()) else {
            if expired() {
                let _ = fs::remove_file(&path);
            }
            continue;
        };
        if name != pending_name(&store_id, &sidecar.key, sidecar.object_name()) {
            if expired() {
                let _ = fs::remove_file(&path);
            }
            continue;
        }
        resolved += 1;
        let key = sidecar.key.as_str();
        let (Ok(sidecar_key), Ok(object)) =
            (ObjectKey::new(format!("{key}.json")), ObjectKey::new(sidecar.object_name()))
        else {
            let _ = fs::remove_file(&path);
            continue;
        };
        match read_back(store, cache_dir, &sidecar_key) {
            Ok(Some(stored)) if stored == bytes => {
                notes.push(format!(
                    "an earlier save of {key} from this cache directory reported a failure, but \
                     its snapshot had been committed"
                ));
            }
            // Only what happened is reported: an object the earlier save never uploaded
            // (it was killed first) is not "deleted".
            Ok(_) => match store.head(&object) {
                Ok(None) => notes.push(format!(
                    "an earlier save of {key} from this cache directory did not finish \
                     (killed?) before its snapshot object {object} reached the store; nothing \
                     of it was left there"
                )),
                Ok(Some(_)) => match store.deleting().map(|d| d.delete(&object)) {
                    None => notes.push(format!(
                        "{object}, the uncommitted snapshot object of an earlier failed save of \
                         {key} from this cache directory, stays in the store, which cannot \
                         delete objects (named by no sidecar, no restore sees it)"
                    )),
                    Some(Ok(())) => notes.push(format!(
                        "deleted {object}, the uncommitted snapshot object of an earlier failed \
                         save of {key} from this cache directory"
                    )),
                    Some(Err(e)) => {
                        tracing::warn!(
                            "could not delete the uncommitted snapshot object {object}: {e}"
                        );
                        break;
                    }
                },
                Err(e) => {
                    tracing::warn!(
                        "could not check the uncommitted snapshot object {object}: {e}; the \
                         next save tries again"
                    );
                    break;
                }
            },
            Err(e) => {
                tracing::warn!(
                    "could not check the earlier save of {key} recorded in {}: {}",
                    path.display(),
                    e.one_line()
                );
                break;
            }
        }
        if let Err(e) = fs::remove_file(&path) {
            tracing::warn!("{e}");
        }
        drop(lock);
    }
    notes
}

/// `name` as an object key; an invalid one is [`Error::InvalidInput`] naming `--key`.
pub(crate) fn object_key(name: &str) -> Result<ObjectKey, Error> {
    ObjectKey::new(name).map_err(|e| Error::InvalidInput {
        what: "--key",
        reason: match e {
            crate::transport::Error::InvalidKey { reason, .. } => reason.to_owned(),
            other => other.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::manifest::is_object_name_of;

    #[test]
    fn object_names_are_unique_and_of_their_key() {
        let digest = ContentDigest::from(Sha256Digest::of_bytes(b"object"));
        let a = unique_object_name("k-1", &digest);
        let b = unique_object_name("k-1", &digest);
        assert_ne!(a, b);
        assert!(is_object_name_of("k-1", &a), "{a}");
        assert!(a.starts_with('~') && a.len() == 50, "{a}");
        assert!(!is_object_name_of("k-", &a), "{a}");
        assert!(!is_object_name_of("k-1", "k-1"));
        let stem = crate::snapshot::manifest::object_name_stem("k-1");
        assert!(!is_object_name_of("k-1", &format!("{stem}0123")));
        assert!(!is_object_name_of("k-1", &format!("{stem}{}", "A".repeat(32))));
        assert!(ObjectKey::new(a).is_ok());
    }

    #[test]
    fn pending_names_bind_store_and_key() {
        let object = unique_object_name("k", &ContentDigest::from(Sha256Digest::of_bytes(b"")));
        let a = pending_name("s3://b/p", "k", &object);
        assert_ne!(a, pending_name("s3://b/q", "k", &object));
        assert_ne!(a, pending_name("s3://b/p", "k2", &object));
        let other = unique_object_name("k", &ContentDigest::from(Sha256Digest::of_bytes(b"")));
        assert_ne!(a, pending_name("s3://b/p", "k", &other));
        assert!(a.ends_with(".json") && a.len() == 64 + 1 + 32 + 5, "{a}");
        assert!(a.ends_with(&format!("{}.json", &object[object.len() - 32..])), "{a}");
    }

    #[test]
    #[allow(clippy::disallowed_methods)]
    fn pending_records_are_resolved_once_their_save_is_gone() {
        use crate::snapshot::manifest::{SIDECAR_SCHEMA, seal};
        use crate::transport::FsStore;
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::new(dir.path().join("store"));
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let src = dir.path().join("object");
        std::fs::write(&src, b"object bytes").unwrap();
        let record = |key: &str| {
            let name = unique_object_name(
                key,
                &ContentDigest::from(Sha256Digest::of_bytes(b"object bytes")),
            );
            let object = ObjectKey::new(name.clone()).unwrap();
            store.put_file_if_absent(&object, &src).unwrap();
            let sidecar = crate::snapshot::manifest::Sidecar {
                key: key.to_owned(),
                object: Some(name),
                format: crate::snapshot::Compression::Zstd,
                kind: crate::snapshot::manifest::SnapshotKind::Full,
                object_size_bytes: 12,
                object_digest: ContentDigest::from(Sha256Digest::of_bytes(b"object bytes")),
                manifest_digest: crate::record::RecordDigest::from_stored(format!(
                    "sha256:{}",
                    "0".repeat(64)
                )),
                entry_count: 1,
                file_count: 0,
                file_bytes: 0,
                created_at: "2025-01-01T00:00:00Z".to_owned(),
                producer: Default::default(),
                parents: vec![],
                signature: None,
            };
            let bytes = seal(&SIDECAR_SCHEMA, "sidecar", &sidecar).unwrap().to_bytes();
            let pending = Pending::record(&cache, &store.describe(), key, &object, &bytes).unwrap();
            (object, bytes, pending)
        };
        let now = SystemTime::now();
        // A child that another test of this process forks inherits the record's descriptor
        // (and so its flock) until it execs: a released record may look held for a moment.
        let settled = |store: &FsStore, at: SystemTime, path: &Path| {
            for _ in 0..100 {
                let notes = resolve_pending(store, &cache, at);
                if !notes.is_empty() || !path.exists() {
                    return notes;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Vec::new()
        };
        // A running save holds its record: nothing is touched.
        let (object, _, pending) = record("k");
        assert!(resolve_pending(&store, &cache, now).is_empty());
        assert!(store.head(&object).unwrap().is_some());
        // Its save is gone (killed, or it kept the record): the object is deleted.
        let path = pending.keep();
        let notes = settled(&store, now, &path);
        assert!(notes.len() == 1 && notes[0].contains(&format!("deleted {object}")), "{notes:?}");
        assert!(store.head(&object).unwrap().is_none());
        assert!(!path.exists());
        // A record whose sidecar did arrive: the earlier save committed; the object stays.
        let (object, bytes, pending) = record("j");
        let sidecar_src = dir.path().join("sidecar");
        std::fs::write(&sidecar_src, &bytes).unwrap();
        store.put_file_if_absent(&ObjectKey::new("j.json").unwrap(), &sidecar_src).unwrap();
        let path = pending.keep();
        let notes = settled(&store, now, &path);
        assert!(notes.len() == 1 && notes[0].contains("had been committed"), "{notes:?}");
        assert!(store.head(&object).unwrap().is_some() && !path.exists());
        // A record for another store is left alone until it expires.
        let other = FsStore::new(dir.path().join("other"));
        let (object, _, pending) = record("i");
        let path = pending.keep();
        assert!(resolve_pending(&other, &cache, now).is_empty());
        assert!(path.exists() && store.head(&object).unwrap().is_some());
        let later = now + PENDING_EXPIRY + Duration::from_secs(60);
        assert!(settled(&other, later, &path).is_empty());
        assert!(!path.exists(), "expired");
    }
}
