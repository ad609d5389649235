//! The L1 action engine end to end (issue 2 "Tests"): the real `strata` binary, real
//! gcc/cmake/git, real `flock`, `rename` and `kill -9`, no mocks.
//!
//! Every test builds a [`TestContext`]: a unique temporary work directory (canonical path)
//! with its own cache root and event log. [`Action`] assembles `strata action run|explain`
//! flags; [`RunResult`] parses the `strata: HIT|MISS|SAVED|BYPASS … key=<64 hex>` lines
//! from stderr. Every child process is waited for with a bound ([`RUN_TIMEOUT`]).

mod artifacts;
mod cmake;
mod cmake_args;
mod concurrency;
mod counters;
mod crash;
mod digests;
mod entries;
mod events;
mod explain;
mod identity;
mod locks;
mod memo;
mod prune;
mod review;
mod tool_content;
mod updated;
mod wrappers;

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata::action::layout::{CacheRoot, EntryName};
use strata::action::{ActionKey, Domain};
use strata::record;

/// The binary under test (see [`crate::strata_exe`]).
pub use crate::strata_exe;
/// Longest any single strata (or helper) process may run before the test fails.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variables of the outer shell that must not leak into a test run.
const SCRUBBED_ENV: &[&str] = &[
    "STRATA_CACHE_ROOT",
    "STRATA_EVENT_LOG",
    "STRATA_ENTRY_LOCK_TIMEOUT_SECONDS",
    "STRATA_ACTION_LOCK_TIMEOUT_SECONDS",
    "STRATA_PUBLISH_LOCK_TIMEOUT_SECONDS",
    "STRATA_EXECUTABLE",
    "STRATA_REMOTE_STORE",
    "STRATA_REMOTE_WRITE",
    "STRATA_REMOTE_TIMEOUT",
    "STRATA_TRUSTED_KEYS",
    "STRATA_SIGNING_KEY",
];

/// A unique work directory with a separate cache root and event log.
pub struct TestContext {
    _tmp: tempfile::TempDir,
    /// The canonical work directory.
    pub root: PathBuf,
    /// `--cache-root` of every action built by this context.
    pub cache: PathBuf,
    /// `STRATA_EVENT_LOG` of every run.
    pub events: PathBuf,
}

impl TestContext {
    pub fn new() -> Self {
        let tmp = tempfile::Builder::new().prefix("strata-engine-").tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let cache = root.join("cache");
        let events = root.join("events.jsonl");
        Self { _tmp: tmp, root, cache, events }
    }

    /// `text` with the volatile parts replaced, for exact comparisons of human output:
    /// this context's work directory → `[ROOT]`, 64-hex keys → `[KEY]`, RFC 3339 UTC
    /// times → `[TIME]`, the value of `build_seconds=` → `[S]`.
    pub fn redact(&self, text: &str) -> String {
        let text = text.replace(&self.root.display().to_string(), "[ROOT]");
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < b.len() {
            let hex = b[i..]
                .iter()
                .take_while(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
                .count();
            let word_start = i == 0 || !b[i - 1].is_ascii_alphanumeric();
            if word_start && hex == 64 && b.get(i + 64).is_none_or(|c| !c.is_ascii_alphanumeric()) {
                out.push_str("[KEY]");
                i += 64;
            } else if let Some(len) = rfc3339_len(&b[i..]).filter(|_| word_start) {
                out.push_str("[TIME]");
                i += len;
            } else if b[i..].starts_with(b"build_seconds=") {
                out.push_str("build_seconds=[S]");
                i += "build_seconds=".len();
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1;
                }
            } else {
                let ch = text[i..].chars().next().unwrap();
                out.push(ch);
                i += ch.len_utf8();
            }
        }
        out
    }

    /// `<root>/<rel>`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes `bytes` to `<root>/<rel>`, creating parent directories.
    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        write_file(&p, bytes);
        p
    }

    /// A `strata` command with a scrubbed environment and this context's event log.
    pub fn strata(&self) -> Command {
        let mut cmd = Command::new(strata_exe());
        for v in SCRUBBED_ENV {
            cmd.env_remove(v);
        }
        cmd.env("STRATA_EVENT_LOG", &self.events);
        cmd.current_dir(&self.root);
        cmd
    }

    /// An action in the third_party domain writing into `output_dir` (bare profile).
    pub fn third_party(&self, unit: &str, output_dir: &Path) -> Action {
        Action::default()
            .flag("--cache-root", &self.cache)
            .flag("--domain", "third_party")
            .flag("--unit", unit)
            .flag("--output-dir", output_dir)
            .flag("--environment-profile", "bare")
    }

    /// A custom_operator action (bare profile) publishing into `publish`, with state in
    /// `state`, built in the private stage `stage`.
    pub fn custom(&self, op: &CustomOp<'_>) -> Action {
        Action::default()
            .flag("--cache-root", &self.cache)
            .flag("--domain", "custom_operator")
            .flag("--unit", op.unit)
            .flag("--soc", op.soc)
            .flag("--operator", op.operator)
            .flag("--action", op.action)
            .flag("--operator-source", op.source)
            .flag("--output-dir", op.stage)
            .flag("--publish-dir", op.publish)
            .flag("--publish-state-dir", op.state)
            .flag("--environment-profile", "bare")
    }

    /// Runs `strata action run` and waits for it (bounded).
    pub fn run(&self, action: &Action) -> RunResult {
        self.exec(action, &["action", "run"])
    }

    /// Runs `strata action explain [--json]` with the same flags as `run`.
    pub fn explain(&self, action: &Action, json: bool) -> RunResult {
        if json {
            self.exec(action, &["action", "explain", "--json"])
        } else {
            self.exec(action, &["action", "explain"])
        }
    }

    /// Runs `strata action prune --cache-root <cache> <extra>`.
    pub fn prune(&self, extra: &[&str]) -> RunResult {
        let mut cmd = self.strata();
        cmd.args(["action", "prune", "--cache-root"]).arg(&self.cache).args(extra);
        run_bounded(cmd, RUN_TIMEOUT)
    }

    fn exec(&self, action: &Action, sub: &[&str]) -> RunResult {
        run_bounded(self.command(action, sub), RUN_TIMEOUT)
    }

    /// The command `strata <sub> <flags> -- <build command>` (not started).
    pub fn command(&self, action: &Action, sub: &[&str]) -> Command {
        let mut cmd = self.strata();
        cmd.args(sub).args(&action.args).arg("--").args(&action.command);
        for (k, v) in &action.env {
            cmd.env(k, v);
        }
        if let Some(dir) = &action.cwd {
            cmd.current_dir(dir);
        }
        cmd
    }

    /// Starts `strata action run` without waiting (stdout/stderr piped).
    pub fn spawn(&self, action: &Action) -> Child {
        let mut cmd = self.command(action, &["action", "run"]);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.spawn().unwrap()
    }

    /// Every event of the log, parsed (an absent log is empty).
    pub fn events(&self) -> Vec<serde_json::Value> {
        match std::fs::read_to_string(&self.events) {
            Ok(text) => text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event {l:?}: {e}")))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("{e}"),
        }
    }

    /// The `cache_result` statuses of the event log, in order.
    pub fn event_statuses(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter(|e| e["event"] == "cache_result")
            .map(|e| e["status"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The entry location of a third_party action.
    pub fn third_party_entry(&self, unit: &str, key: &str) -> strata::action::EntryLocation {
        let key: ActionKey = key.parse().unwrap();
        let name = EntryName {
            domain: Domain::ThirdParty,
            unit,
            soc: None,
            operator: None,
            action: None,
            operator_text_hash: None,
        };
        CacheRoot::new(&self.cache).unwrap().entry(&name, &key).unwrap()
    }

    /// `<cache>/.updated`.
    pub fn updated_marker(&self) -> PathBuf {
        self.cache.join(".updated")
    }

    /// Every directory under the cache whose name contains `marker` (e.g. `.tmp-`).
    pub fn cache_dirs_containing(&self, marker: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if !self.cache.exists() {
            return out;
        }
        for e in walkdir::WalkDir::new(&self.cache) {
            let e = e.unwrap();
            if e.file_type().is_dir() && e.file_name().to_string_lossy().contains(marker) {
                out.push(e.path().to_path_buf());
            }
        }
        out
    }
}

/// Names of one custom_operator action.
pub struct CustomOp<'a> {
    pub unit: &'a str,
    pub soc: &'a str,
    pub operator: &'a str,
    pub action: &'a str,
    pub source: &'a Path,
    pub stage: &'a Path,
    pub publish: &'a Path,
    pub state: &'a Path,
}

/// The flags, build command and environment of one `strata action run`.
#[derive(Debug, Clone, Default)]
pub struct Action {
    args: Vec<OsString>,
    command: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
}

impl Action {
    /// Adds the switch `name` (one argument).
    pub fn switch(mut self, name: &str) -> Self {
        self.args.push(name.into());
        self
    }

    /// Adds `name value` (as two arguments).
    pub fn flag(mut self, name: &str, value: impl AsRef<OsStr>) -> Self {
        self.args.push(name.into());
        self.args.push(value.as_ref().to_owned());
        self
    }

    /// Sets the build command.
    pub fn cmd<S: AsRef<OsStr>>(mut self, argv: &[S]) -> Self {
        self.command = argv.iter().map(|a| a.as_ref().to_owned()).collect();
        self
    }

    /// `sh -c <script>` as the build command (extra words become `$0`, `$1`, …).
    pub fn sh(self, script: &str) -> Self {
        self.cmd(&["sh", "-c", script])
    }

    /// Sets an environment variable of the strata process.
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Self {
        self.env.push((k.as_ref().to_owned(), v.as_ref().to_owned()));
        self
    }

    /// Runs strata in `dir`.
    pub fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_path_buf());
        self
    }
}

/// The result of one strata process.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl RunResult {
    /// `HIT`, `MISS`, `SAVED`, `BYPASS`, in the order printed.
    pub fn statuses(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix("strata: "))
            .filter_map(|l| l.split(' ').next())
            .filter(|w| matches!(*w, "HIT" | "MISS" | "SAVED" | "BYPASS"))
            .collect()
    }

    /// The `key=` of the status lines (all must agree).
    pub fn key(&self) -> String {
        let keys: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("strata: "))
            .filter_map(|l| l.split(' ').find_map(|w| w.strip_prefix("key=")))
            .collect();
        assert!(!keys.is_empty(), "no key in:\n{}", self.stderr);
        assert!(keys.iter().all(|k| *k == keys[0]), "keys differ:\n{}", self.stderr);
        assert_eq!(keys[0].len(), 64, "{}", self.stderr);
        assert!(keys[0].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        keys[0].to_owned()
    }

    /// The `strata: WARNING` lines.
    pub fn warnings(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| l.starts_with("strata: WARNING")).collect()
    }

    /// Asserts exit code 0 and exactly these statuses; returns self for chaining.
    #[track_caller]
    pub fn expect(&self, statuses: &[&str]) -> &Self {
        assert_eq!(
            (self.code, self.statuses()),
            (0, statuses.to_vec()),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts the exit code; returns self.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }

    /// Asserts stderr contains `needle`.
    #[track_caller]
    pub fn expect_stderr(&self, needle: &str) -> &Self {
        assert!(self.stderr.contains(needle), "{needle:?} not in stderr:\n{}", self.stderr);
        self
    }
}

/// Runs `cmd` to completion with captured output, killing it and failing the test after
/// `limit`.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> RunResult {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    wait_bounded(child, limit)
}

/// Waits for a child started with piped stdout/stderr, bounded by `limit`.
pub fn wait_bounded(mut child: Child, limit: Duration) -> RunResult {
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
            panic!("process did not finish within {limit:?}; stderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    let code = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => -1,
    };
    RunResult { code, stdout, stderr }
}

/// A process holding an exclusive `flock` on a file (util-linux `flock`), released on drop.
pub struct LockHolder {
    child: Child,
}

impl LockHolder {
    /// Locks `path` (creating it and its parent) and returns once the lock is held.
    pub fn hold(path: &Path) -> Self {
        require_tool("flock", "apt-get install util-linux");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut child = Command::new("flock")
            .args(["--exclusive", "--no-fork"])
            .arg(path)
            .args(["sh", "-c", "echo locked; exec sleep 60"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(10)).expect("flock did not take the lock");
        assert_eq!(line.trim(), "locked");
        Self { child }
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        // With --no-fork one process (sh, then sleep) holds the lock: killing it releases it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fails with an install hint if `tool` is not on PATH (tests are never skipped).
pub fn require_tool(tool: &str, hint: &str) {
    let found = std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(tool)).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
    });
    assert!(
        found,
        "`{tool}` is required by the engine tests and is not on PATH; install it: {hint}"
    );
}

/// Length of an RFC 3339 UTC time (`2026-01-02T03:04:05[.123…]Z`) at the start of `b`.
fn rfc3339_len(b: &[u8]) -> Option<usize> {
    let shape = b"dddd-dd-ddTdd:dd:dd";
    if b.len() < shape.len() {
        return None;
    }
    for (c, s) in b.iter().zip(shape) {
        let ok = if *s == b'd' { c.is_ascii_digit() } else { c == s };
        if !ok {
            return None;
        }
    }
    let mut n = shape.len();
    if b.get(n) == Some(&b'.') {
        n += 1;
        while b.get(n).is_some_and(u8::is_ascii_digit) {
            n += 1;
        }
    }
    (b.get(n) == Some(&b'Z')).then_some(n + 1)
}

/// Writes `bytes` to `path`, creating parent directories.
pub fn write_file(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Writes an executable `#!/bin/sh` script.
pub fn write_script(path: &Path, body: &str) {
    write_file(path, format!("#!/bin/sh\n{body}\n"));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `cp -a src dst` (keeps symlinks, modes and times).
pub fn copy_tree(src: &Path, dst: &Path) {
    let st = Command::new("cp").arg("-a").arg(src).arg(dst).status().unwrap();
    assert!(st.success(), "cp -a {} {}", src.display(), dst.display());
}

/// Number of lines of a counter file (0 if absent).
pub fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|s| s.lines().count()).unwrap_or(0)
}

/// `len` deterministic pseudo-random bytes.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut data = vec![0u8; len];
    rng.fill(&mut data);
    data
}

/// Every regular file under `dir` as (relative path, bytes), sorted.
pub fn tree_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read(e.path()).unwrap()));
        }
    }
    out
}

/// Loads an entry's `manifest.json` as a verified `strata.action_entry` record.
pub fn load_manifest(entry_dir: &Path) -> strata::action::entry::EntryManifest {
    let bytes = std::fs::read(entry_dir.join("manifest.json")).unwrap();
    record::load_as(&bytes, &strata::action::entry::ENTRY_SCHEMA).unwrap().1
}
