//! Path normalisation of text: physical roots become `<PATH_i>` placeholders.
//!
//! A root is replaced only where it stands as a whole path prefix:
//!
//! * **Left boundary**: the occurrence starts the text, or the character before it is
//!   whitespace or one of `" ' = , : ; ( [ {`, or the text before it ends with an option
//!   token (`-I`, `--include`, `-isystem`, …: one or two `-`, an ASCII letter, then
//!   `[A-Za-z0-9_-]*`) that itself starts the text or follows whitespace or one of those
//!   delimiters.
//! * **Right boundary**: the occurrence ends the text, or the character after it is
//!   whitespace or one of `\ / " ' = , : ; ) ] }`.
//!
//! "Whitespace" is the Unicode `White_Space` property on *both* sides, and `;` counts on
//! *both* sides (the same rule before and after the root). So
//! `x;/root/a`, `-I/root/inc`, `"/root/f.h"` and `--opt=/root/gen` are normalised, while
//! `/rootx`, `/root-backup/x` and `/other/root/a` are not.
//!
//! Each root contributes three spellings (as is, `\` → `/`, `/` → `\`), trailing
//! separators stripped; empty spellings are dropped (so `/` never normalises anything), the
//! first root to claim a spelling wins, and spellings are applied longest first, each in
//! one left-to-right non-overlapping scan. A rejected occurrence is consumed.

/// Characters allowed right before a root (besides whitespace).
const LEFT_DELIMS: &[char] = &['"', '\'', '=', ',', ':', ';', '(', '[', '{'];
/// Characters allowed right after a root (besides whitespace).
const RIGHT_DELIMS: &[char] = &['\\', '/', '"', '\'', '=', ',', ':', ';', ')', ']', '}'];

/// The prefix every placeholder starts with; literal occurrences are escaped.
const ESCAPED: &str = "<PATH_";

/// The replacement table built from the ordered `--normalize-path` roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Normalizer {
    /// (spelling, placeholder), longest spelling first.
    table: Vec<(String, String)>,
}

impl Normalizer {
    /// Builds the table from roots that are already absolute and resolved. Root `i` maps to
    /// `<PATH_i>`.
    pub fn new(roots: &[String]) -> Self {
        let spelled: Vec<Vec<String>> = roots.iter().map(|r| vec![r.clone()]).collect();
        Self::with_spellings(&spelled)
    }

    /// Like [`Normalizer::new`], with several spellings of root `i` (e.g. the path as
    /// given through a symlinked directory and its resolved form), all mapping to
    /// `<PATH_i>`.
    pub fn with_spellings(roots: &[Vec<String>]) -> Self {
        let mut table: Vec<(String, String)> = Vec::new();
        for (i, root) in roots.iter().enumerate().flat_map(|(i, v)| v.iter().map(move |r| (i, r))) {
            let placeholder = format!("<PATH_{i}>");
            for spelling in [root.clone(), root.replace('\\', "/"), root.replace('/', "\\")] {
                let trimmed = spelling.trim_end_matches(['/', '\\']).to_owned();
                if trimmed.is_empty() || table.iter().any(|(s, _)| *s == trimmed) {
                    continue;
                }
                table.push((trimmed, placeholder.clone()));
            }
        }
        // Stable: equal lengths keep insertion order.
        table.sort_by_key(|entry| std::cmp::Reverse(entry.0.len()));
        Self { table }
    }

    /// True if there are no roots.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The byte spellings searched for (used to skip files that cannot contain a root).
    pub fn spellings(&self) -> impl Iterator<Item = &str> {
        self.table.iter().map(|(s, _)| s.as_str())
    }

    /// True if `bytes` contains any spelling (a cheap pre-check before decoding).
    pub fn may_apply(&self, bytes: &[u8]) -> bool {
        !self.table.is_empty()
            && (contains(bytes, ESCAPED.as_bytes())
                || self.table.iter().any(|(s, _)| contains(bytes, s.as_bytes())))
    }

    /// Normalises `text`. With at least one root, a literal `<PATH_` already in the text is
    /// first escaped to `<PATH_<`, so no text can spell a placeholder itself: normalisation
    /// stays one-to-one (a file containing `<PATH_0>/x` never collides with one containing
    /// `<root>/x`).
    pub fn apply(&self, text: &str) -> String {
        if self.table.is_empty() {
            return text.to_owned();
        }
        let mut current = text.replace(ESCAPED, "<PATH_<");
        for (spelling, placeholder) in &self.table {
            if current.contains(spelling.as_str()) {
                current = replace_bounded(&current, spelling, placeholder);
            }
        }
        current
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn replace_bounded(text: &str, needle: &str, placeholder: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(found) = text.get(pos..).and_then(|rest| rest.find(needle)) {
        let start = pos + found;
        let end = start + needle.len();
        let before = text.get(..start).unwrap_or_default();
        let after = text.get(end..).unwrap_or_default();
        out.push_str(text.get(pos..start).unwrap_or_default());
        if left_ok(before) && right_ok(after) {
            out.push_str(placeholder);
        } else {
            out.push_str(needle);
        }
        pos = end;
    }
    out.push_str(text.get(pos..).unwrap_or_default());
    out
}

fn is_left_delim(c: char) -> bool {
    c.is_whitespace() || LEFT_DELIMS.contains(&c)
}

fn right_ok(after: &str) -> bool {
    match after.chars().next() {
        None => true,
        Some(c) => c.is_whitespace() || RIGHT_DELIMS.contains(&c),
    }
}

fn left_ok(before: &str) -> bool {
    match before.chars().next_back() {
        None => return true,
        Some(c) if is_left_delim(c) => return true,
        _ => {}
    }
    // Option token: -X[A-Za-z0-9_-]* or --X..., starting at 0 or after a delimiter.
    let bytes = before.as_bytes();
    let mut i = bytes.len();
    while i > 0
        && bytes.get(i - 1).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
    {
        i -= 1;
    }
    // bytes[i..] is a run of [A-Za-z0-9_-]; find a valid token start inside it: the token
    // is "-" or "--", then a letter, then the rest of the run.
    let run = bytes.get(i..).unwrap_or_default();
    for start in 0..run.len() {
        let token = run.get(start..).unwrap_or_default();
        let dashes = token.iter().take_while(|b| **b == b'-').count();
        if !(1..=2).contains(&dashes) {
            continue;
        }
        if !token.get(dashes).is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        let token_start = i + start;
        let prefix = before.get(..token_start).unwrap_or_default();
        let ok = match prefix.chars().next_back() {
            None => true,
            Some(c) => is_left_delim(c),
        };
        if ok {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(roots: &[&str]) -> Normalizer {
        Normalizer::new(&roots.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn boundaries() {
        let z = n(&["/root"]);
        assert_eq!(z.apply("/root/a"), "<PATH_0>/a");
        assert_eq!(z.apply("/root"), "<PATH_0>");
        assert_eq!(z.apply("/rootx/a"), "/rootx/a");
        assert_eq!(z.apply("/root-backup/x"), "/root-backup/x");
        assert_eq!(z.apply("/other/root/a"), "/other/root/a");
        assert_eq!(z.apply("-I/root/inc"), "-I<PATH_0>/inc");
        assert_eq!(z.apply("--include/root/h"), "--include<PATH_0>/h");
        assert_eq!(z.apply("cc -isystem/root/x"), "cc -isystem<PATH_0>/x");
        assert_eq!(z.apply("x;/root/a"), "x;<PATH_0>/a");
        assert_eq!(z.apply("x;-I/root/a"), "x;-I<PATH_0>/a");
        assert_eq!(z.apply("\"/root/f.h\""), "\"<PATH_0>/f.h\"");
        assert_eq!(z.apply("--opt=/root/gen"), "--opt=<PATH_0>/gen");
        assert_eq!(z.apply("['-include/root/h']"), "['-include<PATH_0>/h']");
        assert_eq!(z.apply("a-I/root/x"), "a-I/root/x");
        assert_eq!(z.apply("\\root\\inc"), "<PATH_0>\\inc");
        assert_eq!(z.apply("\"\\n\" /n"), "\"\\n\" /n");
    }

    #[test]
    fn whitespace_is_symmetric() {
        let z = n(&["/root"]);
        // U+001F is not White_Space: neither side treats it as a boundary.
        assert_eq!(z.apply("\u{1f}/root/a"), "\u{1f}/root/a");
        assert_eq!(z.apply("a /root\u{1f}"), "a /root\u{1f}");
        assert_eq!(z.apply("\u{a0}/root\u{a0}"), "\u{a0}<PATH_0>\u{a0}");
    }

    #[test]
    fn longest_first_and_first_root_wins() {
        let z = n(&["/a", "/a/b"]);
        assert_eq!(z.apply("/a/b/c /a/x"), "<PATH_1>/c <PATH_0>/x");
        let dup = n(&["/a", "/a/"]);
        assert_eq!(dup.apply("/a/x"), "<PATH_0>/x");
        let root = n(&["/"]);
        assert!(root.is_empty());
        assert_eq!(root.apply("/x"), "/x");
    }

    #[test]
    fn literal_placeholders_cannot_collide() {
        let z = n(&["/root"]);
        assert_ne!(z.apply("<PATH_0>/data"), z.apply("/root/data"));
        assert_eq!(z.apply("<PATH_0>/data"), "<PATH_<0>/data");
        assert!(z.may_apply(b"<PATH_0>"));
        // Without roots nothing is rewritten.
        assert_eq!(n(&[]).apply("<PATH_0>"), "<PATH_0>");
    }

    #[test]
    fn rejected_occurrence_is_consumed() {
        let z = n(&["/r/r"]);
        // The first occurrence (at 1) fails the left boundary; the overlapping one at 3 is
        // not considered.
        assert_eq!(z.apply("x/r/r/r"), "x/r/r/r");
    }
}
