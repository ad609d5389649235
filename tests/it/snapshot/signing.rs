//! Issue 9 items 1, 2 and 5 for snapshots: producers sign sidecars (`--signing-key`,
//! `STRATA_SIGNING_KEY`); consumers with trusted keys (`--trusted-key`,
//! `STRATA_TRUSTED_KEYS`) restore only snapshots signed by one of them and pass over the
//! rest like corrupt ones; without trusted keys nothing changes but a note.

use std::path::Path;

use strata::record::Envelope;
use strata::snapshot::manifest::SIDECAR_SCHEMA;

use super::{Scratch, fill_cache, key, strata, tree};

fn arg(path: &Path) -> String {
    path.display().to_string()
}

fn store_env(scratch: &Scratch) -> Vec<(&'static str, String)> {
    vec![("STRATA_STORE", scratch.file_store())]
}

/// `strata key generate --out <scratch>/<name>`: the public key line.
fn generate(scratch: &Scratch, name: &str) -> String {
    let run = strata(scratch, &["key", "generate", "--out", &arg(&scratch.path(name))], &[]);
    run.assert_ok();
    let line = run.stdout.trim().to_owned();
    assert!(line.starts_with("strata-ed25519:") && !line.contains('\n'), "{line}");
    line
}

fn secret(scratch: &Scratch, name: &str) -> String {
    std::fs::read_to_string(scratch.path(name)).unwrap()
}

fn save(
    scratch: &Scratch,
    cache: &Path,
    k: &str,
    signing: &[&str],
    env: &[(&'static str, String)],
) {
    let cache = arg(cache);
    let mut args = vec!["snapshot", "save", "--cache-dir", cache.as_str(), "--key", k];
    args.extend_from_slice(signing);
    let mut all = store_env(scratch);
    all.extend_from_slice(env);
    let run = strata(scratch, &args, &all);
    run.assert_ok();
    assert!(run.stderr.contains("SAVED"), "{}", run.stderr);
}

fn restore(
    scratch: &Scratch,
    dir: &Path,
    k: &str,
    trusted: &[&str],
    env: &[(&'static str, String)],
) -> (serde_json::Value, super::Run) {
    let dir = arg(dir);
    let mut args = vec!["snapshot", "restore", "--cache-dir", dir.as_str(), "--key", k, "--json"];
    for t in trusted {
        args.extend(["--trusted-key", t]);
    }
    let mut all = store_env(scratch);
    all.extend_from_slice(env);
    let run = strata(scratch, &args, &all);
    run.assert_ok();
    (run.json(), run)
}

/// Two producers publish in one namespace: A (trusted key) the older snapshot with GOOD,
/// B the newer one with EVIL, unsigned or signed by its own key. A consumer that trusts A
/// gets GOOD (B's snapshot passed over with a warning naming why); one that trusts nobody
/// gets the newest, EVIL, and is told producers were not checked.
#[test]
fn snapshot_signing_poisoned_newer_snapshot_is_passed_over_for_the_trusted_one() {
    let scratch = Scratch::new();
    let a_pub = generate(&scratch, "a.key");
    let b_pub = generate(&scratch, "b.key");
    let good = scratch.path("a/cache");
    fill_cache(&good, 1);
    std::fs::write(
        good.join("actions-v1/third_party/zlib")
            .join(format!("{:064x}", 1))
            .join("artifacts/out.txt"),
        "GOOD",
    )
    .unwrap();
    let k_good = key(&scratch, "s1");
    save(&scratch, &good, &k_good, &["--signing-key", &arg(&scratch.path("a.key"))], &[]);

    let evil = scratch.path("b/cache");
    fill_cache(&evil, 1);
    std::fs::write(
        evil.join("actions-v1/third_party/zlib")
            .join(format!("{:064x}", 1))
            .join("artifacts/out.txt"),
        "EVIL",
    )
    .unwrap();
    for (i, signing) in
        [vec![], vec!["--signing-key".to_owned(), arg(&scratch.path("b.key"))]].iter().enumerate()
    {
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let k_evil = key(&scratch, &format!("s{}", i + 2));
        let signing: Vec<&str> = signing.iter().map(String::as_str).collect();
        save(&scratch, &evil, &k_evil, &signing, &[]);
        let out = |dir: &Path| {
            std::fs::read_to_string(
                dir.join("actions-v1/third_party/zlib")
                    .join(format!("{:064x}", 1))
                    .join("artifacts/out.txt"),
            )
            .unwrap()
        };
        // Trusting nobody: the newest snapshot wins, with a note.
        let open = scratch.path(&format!("c{i}/open"));
        let (json, run) = restore(&scratch, &open, &k_evil, &[], &[]);
        assert_eq!(json["matched_key"], k_evil.as_str(), "{json}");
        assert_eq!(out(&open), "EVIL");
        assert!(run.stderr.contains("producers are not checked"), "{}", run.stderr);

        // Trusting A: B's newer snapshot is rejected, A's restored.
        let checked = scratch.path(&format!("c{i}/checked"));
        let (json, run) = restore(&scratch, &checked, &k_evil, &[&a_pub], &[]);
        assert_eq!(json["matched_key"], k_good.as_str(), "{json}");
        assert_eq!(out(&checked), "GOOD");
        let reason = json["rejected"][0]["reason"].as_str().unwrap().to_owned();
        let expected = if i == 0 {
            "not signed".to_owned()
        } else {
            format!("signed by key {}", b_pub.split(':').nth(1).unwrap())
        };
        assert!(
            reason.contains("producer is not trusted") && reason.contains(&expected),
            "{reason}"
        );
        assert!(!run.stderr.contains("producers are not checked"), "{}", run.stderr);
        // A lookup with trusted keys reports the snapshot a restore would take.
        let lookup = scratch.path(&format!("c{i}/lookup"));
        let look = strata(
            &scratch,
            &[
                "snapshot",
                "restore",
                "--cache-dir",
                &arg(&lookup),
                "--key",
                &k_evil,
                "--lookup-only",
                "--json",
                "--trusted-key",
                &a_pub,
            ],
            &store_env(&scratch),
        );
        look.assert_ok();
        assert_eq!(look.json()["matched_key"], k_good.as_str(), "{}", look.stdout);
        let mut beside: Vec<String> = std::fs::read_dir(scratch.path(&format!("c{i}")))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        beside.sort();
        assert_eq!(beside, ["checked", "open"], "a lookup writes nothing beside the cache");
        // The same through STRATA_TRUSTED_KEYS (a list, as a repository variable holds it).
        let via_env = scratch.path(&format!("c{i}/env"));
        let list = format!("{b_pub}x\n");
        let bad = strata(
            &scratch,
            &["snapshot", "restore", "--cache-dir", &arg(&via_env), "--key", &k_evil],
            &[("STRATA_STORE", scratch.file_store()), ("STRATA_TRUSTED_KEYS", list)],
        );
        assert_eq!(bad.code, 2, "a malformed trusted key is a usage error: {}", bad.stderr);
        let (json, _) = restore(
            &scratch,
            &via_env,
            &k_evil,
            &[],
            &[("STRATA_TRUSTED_KEYS", format!("{b_pub},{a_pub}"))],
        );
        let want = if i == 0 { k_good.as_str() } else { k_evil.as_str() };
        assert_eq!(
            json["matched_key"], want,
            "trusting both: B's signed snapshot is accepted, its unsigned one not"
        );
    }
    // No secret key material in any output or store object.
    for name in ["a.key", "b.key"] {
        let material = secret(&scratch, name)
            .trim()
            .strip_prefix("strata-ed25519-secret-v1:")
            .unwrap()
            .to_owned();
        for entry in walkdir::WalkDir::new(scratch.path("store")) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() {
                let bytes = std::fs::read(entry.path()).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(&material),
                    "{}",
                    entry.path().display()
                );
            }
        }
    }
}

fn sidecar(store: &Path, k: &str) -> serde_json::Value {
    let sealed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join(format!("{k}.json"))).unwrap()).unwrap();
    sealed["payload"].clone()
}

fn reseal(store: &Path, k: &str, payload: &serde_json::Value) {
    let sealed = Envelope::seal(&SIDECAR_SCHEMA, vec![], payload).unwrap();
    std::fs::write(store.join(format!("{k}.json")), sealed.to_bytes()).unwrap();
}

/// A signed sidecar edited after signing (resealed so its record digest is right), a
/// signature copied onto another key's sidecar, and a signature relabelled with the
/// trusted key's id are all rejected; the consumer's cache stays as it was.
#[test]
fn snapshot_signing_changed_sidecars_and_replayed_signatures_are_rejected() {
    let scratch = Scratch::new();
    let a_pub = generate(&scratch, "a.key");
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 7);
    let store = scratch.path("store");
    let k1 = key(&scratch, "one");
    let log = scratch.path("signed-events.jsonl");
    save(
        &scratch,
        &cache,
        &k1,
        &[],
        &[
            ("STRATA_SIGNING_KEY", secret(&scratch, "a.key")),
            ("STRATA_EVENT_LOG", log.display().to_string()),
        ],
    );
    let material = secret(&scratch, "a.key").trim()["strata-ed25519-secret-v1:".len()..].to_owned();
    assert!(!std::fs::read_to_string(&log).unwrap().contains(&material), "key in the event log");
    let signed = sidecar(&store, &k1);
    assert_eq!(signed["signature"]["algorithm"], "ed25519", "{signed}");
    assert_eq!(signed["signature"]["key_id"], a_pub.split(':').nth(1).unwrap());
    let consumer = scratch.path("consumer");
    let (json, _) = restore(&scratch, &consumer, &k1, &[&a_pub], &[]);
    assert_eq!(json["restored"], true, "{json}");
    let before = tree(&consumer);

    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let edits: Vec<(&str, Edit)> = vec![
        ("producer edited", Box::new(|p| p["producer"]["repository"] = "evil/fork".into())),
        ("time edited", Box::new(|p| p["created_at"] = "2030-01-01T00:00:00Z".into())),
        (
            "size edited",
            Box::new(|p| {
                p["object_size_bytes"] = (p["object_size_bytes"].as_u64().unwrap() + 1).into()
            }),
        ),
        (
            "signature dropped",
            Box::new(|p| {
                p.as_object_mut().unwrap().remove("signature");
            }),
        ),
        (
            "signature bytes flipped",
            Box::new(|p| {
                let v = p["signature"]["value"].as_str().unwrap().to_owned();
                let (first, rest) = v.split_at(1);
                let flipped = format!("{}{rest}", if first == "A" { "B" } else { "A" });
                p["signature"]["value"] = flipped.into();
            }),
        ),
    ];
    for (what, edit) in &edits {
        let mut payload = signed.clone();
        edit(&mut payload);
        reseal(&store, &k1, &payload);
        let (json, _) = restore(&scratch, &consumer, &k1, &[&a_pub], &[]);
        assert_eq!(json["restored"], false, "{what}: {json}");
        let reason = json["rejected"][0]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("producer is not trusted"), "{what}: {reason}");
        assert_eq!(tree(&consumer), before, "{what}: the cache was touched");
    }
    reseal(&store, &k1, &signed);

    // Replay: k1's signature on the sidecar of another (unsigned) save k2.
    let k2 = key(&scratch, "two");
    let events = scratch.path("events.jsonl");
    save(&scratch, &cache, &k2, &[], &[("STRATA_EVENT_LOG", events.display().to_string())]);
    // An object swapped under k1's valid signed sidecar (k2's object, another save of the
    // same cache): the signature holds, the object digest does not; then k1 restored again.
    let k1_object = super::object_of(&store, &k1);
    let saved = std::fs::read(&k1_object).unwrap();
    std::fs::copy(super::object_of(&store, &k2), &k1_object).unwrap();
    let (json, _) = restore(&scratch, &consumer, &k1, &[&a_pub], &[]);
    assert_eq!(json["restored"], false, "{json}");
    assert_eq!(tree(&consumer), before, "a swapped object changed the cache");
    std::fs::write(&k1_object, saved).unwrap();
    let mut replayed = sidecar(&store, &k2);
    replayed["signature"] = signed["signature"].clone();
    reseal(&store, &k2, &replayed);
    let (json, _) = restore(&scratch, &scratch.path("c2"), &k2, &[&a_pub], &[]);
    assert_eq!(json["matched_key"], k1.as_str(), "the replayed k2 is passed over for k1: {json}");
    assert!(json["rejected"][0]["reason"].as_str().unwrap().contains("does not verify"), "{json}");
}

/// Rotation: old and new keys both trusted accept both producers' snapshots; removing the
/// old key rejects what it signed. A save with an unusable key fails and publishes nothing.
#[test]
fn snapshot_signing_key_rotation_and_unusable_keys() {
    let scratch = Scratch::new();
    let old_pub = generate(&scratch, "old.key");
    let new_pub = generate(&scratch, "new.key");
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 3);
    let k_old = key(&scratch, "old");
    save(&scratch, &cache, &k_old, &["--signing-key", &arg(&scratch.path("old.key"))], &[]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let k_new = key(&scratch, "new");
    save(&scratch, &cache, &k_new, &["--signing-key", &arg(&scratch.path("new.key"))], &[]);
    for (k, trusted, restored) in [
        (&k_old, vec![old_pub.as_str(), new_pub.as_str()], true),
        (&k_new, vec![old_pub.as_str(), new_pub.as_str()], true),
        (&k_new, vec![new_pub.as_str()], true),
    ] {
        let (json, _) =
            restore(&scratch, &scratch.path(&format!("r-{k}-{}", trusted.len())), k, &trusted, &[]);
        assert_eq!(
            (json["matched_key"].as_str(), json["restored"].as_bool()),
            (Some(k.as_str()), Some(restored)),
            "{json}"
        );
    }
    // Old key revoked: the exact key k_old is passed over, and the lookup goes on to the
    // newest snapshot of the same prefix, which the new key signed.
    let (json, _) = restore(&scratch, &scratch.path("revoked"), &k_old, &[&new_pub], &[]);
    assert_eq!(json["rejected"][0]["key"], k_old.as_str(), "{json}");
    assert_ne!(json["matched_key"], k_old.as_str(), "{json}");

    // Unusable keys: a public key as the secret, a damaged file, a missing file.
    std::fs::write(scratch.path("pub.key"), &new_pub).unwrap();
    for (flag, env) in [
        (vec!["--signing-key".to_owned(), arg(&scratch.path("pub.key"))], vec![]),
        (vec!["--signing-key".to_owned(), arg(&scratch.path("missing.key"))], vec![]),
        (vec![], vec![("STRATA_SIGNING_KEY", "strata-ed25519-secret-v1:AAAA".to_owned())]),
    ] {
        let k = key(&scratch, "bad");
        let c = arg(&cache);
        let mut args = vec!["snapshot", "save", "--cache-dir", c.as_str(), "--key", k.as_str()];
        args.extend(flag.iter().map(String::as_str));
        let mut all = store_env(&scratch);
        all.extend(env);
        let run = strata(&scratch, &args, &all);
        assert_ne!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr.contains("signing key") || run.stderr.contains("missing.key"),
            "{}",
            run.stderr
        );
        assert!(!scratch.path("store").join(format!("{k}.json")).exists(), "nothing published");
    }
}
