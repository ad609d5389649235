//! Progress on stderr (issue 11 item 3): a save and a restore over a slow link (s3s-fs
//! behind the proxy, every part delayed) draw a moving bar on a terminal (a pseudo-terminal
//! from `script`), and print plain lines no more often than the interval when stderr is a
//! pipe or under GitHub Actions.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::super::transport::proxy::{Fault, FaultProxy, Rule};
use super::{S3sServer, Scratch, fill_cache, key, s3_env, strata, strata_command};

const MIB: usize = 1024 * 1024;

fn arg(path: &Path) -> String {
    path.display().to_string()
}

/// A cache whose snapshot is about 12 MiB (random data does not compress).
fn big_cache(scratch: &Scratch, name: &str) -> PathBuf {
    let cache = scratch.path(name);
    fill_cache(&cache, 7);
    let big = cache.join("actions-v1/third_party/zlib/big.o");
    std::fs::write(big, crate::transport::random_bytes(12 * MIB, 7)).unwrap();
    cache
}

/// The store behind a proxy that delays every upload part and every ranged download by
/// `delay`; 1 MiB download parts (upload parts are at least 5 MiB), one at a time.
struct SlowStore {
    server: S3sServer,
    proxy: FaultProxy,
}

impl SlowStore {
    fn start(delay: Duration) -> Self {
        let server = S3sServer::start();
        let slow =
            |method, contains| Rule { method, contains, fault: Fault::Delay(delay), times: None };
        let rules = vec![slow("PUT", "partNumber="), slow("GET", " range=bytes=")];
        let proxy = FaultProxy::start(&server.endpoint, rules);
        Self { server, proxy }
    }

    fn env(&self, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        self.env_through(&self.proxy.endpoint, extra)
    }

    /// [`SlowStore::env`] straight to the server, without the delays.
    fn env_fast(&self, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        self.env_through(&self.server.endpoint, extra)
    }

    fn env_through(
        &self,
        endpoint: &str,
        extra: &[(&'static str, &str)],
    ) -> Vec<(&'static str, String)> {
        let mut env = s3_env(&self.server, endpoint, "l1");
        env.push(("STRATA_S3_PART_SIZE_MB", "1".to_owned()));
        env.push(("STRATA_S3_PARALLELISM", "1".to_owned()));
        env.extend(extra.iter().map(|(n, v)| (*n, (*v).to_owned())));
        env
    }
}

/// Runs `strata args` on a pseudo-terminal (`script -q -e -c CMD /dev/null`, util-linux)
/// with `env` and returns everything the terminal received, and the exit code.
fn on_terminal(scratch: &Scratch, args: &[&str], env: &[(&str, String)]) -> (String, i32) {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = quote(crate::strata_exe());
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    // The environment strata gets (cleared, as `strata_command` sets it up), on script.
    let template = strata_command(scratch, scratch.dir.path(), args, env);
    let mut command = Command::new("script");
    command.args(["-q", "-e", "-c", &line, "/dev/null"]).env_clear();
    for (name, value) in template.get_envs() {
        if let Some(value) = value {
            command.env(name, value);
        }
    }
    command.env("SHELL", "/bin/sh").env("TERM", "xterm").current_dir(scratch.dir.path());
    let output = command.stdin(Stdio::null()).output().expect("run script (util-linux)");
    (String::from_utf8_lossy(&output.stdout).into_owned(), output.status.code().unwrap_or(-1))
}

/// The byte counts a terminal showed for the bar of `label`: each redraw's
/// `strata: <label> <done>/<total>` text, split at carriage returns, newlines and escapes.
fn bar_counts(screen: &str, label: &str) -> Vec<String> {
    let prefix = format!("strata: {label} ");
    screen
        .split(['\r', '\n', '\x1b'])
        .filter_map(|piece| piece.split_once(&prefix).map(|(_, rest)| rest))
        .filter(|rest| rest.contains(" ["))
        .filter_map(|rest| rest.split(" [").next().map(str::to_owned))
        .collect()
}

fn distinct(mut counts: Vec<String>) -> Vec<String> {
    counts.dedup();
    counts
}

#[test]
fn r11_a_save_and_a_restore_on_a_terminal_draw_a_moving_bar() {
    let scratch = Scratch::new();
    let store = SlowStore::start(Duration::from_millis(350));
    let cache = big_cache(&scratch, "a/cache");
    let k = key(&scratch, "progress_tty");
    let env = store.env(&[]);

    let args = ["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k];
    let (screen, code) = on_terminal(&scratch, &args, &env);
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("strata: snapshot SAVED"), "{screen}");
    let upload = distinct(bar_counts(&screen, "upload"));
    // Three parts of 5 MiB or less, one at a time, each 350 ms: 0, 5 and 10 MiB at least.
    assert!(upload.len() >= 3, "upload bar did not move: {upload:?}\n{screen:?}");
    assert!(upload.iter().all(|c| c.contains("/12.")), "no total: {upload:?}");
    assert!(upload.iter().any(|c| c.starts_with("5.00 MiB/")), "{upload:?}");

    let out = scratch.path("b/cache");
    let args = ["snapshot", "restore", "--cache-dir", &arg(&out), "--key", &k];
    let (screen, code) = on_terminal(&scratch, &args, &env);
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("strata: snapshot RESTORED"), "{screen}");
    let restore = distinct(bar_counts(&screen, "restore"));
    // Twelve 1 MiB parts, 350 ms each: the bar is redrawn with a new count several times.
    assert!(restore.len() >= 4, "restore bar did not move: {restore:?}\n{screen:?}");
    assert!(restore.iter().all(|c| c.contains(" MiB/12.") || c.starts_with("0 B/12.")));
    assert!(screen.contains("ETA"), "{screen:?}");
    assert!(!screen.contains(&store.server.secret_key), "secret on the terminal");
}

/// The plain progress lines of `label` in `stderr`.
fn progress_lines<'a>(stderr: &'a str, label: &str) -> Vec<&'a str> {
    let prefix = format!("strata: {label} ");
    stderr.lines().filter(|l| l.starts_with(&prefix)).collect()
}

#[test]
fn r11_in_a_log_progress_lines_come_at_most_once_per_interval() {
    let scratch = Scratch::new();
    let store = SlowStore::start(Duration::from_millis(300));
    let cache = big_cache(&scratch, "a/cache");
    let k = key(&scratch, "progress_log");
    let saved = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &arg(&cache), "--key", &k],
        &store.env_fast(&[]),
    );
    saved.assert_ok();

    // A 1 s interval (for the test), stderr a pipe: about 3.6 s of download, so at least
    // two lines, never more than one per elapsed second.
    let started = Instant::now();
    let restored = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &arg(&scratch.path("b/cache")), "--key", &k],
        &store.env(&[("STRATA_PROGRESS_INTERVAL", "1")]),
    );
    let elapsed = started.elapsed();
    restored.assert_ok();
    let lines = progress_lines(&restored.stderr, "restore");
    assert!(lines.len() >= 2, "{elapsed:?}: {}", restored.stderr);
    assert!(lines.len() as u64 <= elapsed.as_secs(), "{elapsed:?}: {lines:?}");
    for line in &lines {
        assert!(
            line.contains(" MiB / 12.") && line.contains(" %), ") && line.contains("/s"),
            "{line}"
        );
        assert!(!line.contains('\r') && !line.contains('\x1b'), "{line:?}");
    }

    // The default interval is 10 s: a restore shorter than that prints no progress line.
    let started = Instant::now();
    let restored = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &arg(&scratch.path("c/cache")), "--key", &k],
        &store.env_fast(&[]),
    );
    let elapsed = started.elapsed();
    restored.assert_ok();
    let lines = progress_lines(&restored.stderr, "restore");
    assert!(lines.len() as u64 <= elapsed.as_secs() / 10, "{elapsed:?}: {lines:?}");

    // Under GitHub Actions a terminal gets the plain lines too, and STRATA_PROGRESS=off
    // silences them.
    let out = arg(&scratch.path("d/cache"));
    let args = ["snapshot", "restore", "--cache-dir", &out, "--key", &k];
    let env = store.env(&[("GITHUB_ACTIONS", "true"), ("STRATA_PROGRESS_INTERVAL", "1")]);
    let (screen, code) = on_terminal(&scratch, &args, &env);
    assert_eq!(code, 0, "{screen}");
    assert!(bar_counts(&screen, "restore").is_empty(), "a bar under GitHub Actions: {screen:?}");
    assert!(!progress_lines(&screen.replace('\r', ""), "restore").is_empty(), "{screen:?}");
    let out = arg(&scratch.path("e/cache"));
    let args = ["snapshot", "restore", "--cache-dir", &out, "--key", &k];
    let env = store.env(&[("STRATA_PROGRESS", "off"), ("STRATA_PROGRESS_INTERVAL", "1")]);
    let (screen, code) = on_terminal(&scratch, &args, &env);
    assert_eq!(code, 0, "{screen}");
    assert!(!screen.contains("strata: restore "), "{screen:?}");
}
