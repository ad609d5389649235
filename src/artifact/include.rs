//! The conservative include scanner for extern packaging (docs/artifact-store.md
//! "scan-includes").
//!
//! [`scan`] lists the closure of *local* includes of some C/C++ sources: every file reached
//! through `#include "…"` (searched in the including file's directory, then the `-I`
//! directories in order) and `#include <…>` found in a `-I` directory. It is not a
//! preprocessor, and it errs on the side of "unsupported":
//!
//! * line continuations are joined; comments, string and character literals (with digit
//!   separators such as `1'000`) and raw strings `R"d(…)d"` are lexed so that nothing
//!   inside them is read as a directive;
//! * a block comment is one space, even across lines (so `#if 0 /* … ⏎ … */ || 1` is one
//!   directive with an unknown condition); `%:` (the digraph of `#`) starts a directive
//!   like `#`; a trigraph `??=` at the start of a line or `??/` at its end is unsupported;
//! * `#if 0` and `#if 1` (with any number of enclosing parentheses), `#elif`, `#else` and
//!   `#endif` are followed; every other condition (`#ifdef`, `#if X`, `__has_include`,
//!   `#elifdef`, …) is unknown, and all of its branches are scanned;
//! * in an active region, an include whose operand is not one literal `"name"` or `<name>`
//!   (a macro include), an absolute or backslashed name, an unresolved quoted include,
//!   `#include_next`, `#import` and `#embed` give [`Verdict::Unsupported`] with the file,
//!   line and reason: such input must be compiled privately, not packaged;
//! * a symlink anywhere on the way to a scanned file, below the common root of the sources
//!   and `-I` directories, is unsupported too (the common root itself is resolved once, so
//!   symlinked workspace or home directories above it are fine);
//! * an include that resolves outside that common root (`#include "../../../etc/x.h"`) is
//!   unsupported: packaging it would move the common root and re-root every path;
//! * unresolved angle includes are assumed to come from the separately identified SDK and
//!   are *listed* in the closure (`system_includes`), never silently dropped.
//!
//! Structural errors (`#endif` without `#if`, `#else` after `#else`, an unterminated
//! conditional) are [`Error::MalformedSource`], distinct from both "unsupported" and I/O.
//! Files are read as bytes; non-UTF-8 bytes are replaced for scanning only, and a name that
//! contains a replacement character is unsupported.
//!
//! # Limitations
//! Macros are never expanded (`#define X 0` then `#if X` is unknown), `__has_include`
//! operands are not followed, assembler `.incbin` is not recognised.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use super::Error;
use crate::fs::{self, RelPath, Sharing};

/// Why a scan cannot vouch for the closure.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unsupported {
    /// The file holding the directive (or the offending path).
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub file: PathBuf,
    /// 1-based line of the directive (0 when not about a directive).
    pub line: usize,
    /// The reason.
    pub reason: String,
}

/// An angle include found in no `-I` directory (assumed to come from the SDK).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SystemInclude {
    /// The including file.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// The name between `<` and `>`.
    pub name: String,
}

/// A complete local include closure.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Closure {
    /// The common directory of every visited file's parent and every `-I` directory
    /// (resolved); package paths are relative to it.
    #[serde(serialize_with = "crate::fs::name::serialize_path")]
    pub common_root: PathBuf,
    /// Every visited file (sources first), absolute and normalised, in visiting order.
    #[serde(serialize_with = "crate::fs::name::serialize_paths")]
    pub files: Vec<PathBuf>,
    /// The same files relative to `common_root`.
    pub relative_files: Vec<RelPath>,
    /// The `-I` directories relative to `common_root` (`.` for the root itself), in the
    /// name encoding of [`crate::fs::name`].
    pub relative_include_dirs: Vec<String>,
    /// Angle includes found in no `-I` directory.
    pub system_includes: Vec<SystemInclude>,
}

/// The outcome of [`scan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The closure is complete as far as this scanner can tell.
    Closure(Closure),
    /// Something cannot be packaged.
    Unsupported(Unsupported),
}

/// One include directive.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Directive {
    Quoted(String),
    Angle(String),
}

impl Directive {
    /// The included name.
    fn name(&self) -> &str {
        match self {
            Directive::Quoted(n) | Directive::Angle(n) => n,
        }
    }
}

/// Scans `text` (one file) and returns its active includes with line numbers.
fn directives(
    file: &Path,
    text: &str,
) -> Result<Result<Vec<(usize, Directive)>, Unsupported>, Error> {
    let cleaned = strip(&join_continuations(text));
    let mut frames: Vec<Frame> = Vec::new();
    let mut out = Vec::new();
    for (index, line) in cleaned.lines().enumerate() {
        let number = index + 1;
        let start = line.trim_start_matches(HORIZONTAL_SPACE);
        if start.starts_with("??=") || line.ends_with("??/") {
            return Ok(Err(Unsupported {
                file: file.to_path_buf(),
                line: number,
                reason: "a trigraph (??= or ??/) may form a directive or a line continuation \
                         under -trigraphs or a strict ISO mode; compile privately"
                    .to_owned(),
            }));
        }
        // `%:` is the digraph spelling of `#`.
        let Some(rest) = start.strip_prefix('#').or_else(|| start.strip_prefix("%:")) else {
            continue;
        };
        let rest = rest.trim_start_matches(HORIZONTAL_SPACE);
        let name_len =
            rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let (name, operand) = rest.split_at(name_len);
        let active = frames.last().is_none_or(|f| f.active);
        let malformed = |reason: &str| Error::MalformedSource {
            path: file.to_path_buf(),
            line: number,
            reason: reason.to_owned(),
        };
        match name {
            "if" | "ifdef" | "ifndef" => {
                let condition = if name == "if" { literal_condition(operand) } else { None };
                frames.push(Frame {
                    parent_active: active,
                    taken: condition == Some(true),
                    else_seen: false,
                    active: active && condition != Some(false),
                });
            }
            "elif" | "elifdef" | "elifndef" | "else" => {
                let Some(frame) = frames.last_mut() else {
                    return Err(malformed(&format!("#{name} without #if")));
                };
                if frame.else_seen {
                    return Err(malformed(&format!("#{name} after #else")));
                }
                let condition = match name {
                    "else" => Some(true),
                    "elif" => literal_condition(operand),
                    _ => None,
                };
                frame.active = frame.parent_active && !frame.taken && condition != Some(false);
                frame.taken |= condition == Some(true);
                frame.else_seen = name == "else";
            }
            "endif" if frames.pop().is_none() => {
                return Err(malformed("#endif without #if"));
            }
            "endif" => {}
            _ if !active => {}
            "include" => match parse_operand(operand) {
                Some(d) => out.push((number, d)),
                None => {
                    return Ok(Err(Unsupported {
                        file: file.to_path_buf(),
                        line: number,
                        reason: format!(
                            "#include{operand} is not one literal \"name\" or <name> (a macro include cannot be resolved without a preprocessor)"
                        ),
                    }));
                }
            },
            "include_next" | "import" | "embed" => {
                return Ok(Err(Unsupported {
                    file: file.to_path_buf(),
                    line: number,
                    reason: format!(
                        "#{name} is not supported by the include scanner; compile privately"
                    ),
                }));
            }
            _ => {}
        }
    }
    if !frames.is_empty() {
        return Err(Error::MalformedSource {
            path: file.to_path_buf(),
            line: cleaned.lines().count(),
            reason: format!("{} conditional(s) still open at the end of the file", frames.len()),
        });
    }
    Ok(Ok(out))
}

/// Whitespace that may precede or follow the `#` of a directive.
const HORIZONTAL_SPACE: [char; 4] = [' ', '\t', '\x0b', '\x0c'];

struct Frame {
    parent_active: bool,
    taken: bool,
    else_seen: bool,
    active: bool,
}

/// `Some(false)` for a literal `0`, `Some(true)` for a literal `1` (after stripping
/// whitespace and enclosing parentheses); `None` for anything else.
fn literal_condition(operand: &str) -> Option<bool> {
    let mut text = operand.trim();
    while let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
        text = inner.trim();
    }
    match text {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

fn parse_operand(operand: &str) -> Option<Directive> {
    let text = operand.trim();
    let (close, make): (char, fn(String) -> Directive) = match text.chars().next()? {
        '"' => ('"', Directive::Quoted),
        '<' => ('>', Directive::Angle),
        _ => return None,
    };
    let body = text.get(1..)?;
    let end = body.find(close)?;
    let name = body.get(..end)?;
    let trailing = body.get(end + 1..)?;
    if name.is_empty() || !trailing.trim().is_empty() {
        return None;
    }
    Some(make(name.to_owned()))
}

/// Removes backslash-newline pairs, re-inserting the removed newlines after the logical
/// line so that line numbers of later lines stay right.
fn join_continuations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
                pending += 1;
            }
            '\\' if chars.peek() == Some(&'\r') => {
                let mut lookahead = chars.clone();
                lookahead.next();
                if lookahead.peek() == Some(&'\n') {
                    chars.next();
                    chars.next();
                    pending += 1;
                } else {
                    out.push(c);
                }
            }
            '\n' => {
                out.push('\n');
                out.extend(std::iter::repeat_n('\n', pending));
                pending = 0;
            }
            c => out.push(c),
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Replaces comments and raw strings with spaces, and skips over string and character
/// literals, so directive detection sees only code. A block comment is one space (C
/// translation phase 3): the newlines inside it are re-inserted after the end of the
/// logical line it belongs to, so `#if 0 /* … ⏎ … */ || 1` stays one directive line and
/// the line numbers of later lines stay right. Raw strings keep their newlines.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut pending = 0usize;
    let at = |k: usize| chars.get(k).copied();
    while let Some(c) = at(i) {
        match c {
            '/' if at(i + 1) == Some('/') => {
                while at(i).is_some_and(|c| c != '\n') {
                    i += 1;
                }
                out.push(' ');
            }
            '/' if at(i + 1) == Some('*') => {
                i += 2;
                out.push(' ');
                while let Some(c) = at(i) {
                    if c == '*' && at(i + 1) == Some('/') {
                        i += 2;
                        break;
                    }
                    if c == '\n' {
                        pending += 1;
                    }
                    i += 1;
                }
            }
            'R' if at(i + 1) == Some('"') && raw_prefix_ok(&chars, i) => {
                if let Some(end) = raw_string_end(&chars, i + 2) {
                    for k in i..end {
                        out.push(if at(k) == Some('\n') { '\n' } else { ' ' });
                    }
                    i = end;
                } else {
                    out.push(c);
                    i += 1;
                }
            }
            '"' => {
                i = copy_literal(&chars, i, '"', &mut out);
            }
            '\'' if digit_separator(&chars, i) => {
                out.push(c);
                i += 1;
            }
            '\'' => {
                i = copy_literal(&chars, i, '\'', &mut out);
            }
            '\n' => {
                out.push('\n');
                out.extend(std::iter::repeat_n('\n', pending));
                pending = 0;
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// True if the `R` at `i` starts a raw string: not preceded by an identifier character,
/// except the encoding prefixes `u8`, `u`, `U`, `L`.
fn raw_prefix_ok(chars: &[char], i: usize) -> bool {
    let mut start = i;
    while start > 0 && chars.get(start - 1).is_some_and(|c| is_ident(*c)) {
        start -= 1;
    }
    let prefix: String = chars.get(start..i).unwrap_or_default().iter().collect();
    matches!(prefix.as_str(), "" | "u8" | "u" | "U" | "L")
}

/// Given the index just after `R"`, returns the index after the closing `)delim"`.
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let mut k = start;
    let mut delim = String::new();
    loop {
        let c = *chars.get(k)?;
        if c == '(' {
            break;
        }
        if delim.len() >= 16 || c.is_whitespace() || c == ')' || c == '\\' || c == '"' {
            return None;
        }
        delim.push(c);
        k += 1;
    }
    let closing: Vec<char> =
        std::iter::once(')').chain(delim.chars()).chain(std::iter::once('"')).collect();
    let mut j = k + 1;
    while j + closing.len() <= chars.len() {
        if chars.get(j..j + closing.len()) == Some(closing.as_slice()) {
            return Some(j + closing.len());
        }
        j += 1;
    }
    None
}

/// True if the `'` at `i` is a C++14 digit separator: inside a number that started with a
/// digit, between alphanumeric characters.
fn digit_separator(chars: &[char], i: usize) -> bool {
    if i == 0 || !chars.get(i + 1).is_some_and(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    let mut start = i;
    while start > 0 && chars.get(start - 1).is_some_and(|c| is_ident(*c) || *c == '\'' || *c == '.')
    {
        start -= 1;
    }
    start < i && chars.get(start).is_some_and(|c| c.is_ascii_digit())
}

/// Copies a string or character literal starting at `i` (the quote) up to its closing
/// quote or the end of the line; returns the index after it.
fn copy_literal(chars: &[char], i: usize, quote: char, out: &mut String) -> usize {
    out.push(quote);
    let mut k = i + 1;
    while let Some(c) = chars.get(k).copied() {
        match c {
            '\\' => {
                out.push(c);
                if let Some(next) = chars.get(k + 1).copied()
                    && next != '\n'
                {
                    out.push(next);
                    k += 2;
                    continue;
                }
                k += 1;
            }
            '\n' => return k,
            c if c == quote => {
                out.push(c);
                return k + 1;
            }
            c => {
                out.push(c);
                k += 1;
            }
        }
    }
    k
}

/// Normalises `path` lexically after checking, from the filesystem root, that no component
/// is a symlink. `Ok(None)` if a component is missing or the final path is not a regular
/// file; `Err(reason)` for a symlink.
fn resolve_candidate(path: &Path) -> Result<Option<PathBuf>, String> {
    let mut current = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                current.pop();
            }
            Component::Normal(name) => {
                current.push(name);
                match fs::symlink_metadata_opt(&current) {
                    Ok(None) => return Ok(None),
                    Ok(Some(m)) if m.file_type().is_symlink() => {
                        return Err(format!(
                            "{} is a symbolic link; symbolic links in extern inputs require private compilation",
                            current.display()
                        ));
                    }
                    Ok(Some(_)) => {}
                    Err(e) if e.raw_os_error() == Some(20) => return Ok(None),
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
    }
    match fs::symlink_metadata_opt(&current) {
        Ok(Some(m)) if m.is_file() => Ok(Some(current)),
        _ => Ok(None),
    }
}

fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

fn common_ancestor(paths: &[PathBuf]) -> PathBuf {
    let mut iter = paths.iter();
    let Some(first) = iter.next() else { return PathBuf::from("/") };
    let mut common = first.clone();
    for p in iter {
        while !p.starts_with(&common) {
            if !common.pop() {
                return PathBuf::from("/");
            }
        }
    }
    common
}

/// Scans `sources` with the explicit `include_dirs` (see the module docs).
///
/// # Errors
/// [`Error::Fs`] for unreadable sources or includes (a missing *source* too);
/// [`Error::MalformedSource`] for broken conditional structure.
pub fn scan(sources: &[PathBuf], include_dirs: &[PathBuf]) -> Result<Verdict, Error> {
    if sources.is_empty() {
        return Err(Error::InvalidSpec {
            reason: "scan-includes needs at least one source".into(),
        });
    }
    let (scanner, starts) = Scanner::new(sources, include_dirs)?;
    let mut stack = match starts {
        Ok(starts) => starts,
        Err(unsupported) => return Ok(Verdict::Unsupported(unsupported)),
    };
    stack.reverse();
    let mut visited: HashSet<PathBuf> = HashSet::new();
    let mut order: Vec<PathBuf> = Vec::new();
    let mut system = Vec::new();
    while let Some(file) = stack.pop() {
        if !visited.insert(file.clone()) {
            continue;
        }
        order.push(file.clone());
        let children = match scanner.includes_of(&file, &mut system)? {
            Ok(children) => children,
            Err(unsupported) => return Ok(Verdict::Unsupported(unsupported)),
        };
        // Depth-first in source order.
        for child in children.into_iter().rev() {
            if !visited.contains(&child) {
                stack.push(child);
            }
        }
    }
    Ok(Verdict::Closure(scanner.closure(order, system)?))
}

/// The roots of one scan: the `-I` directories and the common root, re-expressed under the
/// resolved common root.
struct Scanner {
    /// The `-I` directories, in order.
    dirs: Vec<PathBuf>,
    /// The resolved common root of the source parents and the `-I` directories.
    canonical_root: PathBuf,
}

impl Scanner {
    /// The scanner and the sources to start from (or why one cannot be packaged).
    /// Absolute, unresolved paths: the common root of source parents and include dirs is
    /// resolved once and everything is re-expressed under it.
    fn new(
        sources: &[PathBuf],
        include_dirs: &[PathBuf],
    ) -> Result<(Self, Result<Vec<PathBuf>, Unsupported>), Error> {
        let abs_sources: Vec<PathBuf> =
            sources.iter().map(|s| fs::absolute(s)).collect::<Result<_, _>>()?;
        let abs_dirs: Vec<PathBuf> =
            include_dirs.iter().map(|d| fs::absolute(d)).collect::<Result<_, _>>()?;
        let mut anchors: Vec<PathBuf> = abs_sources
            .iter()
            .map(|s| s.parent().map(Path::to_path_buf).unwrap_or_default())
            .collect();
        anchors.extend(abs_dirs.iter().cloned());
        let lexical_root =
            common_ancestor(&anchors.iter().map(|p| lexical_normalize(p)).collect::<Vec<_>>());
        let canonical_root = fs::canonicalize(&lexical_root)?;
        let rebase = |p: &PathBuf| -> PathBuf {
            let normalized = lexical_normalize(p);
            match normalized.strip_prefix(&lexical_root) {
                Ok(rest) => canonical_root.join(rest),
                Err(_) => normalized,
            }
        };
        let dirs: Vec<PathBuf> = abs_dirs.iter().map(rebase).collect();
        let mut starts = Vec::new();
        for (given, source) in sources.iter().zip(&abs_sources) {
            match resolve_candidate(&rebase(source)) {
                Ok(Some(path)) => starts.push(path),
                Ok(None) => {
                    let not_regular = std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "source is not a regular file",
                    );
                    return Err(fs::Error::io("read", given, not_regular).into());
                }
                Err(reason) => {
                    let unsupported = Unsupported { file: given.clone(), line: 0, reason };
                    return Ok((Self { dirs, canonical_root }, Err(unsupported)));
                }
            }
        }
        Ok((Self { dirs, canonical_root }, Ok(starts)))
    }

    /// The local includes of `file`, in source order (system includes go to `system`), or
    /// why it cannot be packaged.
    fn includes_of(
        &self,
        file: &Path,
        system: &mut Vec<SystemInclude>,
    ) -> Result<Result<Vec<PathBuf>, Unsupported>, Error> {
        let bytes = fs::read(file)?;
        // A UTF-8 byte-order mark is not part of the first line (compilers skip it).
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf".as_slice()).unwrap_or(&bytes);
        let text = String::from_utf8_lossy(bytes);
        let found = match directives(file, &text)? {
            Ok(found) => found,
            Err(unsupported) => return Ok(Err(unsupported)),
        };
        let mut children = Vec::new();
        for (line, directive) in found {
            let unsupported =
                |reason: String| Unsupported { file: file.to_path_buf(), line, reason };
            match self.resolve(file, &directive) {
                Err(reason) => return Ok(Err(unsupported(reason))),
                Ok(Some(p)) => children.push(p),
                Ok(None) => system.push(SystemInclude {
                    file: file.to_path_buf(),
                    line,
                    name: directive.name().to_owned(),
                }),
            }
        }
        Ok(Ok(children))
    }

    /// The file an include of `file` names: next to `file` (quoted includes), then in
    /// each `-I` directory. `Ok(None)`: an unresolved angle include (a system include);
    /// `Err`: why it cannot be packaged.
    fn resolve(&self, file: &Path, directive: &Directive) -> Result<Option<PathBuf>, String> {
        let (name, quoted) = match directive {
            Directive::Quoted(n) => (n, true),
            Directive::Angle(n) => (n, false),
        };
        if name.contains('\u{FFFD}') {
            return Err(format!("include name {name:?} is not valid UTF-8"));
        }
        if name.starts_with('/') || name.contains('\\') {
            return Err(format!("include {name:?} must be a relative path without backslashes"));
        }
        let mut bases: Vec<PathBuf> = Vec::new();
        if quoted && let Some(parent) = file.parent() {
            bases.push(parent.to_path_buf());
        }
        bases.extend(self.dirs.iter().cloned());
        let mut resolved = None;
        for base in bases {
            if let Some(p) = resolve_candidate(&base.join(name))? {
                resolved = Some(p);
                break;
            }
        }
        match resolved {
            Some(p) if !p.starts_with(&self.canonical_root) => Err(format!(
                "include \"{name}\" resolves to {}, outside {} (the common root of the sources and -I directories); packaging it would re-root every path: add an -I directory that contains it, or compile privately",
                p.display(),
                self.canonical_root.display()
            )),
            Some(p) => Ok(Some(p)),
            None if quoted => Err(format!(
                "unresolved local include \"{name}\" (not next to the file nor in any -I directory)"
            )),
            None => Ok(None),
        }
    }

    /// The closure of the files visited, in `order`, relative to their common root.
    fn closure(self, order: Vec<PathBuf>, system: Vec<SystemInclude>) -> Result<Closure, Error> {
        let mut package_anchors: Vec<PathBuf> =
            order.iter().filter_map(|f| f.parent().map(Path::to_path_buf)).collect();
        package_anchors.extend(self.dirs.iter().cloned());
        let common_root = common_ancestor(&package_anchors);
        let relative_files = order
            .iter()
            .map(|f| RelPath::from_path(f.strip_prefix(&common_root).unwrap_or(f)))
            .collect::<Result<Vec<_>, _>>()?;
        let relative_include_dirs = self
            .dirs
            .iter()
            .map(|d| {
                let rel = d.strip_prefix(&common_root).unwrap_or(d);
                if rel.as_os_str().is_empty() {
                    ".".to_owned()
                } else {
                    fs::name::encode_os(rel.as_os_str())
                }
            })
            .collect();
        Ok(Closure {
            common_root,
            files: order,
            relative_files,
            relative_include_dirs,
            system_includes: system,
        })
    }
}

/// Copies the closure into `dest` (created if missing; must be empty), keeping the layout
/// relative to the common root, bytes verbatim; creates every `-I` directory (possibly
/// empty). Files are 0600, directories 0700.
///
/// # Errors
/// [`Error::Destination`] for a non-empty destination; [`Error::Fs`].
pub fn package(closure: &Closure, dest: &Path) -> Result<(), Error> {
    fs::create_dir_all(dest)?;
    if !fs::read_dir(dest)?.is_empty() {
        return Err(Error::Destination {
            path: dest.to_path_buf(),
            reason: "it is not empty; package into a new directory".into(),
        });
    }
    for dir in &closure.relative_include_dirs {
        if dir != "." {
            let rel = fs::name::decode_os(dir)
                .map_err(|reason| fs::Error::UnsafePath { path: dir.clone(), reason })?;
            fs::create_dir_all_within(dest, Path::new(&rel), Sharing::Private.dir_mode())?;
        }
    }
    for (src, rel) in closure.files.iter().zip(&closure.relative_files) {
        if let Some(parent) = rel.parent() {
            fs::create_dir_all_within(
                dest,
                &parent.to_relative_path(),
                Sharing::Private.dir_mode(),
            )?;
        }
        let mode = Sharing::Private.file_mode(false);
        fs::copy_new_file(src, &rel.to_path(dest), mode, false, crate::content::DEFAULT_ALGORITHM)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_text(text: &str) -> Result<Result<Vec<(usize, Directive)>, Unsupported>, Error> {
        directives(Path::new("t.c"), text)
    }

    fn names(text: &str) -> Vec<String> {
        scan_text(text)
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|(_, d)| match d {
                Directive::Quoted(n) => format!("\"{n}\""),
                Directive::Angle(n) => format!("<{n}>"),
            })
            .collect()
    }

    #[test]
    fn comments_strings_and_continuations() {
        let text = "/* #include \"no1.h\" */\n// #include \"no2.h\"\n#inc\\\nlude \"yes1.h\"\nconst char *s = \"#include \\\"no3.h\\\"\";\nint x = 1'000'000; // '\n#include <yes2.h>\nauto r = R\"x(\n#include \"no4.h\"\n)x\";\n  #  include \"yes3.h\" /* trailing */\n";
        assert_eq!(names(text), ["\"yes1.h\"", "<yes2.h>", "\"yes3.h\""]);
        // Line numbers survive joined continuations.
        let found = scan_text("#define A \\\n  1\n#include \"x.h\"\n").unwrap().unwrap();
        assert_eq!(found[0].0, 3);
    }

    #[test]
    fn literal_conditions_and_unknown_ones() {
        let text = "#if 0\n#include \"dead.h\"\n#elif (1)\n#include \"live.h\"\n#else\n#include \"dead2.h\"\n#endif\n#ifdef X\n#include \"a.h\"\n#else\n#include \"b.h\"\n#endif\n#if FOO > 2\n#include \"c.h\"\n#elif 0\n#include \"dead3.h\"\n#endif\n#if 0\n#include MACRO\n#include_next <x>\n#endif\n";
        assert_eq!(names(text), ["\"live.h\"", "\"a.h\"", "\"b.h\"", "\"c.h\""]);
    }

    #[test]
    fn block_comments_are_one_space_and_digraphs_start_directives() {
        let text = "#if 0 /* a\nb */ || 1\n#include \"live.h\"\n#endif\n%:include \"d.h\"\n/*\n*/ #include \"after.h\"\nint x; /* a\n*/ #include \"not_a_directive.h\"\n";
        assert_eq!(names(text), ["\"live.h\"", "\"d.h\"", "\"after.h\""]);
        let found = scan_text("/* 1\n2 */\n#include \"x.h\"\n").unwrap().unwrap();
        assert_eq!(found[0].0, 3, "line numbers survive multi-line comments");
    }

    #[test]
    fn unsupported_directives_and_malformed_structure() {
        for (text, needle) in [
            ("#include MACRO_HEADER\n", "macro"),
            ("#include \"a.h\" extra\n", "literal"),
            ("#include_next <a.h>\n", "include_next"),
            ("#import \"a.h\"\n", "import"),
            ("#embed \"a.bin\"\n", "embed"),
        ] {
            let verdict = scan_text(text).unwrap().unwrap_err();
            assert!(verdict.reason.contains(needle), "{text}: {}", verdict.reason);
            assert_eq!(verdict.line, 1);
        }
        for text in ["#endif\n", "#if 1\n", "#if 1\n#else\n#else\n#endif\n", "#elif 1\n"] {
            assert!(matches!(scan_text(text), Err(Error::MalformedSource { .. })), "{text}");
        }
    }
}
