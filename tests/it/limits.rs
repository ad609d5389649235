//! Size limits of the source (issue 11 item 4, "a thin CLI"): no file in `src/cli/` over
//! [`MAX_CLI_FILE_LINES`] lines, no function in `src/` over [`MAX_FUNCTION_LINES`] lines.
//!
//! A function's length is counted from the line of its `fn` keyword to the line of its
//! closing brace, both included (doc comments and attributes above it are not counted). The
//! scan is lexical: it skips comments, string, byte-string, raw-string and character
//! literals, tells lifetimes from character literals, and matches braces; a `fn` without a
//! body (a trait method declaration) and `fn(..)` pointer types are not functions.
//!
//! [`EXCLUDED`] lists directories the function limit does not cover yet (none today).

use std::path::{Path, PathBuf};

/// The most lines a file in `src/cli/` may have.
const MAX_CLI_FILE_LINES: usize = 400;
/// The most lines one function in `src/` may have.
const MAX_FUNCTION_LINES: usize = 120;
/// Directories under the repository root that the function limit does not cover yet.
const EXCLUDED: &[&str] = &[];

/// One function found by [`functions`]: its name, first line (1-based) and length in lines.
#[derive(Debug, PartialEq, Eq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

fn is_ident(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80
}

/// Every function with a body in the Rust source `text` (see the module docs).
fn functions(text: &str) -> Vec<Function> {
    let b = text.as_bytes();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let mut found = Vec::new();
    // Open braces: `Some((name, line))` for a function body.
    let mut braces: Vec<Option<(String, usize)>> = Vec::new();
    // A `fn name` whose body has not started: name, line, paren/bracket depth at `fn`.
    let mut pending: Option<(String, usize, usize)> = None;
    let mut depth = 0usize;
    let mut line = 1usize;
    let mut i = 0usize;
    // The last word was `fn`, with only white space since.
    let mut last_word_fn = false;
    // Skips to the end of a quoted literal starting at `i` (on the opening quote), counting
    // newlines; `raw` is the number of `#` of a raw string, `None` for an escaped string.
    let skip_quoted = |i: &mut usize, line: &mut usize, quote: u8, raw: Option<usize>| {
        *i += 1;
        while *i < b.len() {
            let c = b[*i];
            if c == b'\n' {
                *line += 1;
            }
            if raw.is_none() && c == b'\\' {
                if at(*i + 1) == b'\n' {
                    *line += 1;
                }
                *i += 2;
                continue;
            }
            if c == quote {
                let hashes = raw.unwrap_or(0);
                if (1..=hashes).all(|k| at(*i + k) == b'#') {
                    *i += 1 + hashes;
                    return;
                }
            }
            *i += 1;
        }
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'/' if at(i + 1) == b'/' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if at(i + 1) == b'*' => {
                let mut nest = 0usize;
                while i < b.len() {
                    if b[i] == b'/' && at(i + 1) == b'*' {
                        nest += 1;
                        i += 2;
                    } else if b[i] == b'*' && at(i + 1) == b'/' {
                        nest -= 1;
                        i += 2;
                        if nest == 0 {
                            break;
                        }
                    } else {
                        if b[i] == b'\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                }
            }
            b'"' => skip_quoted(&mut i, &mut line, b'"', None),
            b'\'' => {
                // A character literal ('x', '\n', '\u{..}', 'é') or a lifetime ('a, 'static).
                if at(i + 1) == b'\\' {
                    skip_quoted(&mut i, &mut line, b'\'', None);
                } else {
                    let width = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                    if at(i + 1 + width) == b'\'' {
                        i += 2 + width;
                    } else {
                        i += 1;
                    }
                }
            }
            c if is_ident(c) => {
                let start = i;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                let word = &text[start..i];
                let raw_prefix = matches!(word, "r" | "br" | "cr");
                if raw_prefix && (at(i) == b'"' || at(i) == b'#') {
                    let mut hashes = 0;
                    while at(i + hashes) == b'#' {
                        hashes += 1;
                    }
                    if at(i + hashes) == b'"' {
                        i += hashes;
                        skip_quoted(&mut i, &mut line, b'"', Some(hashes));
                        continue;
                    }
                }
                if matches!(word, "b" | "c") && at(i) == b'\'' {
                    skip_quoted(&mut i, &mut line, b'\'', None);
                    continue;
                }
                // `fn` followed (after white space) by a name: a function.
                if last_word_fn {
                    pending = Some((word.to_owned(), line, depth));
                }
                last_word_fn = word == "fn";
                continue;
            }
            b'(' | b'[' => {
                depth += 1;
                i += 1;
            }
            b')' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b';' => {
                if pending.as_ref().is_some_and(|p| p.2 == depth) {
                    pending = None;
                }
                i += 1;
            }
            b'{' => {
                let body = match pending.take() {
                    Some((name, start, d)) if d == depth => Some((name, start)),
                    other => {
                        pending = other;
                        None
                    }
                };
                braces.push(body);
                i += 1;
            }
            b'}' => {
                if let Some(Some((name, start))) = braces.pop() {
                    found.push(Function { name, line: start, lines: line - start + 1 });
                }
                i += 1;
            }
            _ => i += 1,
        }
        if !c.is_ascii_whitespace() {
            last_word_fn = false;
        }
    }
    found
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
}

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn cli_files_stay_small() {
    let root = repository();
    let mut over = Vec::new();
    for file in rust_files(&root.join("src/cli")) {
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        if lines > MAX_CLI_FILE_LINES {
            over.push(format!("{} has {lines} lines", file.strip_prefix(&root).unwrap().display()));
        }
    }
    assert!(
        over.is_empty(),
        "src/cli/ files over {MAX_CLI_FILE_LINES} lines (move logic into the library, split \
         by subcommand):\n{}",
        over.join("\n")
    );
}

#[test]
fn functions_stay_short() {
    let root = repository();
    let mut over = Vec::new();
    let mut scanned = 0;
    for file in rust_files(&root.join("src")) {
        let rel = file.strip_prefix(&root).unwrap();
        if EXCLUDED.iter().any(|e| rel.starts_with(e)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for f in functions(&text) {
            scanned += 1;
            if f.lines > MAX_FUNCTION_LINES {
                over.push(format!(
                    "{}:{} fn {} has {} lines",
                    rel.display(),
                    f.line,
                    f.name,
                    f.lines
                ));
            }
        }
    }
    // The scan found the crate's functions (not nothing, through a broken tokenizer).
    assert!(scanned > 1000, "only {scanned} functions found under src/");
    assert!(
        over.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them by step):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_scan_measures_functions_and_skips_literals() {
    let text = r####"
/// fn not_a_function() {
fn one() {
    let s = "} { fn fake() {";
    let r = r#"}"#;
    let c = '}';
    let q = '\'';
    let b = b'{';
    /* } nested /* { */ } */
    let f: fn(u8) -> u8 = |x| x;
}
trait T {
    fn declared(&self) -> [u8; 2];
    fn with_default<'a>(&'a self) -> &'a str {
        "x"
    }
}
fn outer() {
    fn inner() {}
    if true { let _ = [0u8; 3]; }
}
"####;
    let found = functions(text);
    let summary: Vec<(&str, usize, usize)> =
        found.iter().map(|f| (f.name.as_str(), f.line, f.lines)).collect();
    assert_eq!(
        summary,
        vec![("one", 3, 9), ("with_default", 14, 3), ("inner", 19, 1), ("outer", 18, 4)]
    );
}
