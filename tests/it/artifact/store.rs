//! Store behaviour through the CLI and the library: publication, HIT, spec changes, read-only
//! mode, permissions, promotion, materialization, gc.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use strata::artifact::{Disposition, LookupStatus, Mode, Stage};

use super::*;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn layout_is_documented() {
    let ws = Workspace::new();
    let store = ws.store(Mode::ReadWrite);
    let s = spec(Stage::Generated, REQUIRED);
    let built = store.get_or_build(&key(), &s, write_outputs).unwrap();
    let dir = built.handle.unwrap().dir();
    let k = key();
    let expected = std::fs::canonicalize(ws.root()).unwrap().join(format!(
        "artifacts-v1/{}/{}/{}/generated",
        k.environment().digest(),
        k.digest(),
        s.digest()
    ));
    assert_eq!(dir, expected);
    assert!(ws.root().join(format!("locks/{}.lock", k.digest())).is_file());
    assert_eq!(mode(&ws.root().join(format!("locks/{}.lock", k.digest()))), 0o600);
    assert!(dir.join("artifact_manifest.json").is_file());
}

#[test]
fn cli_get_or_build_publishes_then_hits_without_running() {
    let ws = Workspace::new();
    let flags = id_flags(&ws.root(), &hex('b'), "generated", REQUIRED);
    let script = "mkdir -p \"$STRATA_ARTIFACT_OUT/lib\" \"$STRATA_ARTIFACT_OUT/bin\" && \
                  head -c 4096 /dev/zero > \"$STRATA_ARTIFACT_OUT/lib/libx.a\" && \
                  printf x > \"$STRATA_ARTIFACT_OUT/bin/tool\" && chmod 755 \"$STRATA_ARTIFACT_OUT/bin/tool\" && \
                  echo '{}' > \"$STRATA_ARTIFACT_OUT/meta.json\"";
    let out = strata()
        .args(["artifact", "get-or-build", "--json"])
        .args(&flags)
        .args(["--private-root", ws.private().to_str().unwrap()])
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out.stdout);
    assert_eq!(v["disposition"], "published");
    let slot = PathBuf::from(v["dir"].as_str().unwrap());
    assert_eq!(mode(&slot), 0o700);
    assert_eq!(mode(&slot.join("bin/tool")), 0o700);
    assert_eq!(mode(&slot.join("lib/libx.a")), 0o600);
    // The published private build was removed (no --keep-private).
    assert_eq!(std::fs::read_dir(ws.private()).unwrap().count(), 0);
    // HIT: the command (which would fail) never runs.
    let out = strata()
        .args(["artifact", "get-or-build", "--json"])
        .args(&flags)
        .args(["--", "false"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(json(&out.stdout)["disposition"], "hit");
    let out = strata().args(["artifact", "lookup"]).args(&flags).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("strata: HIT key="));
}

/// Issue 11: get-or-build runs its command like the action engine does. SIGTERM sent to
/// strata alone reaches the build command (the old runner did not forward it: strata died
/// and left the command running), and the build counts as failed (exit 128 + 15) even
/// though the command traps the signal and finishes successfully: nothing is published.
#[test]
fn r11_cli_get_or_build_forwards_a_signal_and_publishes_nothing() {
    let ws = Workspace::new();
    let flags = id_flags(&ws.root(), &hex('b'), "generated", REQUIRED);
    let (started, marker) = (ws.path().join("started"), ws.path().join("got-term"));
    let script = "trap 'echo term > \"$1\"' TERM; o=\"$STRATA_ARTIFACT_OUT\"; \
                  mkdir -p \"$o/lib\" \"$o/bin\"; echo a > \"$o/lib/libx.a\"; echo t > \"$o/bin/tool\"; \
                  echo '{}' > \"$o/meta.json\"; echo go > \"$0\"; \
                  i=0; while [ $i -lt 200 ] && [ ! -s \"$1\" ]; do sleep 0.05; i=$((i+1)); done; exit 0";
    let mut command = strata();
    command
        .args(["artifact", "get-or-build"])
        .args(&flags)
        .args(["--private-root", ws.private().to_str().unwrap()])
        .args(["--", "sh", "-c", script])
        .args([&started, &marker])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    let deadline = std::time::Instant::now() + crate::engine::RUN_TIMEOUT;
    while !started.exists() {
        assert!(std::time::Instant::now() < deadline, "the build never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let r = crate::engine::wait_bounded(child, crate::engine::RUN_TIMEOUT);
    assert_eq!(std::fs::read_to_string(&marker).unwrap_or_default().trim(), "term", "{}", r.stderr);
    assert_eq!(r.code, 128 + 15, "{}", r.stderr);
    assert!(r.stderr.contains("interrupted: strata received signal 15"), "{}", r.stderr);
    let out = strata().args(["artifact", "lookup"]).args(&flags).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "nothing was published");
}

#[test]
fn cli_build_failure_returns_the_command_code_and_publishes_nothing() {
    let ws = Workspace::new();
    let flags = id_flags(&ws.root(), &hex('b'), "generated", REQUIRED);
    let out = strata()
        .args(["artifact", "get-or-build"])
        .args(&flags)
        .args(["--", "sh", "-c", "exit 42"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(42));
    let out = strata().args(["artifact", "lookup"]).args(&flags).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "MISS");
    // Missing required outputs are an error too (exit 1), never a publication.
    let out = strata()
        .args(["artifact", "get-or-build"])
        .args(&flags)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing required files"));
    // Usage errors: a truncated digest is exit 2.
    let mut bad = flags.clone();
    let pos = bad.iter().position(|a| a == "--source").unwrap();
    bad[pos + 1] = "abc".into();
    let out = strata().args(["artifact", "lookup"]).args(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SHA-256"));
}

#[test]
fn changed_spec_is_a_clean_miss_and_old_spec_stays_usable() {
    let ws = Workspace::new();
    let store = ws.store(Mode::ReadWrite);
    let old = spec(Stage::Generated, REQUIRED);
    store.get_or_build(&key(), &old, write_outputs).unwrap();
    let new = spec(Stage::Generated, &["meta.json"]);
    assert_eq!(store.lookup(&key(), &new).status(), LookupStatus::Miss);
    let built = store.get_or_build(&key(), &new, write_outputs).unwrap();
    assert_eq!(built.disposition, Disposition::Published);
    assert_eq!(store.lookup(&key(), &old).status(), LookupStatus::Hit);
    // Reordering required files is the same spec.
    let reordered = spec(Stage::Generated, &["meta.json", "lib/libx.a", "bin/tool"]);
    assert_eq!(store.lookup(&key(), &reordered).status(), LookupStatus::Hit);
}

/// Everything observable about a tree except access times: path → (kind, mode, size, mtime,
/// ctime, inode).
type Observed = (u32, u64, i64, i64, i64, i64, u64);

fn snapshot(root: &Path) -> BTreeMap<PathBuf, Observed> {
    let mut out = BTreeMap::new();
    if !root.exists() {
        return out;
    }
    for entry in walkdir::WalkDir::new(root).follow_links(false) {
        let entry = entry.unwrap();
        let m = entry.path().symlink_metadata().unwrap();
        out.insert(
            entry.path().to_path_buf(),
            (m.mode(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec(), m.ino()),
        );
    }
    out
}

/// Read-only mode is checked by snapshotting the whole tree (mode, size, mtime, ctime, inode
/// of every path) before and after: tests run as root, which bypasses permission bits, so an
/// unwritable root would prove nothing. The root is also made unwritable (`chmod -R a-w`) to
/// show that permission changes by the sharing recipe keep slots valid.
#[test]
fn read_only_hits_and_builds_privately_without_touching_the_root() {
    let ws = Workspace::new();
    let s = spec(Stage::Generated, REQUIRED);
    ws.store(Mode::ReadWrite).get_or_build(&key(), &s, write_outputs).unwrap();
    let status = Command::new("chmod").args(["-R", "a-w"]).arg(ws.root()).status().unwrap();
    assert!(status.success());
    let before = snapshot(&ws.root());
    let ro = ws.store(Mode::ReadOnly);
    assert!(ro.lookup(&key(), &s).handle().is_some());
    let hit =
        ro.get_or_build(&key(), &s, |_| -> std::io::Result<()> { panic!("no build") }).unwrap();
    assert_eq!(hit.disposition, Disposition::Hit);
    // A miss (other key) builds privately, outside the root.
    let other = key_with(&hex('d'));
    let private = ro.get_or_build(&other, &s, write_outputs).unwrap();
    assert_eq!(private.disposition, Disposition::Private);
    assert_eq!(private.reason.as_deref(), Some("cache is read-only"));
    assert!(
        private
            .private_dir
            .as_ref()
            .unwrap()
            .starts_with(std::fs::canonicalize(ws.private()).unwrap())
    );
    // Through the CLI too, with materialize.
    let flags = id_flags(&ws.root(), &hex('b'), "generated", REQUIRED);
    let dest = ws.path().join("run");
    let out = strata()
        .args(["artifact", "materialize", "--read-only", "--dest", dest.to_str().unwrap()])
        .args(&flags)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(dest.join("meta.json")).unwrap(), br#"{"ok":true}"#);
    assert_eq!(snapshot(&ws.root()), before, "read-only mode changed the cache root");
    // Without a private root a needed build fails clearly (the CLI would pick $TMPDIR).
    let bare = ArtifactStore::open(
        &ws.root(),
        StoreOptions { mode: Mode::ReadOnly, ..StoreOptions::default() },
    )
    .unwrap();
    let err = bare.get_or_build(&other, &s, write_outputs).unwrap_err();
    assert!(err.to_string().contains("private root"), "{err}");
    let _ = Command::new("chmod").args(["-R", "u+w"]).arg(ws.root()).status();
}

#[test]
fn read_only_does_not_create_a_missing_root() {
    let ws = Workspace::new();
    let ro = ws.store(Mode::ReadOnly);
    let s = spec(Stage::Generated, REQUIRED);
    assert_eq!(ro.lookup(&key(), &s).status(), LookupStatus::Miss);
    ro.get_or_build(&key(), &s, write_outputs).unwrap();
    assert!(!ws.root().exists());
}

#[test]
fn materialize_refuses_destinations_inside_the_root_even_through_symlinks() {
    let ws = Workspace::new();
    let store = ws.store(Mode::ReadWrite);
    let s = spec(Stage::Generated, REQUIRED);
    let handle = store.get_or_build(&key(), &s, write_outputs).unwrap().handle.unwrap();
    std::fs::create_dir_all(ws.root().join("inside")).unwrap();
    std::os::unix::fs::symlink(ws.root().join("inside"), ws.path().join("sneaky")).unwrap();
    for dest in [ws.root().join("inside"), ws.path().join("sneaky")] {
        let err = handle.materialize(&dest).unwrap_err();
        assert!(err.to_string().contains("outside the cache root"), "{err}");
    }
    let full = ws.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    assert!(handle.materialize(&full).unwrap_err().to_string().contains("not empty"));
    let dest = ws.path().join("dest");
    std::fs::create_dir(&dest).unwrap();
    let report = handle.materialize(&dest).unwrap();
    assert_eq!(report.files, 3);
    assert!(!dest.join("artifact_manifest.json").exists(), "no marker");
    assert_eq!(mode(&dest.join("bin/tool")), 0o700);
    assert_eq!(mode(&dest.join("meta.json")), 0o600, "owner-writable");
    assert_ne!(
        std::fs::metadata(dest.join("meta.json")).unwrap().ino(),
        std::fs::metadata(handle.dir().join("meta.json")).unwrap().ino(),
        "copies, not hard links"
    );
}

fn tree_bytes(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let m = entry.metadata().unwrap();
            out.insert(
                entry.path().to_path_buf(),
                (std::fs::read(entry.path()).unwrap(), m.mode()),
            );
        }
    }
    out
}

#[test]
fn cli_promotion_leaves_generated_byte_identical_and_ready_restores_without_building() {
    let ws = Workspace::new();
    let g_flags = id_flags(&ws.root(), &hex('b'), "generated", &["src/kernel.c"]);
    let out = strata()
        .args(["artifact", "get-or-build"])
        .args(&g_flags)
        .args(["--", "sh", "-c", "mkdir -p \"$STRATA_ARTIFACT_OUT/src\" && echo 'int k;' > \"$STRATA_ARTIFACT_OUT/src/kernel.c\""])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let generated_dir = {
        let out = strata().args(["artifact", "lookup", "--json"]).args(&g_flags).output().unwrap();
        PathBuf::from(json(&out.stdout)["dir"].as_str().unwrap())
    };
    let before = tree_bytes(&generated_dir);
    // The compiler rewrites a generated file in its private copy and adds a binary.
    let compile = "cd \"$STRATA_ARTIFACT_OUT\" && echo '// patched' >> src/kernel.c && \
                   mkdir -p prebuilt && cat src/kernel.c > prebuilt/kernel_0.bin";
    let out = strata()
        .args(["artifact", "promote", "--json", "--ready-require", "prebuilt/kernel_0.bin"])
        .args(&g_flags)
        .args(["--", "sh", "-c", compile])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out.stdout);
    assert_eq!(v["disposition"], "published");
    assert_eq!(v["stage"], "ready");
    assert_eq!(tree_bytes(&generated_dir), before, "GENERATED must stay byte-identical");
    let ready_dir = PathBuf::from(v["dir"].as_str().unwrap());
    let manifest = std::fs::read_to_string(ready_dir.join("artifact_manifest.json")).unwrap();
    let parent = v["parent"].as_str().unwrap();
    assert!(manifest.contains(&format!("\"parents\":[\"{parent}\"]")), "{manifest}");
    // Restoring the ready artifact: verify + materialize, no build step.
    let r_flags =
        id_flags(&ws.root(), &hex('b'), "ready", &["prebuilt/kernel_0.bin", "src/kernel.c"]);
    let run = ws.path().join("run");
    let out = strata()
        .args(["artifact", "materialize", "--read-only", "--dest", run.to_str().unwrap()])
        .args(&r_flags)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(run.join("prebuilt/kernel_0.bin")).unwrap(),
        "int k;\n// patched\n"
    );
    // Promotion is idempotent: a second promote HITs without running the command.
    let out = strata()
        .args(["artifact", "promote", "--json", "--ready-require", "prebuilt/kernel_0.bin"])
        .args(&g_flags)
        .args(["--", "false"])
        .output()
        .unwrap();
    assert_eq!(json(&out.stdout)["disposition"], "hit");
}

#[test]
fn single_flight_coalesces_across_store_instances() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ws = Workspace::new();
    let builds = Arc::new(AtomicUsize::new(0));
    let s = spec(Stage::Generated, REQUIRED);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let store = ws.store(Mode::ReadOnly); // a separate instance per thread
            let builds = builds.clone();
            let s = s.clone();
            std::thread::spawn(move || {
                store
                    .get_or_build(&key(), &s, |dir| {
                        builds.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(300));
                        write_outputs(dir).map(|_| 5u8)
                    })
                    .unwrap()
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    // PRIVATE results are shared: same directory, same value.
    let dirs: std::collections::HashSet<_> =
        results.iter().map(|r| r.private_dir.clone()).collect();
    assert_eq!(dirs.len(), 1);
    assert!(results.iter().all(|r| r.value.as_deref() == Some(&5)));
}

#[test]
fn gc_removes_invalid_slots_staging_and_unused_locks_offline() {
    let ws = Workspace::new();
    let store = ws.store(Mode::ReadWrite);
    let s = spec(Stage::Generated, REQUIRED);
    let good = store.get_or_build(&key(), &s, write_outputs).unwrap().handle.unwrap();
    let bad = store.get_or_build(&key_with(&hex('d')), &s, write_outputs).unwrap().handle.unwrap();
    std::fs::write(bad.dir().join("extra"), b"x").unwrap();
    let staging = good.dir().parent().unwrap().join(".generated.tmp-0123456789abcdef");
    std::fs::create_dir(&staging).unwrap();
    let root = ws.root();
    let flags = ["artifact", "gc", "--json", "--root", root.to_str().unwrap()];
    let out = strata().args(flags).arg("--dry-run").output().unwrap();
    let v = json(&out.stdout);
    assert_eq!(v["kept_slots"], 1);
    assert!(bad.dir().exists() && staging.exists(), "dry run removed something");
    let out = strata().args(flags).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out.stdout);
    let kinds: Vec<&str> =
        v["actions"].as_array().unwrap().iter().map(|a| a["kind"].as_str().unwrap()).collect();
    for kind in ["invalid_slot", "staging", "unused_lock", "empty_dir"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
    assert!(!bad.dir().exists() && !staging.exists());
    assert!(!ws.root().join(format!("locks/{}.lock", key_with(&hex('d')).digest())).exists());
    good.verify().unwrap();
    let out = strata()
        .args(["artifact", "verify", "--all", "--root", ws.root().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

/// Runs `strata artifact <args>` and returns the exit code and stderr.
fn run_cli(args: &[String]) -> (i32, String) {
    let out = strata().arg("artifact").args(args).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn with(flags: &[String], extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    let pos = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let tail = args.split_off(pos);
    args.extend(flags.iter().cloned());
    args.extend(tail);
    args
}

/// Destinations are checked before anything is created, built or published: a refused one
/// (inside the root, through a symlink into the root, where a slot of another key would
/// go, or not empty) leaves the root byte-for-byte unchanged (mtimes included), never
/// runs the build, and never publishes.
#[test]
fn refused_destinations_create_nothing_and_run_nothing() {
    let ws = Workspace::new();
    let s = spec(Stage::Generated, REQUIRED);
    let slot = ws.store(Mode::ReadWrite).get_or_build(&key(), &s, write_outputs).unwrap();
    let slot = slot.handle.unwrap().dir();
    let root = std::fs::canonicalize(ws.root()).unwrap();
    std::os::unix::fs::symlink(&root, ws.path().join("rootlink")).unwrap();
    let other = key_with(&hex('d'));
    let other_slot = root.join(format!(
        "artifacts-v1/{}/{}/{}/generated",
        other.environment().digest(),
        other.digest(),
        s.digest()
    ));
    let full = ws.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep"), b"x").unwrap();
    let marker = ws.path().join("built");
    let build = format!("touch {} && exit 1", marker.display());
    let hit = id_flags(&ws.root(), &hex('b'), "generated", REQUIRED);
    let miss = id_flags(&ws.root(), &hex('d'), "generated", REQUIRED);
    let before = snapshot(&ws.root());
    let inside = [
        slot.join("d/x/y"),
        ws.path().join("rootlink/x"),
        other_slot.clone(),
        root.clone(),
        ws.path().to_path_buf(),
    ];
    for dest in inside.iter().chain([&full]) {
        let dest = dest.to_str().unwrap();
        for args in [
            with(&hit, &["materialize", "--read-only", "--dest", dest]),
            with(&hit, &["materialize", "--dest", dest]),
            with(&miss, &["get-or-build", "--output", dest, "--", "sh", "-c", &build]),
            with(
                &miss,
                &["get-or-build", "--read-only", "--output", dest, "--", "sh", "-c", &build],
            ),
            with(
                &hit,
                &["promote", "--ready-require", "more", "--output", dest, "--", "sh", "-c", &build],
            ),
        ] {
            let (code, stderr) = run_cli(&args);
            assert_eq!(code, 2, "{args:?}: {stderr}");
            assert!(stderr.contains(dest), "the error names the destination: {stderr}");
            assert!(!marker.exists(), "{args:?} ran the build");
        }
    }
    assert_eq!(snapshot(&ws.root()), before, "a refused destination changed the cache root");
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);
    let (code, stderr) = run_cli(&with(&miss, &["lookup"]));
    assert_eq!(code, 3, "nothing was published: {stderr}");
    let out = strata()
        .args(["artifact", "verify", "--all", "--root", root.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    // A good destination still works, through a new parent directory.
    let dest = ws.path().join("new/parent/dest");
    let (code, stderr) =
        run_cli(&with(&hit, &["materialize", "--read-only", "--dest", dest.to_str().unwrap()]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read(dest.join("meta.json")).unwrap(), br#"{"ok":true}"#);
    assert_eq!(std::fs::read_dir(ws.path().join("new/parent")).unwrap().count(), 1);
}

/// With `--json`, error outcomes print one JSON object on stdout too (builder failure,
/// invalid build output, nothing to push or promote, I/O errors while scanning, an
/// unusable destination), carrying the exit code.
#[test]
fn json_output_covers_error_outcomes() {
    let ws = Workspace::new();
    let flags = id_flags(&ws.root(), &hex('b'), "generated", REQUIRED);
    let remote = format!("file://{}", ws.path().join("remote").display());
    let cases: Vec<(Vec<String>, i32)> = vec![
        // The build's own stdout must not corrupt the JSON on stdout.
        (
            with(
                &flags,
                &["get-or-build", "--json", "--", "sh", "-c", "echo building...; exit 42"],
            ),
            42,
        ),
        (with(&flags, &["get-or-build", "--json", "--", "true"]), 1),
        (with(&flags, &["push", "--json", "--store", &remote]), 3),
        (with(&flags, &["promote", "--json", "--ready-require", "x", "--", "true"]), 3),
        (with(&flags, &["materialize", "--json", "--dest", ws.root().to_str().unwrap()]), 2),
        (vec!["scan-includes".into(), "--json".into(), "/nonexistent/a.c".into()], 1),
    ];
    for (args, expected) in cases {
        let out = strata().arg("artifact").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(expected), "{args:?}");
        let v = json(&out.stdout);
        assert_eq!(v["status"], "error", "{args:?}: {v}");
        assert_eq!(v["exit_code"], expected, "{args:?}: {v}");
        assert!(!v["error"].as_str().unwrap().is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("error"), "the message still goes to stderr: {stderr}");
    }
}

/// Every path `--json` reports (`dir`, `private_dir`, `output`) exists after strata exits,
/// or is null: a removed private build is not reported.
#[test]
fn json_reports_only_paths_that_exist() {
    let ws = Workspace::new();
    let script = "mkdir -p \"$STRATA_ARTIFACT_OUT/lib\" \"$STRATA_ARTIFACT_OUT/bin\" && \
                  echo x > \"$STRATA_ARTIFACT_OUT/lib/libx.a\" && echo y > \"$STRATA_ARTIFACT_OUT/bin/tool\" && \
                  echo '{}' > \"$STRATA_ARTIFACT_OUT/meta.json\"";
    let check = |v: &serde_json::Value| {
        for field in ["dir", "private_dir", "output"] {
            if let Some(path) = v[field].as_str() {
                assert!(Path::new(path).exists(), "{field} {path} does not exist: {v}");
            }
        }
    };
    let run = |source: char, extra: &[&str]| {
        let flags = id_flags(&ws.root(), &hex(source), "generated", REQUIRED);
        let mut args = vec!["get-or-build", "--json"];
        args.extend_from_slice(extra);
        args.extend(["--", "sh", "-c", script]);
        let out = strata().arg("artifact").args(with(&flags, &args)).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        json(&out.stdout)
    };
    let published = run('1', &[]);
    assert_eq!(published["disposition"], "published");
    assert!(published["private_dir"].is_null(), "{published}");
    check(&published);
    let kept = run('2', &["--keep-private"]);
    assert!(kept["private_dir"].is_string(), "{kept}");
    check(&kept);
    let out = ws.path().join("out");
    let private = run('3', &["--read-only", "--output", out.to_str().unwrap()]);
    assert_eq!(private["disposition"], "private");
    assert!(private["output"].is_string(), "{private}");
    check(&private);
    let private = run('4', &["--read-only"]);
    assert!(private["private_dir"].is_string(), "a PRIVATE result without --output is kept");
    check(&private);
}

/// `promote --ready-require` of a path the generated spec already requires is rejected,
/// not silently collapsed (the docs say duplicates are rejected).
#[test]
fn promote_rejects_a_ready_require_that_is_already_required() {
    let ws = Workspace::new();
    let s = spec(Stage::Generated, REQUIRED);
    ws.store(Mode::ReadWrite).get_or_build(&key(), &s, write_outputs).unwrap();
    let flags = id_flags(&ws.root(), &hex('b'), "generated", REQUIRED);
    let (code, stderr) =
        run_cli(&with(&flags, &["promote", "--ready-require", "meta.json", "--", "true"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("already a required file"), "{stderr}");
}

/// `verify --all` and `gc` on a root that does not exist are usage errors naming the root,
/// not "0 of 0 slot(s) valid".
#[test]
fn verify_all_and_gc_refuse_a_missing_root() {
    let ws = Workspace::new();
    let missing = ws.path().join("typo");
    for args in [["verify", "--all"], ["gc", "--dry-run"]] {
        let out = strata()
            .arg("artifact")
            .args(args)
            .args(["--json", "--root", missing.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
        assert!(stderr.contains("does not exist"), "{stderr}");
        assert_eq!(json(&out.stdout)["exit_code"], 2);
    }
    assert!(!missing.exists());
}

/// An empty STRATA_ARTIFACT_READ_ONLY or STRATA_ARTIFACT_LOCK_TIMEOUT means "unset".
#[test]
fn empty_environment_variables_mean_unset() {
    let ws = Workspace::new();
    let flags = id_flags(&ws.root(), &hex('b'), "generated", REQUIRED);
    let out = strata()
        .args(["artifact", "lookup"])
        .args(&flags)
        .env("STRATA_ARTIFACT_READ_ONLY", "")
        .env("STRATA_ARTIFACT_LOCK_TIMEOUT", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let out = strata()
        .args(["artifact", "lookup"])
        .args(&flags)
        .env("STRATA_ARTIFACT_LOCK_TIMEOUT", "soon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a malformed value is still a usage error");
}

/// gc cleans `locks/` of everything writers never use: a symlinked lock file of a live
/// key (writers refuse it, so every build of the key would stay PRIVATE/lock; a dangling
/// one also made gc skip the key as "held"), directories, and foreign names.
#[test]
fn gc_removes_symlinked_and_foreign_entries_in_locks() {
    let ws = Workspace::new();
    let store = ws.store(Mode::ReadWrite);
    let s = spec(Stage::Generated, REQUIRED);
    let good = store.get_or_build(&key(), &s, write_outputs).unwrap().handle.unwrap();
    let locks = ws.root().join("locks");
    let lock = locks.join(format!("{}.lock", key().digest()));
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(ws.path().join("nowhere"), &lock).unwrap();
    std::fs::write(locks.join("notes.txt"), b"x").unwrap();
    std::fs::create_dir(locks.join(format!("{}.lock", hex('f')))).unwrap();
    std::fs::write(locks.join(format!("{}.lock", hex('F'))), b"").unwrap();
    let out = strata()
        .args(["artifact", "gc", "--json", "--root", ws.root().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out.stdout);
    assert_eq!(v["skipped"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["kept_slots"], 1);
    let mut left: Vec<_> = std::fs::read_dir(&locks).unwrap().map(|e| e.unwrap().path()).collect();
    left.sort();
    assert_eq!(left, Vec::<PathBuf>::new(), "{v}");
    good.verify().unwrap();
    // Writers of the key lock and publish again.
    let other = spec(Stage::Generated, &["meta.json"]);
    let built = store.get_or_build(&key(), &other, write_outputs).unwrap();
    assert_eq!(built.disposition, Disposition::Published, "{:?}", built.reason);
    assert!(std::fs::symlink_metadata(&lock).unwrap().is_file());
}
