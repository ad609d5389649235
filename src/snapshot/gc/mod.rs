//! Store garbage collection (`strata snapshot gc`, docs/snapshots.md "Garbage
//! collection"): keep the newest snapshots of each namespace, delete the others, then
//! delete the entry objects no kept index references (mark and sweep).
//!
//! A *namespace* is a key's compatibility prefix `<prefix>-schema<N>-<compat digest>-`
//! ([`KeyParts::compat_prefix`](crate::snapshot::key::KeyParts::compat_prefix)): the
//! snapshots one restore lookup falls back to. Keys that do not parse as strata keys
//! belong to no namespace and are never deleted (they may be another tool's objects);
//! their index snapshots still count as kept.
//!
//! # What goes, in this order
//! 1. **Snapshots beyond `keep`**: per namespace (among the keys starting with `--prefix`,
//!    if given), the snapshots are ordered by the time field of their key's suffix
//!    (`yyyymmddThhmmss.uuuuuuZ`, the order restore's lookup uses; ties by the key), newest
//!    first; the first `keep` stay. Of each other one the sidecar `<key>.json` is deleted
//!    first (the commit point: after that the snapshot is invisible), then the object it
//!    names (a full snapshot object or an index object).
//! 2. **Mark**: every `~entries/` object that a kept index snapshot references (each kept
//!    index object is downloaded and verified against its sidecar's size, digest and
//!    manifest digest), or that a ref younger than the grace period points to.
//! 3. **Sweep**: `~entries/` objects not marked and older than the grace period. A pack is
//!    kept whole while any kept index references any entry in it (no repacking).
//! 4. **Refs** (`~refs/`) older than the grace period whose object is gone (missing
//!    before, or swept now).
//! 5. **Stale leases** (older than their time to live).
//!
//! Never delete on doubt: a kept index that cannot be read or does not verify, or a
//! sidecar of a strata key that does not load, skips the sweep entirely (step 3; with a
//! warning). Nothing younger than `--grace` (default 1 h) is swept, which covers entry
//! uploads that hold no lease (the remote entry tier, a save of an older release).
//!
//! # Concurrency
//! The gc holds a lease (`super::index::lease`) while it deletes; if a live save lease
//! (or another gc's) exists, it deletes nothing and reports [`GcStatus::Busy`], or waits
//! with [`GcRequest::wait`]. A dry run writes no lease and deletes nothing, but plans
//! exactly as a real run would.
//!
//! # Limitations
//! * A restore that is reading a snapshot while the gc deletes it fails (and falls back to
//!   the next candidate); the gc cannot see readers.
//! * Snapshot objects that no sidecar names (a save killed between its two uploads) are
//!   not collected here; the next save from the same cache directory deletes them.
//! * Every sidecar and ref is downloaded once per run (one small GET each).

mod plan;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::index::lease::{self, GC_LEASE_RENEW, Lease, live_in};
use super::index::names::{LEASES_PREFIX, LeaseKind};
use super::key::check_key_text;
use super::{Error, Producer};
use crate::transport::{self, DeleteObjects, ListObjects, ObjectKey, ObjectStore};

/// The default grace period: 1 hour.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(60 * 60);

/// Whether a gc deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Plan and delete.
    Delete,
    /// Plan only: nothing is written or deleted (`--dry-run`).
    DryRun,
}

/// What to collect.
pub struct GcRequest<'a> {
    /// The store.
    pub store: &'a dyn ObjectStore,
    /// Snapshots kept per namespace (at least 1).
    pub keep: usize,
    /// Only keys starting with this are pruned (all strata keys when `None`).
    pub prefix: Option<String>,
    /// Nothing younger is swept (entry objects, refs); by default [`DEFAULT_GRACE`].
    pub grace: Duration,
    /// Delete, or only plan.
    pub mode: Mode,
    /// How long to wait for running saves (zero: report busy at once).
    pub wait: Duration,
    /// Interval between lease listings while waiting (2 s by default, [`lease::POLL`]).
    pub poll: Duration,
    /// Who runs the gc (recorded in its lease).
    pub holder: Producer,
}

/// How a gc ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GcStatus {
    /// Everything planned was deleted (or failed, see [`GcReport::failures`]).
    Done,
    /// A dry run: the plan, nothing deleted.
    DryRun,
    /// A live save (or another gc) held a lease: nothing was deleted.
    Busy,
}

/// What a deleted object was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A sidecar `<key>.json` of a snapshot beyond `keep`.
    Sidecar,
    /// The full snapshot object or index object of such a snapshot.
    SnapshotObject,
    /// An entry object or pack under `~entries/`.
    EntryObject,
    /// An entry ref under `~refs/`.
    Ref,
    /// A stale lease under `~leases/`.
    Lease,
}

/// One object the gc deletes (or, in a dry run, would delete).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deletion {
    /// Its name in the store.
    pub name: String,
    /// What it is.
    pub class: Class,
    /// Its size, in bytes (0 if it was not listed).
    pub size_bytes: u64,
}

/// The snapshots of one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Namespace {
    /// The compatibility prefix.
    pub prefix: String,
    /// Keys kept, newest first.
    pub kept: Vec<String>,
    /// Keys deleted, newest first.
    pub deleted: Vec<String>,
}

/// The outcome of a gc (the plan, for a dry run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// How it ended.
    pub status: GcStatus,
    /// The live leases that made it busy (names).
    pub busy_leases: Vec<String>,
    /// Namespaces touched by `--prefix`, by prefix.
    pub namespaces: Vec<Namespace>,
    /// Objects deleted (or to delete), in deletion order.
    pub deletions: Vec<Deletion>,
    /// Entry objects kept because a kept index or a young ref references them.
    pub entry_objects_referenced: u64,
    /// Unreferenced entry objects kept because they are younger than the grace period.
    pub entry_objects_young: u64,
    /// True if the sweep was skipped (never delete on doubt; see `warnings`).
    pub sweep_skipped: bool,
    /// Problems that did not stop the run, one sentence each.
    pub warnings: Vec<String>,
    /// Deletions that failed: name and error, one line each.
    pub failures: Vec<(String, String)>,
}

impl GcReport {
    fn new(status: GcStatus) -> Self {
        Self {
            status,
            busy_leases: Vec::new(),
            namespaces: Vec::new(),
            deletions: Vec::new(),
            entry_objects_referenced: 0,
            entry_objects_young: 0,
            sweep_skipped: false,
            warnings: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// Number of deletions of `class`.
    pub fn count(&self, class: Class) -> u64 {
        self.deletions.iter().filter(|d| d.class == class).count() as u64
    }

    /// Bytes freed (or to free): the listed sizes of every deletion that did not fail.
    pub fn bytes_freed(&self) -> u64 {
        let failed: BTreeSet<&str> = self.failures.iter().map(|(n, _)| n.as_str()).collect();
        self.deletions
            .iter()
            .filter(|d| !failed.contains(d.name.as_str()))
            .map(|d| d.size_bytes)
            .sum()
    }
}

/// Runs a gc (see the module docs).
///
/// # Errors
/// [`Error::InvalidInput`] for `keep == 0`; [`Error::Transport`] if the store cannot be
/// listed, a sidecar or ref cannot be downloaded, or the lease cannot be written;
/// [`Error::Local`] for the scratch directory in the system's temp directory. Failed
/// deletions are not errors: they are in [`GcReport::failures`].
pub fn gc(request: &GcRequest<'_>) -> Result<GcReport, Error> {
    if request.keep == 0 {
        return Err(Error::InvalidInput {
            what: "--keep",
            reason: "must be at least 1 (the newest snapshot of a namespace always stays)".into(),
        });
    }
    if let Some(prefix) = &request.prefix {
        check_key_text("--prefix", prefix)?;
    }
    // What a gc needs of the store, asked before anything is written or listed.
    let store = request.store;
    let listing = transport::listing(store, PURPOSE)
        .map_err(|e| Error::transport("list", store.describe(), e))?;
    let deleting = match request.mode {
        Mode::Delete => Some(
            transport::deleting(store, PURPOSE)
                .map_err(|e| Error::transport("delete from", store.describe(), e))?,
        ),
        Mode::DryRun => None,
    };
    let started = Instant::now();
    loop {
        let mut lease = match request.mode {
            Mode::Delete => Some(Lease::acquire(request.store, LeaseKind::Gc, &request.holder)?),
            Mode::DryRun => None,
        };
        let busy = busy_leases(listing, lease.as_ref().map(Lease::name))?;
        if busy.is_empty() {
            let status = match request.mode {
                Mode::Delete => GcStatus::Done,
                Mode::DryRun => GcStatus::DryRun,
            };
            let mut report = plan::plan(request, listing, lease.as_mut(), GcReport::new(status))?;
            if let (Some(mut lease), Some(deleting)) = (lease, deleting) {
                execute(deleting, &mut lease, &mut report);
                lease.release()?;
            }
            return Ok(report);
        }
        if let Some(lease) = lease {
            lease.release()?;
        }
        let waited = started.elapsed();
        if waited >= request.wait {
            let mut report = GcReport::new(GcStatus::Busy);
            report.busy_leases = busy;
            return Ok(report);
        }
        // A little jitter so that two waiting gcs do not meet again.
        let jitter = Duration::from_millis(fastrand::u64(0..250));
        std::thread::sleep(request.poll.min(request.wait - waited) + jitter);
    }
}

/// What a gc needs listing and deletion for, in messages.
pub const PURPOSE: &str = "snapshot gc";

/// The live save leases and the live gc leases other than `own`.
fn busy_leases(store: &dyn ListObjects, own: Option<&str>) -> Result<Vec<String>, Error> {
    let listing =
        store.list(LEASES_PREFIX).map_err(|e| Error::transport("list", LEASES_PREFIX, e))?;
    let now = SystemTime::now();
    let saves = live_in(&listing, LeaseKind::Save, lease::ttl(LeaseKind::Save), now);
    let gcs = live_in(&listing, LeaseKind::Gc, lease::ttl(LeaseKind::Gc), now);
    Ok(saves
        .into_iter()
        .chain(gcs)
        .map(|(name, _)| name)
        .filter(|name| Some(name.as_str()) != own)
        .collect())
}

/// Deletes what `report` plans, in order, renewing `lease` on the way. A sidecar that
/// cannot be deleted keeps its object. A lease that cannot be renewed stops the run (the
/// rest would no longer be protected).
fn execute(store: &dyn DeleteObjects, lease: &mut Lease<'_>, report: &mut GcReport) {
    let mut kept_sidecar = false;
    let mut stopped: Option<String> = None;
    for deletion in &report.deletions {
        if let Some(reason) = &stopped {
            report.failures.push((deletion.name.clone(), reason.clone()));
            continue;
        }
        if deletion.class == Class::SnapshotObject && std::mem::take(&mut kept_sidecar) {
            report.failures.push((deletion.name.clone(), "its sidecar is still there".into()));
            continue;
        }
        if let Err(e) = lease.renew_if_older(GC_LEASE_RENEW) {
            let reason =
                format!("not attempted: the gc lease could not be renewed ({})", e.one_line());
            stopped = Some(reason.clone());
            report.failures.push((deletion.name.clone(), reason));
            continue;
        }
        let result = ObjectKey::new(deletion.name.as_str()).and_then(|key| store.delete(&key));
        match result {
            Ok(()) => {}
            Err(e) => {
                kept_sidecar = deletion.class == Class::Sidecar;
                report.failures.push((deletion.name.clone(), crate::message::one_line(&e)));
            }
        }
    }
}
