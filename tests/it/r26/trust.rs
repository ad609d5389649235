//! Item 1: snapshots anyone with write access can add must not hide a trusted one. With
//! trusted keys, untrusted candidates are passed over at one sidecar read each, counted
//! apart from corrupt ones (bounded in count and time, and reported), at every lookup
//! level: the same-source prefix, the compatible prefix and `--restore-key` prefixes.

use std::path::Path;

use crate::snapshot::{Scratch, fill_cache, key, strata};

fn arg(path: &Path) -> String {
    path.display().to_string()
}

fn generate(scratch: &Scratch, name: &str) -> String {
    let run = strata(scratch, &["key", "generate", "--out", &arg(&scratch.path(name))], &[]);
    run.assert_ok();
    run.stdout.trim().to_owned()
}

fn save(scratch: &Scratch, cache: &Path, k: &str, signing: Option<&Path>) {
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let cache = arg(cache);
    let signing = signing.map(arg);
    let mut args = vec!["snapshot", "save", "--cache-dir", cache.as_str(), "--key", k];
    if let Some(path) = &signing {
        args.extend(["--signing-key", path.as_str()]);
    }
    let run = strata(scratch, &args, &[("STRATA_STORE", scratch.file_store())]);
    run.assert_ok();
    assert!(run.stderr.contains("SAVED"), "{}", run.stderr);
}

fn restore(scratch: &Scratch, dir: &Path, k: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let dir = arg(dir);
    let mut args = vec!["snapshot", "restore", "--cache-dir", dir.as_str(), "--key", k, "--json"];
    args.extend_from_slice(extra);
    let run = strata(scratch, &args, &[("STRATA_STORE", scratch.file_store())]);
    run.assert_ok();
    (run.json(), run.stderr)
}

/// Four unsigned saves after one signed save, in the same namespace: the signed one is
/// restored, the four are reported, and the restore says what they cost.
#[test]
fn r26_unsigned_snapshots_do_not_hide_the_signed_one() {
    let scratch = Scratch::new();
    let public = generate(&scratch, "producer.key");
    let good = scratch.path("good/cache");
    fill_cache(&good, 1);
    save(&scratch, &good, &key(&scratch, "src1"), Some(&scratch.path("producer.key")));
    let evil = scratch.path("evil/cache");
    fill_cache(&evil, 2);
    for _ in 0..4 {
        save(&scratch, &evil, &key(&scratch, "src1"), None);
    }
    let consumer = scratch.path("consumer/cache");
    let (report, stderr) =
        restore(&scratch, &consumer, &key(&scratch, "src1"), &["--trusted-key", &public]);
    assert_eq!(report["status"], "restored", "{report}\n{stderr}");
    assert_eq!(report["level"], "same-source", "{report}");
    assert_eq!(report["untrusted_skipped"], 4, "{report}");
    let rejected = report["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 4, "{report}");
    assert!(rejected.iter().all(|r| r["untrusted"] == true), "{report}");
    assert!(consumer.join(format!("actions-v1/third_party/zlib/{:064x}", 1)).is_dir());
    assert!(!consumer.join(format!("actions-v1/third_party/zlib/{:064x}", 2)).exists());
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("passed over 4 newer snapshot(s) not signed by a trusted key"),
        "{notes}"
    );
    // Three are warned one by one, the fourth is counted.
    assert_eq!(stderr.matches("its producer is not trusted").count(), 3, "{stderr}");
    assert!(stderr.contains("and 1 more snapshot(s) not signed by a trusted key"), "{stderr}");
}

/// The same at the fallback levels: untrusted snapshots fill the same-source prefix, the
/// signed one is found at the compatible prefix; and through a `--restore-key` prefix for a
/// key of another shape.
#[test]
fn r26_untrusted_snapshots_do_not_hide_a_trusted_one_at_a_fallback_level() {
    let scratch = Scratch::new();
    let public = generate(&scratch, "producer.key");
    let good = scratch.path("good/cache");
    fill_cache(&good, 1);
    save(&scratch, &good, &key(&scratch, "older"), Some(&scratch.path("producer.key")));
    let evil = scratch.path("evil/cache");
    fill_cache(&evil, 2);
    for _ in 0..5 {
        save(&scratch, &evil, &key(&scratch, "newer"), None);
    }
    let consumer = scratch.path("c1/cache");
    let (report, stderr) =
        restore(&scratch, &consumer, &key(&scratch, "newer"), &["--trusted-key", &public]);
    assert_eq!(report["status"], "restored", "{report}\n{stderr}");
    assert_eq!(report["level"], "compatible", "{report}");
    assert_eq!(report["untrusted_skipped"], 5, "{report}");

    // Keys of another shape fall back through --restore-key prefixes alone.
    save(&scratch, &good, "team-cache-1-signed", Some(&scratch.path("producer.key")));
    for n in 2..7 {
        save(&scratch, &evil, &format!("team-cache-{n}-plain"), None);
    }
    let consumer = scratch.path("c2/cache");
    let (report, stderr) = restore(
        &scratch,
        &consumer,
        "team-cache-9-wanted",
        &["--restore-key", "team-cache-", "--trusted-key", &public],
    );
    assert_eq!(report["status"], "restored", "{report}\n{stderr}");
    assert_eq!(report["matched_key"], "team-cache-1-signed", "{report}");
    assert_eq!(report["untrusted_skipped"], 5, "{report}");
}

/// The cost is bounded: past `MAX_UNTRUSTED` untrusted candidates the restore stops with
/// an error that says why and what to do, having read one sidecar per candidate.
#[test]
fn r26_passing_over_untrusted_snapshots_is_bounded() {
    let scratch = Scratch::new();
    let public = generate(&scratch, "producer.key");
    let good = scratch.path("good/cache");
    fill_cache(&good, 1);
    save(&scratch, &good, &key(&scratch, "src"), Some(&scratch.path("producer.key")));
    let evil = scratch.path("evil/cache");
    fill_cache(&evil, 2);
    let limit = strata::snapshot::restore::MAX_UNTRUSTED;
    for _ in 0..limit {
        save(&scratch, &evil, &key(&scratch, "src"), None);
    }
    let consumer = scratch.path("consumer/cache");
    let (report, stderr) =
        restore(&scratch, &consumer, &key(&scratch, "src"), &["--trusted-key", &public]);
    assert_eq!(report["status"], "error", "{report}\n{stderr}");
    assert_eq!(report["untrusted_skipped"], limit, "{report}");
    let error = report["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("passed over {limit} snapshots not signed by a trusted key")),
        "{error}"
    );
    assert!(!consumer.join("actions-v1").exists(), "nothing was restored");
}

/// The remote tier's refs: an unsigned ref put first (refs are never replaced) does not
/// hide a trusted producer's; the producer writes its ref under its key id, and a
/// consumer that trusts it reads that one next (one small read per trusted key).
#[test]
fn r26_an_unsigned_ref_put_first_does_not_hide_the_trusted_producers() {
    use crate::engine::TestContext;
    use crate::remote::{action, store_files, with_store};
    use crate::transport::server::S3sServer;
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let mut cmd = ctx.strata();
    cmd.args(["key", "generate", "--out"]).arg(ctx.path("producer.key"));
    let generated = crate::engine::run_bounded(cmd, crate::engine::RUN_TIMEOUT);
    generated.expect_code(0);
    let public = generated.stdout.trim().to_owned();
    let key_file = ctx.path("producer.key").display().to_string();
    let clear = || {
        let _ = std::fs::remove_dir_all(ctx.path("out"));
    };

    // Anyone with write access uploads first, unsigned.
    let run = ctx.run(
        &with_store(action(&ctx, &ctx.path("attacker"), "zlib"), &server, None)
            .switch("--remote-write"),
    );
    run.expect(&["MISS", "SAVED"]);
    // The trusted producer (which trusts only itself) passes the unsigned ref over, builds
    // the same action and uploads, signed.
    clear();
    let run = ctx.run(
        &with_store(action(&ctx, &ctx.path("producer"), "zlib"), &server, None)
            .switch("--remote-write")
            .flag("--signing-key", &key_file)
            .flag("--trusted-key", &public),
    );
    run.expect(&["MISS", "SAVED"]);
    let warned = run.warnings().join("\n");
    assert!(warned.contains("is not accepted: it is not signed"), "{}", run.stderr);
    assert!(warned.contains("no trusted producer's ref either"), "{}", run.stderr);
    let refs: Vec<String> =
        store_files(&server).into_keys().filter(|k| k.contains("/~refs/")).collect();
    assert_eq!(refs.len(), 2, "the plain ref and the producer's keyed one: {refs:?}");
    // A consumer that trusts the producer gets a remote HIT.
    clear();
    let run = ctx.run(
        &with_store(action(&ctx, &ctx.path("consumer"), "zlib"), &server, None)
            .flag("--trusted-key", &public),
    );
    run.expect(&["HIT"]);
    assert!(run.stderr.contains("source=remote"), "{}", run.stderr);
    assert!(run.warnings().is_empty(), "{}", run.stderr);
    // Another runner of the producer finds its keyed ref (a remote HIT) and uploads no
    // third ref.
    clear();
    let run = ctx.run(
        &with_store(action(&ctx, &ctx.path("producer2"), "zlib"), &server, None)
            .switch("--remote-write")
            .flag("--signing-key", &key_file)
            .flag("--trusted-key", &public),
    );
    run.expect(&["HIT"]);
    let refs_after: Vec<String> =
        store_files(&server).into_keys().filter(|k| k.contains("/~refs/")).collect();
    assert_eq!(refs_after, refs, "{}", run.stderr);
}

/// L0 lookups: an object (or a signature record) anyone with write access pushes first to
/// a slot does not hide a trusted producer's archive; the producer pushes to its keyed
/// name, and a consumer that trusts it pulls that one (one small read per trusted key).
#[test]
fn r26_an_l0_object_pushed_first_does_not_hide_the_trusted_producers() {
    use crate::artifact::{REQUIRED, Workspace, hex, id_flags, json, key, spec, write_outputs};
    use strata::artifact::{Mode, Stage};
    let keys = tempfile::tempdir().unwrap();
    let out = crate::artifact::strata()
        .args(["key", "generate", "--out"])
        .arg(keys.path().join("p.key"))
        .output()
        .unwrap();
    let public = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let l0 = |cmd: &str, root: &Path, extra: &[&str]| {
        let out = crate::artifact::strata()
            .args(["artifact", cmd, "--json", "--store", &url])
            .args(id_flags(root, &hex('b'), "ready", REQUIRED))
            .args(extra)
            .env_remove("STRATA_SIGNING_KEY")
            .env_remove("STRATA_TRUSTED_KEYS")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code().unwrap(), json(&out.stdout), stderr)
    };
    // Anyone with write access pushes other bytes for the slot first, unsigned.
    let attacker = Workspace::new();
    attacker
        .store(Mode::ReadWrite)
        .get_or_build(&key(), &spec(Stage::BinaryReady, REQUIRED), |dir| {
            write_outputs(dir)?;
            std::fs::write(dir.join("meta.json"), br#"{"evil":true}"#)
        })
        .unwrap();
    let (code, v, err) = l0("push", &attacker.root(), &[]);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("uploaded")), "{v} {err}");
    // The trusted producer pushes the real artifact, signed: to its keyed name.
    let producer = Workspace::new();
    producer
        .store(Mode::ReadWrite)
        .get_or_build(&key(), &spec(Stage::BinaryReady, REQUIRED), write_outputs)
        .unwrap();
    let signing = keys.path().join("p.key");
    let (code, v, err) =
        l0("push", &producer.root(), &["--signing-key", signing.to_str().unwrap()]);
    assert_eq!((code, v["signed"].as_bool()), (0, Some(true)), "{v} {err}");
    let key_id = public.split(':').nth(1).unwrap();
    assert!(v["object"].as_str().unwrap().ends_with(&format!(".{key_id}.tar.zst")), "{v}");
    // A consumer that trusts the producer gets the producer's bytes.
    let consumer = Workspace::new();
    let dest = consumer.path().join("dest");
    let (code, v, err) =
        l0("pull", &consumer.root(), &["--trusted-key", &public, "--dest", dest.to_str().unwrap()]);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("pulled")), "{v} {err}");
    assert_eq!(std::fs::read(dest.join("meta.json")).unwrap(), br#"{"ok":true}"#);
    // Pushed again, nothing more is uploaded.
    let (code, v, err) =
        l0("push", &producer.root(), &["--signing-key", signing.to_str().unwrap()]);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("already_present")), "{v} {err}");
}
