//! Issue 9 for L0: `artifact push --signing-key` uploads `<object>.sig`, an Ed25519-signed
//! statement of the archive's name, size, BLAKE3 digest, key, spec and manifest digest;
//! `artifact pull --trusted-key` accepts only archives whose signature record a trusted key
//! signed and whose bytes are the signed ones. Everything else is `rejected` (exit 3, the
//! build goes on and builds), never a published slot.

use std::path::Path;

use strata::artifact::{LookupStatus, Mode, Stage};

use super::*;

fn publish(ws: &Workspace) {
    let store = ws.store(Mode::ReadWrite);
    store.get_or_build(&key(), &spec(Stage::BinaryReady, REQUIRED), write_outputs).unwrap();
}

fn generate(dir: &Path, name: &str) -> String {
    let out = strata().args(["key", "generate", "--out"]).arg(dir.join(name)).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn l0(cmd: &str, root: &Path, url: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let out = strata()
        .args(["artifact", cmd, "--json", "--store", url])
        .args(id_flags(root, &hex('b'), "ready", REQUIRED))
        .args(extra)
        .env_remove("STRATA_SIGNING_KEY")
        .env_remove("STRATA_TRUSTED_KEYS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = if out.stdout.is_empty() { serde_json::Value::Null } else { json(&out.stdout) };
    (out.status.code().unwrap(), v, stderr)
}

fn objects(remote: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let archive = walkdir::WalkDir::new(remote)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.to_string_lossy().ends_with(".tar.zst"))
        .unwrap();
    let sig = archive.with_extension("zst.sig");
    (archive, sig)
}

/// A store with one artifact pushed by a producer signing with key `a` (the push prints no
/// key material): the temp dirs (kept alive), the store URL and `a`'s public key.
struct SignedStore {
    keys: tempfile::TempDir,
    remote: tempfile::TempDir,
    url: String,
    a_pub: String,
}

/// A key pair `a`, an empty `file://` store and a producer workspace holding one published
/// artifact: (keys dir, `a`'s public key, store dir, store URL, producer).
fn key_store_and_producer() -> (tempfile::TempDir, String, tempfile::TempDir, String, Workspace) {
    let keys = tempfile::tempdir().unwrap();
    let a_pub = generate(keys.path(), "a.key");
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let producer = Workspace::new();
    publish(&producer);
    (keys, a_pub, remote, url, producer)
}

fn signed_store() -> SignedStore {
    let (keys, a_pub, remote, url, producer) = key_store_and_producer();
    let a_key = keys.path().join("a.key");
    let (code, v, err) =
        l0("push", &producer.root(), &url, &["--signing-key", a_key.to_str().unwrap()]);
    assert_eq!((code, v["signed"].as_bool()), (0, Some(true)), "{v} {err}");
    let secret = std::fs::read_to_string(&a_key).unwrap();
    let material = secret.trim().strip_prefix("strata-ed25519-secret-v1:").unwrap();
    assert!(!err.contains(material) && !v.to_string().contains(material), "the key was printed");
    SignedStore { keys, remote, url, a_pub }
}

#[test]
fn l0_signed_push_is_pulled_only_with_a_trusted_key_and_unchanged_bytes() {
    let SignedStore { keys, remote, url, a_pub } = signed_store();
    let b_pub = generate(keys.path(), "b.key");
    let a_key = keys.path().join("a.key");
    let (archive, sig) = objects(remote.path());
    assert!(sig.exists(), "{}", sig.display());
    let secret = std::fs::read_to_string(&a_key).unwrap();
    let material = secret.trim().strip_prefix("strata-ed25519-secret-v1:").unwrap();
    assert!(!std::fs::read_to_string(&sig).unwrap().contains(material));

    let pull = |trusted: &[&str]| {
        let consumer = Workspace::new();
        let mut extra = Vec::new();
        for t in trusted {
            extra.extend(["--trusted-key", *t]);
        }
        let (code, v, err) = l0("pull", &consumer.root(), &url, &extra);
        let status = consumer
            .store(Mode::ReadOnly)
            .lookup(&key(), &spec(Stage::BinaryReady, REQUIRED))
            .status();
        (code, v, err, status)
    };
    // Trusted (alone, or with a second key during a rotation): pulled and published.
    for trusted in [vec![a_pub.as_str()], vec![b_pub.as_str(), a_pub.as_str()]] {
        let (code, v, err, status) = pull(&trusted);
        assert_eq!(
            (code, v["outcome"].as_str(), status),
            (0, Some("pulled"), LookupStatus::Hit),
            "{err}"
        );
    }
    // Untrusted key: rejected, nothing published.
    let (code, v, _, status) = pull(&[&b_pub]);
    assert_eq!((code, v["outcome"].as_str(), status), (3, Some("rejected"), LookupStatus::Miss));
    let a_id = a_pub.split(':').nth(1).unwrap();
    assert!(v["reason"].as_str().unwrap().contains(&format!("signed by key {a_id}")), "{v}");

    // The signature record edited (resealed), or missing: rejected.
    let good_sig = std::fs::read(&sig).unwrap();
    let sealed: serde_json::Value = serde_json::from_slice(&good_sig).unwrap();
    let mut payload = sealed["payload"].clone();
    payload["spec_digest"] = "0".repeat(64).into();
    let schema = strata::artifact::l0::SIGNATURE_SCHEMA;
    std::fs::write(
        &sig,
        strata::record::Envelope::seal(&schema, vec![], &payload).unwrap().to_bytes(),
    )
    .unwrap();
    let (code, v, _, status) = pull(&[&a_pub]);
    assert_eq!(
        (code, v["outcome"].as_str(), status),
        (3, Some("rejected"), LookupStatus::Miss),
        "{v}"
    );
    let mut payload = sealed["payload"].clone();
    payload["producer"]["repository"] = "evil/fork".into();
    std::fs::write(
        &sig,
        strata::record::Envelope::seal(&schema, vec![], &payload).unwrap().to_bytes(),
    )
    .unwrap();
    let (code, v, _, _) = pull(&[&a_pub]);
    assert!(code == 3 && v["reason"].as_str().unwrap().contains("does not verify"), "{v}");
    std::fs::remove_file(&sig).unwrap();
    let (code, v, _, _) = pull(&[&a_pub]);
    assert!(code == 3 && v["reason"].as_str().unwrap().contains("not signed"), "{v}");
    // Without trusted keys the unsigned object is pulled as before.
    let (code, v, _, _) = pull(&[]);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("pulled")));

    // An archive swapped under a valid signature: another (valid!) artifact's archive.
    std::fs::write(&sig, &good_sig).unwrap();
    let other = Workspace::new();
    let store = other.store(Mode::ReadWrite);
    store
        .get_or_build(&key(), &spec(Stage::BinaryReady, REQUIRED), |out: &Path| {
            write_outputs(out)?;
            std::fs::write(out.join("lib/libx.a"), b"a different but valid build")
        })
        .unwrap();
    let other_remote = tempfile::tempdir().unwrap();
    let other_url = format!("file://{}", other_remote.path().display());
    assert_eq!(l0("push", &other.root(), &other_url, &[]).0, 0);
    let (other_archive, _) = objects(other_remote.path());
    std::fs::copy(&other_archive, &archive).unwrap();
    let (code, v, _, status) = pull(&[&a_pub]);
    assert_eq!((code, v["outcome"].as_str(), status), (3, Some("rejected"), LookupStatus::Miss));
    assert!(v["reason"].as_str().unwrap().contains("is not the one its producer signed"), "{v}");
}

/// A push that signs finds the archive already uploaded without a signature (an earlier
/// unsigned push, or one that stopped between the two uploads): it adds the signature.
#[test]
fn l0_signing_push_signs_an_archive_already_present() {
    let (keys, a_pub, _remote, url, producer) = key_store_and_producer();
    assert_eq!(l0("push", &producer.root(), &url, &[]).1["outcome"], "uploaded");
    let a_key = keys.path().join("a.key");
    let (code, v, err) =
        l0("push", &producer.root(), &url, &["--signing-key", a_key.to_str().unwrap()]);
    assert_eq!(
        (code, v["outcome"].as_str(), v["signed"].as_bool()),
        (0, Some("already_present"), Some(true)),
        "{err}"
    );
    let consumer = Workspace::new();
    let (code, v, _) = l0("pull", &consumer.root(), &url, &["--trusted-key", &a_pub]);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("pulled")), "{v}");
}

/// A signature record larger than any real one (64 KiB) is rejected from the store's size
/// claim, before it is downloaded: a writer of the store cannot make every trusting pull
/// fetch gigabytes. (Before: the whole `.sig` was downloaded, then found too large.)
#[test]
fn l0_signing_huge_signature_record_is_rejected_without_download() {
    let SignedStore { keys: _keys, remote, url, a_pub } = signed_store();
    let (_, sig) = objects(remote.path());
    // 1 GiB, sparse: costs no disk here, but a download would write all of it.
    let huge: u64 = 1 << 30;
    std::fs::OpenOptions::new().write(true).open(&sig).unwrap().set_len(huge).unwrap();
    let consumer = Workspace::new();
    let (code, v, _) = l0("pull", &consumer.root(), &url, &["--trusted-key", &a_pub]);
    assert_eq!((code, v["outcome"].as_str()), (3, Some("rejected")), "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains("larger than 64 KiB")
            && reason.contains(&format!("({huge} bytes); not downloaded")),
        "{reason}"
    );
}
