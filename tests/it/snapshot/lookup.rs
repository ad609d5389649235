//! Lookup order: exact key, newest same-source, newest compatible, `--restore-key`
//! prefixes; incomplete snapshots (no sidecar) are passed over; listings past 1,000
//! objects.

use super::{S3sServer, Scratch, fill_cache, key, s3_env, strata, tree};

/// The compatibility prefix every [`key`] call shares.
fn compat_prefix(scratch: &Scratch) -> String {
    let k = key(scratch, "x");
    let parts = k.parse::<strata::snapshot::SnapshotKey>().unwrap().parts().unwrap();
    parts.compat_prefix()
}

/// Saves a cache filled with `seed` under `key`; returns the cache directory.
fn save_as(scratch: &Scratch, env: &[(&str, String)], key: &str, seed: u64) -> std::path::PathBuf {
    let cache = scratch.path(&format!("src-{seed}"));
    fill_cache(&cache, seed);
    let run = strata(
        scratch,
        &["snapshot", "save", "--cache-dir", &cache.display().to_string(), "--key", key],
        env,
    );
    run.assert_ok();
    assert!(run.stderr.contains("SAVED"), "{}", run.stderr);
    cache
}

#[test]
fn snapshot_prefix_fallback_newest_wins() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let compat = compat_prefix(&scratch);
    let a_old = format!("{compat}srcA-20240101T000000Z-1-1-10-aaaaaaaa");
    let a_new = format!("{compat}srcA-20240201T000000Z-2-1-10-aaaaaaaa");
    let b_newest = format!("{compat}srcB-20240301T000000Z-3-1-10-aaaaaaaa");
    save_as(&scratch, &env, &a_new, 2);
    save_as(&scratch, &env, &b_newest, 3);
    save_as(&scratch, &env, &a_old, 1);
    // The newest of all, but incomplete: its sidecar never arrived.
    let incomplete = format!("{compat}srcA-20241201T000000Z-4-1-10-aaaaaaaa");
    std::fs::copy(scratch.path("store").join(&a_old), scratch.path("store").join(&incomplete))
        .unwrap();

    let restore = |key: &str, extra: &[&str]| {
        let mut args = vec!["snapshot", "restore", "--cache-dir", "out", "--key", key, "--json"];
        for prefix in extra {
            args.extend(["--restore-key", prefix]);
        }
        let run = strata(&scratch, &args, &env);
        run.assert_ok();
        run.json()
    };
    let same = restore(&format!("{compat}srcA-20250101T000000Z-9-1-10-bbbbbbbb"), &[]);
    assert_eq!(
        (same["level"].as_str(), same["matched_key"].as_str()),
        (Some("same-source"), Some(a_new.as_str()))
    );
    assert_eq!(tree(&scratch.path("out/actions-v1")), tree(&scratch.path("src-2/actions-v1")));

    let compatible = restore(&format!("{compat}srcC-20250101T000000Z-9-1-10-bbbbbbbb"), &[]);
    assert_eq!(compatible["level"], "compatible");
    assert_eq!(compatible["matched_key"], b_newest.as_str());
    assert_eq!(tree(&scratch.path("out/actions-v1")), tree(&scratch.path("src-3/actions-v1")));

    // The exact key wins over anything newer, and is never prefix-matched.
    let exact = restore(&a_old, &[]);
    assert_eq!(
        (exact["level"].as_str(), exact["cache_hit"].as_bool()),
        (Some("exact"), Some(true))
    );
    assert_eq!(tree(&scratch.path("out/actions-v1")), tree(&scratch.path("src-1/actions-v1")));
    // A key that merely starts with an existing key's text is not that key (runs-on
    // prefix-matched the primary key, §7.5): the exact key wins over a newer extension.
    let exact_key = format!("{compat}srcD-20240101T000000Z-1-1-10-aaaaaaaa");
    let extension = format!("{exact_key}0");
    save_as(&scratch, &env, &exact_key, 6);
    save_as(&scratch, &env, &extension, 7);
    let exact = restore(&exact_key, &[]);
    assert_eq!(
        (exact["level"].as_str(), exact["matched_key"].as_str()),
        (Some("exact"), Some(exact_key.as_str()))
    );
    assert_eq!(tree(&scratch.path("out/actions-v1")), tree(&scratch.path("src-6/actions-v1")));

    // A key of another shape uses only the --restore-key prefixes, in order.
    let custom = restore("my-own-key", &["nothing-", &format!("{compat}srcA-")]);
    assert_eq!(
        (custom["level"].as_str(), custom["matched_key"].as_str()),
        (Some("prefix"), Some(a_new.as_str()))
    );
    assert_eq!(custom["tried"].as_array().unwrap().len(), 3);
}

#[test]
fn snapshot_lookup_follows_listings_past_1000_objects() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let env = s3_env(&server, &server.endpoint, "l1");
    let compat = compat_prefix(&scratch);
    let newest = format!("{compat}srcZ-20240601T000000Z-1-1-10-aaaaaaaa");
    save_as(&scratch, &env, &newest, 5);
    // 1,200 older complete-looking snapshots that sort before it, written straight into
    // the server's data directory (objects are files there).
    let dir = server.data_dir().join(super::super::transport::server::BUCKET).join("l1");
    for i in 0..600 {
        let name = format!("{compat}src{i:04}-20230101T000000Z-1-1-10-aaaaaaaa");
        std::fs::write(dir.join(&name), b"junk").unwrap();
        std::fs::write(dir.join(format!("{name}.json")), b"junk").unwrap();
    }
    let run = strata(
        &scratch,
        &[
            "snapshot",
            "restore",
            "--cache-dir",
            "out",
            "--key",
            &format!("{compat}srcY-20250101T000000Z-1-1-1-bbbbbbbb"),
            "--json",
        ],
        &env,
    );
    run.assert_ok().assert_no_secret(&[&server.secret_key]);
    let report = run.json();
    assert_eq!(report["matched_key"], newest.as_str(), "{report}");
    assert_eq!(report["status"], "restored");
    assert_eq!(tree(&scratch.path("out/actions-v1")), tree(&scratch.path("src-5/actions-v1")));
}
