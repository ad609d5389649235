//! Leases: how a store garbage collection (`strata snapshot gc`) and index saves keep out
//! of each other's way (docs/snapshots.md "Garbage collection").
//!
//! A lease is a small object `~leases/<save|gc>-<32 hex>.json` ([`super::names::lease_name`])
//! holding a [`LeaseRecord`] (kind, creation time, host, process id, CI run id). Its age is
//! read from the store's listing (`Last-Modified`, the store's clock); a lease older than
//! its kind's time to live ([`SAVE_LEASE_TTL`], [`GC_LEASE_TTL`]) is *stale*: its holder
//! crashed. Stale leases are ignored, and a gc deletes them.
//!
//! # Protocol
//! * **gc** writes its lease, *then* lists the save leases (and other gc leases). If any
//!   live one exists, it deletes nothing at all, releases its lease and reports "busy"
//!   (or releases, sleeps and tries again, with `--wait`). Otherwise it runs while holding
//!   its lease, renewing it ([`Lease::renew_if_older`]) long before it turns stale, and
//!   releases it at the end.
//! * **A save** of an index snapshot calls [`save_guard`] before it decides which entry
//!   objects the store already holds: it writes its lease, *then* lists the gc leases. If a
//!   live one exists it keeps its own lease and polls every [`GuardPolicy::poll`] (2 s)
//!   for up to [`GuardPolicy::wait`] ([`GC_WAIT`], 10 min; `STRATA_GC_WAIT` seconds); then
//!   it releases its lease and skips (`SkipReason::StoreBusy`). It holds the lease until
//!   its sidecar is committed, and everything it learnt about the store *before* its lease
//!   was in place (the index it restored) must be confirmed against the store afterwards.
//!
//! **Why an overlapping gc and save always see each other:** the store is strongly
//! consistent for LIST after PUT (S3 since 2020, s3s-fs, a directory store). Each side
//! writes its own lease before it lists the other side's. Of the two writes one is
//! first; say the save's. Then the gc's listing, which follows the gc's write, which
//! follows the save's write, shows the save's lease: the gc backs off. If the gc's write is
//! first, the save's listing shows it and the save waits. Both cannot miss each other.
//! Saves have priority: a save keeps its lease while it waits, a gc releases its own, so
//! they never wait for each other at the same time.
//!
//! Saves without a lease (releases before leases, and the remote entry tier's uploads) are
//! covered by the gc's grace period instead: it never deletes an entry object or a ref
//! younger than `--grace`.
//!
//! # Limitations
//! * Ages compare the store's `Last-Modified` with this machine's clock; a skew of
//!   minutes against TTLs of 15 minutes and more only makes a lease look live (or stale)
//!   a little longer.
//! * A save running longer than [`SAVE_LEASE_TTL`] without renewing its lease is no longer
//!   protected.

use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::names::{LEASES_PREFIX, LeaseKind, lease_kind, lease_name};
use crate::record::Timestamp;
use crate::snapshot::{Error, Producer};
use crate::transport::{DeleteObjects, ListObjects, ObjectKey, ObjectMeta, ObjectStore};

/// Time to live of a save lease: 15 minutes; a save renews its lease every
/// [`SAVE_LEASE_RENEW`] while it runs ([`while_held`]), so a killed save blocks a gc for at
/// most this long (and not at all once the next save from its cache directory ran:
/// [`super::held`]).
pub const SAVE_LEASE_TTL: Duration = Duration::from_secs(15 * 60);
/// How old a save's lease may get before the save renews it: 5 minutes.
pub const SAVE_LEASE_RENEW: Duration = Duration::from_secs(5 * 60);
/// How often a save checks the age of its lease.
const SAVE_LEASE_CHECK: Duration = Duration::from_secs(15);
/// Time to live of a gc lease: 15 minutes; a gc renews its lease every
/// [`GC_LEASE_RENEW`], so a crashed gc blocks saves for at most this long.
pub const GC_LEASE_TTL: Duration = Duration::from_secs(15 * 60);
/// How old a gc's lease may get before the gc renews it: 5 minutes.
pub const GC_LEASE_RENEW: Duration = Duration::from_secs(5 * 60);
/// How long a save waits for a running gc by default: 10 minutes (`STRATA_GC_WAIT`).
pub const GC_WAIT: Duration = Duration::from_secs(10 * 60);
/// How often a waiting save or gc lists the leases again: 2 seconds.
pub const POLL: Duration = Duration::from_secs(2);
/// Largest lease record read, in bytes.
pub const MAX_LEASE_BYTES: u64 = 64 * 1024;

/// The time to live of leases of `kind` ([`SAVE_LEASE_TTL`] or [`GC_LEASE_TTL`]).
pub fn ttl(kind: LeaseKind) -> Duration {
    match kind {
        LeaseKind::Save => SAVE_LEASE_TTL,
        LeaseKind::Gc => GC_LEASE_TTL,
    }
}

/// What a lease object holds (plain JSON; informational: only the name and the store's
/// `Last-Modified` decide anything).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// `save` or `gc`.
    pub kind: String,
    /// When the lease was written, UTC RFC 3339.
    pub created_at: String,
    /// The holder's host name.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    /// `GITHUB_RUN_ID` of the holder, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// A lease held in a store: deleted by [`Lease::release`], or (best effort, with a
/// warning when that fails) when dropped.
#[must_use = "a Lease is released when dropped"]
pub struct Lease<'a> {
    store: &'a dyn ObjectStore,
    /// How the lease is deleted; `None` only for a lease not taken ([`Lease::unneeded`]).
    deleting: Option<&'a dyn DeleteObjects>,
    kind: LeaseKind,
    record: LeaseRecord,
    key: Option<ObjectKey>,
    written: Instant,
}

impl std::fmt::Debug for Lease<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({})", self.name())
    }
}

/// 32 random lowercase hex digits.
fn random_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// Uploads `bytes` under `key` (never overwriting; [`ObjectStore::put_bytes_if_absent`]).
///
/// # Errors
/// [`Error::Transport`] naming `key`.
pub(crate) fn put_small(
    store: &dyn ObjectStore,
    key: &ObjectKey,
    bytes: &[u8],
) -> Result<(), Error> {
    store
        .put_bytes_if_absent(key, bytes)
        .map_err(|e| Error::transport("upload", key.as_str(), e))?;
    Ok(())
}

impl<'a> Lease<'a> {
    /// Writes a new lease of `kind` for `holder` into `store`.
    ///
    /// # Errors
    /// [`Error::Transport`] naming the lease if the store refuses the write (an `s3://`
    /// store without writer credentials, a read-only bucket) or cannot delete objects (a
    /// lease must go again).
    pub fn acquire(
        store: &'a dyn ObjectStore,
        kind: LeaseKind,
        holder: &Producer,
    ) -> Result<Lease<'a>, Error> {
        let deleting = crate::transport::deleting(store, "a lease")
            .map_err(|e| Error::transport("take a lease in", store.describe(), e))?;
        let record = LeaseRecord {
            kind: kind.as_str().to_owned(),
            created_at: Timestamp::now().rfc3339_seconds(),
            host: rustix::system::uname().nodename().to_string_lossy().into_owned(),
            pid: std::process::id(),
            run_id: holder.run_id.clone(),
        };
        let mut lease = Lease {
            store,
            deleting: Some(deleting),
            kind,
            record,
            key: None,
            written: Instant::now(),
        };
        lease.key = Some(lease.write_new()?);
        Ok(lease)
    }

    /// A save lease that is not taken, for a store that can neither list nor delete (an
    /// HTTP cache server): no gc can run there ([`crate::snapshot::gc`] needs both), so
    /// nothing needs keeping out. Its name is empty; renewing and releasing it do nothing.
    pub fn unneeded(store: &'a dyn ObjectStore) -> Lease<'a> {
        let record = LeaseRecord {
            kind: LeaseKind::Save.as_str().to_owned(),
            created_at: String::new(),
            host: String::new(),
            pid: std::process::id(),
            run_id: None,
        };
        Lease {
            store,
            deleting: None,
            kind: LeaseKind::Save,
            record,
            key: None,
            written: Instant::now(),
        }
    }

    /// Writes a new lease object (new name, current time) and returns its key.
    fn write_new(&mut self) -> Result<ObjectKey, Error> {
        let name = lease_name(self.kind, &random_id());
        let key =
            ObjectKey::new(name.clone()).map_err(|e| Error::transport("name", name.as_str(), e))?;
        self.record.created_at = Timestamp::now().rfc3339_seconds();
        let bytes = serde_json::to_vec(&self.record).unwrap_or_default();
        put_small(self.store, &key, &bytes)?;
        self.written = Instant::now();
        Ok(key)
    }

    /// The lease's object name, `~leases/<kind>-<32 hex>.json`.
    pub fn name(&self) -> &str {
        self.key.as_ref().map_or("", ObjectKey::as_str)
    }

    /// What holds the lease.
    pub fn kind(&self) -> LeaseKind {
        self.kind
    }

    /// Replaces the lease by a fresh one: writes a new lease object first, then deletes the
    /// old one, so that a live lease is always visible.
    ///
    /// # Errors
    /// [`Error::Transport`] if the new lease cannot be written (the old one stays) or the
    /// old one cannot be deleted (it turns stale).
    pub fn renew(&mut self) -> Result<(), Error> {
        let Some(deleting) = self.deleting else { return Ok(()) };
        let fresh = self.write_new()?;
        match self.key.replace(fresh) {
            Some(old) => {
                deleting.delete(&old).map_err(|e| Error::transport("delete", old.as_str(), e))
            }
            None => Ok(()),
        }
    }

    /// [`Lease::renew`] if the lease was written at least `age` ago; true if it renewed.
    ///
    /// # Errors
    /// [`Error::LeaseExpired`] if the lease was written longer ago than its kind's time to
    /// live ([`ttl`]): others may have ignored it, so the holder must stop. Else as
    /// [`Lease::renew`].
    pub fn renew_if_older(&mut self, age: Duration) -> Result<bool, Error> {
        if self.key.is_none() {
            return Ok(false);
        }
        let elapsed = self.written.elapsed();
        if elapsed >= ttl(self.kind) {
            return Err(Error::LeaseExpired {
                lease: self.name().to_owned(),
                ttl_seconds: ttl(self.kind).as_secs(),
            });
        }
        if elapsed < age {
            return Ok(false);
        }
        self.renew()?;
        Ok(true)
    }

    /// Deletes the lease.
    ///
    /// # Errors
    /// [`Error::Transport`] naming the lease; it then turns stale after its time to live.
    pub fn release(mut self) -> Result<(), Error> {
        match (self.key.take(), self.deleting) {
            (Some(key), Some(deleting)) => {
                deleting.delete(&key).map_err(|e| Error::transport("delete", key.as_str(), e))
            }
            _ => Ok(()),
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let (Some(key), Some(deleting)) = (self.key.take(), self.deleting)
            && let Err(e) = deleting.delete(&key)
        {
            tracing::warn!(
                "could not delete the lease {key} in {}: {e}; it turns stale after {} s and \
                 the next gc deletes it",
                self.store.describe(),
                ttl(self.kind).as_secs()
            );
        }
    }
}

/// Runs `work` while `lease` (a save's) is held for a save of `cache_dir`: a thread renews
/// it whenever it is [`SAVE_LEASE_RENEW`] old, and the lease is recorded under the cache
/// directory ([`super::held`]) so that the next save can release it if this process is
/// killed. Returns `work`'s result and the lease, to release; the record is gone then.
pub fn while_held<'a, T>(
    lease: Lease<'a>,
    cache_dir: &std::path::Path,
    work: impl FnOnce() -> T,
) -> (T, Lease<'a>) {
    if lease.key.is_none() {
        // Not taken (`Lease::unneeded`): nothing to renew or record.
        return (work(), lease);
    }
    let record = super::held::HeldRecord::write(cache_dir, lease.store, lease.name());
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let renewer = scope.spawn(move || {
            let (mut lease, mut record) = (lease, record);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(SAVE_LEASE_CHECK)
            {
                match lease.renew_if_older(SAVE_LEASE_RENEW) {
                    Ok(false) => {}
                    Ok(true) => {
                        let renewed =
                            super::held::HeldRecord::write(cache_dir, lease.store, lease.name());
                        if let Some(old) = std::mem::replace(&mut record, renewed) {
                            old.forget();
                        }
                    }
                    Err(e) => {
                        tracing::warn!(
                            "cannot renew the save lease {} ({}); a snapshot gc may start before this save ends",
                            lease.name(),
                            e.one_line()
                        );
                        let _ = stopped.recv();
                        break;
                    }
                }
            }
            if let Some(record) = record {
                record.forget();
            }
            lease
        });
        let result = work();
        drop(stop);
        let lease = match renewer.join() {
            Ok(lease) => lease,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (result, lease)
    })
}

/// The age of `meta` at `now` (zero for an object dated in the future).
pub fn age_of(meta: &ObjectMeta, now: SystemTime) -> Duration {
    now.duration_since(meta.last_modified).unwrap_or_default()
}

/// The leases of `kind` among `listing` (a listing of [`LEASES_PREFIX`] or more) younger
/// than `ttl` at `now`: their names and ages.
pub fn live_in(
    listing: &[ObjectMeta],
    kind: LeaseKind,
    ttl: Duration,
    now: SystemTime,
) -> Vec<(String, Duration)> {
    listing
        .iter()
        .filter(|m| lease_kind(m.key.as_str()) == Some(kind))
        .map(|m| (m.key.as_str().to_owned(), age_of(m, now)))
        .filter(|(_, age)| *age < ttl)
        .collect()
}

/// The live leases of `kind` in `store` (younger than `ttl` at `now`), with their ages.
///
/// # Errors
/// [`Error::Transport`] if `~leases/` cannot be listed.
pub fn active(
    store: &dyn ListObjects,
    kind: LeaseKind,
    ttl: Duration,
    now: SystemTime,
) -> Result<Vec<(String, Duration)>, Error> {
    let listing =
        store.list(LEASES_PREFIX).map_err(|e| Error::transport("list", LEASES_PREFIX, e))?;
    Ok(live_in(&listing, kind, ttl, now))
}

/// How [`save_guard`] waits for a running gc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardPolicy {
    /// Longest wait before the save skips; by default [`GC_WAIT`] (10 min).
    pub wait: Duration,
    /// Interval between listings; by default [`POLL`] (2 s).
    pub poll: Duration,
    /// Age beyond which a gc lease is stale; by default [`GC_LEASE_TTL`].
    pub gc_ttl: Duration,
}

impl Default for GuardPolicy {
    fn default() -> Self {
        Self { wait: GC_WAIT, poll: POLL, gc_ttl: GC_LEASE_TTL }
    }
}

impl GuardPolicy {
    /// The default policy with `wait` from `STRATA_GC_WAIT` (whole seconds, `0` = do not
    /// wait), read through `env`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `STRATA_GC_WAIT` if it is not a whole number.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let mut policy = Self::default();
        if let Some(text) = env("STRATA_GC_WAIT").filter(|v| !v.trim().is_empty()) {
            let seconds: u64 = text.trim().parse().map_err(|_| Error::InvalidInput {
                what: "STRATA_GC_WAIT",
                reason: format!("{text:?} is not a whole number of seconds (e.g. 600)"),
            })?;
            policy.wait = Duration::from_secs(seconds);
        }
        Ok(policy)
    }
}

/// The lease an index save holds (see the module docs, "Protocol"): writes a save lease,
/// then waits while a live gc lease exists. `Some(lease)`: go ahead, and release the lease
/// once the sidecar is committed. `None`: a gc kept running for `policy.wait`; the save's
/// lease is released and the save must skip (`SkipReason::StoreBusy`). On a store that
/// cannot list or delete, where no gc can run, the lease is [`Lease::unneeded`] and
/// nothing is written.
///
/// # Errors
/// [`Error::Transport`] if the lease cannot be written or `~leases/` cannot be listed (the
/// lease, if written, is released).
pub fn save_guard<'a>(
    store: &'a dyn ObjectStore,
    holder: &Producer,
    policy: &GuardPolicy,
) -> Result<Option<Lease<'a>>, Error> {
    let (Some(listing), Some(_)) = (store.listing(), store.deleting()) else {
        return Ok(Some(Lease::unneeded(store)));
    };
    let lease = Lease::acquire(store, LeaseKind::Save, holder)?;
    let started = Instant::now();
    loop {
        let running = active(listing, LeaseKind::Gc, policy.gc_ttl, SystemTime::now())?;
        let Some((name, _)) = running.first() else { return Ok(Some(lease)) };
        let waited = started.elapsed();
        if waited >= policy.wait {
            tracing::warn!(
                "a store garbage collection ({name}) is still running after {} s; skipping \
                 the save (raise STRATA_GC_WAIT to wait longer)",
                waited.as_secs()
            );
            lease.release()?;
            return Ok(None);
        }
        tracing::info!("waiting for the store garbage collection {name} to finish");
        std::thread::sleep(policy.poll.min(policy.wait.saturating_sub(waited)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::FsStore;

    fn names(store: &dyn ObjectStore) -> Vec<String> {
        store
            .listing()
            .unwrap()
            .list(LEASES_PREFIX)
            .unwrap()
            .into_iter()
            .map(|m| m.key.as_str().to_owned())
            .collect()
    }

    #[test]
    fn leases_are_written_renewed_released_and_expire() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::new(dir.path().to_path_buf());
        let holder = Producer { run_id: Some("77".into()), ..Producer::default() };
        let mut lease = Lease::acquire(&store, LeaseKind::Gc, &holder).unwrap();
        let first = lease.name().to_owned();
        assert_eq!(lease_kind(&first), Some(LeaseKind::Gc));
        assert_eq!(names(&store), vec![first.clone()]);
        let bytes = crate::fs::read(&dir.path().join(&first)).unwrap();
        let record: LeaseRecord = serde_json::from_slice(&bytes).unwrap();
        assert_eq!((record.kind.as_str(), record.pid), ("gc", std::process::id()));
        assert_eq!(record.run_id.as_deref(), Some("77"));

        assert!(!lease.renew_if_older(GC_LEASE_RENEW).unwrap());
        assert!(lease.renew_if_older(Duration::ZERO).unwrap());
        assert_ne!(lease.name(), first);
        assert_eq!(names(&store), vec![lease.name().to_owned()]);

        let now = SystemTime::now();
        assert_eq!(active(&store, LeaseKind::Gc, GC_LEASE_TTL, now).unwrap().len(), 1);
        assert!(active(&store, LeaseKind::Save, SAVE_LEASE_TTL, now).unwrap().is_empty());
        let later = now + GC_LEASE_TTL + Duration::from_secs(1);
        assert!(active(&store, LeaseKind::Gc, GC_LEASE_TTL, later).unwrap().is_empty());

        // A lease left unrenewed for its whole time to live must not be renewed silently.
        if let Some(old) = Instant::now().checked_sub(GC_LEASE_TTL) {
            lease.written = old;
            let error = lease.renew_if_older(GC_LEASE_RENEW).unwrap_err();
            assert!(matches!(error, Error::LeaseExpired { ttl_seconds: 900, .. }), "{error}");
        }
        lease.release().unwrap();
        assert!(names(&store).is_empty());

        let dropped = Lease::acquire(&store, LeaseKind::Save, &holder).unwrap();
        assert_eq!(names(&store).len(), 1);
        drop(dropped);
        assert!(names(&store).is_empty(), "dropping a lease deletes it");
    }
}
