//! The store contract: one suite every backend runs — a directory, S3 on a real s3s-fs,
//! WebDAV on a real nginx, and nginx again with `Range` ignored (`max_ranges 0`). Each test
//! runs its check on every backend and names the backend in every failure.
//!
//! The core (every backend): head, put-if-absent (file and bytes; never overwrite), get to
//! a file (truncating it), ranged and small reads, misses, empty objects, large objects in
//! parts, secret-free descriptions. The capabilities (listing and deletion) are checked
//! where the backend declares them, and their absence where it does not.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use strata::transport::{
    Capability, ObjectKey, ObjectStore, PutOutcome, StoreUrl, TransportOptions, open_store,
};

use super::nginx::Nginx;
use super::random_bytes;
use super::server::{BUCKET, S3sServer, fast_options};

const MIB: usize = 1024 * 1024;

fn key(text: &str) -> ObjectKey {
    text.parse().unwrap()
}

/// Which backend a [`Backend`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `file://` on a temp directory.
    Directory,
    /// `s3://` on s3s-fs, under the prefix `ci/cache`.
    S3,
    /// `http://` on nginx's WebDAV location `store/`.
    WebDav,
    /// `http://` on nginx's `norange/`: the same, but every GET is answered whole.
    WebDavIgnoringRange,
}

/// One running backend: its server (if any) and how to open a store on it.
pub struct Backend {
    pub kind: Kind,
    dir: tempfile::TempDir,
    s3: Option<S3sServer>,
    nginx: Option<Nginx>,
}

impl Backend {
    pub fn start(kind: Kind) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (s3, nginx) = match kind {
            Kind::Directory => (None, None),
            Kind::S3 => (Some(S3sServer::start()), None),
            Kind::WebDav | Kind::WebDavIgnoringRange => (None, Some(Nginx::start())),
        };
        Self { kind, dir, s3, nginx }
    }

    /// Every backend, started.
    pub fn all() -> Vec<Backend> {
        [Kind::Directory, Kind::S3, Kind::WebDav, Kind::WebDavIgnoringRange]
            .into_iter()
            .map(Backend::start)
            .collect()
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Directory => "directory",
            Kind::S3 => "s3s-fs",
            Kind::WebDav => "nginx WebDAV",
            Kind::WebDavIgnoringRange => "nginx ignoring Range",
        }
    }

    /// The store URL.
    pub fn url(&self) -> String {
        match (self.kind, &self.s3, &self.nginx) {
            (Kind::S3, Some(server), _) => server.url("ci/cache"),
            (Kind::WebDav, _, Some(nginx)) => nginx.url("store"),
            (Kind::WebDavIgnoringRange, _, Some(nginx)) => nginx.url("norange"),
            _ => format!("file://{}", self.dir.path().join("store").display()),
        }
    }

    /// The environment a writer of the store has (credentials, or the declaration that
    /// the server takes anonymous uploads).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        match (&self.s3, &self.nginx) {
            (Some(server), _) => vec![
                ("AWS_ACCESS_KEY_ID", server.access_key.clone()),
                ("AWS_SECRET_ACCESS_KEY", server.secret_key.clone()),
            ],
            (_, Some(_)) => vec![("STRATA_HTTP_ANONYMOUS_WRITES", "1".into())],
            _ => Vec::new(),
        }
    }

    /// A store on the backend with the writer's environment.
    pub fn store(&self, options: &TransportOptions) -> Box<dyn ObjectStore> {
        let env = self.env();
        let lookup = move |name: &str| env.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
        strata::transport::open_store_with_env(&self.url(), options, lookup)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()))
    }

    /// The file the server keeps the object `key` in.
    pub fn file_of(&self, key: &str) -> PathBuf {
        match (&self.s3, &self.nginx) {
            (Some(server), _) => server.data_dir().join(BUCKET).join("ci/cache").join(key),
            (_, Some(nginx)) => nginx.data_dir("store").join(key),
            _ => self.dir.path().join("store").join(key),
        }
    }

    /// Secrets the store must never show.
    fn secrets(&self) -> Vec<String> {
        self.s3
            .as_ref()
            .map(|s| vec![s.access_key.clone(), s.secret_key.clone()])
            .unwrap_or_default()
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn contract_put_get_head_roundtrip_on_every_backend() {
    for backend in Backend::all() {
        let name = backend.name();
        let store = backend.store(&fast_options());
        let description = store.describe();
        for secret in backend.secrets() {
            assert!(!description.contains(&secret), "{name}: {description}");
        }
        let work = tempfile::tempdir().unwrap();
        let k = key("owner/repo/v1/key with spaces+plus");
        assert!(store.head(&k).unwrap().is_none(), "{name}: a missing object");
        let data = random_bytes(300_000, 1);
        let src = write(work.path(), "src", &data);
        let (outcome, stats) = store.put_file_if_absent(&k, &src).unwrap();
        assert_eq!(outcome, PutOutcome::Created, "{name}");
        assert_eq!(stats.bytes, data.len() as u64, "{name}");
        assert_eq!(stats.retries, 0, "{name}");
        // The object lies where the backend keeps `key`, byte for byte.
        assert_eq!(std::fs::read(backend.file_of(k.as_str())).unwrap(), data, "{name}");

        let meta = store.head(&k).unwrap().unwrap();
        assert_eq!((meta.key.clone(), meta.size_bytes), (k.clone(), data.len() as u64), "{name}");
        assert_eq!(meta.etag.is_some(), backend.kind != Kind::Directory, "{name}: {meta:?}");

        let dest = write(work.path(), "dest", b"old content that is longer than nothing at all");
        let (got, stats) = store.get_to_file(&k, &dest).unwrap();
        assert_eq!(got.size_bytes, data.len() as u64, "{name}");
        assert_eq!(stats.bytes, data.len() as u64, "{name}");
        assert!(std::fs::read(&dest).unwrap() == data, "{name}: dest is truncated and rewritten");

        assert_eq!(store.get_range(&k, 1000, 1010).unwrap(), data[1000..1010], "{name}");
        assert_eq!(store.get_small(&k, 1 << 20).unwrap().unwrap(), data, "{name}");
        assert!(store.get_small(&k, 1000).unwrap_err().is_invalid_range(), "{name}");
        assert!(store.get_range(&k, 299_990, 300_001).unwrap_err().is_invalid_range(), "{name}");

        // Empty objects work too.
        let empty = write(work.path(), "empty", b"");
        let e = key("empty");
        assert_eq!(store.put_file_if_absent(&e, &empty).unwrap().0, PutOutcome::Created, "{name}");
        store.get_to_file(&e, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"", "{name}");
        assert_eq!(store.get_small(&e, 10).unwrap().unwrap(), b"", "{name}");

        // Small buffers go up whole.
        let (outcome, stats) = store.put_bytes_if_absent(&key("refs/r.json"), b"{}").unwrap();
        assert_eq!((outcome, stats.bytes), (PutOutcome::Created, 2), "{name}");
        assert_eq!(store.get_small(&key("refs/r.json"), 64).unwrap().unwrap(), b"{}", "{name}");
    }
}

#[test]
fn contract_misses_are_not_found_on_every_backend() {
    for backend in Backend::all() {
        let name = backend.name();
        let store = backend.store(&fast_options());
        let work = tempfile::tempdir().unwrap();
        let missing = key("no/such/object");
        assert!(store.head(&missing).unwrap().is_none(), "{name}");
        let err = store.get_to_file(&missing, &work.path().join("d")).unwrap_err();
        assert!(err.is_not_found(), "{name}: {err}");
        assert!(store.get_range(&missing, 0, 4).unwrap_err().is_not_found(), "{name}");
        assert!(store.get_small(&missing, 64).unwrap().is_none(), "{name}");
        assert_eq!(store.retried_requests(), 0, "{name}: a miss is never retried");
    }
}

#[test]
fn contract_never_overwrites_on_every_backend() {
    let options = TransportOptions { part_size_bytes: 5 * MIB as u64, ..fast_options() };
    for backend in Backend::all() {
        let name = backend.name();
        let store = backend.store(&options);
        let work = tempfile::tempdir().unwrap();
        let k = key("a/immutable");
        let first = write(work.path(), "first", b"the original");
        let second = write(work.path(), "second", &random_bytes(6 * MIB, 4));
        assert_eq!(store.put_file_if_absent(&k, &first).unwrap().0, PutOutcome::Created, "{name}");
        let (outcome, stats) = store.put_file_if_absent(&k, &second).unwrap();
        assert_eq!(outcome, PutOutcome::AlreadyExists, "{name}");
        assert_eq!(stats.bytes, 0, "{name}");
        let (outcome, _) = store.put_bytes_if_absent(&k, b"other").unwrap();
        assert_eq!(outcome, PutOutcome::AlreadyExists, "{name}");
        let dest = work.path().join("dest");
        store.get_to_file(&k, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"the original", "{name}");
        // No temp files are left beside the object (a directory store writes one per put).
        let names: Vec<_> = std::fs::read_dir(backend.file_of("a"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["immutable"], "{name}");
    }
}

#[test]
fn contract_large_objects_in_parts_on_every_backend() {
    let options =
        TransportOptions { part_size_bytes: 5 * MIB as u64, parallelism: 4, ..fast_options() };
    for backend in Backend::all() {
        let name = backend.name();
        let store = backend.store(&options);
        let work = tempfile::tempdir().unwrap();
        let data = random_bytes(20 * MIB + 12_345, 3);
        let src = write(work.path(), "src", &data);
        let k = key("snapshots/twenty-mib");
        let started = Instant::now();
        let (outcome, stats) = store.put_file_if_absent(&k, &src).unwrap();
        assert_eq!(outcome, PutOutcome::Created, "{name}");
        assert_eq!(stats.bytes, data.len() as u64, "{name}");
        assert_eq!(store.head(&k).unwrap().unwrap().size_bytes, data.len() as u64, "{name}");
        let dest = work.path().join("dest");
        let (meta, stats) = store.get_to_file(&k, &dest).unwrap();
        assert_eq!((meta.size_bytes, stats.bytes), (data.len() as u64, data.len() as u64));
        assert!(std::fs::read(&dest).unwrap() == data, "{name}: downloaded bytes differ");
        // A range across a part boundary, read into memory.
        let (a, b) = (5 * MIB - 10, 5 * MIB + 10);
        assert_eq!(store.get_range(&k, a as u64, b as u64).unwrap(), data[a..b], "{name}");
        assert!(started.elapsed().as_secs() < 30, "{name}: took {:?}", started.elapsed());
    }
}

#[test]
fn contract_capabilities_are_declared_and_kept_on_every_backend() {
    for backend in Backend::all() {
        let name = backend.name();
        let store = backend.store(&fast_options());
        let url: StoreUrl = backend.url().parse().unwrap();
        let declared = store.capabilities();
        assert_eq!(declared, url.capabilities(), "{name}: the URL tells what the store can do");
        assert_eq!(store.listing().is_some(), declared.has(Capability::List), "{name}");
        assert_eq!(store.deleting().is_some(), declared.has(Capability::Delete), "{name}");
        let lists = matches!(backend.kind, Kind::Directory | Kind::S3);
        assert_eq!(declared.has(Capability::List), lists, "{name}");
        assert_eq!(declared.has(Capability::Delete), lists, "{name}");
        if !lists {
            let err = strata::transport::listing(store.as_ref(), "snapshot gc").err().unwrap();
            assert!(err.is_unsupported(), "{name}: {err}");
            let text = err.to_string();
            assert!(text.contains("cannot list objects; snapshot gc needs listing"), "{text}");
            assert!(strata::transport::deleting(store.as_ref(), "x").is_err(), "{name}");
        }
    }
}

#[test]
fn contract_list_filters_by_prefix_and_delete_where_declared() {
    for backend in Backend::all() {
        let name = backend.name();
        let store = backend.store(&fast_options());
        let (Some(listing), Some(deleting)) = (store.listing(), store.deleting()) else {
            continue;
        };
        let work = tempfile::tempdir().unwrap();
        let src = write(work.path(), "src", b"x");
        assert!(listing.list("").unwrap().is_empty(), "{name}: a new store is empty");
        for object in ["a/b/1", "a/b/2", "a/bc/1", "a/c/1", "ab/1", "z"] {
            store.put_file_if_absent(&key(object), &src).unwrap();
        }
        if backend.kind == Kind::Directory {
            // A stray temp file (a crashed writer: this release's name and the 6-character
            // one earlier releases left) is never listed.
            for stray in [".strata-0123456789abcdef.tmp", ".strata-Cr4sh1.tmp"] {
                std::fs::write(backend.file_of("a/b").join(stray), b"partial").unwrap();
            }
        }
        let keys = |prefix: &str| -> Vec<String> {
            listing.list(prefix).unwrap().into_iter().map(|m| m.key.to_string()).collect()
        };
        assert_eq!(keys("a/b/"), ["a/b/1", "a/b/2"], "{name}");
        assert_eq!(keys("a/b"), ["a/b/1", "a/b/2", "a/bc/1"], "{name}");
        assert_eq!(keys("a/"), ["a/b/1", "a/b/2", "a/bc/1", "a/c/1"], "{name}");
        assert_eq!(keys("a"), ["a/b/1", "a/b/2", "a/bc/1", "a/c/1", "ab/1"], "{name}");
        assert_eq!(keys(""), ["a/b/1", "a/b/2", "a/bc/1", "a/c/1", "ab/1", "z"], "{name}");
        assert!(keys("nothing/").is_empty(), "{name}");
        assert!(listing.list("a/b/").unwrap().iter().all(|m| m.size_bytes == 1), "{name}");
        // A key below an object is simply missing.
        assert!(store.head(&key("z/below")).unwrap().is_none(), "{name}");

        let k = key("a/b/1");
        deleting.delete(&k).unwrap();
        assert!(store.head(&k).unwrap().is_none(), "{name}");
        deleting.delete(&k).unwrap(); // deleting a missing object succeeds
        let err = store.get_to_file(&k, &work.path().join("dest")).unwrap_err();
        assert!(err.is_not_found(), "{name}: {err}");
        assert_eq!(keys("a/b/"), ["a/b/2"], "{name}");
    }
}

#[test]
fn contract_listing_follows_every_page() {
    for kind in [Kind::Directory, Kind::S3] {
        let backend = Backend::start(kind);
        let name = backend.name();
        let store: Arc<dyn ObjectStore> = Arc::from(backend.store(&fast_options()));
        let work = tempfile::tempdir().unwrap();
        let src = write(work.path(), "src", b"x");
        const COUNT: usize = 1_050;
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let (store, src) = (Arc::clone(&store), src.clone());
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
        let listing = store.listing().unwrap();
        let listed = listing.list("many/").unwrap();
        let expected: Vec<String> = (0..COUNT).map(|i| format!("many/{i:05}")).collect();
        let got: Vec<String> = listed.iter().map(|m| m.key.to_string()).collect();
        assert_eq!(got, expected, "{name}");
        assert_eq!(listing.list("many").unwrap().len(), COUNT + 1, "{name}");
        assert_eq!(listing.list("").unwrap().len(), COUNT + 2, "{name}");
    }
}

#[test]
fn contract_directory_store_bare_path_url() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("bare");
    let store = open_store(root.to_str().unwrap(), &TransportOptions::default()).unwrap();
    assert_eq!(store.describe(), format!("file://{}", root.display()));
    assert!(open_store("relative/dir", &TransportOptions::default()).is_err());
    let url = format!("file://{}", root.display());
    let store = open_store(&url, &TransportOptions::default()).unwrap();
    assert_eq!(store.describe(), url);
}

/// The description names the backend's place and settings, never a credential.
#[test]
fn contract_descriptions_name_the_place_without_secrets() {
    let server = S3sServer::start();
    let store = server.store("ci/cache", &fast_options());
    let description = store.describe();
    assert!(
        description.starts_with("s3://strata-test/ci/cache (endpoint http://127.0.0.1:"),
        "{description}"
    );
    assert!(description.contains("path-style"), "{description}");
    assert!(!description.contains(&server.secret_key) && !description.contains(&server.access_key));
    let nginx = Nginx::start();
    let env = |name: &str| match name {
        "STRATA_HTTP_USER" => Some("strata".to_owned()),
        "STRATA_HTTP_PASSWORD" => Some(super::nginx::PASSWORD.to_owned()),
        _ => None,
    };
    let store = nginx.store_with("basic", &fast_options(), env);
    assert_eq!(
        store.describe(),
        format!(
            "{} (layout flat, credentials from STRATA_HTTP_USER/STRATA_HTTP_PASSWORD)",
            nginx.url("basic")
        )
    );
    assert!(!store.describe().contains(super::nginx::PASSWORD));
    let store = nginx.store("store", &fast_options());
    assert_eq!(store.describe(), format!("{} (layout flat, anonymous)", nginx.url("store")));
}

/// Wrong credentials are an authentication error, not retried, that names the store and
/// what to check, never the secret.
#[test]
fn contract_wrong_credentials_are_auth_errors_without_the_secret() {
    let wrong = "0123456789abcdef-wrong-secret-value";
    let work = tempfile::tempdir().unwrap();
    let src = write(work.path(), "src", b"data");

    let server = S3sServer::start();
    let access = server.access_key.clone();
    let env = move |name: &str| match name {
        "HW_OBS_AK" => Some(access.clone()),
        "HW_OBS_SK" => Some(wrong.to_owned()),
        _ => None,
    };
    let store =
        strata::transport::open_store_with_env(&server.url("x"), &fast_options(), env).unwrap();
    let errors = [
        store.head(&key("k")).unwrap_err(),
        store.put_file_if_absent(&key("k"), &src).unwrap_err(),
        store.listing().unwrap().list("").unwrap_err(),
    ];
    for err in errors {
        assert!(err.is_auth() && !err.is_retryable(), "{err}");
        assert_eq!(err.retries(), 0);
        let shown = format!("{err} {err:?} {}", store.describe());
        assert!(shown.contains("access denied (check the credentials / signature / clock skew) for s3://strata-test/x/"), "{shown}");
        assert!(!shown.contains(wrong) && !shown.contains(&server.secret_key), "leaked: {shown}");
    }

    let nginx = Nginx::start();
    for (location, env) in [
        ("basic", [("STRATA_HTTP_USER", "strata"), ("STRATA_HTTP_PASSWORD", wrong)]),
        ("bearer", [("STRATA_HTTP_TOKEN", wrong), ("", "")]),
    ] {
        let lookup =
            |name: &str| env.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
        let store = nginx.store_with(location, &fast_options(), lookup);
        let err = store.put_file_if_absent(&key("k"), &src).unwrap_err();
        assert!(err.is_auth() && !err.is_retryable(), "{location}: {err}");
        assert_eq!(err.retries(), 0);
        let shown = format!("{err} {err:?} {}", store.describe());
        assert!(
            shown.contains("access denied (check the credentials in STRATA_HTTP_TOKEN"),
            "{shown}"
        );
        assert!(shown.contains(&format!("{}/k: ", nginx.url(location))), "{shown}");
        assert!(shown.contains(" got HTTP 401"), "{shown}");
        assert!(!shown.contains(wrong), "leaked: {shown}");
    }
    // Reads of `basic/` are open; `bearer/` wants the token for every request.
    let no_token = nginx.store("bearer", &fast_options());
    assert!(no_token.head(&key("k")).unwrap_err().is_auth());
}

/// Writes without credentials fail clearly, naming the variables to set.
#[test]
fn contract_writes_without_credentials_fail_clearly() {
    let work = tempfile::tempdir().unwrap();
    let src = write(work.path(), "src", b"data");
    let server = S3sServer::start();
    let store = strata::transport::open_store_with_env(&server.url("x"), &fast_options(), |_| None)
        .unwrap();
    assert!(store.describe().contains("anonymous"));
    let err = store.put_file_if_absent(&key("k"), &src).unwrap_err();
    assert!(matches!(err, strata::transport::Error::MissingCredentials { .. }), "{err}");
    assert!(err.is_auth());
    let message = err.to_string();
    for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HW_OBS_AK", "HW_OBS_SK"] {
        assert!(message.contains(var), "{message}");
    }
    let deleting = store.deleting().unwrap();
    assert!(matches!(
        deleting.delete(&key("k")).unwrap_err(),
        strata::transport::Error::MissingCredentials { .. }
    ));
    // Anonymous reads are sent unsigned; this server requires signatures, so it says no.
    assert!(store.head(&key("k")).unwrap_err().is_auth());

    // An HTTP server that wants credentials for writes refuses the anonymous PUT; the
    // message names the variables.
    let nginx = Nginx::start();
    let store = nginx.store("basic", &fast_options());
    let err = store.put_file_if_absent(&key("k"), &src).unwrap_err();
    assert!(err.is_auth(), "{err}");
    let message = err.to_string();
    for var in ["STRATA_HTTP_TOKEN", "STRATA_HTTP_USER", "STRATA_HTTP_PASSWORD"] {
        assert!(message.contains(var), "{message}");
    }
    assert!(message.contains("no credentials are set, so the request was anonymous"), "{message}");
    assert!(store.head(&key("k")).unwrap().is_none(), "reads stay open");
}

#[test]
fn contract_s3_missing_bucket_is_named() {
    let server = S3sServer::start();
    let url = super::server::url_for(&server.endpoint, "x").replace(BUCKET, "no-such-bucket");
    let store =
        strata::transport::open_store_with_env(&url, &fast_options(), server.env()).unwrap();
    let err = store.listing().unwrap().list("").unwrap_err();
    assert!(matches!(err, strata::transport::Error::NoSuchBucket { .. }), "{err}");
    assert!(!err.is_not_found() && !err.is_retryable(), "{err}");
    assert!(err.to_string().contains("no-such-bucket"), "{err}");
    // AWS answers a GET in a missing bucket with NoSuchBucket (which `head` reports);
    // s3s-fs answers NoSuchKey, so here a HEAD can only see a missing object.
    assert!(store.head(&key("k")).unwrap().is_none());
}
