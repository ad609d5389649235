//! What a compile looked at and wrote, from the trace of its process tree
//! ([`super::trace`]): the facts a candidate records ([`super::entry`]).
//!
//! Every event names an absolute path (joined to the calling process's working directory
//! as a string) and what the tracer found there when the syscall was made:
//!
//! * a file opened for reading, or a program executed, is an **input** (its digest is
//!   taken after the compile, and its stamp must be the one seen then);
//! * a lookup that found nothing (open, stat, access, exec, readlink) is an **absent**
//!   path;
//! * a lookup that found something it did not read (a directory, a file only `stat`ed, a
//!   symlink looked at with `lstat`) is **present**, with its kind;
//! * a directory whose entries were read is **listed**;
//! * a file created or written is an **output** if it still exists when the compile ends,
//!   a temporary if it does not (and a file the tree wrote and then read is not an input).
//!
//! Left out, as part of the machine rather than of the compile: the dynamic loader's files
//! (`/etc/ld.so.cache`, shared libraries `*.so`, `*.so.N`), the C library's locale data
//! (`/usr/lib/locale`, `gconv` modules, `locale.alias`) and pseudo file systems (`/proc`,
//! `/sys`, `/dev`). The compiler's own message catalogs are inputs.
//!
//! A compile that writes where a HIT could not write it again (a file outside the working
//! and base directories that it did not delete, a directory it created, a link, a change of
//! mode or owner of a file it did not create) is not cached; [`Observed::unsafe_write`]
//! says which.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::entry::Kind;
use super::trace::{Event, Observed as Seen, Op};

/// What one traced compile looked at and wrote (paths absolute, as the processes named
/// them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Files read and programs run, first read first, each with the stamp seen.
    pub inputs: Vec<(PathBuf, crate::fs::FileStamp)>,
    /// Paths looked up and not found.
    pub absent: Vec<PathBuf>,
    /// Paths looked up that existed and were not read.
    pub present: Vec<(PathBuf, Kind)>,
    /// Directories whose entries were read.
    pub listed: Vec<PathBuf>,
    /// Files created or written that exist when the compile ends.
    pub written: Vec<PathBuf>,
    /// The first write a HIT could not repeat, if any (a description).
    pub unsafe_write: Option<String>,
}

/// True for the machine's own files (see the module docs).
pub fn is_machine_file(path: &Path) -> bool {
    let b = path.as_os_str().as_bytes();
    if ["/proc/", "/sys/", "/dev/"].iter().any(|p| b.starts_with(p.as_bytes()))
        || matches!(b, b"/proc" | b"/sys" | b"/dev")
    {
        return true;
    }
    if b == b"/etc/ld.so.cache"
        || b == b"/etc/ld.so.preload"
        || b.starts_with(b"/usr/lib/locale/")
        || b.ends_with(b"/locale.alias")
        || memchr::memmem::find(b, b"/gconv/").is_some()
    {
        return true;
    }
    let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
    // libfoo.so, libfoo.so.6, libfoo.so.6.0.30, ld-linux-x86-64.so.2
    name.ends_with(b".so")
        || memchr::memmem::find(name, b".so.")
            .is_some_and(|at| name[at + 4..].iter().all(|&c| c.is_ascii_digit() || c == b'.'))
}

/// Reduces a trace to [`Observed`]; `may_write` tells whether a file the compile leaves
/// behind is somewhere a HIT may write it (the working and base directories).
pub fn from_trace(events: &[Event], may_write: &dyn Fn(&Path) -> bool) -> Observed {
    let mut out = Observed::default();
    let mut written: BTreeSet<PathBuf> = BTreeSet::new();
    // Every path the tree created or wrote, kept or not: what it looked up there before
    // writing (a stat of the object before creating it) is no fact about its inputs.
    let mut ever_written: BTreeSet<PathBuf> = BTreeSet::new();
    let mut read: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let mut absent: BTreeSet<PathBuf> = BTreeSet::new();
    let mut present: BTreeMap<PathBuf, Kind> = BTreeMap::new();
    let mut listed: BTreeSet<PathBuf> = BTreeSet::new();
    let mut created_dirs: Vec<PathBuf> = Vec::new();
    let unsafe_write = |out: &mut Observed, what: String| {
        if out.unsafe_write.is_none() {
            out.unsafe_write = Some(what);
        }
    };
    for e in events {
        let path = &e.path;
        if is_machine_file(path) {
            continue;
        }
        let mine = written.contains(path);
        match &e.op {
            Op::OpenRead | Op::Exec => match &e.observed {
                _ if mine => {}
                Seen::File(stamp) => {
                    if !read.contains_key(path) {
                        read.insert(path.clone(), out.inputs.len());
                        out.inputs.push((path.clone(), *stamp));
                    }
                }
                Seen::Absent => {
                    absent.insert(path.clone());
                }
                Seen::Directory(_) => {
                    present.insert(path.clone(), Kind::Directory);
                }
                Seen::Symlink(_) | Seen::Other => {
                    present.insert(path.clone(), Kind::Other);
                }
                Seen::Unreadable(errno) => {
                    present.insert(path.clone(), Kind::Other);
                    tracing::debug!("{}: unreadable at open (errno {errno})", path.display());
                }
            },
            Op::OpenDirectory
            | Op::Stat { .. }
            | Op::Access
            | Op::Readlink
            | Op::Chdir
            | Op::StatFs
            | Op::Xattr { write: false } => {
                if mine {
                    continue;
                }
                match &e.observed {
                    Seen::Absent => {
                        absent.insert(path.clone());
                    }
                    Seen::File(_) => {
                        present.entry(path.clone()).or_insert(Kind::File);
                    }
                    Seen::Directory(_) => {
                        present.entry(path.clone()).or_insert(Kind::Directory);
                    }
                    Seen::Symlink(_) => {
                        present.entry(path.clone()).or_insert(Kind::Symlink);
                    }
                    Seen::Other | Seen::Unreadable(_) => {
                        present.entry(path.clone()).or_insert(Kind::Other);
                    }
                }
            }
            Op::ListDirectory => {
                if !mine {
                    listed.insert(path.clone());
                }
            }
            Op::OpenWrite { .. } => {
                if !mine && read.contains_key(path) {
                    unsafe_write(
                        &mut out,
                        format!("it wrote {}, which it had read", path.display()),
                    );
                }
                // Whether it may stay is decided at the end: a temporary it deletes is fine.
                written.insert(path.clone());
                ever_written.insert(path.clone());
            }
            Op::Unlink | Op::Rmdir => {
                if !written.remove(path) && !may_write(path) {
                    unsafe_write(&mut out, format!("it removed {}", path.display()));
                }
                created_dirs.retain(|d| d != path);
            }
            Op::Rename { to } => {
                if written.remove(path) {
                    written.insert(to.clone());
                    ever_written.insert(to.clone());
                } else {
                    unsafe_write(&mut out, format!("it renamed {}", path.display()));
                }
            }
            Op::Mkdir => {
                if e.observed == Seen::Absent {
                    created_dirs.push(path.clone());
                }
            }
            Op::Link { to } => {
                written.insert(to.clone());
                unsafe_write(&mut out, format!("it linked {}", to.display()));
            }
            Op::Symlink { .. } => {
                unsafe_write(&mut out, format!("it created the symlink {}", path.display()));
            }
            Op::Truncate
            | Op::Chmod
            | Op::Chown
            | Op::SetTimes
            | Op::Mknod
            | Op::Xattr { write: true } => {
                if !mine {
                    unsafe_write(&mut out, format!("it changed {}", path.display()));
                }
            }
        }
    }
    for dir in created_dirs {
        if crate::fs::symlink_metadata_opt(&dir).ok().flatten().is_some() {
            unsafe_write(&mut out, format!("it created the directory {}", dir.display()));
        }
    }
    for path in written {
        match crate::fs::symlink_metadata_opt(&path) {
            Ok(Some(m)) if m.is_file() && may_write(&path) => out.written.push(path),
            Ok(Some(_)) => unsafe_write(&mut out, format!("it wrote {}", path.display())),
            _ => {}
        }
    }
    // A path both read and found absent (a file created later by the tree is `mine`): the
    // read wins; a directory opened and listed is listed.
    out.absent =
        absent.into_iter().filter(|p| !read.contains_key(p) && !ever_written.contains(p)).collect();
    out.present = present
        .into_iter()
        .filter(|(p, _)| {
            !read.contains_key(p) && !out.absent.contains(p) && !ever_written.contains(p)
        })
        .collect();
    out.listed = listed.into_iter().collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_files_are_left_out() {
        for p in [
            "/etc/ld.so.cache",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30",
            "/usr/lib/gcc/x86_64-linux-gnu/12/liblto_plugin.so",
            "/proc/self/maps",
            "/dev/null",
            "/usr/lib/locale/C.utf8/LC_CTYPE",
            "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache",
            "/usr/share/locale/locale.alias",
        ] {
            assert!(is_machine_file(Path::new(p)), "{p}");
        }
        for p in [
            "/usr/include/stdio.h",
            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus",
            "/w/src/so.h",
            "/w/src/a.so.h",
            "/usr/share/locale/de/LC_MESSAGES/gcc-12.mo",
        ] {
            assert!(!is_machine_file(Path::new(p)), "{p}");
        }
    }
}
