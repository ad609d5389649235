//! The S3 store against a real s3s-fs server (which verifies SigV4 signatures).

use std::sync::Arc;
use std::time::Instant;

use strata::transport::{
    Error, ObjectKey, ObjectStore, PutOutcome, TransportOptions, open_store_with_env,
};

use super::random_bytes;
use super::server::{BUCKET, S3sServer, fast_options, url_for};

const MIB: usize = 1024 * 1024;

fn key(text: &str) -> ObjectKey {
    text.parse().unwrap()
}

#[test]
fn transport_s3_small_roundtrip() {
    let server = S3sServer::start();
    let store = server.store("ci/cache", &fast_options());
    let description = store.describe();
    assert!(
        description.starts_with("s3://strata-test/ci/cache (endpoint http://127.0.0.1:"),
        "{description}"
    );
    assert!(description.contains("path-style"), "{description}");
    assert!(!description.contains(&server.secret_key) && !description.contains(&server.access_key));

    let work = tempfile::tempdir().unwrap();
    let data = random_bytes(100_000, 2);
    let src = work.path().join("src");
    std::fs::write(&src, &data).unwrap();
    let k = key("owner/repo/v1/key with spaces+plus");
    assert!(store.head(&k).unwrap().is_none());
    let (outcome, stats) = store.put_file_if_absent(&k, &src).unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    assert_eq!(stats.bytes, data.len() as u64);
    assert_eq!(stats.retries, 0);
    // The object sits under the prefix in the bucket.
    let on_disk =
        server.data_dir().join(BUCKET).join("ci/cache/owner/repo/v1/key with spaces+plus");
    assert_eq!(std::fs::read(on_disk).unwrap(), data);

    let meta = store.head(&k).unwrap().unwrap();
    assert_eq!(meta.size_bytes, data.len() as u64);
    assert!(meta.etag.is_some());

    let dest = work.path().join("dest");
    let (got, stats) = store.get_to_file(&k, &dest).unwrap();
    assert_eq!(got.size_bytes, data.len() as u64);
    assert_eq!(stats.bytes, data.len() as u64);
    assert_eq!(std::fs::read(&dest).unwrap(), data);

    // Empty objects work too.
    let empty = work.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(store.put_file_if_absent(&key("empty"), &empty).unwrap().0, PutOutcome::Created);
    store.get_to_file(&key("empty"), &dest).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"");

    store.delete(&k).unwrap();
    assert!(store.head(&k).unwrap().is_none());
    let err = store.get_to_file(&k, &dest).unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[test]
fn transport_s3_multipart_roundtrip() {
    let server = S3sServer::start();
    let options =
        TransportOptions { part_size_bytes: 5 * MIB as u64, parallelism: 4, ..fast_options() };
    let store = server.store("big", &options);
    let work = tempfile::tempdir().unwrap();
    let data = random_bytes(20 * MIB + 12_345, 3);
    let src = work.path().join("src");
    std::fs::write(&src, &data).unwrap();
    let k = key("snapshots/twenty-mib");
    let started = Instant::now();
    let (outcome, stats) = store.put_file_if_absent(&k, &src).unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    assert_eq!(stats.bytes, data.len() as u64);
    assert_eq!(store.head(&k).unwrap().unwrap().size_bytes, data.len() as u64);

    let dest = work.path().join("dest");
    let (meta, stats) = store.get_to_file(&k, &dest).unwrap();
    assert_eq!(meta.size_bytes, data.len() as u64);
    assert_eq!(stats.bytes, data.len() as u64);
    assert!(std::fs::read(&dest).unwrap() == data, "downloaded bytes differ");
    assert!(started.elapsed().as_secs() < 20, "took {:?}", started.elapsed());
}

#[test]
fn transport_s3_never_overwrites() {
    let server = S3sServer::start();
    let options = TransportOptions { part_size_bytes: 5 * MIB as u64, ..fast_options() };
    let store = server.store("", &options);
    let work = tempfile::tempdir().unwrap();
    let first = work.path().join("first");
    let second = work.path().join("second");
    std::fs::write(&first, b"the original").unwrap();
    std::fs::write(&second, random_bytes(6 * MIB, 4)).unwrap();
    let k = key("immutable");
    assert_eq!(store.put_file_if_absent(&k, &first).unwrap().0, PutOutcome::Created);
    let (outcome, stats) = store.put_file_if_absent(&k, &second).unwrap();
    assert_eq!(outcome, PutOutcome::AlreadyExists);
    assert_eq!(stats.bytes, 0);
    let dest = work.path().join("dest");
    store.get_to_file(&k, &dest).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"the original");
}

#[test]
fn transport_s3_lists_more_than_one_page() {
    let server = S3sServer::start();
    let store: Arc<dyn ObjectStore> = Arc::from(server.store("pfx", &fast_options()));
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    std::fs::write(&src, b"x").unwrap();
    const COUNT: usize = 1_050;
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let store = Arc::clone(&store);
            let src = src.clone();
            std::thread::spawn(move || {
                for i in (t..COUNT).step_by(6) {
                    let (outcome, _) =
                        store.put_file_if_absent(&key(&format!("many/{i:05}")), &src).unwrap();
                    assert_eq!(outcome, PutOutcome::Created);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    store.put_file_if_absent(&key("other/1"), &src).unwrap();
    store.put_file_if_absent(&key("manyfold"), &src).unwrap();

    let listed = store.list("many/").unwrap();
    assert_eq!(listed.len(), COUNT);
    let expected: Vec<String> = (0..COUNT).map(|i| format!("many/{i:05}")).collect();
    let got: Vec<String> = listed.iter().map(|m| m.key.to_string()).collect();
    assert_eq!(got, expected);
    assert!(listed.iter().all(|m| m.size_bytes == 1));
    assert_eq!(store.list("many").unwrap().len(), COUNT + 1);
    assert_eq!(store.list("").unwrap().len(), COUNT + 2);
    assert!(store.list("none/").unwrap().is_empty());
}

#[test]
fn transport_s3_wrong_secret_is_an_auth_error_without_the_secret() {
    let server = S3sServer::start();
    let wrong_secret = "0123456789abcdef-wrong-secret-value";
    let access = server.access_key.clone();
    let env = move |name: &str| match name {
        "HW_OBS_AK" => Some(access.clone()),
        "HW_OBS_SK" => Some(wrong_secret.to_owned()),
        _ => None,
    };
    let store = open_store_with_env(&server.url("x"), &fast_options(), env).unwrap();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    std::fs::write(&src, b"data").unwrap();
    let errors = [
        store.head(&key("k")).unwrap_err(),
        store.put_file_if_absent(&key("k"), &src).unwrap_err(),
        store.list("").unwrap_err(),
    ];
    for err in errors {
        assert!(err.is_auth(), "{err}");
        assert!(!err.is_retryable(), "{err}");
        assert_eq!(err.retries(), 0);
        let shown = format!("{err} {err:?} {}", store.describe());
        assert!(shown.contains("access denied (check the credentials / signature / clock skew) for s3://strata-test/x/"), "{shown}");
        assert!(!shown.contains(wrong_secret), "the secret leaked: {shown}");
        assert!(!shown.contains(&server.secret_key), "the server secret leaked: {shown}");
    }
}

#[test]
fn transport_s3_writes_without_credentials_fail_clearly() {
    let server = S3sServer::start();
    let store = open_store_with_env(&server.url("x"), &fast_options(), |_| None).unwrap();
    assert!(store.describe().contains("anonymous"));
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    std::fs::write(&src, b"data").unwrap();
    let err = store.put_file_if_absent(&key("k"), &src).unwrap_err();
    assert!(matches!(err, Error::MissingCredentials { .. }), "{err}");
    assert!(err.is_auth());
    let message = err.to_string();
    for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HW_OBS_AK", "HW_OBS_SK"] {
        assert!(message.contains(var), "{message}");
    }
    assert!(matches!(store.delete(&key("k")).unwrap_err(), Error::MissingCredentials { .. }));
    // Anonymous reads are sent unsigned; this server requires signatures, so it says no.
    let err = store.head(&key("k")).unwrap_err();
    assert!(err.is_auth(), "{err}");
}

#[test]
fn transport_s3_missing_bucket_is_named() {
    let server = S3sServer::start();
    let url = url_for(&server.endpoint, "x").replace(BUCKET, "no-such-bucket");
    let store = open_store_with_env(&url, &fast_options(), server.env()).unwrap();
    let err = store.list("").unwrap_err();
    assert!(matches!(err, Error::NoSuchBucket { .. }), "{err}");
    assert!(!err.is_not_found() && !err.is_retryable(), "{err}");
    assert!(err.to_string().contains("no-such-bucket"), "{err}");
    // AWS answers a GET in a missing bucket with NoSuchBucket (which `head` reports);
    // s3s-fs answers NoSuchKey, so here a HEAD can only see a missing object.
    assert!(store.head(&key("k")).unwrap().is_none());
}
