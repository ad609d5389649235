//! Stores written by the previous release stay readable and verifiable (issue 8 item 3).
//!
//! `tests/fixtures/release-0.1.0/` was made by strata 0.1.0 before the content layer
//! (commit 139f980; `tests/fixtures/make-release-0.1.0.sh`): schema v1 records whose
//! content digests are untagged SHA-256. Each test copies the fixture into a fresh
//! directory and uses it with this build: v1 records load through the production
//! migrations, their files are verified under SHA-256, and a damaged byte is still caught.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const ONES: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const TWOS: &str = "2222222222222222222222222222222222222222222222222222222222222222";
/// The entry the fixture's third-party action saved.
const THIRD_PARTY_KEY: &str = "392f0c4fe9c1c82a84f174fb96513cf70c327399548bd1171ffde2b96cb0b0a9";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/release-0.1.0")
}

/// A copy of the fixture (`fx`) and an empty work directory (`work`) in one temp dir.
struct Copy {
    _dir: tempfile::TempDir,
    fx: PathBuf,
    work: PathBuf,
}

fn copy() -> Copy {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    let status = Command::new("cp").arg("-a").arg(fixture()).arg(&fx).status().unwrap();
    assert!(status.success());
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    Copy { _dir: dir, fx, work }
}

fn strata(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(crate::strata_exe()).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `strata action run ARGS` with the fixture's common tail: the bare profile, the work and
/// fixture directories normalised (as when the fixture was made), and `sh -c SCRIPT sh DIR`.
fn action_run(c: &Copy, mut args: Vec<std::ffi::OsString>, script: &str, dir: &Path) -> Output {
    for a in ["--environment-profile", "bare", "--normalize-path"] {
        args.push(a.into());
    }
    args.push(c.work.clone().into());
    args.push("--normalize-path".into());
    args.push(c.fx.clone().into());
    for a in ["--", "sh", "-c", script, "sh"] {
        args.push(a.into());
    }
    args.push(dir.into());
    strata(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>())
}

/// The fixture's third-party action, run by this build.
fn third_party(c: &Copy) -> Output {
    let out = c.work.join("out");
    let script = r##"mkdir -p "$1/bin" && printf "hello\n" > "$1/a.txt" && printf "#!/bin/sh\necho hi\n" > "$1/bin/tool" && chmod +x "$1/bin/tool" && ln -s a.txt "$1/link""##;
    let args: Vec<std::ffi::OsString> = vec![
        "action".into(),
        "run".into(),
        "--cache-root".into(),
        c.fx.join("cache").into(),
        "--domain".into(),
        "third_party".into(),
        "--unit".into(),
        "fixture".into(),
        "--output-dir".into(),
        out.clone().into(),
    ];
    action_run(c, args, script, &out)
}

fn entry_dir(c: &Copy) -> PathBuf {
    c.fx.join("cache/actions-v1/third_party/fixture").join(THIRD_PARTY_KEY)
}

#[test]
fn release_0_1_0_entry_is_a_hit_verified_under_sha256() {
    let c = copy();
    let manifest = std::fs::read_to_string(entry_dir(&c).join("manifest.json")).unwrap();
    assert!(manifest.contains("\"schema_version\":1") && manifest.contains("\"sha256\":"));
    let run = third_party(&c);
    assert!(run.status.success(), "{}", text(&run));
    assert!(
        text(&run).contains(&format!("HIT domain=third_party unit=fixture key={THIRD_PARTY_KEY}")),
        "{}",
        text(&run)
    );
    let out = c.work.join("out");
    assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"hello\n");
    assert_eq!(std::fs::read_link(out.join("link")).unwrap(), Path::new("a.txt"));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(out.join("bin/tool")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o100, 0o100, "the owner-exec bit is restored");
    // The stored record is never rewritten: the entry stays a v1 record.
    let after = std::fs::read_to_string(entry_dir(&c).join("manifest.json")).unwrap();
    assert_eq!(after, manifest);
}

#[test]
fn release_0_1_0_entry_with_a_flipped_byte_is_a_miss_and_rebuilt() {
    let c = copy();
    std::fs::write(entry_dir(&c).join("artifacts/a.txt"), b"hellO\n").unwrap();
    let run = third_party(&c);
    assert!(run.status.success(), "{}", text(&run));
    let shown = text(&run);
    assert!(shown.contains("MISS") && shown.contains("SAVED") && !shown.contains("HIT"), "{shown}");
    assert!(shown.contains("sha256:"), "the warning names the SHA-256 mismatch: {shown}");
    assert_eq!(std::fs::read(c.work.join("out/a.txt")).unwrap(), b"hello\n");
    // The replacement entry is a v2 record with BLAKE3 digests.
    let manifest = std::fs::read_to_string(entry_dir(&c).join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"schema_version\":2") && manifest.contains("\"digest\":\"blake3:"),
        "{manifest}"
    );
}

#[test]
fn release_0_1_0_publication_state_is_read_and_the_operator_hits() {
    let c = copy();
    let source = c.work.join("opsrc");
    std::fs::create_dir(&source).unwrap();
    std::fs::write(source.join("op.cc"), b"op source\n").unwrap();
    let stage = c.work.join("stage");
    let owners = std::fs::read_to_string(c.fx.join("publish-state/owners.json")).unwrap();
    assert!(owners.contains("\"schema_version\":1"), "{owners}");
    std::fs::remove_file(c.fx.join("publish/add.o")).unwrap();
    let args: Vec<std::ffi::OsString> = vec![
        "action".into(),
        "run".into(),
        "--cache-root".into(),
        c.fx.join("cache").into(),
        "--domain".into(),
        "custom_operator".into(),
        "--unit".into(),
        "ops".into(),
        "--soc".into(),
        "soc1".into(),
        "--operator".into(),
        "add".into(),
        "--action".into(),
        "build".into(),
        "--operator-source".into(),
        source.into(),
        "--output-dir".into(),
        stage.clone().into(),
        "--publish-dir".into(),
        c.fx.join("publish").into(),
        "--publish-state-dir".into(),
        c.fx.join("publish-state").into(),
    ];
    let run = action_run(&c, args, r#"printf "kernel\n" > "$1/add.o""#, &stage);
    let shown = text(&run);
    assert!(run.status.success(), "{shown}");
    assert!(shown.contains("HIT domain=custom_operator") && !shown.contains("warning"), "{shown}");
    assert_eq!(std::fs::read(c.fx.join("publish/add.o")).unwrap(), b"kernel\n");
    // The state was rewritten by this build (mutable state, not an immutable record).
    let owners = std::fs::read_to_string(c.fx.join("publish-state/owners.json")).unwrap();
    assert!(
        owners.contains("\"schema_version\":2") && owners.contains("\"digest\":\"sha256:"),
        "{owners}"
    );
}

fn key_args(root: &Path) -> Vec<std::ffi::OsString> {
    vec![
        "--root".into(),
        root.into(),
        "--env".into(),
        format!("cc={ZEROS}").into(),
        "--source".into(),
        ONES.into(),
        "--specialization".into(),
        TWOS.into(),
        "--require".into(),
        "include/gen.h".into(),
        "--json".into(),
    ]
}

fn artifact(sub: &str, root: &Path, extra: &[std::ffi::OsString]) -> (Output, serde_json::Value) {
    let mut args: Vec<std::ffi::OsString> = vec!["artifact".into(), sub.into()];
    args.extend(key_args(root));
    args.extend(extra.iter().cloned());
    let out = strata(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>());
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out, json)
}

#[test]
fn release_0_1_0_artifact_slot_is_a_hit_and_materializes() {
    let c = copy();
    let root = c.fx.join("artifacts");
    let (out, json) = artifact("lookup", &root, &[]);
    assert_eq!(json["status"], "hit", "{}", text(&out));
    let dest = c.work.join("dest");
    let (out, _) = artifact("materialize", &root, &["--dest".into(), dest.clone().into()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(dest.join("include/gen.h")).unwrap(), b"#define GEN 1\n");
    // A damaged byte in the v1 slot is still caught (SHA-256 verification).
    let slot_file = walk_find(&root, "gen.h");
    std::fs::write(&slot_file, b"#define GEN 2\n").unwrap();
    let (out, json) = artifact("lookup", &root, &[]);
    assert_eq!(json["status"], "invalid", "{}", text(&out));
    assert!(json["reason"].as_str().unwrap_or_default().contains("sha256:"), "{json}");
}

#[test]
fn release_0_1_0_l0_archive_is_pulled_into_a_new_store() {
    let c = copy();
    let root = c.work.join("new-root");
    let store = format!("file://{}", c.fx.join("l0-store").display());
    let (out, _) = artifact(
        "pull",
        &root,
        &["--store".into(), store.into(), "--dest".into(), c.work.join("dest").into()],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(c.work.join("dest/include/gen.h")).unwrap(), b"#define GEN 1\n");
    let (out, json) = artifact("lookup", &root, &[]);
    assert_eq!(json["status"], "hit", "{}", text(&out));
}

#[test]
fn release_0_1_0_snapshot_restores_and_its_entry_hits() {
    let c = copy();
    let cache = c.work.join("restored");
    let store = format!("file://{}", c.fx.join("snapshot-store").display());
    let args: Vec<std::ffi::OsString> = vec![
        "snapshot".into(),
        "restore".into(),
        "--cache-dir".into(),
        cache.clone().into(),
        "--key".into(),
        "fixture-snapshot".into(),
        "--store".into(),
        store.into(),
        "--strict".into(),
    ];
    let out = strata(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out));
    let restored = cache.join("actions-v1/third_party/fixture").join(THIRD_PARTY_KEY);
    assert_eq!(std::fs::read(restored.join("artifacts/a.txt")).unwrap(), b"hello\n");
    // The restored v1 entry is a HIT for this build.
    std::fs::remove_dir_all(c.fx.join("cache")).unwrap();
    std::fs::rename(&cache, c.fx.join("cache")).unwrap();
    let run = third_party(&c);
    assert!(text(&run).contains("HIT domain=third_party"), "{}", text(&run));
}

fn walk_find(root: &Path, name: &str) -> PathBuf {
    for entry in walkdir::WalkDir::new(root) {
        let entry = entry.unwrap();
        if entry.file_name() == name {
            return entry.into_path();
        }
    }
    panic!("{name} not under {}", root.display());
}
