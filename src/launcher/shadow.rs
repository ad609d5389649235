//! The header-shadowing check of direct mode (where strata goes beyond ccache): a header
//! the compiler found in include directory *k* would be shadowed by a file of the same
//! relative name created later in an *earlier* directory of the search path. ccache's direct
//! mode does not notice (its manual lists it as a known false hit); strata records, for
//! every header, the paths where it was *not* found, and a lookup checks that they still do
//! not exist.
//!
//! The search order is taken conservatively as the union of the quote and angle-bracket
//! paths, in GCC's order: `-iquote` directories, `-I`, `-isystem`, then `-idirafter`. A
//! probe in an `-iquote` directory can only shadow a `"quoted"` include, so for an
//! `<angled>` one it may cause a needless MISS — never a false HIT. Headers outside every
//! listed directory (the compiler's own system directories, or found next to the including
//! file) get no probes.

use std::path::{Path, PathBuf};

use super::args::IncludeDir;
use super::location::normalize;

/// One directory of the search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDir {
    /// The directory, absolute and lexically normalised.
    pub path: PathBuf,
    /// True if the command line gave it as a relative path: it then follows the working
    /// directory, and so must every probe in it (a copy of the project elsewhere that
    /// shares the entry — same arguments — searches its own copy of the directory).
    pub relative: bool,
}

/// A path that must not exist (see [`probes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Absolute, lexically normalised.
    pub path: PathBuf,
    /// True if it lies in a directory given as a relative path ([`SearchDir::relative`]):
    /// record it relative to the working directory.
    pub relative: bool,
}

/// The include directories in search order (see the module docs), made absolute against
/// `cwd` and lexically normalised; a directory listed twice keeps its first place.
pub fn search_order(include_dirs: &[IncludeDir], cwd: &Path) -> Vec<SearchDir> {
    let mut out: Vec<SearchDir> = Vec::new();
    for option in ["-iquote", "-I", "-isystem", "-idirafter"] {
        for d in include_dirs.iter().filter(|d| d.option == option) {
            let path = normalize(&cwd.join(&d.dir));
            if !out.iter().any(|s| s.path == path) {
                out.push(SearchDir { path, relative: d.dir.is_relative() });
            }
        }
    }
    out
}

/// The paths that must not exist for `header` (absolute) to still be the file the
/// compiler finds: its relative name joined to every directory before the first one it
/// lies under. Empty when it lies under none of `search`.
pub fn probes(header: &Path, search: &[SearchDir]) -> Vec<Probe> {
    let header = normalize(header);
    for (k, dir) in search.iter().enumerate() {
        if let Ok(rel) = header.strip_prefix(&dir.path)
            && !rel.as_os_str().is_empty()
        {
            return search
                .get(..k)
                .unwrap_or_default()
                .iter()
                .map(|d| Probe { path: d.path.join(rel), relative: d.relative })
                .collect();
        }
    }
    Vec::new()
}

/// The first of `probes` that exists now (`lstat`: a symlink counts), if any: a lookup
/// that finds one is a MISS.
pub fn first_shadow(probes: &[PathBuf]) -> Option<&PathBuf> {
    probes.iter().find(|p| crate::fs::symlink_metadata_opt(p).ok().flatten().is_some())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn dir(option: &'static str, d: &str) -> IncludeDir {
        IncludeDir { option, dir: PathBuf::from(d) }
    }

    #[test]
    fn probes_cover_earlier_directories_and_a_new_header_shadows() {
        let root = tempfile::tempdir().unwrap();
        let cwd = root.path().join("build");
        let dirs = [
            dir("-I", "../inc1"),
            dir("-isystem", "/opt/sys"),
            dir("-I", "../inc2"),
            dir("-iquote", "../quote"),
            dir("-I", "../inc1"),
        ];
        let search = search_order(&dirs, &cwd);
        let r = root.path();
        let paths: Vec<&PathBuf> = search.iter().map(|s| &s.path).collect();
        assert_eq!(
            paths,
            [&r.join("quote"), &r.join("inc1"), &r.join("inc2"), &PathBuf::from("/opt/sys")]
        );
        assert_eq!(
            search.iter().map(|s| s.relative).collect::<Vec<_>>(),
            [true, true, true, false]
        );
        let header = r.join("inc2/foo/bar.h");
        let probe = |p: PathBuf| Probe { path: p, relative: true };
        assert_eq!(
            probes(&header, &search),
            [probe(r.join("quote/foo/bar.h")), probe(r.join("inc1/foo/bar.h"))]
        );
        assert_eq!(
            probes(Path::new("/opt/sys/later.h"), &search).last(),
            Some(&probe(r.join("inc2/later.h")))
        );
        assert!(probes(&r.join("quote/q.h"), &search).is_empty(), "found in the first directory");
        assert!(probes(Path::new("/usr/include/stdio.h"), &search).is_empty());
        // Nothing there yet: no shadow. A header created in inc1 shadows it: a MISS.
        let p: Vec<PathBuf> = probes(&header, &search).into_iter().map(|p| p.path).collect();
        assert_eq!(first_shadow(&p), None);
        std::fs::create_dir_all(r.join("inc1/foo")).unwrap();
        std::fs::write(r.join("inc1/foo/bar.h"), "// new\n").unwrap();
        assert_eq!(first_shadow(&p), Some(&r.join("inc1/foo/bar.h")));
    }
}
