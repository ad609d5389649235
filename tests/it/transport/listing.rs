//! Listings on stores whose ListObjectsV2 pagination is not what AWS documents (issue 7
//! item 8): a truncated page without a continuation token is continued with
//! `start-after=<last key>`; a page that repeats stops with a clear error after a bounded
//! number of requests. Stub servers on 127.0.0.1 ([`ListStub`]) play the broken store, and
//! a proxy in front of s3s-fs strips every token from its real answers.

use std::time::{Duration, Instant};

use strata::transport::{Error, open_store_with_env};

use super::server::{S3sServer, fast_options, url_for};
use super::stub::{ListStub, Paging, RewriteProxy, query_value};

/// Fake credentials: the stub does not check signatures, but the requests are signed.
fn env(name: &str) -> Option<String> {
    match name {
        "AWS_ACCESS_KEY_ID" => Some("stub-access".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some("stub-secret".to_owned()),
        _ => None,
    }
}

#[test]
fn transport_s3_lists_past_truncated_pages_without_a_token() {
    // 2,345 objects under p/, plus a name strata skips (not a valid object key) as the
    // last key of the first page: start-after must use it all the same.
    let mut keys: Vec<String> = (0..2_345).map(|i| format!("p/k{i:05}")).collect();
    keys.push("p/k00998/../z".to_owned());
    keys.push("q/outside".to_owned());
    let stub = ListStub::start(keys, 1_000, Paging::StartAfterOnly);
    let store = open_store_with_env(&url_for(&stub.endpoint, "p"), &fast_options(), env).unwrap();
    let listed = store.listing().unwrap().list("").unwrap();
    let got: Vec<String> = listed.iter().map(|m| m.key.to_string()).collect();
    let expected: Vec<String> = (0..2_345).map(|i| format!("k{i:05}")).collect();
    assert_eq!(got.len(), 2_345);
    assert_eq!(got, expected);
    let requests = stub.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let after: Vec<Option<String>> =
        requests.iter().map(|r| query_value(r, "start-after")).collect();
    assert_eq!(
        after,
        [None, Some("p/k00998/../z".to_owned()), Some("p/k01998".to_owned())],
        "{requests:?}"
    );
    assert!(requests.iter().all(|r| query_value(r, "continuation-token").is_none()));
    // A listing under a sub-prefix pages the same way.
    assert_eq!(store.listing().unwrap().list("k01").unwrap().len(), 1_000);
}

#[test]
fn transport_s3_listing_that_repeats_a_page_stops_with_a_clear_error() {
    let keys: Vec<String> = (0..50).map(|i| format!("p/k{i:03}")).collect();
    for (paging, most_requests, wording) in [
        (Paging::SameTokenForever, 3, "no request would make progress"),
        (Paging::NoTokenForever, 2, "no request would make progress"),
        (Paging::FreshTokenForever, 101, "truncated pages in a row brought no new key"),
    ] {
        let stub = ListStub::start(keys.clone(), 10, paging);
        let store =
            open_store_with_env(&url_for(&stub.endpoint, "p"), &fast_options(), env).unwrap();
        let started = Instant::now();
        let err = store.listing().unwrap().list("").unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(20), "{paging:?}: {:?}", started.elapsed());
        assert!(matches!(err, Error::Protocol { .. }), "{paging:?}: {err}");
        assert!(!err.is_retryable(), "{paging:?}: {err}");
        let message = err.to_string();
        assert!(message.contains(wording), "{paging:?}: {message}");
        assert!(
            message.contains("GET s3://strata-test/p/: unexpected response: page "),
            "{message}"
        );
        assert_eq!(stub.requests().len(), most_requests, "{paging:?}: {:?}", stub.requests());
    }
}

#[test]
fn transport_s3_lists_s3s_fs_with_every_continuation_token_stripped() {
    let server = S3sServer::start();
    let dir = server.data_dir().join(super::server::BUCKET).join("pfx");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..2_100 {
        std::fs::write(dir.join(format!("o{i:05}")), b"x").unwrap();
    }
    let proxy = RewriteProxy::start(
        &server.endpoint,
        Box::new(|method, target, body| {
            if method != "GET" || !target.contains("list-type=2") {
                return false;
            }
            let text = String::from_utf8_lossy(body).into_owned();
            let Some(start) = text.find("<NextContinuationToken>") else { return false };
            let end = text.find("</NextContinuationToken>").unwrap() + 24;
            *body = format!("{}{}", &text[..start], &text[end..]).into_bytes();
            true
        }),
    );
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "pfx"), &fast_options(), server.env())
            .unwrap();
    let listed = store.listing().unwrap().list("").unwrap();
    assert_eq!(listed.len(), 2_100);
    assert_eq!(listed.last().unwrap().key.as_str(), "o02099");
    assert_eq!(proxy.rewritten(), 2, "{:?}", proxy.seen());
    let seen = proxy.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen[1].contains("start-after=pfx%2Fo00999"), "{seen:?}");
}
