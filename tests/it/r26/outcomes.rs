//! Item 4: restore and save outcomes that overstated. An index restore whose entry
//! downloads all fail is `partial` with its counts (never `restored`, never a cache hit);
//! what a killed save leaves (its lease, its temp files, its pending record) is cleaned up
//! by the next save, which reports only what happened. Real s3s-fs behind the fault proxy,
//! a real `kill -9`.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::snapshot::{Scratch, fill_cache, key, s3_env, strata, strata_command};
use crate::transport::proxy::{Fault, FaultProxy, Rule};
use crate::transport::server::S3sServer;

fn arg(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn r26_an_index_restore_whose_entry_downloads_all_fail_is_partial() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let rule =
        Rule { method: "GET", contains: "/l1/~entries/", fault: Fault::ServerError, times: None };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let mut env = s3_env(&server, &proxy.endpoint, "l1");
    env.push(("STRATA_S3_MAX_RETRIES", "0".to_owned()));
    env.push(("STRATA_SNAPSHOT_FORMAT", "index".to_owned()));
    let cache = scratch.path("a/cache");
    for seed in [1, 2, 3] {
        fill_cache(&cache, seed);
    }
    let k = key(&scratch, "partial");
    // Saved straight to the server (the proxy fails only downloads of entries).
    let direct = s3_env(&server, &server.endpoint, "l1");
    let mut save_env = direct.clone();
    save_env.push(("STRATA_SNAPSHOT_FORMAT", "index".to_owned()));
    strata(&scratch, &["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k], &save_env)
        .assert_ok();
    // The consumer already holds one of the three entries.
    let consumer = scratch.path("b/cache");
    fill_cache(&consumer, 2);
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &arg(&consumer), "--key", &k, "--json"],
        &env,
    );
    run.assert_ok();
    let report = run.json();
    assert_eq!(report["status"], "partial", "{report}\n{}", run.stderr);
    assert_eq!(report["cache_hit"], false, "{report}");
    let counts = &report["index"];
    assert_eq!(
        (&counts["entries"], &counts["present"], &counts["fetched"], &counts["failed"]),
        (&3.into(), &1.into(), &0.into(), &2.into()),
        "{report}"
    );
    // Each skipped entry is told once (one note), not in a log line and the note again.
    let missing = format!("{:064x}", 1);
    assert_eq!(run.stderr.matches(&missing).count(), 1, "{}", run.stderr);
    // The plain line says PARTIAL with the counts; the GitHub outputs agree.
    let out = scratch.path("gh-output");
    std::fs::write(&out, b"").unwrap();
    let mut gh = env.clone();
    gh.push(("GITHUB_OUTPUT", arg(&out)));
    let run = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &arg(&consumer), "--key", &k, "--github-output"],
        &gh,
    );
    run.assert_ok();
    assert!(
        run.stderr.contains("strata: snapshot PARTIAL level=exact")
            && run.stderr.contains("present=1 fetched=0 failed=2"),
        "{}",
        run.stderr
    );
    let outputs = std::fs::read_to_string(&out).unwrap();
    assert!(outputs.contains("cache-hit<<") || outputs.contains("cache-hit=false"), "{outputs}");
    assert!(!outputs.contains("cache-hit=true"), "{outputs}");
    assert!(outputs.contains("partial"), "{outputs}");
}

/// Starts a save of `cache` under `k` through a proxy whose first upload of a name under
/// `/l1/~` (other than those in `pass`) never gets an answer, waits until that upload is
/// on its way, and kills the save with SIGKILL. Returns the proxy (later requests pass)
/// and the environment of the same store.
fn killed_save(
    scratch: &Scratch,
    server: &S3sServer,
    cache: &Path,
    k: &str,
    pass: &'static [&'static str],
) -> (FaultProxy, Vec<(&'static str, String)>) {
    let mut rules: Vec<Rule> = pass
        .iter()
        .map(|contains| Rule {
            method: "PUT",
            contains,
            fault: Fault::Delay(Duration::ZERO),
            times: None,
        })
        .collect();
    rules.push(Rule {
        method: "PUT",
        contains: "/l1/~",
        fault: Fault::Stall(Duration::from_secs(60)),
        times: Some(1),
    });
    let proxy = FaultProxy::start(&server.endpoint, rules);
    let mut env = s3_env(server, &proxy.endpoint, "l1");
    env.push(("STRATA_SNAPSHOT_FORMAT", "index".to_owned()));
    env.push(("STRATA_S3_TIMEOUT_SECONDS", "120".to_owned()));
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let mut child = strata_command(
        scratch,
        scratch.dir.path(),
        &["snapshot", "save", "--cache-dir", &arg(cache), "--key", k],
        &env,
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let stalled = |proxy: &FaultProxy| {
        proxy.seen().iter().any(|r| {
            r.starts_with("PUT ") && r.contains("/l1/~") && !pass.iter().any(|p| r.contains(p))
        })
    };
    while !stalled(&proxy) {
        assert!(Instant::now() < deadline, "the save never reached the stalled upload");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    env.retain(|(name, _)| *name != "STRATA_S3_TIMEOUT_SECONDS");
    (proxy, env)
}

fn leases(server: &S3sServer) -> Vec<String> {
    let dir = server.data_dir().join("strata-test/l1/~leases");
    std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

fn dot_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn r26_what_a_killed_save_leaves_is_cleaned_by_the_next_save_and_reported_truly() {
    let scratch = Scratch::new();
    let server = S3sServer::start();
    let cache = scratch.path("a/cache");
    for seed in [1, 2] {
        fill_cache(&cache, seed);
    }
    // Killed while uploading its entry objects: its lease and its temp files stay.
    let (_proxy, env) =
        killed_save(&scratch, &server, &cache, &key(&scratch, "killed1"), &["/l1/~leases/"]);
    assert_eq!(leases(&server).len(), 1, "the killed save's lease");
    let left = dot_names(&cache.join(".local"));
    assert!(!left.is_empty(), "the killed save's temp files under .local");
    // A gc now is held back by the dead save's lease...
    let gc = strata(&scratch, &["snapshot", "gc", "--keep", "1", "--json"], &env);
    assert_eq!(gc.json()["status"], "busy", "{}", gc.stdout);
    // ...until the next save from the same cache directory, which deletes the lease and
    // the temp files at once (no hour, no six hours).
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let next = strata(
        &scratch,
        &[
            "snapshot",
            "save",
            "--cache-dir",
            &arg(&cache),
            "--key",
            &key(&scratch, "next1"),
            "--json",
        ],
        &env,
    );
    let report = next.json();
    assert_eq!(report["outcome"]["status"], "saved", "{report}\n{}", next.stderr);
    let notes = report["notes"].to_string();
    assert!(notes.contains("deleted the lease ~leases/save-"), "{notes}");
    for name in &left {
        assert!(notes.contains(name.as_str()), "{name} not reported removed: {notes}");
        assert!(!cache.join(".local").join(name).exists(), "{name} is still there");
    }
    assert!(leases(&server).is_empty(), "{:?}", leases(&server));
    let gc = strata(&scratch, &["snapshot", "gc", "--keep", "1", "--json"], &env);
    assert_eq!(gc.json()["status"], "done", "{}", gc.stdout);

    // Killed while uploading its index object (entries and refs went up): the next save
    // says the object never reached the store instead of claiming to delete it.
    let (_proxy, env) = killed_save(
        &scratch,
        &server,
        &cache,
        &key(&scratch, "killed2"),
        &["/l1/~leases/", "/l1/~entries/", "/l1/~refs/"],
    );
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let next = strata(
        &scratch,
        &[
            "snapshot",
            "save",
            "--cache-dir",
            &arg(&cache),
            "--key",
            &key(&scratch, "next2"),
            "--json",
        ],
        &env,
    );
    let report = next.json();
    assert_eq!(report["outcome"]["status"], "saved", "{report}\n{}", next.stderr);
    let notes = report["notes"].to_string();
    assert!(notes.contains("before its snapshot object ~"), "{notes}");
    assert!(!notes.contains("deleted ~"), "{notes}");
    assert!(leases(&server).is_empty(), "{:?}", leases(&server));
}
