//! Build script: the facts `strata --version` prints besides the crate version.
//!
//! * `STRATA_GIT_COMMIT`: the first 12 hex digits of the commit the sources were built from
//!   (`git rev-parse --short=12 HEAD`), only when this package's directory is the top of
//!   a git work tree (a crate vendored inside another repository does not take that
//!   repository's commit); `unknown` when git is missing or the sources are not a checkout
//!   (a source tarball, `actions/setup` building an action checkout without `.git`).
//!   Uncommitted changes are not marked.
//! * `STRATA_TARGET`: the target triple cargo builds for (`TARGET`, e.g.
//!   `aarch64-unknown-linux-musl`).
//!
//!
//! It also links the `strata` binary as a position-dependent executable (`-no-pie`) on
//! glibc Linux targets (the local and CI builds; the published musl binaries are left as
//! they are). Every compile the launcher wraps starts `strata` twice (the launcher, and the
//! shim that becomes the traced compiler), and a PIE's start-up applies about 18,000
//! relative relocations and copies the pages they touch: `strata --version` took 2.0 ms of
//! CPU as a PIE and 1.35 ms without (179 page faults instead of 260), measured on the
//! project's 2-vCPU VM. The cost is that the binary's own code and data are not placed at
//! a random address (ASLR still moves the stack, heap and libraries).
//!
//! It builds `libstrata_preload.so` (`crates/preload/src/lib.rs`, the traced compile's fast
//! path for file opens; issue 28) with the same `rustc` for the same target into
//! `OUT_DIR`, where `src/launcher/trace/preload.rs` embeds it. It is a `no_std` cdylib with
//! `panic=abort`, which a Cargo package of this workspace could not be (the profile's panic
//! strategy is the workspace's). It is linked without libraries (`-nostdlib`) and the build
//! fails if it names any (`DT_NEEDED`): its libc symbols bind to the C library the
//! compiler's process already has. Where it cannot be built (another architecture than x86_64
//! or aarch64, another OS, a failing linker) the file is empty, with a warning, and the
//! launcher traces without it.
//!
//! The script reruns when `build.rs`, git's `HEAD`, the branch it names or `packed-refs`
//! change (only files that exist are watched: a missing one would rerun it on every build).

// A build script prints to stdout to talk to cargo, and reads files by path on its own.
#![allow(clippy::print_stdout, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_owned());
    println!("cargo:rustc-env=STRATA_TARGET={target}");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = git_commit(&manifest_dir).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=STRATA_GIT_COMMIT={commit}");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    preload(&manifest_dir, &target, &os);
}

/// Builds `OUT_DIR/libstrata_preload.so`, or leaves it empty with a warning.
fn preload(manifest_dir: &Path, target: &str, os: &str) {
    let source = manifest_dir.join("crates/preload/src/lib.rs");
    println!("cargo:rerun-if-changed={}", source.display());
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("crates/preload/src/layout.rs").display()
    );
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("libstrata_preload.so");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let built = if os == "linux" && (arch == "x86_64" || arch == "aarch64") {
        build_preload(&source, &out, target)
    } else {
        Err(format!("no preload library for {arch}-{os}"))
    };
    if let Err(why) = built {
        println!(
            "cargo:warning=libstrata_preload.so not built ({why}); compiles are traced without it"
        );
        std::fs::write(&out, b"").expect("OUT_DIR is writable");
    }
}

fn build_preload(source: &Path, out: &Path, target: &str) -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut command = Command::new(rustc);
    command.args(["--edition", "2024", "--crate-type", "cdylib", "--crate-name", "strata_preload"]);
    command.args([
        "-C",
        "panic=abort",
        "-C",
        "opt-level=2",
        "-C",
        "debuginfo=0",
        "-C",
        "strip=symbols",
    ]);
    // No libraries and no start files: the library names no `DT_NEEDED`, and its few libc
    // symbols bind to whichever C library the compiler's process already has (glibc or
    // musl). Linked through zig for the musl targets (the published binaries), it would
    // otherwise need musl's `libc.so`, which on a glibc system is a linker script: the
    // dynamic loader then failed every process of every traced compile (exit 127).
    command.args(["-C", "link-arg=-nostdlib"]);
    command.args(["-C", "target-feature=-crt-static", "--target", target, "-o"]);
    command.arg(out).arg(source);
    let linker_var =
        format!("CARGO_TARGET_{}_LINKER", target.to_uppercase().replace(['-', '.'], "_"));
    println!("cargo:rerun-if-env-changed={linker_var}");
    if let Some(linker) = std::env::var_os(&linker_var) {
        command.arg("-C").arg(format!("linker={}", linker.to_string_lossy()));
    }
    let output = command.stdin(Stdio::null()).output().map_err(|e| format!("rustc: {e}"))?;
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stderr);
        return Err(text
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or("rustc failed")
            .to_owned());
    }
    let bytes = std::fs::read(out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    match needed_entries(&bytes) {
        Ok(0) => Ok(()),
        // A loadable library that the loader could not load in a compiler's process fails
        // the compile: a build that makes one fails here instead.
        Ok(n) => panic!(
            "{} names {n} library(ies) it needs (DT_NEEDED); it must name none, so that it \
             loads into any program's process (check the linker's arguments above)",
            out.display()
        ),
        Err(why) => panic!("{}: not a 64-bit little-endian ELF library ({why})", out.display()),
    }
}

/// How many `DT_NEEDED` entries the dynamic section of `elf` (a 64-bit little-endian ELF
/// file, as both supported targets' libraries are) holds.
fn needed_entries(elf: &[u8]) -> Result<usize, &'static str> {
    let u16_at = |at: usize| elf.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at =
        |at: usize| elf.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    if elf.get(..6) != Some(b"\x7fELF\x02\x01") {
        return Err("no ELF64 little-endian header");
    }
    let phoff = u64_at(0x20).ok_or("short header")? as usize;
    let (phentsize, phnum) =
        (u16_at(0x36).ok_or("short header")?, u16_at(0x38).ok_or("short header")?);
    const PT_DYNAMIC: u32 = 2;
    const DT_NULL: u64 = 0;
    const DT_NEEDED: u64 = 1;
    for index in 0..usize::from(phnum) {
        let header = phoff.saturating_add(index * usize::from(phentsize));
        let kind = elf.get(header..header + 4).ok_or("program header out of bounds")?;
        if u32::from_le_bytes(kind.try_into().unwrap_or([0; 4])) != PT_DYNAMIC {
            continue;
        }
        let offset = u64_at(header + 8).ok_or("program header out of bounds")? as usize;
        let size = u64_at(header + 32).ok_or("program header out of bounds")? as usize;
        let mut needed = 0;
        for entry in (offset..offset.saturating_add(size)).step_by(16) {
            match u64_at(entry).ok_or("dynamic section out of bounds")? {
                DT_NULL => break,
                DT_NEEDED => needed += 1,
                _ => {}
            }
        }
        return Ok(needed);
    }
    Err("no dynamic section")
}

/// The short commit of `dir`'s work tree, watching the files that change with it; `None`
/// when git is unavailable or `dir` is not the top of a work tree.
fn git_commit(dir: &Path) -> Option<String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(top).ok()? != std::fs::canonicalize(dir).ok()? {
        return None;
    }
    let git_dir = dir.join(git(dir, &["rev-parse", "--git-dir"])?);
    let common_dir = dir.join(git(dir, &["rev-parse", "--git-common-dir"])?);
    let mut watched = vec![git_dir.join("HEAD"), common_dir.join("packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(common_dir.join(branch));
    }
    for path in watched.iter().filter(|p| p.is_file()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let commit = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    commit.bytes().all(|b| b.is_ascii_hexdigit()).then_some(commit)
}

/// `git ARGS` in `dir`: its trimmed stdout when it succeeds with some output.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (output.status.success() && !text.is_empty()).then_some(text)
}
