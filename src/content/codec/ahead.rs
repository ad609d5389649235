//! Decompressing ahead of the parser: [`read_ahead`] runs the decoder on its own thread,
//! which fills blocks of [`BLOCK_BYTES`] and hands them over in order; the calling thread
//! parses the tar stream from them ([`Ahead`], a [`Read`]). So decompression (one thread:
//! a zstd frame decodes in order) overlaps the parsing, the checks and the directory
//! creation of the entries, instead of taking turns with them on one thread.
//!
//! Memory is bounded: at most [`BLOCKS`] blocks exist, reused as the parser returns them;
//! a block is zeroed once, when it is first made.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};

/// Size of the blocks the decoder fills, in bytes (256 KiB).
pub(crate) const BLOCK_BYTES: usize = 256 * 1024;
/// Most blocks in existence (filled, in flight or being parsed): 2 MiB.
pub(crate) const BLOCKS: usize = 8;

/// A filled block and the number of its bytes that hold data; or the decoder's error.
type Filled = io::Result<(Vec<u8>, usize)>;

/// The parsing side: the decoded stream, in order (end of file when the decoder reached
/// the end of its input; the decoder's error when it failed).
pub(crate) struct Ahead {
    filled: Receiver<Filled>,
    spent: SyncSender<Vec<u8>>,
    stop: Arc<AtomicBool>,
    current: Vec<u8>,
    len: usize,
    pos: usize,
    ended: bool,
}

impl Ahead {
    /// Takes the next block; false at the end of the stream.
    fn next_block(&mut self) -> io::Result<bool> {
        if self.ended {
            return Ok(false);
        }
        match self.filled.recv() {
            Ok(Ok((block, len))) => {
                let spent = std::mem::replace(&mut self.current, block);
                if !spent.is_empty() {
                    // The channel holds every block there is: this never blocks.
                    let _ = self.spent.try_send(spent);
                }
                self.len = len;
                self.pos = 0;
                Ok(true)
            }
            Ok(Err(e)) => {
                self.ended = true;
                Err(e)
            }
            Err(_) => {
                self.ended = true;
                Ok(false)
            }
        }
    }
}

impl Read for Ahead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.pos == self.len {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let available = self.current.get(self.pos..self.len).unwrap_or_default();
        let n = available.len().min(buf.len());
        if let (Some(to), Some(from)) = (buf.get_mut(..n), available.get(..n)) {
            to.copy_from_slice(from);
        }
        self.pos += n;
        Ok(n)
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        // A parser that stopped early (a rejected entry) stops the decoder at its next
        // block instead of letting it decode the rest of the stream.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Fills `block` from `decoder` until it is full, the stream ends or the decoder fails;
/// returns the bytes filled (kept even when an error follows them) and that error.
fn fill(decoder: &mut dyn Read, block: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut filled = 0;
    loop {
        let Some(slot) = block.get_mut(filled..).filter(|s| !s.is_empty()) else {
            return (filled, None);
        };
        match decoder.read(slot) {
            Ok(0) => return (filled, None),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (filled, Some(e)),
        }
    }
}

/// The decoding side: fills blocks (spent ones first, new ones while fewer than
/// [`BLOCKS`] exist) and sends them until the stream ends, the decoder fails or the
/// parser is gone.
fn decode(
    decoder: &mut dyn Read,
    filled: &SyncSender<Filled>,
    spent: &Receiver<Vec<u8>>,
    stop: &AtomicBool,
) {
    let mut made = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut block = match spent.try_recv() {
            Ok(block) => block,
            Err(TryRecvError::Empty) if made < BLOCKS => {
                made += 1;
                vec![0u8; BLOCK_BYTES]
            }
            Err(TryRecvError::Empty) => match spent.recv() {
                Ok(block) => block,
                Err(_) => return,
            },
            Err(TryRecvError::Disconnected) => return,
        };
        let (n, error) = fill(decoder, &mut block);
        let full = n == block.len();
        // The bytes before an error go first: the parser reports the error where the
        // stream broke (e.g. after the end of the tar stream), not inside an earlier entry.
        if n > 0 && filled.send(Ok((block, n))).is_err() {
            return;
        }
        if let Some(e) = error {
            let _ = filled.send(Err(e));
            return;
        }
        if !full {
            return;
        }
    }
}

/// Runs `parse` on the stream `decoder` produces, decoded on a thread of `scope` ahead of
/// it (see the module docs). The decoding thread ends when the stream does, when the
/// decoder fails, or soon after `parse` returns (the scope joins it).
pub(crate) fn read_ahead<'scope, 'env, T>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    mut decoder: Box<dyn Read + Send + 'env>,
    parse: impl FnOnce(&mut Ahead) -> T,
) -> T {
    let (filled_tx, filled_rx) = sync_channel(BLOCKS);
    let (spent_tx, spent_rx) = sync_channel(BLOCKS);
    let stop = Arc::new(AtomicBool::new(false));
    let decoding_stop = Arc::clone(&stop);
    scope.spawn(move || decode(&mut *decoder, &filled_tx, &spent_rx, &decoding_stop));
    let mut ahead = Ahead {
        filled: filled_rx,
        spent: spent_tx,
        stop,
        current: Vec::new(),
        len: 0,
        pos: 0,
        ended: false,
    };
    parse(&mut ahead)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 131 % 251) as u8).collect()
    }

    /// Reads in odd sizes through many blocks: the bytes come back whole and in order.
    #[test]
    fn the_stream_comes_back_in_order() {
        for len in [0, 1, BLOCK_BYTES - 1, BLOCK_BYTES, BLOCK_BYTES * BLOCKS * 3 + 17] {
            let data = content(len);
            let got = std::thread::scope(|scope| {
                read_ahead(scope, Box::new(&data[..]), |ahead| {
                    let mut got = Vec::new();
                    let mut buf = vec![0u8; 7919];
                    loop {
                        match ahead.read(&mut buf).unwrap() {
                            0 => break got,
                            n => got.extend_from_slice(&buf[..n]),
                        }
                    }
                })
            });
            assert_eq!(got.len(), len);
            assert!(got == data, "{len} bytes differ");
        }
    }

    /// A decoder failing after some bytes: the bytes before it, then its error.
    #[test]
    fn a_decoder_error_follows_the_bytes_before_it() {
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("broken frame"));
                }
                let n = self.0.min(buf.len());
                buf[..n].fill(7);
                self.0 -= n;
                Ok(n)
            }
        }
        let (before, error) = std::thread::scope(|scope| {
            read_ahead(scope, Box::new(Failing(BLOCK_BYTES + 5)), |ahead| {
                let mut got = Vec::new();
                let error = ahead.read_to_end(&mut got).unwrap_err();
                (got.len(), error.to_string())
            })
        });
        assert_eq!(before, BLOCK_BYTES + 5, "every byte before the error is handed on");
        assert_eq!(error, "broken frame");
    }

    /// A parser that stops early: the decoder is stopped (the scope returns) long before
    /// an endless stream would end.
    #[test]
    fn a_parser_that_stops_early_stops_the_decoder() {
        struct Endless;
        impl Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                buf.fill(1);
                Ok(buf.len())
            }
        }
        let first = std::thread::scope(|scope| {
            read_ahead(scope, Box::new(Endless), |ahead| {
                let mut byte = [0u8; 1];
                ahead.read_exact(&mut byte).unwrap();
                byte[0]
            })
        });
        assert_eq!(first, 1);
    }
}
