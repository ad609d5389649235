//! When to use the rayon pool.
//!
//! Starting rayon's global pool costs a few hundred microseconds of thread creation and
//! spinning, which is most of a HIT for one translation unit. Work lists shorter than
//! [`PARALLEL_MIN_ITEMS`] therefore run on the calling thread.

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
