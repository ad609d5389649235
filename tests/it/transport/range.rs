//! Ranged reads into memory (`get_range`) and small uploads from memory
//! (`put_bytes_if_absent`) on both stores, and ranged reads under faults (5xx, truncated
//! and corrupted answers, servers that ignore or misanswer `Range`) through the proxy.

use std::path::Path;

use strata::transport::{
    MAX_RANGE_BYTES, ObjectKey, ObjectStore, PutOutcome, TransportOptions, open_store,
    open_store_with_env,
};

use super::proxy::{Fault, FaultProxy, Rule};
use super::random_bytes;
use super::server::{S3sServer, fast_options, url_for};

fn key(text: &str) -> ObjectKey {
    text.parse().unwrap()
}

fn fs_store(root: &Path) -> Box<dyn ObjectStore> {
    open_store(&format!("file://{}", root.display()), &TransportOptions::default()).unwrap()
}

/// Stores `data` under `entries/ab/obj` with `put_bytes_if_absent`, then checks every
/// `get_range` rule on it.
fn check_ranges(store: &dyn ObjectStore, data: &[u8]) {
    let k = key("entries/ab/obj");
    let (outcome, stats) = store.put_bytes_if_absent(&k, data).unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    assert_eq!(stats.bytes, data.len() as u64);
    let size = data.len() as u64;
    let ranges = [
        (0, 1),                 // first byte
        (size - 1, size),       // last byte
        (0, size),              // whole object
        (1, size - 1),          // all but the ends
        (12_345, 12_345 + 777), // in the middle
        (40, 40),               // empty
        (size, size),           // empty, at the end
    ];
    for (start, end) in ranges {
        let got = store.get_range(&k, start, end).unwrap();
        let want = &data[start as usize..end as usize];
        assert!(got == want, "bytes {start}..{end}: {} bytes, not the stored ones", got.len());
    }
    for (start, end) in
        [(0, size + 1), (size - 3, size + 10), (size, size + 1), (size + 5, size + 9)]
    {
        let err = store.get_range(&k, start, end).unwrap_err();
        assert!(err.is_invalid_range(), "{start}..{end}: {err}");
        assert!(!err.is_retryable() && !err.is_not_found(), "{err}");
        assert!(
            err.to_string().contains(&format!("cannot read bytes {start}..{end} of ")),
            "{err}"
        );
    }
    let err = store.get_range(&k, size + 1, size + 1).unwrap_err();
    assert!(err.is_invalid_range(), "{err}");
    let err = store.get_range(&k, 10, 9).unwrap_err();
    assert!(
        err.is_invalid_range() && err.to_string().contains("start lies after the end"),
        "{err}"
    );
    let err = store.get_range(&k, 0, MAX_RANGE_BYTES + 1).unwrap_err();
    assert!(err.is_invalid_range() && err.to_string().contains("256 MiB"), "{err}");
    assert!(store.get_range(&k, 0, MAX_RANGE_BYTES).unwrap_err().is_invalid_range());
    let missing = key("entries/ab/missing");
    for (start, end) in [(0, 1), (0, 0)] {
        let err = store.get_range(&missing, start, end).unwrap_err();
        assert!(err.is_not_found(), "{start}..{end}: {err}");
    }
}

/// `put_bytes_if_absent` never overwrites: the second write is `AlreadyExists` and sends
/// nothing, the first bytes stay.
fn check_put_bytes(store: &dyn ObjectStore) {
    let k = key("refs/01/ref.json");
    let (outcome, stats) = store.put_bytes_if_absent(&k, b"{\"first\":1}").unwrap();
    assert_eq!((outcome, stats.bytes), (PutOutcome::Created, 11));
    let (outcome, stats) = store.put_bytes_if_absent(&k, b"{\"second\":22}").unwrap();
    assert_eq!((outcome, stats.bytes), (PutOutcome::AlreadyExists, 0));
    assert_eq!(store.get_range(&k, 0, 11).unwrap(), b"{\"first\":1}");
    assert_eq!(store.head(&k).unwrap().unwrap().size_bytes, 11);
    let (outcome, _) = store.put_bytes_if_absent(&key("empty"), b"").unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    assert!(store.get_range(&key("empty"), 0, 0).unwrap().is_empty());
    assert!(store.get_range(&key("empty"), 0, 1).unwrap_err().is_invalid_range());
}

/// Stores `data` under `small/ab/obj` and nothing under `small/ab/empty`.
fn fill_small(store: &dyn ObjectStore, data: &[u8]) {
    store.put_bytes_if_absent(&key("small/ab/obj"), data).unwrap();
    store.put_bytes_if_absent(&key("small/ab/empty"), b"").unwrap();
}

/// `get_small` on `store` after [`fill_small`] with `data` (5,000 bytes): the whole object
/// when it fits, `None` when missing, an invalid range when it is larger than asked.
fn check_get_small(store: &dyn ObjectStore, data: &[u8]) {
    let k = key("small/ab/obj");
    let got = |max| store.get_small(&k, max).unwrap().map(|b| (b.len(), b == data));
    assert_eq!(got(5000), Some((5000, true)));
    assert_eq!(got(64 * 1024), Some((5000, true)));
    assert_eq!(store.get_small(&key("small/ab/missing"), 64 * 1024).unwrap(), None);
    let err = store.get_small(&k, 4999).unwrap_err();
    assert!(err.is_invalid_range() && !err.is_retryable(), "{err}");
    assert!(err.to_string().contains("holds 5000 bytes, more than the 4999"), "{err}");
    let err = store.get_small(&k, MAX_RANGE_BYTES + 1).unwrap_err();
    assert!(err.is_invalid_range(), "{err}");
    assert_eq!(store.get_small(&key("small/ab/empty"), 10).unwrap(), Some(Vec::new()));
}

#[test]
fn transport_fs_get_small() {
    let work = tempfile::tempdir().unwrap();
    let store = fs_store(&work.path().join("store"));
    let data = random_bytes(5000, 55);
    fill_small(store.as_ref(), &data);
    check_get_small(store.as_ref(), &data);
}

/// On S3, one GET per call and no HEAD; a body longer than its Content-Length claims is
/// never read past the bound.
#[test]
fn transport_s3_get_small_is_one_get() {
    let server = S3sServer::start();
    let data = random_bytes(5000, 56);
    fill_small(server.store("p", &fast_options()).as_ref(), &data);
    let proxy = FaultProxy::start(&server.endpoint, Vec::new());
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &fast_options(), server.env()).unwrap();
    check_get_small(store.as_ref(), &data);
    let reads: Vec<String> = proxy
        .seen()
        .into_iter()
        .filter(|r| r.starts_with("GET ") || r.starts_with("HEAD "))
        .collect();
    assert_eq!(
        reads,
        [
            "GET /strata-test/p/small/ab/obj",
            "GET /strata-test/p/small/ab/obj",
            "GET /strata-test/p/small/ab/missing",
            "GET /strata-test/p/small/ab/obj",
            "GET /strata-test/p/small/ab/empty",
        ]
        .map(String::from),
    );
    // A cut-off answer is retried and then an error, never short bytes.
    let rule = Rule {
        method: "GET",
        contains: "/p/small/ab/obj",
        fault: Fault::Truncate(10),
        times: None,
    };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &fast_options(), server.env()).unwrap();
    let err = store.get_small(&key("small/ab/obj"), 64 * 1024).unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(proxy.injected(), fast_options().max_retries + 1);
}

#[test]
fn transport_fs_get_range_and_put_bytes() {
    let work = tempfile::tempdir().unwrap();
    let store = fs_store(&work.path().join("store"));
    check_ranges(store.as_ref(), &random_bytes(100_003, 51));
    check_put_bytes(store.as_ref());
    // A key below an object is missing, not an I/O error.
    let err = store.get_range(&key("entries/ab/obj/below"), 0, 1).unwrap_err();
    assert!(err.is_not_found(), "{err}");
    // No temp files are left beside the objects.
    let names: Vec<_> = std::fs::read_dir(work.path().join("store/refs/01"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["ref.json"]);
}

#[test]
fn transport_s3_get_range_and_put_bytes() {
    let server = S3sServer::start();
    // A part size below the object size: put_bytes_if_absent still sends one PUT.
    let options = TransportOptions { part_size_bytes: 64 * 1024, ..fast_options() };
    let proxy = FaultProxy::start(&server.endpoint, Vec::new());
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &options, server.env()).unwrap();
    check_ranges(store.as_ref(), &random_bytes(100_003, 52));
    check_put_bytes(store.as_ref());
    let seen = proxy.seen_with_ranges();
    assert!(!seen.iter().any(|r| r.contains("uploads") || r.contains("uploadId=")), "{seen:?}");
    assert!(
        seen.contains(&"GET /strata-test/p/entries/ab/obj range=bytes=0-0".to_owned()),
        "{seen:?}"
    );
    assert!(
        seen.contains(&"GET /strata-test/p/entries/ab/obj range=bytes=100002-100002".to_owned()),
        "{seen:?}"
    );
    assert_eq!(store.retried_requests(), 0);
    // Without credentials nothing is written.
    let anonymous = open_store_with_env(&server.url("p"), &options, |_| None).unwrap();
    let err = anonymous.put_bytes_if_absent(&key("refs/02/x.json"), b"x").unwrap_err();
    assert!(err.is_auth(), "{err}");
}

/// A store behind a proxy with `rules`, holding `data` under `k`.
fn faulty(server: &S3sServer, data: &[u8], rules: Vec<Rule>) -> (FaultProxy, Box<dyn ObjectStore>) {
    server.store("p", &fast_options()).put_bytes_if_absent(&key("k"), data).unwrap();
    let proxy = FaultProxy::start(&server.endpoint, rules);
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &fast_options(), server.env()).unwrap();
    (proxy, store)
}

#[test]
fn transport_s3_get_range_retries_a_500() {
    let server = S3sServer::start();
    let data = random_bytes(50_000, 53);
    let rule = Rule {
        method: "GET",
        contains: "/p/k range=bytes=1000-2999",
        fault: Fault::ServerError,
        times: Some(1),
    };
    let (proxy, store) = faulty(&server, &data, vec![rule]);
    let got = store.get_range(&key("k"), 1000, 3000).unwrap();
    assert!(got == data[1000..3000]);
    assert_eq!(proxy.injected(), 1);
    assert_eq!(store.retried_requests(), 1);
    let gets: Vec<_> =
        proxy.seen_with_ranges().into_iter().filter(|r| r.starts_with("GET ")).collect();
    assert_eq!(gets, ["GET /strata-test/p/k range=bytes=1000-2999"; 2]);
}

#[test]
fn transport_s3_get_range_truncated_answer_is_an_error() {
    let server = S3sServer::start();
    let data = random_bytes(50_000, 54);
    // Always cut off after 100 of the 20,000 bytes: every attempt fails, none returns short data.
    let rule =
        Rule { method: "GET", contains: "range=bytes=", fault: Fault::Truncate(100), times: None };
    let (proxy, store) = faulty(&server, &data, vec![rule]);
    let err = store.get_range(&key("k"), 5000, 25_000).unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(err.retries(), fast_options().max_retries, "{err}");
    assert_eq!(proxy.injected(), fast_options().max_retries + 1);
    assert!(err.to_string().contains("s3://strata-test/p/k"), "{err}");
    // Cut off once: the retry delivers the whole range.
    let rule =
        Rule { method: "GET", contains: "range=bytes=", fault: Fault::Truncate(0), times: Some(1) };
    let (proxy, store) = faulty(&server, &data, vec![rule]);
    let got = store.get_range(&key("k"), 5000, 25_000).unwrap();
    assert!(got == data[5000..25_000]);
    assert_eq!((proxy.injected(), store.retried_requests()), (1, 1));
}

#[test]
fn transport_s3_get_range_flipped_byte_reaches_the_caller() {
    // Transport checks lengths only: a corrupted body arrives as it is, for the caller's
    // digest to catch. This pins down what FlipByte does.
    let server = S3sServer::start();
    let data = random_bytes(10_000, 55);
    let rule =
        Rule { method: "GET", contains: "range=bytes=", fault: Fault::FlipByte(7), times: Some(1) };
    let (proxy, store) = faulty(&server, &data, vec![rule]);
    let got = store.get_range(&key("k"), 100, 200).unwrap();
    assert_eq!(proxy.injected(), 1);
    assert_eq!(got.len(), 100);
    let differing: Vec<_> = (0..100).filter(|&i| got[i] != data[100 + i]).collect();
    assert_eq!(differing, [7]);
    assert_eq!(got[7], data[107] ^ 0xff);
}

#[test]
fn transport_s3_get_range_checks_the_answer() {
    let server = S3sServer::start();
    let data = random_bytes(1000, 56);
    let answer = |status, headers, body| Rule {
        method: "GET",
        contains: "range=bytes=",
        fault: Fault::Answer(status, headers, body),
        times: None,
    };
    // A server that ignores Range sends the whole object: the range is cut out of it.
    let (_proxy, store) = faulty(&server, &data, vec![answer("200 OK", "", "0123456789")]);
    assert_eq!(store.get_range(&key("k"), 2, 5).unwrap(), b"234");
    assert_eq!(store.get_range(&key("k"), 0, 10).unwrap(), b"0123456789");
    let err = store.get_range(&key("k"), 8, 12).unwrap_err();
    assert!(err.is_invalid_range() && err.to_string().contains("holds only 10 bytes"), "{err}");
    // A 206 for another range is refused, not retried.
    let rule = answer("206 Partial Content", "content-range: bytes 0-2/10\r\n", "abc");
    let (proxy, store) = faulty(&server, &data, vec![rule]);
    let err = store.get_range(&key("k"), 3, 6).unwrap_err();
    assert!(
        !err.is_retryable() && err.to_string().contains("HTTP 206 for bytes 0-2, asked for 3-5"),
        "{err}"
    );
    assert_eq!(proxy.injected(), 1);
    // A 206 without Content-Range is refused.
    let (_proxy, store) = faulty(&server, &data, vec![answer("206 Partial Content", "", "abc")]);
    let err = store.get_range(&key("k"), 0, 3).unwrap_err();
    assert!(err.to_string().contains("without a valid Content-Range"), "{err}");
    // A 206 whose Content-Length disagrees with the range is refused.
    let rule = answer("206 Partial Content", "content-range: bytes 0-3/10\r\n", "abc");
    let (_proxy, store) = faulty(&server, &data, vec![rule]);
    let err = store.get_range(&key("k"), 0, 4).unwrap_err();
    assert!(err.to_string().contains("Content-Length 3 for a 4-byte range"), "{err}");
}

#[test]
fn transport_s3_put_bytes_whose_answer_was_lost_is_created() {
    // The first PUT lands but its answer is lost; the retry is refused (412) and the stored
    // bytes are ours: Created, as for put_file_if_absent.
    let server = S3sServer::start();
    let rule =
        Rule { method: "PUT", contains: "/p/lease.json", fault: Fault::LoseAnswer, times: Some(1) };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &fast_options(), server.env()).unwrap();
    let (outcome, stats) = store.put_bytes_if_absent(&key("lease.json"), b"{\"lease\":1}").unwrap();
    assert_eq!(outcome, PutOutcome::Created, "{:?}", proxy.seen());
    assert_eq!((proxy.injected(), stats.retries), (1, 1));
    assert_eq!(store.get_range(&key("lease.json"), 0, 11).unwrap(), b"{\"lease\":1}");
}

/// What [`keep_alive_range_server`] saw: `(connection number, lower-cased head)` per request.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(usize, String)>>>;

/// A keep-alive HTTP/1.1 server on 127.0.0.1 that answers every request with the 4-byte
/// range `0-3` of a 10-byte object and records `(connection number, lower-cased head)`;
/// it keeps a connection open until the client asks to close it or goes away.
fn keep_alive_range_server() -> (String, Seen) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let seen = Seen::default();
    let record = seen.clone();
    std::thread::spawn(move || {
        for (number, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            let record = record.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push_str(&line.to_ascii_lowercase());
                    }
                    let close = head.contains("\r\nconnection: close\r\n");
                    record.lock().unwrap().push((number, head));
                    let answer = "HTTP/1.1 206 Partial Content\r\ncontent-range: bytes 0-3/10\r\n\
                                  content-length: 4\r\n\r\nabcd";
                    if stream.write_all(answer.as_bytes()).is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    (endpoint, seen)
}

#[test]
fn transport_s3_get_range_last_asks_the_server_to_close_the_connection() {
    // get_range keeps the connection for the next request; get_range_last sends
    // `Connection: close` (unsigned), so the request after it opens a new connection.
    let (endpoint, seen) = keep_alive_range_server();
    let env = |name: &str| match name {
        "AWS_ACCESS_KEY_ID" => Some("stub-access".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some("stub-secret".to_owned()),
        _ => None,
    };
    let store = open_store_with_env(&url_for(&endpoint, "p"), &fast_options(), env).unwrap();
    assert_eq!(store.get_range(&key("k"), 0, 4).unwrap(), b"abcd");
    assert_eq!(
        store.get_range_with(&key("k"), 0, 4, strata::transport::NextRequest::None).unwrap(),
        b"abcd"
    );
    assert_eq!(store.get_range(&key("k"), 0, 4).unwrap(), b"abcd");
    let seen = seen.lock().unwrap().clone();
    let connections: Vec<usize> = seen.iter().map(|(n, _)| *n).collect();
    let closing: Vec<bool> =
        seen.iter().map(|(_, head)| head.contains("\r\nconnection: close\r\n")).collect();
    assert_eq!(connections, [0, 0, 1], "{seen:?}");
    assert_eq!(closing, [false, true, false], "{seen:?}");
    let signed = seen[1].1.lines().find(|l| l.starts_with("authorization:")).unwrap().to_owned();
    assert!(signed.contains("signedheaders=host;range;"), "{signed}");
    assert!(!signed.contains("connection"), "{signed}");
}

#[test]
fn transport_fs_get_range_last_reads_as_get_range() {
    let dir = tempfile::tempdir().unwrap();
    let store = fs_store(dir.path());
    store.put_bytes_if_absent(&key("k"), b"0123456789").unwrap();
    assert_eq!(
        store.get_range_with(&key("k"), 2, 5, strata::transport::NextRequest::None).unwrap(),
        b"234"
    );
    assert!(
        store
            .get_range_with(&key("k"), 8, 12, strata::transport::NextRequest::None)
            .unwrap_err()
            .is_invalid_range()
    );
}
