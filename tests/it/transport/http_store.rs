//! The HTTP cache store against nginx answering what real servers answer: a WebDAV server
//! that wants collections made first (409), a body limit (413), a failing server (500),
//! a read-only server (405), one that ignores `Range`, and bazel-remote's layout. Also
//! what nginx does with `If-None-Match: *` on a PUT (measured: it replaces the object).

use std::io::{Read, Write};
use std::net::TcpStream;

use strata::transport::{Error, ObjectKey, PutOutcome, TransportOptions};

use super::nginx::Nginx;
use super::proxy::{Fault, FaultProxy, Rule};
use super::random_bytes;
use super::server::fast_options;

const MIB: usize = 1024 * 1024;

fn key(text: &str) -> ObjectKey {
    text.parse().unwrap()
}

#[test]
fn http_store_makes_missing_collections_after_a_409() {
    let nginx = Nginx::start();
    // nginx answers a PUT below a missing directory with 500 (RFC 4918 and Apache's
    // mod_dav say 409): the message says what to configure.
    let options = TransportOptions { max_retries: 0, ..fast_options() };
    let err = nginx.store("nodirs", &options).put_bytes_if_absent(&key("a/b"), b"x").unwrap_err();
    assert!(matches!(err, Error::Http { status: 500, .. }), "{err}");
    assert!(err.to_string().contains("create_full_put_path"), "{err}");
    // A server that answers 409, as WebDAV servers do, gets the collections made with
    // MKCOL (here nginx's, which needs them) and the PUT again.
    let proxy = FaultProxy::start(
        &nginx.endpoint,
        vec![Rule {
            method: "PUT",
            contains: "/nodirs/",
            fault: Fault::Answer("409 Conflict", "", ""),
            times: Some(1),
        }],
    );
    let url = format!("{}/nodirs", proxy.endpoint);
    let store = strata::transport::open_store_with_env(&url, &fast_options(), |_| None).unwrap();
    let (outcome, stats) = store.put_bytes_if_absent(&key("~refs/ab/deep/r.json"), b"ref").unwrap();
    assert_eq!((outcome, stats.bytes), (PutOutcome::Created, 3));
    let stored = nginx.data_dir("nodirs").join("~refs/ab/deep/r.json");
    assert_eq!(std::fs::read(stored).unwrap(), b"ref");
    // Collections that exist (405 to MKCOL) are fine: a sibling goes up the same way.
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    std::fs::write(&src, random_bytes(10_000, 9)).unwrap();
    assert_eq!(
        store.put_file_if_absent(&key("~refs/ab/other"), &src).unwrap().0,
        PutOutcome::Created
    );
    assert_eq!(
        store.get_small(&key("~refs/ab/other"), 20_000).unwrap().unwrap(),
        std::fs::read(&src).unwrap()
    );
    assert_eq!(store.retried_requests(), 0, "a 409 is not retried: the collections are made");
    let mkcols: Vec<String> =
        proxy.seen().into_iter().filter(|r| r.starts_with("MKCOL ")).collect();
    assert_eq!(
        mkcols,
        ["MKCOL /nodirs/~refs/", "MKCOL /nodirs/~refs/ab/", "MKCOL /nodirs/~refs/ab/deep/"]
    );
}

#[test]
fn http_store_reports_a_body_limit_without_retrying() {
    let nginx = Nginx::start();
    let store = nginx.store("small", &fast_options());
    assert_eq!(
        store.put_bytes_if_absent(&key("fits"), &[7u8; 500]).unwrap().0,
        PutOutcome::Created
    );
    let err = store.put_bytes_if_absent(&key("big"), &[7u8; 4096]).unwrap_err();
    assert!(matches!(err, Error::Http { status: 413, .. }), "{err}");
    assert!(!err.is_retryable() && err.retries() == 0, "{err}");
    let text = err.to_string();
    assert!(text.contains("HTTP 413: Payload Too Large"), "{text}");
    assert!(text.contains("client_max_body_size") && text.contains(&nginx.url("small")), "{text}");
    assert!(store.head(&key("big")).unwrap().is_none(), "nothing of it was stored");
}

#[test]
fn http_store_retries_a_failing_server_then_says_so() {
    let nginx = Nginx::start();
    let options = TransportOptions { max_retries: 2, ..fast_options() };
    let store = nginx.store("broken", &options);
    let err = store.head(&key("k")).unwrap_err();
    assert!(matches!(err, Error::Http { status: 500, .. }), "{err}");
    assert_eq!(err.retries(), 2, "{err}");
    assert!(err.to_string().contains("HTTP 500: Internal Server Error (after 2 retries"), "{err}");
    // A failing server is not a miss: a small read reports it, never `None`.
    assert!(store.get_small(&key("k"), 64).is_err());
    assert_eq!(store.retried_requests(), 4);

    // One 500, then the server works: the request is retried once and succeeds.
    let proxy = FaultProxy::start(
        &nginx.endpoint,
        vec![Rule {
            method: "PUT",
            contains: "/store/flaky",
            fault: Fault::ServerError,
            times: Some(1),
        }],
    );
    let url = format!("{}/store", proxy.endpoint);
    let store = strata::transport::open_store_with_env(&url, &fast_options(), |_| None).unwrap();
    let (outcome, stats) = store.put_bytes_if_absent(&key("flaky"), b"bytes").unwrap();
    assert_eq!((outcome, stats.retries), (PutOutcome::Created, 1));
    assert_eq!(std::fs::read(nginx.data_dir("store").join("flaky")).unwrap(), b"bytes");
    assert_eq!(proxy.injected(), 1);
}

#[test]
fn http_store_names_a_read_only_server_and_a_missing_path() {
    let nginx = Nginx::start();
    let store = nginx.store("readonly", &fast_options());
    let err = store.put_bytes_if_absent(&key("k"), b"x").unwrap_err();
    assert!(matches!(err, Error::Http { status: 405, .. }), "{err}");
    assert!(err.to_string().contains("does not take uploads at this URL"), "{err}");
    // A location the server does not have: reads miss, a write says where it failed.
    let store = nginx.store("nowhere", &fast_options());
    assert!(store.head(&key("k")).unwrap().is_none());
    let err = store.put_bytes_if_absent(&key("k"), b"x").unwrap_err();
    assert!(!err.is_not_found(), "a refused write is not a miss: {err}");
    assert!(
        err.to_string().contains(&format!("PUT {}/k failed with HTTP", nginx.url("nowhere"))),
        "{err}"
    );
}

#[test]
fn http_store_downloads_whole_from_a_server_that_ignores_range() {
    let nginx = Nginx::start();
    let data = random_bytes(12 * MIB + 5, 11);
    let writer = nginx.store("store", &fast_options());
    writer.put_bytes_if_absent(&key("big"), &data).unwrap();
    let proxy = FaultProxy::start(&nginx.endpoint, Vec::new());
    let options =
        TransportOptions { part_size_bytes: 4 * MIB as u64, parallelism: 3, ..fast_options() };
    let url = format!("{}/norange", proxy.endpoint);
    let store = strata::transport::open_store_with_env(&url, &options, |_| None).unwrap();
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("dest");
    let (meta, _) = store.get_to_file(&key("big"), &dest).unwrap();
    assert_eq!(meta.size_bytes, data.len() as u64);
    assert!(std::fs::read(&dest).unwrap() == data);
    assert_eq!(
        store.get_range(&key("big"), 9 * MIB as u64, 9 * MIB as u64 + 7).unwrap(),
        data[9 * MIB..9 * MIB + 7]
    );
    // The first ranged GET was answered whole: no other part was asked for.
    let gets: Vec<String> =
        proxy.seen_with_ranges().into_iter().filter(|r| r.starts_with("GET ")).collect();
    assert_eq!(
        gets,
        [
            format!("GET /norange/big range=bytes=0-{}", 4 * MIB - 1),
            format!("GET /norange/big range=bytes={}-{}", 9 * MIB, 9 * MIB + 6),
        ]
    );
}

#[test]
fn http_store_bazel_layout_puts_objects_under_ac() {
    let nginx = Nginx::start();
    let url = format!("{}?layout=bazel", nginx.url("store"));
    let store = strata::transport::open_store_with_env(&url, &fast_options(), |_| None).unwrap();
    assert!(store.describe().contains("(layout bazel, anonymous)"), "{}", store.describe());
    store.put_bytes_if_absent(&key("~refs/ab/r.json"), b"ref").unwrap();
    let hex = strata::digest::Sha256Digest::of_bytes(b"store/~refs/ab/r.json").to_hex();
    assert_eq!(std::fs::read(nginx.data_dir("store").join("ac").join(&hex)).unwrap(), b"ref");
    assert_eq!(store.get_small(&key("~refs/ab/r.json"), 64).unwrap().unwrap(), b"ref");
    assert!(store.head(&key("~refs/ab/other.json")).unwrap().is_none());
}

/// Measured: nginx 1.22's WebDAV module does not honour `If-None-Match: *` on a PUT; it
/// replaces the object (204). The HTTP store's HEAD before the PUT is what keeps it from
/// overwriting; docs/transport.md says what that leaves open.
#[test]
fn http_store_nginx_replaces_despite_if_none_match() {
    let nginx = Nginx::start();
    let put = |body: &str| -> String {
        let address = nginx.endpoint.trim_start_matches("http://");
        let mut stream = TcpStream::connect(address).unwrap();
        let request = format!(
            "PUT /store/measured HTTP/1.1\r\nHost: {address}\r\nIf-None-Match: *\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer.lines().next().unwrap_or_default().to_owned()
    };
    assert_eq!(put("first"), "HTTP/1.1 201 Created");
    assert_eq!(put("second"), "HTTP/1.1 204 No Content");
    assert_eq!(std::fs::read(nginx.data_dir("store").join("measured")).unwrap(), b"second");
}
