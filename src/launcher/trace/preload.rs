//! `libstrata_preload.so`, the fast path for a traced compile's file opens under seccomp
//! user notification (issue 28; the library's own documentation is in
//! `crates/preload/src/lib.rs`, the shared log's layout in `crates/preload/src/layout.rs`).
//!
//! The library is built by `build.rs` and embedded here; [`library`] writes it once per
//! cache root and content, to `<root>/.local/preload/libstrata_preload-<16 hex of its
//! BLAKE3>.so`, where `LD_PRELOAD` can name it. The notification supervisor
//! (`trace/notify.rs`) sets `LD_PRELOAD` and the log's variable for the compile, lets
//! `openat` calls carrying the compile's cookie pass its filter, and reads the log's slots
//! as events (`Recorder::logged` in `trace/decode.rs`).

use std::path::{Path, PathBuf};

/// The library's bytes; empty where `build.rs` could not build it.
const LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libstrata_preload.so"));

/// The library's path under `cache_root`, written there (atomically) if it is not yet.
///
/// # Errors
/// Why the fast path is not used: no library in this build, a path `LD_PRELOAD` cannot
/// name (it splits at blanks and colons), or the error of writing it.
pub fn library(cache_root: &Path) -> Result<PathBuf, String> {
    if LIBRARY.is_empty() {
        return Err("this build of strata has no preload library".to_owned());
    }
    let digest = blake3::hash(LIBRARY).to_hex();
    let name = format!("libstrata_preload-{}.so", &digest.as_str()[..16]);
    let path = cache_root.join(".local").join("preload").join(name);
    let text = path.as_os_str().as_encoded_bytes();
    if !path.is_absolute() || text.iter().any(|&b| matches!(b, b' ' | b'\t' | b'\n' | b':')) {
        return Err(format!("LD_PRELOAD cannot name {}", path.display()));
    }
    if crate::fs::metadata(&path).is_ok_and(|m| m.len() == LIBRARY.len() as u64) {
        return Ok(path);
    }
    let dir = path.parent().unwrap_or(cache_root);
    crate::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    crate::fs::write_atomic(&path, LIBRARY, 0o755).map_err(|e| e.to_string())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_written_once_and_a_path_ld_preload_cannot_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = library(dir.path()).unwrap();
        assert_eq!(crate::fs::read(&path).unwrap(), LIBRARY);
        assert!(path.starts_with(dir.path().join(".local/preload")));
        assert_eq!(library(dir.path()).unwrap(), path);
        let spaced = dir.path().join("a b");
        assert!(library(&spaced).unwrap_err().contains("LD_PRELOAD cannot name"));
    }

    /// The library needs from libc only what glibc and musl both export; a symbol more
    /// (`rust_eh_personality`, which any panicking bounds check of `core` pulls in) would
    /// make the dynamic loader refuse it in every process of every compile.
    #[test]
    fn the_library_needs_only_environ_errno_memcpy_memset_and_what_it_hands_on() {
        let Some(text) = binutils_on_library(&["nm", "-D", "--undefined-only"]) else {
            return;
        };
        let mut needed: Vec<&str> = text
            .lines()
            .filter_map(|line| line.trim().strip_prefix("U "))
            .map(|name| name.split('@').next().unwrap_or(name))
            .collect();
        needed.sort_unstable();
        let mut expected =
            vec!["__errno_location", "environ", "execvpe", "fdopen", "fopen64", "memcpy", "memset"];
        // aarch64: `core`'s outline atomics ask the kernel whether the CPU has LSE.
        if cfg!(target_arch = "aarch64") {
            expected.insert(5, "getauxval");
        }
        assert_eq!(needed, expected, "{text}");
    }

    /// The library names no library it needs (`DT_NEEDED`): its symbols bind to the C
    /// library the process already has. One that named musl's `libc.so` made the loader
    /// refuse to start every program of every traced compile on a glibc system (`build.rs`
    /// also refuses to build such a library, for every target).
    #[test]
    fn the_library_names_no_library_it_needs() {
        let Some(text) = binutils_on_library(&["readelf", "-d"]) else {
            return;
        };
        assert!(text.contains("(INIT_ARRAY)"), "{text}");
        assert!(!text.contains("(NEEDED)"), "{text}");
    }

    /// What `tool args… <the library, written to a temporary cache root>` prints (`nm`,
    /// `readelf`: binutils), or `None` in a build without the library.
    fn binutils_on_library(tool_and_args: &[&str]) -> Option<String> {
        if LIBRARY.is_empty() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = library(dir.path()).unwrap();
        let out = std::process::Command::new(tool_and_args[0])
            .args(&tool_and_args[1..])
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("{} (binutils) runs: {e}", tool_and_args[0]));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Some(String::from_utf8(out.stdout).unwrap())
    }
}
