//! Relocation: where a compilation happens, and how the paths it names are written so that a
//! checkout or build directory at another absolute path finds the same key and gets back
//! what a plain compile there would write.
//!
//! As with ccache's `base_dir`, an absolute path under one of the base directories
//! (`STRATA_BASE_DIRS`) is written relative to the working directory. Unlike ccache, and
//! unlike a lexical `relative_to`, the relative form here is **exact and kernel-safe**:
//!
//! * It keeps the path's own bytes after the part it shares with the working directory:
//!   `/w/a/build/../src/x.c` seen from `/w/a/build` is "the working directory, then
//!   `/../src/x.c`", not `../src/x.c`. The compiler writes the string it was given, so the
//!   string must come back unchanged, and `build/..` is only the parent of `build` when
//!   `build` is not a symlink, which a lexical rule cannot know.
//! * Leading components are only ever removed from the working directory, which `getcwd`
//!   reports without symlinks, so "the working directory's parent" is the directory the
//!   kernel reaches with `..` from there.
//! * When the shell entered the working directory through a symlink (`$PWD` names it by
//!   another path, as `cd` keeps it), paths under that spelling are anchored at `$PWD`
//!   instead, and come back under the current `$PWD`: a symlinked working directory keeps
//!   its keys. `$PWD` is used only when each of its ancestors is the same directory as the
//!   matching ancestor of the physical one, so removing components from it means what the
//!   kernel does with `..`.
//!
//! A relocated path is a [`Spelled::Anchored`]: an anchor (the physical or the logical
//! working directory), how many trailing components to remove from it (`up`), and the
//! exact rest of the string. Its record form is `\c<up><rest>` (or `\p<up><rest>` for
//! `$PWD`); a backslash never starts anything else in the name encoding
//! ([`crate::fs::name`], where `\` is always `\x5c`), so the form is unambiguous.
//!
//! Base directories are matched in the spelling they were given (made absolute against the
//! working directory, without `.` and trailing `/`) and in their canonical form, so a base
//! directory given through a symlink still covers the paths the build writes physically.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Which spelling of the working directory a relocated path is anchored at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Anchor {
    /// The physical working directory (`getcwd`).
    Cwd,
    /// The logical one (`$PWD`, through symlinks).
    Pwd,
}

impl Anchor {
    fn letter(self) -> char {
        match self {
            Anchor::Cwd => 'c',
            Anchor::Pwd => 'p',
        }
    }
}

/// A path as a record holds it: unchanged, or relocated against the working directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Spelled {
    /// A relative path (to the working directory), or an absolute one under no base
    /// directory: the same string everywhere.
    Plain(OsString),
    /// An absolute path under a base directory: the anchor with its last `up` components
    /// removed, followed by `rest` (empty, or starting with `/`), byte for byte.
    Anchored {
        /// The working directory's spelling the path starts with.
        anchor: Anchor,
        /// Trailing components removed from the anchor.
        up: u32,
        /// The rest of the path, exactly as given (empty or starting with `/`).
        rest: OsString,
    },
}

/// A record text that is not a [`Spelled`] encoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a recorded path ({why})")]
pub struct BadSpelling {
    /// The text.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl Spelled {
    /// The record text: the name encoding of a plain path, `\c<up><rest>` / `\p<up><rest>`
    /// (rest name-encoded) for an anchored one.
    pub fn encode(&self) -> String {
        match self {
            Spelled::Plain(p) => crate::fs::name::encode_os(p),
            Spelled::Anchored { anchor, up, rest } => {
                format!("\\{}{up}{}", anchor.letter(), crate::fs::name::encode_os(rest))
            }
        }
    }

    /// Reads [`Spelled::encode`]'s text back.
    ///
    /// # Errors
    /// [`BadSpelling`] for a text that no path encodes to.
    pub fn decode(text: &str) -> Result<Spelled, BadSpelling> {
        let bad = |why| BadSpelling { text: text.to_owned(), why };
        let name = |t: &str| crate::fs::name::decode_os(t).map_err(|_| bad("not a name encoding"));
        let Some(tail) = text.strip_prefix('\\').filter(|t| !t.starts_with('x')) else {
            return Ok(Spelled::Plain(name(text)?));
        };
        let anchor = match tail.chars().next() {
            Some('c') => Anchor::Cwd,
            Some('p') => Anchor::Pwd,
            _ => return Err(bad("unknown anchor")),
        };
        let tail = &tail[1..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let up = tail[..digits].parse::<u32>().map_err(|_| bad("no component count"))?;
        let rest = name(&tail[digits..])?;
        if !(rest.is_empty() || rest.as_bytes().first() == Some(&b'/')) {
            return Err(bad("the rest of an anchored path must start with /"));
        }
        Ok(Spelled::Anchored { anchor, up, rest })
    }
}

/// Where a compilation runs: the working directory (physical, and logical when the shell
/// entered it through a symlink) and the base directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The working directory, as `getcwd` reports it (no symlinks).
    pub cwd: PathBuf,
    /// `$PWD`, when it names the working directory through a symlink and each of its
    /// ancestors is the matching physical ancestor (see the module docs).
    pub pwd: Option<PathBuf>,
    /// Base directories as given (absolute, without `.` components or a trailing `/`).
    pub base_dirs: Vec<PathBuf>,
    /// Every spelling a path is relocated under: the working directory (physical and
    /// logical) and each base directory as given and canonical.
    spellings: Vec<Vec<u8>>,
}

impl Location {
    /// The location with working directory `cwd` (physical) and base directories
    /// `base_dirs`; the logical working directory comes from `$PWD`.
    pub fn new(cwd: &Path, base_dirs: &[PathBuf]) -> Self {
        let pwd = crate::config::var_raw("PWD").map(PathBuf::from);
        Self::with_pwd(cwd, pwd.as_deref(), base_dirs)
    }

    /// [`Location::new`] with an explicit logical working directory (`None`: none).
    pub fn with_pwd(cwd: &Path, pwd: Option<&Path>, base_dirs: &[PathBuf]) -> Self {
        let cwd = clean(cwd);
        let pwd = pwd.map(clean).filter(|p| p.is_absolute() && *p != cwd && same_chain(p, &cwd));
        let base_dirs: Vec<PathBuf> = base_dirs
            .iter()
            .filter(|b| !b.as_os_str().is_empty())
            .map(|b| clean(&cwd.join(b)))
            .collect();
        // The working directory always relocates: a path under it comes from a relative
        // argument or names the same place relative to it.
        let mut spellings: Vec<Vec<u8>> = vec![cwd.as_os_str().as_bytes().to_vec()];
        if let Some(pwd) = &pwd {
            spellings.push(pwd.as_os_str().as_bytes().to_vec());
        }
        for b in &base_dirs {
            let canonical = crate::fs::canonicalize(b).ok();
            for form in std::iter::once(b.clone()).chain(canonical) {
                let bytes = form.into_os_string().into_vec();
                if !spellings.contains(&bytes) {
                    spellings.push(bytes);
                }
            }
        }
        Self { cwd, pwd, base_dirs, spellings }
    }

    /// A location described by a record (a candidate's origin): nothing is looked up on
    /// disk, the spellings are the ones recorded.
    pub fn recorded(cwd: PathBuf, pwd: Option<PathBuf>, spellings: Vec<PathBuf>) -> Self {
        let spellings: Vec<Vec<u8>> =
            spellings.into_iter().map(|p| p.into_os_string().into_vec()).collect();
        let base_dirs = spellings.iter().map(|b| PathBuf::from(OsStr::from_bytes(b))).collect();
        Self { cwd, pwd, base_dirs, spellings }
    }

    /// Every spelling a base directory is matched in (as given, canonical).
    pub fn base_spellings(&self) -> impl Iterator<Item = &Path> {
        self.spellings.iter().map(|b| Path::new(OsStr::from_bytes(b)))
    }

    /// True if `path` (absolute) lies under the working directory or a base directory, by
    /// its string.
    pub fn under_base(&self, path: &[u8]) -> bool {
        self.spellings.iter().any(|b| starts_with_dir(path, b))
    }

    /// The record form of `path` (see the module docs): anchored if it is absolute and lies
    /// under a base directory and starts with an ancestor of the working directory; plain
    /// otherwise.
    pub fn spell(&self, path: &OsStr) -> Spelled {
        let bytes = path.as_bytes();
        if bytes.first() != Some(&b'/') || !self.under_base(bytes) {
            return Spelled::Plain(path.to_owned());
        }
        let mut best: Option<(usize, Anchor, u32)> = None;
        let anchors = [(Anchor::Cwd, Some(&self.cwd)), (Anchor::Pwd, self.pwd.as_ref())];
        for (anchor, dir) in anchors {
            let Some(dir) = dir else { continue };
            if let Some((up, len)) = longest_ancestor(dir.as_os_str().as_bytes(), bytes)
                && best.is_none_or(|(l, _, _)| len > l)
            {
                best = Some((len, anchor, up));
            }
        }
        match best {
            Some((len, anchor, up)) => Spelled::Anchored {
                anchor,
                up,
                rest: OsStr::from_bytes(bytes.get(len..).unwrap_or_default()).to_owned(),
            },
            None => Spelled::Plain(path.to_owned()),
        }
    }

    /// The path a [`Spelled`] stands for here (`None` for a path anchored at `$PWD` where
    /// there is no logical working directory, or with more components removed than the
    /// anchor has).
    pub fn here(&self, spelled: &Spelled) -> Option<OsString> {
        match spelled {
            Spelled::Plain(p) => Some(p.clone()),
            Spelled::Anchored { anchor, up, rest } => {
                let dir = match anchor {
                    Anchor::Cwd => &self.cwd,
                    Anchor::Pwd => self.pwd.as_ref()?,
                };
                let mut out = ancestor(dir.as_os_str().as_bytes(), *up)?.to_vec();
                out.extend_from_slice(rest.as_bytes());
                if out.is_empty() {
                    out.push(b'/');
                }
                Some(OsString::from_vec(out))
            }
        }
    }

    /// The record text of `path` ([`Location::spell`], encoded).
    pub fn encode(&self, path: &OsStr) -> String {
        self.spell(path).encode()
    }

    /// The path of a record text here ([`Spelled::decode`], then [`Location::here`]).
    pub fn decode(&self, text: &str) -> Option<PathBuf> {
        Spelled::decode(text).ok().and_then(|s| self.here(&s)).map(PathBuf::from)
    }

    /// `path` (as the compiler names it) made absolute: relative ones joined to the
    /// physical working directory as strings (the kernel resolves them from there).
    pub fn absolute(&self, path: &Path) -> PathBuf {
        if path.is_absolute() { path.to_path_buf() } else { self.cwd.join(path) }
    }

    /// The form of one command-line argument in a key: a path (alone, joined to an option
    /// such as `-I`, `--sysroot=`, or on either side of a `-f…-prefix-map=`) in its record
    /// form, so that an absolute path under a base directory and the same path given
    /// relative differ (the compiler writes them differently) while the same layout at
    /// another place is equal; anything else unchanged.
    pub fn relocate_arg(&self, arg: &OsStr) -> OsString {
        let bytes = arg.as_bytes();
        if bytes.first() == Some(&b'/') {
            return self.key_text(bytes);
        }
        for option in PREFIX_MAP_OPTIONS {
            if let Some(rest) = bytes.strip_prefix(option.as_bytes()) {
                let (old, new) = match rest.iter().position(|&b| b == b'=') {
                    Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                    None => (rest, None),
                };
                let mut out = option.as_bytes().to_vec();
                out.extend(self.key_text(old).into_vec());
                if let Some(new) = new {
                    out.push(b'=');
                    out.extend(self.key_text(new).into_vec());
                }
                return OsString::from_vec(out);
            }
        }
        for option in JOINED_PATH_OPTIONS {
            if let Some(rest) = bytes.strip_prefix(option.as_bytes())
                && rest.first() == Some(&b'/')
            {
                let mut out = option.as_bytes().to_vec();
                out.extend(self.key_text(rest).into_vec());
                return OsString::from_vec(out);
            }
        }
        arg.to_owned()
    }

    /// A path's bytes in a key: plain paths unchanged (they never hold a NUL), anchored
    /// ones as NUL + their record text, so no plain argument can equal one.
    fn key_text(&self, path: &[u8]) -> OsString {
        match self.spell(OsStr::from_bytes(path)) {
            Spelled::Plain(p) => p,
            anchored => {
                let mut out = vec![0u8];
                out.extend_from_slice(anchored.encode().as_bytes());
                OsString::from_vec(out)
            }
        }
    }

    /// Rewrites the absolute paths in `text` (compiler messages) that `origin` would have
    /// recorded anchored, so they name the same place relative to this working directory:
    /// at every start of a path (after a byte that cannot continue a name) that lies under
    /// one of `origin`'s base directories, the longest ancestor of an origin anchor it
    /// starts with becomes the same ancestor of this location's anchor. Other bytes are
    /// unchanged.
    pub fn rewrite_text(&self, origin: &Location, text: &[u8]) -> Vec<u8> {
        if origin.spellings.is_empty() || (origin.cwd == self.cwd && origin.pwd == self.pwd) {
            return text.to_vec();
        }
        let mut out = Vec::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            let boundary = i == 0 || !continues_name(text[i - 1]);
            if boundary
                && text[i] == b'/'
                && let Some(len) = origin.path_len_under_base(&text[i..])
            {
                let token = &text[i..i + len];
                let spelled = origin.spell(OsStr::from_bytes(token));
                if let Some(moved) = self.here(&spelled) {
                    out.extend_from_slice(moved.as_bytes());
                    i += len;
                    continue;
                }
            }
            out.push(text[i]);
            i += 1;
        }
        out
    }

    /// The length of the path at the start of `text` (up to a byte that ends a path in a
    /// message: white space, a quote, `:`, `(`, `)`, `,`, `;`, `<`, `>`, a control byte) if
    /// it lies under a base directory.
    fn path_len_under_base(&self, text: &[u8]) -> Option<usize> {
        let len = text
            .iter()
            .position(|&b| {
                b < 0x20
                    || b == 0x7f
                    || matches!(b, b' ' | b'"' | b'\'' | b'`' | b':' | b'(' | b')' | b',' | b';')
                    || matches!(b, b'<' | b'>')
            })
            .unwrap_or(text.len());
        let token = &text[..len];
        self.under_base(token).then_some(len)
    }
}

/// Bytes that can continue a file name: a path that follows one of them is not the start
/// of a path.
fn continues_name(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+' | b'~' | b'/' | b'\\')
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
    "-fcallgraph-info=",
    "-MF",
    "-MT",
    "-MQ",
    "-MJ",
    "-o",
    "-L",
    "-B",
];

/// Options of the form `-f…-prefix-map=OLD=NEW`.
const PREFIX_MAP_OPTIONS: &[&str] =
    &["-ffile-prefix-map=", "-fdebug-prefix-map=", "-fmacro-prefix-map=", "-fprofile-prefix-map="];

/// `path` without `.` components, repeated or trailing `/` (never touching `..`).
pub fn clean(path: &Path) -> PathBuf {
    let bytes = path.as_os_str().as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    if bytes.first() == Some(&b'/') {
        out.push(b'/');
    }
    for part in bytes.split(|&b| b == b'/').filter(|p| !p.is_empty() && *p != b".") {
        if !out.is_empty() && out.last() != Some(&b'/') {
            out.push(b'/');
        }
        out.extend_from_slice(part);
    }
    if out.is_empty() {
        out.push(b'.');
    }
    PathBuf::from(OsString::from_vec(out))
}

/// The part of `path` below the directory `dir` (both as bytes, `dir` without a trailing
/// `/`), with every separator between them removed: `a/b` for `<dir>/a/b` and for
/// `<dir>//a/b` alike. `None` when `path` does not lie under `dir` or names `dir` itself.
/// What is left is never absolute, so joining it to `dir` again (or to another directory)
/// names what `path` named there; stripping `dir` and one `/` would leave `/a/b` for
/// `<dir>//a/b`, an absolute path that names somewhere else.
pub(super) fn below<'a>(path: &'a [u8], dir: &[u8]) -> Option<&'a [u8]> {
    let rest = path.strip_prefix(dir)?;
    if !dir.ends_with(b"/") && rest.first() != Some(&b'/') {
        return None;
    }
    let start = rest.iter().position(|&b| b != b'/')?;
    rest.get(start..)
}

/// True if `path` is `dir` or lies under it, by bytes (`dir` without a trailing `/`; `/`
/// covers every absolute path).
fn starts_with_dir(path: &[u8], dir: &[u8]) -> bool {
    if dir == b"/" {
        return path.first() == Some(&b'/');
    }
    path.starts_with(dir) && matches!(path.get(dir.len()), None | Some(b'/'))
}

/// `dir` (absolute, clean) with its last `up` components removed (`""` for the root), or
/// `None` if it has fewer.
fn ancestor(dir: &[u8], up: u32) -> Option<&[u8]> {
    let mut end = dir.len();
    if dir == b"/" {
        return (up == 0).then_some(b"".as_slice());
    }
    for _ in 0..up {
        if end == 0 {
            return None;
        }
        end = dir[..end].iter().rposition(|&b| b == b'/')?;
    }
    Some(&dir[..end])
}

/// The ancestor of `dir` (clean, absolute) that `path` starts with at a component
/// boundary, removing as few components as possible: `(up, length of the ancestor)`.
fn longest_ancestor(dir: &[u8], path: &[u8]) -> Option<(u32, usize)> {
    let mut up = 0u32;
    loop {
        let a = ancestor(dir, up)?;
        if a.is_empty() {
            return Some((up, 0));
        }
        if starts_with_dir(path, a) {
            return Some((up, a.len()));
        }
        up += 1;
    }
}

/// True if every ancestor of `logical` is the same directory (device and inode) as the
/// matching ancestor of `physical`, and they have as many components.
fn same_chain(logical: &Path, physical: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (l, p) = (logical.as_os_str().as_bytes(), physical.as_os_str().as_bytes());
    let depth = |b: &[u8]| b.iter().filter(|&&c| c == b'/').count();
    if depth(l) != depth(p) {
        return false;
    }
    let mut up = 0;
    loop {
        let (Some(a), Some(b)) = (ancestor(l, up), ancestor(p, up)) else { return false };
        if a == b {
            return true;
        }
        let stat = |x: &[u8]| crate::fs::metadata(Path::new(OsStr::from_bytes(x))).ok();
        match (stat(a), stat(b)) {
            (Some(x), Some(y)) if x.dev() == y.dev() && x.ino() == y.ino() => up += 1,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn below_a_directory_is_never_absolute() {
        let b = |p: &str, d: &str| below(p.as_bytes(), d.as_bytes()).map(|r| r.to_vec());
        assert_eq!(b("/w/a/b", "/w"), Some(b"a/b".to_vec()));
        assert_eq!(b("/w//a/b", "/w"), Some(b"a/b".to_vec()));
        assert_eq!(b("/w///tmp/../x", "/w"), Some(b"tmp/../x".to_vec()));
        assert_eq!(b("/w/", "/w"), None);
        assert_eq!(b("/w", "/w"), None);
        assert_eq!(b("/wx/a", "/w"), None);
        assert_eq!(b("/v/a", "/w"), None);
        assert_eq!(b("/a", "/"), Some(b"a".to_vec()));
        assert_eq!(b("//a", "/"), Some(b"a".to_vec()));
    }

    use super::*;

    fn loc(cwd: &str, bases: &[&str]) -> Location {
        Location::with_pwd(
            Path::new(cwd),
            None,
            &bases.iter().map(PathBuf::from).collect::<Vec<_>>(),
        )
    }

    fn os(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn paths_under_a_base_keep_their_bytes_after_the_working_directory() {
        let a = loc("/w/a/build", &["/w/a"]);
        for (path, want) in [
            ("/w/a/src/x.c", "\\c1/src/x.c"),
            ("/w/a/build/../src/x.c", "\\c0/../src/x.c"),
            ("/w/a/build", "\\c0"),
            ("/w/a", "\\c1"),
            ("/w/a/d3/../h.h", "\\c1/d3/../h.h"),
            ("/w/ab/x.c", "/w/ab/x.c"),
            ("/usr/include/stdio.h", "/usr/include/stdio.h"),
            ("src/x.c", "src/x.c"),
            ("../odd\\name", "../odd\\x5cname"),
        ] {
            let spelled = a.spell(os(path));
            assert_eq!(spelled.encode(), want, "{path}");
            assert_eq!(Spelled::decode(want).unwrap(), spelled, "{want}");
            assert_eq!(a.here(&spelled).unwrap(), os(path), "{path} round trip");
        }
        // The same layout elsewhere: the same record, the path there.
        let b = loc("/x/y/b/build", &["/x/y/b"]);
        let s = a.spell(os("/w/a/build/../src/x.c"));
        assert_eq!(b.here(&s).unwrap(), os("/x/y/b/build/../src/x.c"));
        // A base that is the parent of two checkouts relocates each to its own.
        let parent_a = loc("/w/a/build", &["/w"]);
        let parent_b = loc("/w/b/build", &["/w"]);
        let s = parent_a.spell(os("/w/a/inc/x.h"));
        assert_eq!(parent_b.here(&s).unwrap(), os("/w/b/inc/x.h"));
        // Another checkout's path under the shared parent stays that path.
        let s = parent_a.spell(os("/w/other/x.h"));
        assert_eq!(parent_b.here(&s).unwrap(), os("/w/other/x.h"));
        for bad in ["\\q1/x", "\\c/x", "\\c1x", "\\c1/\\"] {
            assert!(Spelled::decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_forms_tell_absolute_from_relative_and_match_across_checkouts() {
        let a = loc("/w/a/build", &["/w/a"]);
        let b = loc("/x/y/b/build", &["/x/y/b"]);
        for (arg_a, arg_b) in [
            ("/w/a/src/x.c", "/x/y/b/src/x.c"),
            ("-I/w/a/src/include", "-I/x/y/b/src/include"),
            ("-isystem/w/a/third", "-isystem/x/y/b/third"),
            ("-ffile-prefix-map=/w/a=.", "-ffile-prefix-map=/x/y/b=."),
            ("-o/w/a/build/x.o", "-o/x/y/b/build/x.o"),
        ] {
            assert_eq!(a.relocate_arg(os(arg_a)), b.relocate_arg(os(arg_b)), "{arg_a}");
            assert_ne!(a.relocate_arg(os(arg_a)), os(arg_a), "{arg_a} relocates");
        }
        // Written relative, the compiler names it relative: another key.
        assert_ne!(
            a.relocate_arg(os("-I/w/a/src/include")),
            a.relocate_arg(os("-I../src/include"))
        );
        for same in ["/usr/include", "-I/usr/include", "-O2", "/w/ab/x.c", "-I../inc"] {
            assert_eq!(a.relocate_arg(os(same)), os(same), "{same}");
        }
        assert_eq!(loc("/w/a/build", &[]).relocate_arg(os("/w/a/src/x.c")), os("/w/a/src/x.c"));
        // The working directory relocates without base directories.
        assert_eq!(
            loc("/w/a/build", &[]).relocate_arg(os("-I/w/a/build/gen")),
            loc("/v/build", &[]).relocate_arg(os("-I/v/build/gen"))
        );
    }

    #[test]
    fn messages_name_this_checkout() {
        let a = loc("/w/a/build", &["/w"]);
        let b = loc("/v/q/b/build", &["/v/q"]);
        let text = b"In file included from /w/a/src/x.c:3:\n/w/a/inc/y.h:1:2: warning: \"/w/a/z\" /w/ab/c /xw/a/src /usr/include/q.h\n";
        let moved = b.rewrite_text(&a, text);
        assert_eq!(
            String::from_utf8(moved).unwrap(),
            "In file included from /v/q/b/src/x.c:3:\n/v/q/b/inc/y.h:1:2: warning: \"/v/q/b/z\" /v/q/ab/c /xw/a/src /usr/include/q.h\n"
        );
        assert_eq!(a.rewrite_text(&a, text), text.to_vec());
    }

    #[test]
    fn logical_working_directory_anchors_its_own_paths() {
        let d = tempfile::tempdir().unwrap();
        let real = crate::fs::canonicalize(d.path()).unwrap();
        crate::fs::create_dir_all(&real.join("real/a/build")).unwrap();
        std::os::unix::fs::symlink(real.join("real"), real.join("link")).unwrap();
        let cwd = real.join("real/a/build");
        let pwd = real.join("link/a/build");
        let here = Location::with_pwd(&cwd, Some(&pwd), &[real.join("link/a")]);
        assert_eq!(here.pwd.as_deref(), Some(pwd.as_path()));
        let logical = real.join("link/a/src/x.c");
        assert_eq!(here.spell(logical.as_os_str()).encode(), "\\p1/src/x.c");
        let physical = real.join("real/a/src/x.c");
        assert_eq!(here.spell(physical.as_os_str()).encode(), "\\c1/src/x.c", "canonical base");
        // A $PWD that is not this directory is ignored.
        let other = Location::with_pwd(&cwd, Some(&real), &[]);
        assert_eq!(other.pwd, None);
        assert_eq!(clean(Path::new("/a//b/./c/")), Path::new("/a/b/c"));
        assert_eq!(clean(Path::new("./x/../y")), Path::new("x/../y"));
    }
}
