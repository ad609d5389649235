//! Reading a download while it arrives, in order, hashing every byte handed on.
//!
//! The transport fills the destination file with parallel ranged GETs that complete in any
//! order, and reports each completed range ([`DownloadProgress`]). [`Arrivals`] keeps the
//! length of the prefix that is complete (`0..contiguous`) and the completed ranges beyond
//! it; [`ArrivingReader`] reads the file strictly in order, never past that prefix
//! (waiting for it to grow), and hashes exactly the bytes it returns. So a restore hashes
//! and unpacks the object while it downloads, reading each byte once, from the page cache,
//! right after it was written.
//!
//! Memory is bounded: nothing is buffered here but the map of completed ranges (at most
//! one entry per part in flight).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::digest::{ContentDigest, ContentHasher, DigestAlgorithm};
use crate::fs;
use crate::transport::DownloadProgress;

/// What is known of a download in progress.
#[derive(Debug, Default)]
struct State {
    /// Bytes `0..contiguous` of the file are written.
    contiguous: u64,
    /// Completed ranges past `contiguous`: start → end.
    pending: BTreeMap<u64, u64>,
    /// `Some(true)` once the download succeeded, `Some(false)` once it failed.
    ended: Option<bool>,
}

/// The completed ranges of one download (see the module docs). The downloading thread
/// reports ranges and finally [`Arrivals::finish`]es; the reading thread waits on it.
#[derive(Debug, Default)]
pub(crate) struct Arrivals {
    state: Mutex<State>,
    changed: Condvar,
}

impl Arrivals {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent numbers; keep going.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks the download as ended (`ok`: it completed). Only the first call counts.
    pub(crate) fn finish(&self, ok: bool) {
        let mut state = self.lock();
        if state.ended.is_none() {
            state.ended = Some(ok);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Blocks until more than `pos` bytes are contiguous or the download ended; returns
    /// the contiguous length and whether (and how) the download ended.
    fn wait_beyond(&self, pos: u64) -> (u64, Option<bool>) {
        let mut state = self.lock();
        while state.contiguous <= pos && state.ended.is_none() {
            state = self.changed.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        (state.contiguous, state.ended)
    }
}

impl DownloadProgress for Arrivals {
    fn written(&self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let mut state = self.lock();
        if start <= state.contiguous {
            state.contiguous = state.contiguous.max(end);
            // Absorb every completed range that now touches the prefix.
            while let Some((&next, &next_end)) = state.pending.first_key_value() {
                if next > state.contiguous {
                    break;
                }
                state.pending.remove(&next);
                state.contiguous = state.contiguous.max(next_end);
            }
        } else {
            let slot = state.pending.entry(start).or_insert(end);
            *slot = (*slot).max(end);
        }
        drop(state);
        self.changed.notify_all();
    }
}

/// Ends a download's [`Arrivals`] as failed when dropped, unless it was finished: a
/// downloading thread that panics must not leave the reader waiting forever.
pub(crate) struct FinishGuard<'a>(pub(crate) &'a Arrivals);

impl Drop for FinishGuard<'_> {
    fn drop(&mut self) {
        self.0.finish(false);
    }
}

/// Reads the file a download is filling, in order, up to the complete prefix only, and
/// hashes every byte it returns (see the module docs). End of file is the end of a
/// successful download; a failed download is an I/O error (the caller reports the
/// download's own error).
pub(crate) struct ArrivingReader<'a> {
    arrivals: &'a Arrivals,
    path: &'a Path,
    file: Option<File>,
    pos: u64,
    hasher: ContentHasher,
}

impl<'a> ArrivingReader<'a> {
    /// A reader of `path`, which the download creates before it reports a range, hashing
    /// under `algorithm` (the sidecar's object digest's).
    pub(crate) fn new(arrivals: &'a Arrivals, path: &'a Path, algorithm: DigestAlgorithm) -> Self {
        Self { arrivals, path, file: None, pos: 0, hasher: ContentHasher::new(algorithm) }
    }

    /// Reads (and hashes) whatever is left until the download ends.
    ///
    /// # Errors
    /// As [`Read::read`]: the download failed, or the file could not be read.
    pub(crate) fn drain(&mut self) -> io::Result<()> {
        let mut buf = vec![0u8; 1024 * 1024];
        while self.read(&mut buf)? > 0 {}
        Ok(())
    }

    /// The digest and length of every byte returned so far.
    pub(crate) fn finish(self) -> (ContentDigest, u64) {
        let len = self.hasher.len();
        (self.hasher.finish(), len)
    }
}

impl Read for ArrivingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (contiguous, ended) = self.arrivals.wait_beyond(self.pos);
        if contiguous <= self.pos {
            return match ended {
                Some(false) => Err(io::Error::other("the download failed")),
                _ => Ok(0),
            };
        }
        let file = match self.file.take() {
            Some(file) => file,
            None => fs::open(self.path).map_err(io::Error::other)?,
        };
        let want = usize::try_from(contiguous - self.pos).unwrap_or(usize::MAX).min(buf.len());
        let slot = buf.get_mut(..want).unwrap_or_default();
        let read = fs::read_exact_at(&file, self.path, slot, self.pos);
        self.file = Some(file);
        read.map_err(io::Error::other)?;
        self.hasher.update(slot);
        self.pos += want as u64;
        Ok(want)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn content(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    /// Parts complete out of order (last first, the first one last); the reader returns
    /// the bytes in order, never past the complete prefix, and hashes exactly the object.
    #[test]
    fn parts_completing_out_of_order_are_hashed_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("object");
        let data = content(10 * 4096 + 123);
        let file = fs::create_truncate(&path, 0o600).unwrap();
        let part = 4096;
        let mut ranges: Vec<(usize, usize)> =
            (0..data.len()).step_by(part).map(|s| (s, (s + part).min(data.len()))).collect();
        // Completion order: a shuffle (part i at place 7i mod n), part 0 last.
        let n = ranges.len();
        ranges.sort_by_key(|(start, _)| (*start == 0, start / part * 7 % n));
        assert_ne!(ranges[1].0, ranges[0].0 + part, "the parts are out of order");
        assert_eq!(ranges.last().unwrap().0, 0, "the first part completes last");
        let arrivals = Arrivals::new();
        let (digest, len, seen_before_first) = std::thread::scope(|scope| {
            let reading = scope.spawn(|| {
                let mut reader = ArrivingReader::new(&arrivals, &path, DigestAlgorithm::Blake3);
                let mut out = Vec::new();
                reader.read_to_end(&mut out).unwrap();
                let (digest, len) = reader.finish();
                (digest, len, out)
            });
            let mut seen_before_first = 0;
            for (i, (start, end)) in ranges.iter().enumerate() {
                fs::write_at(&file, &path, &data[*start..*end], *start as u64).unwrap();
                if i + 1 == ranges.len() {
                    // Everything but part 0 is written: the reader must still wait.
                    std::thread::sleep(Duration::from_millis(50));
                    seen_before_first = arrivals.lock().contiguous;
                }
                arrivals.written(*start as u64, *end as u64);
            }
            arrivals.finish(true);
            let (digest, len, out) = reading.join().unwrap();
            assert_eq!(out, data);
            (digest, len, seen_before_first)
        });
        assert_eq!(seen_before_first, 0, "nothing is contiguous before part 0");
        assert_eq!(len, data.len() as u64);
        assert_eq!(digest, ContentDigest::of_bytes(DigestAlgorithm::Blake3, &data));
    }

    #[test]
    fn a_failed_download_is_an_error_after_the_complete_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("object");
        let data = content(3000);
        let file = fs::create_truncate(&path, 0o600).unwrap();
        fs::write_at(&file, &path, &data, 0).unwrap();
        let arrivals = Arrivals::new();
        arrivals.written(0, 1000);
        arrivals.written(2000, 3000);
        {
            let _guard = FinishGuard(&arrivals);
        }
        let mut reader = ArrivingReader::new(&arrivals, &path, DigestAlgorithm::Blake3);
        let mut out = Vec::new();
        let err = reader.read_to_end(&mut out).unwrap_err();
        assert_eq!(err.to_string(), "the download failed");
        assert_eq!(out, &data[..1000], "only the contiguous prefix is read");
        assert_eq!(reader.finish().1, 1000);
    }
}
