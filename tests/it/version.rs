//! `strata --version` (issue 11 item 5): the crate version, the commit the binary was built
//! from and the target triple it was built for.

use std::process::Command;

/// The commit `git` reports for this checkout (12 hex digits), or `unknown` when the tests
/// run outside a git checkout, as `build.rs` decides.
fn expected_commit() -> String {
    let repo = env!("CARGO_MANIFEST_DIR");
    let run = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_owned())
    };
    let top = run(&["rev-parse", "--show-toplevel"]).map(std::fs::canonicalize);
    if top.is_some_and(|t| t.ok() == std::fs::canonicalize(repo).ok()) {
        run(&["rev-parse", "--short=12", "HEAD"]).unwrap()
    } else {
        "unknown".to_owned()
    }
}

/// The triple strata was built for: `STRATA_TEST_TARGET` when the binary under test is not
/// cargo's build (`STRATA_TEST_BINARY`, see [`crate::strata_exe`]), else the platform this
/// test binary (built for the same target as strata) runs on, from the compiler's own facts:
/// `x86_64-unknown-linux-gnu`, `aarch64-unknown-linux-musl`…
fn expected_target() -> String {
    if let Some(target) = std::env::var("STRATA_TEST_TARGET").ok().filter(|t| !t.is_empty()) {
        return target;
    }
    let env = if cfg!(target_env = "musl") { "musl" } else { "gnu" };
    format!("{}-unknown-{}-{env}", std::env::consts::ARCH, std::env::consts::OS)
}

#[test]
fn version_names_the_version_commit_and_target() {
    let want = format!(
        "strata {} (commit {}, target {})\n",
        env!("CARGO_PKG_VERSION"),
        expected_commit(),
        expected_target()
    );
    for flag in ["--version", "-V"] {
        let output = Command::new(crate::strata_exe()).arg(flag).output().unwrap();
        assert!(output.status.success(), "{flag}: {output:?}");
        assert_eq!(String::from_utf8(output.stdout).unwrap(), want, "{flag}");
    }
}
