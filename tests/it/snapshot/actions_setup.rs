//! `actions/setup` installing a release binary (issue 11 item 2): the binary for the
//! runner's OS and architecture is downloaded (here from a local directory, through the
//! `download-url` input and curl's `file://`), installed only when its SHA-256 equals the
//! one pinned in the action's `release-sums`, and reused on a warm runner; from-source
//! builds happen only when asked or when no binary fits. Each test runs a copy of the action
//! whose `release-sums` pins what the test serves.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::Scratch;
use super::actions::{ActionRun, repo, run_action_in, strata_bin};

const X64: &str = "x86_64-unknown-linux-musl";
const ARM64: &str = "aarch64-unknown-linux-musl";

fn linux(arch: &str) -> Value {
    json!({"os": "Linux", "arch": arch})
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A copy of `actions/setup` under `<scratch>/action/actions/setup` whose `release-sums`
/// is `sums`; returns the action directory.
fn setup_copy(scratch: &Scratch, sums: &str) -> PathBuf {
    let dir = scratch.path("action/actions/setup");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["action.yml", "setup.sh"] {
        std::fs::copy(repo().join("actions/setup").join(file), dir.join(file)).unwrap();
    }
    // What a source build digests (the stand-in cargo builds nothing from it).
    let root = scratch.path("action");
    for file in ["Cargo.toml", "Cargo.lock"] {
        std::fs::copy(repo().join(file), root.join(file)).unwrap();
    }
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.join("release-sums"), sums).unwrap();
    dir
}

/// `release-sums` pinning version v9.9.9 with the given `(triple, sha256)` lines.
fn sums(lines: &[(&str, &str)]) -> String {
    let mut text =
        "# pinned for a test\nversion v9.9.9\nurl https://example.invalid/never-used\n".to_owned();
    for (triple, sum) in lines {
        text.push_str(&format!("{sum}  strata-{triple}\n"));
    }
    text
}

/// A release directory serving `bytes` as `strata-<triple>`, as a `file://` URL.
fn serve(dir: &Path, triple: &str, bytes: &[u8]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join(format!("strata-{triple}"));
    std::fs::write(&file, bytes).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    format!("file://{}", dir.display())
}

/// The install directory of the pinned v9.9.9 binary for `triple` on the runner whose
/// temporary directory is `tmp` (HOME is `<tmp>/home`; no RUNNER_TOOL_CACHE).
fn installed(tmp: &Path, triple: &str) -> PathBuf {
    tmp.join(format!("home/.cache/strata/v9.9.9-{triple}/strata"))
}

fn step<'a>(run: &'a ActionRun, id: &str) -> &'a Value {
    run.result["steps"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap()
}

#[test]
fn actions_setup_installs_the_pinned_release_binary_for_the_runner() {
    let scratch = Scratch::new();
    let binary = std::fs::read(strata_bin()).unwrap();
    let sum = sha256_hex(&binary);
    let action = setup_copy(&scratch, &sums(&[(X64, &sum), (ARM64, &sum)]));
    let ws = scratch.path("ws");
    let tmp = scratch.path("tmp");
    let url = serve(&scratch.path("release"), X64, &binary);
    let inputs = json!({"download-url": url});

    let cold = run_action_in(&action, linux("X64"), inputs.clone(), &[], &ws, &tmp);
    cold.assert_ok();
    let dest = installed(&tmp, X64);
    assert_eq!(cold.output("installed-from"), "release", "{:#}", cold.result);
    assert_eq!(cold.output("path"), dest.display().to_string());
    assert_eq!(std::fs::read(&dest).unwrap(), binary);
    assert_eq!(cold.result["path"][0], dest.parent().unwrap().display().to_string());
    let version = std::process::Command::new(&dest).arg("--version").output().unwrap();
    assert_eq!(cold.output("version"), String::from_utf8(version.stdout).unwrap().trim_end());
    assert_eq!(step(&cold, "cache")["ran"], false, "no source build, no actions/cache");
    assert!(cold.log().contains(&format!("strata: downloading strata-{X64} v9.9.9 from {url}/")));

    // A warm runner: the installed binary still matches, nothing is downloaded.
    std::fs::remove_file(scratch.path(&format!("release/strata-{X64}"))).unwrap();
    let warm = run_action_in(&action, linux("X64"), inputs.clone(), &[], &ws, &tmp);
    warm.assert_ok();
    assert_eq!(warm.output("installed-from"), "release");
    assert!(warm.log().contains("is already installed"), "{}", warm.log());

    // An installed binary that no longer matches its pin is replaced, not used.
    std::fs::write(&dest, b"#!/bin/sh\necho strata 6.6.6\n").unwrap();
    serve(&scratch.path("release"), X64, &binary);
    let again = run_action_in(&action, linux("X64"), inputs, &[], &ws, &tmp);
    again.assert_ok();
    assert_eq!(std::fs::read(&dest).unwrap(), binary);
    assert!(again.log().contains("strata: downloading"), "{}", again.log());

    // An ARM64 runner gets the aarch64 binary (served here with the same bytes).
    let arm_url = serve(&scratch.path("release-arm"), ARM64, &binary);
    let arm_tmp = scratch.path("tmp-arm");
    let arm = run_action_in(
        &action,
        linux("ARM64"),
        json!({"download-url": arm_url}),
        &[],
        &ws,
        &arm_tmp,
    );
    arm.assert_ok();
    assert_eq!(arm.output("path"), installed(&arm_tmp, ARM64).display().to_string());
}

#[test]
fn actions_setup_refuses_a_release_binary_whose_checksum_differs() {
    let scratch = Scratch::new();
    let binary = std::fs::read(strata_bin()).unwrap();
    let pinned = sha256_hex(b"the released binary");
    let action = setup_copy(&scratch, &sums(&[(X64, &pinned)]));
    let ws = scratch.path("ws");
    let tmp = scratch.path("tmp");
    let url = serve(&scratch.path("release"), X64, &binary);

    let run = run_action_in(&action, linux("X64"), json!({"download-url": url}), &[], &ws, &tmp);
    assert_eq!(run.result["exit_code"], 1, "{:#}", run.result);
    assert_eq!(step(&run, "install")["exit_code"], 1);
    let want = format!(
        "::error title=strata setup::checksum mismatch: {url}/strata-{X64} has SHA-256 {}, but \
         actions/setup/release-sums pins {pinned} for strata-{X64} v9.9.9; the download is not \
         the released binary (corrupt or replaced), so it is not installed.",
        sha256_hex(&binary)
    );
    assert!(run.log().contains(&want), "{}", run.log());
    let dest = installed(&tmp, X64);
    assert!(!dest.exists(), "nothing is installed");
    let leftovers: Vec<_> = std::fs::read_dir(dest.parent().unwrap()).unwrap().collect();
    assert!(leftovers.is_empty(), "the partial download is removed: {leftovers:?}");
    assert_eq!(run.result["path"], json!([]), "nothing is added to PATH");
    assert_eq!(run.result["outputs"], json!({}));

    // A download that fails names the URL and the way out.
    let empty = format!("file://{}", scratch.path("empty").display());
    let missing =
        run_action_in(&action, linux("X64"), json!({"download-url": empty}), &[], &ws, &tmp);
    assert_eq!(missing.result["exit_code"], 1, "{:#}", missing.result);
    assert!(
        missing.log().contains(&format!(
            "::error title=strata setup::cannot download {empty}/strata-{X64} (curl's message is above)"
        )),
        "{}",
        missing.log()
    );
}

#[test]
fn actions_setup_builds_from_source_only_when_asked_or_when_no_binary_fits() {
    let scratch = Scratch::new();
    // A stand-in cargo that "builds" a script printing a version.
    let stub = scratch.path("stub-bin");
    std::fs::create_dir_all(&stub).unwrap();
    let cargo = stub.join("cargo");
    std::fs::write(
        &cargo,
        "#!/bin/sh\nmkdir -p \"$CARGO_TARGET_DIR/release\"\nprintf '#!/bin/sh\\necho strata 9.9.9\\n' > \"$CARGO_TARGET_DIR/release/strata\"\nchmod +x \"$CARGO_TARGET_DIR/release/strata\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path_env =
        vec![("PATH", format!("{}:{}", stub.display(), std::env::var("PATH").unwrap_or_default()))];
    let binary = std::fs::read(strata_bin()).unwrap();
    let action = setup_copy(&scratch, &sums(&[(X64, &sha256_hex(&binary))]));
    let url = serve(&scratch.path("release"), X64, &binary);
    let ws = scratch.path("ws");
    let cases = [
        (
            "asked",
            linux("X64"),
            json!({"from-source": "true", "download-url": url}),
            "(from-source: 'true')",
        ),
        (
            "no binary is built for the runner",
            json!({"os": "macOS", "arch": "ARM64"}),
            json!({"download-url": url}),
            "no release binary is built for macOS/ARM64",
        ),
        (
            "none is pinned for it",
            linux("ARM64"),
            json!({"download-url": url}),
            "release-sums pins no release binary strata-aarch64-unknown-linux-musl",
        ),
    ];
    for (index, (why, runner, inputs, reason)) in cases.into_iter().enumerate() {
        let tmp = scratch.path(&format!("tmp{index}"));
        let run = run_action_in(&action, runner, inputs, &path_env, &ws, &tmp);
        run.assert_ok();
        assert_eq!(run.output("installed-from"), "source", "{why}: {:#}", run.result);
        assert_eq!(run.output("version"), "strata 9.9.9", "{why}");
        assert!(run.log().contains(reason), "{why}: {}", run.log());
        let cache = step(&run, "cache");
        assert!(cache["uses"].as_str().unwrap().starts_with("actions/cache@"), "{why}: {cache}");
    }

    // A from-source value that is neither 'true' nor 'false' is an error, not a guess.
    let tmp = scratch.path("tmp-typo");
    let typo =
        run_action_in(&action, linux("X64"), json!({"from-source": "yes"}), &path_env, &ws, &tmp);
    assert_eq!(typo.result["exit_code"], 1, "{:#}", typo.result);
    assert!(
        typo.log().contains("the from-source input must be 'true' or 'false', not 'yes'"),
        "{}",
        typo.log()
    );
}

/// The pinned sums the repository ships are what `setup.sh` reads: comments, then either
/// nothing (no release pinned yet) or a version, an https URL and a 64-hex SHA-256 for
/// each of the two binaries.
#[test]
fn actions_setup_release_sums_is_well_formed() {
    let text = std::fs::read_to_string(repo().join("actions/setup/release-sums")).unwrap();
    let (mut version, mut url, mut names) = (None, None, Vec::new());
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(v) = line.strip_prefix("version ") {
            assert!(v.starts_with('v') && version.replace(v).is_none(), "{line}");
        } else if let Some(u) = line.strip_prefix("url ") {
            assert!(u.starts_with("https://") && url.replace(u).is_none(), "{line}");
        } else {
            let (sum, name) =
                line.split_once("  ").unwrap_or_else(|| panic!("malformed: {line:?}"));
            assert!(sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
            names.push(name.to_owned());
        }
    }
    names.sort();
    if names.is_empty() {
        assert_eq!((version, url), (None, None), "a version without binaries");
    } else {
        assert!(version.is_some() && url.is_some(), "binaries need a version and a url");
        assert_eq!(names, [format!("strata-{ARM64}"), format!("strata-{X64}")]);
    }
}
