//! Observing what a compiler's process tree does with the file system (issue 25).
//!
//! [`run`] starts one program (a compiler driver, a shell-script wrapper, a static binary)
//! with a seccomp-BPF filter that stops it only at file-system system calls, across its
//! whole process tree (fork, vfork, clone, clone3, `posix_spawn` children, threads), and
//! returns every file-system operation each process made ([`Event`]), with the state of the
//! named path as the tracer observed it while the call waited ([`Observed`]). The caller
//! waits while the tracer looks, so that is the state the system call sees, unless a third
//! process changes the path at the same moment.
//!
//! # How
//! Two mechanisms ([`Mechanism`]) stop a call; [`Mechanism::Auto`] takes the first that
//! works here.
//! * Seccomp user notification (`notify`, Linux 5.8): the filter returns
//!   `SECCOMP_RET_USER_NOTIF`; the program is started directly, with the filter installed
//!   between `fork` and `exec` by the `seccomp-notify` crate (the only `unsafe` code), and
//!   the calling thread answers notifications. Not used when this process is ptraced (the
//!   notifications would hide the tree's calls from that tracer) and refused under another
//!   listener (`EBUSY`; the caller then falls back to its model, not to ptrace, whose stops
//!   that listener's notifications would overrule).
//! * ptrace (`tracer`): `unsafe` is forbidden in this crate, so the child cannot be set up
//!   between `fork` and `exec`. Instead the child is `strata` itself, started as `strata
//!   __strata-trace-exec COVERAGE PROGRAM ARGV0 ARGS...` ([`shim`]): it asks to be traced,
//!   installs the filter (`SECCOMP_RET_TRACE`), stops itself, and `exec`s the program once
//!   the tracer has set its options (`TRACESECCOMP | TRACEFORK | TRACEVFORK | TRACECLONE |
//!   TRACEEXEC | EXITKILL`). The tracer runs on the thread that spawned the shim (ptrace
//!   requires it) and waits with `waitpid(-1, __WALL | __WNOTHREAD)`.
//!
//! With either, stdout and stderr are read on two other threads and stdin is inherited.
//! The tracer never sees results: it observes the named path itself with the call's follow
//! semantics (`openat` follows unless `O_NOFOLLOW`; `newfstatat`/`statx` unless
//! `AT_SYMLINK_NOFOLLOW`; `access` and `execve` follow; `readlink`, `lstat`, `unlink`,
//! `rename`, `mkdir` do not). Working directories are read from `/proc/<pid>/cwd` once per
//! process and cached until a call that can change one or its path (`chdir`, `fchdir`,
//! a rename, `rmdir`; under notification also `clone`, `fork`, `vfork`, since a new process
//! may take an ended one's id) has completed; a relative path with a directory descriptor is
//! joined to `/proc/<pid>/fd/<n>`.
//!
//! # Cost
//! Each stop is two context switches plus a handful of `ptrace`, `process_vm_readv` and
//! `statx` calls in the tracer. On the project's 2-vCPU VM (loaded by other builds) a stop
//! cost 8–20 µs of CPU; tracing `/bin/true` cost 3.1 ms of CPU more than spawning it
//! (2.4 ms of it the `exec` of the 13.7 MB `strata` binary as the shim). Stops per
//! translation unit with the default [`Coverage`]: 467 for zstd's `entropy_common.c`, 581
//! for `zstd_compress.c`, 2,500 for googletest's `gtest.cc` (`--full`: 1,540, 1,670,
//! 10,510). `examples/trace.rs` measures a command. Under notification a stop is one
//! `ioctl` each way and needs no shim: on xerces-c's median compile (1,065 stops, 224 ms
//! of CPU) the launcher's MISS cost 26.1 ms of CPU over a plain compile against 34.7 ms with
//! ptrace (docs/performance.md).
//!
//! # Invariants
//! * The program never runs untraced: if `PTRACE_TRACEME` or the filter fail, the shim
//!   exits (under notification: the child ends before its `exec`) and [`run`] returns
//!   [`Error::Refused`]; the program was not started.
//! * Paths are made absolute as strings, never normalised: `a/../b` stays (the kernel
//!   resolves `..` after symlinks, so must whoever reads the record).
//! * Whatever the tracer could not decode is listed in [`Traced::incomplete`]; a record with
//!   an entry there must not be trusted as complete.
//!
//! # Limitations
//! * Only name-based operations are events. Reads and writes through descriptors (and
//!   memory mappings) are covered by the `open` that made the descriptor; `fchmod`,
//!   `fchown`, `fchdir`, `getdents64` and `futimens` name the descriptor's path as `/proc`
//!   shows it; `ftruncate`, `fsetxattr` and other descriptor-only calls give no event.
//! * `newfstatat` and `statx` with `AT_EMPTY_PATH` do not stop (the filter cannot read the
//!   name; with an empty name they are `fstat`, glibc's most frequent stat call): the rare
//!   call that passes `AT_EMPTY_PATH` with a non-empty name is not seen.
//! * By default ([`Coverage::WithoutReadlink`]) `readlink` and `readlinkat` do not stop:
//!   whether a path component is a symlink, and what a program learns from a link's text,
//!   is not in the record (gcc uses it for the canonical system header names it writes
//!   in depfiles). [`Coverage::Full`] records them, at three to five times the stops.
//! * Not observed, and not marked incomplete: `inotify_add_watch`, `fanotify_mark`, `bind`
//!   and `connect` to Unix socket paths, `*xattrat` and `f*xattr` calls, `uselib`,
//!   `quotactl`, `swapon`, `acct`, and files opened by `binfmt_misc` interpreters.
//! * Marked incomplete: a system call of another ABI (32-bit or x32 code on x86_64);
//!   `io_uring_setup` (its operations bypass seccomp); `name_to_handle_at` and
//!   `open_by_handle_at`; `chroot`, `mount` and the other mount calls; `openat2` with
//!   `RESOLVE_IN_ROOT`; a child started with `CLONE_UNTRACED`; arguments the tracer cannot
//!   read (a path at an unmapped address is not: the kernel fails that call with `EFAULT`
//!   before any lookup); a working directory or descriptor whose path is unknown or deleted;
//!   descendants still running [`Request::linger`] after the root process ended (they are
//!   killed).
//! * The kernel opens the interpreters of an `execve` itself (a `#!` line's program, an
//!   ELF file's dynamic loader): the tracer reads the executable's first bytes and records
//!   them as [`Op::Exec`] events, following up to four `#!` levels as the kernel does.
//! * Under ptrace, a tracee stopped by job control (`SIGTSTP`, `SIGSTOP`) is resumed by the
//!   tracer: with `PTRACE_TRACEME` a group-stop cannot be kept without holding the process.
//!   Under notification it stays stopped until `SIGCONT`, as untraced.
//! * A tree under a filter of higher precedence than the tracer's (another supervisor's
//!   `USER_NOTIF` over ptrace's `TRACE`) would stop nowhere: a record in which not even the
//!   program's `exec` stopped is marked incomplete.
//! * Where neither mechanism works (a kernel before 5.8 with ptrace refused by a
//!   container's seccomp profile or `kernel.yama.ptrace_scope` = 3; the launcher itself
//!   running under a tracer such as `strace -f`, or under another listener) [`run`] returns
//!   [`Error::Refused`] and the caller falls back. Only x86_64 and aarch64 are supported.
//! * [`run`] waits for (reaps) every child of the calling thread until the traced tree
//!   has ended: call it from a thread with no other child process running (children of
//!   other threads are not touched).

mod decode;
mod notify;
mod observe;
mod pin;
pub mod preload;
pub mod shim;
mod syscalls;
mod tracee;
mod tracer;

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::fs::FileStamp;

pub use shim::SHIM_ARG;

/// Whether tracing is supported on this architecture.
pub(crate) const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

fn unsupported() -> String {
    format!("tracing is not supported on {}", std::env::consts::ARCH)
}

/// By default, how long descendants may run on after the root process ended.
pub const DEFAULT_LINGER: Duration = Duration::from_secs(2);

/// Which system calls stop the tracee. Each stop costs two context switches (8–20 µs of
/// CPU on a loaded 2-vCPU virtual machine), so the set is a cost decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Coverage {
    /// Every call of the table except `readlink` and `readlinkat`. The default: gcc's `cc1`
    /// and `cc1plus` `readlink` every directory component of every system header
    /// (`realpath` for `-fcanonical-system-headers`): 1,073 of the 1,540 stops of zstd's
    /// `entropy_common.c`, 8,010 of the 10,510 of googletest's `gtest.cc`.
    #[default]
    WithoutReadlink,
    /// Every call of the table, `readlink` and `readlinkat` included.
    Full,
}

impl Coverage {
    /// The shim's argument for this coverage: `full` or `without-readlink`.
    pub fn as_arg(self) -> &'static str {
        match self {
            Coverage::Full => "full",
            Coverage::WithoutReadlink => "without-readlink",
        }
    }

    /// The coverage [`Coverage::as_arg`] names.
    pub fn from_arg(arg: &str) -> Option<Self> {
        [Coverage::Full, Coverage::WithoutReadlink].into_iter().find(|c| c.as_arg() == arg)
    }
}

/// Which kernel mechanism stops the traced calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mechanism {
    /// Seccomp user notification where the kernel has it (Linux 5.8) and the tree is not
    /// already under a filter with a listener; ptrace otherwise. The default.
    #[default]
    Auto,
    /// ptrace with `SECCOMP_RET_TRACE` stops, through the shim.
    Ptrace,
    /// Seccomp user notification only ([`Error::Refused`] where it is not available).
    Notify,
}

impl Mechanism {
    /// The mechanism `STRATA_TRACE_MECHANISM` names: `auto`, `ptrace` or `notify`.
    pub fn from_arg(arg: &str) -> Option<Self> {
        match arg {
            "auto" => Some(Mechanism::Auto),
            "ptrace" => Some(Mechanism::Ptrace),
            "notify" => Some(Mechanism::Notify),
            _ => None,
        }
    }
}

/// Which binary acts as the shim.
#[derive(Debug, Clone, Copy)]
pub enum Shim<'a> {
    /// `std::env::current_exe()`: the `strata` binary that calls [`run`]. The default.
    CurrentExe,
    /// Another `strata` binary (tests, benchmarks: programs that are not `strata`).
    Binary(&'a Path),
}

/// One program to run traced.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The program: a path, or a name looked up in `PATH` (as `execvp` does; each attempt
    /// is an [`Op::Exec`] event).
    pub program: &'a Path,
    /// Its `argv[0]`.
    pub argv0: &'a OsStr,
    /// The arguments after `argv[0]`.
    pub args: &'a [OsString],
    /// The working directory to start in; by default (`None`) the caller's.
    pub current_dir: Option<&'a Path>,
    /// The shim binary (ptrace only); by default [`Shim::CurrentExe`].
    pub shim: Shim<'a>,
    /// How calls are stopped; by default [`Mechanism::Auto`].
    pub mechanism: Mechanism,
    /// Which system calls are traced; by default [`Coverage::WithoutReadlink`].
    pub coverage: Coverage,
    /// How long descendants may run on after the root process ended before they are killed
    /// and the record marked incomplete; by default [`DEFAULT_LINGER`].
    pub linger: Duration,
    /// Run the tracer and the traced tree on one CPU while it is not contended (the cost of
    /// a stop is a fraction there); by default true.
    pub pin: bool,
    /// Where pinned trees claim their CPUs (`<cache root>/.locks/cpu`; docs/launcher.md,
    /// "One CPU for the tracer and the compiler"); by default `None`: pinned to the tracer's
    /// CPU without a claim.
    pub pin_claims: Option<&'a Path>,
    /// The preload library (`libstrata_preload.so`, as written by the launcher) that takes
    /// the tree's file opens without a stop under notification; `None`: every traced call
    /// stops. Ignored under ptrace.
    pub preload: Option<&'a Path>,
}

impl<'a> Request<'a> {
    /// A request with the defaults: the caller's working directory, this binary as the
    /// shim, [`DEFAULT_LINGER`].
    pub fn new(program: &'a Path, argv0: &'a OsStr, args: &'a [OsString]) -> Self {
        Self {
            program,
            argv0,
            args,
            current_dir: None,
            shim: Shim::CurrentExe,
            mechanism: Mechanism::Auto,
            coverage: Coverage::default(),
            linger: DEFAULT_LINGER,
            pin: true,
            pin_claims: None,
            preload: None,
        }
    }

    /// [`Request::pin`] and [`Request::pin_claims`] together.
    fn pinning(&self) -> pin::Pinning<'a> {
        pin::Pinning { on: self.pin, claims: self.pin_claims }
    }
}

/// What a traced run gave.
#[derive(Debug)]
pub struct Traced {
    /// How the root process (the program) ended.
    pub status: ExitStatus,
    /// Everything the process tree wrote to stdout, byte for byte.
    pub stdout: Vec<u8>,
    /// Everything the process tree wrote to stderr, byte for byte.
    pub stderr: Vec<u8>,
    /// Every file-system operation, in the order the tracer saw them.
    pub events: Vec<Event>,
    /// Reasons the record may be incomplete (one sentence each). When this is not empty,
    /// the record must not be trusted as a complete account of the program's inputs.
    pub incomplete: Vec<String>,
    /// How many system call stops the tracer handled (the tracing's cost driver).
    pub stops: u64,
}

/// One file-system operation of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The thread that made the call (its process id when single-threaded).
    pub pid: u32,
    /// What it did.
    pub op: Op,
    /// The path the call names, absolute: joined as a string to the calling process's
    /// working directory (`AT_FDCWD`) or to the path of the directory descriptor
    /// (`/proc/<pid>/fd/<n>`), never lexically normalised. For `AT_EMPTY_PATH` and
    /// descriptor-only calls: the descriptor's path.
    pub path: PathBuf,
    /// True when the given path was relative and resolved against the working directory.
    pub cwd_relative: bool,
    /// The path argument exactly as the process passed it (empty for descriptor-only calls).
    pub given: OsString,
    /// The state of `path` at the call's entry, looked at with the call's follow semantics.
    pub observed: Observed,
    /// True when `observed` is the call's own result (a call the preload library made and
    /// logged: what it opened, or its `errno`), false when the tracer looked at the path at
    /// the stop, before the call ran (something may change in between).
    pub by_call: bool,
}

/// A file-system operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `open` for reading of something that is not a directory.
    OpenRead,
    /// `open` for writing (`O_WRONLY`, `O_RDWR`, `O_CREAT` or `O_TRUNC`); `O_TMPFILE` names
    /// the directory.
    OpenWrite {
        /// `O_CREAT` (or `creat`).
        create: bool,
        /// `O_TRUNC`.
        truncate: bool,
    },
    /// `open` of a directory (`O_DIRECTORY`, or the path is one).
    OpenDirectory,
    /// `stat`, `lstat`, `newfstatat`, `statx`, an `O_PATH` open.
    Stat {
        /// Whether a final symlink is followed.
        follow: bool,
    },
    /// `access`, `faccessat`, `faccessat2`.
    Access,
    /// `readlink`, `readlinkat`.
    Readlink,
    /// `execve`, `execveat`, and the interpreters the kernel opens for them.
    Exec,
    /// `chdir`, `fchdir`.
    Chdir,
    /// `getdents64` on a directory descriptor.
    ListDirectory,
    /// `unlink`, `unlinkat`.
    Unlink,
    /// `rmdir`, `unlinkat` with `AT_REMOVEDIR`.
    Rmdir,
    /// `mkdir`, `mkdirat`.
    Mkdir,
    /// `rename`, `renameat`, `renameat2`: `path` is renamed to `to`.
    Rename {
        /// The new name (absolute, as for `path`).
        to: PathBuf,
    },
    /// `link`, `linkat`: `path` gets the additional name `to`.
    Link {
        /// The new name (absolute, as for `path`).
        to: PathBuf,
    },
    /// `symlink`, `symlinkat`: a symlink is created at `path`.
    Symlink {
        /// The link text as given.
        target: PathBuf,
    },
    /// `truncate`.
    Truncate,
    /// `chmod`, `fchmod`, `fchmodat`, `fchmodat2`.
    Chmod,
    /// `chown`, `lchown`, `fchown`, `fchownat`.
    Chown,
    /// `utime`, `utimes`, `futimesat`, `utimensat`.
    SetTimes,
    /// `mknod`, `mknodat`.
    Mknod,
    /// `statfs`.
    StatFs,
    /// `getxattr`, `listxattr` (`write` false), `setxattr`, `removexattr` (true), and the
    /// `l` forms.
    Xattr {
        /// Whether the call changes attributes.
        write: bool,
    },
}

/// The state of a path as the tracer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Nothing there: `ENOENT`, or `ENOTDIR` (a component is not a directory).
    Absent,
    /// A regular file.
    File(FileStamp),
    /// A directory.
    Directory(FileStamp),
    /// A symlink (only for calls that do not follow one): its text.
    Symlink(PathBuf),
    /// A device, FIFO or socket.
    Other,
    /// The tracer's `stat` failed otherwise (`EACCES`, `ELOOP`, …): the errno.
    Unreadable(i32),
}

/// Why a traced run could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Tracing is not possible here (ptrace or seccomp denied, unsupported architecture,
    /// the shim binary cannot be started); the program was not run. The caller falls back
    /// to running it untraced.
    #[error("cannot trace {}: {reason}", program.display())]
    Refused {
        /// The program that was to run.
        program: PathBuf,
        /// What refused (e.g. "PTRACE_TRACEME: EPERM: Operation not permitted").
        reason: String,
    },
    /// The program could not be started (its `exec` failed: not found, not executable);
    /// tracing worked.
    #[error("cannot run {}", program.display())]
    Spawn {
        /// The program that failed to start.
        program: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Tracing failed on the way (a `waitpid` error, the output pipes held open).
    #[error("tracing {} failed: {detail}", program.display())]
    Trace {
        /// The program being traced.
        program: PathBuf,
        /// What failed.
        detail: String,
    },
}

impl Error {
    /// True when tracing was refused and the program did not run: fall back.
    pub fn is_refused(&self) -> bool {
        matches!(self, Error::Refused { .. })
    }
}

/// Runs `request.program` traced and returns its status, output and file-system events.
///
/// # Errors
/// [`Error::Refused`] where ptrace or seccomp is denied or the shim cannot start (the
/// program did not run); [`Error::Spawn`] when the program cannot be started (not found,
/// not executable);
/// [`Error::Trace`] when the tracing itself failed.
pub fn run(request: &Request<'_>) -> Result<Traced, Error> {
    if !SUPPORTED {
        return Err(Error::Refused { program: request.program.to_owned(), reason: unsupported() });
    }
    let program = || request.program.to_owned();
    match request.mechanism {
        Mechanism::Ptrace => run_ptrace(request),
        Mechanism::Notify => match notify::available() {
            Ok(()) => notify::run(request).map_err(|e| match e {
                notify::Failed::Busy(e) | notify::Failed::Other(e) => e,
            }),
            Err(reason) => Err(Error::Refused { program: program(), reason }),
        },
        // A tree that is ptraced already: notification would hide its calls from that
        // tracer, and ptrace is refused or seen by it.
        Mechanism::Auto if notify::being_traced() => run_ptrace(request),
        Mechanism::Auto => match notify::available() {
            Ok(()) => match notify::run(request) {
                Ok(traced) => Ok(traced),
                // Another supervisor's filter would overrule ptrace's: not traced here.
                Err(notify::Failed::Busy(e)) => Err(e),
                // Refused means the program did not run: ptrace may still work (a profile
                // that denies the listener).
                Err(notify::Failed::Other(Error::Refused { .. })) => run_ptrace(request),
                Err(notify::Failed::Other(e)) => Err(e),
            },
            Err(_) => run_ptrace(request),
        },
    }
}

/// [`run`] with ptrace, through the shim.
fn run_ptrace(request: &Request<'_>) -> Result<Traced, Error> {
    let program = request.program.to_owned();
    let shim = match request.shim {
        Shim::CurrentExe => std::env::current_exe().map_err(|e| Error::Refused {
            program: program.clone(),
            reason: format!("cannot find this program's binary to start as the shim: {e}"),
        })?,
        Shim::Binary(path) => path.to_owned(),
    };
    let mut command = Command::new(&shim);
    command
        .arg(SHIM_ARG)
        .arg(request.coverage.as_arg())
        .arg(request.program)
        .arg(request.argv0)
        .args(request.args)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = request.current_dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn().map_err(|e| Error::Refused {
        program: program.clone(),
        reason: format!("cannot start the shim {}: {e}", shim.display()),
    })?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let root = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let traced = tracer::trace(root, request.linger, request.pinning());
    // The child was reaped by the loop (or is gone); `child` only holds the pipes' ends.
    drop(child);
    let outcome = traced.map_err(|e| match e {
        tracer::LoopError::Options(errno) => Error::Refused {
            program: program.clone(),
            reason: format!("PTRACE_SETOPTIONS: {errno}"),
        },
        tracer::LoopError::Wait(errno) => {
            Error::Trace { program: program.clone(), detail: format!("waitpid: {errno}") }
        }
    })?;
    let bound = request.linger.max(Duration::from_secs(1));
    let mut recorder = outcome.recorder;
    let (stdout, stderr) = outputs(stdout, stderr, bound, &mut recorder.incomplete);
    match outcome.root {
        tracer::RootEnd::Ran(status) => {
            let mut incomplete = recorder.incomplete;
            if recorder.stops == 0 {
                // The shim's `exec` of the program always stops, unless a filter of higher
                // precedence (another supervisor's `USER_NOTIF`) answered it first.
                incomplete.push(
                    "no system call stopped, not even the program's exec: another seccomp \
                     filter (a supervisor with a listener) hides them from the tracer"
                        .to_owned(),
                );
            }
            Ok(Traced {
                status,
                stdout,
                stderr,
                events: recorder.events,
                incomplete,
                stops: recorder.stops,
            })
        }
        tracer::RootEnd::Shim(status) => Err(shim_error(program, &shim, status, &stderr)),
    }
}

/// The error for a root process that ended before its `exec` succeeded.
fn shim_error(program: PathBuf, shim: &Path, status: ExitStatus, stderr: &[u8]) -> Error {
    match shim::parse_failure(status.code(), stderr) {
        Some(shim::ParsedFailure::Refused(reason)) => Error::Refused { program, reason },
        Some(shim::ParsedFailure::Exec(source)) => Error::Spawn { program, source },
        Some(shim::ParsedFailure::Other(detail)) => Error::Trace { program, detail },
        None => Error::Trace {
            program,
            detail: format!(
                "the shim {} ended ({status}) before running it: {}",
                shim.display(),
                String::from_utf8_lossy(stderr).trim()
            ),
        },
    }
}

/// A pipe read to its end on a thread of its own.
pub(crate) struct Drain {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Drain {
    /// Everything read, once the pipe is closed or `bound` has passed; `false` with what
    /// was read by then when it is still held open (a process outside the tree, or one
    /// that could not be ended, has it).
    pub(crate) fn finish(self, bound: Duration) -> (Vec<u8>, bool) {
        let closed = self.done.recv_timeout(bound).is_ok();
        let bytes = match self.bytes.lock() {
            Ok(mut bytes) => std::mem::take(&mut *bytes),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        (bytes, closed)
    }
}

/// Reads `pipe` to its end on a thread of its own.
fn drain(pipe: Option<impl Read + Send + 'static>) -> Drain {
    let (send, done) = mpsc::sync_channel(1);
    let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let shared = std::sync::Arc::clone(&bytes);
    std::thread::spawn(move || {
        if let Some(mut pipe) = pipe {
            // Most compiles print nothing or a few lines: a small chunk leaves fewer pages
            // to fault in (a pipe holds 64 KiB, so a large output takes a few more reads).
            let mut chunk = vec![0u8; 16 * 1024];
            // A read error ends the capture with what was read; the pipe is ours alone.
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                if let (Ok(mut bytes), Some(read)) = (shared.lock(), chunk.get(..n)) {
                    bytes.extend_from_slice(read);
                }
            }
        }
        let _ = send.send(());
    });
    Drain { bytes, done }
}

/// The output of a finished tree: stdout and stderr as read, and a reason the record is
/// incomplete for each one still held open after `bound`.
pub(crate) fn outputs(
    stdout: Drain,
    stderr: Drain,
    bound: Duration,
    incomplete: &mut Vec<String>,
) -> (Vec<u8>, Vec<u8>) {
    // One bound for both pipes, not one each.
    let until = std::time::Instant::now() + bound;
    let (stdout, out_closed) = stdout.finish(bound);
    let (stderr, err_closed) =
        stderr.finish(until.saturating_duration_since(std::time::Instant::now()));
    for (closed, what) in [(out_closed, "stdout"), (err_closed, "stderr")] {
        if !closed {
            incomplete.push(held_open(what));
        }
    }
    (stdout, stderr)
}

/// Why the record is incomplete when the tree's `what` (`stdout`, `stderr`) stayed open.
pub(crate) fn held_open(what: &str) -> String {
    format!(
        "its {what} stayed open after every traced process ended (held by a process the \
         tracer could not end): what is written there later is not in this compile's output"
    )
}
