//! Progress of long operations (issue 11 item 3): a small interface the library calls and
//! the command line renders.
//!
//! The library never draws anything and never asks whether a terminal is there: the
//! snapshot, transport and L0 code report phases to a [`Progress`] it is given, and the
//! caller decides what to show (`src/cli/progress.rs`: a bar on a terminal, a plain line
//! at most every 10 s in CI logs, or nothing). [`Silent`] ignores every report.
//!
//! A phase is one measured piece of work with a known size in bytes: [`Progress::begin`]
//! names it and gives the total, [`Progress::advance`] reports bytes done (from any
//! thread, in any order), [`Progress::finish`] ends it, whether it succeeded or not. Phases
//! do not nest: an operation with two phases (a save packs, then uploads) reports them one
//! after the other. [`Phase`] calls `finish` on drop, so an early return ends its phase
//! too.
//!
//! The phases and their labels, as the library reports them:
//!
//! | operation | label | total bytes | advanced by |
//! |---|---|---|---|
//! | snapshot save, pack | `pack` | file bytes of `actions-v1/` | file bytes read |
//! | snapshot save | `upload` | object size | parts uploaded |
//! | snapshot restore | `restore` | object size | object bytes unpacked (downloaded and read) |
//! | snapshot unpack | `unpack` | object size | object bytes read |
//! | L0 push | `pack`, then `upload` | payload bytes, archive size | file bytes packed, parts uploaded |
//! | L0 pull | `download` | object size | bytes written |
//! | artifact gc | `verify` | bytes of the slots' files | each slot's bytes once checked |
//!
//! Reports carry byte counts and fixed labels only: never a key, a path or a secret.

use std::io::{self, Read};

/// Receives the progress of long operations (see the module docs).
///
/// Implementations must be cheap: [`Progress::advance`] is called for every chunk (about
/// 1 MiB on a local copy, one part on an S3 transfer), possibly from several threads at
/// once.
pub trait Progress: Sync {
    /// A phase starts: `label` names it (`pack`, `upload`, `restore`, …; see the module
    /// docs), `total_bytes` is its size in bytes (0 when it moves nothing).
    fn begin(&self, label: &str, total_bytes: u64);

    /// `bytes` more bytes of the current phase are done.
    fn advance(&self, bytes: u64);

    /// The current phase ended (done, failed or abandoned).
    fn finish(&self);
}

/// A [`Progress`] that ignores every report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn begin(&self, _label: &str, _total_bytes: u64) {}
    fn advance(&self, _bytes: u64) {}
    fn finish(&self) {}
}

/// One phase, begun on creation and finished when dropped.
#[must_use = "the phase finishes when this guard is dropped"]
pub struct Phase<'a> {
    progress: &'a dyn Progress,
}

impl<'a> Phase<'a> {
    /// Begins the phase `label` of `total_bytes` bytes on `progress`.
    pub fn begin(progress: &'a dyn Progress, label: &str, total_bytes: u64) -> Self {
        progress.begin(label, total_bytes);
        Self { progress }
    }

    /// Reports `bytes` more bytes done.
    pub fn advance(&self, bytes: u64) {
        self.progress.advance(bytes);
    }
}

impl Drop for Phase<'_> {
    fn drop(&mut self) {
        self.progress.finish();
    }
}

/// A reader that reports every byte it returns to a [`Progress`].
pub struct Reader<'a, R> {
    inner: R,
    progress: &'a dyn Progress,
}

impl<'a, R: Read> Reader<'a, R> {
    /// Wraps `inner`.
    pub fn new(inner: R, progress: &'a dyn Progress) -> Self {
        Self { inner, progress }
    }
}

impl<R: Read> Read for Reader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records every report as text.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<String>>);

    impl Progress for Recorded {
        fn begin(&self, label: &str, total_bytes: u64) {
            self.0.lock().unwrap().push(format!("begin {label} {total_bytes}"));
        }
        fn advance(&self, bytes: u64) {
            self.0.lock().unwrap().push(format!("advance {bytes}"));
        }
        fn finish(&self) {
            self.0.lock().unwrap().push("finish".to_owned());
        }
    }

    #[test]
    fn a_phase_finishes_on_drop_and_a_reader_reports_what_it_returns() {
        let recorded = Recorded::default();
        {
            let phase = Phase::begin(&recorded, "unpack", 10);
            let mut reader = Reader::new(&b"0123456789"[..], &recorded);
            let mut buf = [0u8; 4];
            assert_eq!(reader.read(&mut buf).unwrap(), 4);
            let mut rest = Vec::new();
            reader.read_to_end(&mut rest).unwrap();
            assert_eq!(rest, b"456789");
            phase.advance(0);
        }
        let got = recorded.0.into_inner().unwrap();
        let sum: u64 =
            got.iter().filter_map(|l| l.strip_prefix("advance ")?.parse::<u64>().ok()).sum();
        assert_eq!(got.first().map(String::as_str), Some("begin unpack 10"));
        assert_eq!(got.last().map(String::as_str), Some("finish"));
        assert_eq!(sum, 10);
    }
}
