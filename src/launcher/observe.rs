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
//! (`/etc/ld.so.cache`, shared libraries `*.so`, `*.so.N` in the system's library
//! directories), the C library's locale data (`/usr/lib/locale`, `gconv` modules there,
//! `/usr/share/locale/locale.alias`) and pseudo file systems (`/proc`, `/sys`, `/dev`, but
//! not `/dev/shm`). The compiler's own message catalogs are inputs, and so is a `*.so` file
//! anywhere else (see [`is_machine_file`]).
//!
//! A compile that writes where a HIT could not write it again (a file outside the working
//! and base directories that it did not delete, a directory it created, a link, a change of
//! mode or owner of a file it did not create) is not cached; [`Observed::unsafe_write`]
//! says which.

// FxHash: a compile's trace is a thousand paths or more, each hashed several times here,
// and SipHash was a tenth of the launcher's CPU per MISS (issue 28). The keys are the
// compile's own paths, not input from elsewhere.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;
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
    /// Those of `absent` that some look taken at a stop, before its call ran, found absent
    /// (see [`Event::by_call`]): a file may have appeared between that look and the call,
    /// so the MISS looks again after the compile. The rest of `absent` every lookup found
    /// absent by its own result, and need no second look.
    pub absent_looked_before: HashSet<PathBuf>,
    /// Paths looked up that existed and were not read.
    pub present: Vec<(PathBuf, Kind)>,
    /// Directories whose entries were read.
    pub listed: Vec<PathBuf>,
    /// Files created or written that exist when the compile ends.
    pub written: Vec<PathBuf>,
    /// The first write a HIT could not repeat, if any (a description).
    pub unsafe_write: Option<String>,
}

/// True for the machine's own files (see the module docs): pseudo file systems (`/proc`,
/// `/sys`, `/dev` but not `/dev/shm`, where files are written like anywhere else), the
/// dynamic loader's cache, and, under the system's library directories only (`/lib*`,
/// `/usr/lib*`, `/usr/local/lib*`), shared libraries, locale data and `gconv` modules. A
/// `*.so` file or a `gconv/` directory elsewhere (a build's own plugin, a blob `.incbin`
/// reads) is an input like any other file.
pub fn is_machine_file(path: &Path) -> bool {
    let b = path.as_os_str().as_bytes();
    if b.starts_with(b"/dev/shm/") {
        return false;
    }
    if ["/proc/", "/sys/", "/dev/"].iter().any(|p| b.starts_with(p.as_bytes()))
        || matches!(b, b"/proc" | b"/sys" | b"/dev")
    {
        return true;
    }
    if b == b"/etc/ld.so.cache" || b == b"/etc/ld.so.preload" {
        return true;
    }
    let system_library = ["/lib", "/usr/lib", "/usr/local/lib"].iter().any(|dir| {
        // `/lib/…`, `/lib64/…`, `/usr/lib32/…`: a library directory and what is below it.
        b.strip_prefix(dir.as_bytes()).is_some_and(|rest| {
            let at = rest.iter().position(|&c| c == b'/');
            at.is_some_and(|at| matches!(&rest[..at], b"" | b"32" | b"64" | b"x32"))
        })
    });
    if !system_library {
        return b == b"/usr/share/locale/locale.alias";
    }
    if b.starts_with(b"/usr/lib/locale/") || memchr::memmem::find(b, b"/gconv/").is_some() {
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
    // Sized for the trace at once (most events are absent names and inputs), so the sets
    // are not rehashed into fresh pages as they grow.
    let mut c = Collected {
        read: HashMap::with_capacity_and_hasher(events.len() / 4, Default::default()),
        absent: HashSet::with_capacity_and_hasher(events.len(), Default::default()),
        absent_looked_before: HashSet::with_capacity_and_hasher(64, Default::default()),
        present: HashMap::with_capacity_and_hasher(events.len() / 4, Default::default()),
        ..Collected::default()
    };
    out.inputs.reserve(events.len() / 4);
    for e in events.iter().filter(|e| !is_machine_file(&e.path)) {
        // The compile's own files are few; most compiles write only the object.
        let mine = !c.written.is_empty() && c.written.contains(&e.path);
        match &e.op {
            Op::OpenRead | Op::Exec if !mine => c.read_or_looked_up(e, &mut out),
            Op::OpenDirectory
            | Op::Stat { .. }
            | Op::Access
            | Op::Readlink
            | Op::Chdir
            | Op::StatFs
            | Op::Xattr { write: false }
                if !mine =>
            {
                c.looked_up(e);
            }
            Op::ListDirectory if !mine => {
                c.listed.insert(e.path.clone());
            }
            Op::OpenRead
            | Op::Exec
            | Op::OpenDirectory
            | Op::Stat { .. }
            | Op::Access
            | Op::Readlink
            | Op::Chdir
            | Op::StatFs
            | Op::Xattr { write: false }
            | Op::ListDirectory => {}
            _ => c.wrote(e, mine, may_write, &mut out),
        }
    }
    finish(&mut out, c, may_write);
    out
}

/// GCC and Clang drop a search directory that is the same directory as an earlier one
/// (`-Iinc1 -Iinc2` with `inc2` a symlink to `inc1`: "ignoring duplicate directory"), so
/// the compile never looks into it, and no absent fact is recorded there. If it later
/// becomes another directory it is searched, and what it holds may be found first. So
/// when one of `search_dirs` (the command line's include directories, absolute) is only
/// looked at while another path of the same directory (same device and inode) is looked
/// into, this describes it, and the compile is not cached. Paths are compared by
/// components (`a/.` is `a`). The compiler's built-in directories and `CPATH` are not
/// checked (the driver's own library and program directories alias each other).
pub fn dropped_duplicate(events: &[Event], search_dirs: &[PathBuf]) -> Option<String> {
    if search_dirs.is_empty() {
        return None;
    }
    let mut by_id: HashMap<(u64, u64), Vec<&Path>> = HashMap::default();
    for e in events {
        if let Seen::Directory(stamp) = &e.observed
            && matches!(e.op, Op::Stat { .. } | Op::OpenDirectory | Op::Access)
        {
            let paths = by_id.entry((stamp.dev, stamp.ino)).or_default();
            if !paths.iter().any(|p| p.components().eq(e.path.components())) {
                paths.push(&e.path);
            }
        }
    }
    let given = |p: &&&Path| search_dirs.iter().any(|d| d.components().eq(p.components()));
    let mut groups: Vec<&Vec<&Path>> =
        by_id.values().filter(|p| p.len() > 1 && p.iter().any(|q| given(&q))).collect();
    // Only a directory of the command line that another spelling aliases can have been
    // dropped; most compiles have none, and need not walk every event's ancestors below.
    if groups.is_empty() {
        return None;
    }
    // Which directories some event looks into: the set of the proper ancestors of every
    // event's path in its lexical form (see `lexical`), whose bytes then answer at once
    // what `Path::starts_with` would answer component by component.
    let lexical_paths: Vec<Cow<'_, Path>> = events.iter().map(|e| lexical(&e.path)).collect();
    let mut above: HashSet<&[u8]> = HashSet::default();
    for path in &lexical_paths {
        for dir in path.ancestors().skip(1) {
            if !above.insert(dir.as_os_str().as_bytes()) {
                break;
            }
        }
    }
    let looked_into = |dir: &Path| above.contains(lexical(dir).as_os_str().as_bytes());
    groups.sort();
    for paths in groups {
        let (into, not): (Vec<&Path>, Vec<&Path>) = paths.iter().partition(|p| looked_into(p));
        if let (Some(searched), Some(dropped)) = (into.first(), not.iter().find(given)) {
            return Some(format!(
                "{} is the directory {} is and was not searched (a duplicate search directory); \
                 nothing would notice it becoming another directory",
                dropped.display(),
                searched.display()
            ));
        }
    }
    None
}

impl Collected {
    /// A lookup that found nothing.
    fn absent(&mut self, e: &Event) {
        self.absent.insert(e.path.clone());
        if !e.by_call {
            self.absent_looked_before.insert(e.path.clone());
        }
    }

    /// An open for reading or an exec that found something (or nothing).
    fn read_or_looked_up(&mut self, e: &Event, out: &mut Observed) {
        let path = &e.path;
        match &e.observed {
            Seen::File(stamp) => {
                if !self.read.contains_key(path) {
                    self.read.insert(path.clone(), out.inputs.len());
                    out.inputs.push((path.clone(), *stamp));
                }
            }
            Seen::Absent => self.absent(e),
            Seen::Directory(_) => {
                self.present.insert(path.clone(), Kind::Directory);
            }
            Seen::Symlink(_) | Seen::Other => {
                self.present.insert(path.clone(), Kind::Other);
            }
            Seen::Unreadable(errno) => {
                self.present.insert(path.clone(), Kind::Other);
                tracing::debug!("{}: unreadable at open (errno {errno})", path.display());
            }
        }
    }

    /// A lookup that did not read: `stat`, `access`, an `opendir`, …
    fn looked_up(&mut self, e: &Event) {
        let kind = match &e.observed {
            Seen::Absent => return self.absent(e),
            Seen::File(_) => Kind::File,
            Seen::Directory(_) => Kind::Directory,
            Seen::Symlink(_) => Kind::Symlink,
            Seen::Other | Seen::Unreadable(_) => Kind::Other,
        };
        self.present.entry(e.path.clone()).or_insert(kind);
    }

    /// A call that creates, changes or removes a name.
    fn wrote(
        &mut self,
        e: &Event,
        mine: bool,
        may_write: &dyn Fn(&Path) -> bool,
        out: &mut Observed,
    ) {
        let path = &e.path;
        let mut unsafe_write = |what: String| {
            if out.unsafe_write.is_none() {
                out.unsafe_write = Some(what);
            }
        };
        match &e.op {
            Op::OpenWrite { create, truncate } => {
                if !mine && self.read.contains_key(path) {
                    unsafe_write(format!("it wrote {}, which it had read", path.display()));
                }
                if !mine {
                    if *truncate {
                        self.from_scratch.insert(path.clone());
                    } else {
                        self.from_scratch.remove(path);
                    }
                    if *create && e.observed == Seen::Absent {
                        self.created_new.insert(path.clone());
                    } else {
                        self.created_new.remove(path);
                    }
                }
                // Whether it may stay is decided at the end: a temporary it deletes is fine.
                self.written.insert(path.clone());
                self.ever_written.insert(path.clone());
            }
            Op::Unlink | Op::Rmdir => {
                if !self.written.remove(path) && !may_write(path) {
                    unsafe_write(format!("it removed {}", path.display()));
                }
                self.created_dirs.retain(|d| d != path);
            }
            Op::Rename { to } => {
                if self.written.remove(path) {
                    // Renamed into place, a file made here replaces whatever was there.
                    let made = self.from_scratch.remove(path) | self.created_new.remove(path);
                    if made {
                        self.from_scratch.insert(to.clone());
                    } else {
                        self.from_scratch.remove(to);
                    }
                    self.written.insert(to.clone());
                    self.ever_written.insert(to.clone());
                } else {
                    unsafe_write(format!("it renamed {}", path.display()));
                }
            }
            Op::Mkdir if e.observed == Seen::Absent => self.created_dirs.push(path.clone()),
            Op::Mkdir => {}
            Op::Link { to } => {
                self.written.insert(to.clone());
                unsafe_write(format!("it linked {}", to.display()));
            }
            Op::Symlink { .. } => {
                unsafe_write(format!("it created the symlink {}", path.display()));
            }
            _ if !mine => unsafe_write(format!("it changed {}", path.display())),
            _ => {}
        }
    }
}

/// What [`from_trace`] collected, before [`finish`] decides.
///
/// Hashed, not ordered: a C++ compile makes well over a thousand events, and ordered maps
/// of paths compare them component by component at every insert. [`finish`] sorts what it
/// returns by the paths' bytes.
#[derive(Default)]
struct Collected {
    written: HashSet<PathBuf>,
    ever_written: HashSet<PathBuf>,
    read: HashMap<PathBuf, usize>,
    absent: HashSet<PathBuf>,
    /// Absent paths a look taken at a stop (before the call) found absent.
    absent_looked_before: HashSet<PathBuf>,
    present: HashMap<PathBuf, Kind>,
    listed: HashSet<PathBuf>,
    created_dirs: Vec<PathBuf>,
    /// Files whose content this compile made from nothing: its first write-open truncated
    /// them (`O_TRUNC`), or it created them new and renamed them into place. A file it
    /// appended to or wrote into without truncating (`-fopt-info-…=FILE` appends) holds
    /// what was there before, which a HIT cannot repeat.
    from_scratch: HashSet<PathBuf>,
    /// Files its first write-open created (they did not exist).
    created_new: HashSet<PathBuf>,
}

/// Decides what stays: outputs that still exist (and may), facts not about the compile's
/// own files, and the first write a HIT could not repeat.
fn finish(out: &mut Observed, seen: Collected, may_write: &dyn Fn(&Path) -> bool) {
    let Collected {
        written,
        ever_written,
        read,
        absent,
        absent_looked_before,
        present,
        listed,
        created_dirs,
        from_scratch,
        created_new: _,
    } = seen;
    let mut unsafe_write = |what: String| {
        if out.unsafe_write.is_none() {
            out.unsafe_write = Some(what);
        }
    };
    for dir in created_dirs {
        if crate::fs::symlink_metadata_opt(&dir).ok().flatten().is_some() {
            unsafe_write(format!("it created the directory {}", dir.display()));
        }
    }
    for path in sorted(written.into_iter().collect()) {
        match crate::fs::symlink_metadata_opt(&path) {
            Ok(Some(m)) if m.is_file() && may_write(&path) && !from_scratch.contains(&path) => {
                unsafe_write(format!(
                    "it wrote into {} without truncating it (appended to what was there, as \
                     -fopt-info-…=FILE does), which a HIT cannot repeat",
                    path.display()
                ));
            }
            Ok(Some(m)) if m.is_file() && may_write(&path) => out.written.push(path),
            Ok(Some(_)) => unsafe_write(format!("it wrote {}", path.display())),
            _ => {}
        }
    }
    // A path both read and found absent (a file created later by the tree is `mine`): the
    // read wins; facts about the compile's own files are left out.
    let written_here = |p: &PathBuf| !ever_written.is_empty() && ever_written.contains(p);
    // The present paths are filtered by every absent one: an absent path also read or
    // written is left out of both lists anyway.
    let mut present: Vec<(PathBuf, Kind)> = present
        .into_iter()
        .filter(|(p, _)| !read.contains_key(p) && !absent.contains(p) && !written_here(p))
        .collect();
    present.sort_unstable_by(|(a, _), (b, _)| by_bytes(a, b));
    out.present = present;
    let absent: Vec<PathBuf> =
        absent.into_iter().filter(|p| !read.contains_key(p) && !written_here(p)).collect();
    // A subset of the absent paths (every look that found one absent put it in both).
    out.absent_looked_before = absent_looked_before
        .into_iter()
        .filter(|p| !read.contains_key(p) && !written_here(p))
        .collect();
    out.absent = sorted(absent);
    out.listed = sorted(listed.into_iter().collect());
}

/// Whether `path` is absolute and in plain form, where its components are its bytes between
/// slashes: no empty component (`//`, a trailing `/`) and no `.` component. For such paths
/// `Path::starts_with` is a comparison of byte prefixes at a slash.
pub(super) fn plain(path: &Path) -> bool {
    let b = path.as_os_str().as_bytes();
    b == b"/"
        || (b.starts_with(b"/")
            && !b.ends_with(b"/")
            && memchr::memmem::find(b, b"//").is_none()
            && memchr::memmem::find(b, b"/./").is_none()
            && !b.ends_with(b"/."))
}

/// `path` with its components joined by single slashes: no empty component (`//`, a
/// trailing `/`) and no `.` component after the first; `..` is kept, as `Path::components`
/// keeps it. Two paths have equal components exactly when their lexical forms have equal
/// bytes, and the proper ancestors of a lexical form are the byte prefixes `parent` gives.
fn lexical(path: &Path) -> Cow<'_, Path> {
    if plain(path) { Cow::Borrowed(path) } else { Cow::Owned(path.components().collect()) }
}

/// `paths` in the order of their bytes.
fn sorted(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort_unstable_by(|a, b| by_bytes(a, b));
    paths
}

/// Two paths in the order of their bytes (not component by component, as `Path`'s `Ord`).
fn by_bytes(a: &Path, b: &Path) -> std::cmp::Ordering {
    a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An absence every lookup of which was the call's own result needs no second look
    /// after the compile; one that any stop's look (taken before its call ran) found does,
    /// and so does one that was also found by a call.
    #[test]
    fn absences_found_only_by_the_calls_themselves_are_told_apart() {
        let event = |path: &str, op: Op, by_call: bool| Event {
            pid: 1,
            op,
            path: PathBuf::from(path),
            cwd_relative: false,
            given: path.into(),
            observed: Seen::Absent,
            by_call,
        };
        let events = [
            event("/w/inc/a.h", Op::OpenRead, true),
            event("/w/inc/a.h", Op::Stat { follow: true }, true),
            event("/w/inc/b.h", Op::OpenRead, false),
            event("/w/inc/c.h", Op::OpenRead, true),
            event("/w/inc/c.h", Op::Access, false),
            event("/w/inc/d.h", Op::Access, true),
        ];
        let seen = from_trace(&events, &|_| true);
        assert_eq!(seen.absent.len(), 4);
        let mut before: Vec<&PathBuf> = seen.absent_looked_before.iter().collect();
        before.sort();
        assert_eq!(before, [Path::new("/w/inc/b.h"), Path::new("/w/inc/c.h")]);
    }

    /// A search directory that is the same directory as another (same device and inode)
    /// and never looked into, while the other is, is a dropped duplicate. Looking into
    /// counts by components: `/w//inc1/x.h` looks into `/w/inc1`, `/w/inc1x/y.h` does not.
    #[test]
    fn a_dropped_duplicate_is_found_by_components_whatever_the_spelling() {
        let stamp = crate::fs::FileStamp {
            dev: 1,
            ino: 7,
            size_bytes: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            mode: libc::S_IFDIR,
        };
        let event = |path: &str, op: Op, observed: Seen| Event {
            pid: 1,
            op,
            path: PathBuf::from(path),
            cwd_relative: false,
            given: path.into(),
            observed,
            by_call: true,
        };
        let dirs = |into: &str| {
            vec![
                event("/w/inc1", Op::Stat { follow: true }, Seen::Directory(stamp)),
                event("/w/inc2", Op::Stat { follow: true }, Seen::Directory(stamp)),
                event(into, Op::OpenRead, Seen::Absent),
            ]
        };
        let search = [PathBuf::from("/w/inc1"), PathBuf::from("/w/inc2")];
        for into in ["/w/inc1/x.h", "/w//inc1/x.h", "/w/./inc1/sub/x.h"] {
            let found = dropped_duplicate(&dirs(into), &search);
            assert!(
                found.as_deref().is_some_and(|f| f.starts_with("/w/inc2 ")),
                "{into}: {found:?}"
            );
        }
        for into in ["/w/inc1x/y.h", "/w/inc1", "/v/inc1/x.h"] {
            assert_eq!(dropped_duplicate(&dirs(into), &search), None, "{into}");
        }
        // A directory spelled with `..` (as GCC spells its own include directories) and a
        // trailing slash: it is looked into by the paths that keep the `..`, not by the
        // path it would resolve to.
        let dotted = |into: &str| {
            vec![
                event("/w/x/../inc1/", Op::Stat { follow: true }, Seen::Directory(stamp)),
                event("/w/inc2", Op::Stat { follow: true }, Seen::Directory(stamp)),
                event(into, Op::OpenRead, Seen::Absent),
            ]
        };
        let search = [PathBuf::from("/w/x/../inc1"), PathBuf::from("/w/inc2")];
        for into in ["/w/x/../inc1/y.h", "/w/x/.././inc1//y.h"] {
            let found = dropped_duplicate(&dotted(into), &search);
            assert!(
                found.as_deref().is_some_and(|f| f.starts_with("/w/inc2 ")),
                "{into}: {found:?}"
            );
        }
        for into in ["/w/inc1/y.h", "/w/x/../inc1"] {
            assert_eq!(dropped_duplicate(&dotted(into), &search), None, "{into}");
        }
    }

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
            "/lib64/ld-linux-x86-64.so.2",
            "/usr/local/lib/libfoo.so.1.2",
            "/usr/lib32/gconv/UTF-16.so",
        ] {
            assert!(is_machine_file(Path::new(p)), "{p}");
        }
        for p in [
            "/usr/include/stdio.h",
            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus",
            "/w/src/so.h",
            "/w/src/a.so.h",
            "/usr/share/locale/de/LC_MESSAGES/gcc-12.mo",
            // A build's own files with the names of the machine's: inputs.
            "/w/src/plugin.so",
            "/w/build/libx.so.1",
            "/w/gconv/data.bin",
            "/w/locale.alias",
            "/dev/shm/header.h",
            "/opt/tools/lib/gconv/x",
            "/libexample/plugin.so",
        ] {
            assert!(!is_machine_file(Path::new(p)), "{p}");
        }
    }
}
