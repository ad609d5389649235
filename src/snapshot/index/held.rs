//! The save leases a cache directory's saves hold, recorded beside the cache so that the
//! next save can release the lease of one that was killed (docs/snapshots.md "Leases").
//!
//! While an index save holds its lease ([`super::lease`]) it keeps a record
//! `<cache dir>/.local/save-leases/<32 hex>.json` (JSON: the store, as
//! [`ObjectStore::describe`] prints it, and the lease's object name), locked with `flock`
//! for as long as the lease is held; a renewal records the new lease before it forgets the
//! old one. A record whose lock is free belongs to a save that is gone (killed, or one
//! whose release failed): the next save from the same cache directory to the same store
//! deletes the lease it names, if the store still holds it, and then the record
//! ([`resolve`]). Records of other stores are left to their saves and deleted after
//! 7 days (as pending records).
//!
//! # Limitations
//! A save killed between writing its lease and its record leaves a lease only the time to
//! live ends ([`super::lease::SAVE_LEASE_TTL`]).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::fs;
use crate::transport::{ObjectKey, ObjectStore};

/// The records' directory under the cache directory.
pub const HELD_DIR: &str = ".local/save-leases";

/// What a record holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Held {
    /// The store ([`ObjectStore::describe`]).
    store: String,
    /// The lease's object name (`~leases/save-<32 hex>.json`).
    lease: String,
}

/// A record of a lease this process holds; [`HeldRecord::forget`] it once released.
#[must_use = "a record is kept (as a killed save's) unless forgotten"]
#[derive(Debug)]
pub struct HeldRecord {
    path: PathBuf,
    _lock: fs::LockGuard,
}

impl HeldRecord {
    /// Records that this process holds `lease` in `store` for a save of `cache_dir`.
    /// `None` (with a debug log) when the record cannot be written: the lease then only
    /// expires.
    pub fn write(cache_dir: &Path, store: &dyn ObjectStore, lease: &str) -> Option<HeldRecord> {
        let held = Held { store: store.describe(), lease: lease.to_owned() };
        let bytes = serde_json::to_vec(&held).ok()?;
        let written =
            fs::create_dir_all_within(cache_dir, Path::new(HELD_DIR), 0o755).and_then(|dir| {
                let name = format!("{:016x}{:016x}.json", fastrand::u64(..), fastrand::u64(..));
                let path = dir.join(name);
                fs::write_atomic_locked(&path, &bytes, 0o600).map(|lock| (path, lock))
            });
        match written {
            Ok((path, lock)) => Some(HeldRecord { path, _lock: lock }),
            Err(e) => {
                tracing::debug!("cannot record the save lease {lease}: {e}");
                None
            }
        }
    }

    /// The lease is released (or recorded again under its new name): the record goes.
    pub fn forget(self) {
        if let Err(e) = fs::remove_file(&self.path) {
            tracing::debug!("{e}");
        }
    }
}

/// Releases the leases that earlier saves from `cache_dir` to `store` recorded and no
/// running save holds (see the module docs); returns a note for each lease deleted.
/// Never fails: a store failure leaves the rest for the next save.
pub fn resolve(store: &dyn ObjectStore, cache_dir: &Path, now: SystemTime) -> Vec<String> {
    // A store that cannot delete holds no lease (`lease::save_guard` takes none there).
    let Some(deleting) = store.deleting() else { return Vec::new() };
    let dir = cache_dir.join(HELD_DIR);
    let Ok(paths) = fs::read_dir(&dir) else { return Vec::new() };
    let store_id = store.describe();
    let mut notes = Vec::new();
    for path in paths {
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        // Held by a running save: not ours to touch.
        let Ok(Some(lock)) = fs::try_lock_existing(&path) else { continue };
        let held = fs::read(&path).ok().and_then(|b| serde_json::from_slice::<Held>(&b).ok());
        let Some(held) = held.filter(|h| h.store == store_id) else {
            let old = fs::symlink_metadata_opt(&path)
                .ok()
                .flatten()
                .and_then(|m| m.modified().ok())
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > crate::snapshot::commit::PENDING_EXPIRY);
            if old {
                let _ = fs::remove_file(&path);
            }
            continue;
        };
        let Ok(lease) = ObjectKey::new(held.lease.as_str()) else {
            let _ = fs::remove_file(&path);
            continue;
        };
        match store.head(&lease) {
            Ok(None) => {}
            Ok(Some(_)) => match deleting.delete(&lease) {
                Ok(()) => notes.push(format!(
                    "deleted the lease {lease} of an earlier save from this cache directory \
                     that did not finish (killed?); a snapshot gc no longer waits for it"
                )),
                Err(e) => {
                    tracing::warn!(
                        "cannot delete the lease {lease} of an earlier save that did not finish \
                         ({e}); it expires by itself"
                    );
                    break;
                }
            },
            Err(e) => {
                tracing::debug!("cannot look up the lease {lease}: {e}");
                break;
            }
        }
        let _ = fs::remove_file(&path);
        drop(lock);
    }
    notes
}
