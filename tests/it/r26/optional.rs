//! Item 2: stores that lack optional S3 features and say so with `501 NotImplemented`
//! (Ceph RGW versions and s3gw for `If-None-Match: *`; gateways that refuse
//! `UNSIGNED-PAYLOAD` parts or ListObjectsV2). Every 501 is answered once, never retried,
//! and the request goes again without the feature; one warning names it and the weaker
//! guarantee. Real s3s-fs behind the fault proxy, which plays the server that lacks them.

use std::path::Path;

use strata::transport::{
    ObjectKey, ObjectStore, PutOutcome, TransportOptions, open_store_with_env,
};

use crate::engine::TestContext;
use crate::remote::{action, store_files, with_store};
use crate::snapshot::{Scratch, fill_cache, key, strata};
use crate::transport::proxy::{Fault, FaultProxy, Rule};
use crate::transport::random_bytes;
use crate::transport::server::{S3sServer, fast_options, url_for};

const MIB: usize = 1024 * 1024;

const NOT_IMPLEMENTED: Fault = Fault::Answer(
    "501 Not Implemented",
    "content-type: application/xml\r\n",
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NotImplemented</Code><Message>A \
     header you provided implies functionality that is not implemented</Message></Error>",
);

/// A server without conditional writes, unsigned part bodies and ListObjectsV2.
fn lacking() -> Vec<Rule> {
    let rule = |method, contains| Rule { method, contains, fault: NOT_IMPLEMENTED, times: None };
    vec![
        rule("PUT", " if-none-match=*"),
        rule("POST", " if-none-match=*"),
        rule("PUT", " content-sha256=UNSIGNED-PAYLOAD"),
        rule("GET", "list-type=2"),
    ]
}

fn arg(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn r26_store_without_optional_features_works_without_retrying_a_501() {
    let server = S3sServer::start();
    let proxy = FaultProxy::start(&server.endpoint, lacking());
    let options = TransportOptions { part_size_bytes: 5 * MIB as u64, ..fast_options() };
    let store: Box<dyn ObjectStore> =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &options, server.env()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    std::fs::write(&big, random_bytes(11 * MIB, 3)).unwrap();
    let k = |t: &str| -> ObjectKey { t.parse().unwrap() };
    let (outcome, _) = store.put_file_if_absent(&k("a/big"), &big).unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    let (outcome, _) = store.put_bytes_if_absent(&k("a/small"), b"small").unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    // The HEAD still keeps an existing object: never overwritten.
    let (outcome, _) = store.put_bytes_if_absent(&k("a/small"), b"other").unwrap();
    assert_eq!(outcome, PutOutcome::AlreadyExists);
    let listed: Vec<String> = store
        .listing()
        .unwrap()
        .list("a/")
        .unwrap()
        .into_iter()
        .map(|m| m.key.as_str().to_owned())
        .collect();
    assert_eq!(listed, ["a/big", "a/small"]);
    let stored = server.data_dir().join("strata-test/p/a");
    assert_eq!(std::fs::read(stored.join("big")).unwrap(), std::fs::read(&big).unwrap());
    assert_eq!(std::fs::read(stored.join("small")).unwrap(), b"small");
    // No 501 was retried; each feature was tried, refused, and then left out.
    assert_eq!(store.retried_requests(), 0, "{:?}", proxy.seen());
    let seen = proxy.seen_with_ranges();
    assert!(proxy.injected() >= 4, "{seen:?}");
    let listings = seen.iter().filter(|r| r.starts_with("GET /strata-test?")).count();
    assert_eq!(listings, 2, "one refused ListObjectsV2, one ListObjects: {seen:?}");
}

#[test]
fn r26_saves_and_remote_writes_fall_back_once_with_one_warning() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let proxy = FaultProxy::start(&server.endpoint, lacking());
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 9);
    std::fs::write(
        cache.join(format!("actions-v1/third_party/zlib/{:064x}/artifacts/big.o", 9)),
        random_bytes(11 * MIB, 4),
    )
    .unwrap();
    let env = vec![
        ("STRATA_STORE", url_for(&proxy.endpoint, "l1")),
        ("AWS_ACCESS_KEY_ID", server.access_key.clone()),
        ("AWS_SECRET_ACCESS_KEY", server.secret_key.clone()),
        ("STRATA_S3_PART_SIZE_MB", "5".to_owned()),
    ];
    for format in ["index", "full"] {
        let k = key(&scratch, &format!("lack{format}"));
        std::fs::write(cache.join(".updated"), b"").unwrap();
        let saved = strata(
            &scratch,
            &[
                "snapshot",
                "save",
                "--cache-dir",
                &arg(&cache),
                "--key",
                &k,
                "--format",
                format,
                "--json",
            ],
            &env,
        );
        let report = saved.json();
        assert_eq!(report["outcome"]["status"], "saved", "{format}: {report}\n{}", saved.stderr);
        assert_eq!(report["retries"], 0, "{format}: {report}");
        assert!(!saved.stderr.contains("retrying"), "{format}: {}", saved.stderr);
        let warned = saved.stderr.matches("does not implement conditional writes").count();
        assert_eq!(warned, 1, "{format}: {}", saved.stderr);
        assert!(saved.stderr.contains("If-None-Match: *"), "{}", saved.stderr);
        assert!(saved.stderr.contains("the last write wins"), "{}", saved.stderr);
        let out = scratch.path(&format!("{format}/cache"));
        let restored = strata(
            &scratch,
            &["snapshot", "restore", "--cache-dir", &arg(&out), "--key", &k, "--json"],
            &env,
        );
        let report = restored.json();
        assert_eq!(report["status"], "restored", "{format}: {report}\n{}", restored.stderr);
        let big = std::fs::read(
            out.join(format!("actions-v1/third_party/zlib/{:064x}/artifacts/big.o", 9)),
        )
        .unwrap();
        assert!(big == random_bytes(11 * MIB, 4), "{format}: the restored bytes differ");
    }

    // action run --remote-write uploads its entry and ref the same way.
    let ctx = TestContext::new();
    let a = with_store(action(&ctx, &ctx.cache, "zlib"), &server, Some(&proxy.endpoint))
        .switch("--remote-write");
    let run = ctx.run(&a);
    run.expect(&["MISS", "SAVED"]);
    assert!(!run.stderr.contains("WARNING remote"), "{}", run.stderr);
    assert_eq!(
        run.stderr.matches("does not implement conditional writes").count(),
        1,
        "{}",
        run.stderr
    );
    let files = store_files(&server);
    assert!(files.keys().any(|k| k.contains("remote/~refs/")), "{:?}", files.keys());
}
