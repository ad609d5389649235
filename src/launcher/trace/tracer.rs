//! The ptrace loop: one `waitpid(-1, __WALL | __WNOTHREAD)` after another on the thread
//! that started the shim, until every tracee has ended.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace::{self, Event as PtraceEvent, Options};
use nix::sys::signal::{self, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::decode::Recorder;
use super::pin::Pinning;

/// How the root process ended.
#[derive(Debug)]
pub(crate) enum RootEnd {
    /// It ran the program (its `exec` succeeded); the program's status.
    Ran(ExitStatus),
    /// It ended before a successful `exec`: the shim's status (see [`super::shim`]).
    Shim(ExitStatus),
}

/// What tracing a process tree gave.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) root: RootEnd,
    pub(crate) recorder: Recorder,
}

/// A tracee between its creation and its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Announced by its parent's fork/clone event; its first stop (`SIGSTOP`) is pending.
    Announced,
    /// Running (its first stop has been seen).
    Running,
}

const OPTIONS: Options = Options::PTRACE_O_TRACESECCOMP
    .union(Options::PTRACE_O_TRACEFORK)
    .union(Options::PTRACE_O_TRACEVFORK)
    .union(Options::PTRACE_O_TRACECLONE)
    .union(Options::PTRACE_O_TRACEEXEC)
    .union(Options::PTRACE_O_EXITKILL);

fn wait_flags() -> WaitPidFlag {
    WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD
}

/// Errors of the loop itself (the tracee refused or vanished in ways that leave no record).
#[derive(Debug)]
pub(crate) enum LoopError {
    /// The first stop of the shim could not be configured.
    Options(Errno),
    /// `waitpid` failed other than with `EINTR`/`ECHILD`.
    Wait(Errno),
}

/// Traces `root` (the shim, which stops itself with `SIGSTOP` before it `exec`s) and every
/// process and thread it starts, until all have ended. Descendants still running `linger`
/// after the root ended are killed, and the record marked incomplete. With `pin`, the
/// calling thread and the tree run on one CPU while it is not contended ([`super::pin::Pin`]).
pub(crate) fn trace(root: Pid, linger: Duration, pin: Pinning<'_>) -> Result<Outcome, LoopError> {
    let mut recorder = Recorder::new(super::syscalls::Stop::Ptrace);
    // The shim's own stop: configure the options, then let it exec.
    if let Some(shim_end) = wait_for_shim(root)? {
        return Ok(Outcome { root: RootEnd::Shim(shim_end), recorder });
    }
    if let Err(e) = ptrace::setoptions(root, OPTIONS) {
        let _ = signal::kill(root, Signal::SIGKILL);
        let _ = waitpid(root, Some(wait_flags()));
        return Err(LoopError::Options(e));
    }
    // Restores the calling thread's CPU mask when dropped, on every way out.
    let mut pinned = pin.start(root);
    resume(root, None);

    let mut tracees: HashMap<Pid, State> = HashMap::from([(root, State::Running)]);
    let mut root_end: Option<ExitStatus> = None;
    let mut root_execed = false;
    let mut deadline: Option<Instant> = None;
    let mut killed = false;
    let mut nap = Duration::from_micros(200);
    while !tracees.is_empty() {
        let mut flags = wait_flags();
        if let Some(deadline) = deadline.filter(|_| !killed) {
            if Instant::now() >= deadline {
                for &pid in tracees.keys() {
                    let _ = signal::kill(pid, Signal::SIGKILL);
                }
                recorder.incomplete.push(format!(
                    "{} process(es) were still running {} ms after the compiler's root \
                     process ended, and were killed: {:?}",
                    tracees.len(),
                    linger.as_millis(),
                    tracees.keys().map(|p| p.as_raw()).collect::<Vec<_>>()
                ));
                killed = true;
            } else {
                flags |= WaitPidFlag::WNOHANG;
            }
        }
        let status = match waitpid(None, Some(flags)) {
            Ok(WaitStatus::StillAlive) => {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(20));
                continue;
            }
            Ok(status) => status,
            Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => break,
            Err(e) => {
                // No way to go on: the tracees would stay stopped; end them.
                for &pid in tracees.keys() {
                    let _ = signal::kill(pid, Signal::SIGKILL);
                }
                return Err(LoopError::Wait(e));
            }
        };
        nap = Duration::from_micros(200);
        match status {
            WaitStatus::Exited(pid, code) => {
                ended(&mut tracees, &mut recorder, pid);
                if pid == root {
                    root_end = Some(ExitStatus::from_raw(code << 8));
                }
            }
            WaitStatus::Signaled(pid, signal, core) => {
                ended(&mut tracees, &mut recorder, pid);
                if pid == root {
                    root_end = Some(signaled(signal, core));
                }
            }
            WaitStatus::Stopped(pid, signal) => {
                recorder.progressed(pid);
                match tracees.get(&pid) {
                    // A new tracee's first stop (before or after its parent's event).
                    None | Some(State::Announced) if signal == Signal::SIGSTOP => {
                        tracees.insert(pid, State::Running);
                        resume(pid, None);
                    }
                    _ => {
                        tracees.entry(pid).or_insert(State::Running);
                        deliver(pid, signal);
                    }
                }
            }
            WaitStatus::PtraceEvent(pid, _, event) => {
                recorder.progressed(pid);
                if let Some(pinned) = pinned.as_mut() {
                    pinned.check(pid, tracees.keys().copied());
                }
                if on_event(pid, event, &mut tracees, &mut recorder) && pid == root {
                    root_execed = true;
                }
                resume(pid, None);
            }
            WaitStatus::PtraceSyscall(pid) => resume(pid, None),
            WaitStatus::Continued(_) | WaitStatus::StillAlive => {}
        }
        if root_end.is_some() && deadline.is_none() && !tracees.is_empty() {
            deadline = Some(Instant::now() + linger);
        }
    }
    let status = root_end.unwrap_or_else(|| ExitStatus::from_raw(libc::SIGKILL));
    let root = if root_execed { RootEnd::Ran(status) } else { RootEnd::Shim(status) };
    Ok(Outcome { root, recorder })
}

/// Waits for the shim's own `SIGSTOP` (passing other signals on). `Some(status)` when the
/// shim ended instead (it could not set up tracing, or was killed).
fn wait_for_shim(root: Pid) -> Result<Option<ExitStatus>, LoopError> {
    loop {
        match waitpid(root, Some(wait_flags())) {
            Ok(WaitStatus::Stopped(_, Signal::SIGSTOP)) => return Ok(None),
            Ok(WaitStatus::Stopped(_, other)) => resume(root, Some(other)),
            Ok(WaitStatus::Exited(_, code)) => return Ok(Some(ExitStatus::from_raw(code << 8))),
            Ok(WaitStatus::Signaled(_, signal, core)) => return Ok(Some(signaled(signal, core))),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(LoopError::Wait(e)),
        }
    }
}

/// Handles one ptrace event stop of `pid` (the caller resumes it): a seccomp stop is
/// recorded, a new child announced, an exec noted. True for an exec.
fn on_event(
    pid: Pid,
    event: i32,
    tracees: &mut HashMap<Pid, State>,
    recorder: &mut Recorder,
) -> bool {
    match event {
        e if e == PtraceEvent::PTRACE_EVENT_SECCOMP as i32 => {
            // The filter's data is 16 bits (`SECCOMP_RET_DATA`).
            if let Ok(data) = ptrace::getevent(pid)
                && let Err(e) = recorder.stop(pid, data as u16)
                && e != Errno::ESRCH
            {
                recorder.incomplete.push(format!("process {pid}: {e}"));
            }
            false
        }
        e if e == PtraceEvent::PTRACE_EVENT_FORK as i32
            || e == PtraceEvent::PTRACE_EVENT_VFORK as i32
            || e == PtraceEvent::PTRACE_EVENT_CLONE as i32 =>
        {
            if let Ok(child) = ptrace::getevent(pid) {
                tracees.entry(Pid::from_raw(child as i32)).or_insert(State::Announced);
            }
            false
        }
        e if e == PtraceEvent::PTRACE_EVENT_EXEC as i32 => {
            // A thread other than the leader may have exec'd: it now has the leader's id,
            // and its old id is gone without an exit report.
            if let Ok(former) = ptrace::getevent(pid) {
                let former = Pid::from_raw(former as i32);
                if former != pid {
                    tracees.remove(&former);
                    recorder.ended(former);
                }
            }
            true
        }
        _ => false,
    }
}

fn ended(tracees: &mut HashMap<Pid, State>, recorder: &mut Recorder, pid: Pid) {
    tracees.remove(&pid);
    recorder.ended(pid);
}

fn signaled(signal: Signal, core: bool) -> ExitStatus {
    ExitStatus::from_raw(signal as i32 | if core { 0x80 } else { 0 })
}

/// Restarts a stopped tracee; one that has died meanwhile (`ESRCH`) reports its end later.
fn resume(pid: Pid, signal: Option<Signal>) {
    let _ = ptrace::cont(pid, signal);
}

/// A stop for `signal` of a running tracee: a signal-delivery stop (the signal is passed
/// on), or for a stopping signal possibly a group-stop (`PTRACE_GETSIGINFO` fails with
/// `EINVAL`), which is resumed without a signal: a traced process does not stay stopped
/// by job control.
fn deliver(pid: Pid, signal: Signal) {
    let stopping =
        matches!(signal, Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU);
    if stopping && matches!(ptrace::getsiginfo(pid), Err(Errno::EINVAL)) {
        resume(pid, None);
    } else {
        resume(pid, Some(signal));
    }
}
