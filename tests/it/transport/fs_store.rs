//! The directory store: put/get/head/list/delete, no overwrite, prefix filtering.

use std::path::Path;

use strata::transport::{ObjectKey, ObjectStore, PutOutcome, TransportOptions, open_store};

use super::random_bytes;

fn key(text: &str) -> ObjectKey {
    text.parse().unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn store(root: &Path) -> Box<dyn ObjectStore> {
    open_store(&format!("file://{}", root.display()), &TransportOptions::default()).unwrap()
}

#[test]
fn transport_fs_put_get_head_list_delete() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("store");
    let store = store(&root);
    assert_eq!(store.describe(), format!("file://{}", root.display()));
    let k = key("cache/o/r/v1/snap-1");
    assert!(store.head(&k).unwrap().is_none(), "a missing root is an empty store");
    assert!(store.list("").unwrap().is_empty());

    let data = random_bytes(300_000, 1);
    let src = write(work.path(), "src", &data);
    let (outcome, stats) = store.put_file_if_absent(&k, &src).unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    assert_eq!(stats.bytes, data.len() as u64);

    let meta = store.head(&k).unwrap().unwrap();
    assert_eq!((meta.key.clone(), meta.size_bytes), (k.clone(), data.len() as u64));

    let dest = work.path().join("dest");
    std::fs::write(&dest, b"old content that is longer than nothing").unwrap();
    let (got, stats) = store.get_to_file(&k, &dest).unwrap();
    assert_eq!(got.size_bytes, data.len() as u64);
    assert_eq!(stats.bytes, data.len() as u64);
    assert_eq!(std::fs::read(&dest).unwrap(), data, "dest is truncated and rewritten");

    let listed = store.list("cache/").unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].key, k);

    store.delete(&k).unwrap();
    assert!(store.head(&k).unwrap().is_none());
    store.delete(&k).unwrap(); // deleting a missing object succeeds
    let err = store.get_to_file(&k, &dest).unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[test]
fn transport_fs_never_overwrites() {
    let work = tempfile::tempdir().unwrap();
    let store = store(&work.path().join("store"));
    let k = key("a/b");
    let first = write(work.path(), "first", b"first");
    let second = write(work.path(), "second", b"second");
    assert_eq!(store.put_file_if_absent(&k, &first).unwrap().0, PutOutcome::Created);
    let (outcome, stats) = store.put_file_if_absent(&k, &second).unwrap();
    assert_eq!(outcome, PutOutcome::AlreadyExists);
    assert_eq!(stats.bytes, 0);
    let dest = work.path().join("dest");
    store.get_to_file(&k, &dest).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"first");
    // No temp files are left beside the object, and none are listed.
    let names: Vec<_> = std::fs::read_dir(work.path().join("store/a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["b"]);
}

#[test]
fn transport_fs_list_filters_by_prefix() {
    let work = tempfile::tempdir().unwrap();
    let store = store(&work.path().join("store"));
    let src = write(work.path(), "src", b"x");
    for name in ["a/b/1", "a/b/2", "a/bc/1", "a/c/1", "ab/1", "z"] {
        store.put_file_if_absent(&key(name), &src).unwrap();
    }
    // A stray temp file (a crashed writer: this release's name and the 6-character one
    // earlier releases left) is never listed.
    for stray in [".strata-0123456789abcdef.tmp", ".strata-Cr4sh1.tmp"] {
        std::fs::write(work.path().join("store/a/b").join(stray), b"partial").unwrap();
    }
    let keys = |prefix: &str| -> Vec<String> {
        store.list(prefix).unwrap().into_iter().map(|m| m.key.to_string()).collect()
    };
    assert_eq!(keys("a/b/"), ["a/b/1", "a/b/2"]);
    assert_eq!(keys("a/b"), ["a/b/1", "a/b/2", "a/bc/1"]);
    assert_eq!(keys("a/"), ["a/b/1", "a/b/2", "a/bc/1", "a/c/1"]);
    assert_eq!(keys("a"), ["a/b/1", "a/b/2", "a/bc/1", "a/c/1", "ab/1"]);
    assert_eq!(keys(""), ["a/b/1", "a/b/2", "a/bc/1", "a/c/1", "ab/1", "z"]);
    assert!(keys("nothing/").is_empty());
    // A key below an object is simply missing.
    assert!(store.head(&key("z/below")).unwrap().is_none());
}

#[test]
fn transport_fs_bare_path_url() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("bare");
    let store = open_store(root.to_str().unwrap(), &TransportOptions::default()).unwrap();
    assert_eq!(store.describe(), format!("file://{}", root.display()));
    assert!(open_store("relative/dir", &TransportOptions::default()).is_err());
}
