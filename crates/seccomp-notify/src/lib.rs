//! The `unsafe` system calls of strata's seccomp user-notification supervisor (issue 28),
//! kept apart so that the `strata` crate can go on forbidding `unsafe` code.
//!
//! A process started through [`install_on_spawn`] installs a seccomp-BPF filter with a
//! listener between `fork` and `exec` (`PR_SET_NO_NEW_PRIVS`, then `seccomp(2)` with
//! `SECCOMP_FILTER_FLAG_NEW_LISTENER`) and hands the listener descriptor to the parent over
//! a Unix socket (`SCM_RIGHTS`). The filter applies to the `exec` itself and to every
//! descendant. A system call the filter answers with `SECCOMP_RET_USER_NOTIF` waits in the
//! kernel until the supervisor, reading the [`Listener`], lets it go on
//! ([`Listener::resume`], `SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Needs Linux 5.5 (5.0 for
//! the listener, 5.5 for `CONTINUE`).
//!
//! Nothing here decides what is traced or what a call means: the filter comes from the
//! caller, and a [`Notification`] is the kernel's `struct seccomp_notif`, copied.
//!
//! # Invariants
//! * The program never runs without the filter: if installing it or sending the listener
//!   fails, the child ends before `exec` with that error, and [`Handoff::receive`] returns
//!   `None`.
//! * Between `fork` and `exec` the child only makes system calls on memory prepared before
//!   the `fork` (no allocation, no locks).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;

pub use libc::sock_filter;

pub mod log;
pub use log::SharedLog;

/// `SECCOMP_RET_USER_NOTIF`: the filter's return value that makes a call wait for the
/// supervisor.
pub const RET_USER_NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;

/// Space for one `SCM_RIGHTS` control message with one descriptor, in `u64` words (so that
/// the `cmsghdr` in it is aligned).
const CONTROL_WORDS: usize = 4;

/// Makes `command`, when spawned, install `filter` with a listener before it `exec`s the
/// program, and send the listener to the returned [`Handoff`].
///
/// Call [`Handoff::receive`] on another thread than the one that spawns: the `exec` is
/// itself a call the filter may stop, and `Command::spawn` returns only after it.
/// Drop `command` once spawned (it holds the child's end of the socket; while it lives,
/// [`Handoff::receive`] cannot tell that a child failed before sending).
///
/// # Errors
/// The error of creating the socket pair, or an empty or too long filter (`EINVAL`; at most
/// 65,535 instructions).
pub fn install_on_spawn(command: &mut Command, filter: Vec<sock_filter>) -> io::Result<Handoff> {
    let len = u16::try_from(filter.len())
        .ok()
        .filter(|&len| len > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let (parent, child) = UnixStream::pair()?;
    let child = OwnedFd::from(child);
    let mut control = vec![0u64; CONTROL_WORDS];
    let hook = move || {
        let program = libc::sock_fprog { len, filter: filter.as_ptr().cast_mut() };
        install_and_send(&program, child.as_raw_fd(), &mut control)
    };
    // SAFETY: the hook runs in the child between fork and exec. It calls prctl, seccomp,
    // sendmsg and close on memory the closure owns (allocated before the fork), and
    // allocates nothing.
    unsafe {
        command.pre_exec(hook);
    }
    Ok(Handoff { parent })
}

/// In the child: `PR_SET_NO_NEW_PRIVS`, the filter with a listener, the listener sent over
/// `socket` and closed here.
fn install_and_send(
    program: &libc::sock_fprog,
    socket: RawFd,
    control: &mut [u64],
) -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `program` points at a filter that lives as long as the closure; seccomp reads
    // (copies) it during the call.
    let listener = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            std::ptr::from_ref(program),
        )
    };
    let listener = RawFd::try_from(listener).unwrap_or(-1);
    if listener < 0 {
        return Err(io::Error::last_os_error());
    }
    let sent = send_fd(socket, listener, control);
    // SAFETY: `listener` is the descriptor seccomp just returned; the parent has its copy.
    unsafe { libc::close(listener) };
    sent
}

/// Sends `fd` over `socket` with one data byte, the control message built in `control`.
fn send_fd(socket: RawFd, fd: RawFd, control: &mut [u64]) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: CMSG_SPACE and CMSG_LEN are arithmetic on a constant.
    let (space, len) = unsafe {
        (libc::CMSG_SPACE(size_of::<RawFd>() as u32), libc::CMSG_LEN(size_of::<RawFd>() as u32))
    };
    if space as usize > size_of_val(control) {
        return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
    }
    // SAFETY: msghdr is plain data; all-zero is a valid empty header (musl's has private
    // padding fields, so it cannot be built field by field).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &raw mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = space as _;
    // SAFETY: the header's control buffer is `control` (aligned, at least `space` bytes),
    // so the first cmsghdr and its data lie inside it.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        if header.is_null() {
            return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
        }
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = len as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
    }
    // SAFETY: `message` points at `iov`, `byte` and `control`, all alive for the call.
    let sent = unsafe { libc::sendmsg(socket, &raw const message, libc::MSG_NOSIGNAL) };
    if sent == 1 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// The parent's end of the socket the child sends its listener on.
#[derive(Debug)]
pub struct Handoff {
    parent: UnixStream,
}

impl Handoff {
    /// Waits for the child's listener. `Ok(None)` when every copy of the child's end was
    /// closed without one: the child ended before installing the filter (its error is the
    /// spawn's), or the command was dropped unspawned.
    ///
    /// # Errors
    /// The error of `recvmsg`.
    pub fn receive(self) -> io::Result<Option<Listener>> {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        let mut byte = [0u8; 1];
        let mut iov = [io::IoSliceMut::new(&mut byte)];
        let mut space = nix::cmsg_space!(RawFd);
        let message = loop {
            match recvmsg::<()>(
                self.parent.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Ok(message) => break message,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(io::Error::from(e)),
            }
        };
        let mut listener = None;
        for control in message.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(fds) = control {
                for fd in fds {
                    // SAFETY: SCM_RIGHTS installed `fd` in this process just now; nothing
                    // else owns it.
                    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                    if listener.is_none() {
                        listener = Some(Listener { fd: owned });
                    }
                }
            }
        }
        Ok(listener)
    }
}

/// One stopped system call, as the kernel reports it (`struct seccomp_notif`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    /// The notification's cookie, for [`Listener::is_valid`] and [`Listener::resume`].
    pub id: u64,
    /// The calling thread's id, in the supervisor's PID namespace.
    pub pid: u32,
    /// The system call number.
    pub nr: i32,
    /// Its ABI (`AUDIT_ARCH_*`).
    pub arch: u32,
    /// The six argument registers.
    pub args: [u64; 6],
}

/// The listener descriptor of an installed filter.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Listener {
    /// Takes the next notification, waiting for one (`SECCOMP_IOCTL_NOTIF_RECV`).
    ///
    /// # Errors
    /// `ENOENT` when the caller died or was interrupted by a signal between being stopped
    /// and this call (take the next one); other errors of the `ioctl`.
    pub fn receive(&self) -> io::Result<Notification> {
        // The kernel requires a zeroed structure.
        let mut raw = libc::seccomp_notif {
            id: 0,
            pid: 0,
            flags: 0,
            data: libc::seccomp_data { nr: 0, arch: 0, instruction_pointer: 0, args: [0; 6] },
        };
        loop {
            // SAFETY: RECV writes one `struct seccomp_notif` into `raw`.
            let done = unsafe {
                libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &raw mut raw)
            };
            if done == 0 {
                break;
            }
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EINTR) {
                return Err(error);
            }
        }
        Ok(Notification {
            id: raw.id,
            pid: raw.pid,
            nr: raw.data.nr,
            arch: raw.data.arch,
            args: raw.data.args,
        })
    }

    /// Whether notification `id`'s caller still waits (`SECCOMP_IOCTL_NOTIF_ID_VALID`).
    /// What was read from the caller's memory or `/proc` entries before a true answer was
    /// read from that caller, not from a process that reused its id.
    pub fn is_valid(&self, id: u64) -> bool {
        let mut id = id;
        // SAFETY: ID_VALID reads one u64.
        let valid = unsafe {
            libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &raw mut id)
        };
        valid == 0
    }

    /// Asks the kernel to wake the supervisor and the stopped caller on the CPU of the one
    /// that wakes the other (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, Linux 6.6): each stop
    /// is then a switch between two tasks on one CPU, not an interrupt to another one.
    ///
    /// # Errors
    /// The error of the `ioctl` (`EINVAL` or `ENOTTY` before Linux 6.6): stops work as
    /// before.
    pub fn wake_synchronously(&self) -> io::Result<()> {
        /// `SECCOMP_IOCTL_NOTIF_SET_FLAGS`: `_IOW('!', 4, __u64)`.
        const SET_FLAGS: libc::c_ulong = 0x4008_2104;
        let mut flags: u64 = 1;
        // SAFETY: the ioctl reads one u64 through the pointer, which points at `flags`.
        let done = unsafe { libc::ioctl(self.fd.as_raw_fd(), SET_FLAGS as _, &raw mut flags) };
        if done == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }

    /// Lets notification `id`'s call go on as if not stopped
    /// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
    ///
    /// # Errors
    /// `ENOENT` when the caller is gone or was interrupted by a signal (it makes the call
    /// again, with a new notification); other errors of the `ioctl`.
    pub fn resume(&self, id: u64) -> io::Result<()> {
        let mut response = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        };
        // SAFETY: SEND reads one `struct seccomp_notif_resp`.
        let done = unsafe {
            libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &raw mut response)
        };
        if done == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JEQ_K: u16 = 0x15;
    const BPF_RET_K: u16 = 0x06;

    /// A filter that stops `getppid` and allows everything else.
    fn stop_getppid() -> Vec<sock_filter> {
        let nr = u32::try_from(libc::SYS_getppid).unwrap();
        vec![
            sock_filter { code: BPF_LD_W_ABS, jt: 0, jf: 0, k: 0 },
            sock_filter { code: BPF_JMP_JEQ_K, jt: 0, jf: 1, k: nr },
            sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: RET_USER_NOTIF },
            sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: 0x7fff_0000 },
        ]
    }

    /// A shell that calls getppid (`echo $PPID` makes bash call it at start-up) is stopped,
    /// resumed, and gets the real answer.
    #[test]
    fn a_stopped_call_is_reported_and_resumed() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo $PPID"]).stdout(Stdio::piped());
        let handoff = install_on_spawn(&mut command, stop_getppid()).unwrap();
        let receiver = std::thread::spawn(move || {
            let listener = handoff.receive().unwrap().expect("a listener");
            let notification = listener.receive().unwrap();
            assert!(listener.is_valid(notification.id));
            listener.resume(notification.id).unwrap();
            notification
        });
        let child = command.spawn().unwrap();
        let pid = child.id();
        drop(command);
        let notification = receiver.join().unwrap();
        assert_eq!(i64::from(notification.nr), libc::SYS_getppid);
        assert_eq!(notification.pid, pid);
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        assert_eq!(
            String::from_utf8(output.stdout).unwrap().trim(),
            std::process::id().to_string()
        );
    }

    /// A filter the kernel refuses: the child never runs, and the parent gets no listener.
    #[test]
    fn a_refused_filter_sends_nothing_and_the_program_does_not_run() {
        let mut command = Command::new("true");
        // A jump past the end of the program: EINVAL.
        let bad = vec![sock_filter { code: BPF_JMP_JEQ_K, jt: 5, jf: 5, k: 0 }];
        let handoff = install_on_spawn(&mut command, bad).unwrap();
        let error = command.spawn().unwrap_err();
        drop(command);
        assert_eq!(error.raw_os_error(), Some(libc::EINVAL));
        assert!(handoff.receive().unwrap().is_none());
    }
}
