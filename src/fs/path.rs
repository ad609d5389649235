//! Paths: [`RelPath`] (a relative POSIX path that cannot escape its root) and resolution
//! helpers.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use super::{Error, Result, name};

/// A validated relative POSIX path: non-empty, `/`-separated, no leading or trailing `/`,
/// no empty, `.` or `..` segment, no NUL. Joining it to a directory can never name anything
/// outside that directory (lexically; symlinks are the caller's concern, see
/// [`super::create_dir_all_within`]).
///
/// The text is the path's recorded form under the name encoding ([`super::name`]): file
/// names are bytes, and a byte that is not part of valid UTF-8 (or a backslash) appears as
/// `\xHH`. [`RelPath::as_str`] is that text (what records, keys and messages hold);
/// [`RelPath::to_path`] and [`RelPath::to_relative_path`] decode it to the exact bytes on
/// disk. Every text is canonical, so one name has exactly one `RelPath`.
///
/// ```
/// use std::os::unix::ffi::OsStrExt;
/// use strata::fs::RelPath;
/// assert_eq!(RelPath::new("lib/libz.a").unwrap().as_str(), "lib/libz.a");
/// for bad in ["", "/etc/passwd", "a/../b", "./a", "a//b", "a/", "a\\b", "..", "a\\x41"] {
///     assert!(RelPath::new(bad).is_err(), "{bad}");
/// }
/// let latin1 = RelPath::new("inc/bad\\xe9.h").unwrap();
/// assert_eq!(latin1.to_relative_path().as_os_str().as_bytes(), b"inc/bad\xe9.h");
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(String);

impl RelPath {
    /// Validates `text`, a path in recorded form.
    ///
    /// # Errors
    /// [`Error::UnsafePath`] with the reason.
    pub fn new(text: impl Into<String>) -> Result<Self> {
        let text = text.into();
        let reason = if text.is_empty() {
            Some("empty")
        } else if text.starts_with('/') {
            Some("absolute")
        } else if text.contains('\0') {
            Some("contains NUL")
        } else if text.split('/').any(|s| s.is_empty()) {
            Some("has an empty segment (`//` or a trailing `/`)")
        } else if text.split('/').any(|s| s == "." || s == "..") {
            Some("has a `.` or `..` segment")
        } else if !name::is_canonical(&text) {
            Some("contains a backslash that is not a canonical `\\xHH` escape of the name encoding")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Error::UnsafePath { path: text, reason }),
            None => Ok(Self(text)),
        }
    }

    /// Builds a `RelPath` from the raw bytes of a `/`-separated relative path (a tar member
    /// name), checked exactly as [`RelPath::new`] checks its text: no component is dropped
    /// or normalised.
    ///
    /// # Errors
    /// [`Error::UnsafePath`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::new(name::encode(bytes))
    }

    /// Builds a `RelPath` from a path relative to some root (as produced by a walk). Any
    /// byte is allowed in a name (see [`super::name`]).
    ///
    /// # Errors
    /// [`Error::UnsafePath`] for a path that is empty, absolute or has `.`/`..` parts.
    pub fn from_path(path: &Path) -> Result<Self> {
        let mut parts = Vec::new();
        for comp in path.components() {
            match comp {
                Component::Normal(os) => parts.push(name::encode_os(os)),
                _ => {
                    return Err(Error::UnsafePath {
                        path: name::encode_os(path.as_os_str()),
                        reason: "not a plain relative path",
                    });
                }
            }
        }
        Self::new(parts.join("/"))
    }

    /// The recorded text, `/`-separated (names in the encoding of [`super::name`]).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The exact bytes of the path on disk.
    pub fn to_bytes(&self) -> Vec<u8> {
        if !self.0.contains('\\') {
            // No escape: the text is the name (the common case, no decoding).
            return self.0.clone().into_bytes();
        }
        // The text was checked canonical when this value was built.
        name::decode(&self.0).unwrap_or_else(|_| self.0.clone().into_bytes())
    }

    /// The path on disk, relative (decoded).
    pub fn to_relative_path(&self) -> PathBuf {
        PathBuf::from(OsString::from_vec(self.to_bytes()))
    }

    /// `root/self`, decoded to the exact bytes on disk.
    pub fn to_path(&self, root: &Path) -> PathBuf {
        root.join(self.to_relative_path())
    }

    /// The parent, or `None` for a single segment.
    pub fn parent(&self) -> Option<RelPath> {
        self.0.rsplit_once('/').map(|(p, _)| RelPath(p.to_owned()))
    }

    /// The last segment, in recorded form.
    pub fn file_name(&self) -> &str {
        self.0.rsplit_once('/').map_or(self.0.as_str(), |(_, n)| n)
    }

    /// `self/child` where `child` is a single validated segment or relative path in
    /// recorded form.
    ///
    /// # Errors
    /// [`Error::UnsafePath`] if `child` is not a safe relative path.
    pub fn join(&self, child: &str) -> Result<RelPath> {
        RelPath::new(format!("{}/{}", self.0, child))
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelPath({:?})", self.0)
    }
}

impl serde::Serialize for RelPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for RelPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RelPath::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Expands a leading `~` or `~/` to `$HOME`. Other text is returned unchanged.
pub fn expand_tilde(path: &Path) -> PathBuf {
    let Some(text) = path.to_str() else { return path.to_path_buf() };
    let home = crate::config::var("HOME");
    match (text, home) {
        ("~", Some(home)) => PathBuf::from(home),
        (t, Some(home)) if t.starts_with("~/") => PathBuf::from(home).join(&t[2..]),
        _ => path.to_path_buf(),
    }
}

/// Makes `path` absolute against the current directory and removes `.` components,
/// without touching symlinks or `..`.
///
/// # Errors
/// [`Error::Io`] if the current directory cannot be read.
pub fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| Error::io("make absolute", path, e))
}

/// Non-strict resolution: `~` is *not* expanded; the path is made absolute, the longest
/// existing prefix is canonicalised (following symlinks) and the rest is appended with `..`
/// applied lexically. The result need not exist.
///
/// # Errors
/// [`Error::Io`] for failures other than "not found" (permission denied, a symlink loop).
pub fn resolve_nonstrict(path: &Path) -> Result<PathBuf> {
    let abs = absolute(path)?;
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    let mut head = abs.as_path();
    loop {
        match std::fs::canonicalize(head) {
            Ok(mut resolved) => {
                for part in tail.iter().rev() {
                    if part == ".." {
                        resolved.pop();
                    } else {
                        resolved.push(part);
                    }
                }
                return Ok(resolved);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(20) => {
                // ENOENT or ENOTDIR: step up one component.
                match (head.parent(), head.file_name()) {
                    (Some(parent), Some(name)) => {
                        tail.push(name.to_os_string());
                        head = parent;
                    }
                    (Some(parent), None) => {
                        // `..` as the last component.
                        tail.push("..".into());
                        head = parent;
                    }
                    (None, _) => return Ok(abs),
                }
            }
            Err(e) => return Err(Error::io("resolve", head, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn resolve_handles_missing_tail_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let canon = std::fs::canonicalize(&real).unwrap();
        assert_eq!(resolve_nonstrict(&dir.path().join("link/x/y")).unwrap(), canon.join("x/y"));
        assert_eq!(resolve_nonstrict(&dir.path().join("link/x/../z")).unwrap(), canon.join("z"));
        assert_eq!(resolve_nonstrict(&dir.path().join("link")).unwrap(), canon);
    }

    #[test]
    fn rel_path_parts() {
        let p = RelPath::new("a/b/c.o").unwrap();
        assert_eq!(p.parent().unwrap().as_str(), "a/b");
        assert_eq!(p.file_name(), "c.o");
        assert_eq!(RelPath::new("x").unwrap().parent(), None);
        assert_eq!(RelPath::from_path(Path::new("a/b")).unwrap().as_str(), "a/b");
        assert!(RelPath::from_path(Path::new("../b")).is_err());
    }

    proptest! {
        #[test]
        fn rel_path_never_escapes(segs in proptest::collection::vec("[a-z.]{0,3}|\\.\\.|/", 1..6)) {
            let text = segs.concat();
            if let Ok(p) = RelPath::new(text) {
                let root = Path::new("/root/dir");
                let joined = p.to_path(root);
                let mut depth = 0i32;
                for c in joined.strip_prefix(root).unwrap().components() {
                    match c {
                        Component::Normal(_) => depth += 1,
                        _ => depth -= 100,
                    }
                }
                prop_assert!(depth > 0);
            }
        }
    }
}
