//! The fallback where tracing is refused (a container's seccomp profile, `ptrace_scope`):
//! what a compile looked at, from its dependency output and a model of include search as
//! GCC and Clang document it.
//!
//! The search lists come from the compiler itself: `<compiler> <flags> -E -v -x <lang>
//! /dev/null` prints the `#include "..."` and `#include <...>` chains for exactly these
//! flags (`-iquote`, `-I`, `-isystem`, `-idirafter`, `-iprefix`/`-iwithprefix`/
//! `-iwithprefixbefore`, `--sysroot`/`-isysroot`, `CPATH`, `C_INCLUDE_PATH`,
//! `CPLUS_INCLUDE_PATH`, `-nostdinc`, the built-in directories), and the directories it
//! ignored because they do not exist. Then, for every header the dependency output lists:
//!
//! * every way it can have been found is a split `<directory>/<name>` of its path, where
//!   the directory is one of the search chain or the directory of a file that may have
//!   included it (quote includes search the including file's directory first; `-include`
//!   and `-imacros` start in the working directory);
//! * for every split, the same name in every directory searched *before* that directory
//!   (the quote chain, which contains the angle chain, so `<...>` includes are covered
//!   too) must stay absent if it is absent now: a file created there would be found
//!   instead. A name that exists there now was not the one used (a wrapper reached by
//!   `#include_next`, or an include of the other kind), so it is no fact, unless it was
//!   created or changed after the compiler started ([`Probes::changed`]): the model looks
//!   after the compile, and what the compile found there is then unknown;
//! * `<header>.gch` must stay absent (GCC looks for it before every header; a precompiled
//!   header in use is not something this model can vouch for, so the compile is not cached);
//! * every ignored nonexistent search directory must stay absent.
//!
//! `__has_include`/`__has_include_next` with a literal name in any file read becomes a
//! fact for that name in every directory of the chain (absent, or present as it was); with
//! a computed name, `.incbin`, `#embed` or `#pragma GCC dependency` (inputs or timestamps
//! the dependency output does not show) the compile is not cached here.
//!
//! # Limitations
//! The model is conservative where it cannot tell: a new file in an `-iquote` directory
//! with the name of an `<...>` header, or next to a header that did not include it, is a
//! needless MISS, never a wrong HIT. Files a compile reads that its dependency output does
//! not list (profile data, assembler inputs) are why [`super::args::Compile::needs_trace`]
//! flags are not cached here.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use memchr::memmem;

use super::args::{Compile, Language};

/// The include search chains of one compile, as the compiler printed them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchLists {
    /// `#include "..."` only (before the angle chain).
    pub quote: Vec<PathBuf>,
    /// `#include <...>` (also searched by quote includes, after [`SearchLists::quote`]).
    pub angle: Vec<PathBuf>,
    /// Search directories the compiler ignored because they do not exist.
    pub missing: Vec<PathBuf>,
}

/// Parses the `-v` report of GCC or Clang (stderr of `-E -v`).
pub fn parse_search_lists(text: &[u8]) -> SearchLists {
    let mut lists = SearchLists::default();
    let mut section = 0; // 1: quote, 2: angle
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(rest) = line.strip_prefix(b"ignoring nonexistent directory \"") {
            if let Some(dir) = rest.strip_suffix(b"\"") {
                lists.missing.push(PathBuf::from(OsStr::from_bytes(dir)));
            }
            continue;
        }
        if line.starts_with(b"#include \"...\" search starts here") {
            section = 1;
            continue;
        }
        if line.starts_with(b"#include <...> search starts here") {
            section = 2;
            continue;
        }
        if line.starts_with(b"End of search list") {
            section = 0;
            continue;
        }
        if section > 0 && line.first() == Some(&b' ') {
            let mut dir = &line[1..];
            // Clang marks framework directories; they are searched the same way here.
            if let Some(d) = dir.strip_suffix(b" (framework directory)") {
                dir = d;
            }
            let dir = PathBuf::from(OsStr::from_bytes(dir));
            if section == 1 { lists.quote.push(dir) } else { lists.angle.push(dir) }
        }
    }
    lists
}

/// The arguments that make the compiler print its search lists for `compile`: the key
/// arguments without the source, `-c` and dependency options, then `-E -v -x <lang>
/// /dev/null -o /dev/null`.
pub fn search_list_args(compile: &Compile) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut after_end = false;
    for arg in &compile.key_args {
        if arg == "--" {
            after_end = true;
            continue;
        }
        if after_end || Path::new(arg) == compile.source {
            continue;
        }
        match arg.to_str() {
            Some("-c" | "-MD" | "-MMD" | "-MP" | "-MG") => {}
            _ => out.push(arg.clone()),
        }
    }
    let lang = match compile.language {
        Language::C => "c",
        Language::Cxx => "c++",
    };
    out.extend(["-E", "-v", "-x", lang, "/dev/null", "-o", "/dev/null"].map(OsString::from));
    out
}

/// What the model found for one compile: paths that must stay absent and names whose
/// existence must stay as it is, or the reason it cannot vouch for the compile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probes {
    /// Paths (as the compiler would spell them) that do not exist and must not.
    pub absent: Vec<PathBuf>,
    /// Paths that exist and are not inputs, looked up by `__has_include`.
    pub present: Vec<PathBuf>,
    /// Paths that exist where a lookup of the compile went (a directory searched before the
    /// one a header was found in, a `__has_include` name) and were created or changed at or
    /// after the compile started: what the compile found there is unknown, so it is not
    /// cached (`input_changed`).
    pub changed: Vec<PathBuf>,
}

/// Why the model cannot vouch for a compile (a counter name after `uncacheable:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unvouched {
    /// A precompiled header next to a header or forced include (`x.h.gch`, `x.h.pch`).
    PrecompiledHeader(PathBuf),
    /// `.incbin`, `#embed`, `#pragma GCC dependency` or a computed `__has_include` in
    /// this file, or a computed `#include` before the source's first C token.
    UnseenInput(PathBuf),
    /// An include directory of the command line the compiler did not search as given (not
    /// a directory, or a duplicate of another), or a name on the search path that is not a
    /// regular file (a directory, a dangling symlink): the compiler skips them, and no
    /// fact of the model would notice them changing.
    OddSearchPath(PathBuf),
}

impl std::fmt::Display for Unvouched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unvouched::PrecompiledHeader(p) => {
                write!(f, "a precompiled header may be in use ({})", p.display())
            }
            Unvouched::UnseenInput(p) => write!(
                f,
                "{} reads or looks up what its dependency output does not list (.incbin, \
                 #embed, #pragma GCC dependency, a computed __has_include, or a computed \
                 #include before the first C token, which a precompiled header may stand \
                 for)",
                p.display()
            ),
            Unvouched::OddSearchPath(p) => write!(
                f,
                "{} is on the search path and the compiler skips it (not a directory, a \
                 duplicate, or not a regular file)",
                p.display()
            ),
        }
    }
}

impl Unvouched {
    /// The counter name.
    pub fn name(&self) -> &'static str {
        match self {
            Unvouched::PrecompiledHeader(_) => "model_precompiled_header",
            Unvouched::UnseenInput(_) => "model_unseen_input",
            Unvouched::OddSearchPath(_) => "model_odd_search_path",
        }
    }
}

/// The `#include`s before the first C token of a source (names, and whether `<angled>`):
/// the only ones a precompiled header can stand for (GCC uses a `.gch` only there, and the
/// dependency output then names neither the `.gch` nor the header). `Err` when one of them
/// names its header through a macro (`#include HEADER`): which `.gch` it could use is then
/// unknown.
#[allow(clippy::result_unit_err)]
pub fn leading_includes(source: &[u8]) -> Result<Vec<(Vec<u8>, bool)>, ()> {
    let mut out = Vec::new();
    let mut in_comment = false;
    for line in source.split(|&b| b == b'\n') {
        let mut line = line.trim_ascii_start();
        if in_comment {
            match memmem::find(line, b"*/") {
                Some(end) => {
                    in_comment = false;
                    line = line[end + 2..].trim_ascii_start();
                }
                None => continue,
            }
        }
        if line.is_empty() || line.starts_with(b"//") {
            continue;
        }
        if line.starts_with(b"/*") {
            match memmem::find(line, b"*/") {
                Some(end) if line[end + 2..].trim_ascii_start().is_empty() => continue,
                Some(_) => break,
                None => {
                    in_comment = true;
                    continue;
                }
            }
        }
        let Some(directive) = line.strip_prefix(b"#") else { break };
        let directive = directive.trim_ascii_start();
        if let Some(rest) = directive.strip_prefix(b"include") {
            // `#include_next`, `#includes`: another directive, not a name to look up here.
            if rest.first().is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_') {
                continue;
            }
            let rest = rest.trim_ascii_start();
            let (close, angled) = match rest.first() {
                Some(b'"') => (b'"', false),
                Some(b'<') => (b'>', true),
                // `#include HEADER`: a computed name.
                _ => return Err(()),
            };
            if let Some(end) = rest[1..].iter().position(|&b| b == close) {
                out.push((rest[1..1 + end].to_vec(), angled));
            }
        }
    }
    Ok(out)
}

/// Computes the model's facts for a compile that read `deps` (as the dependency output
/// spells them: the source first, then every header), with search lists `lists`, run in
/// `cwd`; `contents` gives the bytes of each dependency (already read for its digest).
/// `started` is the file system clock when the compiler started (change time in ns since
/// the Unix epoch, `FsClock::marker`): a name that exists now where the compile looked and
/// changed since then goes to [`Probes::changed`] instead of being taken as a wrapper.
///
/// # Errors
/// [`Unvouched`] when something the model cannot see decides the result.
pub fn probes(
    deps: &[PathBuf],
    lists: &SearchLists,
    forced_includes: &[PathBuf],
    include_dirs: &[PathBuf],
    cwd: &Path,
    started: i128,
    contents: &dyn Fn(&Path) -> Option<Vec<u8>>,
) -> Result<Probes, Unvouched> {
    if let Some(dropped) = dropped_include_dir(lists, include_dirs) {
        return Err(Unvouched::OddSearchPath(dropped.clone()));
    }
    let exists = |p: &Path| crate::fs::symlink_metadata_opt(&absolute(cwd, p)).ok().flatten();
    let regular = |p: &Path| crate::fs::metadata(&absolute(cwd, p)).is_ok_and(|m| m.is_file());
    let new = |meta: &std::fs::Metadata| {
        super::compile::changed_since(crate::fs::FileStamp::of(meta).ctime_ns, started)
    };
    // The chain a quote include walks after the including file's directory.
    let mut chain: Vec<&Path> = lists.quote.iter().map(PathBuf::as_path).collect();
    chain.extend(lists.angle.iter().map(PathBuf::as_path));
    // Directories an include may have been resolved against first: every including
    // file's directory, and the working directory (`-include`).
    let mut includers: Vec<PathBuf> = vec![PathBuf::new()];
    for parent in deps.iter().map(|d| d.parent().map(Path::to_path_buf).unwrap_or_default()) {
        if !includers.contains(&parent) {
            includers.push(parent);
        }
    }
    let canonical = canonical_dirs(&chain, cwd);
    let mut found = Found::default();
    let dep_set: HashSet<&Path> = deps.iter().map(PathBuf::as_path).collect();
    for dir in &lists.missing {
        found.absent(dir.clone());
    }
    forced_pch(forced_includes, &chain, &exists, &mut found)?;
    for (k, dep) in deps.iter().enumerate() {
        // Precompiled headers: GCC tries `<header>.gch` first (and Clang `.pch` for a
        // forced include).
        if k > 0 || forced_includes.iter().any(|f| f == dep) {
            for ext in [".gch", ".pch"] {
                let mut pch = dep.as_os_str().to_owned();
                pch.push(ext);
                let pch = PathBuf::from(pch);
                if exists(&pch).is_some() {
                    return Err(Unvouched::PrecompiledHeader(pch));
                }
                found.absent(pch);
            }
        }
        if k == 0 {
            continue;
        }
        for (dir, name) in splits(dep, &chain, &canonical, &includers) {
            let before: Vec<&Path> = match chain.iter().position(|c| *c == dir) {
                Some(at) => includers
                    .iter()
                    .map(PathBuf::as_path)
                    .chain(chain[..at].iter().copied())
                    .collect(),
                // Found next to its includer: nothing is searched before it.
                None => Vec::new(),
            };
            for earlier in before {
                let probe = join(earlier, &name);
                if probe == *dep || found.absent_seen.contains(&probe) {
                    continue;
                }
                match exists(&probe) {
                    None => found.absent(probe),
                    // Created (or changed) while the compiler ran: it may have been found
                    // instead, or not; not a wrapper that was there all along.
                    Some(meta) if new(&meta) && !dep_set.contains(probe.as_path()) => {
                        found.changed(probe);
                    }
                    // Not a file the compiler could have opened (a directory, a dangling
                    // symlink): skipped now, found if it becomes one.
                    Some(_) if !dep_set.contains(probe.as_path()) && !regular(&probe) => {
                        return Err(Unvouched::OddSearchPath(probe));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    // A precompiled header stands for an include before the first C token of the source:
    // `<name>.gch` (and Clang's `.pch`) in every directory that include searches.
    if let Some(source) = deps.first()
        && let Some(bytes) = contents(source)
    {
        let source_dir = source.parent().map(Path::to_path_buf).unwrap_or_default();
        for (name, angled) in leading_includes(&bytes).map_err(|()| unseen(source))? {
            let dirs: Vec<&Path> = if angled {
                lists.angle.iter().map(PathBuf::as_path).collect()
            } else {
                std::iter::once(source_dir.as_path()).chain(chain.iter().copied()).collect()
            };
            for d in dirs {
                for ext in [&b".gch"[..], b".pch"] {
                    let mut file = name.clone();
                    file.extend_from_slice(ext);
                    let pch = join(d, Path::new(OsStr::from_bytes(&file)));
                    if exists(&pch).is_some() {
                        return Err(Unvouched::PrecompiledHeader(pch));
                    }
                    found.absent(pch);
                }
            }
        }
    }
    let quoted: Vec<&Path> =
        includers.iter().map(PathBuf::as_path).chain(chain.iter().copied()).collect();
    let angled: Vec<&Path> = lists.angle.iter().map(PathBuf::as_path).collect();
    let look = Look { cwd, started, deps: &dep_set };
    lookups_by_name(deps, (&angled, &quoted), &look, contents, &mut found)?;
    Ok(found.out)
}

/// A precompiled header for a forced include (`-include h.h`): GCC looks for `h.h.gch`
/// wherever it looks for `h.h` (the working directory, then the quote chain), and when it
/// uses one the dependency output names neither file, so the names are probed here, not
/// from the dependencies: one that exists is not vouched for, the others must stay absent.
fn forced_pch(
    forced_includes: &[PathBuf],
    chain: &[&Path],
    exists: &dyn Fn(&Path) -> Option<std::fs::Metadata>,
    found: &mut Found,
) -> Result<(), Unvouched> {
    for forced in forced_includes {
        let dirs: Vec<&Path> = if forced.is_absolute() {
            vec![Path::new("")]
        } else {
            std::iter::once(Path::new("")).chain(chain.iter().copied()).collect()
        };
        for dir in dirs {
            for ext in [".gch", ".pch"] {
                let mut name = forced.as_os_str().to_owned();
                name.push(ext);
                let pch = join(dir, Path::new(&name));
                if exists(&pch).is_some() {
                    return Err(Unvouched::PrecompiledHeader(pch));
                }
                found.absent(pch);
            }
        }
    }
    Ok(())
}

/// An include directory of the command line the compiler dropped: not a directory ("not a
/// directory"), or the same directory as another ("ignoring duplicate directory"); it is
/// in none of the lists.
fn dropped_include_dir<'a>(
    lists: &SearchLists,
    include_dirs: &'a [PathBuf],
) -> Option<&'a PathBuf> {
    let listed = |d: &PathBuf| {
        lists
            .quote
            .iter()
            .chain(&lists.angle)
            .chain(&lists.missing)
            .any(|l| l.components().eq(d.components()))
    };
    include_dirs.iter().find(|d| !listed(d))
}

/// Where [`probes`] looks: the working directory, the compile's start on the file system
/// clock, and the files it read.
struct Look<'a> {
    cwd: &'a Path,
    started: i128,
    deps: &'a HashSet<&'a Path>,
}

/// What [`probes`] has found so far, with sets beside the lists (with a list's
/// `contains`, thousands of probes were quadratic).
#[derive(Default)]
struct Found {
    out: Probes,
    absent_seen: HashSet<PathBuf>,
    present_seen: HashSet<PathBuf>,
}

impl Found {
    fn absent(&mut self, p: PathBuf) {
        if self.absent_seen.insert(p.clone()) {
            self.out.absent.push(p);
        }
    }

    fn changed(&mut self, p: PathBuf) {
        if !self.out.changed.contains(&p) {
            self.out.changed.push(p);
        }
    }
}

/// The literal names `__has_include` looks up in any file read (`dirs`: the directories an
/// `<angled>` and a `"quoted"` lookup search): each a fact in every directory searched,
/// absent, present, or changed since the compile started.
fn lookups_by_name(
    deps: &[PathBuf],
    dirs: (&[&Path], &[&Path]),
    look: &Look<'_>,
    contents: &dyn Fn(&Path) -> Option<Vec<u8>>,
    found: &mut Found,
) -> Result<(), Unvouched> {
    for dep in deps {
        let Some(raw) = contents(dep) else { continue };
        let names = text_lookups(&raw).map_err(|()| unseen(dep))?;
        for (name, angled) in names {
            for d in if angled { dirs.0 } else { dirs.1 } {
                let probe = join(d, Path::new(OsStr::from_bytes(&name)));
                if found.absent_seen.contains(&probe) || found.present_seen.contains(&probe) {
                    continue;
                }
                let meta = crate::fs::symlink_metadata_opt(&absolute(look.cwd, &probe));
                match meta.ok().flatten() {
                    None => found.absent(probe),
                    Some(_) if look.deps.contains(probe.as_path()) => {}
                    Some(meta)
                        if super::compile::changed_since(
                            crate::fs::FileStamp::of(&meta).ctime_ns,
                            look.started,
                        ) =>
                    {
                        found.present_seen.insert(probe.clone());
                        found.changed(probe);
                    }
                    Some(_) => {
                        found.present_seen.insert(probe.clone());
                        found.out.present.push(probe);
                    }
                }
            }
        }
    }
    Ok(())
}

/// What the text of one input tells the model: the literal names its `__has_include`s
/// look up (with whether `<angled>`), or `Err` where it uses what the model cannot follow
/// (`.incbin`, `#embed`, `#pragma GCC dependency`, a computed `__has_include`).
///
/// Scanned as written (splices removed) and with comments gone: `__has_include /**/
/// (<x.h>)` and `#pragma GCC /**/ dependency` hide from the first, a literal the stripper
/// misreads from the second. The text without comments decides `__has_include`; the text as
/// written only adds names (a comment between `__has_include` and `(` makes it
/// unreadable there, not a refusal).
fn text_lookups(raw: &[u8]) -> Result<Vec<(Vec<u8>, bool)>, ()> {
    let unspliced = unspliced(raw);
    let stripped = without_comments(&unspliced);
    // The assembler reads `.INCBIN` as `.incbin`, and `".inc" "bin"` is one string.
    let joined = joined_lower(&stripped);
    let lower = unspliced.to_ascii_lowercase();
    for marker in [&b".incbin"[..], b"#embed", b"gcc dependency", b"__has_embed"] {
        if memmem::find(&joined, marker).is_some() || memmem::find(&lower, marker).is_some() {
            return Err(());
        }
    }
    let mut names = has_include_names(&stripped)?;
    for found in has_include_names(&unspliced).unwrap_or_default() {
        if !names.contains(&found) {
            names.push(found);
        }
    }
    Ok(names)
}

fn unseen(path: &Path) -> Unvouched {
    Unvouched::UnseenInput(path.to_path_buf())
}

/// The search directories spelled through a symlink or `..` (`-isystem /w/link`), each with
/// its canonical path: GCC names the headers it finds there by that path in the dependency
/// output (as it does for every system header), so each such directory is matched by it too.
fn canonical_dirs<'a>(chain: &[&'a Path], cwd: &Path) -> Vec<(&'a Path, PathBuf)> {
    chain
        .iter()
        .filter_map(|&dir| {
            let real = crate::fs::canonicalize(&absolute(cwd, dir)).ok()?;
            (real != absolute(cwd, dir)).then_some((dir, real))
        })
        .collect()
}

/// `dir/name` as the compiler builds it (`name` alone for the working directory).
fn join(dir: &Path, name: &Path) -> PathBuf {
    if dir.as_os_str().is_empty() { name.to_path_buf() } else { dir.join(name) }
}

fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) }
}

/// Every `(directory, name)` with `dep == directory/name` (by bytes) for a directory of
/// the chain or an includer's directory.
fn splits(
    dep: &Path,
    chain: &[&Path],
    canonical: &[(&Path, PathBuf)],
    includers: &[PathBuf],
) -> Vec<(PathBuf, PathBuf)> {
    let bytes = dep.as_os_str().as_bytes();
    let mut out = Vec::new();
    let spelled = chain.iter().copied().chain(includers.iter().map(PathBuf::as_path));
    // (the directory as the search list names it, the path a header below it may have)
    let candidates = spelled
        .map(|dir| (dir, dir))
        .chain(canonical.iter().map(|(dir, real)| (*dir, real.as_path())));
    for (dir, seen_as) in candidates {
        let d = seen_as.as_os_str().as_bytes();
        let rest = if d.is_empty() { Some(bytes) } else { super::location::below(bytes, d) };
        if let Some(rest) = rest.filter(|r| !r.is_empty()) {
            let split = (dir.to_path_buf(), PathBuf::from(OsStr::from_bytes(rest)));
            if !out.contains(&split) {
                out.push(split);
            }
        }
    }
    out
}

/// The literal names of `__has_include(...)` / `__has_include_next(...)` in `bytes`, with
/// whether they are `<angled>`; `Err` if one is not a literal (a macro).
#[allow(clippy::result_unit_err)]
pub fn has_include_names(bytes: &[u8]) -> Result<Vec<(Vec<u8>, bool)>, ()> {
    let mut out = Vec::new();
    // `__has_` followed by anything but a whole name: a name made by pasting
    // (`CAT(__has_, include)`), which the scan cannot follow, when the text also names
    // `include` other than as a directive (the other half of the paste). libstdc++'s
    // `struct __has_##_NTYPE` (a pasted type name) is not one.
    let pasted = memmem::find_iter(bytes, b"__has_").any(|at| {
        bytes.get(at + b"__has_".len()).is_none_or(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
    });
    if pasted && names_include_outside_directives(bytes) {
        return Err(());
    }
    for at in memmem::find_iter(bytes, b"__has_include") {
        let mut rest = &bytes[at + b"__has_include".len()..];
        rest = rest.strip_prefix(b"_next").unwrap_or(rest);
        let rest = rest.trim_ascii_start();
        let Some(rest) = rest.strip_prefix(b"(") else {
            // Only `defined __has_include`, `defined(__has_include)`, `#ifdef`/`#ifndef`/
            // `#undef` of it are not a lookup; anything else (`#define HI __has_include`,
            // then `HI("x.h")`) hides the name from this scan.
            let before = bytes[..at].trim_ascii_end();
            let before = before.strip_suffix(b"(").map_or(before, <[u8]>::trim_ascii_end);
            if ["defined", "#ifdef", "#ifndef", "#undef", "ifdef", "ifndef", "undef"]
                .iter()
                .any(|w| before.ends_with(w.as_bytes()))
            {
                continue;
            }
            return Err(());
        };
        let rest = rest.trim_ascii_start();
        let (close, angled) = match rest.first() {
            Some(b'"') => (b'"', false),
            Some(b'<') => (b'>', true),
            _ => return Err(()),
        };
        let inner = &rest[1..];
        let Some(end) = inner.iter().position(|&b| b == close || b == b'\n') else {
            return Err(());
        };
        if inner[end] != close {
            return Err(());
        }
        out.push((inner[..end].to_vec(), angled));
    }
    Ok(out)
}

/// `bytes` without line splices (a backslash, optional spaces or tabs, then a newline or
/// CRLF), as translation phase 2 removes them before anything else is read: `__TI\`
/// newline `ME__` is `__TIME__`. Borrowed when there is none.
pub fn unspliced(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let splice_at = |i: usize| -> Option<usize> {
        let mut j = i + 1;
        while matches!(bytes.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        match bytes.get(j) {
            Some(b'\n') => Some(j + 1),
            Some(b'\r') if bytes.get(j + 1) == Some(&b'\n') => Some(j + 2),
            _ => None,
        }
    };
    let mut splices = memchr::memchr_iter(b'\\', bytes).filter_map(|i| Some((i, splice_at(i)?)));
    let Some(first) = splices.next() else {
        return std::borrow::Cow::Borrowed(bytes);
    };
    // Copies the runs between splices whole (headers with multi-line macros are common, so
    // this path is hot on a MISS).
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for (at, next) in std::iter::once(first).chain(splices) {
        if at < from {
            continue;
        }
        out.extend_from_slice(&bytes[from..at]);
        from = next;
    }
    out.extend_from_slice(&bytes[from..]);
    std::borrow::Cow::Owned(out)
}

/// `bytes` (already [`unspliced`]) with each comment replaced by one space and every run
/// of spaces and tabs made one space, outside string and character literals (a `'`
/// after a digit or letter is a C++14 digit separator, not a literal). Meant to be
/// scanned next to the text as written, never alone: a misread literal can only hide
/// text here, which the other scan still sees.
pub fn without_comments(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let space = |out: &mut Vec<u8>| {
        if !matches!(out.last(), Some(b' ')) {
            out.push(b' ');
        }
    };
    while let Some(&b) = bytes.get(i) {
        match b {
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = memmem::find(bytes.get(i + 2..).unwrap_or_default(), b"*/");
                i = end.map_or(bytes.len(), |e| i + 2 + e + 2);
                space(&mut out);
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                let end = memchr::memchr(b'\n', bytes.get(i..).unwrap_or_default());
                i = end.map_or(bytes.len(), |e| i + e);
                space(&mut out);
            }
            b'"' | b'\'' if b == b'"' || !out.last().is_some_and(u8::is_ascii_alphanumeric) => {
                // A literal: copied to its closing quote (or the line's end).
                out.push(b);
                i += 1;
                while let Some(&c) = bytes.get(i) {
                    out.push(c);
                    i += 1;
                    if c == b'\\' {
                        if let Some(&escaped) = bytes.get(i) {
                            out.push(escaped);
                            i += 1;
                        }
                    } else if c == b || c == b'\n' {
                        break;
                    }
                }
            }
            b' ' | b'\t' => {
                space(&mut out);
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// `stripped` (see [`without_comments`]) with adjacent string literals joined (`".inc"
/// "bin"` is `".incbin"`) and in ASCII lower case.
fn joined_lower(stripped: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(stripped.len());
    // Whether an odd number of `"` was copied so far: inside a literal (linear; counting
    // the copied quotes at each one made a large header take seconds).
    let mut open = false;
    let mut i = 0;
    while let Some(&b) = stripped.get(i) {
        if b == b'"' {
            let mut j = i + 1;
            while matches!(stripped.get(j), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                j += 1;
            }
            if stripped.get(j) == Some(&b'"') && open {
                i = j + 1;
                continue;
            }
            open = !open;
        }
        out.push(b.to_ascii_lowercase());
        i += 1;
    }
    out
}

/// True if `bytes` holds the token `include` anywhere but as a directive's name (`#include`,
/// `# include`): the half of a pasted `__has_include` a macro argument or body supplies.
fn names_include_outside_directives(bytes: &[u8]) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    memmem::find_iter(bytes, b"include").any(|at| {
        let end = at + b"include".len();
        if at > 0 && word(bytes[at - 1]) {
            return false;
        }
        if bytes.get(end).is_some_and(|&c| word(c)) && !bytes[end..].starts_with(b"_next") {
            return false;
        }
        bytes[..at].trim_ascii_end().last() != Some(&b'#')
    })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn search_lists_from_gcc_and_clang_reports() {
        let gcc = b"ignoring nonexistent directory \"/usr/local/include/x86_64-linux-gnu\"\nignoring duplicate directory \"inc\"\n#include \"...\" search starts here:\n quote\n#include <...> search starts here:\n inc\n /usr/lib/gcc/x86_64-linux-gnu/12/include\n /usr/include\nEnd of search list.\n";
        let lists = parse_search_lists(gcc);
        assert_eq!(lists.quote, [PathBuf::from("quote")]);
        assert_eq!(
            lists.angle,
            ["inc", "/usr/lib/gcc/x86_64-linux-gnu/12/include", "/usr/include"].map(PathBuf::from)
        );
        assert_eq!(lists.missing, [PathBuf::from("/usr/local/include/x86_64-linux-gnu")]);
        let clang = b"#include <...> search starts here:\n /usr/lib/llvm-14/lib/clang/14.0.6/include\n /Library/Frameworks (framework directory)\nEnd of search list.\n";
        assert_eq!(
            parse_search_lists(clang).angle,
            ["/usr/lib/llvm-14/lib/clang/14.0.6/include", "/Library/Frameworks"].map(PathBuf::from)
        );
    }

    #[test]
    fn leading_includes_stop_at_the_first_c_token() {
        let src = b"// c\n/* a\n b */\n#include \"pch.h\"\n#define X 1\n  # include <sys/a.h>\nint x;\n#include \"late.h\"\n";
        assert_eq!(
            leading_includes(src),
            Ok(vec![(b"pch.h".to_vec(), false), (b"sys/a.h".to_vec(), true)])
        );
        // A computed name before the first C token: which `.gch` it could use is unknown.
        assert_eq!(leading_includes(b"#define H \"h.h\"\n#include H\nint x;\n"), Err(()));
        assert_eq!(leading_includes(b"# include MACRO(h)\nint x;\n"), Err(()));
        // After it, or `#include_next`: not the model's business here.
        assert_eq!(leading_includes(b"int x;\n#include H\n"), Ok(vec![]));
        assert_eq!(leading_includes(b"#include_next <a.h>\n"), Ok(vec![]));
    }

    #[test]
    fn splices_and_comments_do_not_hide_what_the_scans_look_for() {
        assert_eq!(&*unspliced(b"__TI\\\nME__ a\\ \t\r\nb"), b"__TIME__ ab");
        assert!(matches!(unspliced(b"no splice \\ here\n"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(
            without_comments(b"#pragma GCC /* x */ dependency \"d\" // tail\nint a;"),
            b"#pragma GCC dependency \"d\" \nint a;"
        );
        // Comment markers inside literals are text; a digit separator is not a literal.
        assert_eq!(
            without_comments(b"s = \"a//b\"; c = '/'; n = 1'000; /**/x"),
            b"s = \"a//b\"; c = '/'; n = 1'000; x"
        );
        let src =
            b"#if __has_include /**/ (<opt.h>)\n#endif\n#if __has_include\\\n(\"q.h\")\n#endif\n";
        let text = unspliced(src);
        let names = has_include_names(&without_comments(&text)).unwrap();
        assert!(names.contains(&(b"opt.h".to_vec(), true)), "{names:?}");
        assert!(names.contains(&(b"q.h".to_vec(), false)), "{names:?}");
        // Names the scan cannot follow: an alias, a pasted name.
        assert!(has_include_names(b"#define HI __has_include\n#if HI(\"o.h\")\n").is_err());
        assert!(has_include_names(b"#if CAT(__has_, include)(\"o.h\")\n").is_err());
        assert!(has_include_names(b"#define H(x) __has_##x\n#if H(include)(\"o.h\")\n").is_err());
        assert!(has_include_names(b"#define I include\n#if CAT(__has_, I)(\"o.h\")\n").is_err());
        assert!(
            has_include_names(b"#define H(x) __has_##x\n#if H(include_next)(<o.h>)\n").is_err()
        );
        // libstdc++'s <type_traits>: a pasted type name, and `include` only as directives.
        let traits =
            b"#include <bits/c++config.h>\n#  include <x>\n#define N(_T) struct __has_##_T { };\n";
        assert_eq!(has_include_names(traits), Ok(Vec::new()));
        // Not lookups: tests for the operator itself.
        assert_eq!(
            has_include_names(
                b"#if defined(__has_include) || defined __has_include_next\n#ifdef __has_include\n"
            ),
            Ok(vec![])
        );
        // Markers after joining literals and in any case.
        assert_eq!(joined_lower(b"asm(\".inc\" \"BIN \\\"d\\\"\")"), b"asm(\".incbin \\\"d\\\"\")");
    }

    #[test]
    fn has_include_names_are_literal_or_refused() {
        let src = b"#if __has_include(\"opt.h\") && __has_include_next( <sys/x.h> )\n#endif\n#ifdef __has_include\n";
        assert_eq!(
            has_include_names(src).unwrap(),
            vec![(b"opt.h".to_vec(), false), (b"sys/x.h".to_vec(), true)]
        );
        assert!(has_include_names(b"#if __has_include(HEADER)\n").is_err());
    }

    #[test]
    fn probes_cover_the_includer_and_earlier_directories_but_not_a_wrapper() {
        let d = tempfile::tempdir().unwrap();
        let cwd = d.path();
        for p in ["src/a.c", "inc1/w.h", "inc2/w.h", "build/cfg.h"] {
            std::fs::create_dir_all(cwd.join(p).parent().unwrap()).unwrap();
            std::fs::write(cwd.join(p), "").unwrap();
        }
        let lists = SearchLists {
            quote: vec![],
            angle: vec!["inc1".into(), "inc2".into(), "build".into()],
            missing: vec!["nope".into()],
        };
        // src/a.c includes "cfg.h" (found in build/) and <w.h>; inc1/w.h is a wrapper
        // that does #include_next <w.h> (inc2/w.h).
        let deps: Vec<PathBuf> =
            ["src/a.c", "build/cfg.h", "inc1/w.h", "inc2/w.h"].map(PathBuf::from).to_vec();
        let p = probes(&deps, &lists, &[], &[], cwd, i128::MAX, &|_| Some(Vec::new())).unwrap();
        for want in ["src/cfg.h", "cfg.h", "inc1/cfg.h", "inc2/cfg.h", "nope", "build/cfg.h.gch"] {
            assert!(p.absent.contains(&PathBuf::from(want)), "{want} in {:?}", p.absent);
        }
        assert!(!p.absent.contains(&PathBuf::from("inc1/w.h")), "the wrapper exists");
        assert!(p.absent.contains(&PathBuf::from("src/w.h")));
        assert!(p.changed.is_empty(), "{:?}", p.changed);
        // A name that appeared earlier on the search path after the compiler started is no
        // wrapper: its change time says so, and the model cannot tell what the compile saw.
        std::fs::write(cwd.join("inc1/cfg.h"), "").unwrap();
        let started =
            crate::fs::FileStamp::of(&std::fs::metadata(cwd.join("inc1/cfg.h")).unwrap()).ctime_ns;
        let p = probes(&deps, &lists, &[], &[], cwd, started, &|_| Some(Vec::new())).unwrap();
        assert_eq!(p.changed, [PathBuf::from("inc1/cfg.h")]);
        assert!(!p.absent.contains(&PathBuf::from("inc1/cfg.h")));
        // Older than the compile (there before it started): a name of the other kind.
        let p = probes(&deps, &lists, &[], &[], cwd, started + 1, &|_| Some(Vec::new())).unwrap();
        assert!(p.changed.is_empty(), "{:?}", p.changed);
        std::fs::remove_file(cwd.join("inc1/cfg.h")).unwrap();
        // A precompiled header next to a header: not vouched for.
        std::fs::write(cwd.join("build/cfg.h.gch"), "").unwrap();
        assert_eq!(
            probes(&deps, &lists, &[], &[], cwd, i128::MAX, &|_| Some(Vec::new())),
            Err(Unvouched::PrecompiledHeader("build/cfg.h.gch".into()))
        );
    }
}
