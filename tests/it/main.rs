//! The integration test binary (STYLE rule 25): one module per feature.

#![allow(clippy::disallowed_methods)]
// Test helpers outside #[test] functions unwrap freely too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

mod architecture;
mod artifact;
mod closed_output;
mod engine;
mod fixtures;
mod launcher;
mod limits;
mod names;
mod r26;
mod remote;
mod snapshot;
mod stores;
mod transport;
mod untrusted_sizes;
mod version;

/// The `strata` binary every test runs: cargo's build of it (`CARGO_BIN_EXE_strata`), or
/// the one `STRATA_TEST_BINARY` names (a release build, perhaps for another CPU). When
/// `STRATA_TEST_RUNNER` is set too (a command, words separated by spaces, e.g.
/// `qemu-aarch64-static`), a wrapper script beside cargo's build that starts the binary
/// through that runner: everything that starts strata (the tests themselves, cmake, make, a
/// build's shell) then starts it the same way, with no binfmt_misc registration.
/// `scripts/release-build.sh` runs the engine tests on the aarch64 release binary so
/// (with `STRATA_TEST_TARGET`, the triple `--version` must name).
pub fn strata_exe() -> &'static str {
    static EXE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    EXE.get_or_init(|| {
        let built = std::path::Path::new(env!("CARGO_BIN_EXE_strata"));
        let binary = match std::env::var_os("STRATA_TEST_BINARY").filter(|v| !v.is_empty()) {
            Some(path) => std::fs::canonicalize(&path).unwrap_or_else(|e| {
                panic!("STRATA_TEST_BINARY={}: {e}", std::path::Path::new(&path).display())
            }),
            None => built.to_owned(),
        };
        let runner = std::env::var("STRATA_TEST_RUNNER").unwrap_or_default();
        if runner.trim().is_empty() {
            return binary.display().to_string();
        }
        let quote = |word: &str| format!("'{}'", word.replace('\'', r"'\''"));
        let words: Vec<String> = runner.split_whitespace().map(quote).collect();
        let script = format!(
            "#!/bin/sh\nexec {} {} \"$@\"\n",
            words.join(" "),
            quote(&binary.display().to_string())
        );
        let wrapper = built.with_file_name("strata-via-test-runner");
        // Written under a private name and renamed: test processes running at once never
        // see a partial script.
        let partial = wrapper.with_extension(format!("{}.partial", std::process::id()));
        std::fs::write(&partial, script).unwrap();
        std::fs::set_permissions(&partial, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        std::fs::rename(&partial, &wrapper).unwrap();
        wrapper.display().to_string()
    })
}
