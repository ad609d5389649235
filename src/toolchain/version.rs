//! Version identity: a compiler's `--version` output, memoised so a HIT spawns no compiler.
//!
//! A tool is resolved like `which` (a value containing `/` is used as a path after `~`
//! expansion; otherwise `PATH` is searched for an executable file) and canonicalised
//! (symlinks resolved). Its identity is the output of `<canonical> --version` with stdout
//! and stderr merged, CRLF/CR turned into LF, surrounding whitespace trimmed; output that
//! is not UTF-8 is recorded as `sha256:<hex>` of the raw bytes. The run is killed after
//! [`VERSION_TIMEOUT`]. A non-zero exit status or empty output is an error
//! ([`Error::ToolVersion`]), never an identity.
//!
//! # Memo
//! Outputs are memoised in `<memo_dir>/<sha256(canonical path)>.json`, a
//! `strata.tool_memo` record holding the canonical path and the stamp of the executable
//! when it was run (size in bytes, mtime and ctime in nanoseconds, inode, device and mode:
//! the one stored form of stamps, `crate::content::memo`). A memo is used only if the path
//! and the whole stamp still match `stat` of the canonical path (a memo of an earlier
//! release, which did not store the mode, is run again once); anything else reruns the tool and
//! rewrites the memo, so a replaced or upgraded binary is never served a stale version.
//! ctime cannot be set from user space, so even a binary replaced with a forged mtime and
//! the same size is noticed.
//!
//! # Limitations
//! The memo watches the driver binary only. A compiler whose driver stays byte-identical
//! while its back end (e.g. `cc1plus`) changes keeps its memo; Debian and most toolchains
//! update both together, and a changed back end without a changed driver would also not
//! change `--version` output, so the unmemoised identity would not notice either.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Error;
use crate::content::memo::{read_memo, write_memo};
use crate::digest::Sha256Digest;
use crate::fs::{self, FileStamp};
use crate::record::{self, Envelope, Schema};

/// How long `--version` may run.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Schema of a tool memo record.
pub const TOOL_MEMO_SCHEMA: Schema = Schema { name: "strata.tool_memo", version: 1, features: &[] };

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Memo {
    path: String,
    /// The tool's stamp, in the one stored form of stamps (`crate::content::memo`).
    #[serde(flatten)]
    stamp: FileStamp,
    version: String,
}

/// Compiler driver names whose `--version` is safe to run and identifies the toolchain.
const COMPILER_NAMES: &[&str] = &[
    "cc", "c++", "gcc", "g++", "cpp", "c89", "c99", "clang", "clang++", "clang-cl", "icx", "icpx",
    "icc", "icpc", "nvcc", "hipcc", "emcc", "em++", "mpicc", "mpicxx", "mpic++", "armclang",
    "bisheng", "ccec", "gfortran",
];

/// Compiler wrappers: as the target of a compiler symlink (`/usr/lib/ccache/gcc` →
/// `/usr/bin/ccache`) they run the next compiler of that name on `PATH`, which is the
/// toolchain: identity looks through them. (As a command's program, `ccache gcc …`, see
/// `crate::action::identity::wrapper`.)
const WRAPPERS: &[&str] = &["ccache", "sccache", "distcc", "icecc", "buildcache"];

/// Whether `program` (a name or path, as a build gives it) names another compiler cache or
/// distributor by its file name (`ccache`, `sccache`, `distcc`, `icecc`, `buildcache`), as
/// `strata ccache gcc …` does: the compiler is its first argument, not the program.
pub fn is_compiler_wrapper(program: &std::ffi::OsStr) -> bool {
    program.to_str().is_some_and(|p| WRAPPERS.contains(&basename(p)))
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// True if `argv0` names a C/C++ compiler driver: one of the known names (gcc, g++, cc,
/// c++, cpp, c89, c99, clang, clang++, clang-cl, icx, icpx, icc, icpc, nvcc, hipcc, emcc,
/// em++, mpicc, mpicxx, mpic++, armclang, bisheng, ccec, gfortran), optionally with a target
/// prefix ending in `-` (`x86_64-linux-gnu-gcc`), a version suffix (`gcc-12`, `clang++-17`)
/// and a `-win32`/`-posix` thread-model suffix (MinGW).
pub fn looks_like_compiler(argv0: &str) -> bool {
    let mut name = basename(argv0);
    for suffix in ["-win32", "-posix"] {
        name = name.strip_suffix(suffix).unwrap_or(name);
    }
    let unversioned = match name.rsplit_once('-') {
        Some((stem, ver))
            if !ver.is_empty() && ver.bytes().all(|b| b.is_ascii_digit() || b == b'.') =>
        {
            stem
        }
        _ => name,
    };
    COMPILER_NAMES.iter().any(|known| {
        unversioned == *known
            || unversioned.strip_suffix(known).is_some_and(|prefix| prefix.ends_with('-'))
    })
}

/// Finds a tool: a value with `/` is a path (after `~` expansion) and must exist; otherwise
/// the directories of `path_var` (`PATH` when `None`) are searched for an executable
/// regular file. A candidate that resolves to a compiler wrapper (a ccache masquerade
/// directory) is passed over for the next one of that name on the search path, which is
/// what the wrapper itself would run. Returns the canonical path.
pub fn resolve_tool(spec: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let is_wrapper = |canon: &Path| is_compiler_wrapper(canon.as_os_str());
    let name = if spec.contains('/') {
        let mut p = fs::expand_tilde(Path::new(spec));
        // A program path that is not UTF-8 arrives in the name encoding: use its bytes.
        if fs::symlink_metadata_opt(&p).ok().flatten().is_none()
            && let Ok(bytes) = fs::name::decode_os(spec)
        {
            p = fs::expand_tilde(Path::new(&bytes));
        }
        let canon = fs::metadata(&p)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|_| fs::canonicalize(&p).ok())?;
        if !is_wrapper(&canon) {
            return Some(canon);
        }
        basename(spec).to_owned()
    } else {
        spec.to_owned()
    };
    let env_path = crate::config::var_raw("PATH");
    let path = path_var.or(env_path.as_deref())?;
    std::env::split_paths(path)
        .map(|dir| dir.join(&name))
        .filter(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
        .filter_map(|p| fs::canonicalize(&p).ok())
        .find(|canon| !is_wrapper(canon))
}

/// The version text of the tool at `canonical`, from the memo when it is fresh.
///
/// # Errors
/// [`Error::ToolVersion`] if the tool cannot be started, times out or prints nothing.
pub fn tool_version(canonical: &Path, memo_dir: Option<&Path>) -> Result<String, Error> {
    memoised(canonical, memo_dir, "", || run_version(canonical))
}

/// A text `compute` derives from the tool at `canonical` (its `--version`, what it reports
/// about itself), memoised under `memo_dir` by the tool's stamp (see the module docs):
/// `<memo_dir>/<what><sha256 of the path>.json`, where `what` names the kind of text
/// (`""` for the version, else e.g. `"family-v1-"`). A memo whose stamp differs from the
/// tool's now, or that does not load, is recomputed and rewritten; a memo that cannot be
/// written only costs a run next time.
///
/// # Errors
/// [`Error::Fs`] when the tool cannot be `stat`ed; whatever `compute` returns.
pub fn memoised(
    canonical: &Path,
    memo_dir: Option<&Path>,
    what: &str,
    compute: impl FnOnce() -> Result<String, Error>,
) -> Result<String, Error> {
    let meta = fs::metadata(canonical)?;
    let memo_path = memo_dir.map(|d| {
        let key = Sha256Digest::of_bytes(canonical.as_os_str().as_encoded_bytes());
        d.join(format!("{what}{}.json", key.to_hex()))
    });
    if let Some(path) = &memo_path
        && let Some(bytes) = read_memo(path)
        && let Ok((_, memo)) = record::load_as::<Memo>(&bytes, &TOOL_MEMO_SCHEMA)
        && memo.path == fs::name::encode_os(canonical.as_os_str())
        && memo.stamp == FileStamp::of(&meta)
    {
        return Ok(memo.version);
    }
    let version = compute()?;
    if let Some(path) = &memo_path {
        let memo = Memo {
            path: fs::name::encode_os(canonical.as_os_str()),
            stamp: FileStamp::of(&meta),
            version: version.clone(),
        };
        // A memo that cannot be written only costs a spawn next time.
        if let Ok(env) = Envelope::seal(&TOOL_MEMO_SCHEMA, Vec::new(), &memo)
            && let Err(e) = write_memo(path, &env.to_bytes(), 0o644)
        {
            tracing::debug!("tool memo not written: {e}");
        }
    }
    Ok(version)
}

fn run_version(canonical: &Path) -> Result<String, Error> {
    let fail = |reason: String| Error::ToolVersion { tool: canonical.to_path_buf(), reason };
    let (mut reader, writer) =
        std::io::pipe().map_err(|e| fail(format!("cannot create a pipe: {e}")))?;
    let writer2 = writer.try_clone().map_err(|e| fail(format!("cannot create a pipe: {e}")))?;
    let mut cmd = Command::new(canonical);
    cmd.arg("--version").stdin(Stdio::null()).stdout(writer).stderr(writer2);
    let mut child = cmd.spawn().map_err(|e| fail(format!("cannot start it: {e}")))?;
    drop(cmd);
    let reader_thread = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = reader.read_to_end(&mut out);
        out
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= VERSION_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!(
                    "`--version` did not finish within {}s",
                    VERSION_TIMEOUT.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(fail(format!("cannot wait for it: {e}"))),
        }
    };
    let out = reader_thread.join().unwrap_or_default();
    if !status.success() {
        // An error message is not a version: hashing it would make identity depend on
        // whatever went wrong (a missing library, a licence server, …).
        let said = String::from_utf8_lossy(&out);
        let first = said.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
        let how = match status.code() {
            Some(code) => format!("exit status {code}"),
            None => "a signal".to_owned(),
        };
        return Err(fail(format!("`--version` failed with {how}: {first:?}")));
    }
    let text = match String::from_utf8(out) {
        Ok(s) => s.replace("\r\n", "\n").replace('\r', "\n").trim().to_owned(),
        Err(e) => format!("sha256:{}", Sha256Digest::of_bytes(e.as_bytes()).to_hex()),
    };
    if text.is_empty() {
        return Err(fail("`--version` printed nothing".into()));
    }
    Ok(text)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn memo_is_used_until_the_binary_changes() {
        let d = tempfile::tempdir().unwrap();
        let memo = d.path().join("memo");
        let counter = d.path().join("count");
        let tool = script(
            d.path(),
            "cc",
            &format!("echo x >> {}; echo 'cc 1.0'; echo warn >&2", counter.display()),
        );
        let canon = std::fs::canonicalize(&tool).unwrap();
        assert_eq!(tool_version(&canon, Some(&memo)).unwrap(), "cc 1.0\nwarn");
        assert_eq!(tool_version(&canon, Some(&memo)).unwrap(), "cc 1.0\nwarn");
        assert_eq!(std::fs::read_to_string(&counter).unwrap().lines().count(), 1);
        // Same size, different content: ctime/mtime change invalidates the memo.
        std::thread::sleep(Duration::from_millis(20));
        script(
            d.path(),
            "cc",
            &format!("echo x >> {}; echo 'cc 2.0'; echo warn >&2", counter.display()),
        );
        assert_eq!(tool_version(&canon, Some(&memo)).unwrap(), "cc 2.0\nwarn");
        assert_eq!(std::fs::read_to_string(&counter).unwrap().lines().count(), 2);
    }

    #[test]
    fn compiler_names() {
        for yes in [
            "gcc",
            "/usr/bin/g++",
            "x86_64-linux-gnu-gcc-12",
            "clang++-17",
            "cc",
            "nvcc",
            "mpicxx",
            "icpc",
            "x86_64-w64-mingw32-gcc-win32",
            "c99",
        ] {
            assert!(looks_like_compiler(yes), "{yes}");
        }
        for no in ["sh", "make", "cmake", "ccache", "./build.sh", "gcc-ar", "mycc", "python3"] {
            assert!(!looks_like_compiler(no), "{no}");
        }
    }

    #[test]
    fn masquerade_wrappers_are_looked_through() {
        let d = tempfile::tempdir().unwrap();
        let wrap = d.path().join("wrap");
        let real = d.path().join("real");
        std::fs::create_dir_all(&wrap).unwrap();
        std::fs::create_dir_all(&real).unwrap();
        let ccache = script(d.path(), "ccache", "echo ccache 4");
        std::os::unix::fs::symlink(&ccache, wrap.join("gcc")).unwrap();
        let gcc = script(&real, "gcc", "echo real gcc 13");
        let path = std::env::join_paths([&wrap, &real]).unwrap();
        let found = resolve_tool("gcc", Some(&path)).unwrap();
        assert_eq!(found, std::fs::canonicalize(&gcc).unwrap());
        // An explicit path to the masquerade link also finds the real compiler.
        let explicit = wrap.join("gcc");
        assert_eq!(resolve_tool(explicit.to_str().unwrap(), Some(&path)).unwrap(), found);
    }

    #[test]
    fn silent_tool_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let tool = script(d.path(), "quiet", "exit 0");
        assert!(matches!(tool_version(&tool, None), Err(Error::ToolVersion { .. })));
        let failing = script(d.path(), "failing", "echo 'bad option' >&2; exit 2");
        let err = tool_version(&failing, Some(&d.path().join("memo"))).unwrap_err();
        assert!(err.to_string().contains("exit status 2: \"bad option\""), "{err}");
        assert!(!d.path().join("memo").exists(), "a failure is never memoised");
        assert!(resolve_tool("definitely-not-a-tool-xyz", None).is_none());
        assert_eq!(
            resolve_tool(tool.to_str().unwrap(), None),
            Some(std::fs::canonicalize(&tool).unwrap())
        );
    }
}
