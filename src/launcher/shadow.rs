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

/// The include directories in search order (see the module docs), made absolute against
/// `cwd` and lexically normalised.
pub fn search_order(include_dirs: &[IncludeDir], cwd: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for option in ["-iquote", "-I", "-isystem", "-idirafter"] {
        for d in include_dirs.iter().filter(|d| d.option == option) {
            let abs = normalize(&cwd.join(&d.dir));
            if !out.contains(&abs) {
                out.push(abs);
            }
        }
    }
    out
}

/// The paths that must not exist for `header` (absolute) to still be the file the
/// compiler finds: its relative name joined to every directory before the first one it
/// lies under. Empty when it lies under none of `search`.
pub fn probes(header: &Path, search: &[PathBuf]) -> Vec<PathBuf> {
    let header = normalize(header);
    for (k, dir) in search.iter().enumerate() {
        if let Ok(rel) = header.strip_prefix(dir)
            && !rel.as_os_str().is_empty()
        {
            return search.get(..k).unwrap_or_default().iter().map(|d| d.join(rel)).collect();
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
        assert_eq!(
            search,
            [r.join("quote"), r.join("inc1"), r.join("inc2"), PathBuf::from("/opt/sys")]
        );
        let header = r.join("inc2/foo/bar.h");
        assert_eq!(probes(&header, &search), [r.join("quote/foo/bar.h"), r.join("inc1/foo/bar.h")]);
        assert!(probes(&r.join("quote/q.h"), &search).is_empty(), "found in the first directory");
        assert!(probes(Path::new("/usr/include/stdio.h"), &search).is_empty());
        // Nothing there yet: no shadow. A header created in inc1 shadows it: a MISS.
        let p = probes(&header, &search);
        assert_eq!(first_shadow(&p), None);
        std::fs::create_dir_all(r.join("inc1/foo")).unwrap();
        std::fs::write(r.join("inc1/foo/bar.h"), "// new\n").unwrap();
        assert_eq!(first_shadow(&p), Some(&r.join("inc1/foo/bar.h")));
    }
}
