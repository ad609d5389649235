//! `strata action run` with a remote store: producer to consumer, and every remote failure
//! a MISS with one warning.

use std::time::{Duration, Instant};

use super::{action, remote_warnings, staging_left, stats, store_files, stored, with_store};
use crate::engine::{TestContext, tree_files};
use crate::transport::proxy::{Fault, FaultProxy, Rule};
use crate::transport::server::S3sServer;

/// A producer saves and uploads; returns the key.
fn produce(ctx: &TestContext, server: &S3sServer, unit: &str, extra: &[&str]) -> String {
    let mut a = with_store(action(ctx, &ctx.cache, unit), server, None).switch("--remote-write");
    for pair in extra.chunks(2) {
        a = a.flag(pair[0], pair[1]);
    }
    let run = ctx.run(&a);
    run.expect(&["MISS", "SAVED"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    run.key()
}

fn clear_output(ctx: &TestContext) {
    let _ = std::fs::remove_dir_all(ctx.path("out"));
    let _ = std::fs::remove_file(ctx.path("ran.log"));
}

#[test]
fn remote_producer_to_consumer_hit_is_byte_identical_and_installed_locally() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let key = produce(&ctx, &server, "zlib", &[]);
    let built = tree_files(&ctx.path("out"));
    let files = store_files(&server);
    assert!(files.keys().any(|k| k.contains("~refs/")), "{:?}", files.keys());
    assert!(files.keys().any(|k| k.contains("~entries/")), "{:?}", files.keys());
    let producer = stats(&ctx, &ctx.cache);
    assert_eq!(producer["third_party"]["remote"]["uploaded"], 1, "{producer}");
    assert_eq!(producer["third_party"]["remote"]["misses"], 1, "{producer}");

    // A consumer with an empty cache (credentials, no --remote-write): a HIT from the
    // store, the build never runs, the outputs are the producer's bytes.
    clear_output(&ctx);
    let consumer = ctx.path("consumer-cache");
    let run = ctx.run(&with_store(action(&ctx, &consumer, "zlib"), &server, None));
    run.expect(&["HIT"]);
    assert_eq!(run.key(), key);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    assert!(!ctx.path("ran.log").exists(), "the build ran on a remote HIT");
    assert_eq!(tree_files(&ctx.path("out")), built);
    let entry = consumer.join("actions-v1/third_party/zlib").join(&key);
    assert!(entry.join("manifest.json").is_file());
    assert_eq!(store_files(&server), files, "a consumer without --remote-write wrote");
    let counted = stats(&ctx, &consumer);
    assert_eq!(counted["third_party"]["hits"], 1, "{counted}");
    assert_eq!(counted["third_party"]["remote"]["hits"], 1, "{counted}");

    // Now local: a HIT without the store (a dead endpoint is never asked).
    clear_output(&ctx);
    let dead = format!("http://127.0.0.1:{}", crate::transport::server::free_port());
    let run = ctx.run(&with_store(action(&ctx, &consumer, "zlib"), &server, Some(&dead)));
    run.expect(&["HIT"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);

    // Text stats name the remote counts.
    let mut cmd = ctx.strata();
    cmd.args(["stats", "--cache-root"]).arg(&consumer);
    let text = crate::engine::run_bounded(cmd, crate::engine::RUN_TIMEOUT).stdout;
    assert!(
        text.contains("  remote: 1 hits, 0 misses, 0 errors, 0 uploaded, 0 upload errors\n"),
        "{text}"
    );
}

#[test]
fn remote_absent_entry_builds_quietly_and_a_consumer_without_credentials_never_writes() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    // Nothing in the store: a plain MISS, no warning.
    let run = ctx.run(&with_store(action(&ctx, &ctx.cache, "zlib"), &server, None));
    run.expect(&["MISS", "SAVED"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    assert!(store_files(&server).is_empty(), "{:?}", store_files(&server).keys());
    assert_eq!(stats(&ctx, &ctx.cache)["third_party"]["remote"]["misses"], 1);

    // No credentials at all, even with --remote-write: the server refuses the read (a
    // MISS with one warning), the upload is refused before any request (one warning), and
    // the store is unchanged.
    produce(&ctx, &server, "other", &[]);
    let before = store_files(&server);
    clear_output(&ctx);
    let cache = ctx.path("anonymous-cache");
    let anonymous = action(&ctx, &cache, "other")
        .flag("--remote-store", server.url(super::PREFIX))
        .switch("--remote-write")
        .env("AWS_ACCESS_KEY_ID", "")
        .env("AWS_SECRET_ACCESS_KEY", "");
    let run = ctx.run(&anonymous);
    run.expect(&["MISS", "SAVED"]);
    let warnings = remote_warnings(&run);
    assert_eq!(warnings.len(), 2, "{}", run.stderr);
    assert!(warnings[0].contains("remote entry not used"), "{}", run.stderr);
    assert!(warnings[1].contains("writer credentials"), "{}", run.stderr);
    assert_eq!(store_files(&server), before);
    let counted = stats(&ctx, &cache);
    assert_eq!(counted["third_party"]["remote"]["errors"], 1, "{counted}");
    assert_eq!(counted["third_party"]["remote"]["upload_errors"], 1, "{counted}");
}

#[test]
fn remote_server_errors_and_stalls_are_misses_within_the_timeout() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    produce(&ctx, &server, "zlib", &[]);
    for (fault, what) in
        [(Fault::ServerError, "500"), (Fault::Stall(Duration::from_secs(30)), "stall")]
    {
        clear_output(&ctx);
        let rule = Rule { method: "GET", contains: "~refs", fault, times: None };
        let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
        let cache = ctx.path(&format!("cache-{what}"));
        let consumer = with_store(action(&ctx, &cache, "zlib"), &server, Some(&proxy.endpoint))
            .env("STRATA_REMOTE_TIMEOUT", "1");
        let started = Instant::now();
        let run = ctx.run(&consumer);
        let took = started.elapsed();
        run.expect(&["MISS", "SAVED"]);
        assert_eq!(remote_warnings(&run).len(), 1, "{what}: {}", run.stderr);
        assert!(took < Duration::from_secs(10), "{what}: took {took:?}");
        assert!(proxy.injected() >= 1, "{what}");
        assert!(ctx.path("ran.log").exists(), "{what}: the build did not run");
    }
}

#[test]
fn remote_flipped_byte_and_a_ref_naming_another_path_install_nothing() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let key_a = produce(&ctx, &server, "a", &[]);
    let key_b = produce(&ctx, &server, "b", &[]);
    let path_a = format!("third_party/a/{key_a}");
    let path_b = format!("third_party/b/{key_b}");
    let ref_a = stored(&server, &strata::snapshot::index::names::ref_name(&path_a));
    let ref_b = stored(&server, &strata::snapshot::index::names::ref_name(&path_b));

    // B's ref replaced by A's: it names another path, so it is refused.
    std::fs::copy(&ref_a, &ref_b).unwrap();
    clear_output(&ctx);
    let cache = ctx.path("cache-moved");
    let run = ctx.run(&with_store(action(&ctx, &cache, "b"), &server, None));
    run.expect(&["MISS", "SAVED"]);
    let warnings = remote_warnings(&run);
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(warnings[0].contains("names the entry"), "{}", run.stderr);
    assert!(!cache.join("actions-v1/third_party/a").exists(), "A was installed");

    // A's entry object with one byte flipped: the digest check refuses it.
    let entry_ref: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&ref_a).unwrap()).unwrap();
    let object = entry_ref["payload"]["location"]["object"].as_str().unwrap().to_owned();
    let object_path = stored(&server, &object);
    let mut bytes = std::fs::read(&object_path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&object_path, &bytes).unwrap();
    clear_output(&ctx);
    let cache = ctx.path("cache-flipped");
    let run = ctx.run(&with_store(action(&ctx, &cache, "a"), &server, None));
    run.expect(&["MISS", "SAVED"]);
    let warnings = remote_warnings(&run);
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(warnings[0].contains("digest"), "{}", run.stderr);
    assert!(ctx.path("ran.log").exists(), "the build did not run");
    // Nothing but the entry the build saved, and no staging leftovers.
    assert_eq!(staging_left(&cache), Vec::<String>::new());
}

/// A ref whose entry object is gone stays broken (refs are never replaced: a producer's
/// upload finds the ref and skips); the warning says to delete the ref, and once it is
/// deleted the producer's next upload repairs the store and a consumer HITs again.
#[test]
fn remote_a_lost_entry_object_is_repaired_by_deleting_its_ref_as_the_warning_says() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let key = produce(&ctx, &server, "zlib", &[]);
    let built = tree_files(&ctx.path("out"));
    let path = format!("third_party/zlib/{key}");
    let ref_name = strata::snapshot::index::names::ref_name(&path);
    std::fs::remove_file(stored(&server, "~entries/")).unwrap();

    // A producer with a fresh cache: MISS, builds, and its upload is skipped.
    clear_output(&ctx);
    let producer = with_store(action(&ctx, &ctx.path("cache-2"), "zlib"), &server, None)
        .switch("--remote-write");
    let run = ctx.run(&producer);
    run.expect(&["MISS", "SAVED"]);
    let warnings = remote_warnings(&run);
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(warnings[0].contains("is not in the store"), "{}", warnings[0]);
    assert!(warnings[0].contains(&format!("delete {ref_name} from the store")), "{}", warnings[0]);
    assert!(store_files(&server).keys().all(|k| !k.contains("~entries/")), "re-uploaded");

    // As advised: delete the ref; the next producer uploads entry object and ref again.
    std::fs::remove_file(stored(&server, &ref_name)).unwrap();
    clear_output(&ctx);
    let producer = with_store(action(&ctx, &ctx.path("cache-3"), "zlib"), &server, None)
        .switch("--remote-write");
    let run = ctx.run(&producer);
    run.expect(&["MISS", "SAVED"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    clear_output(&ctx);
    let run = ctx.run(&with_store(action(&ctx, &ctx.path("cache-4"), "zlib"), &server, None));
    run.expect(&["HIT"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    assert!(!ctx.path("ran.log").exists(), "the build ran on a remote HIT");
    assert_eq!(tree_files(&ctx.path("out")), built);
}

#[test]
fn remote_trust_policy_refuses_unsigned_refs_and_accepts_trusted_signatures() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let mut cmd = ctx.strata();
    cmd.args(["key", "generate", "--out"]).arg(ctx.path("producer.key"));
    let generated = crate::engine::run_bounded(cmd, crate::engine::RUN_TIMEOUT);
    generated.expect_code(0);
    let public = generated.stdout.trim().to_owned();

    produce(&ctx, &server, "unsigned", &[]);
    let key_file = ctx.path("producer.key").display().to_string();
    produce(&ctx, &server, "signed", &["--signing-key", &key_file]);

    clear_output(&ctx);
    let cache = ctx.path("cache-trusting");
    let trusting = |unit: &str| {
        with_store(action(&ctx, &cache, unit), &server, None).flag("--trusted-key", &public)
    };
    let run = ctx.run(&trusting("unsigned"));
    run.expect(&["MISS", "SAVED"]);
    let warnings = remote_warnings(&run);
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(warnings[0].contains("not signed"), "{}", run.stderr);

    clear_output(&ctx);
    let run = ctx.run(&trusting("signed"));
    run.expect(&["HIT"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    assert!(!ctx.path("ran.log").exists());

    // The same key through STRATA_TRUSTED_KEYS, another producer's key: refused.
    clear_output(&ctx);
    let mut cmd = ctx.strata();
    cmd.args(["key", "generate", "--out"]).arg(ctx.path("other.key"));
    let other = crate::engine::run_bounded(cmd, crate::engine::RUN_TIMEOUT).stdout;
    let cache = ctx.path("cache-other");
    let run = ctx.run(
        &with_store(action(&ctx, &cache, "signed"), &server, None)
            .env("STRATA_TRUSTED_KEYS", other.trim()),
    );
    run.expect(&["MISS", "SAVED"]);
    assert!(remote_warnings(&run)[0].contains("not a trusted key"), "{}", run.stderr);
}

#[test]
fn remote_custom_operator_entry_is_fetched_and_published() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let (publish, state, stage, src) =
        (ctx.path("publish"), ctx.path("state"), ctx.path("stage"), ctx.path("opsrc"));
    crate::engine::write_file(&src.join("k.c"), "kernel");
    let op = crate::engine::CustomOp {
        unit: "u",
        soc: "ascend910b",
        operator: "add",
        action: "build",
        source: &src,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let script = "printf kernel-object > \"$0\"/add.o && echo x >> ran.log";
    let custom = |cache: &std::path::Path| {
        let a = crate::engine::Action::default()
            .flag("--cache-root", cache)
            .flag("--domain", "custom_operator")
            .flag("--unit", op.unit)
            .flag("--soc", op.soc)
            .flag("--operator", op.operator)
            .flag("--action", op.action)
            .flag("--operator-source", op.source)
            .flag("--output-dir", op.stage)
            .flag("--publish-dir", op.publish)
            .flag("--publish-state-dir", op.state)
            .flag("--environment-profile", "bare");
        with_store(a, &server, None).cmd(&[
            "sh".as_ref(),
            "-c".as_ref(),
            script.as_ref(),
            stage.as_os_str(),
        ])
    };
    let run = ctx.run(&custom(&ctx.cache).switch("--remote-write"));
    run.expect(&["MISS", "SAVED"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);

    for dir in [&publish, &state, &stage] {
        std::fs::remove_dir_all(dir).unwrap();
    }
    std::fs::remove_file(ctx.path("ran.log")).unwrap();
    let consumer = ctx.path("consumer-cache");
    let run = ctx.run(&custom(&consumer));
    run.expect(&["HIT"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    assert!(!ctx.path("ran.log").exists(), "the build ran on a remote HIT");
    assert_eq!(std::fs::read(publish.join("add.o")).unwrap(), b"kernel-object");
    let counted = stats(&ctx, &consumer);
    assert_eq!(counted["custom_operator"]["remote"]["hits"], 1, "{counted}");
}

/// Every proxy fault on each request a remote HIT makes (the ref, then the entry object):
/// a 500, a connection closed without an answer, an answer cut off, a flipped byte. Each
/// is a MISS that builds, with one warning, within the timeout; the cache then holds just
/// the entry the build saved, byte-identical to the producer's, and no staging.
#[test]
fn remote_every_fault_on_the_ref_or_the_entry_object_is_a_miss_that_builds() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let key = produce(&ctx, &server, "zlib", &[]);
    let built = tree_files(&ctx.path("out"));
    let entry = format!("actions-v1/third_party/zlib/{key}");
    let producer_entry = tree_files(&ctx.cache.join(&entry));
    let faults = [
        ("500", Fault::ServerError),
        ("lost answer", Fault::LoseAnswer),
        ("cut off", Fault::Truncate(40)),
        ("flipped byte", Fault::FlipByte(40)),
    ];
    for target in ["/~refs/", "/~entries/"] {
        for (what, fault) in faults {
            let label = format!("{target} {what}");
            clear_output(&ctx);
            let rule = Rule { method: "GET", contains: target, fault, times: None };
            let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
            let cache = ctx.path(&format!("cache-{}-{}", target.trim_matches('/'), what));
            let consumer = with_store(action(&ctx, &cache, "zlib"), &server, Some(&proxy.endpoint))
                .env("STRATA_REMOTE_TIMEOUT", "2")
                .env("STRATA_S3_MAX_RETRIES", "1");
            let started = Instant::now();
            let run = ctx.run(&consumer);
            let took = started.elapsed();
            run.expect(&["MISS", "SAVED"]);
            assert!(proxy.injected() >= 1, "{label}: no fault was injected");
            let warnings = remote_warnings(&run);
            assert_eq!(warnings.len(), 1, "{label}: {}", run.stderr);
            // A damaged ref says how to repair the store (refs are never replaced), not
            // the local record advice; a refused entry object is no "snapshot … rejected".
            if (target, what) == ("/~refs/", "flipped byte") {
                assert!(warnings[0].contains("did not verify"), "{label}: {}", warnings[0]);
            }
            if what == "flipped byte" {
                assert!(
                    warnings[0].contains("refs are never replaced, so delete ~refs/"),
                    "{label}: {}",
                    warnings[0]
                );
            }
            assert!(!warnings[0].contains("delete it"), "{label}: {}", warnings[0]);
            assert!(!warnings[0].contains("rejected"), "{label}: {}", warnings[0]);
            assert!(took < Duration::from_secs(15), "{label}: took {took:?}");
            assert!(ctx.path("ran.log").exists(), "{label}: the build did not run");
            assert_eq!(tree_files(&ctx.path("out")), built, "{label}");
            let entries: Vec<_> = std::fs::read_dir(cache.join("actions-v1/third_party/zlib"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect();
            assert_eq!(entries, vec![key.clone()], "{label}");
            // The entry the build saved: the producer's files (its manifest records this
            // run, so only its name is compared).
            let outputs = |files: Vec<(String, Vec<u8>)>| -> Vec<(String, Vec<u8>)> {
                files
                    .into_iter()
                    .map(|(p, b)| if p == "manifest.json" { (p, Vec::new()) } else { (p, b) })
                    .collect()
            };
            assert_eq!(
                outputs(tree_files(&cache.join(&entry))),
                outputs(producer_entry.clone()),
                "{label}"
            );
            assert_eq!(staging_left(&cache), Vec::<String>::new(), "{label}");
        }
    }
}

/// An entry above the tier's in-memory bound (9 MiB of incompressible output) is fetched
/// through a temp file: a byte-identical HIT; the same object with one byte flipped is a
/// MISS that builds, and nothing of it stays under `.local/`.
#[test]
fn remote_a_large_entry_is_streamed_through_a_temp_file() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let big = |cache: &std::path::Path| {
        action(&ctx, cache, "big")
            .sh("mkdir -p out/lib && head -c 9437184 /dev/urandom > out/lib/big.bin \
             && printf big > out/marker && echo big >> ran.log")
    };
    let run = ctx.run(&with_store(big(&ctx.cache), &server, None).switch("--remote-write"));
    run.expect(&["MISS", "SAVED"]);
    let key = run.key();
    let built = tree_files(&ctx.path("out"));
    assert_eq!(built.iter().find(|(p, _)| p == "lib/big.bin").map(|(_, b)| b.len()), Some(9437184));

    clear_output(&ctx);
    let consumer = ctx.path("consumer");
    let run = ctx.run(&with_store(big(&consumer), &server, None));
    run.expect(&["HIT"]);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    assert_eq!(tree_files(&ctx.path("out")), built);
    assert!(!ctx.path("ran.log").exists());

    let entry_ref: serde_json::Value = serde_json::from_slice(
        &std::fs::read(stored(
            &server,
            &strata::snapshot::index::names::ref_name(&format!("third_party/big/{key}")),
        ))
        .unwrap(),
    )
    .unwrap();
    let object = entry_ref["payload"]["location"]["object"].as_str().unwrap().to_owned();
    let size = entry_ref["payload"]["location"]["size_bytes"].as_u64().unwrap();
    assert!(size > 8 << 20, "the entry object has {size} bytes");
    let object_path = stored(&server, &object);
    let mut bytes = std::fs::read(&object_path).unwrap();
    let at = bytes.len() * 3 / 4;
    bytes[at] ^= 0x01;
    std::fs::write(&object_path, &bytes).unwrap();
    clear_output(&ctx);
    let flipped = ctx.path("consumer-flipped");
    let run = ctx.run(&with_store(big(&flipped), &server, None));
    run.expect(&["MISS", "SAVED"]);
    let warnings = remote_warnings(&run);
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(warnings[0].contains("digest"), "{}", run.stderr);
    assert!(ctx.path("ran.log").exists(), "the build did not run");
    assert_eq!(staging_left(&flipped), Vec::<String>::new());
}

/// `STRATA_REMOTE_WRITE` takes any case of the usual switches; anything else is a usage
/// error, never a silent "off".
#[test]
fn remote_write_switch_in_any_case_and_a_bad_value_is_a_usage_error() {
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let run = ctx.run(
        &with_store(action(&ctx, &ctx.cache, "zlib"), &server, None)
            .env("STRATA_REMOTE_WRITE", "TRUE"),
    );
    run.expect(&["MISS", "SAVED"]);
    assert_eq!(stats(&ctx, &ctx.cache)["third_party"]["remote"]["uploaded"], 1);
    clear_output(&ctx);
    let cache = ctx.path("cache-bad");
    let run = ctx.run(
        &with_store(action(&ctx, &cache, "zlib"), &server, None)
            .env("STRATA_REMOTE_WRITE", "banana"),
    );
    run.expect_code(2);
    assert!(
        run.stderr.contains("STRATA_REMOTE_WRITE") && run.stderr.contains("banana"),
        "{}",
        run.stderr
    );
}
