//! Exclusive `flock` locks with polling and a timeout.
//!
//! A lock is a file opened for append (created with mode 0644 if missing) and locked with
//! `flock(LOCK_EX | LOCK_NB)`, retried with a short back-off (1 ms doubling to 50 ms) until
//! the [`LockWait`] policy gives up. The descriptor is close-on-exec, so build commands
//! never inherit it. Dropping the [`LockGuard`] closes the descriptor, which releases the
//! lock; the kernel also releases it when the process dies (kill -9 included), so a crash
//! never leaves a lock held. Lock files are left on disk: deleting a lock file that another
//! process may be about to open would let two holders exist.
//!
//! # Limitations
//! `flock` does not exclude processes on other machines sharing a network filesystem.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, flock};

use super::{Error, Result};

/// How long to wait for a held lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockWait {
    /// One attempt, then [`Error::LockTimeout`].
    Immediately,
    /// Retry until this much time has passed.
    Timeout(Duration),
    /// Retry forever.
    Forever,
}

/// Progress reports while waiting, for event logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockProgress {
    /// Still waiting (reported after 1 s, then every 5 s).
    Waiting(Duration),
    /// Acquired after waiting at least 1 s.
    Acquired(Duration),
    /// Gave up.
    TimedOut(Duration),
}

/// A held exclusive lock; dropping it releases the lock.
#[must_use = "the lock is released when the guard is dropped"]
#[derive(Debug)]
pub struct LockGuard {
    _file: File,
    path: PathBuf,
    waited: Duration,
}

impl LockGuard {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long acquisition waited.
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

/// Acquires an exclusive lock on `path`, creating the file (not its parent) if needed.
/// `progress` is called at 1 s, 6 s, 11 s, … of waiting, on acquisition after ≥ 1 s, and on
/// timeout.
///
/// # Errors
/// [`Error::LockTimeout`] when the policy gives up; [`Error::Io`] when the file cannot be
/// opened or `flock` fails for another reason.
pub fn lock_exclusive(
    path: &Path,
    wait: LockWait,
    progress: &mut dyn FnMut(LockProgress),
) -> Result<LockGuard> {
    acquire(open_lock_file(path)?, path, FlockOperation::NonBlockingLockExclusive, wait, progress)
}

/// Like [`lock_exclusive`], but a shared lock: any number of shared holders, excluded by
/// an exclusive holder. Used for intention locks on ancestors of a locked directory.
///
/// # Errors
/// As [`lock_exclusive`].
pub fn lock_shared(
    path: &Path,
    wait: LockWait,
    progress: &mut dyn FnMut(LockProgress),
) -> Result<LockGuard> {
    acquire(open_lock_file(path)?, path, FlockOperation::NonBlockingLockShared, wait, progress)
}

/// Opens (creating with mode 0666 before umask) a lock file for appending; if that is not
/// permitted, opens an existing one read-only — `flock` works on any descriptor, so a user
/// who can read another user's lock file can still take part in locking.
fn open_lock_file(path: &Path) -> Result<File> {
    match OpenOptions::new().append(true).create(true).mode(0o666).open(path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            File::open(path).map_err(|_| Error::io("open lock file", path, e))
        }
        Err(e) => Err(Error::io("open lock file", path, e)),
    }
}

/// Like [`lock_exclusive`], but the lock file is opened with `O_NOFOLLOW` (a symlink at
/// `path` is an error, never followed), created with permission bits `mode` (before umask),
/// and must be a regular file.
///
/// # Errors
/// [`Error::WrongFileType`] if `path` is not a regular file; otherwise as
/// [`lock_exclusive`].
pub fn lock_exclusive_nofollow(
    path: &Path,
    mode: u32,
    wait: LockWait,
    progress: &mut dyn FnMut(LockProgress),
) -> Result<LockGuard> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(mode)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC).bits() as i32)
        .open(path)
        .map_err(|e| Error::io("open lock file", path, e))?;
    let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    if !meta.is_file() {
        return Err(Error::WrongFileType { path: path.into(), expected: "regular file" });
    }
    acquire(file, path, FlockOperation::NonBlockingLockExclusive, wait, progress)
}

fn acquire(
    file: File,
    path: &Path,
    operation: FlockOperation,
    wait: LockWait,
    progress: &mut dyn FnMut(LockProgress),
) -> Result<LockGuard> {
    let start = Instant::now();
    let mut next_report = Duration::from_secs(1);
    let mut pause = Duration::from_millis(1);
    loop {
        match flock(&file, operation) {
            Ok(()) => {
                let waited = start.elapsed();
                if waited >= Duration::from_secs(1) {
                    progress(LockProgress::Acquired(waited));
                }
                return Ok(LockGuard { _file: file, path: path.into(), waited });
            }
            Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {}
            Err(errno) => {
                return Err(Error::io(
                    "lock",
                    path,
                    std::io::Error::from_raw_os_error(errno.raw_os_error()),
                ));
            }
        }
        let waited = start.elapsed();
        let remaining = match wait {
            LockWait::Immediately => Duration::ZERO,
            LockWait::Timeout(limit) => limit.saturating_sub(waited),
            LockWait::Forever => Duration::MAX,
        };
        if remaining.is_zero() {
            progress(LockProgress::TimedOut(waited));
            return Err(Error::LockTimeout { path: path.into(), waited });
        }
        if waited >= next_report {
            progress(LockProgress::Waiting(waited));
            next_report += Duration::from_secs(5);
        }
        std::thread::sleep(pause.min(remaining));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Locks the directory `path` itself (its descriptor, opened read-only, never following a
/// final symlink): no lock file is created, so taking the lock changes nothing on disk.
/// `exclusive` or shared, waiting as `wait` says.
///
/// # Errors
/// [`Error::Io`] if `path` cannot be opened as a directory; otherwise as
/// [`lock_exclusive`].
pub fn lock_directory(path: &Path, exclusive: bool, wait: LockWait) -> Result<LockGuard> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_directory_nofollow())
        .open(path)
        .map_err(|e| Error::io("open directory", path, e))?;
    let operation = if exclusive {
        FlockOperation::NonBlockingLockExclusive
    } else {
        FlockOperation::NonBlockingLockShared
    };
    acquire(file, path, operation, wait, &mut |_| {})
}

/// `O_DIRECTORY | O_NOFOLLOW`.
fn libc_o_directory_nofollow() -> i32 {
    (rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::NOFOLLOW).bits() as i32
}

/// Writes `bytes` to `path` atomically (a temp file in the same directory, fsync, rename
/// over `path`; permission bits `mode`) and returns an exclusive lock on the new file, taken
/// before the name appears: from the moment `path` exists until the guard is dropped (or the
/// process dies), [`try_lock_existing`] on it finds it held. Used for records that another
/// process may clean up once their writer is gone.
///
/// # Errors
/// [`Error::Io`] naming the temp file or directory; [`Error::Rename`] naming `path`.
pub fn write_atomic_locked(path: &Path, bytes: &[u8], mode: u32) -> Result<LockGuard> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".strata-")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(|e| Error::io("create temporary file in", dir, e))?;
    flock(tmp.as_file(), FlockOperation::NonBlockingLockExclusive).map_err(|errno| {
        Error::io("lock", tmp.path(), std::io::Error::from_raw_os_error(errno.raw_os_error()))
    })?;
    tmp.write_all(bytes).map_err(|e| Error::io("write", tmp.path(), e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io("fsync", tmp.path(), e))?;
    let file = tmp.persist(path).map_err(|e| Error::Rename {
        from: e.file.path().into(),
        to: path.into(),
        source: e.error,
    })?;
    Ok(LockGuard { _file: file, path: path.into(), waited: Duration::ZERO })
}

/// Tries once to lock `path` exclusively without creating it; `Ok(None)` if it is held or
/// missing. Used by prune to tell whether a leftover is still in use.
///
/// # Errors
/// [`Error::Io`] for failures other than not-found and contention.
pub fn try_lock_existing(path: &Path) -> Result<Option<LockGuard>> {
    let file = match OpenOptions::new().append(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open lock file", path, e)),
    };
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(LockGuard { _file: file, path: path.into(), waited: Duration::ZERO })),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(errno) => {
            Err(Error::io("lock", path, std::io::Error::from_raw_os_error(errno.raw_os_error())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_times_out_then_succeeds_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let first = lock_exclusive(&path, LockWait::Immediately, &mut |_| {}).unwrap();
        let mut seen = Vec::new();
        let err = lock_exclusive(&path, LockWait::Timeout(Duration::from_millis(30)), &mut |p| {
            seen.push(p)
        })
        .unwrap_err();
        assert!(err.is_lock_timeout());
        assert!(matches!(seen.last(), Some(LockProgress::TimedOut(_))));
        assert!(try_lock_existing(&path).unwrap().is_none());
        drop(first);
        let again = lock_exclusive(&path, LockWait::Immediately, &mut |_| {}).unwrap();
        assert_eq!(again.path(), path);
    }

    #[test]
    fn an_atomically_written_record_is_locked_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.json");
        let guard = write_atomic_locked(&path, b"first", 0o600).unwrap();
        assert_eq!(crate::fs::read(&path).unwrap(), b"first");
        assert!(try_lock_existing(&path).unwrap().is_none(), "held by its writer");
        drop(guard);
        assert!(try_lock_existing(&path).unwrap().is_some(), "free once released");
        let again = write_atomic_locked(&path, b"second", 0o600).unwrap();
        assert_eq!(crate::fs::read(&path).unwrap(), b"second");
        assert!(try_lock_existing(&path).unwrap().is_none());
        drop(again);
    }
}
