//! Glob patterns for `--exclude` and `--artifact-include`.
//!
//! Patterns match a whole relative POSIX path. `*` matches any run of characters
//! *including* `/` (shell `fnmatch` semantics, not gitignore), `?` one character, `[...]`
//! and `[!...]` classes; backslash is a literal character, not an escape. `{a,b}`
//! alternation is also accepted (globset syntax; `fnmatch` has none). Matching is
//! case-sensitive.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::action::Error;
use crate::fs::RelPath;

/// Default excludes for directory walks of prepared inputs. `.git` and `__pycache__` are
/// excluded at any depth (not only at the top of the walk), so a nested
/// repository or a submodule's `.git` file never enters identity.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    ".git",
    "*/.git",
    "__pycache__",
    "*/__pycache__",
    "*.pyc",
    "*.pyo",
    "*.done",
    "*.log",
    "*.tmp",
];

/// A compiled list of patterns.
#[derive(Debug, Clone)]
pub struct Patterns {
    set: GlobSet,
    texts: Vec<String>,
}

impl Patterns {
    /// Compiles `patterns`.
    ///
    /// # Errors
    /// [`Error::InvalidGlob`] naming the pattern.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, Error> {
        let mut builder = GlobSetBuilder::new();
        let mut texts = Vec::new();
        for p in patterns {
            let p = p.as_ref();
            let glob = GlobBuilder::new(p)
                .literal_separator(false)
                .backslash_escape(false)
                .build()
                // The kind only: the error's own text repeats the pattern the variant names.
                .map_err(|e| Error::InvalidGlob {
                    pattern: p.to_owned(),
                    reason: e.kind().to_string(),
                })?;
            builder.add(glob);
            texts.push(p.to_owned());
        }
        let set = builder.build().map_err(|e| Error::InvalidGlob {
            pattern: texts.join(" "),
            reason: e.kind().to_string(),
        })?;
        Ok(Self { set, texts })
    }

    /// The default excludes plus `extra`.
    ///
    /// # Errors
    /// As [`Patterns::new`].
    pub fn excludes_with<S: AsRef<str>>(extra: &[S]) -> Result<Self, Error> {
        let mut all: Vec<String> = DEFAULT_EXCLUDES.iter().map(|s| s.to_string()).collect();
        all.extend(extra.iter().map(|s| s.as_ref().to_owned()));
        Self::new(&all)
    }

    /// True if any pattern matches `rel` (a relative POSIX path, as its bytes).
    pub fn is_match(&self, rel: &str) -> bool {
        self.set.is_match(rel)
    }

    /// True if any pattern matches the bytes of `rel` on disk: patterns see the real name,
    /// never its recorded `\xHH` escapes, so `*.h` matches a Latin-1 `bad<0xE9>.h` and a
    /// pattern `a\b` the real name `a\b`.
    pub fn is_match_rel(&self, rel: &RelPath) -> bool {
        if rel.as_str().contains('\\') {
            self.set.is_match(rel.to_relative_path())
        } else {
            self.set.is_match(rel.as_str())
        }
    }

    /// True if there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The pattern texts, in order.
    pub fn texts(&self) -> &[String] {
        &self.texts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_crosses_slash() {
        let p = Patterns::new(&["*.pyc", ".git/**", "lib/*.a"]).unwrap();
        assert!(p.is_match("a/b/c.pyc"));
        assert!(p.is_match(".git/objects/x"));
        assert!(!p.is_match("sub/.gitx"));
        assert!(p.is_match("lib/deep/libz.a"), "* crosses / as in fnmatch");
        assert!(!p.is_match("out/lib/libz.a"), "the whole path must match");
        assert!(!p.is_match("lib/libz.so"));
        let q = Patterns::new(&["a\\b"]).unwrap();
        assert!(q.is_match("a\\b"), "backslash is literal");
        assert!(q.is_match_rel(&RelPath::new("a\\x5cb").unwrap()), "matched on the real name");
        let h = Patterns::new(&["*.h"]).unwrap();
        assert!(h.is_match_rel(&RelPath::new("inc/bad\\xe9.h").unwrap()));
        assert!(!h.is_match_rel(&RelPath::new("inc/bad\\xe9.c").unwrap()));
    }

    #[test]
    fn default_excludes_at_any_depth() {
        let p = Patterns::excludes_with::<&str>(&[]).unwrap();
        assert!(p.is_match(".git"));
        assert!(p.is_match("sub/.git"));
        assert!(p.is_match("deep/er/__pycache__"));
        assert!(p.is_match("stamp.done"));
        assert!(!p.is_match("src/a.c"));
        assert!(!p.is_match("my.git"));
    }

    #[test]
    fn bad_pattern_is_an_error() {
        let err = Patterns::new(&["[unclosed"]).err().unwrap();
        assert!(matches!(err, Error::InvalidGlob { .. }));
        // The pattern is named once, not again by the parser's own text.
        assert_eq!(
            err.to_string(),
            "invalid glob pattern \"[unclosed\": unclosed character class; missing ']'"
        );
    }
}
