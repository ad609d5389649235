//! The remote entry tier (docs/remote-tier.md), above [`crate::snapshot`] whose index
//! format (entry refs, entry objects: [`crate::snapshot::index`]) it shares: [`RemoteTier`], the
//! [`EntrySource`] that fetches single L1 entries from an object store on a local MISS
//! and uploads new ones, by their entry refs (`~refs/<2 hex>/<sha256(path)>.json`,
//! [`crate::snapshot::index::EntryRef`]) and entry objects (`~entries/<2 hex>/<blake3>`).
//!
//! Fetch: GET the ref (at most [`MAX_REF_BYTES`]), load and check it, require that it
//! names the entry path asked for and, when a trust policy is configured, that a trusted
//! key signed it; GET the entry object's byte range (a large one into a temp file);
//! [`install_entry_from`] verifies its BLAKE3 digest and every unpack rule before the
//! entry is renamed into place. Every failure is
//! [`FetchOutcome::Failed`] (a MISS with a warning), a missing ref is
//! [`FetchOutcome::Absent`].
//!
//! Offer (producers with `--remote-write` and writer credentials): HEAD the ref (present:
//! first writer wins, nothing uploaded), pack the entry alone ([`pack_entry`]), upload it
//! under its digest name if absent, then the ref (signed with the producer's key when it
//! has one) if absent.
//!
//! Bounded: every request of the tier has its own short timeout
//! ([`DEFAULT_TIMEOUT`], `STRATA_REMOTE_TIMEOUT`) and is not retried, so a stalled or
//! failing store costs at most two timeouts per MISS (ref, then object). The store is
//! opened on first use, so a configured tier costs nothing on a local HIT.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use crate::fs;
use crate::fs::temp::{self, Purpose};
use crate::l1::layout::EntryPath;
use crate::l1::remote::{EntrySource, FetchOutcome, OfferOutcome};
use crate::l1::write::Durability;
use crate::message::one_line;
use crate::record::Timestamp;
use crate::snapshot::Error;
use crate::snapshot::manifest::Producer;
use crate::transport::{
    HalfPairs, NextRequest, ObjectKey, ObjectStore, PutOutcome, StoreUrl, StoreUse,
    TransportOptions,
};
use crate::trust::{SigningKey, TrustPolicy};

use crate::snapshot::index::entries::manifest_digest;
use crate::snapshot::index::names::{entry_object_name, keyed_ref_name, ref_name};
use crate::snapshot::index::object::{Installed, install_entry, install_entry_from, pack_entry};
use crate::snapshot::index::record::{
    EntryLocation, EntryRef, MAX_REF_BYTES, REF_SIGNATURE_DOMAIN, load_ref, seal_ref,
};

/// Most refs under trusted key ids a fetch reads after a plain ref it does not trust.
pub const MAX_KEYED_REFS: usize = 8;

/// Per-request timeout of the tier when `STRATA_REMOTE_TIMEOUT` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest entry object the tier fetches, in bytes (2 GiB). One above 8 MiB goes to a temp
/// file, not into memory.
pub const MAX_ENTRY_OBJECT_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// zstd level of uploaded entry objects.
const ENTRY_LEVEL: i32 = 3;

/// How a [`RemoteTier`] is set up.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// The store (`file:///dir`, `s3://bucket/prefix?…`, `http(s)://host/path`), as for
    /// `snapshot`; or, for a URL that does not parse, the reason (one line, no secret):
    /// the tier then fails every fetch with it as a warning, and the build runs.
    pub url: Result<StoreUrl, String>,
    /// Upload new entries (`--remote-write`, `STRATA_REMOTE_WRITE=1`).
    pub write: bool,
    /// Result of [`StoreUrl::has_writer_credentials`] for `url`: without them, an offer
    /// fails with a warning instead of uploading.
    pub writer_credentials: bool,
    /// Limit of one request (`STRATA_REMOTE_TIMEOUT`, seconds).
    pub timeout: Duration,
    /// The producers whose refs are accepted (`--trusted-key`, `STRATA_TRUSTED_KEYS`);
    /// empty: refs are not checked.
    pub trust: TrustPolicy,
}

impl RemoteConfig {
    /// The configuration of the environment: `STRATA_REMOTE_STORE` (unset or empty:
    /// `Ok(None)`), `STRATA_REMOTE_WRITE` (on or off, [`crate::config::parse_switch`]),
    /// `STRATA_REMOTE_TIMEOUT` (seconds, a decimal number from 0.05 to 600),
    /// `STRATA_TRUSTED_KEYS`, and the writer credentials of the URL. Reads no file.
    ///
    /// # Errors
    /// A message naming the variable whose value cannot be used.
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let Some(url) = get("STRATA_REMOTE_STORE") else { return Ok(None) };
        let write = match get("STRATA_REMOTE_WRITE") {
            Some(text) => crate::config::parse_switch(&text)
                .map_err(|reason| format!("STRATA_REMOTE_WRITE={text:?}: {reason}"))?,
            None => false,
        };
        let timeout = match get("STRATA_REMOTE_TIMEOUT") {
            Some(text) => parse_timeout(&text)
                .map_err(|reason| format!("STRATA_REMOTE_TIMEOUT={text:?}: {reason}"))?,
            None => DEFAULT_TIMEOUT,
        };
        let trust = match get("STRATA_TRUSTED_KEYS") {
            Some(list) => TrustPolicy::new(
                TrustPolicy::parse_list(&list).map_err(|e| format!("STRATA_TRUSTED_KEYS: {e}"))?,
            ),
            None => TrustPolicy::default(),
        };
        let url: Result<StoreUrl, String> = url.parse().map_err(|e| {
            format!("remote store {}: {}", crate::transport::redact_store_url(&url), one_line(&e))
        });
        // A URL that does not parse fails every fetch and offer later, with its reason.
        let writer_credentials = url.as_ref().map_or(true, |u| u.has_writer_credentials(&env));
        Ok(Some(Self { url, write, writer_credentials, timeout, trust }))
    }
}

/// A timeout in seconds: a decimal number from 0.05 to 600
/// ([`crate::config::REQUEST_TIMEOUT`]).
///
/// # Errors
/// What is wrong with `text`.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    match crate::config::parse_timeout(text, &crate::config::REQUEST_TIMEOUT)? {
        crate::config::Timeout::After(d) => Ok(d),
        crate::config::Timeout::Never => Err(crate::config::REQUEST_TIMEOUT.expected.into()),
    }
}

/// The transport options of the tier: `timeout` for connecting and for each request, no
/// retries.
pub fn transport_options(timeout: Duration) -> TransportOptions {
    TransportOptions {
        request_timeout: timeout,
        connect_timeout: timeout,
        max_retries: 0,
        ..TransportOptions::default()
    }
}

/// The remote entry tier over one object store (see the module docs).
pub struct RemoteTier {
    config: RemoteConfig,
    signing_key: Option<SigningKey>,
    producer: Producer,
    store: OnceLock<Result<Box<dyn ObjectStore>, String>>,
}

impl std::fmt::Debug for RemoteTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTier")
            .field("url", &self.config.url.as_ref().map(ToString::to_string))
            .field("write", &self.config.write)
            .field("signed", &self.signing_key.is_some())
            .finish()
    }
}

impl RemoteTier {
    /// A tier for `config`; refs it uploads are signed with `signing_key` when given.
    /// Opens nothing yet.
    pub fn new(config: RemoteConfig, signing_key: Option<SigningKey>) -> Self {
        let producer = Producer::from_env_with(crate::config::var_string);
        Self { config, signing_key, producer, store: OnceLock::new() }
    }

    /// A tier over an already opened store (tests, benchmarks).
    pub fn with_store(
        config: RemoteConfig,
        signing_key: Option<SigningKey>,
        store: Box<dyn ObjectStore>,
    ) -> Self {
        let tier = Self::new(config, signing_key);
        let _ = tier.store.set(Ok(store));
        tier
    }

    fn store(&self) -> Result<&dyn ObjectStore, String> {
        let opened = self.store.get_or_init(|| {
            let url = self.config.url.as_ref().map_err(Clone::clone)?;
            let options = transport_options(self.config.timeout);
            let env = crate::config::var_string;
            url.open(&options, &env, HalfPairs::Refuse, &StoreUse::core("the remote entry tier"))
                .map_err(|e| format!("remote store {url}: {}", one_line(&e)))
        });
        opened.as_ref().map(|s| s.as_ref()).map_err(Clone::clone)
    }

    fn try_fetch(&self, cache_root: &Path, entry_path: &str) -> Result<FetchOutcome, String> {
        let store = self.store()?;
        // Our temp files under `.local/` are never taken for a killed process's.
        let _transfer = crate::snapshot::leftovers::TransferLock::hold(
            cache_root,
            crate::snapshot::leftovers::Local::Create,
        );
        let ref_key = key(&ref_name(entry_path))?;
        let Some(bytes) = get_ref_bytes(store, &ref_key)? else {
            return Ok(FetchOutcome::Absent);
        };
        let entry_ref = match self.accept_ref(&ref_key, &bytes, entry_path) {
            Ok(entry_ref) => entry_ref,
            Err(passed_over) if !self.config.trust.is_empty() => {
                // The plain ref is not a trusted producer's (anyone with write access can
                // put one there first): a trusted producer then wrote its own, under its
                // key id; one small read per trusted key.
                self.trusted_keyed_ref(store, entry_path)
                    .map_err(|why| format!("{passed_over}; {why}"))?
            }
            Err(why) => return Err(why),
        };
        let ref_key = key(&entry_ref.0)?;
        let entry_ref = entry_ref.1;
        let location = &entry_ref.location;
        if location.size_bytes > MAX_ENTRY_OBJECT_BYTES {
            return Err(format!(
                "{}: the entry object has {} bytes, more than the tier fetches ({MAX_ENTRY_OBJECT_BYTES})",
                location.object, location.size_bytes
            ));
        }
        let object = key(&location.object)?;
        let installed = match get_entry_object(store, cache_root, &object, location)? {
            EntryBytes::Absent => {
                return Err(format!(
                    "{object}, named by {ref_key}, is not in the store; the entry is built \
                     here. {}",
                    repair(&ref_key)
                ));
            }
            EntryBytes::Memory(bytes) => {
                install_entry(cache_root, location, &bytes, Durability::Fsync)
            }
            EntryBytes::File(path) => match fs::open(&path) {
                Ok(mut file) => {
                    install_entry_from(cache_root, location, &mut file, Durability::Fsync)
                }
                Err(e) => Err(e.into()),
            },
        };
        match installed {
            Ok(Installed::Installed | Installed::AlreadyPresent) => Ok(FetchOutcome::Installed),
            Err(e) if e.is_corrupt() => {
                let why = match &e {
                    Error::Corrupt { reason, .. } => reason.clone(),
                    other => one_line(other),
                };
                Err(format!(
                    "{object} ({entry_path}) refused: {why}; the entry is built here. {}",
                    repair(&ref_key)
                ))
            }
            // A local failure (I/O, a full disk, permissions) says nothing about the store:
            // no advice to touch it.
            Err(e) => Err(format!(
                "{object} ({entry_path}) could not be installed in {}: {}; the entry is built here. The store's copy is not at fault: check the cache directory (free space, permissions)",
                cache_root.display(),
                one_line(&e)
            )),
        }
    }

    /// Loads and checks the ref `ref_key` (its bytes): it must verify, name `entry_path`
    /// and, under a trust policy, carry a trusted signature. Returns its name and record.
    fn accept_ref(
        &self,
        ref_key: &ObjectKey,
        bytes: &[u8],
        entry_path: &str,
    ) -> Result<(String, EntryRef), String> {
        let entry_ref = load_ref(bytes).map_err(|e| {
            let problem = match &e {
                Error::Record { source, .. } => source.problem(),
                other => one_line(other),
            };
            format!(
                "{ref_key} did not verify ({problem}); the entry is built here. {}",
                repair(ref_key)
            )
        })?;
        if entry_ref.location.path != entry_path {
            return Err(format!(
                "{ref_key} names the entry {:?}, not {entry_path:?}; ignored",
                entry_ref.location.path
            ));
        }
        if !self.config.trust.is_empty() {
            let statement = entry_ref.statement();
            self.config
                .trust
                .check(REF_SIGNATURE_DOMAIN, &statement, entry_ref.signature.as_ref())
                .map_err(|why| format!("{ref_key} is not accepted: {why}"))?;
        }
        Ok((ref_key.as_str().to_owned(), entry_ref))
    }

    /// The ref a trusted producer wrote under its key id ([`keyed_ref_name`]), tried for
    /// each trusted key in turn (at most [`MAX_KEYED_REFS`] small reads).
    fn trusted_keyed_ref(
        &self,
        store: &dyn ObjectStore,
        entry_path: &str,
    ) -> Result<(String, EntryRef), String> {
        let mut tried = Vec::new();
        for public in self.config.trust.keys().iter().take(MAX_KEYED_REFS) {
            let keyed = key(&keyed_ref_name(entry_path, &public.id().to_string()))?;
            match get_ref_bytes(store, &keyed)? {
                None => tried.push(format!("no {keyed}")),
                Some(bytes) => match self.accept_ref(&keyed, &bytes, entry_path) {
                    Ok(found) => return Ok(found),
                    Err(why) => tried.push(why),
                },
            }
        }
        Err(format!(
            "no trusted producer's ref either ({}); the entry is built here",
            tried.join("; ")
        ))
    }

    fn try_offer(&self, cache_root: &Path, entry_path: &str) -> Result<OfferOutcome, String> {
        if !self.config.writer_credentials {
            let hint = self.config.url.as_ref().ok().and_then(StoreUrl::writer_credentials_hint);
            return Err(format!(
                "remote write needs writer credentials ({}); not uploading",
                hint.unwrap_or("none are known for this store")
            ));
        }
        let store = self.store()?;
        let _transfer = crate::snapshot::leftovers::TransferLock::hold(
            cache_root,
            crate::snapshot::leftovers::Local::Create,
        );
        let mut ref_key = key(&ref_name(entry_path))?;
        if store.head(&ref_key).map_err(|e| format!("{ref_key}: {}", one_line(&e)))?.is_some() {
            // First writer wins. A signing producer makes sure a ref of its own exists: if
            // the plain one is another writer's, its ref goes under its key id, where
            // consumers that trust it look next (`trusted_keyed_ref`).
            let Some(signing) = &self.signing_key else { return Ok(OfferOutcome::AlreadyPresent) };
            let own = TrustPolicy::new([signing.public_key().clone()]);
            let mine = |name: &ObjectKey| -> Result<bool, String> {
                Ok(get_ref_bytes(store, name)?.and_then(|bytes| load_ref(&bytes).ok()).is_some_and(
                    |r| {
                        r.location.path == entry_path
                            && own
                                .check(REF_SIGNATURE_DOMAIN, &r.statement(), r.signature.as_ref())
                                .is_ok()
                    },
                ))
            };
            if mine(&ref_key)? {
                return Ok(OfferOutcome::AlreadyPresent);
            }
            ref_key = key(&keyed_ref_name(entry_path, &signing.public_key().id().to_string()))?;
            if store.head(&ref_key).map_err(|e| format!("{ref_key}: {}", one_line(&e)))?.is_some() {
                return Ok(OfferOutcome::AlreadyPresent);
            }
        }
        let entry_dir = cache_root.join(crate::snapshot::CARRIED_DIR).join(entry_path);
        let read_digest = || {
            manifest_digest(&entry_dir)
                .map_err(|e| one_line(&e))?
                .ok_or_else(|| format!("{}: no manifest.json; not uploaded", entry_dir.display()))
        };
        let manifest = read_digest()?;
        let local = local_dir(cache_root)?;
        let (_, packed_path) =
            temp::create_file(&local, Purpose::Pack, "entry", 0o600).map_err(|e| e.to_string())?;
        let packed = pack_entry(cache_root, entry_path, &packed_path, ENTRY_LEVEL)
            .map_err(|e| format!("packing {entry_path}: {}", one_line(&e)))?;
        if read_digest()? != manifest {
            return Err(format!("{entry_path} changed while it was packed; not uploaded"));
        }
        let object = entry_object_name(&packed.digest).ok_or("entry digest is not BLAKE3")?;
        let object_key = key(&object)?;
        store
            .put_file_if_absent(&object_key, &packed_path)
            .map_err(|e| format!("{object}: {}", one_line(&e)))?;
        let mut entry_ref = EntryRef {
            location: EntryLocation {
                path: entry_path.to_owned(),
                manifest_digest: manifest,
                object,
                offset: 0,
                size_bytes: packed.size_bytes,
                digest: packed.digest,
                file_count: packed.file_count,
                file_bytes: packed.file_bytes,
            },
            created_at: Timestamp::now().rfc3339_seconds(),
            producer: self.producer.clone(),
            signature: None,
        };
        if let Some(signing) = &self.signing_key {
            entry_ref.signature = Some(signing.sign(REF_SIGNATURE_DOMAIN, &entry_ref.statement()));
        }
        let bytes = seal_ref(&entry_ref).map_err(|e| one_line(&e))?;
        match put_bytes_if_absent(store, cache_root, &ref_key, &bytes)? {
            PutOutcome::Created => Ok(OfferOutcome::Uploaded),
            PutOutcome::AlreadyExists => Ok(OfferOutcome::AlreadyPresent),
        }
    }
}

impl EntrySource for RemoteTier {
    fn fetch(&self, cache_root: &Path, entry_path: &EntryPath) -> FetchOutcome {
        self.try_fetch(cache_root, entry_path).unwrap_or_else(FetchOutcome::Failed)
    }

    fn offer(&self, cache_root: &Path, entry_path: &EntryPath) -> OfferOutcome {
        if !self.config.write {
            return OfferOutcome::ReadOnly;
        }
        self.try_offer(cache_root, entry_path).unwrap_or_else(OfferOutcome::Failed)
    }
}

/// The advice of a fetch that failed on what the store holds: a ref is never replaced, so
/// a damaged ref, or a ref whose entry object is damaged or gone, stays broken until the
/// ref is deleted; a producer's next upload then writes the entry object and the ref again.
fn repair(ref_key: &ObjectKey) -> String {
    format!(
        "If every lookup of it fails the same way (not a transfer error), the store's copy is \
         damaged: refs are never replaced, so delete {ref_key} from the store and a \
         producer's next upload writes the entry again"
    )
}

fn key(name: &str) -> Result<ObjectKey, String> {
    ObjectKey::new(name).map_err(|e| format!("{name}: {}", one_line(&e)))
}

/// `<cache_root>/.local`, created.
fn local_dir(cache_root: &Path) -> Result<std::path::PathBuf, String> {
    let local = cache_root.join(crate::l1::layout::LOCAL_DIR);
    fs::create_dir_all(&local).map_err(|e| e.to_string())?;
    Ok(local)
}

/// The whole object `key` of at most [`MAX_REF_BYTES`] (a ref): one GET; `Ok(None)` if
/// there is no such object.
fn get_ref_bytes(store: &dyn ObjectStore, key: &ObjectKey) -> Result<Option<Vec<u8>>, String> {
    store.get_small(key, MAX_REF_BYTES).map_err(|e| format!("{key}: {}", one_line(&e)))
}

/// Where [`get_entry_object`] put an entry object's bytes.
enum EntryBytes {
    /// No such object.
    Absent,
    /// The range, in memory (at most [`MAX_IN_MEMORY_BYTES`]).
    Memory(Vec<u8>),
    /// A temp file under `.local/` (deleted on drop) that starts with the range.
    File(tempfile::TempPath),
}

/// Entry objects up to this size are fetched into memory with one ranged GET (8 MiB;
/// entries in packs are smaller than 4 MiB).
const MAX_IN_MEMORY_BYTES: u64 = 8 * 1024 * 1024;

/// Fetches the range of `key` that `location` names: one ranged GET into memory when it
/// is small; else into a temp file, the whole object when the range starts it (an entry
/// object stored alone, downloaded in parallel parts), or ranged GETs of
/// [`MAX_IN_MEMORY_BYTES`] one after another.
fn get_entry_object(
    store: &dyn ObjectStore,
    cache_root: &Path,
    key: &ObjectKey,
    location: &EntryLocation,
) -> Result<EntryBytes, String> {
    let failed = |e: &crate::transport::Error| format!("{key}: {}", one_line(e));
    let (start, end) = (location.offset, location.offset.saturating_add(location.size_bytes));
    if location.size_bytes <= MAX_IN_MEMORY_BYTES {
        // The last request of the lookup (see `NextRequest::None`).
        return match store.get_range_with(key, start, end, NextRequest::None) {
            Ok(bytes) => Ok(EntryBytes::Memory(bytes)),
            Err(e) if e.is_not_found() => Ok(EntryBytes::Absent),
            Err(e) => Err(failed(&e)),
        };
    }
    let local = local_dir(cache_root)?;
    let (mut file, dest) =
        temp::create_file(&local, Purpose::Download, "entry", 0o600).map_err(|e| e.to_string())?;
    if start == 0 {
        return match store.get_to_file(key, &dest) {
            Ok(_) => Ok(EntryBytes::File(dest)),
            Err(e) if e.is_not_found() => Ok(EntryBytes::Absent),
            Err(e) => Err(failed(&e)),
        };
    }
    let mut at = start;
    while at < end {
        let to = end.min(at.saturating_add(MAX_IN_MEMORY_BYTES));
        let bytes = match store.get_range(key, at, to) {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => return Ok(EntryBytes::Absent),
            Err(e) => return Err(failed(&e)),
        };
        std::io::Write::write_all(&mut file, &bytes)
            .map_err(|e| format!("{}: {e}", dest.display()))?;
        at = to;
    }
    Ok(EntryBytes::File(dest))
}

/// Stores `bytes` under `key` unless an object is there.
fn put_bytes_if_absent(
    store: &dyn ObjectStore,
    cache_root: &Path,
    key: &ObjectKey,
    bytes: &[u8],
) -> Result<PutOutcome, String> {
    let local = local_dir(cache_root)?;
    let (mut file, path) =
        temp::create_file(&local, Purpose::Pack, "ref", 0o600).map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut file, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    drop(file);
    let (outcome, _) =
        store.put_file_if_absent(key, &path).map_err(|e| format!("{key}: {}", one_line(&e)))?;
    Ok(outcome)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::transport::FsStore;

    fn config(write: bool, trust: TrustPolicy) -> RemoteConfig {
        RemoteConfig {
            url: Ok(StoreUrl::directory("/unused")),
            write,
            writer_credentials: true,
            timeout: DEFAULT_TIMEOUT,
            trust,
        }
    }

    fn make_entry(root: &Path, rel: &str) {
        let dir = root.join("actions-v1").join(rel);
        std::fs::create_dir_all(dir.join("artifacts")).unwrap();
        std::fs::write(dir.join("manifest.json"), format!("{{\"entry\":\"{rel}\"}}")).unwrap();
        std::fs::write(dir.join("artifacts/lib.a"), vec![3u8; 3000]).unwrap();
    }

    #[test]
    fn config_reads_the_environment_and_rejects_bad_values() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        };
        assert!(RemoteConfig::from_env_with(env(&[])).unwrap().is_none());
        let c = RemoteConfig::from_env_with(env(&[
            ("STRATA_REMOTE_STORE", "s3://b/p?endpoint=http://127.0.0.1:1"),
            ("STRATA_REMOTE_WRITE", "1"),
            ("STRATA_REMOTE_TIMEOUT", "0.5"),
        ]))
        .unwrap()
        .unwrap();
        assert!(c.write && !c.writer_credentials && c.trust.is_empty());
        assert_eq!(c.timeout, Duration::from_millis(500));
        let bad = RemoteConfig::from_env_with(env(&[
            ("STRATA_REMOTE_STORE", "file:///x"),
            ("STRATA_REMOTE_TIMEOUT", "5s"),
        ]))
        .unwrap_err();
        assert!(bad.contains("STRATA_REMOTE_TIMEOUT"), "{bad}");
        let bad = RemoteConfig::from_env_with(env(&[
            ("STRATA_REMOTE_STORE", "file:///x"),
            ("STRATA_TRUSTED_KEYS", "not-a-key"),
        ]))
        .unwrap_err();
        assert!(bad.contains("STRATA_TRUSTED_KEYS"), "{bad}");
        assert_eq!(transport_options(DEFAULT_TIMEOUT).max_retries, 0);
    }

    #[test]
    fn offer_then_fetch_round_trips_and_refuses_untrusted_or_moved_refs() {
        let store_dir = tempfile::tempdir().unwrap();
        let store = || Box::new(FsStore::new(store_dir.path().to_path_buf()));
        let producer = tempfile::tempdir().unwrap();
        let rel = "third_party/zlib/k1";
        make_entry(producer.path(), rel);
        let keys = tempfile::tempdir().unwrap();
        let signing = SigningKey::generate(&keys.path().join("k")).unwrap();
        let trusted = TrustPolicy::new([signing.public_key().clone()]);

        // A read-only tier never writes; an unsigned producer uploads; a second offer
        // finds the ref.
        let reader = RemoteTier::with_store(config(false, TrustPolicy::default()), None, store());
        assert_eq!(
            reader.offer(producer.path(), &EntryPath::parse(rel).unwrap()),
            OfferOutcome::ReadOnly
        );
        let writer = RemoteTier::with_store(config(true, TrustPolicy::default()), None, store());
        assert_eq!(
            writer.offer(producer.path(), &EntryPath::parse(rel).unwrap()),
            OfferOutcome::Uploaded
        );
        assert_eq!(
            writer.offer(producer.path(), &EntryPath::parse(rel).unwrap()),
            OfferOutcome::AlreadyPresent
        );

        let consumer = tempfile::tempdir().unwrap();
        assert_eq!(
            reader.fetch(consumer.path(), &EntryPath::parse("third_party/zlib/none").unwrap()),
            FetchOutcome::Absent
        );
        assert_eq!(
            reader.fetch(consumer.path(), &EntryPath::parse(rel).unwrap()),
            FetchOutcome::Installed
        );
        let installed = consumer.path().join("actions-v1").join(rel);
        assert_eq!(std::fs::read(installed.join("artifacts/lib.a")).unwrap(), vec![3u8; 3000]);

        // Under a trust policy the unsigned ref is refused, and nothing is installed.
        let strict = RemoteTier::with_store(config(false, trusted.clone()), None, store());
        let other = tempfile::tempdir().unwrap();
        let FetchOutcome::Failed(why) = strict.fetch(other.path(), &EntryPath::parse(rel).unwrap())
        else {
            panic!()
        };
        assert!(why.contains("not signed"), "{why}");
        assert!(!other.path().join("actions-v1").join(rel).exists());

        // A signed ref of another entry is accepted; copied to another path's name, refused.
        let rel2 = "compile/ab/k2";
        make_entry(producer.path(), rel2);
        let signer =
            RemoteTier::with_store(config(true, TrustPolicy::default()), Some(signing), store());
        assert_eq!(
            signer.offer(producer.path(), &EntryPath::parse(rel2).unwrap()),
            OfferOutcome::Uploaded
        );
        assert_eq!(
            strict.fetch(other.path(), &EntryPath::parse(rel2).unwrap()),
            FetchOutcome::Installed
        );
        let moved = "compile/ab/k3";
        std::fs::create_dir_all(store_dir.path().join(ref_name(moved)).parent().unwrap()).unwrap();
        std::fs::copy(
            store_dir.path().join(ref_name(rel2)),
            store_dir.path().join(ref_name(moved)),
        )
        .unwrap();
        let FetchOutcome::Failed(why) =
            strict.fetch(other.path(), &EntryPath::parse(moved).unwrap())
        else {
            panic!()
        };
        assert!(why.contains("names the entry"), "{why}");
        assert!(!other.path().join("actions-v1").join(moved).exists());
    }
}
