//! Index snapshots end to end (docs/snapshots.md "Index snapshots"): a real cache
//! (engine entries from `strata action run`, a launcher entry from `strata gcc -c`) saved
//! as entry objects plus an index and restored byte-identical through both backends; a
//! second save uploads only new entries; a restore fetches only missing ones; damaged
//! entry objects are skipped (a later MISS), a damaged index rejects its candidate, a 500
//! on a ranged GET is retried or skipped, and an entry object reaching outside its entry
//! is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use strata::snapshot::index::record::{
    EntryLocation, SnapshotIndex, compress_index, load_index, seal_index,
};

use super::super::transport::proxy::{Fault, FaultProxy, Rule};
use super::super::transport::server::url_for;
use super::roundtrip::compile;
use super::{Run, S3sServer, Scratch, fill_cache, key, s3_env, strata, tree};

const SOURCE: &str = "int answer(void) { return 42; }\n";

fn arg(path: &Path) -> String {
    path.display().to_string()
}

/// `env` with the index format selected.
fn indexed(env: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut env = env.to_vec();
    env.push(("STRATA_SNAPSHOT_FORMAT", "index".to_owned()));
    env
}

fn save(scratch: &Scratch, cache: &Path, key: &str, env: &[(&'static str, String)]) -> Value {
    let run = strata(
        scratch,
        &["snapshot", "save", "--cache-dir", &arg(cache), "--key", key, "--json"],
        &indexed(env),
    );
    run.assert_ok();
    let v = run.json();
    assert_eq!(
        (v["outcome"]["status"].as_str(), v["kind"].as_str()),
        (Some("saved"), Some("index")),
        "{v}\n{}",
        run.stderr
    );
    v
}

fn restore(
    scratch: &Scratch,
    cache: &Path,
    key: &str,
    env: &[(&'static str, String)],
) -> (Run, Value) {
    let run = strata(
        scratch,
        &["snapshot", "restore", "--cache-dir", &arg(cache), "--key", key, "--json"],
        &indexed(env),
    );
    run.assert_ok();
    let v = run.json();
    (run, v)
}

/// The tree of `actions-v1/` without the machine-local `.last-used` files (not carried).
fn entry_tree(cache: &Path) -> BTreeMap<String, String> {
    tree(&cache.join("actions-v1"))
        .into_iter()
        .filter(|(path, _)| !path.split('/').any(|c| c == ".last-used"))
        .collect()
}

/// The index record the last save or restore of `cache` wrote.
fn local_index(cache: &Path) -> SnapshotIndex {
    let bytes = std::fs::read(cache.join(".local/snapshot-index.json")).unwrap();
    load_index(&bytes, "test").unwrap().0
}

/// A launcher entry: `strata gcc -c x.c -o x.o` with `cache`.
fn launcher_compile(cache: &Path, dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("x.c"), "int x(void) { return 1; }\n").unwrap();
    let launcher = crate::launcher::Launcher::new(cache);
    let (result, outcome) = launcher.compile(dir, &["gcc", "-c", "x.c", "-o", "x.o"]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    outcome
}

fn entry_objects(store: &Path) -> BTreeMap<String, std::time::SystemTime> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(store.join("~entries")).min_depth(2) {
        let e = e.unwrap();
        out.insert(
            e.file_name().to_string_lossy().into_owned(),
            e.metadata().unwrap().modified().unwrap(),
        );
    }
    out
}

fn round_trip(scratch: &Scratch, env: &[(&'static str, String)], store_dir: Option<&Path>) {
    crate::launcher::require_tool("gcc", "apt-get install gcc");
    let a = scratch.path("runner-a");
    let a_cache = a.join("cache");
    let cold = compile(scratch, &a_cache, &a, SOURCE);
    assert!(cold.stderr.contains("strata: MISS"), "{}", cold.stderr);
    assert_eq!(launcher_compile(&a_cache, &a.join("tu")), "miss");
    fill_cache(&a_cache, 1);
    fill_cache(&a_cache, 2);
    let k1 = key(scratch, "src1");
    let saved = save(scratch, &a_cache, &k1, env);
    let counts = &saved["index"];
    assert_eq!(
        (counts["entries"].as_u64(), counts["new"].as_u64(), counts["reused"].as_u64()),
        (Some(4), Some(4), Some(0)),
        "{saved}"
    );
    assert_eq!(counts["not_carried"], 0, "{saved}");

    // Runner B: an empty cache gets every entry, byte-identical, and the compile HITs.
    let b = scratch.path("runner-b/work");
    let b_cache = b.join("l1");
    let (_, restored) = restore(scratch, &b_cache, &key(scratch, "src1"), env);
    assert_eq!(
        (restored["status"].as_str(), restored["kind"].as_str()),
        (Some("restored"), Some("index")),
        "{restored}"
    );
    assert_eq!(
        (
            restored["index"]["fetched"].as_u64(),
            restored["index"]["present"].as_u64(),
            restored["index"]["failed"].as_u64()
        ),
        (Some(4), Some(0), Some(0)),
        "{restored}"
    );
    assert_eq!(entry_tree(&b_cache), entry_tree(&a_cache));
    assert!(b_cache.join(".local/snapshot-origin.json").is_file());
    let warm = compile(scratch, &b_cache, &b, SOURCE);
    assert!(warm.stderr.contains("strata: HIT"), "{}", warm.stderr);
    assert_eq!(launcher_compile(&b_cache, &b.join("tu")), "hit");

    // A second save after two new entries uploads only those (one pack), nothing else.
    let before = store_dir.map(entry_objects);
    fill_cache(&a_cache, 3);
    fill_cache(&a_cache, 4);
    let k2 = key(scratch, "src2");
    let saved = save(scratch, &a_cache, &k2, env);
    let counts = &saved["index"];
    assert_eq!(
        (counts["entries"].as_u64(), counts["new"].as_u64(), counts["reused"].as_u64()),
        (Some(6), Some(2), Some(4)),
        "{saved}"
    );
    assert_eq!(counts["objects_uploaded"], 1, "{saved}");
    let uploaded = counts["bytes_uploaded"].as_u64().unwrap();
    assert!((600_000..700_000).contains(&uploaded), "two 300 kB entries, got {uploaded}");
    if let (Some(store), Some(before)) = (store_dir, before) {
        let after = entry_objects(store);
        assert_eq!(after.len(), before.len() + 1, "one new pack");
        for (name, modified) in &before {
            assert_eq!(after.get(name), Some(modified), "{name} was not rewritten");
        }
    }

    // Restore onto B, which holds four of the six: only the two new ones are fetched.
    let (_, restored) = restore(scratch, &b_cache, &k2, env);
    let index = &restored["index"];
    assert_eq!(
        (index["present"].as_u64(), index["fetched"].as_u64(), index["failed"].as_u64()),
        (Some(4), Some(2), Some(0)),
        "{restored}"
    );
    let downloaded = index["bytes_downloaded"].as_u64().unwrap();
    assert!(downloaded < uploaded + 10_000, "downloaded {downloaded} for {uploaded} new bytes");
    assert_eq!(entry_tree(&b_cache), entry_tree(&a_cache));
}

#[test]
fn index_round_trip_through_the_directory_store() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    round_trip(&scratch, &env, Some(&scratch.path("store")));
}

#[test]
fn index_round_trip_through_s3() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let env = s3_env(&server, &server.endpoint, "ci/l1");
    round_trip(&scratch, &env, None);
}

/// The store file holding `entry`'s bytes and the offset of its middle byte.
fn middle_of(store: &Path, entry: &EntryLocation) -> (PathBuf, u64) {
    (store.join(&entry.object), entry.offset + entry.size_bytes / 2)
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn index_a_damaged_entry_is_skipped_and_rebuilt_later() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let a = scratch.path("a");
    let a_cache = a.join("cache");
    compile(&scratch, &a_cache, &a, SOURCE);
    fill_cache(&a_cache, 1);
    fill_cache(&a_cache, 2);
    let k = key(&scratch, "src1");
    save(&scratch, &a_cache, &k, &env);
    let index = local_index(&a_cache);
    let hello = index.entries.iter().find(|e| e.path.starts_with("third_party/hello/")).unwrap();
    let (object, at) = middle_of(&scratch.path("store"), hello);
    flip(&object, at);

    let b = scratch.path("b");
    let b_cache = b.join("cache");
    let (run, v) = restore(&scratch, &b_cache, &k, &env);
    // Skipped entries make a restore partial (issue 26 item 4).
    assert_eq!(v["status"], "partial", "{v}");
    assert_eq!(
        (v["index"]["fetched"].as_u64(), v["index"]["failed"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    assert!(run.stderr.contains(&hello.path) && run.stderr.contains("skipped"), "{}", run.stderr);
    assert!(!b_cache.join("actions-v1").join(&hello.path).exists());
    for e in index.entries.iter().filter(|e| e.path != hello.path) {
        assert!(
            b_cache.join("actions-v1").join(&e.path).join("manifest.json").is_file(),
            "{}",
            e.path
        );
    }
    // Nothing half-made is left in the cache.
    let staging: Vec<_> = std::fs::read_dir(b_cache.join(".local"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".entry"))
        .collect();
    assert!(staging.is_empty(), "{staging:?}");
    let rebuilt = compile(&scratch, &b_cache, &b, SOURCE);
    assert!(rebuilt.stderr.contains("strata: MISS"), "{}", rebuilt.stderr);
}

#[test]
fn index_a_truncated_entry_object_skips_what_it_lost() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let cache = scratch.path("a/cache");
    for seed in 1..=3 {
        fill_cache(&cache, seed);
    }
    std::fs::write(cache.join(".updated"), b"").unwrap();
    // A file outside every entry is not carried, and the save says so.
    std::fs::write(cache.join("actions-v1/third_party/stray.o"), b"x").unwrap();
    let k = key(&scratch, "src1");
    let saved = save(&scratch, &cache, &k, &env);
    assert_eq!(saved["index"]["not_carried"], 1, "{saved}");
    assert!(saved["notes"][0].as_str().unwrap().contains("--format full"), "{saved}");
    let index = local_index(&cache);
    let last = index.entries.iter().max_by_key(|e| e.offset).unwrap();
    let object = scratch.path("store").join(&last.object);
    let bytes = std::fs::read(&object).unwrap();
    std::fs::write(&object, &bytes[..bytes.len() - 100]).unwrap();

    let b_cache = scratch.path("b/cache");
    let (_, v) = restore(&scratch, &b_cache, &k, &env);
    // Skipped entries make a restore partial (issue 26 item 4).
    assert_eq!(v["status"], "partial", "{v}");
    assert_eq!(
        (v["index"]["fetched"].as_u64(), v["index"]["failed"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    assert!(!b_cache.join("actions-v1").join(&last.path).exists());
}

#[test]
fn index_a_damaged_index_falls_through_to_an_older_snapshot() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 1);
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let old = key(&scratch, "src1");
    save(&scratch, &cache, &old, &env);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    fill_cache(&cache, 2);
    let new = key(&scratch, "src1");
    save(&scratch, &cache, &new, &env);
    let sidecar: Value = serde_json::from_slice(
        &std::fs::read(scratch.path("store").join(format!("{new}.json"))).unwrap(),
    )
    .unwrap();
    let object = sidecar["payload"]["object"].as_str().unwrap_or_else(|| panic!("{sidecar}"));
    let path = scratch.path("store").join(object);
    let len = std::fs::metadata(&path).unwrap().len();
    flip(&path, len / 2);

    let b_cache = scratch.path("b/cache");
    let (_, v) = restore(&scratch, &b_cache, &key(&scratch, "src1"), &env);
    assert_eq!(
        (v["status"].as_str(), v["matched_key"].as_str()),
        (Some("restored"), Some(old.as_str())),
        "{v}"
    );
    assert_eq!(v["rejected"][0]["key"], new.as_str(), "{v}");
    assert_eq!(v["index"]["fetched"], 1, "{v}");
}

#[test]
fn index_a_500_on_a_ranged_get_is_retried_or_skipped() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let direct = s3_env(&server, &server.endpoint, "l1");
    let cache = scratch.path("a/cache");
    for seed in 1..=4 {
        fill_cache(&cache, seed);
    }
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let k = key(&scratch, "src1");
    save(&scratch, &cache, &k, &direct);
    let index = local_index(&cache);
    assert_eq!(
        index.entries.iter().map(|e| &e.object).collect::<std::collections::BTreeSet<_>>().len(),
        1,
        "one pack"
    );

    // A cache holding three of the four: one entry, a quarter of the pack, is a ranged GET.
    let prepare = |name: &str| {
        let b_cache = scratch.path(name);
        for seed in 1..=3 {
            fill_cache(&b_cache, seed);
        }
        b_cache
    };
    let via = |times| {
        let rule =
            Rule { method: "GET", contains: "range=bytes=", fault: Fault::ServerError, times };
        FaultProxy::start(&server.endpoint, vec![rule])
    };
    let proxy = via(Some(1));
    let mut env = direct.clone();
    env[0].1 = url_for(&proxy.endpoint, "l1");
    let b_cache = prepare("b/cache");
    let (_, v) = restore(&scratch, &b_cache, &k, &env);
    assert_eq!(
        (
            v["index"]["fetched"].as_u64(),
            v["index"]["failed"].as_u64(),
            v["index"]["ranged_gets"].as_u64()
        ),
        (Some(1), Some(0), Some(1)),
        "{v}"
    );
    assert!(v["retries"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(entry_tree(&b_cache), entry_tree(&cache));

    let proxy = via(None);
    env[0].1 = url_for(&proxy.endpoint, "l1");
    let c_cache = prepare("c/cache");
    let (run, v) = restore(&scratch, &c_cache, &k, &env);
    // Skipped entries make a restore partial (issue 26 item 4).
    assert_eq!(v["status"], "partial", "{v}");
    assert_eq!(
        (v["index"]["fetched"].as_u64(), v["index"]["failed"].as_u64()),
        (Some(0), Some(1)),
        "{v}"
    );
    assert!(run.stderr.contains("skipped"), "{}", run.stderr);
}

#[test]
fn index_an_entry_object_reaching_outside_its_entry_is_refused() {
    use strata::snapshot::pack::{PackOptions, pack};
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    // The object claims to be the entry zlib/<k> but also holds third_party/other/evil.
    let src = scratch.path("crafted");
    fill_cache(&src, 1);
    let evil = src.join("actions-v1/third_party/other/evil");
    std::fs::create_dir_all(&evil).unwrap();
    std::fs::write(evil.join("manifest.json"), b"{}").unwrap();
    let path = format!("third_party/zlib/{:064x}", 1);
    let out = scratch.path("object");
    let options = PackOptions {
        threads: 1,
        ..PackOptions::new(
            strata::snapshot::key::ManifestKey::parse(&format!("entry:{path}")).unwrap(),
        )
    };
    let packed = pack(&src, &out, &options).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    let digest =
        strata::digest::ContentDigest::of_bytes(strata::digest::DigestAlgorithm::Blake3, &bytes);
    let object = strata::snapshot::index::names::entry_object_name(&digest).unwrap();
    let store = scratch.path("store");
    std::fs::create_dir_all(store.join(&object).parent().unwrap()).unwrap();
    std::fs::write(store.join(&object), &bytes).unwrap();
    let manifest = std::fs::read(src.join("actions-v1").join(&path).join("manifest.json")).unwrap();
    let location = EntryLocation {
        path: path.clone(),
        manifest_digest: strata::digest::ContentDigest::of_bytes(
            strata::digest::DigestAlgorithm::Blake3,
            &manifest,
        ),
        object,
        offset: 0,
        size_bytes: bytes.len() as u64,
        digest,
        file_count: packed.manifest.file_count(),
        file_bytes: packed.manifest.file_bytes,
    };
    let k = key(&scratch, "src1");
    publish_index(&store, &k, vec![location]);

    let b_cache = scratch.path("b/cache");
    let (run, v) = restore(&scratch, &b_cache, &k, &env);
    // Its only entry refused, nothing of the snapshot is here: the candidate is rejected.
    assert_eq!(v["status"], "error", "{v}");
    assert!(v["rejected"][0]["reason"].to_string().contains("none of its 1 entries"), "{v}");
    // The first member outside the entry's directory stops the unpack, before anything
    // of it is written.
    let outside = format!("is outside actions-v1/{path}/");
    assert!(run.stderr.contains(&outside), "{}", run.stderr);
    assert!(!b_cache.join("actions-v1/third_party/other").exists());
    assert!(!b_cache.join("actions-v1").join(&path).exists());
}

/// Publishes an unsigned index snapshot of `entries` under `key` in the directory store.
fn publish_index(store: &Path, key: &str, entries: Vec<EntryLocation>) {
    use strata::snapshot::manifest::{SIDECAR_SCHEMA, Sidecar, SnapshotKind, object_name_stem};
    let index = SnapshotIndex {
        key: key.to_owned(),
        created_at: "2026-12-01T00:00:00Z".to_owned(),
        producer: Default::default(),
        parents: vec![],
        entries,
    };
    let (record, digest) = seal_index(&index).unwrap();
    let compressed = compress_index(&record).unwrap();
    let name = format!("{}{}", object_name_stem(key), "0".repeat(32));
    std::fs::write(store.join(&name), &compressed).unwrap();
    let sidecar = Sidecar {
        key: key.to_owned(),
        object: Some(name),
        format: strata::snapshot::Compression::Zstd,
        kind: SnapshotKind::Index,
        object_size_bytes: compressed.len() as u64,
        object_digest: strata::digest::ContentDigest::of_bytes(
            strata::digest::DigestAlgorithm::Blake3,
            &compressed,
        ),
        manifest_digest: digest,
        entry_count: index.entries.len() as u64,
        file_count: index.file_count(),
        file_bytes: index.file_bytes(),
        created_at: index.created_at.clone(),
        producer: Default::default(),
        parents: vec![],
        signature: None,
    };
    let sealed = strata::record::Envelope::seal(&SIDECAR_SCHEMA, vec![], &sidecar).unwrap();
    std::fs::write(store.join(format!("{key}.json")), sealed.to_bytes()).unwrap();
}

#[test]
fn index_snapshots_are_signed_and_trust_is_checked_on_the_sidecar() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let keygen = |name: &str| {
        let out = scratch.path(name);
        let run = strata(&scratch, &["key", "generate", "--out", &arg(&out)], &[]);
        run.assert_ok();
        (run.stdout.trim().to_owned(), arg(&out))
    };
    let (public, secret_file) = keygen("producer.key");
    let (other, _) = keygen("other.key");
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 1);
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let k = key(&scratch, "src1");
    let run = strata(
        &scratch,
        &[
            "snapshot",
            "save",
            "--cache-dir",
            &arg(&cache),
            "--key",
            &k,
            "--signing-key",
            &secret_file,
            "--json",
        ],
        &indexed(&env),
    );
    run.assert_ok();
    assert_eq!(run.json()["kind"], "index", "{}", run.stdout);
    // The entry ref is signed too.
    let index = local_index(&cache);
    let ref_path = scratch
        .path("store")
        .join(strata::snapshot::index::names::ref_name(&index.entries[0].path));
    let entry_ref =
        strata::snapshot::index::record::load_ref(&std::fs::read(ref_path).unwrap()).unwrap();
    assert!(entry_ref.signature.is_some());

    let with_trust = |dir: &str, trusted: &str| {
        let mut env = indexed(&env);
        env.push(("STRATA_TRUSTED_KEYS", trusted.to_owned()));
        let run = strata(
            &scratch,
            &[
                "snapshot",
                "restore",
                "--cache-dir",
                &arg(&scratch.path(dir)),
                "--key",
                &k,
                "--json",
            ],
            &env,
        );
        run.assert_ok();
        run.json()
    };
    let v = with_trust("b/cache", &public);
    assert_eq!(
        (v["status"].as_str(), v["index"]["fetched"].as_u64()),
        (Some("restored"), Some(1)),
        "{v}"
    );
    let v = with_trust("c/cache", &other);
    assert_eq!(v["status"], "error", "{v}");
    assert!(v["rejected"][0]["reason"].as_str().unwrap().contains("not trusted"), "{v}");
    assert!(!scratch.path("c/cache/actions-v1").exists());
}

/// The files under `store/<prefix>` (relative names), e.g. the leases or the sidecars.
fn store_names(store: &Path, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(store)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(store).unwrap().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(prefix))
        .collect();
    out.sort();
    out
}

/// `strata snapshot save` (index) against a live gc lease: with `STRATA_GC_WAIT=0` it
/// skips with `store_busy` and uploads nothing; with a wait it holds its own lease, waits
/// until the gc's lease goes, then saves and releases its lease.
#[test]
fn index_save_waits_for_a_running_gc_or_skips_as_store_busy() {
    use strata::snapshot::index::lease::Lease;
    use strata::snapshot::index::names::LeaseKind;
    let scratch = Scratch::new();
    let store_dir = scratch.path("store");
    std::fs::create_dir_all(&store_dir).unwrap();
    let url = scratch.file_store();
    let store = strata::transport::open_store(&url, &Default::default()).unwrap();
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let k = key(&scratch, "busy");
    let gc = Lease::acquire(store.as_ref(), LeaseKind::Gc, &Default::default()).unwrap();

    let env = vec![("STRATA_STORE", url.clone()), ("STRATA_GC_WAIT", "0".to_owned())];
    let args = ["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k, "--json"];
    let run = strata(&scratch, &args, &indexed(&env));
    run.assert_ok();
    let v = run.json();
    assert_eq!(v["outcome"]["reason"], "store_busy", "{v}\n{}", run.stderr);
    assert!(run.stderr.contains("STRATA_GC_WAIT"), "{}", run.stderr);
    assert_eq!(store_names(&store_dir, "~entries"), Vec::<String>::new());
    assert_eq!(store_names(&store_dir, "~leases"), vec![gc.name().to_owned()]);
    assert!(!store_dir.join(format!("{k}.json")).exists());

    let env = vec![("STRATA_STORE", url), ("STRATA_GC_WAIT", "60".to_owned())];
    let child = super::strata_command(&scratch, scratch.dir.path(), &args, &indexed(&env))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while store_names(&store_dir, "~leases/save-").is_empty() {
        assert!(std::time::Instant::now() < deadline, "the save never took its lease");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(store_names(&store_dir, "~entries"), Vec::<String>::new(), "it waits first");
    gc.release().unwrap();
    let run = super::run_of(child.wait_with_output().unwrap());
    run.assert_ok();
    let v = run.json();
    assert_eq!(v["outcome"]["status"], "saved", "{v}\n{}", run.stderr);
    assert_eq!(v["index"]["new"], 1, "{v}");
    assert!(store_dir.join(format!("{k}.json")).is_file());
    assert_eq!(store_names(&store_dir, "~leases"), Vec::<String>::new(), "lease released");
}

/// Real processes: index saves of a growing cache race `strata snapshot gc --keep 1
/// --grace 0s` (so only the leases protect); every committed snapshot that gc keeps
/// restores whole into a fresh cache, byte-identical.
#[test]
fn index_gc_racing_saves_loses_nothing_a_kept_save_committed() {
    let scratch = Scratch::new();
    let url = scratch.file_store();
    std::fs::create_dir_all(scratch.path("store")).unwrap();
    let env = vec![("STRATA_STORE", url), ("STRATA_GC_WAIT", "60".to_owned())];
    let cache = scratch.path("cache");
    let gc_args = ["snapshot", "gc", "--json", "--keep", "1", "--grace", "0s", "--wait", "60"];
    let mut last = String::new();
    for round in 1..=4u64 {
        fill_cache(&cache, round);
        last = key(&scratch, &format!("race{round}"));
        let save_args = ["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &last, "--json"];
        let saver = super::strata_command(&scratch, scratch.dir.path(), &save_args, &indexed(&env))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let gc = super::strata_command(&scratch, scratch.dir.path(), &gc_args, &env)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let saved = super::run_of(saver.wait_with_output().unwrap());
        let collected = super::run_of(gc.wait_with_output().unwrap());
        saved.assert_ok();
        collected.assert_ok();
        assert_eq!(saved.json()["outcome"]["status"], "saved", "{}", saved.stderr);
        let status = collected.json()["status"].as_str().unwrap_or_default().to_owned();
        assert!(status == "done" || status == "busy", "{}", collected.stdout);
    }
    // One more gc with nothing racing it: only the newest snapshot stays.
    let run = strata(&scratch, &gc_args, &env);
    run.assert_ok();
    let fresh = scratch.path("fresh");
    let (_, v) = restore(&scratch, &fresh, &last, &env);
    assert_eq!(v["status"], "restored", "{v}");
    assert_eq!(entry_tree(&fresh), entry_tree(&cache));
    assert_eq!(local_index(&fresh).entries.len(), 4);
}

/// Many new entries with files of several MiB: the save packs them side by side and the
/// restore installs them side by side, and both finish (packing or extracting on rayon's
/// pool while the pipeline's own threads hashed on that pool deadlocked here: an index
/// save of 32 entries of 16 MiB hung with every thread waiting). Bounded in time.
#[test]
fn index_many_entries_of_several_mib_save_and_restore_within_a_bound() {
    let scratch = Scratch::new();
    let env = indexed(&[("STRATA_STORE", scratch.file_store())]);
    let cache = scratch.path("a/cache");
    for i in 0..12u64 {
        let entry = cache.join(format!("actions-v1/third_party/big/{:064x}", 100 + i));
        std::fs::create_dir_all(entry.join("artifacts")).unwrap();
        std::fs::write(entry.join("manifest.json"), format!("{{\"big\":{i}}}")).unwrap();
        let bytes = crate::transport::random_bytes((3 + i as usize % 3) << 20, 100 + i);
        std::fs::write(entry.join("artifacts/lib.a"), bytes).unwrap();
    }
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let k = key(&scratch, "big");
    let bounded = |args: &[&str]| {
        let cmd = super::strata_command(&scratch, scratch.dir.path(), args, &env);
        let run = crate::engine::run_bounded(cmd, std::time::Duration::from_secs(120));
        assert_eq!(run.code, 0, "{}", run.stderr);
        serde_json::from_str::<Value>(&run.stdout).unwrap()
    };
    let v = bounded(&["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k, "--json"]);
    assert_eq!(
        (v["outcome"]["status"].as_str(), v["index"]["new"].as_u64()),
        (Some("saved"), Some(12)),
        "{v}"
    );
    let b_cache = scratch.path("b/cache");
    let v = bounded(&["snapshot", "restore", "--cache-dir", &arg(&b_cache), "--key", &k, "--json"]);
    assert_eq!(
        (v["status"].as_str(), v["index"]["fetched"].as_u64(), v["index"]["failed"].as_u64()),
        (Some("restored"), Some(12), Some(0)),
        "{v}"
    );
    assert_eq!(entry_tree(&b_cache), entry_tree(&cache));
}

/// Crafted, self-consistent entry objects that break an unpack rule, each served as the
/// one entry of an index snapshot with a correct BLAKE3 digest (so only the unpack rules,
/// applied by the entry installer's writes on its own thread, stand between the object and
/// the disk): each is skipped as failed, nothing is written outside the cache, the entry
/// does not appear and no staging is left.
#[test]
fn index_malicious_entry_objects_are_refused_by_the_unpack_rules() {
    use super::craft::{Entry, manifest_for, object};
    let k1 = "k1"; // crafted tar names stay under 100 bytes
    let entry = format!("actions-v1/third_party/zlib/{k1}");
    let file = |path: String, data: &[u8]| Entry::File { path, mode: 0o644, data: data.to_vec() };
    let layout = || {
        vec![
            Entry::Dir("actions-v1"),
            Entry::Dir("actions-v1/third_party"),
            Entry::Dir("actions-v1/third_party/zlib"),
        ]
    };
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let cases: Vec<(&str, Vec<Entry>, &str)> = vec![
        ("dotdot", vec![file(format!("{entry}/../../../../../../outside/evil"), b"x")], "unsafe"),
        (
            "through a symlink",
            vec![
                Entry::Dir(leak(entry.clone())),
                Entry::Dir(leak(format!("{entry}/artifacts"))),
                Entry::Symlink {
                    path: leak(format!("{entry}/artifacts/link")),
                    target: "OUTSIDE".into(),
                },
                file(format!("{entry}/artifacts/link/evil"), b"x"),
            ],
            "writing through symlinks is not allowed",
        ),
        (
            "hard link",
            vec![Entry::HardLink {
                path: leak(format!("{entry}/h")),
                target: "/etc/passwd".into(),
            }],
            "hard link",
        ),
        ("device", vec![Entry::CharDevice(leak(format!("{entry}/null")))], "device"),
        (
            "twice",
            vec![
                Entry::Dir(leak(entry.clone())),
                file(format!("{entry}/manifest.json"), b"a"),
                file(format!("{entry}/manifest.json"), b"b"),
            ],
            "twice",
        ),
    ];
    for (what, body, reason) in cases {
        let scratch = Scratch::new();
        let env = vec![("STRATA_STORE", scratch.file_store())];
        let outside = scratch.path("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let mut entries = layout();
        let body: Vec<Entry> = body
            .into_iter()
            .map(|e| match e {
                Entry::Symlink { path, .. } => {
                    Entry::Symlink { path, target: outside.display().to_string() }
                }
                other => other,
            })
            .collect();
        entries.extend(body);
        let manifest = manifest_for(&entries, &format!("entry:third_party/zlib/{k1}"));
        let (bytes, _) = object(&entries, &manifest);
        let digest = strata::digest::ContentDigest::of_bytes(
            strata::digest::DigestAlgorithm::Blake3,
            &bytes,
        );
        let name = strata::snapshot::index::names::entry_object_name(&digest).unwrap();
        let store = scratch.path("store");
        std::fs::create_dir_all(store.join(&name).parent().unwrap()).unwrap();
        std::fs::write(store.join(&name), &bytes).unwrap();
        let location = EntryLocation {
            path: format!("third_party/zlib/{k1}"),
            manifest_digest: digest,
            object: name,
            offset: 0,
            size_bytes: bytes.len() as u64,
            digest,
            file_count: manifest["files"].as_array().unwrap().len() as u64,
            file_bytes: manifest["file_bytes"].as_u64().unwrap(),
        };
        let k = key(&scratch, "crafted");
        publish_index(&store, &k, vec![location]);
        let cache = scratch.path("b/cache");
        let (run, v) = restore(&scratch, &cache, &k, &env);
        assert_eq!(v["status"], "error", "{what}: {v}");
        assert!(v["rejected"][0]["reason"].to_string().contains("none of its 1 entries"), "{what}");
        assert!(run.stderr.contains(reason), "{what}: expected {reason:?} in {}", run.stderr);
        assert_eq!(tree(&outside), BTreeMap::new(), "{what}: written outside");
        assert!(!cache.join(&entry).exists(), "{what}: the entry was installed");
        let staging: Vec<String> = std::fs::read_dir(cache.join(".local"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(staging.is_empty(), "{what}: {staging:?}");
    }
}

/// A save that has no parent index for the store (another cache, or the same cache saved
/// to another store first) reuses the entries the store's refs name with the same
/// manifest digest instead of uploading them again; a signing save takes only refs
/// carrying its own signature.
#[test]
fn index_save_reuses_entries_the_stores_refs_name() {
    let scratch = Scratch::new();
    let store_a = vec![("STRATA_STORE", scratch.file_store())];
    let store_b_dir = scratch.path("store-b");
    std::fs::create_dir_all(&store_b_dir).unwrap();
    let store_b = vec![("STRATA_STORE", format!("file://{}", store_b_dir.display()))];
    let a = scratch.path("a/cache");
    for seed in 1..=6 {
        fill_cache(&a, seed);
    }
    let k1 = key(&scratch, "refs1");
    let v = save(&scratch, &a, &k1, &store_a);
    assert_eq!(
        (v["index"]["new"].as_u64(), v["index"]["reused_refs"].as_u64()),
        (Some(6), Some(0)),
        "{v}"
    );
    // The same cache to another store: nothing there yet.
    let v = save(&scratch, &a, &key(&scratch, "refs1b"), &store_b);
    assert_eq!(v["index"]["new"], 6, "{v}");
    // Three more entries: only they are uploaded to A (the other six are the parent's
    // objects, or those A's refs name).
    for seed in 7..=9 {
        fill_cache(&a, seed);
    }
    let v = save(&scratch, &a, &key(&scratch, "refs2"), &store_a);
    assert_eq!(
        (v["index"]["new"].as_u64(), v["index"]["reused"].as_u64()),
        (Some(3), Some(6)),
        "{v}"
    );
    // Another cache holding the same nine entries and no parent index at all.
    let b = scratch.path("b/cache");
    for seed in 1..=9 {
        fill_cache(&b, seed);
    }
    let k3 = key(&scratch, "refs3");
    let v = save(&scratch, &b, &k3, &store_a);
    assert_eq!(
        (
            v["index"]["new"].as_u64(),
            v["index"]["reused_refs"].as_u64(),
            v["index"]["objects_uploaded"].as_u64()
        ),
        (Some(0), Some(9), Some(0)),
        "{v}"
    );
    let fresh = scratch.path("fresh/cache");
    let (_, v) = restore(&scratch, &fresh, &k3, &store_a);
    assert_eq!(
        (v["status"].as_str(), v["index"]["fetched"].as_u64()),
        (Some("restored"), Some(9)),
        "{v}"
    );
    assert_eq!(entry_tree(&fresh), entry_tree(&b));
    // A signing save does not vouch for unsigned refs: it uploads its own.
    let keyfile = scratch.path("producer.key");
    strata(&scratch, &["key", "generate", "--out", &arg(&keyfile)], &[]).assert_ok();
    let mut signed = store_a.clone();
    signed.push(("STRATA_SIGNING_KEY", std::fs::read_to_string(&keyfile).unwrap()));
    let c = scratch.path("c/cache");
    fill_cache(&c, 1);
    let v = save(&scratch, &c, &key(&scratch, "refs4"), &signed);
    assert_eq!(
        (v["index"]["new"].as_u64(), v["index"]["reused_refs"].as_u64()),
        (Some(1), Some(0)),
        "{v}"
    );
    // A new entry's ref is this key's: a second signing cache reuses it.
    fill_cache(&c, 10);
    let v = save(&scratch, &c, &key(&scratch, "refs5"), &signed);
    assert_eq!(v["index"]["new"], 1, "{v}");
    let d = scratch.path("d/cache");
    fill_cache(&d, 10);
    let v = save(&scratch, &d, &key(&scratch, "refs6"), &signed);
    assert_eq!(
        (v["index"]["new"].as_u64(), v["index"]["reused_refs"].as_u64()),
        (Some(0), Some(1)),
        "{v}"
    );
}

/// A skipped save reports the format it would have written, and why, at the top level.
#[test]
fn index_a_skipped_save_reports_its_kind_and_reason() {
    let scratch = Scratch::new();
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 1);
    std::fs::remove_file(cache.join(".updated")).unwrap();
    let env = indexed(&[("STRATA_STORE", scratch.file_store())]);
    let k = key(&scratch, "skip");
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k, "--json"],
        &env,
    );
    run.assert_ok();
    let v = run.json();
    assert_eq!((v["status"].as_str(), v["kind"].as_str()), (Some("skipped"), Some("index")), "{v}");
    assert!(v["reason"].as_str().is_some_and(|r| r.contains(".updated")), "{v}");
}
