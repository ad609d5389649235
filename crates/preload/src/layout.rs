// The shared open log between `libstrata_preload.so` (the writer, in every process of a
// traced compile) and the launcher (the reader: crate `seccomp-notify`, `SharedLog`).
// Included by both (`include!`), so that the two cannot disagree. Little-endian, native
// word sizes of x86_64 and aarch64.
//
// A memfd of `LOG_BYTES` bytes: a header page, then `LOG_SLOTS` fixed slots of
// `SLOT_BYTES`, then a text arena of `TEXT_BYTES`. A writer reserves a slot by incrementing
// the header's counter (`HEADER_RESERVED`, atomic), makes its call, reads the name the
// kernel has just read (so a name the kernel could not read is never touched), fills the
// slot, and stores `SLOT_COMMITTED` into the slot's state word last (release). A name too
// long for the slot goes into the arena (reserved with `HEADER_TEXT_USED`, atomic) before
// the commit. A reserved slot whose state is still 0 is a call under way, or a process
// that died in one.

/// The environment variable that hands the log to the library:
/// `<fd>:<dev major>:<dev minor>:<inode>` (decimal).
pub const LOG_ENV: &str = "STRATA_TRACE_LOG";
/// The whole memfd, bytes (pages are allocated only as slots are used).
pub const LOG_BYTES: usize = 32 << 20;
/// The header, bytes.
pub const HEADER_BYTES: usize = 4096;
/// `u64` at 0 of the header: [`LOG_MAGIC`], written by the launcher.
pub const HEADER_MAGIC: usize = 0;
/// `u32` at 8 of the header: how many slots were reserved (may exceed [`LOG_SLOTS`]: a
/// reservation past the end is given up and the call made the traced way).
pub const HEADER_RESERVED: usize = 8;
/// `u32` at 12 of the header: set to 1 by a library that finds another `LD_PRELOAD` entry
/// after its own in a process (a library listed later, whose `open` the library's would
/// hide): the launcher runs the compile again without the library.
pub const HEADER_RERUN: usize = 12;
/// `u64` at 16 of the header: the compile's cookie, which the filter wants in the sixth
/// argument of an `openat` it lets pass. Kept here rather than in the environment, which
/// every program of the compile can read and pass on.
pub const HEADER_COOKIE: usize = 16;
/// `u32` at 24 of the header: bytes of the text arena reserved so far (may exceed
/// [`TEXT_BYTES`]: a name that does not fit any more is logged as [`CALL_LOST`]).
pub const HEADER_TEXT_USED: usize = 24;
/// The header's magic ("strata-l" version 2: names read after the call, the text arena).
pub const LOG_MAGIC: u64 = 0x0253_7472_6174_612d;
/// One slot, bytes.
pub const SLOT_BYTES: usize = 512;
/// The text arena at the log's end, bytes.
pub const TEXT_BYTES: usize = 4 << 20;
/// How many slots the log has.
pub const LOG_SLOTS: u32 = ((LOG_BYTES - HEADER_BYTES - TEXT_BYTES) / SLOT_BYTES) as u32;
/// Where the text arena starts, bytes from the log's start.
pub const TEXT_AT: usize = HEADER_BYTES + LOG_SLOTS as usize * SLOT_BYTES;
/// The longest name the kernel reads (`PATH_MAX`, with its NUL), bytes.
pub const NAME_MAX_BYTES: usize = 4096;
/// `u32`: 0 while reserved, [`SLOT_COMMITTED`] once complete.
pub const SLOT_STATE: usize = 0;
/// The state of a complete slot.
pub const SLOT_COMMITTED: u32 = 1;
/// `u32`: the calling thread's id.
pub const SLOT_TID: usize = 4;
/// `u32`: what was called, [`CALL_OPEN`], [`CALL_STAT`] or [`CALL_ACCESS`]; or
/// [`CALL_NONE`], [`CALL_LOST`].
pub const SLOT_CALL: usize = 8;
/// `open`/`openat` for reading (no `O_CREAT`, `O_TRUNC`, `O_PATH`, `O_TMPFILE`,
/// `O_NOFOLLOW`, `O_DIRECTORY`, `O_EXCL`), relative to the working directory or absolute.
/// The file fields describe what was opened (`statx` of the new descriptor).
pub const CALL_OPEN: u32 = 1;
/// `stat`, `lstat`, `fstatat` of a name (flags: `AT_SYMLINK_NOFOLLOW` or none), relative to
/// the working directory or absolute. The file fields are the call's own result.
pub const CALL_STAT: u32 = 2;
/// `access` (flags: its mode). The file fields are a `stat` of the name made just before
/// the call, as a stopped call's observation is.
pub const CALL_ACCESS: u32 = 3;
/// The call looked nothing up: the kernel could not read its name (`EFAULT`: the library
/// then makes it again the traced way, which stops), or found no NUL within
/// [`NAME_MAX_BYTES`] (`ENAMETOOLONG`). The reader skips the slot.
pub const CALL_NONE: u32 = 4;
/// The call was made but its name could not be logged (the text arena was full): the
/// record is incomplete.
pub const CALL_LOST: u32 = 5;
/// The call was made with a relative name, and the working directory could not be read
/// (deleted, unreachable or too long): the record is incomplete.
pub const CALL_NO_CWD: u32 = 6;
/// `i32`: the call's flags.
pub const SLOT_FLAGS: usize = 12;
/// `i32`: 0 when the call (for [`CALL_ACCESS`], the `stat` before it) succeeded, else its
/// `errno`.
pub const SLOT_ERRNO: usize = 16;
/// `u32`: the mode (type and permission bits) of what was found (0 on failure).
pub const SLOT_MODE: usize = 20;
/// `u32`: `stx_dev_major`.
pub const SLOT_DEV_MAJOR: usize = 24;
/// `u32`: `stx_dev_minor`.
pub const SLOT_DEV_MINOR: usize = 28;
/// `u64`: `stx_ino`.
pub const SLOT_INO: usize = 32;
/// `u64`: `stx_size`, bytes.
pub const SLOT_SIZE: usize = 40;
/// `i64`: `stx_mtime`, seconds.
pub const SLOT_MTIME_SEC: usize = 48;
/// `u32`: `stx_mtime`, nanoseconds.
pub const SLOT_MTIME_NSEC: usize = 56;
/// `i64`: `stx_ctime`, seconds.
pub const SLOT_CTIME_SEC: usize = 64;
/// `u32`: `stx_ctime`, nanoseconds.
pub const SLOT_CTIME_NSEC: usize = 72;
/// `u16`: bytes of the working directory (0 for an absolute path), at the start of the
/// text.
pub const SLOT_CWD_LEN: usize = 76;
/// `u16`: bytes of the path as given, right after the working directory.
pub const SLOT_GIVEN_LEN: usize = 78;
/// `u32`: 0 when the text is in the slot at [`SLOT_TEXT`], else where it is: bytes from
/// the log's start, inside the text arena.
pub const SLOT_TEXT_ELSEWHERE: usize = 80;
/// The text in the slot, when it fits: the working directory (`getcwd`, without its NUL)
/// then the path as given (no NUL).
pub const SLOT_TEXT: usize = 88;
