//! From one system call stop to [`Event`]s: the arguments read from the stopped tracee,
//! paths made absolute against its working directory or a directory descriptor, and the
//! named path observed with the call's follow semantics.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::unistd::Pid;

use super::observe::{self, Follow};
use super::syscalls::{self, Call, FOREIGN, Stop};
use super::tracee::{self, Memory, Text};
use super::{Event, Observed, Op};
use crate::fs::FileStamp;
use crate::launcher::observe::is_machine_file;
use seccomp_notify::log::layout;

const AT_FDCWD: i32 = libc::AT_FDCWD;
const AT_EMPTY_PATH: u64 = libc::AT_EMPTY_PATH as u64;
const AT_SYMLINK_NOFOLLOW: u64 = libc::AT_SYMLINK_NOFOLLOW as u64;
const AT_SYMLINK_FOLLOW: u64 = libc::AT_SYMLINK_FOLLOW as u64;
const AT_REMOVEDIR: u64 = libc::AT_REMOVEDIR as u64;
const RESOLVE_IN_ROOT: u64 = 0x10;
const CLONE_UNTRACED: u64 = 0x0080_0000;

/// A path argument resolved for an event.
#[derive(Debug)]
struct Named {
    path: PathBuf,
    given: OsString,
    cwd_relative: bool,
}

/// What a path argument amounts to.
enum Lookup {
    /// The kernel looks this path up.
    Name(Named),
    /// The kernel fails the call before any lookup (NULL or unmapped pointer, no NUL
    /// within `PATH_MAX`, empty name without `AT_EMPTY_PATH`, a bad directory descriptor).
    Nothing,
}

/// The record being built: events in order, reasons it may be incomplete, and what the
/// tracer caches per tracee.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub(crate) events: Vec<Event>,
    pub(crate) incomplete: Vec<String>,
    pub(crate) stops: u64,
    /// How the tracee stops: decides what `clone` means.
    stop: Stop,
    memory: Memory,
    /// Working directories read from `/proc/<pid>/cwd`, valid until a call that can change
    /// a working directory or its path (`chdir`, `fchdir`, a rename, `rmdir`).
    cwd: HashMap<Pid, PathBuf>,
    /// Tracees stopped at such a call that have not stopped since (the call runs after the
    /// stop): while any is in flight, working directories are read afresh for every
    /// relative path, and the cache is emptied once more when it has completed.
    unsettled: HashSet<Pid>,
    foreign_reported: HashSet<Pid>,
    /// A path whose events are not recorded: the preload library, which the dynamic
    /// loader of every process opens (it is the launcher's, not the compile's).
    hidden: Option<PathBuf>,
}

/// How many events the record has room for before it grows (a C++ translation unit makes
/// about 1,100; the pages of room left unused are never touched).
const EXPECTED_EVENTS: usize = 4096;

impl Recorder {
    pub(crate) fn new(stop: Stop) -> Self {
        Self {
            // A C++ compile records about a thousand events: sized once, the vector is not
            // copied into fresh pages at each doubling.
            events: Vec::with_capacity(EXPECTED_EVENTS),
            incomplete: Vec::new(),
            stops: 0,
            stop,
            // Without ptrace there is no `PTRACE_PEEKDATA` to fall back on.
            memory: Memory::new(stop == Stop::Ptrace),
            cwd: HashMap::new(),
            unsettled: HashSet::new(),
            foreign_reported: HashSet::new(),
            hidden: None,
        }
    }

    /// Records no event for `path` (absolute, as the program names it).
    pub(crate) fn hide(&mut self, path: PathBuf) {
        self.hidden = Some(path);
    }

    /// Records one committed slot of the preload library's shared log (layout:
    /// `crates/preload/src/layout.rs`): an `open` for reading, a `stat` or an `access`
    /// that the process made without a stop, with what it found or its `errno`, as the
    /// same call's stop would have recorded it; `text` is the slot's working directory and
    /// name. A call that looked nothing up ([`layout::CALL_NONE`]) is skipped; a slot that
    /// does not parse, or a call whose name was lost ([`layout::CALL_LOST`],
    /// [`layout::CALL_NO_CWD`]), makes the record incomplete.
    pub(crate) fn logged(&mut self, slot: &[u8; layout::SLOT_BYTES], text: &[u8]) {
        let call = u32::from_le_bytes(slot[layout::SLOT_CALL..][..4].try_into().unwrap_or([0; 4]));
        match call {
            layout::CALL_NONE => return,
            layout::CALL_LOST => {
                self.incomplete.push(
                    "a call of the compile was made without a stop but its name could not be \
                     logged (the preload library's text arena was full)"
                        .to_owned(),
                );
                return;
            }
            layout::CALL_NO_CWD => {
                let tid =
                    u32::from_le_bytes(slot[layout::SLOT_TID..][..4].try_into().unwrap_or([0; 4]));
                self.incomplete.push(format!(
                    "the working directory of process {tid} was deleted or cannot be read, so \
                     a name it opened relative to it is not known"
                ));
                return;
            }
            _ => {}
        }
        match logged_event(slot, text) {
            Some(event) if self.hidden.as_ref() == Some(&event.path) => {}
            Some(event) => self.events.push(event),
            None => self.incomplete.push(
                "a slot of the preload library's log does not parse (a process of the compile \
                 wrote into the log)"
                    .to_owned(),
            ),
        }
    }

    /// Notes that `pid` stopped or ended: a call of it that could move working
    /// directories has completed.
    pub(crate) fn progressed(&mut self, pid: Pid) {
        if self.unsettled.remove(&pid) {
            self.cwd.clear();
        }
    }

    /// Forgets a tracee that ended.
    pub(crate) fn ended(&mut self, pid: Pid) {
        self.progressed(pid);
        self.cwd.remove(&pid);
        self.foreign_reported.remove(&pid);
    }

    /// Records the system call `pid` is stopped at; `data` is its `SECCOMP_RET_DATA`.
    ///
    /// # Errors
    /// `ESRCH` if the tracee is gone (killed meanwhile); nothing is recorded then.
    pub(crate) fn stop(&mut self, pid: Pid, data: u16) -> nix::Result<()> {
        self.stops += 1;
        if data == FOREIGN {
            self.foreign(pid);
            return Ok(());
        }
        let Some(traced) = syscalls::traced(data) else {
            self.incomplete.push(format!("process {pid} stopped with unknown filter data {data}"));
            return Ok(());
        };
        let (nr, args) = tracee::syscall(pid)?;
        if nr != traced.nr {
            self.incomplete.push(format!(
                "process {pid} stopped for {} but made system call {nr}",
                traced.name
            ));
            return Ok(());
        }
        let result = self.decode(pid, traced.call, args);
        if let Err(errno) = result {
            if errno == Errno::ESRCH {
                return Err(errno);
            }
            self.incomplete.push(format!(
                "cannot read the arguments of {} in process {pid}: {errno}",
                traced.name
            ));
        }
        Ok(())
    }

    /// Records the system call a notification reports: `nr` of ABI `arch` made by `pid`
    /// with `args`. The caller checks afterwards that the notification is still valid (what
    /// was read came from `pid`) and drops the events otherwise.
    ///
    /// # Errors
    /// `ESRCH` if the caller is gone; nothing is recorded then.
    pub(crate) fn notified(
        &mut self,
        pid: Pid,
        nr: libc::c_long,
        arch: u32,
        args: [u64; 6],
    ) -> nix::Result<()> {
        self.stops += 1;
        if syscalls::is_foreign(nr, arch) {
            self.foreign(pid);
            return Ok(());
        }
        let Some(traced) = syscalls::by_number(nr) else {
            self.incomplete.push(format!("process {pid} stopped for system call {nr}"));
            return Ok(());
        };
        match self.decode(pid, traced.call, args) {
            Err(errno) if errno == Errno::ESRCH => Err(errno),
            Err(errno) => {
                self.incomplete.push(format!(
                    "cannot read the arguments of {} in process {pid}: {errno}",
                    traced.name
                ));
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// A system call of another ABI, which the table does not describe: said once per
    /// process.
    fn foreign(&mut self, pid: Pid) {
        if self.foreign_reported.insert(pid) {
            self.incomplete.push(format!(
                "process {pid} made a system call of another ABI (32-bit or x32 code), which \
                 the tracer does not decode"
            ));
        }
    }

    fn decode(&mut self, pid: Pid, call: Call, a: [u64; 6]) -> nix::Result<()> {
        let [a0, a1, a2, a3, a4, _] = a;
        let dirfd = |arg: u64| arg as i32;
        let follow_unless =
            |flags: u64, bit: u64| if flags & bit == 0 { Follow::Yes } else { Follow::No };
        match call {
            Call::Open => self.open(pid, AT_FDCWD, a0, a1),
            Call::Openat => self.open(pid, dirfd(a0), a1, a2),
            Call::Openat2 => {
                // struct open_how { u64 flags; u64 mode; u64 resolve; }
                let mut how = [0u8; 24];
                self.memory.bytes(pid, a2, &mut how)?;
                let word = |i: usize| {
                    how.get(i * 8..i * 8 + 8)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, u64::from_ne_bytes)
                };
                if word(2) & RESOLVE_IN_ROOT != 0 {
                    self.incomplete.push(format!(
                        "process {pid} used openat2 with RESOLVE_IN_ROOT (paths relative to a \
                         directory as root)"
                    ));
                }
                self.open(pid, dirfd(a0), a1, word(0))
            }
            Call::Creat => {
                let flags = (libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) as u64;
                self.open(pid, AT_FDCWD, a0, flags)
            }
            Call::Stat { follow } => {
                let follow = if follow { Follow::Yes } else { Follow::No };
                self.at(pid, AT_FDCWD, a0, 0, follow, |_| Op::Stat {
                    follow: follow == Follow::Yes,
                })
            }
            Call::Fstatat => self.stat_at(pid, dirfd(a0), a1, a3),
            Call::Statx => self.stat_at(pid, dirfd(a0), a1, a2),
            Call::Access => self.at(pid, AT_FDCWD, a0, 0, Follow::Yes, |_| Op::Access),
            Call::Faccessat => self.at(pid, dirfd(a0), a1, 0, Follow::Yes, |_| Op::Access),
            Call::Faccessat2 => {
                self.at(pid, dirfd(a0), a1, a3, follow_unless(a3, AT_SYMLINK_NOFOLLOW), |_| {
                    Op::Access
                })
            }
            Call::Readlink => self.at(pid, AT_FDCWD, a0, 0, Follow::No, |_| Op::Readlink),
            Call::Readlinkat => self.at(pid, dirfd(a0), a1, 0, Follow::No, |_| Op::Readlink),
            Call::Execve => self.exec(pid, AT_FDCWD, a0, 0),
            Call::Execveat => self.exec(pid, dirfd(a0), a1, a4),
            Call::Chdir => {
                self.unsettle(pid);
                self.at(pid, AT_FDCWD, a0, 0, Follow::Yes, |_| Op::Chdir)
            }
            Call::Fchdir => {
                self.unsettle(pid);
                self.fd(pid, dirfd(a0), Op::Chdir)
            }
            Call::Getdents => self.fd(pid, dirfd(a0), Op::ListDirectory),
            Call::Unlink => self.at(pid, AT_FDCWD, a0, 0, Follow::No, |_| Op::Unlink),
            Call::Unlinkat => {
                let op = if a2 & AT_REMOVEDIR == 0 { Op::Unlink } else { Op::Rmdir };
                if op == Op::Rmdir {
                    self.unsettle(pid);
                }
                self.at(pid, dirfd(a0), a1, 0, Follow::No, |_| op)
            }
            Call::Rmdir => {
                self.unsettle(pid);
                self.at(pid, AT_FDCWD, a0, 0, Follow::No, |_| Op::Rmdir)
            }
            Call::Mkdir => self.at(pid, AT_FDCWD, a0, 0, Follow::No, |_| Op::Mkdir),
            Call::Mkdirat => self.at(pid, dirfd(a0), a1, 0, Follow::No, |_| Op::Mkdir),
            Call::Rename => {
                self.unsettle(pid);
                self.two(pid, (AT_FDCWD, a0), (AT_FDCWD, a1), 0, Follow::No, |to| Op::Rename { to })
            }
            Call::Renameat => {
                self.unsettle(pid);
                self.two(pid, (dirfd(a0), a1), (dirfd(a2), a3), 0, Follow::No, |to| Op::Rename {
                    to,
                })
            }
            Call::Link => {
                self.two(pid, (AT_FDCWD, a0), (AT_FDCWD, a1), 0, Follow::No, |to| Op::Link { to })
            }
            Call::Linkat => {
                let follow = if a4 & AT_SYMLINK_FOLLOW == 0 { Follow::No } else { Follow::Yes };
                self.two(pid, (dirfd(a0), a1), (dirfd(a2), a3), a4, follow, |to| Op::Link { to })
            }
            Call::Symlink => self.symlink(pid, a0, AT_FDCWD, a1),
            Call::Symlinkat => self.symlink(pid, a0, dirfd(a1), a2),
            other => self.decode_attributes(pid, other, a),
        }
    }

    /// [`Self::decode`] of the calls that change or read a file's attributes, and the
    /// calls that only make the record incomplete.
    fn decode_attributes(&mut self, pid: Pid, call: Call, a: [u64; 6]) -> nix::Result<()> {
        let [a0, a1, _, a3, a4, _] = a;
        let dirfd = |arg: u64| arg as i32;
        let follow_unless =
            |flags: u64, bit: u64| if flags & bit == 0 { Follow::Yes } else { Follow::No };
        match call {
            Call::Truncate => self.at(pid, AT_FDCWD, a0, 0, Follow::Yes, |_| Op::Truncate),
            Call::Chmod => self.at(pid, AT_FDCWD, a0, 0, Follow::Yes, |_| Op::Chmod),
            Call::Fchmod => self.fd(pid, dirfd(a0), Op::Chmod),
            Call::Fchmodat => self.at(pid, dirfd(a0), a1, 0, Follow::Yes, |_| Op::Chmod),
            Call::Fchmodat2 => {
                self.at(pid, dirfd(a0), a1, a3, follow_unless(a3, AT_SYMLINK_NOFOLLOW), |_| {
                    Op::Chmod
                })
            }
            Call::Chown { follow } => {
                let follow = if follow { Follow::Yes } else { Follow::No };
                self.at(pid, AT_FDCWD, a0, 0, follow, |_| Op::Chown)
            }
            Call::Fchown => self.fd(pid, dirfd(a0), Op::Chown),
            Call::Fchownat => {
                self.at(pid, dirfd(a0), a1, a4, follow_unless(a4, AT_SYMLINK_NOFOLLOW), |_| {
                    Op::Chown
                })
            }
            Call::Utimes => self.at(pid, AT_FDCWD, a0, 0, Follow::Yes, |_| Op::SetTimes),
            Call::Futimesat => self.at(pid, dirfd(a0), a1, 0, Follow::Yes, |_| Op::SetTimes),
            Call::Utimensat if a1 == 0 => self.fd(pid, dirfd(a0), Op::SetTimes),
            Call::Utimensat => {
                self.at(pid, dirfd(a0), a1, a3, follow_unless(a3, AT_SYMLINK_NOFOLLOW), |_| {
                    Op::SetTimes
                })
            }
            Call::Mknod => self.at(pid, AT_FDCWD, a0, 0, Follow::No, |_| Op::Mknod),
            Call::Mknodat => self.at(pid, dirfd(a0), a1, 0, Follow::No, |_| Op::Mknod),
            Call::Statfs => self.at(pid, AT_FDCWD, a0, 0, Follow::Yes, |_| Op::StatFs),
            Call::Xattr { follow, write } => {
                let follow = if follow { Follow::Yes } else { Follow::No };
                self.at(pid, AT_FDCWD, a0, 0, follow, |_| Op::Xattr { write })
            }
            // Under notification: the new process may take the id of one that ended.
            Call::Clone | Call::Clone3 | Call::Fork if self.stop == Stop::Notify => {
                self.unsettle(pid);
                Ok(())
            }
            Call::Clone => {
                self.untraced_child(pid);
                Ok(())
            }
            Call::Clone3 => {
                let mut flags = [0u8; 8];
                self.memory.bytes(pid, a0, &mut flags)?;
                if u64::from_ne_bytes(flags) & CLONE_UNTRACED != 0 {
                    self.untraced_child(pid);
                }
                Ok(())
            }
            Call::Unobservable(why) => {
                self.incomplete.push(format!("process {pid} {why}"));
                Ok(())
            }
            // Decoded by `decode` before it hands over.
            _ => Ok(()),
        }
    }

    fn untraced_child(&mut self, pid: Pid) {
        self.incomplete.push(format!(
            "process {pid} started a child with CLONE_UNTRACED, which is not traced"
        ));
    }

    /// `pid` is about to make a call that can change a working directory or its path.
    fn unsettle(&mut self, pid: Pid) {
        self.unsettled.insert(pid);
        self.cwd.clear();
    }

    /// `open`/`openat`/`openat2`/`creat` with `flags`.
    fn open(&mut self, pid: Pid, dirfd: i32, path: u64, flags: u64) -> nix::Result<()> {
        let flags = flags as i32;
        let has = |bit: i32| flags & bit == bit;
        let nofollow = has(libc::O_NOFOLLOW) || has(libc::O_CREAT | libc::O_EXCL);
        let follow = if nofollow { Follow::No } else { Follow::Yes };
        if has(libc::O_PATH) {
            return self.at(pid, dirfd, path, 0, follow, |_| Op::Stat { follow: !nofollow });
        }
        if has(libc::O_TMPFILE) {
            return self.at(pid, dirfd, path, 0, Follow::Yes, |_| Op::OpenWrite {
                create: true,
                truncate: false,
            });
        }
        let writes =
            flags & libc::O_ACCMODE != libc::O_RDONLY || has(libc::O_CREAT) || has(libc::O_TRUNC);
        let directory = has(libc::O_DIRECTORY);
        self.at(pid, dirfd, path, 0, follow, |observed| {
            if writes {
                Op::OpenWrite { create: has(libc::O_CREAT), truncate: has(libc::O_TRUNC) }
            } else if directory || matches!(observed, Observed::Directory(_)) {
                Op::OpenDirectory
            } else {
                Op::OpenRead
            }
        })
    }

    /// `newfstatat`/`statx`: `AT_EMPTY_PATH` with an empty name is `fstat` (no event).
    fn stat_at(&mut self, pid: Pid, dirfd: i32, path: u64, flags: u64) -> nix::Result<()> {
        let follow = if flags & AT_SYMLINK_NOFOLLOW == 0 { Follow::Yes } else { Follow::No };
        match self.lookup(pid, dirfd, path, flags)? {
            Lookup::Name(named) if named.given.is_empty() || is_machine_file(&named.path) => Ok(()),
            Lookup::Name(named) => {
                self.push(pid, named, follow, |_| Op::Stat { follow: follow == Follow::Yes });
                Ok(())
            }
            Lookup::Nothing => Ok(()),
        }
    }

    /// An `execve`/`execveat`, then the interpreters the kernel opens for it.
    fn exec(&mut self, pid: Pid, dirfd: i32, path: u64, flags: u64) -> nix::Result<()> {
        let follow = if flags & AT_SYMLINK_NOFOLLOW == 0 { Follow::Yes } else { Follow::No };
        let Lookup::Name(named) = self.lookup(pid, dirfd, path, flags)? else { return Ok(()) };
        let program = named.path.clone();
        let observed = self.push(pid, named, follow, |_| Op::Exec);
        if !matches!(observed, Observed::File(_)) {
            return Ok(());
        }
        let found = match observe::interpreters(&program, || self.cwd_of(pid).ok()) {
            Ok(found) => found,
            Err((found, why)) => {
                self.incomplete.push(format!(
                    "cannot read what process {pid} executes, to find the interpreters the \
                     kernel opens for it: {why}"
                ));
                found
            }
        };
        for (given, path) in found {
            let cwd_relative = !given.as_bytes().starts_with(b"/");
            self.push(pid, Named { path, given, cwd_relative }, Follow::Yes, |_| Op::Exec);
        }
        Ok(())
    }

    /// `rename`/`link` and their `*at` forms: the event names the first path, `op` gets
    /// the second.
    fn two(
        &mut self,
        pid: Pid,
        from: (i32, u64),
        to: (i32, u64),
        flags: u64,
        follow: Follow,
        op: fn(PathBuf) -> Op,
    ) -> nix::Result<()> {
        let Lookup::Name(target) = self.lookup(pid, to.0, to.1, 0)? else { return Ok(()) };
        let Lookup::Name(source) = self.lookup(pid, from.0, from.1, flags)? else { return Ok(()) };
        self.push(pid, source, follow, |_| op(target.path));
        Ok(())
    }

    /// `symlink`/`symlinkat`: the event names the new link; the target text is kept as is.
    fn symlink(&mut self, pid: Pid, target: u64, dirfd: i32, path: u64) -> nix::Result<()> {
        let target = match self.memory.string(pid, target)? {
            Text::Read(text) => PathBuf::from(text),
            Text::TooLong | Text::Fault => return Ok(()),
        };
        self.at(pid, dirfd, path, 0, Follow::No, |_| Op::Symlink { target })
    }

    /// A call on the object an open descriptor refers to: the event names the path
    /// `/proc/<pid>/fd/<fd>` shows, the observation is of the object itself.
    fn fd(&mut self, pid: Pid, fd: i32, op: Op) -> nix::Result<()> {
        let Some(path) = self.fd_path(pid, fd)? else { return Ok(()) };
        let observed = observe::observe(Path::new(&format!("/proc/{pid}/fd/{fd}")), Follow::Yes);
        let given = OsString::new();
        self.events.push(Event {
            pid: pid.as_raw() as u32,
            op,
            given,
            path,
            cwd_relative: false,
            observed,
            by_call: false,
        });
        Ok(())
    }

    /// A path argument with the usual `*at` rules, observed, as an event. The machine's
    /// own files (the loader's, the C library's locale data, `/proc`, `/dev`: see
    /// [`is_machine_file`]), which every record leaves out, are neither looked at nor
    /// recorded (a C++ compile stops at about fifty of them).
    fn at(
        &mut self,
        pid: Pid,
        dirfd: i32,
        path: u64,
        flags: u64,
        follow: Follow,
        op: impl FnOnce(&Observed) -> Op,
    ) -> nix::Result<()> {
        if let Lookup::Name(named) = self.lookup(pid, dirfd, path, flags)?
            && !is_machine_file(&named.path)
        {
            self.push(pid, named, follow, op);
        }
        Ok(())
    }

    fn push(
        &mut self,
        pid: Pid,
        named: Named,
        follow: Follow,
        op: impl FnOnce(&Observed) -> Op,
    ) -> Observed {
        let observed = observe::observe(&named.path, follow);
        if self.hidden.as_ref() == Some(&named.path) {
            return observed;
        }
        let op = op(&observed);
        self.events.push(Event {
            pid: pid.as_raw() as u32,
            op,
            path: named.path,
            cwd_relative: named.cwd_relative,
            given: named.given,
            observed: observed.clone(),
            by_call: false,
        });
        observed
    }

    /// Reads the path argument at `address` and makes it absolute: as given when it
    /// starts with `/`, else joined (as a string) to the working directory (`AT_FDCWD`) or
    /// to the path of `dirfd`. With `AT_EMPTY_PATH` in `flags` an empty name is `dirfd`
    /// itself (the path is the descriptor's, `given` stays empty).
    fn lookup(&mut self, pid: Pid, dirfd: i32, address: u64, flags: u64) -> nix::Result<Lookup> {
        let given = match self.memory.string(pid, address)? {
            Text::Read(given) => given,
            Text::TooLong | Text::Fault => return Ok(Lookup::Nothing),
        };
        if given.is_empty() {
            if flags & AT_EMPTY_PATH == 0 {
                return Ok(Lookup::Nothing);
            }
            let base =
                if dirfd == AT_FDCWD { self.cwd_of(pid).ok() } else { self.fd_path(pid, dirfd)? };
            return Ok(base.map_or(Lookup::Nothing, |path| {
                Lookup::Name(Named { path, given, cwd_relative: false })
            }));
        }
        if given.as_bytes().starts_with(b"/") {
            return Ok(Lookup::Name(Named {
                path: PathBuf::from(&given),
                given,
                cwd_relative: false,
            }));
        }
        let (base, cwd_relative) = if dirfd == AT_FDCWD {
            match self.cwd_of(pid) {
                Ok(cwd) => (cwd, true),
                Err(reason) => {
                    self.incomplete.push(reason);
                    return Ok(Lookup::Nothing);
                }
            }
        } else {
            match self.fd_path(pid, dirfd)? {
                Some(path) => (path, false),
                None => return Ok(Lookup::Nothing),
            }
        };
        Ok(Lookup::Name(Named { path: join(&base, &given), given, cwd_relative }))
    }

    /// The working directory of `pid`, cached until a `chdir`.
    ///
    /// # Errors
    /// Why it is unknown (for the incomplete list).
    fn cwd_of(&mut self, pid: Pid) -> Result<PathBuf, String> {
        if let Some(cwd) = self.cwd.get(&pid) {
            return Ok(cwd.clone());
        }
        let cwd = tracee::proc_link(pid, "cwd").map_err(|errno| {
            format!(
                "cannot read the working directory of process {pid}: {}",
                Errno::from_raw(errno)
            )
        })?;
        if deleted(&cwd) {
            return Err(format!("the working directory of process {pid} was deleted"));
        }
        if self.unsettled.is_empty() {
            self.cwd.insert(pid, cwd.clone());
        }
        Ok(cwd)
    }

    /// The path of descriptor `fd` of `pid`; `None` when the call fails before a lookup
    /// (no such descriptor, not a path). A deleted file or directory is recorded as
    /// incomplete.
    fn fd_path(&mut self, pid: Pid, fd: i32) -> nix::Result<Option<PathBuf>> {
        if fd < 0 {
            return Ok(None);
        }
        match tracee::proc_link(pid, &format!("fd/{fd}")) {
            Ok(path) if deleted(&path) => {
                self.incomplete.push(format!(
                    "descriptor {fd} of process {pid} names a deleted file ({})",
                    path.display()
                ));
                Ok(None)
            }
            Ok(path) if path.as_os_str().as_bytes().starts_with(b"/") => Ok(Some(path)),
            Ok(_) | Err(libc::ENOENT) => Ok(None),
            Err(errno) => {
                self.incomplete.push(format!(
                    "cannot read descriptor {fd} of process {pid}: {}",
                    Errno::from_raw(errno)
                ));
                Ok(None)
            }
        }
    }
}

/// The event of one committed log slot and its text; `None` if it does not parse.
fn logged_event(slot: &[u8; layout::SLOT_BYTES], text: &[u8]) -> Option<Event> {
    use layout::*;
    let u32_at = |at: usize| Some(u32::from_le_bytes(slot.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(slot.get(at..at + 8)?.try_into().ok()?));
    let u16_at = |at: usize| Some(u16::from_le_bytes(slot.get(at..at + 2)?.try_into().ok()?));
    let call = u32_at(SLOT_CALL)?;
    let flags = u32_at(SLOT_FLAGS)? as i32;
    // How the name's last component is looked at, as a stopped call's observation does.
    let follow = match call {
        CALL_OPEN | CALL_ACCESS => Follow::Yes,
        CALL_STAT if flags & libc::AT_SYMLINK_NOFOLLOW == 0 => Follow::Yes,
        CALL_STAT => Follow::No,
        _ => return None,
    };
    let (cwd_len, given_len) =
        (usize::from(u16_at(SLOT_CWD_LEN)?), usize::from(u16_at(SLOT_GIVEN_LEN)?));
    if text.len() != cwd_len + given_len {
        return None;
    }
    let (cwd, given) = text.split_at(cwd_len);
    if given.is_empty()
        || (cwd_len == 0) != given.starts_with(b"/")
        || (cwd_len > 0 && !cwd.starts_with(b"/"))
    {
        return None;
    }
    let given = OsStr::from_bytes(given).to_owned();
    let cwd_relative = cwd_len > 0;
    let path = if cwd_relative {
        join(Path::new(OsStr::from_bytes(cwd)), &given)
    } else {
        PathBuf::from(&given)
    };
    let errno = u32_at(SLOT_ERRNO)? as i32;
    let observed = match errno {
        0 => {
            let time = |sec: usize, nsec: usize| -> Option<i128> {
                Some(i128::from(u64_at(sec)? as i64) * 1_000_000_000 + i128::from(u32_at(nsec)?))
            };
            let mode = u32_at(SLOT_MODE)?;
            let stamp = FileStamp {
                dev: libc::makedev(u32_at(SLOT_DEV_MAJOR)?, u32_at(SLOT_DEV_MINOR)?),
                ino: u64_at(SLOT_INO)?,
                size_bytes: u64_at(SLOT_SIZE)?,
                mtime_ns: time(SLOT_MTIME_SEC, SLOT_MTIME_NSEC)?,
                ctime_ns: time(SLOT_CTIME_SEC, SLOT_CTIME_NSEC)?,
                mode,
            };
            match mode & libc::S_IFMT {
                libc::S_IFREG => Observed::File(stamp),
                libc::S_IFDIR => Observed::Directory(stamp),
                // An `lstat` of a symbolic link: its target is read now (later than the
                // call, which only ever errs towards a mismatch).
                libc::S_IFLNK if follow == Follow::No => observe::observe(&path, Follow::No),
                // No stamp: `statx` of the new descriptor failed (or a link where none can
                // be).
                0 | libc::S_IFLNK => return None,
                _ => Observed::Other,
            }
        }
        libc::ENOENT | libc::ENOTDIR => Observed::Absent,
        // EACCES, ELOOP, EMFILE, …: the call failed for a reason other than absence, so
        // the path is looked at as a stopped call's is (later, which only ever errs towards
        // a mismatch).
        _ => observe::observe(&path, follow),
    };
    let op = match call {
        CALL_OPEN if matches!(observed, Observed::Directory(_)) => Op::OpenDirectory,
        CALL_OPEN => Op::OpenRead,
        CALL_STAT => Op::Stat { follow: follow == Follow::Yes },
        _ => Op::Access,
    };
    // An observation the launcher made itself (above: a link's target, an error other
    // than absence) is not the call's own result, nor is an `access`'s (a `stat` made just
    // before it: a file may appear in between, as at a stop).
    let by_call = call != CALL_ACCESS
        && match errno {
            0 => !matches!(observed, Observed::Symlink(_)),
            libc::ENOENT | libc::ENOTDIR => true,
            _ => false,
        };
    Some(Event { pid: u32_at(SLOT_TID)?, op, path, cwd_relative, given, observed, by_call })
}

/// `base` + `/` + `name`, as bytes: no normalisation (`a/../b` stays, since the kernel
/// resolves `..` after symlinks).
fn join(base: &Path, name: &OsStr) -> PathBuf {
    let base = base.as_os_str().as_bytes();
    let mut joined = Vec::with_capacity(base.len() + 1 + name.len());
    joined.extend_from_slice(base);
    if !base.ends_with(b"/") {
        joined.push(b'/');
    }
    joined.extend_from_slice(name.as_bytes());
    PathBuf::from(<OsString as std::os::unix::ffi::OsStringExt>::from_vec(joined))
}

/// `/proc` marks a link to a removed file or directory with this suffix.
fn deleted(path: &Path) -> bool {
    path.as_os_str().as_bytes().ends_with(b" (deleted)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_keeps_the_name_as_given() {
        assert_eq!(join(Path::new("/w"), OsStr::new("a/../b")), Path::new("/w/a/../b"));
        assert_eq!(join(Path::new("/"), OsStr::new("x")), Path::new("/x"));
        assert_eq!(join(Path::new("/w"), OsStr::new("./x/")).as_os_str(), "/w/./x/");
    }
}
