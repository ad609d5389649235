//! The module map (docs/architecture.md) as a test (issue 27 item 1): imports point down.
//!
//! [`LAYERS`] lists the library's top-level modules from the bottom up. A module may use
//! modules of lower layers only: never one of its own layer (siblings stay independent) nor
//! one above. Every top-level module of `src/` must be in the map, so a new one is placed
//! on purpose. The command line (`src/main.rs`, `src/cli/`) is the binary on top of
//! everything and is not scanned.
//!
//! Two more rules of the map:
//! * [`ACYCLIC`]: the direct submodules of these modules use each other without cycles;
//! * the process environment is read only in `src/config.rs` (and by the command line):
//!   no other library file names `env::var`, `env::var_os`, `env::vars` or `env::temp_dir`.
//!
//! The scan is lexical: comments, strings and character literals are skipped, `use` trees
//! are expanded, `crate::…`, `self::…` and `super::…` paths (in `use` items and in
//! code) are resolved against the file's module and the inline modules (`mod tests { … }`)
//! around them. Relative `use` paths name the file's own submodules and never leave it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's top-level modules, bottom layer first. A module may use modules of
/// earlier layers only.
const LAYERS: &[&[&str]] = &[
    // Settings, messages and progress reporting: used by everything, use nothing.
    &["config", "message", "progress"],
    &["digest"],
    &["fs"],
    // Records, signatures, processes and the worker pool.
    &["record", "trust", "process", "parallel"],
    // The content layer: codecs, trees, memos.
    &["content"],
    // The L1 cache root (layout, writer, locks, counters, prune/stats) and tool identity.
    &["l1", "toolchain"],
    // Object stores: the store trait, capabilities, the scheme registry, backends.
    &["transport"],
    // What strata stores: actions (L1 engine), the artifact store (L0), the compiler
    // launcher, snapshots.
    &["action", "artifact", "launcher", "snapshot"],
    // The remote entry tier (shares the snapshot index format).
    &["remote"],
    // CI integration.
    &["ci"],
];

/// Modules whose direct submodules must not use each other in a cycle. Not yet:
/// `artifact` (store/publish, destination/handle), `launcher` (check, compile, remote,
/// save), `record` (envelope/verify), `transport` (error and the backends).
const ACYCLIC: &[&str] =
    &["action", "content", "digest", "fs", "l1", "snapshot", "toolchain", "trust"];

/// Names that read the process environment, allowed only in `src/config.rs`.
const ENVIRONMENT_READS: &[&str] = &["var", "var_os", "vars", "vars_os", "temp_dir"];

/// One `crate::…` path found in a file, resolved to an absolute module path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    /// 1-based line of the path's first segment.
    line: usize,
    /// The absolute path from the crate root, e.g. `["snapshot", "key", "SnapshotKey"]`.
    path: Vec<String>,
}

/// A lexical token: a word (identifier or keyword, `$` included) or one punctuation mark
/// (`::` as one).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

fn is_ident(c: char) -> bool {
    c == '_' || c == '$' || c.is_alphanumeric()
}

/// The tokens of `text`, without comments, string, raw-string, byte-string and character
/// literals (lifetimes are words).
fn tokens(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1usize);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0usize;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' || (matches!(ch, 'r' | 'b') && raw_string_start(&c, i).is_some()) {
            // A string: escaped (`"…"`, `b"…"`) or raw (`r#"…"#`, `br"…"`).
            let (open, hashes) =
                if ch == '"' { (i, None) } else { raw_string_start(&c, i).unwrap() };
            i = open + 1;
            while i < c.len() {
                if c[i] == '\n' {
                    line += 1;
                }
                if hashes.is_none() && c[i] == '\\' {
                    line += usize::from(at(i + 1) == '\n');
                    i += 2;
                    continue;
                }
                if c[i] == '"' {
                    let n = hashes.unwrap_or(0);
                    if (1..=n).all(|k| at(i + k) == '#') {
                        i += 1 + n;
                        break;
                    }
                }
                i += 1;
            }
        } else if ch == '\'' {
            // A character literal (`'x'`, `'\n'`, `'\u{..}'`) or a lifetime (`'a`).
            if at(i + 1) == '\\' {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if is_ident(ch) {
            let start = i;
            while i < c.len() && is_ident(c[i]) {
                i += 1;
            }
            out.push(Token { text: c[start..i].iter().collect(), line });
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token { text: "::".into(), line });
            i += 2;
        } else {
            out.push(Token { text: ch.to_string(), line });
            i += 1;
        }
    }
    out
}

/// If a raw or byte string starts at `i` (`r"`, `r#"`, `b"`, `br#"`): the index of its
/// opening quote and, for a raw string, the number of `#`.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, Option<usize>)> {
    if i > 0 && is_ident(c[i - 1]) {
        return None;
    }
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
        if c.get(j) == Some(&'"') {
            return Some((j, None));
        }
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((j, Some(hashes)))
}

/// The paths of a `use` tree (`a::{b, c::{d as e}, *}`), each with the line of its first
/// token; `tree` ends before the `;`.
fn expand_use(tree: &[Token]) -> Vec<(usize, Vec<String>)> {
    fn walk(
        tree: &[Token],
        mut i: usize,
        prefix: &mut Vec<String>,
        line: Option<usize>,
        out: &mut Vec<(usize, Vec<String>)>,
    ) -> usize {
        let depth = prefix.len();
        let mut first = line;
        while i < tree.len() {
            let t = &tree[i].text;
            match t.as_str() {
                "::" => i += 1,
                "{" => {
                    i += 1;
                    loop {
                        i = walk(tree, i, prefix, first, out);
                        match tree.get(i).map(|t| t.text.as_str()) {
                            Some(",") => i += 1,
                            Some("}") => {
                                i += 1;
                                break;
                            }
                            _ => break,
                        }
                    }
                }
                "," | "}" => break,
                "as" => i += 2,
                _ => {
                    first.get_or_insert(tree[i].line);
                    prefix.push(t.clone());
                    i += 1;
                    if tree.get(i).map(|t| t.text.as_str()) != Some("::") {
                        out.push((first.unwrap_or(tree[i - 1].line), prefix.clone()));
                    }
                }
            }
        }
        prefix.truncate(depth);
        i
    }
    let mut out = Vec::new();
    walk(tree, 0, &mut Vec::new(), None, &mut out);
    out
}

/// Resolves `path` (relative to `module`) to an absolute path: `crate::` from the root,
/// `self::` and `super::` from `module`. `None` for a path that is not crate-relative
/// (an external crate, a relative `use` of a submodule).
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    match path.first().map(String::as_str) {
        Some("crate") => Some(path[1..].to_vec()),
        Some("self" | "super") => {
            let mut here = module.to_vec();
            let mut rest = path;
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "self" => {}
                    "super" => {
                        here.pop();
                    }
                    _ => break,
                }
                rest = &rest[1..];
            }
            here.extend(rest.iter().cloned());
            Some(here)
        }
        _ => None,
    }
}

/// Every crate-relative path used in `text`, the source of `module` (its path from the
/// crate root, e.g. `["snapshot", "index", "save"]`), resolved (module docs).
fn imports(module: &[String], text: &str) -> Vec<Import> {
    let toks = tokens(text);
    let word = |i: usize| toks.get(i).map_or("", |t| t.text.as_str());
    let mut out = Vec::new();
    // Inline modules open around the current token: (name, brace depth inside them).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_mod: Option<String> = None;
    let here = |inline: &[(String, usize)]| {
        let mut m = module.to_vec();
        m.extend(inline.iter().map(|(n, _)| n.clone()));
        m
    };
    let mut i = 0;
    while i < toks.len() {
        let t = word(i);
        let after_path = i > 0 && word(i - 1) == "::";
        match t {
            "{" => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    inline.push((name, depth));
                }
            }
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            ";" => pending_mod = None,
            "mod" if !after_path => {
                pending_mod = Some(word(i + 1).to_owned());
                i += 2;
                continue;
            }
            "use" if !after_path => {
                let end = (i..toks.len()).find(|&j| word(j) == ";").unwrap_or(toks.len());
                let m = here(&inline);
                for (line, path) in expand_use(&toks[i + 1..end]) {
                    if let Some(path) = resolve(&m, &path) {
                        out.push(Import { line, path });
                    }
                }
                i = end + 1;
                continue;
            }
            "crate" | "self" | "super" if !after_path && word(i + 1) == "::" => {
                let line = toks[i].line;
                let mut path = vec![t.to_owned()];
                let mut j = i + 1;
                while word(j) == "::"
                    && toks.get(j + 1).is_some_and(|t| t.text.starts_with(is_ident))
                {
                    path.push(word(j + 1).to_owned());
                    j += 2;
                }
                if let Some(path) = resolve(&here(&inline), &path) {
                    out.push(Import { line, path });
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The layer of each module in `layers`.
fn layer_of(layers: &[&[&str]]) -> BTreeMap<String, usize> {
    layers
        .iter()
        .enumerate()
        .flat_map(|(n, layer)| layer.iter().map(move |m| ((*m).to_owned(), n)))
        .collect()
}

/// The imports of `text` (the source of `module`) that go against `layers`, as
/// `line: module -> target`. Paths to names that are not top-level modules of the map
/// (crate-root items, a glob of the root) are not module imports and are skipped.
fn violations(layers: &[&[&str]], module: &[String], text: &str) -> Vec<String> {
    let layer = layer_of(layers);
    let Some(own) = module.first().and_then(|m| layer.get(m)) else {
        return vec![format!("module {} is not in the map", module.join("::"))];
    };
    imports(module, text)
        .into_iter()
        .filter_map(|import| {
            let target = import.path.first()?;
            let theirs = layer.get(target)?;
            (target != &module[0] && theirs >= own).then(|| {
                format!(
                    "line {}: {} uses crate::{}",
                    import.line,
                    module[0],
                    import.path.join("::")
                )
            })
        })
        .collect()
}

/// Every `.rs` file of the library under `src/` with its module path (the command line
/// and `lib.rs`/`main.rs` left out).
fn library_files() -> Vec<(PathBuf, Vec<String>)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(&src).unwrap().to_owned();
            if rel.starts_with("cli") {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut module: Vec<String> = rel
                    .with_extension("")
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect();
                if module.last().is_some_and(|m| m == "mod") {
                    module.pop();
                }
                if module == ["lib"] || module == ["main"] {
                    continue;
                }
                out.push((path, module));
            }
        }
    }
    out.sort();
    assert!(out.len() > 100, "found only {} library files under {}", out.len(), src.display());
    out
}

/// The cycles among the direct submodules of `parent`, from `files` (as groups of
/// submodule names, each group sorted).
fn cycles(parent: &str, files: &[(PathBuf, Vec<String>, String)]) -> Vec<Vec<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let submodules: BTreeSet<String> = files
        .iter()
        .filter(|(_, m, _)| m.len() >= 2 && m[0] == parent)
        .map(|(_, m, _)| m[1].clone())
        .collect();
    for (_, module, text) in files.iter().filter(|(_, m, _)| m.len() >= 2 && m[0] == parent) {
        for import in imports(module, text) {
            if import.path.len() >= 2
                && import.path[0] == parent
                && import.path[1] != module[1]
                && submodules.contains(&import.path[1])
            {
                edges.entry(module[1].clone()).or_default().insert(import.path[1].clone());
            }
        }
    }
    // A submodule is on a cycle when it reaches itself; group those that reach each other.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = edges.get(from).into_iter().flatten().collect();
        while let Some(m) = todo.pop() {
            if seen.insert(m.clone()) {
                todo.extend(edges.get(m).into_iter().flatten());
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        submodules.iter().map(|m| (m, reach(m))).collect();
    let mut groups: BTreeSet<Vec<String>> = BTreeSet::new();
    for (m, r) in &reaches {
        if r.contains(*m) {
            let group: Vec<String> = r
                .iter()
                .filter(|o| reaches.get(o).is_some_and(|b| b.contains(*m)))
                .cloned()
                .collect();
            groups.insert(group);
        }
    }
    groups.into_iter().collect()
}

fn read(files: Vec<(PathBuf, Vec<String>)>) -> Vec<(PathBuf, Vec<String>, String)> {
    files.into_iter().map(|(p, m)| (p.clone(), m, std::fs::read_to_string(&p).unwrap())).collect()
}

#[test]
fn architecture_imports_point_down_the_module_map() {
    let files = read(library_files());
    let mut found = Vec::new();
    for (path, module, text) in &files {
        for v in violations(LAYERS, module, text) {
            found.push(format!("{}: {v}", path.display()));
        }
    }
    assert_eq!(found, Vec::<String>::new(), "imports against the map (docs/architecture.md)");
    // Every top-level module is placed: a directory or file under src/ names one.
    let placed = layer_of(LAYERS);
    let tops: BTreeSet<&String> = files.iter().map(|(_, m, _)| &m[0]).collect();
    let unplaced: Vec<&&String> = tops.iter().filter(|m| !placed.contains_key(**m)).collect();
    assert!(unplaced.is_empty(), "modules missing from LAYERS: {unplaced:?}");
    assert_eq!(tops.len(), placed.len(), "LAYERS names a module that does not exist");
}

#[test]
fn architecture_submodules_have_no_import_cycles() {
    let files = read(library_files());
    for parent in ACYCLIC {
        assert_eq!(cycles(parent, &files), Vec::<Vec<String>>::new(), "cycles in {parent}");
    }
}

#[test]
fn architecture_the_environment_is_read_in_config_only() {
    let mut found = Vec::new();
    for (path, module, text) in read(library_files()) {
        if module == ["config"] {
            continue;
        }
        let toks = tokens(&text);
        for w in toks.windows(3) {
            if w[0].text == "env"
                && w[1].text == "::"
                && ENVIRONMENT_READS.contains(&w[2].text.as_str())
            {
                found.push(format!("{}:{}: env::{}", path.display(), w[0].line, w[2].text));
            }
        }
    }
    assert_eq!(found, Vec::<String>::new(), "read the environment through crate::config");
}

fn module(path: &str) -> Vec<String> {
    path.split("::").map(str::to_owned).collect()
}

/// The checker itself: an upward import is reported (in a `use` tree, in code, through
/// `super::`), while comments, strings, lower layers, the module's own submodules and
/// inline test modules are not.
#[test]
fn architecture_checker_reports_an_upward_import() {
    let layers: &[&[&str]] = &[&["fs"], &["content"], &["snapshot", "action"]];
    let clean = r##"
        //! Docs may name [`crate::snapshot`].
        use crate::fs::{self, temp::{Purpose}};
        use super::codec::Compression;
        use std::io;
        /* crate::snapshot::Key in a block comment */
        const A: &str = "crate::snapshot::save";
        const B: &str = r#"use crate::action;"#;
        const C: char = '"';
        fn f<'a>(x: &'a str) -> crate::content::Tree { crate::fs::read(x) }
        #[cfg(test)]
        mod tests {
            use super::*;
            use super::super::tree::Tree;
        }
    "##;
    assert_eq!(violations(layers, &module("content::memo"), clean), Vec::<String>::new());
    let upward = "use std::io;\nuse crate::fs::{self, walk};\nuse crate::{fs::lock, snapshot::key::{SnapshotKey, Keys}};\n";
    assert_eq!(
        violations(layers, &module("content::memo"), upward),
        [
            "line 3: content uses crate::snapshot::key::SnapshotKey",
            "line 3: content uses crate::snapshot::key::Keys"
        ]
    );
    let in_code = "fn f() {\n    let _ = crate::action::run();\n}\n";
    assert_eq!(
        violations(layers, &module("content"), in_code),
        ["line 2: content uses crate::action::run"]
    );
    let through_super = "use super::super::snapshot::SnapshotKey;\n";
    assert_eq!(
        violations(layers, &module("fs::path"), through_super),
        ["line 1: fs uses crate::snapshot::SnapshotKey"]
    );
    // Siblings of one layer stay apart.
    assert_eq!(
        violations(layers, &module("action::run"), "use crate::snapshot::save;\n"),
        ["line 1: action uses crate::snapshot::save"]
    );
    assert_eq!(
        violations(layers, &module("transport"), ""),
        ["module transport is not in the map"]
    );
}

/// The cycle finder on synthetic sources: a cycle of three is one group; a module that
/// only uses the cycle is not in it.
#[test]
fn architecture_checker_reports_a_cycle() {
    let file = |m: &str, text: &str| (PathBuf::from(m), module(m), text.to_owned());
    let files = vec![
        file("snapshot::a", "use super::b::X;\n"),
        file("snapshot::b", "use crate::snapshot::c::Y;\n"),
        file("snapshot::c", "fn f() { super::a::g() }\n"),
        file("snapshot::d", "use super::a::Z;\n"),
    ];
    assert_eq!(cycles("snapshot", &files), [["a", "b", "c"]]);
    assert_eq!(cycles("snapshot", &files[1..]), Vec::<Vec<String>>::new());
}

/// A message string broken over lines without a `\` continuation keeps the next line's
/// indentation: the user reads "the absolute path of              the checkout". No line
/// of a string literal in the library or the CLI has a run of three or more spaces between
/// words (comments are not checked).
#[test]
fn architecture_no_message_has_a_lost_line_continuation() {
    let mut found = Vec::new();
    let mut files: Vec<PathBuf> = library_files().into_iter().map(|(p, _)| p).collect();
    files.extend(
        walkdir::WalkDir::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli"))
            .into_iter()
            .filter_map(Result::ok)
            .map(|e| e.into_path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs")),
    );
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let Some(start) = line.find('"') else { continue };
            let inside = &line[start..];
            let run =
                inside.trim_end().split(|c: char| c != ' ').skip(1).any(|spaces| spaces.len() >= 3);
            if run {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert_eq!(found, Vec::<String>::new(), "end the line with \\ to continue a string");
}
