//! Transport faults through the real binary against s3s-fs behind the fault proxy: a 500
//! on one upload part and on one ranged download part (retried, visible in the log, the
//! snapshot intact), a server that is down, 403, and a server slower than the timeout —
//! all fail open: exit 0, a warning, the cache directory untouched, no committed snapshot.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::super::transport::proxy::{Fault, FaultProxy, Rule};
use super::super::transport::server::{BUCKET, free_port, url_for};
use super::{S3sServer, Scratch, fill_cache, key, names, strata, tree};

const MIB: usize = 1024 * 1024;

/// A cache whose snapshot is about 12 MiB (random data does not compress): three 5 MiB
/// parts each way.
fn big_cache(scratch: &Scratch, name: &str) -> PathBuf {
    let cache = scratch.path(name);
    fill_cache(&cache, 11);
    let big = cache.join("actions-v1/third_party/zlib/big.o");
    std::fs::write(big, crate::transport::random_bytes(12 * MIB, 12)).unwrap();
    cache
}

fn env(server: &S3sServer, endpoint: &str, secret: &str) -> Vec<(&'static str, String)> {
    vec![
        ("STRATA_STORE", url_for(endpoint, "l1")),
        ("AWS_ACCESS_KEY_ID", server.access_key.clone()),
        ("AWS_SECRET_ACCESS_KEY", secret.to_owned()),
        ("STRATA_S3_PART_SIZE_MB", "5".to_owned()),
    ]
}

/// A cache directory with content that a failed restore must leave alone.
fn victim(scratch: &Scratch) -> (PathBuf, std::collections::BTreeMap<String, String>) {
    let cache = scratch.path("victim/cache");
    std::fs::create_dir_all(cache.join("actions-v1/keep")).unwrap();
    std::fs::write(cache.join("actions-v1/keep/f"), b"previous").unwrap();
    let before = tree(&cache);
    (cache, before)
}

fn bucket_names(server: &S3sServer) -> Vec<String> {
    names(&server.data_dir().join(BUCKET).join("l1"))
}

fn arg(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn snapshot_survives_a_500_on_one_part_each_way() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let rules = vec![
        Rule {
            method: "PUT",
            contains: "partNumber=2&",
            fault: Fault::ServerError,
            times: Some(1),
        },
        Rule {
            method: "GET",
            contains: " range=bytes=5242880-",
            fault: Fault::ServerError,
            times: Some(1),
        },
    ];
    let proxy = FaultProxy::start(&server.endpoint, rules);
    let env = env(&server, &proxy.endpoint, &server.secret_key);
    let secrets = [server.secret_key.as_str(), server.access_key.as_str()];
    let cache = big_cache(&scratch, "a/cache");
    let k = key(&scratch, "big");
    let events = scratch.path("events.jsonl");
    let saved = strata(
        &scratch,
        &[
            "snapshot",
            "save",
            "--cache-dir",
            &arg(&cache),
            "--key",
            &k,
            "--json",
            "--event-log",
            &arg(&events),
        ],
        &env,
    );
    saved.assert_ok().assert_no_secret(&secrets);
    let report = saved.json();
    assert_eq!(report["outcome"]["status"], "saved", "{report}\n{}", saved.stderr);
    assert!(report["retries"].as_u64().unwrap() >= 1, "{report}");
    assert!(
        saved.stderr.contains("strata: WARN S3 request failed (HTTP 500 InternalError); retrying"),
        "{}",
        saved.stderr
    );

    let out = scratch.path("b/cache");
    let restored = strata(
        &scratch,
        &[
            "snapshot",
            "restore",
            "--cache-dir",
            &arg(&out),
            "--key",
            &k,
            "--json",
            "--event-log",
            &arg(&events),
        ],
        &env,
    );
    restored.assert_ok().assert_no_secret(&secrets);
    let report = restored.json();
    assert_eq!(report["status"], "restored", "{report}\n{}", restored.stderr);
    assert!(report["retries"].as_u64().unwrap() >= 1, "{report}");
    assert!(restored.stderr.contains("retrying"), "{}", restored.stderr);
    assert_eq!(tree(&out.join("actions-v1")), tree(&cache.join("actions-v1")));
    assert_eq!(proxy.injected(), 2);
    let log = std::fs::read_to_string(&events).unwrap();
    assert!(
        log.contains("\"event\":\"snapshot_save\"")
            && log.contains("\"event\":\"snapshot_restore\""),
        "{log}"
    );
    for secret in secrets {
        assert!(!log.contains(secret), "secret in the event log");
    }
}

#[test]
fn snapshot_fails_open_when_the_server_is_down() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let down = format!("http://127.0.0.1:{}", free_port());
    let env = env(&server, &down, &server.secret_key);
    let (cache, before) = victim(&scratch);
    let k = key(&scratch, "s");
    let started = Instant::now();
    let run =
        strata(&scratch, &["snapshot", "restore", "--cache-dir", &arg(&cache), "--key", &k], &env);
    run.assert_ok().assert_no_secret(&[&server.secret_key]);
    assert!(
        run.stderr.contains("strata: WARNING snapshot restore: cannot look up"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("cannot connect"), "{}", run.stderr);
    assert_eq!(run.stderr.matches("retrying").count(), 2, "{}", run.stderr);
    assert_eq!(tree(&cache), before);
    let source = big_cache(&scratch, "src/cache");
    let run =
        strata(&scratch, &["snapshot", "save", "--cache-dir", &arg(&source), "--key", &k], &env);
    run.assert_ok();
    assert!(run.stderr.contains("strata: WARNING snapshot save"), "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
    let strict = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &arg(&cache), "--key", &k, "--strict"],
        &env,
    );
    assert_eq!(strict.code, 1);
}

#[test]
fn snapshot_fails_open_on_403() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let wrong = "0123456789abcdef0123456789abcdef01234567";
    let env = env(&server, &server.endpoint, wrong);
    let (cache, before) = victim(&scratch);
    let k = key(&scratch, "s");
    let run =
        strata(&scratch, &["snapshot", "restore", "--cache-dir", &arg(&cache), "--key", &k], &env);
    run.assert_ok().assert_no_secret(&[wrong, &server.secret_key]);
    assert!(run.stderr.contains("access denied"), "{}", run.stderr);
    assert!(!run.stderr.contains("retrying"), "403 is not retried: {}", run.stderr);
    assert_eq!(tree(&cache), before);
    let source = big_cache(&scratch, "src/cache");
    let run =
        strata(&scratch, &["snapshot", "save", "--cache-dir", &arg(&source), "--key", &k], &env);
    run.assert_ok().assert_no_secret(&[wrong]);
    assert!(run.stderr.contains("access denied"), "{}", run.stderr);
    assert!(bucket_names(&server).is_empty(), "{:?}", bucket_names(&server));
}

#[test]
fn snapshot_fails_open_when_the_server_is_slower_than_the_timeout() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let source = big_cache(&scratch, "src/cache");
    let k = key(&scratch, "s");
    strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &arg(&source), "--key", &k],
        &env(&server, &server.endpoint, &server.secret_key),
    )
    .assert_ok();
    // Every ranged GET stalls past the 1 s timeout.
    let rule = Rule {
        method: "GET",
        contains: " range=bytes=",
        fault: Fault::Stall(Duration::from_secs(4)),
        times: None,
    };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let mut env = env(&server, &proxy.endpoint, &server.secret_key);
    env.push(("STRATA_S3_TIMEOUT_SECONDS", "1".to_owned()));
    env.push(("STRATA_S3_MAX_RETRIES", "1".to_owned()));
    let (cache, before) = victim(&scratch);
    let started = Instant::now();
    let run =
        strata(&scratch, &["snapshot", "restore", "--cache-dir", &arg(&cache), "--key", &k], &env);
    run.assert_ok().assert_no_secret(&[&server.secret_key]);
    assert!(run.stderr.contains("timed out"), "{}", run.stderr);
    assert!(run.stderr.contains("retrying"), "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(tree(&cache), before);
    let beside: Vec<String> =
        names(cache.parent().unwrap()).into_iter().filter(|n| n != "cache").collect();
    assert!(beside.is_empty(), "{beside:?}");
}

/// Review finding 9: a save interrupted between the object and its sidecar (here the
/// sidecar upload and the clean-up delete both fail) is completed by the next save under
/// the same key: the object is verified against the pending sidecar and the sidecar is
/// uploaded. Without a pending sidecar the skip says exactly what to do.
#[test]
fn snapshot_an_interrupted_save_is_completed_by_the_next_one() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let rules = vec![
        Rule { method: "PUT", contains: ".json", fault: Fault::ServerError, times: None },
        Rule { method: "DELETE", contains: "", fault: Fault::ServerError, times: None },
    ];
    let proxy = FaultProxy::start(&server.endpoint, rules);
    let cache = scratch.path("a/cache");
    super::fill_cache(&cache, 4);
    let k = key(&scratch, "s");
    let save = |endpoint: &str| {
        strata(
            &scratch,
            &["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k, "--json"],
            &env(&server, endpoint, &server.secret_key),
        )
    };
    let run = save(&proxy.endpoint);
    run.assert_ok();
    assert_eq!(run.json()["status"], "error", "{}", run.stdout);
    assert_eq!(
        bucket_names(&server),
        std::slice::from_ref(&k),
        "the object is there, its sidecar is not"
    );

    let run = save(&server.endpoint);
    run.assert_ok().assert_no_secret(&[&server.secret_key]);
    let report = run.json();
    assert_eq!(report["outcome"]["status"], "saved", "{report}\n{}", run.stderr);
    assert!(run.stderr.contains("completed the interrupted save"), "{}", run.stderr);
    assert_eq!(bucket_names(&server), [k.clone(), format!("{k}.json")]);
    let (out, _) = victim(&scratch);
    let restored = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &arg(&out), "--key", &k],
        &env(&server, &server.endpoint, &server.secret_key),
    );
    restored.assert_ok();
    assert!(restored.stderr.contains("RESTORED level=exact"), "{}", restored.stderr);
    assert_eq!(tree(&out.join("actions-v1")), tree(&cache.join("actions-v1")));

    // An orphan object this cache directory knows nothing about.
    let orphan = key(&scratch, "t");
    let dir = server.data_dir().join(BUCKET).join("l1");
    std::fs::copy(dir.join(&k), dir.join(&orphan)).unwrap();
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &orphan, "--json"],
        &env(&server, &server.endpoint, &server.secret_key),
    );
    run.assert_ok();
    assert_eq!(run.json()["outcome"]["reason"], "incomplete_upload", "{}", run.stdout);
    assert!(run.stderr.contains("Delete the object"), "{}", run.stderr);
    assert!(run.stderr.contains(&orphan), "{}", run.stderr);
}

/// Review finding 9: temp files and staging directories that killed restores and saves left
/// beside the cache directory are deleted by the next restore (and save) once they have
/// been untouched for an hour; fresh ones and other caches' are kept.
#[test]
fn snapshot_stale_leftovers_beside_the_cache_are_removed() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let (cache, _) = victim(&scratch);
    let parent = cache.parent().unwrap().to_path_buf();
    let old = [".cache.download-Ab12Cd", ".cache.pack-Xy34Zw", ".cache.tmp-0123456789abcdef"];
    let kept = [".cache.sidecar-fresh1", ".other.download-Ab12Cd"];
    for name in old.iter().chain(&kept) {
        if name.contains(".tmp-") {
            std::fs::create_dir_all(parent.join(name).join("actions-v1")).unwrap();
        } else {
            std::fs::write(parent.join(name), b"partial").unwrap();
        }
    }
    for name in old {
        let status = std::process::Command::new("touch")
            .args(["-d", "2 hours ago"])
            .arg(parent.join(name))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let k = key(&scratch, "s");
    let run =
        strata(&scratch, &["snapshot", "restore", "--cache-dir", &arg(&cache), "--key", &k], &env);
    run.assert_ok();
    assert!(run.stderr.contains("a leftover of an interrupted restore or save"), "{}", run.stderr);
    let mut left = names(&parent);
    left.retain(|n| n != "cache");
    assert_eq!(left, kept, "{}", run.stderr);
}
