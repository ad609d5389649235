//! Faults between the S3 store and s3s-fs, injected by [`FaultProxy`]: retried 500s,
//! giving up with a count, timeouts, a server that is down, aborting failed multipart
//! uploads, and the conditional write that protects against a lost HEAD race.

use std::time::{Duration, Instant};

use strata::transport::{
    NetworkErrorKind, ObjectKey, PutOutcome, TransportOptions, open_store_with_env,
};

use super::logs::Captured;
use super::proxy::{Fault, FaultProxy, Rule};
use super::random_bytes;
use super::server::{BUCKET, S3sServer, fast_options, free_port, url_for};

const MIB: usize = 1024 * 1024;

fn key(text: &str) -> ObjectKey {
    text.parse().unwrap()
}

fn multipart_options() -> TransportOptions {
    TransportOptions { part_size_bytes: 5 * MIB as u64, parallelism: 3, ..fast_options() }
}

/// Leftover multipart state of s3s-fs (`.upload_id-*` files in its data directory).
fn pending_uploads(server: &S3sServer) -> Vec<String> {
    std::fs::read_dir(server.data_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with(".upload_id-"))
        .collect()
}

#[test]
fn transport_s3_retries_a_failed_upload_part() {
    let server = S3sServer::start();
    let rule = Rule {
        method: "PUT",
        contains: "partNumber=2&",
        fault: Fault::ServerError,
        times: Some(1),
    };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &multipart_options(), server.env())
            .unwrap();
    let work = tempfile::tempdir().unwrap();
    let data = random_bytes(12 * MIB, 5);
    let src = work.path().join("src");
    std::fs::write(&src, &data).unwrap();
    let (result, logs) =
        Captured::during(|| store.put_file_if_absent(&key("k"), &src).map_err(|e| e.to_string()));
    let (outcome, stats) = result.unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    assert_eq!(proxy.injected(), 1);
    // The retry is logged with method, object, attempt and status, and nothing secret.
    let retry_line = logs.iter().find(|l| l.contains("retrying")).expect("a retry warning");
    assert!(retry_line.starts_with("WARN"), "{retry_line}");
    for expected in
        ["method=\"PUT\"", "s3://strata-test/p/k", "attempt=1", "HTTP 500 InternalError"]
    {
        assert!(retry_line.contains(expected), "{expected} missing from {retry_line}");
    }
    let all = logs.join("\n");
    for secret in [server.secret_key.as_str(), server.access_key.as_str(), "Signature="] {
        assert!(!all.contains(secret), "{secret} in logs: {all}");
    }
    assert_eq!(stats.retries, 1, "the retry is counted");
    let part_twos = proxy
        .seen()
        .iter()
        .filter(|r| r.starts_with("PUT ") && r.contains("partNumber=2&"))
        .count();
    assert_eq!(part_twos, 2, "{:?}", proxy.seen());
    let dest = work.path().join("dest");
    store.get_to_file(&key("k"), &dest).unwrap();
    assert!(std::fs::read(&dest).unwrap() == data);
}

#[test]
fn transport_s3_gives_up_after_max_retries_and_aborts_the_upload() {
    let server = S3sServer::start();
    let rule =
        Rule { method: "PUT", contains: "partNumber=", fault: Fault::ServerError, times: None };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let options = TransportOptions { max_retries: 2, parallelism: 1, ..multipart_options() };
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &options, server.env()).unwrap();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    std::fs::write(&src, random_bytes(11 * MIB, 6)).unwrap();
    let started = Instant::now();
    let err = store.put_file_if_absent(&key("k"), &src).unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(err.retries(), 2, "{err}");
    assert!(err.to_string().contains("after 2 retries"), "{err}");
    assert!(err.to_string().contains("HTTP 500"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let seen = proxy.seen();
    assert!(
        seen.iter().any(|r| r.starts_with("DELETE ") && r.contains("uploadId=")),
        "no AbortMultipartUpload was sent: {seen:?}"
    );
    assert!(pending_uploads(&server).is_empty(), "{:?}", pending_uploads(&server));
    assert!(!server.data_dir().join(BUCKET).join("p/k").exists());
}

#[test]
fn transport_s3_slow_server_times_out_in_bounded_time() {
    let server = S3sServer::start();
    let rule = Rule {
        method: "HEAD",
        contains: "/",
        fault: Fault::Stall(Duration::from_secs(6)),
        times: None,
    };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let options = TransportOptions {
        request_timeout: Duration::from_secs(1),
        max_retries: 1,
        ..fast_options()
    };
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &options, server.env()).unwrap();
    let started = Instant::now();
    let err = store.head(&key("k")).unwrap_err();
    let elapsed = started.elapsed();
    assert!(err.is_timeout(), "{err}");
    assert!(err.is_retryable());
    assert_eq!(err.retries(), 1, "{err}");
    assert!(elapsed < Duration::from_secs(4), "took {elapsed:?}");
    assert!(err.to_string().contains("timed out"), "{err}");
}

#[test]
fn transport_s3_server_down_fails_in_bounded_time() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let options = TransportOptions { max_retries: 2, ..fast_options() };
    let env = |name: &str| match name {
        "AWS_ACCESS_KEY_ID" => Some("test-access".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some("test-secret".to_owned()),
        _ => None,
    };
    let store = open_store_with_env(&url_for(&endpoint, "p"), &options, env).unwrap();
    let started = Instant::now();
    let err = store.listing().unwrap().list("").unwrap_err();
    assert!(
        matches!(err, strata::transport::Error::Network { kind: NetworkErrorKind::Connect, .. }),
        "{err}"
    );
    assert_eq!(err.retries(), 2);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(!format!("{err:?}").contains("test-secret"));
}

#[test]
fn transport_s3_conditional_write_catches_a_lost_head_race() {
    // The proxy hides the existing object from HEAD (as if another writer published it
    // just after our HEAD); the If-None-Match: * write must still refuse to overwrite.
    let server = S3sServer::start();
    let direct = server.store("p", &multipart_options());
    let work = tempfile::tempdir().unwrap();
    let original = work.path().join("original");
    std::fs::write(&original, b"original bytes").unwrap();
    for name in ["small", "large"] {
        direct.put_file_if_absent(&key(name), &original).unwrap();
    }
    let rule = Rule { method: "HEAD", contains: "/", fault: Fault::NotFound, times: None };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let racing =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &multipart_options(), server.env())
            .unwrap();
    let small = work.path().join("small");
    std::fs::write(&small, b"new").unwrap();
    let large = work.path().join("large");
    std::fs::write(&large, random_bytes(6 * MIB, 7)).unwrap();
    assert_eq!(
        racing.put_file_if_absent(&key("small"), &small).unwrap().0,
        PutOutcome::AlreadyExists
    );
    assert_eq!(
        racing.put_file_if_absent(&key("large"), &large).unwrap().0,
        PutOutcome::AlreadyExists
    );
    let seen = proxy.seen();
    assert!(seen.iter().any(|r| r.starts_with("PUT ") && r.ends_with("/p/small")), "{seen:?}");
    assert!(seen.iter().any(|r| r.starts_with("DELETE ") && r.contains("uploadId=")), "{seen:?}");
    for name in ["small", "large"] {
        let dest = work.path().join(format!("{name}.out"));
        direct.get_to_file(&key(name), &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"original bytes", "{name} was overwritten");
    }
    assert!(pending_uploads(&server).is_empty());
}

#[test]
fn transport_s3_wrong_region_names_the_right_one() {
    let server = S3sServer::start();
    let rules = vec![
        Rule {
            method: "HEAD",
            contains: "/",
            fault: Fault::Answer("301 Moved Permanently", "x-amz-bucket-region: eu-west-1\r\n", ""),
            times: None,
        },
        Rule {
            method: "GET",
            contains: "list-type=2",
            fault: Fault::Answer(
                "400 Bad Request",
                "content-type: application/xml\r\n",
                "<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region 'us-east-1' is \
                 wrong; expecting 'ap-southeast-1'</Message><Region>ap-southeast-1</Region></Error>",
            ),
            times: None,
        },
    ];
    let proxy = FaultProxy::start(&server.endpoint, rules);
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &fast_options(), server.env()).unwrap();
    let err = store.head(&key("k")).unwrap_err();
    assert!(err.to_string().contains("the bucket is in eu-west-1; set region=eu-west-1"), "{err}");
    let err = store.listing().unwrap().list("").unwrap_err();
    assert!(
        err.to_string().contains("the bucket is in ap-southeast-1; set region=ap-southeast-1"),
        "{err}"
    );
    assert!(!err.is_retryable() && err.retries() == 0, "{err}");
}

#[test]
fn transport_s3_retries_a_failed_ranged_get() {
    let server = S3sServer::start();
    let direct = server.store("p", &multipart_options());
    let work = tempfile::tempdir().unwrap();
    let data = random_bytes(11 * MIB + 7, 8);
    let src = work.path().join("src");
    std::fs::write(&src, &data).unwrap();
    direct.put_file_if_absent(&key("k"), &src).unwrap();
    let rule = Rule { method: "GET", contains: "/p/k", fault: Fault::ServerError, times: Some(1) };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &multipart_options(), server.env())
            .unwrap();
    let dest = work.path().join("dest");
    let (meta, stats) = store.get_to_file(&key("k"), &dest).unwrap();
    assert_eq!(meta.size_bytes, data.len() as u64);
    assert_eq!(stats.retries, 1);
    assert_eq!(proxy.injected(), 1);
    let gets = proxy.seen().iter().filter(|r| r.starts_with("GET ")).count();
    assert_eq!(gets, 4, "three ranged parts plus one retry: {:?}", proxy.seen());
    assert!(std::fs::read(&dest).unwrap() == data);
}

/// What a store that checks the precondition before the upload id answers a retried
/// completion (AWS-like): 412.
const PRECONDITION_FAILED: Fault = Fault::Answer(
    "412 Precondition Failed",
    "content-type: application/xml\r\n",
    "<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you \
     specified did not hold</Message></Error>",
);

/// Issue 7 item 6: a conditional write whose answer is lost is retried; the retry is
/// refused because the first attempt worked. The upload reports `Created` (the truth), for
/// a single PUT (s3s-fs answers the retry 412) and for a multipart completion (s3s-fs
/// answers 403 because the upload id is used up; an AWS-like store answers 412).
#[test]
fn transport_s3_a_write_whose_answer_was_lost_is_created() {
    let server = S3sServer::start();
    let work = tempfile::tempdir().unwrap();
    let small = work.path().join("small");
    std::fs::write(&small, b"small object bytes").unwrap();
    let large = work.path().join("large");
    let large_data = random_bytes(11 * MIB, 21);
    std::fs::write(&large, &large_data).unwrap();
    let cases: [(&str, &std::path::Path, Vec<Rule>); 3] = [
        (
            "small",
            &small,
            vec![Rule {
                method: "PUT",
                contains: "/p/small",
                fault: Fault::LoseAnswer,
                times: Some(1),
            }],
        ),
        (
            "large-403",
            &large,
            vec![Rule {
                method: "POST",
                contains: "uploadId=",
                fault: Fault::LoseAnswer,
                times: Some(1),
            }],
        ),
        (
            "large-412",
            &large,
            vec![
                Rule {
                    method: "POST",
                    contains: "uploadId=",
                    fault: Fault::LoseAnswer,
                    times: Some(1),
                },
                Rule {
                    method: "POST",
                    contains: "uploadId=",
                    fault: PRECONDITION_FAILED,
                    times: Some(1),
                },
            ],
        ),
    ];
    for (name, src, rules) in cases {
        let expected_faults = rules.len() as u32;
        let proxy = FaultProxy::start(&server.endpoint, rules);
        let store =
            open_store_with_env(&url_for(&proxy.endpoint, "p"), &multipart_options(), server.env())
                .unwrap();
        let (outcome, stats) = store.put_file_if_absent(&key(name), src).unwrap();
        assert_eq!(outcome, PutOutcome::Created, "{name}: {:?}", proxy.seen());
        assert_eq!(proxy.injected(), expected_faults, "{name}: {:?}", proxy.seen());
        assert!(stats.retries >= 1, "{name}: {stats:?}");
        let seen = proxy.seen();
        assert!(
            !seen.iter().any(|r| r.starts_with("DELETE ")),
            "{name}: a completed upload was aborted or deleted: {seen:?}"
        );
        let dest = work.path().join(format!("{name}.out"));
        store.get_to_file(&key(name), &dest).unwrap();
        assert!(std::fs::read(&dest).unwrap() == std::fs::read(src).unwrap(), "{name}");
    }
    assert!(pending_uploads(&server).is_empty(), "{:?}", pending_uploads(&server));
}

/// Issue 7 item 6, the other side: a retried write refused because *another* writer's
/// object (same size, other bytes) is there stays `AlreadyExists`, and that object is
/// untouched; the multipart upload is aborted.
#[test]
fn transport_s3_a_refused_retry_over_another_object_is_already_exists() {
    let server = S3sServer::start();
    let direct = server.store("p", &multipart_options());
    let work = tempfile::tempdir().unwrap();
    let theirs_small = random_bytes(1000, 31);
    let theirs_large = random_bytes(6 * MIB, 32);
    for (name, data) in [("small", &theirs_small), ("large", &theirs_large)] {
        let path = work.path().join(format!("{name}.theirs"));
        std::fs::write(&path, data).unwrap();
        direct.put_file_if_absent(&key(name), &path).unwrap();
    }
    // The first HEAD misses their object (it lands just after); the first write attempt
    // fails with a 500 that wrote nothing; the retry gets the store's real 412.
    let rules = vec![
        Rule { method: "HEAD", contains: "/p/small", fault: Fault::NotFound, times: Some(1) },
        Rule { method: "HEAD", contains: "/p/large", fault: Fault::NotFound, times: Some(1) },
        Rule { method: "PUT", contains: "/p/small", fault: Fault::ServerError, times: Some(1) },
        Rule { method: "POST", contains: "uploadId=", fault: Fault::ServerError, times: Some(1) },
    ];
    let proxy = FaultProxy::start(&server.endpoint, rules);
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &multipart_options(), server.env())
            .unwrap();
    for (name, data, theirs) in [
        ("small", random_bytes(1000, 33), &theirs_small),
        ("large", random_bytes(6 * MIB, 34), &theirs_large),
    ] {
        let ours = work.path().join(format!("{name}.ours"));
        std::fs::write(&ours, &data).unwrap();
        let (outcome, stats) = store.put_file_if_absent(&key(name), &ours).unwrap();
        assert_eq!(outcome, PutOutcome::AlreadyExists, "{name}: {:?}", proxy.seen());
        assert_eq!(stats.retries, 1, "{name}");
        let dest = work.path().join(format!("{name}.out"));
        direct.get_to_file(&key(name), &dest).unwrap();
        assert!(std::fs::read(&dest).unwrap() == *theirs, "{name} was overwritten");
    }
    assert_eq!(proxy.injected(), 4, "{:?}", proxy.seen());
    let seen = proxy.seen();
    // Each refused retry was checked against the stored bytes: one GET of the whole object,
    // besides the one-byte probe that follows the hidden HEAD.
    for name in ["small", "large"] {
        let path = format!("/p/{name}");
        let gets = seen.iter().filter(|r| r.starts_with("GET ") && r.ends_with(&path)).count();
        assert_eq!(gets, 2, "{name}: {seen:?}");
    }
    assert!(seen.iter().any(|r| r.starts_with("DELETE ") && r.contains("uploadId=")), "{seen:?}");
    assert!(pending_uploads(&server).is_empty());
}

/// Issue 7 item 6: a retried completion refused with 403 when no object with the uploaded
/// bytes exists is an error that says what happened (not "check the credentials"), and
/// the upload is aborted.
#[test]
fn transport_s3_a_refused_completion_retry_without_the_object_says_so() {
    let server = S3sServer::start();
    let rules = vec![
        Rule { method: "POST", contains: "uploadId=", fault: Fault::ServerError, times: Some(1) },
        Rule {
            method: "POST",
            contains: "uploadId=",
            fault: Fault::Answer(
                "403 Forbidden",
                "content-type: application/xml\r\n",
                "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>",
            ),
            times: Some(1),
        },
    ];
    let proxy = FaultProxy::start(&server.endpoint, rules);
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &multipart_options(), server.env())
            .unwrap();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    std::fs::write(&src, random_bytes(6 * MIB, 41)).unwrap();
    let err = store.put_file_if_absent(&key("k"), &src).unwrap_err().to_string();
    assert!(err.contains("retried after its answer was lost"), "{err}");
    assert!(err.contains("the upload did not complete"), "{err}");
    assert!(!err.contains("check the credentials"), "{err}");
    assert_eq!(proxy.injected(), 2);
    let seen = proxy.seen();
    assert!(seen.iter().any(|r| r.starts_with("DELETE ") && r.contains("uploadId=")), "{seen:?}");
    assert!(pending_uploads(&server).is_empty());
    assert!(server.store("p", &fast_options()).head(&key("k")).unwrap().is_none());
}
