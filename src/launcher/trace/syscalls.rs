//! The system calls the tracer stops at, and the seccomp-BPF program that selects them.
//!
//! One table per architecture ([`table`]) lists every traced system call with what the
//! tracer makes of it ([`Call`]). The filter ([`program`]) returns `SECCOMP_RET_TRACE` with
//! the call's index in that table as `SECCOMP_RET_DATA`, so the tracer learns the call from
//! `PTRACE_GETEVENTMSG` without a second lookup; every other system call of the native ABI is
//! allowed without a stop. A system call of another ABI (32-bit `int 0x80` or x32 on x86_64,
//! AArch32 on aarch64) stops with [`FOREIGN`]: the table does not describe it, so the record
//! is marked incomplete.
//!
//! The program is a balanced decision tree over the sorted system call numbers (about seven
//! comparisons for any call), so a program that makes millions of untraced calls (`read`,
//! `write`, `mmap`) pays a few nanoseconds for each.

use seccompiler::sock_filter;

use super::Coverage;

/// `SECCOMP_RET_DATA` of a system call made in a foreign ABI.
pub(crate) const FOREIGN: u16 = 0xffff;

/// What the tracer makes of one traced system call: the argument layout and the operation.
/// Argument positions are those of the kernel's entry point (`man 2 syscall`).
// aarch64 has only the `*at` forms: the older calls' variants are never made there.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// `open(path, flags, mode)`.
    Open,
    /// `openat(dirfd, path, flags, mode)`.
    Openat,
    /// `openat2(dirfd, path, struct open_how *, size)`.
    Openat2,
    /// `creat(path, mode)`.
    Creat,
    /// `stat(path, buf)` (`follow` true) and `lstat(path, buf)`.
    Stat { follow: bool },
    /// `newfstatat(dirfd, path, buf, flags)`.
    Fstatat,
    /// `statx(dirfd, path, flags, mask, buf)`.
    Statx,
    /// `access(path, mode)`.
    Access,
    /// `faccessat(dirfd, path, mode)`.
    Faccessat,
    /// `faccessat2(dirfd, path, mode, flags)`.
    Faccessat2,
    /// `readlink(path, buf, size)`.
    Readlink,
    /// `readlinkat(dirfd, path, buf, size)`.
    Readlinkat,
    /// `execve(path, argv, envp)`.
    Execve,
    /// `execveat(dirfd, path, argv, envp, flags)`.
    Execveat,
    /// `chdir(path)`.
    Chdir,
    /// `fchdir(fd)`.
    Fchdir,
    /// `getdents(fd, …)` and `getdents64(fd, …)`.
    Getdents,
    /// `unlink(path)`.
    Unlink,
    /// `unlinkat(dirfd, path, flags)`.
    Unlinkat,
    /// `rmdir(path)`.
    Rmdir,
    /// `mkdir(path, mode)`.
    Mkdir,
    /// `mkdirat(dirfd, path, mode)`.
    Mkdirat,
    /// `rename(old, new)`.
    Rename,
    /// `renameat(olddirfd, old, newdirfd, new)` and `renameat2(…, flags)`.
    Renameat,
    /// `link(old, new)`.
    Link,
    /// `linkat(olddirfd, old, newdirfd, new, flags)`.
    Linkat,
    /// `symlink(target, linkpath)`.
    Symlink,
    /// `symlinkat(target, newdirfd, linkpath)`.
    Symlinkat,
    /// `truncate(path, length)`.
    Truncate,
    /// `chmod(path, mode)`.
    Chmod,
    /// `fchmod(fd, mode)`.
    Fchmod,
    /// `fchmodat(dirfd, path, mode)` (no flags argument).
    Fchmodat,
    /// `fchmodat2(dirfd, path, mode, flags)`.
    Fchmodat2,
    /// `chown(path, …)` (`follow` true) and `lchown(path, …)`.
    Chown { follow: bool },
    /// `fchown(fd, uid, gid)`.
    Fchown,
    /// `fchownat(dirfd, path, uid, gid, flags)`.
    Fchownat,
    /// `utime(path, times)` and `utimes(path, times)`.
    Utimes,
    /// `futimesat(dirfd, path, times)`.
    Futimesat,
    /// `utimensat(dirfd, path or NULL, times, flags)`.
    Utimensat,
    /// `mknod(path, mode, dev)`.
    Mknod,
    /// `mknodat(dirfd, path, mode, dev)`.
    Mknodat,
    /// `statfs(path, buf)`.
    Statfs,
    /// `getxattr`, `listxattr`, `setxattr`, `removexattr` and their `l` forms: `(path, …)`.
    Xattr { follow: bool, write: bool },
    /// `clone(flags, …)`: under ptrace it stops only when `flags` has `CLONE_UNTRACED`
    /// (checked in BPF); under notification every call stops (a new process may take the
    /// id of one that ended, whose working directory is cached).
    Clone,
    /// `clone3(struct clone_args *, size)`: the flags are in memory, so every call stops.
    Clone3,
    /// `fork()` and `vfork()` (x86_64): stop only under notification, as `clone` does.
    Fork,
    /// A call after which the record cannot be complete (the text says why).
    Unobservable(&'static str),
}

/// One traced system call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Traced {
    /// The number in the native ABI.
    pub nr: libc::c_long,
    /// The name, for messages.
    pub name: &'static str,
    /// What the tracer makes of it.
    pub call: Call,
}

const fn t(nr: libc::c_long, name: &'static str, call: Call) -> Traced {
    Traced { nr, name, call }
}

/// System call numbers 424 and above are the same on every architecture.
const SYS_FCHMODAT2: libc::c_long = 452;
const SYS_OPEN_TREE: libc::c_long = 428;
const SYS_MOVE_MOUNT: libc::c_long = 429;
const SYS_FSOPEN: libc::c_long = 430;
const SYS_FSMOUNT: libc::c_long = 432;
const SYS_FSPICK: libc::c_long = 433;
const SYS_MOUNT_SETATTR: libc::c_long = 442;

const HANDLE: &str = "opens files by handle, not by name";
const URING: &str = "set up io_uring, whose file operations bypass the tracer";
const MOUNT: &str = "changed what paths name (mount, chroot)";

/// The calls both architectures have (the `*at` forms).
static COMMON: &[Traced] = &[
    t(libc::SYS_openat, "openat", Call::Openat),
    t(libc::SYS_openat2, "openat2", Call::Openat2),
    t(libc::SYS_newfstatat, "newfstatat", Call::Fstatat),
    t(libc::SYS_statx, "statx", Call::Statx),
    t(libc::SYS_faccessat, "faccessat", Call::Faccessat),
    t(libc::SYS_faccessat2, "faccessat2", Call::Faccessat2),
    t(libc::SYS_readlinkat, "readlinkat", Call::Readlinkat),
    t(libc::SYS_execve, "execve", Call::Execve),
    t(libc::SYS_execveat, "execveat", Call::Execveat),
    t(libc::SYS_chdir, "chdir", Call::Chdir),
    t(libc::SYS_fchdir, "fchdir", Call::Fchdir),
    t(libc::SYS_getdents64, "getdents64", Call::Getdents),
    t(libc::SYS_unlinkat, "unlinkat", Call::Unlinkat),
    t(libc::SYS_mkdirat, "mkdirat", Call::Mkdirat),
    t(libc::SYS_renameat, "renameat", Call::Renameat),
    t(libc::SYS_renameat2, "renameat2", Call::Renameat),
    t(libc::SYS_linkat, "linkat", Call::Linkat),
    t(libc::SYS_symlinkat, "symlinkat", Call::Symlinkat),
    t(libc::SYS_truncate, "truncate", Call::Truncate),
    t(libc::SYS_fchmod, "fchmod", Call::Fchmod),
    t(libc::SYS_fchmodat, "fchmodat", Call::Fchmodat),
    t(SYS_FCHMODAT2, "fchmodat2", Call::Fchmodat2),
    t(libc::SYS_fchown, "fchown", Call::Fchown),
    t(libc::SYS_fchownat, "fchownat", Call::Fchownat),
    t(libc::SYS_utimensat, "utimensat", Call::Utimensat),
    t(libc::SYS_mknodat, "mknodat", Call::Mknodat),
    t(libc::SYS_statfs, "statfs", Call::Statfs),
    t(libc::SYS_getxattr, "getxattr", Call::Xattr { follow: true, write: false }),
    t(libc::SYS_lgetxattr, "lgetxattr", Call::Xattr { follow: false, write: false }),
    t(libc::SYS_listxattr, "listxattr", Call::Xattr { follow: true, write: false }),
    t(libc::SYS_llistxattr, "llistxattr", Call::Xattr { follow: false, write: false }),
    t(libc::SYS_setxattr, "setxattr", Call::Xattr { follow: true, write: true }),
    t(libc::SYS_lsetxattr, "lsetxattr", Call::Xattr { follow: false, write: true }),
    t(libc::SYS_removexattr, "removexattr", Call::Xattr { follow: true, write: true }),
    t(libc::SYS_lremovexattr, "lremovexattr", Call::Xattr { follow: false, write: true }),
    t(libc::SYS_clone, "clone", Call::Clone),
    t(libc::SYS_clone3, "clone3", Call::Clone3),
    t(libc::SYS_name_to_handle_at, "name_to_handle_at", Call::Unobservable(HANDLE)),
    t(libc::SYS_open_by_handle_at, "open_by_handle_at", Call::Unobservable(HANDLE)),
    t(libc::SYS_io_uring_setup, "io_uring_setup", Call::Unobservable(URING)),
    t(libc::SYS_chroot, "chroot", Call::Unobservable(MOUNT)),
    t(libc::SYS_mount, "mount", Call::Unobservable(MOUNT)),
    t(libc::SYS_umount2, "umount2", Call::Unobservable(MOUNT)),
    t(libc::SYS_pivot_root, "pivot_root", Call::Unobservable(MOUNT)),
    t(SYS_OPEN_TREE, "open_tree", Call::Unobservable(MOUNT)),
    t(SYS_MOVE_MOUNT, "move_mount", Call::Unobservable(MOUNT)),
    t(SYS_FSOPEN, "fsopen", Call::Unobservable(MOUNT)),
    t(SYS_FSMOUNT, "fsmount", Call::Unobservable(MOUNT)),
    t(SYS_FSPICK, "fspick", Call::Unobservable(MOUNT)),
    t(SYS_MOUNT_SETATTR, "mount_setattr", Call::Unobservable(MOUNT)),
];

/// The older path calls x86_64 still has (aarch64 has only the `*at` forms).
#[cfg(target_arch = "x86_64")]
static LEGACY: &[Traced] = &[
    t(libc::SYS_open, "open", Call::Open),
    t(libc::SYS_creat, "creat", Call::Creat),
    t(libc::SYS_stat, "stat", Call::Stat { follow: true }),
    t(libc::SYS_lstat, "lstat", Call::Stat { follow: false }),
    t(libc::SYS_access, "access", Call::Access),
    t(libc::SYS_readlink, "readlink", Call::Readlink),
    t(libc::SYS_getdents, "getdents", Call::Getdents),
    t(libc::SYS_unlink, "unlink", Call::Unlink),
    t(libc::SYS_rmdir, "rmdir", Call::Rmdir),
    t(libc::SYS_mkdir, "mkdir", Call::Mkdir),
    t(libc::SYS_rename, "rename", Call::Rename),
    t(libc::SYS_link, "link", Call::Link),
    t(libc::SYS_symlink, "symlink", Call::Symlink),
    t(libc::SYS_chmod, "chmod", Call::Chmod),
    t(libc::SYS_chown, "chown", Call::Chown { follow: true }),
    t(libc::SYS_lchown, "lchown", Call::Chown { follow: false }),
    t(libc::SYS_utime, "utime", Call::Utimes),
    t(libc::SYS_utimes, "utimes", Call::Utimes),
    t(libc::SYS_futimesat, "futimesat", Call::Futimesat),
    t(libc::SYS_mknod, "mknod", Call::Mknod),
    t(libc::SYS_fork, "fork", Call::Fork),
    t(libc::SYS_vfork, "vfork", Call::Fork),
];
#[cfg(not(target_arch = "x86_64"))]
static LEGACY: &[Traced] = &[];

/// The traced call numbered `nr` in the native ABI, if any (notifications carry the number,
/// not the table index).
pub(crate) fn by_number(nr: libc::c_long) -> Option<&'static Traced> {
    COMMON.iter().chain(LEGACY).find(|traced| traced.nr == nr)
}

/// Whether system call `nr` of ABI `arch` is one of another ABI than the native one (the
/// table does not describe it): another audit architecture, or x32 on x86_64.
pub(crate) fn is_foreign(nr: libc::c_long, arch: u32) -> bool {
    arch != NATIVE_ARCH
        || (cfg!(target_arch = "x86_64") && nr & libc::c_long::from(X32_SYSCALL_BIT) != 0)
}

/// How the filter stops a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `SECCOMP_RET_TRACE`: a ptrace event stop.
    Ptrace,
    /// `SECCOMP_RET_USER_NOTIF`: a notification on the filter's listener.
    Notify,
}

impl Stop {
    fn ret(self) -> u32 {
        match self {
            Stop::Ptrace => RET_TRACE,
            Stop::Notify => seccomp_notify::RET_USER_NOTIF,
        }
    }
}

/// The traced call whose `SECCOMP_RET_DATA` is `data`, if any.
pub(crate) fn traced(data: u16) -> Option<&'static Traced> {
    let index = usize::from(data);
    COMMON.get(index).or_else(|| LEGACY.get(index.checked_sub(COMMON.len())?))
}

/// Every traced call with its `SECCOMP_RET_DATA`.
pub(crate) fn table() -> impl Iterator<Item = (u16, &'static Traced)> {
    COMMON.iter().chain(LEGACY).enumerate().map(|(index, traced)| {
        (u16::try_from(index).expect("the table has fewer than 65535 entries"), traced)
    })
}

/// The audit architecture of the native ABI (`AUDIT_ARCH_*` of `<linux/audit.h>`).
#[cfg(target_arch = "x86_64")]
pub(crate) const NATIVE_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
pub(crate) const NATIVE_ARCH: u32 = 0xc000_00b7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const NATIVE_ARCH: u32 = 0;

/// On x86_64, numbers with this bit are the x32 ABI (same audit arch, other meanings).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const CLONE_UNTRACED: u32 = 0x0080_0000;
const AT_EMPTY_PATH: u32 = 0x1000;
/// `open` flags the preload library does not take (`crates/preload/src/lib.rs`): any of
/// them makes an `openat` stop even with the cookie.
const NOT_TAKEN_FLAGS: u32 = (libc::O_ACCMODE
    | libc::O_CREAT
    | libc::O_EXCL
    | libc::O_TRUNC
    | libc::O_PATH
    | libc::O_TMPFILE
    | libc::O_DIRECTORY
    | libc::O_NOFOLLOW) as u32;

// Classic BPF as seccomp runs it (`<linux/bpf_common.h>`, `<linux/seccomp.h>`).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x15;
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_JMP_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// The low 32 bits of argument `n` (both architectures are little-endian).
const fn offset_arg(n: u32) -> u32 {
    16 + 8 * n
}
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_TRACE: u32 = 0x7ff0_0000;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: usize, jf: usize) -> Result<sock_filter, String> {
    let offset = |o: usize| u8::try_from(o).map_err(|_| format!("BPF jump of {o} > 255"));
    Ok(sock_filter { code, jt: offset(jt)?, jf: offset(jf)?, k })
}

/// The seccomp-BPF program: `stop`'s return (`TRACE` or `USER_NOTIF`, data = table index)
/// for every traced call `coverage` includes, the same with [`FOREIGN`] for every call of
/// another ABI, `ALLOW` for the rest. Under ptrace `clone` stops only with `CLONE_UNTRACED`
/// in its flags and `fork`/`vfork` never (the tracer learns of children from ptrace
/// events); under notification all three always stop. `newfstatat` and `statx` stop only
/// without `AT_EMPTY_PATH` (with it they are `fstat`). With `pass`, an `openat` for
/// reading, a `newfstatat` or a `faccessat` whose sixth argument (unused by all three) is
/// that cookie is allowed: the preload library made it and logged it
/// (`crates/preload/src/lib.rs`).
///
/// # Errors
/// A description if the tree does not fit classic BPF's 8-bit jumps (a bug in the table).
pub(crate) fn program(
    coverage: Coverage,
    stop: Stop,
    pass: Option<u64>,
) -> Result<Vec<sock_filter>, String> {
    let mut calls: Vec<(u32, u16, Call)> = table()
        .map(|(data, traced)| (u32::try_from(traced.nr).unwrap_or(u32::MAX), data, traced.call))
        .collect();
    if coverage == Coverage::WithoutReadlink {
        calls.retain(|&(_, _, call)| !matches!(call, Call::Readlink | Call::Readlinkat));
    }
    calls.sort_unstable_by_key(|&(nr, _, _)| nr);
    let foreign = stmt(BPF_RET_K, stop.ret() | u32::from(FOREIGN));
    let mut program = vec![
        stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JMP_JEQ_K, NATIVE_ARCH, 1, 0)?,
        foreign.clone(),
        stmt(BPF_LD_W_ABS, OFFSET_NR),
    ];
    if cfg!(target_arch = "x86_64") {
        program.push(jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1)?);
        program.push(foreign.clone());
    }
    program.extend(tree(&calls, stop, pass)?);
    if program.len() > usize::from(u16::MAX) {
        return Err(format!("BPF program of {} instructions", program.len()));
    }
    Ok(program)
}

/// The decision tree over `calls` (sorted by number), with the number in the accumulator.
/// Every path through it ends in a return.
fn tree(
    calls: &[(u32, u16, Call)],
    stop: Stop,
    pass: Option<u64>,
) -> Result<Vec<sock_filter>, String> {
    if calls.len() <= 4 {
        let mut out = Vec::new();
        for &(nr, data, call) in calls {
            let block = leaf(data, call, stop, pass);
            out.push(jump(BPF_JMP_JEQ_K, nr, 0, block.len())?);
            out.extend(block);
        }
        out.push(stmt(BPF_RET_K, RET_ALLOW));
        return Ok(out);
    }
    let (low, high) = calls.split_at(calls.len() / 2);
    let left = tree(low, stop, pass)?;
    let right = tree(high, stop, pass)?;
    let pivot = high.first().map_or(0, |&(nr, _, _)| nr);
    let mut out = vec![jump(BPF_JMP_JGE_K, pivot, left.len(), 0)?];
    out.extend(left);
    out.extend(right);
    Ok(out)
}

/// What runs once the number matched: a return, or for `clone` a look at the flags, or
/// for `openat` with a cookie a look at the sixth argument.
fn leaf(data: u16, call: Call, stop: Stop, pass: Option<u64>) -> Vec<sock_filter> {
    let trace = stmt(BPF_RET_K, stop.ret() | u32::from(data));
    match call {
        // The cookie, and flags of an open for reading that the library takes: a write
        // carrying the cookie stops all the same.
        Call::Openat if let Some(cookie) = pass => vec![
            stmt(BPF_LD_W_ABS, offset_arg(5)),
            sock_filter { code: BPF_JMP_JEQ_K, jt: 0, jf: 4, k: cookie as u32 },
            stmt(BPF_LD_W_ABS, offset_arg(5) + 4),
            sock_filter { code: BPF_JMP_JEQ_K, jt: 0, jf: 2, k: (cookie >> 32) as u32 },
            stmt(BPF_LD_W_ABS, offset_arg(2)),
            sock_filter { code: BPF_JMP_JSET_K, jt: 0, jf: 1, k: NOT_TAKEN_FLAGS },
            trace,
            stmt(BPF_RET_K, RET_ALLOW),
        ],
        Call::Fork if stop == Stop::Ptrace => vec![stmt(BPF_RET_K, RET_ALLOW)],
        Call::Clone if stop == Stop::Ptrace => vec![
            stmt(BPF_LD_W_ABS, offset_arg(0)),
            sock_filter { code: BPF_JMP_JSET_K, jt: 0, jf: 1, k: CLONE_UNTRACED },
            trace,
            stmt(BPF_RET_K, RET_ALLOW),
        ],
        // fstat: `AT_EMPTY_PATH` (with, in practice, an empty name). The library's `stat`
        // family: the cookie.
        Call::Fstatat | Call::Statx => {
            let mut out = match pass {
                Some(cookie) if call == Call::Fstatat => cookie_passes(cookie),
                _ => Vec::new(),
            };
            out.extend([
                stmt(BPF_LD_W_ABS, offset_arg(if call == Call::Fstatat { 3 } else { 2 })),
                sock_filter { code: BPF_JMP_JSET_K, jt: 1, jf: 0, k: AT_EMPTY_PATH },
                trace,
                stmt(BPF_RET_K, RET_ALLOW),
            ]);
            out
        }
        // The library's `access`.
        Call::Faccessat if let Some(cookie) = pass => {
            let mut out = cookie_passes(cookie);
            out.push(trace);
            out
        }
        _ => vec![trace],
    }
}

/// Allows the call when its sixth argument is `cookie`, else falls through to what
/// follows.
fn cookie_passes(cookie: u64) -> Vec<sock_filter> {
    vec![
        stmt(BPF_LD_W_ABS, offset_arg(5)),
        sock_filter { code: BPF_JMP_JEQ_K, jt: 0, jf: 3, k: cookie as u32 },
        stmt(BPF_LD_W_ABS, offset_arg(5) + 4),
        sock_filter { code: BPF_JMP_JEQ_K, jt: 0, jf: 1, k: (cookie >> 32) as u32 },
        stmt(BPF_RET_K, RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` on one `seccomp_data` (nr, arch, args) the way the kernel does, for
    /// the instructions the generator emits.
    fn interpret(program: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let load = |offset: u32| -> u32 {
            match offset {
                OFFSET_NR => nr,
                OFFSET_ARCH => arch,
                o if (16..64).contains(&o) && o % 8 == 0 => args[((o - 16) / 8) as usize] as u32,
                o if (16..64).contains(&o) && o % 8 == 4 => {
                    (args[((o - 20) / 8) as usize] >> 32) as u32
                }
                o => panic!("load at {o}"),
            }
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let ins = &program[pc];
            pc += 1;
            let taken = |cond: bool| usize::from(if cond { ins.jt } else { ins.jf });
            match ins.code {
                BPF_LD_W_ABS => acc = load(ins.k),
                BPF_JMP_JEQ_K => pc += taken(acc == ins.k),
                BPF_JMP_JGE_K => pc += taken(acc >= ins.k),
                BPF_JMP_JSET_K => pc += taken(acc & ins.k != 0),
                BPF_RET_K => return ins.k,
                code => panic!("opcode {code:#x}"),
            }
        }
    }

    fn nr_of(call: Call) -> (u16, &'static Traced) {
        table().find(|(_, t)| t.call == call).expect("in the table")
    }

    #[test]
    fn every_traced_call_stops_with_its_index_and_others_pass() {
        let program = program(Coverage::Full, Stop::Ptrace, None).unwrap();
        let traced: Vec<(u16, &Traced)> = table().collect();
        for &(data, traced) in &traced {
            let want = if matches!(traced.call, Call::Clone | Call::Fork) {
                RET_ALLOW
            } else {
                RET_TRACE | u32::from(data)
            };
            let got = interpret(&program, traced.nr as u32, NATIVE_ARCH, [0; 6]);
            assert_eq!(got, want, "{}", traced.name);
            assert_eq!(super::traced(data).unwrap().nr, traced.nr);
        }
        for nr in 0..600u32 {
            if !traced.iter().any(|(_, t)| t.nr == i64::from(nr)) {
                assert_eq!(interpret(&program, nr, NATIVE_ARCH, [0; 6]), RET_ALLOW, "nr {nr}");
            }
        }
        assert!(program.len() < 400, "{} instructions", program.len());
    }

    /// Under notification every call of the table stops, `clone` and `fork` included
    /// whatever their flags, and a foreign call stops as foreign.
    #[test]
    fn under_notification_every_traced_call_and_every_clone_stops() {
        let program = program(Coverage::Full, Stop::Notify, None).unwrap();
        let notify = seccomp_notify::RET_USER_NOTIF;
        for (data, traced) in table() {
            let got = interpret(&program, traced.nr as u32, NATIVE_ARCH, [0; 6]);
            assert_eq!(got, notify | u32::from(data), "{}", traced.name);
            assert_eq!(by_number(traced.nr).unwrap().nr, traced.nr);
        }
        assert_eq!(interpret(&program, 0, NATIVE_ARCH, [0; 6]), RET_ALLOW, "read");
        assert_eq!(interpret(&program, 5, 0x4000_0003, [0; 6]), notify | u32::from(FOREIGN));
        assert!(is_foreign(5, 0x4000_0003));
        assert!(!is_foreign(libc::SYS_openat, NATIVE_ARCH));
        if cfg!(target_arch = "x86_64") {
            assert!(is_foreign(libc::c_long::from(X32_SYSCALL_BIT | 2), NATIVE_ARCH));
        }
    }

    /// With a cookie, an `openat` carrying it in its sixth argument passes, and one with
    /// either half of it wrong stops; no other call looks at the cookie.
    #[test]
    fn an_openat_carrying_the_cookie_passes_and_any_other_stops() {
        let cookie = 0x0123_4567_89ab_cdef_u64;
        let program = program(Coverage::WithoutReadlink, Stop::Notify, Some(cookie)).unwrap();
        let notify = seccomp_notify::RET_USER_NOTIF;
        let openat = libc::SYS_openat as u32;
        let (data, _) = table().find(|(_, t)| t.call == Call::Openat).unwrap();
        let with = |sixth: u64| interpret(&program, openat, NATIVE_ARCH, [0, 0, 0, 0, 0, sixth]);
        assert_eq!(with(cookie), RET_ALLOW);
        let flagged = |flags: i32| {
            let args = [0, 0, flags as u64, 0, 0, cookie];
            interpret(&program, openat, NATIVE_ARCH, args)
        };
        assert_eq!(flagged(libc::O_RDONLY | libc::O_CLOEXEC), RET_ALLOW);
        for flags in [libc::O_WRONLY, libc::O_RDWR | libc::O_CREAT, libc::O_TRUNC, libc::O_NOFOLLOW]
        {
            assert_eq!(flagged(flags), notify | u32::from(data), "flags {flags:#o}");
        }
        assert_eq!(with(0), notify | u32::from(data));
        assert_eq!(with(cookie & 0xffff_ffff), notify | u32::from(data));
        assert_eq!(with(cookie & !0xffff_ffff), notify | u32::from(data));
        assert_eq!(with(cookie ^ 1), notify | u32::from(data));
        let (exec, traced) = table().find(|(_, t)| t.call == Call::Execve).unwrap();
        let args = [0, 0, 0, 0, 0, cookie];
        assert_eq!(
            interpret(&program, traced.nr as u32, NATIVE_ARCH, args),
            notify | u32::from(exec)
        );
    }

    /// With a cookie, a `newfstatat` or `faccessat` carrying it passes whatever its flags;
    /// without it, `newfstatat` stops unless it is an `fstat` and `faccessat` always stops;
    /// `statx` and `access` never look at the cookie.
    #[test]
    fn a_stat_or_access_carrying_the_cookie_passes_and_any_other_stops() {
        let cookie = 0x0fed_cba9_8765_4321_u64;
        let program = program(Coverage::WithoutReadlink, Stop::Notify, Some(cookie)).unwrap();
        let notify = seccomp_notify::RET_USER_NOTIF;
        let (fstatat, traced) = nr_of(Call::Fstatat);
        let stat = |flags: u64, sixth: u64| {
            interpret(&program, traced.nr as u32, NATIVE_ARCH, [0, 0, 0, flags, 0, sixth])
        };
        let nofollow = libc::AT_SYMLINK_NOFOLLOW as u64;
        assert_eq!(stat(0, cookie), RET_ALLOW);
        assert_eq!(stat(nofollow, cookie), RET_ALLOW);
        assert_eq!(stat(0, 0), notify | u32::from(fstatat));
        assert_eq!(stat(nofollow, cookie ^ (1 << 40)), notify | u32::from(fstatat));
        assert_eq!(stat(libc::AT_EMPTY_PATH as u64, 0), RET_ALLOW);
        let (faccessat, traced) = nr_of(Call::Faccessat);
        let access =
            |sixth: u64| interpret(&program, traced.nr as u32, NATIVE_ARCH, [0, 0, 4, 0, 0, sixth]);
        assert_eq!(access(cookie), RET_ALLOW);
        assert_eq!(access(cookie & 0xffff_ffff), notify | u32::from(faccessat));
        assert_eq!(access(0), notify | u32::from(faccessat));
        let mut others = vec![Call::Statx, Call::Faccessat2];
        if cfg!(target_arch = "x86_64") {
            others.extend([Call::Access, Call::Stat { follow: true }]);
        }
        for call in others {
            let (data, traced) = nr_of(call);
            let args = [0, 0, 0, 0, 0, cookie];
            let got = interpret(&program, traced.nr as u32, NATIVE_ARCH, args);
            assert_eq!(got, notify | u32::from(data), "{}", traced.name);
        }
    }

    #[test]
    fn calls_of_another_abi_stop_as_foreign() {
        let program = program(Coverage::Full, Stop::Ptrace, None).unwrap();
        let foreign = RET_TRACE | u32::from(FOREIGN);
        // i386 `read` (3) and `open` (5).
        assert_eq!(interpret(&program, 3, 0x4000_0003, [0; 6]), foreign);
        assert_eq!(interpret(&program, 5, 0x4000_0003, [0; 6]), foreign);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(interpret(&program, X32_SYSCALL_BIT | 2, NATIVE_ARCH, [0; 6]), foreign);
        }
    }

    #[test]
    fn flags_decide_for_clone_and_fstat_like_calls() {
        let program = program(Coverage::Full, Stop::Ptrace, None).unwrap();
        let (data, clone) = nr_of(Call::Clone);
        let untraced = [u64::from(CLONE_UNTRACED) | 0x11, 0, 0, 0, 0, 0];
        assert_eq!(
            interpret(&program, clone.nr as u32, NATIVE_ARCH, untraced),
            RET_TRACE | u32::from(data)
        );
        let (data, fstatat) = nr_of(Call::Fstatat);
        let lookup = [libc::AT_FDCWD as u64, 0x1000, 0, libc::AT_SYMLINK_NOFOLLOW as u64, 0, 0];
        let fstat = [3, 0x1000, 0, u64::from(AT_EMPTY_PATH), 0, 0];
        assert_eq!(
            interpret(&program, fstatat.nr as u32, NATIVE_ARCH, lookup),
            RET_TRACE | u32::from(data)
        );
        assert_eq!(interpret(&program, fstatat.nr as u32, NATIVE_ARCH, fstat), RET_ALLOW);
        let (data, statx) = nr_of(Call::Statx);
        let lookup = [libc::AT_FDCWD as u64, 0x1000, 0, 0, 0, 0];
        let fstat = [3, 0x1000, u64::from(AT_EMPTY_PATH), 0, 0, 0];
        assert_eq!(
            interpret(&program, statx.nr as u32, NATIVE_ARCH, lookup),
            RET_TRACE | u32::from(data)
        );
        assert_eq!(interpret(&program, statx.nr as u32, NATIVE_ARCH, fstat), RET_ALLOW);
    }

    #[test]
    fn readlink_stops_only_with_full_coverage() {
        let full = program(Coverage::Full, Stop::Ptrace, None).unwrap();
        let lean = program(Coverage::WithoutReadlink, Stop::Ptrace, None).unwrap();
        let (data, readlinkat) = nr_of(Call::Readlinkat);
        assert_eq!(
            interpret(&full, readlinkat.nr as u32, NATIVE_ARCH, [0; 6]),
            RET_TRACE | u32::from(data)
        );
        assert_eq!(interpret(&lean, readlinkat.nr as u32, NATIVE_ARCH, [0; 6]), RET_ALLOW);
        let (data, openat) = nr_of(Call::Openat);
        assert_eq!(
            interpret(&lean, openat.nr as u32, NATIVE_ARCH, [0; 6]),
            RET_TRACE | u32::from(data)
        );
    }
}
