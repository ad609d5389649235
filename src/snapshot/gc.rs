//! Store garbage collection (`strata snapshot gc`, docs/snapshots.md "Garbage
//! collection"): keep the newest snapshots of each namespace, delete the others, then
//! delete the entry objects no kept index references (mark and sweep).
//!
//! A *namespace* is a key's compatibility prefix `<prefix>-schema<N>-<compat digest>-`
//! ([`KeyParts::compat_prefix`]): the snapshots one restore lookup falls back to. Keys
//! that do not parse as strata keys belong to no namespace and are never deleted (they
//! may be another tool's objects); their index snapshots still count as kept.
//!
//! # What goes, in this order
//! 1. **Snapshots beyond `keep`**: per namespace (among the keys starting with `--prefix`,
//!    if given), the snapshots are ordered by the time field of their key's suffix
//!    (`yyyymmddThhmmssZ`, the order restore's lookup uses; ties by the key), newest
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

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::index::lease::{self, GC_LEASE_RENEW, Lease, age_of, live_in};
use super::index::names::{
    ENTRIES_PREFIX, LEASES_PREFIX, LeaseKind, REFS_PREFIX, entry_object_digest, lease_kind,
};
use super::index::record::{
    MAX_INDEX_BYTES, MAX_REF_BYTES, decompress_index, load_index, load_ref,
};
use super::key::{KeyParts, check_key_text};
use super::manifest::{MAX_SIDECAR_BYTES, Sidecar, SnapshotKind, load_sidecar};
use super::{Error, Producer};
use crate::content::temp::{self, Purpose};
use crate::digest::ContentDigest;
use crate::transport::{ObjectKey, ObjectMeta, ObjectStore};

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
    let started = Instant::now();
    loop {
        let mut lease = match request.mode {
            Mode::Delete => Some(Lease::acquire(request.store, LeaseKind::Gc, &request.holder)?),
            Mode::DryRun => None,
        };
        let busy = busy_leases(request.store, lease.as_ref().map(Lease::name))?;
        if busy.is_empty() {
            let mut report = plan(request, lease.as_ref().map(Lease::name))?;
            if let Some(lease) = &mut lease {
                execute(request.store, lease, &mut report);
            }
            if let Some(lease) = lease {
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

/// The live save leases and the live gc leases other than `own`.
fn busy_leases(store: &dyn ObjectStore, own: Option<&str>) -> Result<Vec<String>, Error> {
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

/// The store's objects by kind.
#[derive(Default)]
struct Listing {
    /// `<key>.json` at the root, by key.
    sidecars: BTreeMap<String, ObjectMeta>,
    /// Everything at the root, by name (for sizes).
    root: BTreeMap<String, ObjectMeta>,
    entries: Vec<ObjectMeta>,
    refs: Vec<ObjectMeta>,
    leases: Vec<ObjectMeta>,
}

fn list_store(store: &dyn ObjectStore) -> Result<Listing, Error> {
    let all = store.list("").map_err(|e| Error::transport("list", store.describe(), e))?;
    let mut listing = Listing::default();
    for meta in all {
        let name = meta.key.as_str();
        if name.starts_with(ENTRIES_PREFIX) {
            if entry_object_digest(name).is_some() {
                listing.entries.push(meta);
            }
        } else if name.starts_with(REFS_PREFIX) {
            listing.refs.push(meta);
        } else if name.starts_with(LEASES_PREFIX) {
            if lease_kind(name).is_some() {
                listing.leases.push(meta);
            }
        } else if !name.contains('/') {
            if let Some(key) = name.strip_suffix(".json")
                && check_key_text("key", key).is_ok()
            {
                listing.sidecars.insert(key.to_owned(), meta.clone());
            }
            listing.root.insert(name.to_owned(), meta);
        }
    }
    Ok(listing)
}

/// Downloads `name` (at most `cap` bytes) through `scratch`; `None` if it is missing.
fn fetch(
    store: &dyn ObjectStore,
    scratch: &Path,
    name: &str,
    cap: u64,
) -> Result<Option<Vec<u8>>, Error> {
    let key = ObjectKey::new(name).map_err(|e| Error::transport("name", name, e))?;
    let path = scratch.join("download");
    let result = store.get_to_file(&key, &path);
    let bytes = match result {
        Ok((meta, _)) if meta.size_bytes > cap => {
            Err(Error::corrupt(name, format!("it is larger than {cap} bytes")))
        }
        Ok(_) => Ok(Some(crate::fs::read(&path)?)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(Error::transport("download", name, e)),
    };
    let _ = crate::fs::remove_file(&path);
    bytes
}

/// The plan: what a run deletes, in order (see the module docs).
fn plan(request: &GcRequest<'_>, own_lease: Option<&str>) -> Result<GcReport, Error> {
    let store = request.store;
    let status = match request.mode {
        Mode::Delete => GcStatus::Done,
        Mode::DryRun => GcStatus::DryRun,
    };
    let mut report = GcReport::new(status);
    let scratch = temp::create_dir(&std::env::temp_dir(), Purpose::Scratch, "gc", 0o700)?;
    let now = SystemTime::now();
    let listing = list_store(store)?;
    let mut doubt = false;

    // Sidecars: load each; group the strata keys into namespaces.
    let mut sidecars: BTreeMap<String, Sidecar> = BTreeMap::new();
    let mut groups: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for key in listing.sidecars.keys() {
        let parts = KeyParts::parse(key);
        let bytes = fetch(store, scratch.path(), &format!("{key}.json"), MAX_SIDECAR_BYTES);
        match bytes.and_then(|b| b.map(|b| load_sidecar(&b)).transpose()) {
            Ok(Some((_, sidecar))) => {
                sidecars.insert(key.clone(), sidecar);
            }
            Ok(None) => continue,
            Err(e) if e.is_transport() => return Err(e),
            Err(e) if parts.is_some() => {
                doubt = true;
                report.warnings.push(format!(
                    "the sidecar {key}.json does not load ({}): it is left alone and no entry \
                     object is deleted (delete it by hand if it is garbage)",
                    e.one_line()
                ));
                continue;
            }
            // Not a strata key and not a sidecar: another tool's object.
            Err(_) => continue,
        }
        if let Some(parts) = parts
            && request.prefix.as_deref().is_none_or(|p| key.starts_with(p))
        {
            groups
                .entry(parts.compat_prefix())
                .or_default()
                .push((parts.suffix_time().to_owned(), key.clone()));
        }
    }

    // Snapshots beyond keep: sidecar first, then its object.
    let mut pruned: BTreeSet<String> = BTreeSet::new();
    for (prefix, mut keys) in groups {
        keys.sort_by(|a, b| b.cmp(a));
        let mut namespace = Namespace { prefix, ..Namespace::default() };
        for (i, (_, key)) in keys.into_iter().enumerate() {
            if i < request.keep {
                namespace.kept.push(key);
                continue;
            }
            let sidecar_name = format!("{key}.json");
            let object = sidecars.get(&key).map(|s| s.object_name().to_owned()).unwrap_or_default();
            let size = |name: &str| listing.root.get(name).map_or(0, |m| m.size_bytes);
            report.deletions.push(Deletion {
                size_bytes: size(&sidecar_name),
                name: sidecar_name,
                class: Class::Sidecar,
            });
            report.deletions.push(Deletion {
                size_bytes: size(&object),
                name: object,
                class: Class::SnapshotObject,
            });
            pruned.insert(key.clone());
            namespace.deleted.push(key);
        }
        report.namespaces.push(namespace);
    }

    // Mark: the entry objects of every kept index.
    let mut marked: BTreeSet<String> = BTreeSet::new();
    for (key, sidecar) in &sidecars {
        if sidecar.kind != SnapshotKind::Index || pruned.contains(key) {
            continue;
        }
        match kept_index_objects(store, scratch.path(), sidecar) {
            Ok(objects) => marked.extend(objects),
            Err(e) if e.is_transport() => return Err(e),
            Err(e) => {
                doubt = true;
                report.warnings.push(format!(
                    "the kept index snapshot {key} does not verify ({}); no entry object is \
                     deleted (restore it to check, or delete its sidecar {key}.json by hand)",
                    e.one_line()
                ));
            }
        }
    }

    // Refs: young ones mark their object; old ones go with their object.
    let mut old_refs: Vec<(&ObjectMeta, String)> = Vec::new();
    for meta in &listing.refs {
        let name = meta.key.as_str();
        let loaded = fetch(store, scratch.path(), name, MAX_REF_BYTES)
            .and_then(|b| b.map(|b| load_ref(&b)).transpose());
        match loaded {
            Ok(Some(entry_ref)) if age_of(meta, now) < request.grace => {
                marked.insert(entry_ref.location.object);
            }
            Ok(Some(entry_ref)) => old_refs.push((meta, entry_ref.location.object)),
            Ok(None) => {}
            Err(e) if e.is_transport() => return Err(e),
            Err(e) => report
                .warnings
                .push(format!("the ref {name} does not load ({}); it is left alone", e.one_line())),
        }
    }

    // Sweep.
    let mut surviving: BTreeSet<&str> = BTreeSet::new();
    for meta in &listing.entries {
        let name = meta.key.as_str();
        if marked.contains(name) {
            report.entry_objects_referenced += 1;
            surviving.insert(name);
        } else if doubt || age_of(meta, now) < request.grace {
            report.entry_objects_young += u64::from(!doubt);
            surviving.insert(name);
        } else {
            report.deletions.push(Deletion {
                name: name.to_owned(),
                class: Class::EntryObject,
                size_bytes: meta.size_bytes,
            });
        }
    }
    report.sweep_skipped = doubt;
    for (meta, object) in old_refs {
        if !surviving.contains(object.as_str()) {
            report.deletions.push(Deletion {
                name: meta.key.as_str().to_owned(),
                class: Class::Ref,
                size_bytes: meta.size_bytes,
            });
        }
    }

    // Stale leases.
    for meta in &listing.leases {
        let name = meta.key.as_str();
        let stale = lease_kind(name).is_some_and(|kind| age_of(meta, now) >= lease::ttl(kind));
        if stale && Some(name) != own_lease {
            report.deletions.push(Deletion {
                name: name.to_owned(),
                class: Class::Lease,
                size_bytes: meta.size_bytes,
            });
        }
    }
    Ok(report)
}

/// Downloads the index object `sidecar` names, verifies it against the sidecar (size,
/// digest, manifest digest) and returns the entry objects it references.
fn kept_index_objects(
    store: &dyn ObjectStore,
    scratch: &Path,
    sidecar: &Sidecar,
) -> Result<BTreeSet<String>, Error> {
    let key = &sidecar.key;
    let name = sidecar.object_name();
    let bytes = fetch(store, scratch, name, MAX_INDEX_BYTES)?
        .ok_or_else(|| Error::corrupt(key, format!("its index object {name} is missing")))?;
    if bytes.len() as u64 != sidecar.object_size_bytes {
        return Err(Error::corrupt(
            key,
            format!(
                "its index object holds {} bytes, the sidecar says {}",
                bytes.len(),
                sidecar.object_size_bytes
            ),
        ));
    }
    let digest = ContentDigest::of_bytes(sidecar.object_digest.algorithm(), &bytes);
    if digest != sidecar.object_digest {
        return Err(Error::corrupt(
            key,
            format!(
                "its index object's digest is {digest}, the sidecar says {}",
                sidecar.object_digest
            ),
        ));
    }
    let (index, record_digest) = load_index(&decompress_index(&bytes, key)?, key)?;
    if record_digest != sidecar.manifest_digest {
        return Err(Error::corrupt(
            key,
            format!(
                "its index record's digest is {record_digest}, the sidecar says {}",
                sidecar.manifest_digest
            ),
        ));
    }
    Ok(index.entries.into_iter().map(|e| e.object).collect())
}

/// Deletes what `report` plans, in order, renewing `lease` on the way. A sidecar that
/// cannot be deleted keeps its object. A lease that cannot be renewed stops the run (the
/// rest would no longer be protected).
fn execute(store: &dyn ObjectStore, lease: &mut Lease<'_>, report: &mut GcReport) {
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
