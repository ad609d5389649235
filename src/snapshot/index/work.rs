//! Bounded parallelism for store requests: `workers` threads take the items in order
//! from a shared counter (rayon's pool is sized for CPUs; store requests wait on the
//! network, so they get a fixed number of threads of their own).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// Requests in flight at once for entry objects, refs and HEADs.
pub const STORE_PARALLELISM: usize = 8;

/// Maps `f` over `items` on at most `workers` threads (the calling thread alone for one
/// item or one worker); results keep the order of `items`.
pub fn map_bounded<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let workers = workers.max(1).min(items.len());
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
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
    fn keeps_order_and_covers_every_item() {
        let items: Vec<u32> = (0..100).collect();
        assert_eq!(map_bounded(&items, 8, |i| i * 2), (0..100).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(map_bounded(&items[..1], 8, |i| i + 1), vec![1]);
        assert!(map_bounded(&[] as &[u32], 8, |i| *i).is_empty());
    }

    #[test]
    fn permits_bound_the_holders_at_once() {
        let permits = Permits::new(2);
        let holding = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let items: Vec<u32> = (0..32).collect();
        map_bounded(&items, 8, |_| {
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
