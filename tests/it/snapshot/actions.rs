//! The composite actions (`actions/*`), run step by step the way a runner runs them
//! (`tests/actions/runner.py`: inputs and expressions substituted, `GITHUB_OUTPUT`,
//! `GITHUB_ENV`, `GITHUB_STEP_SUMMARY`, `GITHUB_PATH` as files, `::add-mask::` honoured),
//! end to end against s3s-fs on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::super::transport::server::url_for;
use super::{S3sServer, Scratch, tree};

pub(super) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What the runner reported.
pub(super) struct ActionRun {
    pub(super) result: Value,
}

impl ActionRun {
    pub(super) fn output(&self, name: &str) -> String {
        self.result["outputs"][name].as_str().unwrap_or_default().to_owned()
    }

    fn env(&self, name: &str) -> String {
        self.result["env"][name].as_str().unwrap_or_default().to_owned()
    }

    fn summary(&self) -> String {
        self.result["summary"].as_str().unwrap_or_default().to_owned()
    }

    pub(super) fn log(&self) -> String {
        self.result["log"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `secret` appears nowhere except in `::add-mask::` command lines of the raw stdout.
    fn assert_secret_only_masked(&self, secret: &str) {
        let raw_stdout = self.result["raw_stdout"].as_str().unwrap();
        for line in raw_stdout.lines() {
            assert!(
                !line.contains(secret) || line.starts_with("::add-mask::"),
                "secret in stdout: {line}"
            );
        }
        let mut everywhere = self.result.clone();
        everywhere["raw_stdout"] = Value::Null;
        assert!(
            !everywhere.to_string().contains(secret),
            "secret in the runner's view: {everywhere}"
        );
    }

    pub(super) fn assert_ok(&self) -> &Self {
        assert_eq!(self.result["exit_code"], 0, "{:#}", self.result);
        self
    }
}

/// Runs the action `name` (a directory under `actions/`) on a Linux X64 runner.
fn run_action(
    name: &str,
    inputs: Value,
    env: &[(&str, String)],
    workspace: &Path,
    runner_temp: &Path,
) -> ActionRun {
    let runner = json!({"os": "Linux", "arch": "X64"});
    run_action_in(&repo().join("actions").join(name), runner, inputs, env, workspace, runner_temp)
}

/// Runs the action in `action_dir` on `runner` (`{"os": "Linux", "arch": "ARM64"}`: the
/// `runner` context). HOME is `<runner_temp>/home`.
pub(super) fn run_action_in(
    action_dir: &Path,
    runner: Value,
    inputs: Value,
    env: &[(&str, String)],
    workspace: &Path,
    runner_temp: &Path,
) -> ActionRun {
    let name = action_dir.file_name().unwrap().to_string_lossy();
    std::fs::create_dir_all(workspace).unwrap();
    std::fs::create_dir_all(runner_temp).unwrap();
    let mut base: serde_json::Map<String, Value> = serde_json::Map::new();
    base.insert("PATH".into(), json!(std::env::var("PATH").unwrap_or_default()));
    base.insert("HOME".into(), json!(runner_temp.join("home").display().to_string()));
    base.insert("STRATA_S3_MAX_RETRIES".into(), json!("2"));
    for (k, v) in env {
        base.insert((*k).to_owned(), json!(v));
    }
    let request = json!({
        "inputs": inputs,
        "env": base,
        "workspace": workspace.display().to_string(),
        "runner_temp": runner_temp.display().to_string(),
        "runner": runner,
    });
    let request_path = runner_temp.join(format!("request-{name}.json"));
    let result_path = runner_temp.join(format!("result-{name}.json"));
    std::fs::write(&request_path, request.to_string()).unwrap();
    // scripts/test.sh points this at its virtual environment (PyYAML inside).
    let python = std::env::var("STRATA_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let output = Command::new(&python)
        .arg(repo().join("tests/actions/runner.py"))
        .arg(action_dir)
        .arg(&request_path)
        .arg(&result_path)
        .output()
        .unwrap_or_else(|e| panic!("{python} is needed for the action tests: {e}"));
    assert!(
        output.status.success(),
        "runner.py failed under {python} (it needs PyYAML: run scripts/test.sh, which sets \
         STRATA_TEST_PYTHON to target/tools-venv/bin/python, or apt-get install python3-yaml):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&std::fs::read(&result_path).unwrap()).unwrap();
    ActionRun { result }
}

pub(super) fn strata_bin() -> String {
    crate::strata_exe().to_owned()
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

/// A checkout with one C source tracked in git.
fn checkout(workspace: &Path) {
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("src/hello.c"), "int answer(void) { return 42; }\n").unwrap();
    std::fs::write(workspace.join("CMakeLists.txt"), "# marks strata support\n").unwrap();
    git(workspace, &["init", "-q"]);
    git(workspace, &["add", "."]);
}

/// The build step: one compile through `strata action run`, with the job environment
/// the actions exported (STRATA_CACHE_ROOT, STRATA_EVENT_LOG).
fn build(workspace: &Path, job_env: &[(&str, String)]) -> String {
    let out = workspace.join("build");
    let src = workspace.join("src/hello.c");
    let mut command = Command::new(strata_bin());
    command
        .args(["action", "run", "--domain", "third_party", "--unit", "hello"])
        .arg("--output-dir")
        .arg(&out)
        .arg("--prepared-input")
        .arg(&src)
        .args(["--environment-profile", "host-cxx", "--normalize-path"])
        .arg(workspace)
        .args(["--", "gcc", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(out.join("hello.o"))
        .current_dir(workspace);
    for (k, v) in job_env {
        command.env(k, v);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

#[test]
fn actions_producer_then_consumer_through_s3() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let store = url_for(&server.endpoint, "ci/l1");
    let secret = server.secret_key.clone();
    let creds = json!({"access-key-id": server.access_key, "secret-access-key": secret});

    // Producer on runner A: key, restore (a miss), build, save.
    let ws_a = scratch.path("a/_work/repo/repo");
    let tmp_a = scratch.path("a/_temp");
    checkout(&ws_a);
    let key_inputs = json!({"cache-dir": ".strata-l1", "toolchain-tools": "cc", "source-paths": "src", "require": "CMakeLists.txt", "strata": strata_bin()});
    let key = run_action("key", key_inputs.clone(), &[], &ws_a, &tmp_a);
    key.assert_ok();
    assert_eq!(key.output("supported"), "true", "{:#}", key.result);
    let primary = key.output("key");
    assert!(primary.starts_with("strata-l1-schema1-"), "{primary}");
    let restore_keys = key.output("restore-keys");
    assert_eq!(restore_keys.lines().count(), 2, "{restore_keys}");
    // Review finding 10: the full compatibility digest is an output too.
    let compat = key.output("compat-digest");
    assert_eq!(compat.len(), 64, "{:#}", key.result);
    assert!(primary.contains(&format!("-{}-", &compat[..32])), "{primary} {compat}");
    let abs_a = std::fs::canonicalize(&ws_a).unwrap().join(".strata-l1");
    assert_eq!(key.env("STRATA_CACHE_ROOT"), abs_a.display().to_string());
    let events_a = key.env("STRATA_EVENT_LOG");
    assert!(events_a.ends_with("strata-events-job.jsonl"), "{events_a}");
    // The key's tools, for strata.cmake's check of the compilers the build really uses.
    assert_eq!(key.env("STRATA_TOOLCHAIN_TOOLS"), "cc");

    let mut restore_inputs = creds.clone();
    restore_inputs["cache-dir"] = json!(".strata-l1");
    restore_inputs["key"] = json!(primary);
    restore_inputs["restore-keys"] = json!(restore_keys);
    restore_inputs["store"] = json!(store);
    restore_inputs["strata"] = json!(strata_bin());
    let restore = run_action("restore", restore_inputs.clone(), &[], &ws_a, &tmp_a);
    restore.assert_ok().assert_secret_only_masked(&secret);
    assert_eq!(restore.output("status"), "miss", "{:#}", restore.result);
    assert_eq!(
        (restore.output("cache-hit").as_str(), restore.output("matched-level").as_str()),
        ("false", "none")
    );
    assert_eq!(restore.output("cache-dir"), ".strata-l1");
    assert_eq!(restore.output("cache-primary-key"), primary);

    let job_env = vec![
        ("STRATA_CACHE_ROOT", key.env("STRATA_CACHE_ROOT")),
        ("STRATA_EVENT_LOG", events_a.clone()),
    ];
    assert!(build(&ws_a, &job_env).contains("strata: MISS"));

    let mut save_inputs = creds.clone();
    save_inputs["cache-dir"] = json!(restore.output("cache-dir"));
    save_inputs["key"] = json!(primary);
    save_inputs["store"] = json!(store);
    save_inputs["strata"] = json!(strata_bin());
    let save = run_action("save", save_inputs.clone(), &job_env, &ws_a, &tmp_a);
    save.assert_ok().assert_secret_only_masked(&secret);
    assert_eq!(save.output("saved"), "true", "{:#}", save.result);
    let summary = save.summary();
    assert!(summary.contains("### strata snapshot save"), "{summary}");
    assert!(summary.contains("MISS 1 · SAVED 1"), "{summary}");
    assert!(summary.contains(&primary), "{summary}");
    // Issue 11 item 5: the hit rate per domain, from the cache directory's counters.
    assert!(summary.contains("| hit rate per domain | third_party 0/1 (0.0 %) |"), "{summary}");

    // Consumer on runner B, another checkout path: the same sources restore, the build
    // HITs, and the save publishes nothing.
    let ws_b = scratch.path("b/work/deeper/repo");
    let tmp_b = scratch.path("b/temp");
    checkout(&ws_b);
    let key_b =
        run_action("key", key_inputs, &[("GITHUB_JOB", "test/x64".to_owned())], &ws_b, &tmp_b);
    let primary_b = key_b.output("key");
    assert_eq!(key_b.output("same-source-prefix"), key.output("same-source-prefix"));
    assert!(key_b.env("STRATA_EVENT_LOG").ends_with("strata-events-test_x64.jsonl"));
    let mut restore_b = restore_inputs.clone();
    restore_b["key"] = json!(primary_b);
    restore_b["restore-keys"] = json!(key_b.output("restore-keys"));
    let restored = run_action("restore", restore_b, &[], &ws_b, &tmp_b);
    restored.assert_ok().assert_secret_only_masked(&secret);
    assert_eq!(restored.output("status"), "restored", "{:#}", restored.result);
    assert_eq!(restored.output("matched-level"), "same-source");
    assert_eq!(restored.output("cache-matched-key"), primary);
    assert_eq!(restored.output("cache-hit"), "false");
    let abs_b = std::fs::canonicalize(&ws_b).unwrap().join(".strata-l1");
    assert_eq!(restored.env("STRATA_CACHE_ROOT"), abs_b.display().to_string());
    assert_eq!(tree(&abs_b.join("actions-v1")), tree(&abs_a.join("actions-v1")));
    assert!(
        restored.summary().contains("| matched level | same-source |"),
        "{}",
        restored.summary()
    );

    let job_b = vec![
        ("STRATA_CACHE_ROOT", abs_b.display().to_string()),
        ("STRATA_EVENT_LOG", key_b.env("STRATA_EVENT_LOG")),
    ];
    assert!(build(&ws_b, &job_b).contains("strata: HIT"));
    let mut save_b = save_inputs;
    save_b["key"] = json!(primary_b);
    let skipped = run_action("save", save_b, &job_b, &ws_b, &tmp_b);
    skipped.assert_ok().assert_secret_only_masked(&secret);
    assert_eq!(
        (skipped.output("saved").as_str(), skipped.output("status").as_str()),
        ("false", "skipped")
    );
    assert!(skipped.output("reason").contains(".updated"), "{:#}", skipped.result);
    assert!(skipped.summary().contains("HIT 1"), "{}", skipped.summary());
    // The restore replaced the cache directory, counters included: runner B's own HIT.
    let rate = "| hit rate per domain | third_party 1/1 (100.0 %) |";
    assert!(skipped.summary().contains(rate), "{}", skipped.summary());
    assert!(skipped.log().contains("snapshot save skipped"), "{}", skipped.log());
    for log in [events_a, key_b.env("STRATA_EVENT_LOG")] {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(!text.contains(&secret) && !text.contains(&server.access_key));
    }
}

#[test]
fn actions_fail_open_without_a_key_or_a_server() {
    let scratch = Scratch::new();
    let ws = scratch.path("ws");
    let tmp = scratch.path("tmp");
    std::fs::create_dir_all(&ws).unwrap();
    let key = run_action(
        "key",
        json!({"cache-dir": "cache", "require": "CMakeLists.txt", "toolchain-tools": "cc", "strata": strata_bin()}),
        &[],
        &ws,
        &tmp,
    );
    key.assert_ok();
    assert_eq!((key.output("supported").as_str(), key.output("key").as_str()), ("false", ""));
    assert!(
        key.log().contains("::warning title=strata snapshot key unavailable::"),
        "{}",
        key.log()
    );
    let restore = run_action(
        "restore",
        json!({"cache-dir": "cache", "key": "", "strata": strata_bin()}),
        &[],
        &ws,
        &tmp,
    );
    restore.assert_ok();
    assert_eq!(restore.output("status"), "skipped");
    let save = run_action(
        "save",
        json!({"cache-dir": "cache", "key": "", "strata": strata_bin()}),
        &[],
        &ws,
        &tmp,
    );
    save.assert_ok();
    assert_eq!(save.output("status"), "skipped");
    assert!(save.output("reason").contains("no primary key"));

    // A store that is down: a warning, status error, the step still succeeds.
    let down =
        url_for(&format!("http://127.0.0.1:{}", super::super::transport::server::free_port()), "x");
    let key = "strata-l1-schema1-00000000000000000000000000000000-abc-20250101T000000Z-1-1-1-aa";
    let inputs = json!({"cache-dir": "cache", "key": key, "store": down, "access-key-id": "AKIDEXAMPLE", "secret-access-key": "not-a-real-secret-value", "strata": strata_bin()});
    let restore = run_action("restore", inputs.clone(), &[], &ws, &tmp);
    restore.assert_ok().assert_secret_only_masked("not-a-real-secret-value");
    assert_eq!(restore.output("status"), "error");
    assert!(
        restore.log().contains("::warning title=strata snapshot restore::"),
        "{}",
        restore.log()
    );
    // fail-on-cache-miss turns it into a failed step.
    let mut strict = inputs;
    strict["fail-on-cache-miss"] = json!("true");
    let failed = run_action("restore", strict, &[], &ws, &tmp);
    assert_eq!(failed.result["exit_code"], 1);
    // A missing binary is a warning, not a failure.
    let missing = run_action(
        "restore",
        json!({"cache-dir": "cache", "key": key, "strata": "/nonexistent/strata"}),
        &[],
        &ws,
        &tmp,
    );
    missing.assert_ok();
    assert_eq!(missing.output("status"), "error");
}

#[test]
fn actions_setup_uses_a_given_binary_or_builds_one() {
    let scratch = Scratch::new();
    let ws = scratch.path("ws");
    let tmp = scratch.path("tmp");
    let given = run_action("setup", json!({"binary": strata_bin()}), &[], &ws, &tmp);
    given.assert_ok();
    let path = given.output("path");
    assert!(path.ends_with("/strata") && Path::new(&path).is_file(), "{path}");
    assert!(given.output("version").starts_with("strata "), "{:#}", given.result);
    assert_eq!(given.output("installed-from"), "input");
    // Review finding 10: consumers get the CMake module from the action repository.
    let module_path = PathBuf::from(given.output("cmake-module-path"));
    assert!(module_path.join("strata.cmake").is_file(), "{:#}", given.result);
    assert_eq!(std::fs::canonicalize(&module_path).unwrap(), repo().join("cmake"));
    let uses: Vec<&Value> = given.result["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s.get("uses").is_some())
        .collect();
    assert!(uses.is_empty(), "the cache step is skipped when a binary is given: {uses:?}");
    assert_eq!(given.result["path"][0], Path::new(&path).parent().unwrap().display().to_string());

    // The build path, with a stand-in cargo that "builds" a script.
    let stub = scratch.path("stub-bin");
    std::fs::create_dir_all(&stub).unwrap();
    let cargo = stub.join("cargo");
    std::fs::write(
        &cargo,
        "#!/bin/sh\nmkdir -p \"$CARGO_TARGET_DIR/release\"\nprintf '#!/bin/sh\\necho strata 9.9.9\\n' > \"$CARGO_TARGET_DIR/release/strata\"\nchmod +x \"$CARGO_TARGET_DIR/release/strata\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path_env = format!("{}:{}", stub.display(), std::env::var("PATH").unwrap_or_default());
    // A fresh runner (another HOME): nothing cached yet. (Without from-source, a release
    // binary pinned in actions/setup/release-sums would be downloaded instead:
    // actions_setup.rs.)
    let inputs = json!({"from-source": "true"});
    let built = run_action("setup", inputs, &[("PATH", path_env)], &ws, &scratch.path("tmp2"));
    built.assert_ok();
    assert_eq!(built.output("version"), "strata 9.9.9", "{:#}", built.result);
    assert_eq!(built.output("installed-from"), "source");
    let cache_step =
        built.result["steps"].as_array().unwrap().iter().find(|s| s.get("uses").is_some()).unwrap();
    assert!(cache_step["uses"].as_str().unwrap().starts_with("actions/cache@"), "{cache_step}");
    assert!(built.log().contains("::group::building strata"), "{}", built.log());
}

#[test]
fn actions_l0_push_then_pull_skips_the_build_and_misses_after_a_change() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let store = url_for(&server.endpoint, "ci");
    let secret = server.secret_key.clone();

    // Producer: a successful build left its final outputs in dist/.
    let ws_a = scratch.path("a/work/repo");
    let tmp_a = scratch.path("a/temp");
    checkout(&ws_a);
    std::fs::create_dir_all(ws_a.join("dist/bin")).unwrap();
    std::fs::write(ws_a.join("dist/bin/app"), b"\x7fELF final program").unwrap();
    let inputs = |dir: &Path, mode: &str, root: &Path| {
        json!({
            "mode": mode, "dir": dir.display().to_string(), "require": "bin/app\n",
            "specialization": "Release x64", "toolchain-tools": "cc", "source-paths": "src",
            "store": store, "root": root.display().to_string(), "strata": strata_bin(),
            "access-key-id": server.access_key, "secret-access-key": secret,
        })
    };
    let push =
        run_action("l0", inputs(&ws_a.join("dist"), "push", &tmp_a.join("l0")), &[], &ws_a, &tmp_a);
    push.assert_ok().assert_secret_only_masked(&secret);
    assert_eq!(push.output("status"), "pushed", "{:#}", push.result);

    // Consumer on another runner and path: an L0 HIT puts the verified outputs in place.
    let ws_b = scratch.path("b/elsewhere/repo");
    let tmp_b = scratch.path("b/temp");
    checkout(&ws_b);
    let pull =
        run_action("l0", inputs(&ws_b.join("dist"), "pull", &tmp_b.join("l0")), &[], &ws_b, &tmp_b);
    pull.assert_ok().assert_secret_only_masked(&secret);
    assert_eq!((pull.output("hit").as_str(), pull.output("status").as_str()), ("true", "pulled"));
    assert_eq!(std::fs::read(ws_b.join("dist/bin/app")).unwrap(), b"\x7fELF final program");

    // A tracked source change is another artifact: a miss, and nothing in the destination.
    std::fs::write(ws_b.join("src/hello.c"), "int answer(void) { return 43; }\n").unwrap();
    git(&ws_b, &["add", "."]);
    let tmp_c = scratch.path("c/temp");
    let miss = run_action(
        "l0",
        inputs(&ws_b.join("dist2"), "pull", &tmp_c.join("l0")),
        &[],
        &ws_b,
        &tmp_c,
    );
    miss.assert_ok();
    assert_eq!((miss.output("hit").as_str(), miss.output("status").as_str()), ("false", "miss"));
    assert!(!ws_b.join("dist2/bin/app").exists());
}

/// `actions/l0` has no default toolchain: without `toolchain-tools` or `toolchain-image` it
/// skips with a warning naming both inputs and publishes nothing (it used to key the
/// artifact by `cc c++`, whatever compiler the build ran, or by no toolchain at all). A
/// container build keys by `toolchain-image`: the same image pulls the artifact, another
/// image (other compilers) misses.
#[test]
fn actions_l0_needs_a_toolchain_and_keys_by_the_image() {
    let scratch = Scratch::new();
    let ws = scratch.path("a/work/repo");
    let tmp = scratch.path("a/temp");
    checkout(&ws);
    std::fs::create_dir_all(ws.join("dist/bin")).unwrap();
    std::fs::write(ws.join("dist/bin/app"), b"\x7fELF final program").unwrap();
    let store_dir = scratch.path("store");
    let store = format!("file://{}", store_dir.display());
    let inputs = |mode: &str, dir: &str, image: &str, root: &str| {
        json!({
            "mode": mode, "dir": ws.join(dir).display().to_string(), "require": "bin/app\n",
            "toolchain-image": image, "source-paths": "src", "store": store,
            "root": tmp.join(root).display().to_string(), "strata": strata_bin(),
        })
    };
    let skipped = run_action("l0", inputs("push", "dist", "", "l0"), &[], &ws, &tmp);
    skipped.assert_ok();
    assert_eq!(skipped.output("status"), "skipped", "{:#}", skipped.result);
    assert!(
        skipped.log().contains(
            "::warning title=strata L0::no toolchain identity: set the toolchain-tools input"
        ),
        "{}",
        skipped.log()
    );
    assert!(skipped.log().contains("toolchain-image"), "{}", skipped.log());
    assert!(!store_dir.exists(), "nothing may be published without a toolchain");

    let image = format!("registry.example/cc@sha256:{}", "a".repeat(64));
    let push = run_action("l0", inputs("push", "dist", &image, "l0"), &[], &ws, &tmp);
    push.assert_ok();
    assert_eq!(push.output("status"), "pushed", "{:#}", push.result);
    assert!(!push.log().contains("names no @sha256: digest"), "{}", push.log());
    let pull = run_action("l0", inputs("pull", "same", &image, "l0-same"), &[], &ws, &tmp);
    pull.assert_ok();
    assert_eq!((pull.output("hit").as_str(), pull.output("status").as_str()), ("true", "pulled"));
    assert_eq!(std::fs::read(ws.join("same/bin/app")).unwrap(), b"\x7fELF final program");
    let other = format!("registry.example/cc@sha256:{}", "b".repeat(64));
    let miss = run_action("l0", inputs("pull", "other", &other, "l0-other"), &[], &ws, &tmp);
    miss.assert_ok();
    assert_eq!((miss.output("hit").as_str(), miss.output("status").as_str()), ("false", "miss"));
    assert!(!ws.join("other/bin/app").exists());
    // A tag is mutable: it still keys the artifact, with a warning.
    let tagged = run_action(
        "l0",
        inputs("pull", "tagged", "registry.example/cc:13", "l0-tag"),
        &[],
        &ws,
        &tmp,
    );
    tagged.assert_ok();
    assert_eq!(tagged.output("status"), "miss", "{:#}", tagged.result);
    assert!(tagged.log().contains("names no @sha256: digest"), "{}", tagged.log());
}

/// `actions/l0` push of a `dir` that holds a versioned `.so` symlink (or lacks a required
/// file) fails open with a message that names the problem and the user's `dir`, never
/// strata's private copy of it.
#[test]
fn actions_l0_push_names_symlinks_and_missing_files_in_dir() {
    let scratch = Scratch::new();
    let ws = scratch.path("a/work/repo");
    let tmp = scratch.path("a/temp");
    checkout(&ws);
    let dist = ws.join("dist");
    std::fs::create_dir_all(dist.join("lib")).unwrap();
    std::fs::write(dist.join("lib/libcore.so.1"), b"\x7fELF library").unwrap();
    std::os::unix::fs::symlink("libcore.so.1", dist.join("lib/libcore.so")).unwrap();
    let store = format!("file://{}", scratch.path("store").display());
    let inputs = |require: &str| {
        json!({
            "mode": "push", "dir": dist.display().to_string(), "require": require,
            "toolchain-tools": "cc", "source-paths": "src", "store": store,
            "root": tmp.join("l0").display().to_string(), "strata": strata_bin(),
        })
    };
    let run = run_action("l0", inputs("lib/libcore.so.1\n"), &[], &ws, &tmp);
    run.assert_ok();
    assert_eq!(run.output("status"), "error", "{:#}", run.result);
    let log = run.log();
    assert!(log.contains("symlinks (lib/libcore.so)"), "{log}");
    assert!(log.contains(&dist.display().to_string()), "{log}");
    assert!(!log.contains("strata-build-") && !log.contains("are the required paths"), "{log}");
    std::fs::remove_file(dist.join("lib/libcore.so")).unwrap();
    let run = run_action("l0", inputs("lib/libcore.so.1\nbin/app\n"), &[], &ws, &tmp);
    run.assert_ok();
    assert_eq!(run.output("status"), "error");
    assert!(run.log().contains("lacks required file(s): bin/app"), "{}", run.log());
    let run = run_action("l0", inputs("lib/libcore.so.1\n"), &[], &ws, &tmp);
    run.assert_ok();
    assert_eq!(run.output("status"), "pushed", "{:#}", run.result);
}

/// Review finding 5: a strata binary that crashes (a signal), panics (101) or rejects its
/// input (2) never fails the restore or save step: a warning and status=error, unless the
/// step asked to fail (fail-on-cache-miss, strict).
#[test]
fn actions_fail_open_when_strata_crashes() {
    let scratch = Scratch::new();
    let ws = scratch.path("ws");
    let tmp = scratch.path("tmp");
    std::fs::create_dir_all(&ws).unwrap();
    let fake = |name: &str, body: &str| {
        let path = scratch.path(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path.display().to_string()
    };
    let key = "strata-l1-schema1-00000000000000000000000000000000-abc-20250101T000000Z-1-1-1-aa";
    for (binary, what) in [
        (fake("segv", "kill -SEGV $$"), "crashed (signal 11)"),
        (fake("panic", "echo 'thread main panicked' >&2; exit 101"), "panicked (exit 101"),
        (fake("usage", "exit 2"), "exited 2"),
    ] {
        let restore = run_action(
            "restore",
            json!({"cache-dir": "cache", "key": key, "strata": binary}),
            &[],
            &ws,
            &tmp,
        );
        restore.assert_ok();
        assert_eq!(restore.output("status"), "error", "{:#}", restore.result);
        assert_eq!(restore.output("cache-hit"), "false");
        assert!(restore.output("reason").contains(what), "{:#}", restore.result);
        assert!(
            restore.log().contains("::warning title=strata snapshot restore::")
                && restore.log().contains(what),
            "{}",
            restore.log()
        );
        let save = run_action(
            "save",
            json!({"cache-dir": "cache", "key": key, "strata": binary}),
            &[],
            &ws,
            &tmp,
        );
        save.assert_ok();
        assert_eq!(
            (save.output("saved").as_str(), save.output("status").as_str()),
            ("false", "error")
        );
        assert!(save.log().contains("::warning title=strata snapshot save::"), "{}", save.log());
        // Asked to fail: the step fails.
        let miss = run_action(
            "restore",
            json!({"cache-dir": "cache", "key": key, "strata": binary, "fail-on-cache-miss": "true"}),
            &[],
            &ws,
            &tmp,
        );
        assert_eq!(miss.result["exit_code"], 1, "{:#}", miss.result);
        let strict = run_action(
            "save",
            json!({"cache-dir": "cache", "key": key, "strata": binary, "strict": "true"}),
            &[],
            &ws,
            &tmp,
        );
        assert_eq!(strict.result["exit_code"], 1, "{:#}", strict.result);
    }
}

/// Review finding 4: `level: -3` (a zstd fast mode) saves.
#[test]
fn actions_save_accepts_a_negative_level() {
    let scratch = Scratch::new();
    let ws = scratch.path("ws");
    let tmp = scratch.path("tmp");
    let cache = ws.join("cache");
    super::fill_cache(&cache, 2);
    let key = super::key(&scratch, "neg");
    let save = run_action(
        "save",
        json!({"cache-dir": "cache", "key": key, "level": "-3", "store": scratch.file_store(), "strata": strata_bin()}),
        &[],
        &ws,
        &tmp,
    );
    save.assert_ok();
    assert_eq!(save.output("saved"), "true", "{:#}", save.result);
}

/// Review finding 7: the actions export credentials only as a complete pair; half a pair
/// (one misnamed secret) is a warning and leaves the job's environment in place.
#[test]
fn actions_export_only_complete_credential_pairs() {
    let scratch = Scratch::new();
    let ws = scratch.path("ws");
    let tmp = scratch.path("tmp");
    std::fs::create_dir_all(&ws).unwrap();
    let probe = scratch.path("probe");
    std::fs::write(
        &probe,
        "#!/bin/sh\necho \"probe id=${AWS_ACCESS_KEY_ID+set} secret=${AWS_SECRET_ACCESS_KEY+set} obs=${HW_OBS_AK+set}\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&probe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let probe = probe.display().to_string();
    let job_env = [("HW_OBS_AK", "obs-id".to_owned()), ("HW_OBS_SK", "obs-secret".to_owned())];
    for action in ["restore", "save"] {
        let half = run_action(
            action,
            json!({"cache-dir": "cache", "key": "k", "access-key-id": "AKIDHALF", "strata": probe}),
            &job_env,
            &ws,
            &tmp,
        );
        half.assert_ok();
        let log = half.log();
        assert!(log.contains("probe id= secret= obs=set"), "{action}: {log}");
        assert!(log.contains("::warning title=strata credentials::only the access-key-id input"));
        let full = run_action(
            action,
            json!({"cache-dir": "cache", "key": "k", "access-key-id": "AKIDFULL", "secret-access-key": "full-secret-value", "strata": probe}),
            &job_env,
            &ws,
            &tmp,
        );
        full.assert_ok().assert_secret_only_masked("full-secret-value");
        assert!(full.log().contains("probe id=set secret=set obs=set"), "{}", full.log());
        assert!(!full.log().contains("strata credentials"), "{}", full.log());
    }
}

/// Review finding 9: the actions' own output writer warns on stderr (and never fails the
/// step) when `GITHUB_OUTPUT` cannot be written.
#[test]
fn actions_warn_when_github_output_cannot_be_written() {
    let scratch = Scratch::new();
    let dir = scratch.path("not-a-file");
    std::fs::create_dir_all(&dir).unwrap();
    let common = repo().join("actions/lib/common.sh");
    let script = format!(
        "set -uo pipefail; . '{}'; strata_output status error; echo \"rc=$?\"",
        common.display()
    );
    for value in [Some(dir.display().to_string()), None] {
        let mut command = Command::new("bash");
        command.args(["-c", &script]).env_remove("GITHUB_OUTPUT");
        if let Some(value) = &value {
            command.env("GITHUB_OUTPUT", value);
        }
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stdout.contains("rc=0"), "{value:?}: {stdout} {stderr}");
        assert!(
            stderr
                .contains("::warning title=strata GitHub output::cannot write the output 'status'"),
            "{value:?}: {stderr}"
        );
    }
}

/// Issue 9: the poisoning scenario through the composite actions' scripts. Producer A saves
/// with `signing-key` (GOOD); B, holding writer access to the same store, saves a newer
/// snapshot of the namespace without A's key (EVIL). A consumer's `actions/restore` with
/// `trusted-keys` restores A's snapshot and reports B's as rejected; the signing key is
/// only ever printed in `::add-mask::` lines.
#[test]
fn actions_trusted_keys_pass_over_a_poisoned_newer_snapshot() {
    let scratch = Scratch::new();
    let store = scratch.file_store();
    let keygen = super::strata(
        &scratch,
        &["key", "generate", "--out", &scratch.path("a.key").display().to_string()],
        &[],
    );
    keygen.assert_ok();
    let a_pub = keygen.stdout.trim().to_owned();
    let a_secret = std::fs::read_to_string(scratch.path("a.key")).unwrap();
    let material = a_secret.trim().strip_prefix("strata-ed25519-secret-v1:").unwrap().to_owned();
    let entry =
        |cache: &Path| cache.join("actions-v1/third_party/zlib").join(format!("{:064x}", 5));
    let mut keys = Vec::new();
    for (who, text, signing) in [("a", "GOOD", a_secret.as_str()), ("b", "EVIL", "")] {
        let ws = scratch.path(&format!("{who}/ws"));
        let tmp = scratch.path(&format!("{who}/tmp"));
        let cache = ws.join(".strata-l1");
        super::fill_cache(&cache, 5);
        std::fs::write(entry(&cache).join("artifacts/out.txt"), text).unwrap();
        // A real entry's manifest records its artifacts' digests, so B's differs too (an
        // index save may reuse what the store holds for an equal path and manifest).
        std::fs::write(entry(&cache).join("manifest.json"), format!("{{\"out\":\"{text}\"}}"))
            .unwrap();
        std::fs::write(cache.join(".updated"), "").unwrap();
        if who == "b" {
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        let k = super::key(&scratch, who);
        let inputs = json!({"cache-dir": cache.display().to_string(), "key": k, "store": store, "signing-key": signing, "strata": strata_bin()});
        let save = run_action("save", inputs, &[], &ws, &tmp);
        save.assert_ok().assert_secret_only_masked(&material);
        assert_eq!(save.output("saved"), "true", "{:#}", save.result);
        keys.push(k);
    }
    let ws = scratch.path("c/ws");
    let tmp = scratch.path("c/tmp");
    let consumer = super::key(&scratch, "c");
    let restore_inputs = |trusted: &str| json!({"cache-dir": ".strata-l1", "key": consumer, "restore-keys": "", "store": store, "trusted-keys": trusted, "strata": strata_bin()});
    let restored = run_action("restore", restore_inputs(&a_pub), &[], &ws, &tmp);
    restored.assert_ok();
    assert_eq!(restored.output("status"), "restored", "{:#}", restored.result);
    assert_eq!(restored.output("cache-matched-key"), keys[0]);
    assert!(restored.output("rejected-keys").contains(&keys[1]), "{:#}", restored.result);
    let cache = ws.join(".strata-l1");
    assert_eq!(std::fs::read_to_string(entry(&cache).join("artifacts/out.txt")).unwrap(), "GOOD");
    assert!(restored.log().contains("not signed"), "{}", restored.log());
    // The same consumer without trusted keys takes the newest snapshot: EVIL.
    let open = run_action(
        "restore",
        restore_inputs(""),
        &[],
        &scratch.path("d/ws"),
        &scratch.path("d/tmp"),
    );
    open.assert_ok();
    assert_eq!(open.output("cache-matched-key"), keys[1]);
    let cache = scratch.path("d/ws/.strata-l1");
    assert_eq!(std::fs::read_to_string(entry(&cache).join("artifacts/out.txt")).unwrap(), "EVIL");
}
