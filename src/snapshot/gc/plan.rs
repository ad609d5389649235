//! The gc's plan: one listing of the store, then what goes, in deletion order (see the
//! parent module's docs for the rules). Planning only reads; a real run keeps its lease
//! alive while it plans.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::SystemTime;

use super::{Class, Deletion, GcReport, GcRequest, Namespace};
use crate::digest::ContentDigest;
use crate::fs::StagingDir;
use crate::fs::temp::{self, Purpose};
use crate::snapshot::Error;
use crate::snapshot::index::lease::{self, GC_LEASE_RENEW, Lease, age_of};
use crate::snapshot::index::names::{
    ENTRIES_PREFIX, LEASES_PREFIX, REFS_PREFIX, entry_object_digest, lease_kind,
};
use crate::snapshot::index::record::{
    EntryLocation, MAX_INDEX_BYTES, MAX_REF_BYTES, decompress_index, load_index, load_ref,
};
use crate::snapshot::key::{KeyParts, SuffixTime, check_key_text};
use crate::snapshot::manifest::{MAX_SIDECAR_BYTES, Sidecar, SnapshotKind, load_sidecar};
use crate::snapshot::restore::lookup::MAX_FUTURE;
use crate::transport::{ListObjects, ObjectKey, ObjectMeta, ObjectStore};

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

fn list_store(store: &dyn ObjectStore, listing: &dyn ListObjects) -> Result<Listing, Error> {
    let all = listing.list("").map_err(|e| Error::transport("list", store.describe(), e))?;
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

/// Downloads `name` (at most `cap` bytes) into `scratch`; `None` if it is missing.
/// `listed` is its size as listed: an object listed larger than `cap` is not downloaded
/// (another tool's large `*.json` costs nothing).
fn fetch(
    store: &dyn ObjectStore,
    scratch: &Path,
    (name, listed): (&str, u64),
    cap: u64,
) -> Result<Option<Vec<u8>>, Error> {
    if listed > cap {
        return Err(Error::corrupt(name, format!("it is listed with {listed} bytes, over {cap}")));
    }
    let key = ObjectKey::new(name).map_err(|e| Error::transport("name", name, e))?;
    let path = scratch.join("download");
    let bytes = match store.get_to_file(&key, &path) {
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

/// One planning pass.
struct Planner<'r, 'l, 's> {
    request: &'r GcRequest<'s>,
    lease: Option<&'l mut Lease<'s>>,
    scratch: StagingDir,
    now: SystemTime,
    listing: Listing,
    report: GcReport,
    /// Something could not be read: no entry object is swept.
    doubt: bool,
    /// Loaded sidecars, by key.
    sidecars: BTreeMap<String, Sidecar>,
    /// Keys of the snapshots that go.
    pruned: BTreeSet<String>,
    /// Entry objects that stay whatever their age.
    marked: BTreeSet<String>,
    /// Entry paths (relative to `actions-v1/`) that a kept index snapshot lists: their
    /// refs stay, and so do the objects those refs name.
    kept_paths: BTreeSet<String>,
}

/// Plans a run (see the parent module's docs); renews `lease`, if given, on the way.
///
/// # Errors
/// [`Error::Transport`] for a listing or download that fails; [`Error::Local`] for the
/// scratch directory; the errors of [`Lease::renew_if_older`].
pub(super) fn plan<'s>(
    request: &GcRequest<'s>,
    listing: &dyn ListObjects,
    lease: Option<&mut Lease<'s>>,
    report: GcReport,
) -> Result<GcReport, Error> {
    let scratch = temp::create_dir(&crate::config::temp_dir(), Purpose::Scratch, "gc", 0o700)?;
    let mut planner = Planner {
        request,
        lease,
        scratch,
        now: SystemTime::now(),
        listing: list_store(request.store, listing)?,
        report,
        doubt: false,
        sidecars: BTreeMap::new(),
        pruned: BTreeSet::new(),
        marked: BTreeSet::new(),
        kept_paths: BTreeSet::new(),
    };
    let groups = planner.load_sidecars()?;
    planner.prune(groups);
    planner.mark_kept_indexes()?;
    let old_refs = planner.read_refs()?;
    let surviving = planner.sweep();
    planner.unlink_refs(old_refs, &surviving);
    planner.stale_leases();
    Ok(planner.report)
}

impl Planner<'_, '_, '_> {
    fn keep_alive(&mut self) -> Result<(), Error> {
        if let Some(lease) = self.lease.as_deref_mut() {
            lease.renew_if_older(GC_LEASE_RENEW)?;
        }
        Ok(())
    }

    fn fetch(&mut self, object: (&str, u64), cap: u64) -> Result<Option<Vec<u8>>, Error> {
        self.keep_alive()?;
        fetch(self.request.store, self.scratch.path(), object, cap)
    }

    fn warn(&mut self, doubt: bool, message: String) {
        self.doubt |= doubt;
        self.report.warnings.push(message);
    }

    /// Loads every sidecar; returns the keys to consider for pruning, grouped by
    /// namespace, each with its suffix time.
    fn load_sidecars(&mut self) -> Result<BTreeMap<String, Vec<(SuffixTime, String)>>, Error> {
        let mut groups: BTreeMap<String, Vec<(SuffixTime, String)>> = BTreeMap::new();
        let keys: Vec<(String, u64)> =
            self.listing.sidecars.iter().map(|(k, m)| (k.clone(), m.size_bytes)).collect();
        for (key, size) in keys {
            let parts = KeyParts::parse(&key);
            let loaded = self
                .fetch((&format!("{key}.json"), size), MAX_SIDECAR_BYTES)
                .and_then(|b| b.map(|b| load_sidecar(&b)).transpose());
            match loaded {
                Ok(Some((_, sidecar))) => {
                    self.sidecars.insert(key.clone(), sidecar);
                }
                Ok(None) => continue,
                Err(e) if e.is_transport() => return Err(e),
                Err(e) if parts.is_some() => {
                    let message = format!(
                        "the sidecar {key}.json does not load ({}): it is left alone and no \
                         entry object is deleted (delete it by hand if it is garbage)",
                        e.one_line()
                    );
                    self.warn(true, message);
                    continue;
                }
                // Not a strata key and not a sidecar: another tool's object.
                Err(_) => continue,
            }
            if let Some(parts) = parts
                && self.request.prefix.as_deref().is_none_or(|p| key.starts_with(p))
            {
                let text = parts.suffix_time();
                let Some(time) = SuffixTime::parse(text) else { continue };
                if time > SuffixTime::of(self.now + MAX_FUTURE) {
                    // Restores ignore it, so it must not take the place of one they use;
                    // it is not deleted either (its entry objects stay marked).
                    let message = format!(
                        "the snapshot {key} is dated {text}, more than a day in the future: restores ignore it, so it is neither counted among the kept nor deleted (a wrong clock or a crafted key; delete {key}.json by hand)"
                    );
                    self.warn(false, message);
                    continue;
                }
                groups.entry(parts.compat_prefix()).or_default().push((time, key));
            }
        }
        Ok(groups)
    }

    /// Snapshots beyond `keep`, newest first by suffix time then key: sidecar first, then
    /// its object.
    fn prune(&mut self, groups: BTreeMap<String, Vec<(SuffixTime, String)>>) {
        for (prefix, mut keys) in groups {
            keys.sort_by(|a, b| b.cmp(a));
            let mut namespace = Namespace { prefix, ..Namespace::default() };
            for (i, (_, key)) in keys.into_iter().enumerate() {
                if i < self.request.keep {
                    namespace.kept.push(key);
                    continue;
                }
                let sidecar = format!("{key}.json");
                let object =
                    self.sidecars.get(&key).map(|s| s.object_name().to_owned()).unwrap_or_default();
                let sidecar_size = self.root_size(&sidecar);
                let object_size = self.root_size(&object);
                self.delete(sidecar, Class::Sidecar, sidecar_size);
                self.delete(object, Class::SnapshotObject, object_size);
                self.pruned.insert(key.clone());
                namespace.deleted.push(key);
            }
            self.report.namespaces.push(namespace);
        }
    }

    fn root_size(&self, name: &str) -> u64 {
        self.listing.root.get(name).map_or(0, |m| m.size_bytes)
    }

    fn delete(&mut self, name: String, class: Class, size_bytes: u64) {
        self.report.deletions.push(Deletion { name, class, size_bytes });
    }

    /// Marks the entry objects of every kept index snapshot (of any key).
    fn mark_kept_indexes(&mut self) -> Result<(), Error> {
        let kept: Vec<Sidecar> = self
            .sidecars
            .iter()
            .filter(|(key, s)| s.kind == SnapshotKind::Index && !self.pruned.contains(*key))
            .map(|(_, s)| s.clone())
            .collect();
        for sidecar in kept {
            self.keep_alive()?;
            match kept_index_objects(self.request.store, self.scratch.path(), &sidecar) {
                Ok(entries) => {
                    for entry in entries {
                        self.marked.insert(entry.object);
                        self.kept_paths.insert(entry.path);
                    }
                }
                Err(e) if e.is_transport() => return Err(e),
                Err(e) => {
                    let key = &sidecar.key;
                    let message = format!(
                        "the kept index snapshot {key} does not verify ({}); no entry object \
                         is deleted (restore it to check, or delete its sidecar {key}.json by \
                         hand)",
                        e.one_line()
                    );
                    self.warn(true, message);
                }
            }
        }
        Ok(())
    }

    /// Reads every ref: a young one, or one of an entry a kept index snapshot lists (the
    /// first writer's ref may name another object than the index does), marks its object;
    /// the others are returned with their object.
    fn read_refs(&mut self) -> Result<Vec<(ObjectMeta, String)>, Error> {
        let mut old = Vec::new();
        for meta in std::mem::take(&mut self.listing.refs) {
            let name = meta.key.as_str();
            let loaded = self
                .fetch((name, meta.size_bytes), MAX_REF_BYTES)
                .and_then(|b| b.map(|b| load_ref(&b)).transpose());
            match loaded {
                Ok(Some(entry_ref))
                    if age_of(&meta, self.now) < self.request.grace
                        || self.kept_paths.contains(&entry_ref.location.path) =>
                {
                    self.marked.insert(entry_ref.location.object);
                }
                Ok(Some(entry_ref)) => old.push((meta, entry_ref.location.object)),
                Ok(None) => {}
                Err(e) if e.is_transport() => return Err(e),
                Err(e) => {
                    let message = format!(
                        "the ref {name} does not load ({}); it is left alone",
                        e.one_line()
                    );
                    self.warn(false, message);
                }
            }
        }
        Ok(old)
    }

    /// Sweeps unmarked entry objects older than the grace period (none on doubt);
    /// returns the entry objects that stay.
    fn sweep(&mut self) -> BTreeSet<String> {
        let mut surviving = BTreeSet::new();
        for meta in std::mem::take(&mut self.listing.entries) {
            let name = meta.key.as_str().to_owned();
            if self.marked.contains(&name) {
                self.report.entry_objects_referenced += 1;
                surviving.insert(name);
            } else if self.doubt {
                surviving.insert(name);
            } else if age_of(&meta, self.now) < self.request.grace {
                self.report.entry_objects_young += 1;
                surviving.insert(name);
            } else {
                self.delete(name, Class::EntryObject, meta.size_bytes);
            }
        }
        self.report.sweep_skipped = self.doubt;
        surviving
    }

    /// Old refs whose object does not stay.
    fn unlink_refs(&mut self, old: Vec<(ObjectMeta, String)>, surviving: &BTreeSet<String>) {
        for (meta, object) in old {
            if !surviving.contains(&object) {
                self.delete(meta.key.as_str().to_owned(), Class::Ref, meta.size_bytes);
            }
        }
    }

    /// Leases older than their kind's time to live (never this run's own).
    fn stale_leases(&mut self) {
        let own = self.lease.as_deref().map(|l| l.name().to_owned());
        for meta in std::mem::take(&mut self.listing.leases) {
            let name = meta.key.as_str();
            let stale =
                lease_kind(name).is_some_and(|kind| age_of(&meta, self.now) >= lease::ttl(kind));
            if stale && Some(name) != own.as_deref() {
                self.delete(name.to_owned(), Class::Lease, meta.size_bytes);
            }
        }
    }
}

/// Downloads the index object `sidecar` names, verifies it against the sidecar (size,
/// digest, manifest digest) and returns the entries it lists.
fn kept_index_objects(
    store: &dyn ObjectStore,
    scratch: &Path,
    sidecar: &Sidecar,
) -> Result<Vec<EntryLocation>, Error> {
    let key = &sidecar.key;
    let name = sidecar.object_name();
    let bytes = fetch(store, scratch, (name, sidecar.object_size_bytes), MAX_INDEX_BYTES)?
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
    Ok(index.entries)
}
