//! GCC and compilers derived from it (cross compilers such as `aarch64-linux-gnu-gcc`,
//! distribution builds, `cc`/`c++` links to them).
//!
//! The depfile writer is libcpp's `mkdeps.cc` (GCC 10 to 14): targets and dependencies are
//! written with `make_write_name` into lines of at most 72 columns (a name that would pass
//! column 72 starts a continuation line ` \` + newline + one space), `-MT` targets as given,
//! `-MQ` targets and every dependency quoted by `munge` (`make_quote`); `-MP`
//! adds `<dependency>:` for every dependency after the source, with no blank lines.

use super::{Family, make_quote};

/// The GCC family.
#[derive(Debug, Clone, Copy)]
pub struct Gcc;

/// Variables GCC's driver and preprocessor read that change the output or messages.
const KEY_ENVIRONMENT: &[&str] = &[
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "OBJC_INCLUDE_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
    "SOURCE_DATE_EPOCH",
    "GCC_COMPARE_DEBUG",
    "GCC_EXTRA_DIAGNOSTIC_OUTPUT",
    "GCC_COLORS",
    "GCC_URLS",
    "TERM_URLS",
    "LANG",
    "LC_ALL",
    "LC_MESSAGES",
    "LC_CTYPE",
];

/// The column GCC wraps depfile lines at.
const COLMAX: usize = 72;

impl Family for Gcc {
    fn name(&self) -> &'static str {
        "gcc"
    }

    fn key_environment(&self) -> &'static [&'static str] {
        KEY_ENVIRONMENT
    }

    fn quote_target(&self, name: &[u8]) -> Vec<u8> {
        make_quote(name, true)
    }

    fn render_depfile(&self, targets: &[Vec<u8>], deps: &[Vec<u8>], phony: bool) -> Vec<u8> {
        let mut out = Vec::new();
        if deps.is_empty() {
            return out;
        }
        let mut col = 0usize;
        let write = |out: &mut Vec<u8>, name: &[u8], col: usize| -> usize {
            let mut col = col;
            if col > 0 {
                if col + name.len() > COLMAX {
                    out.extend_from_slice(b" \\\n");
                    col = 0;
                }
                col += 1;
                out.push(b' ');
            }
            out.extend_from_slice(name);
            col + name.len()
        };
        for t in targets {
            col = write(&mut out, t, col);
        }
        out.push(b':');
        col += 1;
        for d in deps {
            col = write(&mut out, &make_quote(d, true), col);
        }
        out.push(b'\n');
        if phony {
            for d in deps.iter().skip(1) {
                out.extend(make_quote(d, true));
                out.extend_from_slice(b":\n");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What GCC 12 wrote for these names (tests/it/launcher checks real compilers).
    #[test]
    fn renders_like_gcc() {
        let deps: Vec<Vec<u8>> = [
            "s.c",
            "/usr/include/stdc-predef.h",
            "in c/a.h",
            "d$x/b.h",
            "h#y/c.h",
            "bs\\z/d.h",
            "verylongdirectorynamethatgoesonandonandon/andevenlongersubdirectorynames/e.h",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let targets = vec![Gcc.quote_target(b"o b$j.o")];
        let want = "o\\ b$$j.o: s.c /usr/include/stdc-predef.h in\\ c/a.h d$$x/b.h h\\#y/c.h \\\n bs\\z/d.h \\\n verylongdirectorynamethatgoesonandonandon/andevenlongersubdirectorynames/e.h\n";
        assert_eq!(String::from_utf8(Gcc.render_depfile(&targets, &deps, false)).unwrap(), want);
        let targets = vec![b"my tgt".to_vec(), Gcc.quote_target(b"q $t#")];
        let want = "my tgt q\\ $$t\\#: s.c /usr/include/stdc-predef.h in\\ c/a.h d$$x/b.h \\\n h\\#y/c.h bs\\z/d.h \\\n verylongdirectorynamethatgoesonandonandon/andevenlongersubdirectorynames/e.h\n/usr/include/stdc-predef.h:\nin\\ c/a.h:\nd$$x/b.h:\nh\\#y/c.h:\nbs\\z/d.h:\nverylongdirectorynamethatgoesonandonandon/andevenlongersubdirectorynames/e.h:\n";
        assert_eq!(String::from_utf8(Gcc.render_depfile(&targets, &deps, true)).unwrap(), want);
    }
}
