//! The reading side of the shared open log that `libstrata_preload.so` writes in every
//! process of a traced compile (layout: `crates/preload/src/layout.rs`, included below).
//!
//! [`SharedLog::create`] makes the memfd (inheritable: the compiler's processes map it
//! through the descriptor [`SharedLog::env_value`] names) and maps it here;
//! [`SharedLog::drain`] hands over each slot once it is committed, in slot order, keeping
//! slots still being written for a later call; [`SharedLog::unfinished`] counts those.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The layout both sides share.
pub mod layout {
    include!("../../preload/src/layout.rs");
}
use layout::*;

/// The shared log of one traced compile, mapped into this process.
#[derive(Debug)]
pub struct SharedLog {
    fd: OwnedFd,
    base: NonNull<u8>,
    /// The first slot not yet looked at.
    next: u32,
    /// Slots looked at while still being written, in slot order.
    pending: Vec<u32>,
    /// The header was written by a process of the compile: its counter went back or its
    /// magic changed.
    tampered: bool,
}

// SAFETY: the mapping is owned by this value and only read through atomics and copies.
unsafe impl Send for SharedLog {}

impl SharedLog {
    /// A new, empty log: a memfd of [`LOG_BYTES`] bytes without `FD_CLOEXEC` (so the
    /// compiler started next inherits it), mapped shared, with the header's magic and
    /// `cookie` (the compile's, [`layout::HEADER_COOKIE`]) written.
    ///
    /// # Errors
    /// The error of `memfd_create`, `ftruncate` or `mmap`.
    pub fn create(cookie: u64) -> io::Result<Self> {
        // SAFETY: a NUL-terminated name and no flags (the descriptor is inherited).
        let raw = unsafe { libc::memfd_create(c"strata-trace-log".as_ptr(), 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` was just returned by memfd_create and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let file = std::fs::File::from(fd.try_clone()?);
        file.set_len(LOG_BYTES as u64)?;
        // SAFETY: a new shared mapping of the whole memfd, which is LOG_BYTES long; the
        // kernel picks the address.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LOG_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(map.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        let log = Self { fd, base, next: 0, pending: Vec::new(), tampered: false };
        log.word(HEADER_COOKIE).store(cookie as u32, Ordering::Relaxed);
        log.word(HEADER_COOKIE + 4).store((cookie >> 32) as u32, Ordering::Relaxed);
        log.magic().store(LOG_MAGIC, Ordering::Release);
        Ok(log)
    }

    fn magic(&self) -> &AtomicU64 {
        // SAFETY: the header's first 8 bytes, page-aligned, inside the mapping, which lives
        // as long as `self`; other processes touch them only atomically or not at all.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(HEADER_MAGIC).cast()) }
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset.is_multiple_of(4) && offset + 4 <= LOG_BYTES);
        // SAFETY: an aligned u32 inside the mapping (callers pass header or slot offsets
        // below LOG_BYTES), which lives as long as `self`.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    /// The descriptor the compiler's processes inherit.
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// The value of [`LOG_ENV`]: `<fd>:<dev major>:<dev minor>:<inode>`.
    ///
    /// # Errors
    /// The error of `fstat` on the memfd.
    pub fn env_value(&self) -> io::Result<String> {
        let meta = std::fs::File::from(self.fd.try_clone()?).metadata()?;
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        Ok(format!("{}:{major}:{minor}:{}", self.fd(), meta.ino()))
    }

    /// Calls `visit` with a copy of each slot committed since the last call, in slot order
    /// (slots that were still being written at the last call first), and the slot's text
    /// (the working directory, then the name as given: [`layout::SLOT_CWD_LEN`] and
    /// [`layout::SLOT_GIVEN_LEN`] bytes), from the slot or the text arena. A text that lies
    /// outside either is given empty (the slot does not parse).
    pub fn drain(&mut self, mut visit: impl FnMut(&[u8; SLOT_BYTES], &[u8])) {
        let counted = self.word(HEADER_RESERVED).load(Ordering::Acquire);
        if counted < self.next || self.magic().load(Ordering::Acquire) != LOG_MAGIC {
            self.tampered = true;
        }
        let reserved = counted.min(LOG_SLOTS);
        let mut still = Vec::new();
        let mut slot = [0u8; SLOT_BYTES];
        let mut text = Vec::new();
        let earlier = std::mem::take(&mut self.pending);
        for index in earlier.into_iter().chain(self.next..reserved.max(self.next)) {
            let at = HEADER_BYTES + index as usize * SLOT_BYTES;
            if self.word(at + SLOT_STATE).load(Ordering::Acquire) != SLOT_COMMITTED {
                still.push(index);
                continue;
            }
            // SAFETY: the slot lies inside the mapping (index < LOG_SLOTS); its writer
            // stored the state last with release ordering, so its bytes are complete.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base.as_ptr().add(at),
                    slot.as_mut_ptr(),
                    SLOT_BYTES,
                );
            }
            let field = |at: usize| u16::from_le_bytes([slot[at], slot[at + 1]]) as usize;
            let len = field(SLOT_CWD_LEN) + field(SLOT_GIVEN_LEN);
            let elsewhere = u32::from_le_bytes(
                slot[SLOT_TEXT_ELSEWHERE..SLOT_TEXT_ELSEWHERE + 4].try_into().unwrap_or([0; 4]),
            ) as usize;
            text.clear();
            if elsewhere == 0 {
                text.extend_from_slice(slot.get(SLOT_TEXT..SLOT_TEXT + len).unwrap_or_default());
            } else if elsewhere >= TEXT_AT && elsewhere + len <= LOG_BYTES {
                // SAFETY: inside the mapping's text arena (checked just above); its writer
                // filled these bytes before the slot's commit (release, acquired above).
                text.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(self.base.as_ptr().add(elsewhere), len)
                });
            }
            visit(&slot, &text);
        }
        self.next = self.next.max(reserved);
        self.pending = still;
    }

    /// Whether a [`SharedLog::drain`] found the header written by someone else than the
    /// library's writers: the counter lower than before, or the magic changed. Opens may
    /// then be missing from the log.
    pub fn tampered(&self) -> bool {
        self.tampered
    }

    /// Whether a library asked for the compile to run again without it
    /// ([`layout::HEADER_RERUN`]).
    pub fn rerun_requested(&self) -> bool {
        self.word(HEADER_RERUN).load(Ordering::Acquire) != 0
    }

    /// How many reserved slots were not committed at the last [`SharedLog::drain`]: calls
    /// under way then, or processes that died in one.
    pub fn unfinished(&self) -> usize {
        self.pending.len()
    }
}

impl Drop for SharedLog {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `create`, of LOG_BYTES; no reference into it outlives
        // `self` (copies are handed out).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), LOG_BYTES);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots committed out of order are handed over in slot order, each once, and a slot
    /// still being written waits for the next drain.
    #[test]
    fn committed_slots_are_drained_once_and_pending_ones_later() {
        let mut log = SharedLog::create(0x0123_4567_89ab_cdef).unwrap();
        let commit = |log: &SharedLog, index: usize, tid: u32| {
            let at = HEADER_BYTES + index * SLOT_BYTES;
            log.word(at + SLOT_TID).store(tid, Ordering::Relaxed);
            log.word(at + SLOT_STATE).store(SLOT_COMMITTED, Ordering::Release);
        };
        log.word(HEADER_RESERVED).store(3, Ordering::Release);
        commit(&log, 0, 10);
        commit(&log, 2, 12);
        let mut seen = Vec::new();
        let tid = |slot: &[u8; SLOT_BYTES]| u32::from_le_bytes(slot[4..8].try_into().unwrap());
        log.drain(|slot, _| seen.push(tid(slot)));
        assert_eq!(seen, [10, 12]);
        assert_eq!(log.unfinished(), 1);
        commit(&log, 1, 11);
        log.drain(|slot, _| seen.push(tid(slot)));
        assert_eq!(seen, [10, 12, 11]);
        assert_eq!(log.unfinished(), 0);
        log.drain(|slot, _| seen.push(tid(slot)));
        assert_eq!(seen.len(), 3);
        assert_eq!(log.env_value().unwrap().split(':').count(), 4);
        let cookie = |at: usize| u64::from(log.word(HEADER_COOKIE + at).load(Ordering::Relaxed));
        assert_eq!(cookie(0) | (cookie(4) << 32), 0x0123_4567_89ab_cdef);
        assert!(!log.tampered() && !log.rerun_requested());
        log.word(HEADER_RESERVED).store(0, Ordering::Release);
        log.drain(|_, _| {});
        assert!(log.tampered(), "a counter that went back");
        log.word(HEADER_RERUN).store(1, Ordering::Release);
        assert!(log.rerun_requested());
    }
}
