//! Archive steps through the launcher (docs/launcher.md "Static libraries"): `strata ar qc
//! lib.a a.o b.o` and `strata ranlib lib.a`, as the archive rules of CMake run them once
//! `strata_enable_launcher()` has set `CMAKE_<LANG>_ARCHIVE_CREATE` / `_ARCHIVE_FINISH`
//! (or `AR="strata ar"` for Make). On a warm build the compile steps HIT in a few
//! milliseconds each, and binutils' `ar` and `ranlib` then take 30-50 ms each, mostly their
//! own start-up (loading the LTO plugin): in a chain of static libraries that is most of the
//! build. An archive step is a pure function of its inputs, so it is cached like a
//! compilation.
//!
//! The key (64 hex, BLAKE3) covers the tool's identity (the real program's `--version`,
//! memoised by stamp; with `STRATA_TOOL_CONTENT` its bytes), its name as given, the
//! plugins binutils loads from `<bindir>/../lib/bfd-plugins` (name and BLAKE3 of each), the
//! arguments relocated like a compiler's ([`super::location`]), the digest of every input
//! file in order (the members for `ar`, the archive for `ranlib`), the digest of an archive
//! `ar` adds to (or that there was none), and `ZERO_AR_DATE` / `SOURCE_DATE_EPOCH`. An entry
//! (`actions-v1/compile/…`, the record format of [`super::entry`], one candidate without
//! headers) holds the archive and the tool's messages; a HIT places the archive verified
//! and replays the messages. Cached: `ar` with operation `q` or `r` and modifiers from
//! `c s S D v`; `ranlib` with one archive and at most `-D`. Anything else (`u`, `T` thin
//! archives, `U` member dates, `--plugin`, response files, extraction, listing) runs the
//! tool unchanged and counts why, as the compile steps do (domain [`ARCHIVE`]); so does a
//! thin archive (`!<thin>`) found where the tool would read one.
//!
//! The tool never sees the build's archive: on a MISS an existing one is copied (and hashed
//! in the same pass, to the digest the lookup hashed in place) to a private temp file beside
//! it, the tool runs on that file, and the result replaces the archive by rename. So the archive the key hashed is the one the tool read,
//! and a HIT that fails verification leaves the archive as it was.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use crate::content::VerifyMemo;
use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs;
use crate::l1::counters;
use crate::l1::layout::CacheRoot;

use super::compile::{FsClock, save_memo};
use super::entry::{self, Candidate, CompileKey, CompileManifest, EntryPlace, Output};
use super::location::Location;
use super::restore::{place_output, read_verified};
use super::save::remove_unreferenced;
use super::{Config, KeyBuilder, Messages, Step as Next, exit_code};

/// The counter domain of archive steps (L1's [`crate::l1::counters::ARCHIVE`]).
pub use crate::l1::counters::ARCHIVE;

/// Modifiers of `ar q`/`ar r` whose result depends only on the inputs.
const PURE_MODIFIERS: &[u8] = b"csSDv";

/// Environment variables that change what an archiver writes.
const KEY_ENVIRONMENT: &[&str] = &["ZERO_AR_DATE", "SOURCE_DATE_EPOCH"];

/// Which archive tool a program is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `ar`, `<triple>-ar`, `gcc-ar`, `llvm-ar` (a trailing `-<version>` allowed).
    Ar,
    /// `ranlib`, `<triple>-ranlib`, `gcc-ranlib`, `llvm-ranlib`.
    Ranlib,
}

/// The archive tool `program` (a name or path) names, if it names one.
pub fn tool_of(program: &OsStr) -> Option<Tool> {
    let name = Path::new(program).file_name()?.to_str()?;
    // `gcc-ar-12`, `llvm-ranlib-15`: a version suffix.
    let name = match name.rsplit_once('-') {
        Some((stem, version))
            if !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit() || b == b'.') =>
        {
            stem
        }
        _ => name,
    };
    let is = |tool: &str| {
        name == tool || (name.len() > tool.len() + 1 && name.ends_with(&format!("-{tool}")))
    };
    if is("ar") {
        Some(Tool::Ar)
    } else if is("ranlib") {
        Some(Tool::Ranlib)
    } else {
        None
    }
}

/// One cacheable archive step: the files it reads and the archive it writes (all as given,
/// relative to the working directory or absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The archive written (for `ranlib`, also read).
    pub archive: PathBuf,
    /// Where [`Step::archive`] is in the arguments (0-based).
    pub archive_index: usize,
    /// The members `ar` adds, in order (empty for `ranlib`).
    pub members: Vec<PathBuf>,
}

/// Classifies the arguments of an archive tool: a [`Step`] it can cache, or the reason (a
/// counter name without the `uncacheable:` prefix) it cannot.
///
/// # Errors
/// The reason, when the step is not cached.
pub fn classify(tool: Tool, args: &[OsString]) -> Result<Step, &'static str> {
    let text: Vec<&str> = args
        .iter()
        .map(|a| a.to_str().ok_or("archive_non_utf8_argument"))
        .collect::<Result<_, _>>()?;
    if text.iter().any(|a| a.starts_with('@')) {
        return Err("archive_response_file");
    }
    match tool {
        Tool::Ar => {
            let (ops, rest) = text.split_first().ok_or("archive_no_operation")?;
            let ops = ops.strip_prefix('-').unwrap_or(ops).as_bytes();
            if ops.is_empty() || ops.starts_with(b"-") {
                return Err("archive_option");
            }
            let operations = ops.iter().filter(|b| b"dmpqrtx".contains(b)).count();
            let pure = ops.iter().all(|b| b"qr".contains(b) || PURE_MODIFIERS.contains(b));
            if operations != 1 || !pure || !ops.iter().any(|b| b"qr".contains(b)) {
                return Err("archive_operation");
            }
            let (archive, members) = rest.split_first().ok_or("archive_no_archive")?;
            if archive.starts_with('-') || members.iter().any(|m| m.starts_with('-')) {
                return Err("archive_option");
            }
            Ok(Step {
                archive: PathBuf::from(archive),
                archive_index: 1,
                members: members.iter().map(PathBuf::from).collect(),
            })
        }
        Tool::Ranlib => {
            if text.iter().any(|a| a.starts_with('-') && *a != "-D") {
                return Err("archive_option");
            }
            let mut archives = text.iter().enumerate().filter(|(_, a)| **a != "-D");
            match (archives.next(), archives.next()) {
                (Some((index, a)), None) => Ok(Step {
                    archive: PathBuf::from(a),
                    archive_index: index,
                    members: Vec::new(),
                }),
                _ => Err("archive_not_one_archive"),
            }
        }
    }
}

/// Runs `program` (an archive tool, [`tool_of`]) with `args` through the cache; returns
/// what the command line does next. Problems of the cache never fail the step: the tool
/// runs unchanged.
pub(super) fn main(
    config: &Config,
    cache: &CacheRoot,
    program: &OsStr,
    tool: Tool,
    args: &[OsString],
    out: &Messages,
) -> Next {
    let what = || super::command_line(program, args);
    let unchanged = || Next::Exec { program: program.to_owned(), args: args.to_vec() };
    let skip = |reason: &str, what: &dyn std::fmt::Display| {
        super::not_cached_in(ARCHIVE, config, cache, reason, what, out);
        unchanged()
    };
    let step = match classify(tool, args) {
        Ok(step) => step,
        Err(reason) => return skip(&format!("uncacheable:{reason}"), &what()),
    };
    let Some(resolved) = program.to_str().and_then(|p| crate::toolchain::resolve_tool(p, None))
    else {
        return skip("uncacheable:archiver_not_found", &what());
    };
    let run = Archive { config, cache, program, resolved: &resolved, tool, args, step: &step, out };
    match run.go() {
        Ok((name, next)) => {
            counters::bump(cache, ARCHIVE, name);
            if config.explain {
                out.explain(format!("{name} archive {}", step.archive.display()));
            }
            next
        }
        Err(Skip::Quietly(reason)) => skip(reason, &step.archive.display()),
        Err(Skip::Loudly(e)) => {
            out.warn(format!("{e}; running {} without the cache", program.to_string_lossy()));
            counters::bump(cache, ARCHIVE, "error");
            unchanged()
        }
    }
}

/// Why a step runs without the cache.
enum Skip {
    /// Said once as a warning.
    Loudly(String),
    /// Counted under this name only.
    Quietly(&'static str),
}

struct Archive<'a> {
    config: &'a Config,
    cache: &'a CacheRoot,
    program: &'a OsStr,
    resolved: &'a Path,
    tool: Tool,
    args: &'a [OsString],
    step: &'a Step,
    out: &'a Messages,
}

/// The private file an archive step works on: a temp name in the archive's directory
/// (`.<archive name>.strata-<16 hex>.tmp`, [`crate::fs::temp`]).
struct Private {
    /// As the archive was given (relative when it is): what the tool is told.
    given: PathBuf,
    /// Under the working directory.
    path: PathBuf,
    /// The file name alone.
    name: String,
}

impl Private {
    /// The private file for `archive` (as given), `cwd` being the working directory.
    fn new(archive: &Path, cwd: &Path) -> Private {
        let stem = archive.file_name().map_or("archive".into(), |n| n.to_string_lossy());
        let name =
            crate::fs::temp::TempName::new(crate::fs::temp::Purpose::Placement, &stem).to_string();
        let given = match archive.parent() {
            Some(dir) => dir.join(&name),
            None => PathBuf::from(&name),
        };
        Private { path: cwd.join(&given), given, name }
    }

    /// `bytes` (a message of the tool) with the private file's name replaced by the
    /// archive's.
    fn unname(&self, bytes: &[u8], archive: &Path) -> Vec<u8> {
        let Some(real) = archive.file_name() else { return bytes.to_vec() };
        let finder = memchr::memmem::Finder::new(self.name.as_bytes());
        let mut out = Vec::with_capacity(bytes.len());
        let mut rest = bytes;
        while let Some(at) = finder.find(rest) {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(real.as_bytes());
            rest = &rest[at + self.name.len()..];
        }
        out.extend_from_slice(rest);
        out
    }
}

/// Removes a file when dropped (the private file of a step that ended early).
struct RemoveOnDrop<'a>(&'a Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        let _ = fs::remove_file(self.0);
    }
}

/// The plugins binutils' `ar` and `ranlib` load by themselves, from `<bindir>/../lib/bfd-plugins`
/// of the real program (Debian: `liblto_plugin.so`, `LLVMgold-14.so`): they decide which
/// symbols of LTO objects the archive index lists, so they are part of the tool. Each as
/// (file name, 64 hex BLAKE3 of its bytes, or `unreadable`), sorted by name; empty when the
/// directory does not exist (`llvm-ar` has none).
fn plugins(resolved: &Path) -> Vec<(String, String)> {
    let Ok(real) = fs::canonicalize(resolved) else { return Vec::new() };
    let Some(dir) = real.parent().and_then(Path::parent).map(|p| p.join("lib/bfd-plugins")) else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(&dir) else { return Vec::new() };
    let mut found: Vec<(String, String)> = entries
        .iter()
        .map(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            let digest = fs::read(path).map_or_else(
                |_| "unreadable".to_owned(),
                |b| blake3::hash(&b).to_hex().to_string(),
            );
            (name, digest)
        })
        .collect();
    found.sort();
    found
}

/// Whether the archive at `path` is a thin archive (`!<thin>` magic): its members are
/// references to other files, which the key does not hash.
fn is_thin(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    fs::open(path).is_ok_and(|mut f| f.read_exact(&mut magic).is_ok()) && &magic == b"!<thin>\n"
}

/// An input file as the key hashed it.
struct Input {
    path: PathBuf,
    stamp: fs::FileStamp,
}

impl Archive<'_> {
    fn go(&self) -> Result<(&'static str, Next), Skip> {
        let cwd = std::env::current_dir()
            .map_err(|e| Skip::Loudly(format!("cannot read the working directory: {e}")))?;
        let here = Location::new(&cwd, &self.config.base_dirs);
        let archive = cwd.join(&self.step.archive);
        let clock = FsClock::start(&archive);
        let existing = match fs::symlink_metadata_opt(&archive) {
            Ok(None) => None,
            Ok(Some(meta)) if meta.is_file() => Some(meta),
            _ => return Err(Skip::Quietly("uncacheable:output_not_regular_file")),
        };
        if self.tool == Tool::Ranlib && existing.is_none() {
            return Err(Skip::Quietly("uncacheable:archive_missing"));
        }
        // The existing archive is an input (`ranlib`, or `ar` adding to it). Hashed in place
        // for the lookup; a MISS copies it for the tool and checks the copy has these bytes.
        let mut digests = Vec::with_capacity(self.step.members.len() + 1);
        if existing.is_some() {
            if is_thin(&archive) {
                return Err(Skip::Quietly("uncacheable:archive_thin"));
            }
            let (digest, _, _) = fs::hash_file_stable(&archive, DigestAlgorithm::Blake3)
                .map_err(|_| Skip::Quietly("uncacheable:archive_input_unreadable"))?;
            digests.push(digest);
        }
        let mut inputs = Vec::with_capacity(self.step.members.len());
        for member in &self.step.members {
            let path = cwd.join(member);
            let (digest, _, stamp) = fs::hash_file_stable(&path, DigestAlgorithm::Blake3)
                .map_err(|_| Skip::Quietly("uncacheable:archive_input_unreadable"))?;
            digests.push(digest);
            inputs.push(Input { path, stamp });
        }
        let key = self.key(&here, existing.is_some(), &digests).map_err(Skip::Loudly)?;
        let place = EntryPlace::new(self.cache, &key);
        let began = SystemTime::now();
        let mut memo = VerifyMemo::load(&place.memo, &place.rel);
        match entry::load(&place, &key) {
            Ok(Some(manifest)) => {
                if let Some(candidate) = manifest.candidates.first() {
                    match self.restore(&place, candidate, &archive, &mut memo, began) {
                        Ok((stdout, stderr)) => {
                            let _ = fs::touch(&place.manifest());
                            save_memo(&memo, &place);
                            return Ok(("hit", Next::Exit { code: 0, stdout, stderr }));
                        }
                        Err(e) => self.out.warn(format!(
                            "cached archive of {} unusable ({e}); running {}",
                            place.rel,
                            self.program.to_string_lossy()
                        )),
                    }
                }
            }
            Ok(None) => {}
            Err(e) => self.out.warn(format!("{e}; running {}", self.program.to_string_lossy())),
        }
        // The tool never sees the user's archive: it works on a private file beside it (a
        // copy, hashed as it is made, of an existing archive), which replaces the archive
        // once the step is done. So the archive the key hashed is the one the tool read,
        // whatever happens to the user's file meanwhile; a copy with other bytes (the archive
        // was replaced since the lookup) is run but not saved.
        let private = Private::new(&self.step.archive, &cwd);
        let mut archive_moved = false;
        if let Some(meta) = &existing {
            let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777;
            let (copied, _) =
                fs::copy_new_file(&archive, &private.path, mode, false, DigestAlgorithm::Blake3)
                    .map_err(|_| Skip::Quietly("uncacheable:archive_not_copyable"))?;
            archive_moved = digests.first() != Some(&copied);
        }
        let _guard = RemoveOnDrop(&private.path);
        let result = self.run_and_save(
            &here,
            &place,
            &key,
            &private,
            &archive,
            &inputs,
            archive_moved,
            &clock,
        );
        if result.is_ok() {
            save_memo(&memo, &place);
        }
        result
    }

    /// The MISS: runs the tool on the private file, saves its result under `key` unless it
    /// failed, a member changed meanwhile or the archive copied is not the one the key hashed
    /// (`archive_moved`), and renames the result over the archive.
    #[allow(clippy::too_many_arguments)]
    fn run_and_save(
        &self,
        here: &Location,
        place: &EntryPlace,
        key: &CompileKey,
        private: &Private,
        archive: &Path,
        inputs: &[Input],
        archive_moved: bool,
        clock: &FsClock,
    ) -> Result<(&'static str, Next), Skip> {
        let started = clock.marker();
        let mut args = self.args.to_vec();
        args[self.step.archive_index] = private.given.clone().into_os_string();
        let mut cmd = Command::new(self.resolved);
        cmd.arg0(self.program).args(&args).stdin(Stdio::inherit());
        let mut output = match cmd.output() {
            Ok(o) => o,
            Err(e) => {
                self.out.warn(format!("cannot run {}: {e}", self.resolved.display()));
                return Ok((
                    "error",
                    Next::Exit { code: 1, stdout: Vec::new(), stderr: Vec::new() },
                ));
            }
        };
        // The messages name the archive as the build gave it, not the private file.
        output.stdout = private.unname(&output.stdout, &self.step.archive);
        output.stderr = private.unname(&output.stderr, &self.step.archive);
        let code = exit_code(output.status);
        if code != 0 {
            let next = Next::Exit { code, stdout: output.stdout, stderr: output.stderr };
            return Ok(("archive_failed", next));
        }
        // The members must be what the key hashed: unchanged since, and not written in the
        // clock tick the tool started in.
        let changed = archive_moved
            || inputs.iter().any(|i| {
                fs::metadata(&i.path).map(|m| fs::FileStamp::of(&m)).map_or(true, |now| {
                    now != i.stamp || super::compile::changed_since(now.ctime_ns, started)
                })
            });
        let counted = if changed {
            "input_changed"
        } else {
            match self.save(here, place, key, &private.path, &output) {
                Ok(()) => "miss",
                Err(e) => {
                    self.out.warn(format!(
                        "{} ran, but its archive is not cached: {e}",
                        self.program.to_string_lossy()
                    ));
                    "save_failed"
                }
            }
        };
        // The tool's result replaces the archive (removed first: on ext4 a rename over a
        // file with data makes the kernel flush the new one, `auto_da_alloc`).
        let _ = fs::remove_file(archive);
        if let Err(e) = fs::rename(&private.path, archive) {
            self.out.warn(format!("{} ran, but {e}", self.program.to_string_lossy()));
            return Ok((
                "error",
                Next::Exit { code: 1, stdout: output.stdout, stderr: output.stderr },
            ));
        }
        Ok((counted, Next::Exit { code: 0, stdout: output.stdout, stderr: output.stderr }))
    }

    /// The key (64 hex): see the module docs.
    fn key(
        &self,
        here: &Location,
        adds_to_existing: bool,
        inputs: &[ContentDigest],
    ) -> Result<CompileKey, String> {
        let mut key = KeyBuilder::new("strata.archive_key");
        key.tool(self.cache, self.config, self.resolved, self.program, "tool")
            .map_err(|e| e.to_string())?;
        for (name, digest) in plugins(self.resolved) {
            key.field("plugin", name.as_bytes());
            key.field("plugin_digest", digest.as_bytes());
        }
        for arg in self.args {
            key.field("arg", here.relocate_arg(arg).as_bytes());
        }
        key.field("existing_archive", if adds_to_existing { b"1" } else { b"0" });
        for digest in inputs {
            key.field("input", digest.to_string().as_bytes());
        }
        key.environment(KEY_ENVIRONMENT);
        Ok(key.finish())
    }

    fn restore(
        &self,
        place: &EntryPlace,
        candidate: &Candidate,
        archive: &Path,
        memo: &mut VerifyMemo,
        began: SystemTime,
    ) -> Result<(Vec<u8>, Vec<u8>), String> {
        let [output] = candidate.outputs.as_slice() else {
            return Err(format!(
                "it holds {} outputs, an archive step writes 1",
                candidate.outputs.len()
            ));
        };
        if output.role != "archive" {
            return Err(format!("it holds a {} output, not an archive", output.role));
        }
        let read = |o: &Output| read_verified(place, o).map_err(|e| e.to_string());
        let stdout = candidate.stdout.as_ref().map(read).transpose()?;
        let stderr = candidate.stderr.as_ref().map(read).transpose()?;
        // Placed verified beside the archive first, so a stored copy that fails verification
        // leaves the archive as it was (the tool then runs on it); then it replaces the
        // archive, removed first (see `Run::restore`).
        let beside = Private::new(archive, Path::new("/"));
        let _guard = RemoveOnDrop(&beside.path);
        place_output(place, output, &beside.path, memo, began).map_err(|e| e.to_string())?;
        let _ = fs::remove_file(archive);
        fs::rename(&beside.path, archive).map_err(|e| e.to_string())?;
        Ok((stdout.unwrap_or_default(), stderr.unwrap_or_default()))
    }

    fn save(
        &self,
        here: &Location,
        place: &EntryPlace,
        key: &CompileKey,
        archive: &Path,
        run: &std::process::Output,
    ) -> Result<(), String> {
        let _lock = super::lock_entry(self.cache, self.config, place).map_err(|e| e.to_string())?;
        let objects = place.dir.join("objects");
        let (digest, size) =
            crate::l1::write::add_copy(archive, &objects, self.config.digest, |d| place.object(d))
                .map_err(|e| format!("archive {}: {e}", archive.display()))?;
        let message = |bytes: &[u8]| -> Result<Option<Output>, String> {
            if bytes.is_empty() {
                return Ok(None);
            }
            let digest = ContentDigest::of_bytes(self.config.digest, bytes);
            entry::store_bytes(place, &digest, bytes).map_err(|e| e.to_string())?;
            Ok(Some(Output {
                role: "message".into(),
                digest,
                size_bytes: bytes.len() as u64,
                path: None,
            }))
        };
        let candidate = Candidate {
            observed_by: "archive".into(),
            inputs: Vec::new(),
            names: Vec::new(),
            listed: Vec::new(),
            pins: Vec::new(),
            object_name: None,
            origin: entry::Origin::of(here),
            outputs: vec![Output { role: "archive".into(), digest, size_bytes: size, path: None }],
            depfile: None,
            stdout: message(&run.stdout)?,
            stderr: message(&run.stderr)?,
            created_at: crate::record::Timestamp::now().rfc3339(),
        };
        let manifest = CompileManifest { key: key.clone(), candidates: vec![candidate] };
        entry::store(place, &manifest).map_err(|e| e.to_string())?;
        remove_unreferenced(place, &manifest);
        let _ = fs::touch(&self.cache.updated_marker());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &[&str]) -> Vec<OsString> {
        text.iter().map(OsString::from).collect()
    }

    #[test]
    fn archive_tools_are_known_by_name() {
        for name in [
            "ar",
            "/usr/bin/ar",
            "x86_64-linux-gnu-ar",
            "gcc-ar",
            "gcc-ar-12",
            "llvm-ar-15",
            "aarch64-linux-gnu-gcc-ar-12",
        ] {
            assert_eq!(tool_of(OsStr::new(name)), Some(Tool::Ar), "{name}");
        }
        for name in ["ranlib", "/usr/bin/x86_64-linux-gnu-ranlib", "gcc-ranlib-12", "llvm-ranlib"] {
            assert_eq!(tool_of(OsStr::new(name)), Some(Tool::Ranlib), "{name}");
        }
        for name in ["gcc", "c++", "clang-15", "star", "tar", "ar.sh", "bar", "ranlib2", "-ar"] {
            assert_eq!(tool_of(OsStr::new(name)), None, "{name}");
        }
    }

    #[test]
    fn cmake_and_make_archive_commands_are_cached() {
        let step = classify(Tool::Ar, &args(&["qc", "lib/libgtest.a", "a.o", "sub/b.o"])).unwrap();
        assert_eq!((step.archive, step.archive_index), (PathBuf::from("lib/libgtest.a"), 1));
        assert_eq!(step.members, vec![PathBuf::from("a.o"), PathBuf::from("sub/b.o")]);
        for ops in ["rcs", "-rcs", "crs", "qcD", "rv", "qcS"] {
            assert!(classify(Tool::Ar, &args(&[ops, "l.a", "a.o"])).is_ok(), "{ops}");
        }
        let step = classify(Tool::Ranlib, &args(&["-D", "lib.a"])).unwrap();
        assert_eq!((step.archive, step.archive_index), (PathBuf::from("lib.a"), 1));
        assert!(step.members.is_empty());
        let step = classify(Tool::Ranlib, &args(&["lib.a", "-D"])).unwrap();
        assert_eq!((step.archive, step.archive_index), (PathBuf::from("lib.a"), 0));
    }

    #[test]
    fn other_archive_commands_run_unchanged_with_a_reason() {
        let cases: &[(Tool, &[&str], &str)] = &[
            (Tool::Ar, &["t", "l.a"], "archive_operation"),
            (Tool::Ar, &["x", "l.a"], "archive_operation"),
            (Tool::Ar, &["rcu", "l.a", "a.o"], "archive_operation"),
            (Tool::Ar, &["qcT", "l.a", "a.o"], "archive_operation"),
            (Tool::Ar, &["rcU", "l.a", "a.o"], "archive_operation"),
            (Tool::Ar, &["rd", "l.a", "a.o"], "archive_operation"),
            (Tool::Ar, &["--plugin", "p.so", "rc", "l.a"], "archive_option"),
            (Tool::Ar, &["rc", "l.a", "@objs.rsp"], "archive_response_file"),
            (Tool::Ar, &["rc"], "archive_no_archive"),
            (Tool::Ar, &[], "archive_no_operation"),
            (Tool::Ranlib, &["a.a", "b.a"], "archive_not_one_archive"),
            (Tool::Ranlib, &["-t", "a.a"], "archive_option"),
            (Tool::Ranlib, &["-U"], "archive_option"),
        ];
        for (tool, argv, reason) in cases {
            assert_eq!(classify(*tool, &args(argv)), Err(*reason), "{argv:?}");
        }
    }
}
