//! The `unsafe` system calls of strata's seccomp user-notification supervisor (issue 28),
//! kept apart so that the `strata` crate can go on forbidding `unsafe` code.
//!
//! A thread installs a seccomp-BPF filter with a listener on itself
//! ([`install_on_this_thread`]: `PR_SET_NO_NEW_PRIVS`, then `seccomp(2)` with
//! `SECCOMP_FILTER_FLAG_NEW_LISTENER`) and then starts the program, which inherits the
//! filter for its `exec` and every descendant; the [`Listener`] stays in the process. A
//! system call the filter answers with `SECCOMP_RET_USER_NOTIF` waits in the kernel until
//! the supervisor, reading the [`Listener`], lets it go on ([`Listener::resume`],
//! `SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Needs Linux 5.5 (5.0 for the listener, 5.5 for
//! `CONTINUE`).
//!
//! Nothing here decides what is traced or what a call means: the filter comes from the
//! caller, and a [`Notification`] is the kernel's `struct seccomp_notif`, copied.
//!
//! # Invariants
//! * The program never runs without the filter: the thread starts it only after
//!   [`install_on_this_thread`] returned the listener.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

pub use libc::sock_filter;

pub mod log;
pub use log::SharedLog;

/// `SECCOMP_RET_USER_NOTIF`: the filter's return value that makes a call wait for the
/// supervisor.
pub const RET_USER_NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;

/// Installs `filter` with a listener on the calling thread (`PR_SET_NO_NEW_PRIVS`, then
/// `seccomp(2)` with `SECCOMP_FILTER_FLAG_NEW_LISTENER`, without `TSYNC`): every process
/// this thread then starts inherits it, with the `exec` and everything after, while the
/// process's other threads stay as they were. The thread's own calls that the filter stops
/// wait for the listener's supervisor too, so a thread that runs only to start the program
/// (a `posix_spawn`, which `Command::spawn` uses when no `pre_exec` hook is set, with no
/// copy of the launcher's address space as a `fork` makes) is the way to use it: hand the
/// listener to the supervising thread before the spawn, and let the thread end after it.
///
/// # Errors
/// An empty or too long filter (`EINVAL`), or the error of `prctl` or `seccomp` (`EBUSY`
/// when a filter with a listener is already installed above this one).
pub fn install_on_this_thread(filter: &[sock_filter]) -> io::Result<Listener> {
    let len = u16::try_from(filter.len())
        .ok()
        .filter(|&len| len > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let program = libc::sock_fprog { len, filter: filter.as_ptr().cast_mut() };
    // SAFETY: prctl with integer arguments only; it sets this thread's attribute.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `program` points at `filter`, borrowed for the call; seccomp copies it.
    let listener = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            std::ptr::from_ref(&program),
        )
    };
    let listener = RawFd::try_from(listener).unwrap_or(-1);
    if listener < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: seccomp just returned this descriptor (close-on-exec), owned by no one else.
    Ok(Listener { fd: unsafe { OwnedFd::from_raw_fd(listener) } })
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
    use std::process::{Command, Stdio};

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

    /// A shell that calls getppid (`echo $PPID` makes it call it at start-up), started by a
    /// thread with the filter on itself, is stopped, resumed, and gets the real answer.
    #[test]
    fn a_stopped_call_is_reported_and_resumed() {
        let (send, listener) = std::sync::mpsc::sync_channel(1);
        let starter = std::thread::spawn(move || {
            send.send(install_on_this_thread(&stop_getppid()).unwrap()).unwrap();
            let mut command = Command::new("sh");
            command.args(["-c", "echo $PPID"]).stdout(Stdio::piped());
            command.spawn().unwrap()
        });
        let listener = listener.recv().unwrap();
        let notification = listener.receive().unwrap();
        assert!(listener.is_valid(notification.id));
        listener.resume(notification.id).unwrap();
        let child = starter.join().unwrap();
        assert_eq!(i64::from(notification.nr), libc::SYS_getppid);
        assert_eq!(notification.pid, child.id());
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        assert_eq!(
            String::from_utf8(output.stdout).unwrap().trim(),
            std::process::id().to_string()
        );
    }

    /// A filter the kernel refuses, or none: no listener, so nothing may be started.
    #[test]
    fn a_refused_filter_gives_no_listener() {
        // A jump past the end of the program: EINVAL.
        let bad = vec![sock_filter { code: BPF_JMP_JEQ_K, jt: 5, jf: 5, k: 0 }];
        let refused = std::thread::spawn(move || install_on_this_thread(&bad).map(drop));
        let error = refused.join().unwrap().unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EINVAL));
        let empty = install_on_this_thread(&[]).map(drop).unwrap_err();
        assert_eq!(empty.raw_os_error(), Some(libc::EINVAL));
    }
}
