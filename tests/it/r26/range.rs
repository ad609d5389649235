//! Item 3: a server that answers a ranged GET with `200` and the whole object (RFC 9110
//! allows it) is read once, whole, by every downloader: the parallel download of
//! `get_to_file`, the full-format restore built on it, and the index restore.

use std::path::Path;

use strata::transport::{ObjectKey, ObjectStore, TransportOptions, open_store_with_env};

use crate::snapshot::{Scratch, fill_cache, key, strata};
use crate::transport::proxy::{Fault, FaultProxy, Rule};
use crate::transport::random_bytes;
use crate::transport::server::{S3sServer, fast_options, url_for};

const MIB: usize = 1024 * 1024;

fn ignore_range() -> Rule {
    Rule { method: "GET", contains: " range=bytes=", fault: Fault::IgnoreRange, times: None }
}

fn arg(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn r26_download_from_a_server_ignoring_range_is_one_whole_get() {
    let server = S3sServer::start();
    let proxy = FaultProxy::start(&server.endpoint, vec![ignore_range()]);
    proxy.whole_objects_from(server.data_dir());
    let options = TransportOptions { part_size_bytes: MIB as u64, ..fast_options() };
    let direct = server.store("p", &options);
    let data = random_bytes(3 * MIB + 123, 26);
    let k: ObjectKey = "big.bin".parse().unwrap();
    direct.put_bytes_if_absent(&k, &data).unwrap();
    let store: Box<dyn ObjectStore> =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &options, server.env()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let (meta, stats) = store.get_to_file(&k, &dest).unwrap();
    assert_eq!(meta.size_bytes, data.len() as u64);
    assert!(std::fs::read(&dest).unwrap() == data, "the bytes differ");
    let gets: Vec<String> =
        proxy.seen_with_ranges().into_iter().filter(|r| r.starts_with("GET ")).collect();
    // One ranged GET, answered whole; no other part was asked for, nothing was retried.
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert!(gets[0].ends_with(" range=bytes=0-1048575"), "{gets:?}");
    assert_eq!((proxy.injected(), stats.retries), (1, 0));
}

#[test]
fn r26_full_and_index_restores_from_a_server_ignoring_range() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let proxy = FaultProxy::start(&server.endpoint, vec![ignore_range()]);
    proxy.whole_objects_from(server.data_dir());
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 7);
    std::fs::write(
        cache.join(format!("actions-v1/third_party/zlib/{:064x}/artifacts/big.o", 7)),
        random_bytes(3 * MIB, 27),
    )
    .unwrap();
    for format in ["full", "index"] {
        let k = key(&scratch, &format!("range{format}"));
        let env = vec![
            ("STRATA_STORE", url_for(&proxy.endpoint, format)),
            ("AWS_ACCESS_KEY_ID", server.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", server.secret_key.clone()),
            ("STRATA_S3_PART_SIZE_MB", "1".to_owned()),
        ];
        std::fs::write(cache.join(".updated"), b"").unwrap();
        let saved = strata(
            &scratch,
            &["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k, "--format", format],
            &env,
        );
        saved.assert_ok();
        let out = scratch.path(&format!("{format}/cache"));
        let before = proxy.injected();
        let restored = strata(
            &scratch,
            &["snapshot", "restore", "--cache-dir", &arg(&out), "--key", &k, "--json"],
            &env,
        );
        let report = restored.json();
        assert_eq!(report["status"], "restored", "{format}: {report}\n{}", restored.stderr);
        assert_eq!(report["cache_hit"], true, "{format}: {report}");
        let big = out.join(format!("actions-v1/third_party/zlib/{:064x}/artifacts/big.o", 7));
        assert_eq!(std::fs::read(big).unwrap(), random_bytes(3 * MIB, 27), "{format}");
        if format == "full" {
            // The snapshot object (above the 1 MiB part size) came down in one answer.
            assert_eq!(proxy.injected() - before, 1, "{format}: {:?}", proxy.seen_with_ranges());
        }
    }
}
