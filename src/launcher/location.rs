//! Relocation: where a compilation happens, and how its paths are
//! written so that a checkout or build directory at another absolute path finds the same
//! key.
//!
//! As in ccache's `base_dir`, an absolute path under one of the base directories
//! (`STRATA_BASE_DIRS`) is written relative to the working directory in the key
//! (`/work/a/src/x.c` seen from `/work/a/build` is `../src/x.c`), so two checkouts laid out
//! alike produce the same key. Paths are handled lexically (`.` dropped, `..` popped), never
//! through the filesystem. Unlike ccache, the compiler itself runs with the arguments
//! unchanged, so the object files equal a plain build's; what the outputs embed of the
//! location is checked instead (`super::entry`, "pins").

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// Where a compilation runs: its working directory and the base directories, all absolute
/// and lexically normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The working directory.
    pub cwd: PathBuf,
    /// Base directories: absolute paths below them are made relative to `cwd` in keys.
    pub base_dirs: Vec<PathBuf>,
}

/// Options whose value is joined to them and may be a path (`-I/abs/include`).
const JOINED_PATH_OPTIONS: &[&str] = &[
    "-I",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-include",
    "-imacros",
    "-isysroot",
    "-iprefix",
    "-iwithprefix",
    "-iwithprefixbefore",
    "--sysroot=",
    "-fprofile-use=",
    "-fprofile-dir=",
    "-fprofile-instr-use=",
    "-MF",
    "-MT",
    "-MQ",
    "-o",
];

/// Options of the form `-f…-prefix-map=OLD=NEW`.
const PREFIX_MAP_OPTIONS: &[&str] =
    &["-ffile-prefix-map=", "-fdebug-prefix-map=", "-fmacro-prefix-map=", "-fprofile-prefix-map="];

impl Location {
    /// The location with working directory `cwd` and base directories `base_dirs` (both made
    /// absolute against `cwd` and normalised; empty base directories are dropped).
    pub fn new(cwd: &Path, base_dirs: &[PathBuf]) -> Self {
        let cwd = normalize(cwd);
        let base_dirs = base_dirs
            .iter()
            .filter(|b| !b.as_os_str().is_empty())
            .map(|b| normalize(&cwd.join(b)))
            .collect();
        Self { cwd, base_dirs }
    }

    /// True if relocation is on (at least one base directory).
    pub fn relocates(&self) -> bool {
        !self.base_dirs.is_empty()
    }

    /// The form of `path` in a key: relative to the working directory if it is absolute and
    /// lies under a base directory, else unchanged.
    pub fn relocate_path(&self, path: &Path) -> PathBuf {
        if !path.is_absolute() {
            return path.to_path_buf();
        }
        let norm = normalize(path);
        if self.base_dirs.iter().any(|b| norm.starts_with(b)) {
            relative(&self.cwd, &norm)
        } else {
            path.to_path_buf()
        }
    }

    /// The form of one command-line argument in a key: a path argument (alone, or joined to
    /// an option such as `-I`, `-o`, `--sysroot=`, or either side of a `-f…-prefix-map=`)
    /// relocated with [`Location::relocate_path`]; anything else unchanged.
    pub fn relocate_arg(&self, arg: &OsStr) -> OsString {
        if !self.relocates() {
            return arg.to_owned();
        }
        let bytes = arg.as_bytes();
        if bytes.first() == Some(&b'/') {
            return self.relocate_path(Path::new(arg)).into_os_string();
        }
        for option in PREFIX_MAP_OPTIONS {
            if let Some(rest) = bytes.strip_prefix(option.as_bytes()) {
                let (old, new) = match rest.iter().position(|&b| b == b'=') {
                    Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                    None => (rest, None),
                };
                let mut out = option.as_bytes().to_vec();
                out.extend(self.relocate_bytes(old));
                if let Some(new) = new {
                    out.push(b'=');
                    out.extend(self.relocate_bytes(new));
                }
                return OsString::from_vec(out);
            }
        }
        for option in JOINED_PATH_OPTIONS {
            if let Some(rest) = bytes.strip_prefix(option.as_bytes())
                && rest.first() == Some(&b'/')
            {
                let mut out = option.as_bytes().to_vec();
                out.extend(self.relocate_bytes(rest));
                return OsString::from_vec(out);
            }
        }
        arg.to_owned()
    }

    fn relocate_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        if bytes.first() == Some(&b'/') {
            self.relocate_path(Path::new(OsStr::from_bytes(bytes))).into_os_string().into_vec()
        } else {
            bytes.to_vec()
        }
    }

    /// Where a path recorded by [`Location::relocate_path`] is here: a relative path joined to
    /// the working directory (lexically), an absolute one unchanged.
    pub fn resolve(&self, recorded: &Path) -> PathBuf {
        if recorded.is_absolute() { recorded.to_path_buf() } else { join(&self.cwd, recorded) }
    }

    /// The absolute path here that corresponds to `path` as seen from `origin_cwd` (another
    /// working directory): `path` relative to `origin_cwd`, joined to this working
    /// directory. Used to move the paths a cached depfile or message names.
    pub fn translate(&self, origin_cwd: &Path, path: &Path) -> PathBuf {
        join(&self.cwd, &relative(origin_cwd, &normalize(path)))
    }
}

/// Lexical normalisation: `.` removed, `..` pops (never above the root or the start of a
/// relative path, where it is kept).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let mut depth = 0usize; // normal components that `..` may pop
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if depth > 0 {
                    out.pop();
                    depth -= 1;
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            Component::Normal(name) => {
                out.push(name);
                depth += 1;
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `to` relative to `from` (both absolute and normalised): `..` for each component of
/// `from` below the common prefix, then the rest of `to`. `.` when they are equal.
pub fn relative(from: &Path, to: &Path) -> PathBuf {
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in b.iter().skip(common) {
        out.push(c.as_os_str());
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// `base` joined with the relative `rel`, normalised.
pub fn join(base: &Path, rel: &Path) -> PathBuf {
    normalize(&base.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(cwd: &str, bases: &[&str]) -> Location {
        Location::new(Path::new(cwd), &bases.iter().map(PathBuf::from).collect::<Vec<_>>())
    }

    #[test]
    fn paths_under_a_base_become_relative_to_the_working_directory() {
        let a = loc("/w/a/build", &["/w/a"]);
        let b = loc("/x/y/b/build", &["/x/y/b"]);
        for (arg, want) in [
            ("/w/a/src/x.c", "../src/x.c"),
            ("-I/w/a/src/include", "-I../src/include"),
            ("-isystem/w/a/third", "-isystem../third"),
            ("-ffile-prefix-map=/w/a=.", "-ffile-prefix-map=..=."),
            ("-o/w/a/build/x.o", "-ox.o"),
            ("/usr/include", "/usr/include"),
            ("-I/usr/include", "-I/usr/include"),
            ("-O2", "-O2"),
            ("/w/ab/x.c", "/w/ab/x.c"),
        ] {
            assert_eq!(a.relocate_arg(OsStr::new(arg)), OsStr::new(want), "{arg}");
        }
        // The same layout elsewhere gives the same key text.
        assert_eq!(
            a.relocate_arg(OsStr::new("-I/w/a/src/include")),
            b.relocate_arg(OsStr::new("-I/x/y/b/src/include"))
        );
        // Without base directories nothing moves.
        assert_eq!(
            loc("/w/a/build", &[]).relocate_arg(OsStr::new("/w/a/src/x.c")),
            OsStr::new("/w/a/src/x.c")
        );
    }

    #[test]
    fn lexical_helpers() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(normalize(Path::new("/../a")), Path::new("/a"));
        assert_eq!(normalize(Path::new("../a/../../b")), Path::new("../../b"));
        assert_eq!(relative(Path::new("/a/b"), Path::new("/a/c/d")), Path::new("../c/d"));
        assert_eq!(relative(Path::new("/a/b"), Path::new("/a/b")), Path::new("."));
        assert_eq!(relative(Path::new("/"), Path::new("/a")), Path::new("a"));
        assert_eq!(join(Path::new("/x/b"), Path::new("../c/d")), Path::new("/x/c/d"));
        let here = loc("/new/build", &["/new"]);
        assert_eq!(
            here.translate(Path::new("/old/build"), Path::new("/old/src/a.h")),
            Path::new("/new/src/a.h")
        );
        assert_eq!(here.resolve(Path::new("../src/a.h")), Path::new("/new/src/a.h"));
        assert_eq!(here.resolve(Path::new("/usr/a.h")), Path::new("/usr/a.h"));
    }
}
