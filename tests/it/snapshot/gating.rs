//! Save gating (no key, no `.updated`, no writer credentials, an all-HIT build, an existing
//! key) and the restore-side switches (empty key, lookup-only, fail-on-cache-miss).

use super::roundtrip::compile;
use super::{S3sServer, Scratch, fill_cache, key, names, strata, strata_in, tree};

fn store_env(scratch: &Scratch) -> Vec<(&'static str, String)> {
    vec![("STRATA_STORE", scratch.file_store())]
}

#[test]
fn snapshot_save_without_a_key_uploads_nothing() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let cache = cache.display().to_string();
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache, "--key", ""],
        &store_env(&scratch),
    );
    run.assert_ok();
    assert!(run.stderr.contains("snapshot save skipped: no primary key"), "{}", run.stderr);
    let json = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache, "--key", " ", "--json"],
        &store_env(&scratch),
    );
    assert_eq!(json.json()["outcome"]["reason"], "no_key");
    assert!(names(&scratch.path("store")).is_empty());
}

#[test]
fn snapshot_save_without_the_updated_marker_uploads_nothing() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    std::fs::remove_file(cache.join(".updated")).unwrap();
    let k = key(&scratch, "s");
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache.display().to_string(), "--key", &k],
        &store_env(&scratch),
    );
    run.assert_ok();
    assert!(run.stderr.contains("no .updated marker"), "{}", run.stderr);
    assert!(names(&scratch.path("store")).is_empty());
    let missing = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", "nowhere", "--key", &k, "--json"],
        &store_env(&scratch),
    );
    assert_eq!(missing.json()["outcome"]["reason"], "no_cache_dir");
}

#[test]
fn snapshot_save_to_s3_needs_writer_credentials() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let cache = cache.display().to_string();
    let k = key(&scratch, "s");
    let url = super::super::transport::server::url_for(&server.endpoint, "l1");
    let bucket = server.data_dir().join(super::super::transport::server::BUCKET);
    // Only half a pair, or none: a read-only consumer.
    for env in [
        vec![("STRATA_STORE", url.clone())],
        vec![("STRATA_STORE", url.clone()), ("HW_OBS_AK", server.access_key.clone())],
    ] {
        let run = strata(
            &scratch,
            &["snapshot", "save", "--cache-dir", &cache, "--key", &k, "--json"],
            &env,
        );
        run.assert_ok();
        assert_eq!(run.json()["outcome"]["reason"], "no_writer_credentials", "{}", run.stderr);
        run.assert_no_secret(&[&server.access_key]);
    }
    assert!(names(&bucket).is_empty(), "{:?}", names(&bucket));
    // The Huawei OBS variables are writer credentials too.
    let env = vec![
        ("STRATA_STORE", url),
        ("HW_OBS_AK", server.access_key.clone()),
        ("HW_OBS_SK", server.secret_key.clone()),
    ];
    let run = strata(&scratch, &["snapshot", "save", "--cache-dir", &cache, "--key", &k], &env);
    run.assert_ok().assert_no_secret(&[&server.access_key, &server.secret_key]);
    assert!(run.stderr.contains("SAVED"), "{}", run.stderr);
    assert!(bucket.join("l1").join(format!("{k}.json")).is_file());
}

#[test]
fn snapshot_all_hit_build_publishes_nothing() {
    let scratch = Scratch::new();
    let env = store_env(&scratch);
    let a = scratch.path("a");
    compile(&scratch, &a.join("cache"), &a, "int f(void) { return 1; }\n");
    let k = key(&scratch, "s");
    let a_cache = a.join("cache").display().to_string();
    strata(&scratch, &["snapshot", "save", "--cache-dir", &a_cache, "--key", &k], &env).assert_ok();
    let b = scratch.path("b");
    let b_cache = b.join("cache").display().to_string();
    let k2 = key(&scratch, "s");
    strata(&scratch, &["snapshot", "restore", "--cache-dir", &b_cache, "--key", &k2], &env)
        .assert_ok();
    let hit = compile(&scratch, &b.join("cache"), &b, "int f(void) { return 1; }\n");
    assert!(hit.stderr.contains("strata: HIT"), "{}", hit.stderr);
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &b_cache, "--key", &k2, "--json"],
        &env,
    );
    assert_eq!(run.json()["outcome"]["reason"], "not_updated");
    assert_eq!(names(&scratch.path("store")).len(), 2, "only the first snapshot and its sidecar");
}

#[test]
fn snapshot_save_never_overwrites() {
    let scratch = Scratch::new();
    let env = store_env(&scratch);
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let k = key(&scratch, "s");
    let cache_arg = cache.display().to_string();
    strata(&scratch, &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k], &env)
        .assert_ok();
    let before = tree(&scratch.path("store"));
    std::fs::write(cache.join("actions-v1/new-file"), b"new").unwrap();
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k, "--json"],
        &env,
    );
    assert_eq!(run.json()["outcome"]["reason"], "already_exists");
    assert_eq!(tree(&scratch.path("store")), before);
}

#[test]
fn snapshot_restore_switches() {
    let scratch = Scratch::new();
    let env = store_env(&scratch);
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let k = key(&scratch, "s");
    strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache.display().to_string(), "--key", &k],
        &env,
    )
    .assert_ok();

    // An empty key restores nothing, fail-open; with --fail-on-cache-miss it fails.
    let target = scratch.path("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join(".updated"), b"").unwrap();
    let target_arg = target.display().to_string();
    let run =
        strata(&scratch, &["snapshot", "restore", "--cache-dir", &target_arg, "--key", ""], &env);
    run.assert_ok();
    assert!(run.stderr.contains("no key"), "{}", run.stderr);
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &target_arg, "--key", "", "--fail-on-cache-miss"],
        &env,
    );
    assert_eq!(run.code, 1);

    // Lookup-only finds the snapshot and changes nothing (not even .updated).
    let k2 = key(&scratch, "s");
    let run = strata(
        &scratch,
        &[
            "snapshot",
            "restore",
            "--cache-dir",
            &target_arg,
            "--key",
            &k2,
            "--lookup-only",
            "--json",
        ],
        &env,
    );
    let report = run.json();
    assert_eq!(
        (report["status"].as_str(), report["level"].as_str()),
        (Some("found"), Some("same-source"))
    );
    assert_eq!(report["matched_key"], k.as_str());
    assert_eq!(report["kind"], serde_json::Value::Null, "a lookup reads no sidecar: {report}");
    assert_eq!(super::names(&target), [".updated"]);

    // A miss: exit 0 normally, 1 with --fail-on-cache-miss; .updated is reset either way.
    let other = key(&scratch, "other");
    let other = other.replace(&other[18..50], &"0".repeat(32));
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &target_arg, "--key", &other, "--json"],
        &env,
    );
    assert_eq!(run.json()["status"], "miss", "{}", run.stdout);
    assert!(super::names(&target).is_empty());
    let run = strata(
        &scratch,
        &[
            "snapshot",
            "restore",
            "--cache-dir",
            &target_arg,
            "--key",
            &other,
            "--fail-on-cache-miss",
        ],
        &env,
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    // Usage errors exit 2.
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &target_arg, "--key", "a,b"],
        &env,
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &target_arg, "--key", &k, "--store", "ftp://x"],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn snapshot_key_reports_unsupported_trees_and_exports_paths() {
    let scratch = Scratch::new();
    let gh = scratch.path("gh");
    std::fs::create_dir_all(&gh).unwrap();
    let env = vec![
        ("GITHUB_OUTPUT", gh.join("output").display().to_string()),
        ("GITHUB_ENV", gh.join("env").display().to_string()),
        ("GITHUB_ACTIONS", "true".to_owned()),
        ("RUNNER_TEMP", scratch.path("runner-temp").display().to_string()),
        ("GITHUB_JOB", "build/x64".to_owned()),
    ];
    let run = strata(
        &scratch,
        &[
            "snapshot",
            "key",
            "--toolchain-image",
            super::IMAGE,
            "--source-root",
            ".",
            "--require",
            "CMakeLists.txt",
            "--cache-dir",
            "rel/cache",
            "--github-output",
        ],
        &env,
    );
    run.assert_ok();
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains("::warning title=strata snapshot key unavailable::"),
        "{}",
        run.stderr
    );
    let output = std::fs::read_to_string(gh.join("output")).unwrap();
    assert!(output.contains("supported=false\n"), "{output}");
    assert!(output.contains("primary-key=\n"), "{output}");
    let exported = std::fs::read_to_string(gh.join("env")).unwrap();
    let abs = std::fs::canonicalize(scratch.dir.path()).unwrap().join("rel/cache");
    assert!(exported.contains(&format!("STRATA_CACHE_ROOT={}\n", abs.display())), "{exported}");
    let log = scratch.path("runner-temp").join("strata-events-build_x64.jsonl");
    assert!(exported.contains(&format!("STRATA_EVENT_LOG={}\n", log.display())), "{exported}");

    // Supported: three lines on stdout and the outputs, with restore-keys as a block.
    std::fs::write(scratch.path("CMakeLists.txt"), b"").unwrap();
    let run = strata(
        &scratch,
        &[
            "snapshot",
            "key",
            "--toolchain-image",
            super::IMAGE,
            "--source-hash",
            "abc",
            "--require",
            "CMakeLists.txt",
            "--soc",
            "a2",
            "--github-output",
        ],
        &env,
    );
    run.assert_ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3);
    let output = std::fs::read_to_string(gh.join("output")).unwrap();
    assert!(output.contains("supported=true\n"), "{output}");
    assert!(output.contains(&format!("primary-key={}\n", lines[0])), "{output}");
    assert!(output.contains("restore-keys<<ghadelimiter_"), "{output}");
    assert!(output.contains(&format!("\n{}\n{}\n", lines[1], lines[2])), "{output}");
}

/// Review finding 8: an `actions-v1` moved to another disk and symlinked back is not
/// followed: save skips with `symlinked_layout` (instead of publishing an empty snapshot)
/// and `pack` fails naming the path.
#[test]
fn snapshot_save_refuses_a_symlinked_layout_directory() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let moved = scratch.path("bigger-disk/actions-v1");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(cache.join("actions-v1"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, cache.join("actions-v1")).unwrap();
    let k = key(&scratch, "s");
    let cache_arg = cache.display().to_string();
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k],
        &store_env(&scratch),
    );
    run.assert_ok();
    assert!(
        run.stderr.contains("actions-v1 in the cache directory is a symlink"),
        "{}",
        run.stderr
    );
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k, "--json"],
        &store_env(&scratch),
    );
    run.assert_ok();
    assert_eq!(run.json()["outcome"]["reason"], "symlinked_layout", "{}", run.stdout);
    assert!(names(&scratch.path("store")).is_empty());
    let out = scratch.path("object").display().to_string();
    let pack =
        strata(&scratch, &["snapshot", "pack", "--cache-dir", &cache_arg, "--output", &out], &[]);
    assert_eq!(pack.code, 1, "{}", pack.stderr);
    assert!(pack.stderr.contains("actions-v1 is not a real directory"), "{}", pack.stderr);
}

/// Review finding 2 (and 9: a dangling symlink or a regular file): a restore replaces the
/// cache directory as a whole, so it refuses one that is or contains the current
/// directory or `$HOME`, or holds anything but strata's own names, with a warning, exit 0,
/// status `error`, and nothing touched (not even `.updated`).
#[test]
fn snapshot_restore_refuses_a_directory_that_is_not_its_own() {
    let scratch = Scratch::new();
    let env = store_env(&scratch);
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let k = key(&scratch, "s");
    let cache_arg = cache.display().to_string();
    strata(&scratch, &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k], &env)
        .assert_ok();

    let ws = scratch.path("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/HEAD"), b"ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(ws.join("src/sub")).unwrap();
    std::fs::write(ws.join("src/main.c"), b"int main(void) { return 0; }\n").unwrap();
    std::fs::write(ws.join(".updated"), b"").unwrap();
    let home = scratch.path("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".bashrc"), b"# mine\n").unwrap();
    let elsewhere = scratch.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let dangling = scratch.path("dangling");
    std::os::unix::fs::symlink(scratch.path("nowhere"), &dangling).unwrap();
    let file = scratch.path("a-file");
    std::fs::write(&file, b"x").unwrap();
    let before = (tree(&ws), tree(&home));

    let ws_arg = ws.display().to_string();
    let home_arg = home.display().to_string();
    let cases = [
        (ws.clone(), ".".to_owned(), "it is the current directory"),
        (ws.join("src/sub"), "../..".to_owned(), "it contains the current directory"),
        (elsewhere.clone(), ws_arg, "not strata's (e.g. \".git\""),
        (elsewhere.clone(), home_arg, "it is $HOME"),
        (elsewhere.clone(), dangling.display().to_string(), "dangling"),
        (elsewhere.clone(), file.display().to_string(), "not a directory"),
    ];
    for (cwd, dir, reason) in cases {
        let args = ["snapshot", "restore", "--cache-dir", &dir, "--key", &k, "--json"];
        let run = strata_in(&scratch, &cwd, &args, &env);
        run.assert_ok();
        assert_eq!(run.json()["status"], "error", "{dir}: {}", run.stdout);
        assert!(run.stderr.contains("refusing to restore into"), "{dir}: {}", run.stderr);
        assert!(run.stderr.contains(reason), "{dir}: expected {reason:?} in {}", run.stderr);
        assert!(run.stderr.contains("nothing was touched"), "{dir}: {}", run.stderr);
        assert_eq!((tree(&ws), tree(&home)), before, "{dir}: something was touched");
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }
    // A directory holding only strata's names (and a crash leftover) is replaced.
    let own = scratch.path("own");
    for name in [".locks/entry", ".local", "actions-v1/x", ".actions-v1.tmp-0123456789abcdef"] {
        std::fs::create_dir_all(own.join(name)).unwrap();
    }
    std::fs::write(own.join(".updated"), b"").unwrap();
    let own_arg = own.display().to_string();
    let run =
        strata(&scratch, &["snapshot", "restore", "--cache-dir", &own_arg, "--key", &k], &env);
    run.assert_ok();
    assert!(run.stderr.contains("RESTORED"), "{}", run.stderr);
    assert_eq!(tree(&own.join("actions-v1")), tree(&cache.join("actions-v1")));
}

/// Review finding 7: half a credential pair (one misnamed secret) is a warning and is
/// ignored — a restore reads with the other pair or anonymously, a save with a complete
/// other pair publishes — instead of exit 2; a `file://` store reads no credentials at
/// all; query values of a store URL never appear in messages.
#[test]
fn snapshot_half_credential_pairs_and_url_secrets() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let url = super::super::transport::server::url_for(&server.endpoint, "l1");
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    let cache_arg = cache.display().to_string();
    let k = key(&scratch, "s");
    let secrets = [server.access_key.as_str(), server.secret_key.as_str()];
    let save = |env: &[(&str, String)]| {
        strata(
            &scratch,
            &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k, "--json"],
            env,
        )
    };
    let restore = |env: &[(&str, String)]| {
        strata(&scratch, &["snapshot", "restore", "--cache-dir", "out", "--key", &k, "--json"], env)
    };

    // A complete HW_OBS pair beside half an AWS pair: the half pair is ignored.
    let mixed = vec![
        ("STRATA_STORE", url.clone()),
        ("AWS_SECRET_ACCESS_KEY", server.secret_key.clone()),
        ("HW_OBS_AK", server.access_key.clone()),
        ("HW_OBS_SK", server.secret_key.clone()),
    ];
    let run = save(&mixed);
    run.assert_ok().assert_no_secret(&secrets);
    assert_eq!(run.json()["outcome"]["status"], "saved", "{}", run.stderr);
    assert!(run.stderr.contains("only AWS_SECRET_ACCESS_KEY is set"), "{}", run.stderr);
    let run = restore(&mixed);
    run.assert_ok().assert_no_secret(&secrets);
    assert_eq!(run.json()["status"], "restored", "{}", run.stderr);

    // Only half a pair: a warning and an anonymous attempt, never exit 2.
    let half =
        vec![("STRATA_STORE", url.clone()), ("AWS_ACCESS_KEY_ID", server.access_key.clone())];
    let run = restore(&half);
    run.assert_ok().assert_no_secret(&secrets);
    assert!(run.stderr.contains("only AWS_ACCESS_KEY_ID is set"), "{}", run.stderr);
    assert!(run.stderr.contains("anonymously"), "{}", run.stderr);
    assert!(
        run.json()["status"] == "restored" || run.json()["status"] == "error",
        "{}",
        run.stdout
    );
    let run = save(&half);
    run.assert_ok();
    assert_eq!(run.json()["outcome"]["reason"], "no_writer_credentials");
    // A writer with a misnamed secret is told so, not taken for a read-only consumer.
    assert!(run.stderr.contains("only AWS_ACCESS_KEY_ID is set"), "{}", run.stderr);

    // A directory store ignores credentials entirely (no warning either).
    let file = vec![("STRATA_STORE", scratch.file_store()), ("AWS_ACCESS_KEY_ID", "AKID".into())];
    let run = save(&file);
    run.assert_ok();
    assert_eq!(run.json()["outcome"]["status"], "saved", "{}", run.stderr);
    let run = restore(&file);
    run.assert_ok();
    assert_eq!(run.json()["status"], "restored", "{}", run.stderr);
    assert!(!run.stderr.contains("credential"), "{}", run.stderr);

    // Query values never appear: neither in a usage error nor in a skipped save's report.
    let leaky = format!("{url}&secret=hunter2&x-amz-security-token=tok3n");
    let run = restore(&[("STRATA_STORE", leaky.clone())]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    run.assert_no_secret(&["hunter2", "tok3n"]);
    assert!(run.stderr.contains("secret=***"), "{}", run.stderr);
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", "", "--json", "--store", &leaky],
        &[],
    );
    run.assert_ok().assert_no_secret(&["hunter2", "tok3n"]);
}

/// Review finding 9: `--json` keeps the skip notice on stderr (stdout stays one object).
#[test]
fn snapshot_a_skipped_save_notices_on_stderr_in_json_mode() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    fill_cache(&cache, 1);
    std::fs::remove_file(cache.join(".updated")).unwrap();
    let k = key(&scratch, "s");
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache.display().to_string(), "--key", &k, "--json"],
        &store_env(&scratch),
    );
    run.assert_ok();
    assert_eq!(run.json()["outcome"]["reason"], "not_updated");
    assert!(run.stderr.contains("snapshot save skipped: no .updated marker"), "{}", run.stderr);
    assert!(run.stderr.contains(&k), "{}", run.stderr);
}

/// Review finding 9: an unwritable `GITHUB_OUTPUT` (or none with `--github-output`) is a
/// warning on stderr naming the file and the cause, never silence or a failure.
#[test]
fn snapshot_an_unwritable_github_output_is_a_warning() {
    let scratch = Scratch::new();
    let k = key(&scratch, "s");
    let not_a_file = scratch.path("gh-dir");
    std::fs::create_dir_all(&not_a_file).unwrap();
    let args = ["snapshot", "restore", "--cache-dir", "cache", "--key", &k, "--github-output"];
    let mut env = store_env(&scratch);
    let run = strata(&scratch, &args, &env);
    run.assert_ok();
    assert!(run.stderr.contains("GITHUB_OUTPUT is not"), "{}", run.stderr);
    env.push(("GITHUB_OUTPUT", not_a_file.display().to_string()));
    let run = strata(&scratch, &args, &env);
    run.assert_ok();
    assert!(run.stderr.contains("strata: WARNING GitHub output: cannot open"), "{}", run.stderr);
    assert!(run.stderr.contains("Is a directory"), "{}", run.stderr);
    assert!(run.stderr.contains("later steps will not see"), "{}", run.stderr);
}

/// A snapshot that would unpack to more than restore accepts for its size (here 72 MiB of
/// zeros packing to a few KiB) is not published: every restore would refuse it.
#[test]
fn snapshot_save_refuses_what_every_restore_would_reject() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    let entry = cache.join(format!("actions-v1/third_party/u/{}/artifacts", "a".repeat(64)));
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(entry.join("zeros.bin"), vec![0u8; 72 << 20]).unwrap();
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let store = format!("file://{}", scratch.path("store").display());
    let cache_arg = cache.display().to_string();
    let k = key(&scratch, "z");
    let run = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &cache_arg, "--key", &k, "--store", &store, "--json"],
        &[],
    );
    run.assert_ok();
    assert_eq!(run.json()["outcome"]["reason"], "too_compressible", "{}", run.stdout);
    assert!(run.stderr.contains("1000×"), "{}", run.stderr);
    assert!(
        std::fs::read_dir(scratch.path("store")).map_or(true, |d| d.count() == 0),
        "nothing may be uploaded"
    );
}
