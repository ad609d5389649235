//! The remote entry tier end to end (issue 12 item 3, docs/remote-tier.md): the real
//! `strata` binary against a real s3s-fs server (`crate::transport::server`), faults from
//! the proxy (`crate::transport::proxy`), no mocks. A producer runs with `--remote-write`
//! and writer credentials; a consumer with an empty cache then HITs from the store, or,
//! on any remote trouble, builds as on a MISS with one warning.

mod action;
mod launcher;

use std::collections::BTreeMap;
use std::path::Path;

use crate::engine::{Action, RUN_TIMEOUT, RunResult, TestContext, run_bounded};
use crate::transport::server::S3sServer;

/// The store prefix every test uses.
pub const PREFIX: &str = "remote";

/// A third-party action in `ctx`'s work directory (so every cache root computes the same
/// key) storing into `cache`: writes `out/lib/data.txt` and `out/marker`, and appends a
/// line to `ran.log` outside the output (so a test sees whether the build ran).
pub fn action(ctx: &TestContext, cache: &Path, unit: &str) -> Action {
    Action::default()
        .flag("--cache-root", cache)
        .flag("--domain", "third_party")
        .flag("--unit", unit)
        .flag("--output-dir", ctx.path("out"))
        .flag("--environment-profile", "bare")
        .sh(&format!(
            "mkdir -p out/lib && seq 1 30000 > out/lib/data.txt && printf {unit} > out/marker \
             && echo {unit} >> ran.log"
        ))
}

/// `action` with the server's credentials in the environment and `--remote-store`.
pub fn with_store(action: Action, server: &S3sServer, endpoint: Option<&str>) -> Action {
    let url = match endpoint {
        Some(e) => crate::transport::server::url_for(e, PREFIX),
        None => server.url(PREFIX),
    };
    action
        .flag("--remote-store", url)
        .env("AWS_ACCESS_KEY_ID", &server.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &server.secret_key)
}

/// Every file the server holds, by path relative to its data directory.
pub fn store_files(server: &S3sServer) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let root = server.data_dir();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The one stored file whose path contains `needle`.
pub fn stored(server: &S3sServer, needle: &str) -> std::path::PathBuf {
    let found: Vec<String> =
        store_files(server).into_keys().filter(|p| p.contains(needle)).collect();
    assert_eq!(found.len(), 1, "files containing {needle:?}: {found:?}");
    server.data_dir().join(&found[0])
}

/// `strata stats --json` of `cache`.
pub fn stats(ctx: &TestContext, cache: &Path) -> serde_json::Value {
    let mut cmd = ctx.strata();
    cmd.args(["stats", "--json", "--cache-root"]).arg(cache);
    let run = run_bounded(cmd, RUN_TIMEOUT);
    run.expect_code(0);
    serde_json::from_str(&run.stdout).unwrap()
}

/// The `strata: WARNING remote` lines of a run.
pub fn remote_warnings(run: &RunResult) -> Vec<&str> {
    run.warnings().into_iter().filter(|l| l.contains("WARNING remote")).collect()
}

/// Names under `<cache>/.local` that look like staging or temp files (a leading dot): a
/// finished run leaves none.
pub fn staging_left(cache: &Path) -> Vec<String> {
    std::fs::read_dir(cache.join(".local"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}
