//! Reading and rewriting the Make-format dependency files compilers write with `-MD`/`-MMD`.
//!
//! Format (GCC and clang): `target [target…]: dependency dependency … \` with
//! backslash-newline continuations; in a name, `\ ` is a space, `\#` a `#`, `$$` a `$`, and
//! any other backslash is literal (GCC writes `\` in Windows-style paths as is). `-MP` adds
//! one `header:` rule per header with no dependencies. Names are bytes.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// One rule: its targets and dependencies, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The targets (left of `:`).
    pub targets: Vec<PathBuf>,
    /// The dependencies (right of `:`), in order.
    pub dependencies: Vec<PathBuf>,
}

/// Parses a dependency file.
///
/// # Errors
/// A reason when a rule has no `:` (not a dependency file the launcher understands; the
/// compilation is then not cached).
pub fn parse(bytes: &[u8]) -> Result<Vec<Rule>, String> {
    // Join continuations first: `\` + newline (or `\` + CR LF) is a separator.
    let mut text = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' {
            match (bytes.get(i + 1), bytes.get(i + 2)) {
                (Some(b'\n'), _) => {
                    text.push(b' ');
                    i += 2;
                    continue;
                }
                (Some(b'\r'), Some(b'\n')) => {
                    text.push(b' ');
                    i += 3;
                    continue;
                }
                _ => {}
            }
        }
        text.push(b);
        i += 1;
    }
    let mut rules = Vec::new();
    for line in text.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let words = words(line);
        if words.is_empty() {
            continue;
        }
        let Some(colon) = words.iter().position(|w| w.ends_with(b":") && !w.ends_with(b"\\:"))
        else {
            return Err(format!("a line without a rule: {:?}", String::from_utf8_lossy(line)));
        };
        let mut targets: Vec<Vec<u8>> = words.get(..=colon).unwrap_or_default().to_vec();
        if let Some(last) = targets.last_mut() {
            last.pop();
            if last.is_empty() {
                targets.pop();
            }
        }
        let dependencies = words.get(colon + 1..).unwrap_or_default().to_vec();
        let to_paths =
            |v: Vec<Vec<u8>>| v.into_iter().map(|w| PathBuf::from(OsString::from_vec(w))).collect();
        rules.push(Rule { targets: to_paths(targets), dependencies: to_paths(dependencies) });
    }
    Ok(rules)
}

/// Splits a joined line into names, undoing `\ `, `\#` and `$$`.
fn words(line: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    let mut i = 0;
    while let Some(&b) = line.get(i) {
        match (b, line.get(i + 1)) {
            (b'\\', Some(&next @ (b' ' | b'#'))) => {
                current.push(next);
                i += 2;
                continue;
            }
            (b'$', Some(b'$')) => {
                current.push(b'$');
                i += 2;
                continue;
            }
            (b' ' | b'\t', _) => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(b),
        }
        i += 1;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Escapes a name for a dependency file (the inverse of the parser's unescaping).
fn escape(name: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in name.as_os_str().as_bytes() {
        match b {
            b' ' => out.extend_from_slice(b"\\ "),
            b'#' => out.extend_from_slice(b"\\#"),
            b'$' => out.extend_from_slice(b"$$"),
            _ => out.push(b),
        }
    }
    out
}

/// Writes `rules` as a dependency file: one line per rule, dependencies continued with
/// ` \` + newline, one per line (the shape GCC writes).
pub fn render(rules: &[Rule]) -> Vec<u8> {
    let mut out = Vec::new();
    for rule in rules {
        for (k, t) in rule.targets.iter().enumerate() {
            if k > 0 {
                out.push(b' ');
            }
            out.extend(escape(t));
        }
        out.push(b':');
        for d in &rule.dependencies {
            out.extend_from_slice(b" \\\n ");
            out.extend(escape(d));
        }
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn gcc_and_clang_shapes_parse() {
        let gcc = b"obj/a.o: /src/a.cpp /src/include/a.h \\\n /usr/include/stdio.h \\\n /src/with\\ space.h /src/hash\\#.h /src/dollar$$.h\n\n/src/include/a.h:\n";
        let rules = parse(gcc).unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].targets, [p("obj/a.o")]);
        assert_eq!(
            rules[0].dependencies,
            [
                p("/src/a.cpp"),
                p("/src/include/a.h"),
                p("/usr/include/stdio.h"),
                p("/src/with space.h"),
                p("/src/hash#.h"),
                p("/src/dollar$.h")
            ]
        );
        assert_eq!(
            (rules[1].targets.clone(), rules[1].dependencies.len()),
            (vec![p("/src/include/a.h")], 0)
        );
        // CR LF continuations, several targets.
        let crlf = b"a.o b.o: a.c \\\r\n  x.h\r\n";
        let rules = parse(crlf).unwrap();
        assert_eq!(rules[0].targets, [p("a.o"), p("b.o")]);
        assert_eq!(rules[0].dependencies, [p("a.c"), p("x.h")]);
    }

    /// What real gcc writes, with a header in a directory whose name has a space.
    #[test]
    #[allow(clippy::disallowed_methods)]
    fn a_real_gcc_depfile_parses() {
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("my inc");
        std::fs::create_dir(&inc).unwrap();
        std::fs::write(inc.join("h.h"), "#define H 1\n").unwrap();
        std::fs::write(dir.path().join("a.c"), "#include \"h.h\"\nint x = H;\n").unwrap();
        let status = std::process::Command::new("gcc")
            .args(["-c", "a.c", "-o", "a.o", "-MMD", "-MP", "-MF", "a.d", "-I", "my inc"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let rules = parse(&std::fs::read(dir.path().join("a.d")).unwrap()).unwrap();
        assert_eq!(rules[0].targets, [p("a.o")]);
        assert_eq!(rules[0].dependencies, [p("a.c"), p("my inc/h.h")]);
        assert_eq!(rules[1].targets, [p("my inc/h.h")], "-MP adds a phony rule");
    }

    #[test]
    fn rendering_round_trips_and_junk_is_refused() {
        let rules = vec![Rule {
            targets: vec![p("build dir/a.o")],
            dependencies: vec![p("src/a b.c"), p("inc/#odd$.h")],
        }];
        assert_eq!(parse(&render(&rules)).unwrap(), rules);
        assert!(parse(b"no colon here\n").is_err());
    }
}
