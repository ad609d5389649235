//! `strata snapshot gc` and the leases (issue 12, item 4) on a directory store and on
//! s3s-fs: stores are crafted by hand (index records sealed with the library, v4 sidecars,
//! entry objects of random bytes: the gc only needs their names), aged by setting file
//! modification times, then collected by the real binary.

#![allow(clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use strata::digest::{ContentDigest, DigestAlgorithm};
use strata::record::Envelope;
use strata::snapshot::index::lease::{self, GuardPolicy, Lease, save_guard};
use strata::snapshot::index::names::{LeaseKind, entry_object_name, ref_name};
use strata::snapshot::index::record::{compress_index, seal_index, seal_ref};
use strata::snapshot::index::{EntryLocation, EntryRef, SnapshotIndex};
use strata::snapshot::manifest::{SIDECAR_SCHEMA, Sidecar, SnapshotKind, object_name_stem};
use strata::snapshot::{Compression, Producer};
use strata::transport::{ObjectKey, ObjectStore};

use super::{S3sServer, Scratch, strata};
use crate::transport::server::{BUCKET, fast_options};

/// Compatibility digests of two namespaces.
const NS_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const NS_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// Two hours: older than the default grace period.
const OLD: Duration = Duration::from_secs(2 * 60 * 60);

/// A strata key in namespace `compat`, made at minute `minute` of one hour.
fn key(compat: &str, minute: u32) -> String {
    format!(
        "strata-l1-schema1-{compat}-src{minute}-20261201T10{minute:02}00Z-local-1-4242-ab{minute:02}"
    )
}

/// A store under test: the library's handle, where its objects lie on disk (to age them),
/// and how the binary reaches it.
struct Fixture {
    scratch: Scratch,
    store: Box<dyn ObjectStore>,
    dir: PathBuf,
    env: Vec<(&'static str, String)>,
    _server: Option<S3sServer>,
}

impl Fixture {
    fn file() -> Self {
        let scratch = Scratch::new();
        let dir = scratch.path("store");
        std::fs::create_dir_all(&dir).unwrap();
        let url = scratch.file_store();
        let store = strata::transport::open_store(&url, &Default::default()).unwrap();
        Self { scratch, store, dir, env: vec![("STRATA_STORE", url)], _server: None }
    }

    fn s3() -> Self {
        let scratch = Scratch::new();
        let server = S3sServer::start();
        let store = server.store("gc", &fast_options());
        let dir = server.data_dir().join(BUCKET).join("gc");
        let env = super::s3_env(&server, &server.endpoint, "gc");
        Self { scratch, store, dir, env, _server: Some(server) }
    }

    fn put(&self, name: &str, bytes: &[u8]) {
        let path = self.scratch.path(&format!("upload-{}", fastrand::u64(..)));
        std::fs::write(&path, bytes).unwrap();
        self.store.put_file_if_absent(&ObjectKey::new(name).unwrap(), &path).unwrap();
        std::fs::remove_file(&path).unwrap();
    }

    /// Sets the modification time of `name` to `age` ago (the store's `Last-Modified`).
    fn age(&self, name: &str, age: Duration) {
        let file = std::fs::File::options().write(true).open(self.dir.join(name)).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    /// Every object name in the store.
    fn listing(&self) -> BTreeSet<String> {
        self.store
            .listing()
            .unwrap()
            .list("")
            .unwrap()
            .into_iter()
            .map(|m| m.key.as_str().to_owned())
            .collect()
    }

    /// An entry object of random bytes, aged [`OLD`]; returns its name.
    fn entry_object(&self, seed: u64) -> String {
        let bytes = crate::transport::random_bytes(200 + seed as usize, seed);
        let name = entry_object_name(&blake3(&bytes)).unwrap();
        self.put(&name, &bytes);
        self.age(&name, OLD);
        name
    }

    /// Publishes an index snapshot under `key` listing one entry per object in `objects`;
    /// returns the index object's name.
    fn index_snapshot(&self, key: &str, objects: &[&str]) -> String {
        let entries = objects
            .iter()
            .enumerate()
            .map(|(i, object)| location(&format!("third_party/u{i}/{key}"), object))
            .collect();
        let index = SnapshotIndex {
            key: key.into(),
            created_at: "2026-12-01T10:00:00Z".into(),
            producer: Producer::default(),
            parents: vec![],
            entries,
        };
        let (record, record_digest) = seal_index(&index).unwrap();
        let object = compress_index(&record).unwrap();
        self.snapshot(key, SnapshotKind::Index, &object, record_digest.as_str())
    }

    /// Publishes a full snapshot under `key` (any bytes: the gc never reads them).
    fn full_snapshot(&self, key: &str) -> String {
        self.snapshot(key, SnapshotKind::Full, b"full snapshot bytes", "sha256:00")
    }

    fn snapshot(&self, key: &str, kind: SnapshotKind, object: &[u8], manifest: &str) -> String {
        let name = format!("{}{:032x}", object_name_stem(key), fastrand::u128(..));
        self.put(&name, object);
        let sidecar = Sidecar {
            key: key.into(),
            object: Some(name.clone()),
            format: Compression::Zstd,
            kind,
            object_size_bytes: object.len() as u64,
            object_digest: blake3(object),
            manifest_digest: strata::record::RecordDigest::from_stored(manifest),
            entry_count: 1,
            file_count: 1,
            file_bytes: 1,
            created_at: "2026-12-01T10:00:00Z".into(),
            producer: Producer::default(),
            parents: vec![],
            signature: None,
        };
        let sealed = Envelope::seal(&SIDECAR_SCHEMA, vec![], &sidecar).unwrap();
        self.put(&format!("{key}.json"), &sealed.to_bytes());
        name
    }

    /// Writes the ref of `path` pointing at `object`, aged `age`; returns its name.
    fn entry_ref(&self, path: &str, object: &str, age: Duration) -> String {
        let entry_ref = EntryRef {
            location: location(path, object),
            created_at: "2026-12-01T10:00:00Z".into(),
            producer: Producer::default(),
            signature: None,
        };
        let name = ref_name(path);
        self.put(&name, &seal_ref(&entry_ref).unwrap());
        self.age(&name, age);
        name
    }

    /// Runs `strata snapshot gc --json` with `args`.
    fn gc(&self, args: &[&str]) -> Value {
        let mut all = vec!["snapshot", "gc", "--json"];
        all.extend_from_slice(args);
        let run = strata(&self.scratch, &all, &self.env);
        run.assert_ok();
        run.assert_no_secret(&self.env.iter().skip(1).map(|(_, v)| v.as_str()).collect::<Vec<_>>());
        run.json()
    }
}

fn blake3(bytes: &[u8]) -> ContentDigest {
    ContentDigest::of_bytes(DigestAlgorithm::Blake3, bytes)
}

fn location(path: &str, object: &str) -> EntryLocation {
    EntryLocation {
        path: path.into(),
        manifest_digest: blake3(path.as_bytes()),
        object: object.into(),
        offset: 0,
        size_bytes: 10,
        digest: blake3(object.as_bytes()),
        file_count: 1,
        file_bytes: 1,
    }
}

/// The names of a report's deletions of `class` (`sidecar`, `entry_object`, …).
fn deleted(report: &Value, class: &str) -> BTreeSet<String> {
    report["deletions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["class"] == class)
        .map(|d| d["name"].as_str().unwrap().to_owned())
        .collect()
}

/// What the main scenario expects to stay and to go.
struct Scenario {
    gone: BTreeSet<String>,
    before: BTreeSet<String>,
}

/// Namespace A: five index snapshots (minutes 1..5), each with an entry object of its own
/// plus one shared by all; namespace B: two full snapshots; a key of another tool and a
/// non-strata index key that references one more entry object; refs; unreferenced entry
/// objects, old and young.
fn scenario(f: &Fixture) -> Scenario {
    let mut gone = BTreeSet::new();
    let shared = f.entry_object(1000);
    for minute in 1..=5u32 {
        let own = f.entry_object(u64::from(minute));
        let key = key(NS_A, minute);
        let object = f.index_snapshot(&key, &[&own, &shared]);
        if minute <= 3 {
            gone.extend([format!("{key}.json"), object, own]);
        }
    }
    for minute in 1..=2u32 {
        f.full_snapshot(&key(NS_B, minute));
    }
    // Another tool's objects, and an index under a key that is not strata's grammar.
    f.put("other-tool-cache.json", b"{\"not\": \"a sidecar\"}");
    f.put("other-tool-cache", b"bytes");
    let custom = f.entry_object(2000);
    f.index_snapshot("my-custom-key", &[&custom]);
    // Unreferenced entry objects: an old one goes, a young one stays.
    let orphan = f.entry_object(3000);
    gone.insert(orphan.clone());
    let young = f.entry_object(3001);
    f.age(&young, Duration::from_secs(60));
    // Refs: to a swept object (goes), to a kept one (stays), to nothing (goes), and a
    // young one to nothing (stays).
    gone.insert(f.entry_ref("third_party/r/1", &orphan, OLD));
    f.entry_ref("third_party/r/2", &shared, OLD);
    let missing = entry_object_name(&blake3(b"never uploaded")).unwrap();
    gone.insert(f.entry_ref("third_party/r/3", &missing, OLD));
    f.entry_ref("third_party/r/4", &missing, Duration::from_secs(60));
    Scenario { gone, before: f.listing() }
}

fn check_scenario(f: &Fixture, dry_args: &[&str], args: &[&str]) {
    let s = scenario(f);
    let dry = f.gc(dry_args);
    assert_eq!(dry["status"], "dry_run");
    assert_eq!(f.listing(), s.before, "a dry run deletes nothing");
    let report = f.gc(args);
    assert_eq!(report["status"], "done", "{report:#}");
    assert_eq!(report["deletions"], dry["deletions"], "the dry run plans exactly the run");
    assert_eq!(report["failures"], serde_json::json!([]));
    let expected: BTreeSet<String> = s.before.difference(&s.gone).cloned().collect();
    assert_eq!(f.listing(), expected, "{report:#}");
    assert_eq!(report["deleted"]["sidecars"], 3);
    assert_eq!(report["deleted"]["snapshot_objects"], 3);
    assert_eq!(report["deleted"]["entry_objects"], 4);
    assert_eq!(report["deleted"]["refs"], 2);
    let sizes: u64 = report["deletions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["size_bytes"].as_u64().unwrap())
        .sum();
    assert!(sizes > 0);
    assert_eq!(report["bytes_freed"], sizes);
    let namespaces = report["namespaces"].as_array().unwrap();
    assert_eq!(namespaces.len(), 2);
    assert_eq!(namespaces[0]["kept"], serde_json::json!([key(NS_A, 5), key(NS_A, 4)]));
    assert_eq!(namespaces[1]["deleted"], serde_json::json!([]));
    // A second run finds nothing more to do.
    let again = f.gc(args);
    assert_eq!(again["deletions"], serde_json::json!([]), "{again:#}");
}

#[test]
fn keeps_newest_per_namespace_and_sweeps_what_no_kept_index_references() {
    let f = Fixture::file();
    check_scenario(&f, &["--keep", "2", "--dry-run"], &["--keep", "2"]);
}

#[test]
fn s3_keeps_newest_per_namespace_and_sweeps_what_no_kept_index_references() {
    let f = Fixture::s3();
    check_scenario(&f, &["--keep", "2", "--dry-run"], &["--keep", "2"]);
}

#[test]
fn full_snapshots_beyond_keep_go_with_their_objects_and_prefix_limits_pruning() {
    let f = Fixture::file();
    let objects: Vec<String> = (1..=3).map(|m| f.full_snapshot(&key(NS_A, m))).collect();
    let b_objects: Vec<String> = (1..=3).map(|m| f.full_snapshot(&key(NS_B, m))).collect();
    let prefix = format!("strata-l1-schema1-{NS_A}-");
    let report = f.gc(&["--keep", "1", "--prefix", &prefix]);
    let listing = f.listing();
    for (i, object) in objects.iter().enumerate() {
        let kept = i == 2;
        assert_eq!(listing.contains(object), kept, "{object}");
        assert_eq!(listing.contains(&format!("{}.json", key(NS_A, i as u32 + 1))), kept);
    }
    assert!(b_objects.iter().all(|o| listing.contains(o)), "namespace B is outside --prefix");
    assert_eq!(report["deleted"]["sidecars"], 2);
    assert_eq!(report["deleted"]["snapshot_objects"], 2);
}

#[test]
fn a_kept_index_that_does_not_verify_keeps_every_entry_object() {
    let f = Fixture::file();
    let own: Vec<String> = (1..=3).map(|s| f.entry_object(s)).collect();
    let mut index_objects = Vec::new();
    for minute in 1..=3u32 {
        index_objects.push(f.index_snapshot(&key(NS_A, minute), &[&own[minute as usize - 1]]));
    }
    let orphan = f.entry_object(99);
    // Flip a byte of the newest (kept) index object.
    let path = f.dir.join(&index_objects[2]);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[5] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let report = f.gc(&["--keep", "1"]);
    assert_eq!(report["sweep_skipped"], true);
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("does not verify") && warnings.contains(&key(NS_A, 3)), "{warnings}");
    assert_eq!(report["deleted"]["entry_objects"], 0);
    let listing = f.listing();
    assert!(own.iter().all(|o| listing.contains(o)) && listing.contains(&orphan));
    // Pruning still happened: the two older snapshots are gone.
    assert_eq!(report["deleted"]["sidecars"], 2);
    assert!(!listing.contains(&index_objects[0]) && listing.contains(&index_objects[2]));
}

#[test]
fn a_live_save_lease_makes_gc_busy_and_a_stale_one_is_removed() {
    let f = Fixture::file();
    let entries: Vec<String> = (1..=3).map(|s| f.entry_object(s)).collect();
    for minute in 1..=3u32 {
        f.index_snapshot(&key(NS_A, minute), &[&entries[minute as usize - 1]]);
    }
    let save = Lease::acquire(f.store.as_ref(), LeaseKind::Save, &Producer::default()).unwrap();
    let before = f.listing();
    let report = f.gc(&["--keep", "1", "--grace", "0s"]);
    assert_eq!(report["status"], "busy");
    assert_eq!(report["busy_leases"], serde_json::json!([save.name()]));
    assert_eq!(f.listing(), before, "a busy gc changes nothing");
    let text = strata(&f.scratch, &["snapshot", "gc", "--keep", "1"], &f.env);
    text.assert_ok();
    assert!(text.stderr.contains("BUSY"), "{}", text.stderr);

    // The holder crashed long ago: its lease is stale, ignored and deleted.
    let name = save.name().to_owned();
    std::mem::forget(save);
    f.age(&name, lease::SAVE_LEASE_TTL + Duration::from_secs(60));
    let report = f.gc(&["--keep", "1", "--grace", "0s"]);
    assert_eq!(report["status"], "done", "{report:#}");
    assert_eq!(deleted(&report, "lease"), BTreeSet::from([name.clone()]));
    assert_eq!(report["deleted"]["entry_objects"], 2);
    let listing = f.listing();
    assert!(!listing.contains(&name));
    assert!(listing.iter().all(|n| !n.starts_with("~leases/")), "the gc released its own lease");
}

#[test]
fn save_guard_waits_for_a_live_gc_then_reports_busy() {
    let f = Fixture::file();
    let store = f.store.as_ref();
    let gc = Lease::acquire(store, LeaseKind::Gc, &Producer::default()).unwrap();
    let policy = GuardPolicy {
        wait: Duration::from_millis(600),
        poll: Duration::from_millis(100),
        ..GuardPolicy::default()
    };
    let started = Instant::now();
    let guard = save_guard(store, &Producer::default(), &policy).unwrap();
    assert!(guard.is_none(), "a live gc lease makes the save skip");
    assert!(
        started.elapsed() >= Duration::from_millis(600)
            && started.elapsed() < Duration::from_secs(5)
    );
    let now = SystemTime::now();
    assert!(
        lease::active(store.listing().unwrap(), LeaseKind::Save, lease::SAVE_LEASE_TTL, now)
            .unwrap()
            .is_empty()
    );

    // A gc that finishes while the save waits lets it through.
    let long = GuardPolicy { wait: Duration::from_secs(20), ..policy };
    let started = Instant::now();
    let guard = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(400));
            gc.release().unwrap();
        });
        save_guard(store, &Producer::default(), &long).unwrap()
    });
    let guard = guard.expect("the gc finished: the save goes ahead");
    assert!(
        started.elapsed() >= Duration::from_millis(400)
            && started.elapsed() < Duration::from_secs(10)
    );
    assert_eq!(
        lease::active(
            store.listing().unwrap(),
            LeaseKind::Save,
            lease::SAVE_LEASE_TTL,
            SystemTime::now()
        )
        .unwrap()
        .len(),
        1
    );
    guard.release().unwrap();

    // A stale gc lease (a crashed gc) is ignored.
    let crashed = Lease::acquire(store, LeaseKind::Gc, &Producer::default()).unwrap();
    let name = crashed.name().to_owned();
    std::mem::forget(crashed);
    f.age(&name, lease::GC_LEASE_TTL + Duration::from_secs(1));
    let started = Instant::now();
    let guard = save_guard(store, &Producer::default(), &long).unwrap();
    assert!(guard.is_some() && started.elapsed() < Duration::from_secs(2));
    assert!(GuardPolicy::from_env(|_| Some("x".into())).unwrap_err().is_usage());
    assert_eq!(
        GuardPolicy::from_env(|n| (n == "STRATA_GC_WAIT").then(|| "5".into())).unwrap().wait,
        Duration::from_secs(5)
    );
}

/// A save that holds its lease uploads a new entry object; a gc (grace 0, so only the
/// lease protects) starts meanwhile and waits; the save commits its index and releases;
/// the gc then runs and keeps what the save committed.
#[test]
fn gc_racing_a_save_loses_nothing_the_save_commits() {
    race(&Fixture::file());
}

#[test]
fn s3_gc_racing_a_save_loses_nothing_the_save_commits() {
    race(&Fixture::s3());
}

fn race(f: &Fixture) {
    for minute in 1..=3u32 {
        let own = f.entry_object(u64::from(minute));
        f.index_snapshot(&key(NS_A, minute), &[&own]);
    }
    let store = f.store.as_ref();
    let guard = save_guard(store, &Producer::default(), &GuardPolicy::default())
        .unwrap()
        .expect("no gc runs");
    let new_entry = f.entry_object(77);
    let before = f.listing();
    let mut command = super::strata_command(
        &f.scratch,
        f.scratch.dir.path(),
        &["snapshot", "gc", "--json", "--keep", "1", "--grace", "0s", "--wait", "30"],
        &f.env,
    );
    let child = command.stdout(std::process::Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let waiting = f.listing();
    let gc_leases = waiting.iter().filter(|n| n.starts_with("~leases/gc-")).count();
    assert!(gc_leases <= 1, "{waiting:?}");
    let unchanged: BTreeSet<String> =
        waiting.into_iter().filter(|n| !n.starts_with("~leases/gc-")).collect();
    assert_eq!(unchanged, before, "the gc deletes nothing while the save holds its lease");
    let new_index = f.index_snapshot(&key(NS_A, 9), &[&new_entry]);
    guard.release().unwrap();
    let started = Instant::now();
    let run = super::run_of(child.wait_with_output().unwrap());
    run.assert_ok();
    assert!(started.elapsed() < Duration::from_secs(20));
    let report = run.json();
    assert_eq!(report["status"], "done", "{report:#}");
    let listing = f.listing();
    assert!(listing.contains(&new_entry) && listing.contains(&new_index), "{report:#}");
    assert!(listing.contains(&format!("{}.json", key(NS_A, 9))));
    assert_eq!(report["deleted"]["entry_objects"], 3, "{report:#}");
}

#[test]
fn gc_refuses_bad_flags_and_s3_without_writer_credentials() {
    let f = Fixture::file();
    let zero = strata(&f.scratch, &["snapshot", "gc", "--keep", "0"], &f.env);
    assert_eq!(zero.code, 2, "{}", zero.stderr);
    let grace = strata(&f.scratch, &["snapshot", "gc", "--keep", "1", "--grace", "1y"], &f.env);
    assert_eq!(grace.code, 2, "{}", grace.stderr);
    let url = "s3://bucket/p?endpoint=http://127.0.0.1:9&region=us-east-1";
    let run = strata(&f.scratch, &["snapshot", "gc", "--keep", "1", "--store", url], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("writer credentials"), "{}", run.stderr);
}

#[test]
fn a_strata_sidecar_that_does_not_load_blocks_the_sweep_and_foreign_json_does_not() {
    let f = Fixture::file();
    let own = f.entry_object(1);
    f.index_snapshot(&key(NS_A, 1), &[&own]);
    let orphan = f.entry_object(2);
    // Another tool's JSON, too large to be a sidecar: ignored, never downloaded.
    f.put("tool-state.json", &vec![b' '; 2 * 1024 * 1024]);
    let report = f.gc(&["--keep", "1"]);
    assert_eq!(deleted(&report, "entry_object"), BTreeSet::from([orphan.clone()]));
    assert_eq!(report["warnings"], serde_json::json!([]));

    let orphan = f.entry_object(3);
    f.put(&format!("{}.json", key(NS_A, 2)), b"{\"not\": \"a sidecar record\"}");
    let report = f.gc(&["--keep", "1"]);
    assert_eq!(report["sweep_skipped"], true);
    assert!(report["warnings"].to_string().contains("does not load"), "{report:#}");
    assert!(f.listing().contains(&orphan) && f.listing().contains(&own));
    assert!(f.listing().contains("tool-state.json"));
}

/// A ref written first (by the remote tier, say) may name another object than the one a
/// later index snapshot lists for the same entry: while a kept index lists the entry, the
/// ref and the object it names stay, however old (else the tier would miss an entry the
/// snapshot still has).
#[test]
fn refs_of_entries_a_kept_index_lists_stay_with_their_objects() {
    let f = Fixture::file();
    let first = f.entry_object(10);
    let packed = f.entry_object(11);
    let kept = key(NS_A, 2);
    f.index_snapshot(&kept, &[&packed]);
    let entry_ref = f.entry_ref(&format!("third_party/u0/{kept}"), &first, OLD);
    // An old ref of an entry no kept index lists goes, with its object.
    let stale_object = f.entry_object(12);
    let stale_ref = f.entry_ref("third_party/gone/x", &stale_object, OLD);
    let report = f.gc(&["--keep", "1"]);
    assert_eq!(report["status"], "done", "{report:#}");
    let listing = f.listing();
    for name in [&first, &packed, &entry_ref] {
        assert!(listing.contains(name), "{name} was deleted: {report:#}");
    }
    assert_eq!(deleted(&report, "ref"), BTreeSet::from([stale_ref]));
    assert_eq!(deleted(&report, "entry_object"), BTreeSet::from([stale_object]));
}

/// A snapshot dated more than a day ahead (a wrong clock, a crafted key), which restores
/// ignore, is neither counted among the kept nor deleted, and its entry objects stay; the
/// snapshots restores use are ranked as if it were not there.
#[test]
fn a_future_dated_snapshot_neither_takes_a_kept_place_nor_goes() {
    let f = Fixture::file();
    let future = format!("strata-l1-schema1-{NS_A}-srcF-20301201T000000Z-local-1-4242-abff");
    let future_object = f.entry_object(20);
    let future_index = f.index_snapshot(&future, &[&future_object]);
    let older = key(NS_A, 1);
    let newer = key(NS_A, 2);
    let older_object = f.entry_object(21);
    let newer_object = f.entry_object(22);
    f.index_snapshot(&older, &[&older_object]);
    f.index_snapshot(&newer, &[&newer_object]);
    let report = f.gc(&["--keep", "1"]);
    assert_eq!(report["status"], "done", "{report:#}");
    let namespace = &report["namespaces"][0];
    assert_eq!(namespace["kept"], serde_json::json!([newer]), "{report:#}");
    assert_eq!(namespace["deleted"], serde_json::json!([older]), "{report:#}");
    let listing = f.listing();
    for name in [format!("{future}.json"), future_index, future_object, newer_object] {
        assert!(listing.contains(&name), "{name} was deleted: {report:#}");
    }
    assert!(!listing.contains(&older_object));
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains(&future) && warnings.contains("in the future"), "{warnings}");
}
