//! Reports that must not mislead (issue 7 item 11): retry counts cover every request of
//! the operation; data that fails its digest after a download is called possibly
//! transient, never "delete it"; URL settings that cannot work are usage errors before any
//! request; no message repeats its own prefix.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::super::transport::proxy::{Fault, FaultProxy, Rule};
use super::super::transport::server::url_for;
use super::{S3sServer, Scratch, fill_cache, key, strata};

fn arg(path: &Path) -> String {
    path.display().to_string()
}

fn env(server: &S3sServer, endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("STRATA_STORE", url_for(endpoint, "l1")),
        ("AWS_ACCESS_KEY_ID", server.access_key.clone()),
        ("AWS_SECRET_ACCESS_KEY", server.secret_key.clone()),
    ]
}

fn fail_once(method: &'static str, contains: &'static str) -> Rule {
    Rule { method, contains, fault: Fault::ServerError, times: Some(1) }
}

/// Saves a small cache under a fresh key straight to `server`; returns the key.
fn saved_key(scratch: &Scratch, server: &S3sServer, seed: u64) -> String {
    let cache = scratch.path(&format!("src-{seed}/cache"));
    fill_cache(&cache, seed);
    let k = key(scratch, &format!("s{seed}"));
    let run = strata(
        scratch,
        &["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k],
        &env(server, &server.endpoint),
    );
    run.assert_ok();
    assert!(run.stderr.contains("SAVED"), "{}", run.stderr);
    k
}

/// Issue 7 item 11, first bullet: `retries` counts the HEADs, the sidecar GET, the object
/// GET and listing pages, on success, on a miss and on failure.
#[test]
fn snapshot_restore_reports_every_retried_request() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let k = saved_key(&scratch, &server, 1);
    let restore = |proxy: &FaultProxy, key: &str, out: &str| {
        let run = strata(
            &scratch,
            &["snapshot", "restore", "--cache-dir", out, "--key", key, "--json"],
            &env(&server, &proxy.endpoint),
        );
        run.assert_ok();
        run.json()
    };

    // Restored: one 500 on the sidecar's HEAD, one on the sidecar's GET.
    let sidecar = Box::leak(format!("{k}.json").into_boxed_str());
    let proxy = FaultProxy::start(
        &server.endpoint,
        vec![fail_once("HEAD", sidecar), fail_once("GET", sidecar)],
    );
    let report = restore(&proxy, &k, "out-1");
    assert_eq!(report["status"], "restored", "{report}");
    assert_eq!(proxy.injected(), 2);
    assert_eq!(report["retries"], 2, "{report}");

    // Another key: one 500 on a listing page (the compatible snapshot is found).
    let proxy = FaultProxy::start(&server.endpoint, vec![fail_once("GET", "list-type=2")]);
    let other = key(&scratch, "othersources");
    let report = restore(&proxy, &other, "out-2");
    assert_eq!(proxy.injected(), 1);
    assert_eq!(report["retries"], 1, "{report}");

    // A failure: one 500 on the sidecar's HEAD, then the sidecar's GET fails for good
    // (STRATA_S3_MAX_RETRIES=2: two retries of it).
    let proxy = FaultProxy::start(
        &server.endpoint,
        vec![
            fail_once("HEAD", sidecar),
            Rule { method: "GET", contains: sidecar, fault: Fault::ServerError, times: None },
        ],
    );
    let report = restore(&proxy, &k, "out-3");
    assert_eq!(report["status"], "error", "{report}");
    assert_eq!(proxy.injected(), 4, "{:?}", proxy.seen());
    assert_eq!(report["retries"], 3, "{report}");
}

/// Issue 7 item 11, first bullet, for saves: the save's own HEADs count too.
#[test]
fn snapshot_save_reports_every_retried_request() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let proxy = FaultProxy::start(&server.endpoint, vec![fail_once("HEAD", ".json")]);
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 3);
    let k = key(&scratch, "s");
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k, "--json"],
        &env(&server, &proxy.endpoint),
    );
    run.assert_ok();
    let report = run.json();
    assert_eq!(report["outcome"]["status"], "saved", "{report}");
    assert_eq!(proxy.injected(), 1);
    assert_eq!(report["retries"], 1, "{report}");
}

/// Damages an answer's body in place.
type Flip = fn(&mut Vec<u8>);

/// Flips one byte of the first GET answer whose path ends with `suffix`, in transit.
fn flip_once(
    server: &S3sServer,
    suffix: String,
    flip: Flip,
) -> super::super::transport::stub::RewriteProxy {
    let done = std::sync::atomic::AtomicBool::new(false);
    super::super::transport::stub::RewriteProxy::start(
        &server.endpoint,
        Box::new(move |method, target, body| {
            let path = target.split('?').next().unwrap_or_default();
            if method != "GET" || !path.ends_with(&suffix) || done.swap(true, Ordering::SeqCst) {
                return false;
            }
            flip(body);
            true
        }),
    )
}

/// Issue 7 item 11, second bullet: a byte damaged in transit (in the sidecar, or in the
/// object) is reported as possibly transient with the advice to retry, never "delete it";
/// the stored snapshot is intact and the next restore succeeds.
#[test]
fn snapshot_damage_in_transit_is_called_possibly_transient() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let k = saved_key(&scratch, &server, 4);
    // The data object: the one stored object beside the sidecar (a save names it uniquely).
    let objects = server
        .store("l1", &super::super::transport::server::fast_options())
        .listing()
        .unwrap()
        .list("")
        .unwrap();
    let names: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let object = names.iter().find(|n| !n.ends_with(".json")).unwrap().to_string();
    let cases: [(String, Flip, &str); 2] = [
        (
            format!("/{k}.json"),
            |body| {
                // One letter of the payload's key: still valid JSON, a digest mismatch.
                let at = body.windows(7).position(|w| w == b"\"key\":\"").unwrap() + 7;
                body[at] ^= 0x01;
            },
            "did not verify after the download (record digest mismatch: recorded sha256:",
        ),
        (
            format!("/{object}"),
            |body| {
                let middle = body.len() / 2;
                body[middle] ^= 0x40;
            },
            "does not match its sidecar (",
        ),
    ];
    for (i, (suffix, flip, what)) in cases.into_iter().enumerate() {
        let proxy = flip_once(&server, suffix, flip);
        let out = format!("out-{i}");
        let run = strata(
            &scratch,
            &["snapshot", "restore", "--cache-dir", &out, "--key", &k, "--json"],
            &env(&server, &proxy.endpoint),
        );
        run.assert_ok();
        assert_eq!(proxy.rewritten(), 1, "{:?}", proxy.seen());
        let report = run.json();
        assert_eq!(report["status"], "error", "{report}");
        let error = report["error"].as_str().unwrap();
        assert!(error.contains(what), "{error}");
        assert!(
            error.contains(
                "this may be a transient transfer error (bytes damaged in transit): retry the \
                 restore; only if every retry fails the same way is the stored copy damaged"
            ),
            "{error}"
        );
        assert!(!error.contains("delete"), "{error}");
        assert!(!run.stderr.contains("delete it"), "{}", run.stderr);
        // The same restore again (the damage was transient): restored.
        let again = strata(
            &scratch,
            &["snapshot", "restore", "--cache-dir", &out, "--key", &k, "--json"],
            &env(&server, &proxy.endpoint),
        );
        again.assert_ok();
        assert_eq!(again.json()["status"], "restored", "{}", again.stdout);
    }
}

/// Issue 7 item 11, fourth bullet: `addressing=virtual` with an endpoint that cannot carry
/// a bucket in its host name (an IP address, `localhost`) or a bucket name a host cannot
/// carry is a usage error (exit 2) before any request, saying to use `addressing=path`.
#[test]
fn snapshot_virtual_addressing_that_cannot_work_is_a_usage_error() {
    let scratch = Scratch::new();
    let stub = super::super::transport::stub::ListStub::start(
        Vec::new(),
        10,
        super::super::transport::stub::Paging::StartAfterOnly,
    );
    let port = stub.endpoint.rsplit(':').next().unwrap().to_owned();
    let k = key(&scratch, "v");
    for (url, fragment) in [
        (
            format!("s3://cache/l1?endpoint={}&addressing=virtual", stub.endpoint),
            "(cache.127.0.0.1), which cannot work: the endpoint host 127.0.0.1 is an IP address"
                .to_owned(),
        ),
        (
            format!("s3://cache/l1?endpoint=http://localhost:{port}&addressing=virtual"),
            "the endpoint host localhost is localhost, which has no sub-domains".to_owned(),
        ),
        (
            format!("s3://cache/l1?endpoint=http://[::1]:{port}&addressing=virtual"),
            "the endpoint host [::1] is an IP address".to_owned(),
        ),
        (
            "s3://Old_Bucket/l1?region=us-east-1&addressing=virtual".to_owned(),
            "the bucket name \"Old_Bucket\" has upper-case letters or '_'".to_owned(),
        ),
    ] {
        let env = vec![
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "not-a-real-secret".to_owned()),
        ];
        let args = ["snapshot", "restore", "--cache-dir", "out", "--key", &k, "--store", &url];
        let run = strata(&scratch, &args, &env);
        assert_eq!(run.code, 2, "{url}: {}", run.stderr);
        assert!(run.stderr.contains(&fragment), "{url}: {}", run.stderr);
        assert!(
            run.stderr.contains(
                "strata: error: invalid addressing=\"virtual\": virtual-hosted addressing puts \
                 the bucket in the host name"
            ),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("; use addressing=path"), "{}", run.stderr);
        assert!(!run.stderr.contains("retrying"), "{}", run.stderr);
        assert!(!scratch.path("out").exists());
    }
    assert!(stub.requests().is_empty(), "{:?}", stub.requests());
}

/// Issue 7 item 11, fifth bullet: a message that wraps another never repeats its prefix
/// ("invalid --key: invalid --key: …"); each is a usage error (exit 2).
#[test]
fn snapshot_usage_errors_say_invalid_once() {
    let scratch = Scratch::new();
    let restore = |key: &str, store: &str, env: &[(&str, String)]| {
        strata(
            &scratch,
            &["snapshot", "restore", "--cache-dir", "out", "--key", key, "--store", store],
            env,
        )
    };
    let file_store = scratch.file_store();
    for (run, expected) in [
        (
            restore("a,b", &file_store, &[]),
            "strata: error: invalid --key: it contains ','; keys use only letters",
        ),
        (
            restore("k", "s3://b/../x", &[]),
            "strata: error: invalid store URL \"s3://b/../x\": bad prefix: ",
        ),
        (
            restore("k", "s3://b/p?endpoint=ftp://x", &[]),
            "strata: error: invalid endpoint=\"ftp://x\": the endpoint must start with http://",
        ),
        (
            restore("k", "s3://b/p", &[("STRATA_S3_MAX_RETRIES", "lots".to_owned())]),
            "strata: error: invalid STRATA_S3_MAX_RETRIES=\"lots\": ",
        ),
    ] {
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains(expected), "{expected}: {}", run.stderr);
        assert_eq!(run.stderr.matches("invalid").count(), 1, "{}", run.stderr);
    }
}

/// `save --json` reads alike on every outcome: a failed save carries `status`,
/// `outcome.status`, `key` and `store` as a saved one does (a failure printed only
/// `status`, `error` and `retries`, so `.outcome.status` and `.key` were missing), and never
/// a secret.
#[test]
fn snapshot_save_json_has_the_same_fields_on_success_and_failure() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 5);
    let k = key(&scratch, "j");
    let args = ["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k, "--json"];
    let ok = strata(&scratch, &args, &env(&server, &server.endpoint));
    ok.assert_ok();
    let ok = ok.json();
    assert_eq!((&ok["status"], &ok["outcome"]["status"]), (&"saved".into(), &"saved".into()));
    // Nothing listens on port 1: the save fails (exit 0, fail open) after its retries.
    let failed = strata(&scratch, &args, &env(&server, "http://127.0.0.1:1"));
    failed.assert_ok();
    failed.assert_no_secret(&[&server.secret_key]);
    let failed = failed.json();
    for field in ["status", "outcome", "key", "store", "retries", "error"] {
        assert!(failed.get(field).is_some(), "{field} missing: {failed}");
    }
    assert_eq!(failed["status"], "error", "{failed}");
    assert_eq!(failed["outcome"]["status"], "error", "{failed}");
    assert_eq!(failed["key"], k.as_str(), "{failed}");
    assert_eq!(failed["retries"], 2, "{failed}");
    assert!(failed["store"].as_str().unwrap().contains("127.0.0.1:1"), "{failed}");
}
