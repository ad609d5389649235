//! Issue 8 items 2 and 3 for snapshots: algorithm-tagged digests (BLAKE3 by default,
//! SHA-256 with `--digest sha256`) in the manifest and the sidecar's `object_digest`, and
//! snapshots of the previous release (manifest v1, sidecar v2) still restore.

use std::path::Path;

use strata::digest::{ContentDigest, DigestAlgorithm};
use strata::record::Envelope;
use strata::snapshot::manifest::{SIDECAR_SCHEMA, object_name_stem};

use super::craft::{Entry, manifest_for, object, publish_v2};
use super::{Scratch, fill_cache, key, object_of, strata, tree};

fn arg(path: &Path) -> String {
    path.display().to_string()
}

fn env(scratch: &Scratch) -> Vec<(&'static str, String)> {
    vec![("STRATA_STORE", scratch.file_store())]
}

fn save(scratch: &Scratch, cache: &Path, k: &str, digest: Option<&str>) {
    let cache = arg(cache);
    let mut args = vec!["snapshot", "save", "--cache-dir", &cache, "--key", k];
    if let Some(d) = digest {
        args.extend(["--digest", d]);
    }
    let run = strata(scratch, &args, &env(scratch));
    run.assert_ok();
    assert!(run.stderr.contains("SAVED"), "{}", run.stderr);
}

fn restore_json(scratch: &Scratch, dir: &Path, k: &str) -> (serde_json::Value, String) {
    let run = strata(
        scratch,
        &["snapshot", "restore", "--cache-dir", &arg(dir), "--key", k, "--json"],
        &env(scratch),
    );
    run.assert_ok();
    (run.json(), run.stderr.clone())
}

fn sidecar_payload(store: &Path, k: &str) -> (serde_json::Value, serde_json::Value) {
    let sealed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join(format!("{k}.json"))).unwrap()).unwrap();
    (sealed["schema_version"].clone(), sealed["payload"].clone())
}

fn reseal_sidecar(store: &Path, k: &str, payload: &serde_json::Value) {
    let sealed = Envelope::seal(&SIDECAR_SCHEMA, vec![], payload).unwrap();
    std::fs::write(store.join(format!("{k}.json")), sealed.to_bytes()).unwrap();
}

/// A BLAKE3 (default) and a SHA-256 (`--digest sha256`) snapshot both round-trip; the
/// sidecar (version 4) and every file record of the manifest name the algorithm.
#[test]
fn snapshot_round_trips_under_blake3_and_sha256() {
    let scratch = Scratch::new();
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 21);
    for (algorithm, flag) in [("blake3", None), ("sha256", Some("sha256"))] {
        let k = key(&scratch, algorithm);
        save(&scratch, &cache, &k, flag);
        let store = scratch.path("store");
        let (version, payload) = sidecar_payload(&store, &k);
        assert_eq!(version, 4);
        let digest = payload["object_digest"].as_str().unwrap().to_owned();
        assert!(digest.starts_with(&format!("{algorithm}:")), "{digest}");
        assert!(payload.get("object_sha256").is_none(), "{payload}");
        let bytes = std::fs::read(object_of(&store, &k)).unwrap();
        let algo =
            if algorithm == "blake3" { DigestAlgorithm::Blake3 } else { DigestAlgorithm::Sha256 };
        assert_eq!(ContentDigest::of_bytes(algo, &bytes).to_string(), digest);
        let tar =
            String::from_utf8_lossy(&zstd::decode_all(bytes.as_slice()).unwrap()).into_owned();
        let tagged = format!("\"digest\":\"{algorithm}:");
        assert_eq!(tar.matches(&tagged).count(), 5, "every file record is {algorithm}");
        assert_eq!(tar.matches("\"digest\":\"").count(), 5, "no other algorithm");
        let out = scratch.path(&format!("{algorithm}/cache"));
        let (json, stderr) = restore_json(&scratch, &out, &k);
        assert_eq!(json["status"], "restored", "{json} {stderr}");
        assert_eq!(tree(&out.join("actions-v1")), tree(&cache.join("actions-v1")));
    }
}

/// A snapshot of the previous release — manifest version 1 (three lists, untagged
/// SHA-256) in an object committed by a version 2 sidecar (`object_sha256`) — restores
/// through the migrations.
#[test]
fn snapshot_restores_a_v1_manifest_committed_by_a_v2_sidecar() {
    let scratch = Scratch::new();
    let k = key(&scratch, "previous_release");
    let entries = [
        Entry::Dir("actions-v1"),
        Entry::Dir("actions-v1/third_party"),
        Entry::File {
            path: "actions-v1/third_party/lib.a".to_owned(),
            mode: 0o755,
            data: b"bytes of the previous release".to_vec(),
        },
        Entry::Symlink { path: "actions-v1/third_party/u/k/artifacts/l", target: "x".into() },
    ];
    let mut entries = entries.to_vec();
    entries.insert(3, Entry::Dir("actions-v1/third_party/u"));
    entries.insert(4, Entry::Dir("actions-v1/third_party/u/k"));
    entries.insert(5, Entry::Dir("actions-v1/third_party/u/k/artifacts"));
    let manifest = manifest_for(&entries, &k);
    let (bytes, digest) = object(&entries, &manifest);
    let name = format!("{}{}", object_name_stem(&k), "0123456789abcdef".repeat(2));
    publish_v2(&scratch.path("store"), &k, &name, &bytes, &digest, entries.len() as u64, 29);
    let out = scratch.path("b/cache");
    let (json, stderr) = restore_json(&scratch, &out, &k);
    assert_eq!(json["status"], "restored", "{json} {stderr}");
    assert_eq!(json["manifest_digest"], digest.as_str(), "the digest of the record as stored");
    assert_eq!(
        std::fs::read(out.join("actions-v1/third_party/lib.a")).unwrap(),
        b"bytes of the previous release"
    );
    assert_eq!(
        std::fs::read_link(out.join("actions-v1/third_party/u/k/artifacts/l")).unwrap(),
        Path::new("x")
    );
}

/// A file corrupted inside the tar (same size, one byte flipped) in an object whose
/// sidecar binds it (so the object digest matches) is rejected by the file's own digest,
/// before the swap, under both algorithms.
#[test]
fn snapshot_rejects_a_flipped_byte_inside_the_tar_under_both_algorithms() {
    let scratch = Scratch::new();
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 22);
    let marker = crate::transport::random_bytes(300_000, 22);
    for (algorithm, flag, algo) in [
        ("blake3", None, DigestAlgorithm::Blake3),
        ("sha256", Some("sha256"), DigestAlgorithm::Sha256),
    ] {
        let k = key(&scratch, &format!("flip_{algorithm}"));
        save(&scratch, &cache, &k, flag);
        let store = scratch.path("store");
        let object = object_of(&store, &k);
        let mut tar = zstd::decode_all(std::fs::read(&object).unwrap().as_slice()).unwrap();
        let at = tar.windows(64).position(|w| w == &marker[..64]).unwrap() + 1000;
        tar[at] ^= 0x01;
        let damaged = zstd::encode_all(tar.as_slice(), 1).unwrap();
        std::fs::write(&object, &damaged).unwrap();
        let (_, mut payload) = sidecar_payload(&store, &k);
        payload["object_size_bytes"] = damaged.len().into();
        payload["object_digest"] = ContentDigest::of_bytes(algo, &damaged).to_string().into();
        reseal_sidecar(&store, &k, &payload);

        let victim = scratch.path(&format!("victim-{algorithm}/cache"));
        std::fs::create_dir_all(victim.join("actions-v1/keep")).unwrap();
        std::fs::write(victim.join("actions-v1/keep/f"), b"previous").unwrap();
        let before = tree(&victim);
        let (json, stderr) = restore_json(&scratch, &victim, &k);
        assert_eq!(json["status"], "error", "{json} {stderr}");
        assert_eq!(json["rejected"][0]["key"], k.as_str(), "{json}");
        let reason = json["rejected"][0]["reason"].as_str().unwrap_or_default().to_owned();
        assert!(
            reason.contains("manifest mismatch: file actions-v1/third_party/zlib/")
                && reason.contains(&format!("libz.a has digest {algorithm}:")),
            "{json}"
        );
        assert_eq!(tree(&victim), before, "nothing was swapped in");
    }
}

/// A version 3 sidecar whose object digest is wrong is skipped like any corrupt candidate:
/// the next candidate restores.
#[test]
fn snapshot_skips_a_v3_sidecar_with_a_wrong_object_digest() {
    let scratch = Scratch::new();
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 23);
    let good = key(&scratch, "same");
    save(&scratch, &cache, &good, None);
    let bad = key(&scratch, "same");
    assert_ne!(good, bad);
    save(&scratch, &cache, &bad, None);
    let store = scratch.path("store");
    let (_, mut payload) = sidecar_payload(&store, &bad);
    payload["object_digest"] =
        ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"not the object").to_string().into();
    reseal_sidecar(&store, &bad, &payload);
    let out = scratch.path("b/cache");
    let (json, stderr) = restore_json(&scratch, &out, &bad);
    assert_eq!(json["status"], "restored", "{json} {stderr}");
    assert_eq!(json["matched_key"], good.as_str(), "{json}");
    assert_eq!(json["rejected"][0]["key"], bad.as_str(), "{json}");
    let reason = json["rejected"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("does not match its sidecar"), "{reason}");
    assert_eq!(tree(&out.join("actions-v1")), tree(&cache.join("actions-v1")));
}
