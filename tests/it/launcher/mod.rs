//! The compiler launcher end to end (issue 10): the real `strata` binary as `strata <compiler>
//! ARGS`, real gcc/g++ (and clang when installed), real cmake, make and ninja, ccache for
//! the documented difference, no mocks.
//!
//! Every test has its own [`TestContext`] (a unique canonical work directory and cache
//! root). [`Launcher`] runs `strata <compiler> …` with the settings a build would put in
//! the environment (`STRATA_CACHE_ROOT`, `STRATA_BASE_DIRS`); [`Launcher::compile`] also
//! reads the counters before and after, so each run's outcome (`hit`, `miss`,
//! `uncacheable:<reason>`, `compile_failed`) is known exactly. Every process is bounded in
//! time ([`RUN_TIMEOUT`]).

mod archive;
mod basics;
mod cmake;
mod concurrency;
mod corruption;
mod debug;
mod exact;
mod headers;
mod integrity;
mod observed;
mod relocation;
mod snapshot;
mod trace;
mod uncacheable;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::engine::{
    RUN_TIMEOUT, RunResult, TestContext, copy_tree, require_tool, run_bounded, strata_exe,
    write_file,
};
use strata::digest::{ContentDigest, DigestAlgorithm};
use strata::launcher::entry::{CompileKey, CompileManifest, EntryPlace};

/// Environment variables of the outer shell that must not reach a launcher or compiler run
/// (they change keys, outcomes or the compiler's outputs).
const SCRUBBED_ENV: &[&str] = &[
    "STRATA_CACHE_ROOT",
    "STRATA_BASE_DIRS",
    "STRATA_DIGEST",
    "STRATA_TOOL_CONTENT",
    "STRATA_DISABLE",
    "STRATA_LOG",
    "STRATA_EVENT_LOG",
    "STRATA_REMOTE_STORE",
    "STRATA_REMOTE_WRITE",
    "STRATA_REMOTE_TIMEOUT",
    "STRATA_TRUSTED_KEYS",
    "STRATA_SIGNING_KEY",
    // A test names the working directory by `current_dir`; a shell's `PWD` only where set.
    "PWD",
    "SOURCE_DATE_EPOCH",
    "DEPENDENCIES_OUTPUT",
    "SUNPRO_DEPENDENCIES",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
    "GCC_COLORS",
    "CCACHE_DIR",
    "CCACHE_BASEDIR",
    "CCACHE_CONFIGPATH",
    "MAKEFLAGS",
    "MFLAGS",
];

/// The launcher settings of one build: cache root, base directories, extra environment.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// `STRATA_CACHE_ROOT`.
    pub cache: PathBuf,
    /// `STRATA_BASE_DIRS` (joined with `:`), if any.
    pub base_dirs: Vec<PathBuf>,
    env: Vec<(OsString, OsString)>,
}

impl Launcher {
    /// Launcher runs storing into `cache`, without base directories.
    pub fn new(cache: &Path) -> Self {
        Self { cache: cache.to_path_buf(), base_dirs: Vec::new(), env: Vec::new() }
    }

    /// The same settings with these base directories.
    pub fn base_dirs(mut self, dirs: &[&Path]) -> Self {
        self.base_dirs = dirs.iter().map(|d| d.to_path_buf()).collect();
        self
    }

    /// The same settings with one more environment variable.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env.push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The environment a build gives the launcher (applied to `cmd`, scrubbed first).
    pub fn apply(&self, cmd: &mut Command) {
        scrub(cmd);
        cmd.env("STRATA_CACHE_ROOT", &self.cache);
        if !self.base_dirs.is_empty() {
            cmd.env("STRATA_BASE_DIRS", std::env::join_paths(&self.base_dirs).unwrap());
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }

    /// `strata <argv…>` in `cwd` (not started).
    pub fn command<S: AsRef<OsStr>>(&self, cwd: &Path, argv: &[S]) -> Command {
        let mut cmd = Command::new(strata_exe());
        cmd.args(argv).current_dir(cwd);
        self.apply(&mut cmd);
        cmd
    }

    /// Runs `strata <argv…>` in `cwd` (bounded).
    pub fn run<S: AsRef<OsStr>>(&self, cwd: &Path, argv: &[S]) -> RunResult {
        run_bounded(self.command(cwd, argv), RUN_TIMEOUT)
    }

    /// Runs `strata <argv…>` in `cwd` and returns its result with its outcome: the one
    /// counter the run added one to (fails the test unless exactly one counter moved by
    /// one; only for tests that run one launcher at a time on this cache).
    #[track_caller]
    pub fn compile<S: AsRef<OsStr>>(&self, cwd: &Path, argv: &[S]) -> (RunResult, String) {
        let before = self.counters();
        let result = self.run(cwd, argv);
        let after = self.counters();
        let moved: Vec<(&String, u64)> = after
            .iter()
            .map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0)))
            .filter(|(_, d)| *d != 0)
            .collect();
        assert!(
            moved.len() == 1 && moved[0].1 == 1,
            "one launcher run must count exactly one outcome, counted {moved:?}\nstderr:\n{}",
            result.stderr
        );
        let outcome = moved[0].0.clone();
        (result, outcome)
    }

    /// [`Launcher::compile`], asserting exit code 0 and the outcome.
    #[track_caller]
    pub fn expect<S: AsRef<OsStr>>(&self, cwd: &Path, argv: &[S], outcome: &str) -> RunResult {
        let (result, got) = self.compile(cwd, argv);
        assert_eq!(
            (result.code, got.as_str()),
            (0, outcome),
            "strata {:?} in {}\nstdout:\n{}\nstderr:\n{}",
            argv.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>(),
            cwd.display(),
            result.stdout,
            result.stderr
        );
        result
    }

    /// The launcher counters of the cache (all shards summed).
    pub fn counters(&self) -> BTreeMap<String, u64> {
        counters(&self.cache)
    }

    /// The compile entries in the cache.
    pub fn entries(&self) -> Vec<Entry> {
        entries(&self.cache)
    }
}

/// Removes [`SCRUBBED_ENV`] from `cmd`.
pub fn scrub(cmd: &mut Command) {
    for v in SCRUBBED_ENV {
        cmd.env_remove(v);
    }
}

/// The launcher counters of `cache`, read with the library's reader.
pub fn counters(cache: &Path) -> BTreeMap<String, u64> {
    let root = strata::action::layout::CacheRoot::new(cache).unwrap();
    strata::l1::counters::read(&root).remove(strata::l1::counters::COMPILE).unwrap_or_default()
}

/// `names` → counts, for comparing whole counter maps.
pub fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// Runs the compiler itself (`argv[0]` from PATH) in `cwd` with the scrubbed environment
/// and `env` (bounded).
pub fn plain<S: AsRef<OsStr>>(cwd: &Path, argv: &[S], env: &[(&str, &str)]) -> RunResult {
    let mut cmd = Command::new(argv[0].as_ref());
    cmd.args(&argv[1..]).current_dir(cwd);
    scrub(&mut cmd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_bounded(cmd, RUN_TIMEOUT)
}

/// [`plain`], asserting success; returns the bytes of `output` (relative to `cwd`), which
/// it then removes, so the launcher run that follows has to produce it again.
#[track_caller]
pub fn plain_object<S: AsRef<OsStr>>(cwd: &Path, argv: &[S], output: &str) -> Vec<u8> {
    let r = plain(cwd, argv, &[]);
    r.expect_code(0);
    let path = cwd.join(output);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    bytes
}

/// `path` as a `String` (test paths are UTF-8).
pub fn s(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

/// Reads a file, naming it on failure.
#[track_caller]
pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Asserts two object files are byte-identical (with a short report of where they differ).
#[track_caller]
pub fn assert_same_bytes(what: &str, got: &[u8], want: &[u8]) {
    if got != want {
        let at =
            got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: not byte-identical ({} vs {} bytes, first difference at offset {at})",
            got.len(),
            want.len()
        );
    }
}

/// One compile entry of a cache.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The entry directory (`actions-v1/compile/<2 hex>/<key>`).
    pub dir: PathBuf,
    /// Its key.
    pub key: String,
}

impl Entry {
    /// The entry's key as the library's type (its directory name is 64 lowercase hex).
    pub fn compile_key(&self) -> CompileKey {
        CompileKey::parse(&self.key).unwrap_or_else(|| panic!("{}: not a key", self.dir.display()))
    }

    /// The entry's manifest, loaded and verified by the library.
    pub fn manifest(&self, cache: &Path) -> CompileManifest {
        let root = strata::action::layout::CacheRoot::new(cache).unwrap();
        let key = self.compile_key();
        strata::launcher::entry::load(&EntryPlace::new(&root, &key), &key)
            .unwrap_or_else(|e| panic!("{}: {e}", self.dir.display()))
            .unwrap_or_else(|| panic!("{}: no manifest", self.dir.display()))
    }

    /// The stored file of the first candidate's output of `role`.
    pub fn output(&self, cache: &Path, role: &str) -> PathBuf {
        let manifest = self.manifest(cache);
        let out = manifest.candidates[0]
            .outputs
            .iter()
            .find(|o| o.role == role)
            .unwrap_or_else(|| panic!("no {role} output in {}", self.dir.display()));
        self.dir.join("objects").join(out.digest.to_hex())
    }
}

/// Every compile entry under `cache`, sorted by key.
pub fn entries(cache: &Path) -> Vec<Entry> {
    let compile = cache.join("actions-v1/compile");
    let mut out = Vec::new();
    let Ok(prefixes) = std::fs::read_dir(&compile) else { return out };
    for prefix in prefixes {
        let prefix = prefix.unwrap().path();
        for e in std::fs::read_dir(&prefix).unwrap() {
            let dir = e.unwrap().path();
            let key = dir.file_name().unwrap().to_string_lossy().into_owned();
            out.push(Entry { dir, key });
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// Checks every compile entry of `cache`: its manifest loads and verifies, and every file
/// under `objects/` has the digest its name says (BLAKE3). Returns the number of entries.
#[track_caller]
pub fn assert_entries_sound(cache: &Path) -> usize {
    let all = entries(cache);
    for entry in &all {
        let manifest = entry.manifest(cache);
        assert!(!manifest.candidates.is_empty(), "{}: no candidate", entry.dir.display());
        for c in &manifest.candidates {
            for o in c.outputs.iter().chain(&c.stdout).chain(&c.stderr) {
                assert!(
                    entry.dir.join("objects").join(o.digest.to_hex()).is_file(),
                    "{}: output {} missing",
                    entry.dir.display(),
                    o.role
                );
            }
        }
        for object in std::fs::read_dir(entry.dir.join("objects")).unwrap() {
            let path = object.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, &read(&path));
            assert_eq!(digest.to_hex(), name, "{} holds other bytes", path.display());
        }
    }
    all.len()
}

/// A 64-hex-free, path-free rendering of a depfile for comparisons: its rules parsed.
pub fn depfile_rules(path: &Path) -> Vec<strata::launcher::depfile::Rule> {
    strata::launcher::depfile::parse(&read(path)).unwrap()
}

/// Every file under `dir` (relative paths), for comparing what two runs left behind.
pub fn tree_names(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| !e.file_type().is_dir())
        .map(|e| e.path().strip_prefix(dir).unwrap().to_path_buf())
        .collect();
    out.sort();
    out
}

/// The launcher's stderr without strata's own lines (`strata: …`).
pub fn compiler_stderr(stderr: &str) -> String {
    stderr.split_inclusive('\n').filter(|l| !l.starts_with("strata: ")).collect()
}

/// Runs the plain compiler, then the launcher, with the same command and environment in
/// `cwd`, and asserts the launcher wrote exactly what the plain compiler wrote: each of
/// `outputs` (relative to `cwd`) byte for byte, no other file, the same exit code, stdout
/// and stderr (strata's own lines left out). Returns the launcher's outcome.
#[track_caller]
pub fn same_as_plain<S: AsRef<OsStr>>(
    l: &Launcher,
    cwd: &Path,
    argv: &[S],
    outputs: &[&str],
    env: &[(&str, &str)],
) -> String {
    let argv: Vec<&OsStr> = argv.iter().map(AsRef::as_ref).collect();
    let shown = argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
    let want = plain(cwd, &argv, env);
    let want_files: Vec<Vec<u8>> = outputs
        .iter()
        .map(|o| std::fs::read(cwd.join(o)).unwrap_or_else(|e| panic!("plain {shown}: {o}: {e}")))
        .collect();
    let want_tree = tree_names(cwd);
    for o in outputs {
        std::fs::remove_file(cwd.join(o)).unwrap();
    }
    let mut l = l.clone();
    for (k, v) in env {
        l = l.env(k, v);
    }
    let (got, outcome) = l.compile(cwd, &argv);
    assert_eq!(got.code, want.code, "{shown} ({outcome}): exit code\n{}", got.stderr);
    assert_eq!(got.stdout, want.stdout, "{shown} ({outcome}): stdout");
    assert_eq!(compiler_stderr(&got.stderr), want.stderr, "{shown} ({outcome}): stderr");
    for (o, want) in outputs.iter().zip(&want_files) {
        let got =
            std::fs::read(cwd.join(o)).unwrap_or_else(|e| panic!("{shown} ({outcome}): {o}: {e}"));
        if got != *want && (o.ends_with(".d") || o.ends_with(".json") || o.ends_with(".lst")) {
            panic!(
                "{shown} ({outcome}): {o} differs:\n--- plain\n{}\n--- launcher\n{}",
                String::from_utf8_lossy(want),
                String::from_utf8_lossy(&got)
            );
        }
        assert_same_bytes(&format!("{shown} ({outcome}): {o}"), &got, want);
    }
    assert_eq!(tree_names(cwd), want_tree, "{shown} ({outcome}): the files left behind");
    outcome
}
