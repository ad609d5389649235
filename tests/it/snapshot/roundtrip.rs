//! Save on "runner A", restore on "runner B" in another directory, through both backends:
//! the restored tree is byte-identical, a real gcc action then HITs, an all-HIT build
//! publishes nothing, and the next snapshot names its parent.

use std::path::Path;

use super::{
    Run, S3sServer, Scratch, fill_cache, key, run_of, s3_env, strata, strata_command, tree,
};

/// Runs one C compile through `strata action run` with the checkout root normalised, so
/// the same source at another path has the same key.
pub fn compile(scratch: &Scratch, cache: &Path, runner: &Path, source: &str) -> Run {
    let src = runner.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("hello.c"), source).unwrap();
    let out = runner.join("out");
    let (cache, src_c, out_o) = (
        cache.display().to_string(),
        src.join("hello.c").display().to_string(),
        out.join("hello.o").display().to_string(),
    );
    let run = strata(
        scratch,
        &[
            "action",
            "run",
            "--cache-root",
            &cache,
            "--domain",
            "third_party",
            "--unit",
            "hello",
            "--output-dir",
            &out.display().to_string(),
            "--prepared-input",
            &src_c,
            "--environment-profile",
            "host-cxx",
            "--normalize-path",
            &runner.display().to_string(),
            "--",
            "gcc",
            "-c",
            &src_c,
            "-o",
            &out_o,
        ],
        &[],
    );
    run.assert_ok();
    assert!(out.join("hello.o").is_file(), "{}", run.stderr);
    run
}

const SOURCE: &str = "int answer(void) { return 42; }\n";

fn round_trip(scratch: &Scratch, env: &[(&str, String)], secrets: &[&str]) {
    let a = scratch.path("runner-a");
    let a_cache = a.join("cache");
    let cold = compile(scratch, &a_cache, &a, SOURCE);
    assert!(cold.stderr.contains("strata: MISS"), "{}", cold.stderr);
    fill_cache(&a_cache, 1);
    let key_a = key(scratch, "src1");
    let a_cache_arg = a_cache.display().to_string();
    let saved = strata(
        scratch,
        &["snapshot", "save", "--cache-dir", &a_cache_arg, "--key", &key_a, "--json"],
        env,
    );
    saved.assert_ok().assert_no_secret(secrets);
    let saved = saved.json();
    assert_eq!(saved["outcome"]["status"], "saved", "{saved}");
    assert!(saved["object_size_bytes"].as_u64().unwrap() > 0);
    let parent_digest = saved["manifest_digest"].as_str().unwrap().to_owned();

    // Runner B: another directory at another depth, a fresh key of the same sources.
    let b = scratch.path("runner-b/deeper/work");
    let b_cache = b.join("l1");
    let b_cache_arg = b_cache.display().to_string();
    let key_b = key(scratch, "src1");
    assert_ne!(key_a, key_b);
    let restored = strata(
        scratch,
        &["snapshot", "restore", "--cache-dir", &b_cache_arg, "--key", &key_b, "--json"],
        env,
    );
    restored.assert_ok().assert_no_secret(secrets);
    let report = restored.json();
    assert_eq!(report["status"], "restored", "{report}");
    assert_eq!(report["level"], "same-source");
    assert_eq!(report["cache_hit"], false);
    assert_eq!(report["matched_key"], key_a.as_str());
    assert_eq!(tree(&b_cache.join("actions-v1")), tree(&a_cache.join("actions-v1")));
    assert!(!b_cache.join(".updated").exists());
    assert!(!b_cache.join(".locks").exists());
    assert!(b_cache.join(".local/snapshot-origin.json").is_file());
    let leftovers: Vec<String> = super::names(b_cache.parent().unwrap())
        .into_iter()
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temp files left beside the cache: {leftovers:?}");

    // The restored cache serves the real compile: a HIT, and nothing new to publish.
    let warm = compile(scratch, &b_cache, &b, SOURCE);
    assert!(warm.stderr.contains("strata: HIT"), "{}", warm.stderr);
    assert!(!b_cache.join(".updated").exists());
    let skipped = strata(
        scratch,
        &["snapshot", "save", "--cache-dir", &b_cache_arg, "--key", &key_b, "--json"],
        env,
    );
    skipped.assert_ok();
    assert_eq!(skipped.json()["outcome"]["reason"], "not_updated", "{}", skipped.stdout);

    // A changed source MISSes, is saved, and the new snapshot names its parent.
    let changed = compile(scratch, &b_cache, &b, "int answer(void) { return 43; }\n");
    assert!(changed.stderr.contains("strata: MISS"), "{}", changed.stderr);
    let saved_b = strata(
        scratch,
        &["snapshot", "save", "--cache-dir", &b_cache_arg, "--key", &key_b, "--json"],
        env,
    );
    let saved_b = saved_b.json();
    assert_eq!(saved_b["outcome"]["status"], "saved", "{saved_b}");
    assert_eq!(saved_b["parents"][0], parent_digest.as_str());

    // The exact key restores as an exact hit.
    let c_cache = scratch.path("runner-c/cache").display().to_string();
    let exact = strata(
        scratch,
        &["snapshot", "restore", "--cache-dir", &c_cache, "--key", &key_a, "--json"],
        env,
    );
    let exact = exact.json();
    assert_eq!(
        (exact["level"].as_str(), exact["cache_hit"].as_bool()),
        (Some("exact"), Some(true)),
        "{exact}"
    );
    assert_eq!(tree(&scratch.path("runner-c/cache/actions-v1")), tree(&a_cache.join("actions-v1")));
}

#[test]
fn snapshot_round_trip_through_the_directory_store() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    round_trip(&scratch, &env, &[]);
}

#[test]
fn snapshot_round_trip_through_s3() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let env = s3_env(&server, &server.endpoint, "ci/l1");
    round_trip(&scratch, &env, &[&server.secret_key, &server.access_key]);
    // The objects live under the store prefix, named by key (sidecars) or by a name of
    // their own that the sidecar gives (no path spelling).
    let stored = super::names(
        &server.data_dir().join(super::super::transport::server::BUCKET).join("ci/l1"),
    );
    let sidecars: Vec<&String> = stored.iter().filter(|n| n.ends_with(".json")).collect();
    assert_eq!(sidecars.len(), 2, "{stored:?}");
    assert!(sidecars.iter().all(|n| n.starts_with("strata-l1-schema1-")), "{stored:?}");
    for sidecar in sidecars {
        let key = sidecar.strip_suffix(".json").unwrap();
        let dir = server.data_dir().join(super::super::transport::server::BUCKET).join("ci/l1");
        assert_eq!(super::objects_of(&dir, key).len(), 1, "{stored:?}");
    }
    assert_eq!(stored.len(), 4, "{stored:?}");
}

#[test]
fn snapshot_default_store_is_under_xdg_cache_home() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    fill_cache(&cache, 3);
    let k = key(&scratch, "src3");
    let xdg = scratch.path("xdg");
    let env = vec![("XDG_CACHE_HOME", xdg.display().to_string())];
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache.display().to_string(), "--key", &k],
        &env,
    );
    run.assert_ok();
    assert!(xdg.join("strata/store").join(format!("{k}.json")).is_file(), "{}", run.stderr);
    // Without XDG_CACHE_HOME: ~/.cache/strata/store.
    let run =
        strata(&scratch, &["snapshot", "restore", "--cache-dir", "restored", "--key", &k], &[]);
    run.assert_ok();
    assert!(run.stderr.contains("MISS"), "{}", run.stderr);
    let run =
        strata(&scratch, &["snapshot", "restore", "--cache-dir", "restored", "--key", &k], &env);
    assert!(run.stderr.contains("RESTORED level=exact"), "{}", run.stderr);
    assert_eq!(tree(&scratch.path("restored/actions-v1")), tree(&cache.join("actions-v1")));
}

/// Issue 11: the default store follows the XDG rule, as `artifact push` does: a relative
/// `XDG_CACHE_HOME` is ignored (`$HOME/.cache/strata/store`), and without `HOME` and
/// `XDG_CACHE_HOME` there is no default, a usage error naming both variables. `strata
/// stats` and the launcher's default cache root follow the same rule.
#[test]
fn r11_default_store_and_cache_root_follow_the_xdg_rule() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    fill_cache(&cache, 3);
    let k = key(&scratch, "src11");
    let relative = vec![("XDG_CACHE_HOME", "relative/cache".to_owned())];
    let cache_arg = cache.display().to_string();
    strata(&scratch, &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k], &relative)
        .assert_ok();
    let home = scratch.path("home");
    assert!(home.join(".cache/strata/store").join(format!("{k}.json")).is_file());
    assert!(!scratch.path("relative").exists());

    let without_home = |args: &[&str]| {
        let mut command = strata_command(&scratch, scratch.dir.path(), args, &relative);
        run_of(command.env_remove("HOME").output().unwrap())
    };
    let run = without_home(&["snapshot", "restore", "--cache-dir", "restored", "--key", &k]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("neither XDG_CACHE_HOME nor HOME"), "{}", run.stderr);
    assert!(run.stderr.contains("--store or STRATA_STORE"), "{}", run.stderr);
    assert!(!scratch.path("restored").exists());

    let run = without_home(&["stats"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("neither XDG_CACHE_HOME nor HOME"), "{}", run.stderr);
    assert!(run.stderr.contains("--cache-root or STRATA_CACHE_ROOT"), "{}", run.stderr);
    let run = strata(&scratch, &["stats"], &relative);
    run.assert_ok();
    let expected = format!("cache root: {}", home.join(".cache/strata/cache").display());
    assert!(run.stdout.contains(&expected), "{}", run.stdout);
}

#[test]
fn snapshot_gzip_snapshots_restore_by_magic_number() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 4);
    let k = key(&scratch, "src4");
    let cache_arg = cache.display().to_string();
    strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k, "--compression", "gzip"],
        &env,
    )
    .assert_ok();
    let object = std::fs::read(super::object_of(&scratch.path("store"), &k)).unwrap();
    assert_eq!(&object[..2], &[0x1f, 0x8b]);
    let other = key(&scratch, "src4");
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", "b", "--key", &other, "--json"],
        &env,
    );
    assert_eq!(run.json()["status"], "restored", "{}", run.stderr);
    assert_eq!(tree(&scratch.path("b/actions-v1")), tree(&cache.join("actions-v1")));
}

#[test]
fn snapshot_pack_and_unpack_local_files() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    fill_cache(&cache, 5);
    let object = scratch.path("snap.tzst").display().to_string();
    let run = strata(
        &scratch,
        &[
            "snapshot",
            "pack",
            "--cache-dir",
            &cache.display().to_string(),
            "--output",
            &object,
            "--json",
        ],
        &[],
    );
    let packed = run.json();
    assert_eq!(packed["file_count"], 5, "{packed}");
    let dest = scratch.path("out").display().to_string();
    let run = strata(
        &scratch,
        &["snapshot", "unpack", "--input", &object, "--dest", &dest, "--json"],
        &[],
    );
    let unpacked = run.json();
    assert_eq!(unpacked["manifest_digest"], packed["manifest_digest"]);
    assert_eq!(tree(&scratch.path("out/actions-v1")), tree(&cache.join("actions-v1")));
    // The destination must be new; a damaged file is rejected and leaves nothing.
    let again = strata(&scratch, &["snapshot", "unpack", "--input", &object, "--dest", &dest], &[]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    let mut bytes = std::fs::read(scratch.path("snap.tzst")).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(scratch.path("bad.tzst"), &bytes).unwrap();
    let bad =
        strata(&scratch, &["snapshot", "unpack", "--input", "bad.tzst", "--dest", "bad-out"], &[]);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(bad.stderr.contains("rejected"), "{}", bad.stderr);
    assert!(super::names(scratch.dir.path()).iter().all(|n| !n.starts_with(".bad-out")));
    assert!(!scratch.path("bad-out").exists());
}

/// Review finding 4: negative zstd levels (the fast modes) work as a separate argument
/// (`--level -7`, as actions/save passes them), not only as `--level=-7`; out-of-range
/// levels are still usage errors.
#[test]
fn snapshot_negative_levels_work_as_separate_arguments() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    fill_cache(&cache, 3);
    let cache_arg = cache.display().to_string();
    let object = scratch.path("fast.tzst").display().to_string();
    let run = strata(
        &scratch,
        &["snapshot", "pack", "--cache-dir", &cache_arg, "--output", &object, "--level", "-7"],
        &[],
    );
    run.assert_ok();
    let k = key(&scratch, "fast");
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k, "--level", "-3", "--json"],
        &env,
    );
    run.assert_ok();
    assert_eq!(run.json()["outcome"]["status"], "saved", "{}", run.stderr);
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k, "--level", "-8"],
        &env,
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("-8 is outside -7..=19"), "{}", run.stderr);
}

/// Issue 7 item 7: snapshots in the layout of earlier releases — the object under the key
/// itself, a version 1 sidecar without `object` — stay restorable, by exact key and by
/// prefix, and still count as existing for a save.
#[test]
fn snapshot_restores_snapshots_in_the_layout_of_earlier_releases() {
    let scratch = Scratch::new();
    let env = vec![("STRATA_STORE", scratch.file_store())];
    let cache = scratch.path("a/cache");
    fill_cache(&cache, 8);
    let k = key(&scratch, "old");
    let cache_arg = cache.display().to_string();
    strata(&scratch, &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k], &env)
        .assert_ok();
    // Rewrite the snapshot the way an earlier release stored it.
    let store = scratch.path("store");
    std::fs::rename(super::object_of(&store, &k), store.join(&k)).unwrap();
    let sidecar_path = store.join(format!("{k}.json"));
    let sealed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&sidecar_path).unwrap()).unwrap();
    assert_eq!(sealed["schema_version"], 4);
    let mut payload = sealed["payload"].clone();
    let fields = payload.as_object_mut().unwrap();
    fields.remove("object").unwrap();
    assert_eq!(fields.remove("kind").unwrap(), "full");
    // Version 1 binds the object by untagged SHA-256 (the object inside is this release's,
    // with BLAKE3 file digests: the unpacker reads those files once more under BLAKE3).
    fields.remove("object_digest").unwrap();
    let object_bytes = std::fs::read(store.join(&k)).unwrap();
    fields.insert(
        "object_sha256".into(),
        strata::digest::Sha256Digest::of_bytes(&object_bytes).to_hex().into(),
    );
    let v1 = strata::record::Envelope::seal(
        &strata::snapshot::manifest::SIDECAR_SCHEMA_V1,
        vec![],
        &payload,
    )
    .unwrap();
    std::fs::write(&sidecar_path, v1.to_bytes()).unwrap();
    assert_eq!(super::names(&store), [k.clone(), format!("{k}.json")]);

    let restore = |key: &str, out: &str| {
        let run = strata(
            &scratch,
            &["snapshot", "restore", "--cache-dir", out, "--key", key, "--json"],
            &env,
        );
        run.assert_ok();
        run.json()
    };
    let exact = restore(&k, "b/cache");
    assert_eq!(
        (exact["status"].as_str(), exact["level"].as_str()),
        (Some("restored"), Some("exact")),
        "{exact}"
    );
    assert_eq!(tree(&scratch.path("b/cache/actions-v1")), tree(&cache.join("actions-v1")));
    let newer = key(&scratch, "old");
    let by_prefix = restore(&newer, "c/cache");
    assert_eq!(by_prefix["status"], "restored", "{by_prefix}");
    assert_eq!(
        (by_prefix["level"].as_str(), by_prefix["matched_key"].as_str()),
        (Some("same-source"), Some(k.as_str()))
    );
    assert_eq!(tree(&scratch.path("c/cache/actions-v1")), tree(&cache.join("actions-v1")));
    let again = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k, "--json"],
        &env,
    );
    assert_eq!(again.json()["outcome"]["reason"], "already_exists", "{}", again.stdout);
}
