//! Every kind of store end to end, with the real binary: a directory, S3 on s3s-fs and an
//! HTTP cache server (nginx WebDAV) each carry an index snapshot (save, then restore by
//! its key) and remote-tier HITs (`action run --remote-store`); L0 push and pull are in
//! `artifact::l0`. On the HTTP store, what needs listing or deletion is refused when the
//! store is opened for it (exit 2, one message), and a restore finds the exact key only.

use std::collections::BTreeMap;
use std::path::Path;

use crate::engine::TestContext;
use crate::snapshot::{Scratch, fill_cache, key, strata, tree};
use crate::transport::contract::{Backend, Kind};

const BACKENDS: [Kind; 3] = [Kind::Directory, Kind::S3, Kind::WebDav];

fn env_of(backend: &Backend) -> Vec<(&'static str, String)> {
    let mut env = backend.env();
    env.push(("STRATA_STORE", backend.url()));
    env.push(("STRATA_SNAPSHOT_FORMAT", "index".to_owned()));
    env
}

fn entries(cache: &Path) -> BTreeMap<String, String> {
    tree(&cache.join("actions-v1"))
        .into_iter()
        .filter(|(path, _)| !path.split('/').any(|c| c == ".last-used"))
        .collect()
}

fn snapshot(
    scratch: &Scratch,
    verb: &str,
    cache: &Path,
    key: &str,
    env: &[(&str, String)],
) -> serde_json::Value {
    let dir = cache.display().to_string();
    let run =
        strata(scratch, &["snapshot", verb, "--cache-dir", &dir, "--key", key, "--json"], env);
    run.assert_ok();
    run.json()
}

#[test]
fn stores_index_snapshot_save_then_restore_by_key_on_every_backend() {
    for kind in BACKENDS {
        let backend = Backend::start(kind);
        let name = backend.name();
        let scratch = Scratch::new();
        let env = env_of(&backend);
        let a = scratch.path("a/cache");
        fill_cache(&a, 1);
        fill_cache(&a, 2);
        let k1 = key(&scratch, "src1");
        let saved = snapshot(&scratch, "save", &a, &k1, &env);
        assert_eq!(saved["outcome"]["status"], "saved", "{name}: {saved}");
        assert_eq!(
            (saved["index"]["new"].as_u64(), saved["kind"].as_str()),
            (Some(2), Some("index"))
        );

        let b = scratch.path("b/cache");
        let restored = snapshot(&scratch, "restore", &b, &k1, &env);
        assert_eq!(restored["status"], "restored", "{name}: {restored}");
        assert_eq!(restored["matched_key"], k1.as_str(), "{name}");
        assert_eq!(restored["index"]["fetched"], 2, "{name}: {restored}");
        assert_eq!(entries(&b), entries(&a), "{name}");

        // A second save reuses what the store holds (found by its refs, listed or not)
        // and uploads the one new entry; a restore of its key fetches only that one.
        fill_cache(&a, 3);
        let k2 = key(&scratch, "src2");
        let saved = snapshot(&scratch, "save", &a, &k2, &env);
        let counts = &saved["index"];
        assert_eq!(
            (counts["reused"].as_u64(), counts["new"].as_u64()),
            (Some(2), Some(1)),
            "{name}: {saved}"
        );
        let restored = snapshot(&scratch, "restore", &b, &k2, &env);
        let index = &restored["index"];
        assert_eq!(
            (index["present"].as_u64(), index["fetched"].as_u64()),
            (Some(2), Some(1)),
            "{name}: {restored}"
        );
        assert_eq!(entries(&b), entries(&a), "{name}");
    }
}

#[test]
fn stores_an_http_store_refuses_what_needs_listing_when_opened() {
    let backend = Backend::start(Kind::WebDav);
    let scratch = Scratch::new();
    let env = env_of(&backend);
    let url = backend.url();
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let k = key(&scratch, "src");
    snapshot(&scratch, "save", &cache, &k, &env);

    // gc lists and deletes: refused before anything is done.
    let gc = strata(&scratch, &["snapshot", "gc", "--keep", "1", "--json"], &env);
    assert_eq!(gc.code, 2, "{}", gc.stderr);
    assert!(
        gc.stderr
            .contains(&format!("the store {url} cannot list objects; snapshot gc needs listing")),
        "{}",
        gc.stderr
    );
    assert!(gc.stderr.contains("clean the store with its own tools instead"), "{}", gc.stderr);
    // So does a restore by prefix.
    let out = scratch.path("out").display().to_string();
    let by_prefix = strata(
        &scratch,
        &[
            "snapshot",
            "restore",
            "--cache-dir",
            &out,
            "--key",
            &k,
            "--restore-key",
            "strata-l1-",
            "--json",
        ],
        &env,
    );
    assert_eq!(by_prefix.code, 2, "{}", by_prefix.stderr);
    assert!(
        by_prefix
            .stderr
            .contains("cannot list objects; a restore by prefix (--restore-key) needs listing"),
        "{}",
        by_prefix.stderr
    );
    assert!(
        by_prefix.stderr.contains("look up exact keys instead (restore with --key"),
        "{}",
        by_prefix.stderr
    );
    assert!(!scratch.path("out").exists(), "nothing was created");

    // Another key of the same source is not found: only the exact key can be.
    let other = key(&scratch, "src");
    let missed = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &out, "--key", &other, "--json"],
        &env,
    );
    missed.assert_ok();
    let v = missed.json();
    assert_eq!(v["status"], "miss", "{v}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("cannot list objects, so only the exact key was looked up"), "{v}");

    // A save without writer credentials skips, naming the variables to set.
    let reader: Vec<(&str, String)> =
        env.iter().filter(|(n, _)| *n != "STRATA_HTTP_ANONYMOUS_WRITES").cloned().collect();
    fill_cache(&cache, 2);
    let skipped = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache.display().to_string(), "--key", &other],
        &reader,
    );
    skipped.assert_ok();
    assert!(skipped.stderr.contains("no writer credentials for the store"), "{}", skipped.stderr);
    assert!(skipped.stderr.contains("STRATA_HTTP_TOKEN"), "{}", skipped.stderr);
}

#[test]
fn stores_remote_tier_hit_on_every_backend() {
    for kind in BACKENDS {
        let backend = Backend::start(kind);
        let name = backend.name();
        let ctx = TestContext::new();
        let with_store = |action: crate::engine::Action| {
            let mut action = action.flag("--remote-store", backend.url());
            for (k, v) in backend.env() {
                action = action.env(k, v);
            }
            action
        };
        let produced = ctx.run(
            &with_store(crate::remote::action(&ctx, &ctx.cache, "zlib")).switch("--remote-write"),
        );
        produced.expect(&["MISS", "SAVED"]);
        assert!(produced.warnings().is_empty(), "{name}: {}", produced.stderr);
        let _ = std::fs::remove_dir_all(ctx.path("out"));
        let _ = std::fs::remove_file(ctx.path("ran.log"));
        let consumer = ctx.path("consumer");
        let run = ctx.run(&with_store(crate::remote::action(&ctx, &consumer, "zlib")));
        run.expect(&["HIT"]);
        let hit = run.stderr.lines().find(|l| l.starts_with("strata: HIT ")).unwrap_or_default();
        assert!(hit.ends_with(" source=remote"), "{name}: {}", run.stderr);
        assert!(run.warnings().is_empty(), "{name}: {}", run.stderr);
        assert!(!ctx.path("ran.log").exists(), "{name}: the build ran on a remote HIT");
        assert_eq!(run.key(), produced.key(), "{name}");
    }
}

/// A restore whose store cannot be reached, into a cache directory that does not exist:
/// the warning says the directory was not created (not that its marker was reset).
#[test]
fn stores_a_failed_restore_into_a_missing_directory_says_so() {
    let scratch = Scratch::new();
    let dir = scratch.path("never-made");
    let env = vec![("STRATA_S3_MAX_RETRIES", "0".to_owned())];
    let run = strata(
        &scratch,
        &[
            "snapshot",
            "restore",
            "--store",
            "http://127.0.0.1:9/cache",
            "--cache-dir",
            dir.to_str().unwrap(),
            "--key",
            "strata-l1-k",
        ],
        &env,
    );
    assert_eq!(run.code, 0, "a failed restore continues without a snapshot: {}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "the cache directory {} does not exist and was not created",
            dir.display()
        )),
        "{}",
        run.stderr
    );
    assert!(!dir.exists());
}
