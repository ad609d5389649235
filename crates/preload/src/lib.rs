//! `libstrata_preload.so`: the launcher's fast path for a traced compile's file opens
//! (issue 28, docs/launcher.md "How a compile is traced").
//!
//! Under seccomp user notification every traced system call is two context switches
//! (about 13 µs of CPU on the project's 2-vCPU VM), and a C++ translation unit makes about a
//! thousand `open`s while searching its include path. Loaded into every process of the
//! traced tree (`LD_PRELOAD`), this library takes the `open` family of functions itself:
//! it reserves a slot in the launcher's shared log, makes the call with a per-compile
//! cookie in the sixth system call argument (which `openat` does not use), and writes the
//! call, the working directory, the path and what was opened (`statx` of the new descriptor)
//! into the slot (a name too long for the slot into the log's text arena). The name is read
//! after the call, in place: the kernel has just read it, so only a call that failed with
//! `EFAULT` has a name that may not be readable, and that one is not touched (the slot is
//! given up and the call made again the traced way, where the kernel fails it the same). `stat`, `lstat`, `fstatat` (and their `64` names) and `access` go the same
//! way (about a hundred calls per TU of the compiler's own include and program search): the
//! slot carries the `struct stat` the call returned, or for `access` the one a `newfstatat`
//! just before it returned. The seccomp filter lets an `openat`, `newfstatat` or
//! `faccessat` carrying the cookie run without a stop; every other call stops as before.
//!
//! Why the record stays complete: a call goes the fast way only once its slot is reserved,
//! so a call made is either in the log or stopped by the filter; a process that dies
//! between the reservation and the commit leaves a reserved slot, which the launcher reads
//! as an incomplete record, and so does a name that could not be logged after its call (a
//! full text arena, an unreadable working directory). Anything the library does not handle
//! (a write, `O_NOFOLLOW`, a directory descriptor, a full log, a log descriptor that is not
//! the launcher's any more) is made without the cookie and stops.
//! `fopen` for reading opens the same way and wraps the descriptor with libc's `fdopen`;
//! `execvp` looks at each `PATH` candidate the same way and makes the `execve` (which always
//! stops) only for one that is there. Calls that do not come through these functions
//! (libc's own opens, such as its locale files, the dynamic loader, static programs, raw
//! `syscall`) stop.
//!
//! The library needs nothing from libc but `environ`, `__errno_location`, `memcpy` and
//! `memset`, and the functions it hands calls on to (`fdopen`, `fopen64`, `execvpe`; glibc
//! and musl have them all; on aarch64 also `getauxval`, for `core`'s atomics), and makes its
//! system calls itself. It is linked without libraries (`build.rs`): it names none it needs,
//! and these symbols bind to the C library of the process it is loaded into. Nothing in
//! it may panic through a bounds check of `core`: that pulls in the unwinding personality,
//! which a `no_std` library does not have, and the dynamic loader would refuse it (the
//! launcher's test of the library's undefined symbols guards this). Built by `build.rs` with `rustc`
//! (no Cargo package: it is `no_std`, with `panic=abort`), embedded in `strata`, and written
//! under the cache root on first use. Layout of the log: `layout.rs`.

#![no_std]
#![allow(clippy::missing_safety_doc)]

use core::ffi::{c_char, c_int, c_uint};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

include!("layout.rs");

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const OPENAT: usize = 257;
    pub const NEWFSTATAT: usize = 262;
    pub const FACCESSAT: usize = 269;
    pub const STATX: usize = 332;
    pub const GETCWD: usize = 79;
    pub const GETTID: usize = 186;
    pub const CLOSE: usize = 3;
    pub const MMAP: usize = 9;
    pub const O_DIRECTORY: c_int = 0o200000;
    pub const O_NOFOLLOW: c_int = 0o400000;
    /// `st_mode` in `struct stat` (`u32`).
    pub const ST_MODE: usize = 24;
    use core::ffi::c_int;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const OPENAT: usize = 56;
    pub const NEWFSTATAT: usize = 79;
    pub const FACCESSAT: usize = 48;
    pub const STATX: usize = 291;
    pub const GETCWD: usize = 17;
    pub const GETTID: usize = 178;
    pub const CLOSE: usize = 57;
    pub const MMAP: usize = 222;
    pub const O_DIRECTORY: c_int = 0o40000;
    pub const O_NOFOLLOW: c_int = 0o100000;
    /// `st_mode` in `struct stat` (`u32`).
    pub const ST_MODE: usize = 16;
    use core::ffi::c_int;
}

// `struct stat` of both architectures (the kernel's, which is glibc's and musl's on 64-bit
// targets): `st_dev` (`u64`, glibc's `makedev` encoding) at 0, `st_ino` at 8, `st_size` at
// 48, `st_mtim` at 88, `st_ctim` at 104 (`i64` seconds, then nanoseconds); `st_mode` moves.
const ST_DEV: usize = 0;
const ST_INO: usize = 8;
const ST_SIZE: usize = 48;
const ST_MTIME: usize = 88;
const ST_CTIME: usize = 104;
/// Bytes of `struct stat` (x86_64's; aarch64's is 128).
const STAT_BYTES: usize = 144;
const AT_SYMLINK_NOFOLLOW: c_int = 0x100;
const AT_NO_AUTOMOUNT: c_int = 0x800;

const AT_FDCWD: isize = -100;
const AT_EMPTY_PATH: usize = 0x1000;
const STATX_BASIC_STATS: usize = 0x7ff;
const O_ACCMODE: c_int = 3;
const O_CLOEXEC: c_int = 0o2000000;
const ENOENT: c_int = 2;
const ENOTDIR: c_int = 20;
const EACCES: c_int = 13;
const ESTALE: c_int = 116;
const ENODEV: c_int = 19;
const ETIMEDOUT: c_int = 110;
const O_CREAT: c_int = 0o100;
const O_EXCL: c_int = 0o200;
const O_TRUNC: c_int = 0o1000;
const O_PATH: c_int = 0o10000000;
const O_TMPFILE_BIT: c_int = 0o20000000;
/// Flags that make an open something other than a read of a named file.
const SLOW_FLAGS: c_int =
    O_CREAT | O_EXCL | O_TRUNC | O_PATH | O_TMPFILE_BIT | nr::O_DIRECTORY | nr::O_NOFOLLOW;
const PROT_READ_WRITE: usize = 3;
const MAP_SHARED: usize = 1;

unsafe extern "C" {
    static environ: *const *const c_char;
    fn __errno_location() -> *mut c_int;
    // libc's own, for what the library hands on (glibc and musl both have them).
    fn fdopen(fd: c_int, mode: *const c_char) -> *mut u8;
    fn fopen64(path: *const c_char, mode: *const c_char) -> *mut u8;
    fn execvpe(
        file: *const c_char,
        argv: *const *const c_char,
        envp: *const *const c_char,
    ) -> c_int;
}

/// The log's mapping, or null: every call then goes the traced way.
static LOG: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// The cookie of this compile's filter.
static COOKIE: AtomicU64 = AtomicU64::new(0);

#[cfg(target_arch = "x86_64")]
unsafe fn syscall6(n: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

#[cfg(target_arch = "aarch64")]
unsafe fn syscall6(n: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") n,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

/// A system call's return as libc returns it: -1 with `errno` set for an error.
unsafe fn returned(ret: isize) -> c_int {
    if (-4095..0).contains(&ret) {
        unsafe { *__errno_location() = -ret as c_int };
        -1
    } else {
        ret as c_int
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: unsafe extern "C" fn() = init;

/// Maps the log named by [`LOG_ENV`] if its descriptor is still the launcher's memfd.
unsafe extern "C" fn init() {
    let Env::Value(value) = (unsafe { env(LOG_ENV.as_bytes()) }) else { return };
    let mut fields = value.split(|&b| b == b':');
    let mut number = |radix| fields.next().and_then(|f| parse(f, radix));
    let (Some(fd), Some(major), Some(minor), Some(ino)) =
        (number(10), number(10), number(10), number(10))
    else {
        return;
    };
    let mut stx = [0u8; 256];
    let got = unsafe { statx(fd as isize, b"\0".as_ptr(), AT_EMPTY_PATH, &mut stx) };
    if got != 0
        || u64::from(u32_at(&stx, 136)) != major
        || u64::from(u32_at(&stx, 140)) != minor
        || u64_at(&stx, 32) != ino
    {
        return;
    }
    let map =
        unsafe { syscall6(nr::MMAP, [0, LOG_BYTES, PROT_READ_WRITE, MAP_SHARED, fd as usize, 0]) };
    if (-4095..0).contains(&map) {
        return;
    }
    let base = map as *mut u8;
    if unsafe { (base.add(HEADER_MAGIC) as *const u64).read_volatile() } != LOG_MAGIC {
        return;
    }
    // The launcher lists this library last. A process that added a library after it (whose
    // `open`, if it has one, this library's would hide) asks for a run without it.
    if !unsafe { last_preload() } {
        let rerun = unsafe { &*(base.add(HEADER_RERUN) as *const AtomicU32) };
        rerun.store(1, Ordering::Release);
        return;
    }
    let cookie = unsafe { (base.add(HEADER_COOKIE) as *const u64).read_volatile() };
    COOKIE.store(cookie, Ordering::Relaxed);
    LOG.store(base, Ordering::Release);
}

/// Whether this library is the last entry of `LD_PRELOAD` (entries separated by blanks or
/// colons), as the launcher set it; true when the variable is not there, false when its
/// value is too long to read (the launcher then runs the compile again without it).
unsafe fn last_preload() -> bool {
    let list = match unsafe { env(b"LD_PRELOAD") } {
        Env::Value(list) => list,
        Env::Unset => return true,
        // Not read: a library may follow this one.
        Env::TooLong => return false,
    };
    let mut last: &[u8] = &[];
    let mut ours = false;
    for entry in list.split(|&b| b == b':' || b == b' ').filter(|e| !e.is_empty()) {
        let name = entry.rsplit(|&b| b == b'/').next().unwrap_or(entry);
        ours |= name.starts_with(b"libstrata_preload");
        last = name;
    }
    !ours || last.starts_with(b"libstrata_preload")
}

/// What environment variable `name` holds.
enum Env {
    /// Not set.
    Unset,
    /// Its value (without a NUL).
    Value(&'static [u8]),
    /// A value of 4096 bytes or more, which the library does not read.
    TooLong,
}

/// The value of environment variable `name`. Entries are compared with the name byte by
/// byte, so an entry of any length before it is passed over.
unsafe fn env(name: &[u8]) -> Env {
    let mut at = unsafe { environ };
    if at.is_null() {
        return Env::Unset;
    }
    loop {
        let entry = unsafe { *at };
        if entry.is_null() {
            return Env::Unset;
        }
        // Stops at the first byte that differs, so never past the entry's NUL.
        let named = name.iter().enumerate().all(|(i, &c)| unsafe { *entry.add(i) } as u8 == c);
        if named && unsafe { *entry.add(name.len()) } as u8 == b'=' {
            return match unsafe { c_bytes(entry.add(name.len() + 1), 4096) } {
                Some(value) => Env::Value(value),
                None => Env::TooLong,
            };
        }
        at = unsafe { at.add(1) };
    }
}

/// The bytes of the C string at `p` (without its NUL), if it is shorter than `max`.
unsafe fn c_bytes(p: *const c_char, max: usize) -> Option<&'static [u8]> {
    let mut len = 0;
    while len < max {
        if unsafe { *p.add(len) } == 0 {
            return Some(unsafe { core::slice::from_raw_parts(p.cast(), len) });
        }
        len += 1;
    }
    None
}

fn parse(text: &[u8], radix: u32) -> Option<u64> {
    if text.is_empty() || text.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in text {
        let digit = (b as char).to_digit(radix)?;
        value = value.checked_mul(u64::from(radix))?.checked_add(u64::from(digit))?;
    }
    Some(value)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32_at(b, at)) | (u64::from(u32_at(b, at + 4)) << 32)
}

unsafe fn statx(dirfd: isize, path: *const u8, flags: usize, buf: &mut [u8; 256]) -> isize {
    let args =
        [dirfd as usize, path as usize, flags, STATX_BASIC_STATS, buf.as_mut_ptr() as usize, 0];
    unsafe { syscall6(nr::STATX, args) }
}

/// `openat` as the kernel has it; the fast way when the log takes the call.
unsafe fn open_at(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    let base = LOG.load(Ordering::Acquire);
    let reading = flags & O_ACCMODE == 0 && flags & SLOW_FLAGS == 0;
    if reading && dirfd as isize == AT_FDCWD && !path.is_null() {
        if let Some(slot) = unsafe { reserve(base) } {
            let args =
                [AT_FDCWD as usize, path as usize, flags as usize, mode as usize, 0, cookie()];
            let ret = unsafe { syscall6(nr::OPENAT, args) };
            let mut seen = Seen::default();
            if ret >= 0 {
                let mut stx = [0u8; 256];
                if unsafe { statx(ret, b"\0".as_ptr(), AT_EMPTY_PATH, &mut stx) } == 0 {
                    seen = Seen::of_statx(&stx);
                }
            }
            if unsafe { slot.commit(base, path, CALL_OPEN, flags, ret, &seen) } {
                return unsafe { returned(ret) };
            }
        }
    }
    let args = [dirfd as isize as usize, path as usize, flags as usize, mode as usize, 0, 0];
    unsafe { returned(syscall6(nr::OPENAT, args)) }
}

/// The cookie the filter wants in the sixth argument of a call it lets pass.
fn cookie() -> usize {
    COOKIE.load(Ordering::Relaxed) as usize
}

/// The `errno` of a raw system call's return, 0 for a success.
fn errno_of(ret: isize) -> u32 {
    if (-4095..0).contains(&ret) { -ret as u32 } else { 0 }
}

/// What a call found, as the slot carries it (all zero when it found nothing).
#[derive(Default)]
struct Seen {
    mode: u32,
    dev_major: u32,
    dev_minor: u32,
    ino: u64,
    size: u64,
    mtime: (u64, u32),
    ctime: (u64, u32),
}

impl Seen {
    /// From a `struct statx`.
    fn of_statx(stx: &[u8; 256]) -> Seen {
        Seen {
            mode: u32::from(u16::from_le_bytes([stx[28], stx[29]])),
            dev_major: u32_at(stx, 136),
            dev_minor: u32_at(stx, 140),
            ino: u64_at(stx, 32),
            size: u64_at(stx, 40),
            mtime: (u64_at(stx, 112), u32_at(stx, 120)),
            ctime: (u64_at(stx, 96), u32_at(stx, 104)),
        }
    }

    /// From a `struct stat`; the device split as glibc's `major`/`minor` do.
    fn of_stat(st: &[u8; STAT_BYTES]) -> Seen {
        let dev = u64_at(st, ST_DEV);
        Seen {
            mode: u32_at(st, nr::ST_MODE),
            dev_major: (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32,
            dev_minor: ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32,
            ino: u64_at(st, ST_INO),
            size: u64_at(st, ST_SIZE),
            mtime: (u64_at(st, ST_MTIME), u64_at(st, ST_MTIME + 8) as u32),
            ctime: (u64_at(st, ST_CTIME), u64_at(st, ST_CTIME + 8) as u32),
        }
    }
}

/// A reserved slot of the log.
struct Slot {
    at: *mut u8,
    tid: u32,
}

/// Reserves a slot for a call about to be made: `None` when there is no log or it is full
/// (the call then goes the traced way).
unsafe fn reserve(base: *mut u8) -> Option<Slot> {
    if base.is_null() {
        return None;
    }
    let reserved = unsafe { &*(base.add(HEADER_RESERVED) as *const AtomicU32) };
    let index = reserved.fetch_add(1, Ordering::AcqRel);
    if index >= LOG_SLOTS {
        return None;
    }
    let tid = unsafe { syscall6(nr::GETTID, [0; 6]) } as u32;
    let at = unsafe { base.add(HEADER_BYTES + index as usize * SLOT_BYTES) };
    Some(Slot { at, tid })
}

impl Slot {
    /// Fills the slot of a call just made on the name at `path` (`ret`: the raw return of
    /// the call that read the name) and commits it, its state word last. The name is read
    /// here, after the call: the kernel has read it too unless it failed with `EFAULT`, so
    /// a name the program could not pass is never touched. False when the call must be
    /// made again the traced way (`EFAULT`: the slot says [`CALL_NONE`]).
    unsafe fn commit(
        &self,
        base: *mut u8,
        path: *const c_char,
        call: u32,
        flags: c_int,
        ret: isize,
        seen: &Seen,
    ) -> bool {
        const EFAULT: isize = 14;
        let slot = self.at;
        let put = |at: usize, bytes: &[u8]| unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), slot.add(at), bytes.len());
        };
        put(SLOT_TID, &self.tid.to_le_bytes());
        let state = unsafe { &*(slot.add(SLOT_STATE) as *const AtomicU32) };
        let skip = |call: u32| {
            put(SLOT_CALL, &call.to_le_bytes());
            state.store(SLOT_COMMITTED, Ordering::Release);
        };
        if ret == -EFAULT {
            skip(CALL_NONE);
            return false;
        }
        // No NUL within PATH_MAX (`ENAMETOOLONG`) or an empty name (`ENOENT`): nothing
        // was looked up.
        let given = match unsafe { c_bytes(path, NAME_MAX_BYTES) } {
            Some(given) if !given.is_empty() => given,
            _ => {
                skip(CALL_NONE);
                return true;
            }
        };
        let mut cwd = [0u8; NAME_MAX_BYTES];
        let mut cwd_len = 0;
        if given.first() != Some(&b'/') {
            let args = [cwd.as_mut_ptr() as usize, cwd.len(), 0, 0, 0, 0];
            let got = unsafe { syscall6(nr::GETCWD, args) };
            // The length with the NUL; a deleted or unreachable directory fails or is not
            // `/…`.
            if got <= 1 || cwd[0] != b'/' || got as usize > cwd.len() {
                skip(CALL_NO_CWD);
                return true;
            }
            cwd_len = got as usize - 1;
        }
        let cwd = cwd.get(..cwd_len).unwrap_or(&[]);
        let text_len = cwd.len() + given.len();
        let text_at = if text_len <= SLOT_BYTES - SLOT_TEXT {
            put(SLOT_TEXT_ELSEWHERE, &0u32.to_le_bytes());
            unsafe { slot.add(SLOT_TEXT) }
        } else {
            let used = unsafe { &*(base.add(HEADER_TEXT_USED) as *const AtomicU32) };
            let offset = used.fetch_add(text_len as u32, Ordering::AcqRel) as usize;
            if offset + text_len > TEXT_BYTES {
                skip(CALL_LOST);
                return true;
            }
            put(SLOT_TEXT_ELSEWHERE, &((TEXT_AT + offset) as u32).to_le_bytes());
            unsafe { base.add(TEXT_AT + offset) }
        };
        unsafe {
            core::ptr::copy_nonoverlapping(cwd.as_ptr(), text_at, cwd.len());
            core::ptr::copy_nonoverlapping(given.as_ptr(), text_at.add(cwd.len()), given.len());
        }
        put(SLOT_CALL, &call.to_le_bytes());
        put(SLOT_FLAGS, &flags.to_le_bytes());
        put(SLOT_ERRNO, &errno_of(ret).to_le_bytes());
        put(SLOT_MODE, &seen.mode.to_le_bytes());
        put(SLOT_DEV_MAJOR, &seen.dev_major.to_le_bytes());
        put(SLOT_DEV_MINOR, &seen.dev_minor.to_le_bytes());
        put(SLOT_INO, &seen.ino.to_le_bytes());
        put(SLOT_SIZE, &seen.size.to_le_bytes());
        put(SLOT_CTIME_SEC, &seen.ctime.0.to_le_bytes());
        put(SLOT_CTIME_NSEC, &seen.ctime.1.to_le_bytes());
        put(SLOT_MTIME_SEC, &seen.mtime.0.to_le_bytes());
        put(SLOT_MTIME_NSEC, &seen.mtime.1.to_le_bytes());
        put(SLOT_CWD_LEN, &(cwd.len() as u16).to_le_bytes());
        put(SLOT_GIVEN_LEN, &(given.len() as u16).to_le_bytes());
        state.store(SLOT_COMMITTED, Ordering::Release);
        true
    }
}

/// `newfstatat` as the kernel has it; the fast way when the log takes the call. `buf` is
/// the caller's `struct stat`.
unsafe fn stat_at(dirfd: c_int, path: *const c_char, buf: *mut u8, flags: c_int) -> c_int {
    let base = LOG.load(Ordering::Acquire);
    let plain = flags & !(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) == 0;
    if plain && dirfd as isize == AT_FDCWD && !path.is_null() && !buf.is_null() {
        if let Some(slot) = unsafe { reserve(base) } {
            let args =
                [AT_FDCWD as usize, path as usize, buf as usize, flags as usize, 0, cookie()];
            let ret = unsafe { syscall6(nr::NEWFSTATAT, args) };
            let mut seen = Seen::default();
            if ret == 0 {
                let mut st = [0u8; STAT_BYTES];
                let size = if cfg!(target_arch = "x86_64") { STAT_BYTES } else { 128 };
                unsafe { core::ptr::copy_nonoverlapping(buf, st.as_mut_ptr(), size) };
                seen = Seen::of_stat(&st);
            }
            // `EFAULT` here may be the buffer's, after the lookup: the traced call sees it.
            if unsafe { slot.commit(base, path, CALL_STAT, flags, ret, &seen) } {
                return unsafe { returned(ret) };
            }
        }
    }
    let args = [dirfd as isize as usize, path as usize, buf as usize, flags as usize, 0, 0];
    unsafe { returned(syscall6(nr::NEWFSTATAT, args)) }
}

/// `access`: the name is looked at (`newfstatat`) for the log, then the call made, both
/// with the cookie; or the call made the traced way.
unsafe fn access_at(path: *const c_char, mode: c_int) -> c_int {
    let base = LOG.load(Ordering::Acquire);
    if !path.is_null() {
        if let Some(slot) = unsafe { reserve(base) } {
            let mut st = [0u8; STAT_BYTES];
            let args = [AT_FDCWD as usize, path as usize, st.as_mut_ptr() as usize, 0, 0, cookie()];
            let looked = unsafe { syscall6(nr::NEWFSTATAT, args) };
            let seen = if looked == 0 { Seen::of_stat(&st) } else { Seen::default() };
            if unsafe { slot.commit(base, path, CALL_ACCESS, mode, looked, &seen) } {
                let args = [AT_FDCWD as usize, path as usize, mode as usize, 0, 0, cookie()];
                return unsafe { returned(syscall6(nr::FACCESSAT, args)) };
            }
        }
    }
    let args = [AT_FDCWD as usize, path as usize, mode as usize, 0, 0, 0];
    unsafe { returned(syscall6(nr::FACCESSAT, args)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut u8) -> c_int {
    unsafe { stat_at(AT_FDCWD as c_int, path, buf, 0) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut u8) -> c_int {
    unsafe { stat_at(AT_FDCWD as c_int, path, buf, 0) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut u8) -> c_int {
    unsafe { stat_at(AT_FDCWD as c_int, path, buf, AT_SYMLINK_NOFOLLOW) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut u8) -> c_int {
    unsafe { stat_at(AT_FDCWD as c_int, path, buf, AT_SYMLINK_NOFOLLOW) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut u8,
    flags: c_int,
) -> c_int {
    unsafe { stat_at(dirfd, path, buf, flags) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat64(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut u8,
    flags: c_int,
) -> c_int {
    unsafe { stat_at(dirfd, path, buf, flags) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    unsafe { access_at(path, mode) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    unsafe { open_at(AT_FDCWD as c_int, path, flags, mode) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    unsafe { open_at(AT_FDCWD as c_int, path, flags, mode) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    unsafe { open_at(AT_FDCWD as c_int, path, flags, 0) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    unsafe { open_at(AT_FDCWD as c_int, path, flags, 0) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    unsafe { open_at(dirfd, path, flags, mode) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    unsafe { open_at(dirfd, path, flags, mode) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    unsafe { open_at(dirfd, path, flags, 0) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    unsafe { open_at(dirfd, path, flags, 0) }
}

/// `fopen`: libc's makes its `open` inside libc, where no interposed function sees it, so
/// each one stops (GCC reads sources again this way for the caret lines of warnings). A
/// read-only mode (`r`, with `b` or `e`) opens here the fast way and hands the descriptor
/// to libc's `fdopen`, which makes the `FILE` libc's `fopen` would have made; any other mode
/// is libc's own (`fopen64`, the same function on 64-bit targets).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut u8 {
    // libc reads the mode at once too: a bad pointer fails alike.
    if let Some(cloexec) = unsafe { read_only_mode(mode) } {
        let fd = unsafe { open_at(AT_FDCWD as c_int, path, cloexec, 0) };
        if fd < 0 {
            return core::ptr::null_mut();
        }
        let file = unsafe { fdopen(fd, c"r".as_ptr()) };
        if file.is_null() {
            let errno = unsafe { *__errno_location() };
            unsafe { syscall6(nr::CLOSE, [fd as usize, 0, 0, 0, 0, 0]) };
            unsafe { *__errno_location() = errno };
        }
        return file;
    }
    unsafe { fopen64(path, mode) }
}

/// For a mode of `r` followed by nothing but `b` and `e` (at most one each), the flags the
/// open takes beyond `O_RDONLY` (`O_CLOEXEC` for `e`); `None` for any other mode.
unsafe fn read_only_mode(mode: *const c_char) -> Option<c_int> {
    if mode.is_null() {
        return None;
    }
    let text = unsafe { c_bytes(mode, 4) }?;
    let (first, rest) = text.split_first()?;
    if *first != b'r' {
        return None;
    }
    let (mut binary, mut cloexec) = (false, false);
    for &c in rest {
        match c {
            b'b' if !binary => binary = true,
            b'e' if !cloexec => cloexec = true,
            _ => return None,
        }
    }
    Some(if cloexec { O_CLOEXEC } else { 0 })
}

/// `execvp`: libc's tries `execve` in each directory of `PATH` in turn, each a stop (the
/// GCC driver finds `as` this way, past every directory before `/usr/bin`). Here each
/// candidate is looked at first the fast way (`stat`, logged): one that is not there
/// (`ENOENT`, `ENOTDIR`, which its `execve` would fail with too, and libc would go on) is
/// passed over; any other is handed to libc's `execvpe` by its full name, which is what
/// libc's own loop does with it (`execve`, and for `ENOEXEC` the shell). The errors are
/// libc's: `EACCES` if any candidate gave it, else the last one's. A name with a `/`, an
/// empty `PATH` element, no `PATH` or a candidate too long go to libc's `execvpe` whole.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    let whole = || unsafe { execvpe(file, argv, environ) };
    if LOG.load(Ordering::Acquire).is_null() || file.is_null() {
        return whole();
    }
    // libc reads the name at once too.
    let Some(name) = (unsafe { c_bytes(file, NAME_MAX_BYTES) }) else { return whole() };
    let path = match unsafe { env(b"PATH") } {
        Env::Value(path) => Some(path),
        Env::Unset | Env::TooLong => None,
    };
    let (Some(path), false, false) = (path, name.is_empty(), name.iter().any(|&b| b == b'/'))
    else {
        return whole();
    };
    if path.split(|&b| b == b':').any(|dir| dir.is_empty()) {
        return whole();
    }
    let mut candidate = [0u8; NAME_MAX_BYTES];
    let mut got_eacces = false;
    let mut last = ENOENT;
    for dir in path.split(|&b| b == b':') {
        let len = dir.len() + 1 + name.len();
        if len >= candidate.len() {
            return whole();
        }
        // Checked just above; raw copies keep panicking slice code out.
        unsafe {
            let at = candidate.as_mut_ptr();
            core::ptr::copy_nonoverlapping(dir.as_ptr(), at, dir.len());
            *at.add(dir.len()) = b'/';
            core::ptr::copy_nonoverlapping(name.as_ptr(), at.add(dir.len() + 1), name.len());
            *at.add(len) = 0;
        }
        let mut st = [0u8; STAT_BYTES];
        let at = candidate.as_ptr().cast::<c_char>();
        if unsafe { stat_at(AT_FDCWD as c_int, at, st.as_mut_ptr(), 0) } != 0 {
            let errno = unsafe { *__errno_location() };
            if errno == ENOENT || errno == ENOTDIR {
                last = errno;
                continue;
            }
        }
        unsafe { execvpe(at, argv, environ) };
        let errno = unsafe { *__errno_location() };
        match errno {
            EACCES => got_eacces = true,
            ENOENT | ESTALE | ENOTDIR | ENODEV | ETIMEDOUT => {}
            _ => return -1,
        }
        last = errno;
    }
    unsafe { *__errno_location() = if got_eacces { EACCES } else { last } };
    -1
}

/// Nothing here panics (every index is within fixed arrays); should it, the process ends
/// on an undefined instruction rather than run on.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        // SAFETY: traps.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            core::arch::asm!("ud2", options(noreturn))
        };
        #[cfg(target_arch = "aarch64")]
        unsafe {
            core::arch::asm!("udf #0", options(noreturn))
        };
    }
}
