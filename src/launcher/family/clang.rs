//! Clang and compilers derived from it (Apple clang, Huawei's `bisheng`, Intel's `icx`, …).
//!
//! The depfile writer is `DependencyFileGenerator::outputDependencyFile` (Clang 9 to 19):
//! targets (quoted by the driver for `-MQ` and the default target) wrapped at 75 columns
//! with ` \` + newline + two spaces; each dependency preceded by a space, a continuation
//! ` \` + newline + one space when `column + length + 1 + 2` would pass 75 (the length
//! counted before quoting); dependencies quoted by `PrintFilename` (`#`, space with its
//! backslashes, `$`; a tab is not quoted). `-MP` adds, for every dependency after the
//! source, an empty line and `<dependency>:`.

use super::{Family, make_quote};

/// The Clang family.
#[derive(Debug, Clone, Copy)]
pub struct Clang;

/// Variables Clang's driver and preprocessor read that change the output or messages.
const KEY_ENVIRONMENT: &[&str] = &[
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "OBJC_INCLUDE_PATH",
    "SOURCE_DATE_EPOCH",
    "CCC_OVERRIDE_OPTIONS",
    "COMPILER_PATH",
    "SDKROOT",
    "MACOSX_DEPLOYMENT_TARGET",
    "LANG",
    "LC_ALL",
    "LC_MESSAGES",
    "LC_CTYPE",
];

/// The column Clang wraps depfile lines at.
const MAX_COLUMNS: usize = 75;

impl Family for Clang {
    fn name(&self) -> &'static str {
        "clang"
    }

    fn key_environment(&self) -> &'static [&'static str] {
        KEY_ENVIRONMENT
    }

    fn quote_target(&self, name: &[u8]) -> Vec<u8> {
        make_quote(name, true)
    }

    fn render_depfile(&self, targets: &[Vec<u8>], deps: &[Vec<u8>], phony: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut columns = 0usize;
        for t in targets {
            let n = t.len();
            if columns == 0 {
                columns += n;
            } else if columns + n + 2 > MAX_COLUMNS {
                columns = n + 2;
                out.extend_from_slice(b" \\\n  ");
            } else {
                columns += n + 1;
                out.push(b' ');
            }
            out.extend_from_slice(t);
        }
        out.push(b':');
        columns += 1;
        for d in deps {
            let n = d.len();
            if columns + (n + 1) + 2 > MAX_COLUMNS {
                out.extend_from_slice(b" \\\n ");
                columns = 2;
            }
            out.push(b' ');
            out.extend(make_quote(d, false));
            columns += n + 1;
        }
        out.push(b'\n');
        if phony {
            for d in deps.iter().skip(1) {
                out.push(b'\n');
                out.extend(make_quote(d, false));
                out.extend_from_slice(b":\n");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Clang 14 wrote for these names (tests/it/launcher checks real compilers).
    #[test]
    fn renders_like_clang() {
        let deps: Vec<Vec<u8>> = [
            "s.c",
            "in c/a.h",
            "d$x/b.h",
            "h#y/c.h",
            "bs/z/d.h",
            "verylongdirectorynamethatgoesonandonandon/andevenlongersubdirectorynames/e.h",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let targets = vec![b"my tgt".to_vec(), Clang.quote_target(b"q $t#")];
        let want = "my tgt q\\ $$t\\#: s.c in\\ c/a.h d$$x/b.h h\\#y/c.h bs/z/d.h \\\n  verylongdirectorynamethatgoesonandonandon/andevenlongersubdirectorynames/e.h\n\nin\\ c/a.h:\n\nd$$x/b.h:\n\nh\\#y/c.h:\n\nbs/z/d.h:\n\nverylongdirectorynamethatgoesonandonandon/andevenlongersubdirectorynames/e.h:\n";
        assert_eq!(String::from_utf8(Clang.render_depfile(&targets, &deps, true)).unwrap(), want);
    }
}
