//! The supervisor on seccomp user notification (issue 28): the same observation as the
//! ptrace loop ([`super::tracer`]) at a lower cost per stop.
//!
//! The program is started directly (no shim): a thread of the launcher installs the filter
//! ([`syscalls::program`] with [`Stop::Notify`]) with a listener on itself, hands the
//! listener here, and spawns the program, which inherits the filter (crate
//! `seccomp-notify`, which holds the only `unsafe` code). Every traced
//! call of the tree then waits in the kernel while the supervisor reads its arguments
//! (`process_vm_readv`, `/proc/<pid>/cwd` and `fd/<n>`), observes the named path, and lets
//! the call go on (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`); the kernel accepts that answer only
//! while the notification is valid, so an accepted answer means that what was read came
//! from the caller, not from a process that took its id, and a refused one drops what was
//! read. The stops before the program's first `exec` (the starting thread's `clone`, the
//! child's calls in the launcher's code) are answered unrecorded and without allocating:
//! where the standard library `fork`s instead of `posix_spawn`ing, the C library holds
//! its allocator's locks across that `clone`, and a supervisor that allocated would wait
//! for them while the `clone` waits for it.
//!
//! Why it is cheaper: a ptrace stop is a signal-like stop with `waitpid`, `PTRACE_GETREGS`
//! and `PTRACE_CONT`; a notification is one `ioctl` each way, and carries the call's number
//! and arguments. Measured on xerces-c (docs/performance.md): 12.5 ms of CPU over a
//! 223 ms compile for the stops alone, against 14.3 ms with ptrace.
//!
//! # Invariants
//! * The program never runs without the filter (it is started only once the filter is
//!   installed; otherwise [`run`] returns [`Error::Refused`]: the caller may use ptrace
//!   instead).
//! * The loop ends when the listener reports that no process uses the filter any more
//!   (`POLLHUP`, Linux 5.8): every descendant has ended. Descendants still running
//!   [`Request::linger`] after the root process ended are killed through the pidfds taken
//!   when they first stopped, and the record marked incomplete.
//! * There are no exit events: a working directory cached for a process id is dropped
//!   whenever a `clone`, `clone3`, `fork` or `vfork` of the tree has completed (the
//!   filter stops them all), so a new process that took an old id is never given the old
//!   one's directory.
//!
//! # Limitations
//! * Linux 5.8 or later, and Yama's `ptrace_scope` below 2 unless root ([`available`]);
//!   elsewhere ptrace is tried. A tree already under a filter with a listener (`EBUSY`:
//!   only one per process) is not traced at all.
//! * A descendant that ends its thread group leader's life early, or a thread, is killed
//!   only through its process's pidfd.
//! * If the launcher itself dies while the compiler runs (`SIGKILL`), the tree is not killed
//!   with it, as ptrace's `EXITKILL` would: with the listener gone, the kernel fails every
//!   call the filter stops with `ENOSYS`, so the orphaned compiler fails on its next file
//!   lookup and ends. Nothing is cached.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::unistd::Pid;
use seccomp_notify::log::layout;
use seccomp_notify::{Listener, Notification, SharedLog};

use super::decode::Recorder;
use super::pin::{CHECK_EVERY, Pin, Pinning};
use super::syscalls::{self, Stop};
use super::{Error, Request, Traced, held_open};

/// Whether this kernel has what the supervisor needs: `Err` with the reason otherwise.
/// Linux 5.8 for `POLLHUP` on a listener whose filter has no users left (5.5 for
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
pub(crate) fn available() -> Result<(), String> {
    let name = rustix::system::uname();
    let release = name.release().to_string_lossy();
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).map(|p| p.parse::<u32>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) if (major, minor) >= (5, 8) => {}
        _ => {
            return Err(format!(
                "seccomp user notification needs Linux 5.8 or later (this is {release})"
            ));
        }
    }
    // The supervisor reads each call's path with `process_vm_readv`, which Yama's
    // `ptrace_scope` 2 and 3 refuse without CAP_SYS_PTRACE (every record would be
    // incomplete); scope 1 allows it for descendants.
    let scope = crate::fs::read_proc(std::path::Path::new("/proc/sys/kernel/yama/ptrace_scope"));
    let scope: u32 = scope.ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    if scope >= 2 && !rustix::process::geteuid().is_root() {
        return Err(format!(
            "kernel.yama.ptrace_scope is {scope}: reading a traced process's memory is refused"
        ));
    }
    Ok(())
}

/// Why [`run`] gave no record.
#[derive(Debug)]
pub(crate) enum Failed {
    /// The process already runs under a filter with a listener (`EBUSY`): another
    /// supervisor observes this tree, and a ptrace filter installed under it would be
    /// overruled by its `USER_NOTIF` (the tracer would see nothing). Holds the
    /// [`Error::Refused`]; the program did not run.
    Busy(Error),
    /// Any other error (see [`run`]).
    Other(Error),
}

/// What glibc's and musl's dynamic loaders print when they cannot start a program: a
/// library it needs is missing or not a library of this system (`libc.so` of another C
/// library is a linker script on this one), or a symbol cannot be bound. With the preload
/// library in `LD_PRELOAD` they can say so without naming it.
const LOADER_FAILURES: [&[u8]; 4] = [
    b"error while loading shared libraries",
    b"symbol lookup error",
    b"Error loading shared library",
    b"Error relocating",
];

/// Whether this process is being ptraced (`TracerPid` of `/proc/self/status` is not 0).
/// A tree under a notification filter hides its calls from a tracer that uses seccomp
/// stops (`USER_NOTIF` takes precedence over `TRACE`), so the launcher then uses ptrace,
/// which such a tracer refuses or sees.
pub(crate) fn being_traced() -> bool {
    let status = crate::fs::read_proc(std::path::Path::new("/proc/self/status"));
    status.ok().and_then(|text| {
        let line = text.lines().find(|line| line.starts_with("TracerPid:"))?;
        Some(line.trim_start_matches("TracerPid:").trim() != "0")
    }) != Some(false)
}

/// Runs `request.program` under the notification supervisor, with the preload library's
/// fast path when [`Request::preload`] names it (and no `/etc/ld.so.preload` exists, whose
/// libraries would come after it). Where the dynamic loader could not load the library in
/// some process (it says so on stderr, naming it: a 32-bit program, a damaged file), a
/// process of a program that failed could not be started by its loader at all (glibc's and
/// musl's fatal messages, [`LOADER_FAILURES`]: the library, or one it would need, could
/// not be loaded or bound), or a process listed another library after it (whose `open` it
/// would hide), the compile runs again without it, so that its output is the compiler's.
///
/// # Errors
/// [`Failed::Busy`] under another listener; otherwise [`Error::Refused`] when the filter or
/// its listener cannot be installed (the program did not run); [`Error::Spawn`] when the
/// program cannot be started; [`Error::Trace`] when the supervision failed on the way.
pub(crate) fn run(request: &Request<'_>) -> Result<Traced, Failed> {
    // A library in /etc/ld.so.preload comes after LD_PRELOAD's, so this one's `open` would
    // hide its `open`.
    let preload = request
        .preload
        .filter(|_| crate::fs::symlink_metadata(Path::new("/etc/ld.so.preload")).is_err());
    let (traced, rerun) = run_with(request, preload)?;
    let named = |library: &Path| {
        memchr::memmem::find(&traced.stderr, library.as_os_str().as_bytes()).is_some()
    };
    let loader_failed = || {
        !traced.status.success()
            && LOADER_FAILURES.iter().any(|m| memchr::memmem::find(&traced.stderr, m).is_some())
    };
    if rerun || preload.is_some_and(named) || (preload.is_some() && loader_failed()) {
        run_with(request, None).map(|(traced, _)| traced)
    } else {
        Ok(traced)
    }
}

/// [`run`] with `preload` as the library, or none; true when a process found a library
/// after it in `LD_PRELOAD` (whose `open` it may have hidden: run again without it).
fn run_with(request: &Request<'_>, preload: Option<&Path>) -> Result<(Traced, bool), Failed> {
    let program = request.program.to_owned();
    let refused =
        |reason: String| Failed::Other(Error::Refused { program: program.clone(), reason });
    let cookie = fastrand::u64(1..);
    // Without a log (memfd refused) the compile is traced without the fast path.
    let mut shared = preload.and_then(|library| {
        let log = SharedLog::create(cookie).ok()?;
        let value = log.env_value().ok()?;
        Some((library, log, value))
    });
    let pass = shared.as_ref().map(|_| cookie);
    let filter = syscalls::program(request.coverage, Stop::Notify, pass)
        .map_err(|e| refused(format!("seccomp filter: {e}")))?
        .into_iter()
        .map(|i| seccomp_notify::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k })
        .collect::<Vec<_>>();
    let (out_read, out_write) = std::io::pipe().map_err(|e| refused(format!("pipe: {e}")))?;
    let (err_read, err_write) = std::io::pipe().map_err(|e| refused(format!("pipe: {e}")))?;
    let mut command = Command::new(request.program);
    command
        .arg0(request.argv0)
        .args(request.args)
        .stdin(Stdio::inherit())
        .stdout(out_write)
        .stderr(err_write);
    if let Some(dir) = request.current_dir {
        command.current_dir(dir);
    }
    if let Some((library, _, value)) = &shared {
        // Last, so that a library the user preloads sees every call first (its `open`
        // calls this one's as the next).
        let mut preload = crate::config::var("LD_PRELOAD").unwrap_or_default();
        if !preload.is_empty() {
            preload.push(":");
        }
        preload.push(library.as_os_str());
        command.env("LD_PRELOAD", preload).env(layout::LOG_ENV, value);
    }
    let mut pipes = Pipes::new([out_read, err_read]).map_err(|e| refused(format!("pipe: {e}")))?;
    // A thread of its own installs the filter on itself and starts the program, which
    // inherits it: no `pre_exec` hook, so the spawn is a `posix_spawn` (no copy of this
    // process's address space, as a `fork` makes). Its `clone` and the program's `exec`
    // are stops, so the spawn returns only once this thread answers them (`until_exec`).
    let (handoff, handed) = std::sync::mpsc::sync_channel(1);
    let spawner = std::thread::spawn(move || {
        let installed = seccomp_notify::install_on_this_thread(&filter)?;
        if handoff.send(installed).is_err() {
            return Err(std::io::Error::other("the supervising thread is gone"));
        }
        let child = command.spawn();
        // Closes the pipes' write ends here.
        drop(command);
        child
    });
    let (listener, exec) = match handed.recv() {
        Ok(listener) => {
            // Best effort: kernels before 6.6 wake across CPUs as before.
            let _ = listener.wake_synchronously();
            let exec = until_exec(&listener);
            (listener, exec)
        }
        Err(_) => {
            let reason = match spawner.join() {
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(Failed::Busy(Error::Refused {
                        program,
                        reason: "the launcher runs under another seccomp supervisor (a \
                                 filter with a listener), which observes this compile"
                            .to_owned(),
                    }));
                }
                Ok(Err(e)) => format!("seccomp filter with a listener: {e}"),
                Ok(Ok(mut child)) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    "the program started but its listener did not arrive".to_owned()
                }
                Err(_) => "the thread starting the program panicked".to_owned(),
            };
            return Err(refused(reason));
        }
    };
    let mut recorder = Recorder::new(Stop::Notify);
    let log = shared.as_mut().map(|(library, log, _)| {
        recorder.hide(library.to_path_buf());
        log
    });
    if exec.is_none() {
        // The listener failed before the program's `exec` (or the spawn failed, which
        // `root_status` reports): the stops that follow may be the launcher's code.
        recorder.incomplete.push("the program's exec was not seen".to_owned());
    }
    let pinning = request.pinning();
    supervise(&listener, exec, request.linger, pinning, &mut recorder, log, &mut pipes);
    if recorder.stops == 0 {
        // The program's `exec` always stops, unless a filter of higher precedence answered.
        recorder.incomplete.push(
            "no system call stopped, not even the program's exec: another seccomp filter \
             answers them first"
                .to_owned(),
        );
    }
    drop(listener);
    let status = root_status(spawner, &program).map_err(Failed::Other)?;
    let bound = request.linger.max(Duration::from_secs(1));
    let [stdout, stderr] = pipes.finish(bound, &mut recorder.incomplete);
    let rerun = shared.as_ref().is_some_and(|(_, log, _)| log.rerun_requested());
    let traced = Traced {
        status,
        stdout,
        stderr,
        events: recorder.events,
        incomplete: recorder.incomplete,
        stops: recorder.stops,
    };
    Ok((traced, rerun))
}

/// How the root process ended: its spawn's error, or its status (reaped here).
fn root_status(
    spawner: JoinHandle<std::io::Result<Child>>,
    program: &std::path::Path,
) -> Result<ExitStatus, Error> {
    match spawner.join() {
        Ok(Ok(mut child)) => child.wait().map_err(|e| Error::Trace {
            program: program.to_owned(),
            detail: format!("waiting for the program: {e}"),
        }),
        Ok(Err(source)) => Err(Error::Spawn { program: program.to_owned(), source }),
        Err(_) => Err(Error::Trace {
            program: program.to_owned(),
            detail: "the thread starting the program panicked".to_owned(),
        }),
    }
}

/// The tree's stdout and stderr, read by the supervisor in its own `poll` loop (no thread
/// per pipe): non-blocking read ends, and what each gave so far.
struct Pipes {
    /// Each read end until its end of file (or a read error).
    ends: [Option<std::io::PipeReader>; 2],
    bytes: [Vec<u8>; 2],
}

impl Pipes {
    /// Takes the read ends of stdout and stderr, made non-blocking.
    fn new(ends: [std::io::PipeReader; 2]) -> std::io::Result<Self> {
        for end in &ends {
            rustix::io::ioctl_fionbio(end, true)?;
        }
        Ok(Self { ends: ends.map(Some), bytes: [Vec::new(), Vec::new()] })
    }

    /// Adds a `POLLIN` entry to `fds` for each end still open; which ends, in that order.
    fn poll_fds<'a>(&'a self, fds: &mut Vec<PollFd<'a>>) -> Vec<usize> {
        let mut open = Vec::with_capacity(2);
        for (which, end) in self.ends.iter().enumerate() {
            if let Some(end) = end {
                fds.push(PollFd::new(end.as_fd(), PollFlags::POLLIN));
                open.push(which);
            }
        }
        open
    }

    /// Reads end `which` until it has nothing more now; closes it at its end of file.
    fn read(&mut self, which: usize) {
        let Some(end) = self.ends[which].as_mut() else { return };
        // Most compiles print nothing or a few lines; a pipe holds 64 KiB.
        let mut chunk = [0u8; 4096];
        loop {
            match std::io::Read::read(end, &mut chunk) {
                Ok(0) => break,
                Ok(n) => self.bytes[which].extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                // A read error ends the capture with what was read; the pipe is ours alone.
                Err(_) => break,
            }
        }
        self.ends[which] = None;
    }

    /// Everything read, once both ends are closed or `bound` has passed; the record is
    /// marked incomplete for an end still held open then (a process outside the tree, or
    /// one that could not be ended, has it).
    fn finish(mut self, bound: Duration, incomplete: &mut Vec<String>) -> [Vec<u8>; 2] {
        let until = Instant::now() + bound;
        loop {
            let mut fds = Vec::with_capacity(2);
            let open = self.poll_fds(&mut fds);
            if open.is_empty() {
                break;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let timeout =
                PollTimeout::try_from(left.as_millis().max(1)).unwrap_or(PollTimeout::MAX);
            let ready: Vec<bool> = match poll(&mut fds, timeout) {
                Ok(_) | Err(Errno::EINTR) => fds
                    .iter()
                    .map(|fd| !fd.revents().unwrap_or(PollFlags::empty()).is_empty())
                    .collect(),
                Err(_) => break,
            };
            drop(fds);
            for (which, ready) in open.into_iter().zip(ready) {
                if ready {
                    self.read(which);
                }
            }
        }
        for (end, what) in self.ends.iter().zip(["stdout", "stderr"]) {
            if end.is_some() {
                incomplete.push(held_open(what));
            }
        }
        self.bytes
    }
}

/// The processes of the tree, as far as the supervisor has seen them.
#[derive(Debug, Default)]
struct Tree {
    /// The root process (the first to stop: its `exec`) and its pidfd until it ended.
    root: Option<(Pid, Option<OwnedFd>)>,
    /// A pidfd per process id seen stopping (thread ids that are no process have none).
    pidfds: HashMap<Pid, Option<OwnedFd>>,
    /// When the root ended and descendants ran on: when they are killed.
    deadline: Option<Instant>,
    /// The descendants were killed; when the supervisor stops waiting for them.
    killed: Option<Instant>,
    /// How many pidfds may be held before the next sweep of ended ones.
    sweep_at: usize,
    /// The process that stopped last (whose wait for its CPU the pin samples).
    last: Option<Pid>,
}

impl Tree {
    /// Notes `pid` stopping: a pidfd for it the first time (valid while it waits). Past
    /// [`Tree::sweep_at`] pidfds, those of ended processes are closed first, so a tree that
    /// starts thousands of processes does not run the supervisor out of descriptors.
    fn seen(&mut self, pid: Pid) {
        if self.pidfds.contains_key(&pid) {
            return;
        }
        if self.pidfds.len() >= self.sweep_at.max(SWEEP_AT) {
            self.pidfds.retain(|_, fd| fd.as_ref().is_some_and(|fd| !ended(fd)));
            self.sweep_at = self.pidfds.len() * 2;
        }
        let raw = rustix::process::Pid::from_raw(pid.as_raw());
        let fd = raw.and_then(|raw| {
            rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty()).ok()
        });
        self.pidfds.insert(pid, fd);
    }

    /// The ids of the processes seen that have not ended (a pidfd tells; an id alone may
    /// have been taken by another process since).
    fn live(&self) -> impl Iterator<Item = Pid> + '_ {
        self.pidfds
            .iter()
            .filter(|(_, fd)| fd.as_ref().is_some_and(|fd| !ended(fd)))
            .map(|(p, _)| *p)
    }

    /// Kills every process seen that is still alive (a pidfd cannot reach a process that
    /// took an ended one's id).
    fn kill(&self) -> usize {
        let signal = rustix::process::Signal::KILL;
        let alive = |fd: &OwnedFd| rustix::process::pidfd_send_signal(fd, signal).is_ok();
        self.pidfds.values().flatten().filter(|fd| alive(fd)).count()
    }
}

/// Whether process `pid` (a child of this process, so not reaped yet) has ended, by
/// `/proc/<pid>/stat`: a zombie, or gone.
fn gone(pid: Pid) -> bool {
    let stat = crate::fs::read_proc(std::path::Path::new(&format!("/proc/{pid}/stat")));
    // The state follows the command name's closing parenthesis.
    stat.ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().to_owned()))
        .is_none_or(|rest| rest.starts_with('Z') || rest.starts_with('X'))
}

/// How many pidfds the supervisor holds before it closes those of ended processes.
const SWEEP_AT: usize = 64;

/// Whether the process of `pidfd` has ended (the pidfd is readable).
fn ended(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
}

/// Answers notifications until no process uses the filter, or the linger after the root's
/// end has passed and the killed descendants are gone (or 1 s more). With the preload
/// library's `log`, the slots committed so far are recorded before each stop (so that an
/// open a process made before the call that stopped is recorded before it), and the rest
/// at the end; a slot reserved but never committed makes the record incomplete.
fn supervise(
    listener: &Listener,
    exec: Option<Notification>,
    linger: Duration,
    pin: Pinning<'_>,
    recorder: &mut Recorder,
    mut log: Option<&mut SharedLog>,
    pipes: &mut Pipes,
) {
    let mut tree = Tree::default();
    let mut pinned: Option<Pin> = None;
    if let Some(notification) = exec {
        answer(listener, notification, recorder, &mut tree, &mut pinned, pin);
    }
    loop {
        let now = Instant::now();
        let until = tree.killed.or(tree.deadline);
        if let Some(until) = until.filter(|&until| now >= until) {
            if tree.killed.is_some() {
                recorder.incomplete.push(
                    "processes of the tree were still running after they were killed".to_owned(),
                );
                break;
            }
            let killed = tree.kill();
            recorder.incomplete.push(format!(
                "{killed} process(es) were still running {} ms after the compiler's root \
                 process ended, and were killed",
                linger.as_millis()
            ));
            tree.killed = Some(until + Duration::from_secs(1));
            continue;
        }
        // Without a pidfd for the root (`pidfd_open` denied by an old container profile),
        // its end is read from /proc every 50 ms instead.
        let unwatched = match &tree.root {
            Some((pid, None)) if tree.deadline.is_none() => Some(*pid),
            _ => None,
        };
        let left = until.map(|until| until.saturating_duration_since(now).as_millis() + 1);
        let left = if unwatched.is_some() { Some(left.unwrap_or(50).min(50)) } else { left };
        // A pinned tree is checked for contention at stops; with the preload library a
        // compile may run for seconds without one, so also every CHECK_EVERY.
        let checking = pinned.as_ref().is_some_and(Pin::holds) && tree.last.is_some();
        let every = CHECK_EVERY.as_millis();
        let left = if checking { Some(left.unwrap_or(every).min(every)) } else { left };
        let timeout = left.map_or(PollTimeout::NONE, |left| {
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
        });
        let root_fd = tree.root.as_ref().and_then(|(_, fd)| fd.as_ref());
        // The listener, the tree's output pipes still open, then the root's pidfd.
        let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        let open = pipes.poll_fds(&mut fds);
        if let Some(fd) = root_fd {
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                recorder.incomplete.push(format!("poll on the seccomp listener: {e}"));
                let _ = tree.kill();
                break;
            }
        }
        let events = |fd: &PollFd| fd.revents().unwrap_or(PollFlags::empty());
        let readable: Vec<bool> =
            fds[1..1 + open.len()].iter().map(|fd| !events(fd).is_empty()).collect();
        let (listener_events, root_ended) = (
            fds.first().map(events),
            fds.get(1 + open.len()).map(events).is_some_and(|e| !e.is_empty()),
        );
        drop(fds);
        for (which, ready) in open.into_iter().zip(readable) {
            if ready {
                pipes.read(which);
            }
        }
        let root_ended = root_ended || unwatched.is_some_and(gone);
        if let (Some(pin), Some(last)) = (pinned.as_mut(), tree.last) {
            pin.check(last, tree.live());
        }
        if root_ended {
            if let Some((_, fd)) = tree.root.as_mut() {
                *fd = None;
            }
            tree.deadline = Some(Instant::now() + linger);
        }
        let listener_events = listener_events.unwrap_or(PollFlags::empty());
        if listener_events.contains(PollFlags::POLLIN) {
            match listener.receive() {
                Ok(notification) => {
                    if let Some(log) = log.as_deref_mut() {
                        log.drain(|slot, text| recorder.logged(slot, text));
                    }
                    answer(listener, notification, recorder, &mut tree, &mut pinned, pin);
                }
                // The caller died or was interrupted before the notification was taken.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => {
                    recorder.incomplete.push(format!("reading the seccomp listener: {e}"));
                    let _ = tree.kill();
                    break;
                }
            }
        } else if listener_events.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
            break;
        }
    }
    if let Some(log) = log {
        drain_last(log, recorder);
    }
}

/// Records the log's slots left after the tree ended; a log whose header a process wrote,
/// or a slot never completed, makes the record incomplete.
fn drain_last(log: &mut SharedLog, recorder: &mut Recorder) {
    log.drain(|slot, text| recorder.logged(slot, text));
    if log.tampered() {
        recorder.incomplete.push(
            "a process of the compile wrote into the preload library's log (its header \
             changed): opens may be missing"
                .to_owned(),
        );
    }
    if log.unfinished() > 0 {
        recorder.incomplete.push(format!(
            "{} open(s) through the preload library were never logged as done (a process \
             ended inside one)",
            log.unfinished()
        ));
    }
}

/// Whether a notification is an `execve` or `execveat` of the native ABI (compared by
/// number: nothing is allocated).
fn is_exec(notification: &Notification) -> bool {
    let nr = libc::c_long::from(notification.nr);
    notification.arch == syscalls::NATIVE_ARCH
        && (nr == libc::SYS_execve || nr == libc::SYS_execveat)
}

/// Answers, unrecorded, every stop before the first `exec` (the starting thread's `clone`,
/// the child's calls in the launcher's code) and returns that `exec`'s notification, or
/// `None` when no process uses the filter any more (the spawn failed) or the listener
/// fails. Allocates nothing (see the module docs: a `fork` holds the allocator's locks).
fn until_exec(listener: &Listener) -> Option<Notification> {
    loop {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return None,
        }
        let events = fds[0].revents().unwrap_or(PollFlags::empty());
        if events.contains(PollFlags::POLLIN) {
            match listener.receive() {
                Ok(notification) if is_exec(&notification) => return Some(notification),
                Ok(notification) => {
                    let _ = listener.resume(notification.id);
                }
                // The caller is gone or was interrupted (it calls again).
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(_) => return None,
            }
        } else if events.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
            return None;
        }
    }
}

/// Records one stopped call and lets it go on.
fn answer(
    listener: &Listener,
    notification: Notification,
    recorder: &mut Recorder,
    tree: &mut Tree,
    pinned: &mut Option<Pin>,
    pin: Pinning<'_>,
) {
    let pid = Pid::from_raw(i32::try_from(notification.pid).unwrap_or(i32::MAX));
    recorder.progressed(pid);
    tree.seen(pid);
    tree.last = Some(pid);
    if tree.root.is_none() {
        // The first stop here is the root's `exec` (`until_exec` answered the ones before it).
        let fd =
            tree.pidfds.get(&pid).and_then(|fd| fd.as_ref()).and_then(|fd| fd.try_clone().ok());
        tree.root = Some((pid, fd));
        *pinned = pin.start(pid);
    } else if let Some(pinned) = pinned.as_mut() {
        // Read only if the pin is given up.
        pinned.check(pid, tree.live());
    }
    let (events, incomplete) = (recorder.events.len(), recorder.incomplete.len());
    let nr = libc::c_long::from(notification.nr);
    let read = recorder.notified(pid, nr, notification.arch, notification.args);
    // A notification stays valid until its caller is woken, by this answer or by a signal
    // or its death, and only a dead caller's id can be taken by another process. So an
    // answer accepted means that everything read since the notification came from the
    // caller (no separate SECCOMP_IOCTL_NOTIF_ID_VALID, one ioctl less per stop); an
    // answer refused (ENOENT: the caller is gone or interrupted, and makes the call again
    // with a new notification) means it may not have.
    let answered = listener.resume(notification.id);
    let refused = matches!(&answered, Err(e) if e.raw_os_error() == Some(libc::ENOENT));
    if read.is_err() || refused {
        recorder.events.truncate(events);
        recorder.incomplete.truncate(incomplete);
    }
    if let Err(e) = answered
        && !refused
    {
        recorder.incomplete.push(format!("resuming process {pid}: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root's end as read from /proc where no pidfd is given: running, then a zombie.
    #[test]
    fn a_child_that_ended_is_gone_and_a_running_one_is_not() {
        let mut sleeper = Command::new("sleep").arg("5").spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(sleeper.id()).unwrap());
        assert!(!gone(pid));
        sleeper.kill().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(gone(pid), "a killed child that is not reaped yet is a zombie");
        sleeper.wait().unwrap();
        assert!(gone(pid));
    }
}
