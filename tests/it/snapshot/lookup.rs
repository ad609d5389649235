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
    // The newest of all, but incomplete: its sidecar never arrived (an earlier release's
    // object under the key, and today's under a name of its own).
    let incomplete = format!("{compat}srcA-20241201T000000Z-4-1-10-aaaaaaaa");
    let store = scratch.path("store");
    let object = super::object_of(&store, &a_old);
    std::fs::copy(&object, store.join(&incomplete)).unwrap();
    let own_name =
        format!("{}{}", strata::snapshot::manifest::object_name_stem(&incomplete), "0".repeat(32));
    std::fs::copy(&object, store.join(own_name)).unwrap();

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

/// Review findings 3 and 6: a corrupt newest snapshot is reported with its key and the next
/// candidate is restored; a snapshot dated far in the future is ignored with a warning;
/// after three rejections the restore gives up, and every report (GitHub outputs, step
/// summary, `--json`, the event) names the rejected keys, the level and the reason.
#[test]
fn snapshot_a_corrupt_newest_snapshot_falls_back_to_the_next_candidate() {
    use super::craft::{Entry, publish_entries};
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let compat = compat_prefix(&scratch);
    let good = format!("{compat}srcA-20240101T000000Z-1-1-10-aaaaaaaa");
    save_as(&scratch, &env, &good, 1);
    let store = scratch.path("store");
    let poison = |key: &str| {
        publish_entries(
            &store,
            key,
            &[Entry::Dir("actions-v1"), Entry::CharDevice("actions-v1/null")],
        )
    };
    let corrupt = format!("{compat}srcA-20250101T000000Z-2-1-10-bbbbbbbb");
    poison(&corrupt);
    let future = format!("{compat}srcA-20991231T000000Z-3-1-10-cccccccc");
    poison(&future);

    let gh = scratch.path("gh");
    std::fs::create_dir_all(&gh).unwrap();
    let events = scratch.path("events.jsonl");
    let mut env = env.clone();
    env.push(("GITHUB_OUTPUT", gh.join("output").display().to_string()));
    env.push(("GITHUB_STEP_SUMMARY", gh.join("summary").display().to_string()));
    env.push(("STRATA_EVENT_LOG", events.display().to_string()));
    let primary = format!("{compat}srcA-20250601T000000Z-9-1-10-dddddddd");
    let restore = || {
        strata(
            &scratch,
            &[
                "snapshot",
                "restore",
                "--cache-dir",
                "out",
                "--key",
                &primary,
                "--json",
                "--github-output",
            ],
            &env,
        )
    };
    let run = restore();
    run.assert_ok();
    let report = run.json();
    assert_eq!(report["status"], "restored", "{report}\n{}", run.stderr);
    assert_eq!(report["matched_key"], good.as_str());
    assert_eq!(report["rejected"][0]["key"], corrupt.as_str(), "{report}");
    assert_eq!(report["rejected"][0]["level"], "same-source");
    assert!(run.stderr.contains(&corrupt) && run.stderr.contains("devices are not allowed"));
    assert!(run.stderr.contains("trying the next candidate"), "{}", run.stderr);
    assert!(run.stderr.contains(&format!("ignoring snapshot {future}")), "{}", run.stderr);
    assert!(run.stderr.contains("more than a day in the future"), "{}", run.stderr);
    assert_eq!(tree(&scratch.path("out/actions-v1")), tree(&scratch.path("src-1/actions-v1")));

    // Three corrupt candidates newer than the good one: the restore gives up after three.
    for (i, hex) in ["eeeeeeee", "ffffffff"].iter().enumerate() {
        poison(&format!("{compat}srcA-2025020{}T000000Z-4-1-10-{hex}", i + 1));
    }
    std::fs::write(gh.join("output"), b"").unwrap();
    std::fs::write(gh.join("summary"), b"").unwrap();
    let run = restore();
    run.assert_ok();
    let report = run.json();
    assert_eq!(report["status"], "error", "{report}");
    let newest_corrupt = format!("{compat}srcA-20250202T000000Z-4-1-10-ffffffff");
    assert_eq!(report["level"], "same-source", "{report}");
    assert_eq!(report["matched_key"], newest_corrupt.as_str(), "{report}");
    assert_eq!(report["rejected"].as_array().unwrap().len(), 3, "{report}");
    assert!(report["error"].as_str().unwrap().contains("rejected"), "{report}");
    assert!(!report["tried"].as_array().unwrap().is_empty());
    let output = std::fs::read_to_string(gh.join("output")).unwrap();
    assert!(output.contains("status=error\n"), "{output}");
    assert!(output.contains(&format!("cache-matched-key={newest_corrupt}\n")), "{output}");
    assert!(output.contains("matched-level=same-source\n"), "{output}");
    assert!(output.contains("reason=snapshot ") && output.contains("devices are not allowed"));
    assert!(output.contains("rejected-keys<<ghadelimiter_"), "{output}");
    assert!(output.contains(&corrupt), "{output}");
    assert!(!output.contains("bytes=0\n"), "{output}");
    let summary = std::fs::read_to_string(gh.join("summary")).unwrap();
    assert!(summary.contains(&newest_corrupt) && summary.contains("| reason |"), "{summary}");
    assert!(summary.contains("| rejected |"), "{summary}");
    let log = std::fs::read_to_string(&events).unwrap();
    let last: serde_json::Value =
        serde_json::from_str(log.lines().rfind(|l| l.contains("snapshot_restore")).unwrap())
            .unwrap();
    assert_eq!(last["outcome"], "error", "{last}");
    assert_eq!(last["level"], "same-source", "{last}");
    assert_eq!(last["matched_key"], newest_corrupt.as_str(), "{last}");
    assert_eq!(last["rejected"].as_array().unwrap().len(), 3, "{last}");
    assert!(last["message"].as_str().unwrap().contains("rejected"), "{last}");
}

/// Issue 7 item 8: a store that answers truncated listings without a continuation token
/// (Huawei OBS; here s3s-fs behind a proxy that strips every token) still finds the newest
/// snapshot on the listing's second page, instead of failing and leaving a cold build.
#[test]
fn snapshot_lookup_pages_a_store_that_sends_no_continuation_token() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let compat = compat_prefix(&scratch);
    let newest = format!("{compat}srcZ-20240601T000000Z-1-1-10-aaaaaaaa");
    save_as(&scratch, &s3_env(&server, &server.endpoint, "l1"), &newest, 5);
    let dir = server.data_dir().join(super::super::transport::server::BUCKET).join("l1");
    for i in 0..600 {
        let name = format!("{compat}src{i:04}-20230101T000000Z-1-1-10-aaaaaaaa");
        std::fs::write(dir.join(&name), b"junk").unwrap();
        std::fs::write(dir.join(format!("{name}.json")), b"junk").unwrap();
    }
    let proxy = super::super::transport::stub::RewriteProxy::start(
        &server.endpoint,
        Box::new(|method, target, body| {
            let text = String::from_utf8_lossy(body).into_owned();
            let (Some(start), Some(end)) =
                (text.find("<NextContinuationToken>"), text.find("</NextContinuationToken>"))
            else {
                return false;
            };
            assert!(method == "GET" && target.contains("list-type=2"));
            *body = format!("{}{}", &text[..start], &text[end + 24..]).into_bytes();
            true
        }),
    );
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
        &s3_env(&server, &proxy.endpoint, "l1"),
    );
    run.assert_ok().assert_no_secret(&[&server.secret_key]);
    let report = run.json();
    assert_eq!(report["status"], "restored", "{report}");
    assert_eq!(report["matched_key"], newest.as_str(), "{report}");
    assert!(proxy.rewritten() >= 1, "{:?}", proxy.seen());
    assert!(proxy.seen().iter().any(|r| r.contains("start-after=")), "{:?}", proxy.seen());
    assert_eq!(tree(&scratch.path("out/actions-v1")), tree(&scratch.path("src-5/actions-v1")));
}
