//! Temp and crash-leftover names: one spelling, one parser, and the one self-deleting
//! staging directory made with them.
//!
//! Everything strata writes is first written under a temporary name and then renamed
//! into place, so a process that is killed leaves temp names behind. Whoever meets one
//! (snapshot pack skips them, `action prune` and snapshot restore/save clean them, `stats`
//! counts them, artifact gc removes them) recognises it with [`TempName::parse`], never
//! with its own string test. The spellings ([`Purpose`]) are what strata has always
//! written, so a leftover written by an older release is still recognised:
//!
//! ```text
//! .<stem>.tmp-<16 hex>           Staging      a tree built before its no-replace rename
//! .<stem>.old-<16 hex>           Replaced     an invalid entry renamed aside before deletion
//! .<stem>.trash-<16 hex>         Trash        a pruned namespace renamed aside before deletion
//! .<stem>.strata-tmp-<16 hex>    Filling      artifact materialisation into a new destination
//! .strata-tmp-<16 hex>           Filling      ... into an existing empty destination
//! .<stem>.strata-<16 hex>.tmp    Placement    atomic placement of one file or symlink
//! .strata-<random>.tmp           Placement    atomic write of one file (no stem)
//! .<stem>.download-<random>      Download     a snapshot object being downloaded
//! .<stem>.sidecar-<random>       Sidecar      a snapshot sidecar being downloaded
//! .<stem>.pack-<random>          Pack         a snapshot object being packed
//! strata-<stem>-<16 hex>         Scratch      a private scratch directory (l0, build, artifact)
//! ```
//!
//! `<stem>` is the file name of what the temp name stands beside or for (an entry key, the
//! cache directory, a stage); it is never empty. `<16 hex>` is 16 lowercase hex digits
//! (64 random bits). `<random>` is 16 lowercase hex digits in names made by
//! [`TempName::new`], or 6 ASCII letters and digits in names the `tempfile` crate made (the
//! filesystem layer's atomic writes, and older releases' snapshot transfers). Anything
//! else, even similar (`.foo.tmp-xyz`, 15 or 17 hex digits, uppercase hex), is not a temp
//! name and is left alone.
//!
//! # Limitations
//! Two of these spellings are made elsewhere in this module's parent (`.strata-<random>.tmp`
//! by `tempfile` in [`super::write_atomic`], and `.<stem>.strata-<16 hex>.tmp` for symlink
//! placement); the parser here is the one place that reads them.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::fs::{self, StagingDir};

/// What a temp name is for; each purpose has one spelling (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// `.<stem>.tmp-<16 hex>`: a directory staged beside its destination.
    Staging,
    /// `.<stem>.old-<16 hex>`: an invalid entry moved aside before it is deleted.
    Replaced,
    /// `.<stem>.trash-<16 hex>`: a pruned namespace moved aside before it is deleted.
    Trash,
    /// `.<stem>.strata-tmp-<16 hex>` or `.strata-tmp-<16 hex>`: artifact materialisation
    /// staging at a user's destination.
    Filling,
    /// `.<stem>.strata-<16 hex>.tmp` or `.strata-<random>.tmp`: one file being placed.
    Placement,
    /// `.<stem>.download-<random>`: a snapshot object being downloaded.
    Download,
    /// `.<stem>.sidecar-<random>`: a snapshot sidecar being downloaded.
    Sidecar,
    /// `.<stem>.pack-<random>`: a snapshot object being packed.
    Pack,
    /// `strata-<stem>-<16 hex>`: a private scratch directory.
    Scratch,
}

impl Purpose {
    /// Every purpose, in the order of the module docs.
    pub const ALL: [Purpose; 9] = [
        Purpose::Staging,
        Purpose::Replaced,
        Purpose::Trash,
        Purpose::Filling,
        Purpose::Placement,
        Purpose::Download,
        Purpose::Sidecar,
        Purpose::Pack,
        Purpose::Scratch,
    ];

    /// The marker between `.<stem>` and the random part for the `.<stem>.<marker><random>`
    /// spellings; `None` for [`Purpose::Placement`] and [`Purpose::Scratch`].
    fn marker(self) -> Option<&'static str> {
        match self {
            Purpose::Staging => Some(".tmp-"),
            Purpose::Replaced => Some(".old-"),
            Purpose::Trash => Some(".trash-"),
            Purpose::Filling => Some(".strata-tmp-"),
            Purpose::Download => Some(".download-"),
            Purpose::Sidecar => Some(".sidecar-"),
            Purpose::Pack => Some(".pack-"),
            Purpose::Placement | Purpose::Scratch => None,
        }
    }

    /// True if names of this purpose may have no stem.
    fn stem_optional(self) -> bool {
        matches!(self, Purpose::Filling | Purpose::Placement)
    }

    /// True if the random part may be a `tempfile`-made one (6 alphanumerics) for this
    /// purpose and presence of a stem.
    fn accepts_tempfile_random(self, has_stem: bool) -> bool {
        match self {
            Purpose::Placement => !has_stem,
            Purpose::Download | Purpose::Sidecar | Purpose::Pack => true,
            _ => false,
        }
    }

    /// A short lowercase label (`staging`, `replaced`, …) for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Staging => "staging",
            Purpose::Replaced => "replaced",
            Purpose::Trash => "trash",
            Purpose::Filling => "filling",
            Purpose::Placement => "placement",
            Purpose::Download => "download",
            Purpose::Sidecar => "sidecar",
            Purpose::Pack => "pack",
            Purpose::Scratch => "scratch",
        }
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A temp or crash-leftover name: its purpose, the stem it belongs to and its random part.
///
/// ```
/// use strata::fs::temp::{Purpose, TempName};
/// let name = TempName::parse(".k.tmp-0123456789abcdef").unwrap();
/// assert_eq!(name.purpose(), Purpose::Staging);
/// assert_eq!(name.stem(), Some("k"));
/// assert_eq!(name.to_string(), ".k.tmp-0123456789abcdef");
/// assert!(TempName::parse(".k.tmp-0123456789ABCDEF").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TempName {
    purpose: Purpose,
    stem: Option<String>,
    random: String,
}

impl TempName {
    /// A fresh name of `purpose` for `stem` with 16 random lowercase hex digits. `stem`
    /// should be a non-empty file name without `/`; an empty one is dropped where the
    /// purpose allows no stem, and otherwise gives a name [`TempName::parse`] rejects.
    pub fn new(purpose: Purpose, stem: &str) -> Self {
        let stem = (!stem.is_empty() || !purpose.stem_optional()).then(|| stem.to_owned());
        Self { purpose, stem, random: format!("{:016x}", fastrand::u64(..)) }
    }

    /// A fresh name of `purpose` without a stem (`.strata-tmp-<hex>`, `.strata-<hex>.tmp`).
    pub fn unstemmed(purpose: Purpose) -> Self {
        Self::new(purpose, "")
    }

    /// What the name is for.
    pub fn purpose(&self) -> Purpose {
        self.purpose
    }

    /// The name it stands beside or for, if it has one.
    pub fn stem(&self) -> Option<&str> {
        self.stem.as_deref()
    }

    /// Parses one file name (not a path). `None` for anything that is not exactly one of
    /// the spellings in the module docs.
    pub fn parse(name: &str) -> Option<TempName> {
        if let Some(rest) = name.strip_prefix("strata-") {
            let (stem, random) = rest.rsplit_once('-')?;
            return Self::checked(Purpose::Scratch, Some(stem), random);
        }
        let body = name.strip_prefix('.')?;
        if let Some(inner) = body.strip_suffix(".tmp") {
            if let Some(random) = inner.strip_prefix("strata-")
                && let Some(found) = Self::checked(Purpose::Placement, None, random)
            {
                return Some(found);
            }
            if let Some((stem, random)) = inner.rsplit_once(".strata-") {
                return Self::checked(Purpose::Placement, Some(stem), random);
            }
            return None;
        }
        if let Some(random) = body.strip_prefix("strata-tmp-")
            && let Some(found) = Self::checked(Purpose::Filling, None, random)
        {
            return Some(found);
        }
        Purpose::ALL.iter().find_map(|&purpose| {
            let (stem, random) = body.rsplit_once(purpose.marker()?)?;
            Self::checked(purpose, Some(stem), random)
        })
    }

    fn checked(purpose: Purpose, stem: Option<&str>, random: &str) -> Option<TempName> {
        if stem.is_some_and(str::is_empty) || (stem.is_none() && !purpose.stem_optional()) {
            return None;
        }
        let hex =
            random.len() == 16 && random.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let tempfile = random.len() == 6 && random.bytes().all(|b| b.is_ascii_alphanumeric());
        let tempfile = tempfile && purpose.accepts_tempfile_random(stem.is_some());
        if !(hex || tempfile) {
            return None;
        }
        Some(TempName { purpose, stem: stem.map(str::to_owned), random: random.to_owned() })
    }

    /// `dir/<this name>`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(self.to_string())
    }
}

impl fmt::Display for TempName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stem = self.stem.as_deref();
        let random = &self.random;
        match (self.purpose, stem) {
            (Purpose::Scratch, stem) => write!(f, "strata-{}-{random}", stem.unwrap_or_default()),
            (Purpose::Placement, Some(stem)) => write!(f, ".{stem}.strata-{random}.tmp"),
            (Purpose::Placement, None) => write!(f, ".strata-{random}.tmp"),
            (Purpose::Filling, None) => write!(f, ".strata-tmp-{random}"),
            (purpose, stem) => {
                let marker = purpose.marker().unwrap_or_default();
                write!(f, ".{}{marker}{random}", stem.unwrap_or_default())
            }
        }
    }
}

/// True if `name` is a temp or crash-leftover name that can appear inside a cache
/// directory or beside it: any [`TempName`] but a [`Purpose::Scratch`] one (scratch
/// directories live in private roots, and their undotted spelling could be a unit name).
/// Snapshot pack skips these, and restore accepts them in a cache directory it replaces.
pub fn is_leftover(name: &str) -> bool {
    TempName::parse(name).is_some_and(|t| t.purpose() != Purpose::Scratch)
}

/// Creates a new directory `<parent>/<TempName::new(purpose, stem)>` with permission bits
/// `mode`, removed when the returned guard is dropped (see [`StagingDir`]). The parent
/// must exist; a name that is taken is never reused (16 tries).
///
/// # Errors
/// [`fs::Error::Io`] naming the directory.
pub fn create_dir(
    parent: &Path,
    purpose: Purpose,
    stem: &str,
    mode: u32,
) -> Result<StagingDir, fs::Error> {
    for _ in 0..16 {
        let path = TempName::new(purpose, stem).path_in(parent);
        if let Some(dir) = StagingDir::create(&path, mode)? {
            return Ok(dir);
        }
    }
    Err(fs::Error::io(
        "create directory",
        parent,
        std::io::Error::other("no free temporary name after 16 tries"),
    ))
}

/// The staging directory `<parent>/.<name>.tmp-<16 hex>` for `dest = <parent>/<name>`,
/// with `mode`; see [`create_dir`].
///
/// # Errors
/// [`fs::Error::Io`] naming the staging path, or `dest` if it has no file name.
pub fn staging_beside(dest: &Path, mode: u32) -> Result<StagingDir, fs::Error> {
    let parent = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(name) = dest.file_name() else {
        return Err(fs::Error::io(
            "create a staging directory for",
            dest,
            std::io::Error::other("the path has no file name"),
        ));
    };
    create_dir(parent, Purpose::Staging, &name.to_string_lossy(), mode)
}

/// Creates a new file `<dir>/<TempName::new(purpose, stem)>` with `mode` (before umask),
/// open for writing, with a guard that deletes it when dropped unless kept
/// (`tempfile::TempPath::keep`). A name that is taken is never reused (16 tries).
///
/// # Errors
/// [`fs::Error::Io`] naming the temp file or `dir`.
pub fn create_file(
    dir: &Path,
    purpose: Purpose,
    stem: &str,
    mode: u32,
) -> Result<(std::fs::File, tempfile::TempPath), fs::Error> {
    for _ in 0..16 {
        if let Some(created) = fs::temp_file_at(&TempName::new(purpose, stem).path_in(dir), mode)? {
            return Ok(created);
        }
    }
    Err(fs::Error::io(
        "create temporary file in",
        dir,
        std::io::Error::other("no free temporary name after 16 tries"),
    ))
}

/// Creates the empty file `<parent>/.<name>.<marker><16 hex>` (mode 0600) beside
/// `dest = <parent>/<name>`, deleted when the returned path is dropped. For snapshot
/// transfers ([`Purpose::Download`], [`Purpose::Sidecar`], [`Purpose::Pack`]).
///
/// # Errors
/// [`fs::Error::Io`] naming the temp file or its directory.
pub fn temp_file_beside(dest: &Path, purpose: Purpose) -> Result<tempfile::TempPath, fs::Error> {
    let parent = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let stem = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(create_file(parent, purpose, &stem, 0o600)?.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_purpose_round_trips() {
        for purpose in Purpose::ALL {
            let name = TempName::new(purpose, "k.1");
            let text = name.to_string();
            assert_eq!(TempName::parse(&text), Some(name.clone()), "{text}");
            assert_eq!(TempName::parse(&text).map(|n| n.purpose()), Some(purpose));
            assert_eq!(name.stem(), Some("k.1"));
            if purpose.stem_optional() {
                let bare = TempName::unstemmed(purpose);
                assert_eq!(bare.stem(), None);
                assert_eq!(TempName::parse(&bare.to_string()), Some(bare.clone()), "{bare}");
            } else {
                assert_eq!(TempName::parse(&TempName::unstemmed(purpose).to_string()), None);
            }
        }
    }

    /// The spellings the current release writes (and older snapshots carry), each with the
    /// purpose and stem it must parse to.
    #[test]
    fn todays_on_disk_spellings_parse() {
        let key = "a".repeat(64);
        let cases: Vec<(String, Purpose, Option<&str>)> = vec![
            // fs::StagingDir::new_beside: entry saves, artifact publish, snapshot unpack/restore.
            (format!(".{key}.tmp-0123456789abcdef"), Purpose::Staging, Some(key.as_str())),
            (".cache.tmp-fedcba9876543210".into(), Purpose::Staging, Some("cache")),
            (".actions-v1.tmp-0123456789abcdef".into(), Purpose::Staging, Some("actions-v1")),
            (".ready.tmp-0123456789abcdef".into(), Purpose::Staging, Some("ready")),
            // action::entry: an invalid entry moved aside.
            (format!(".{key}.old-0123456789abcdef"), Purpose::Replaced, Some(key.as_str())),
            // action::prune: a namespace being removed.
            (".ns.trash-0123456789abcdef".into(), Purpose::Trash, Some("ns")),
            // artifact::destination.
            (".out.strata-tmp-0123456789abcdef".into(), Purpose::Filling, Some("out")),
            (".strata-tmp-0123456789abcdef".into(), Purpose::Filling, None),
            // fs::copy symlink placement and the tempfile-made atomic writes.
            (".lib.so.strata-0123456789abcdef.tmp".into(), Purpose::Placement, Some("lib.so")),
            (".strata-Ab12Cd.tmp".into(), Purpose::Placement, None),
            // transport::fs puts (tempfile, 6 alphanumerics).
            (".strata-x9Y8z7.tmp".into(), Purpose::Placement, None),
            // snapshot transfers (fs::temp_path_beside, tempfile, 6 alphanumerics).
            (".cache.download-Xy12ab".into(), Purpose::Download, Some("cache")),
            (".cache.sidecar-y00000".into(), Purpose::Sidecar, Some("cache")),
            (".cache.pack-abcDEF".into(), Purpose::Pack, Some("cache")),
            // private scratch directories (l0, artifact store builds, the CLI's private root).
            ("strata-l0-0123456789abcdef".into(), Purpose::Scratch, Some("l0")),
            ("strata-build-0123456789abcdef".into(), Purpose::Scratch, Some("build")),
            ("strata-artifact-0123456789abcdef".into(), Purpose::Scratch, Some("artifact")),
        ];
        for (text, purpose, stem) in cases {
            let parsed = TempName::parse(&text).unwrap_or_else(|| panic!("{text} must parse"));
            assert_eq!((parsed.purpose(), parsed.stem()), (purpose, stem), "{text}");
            assert_eq!(parsed.to_string(), text, "spelling is kept");
        }
    }

    #[test]
    fn similar_names_do_not_parse() {
        for no in [
            ".foo.tmp-xyz",
            ".a.tmp-0123456789abcde",
            ".a.tmp-0123456789abcdef0",
            ".a.tmp-0123456789ABCDEF",
            ".a.old-0123456789abcdeg",
            ".a.trash-",
            "x.tmp-0123456789abcdef",
            "..tmp-0123456789abcdef",
            ".tmp-0123456789abcdef",
            ".last-used",
            ".hidden",
            ".strata-stage",
            "manifest.json",
            ".strata-abc.tmp",
            ".strata-.tmp",
            ".x.strata-Ab12Cd.tmp",
            ".strata-tmp-xyz",
            ".cache.download-abc",
            ".cache.download-Ab12Cd7",
            "strata-l0-xyz",
            "strata--0123456789abcdef",
            "strata-0123456789abcdef",
            ".cache.old-Ab12Cd",
        ] {
            assert_eq!(TempName::parse(no), None, "{no}");
        }
    }

    #[test]
    fn staging_directories_are_named_and_deleted_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("entry");
        let staging = staging_beside(&dest, 0o700).unwrap();
        let name = staging.path().file_name().unwrap().to_str().unwrap().to_owned();
        let parsed = TempName::parse(&name).unwrap();
        assert_eq!((parsed.purpose(), parsed.stem()), (Purpose::Staging, Some("entry")));
        assert!(staging.path().is_dir());
        let path = staging.path().to_path_buf();
        drop(staging);
        assert!(!path.exists());
        let scratch = create_dir(d.path(), Purpose::Scratch, "l0", 0o700).unwrap();
        assert!(scratch.path().file_name().unwrap().to_str().unwrap().starts_with("strata-l0-"));
        let kept = scratch.keep();
        assert!(kept.is_dir(), "a kept directory outlives its guard");
        assert!(staging_beside(Path::new("/"), 0o700).is_err());
    }
}
