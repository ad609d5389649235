//! When to use the rayon pool.
//!
//! Starting rayon's global pool costs a few hundred microseconds of thread creation and
//! spinning, which is most of a HIT for one translation unit. Work lists shorter than
//! [`PARALLEL_MIN_ITEMS`] therefore run on the calling thread.
//!
//! **Never block a pool thread on a thread of its own.** The codec's pipelines (pack: a
//! reader thread feeding the compressor; extract: writer threads fed by the decompressor)
//! wait on threads that hash large chunks on this same pool (BLAKE3's multi-threaded
//! mode). Run on a pool thread, a pipeline waits for its helper while the helper waits for
//! a free pool thread: with every pool thread inside a pipeline (two entries at once on two
//! cores, one on one core) nothing moves again. So work that runs pipelines side by side
//! uses plain threads (`snapshot::index::work::map_bounded`), and each pipeline checks
//! [`assert_off_pool`] in debug builds.

use rayon::prelude::*;

/// Shortest list worth spreading over the pool.
pub const PARALLEL_MIN_ITEMS: usize = 8;

/// Maps `f` over `items`, in parallel when there are at least [`PARALLEL_MIN_ITEMS`];
/// results keep the order of `items`.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    if items.len() < PARALLEL_MIN_ITEMS {
        items.iter().map(f).collect()
    } else {
        items.par_iter().map(f).collect()
    }
}

/// Panics in debug builds when called on a thread of rayon's pool (see the module docs):
/// `what` names the pipeline for the message. Does nothing in release builds.
#[track_caller]
pub fn assert_off_pool(what: &str) {
    debug_assert!(
        rayon::current_thread_index().is_none(),
        "{what} blocks on threads that hash on rayon's pool; it must not run on the pool \
         (use plain threads, e.g. snapshot::index::work::map_bounded)"
    );
    let _ = what;
}
