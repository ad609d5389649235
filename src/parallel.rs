//! Parallel work: the one map helper ([`map`]) and a counting semaphore ([`Permits`]).
//!
//! [`map`] runs on one of two kinds of worker ([`Workers`]):
//!
//! * [`Workers::Pool`], rayon's global pool, for CPU work (hashing, copying files).
//!   Starting the pool costs a few hundred microseconds of thread creation and spinning,
//!   which is most of a HIT for one translation unit, so lists shorter than
//!   [`PARALLEL_MIN_ITEMS`] run on the calling thread.
//! * [`Workers::Threads`], up to that many plain threads of their own, for work that waits
//!   (store requests, whose number in flight is bounded, [`STORE_PARALLELISM`]) or that
//!   runs codec pipelines side by side (below).
//!
//! **Never block a pool thread on a thread of its own.** The codec's pipelines (pack: a
//! reader thread feeding the compressor; extract: writer threads fed by the decompressor)
//! wait on threads that hash large chunks on this same pool (BLAKE3's multi-threaded
//! mode). Run on a pool thread, a pipeline waits for its helper while the helper waits for
//! a free pool thread: with every pool thread inside a pipeline (two entries at once on two
//! cores, one on one core) nothing moves again. So work that runs pipelines side by side
//! uses [`Workers::Threads`], and each pipeline checks [`assert_off_pool`] in debug builds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use rayon::prelude::*;

/// Shortest list worth spreading over the pool.
pub const PARALLEL_MIN_ITEMS: usize = 8;

/// Requests in flight at once for entry objects, refs and HEADs of an object store.
pub const STORE_PARALLELISM: usize = 8;

/// Which workers [`map`] uses (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// Rayon's global pool, for lists of at least [`PARALLEL_MIN_ITEMS`].
    Pool,
    /// At most this many plain threads of their own (the calling thread alone for one
    /// item or one thread); they take the items in order from a shared counter.
    Threads(usize),
}

/// Maps `f` over `items` on `workers`; results keep the order of `items`.
pub fn map<T: Sync, R: Send>(
    items: &[T],
    workers: Workers,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    match workers {
        Workers::Pool if items.len() >= PARALLEL_MIN_ITEMS => items.par_iter().map(f).collect(),
        Workers::Pool => items.iter().map(f).collect(),
        Workers::Threads(threads) => map_on_threads(items, threads, f),
    }
}

fn map_on_threads<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.max(1).min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = f(item);
                    if let Ok(mut slots) = results.lock() {
                        slots[i] = Some(result);
                    }
                }
            });
        }
    });
    results.into_inner().unwrap_or_default().into_iter().flatten().collect()
}

/// Panics in debug builds when called on a thread of rayon's pool (see the module docs):
/// `what` names the pipeline for the message. Does nothing in release builds.
#[track_caller]
pub fn assert_off_pool(what: &str) {
    debug_assert!(
        rayon::current_thread_index().is_none(),
        "{what} blocks on threads that hash on rayon's pool; it must not run on the pool \
         (use parallel::Workers::Threads)"
    );
    let _ = what;
}

/// A counting semaphore: at most `count` holders of a [`Permit`] at once.
pub struct Permits {
    free: Mutex<usize>,
    returned: Condvar,
}

/// A held permit of [`Permits`]; given back when dropped.
pub struct Permit<'a>(&'a Permits);

impl Permits {
    /// `count` permits (at least one).
    pub fn new(count: usize) -> Self {
        Self { free: Mutex::new(count.max(1)), returned: Condvar::new() }
    }

    /// Waits for a free permit and takes it.
    pub fn acquire(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self.returned.wait(free).unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(PoisonError::into_inner);
        *free += 1;
        self.0.returned.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_covers_every_item_on_either_kind_of_worker() {
        let items: Vec<u32> = (0..100).collect();
        let doubled: Vec<u32> = (0..100).map(|i| i * 2).collect();
        for workers in [Workers::Pool, Workers::Threads(8), Workers::Threads(1)] {
            assert_eq!(map(&items, workers, |i| i * 2), doubled, "{workers:?}");
            assert_eq!(map(&items[..1], workers, |i| i + 1), vec![1], "{workers:?}");
            assert!(map(&[] as &[u32], workers, |i| *i).is_empty(), "{workers:?}");
        }
    }

    #[test]
    fn permits_bound_the_holders_at_once() {
        let permits = Permits::new(2);
        let holding = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let items: Vec<u32> = (0..32).collect();
        map(&items, Workers::Threads(8), |_| {
            let _permit = permits.acquire();
            let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            holding.fetch_sub(1, Ordering::SeqCst);
        });
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(*permits.free.lock().unwrap(), 2, "every permit came back");
    }
}
