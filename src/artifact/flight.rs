//! In-process single-flight: overlapping identical requests share one operation.
//!
//! A process-wide table maps a request (canonical root, private root, mode, key digest,
//! spec digest) to the operation in flight. The first caller (the leader) runs it; later
//! callers wait for its result, which is shared by reference (`Arc`), success or error, so
//! an error wakes every waiter. The entry is removed when the leader finishes: results are
//! never retained (this is not a cache). Store instances with equal parameters coalesce,
//! because the table is global.
//!
//! A leader that asks for its own request again (a builder recursing) gets
//! [`super::Error::RecursiveRequest`] instead of a deadlock. If the leader panics, waiters
//! wake up and run the operation themselves.
//!
//! # Limitations
//! * Waiters wait without a timeout for the leader (which is bounded by the store's lock
//!   policy and by the builder).
//! * The table is not reset in a child after `fork()` without `exec` (Rust offers no safe
//!   `pthread_atfork`); strata itself never forks without exec.

use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, LazyLock, Mutex};
use std::thread::ThreadId;

use super::identity::{KeyDigest, SpecDigest};

/// What makes two requests identical.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RequestKey {
    pub root: PathBuf,
    pub private_root: Option<PathBuf>,
    pub read_only: bool,
    pub key: KeyDigest,
    pub spec: SpecDigest,
}

type Shared = Arc<dyn Any + Send + Sync>;

struct Flight {
    leader: ThreadId,
    /// `None` while running; `Some(Some(result))` when done; `Some(None)` if the leader
    /// panicked.
    done: Mutex<Option<Option<Shared>>>,
    wake: Condvar,
}

static TABLE: LazyLock<Mutex<HashMap<RequestKey, Arc<Flight>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// How a caller took part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Ran the operation.
    Leader,
    /// Received the leader's result.
    Waiter,
}

/// Outcome of [`run`].
pub(crate) enum Joined<V> {
    /// The shared result and this caller's role.
    Done(Arc<V>, Role),
    /// The current thread is already the leader of this request.
    Recursive,
}

struct LeaderGuard {
    key: RequestKey,
    flight: Arc<Flight>,
    result: Option<Shared>,
}

impl Drop for LeaderGuard {
    fn drop(&mut self) {
        if let Ok(mut table) = TABLE.lock()
            && table.get(&self.key).is_some_and(|f| Arc::ptr_eq(f, &self.flight))
        {
            table.remove(&self.key);
        }
        if let Ok(mut done) = self.flight.done.lock() {
            *done = Some(self.result.take());
        }
        self.flight.wake.notify_all();
    }
}

/// Runs `operation` once for all overlapping callers with the same `key`.
pub(crate) fn run<V: Send + Sync + 'static>(
    key: RequestKey,
    operation: impl FnOnce() -> V,
) -> Joined<V> {
    let me = std::thread::current().id();
    let existing = {
        let mut table = match TABLE.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        match table.get(&key) {
            Some(flight) if flight.leader == me => return Joined::Recursive,
            Some(flight) => Some(flight.clone()),
            None => {
                let flight =
                    Arc::new(Flight { leader: me, done: Mutex::new(None), wake: Condvar::new() });
                table.insert(key.clone(), flight.clone());
                drop(table);
                let mut guard = LeaderGuard { key, flight, result: None };
                let value = Arc::new(operation());
                guard.result = Some(value.clone() as Shared);
                drop(guard);
                return Joined::Done(value, Role::Leader);
            }
        }
    };
    let Some(flight) = existing else { return Joined::Recursive };
    let mut done = match flight.done.lock() {
        Ok(d) => d,
        Err(poisoned) => poisoned.into_inner(),
    };
    while done.is_none() {
        done = match flight.wake.wait(done) {
            Ok(d) => d,
            Err(poisoned) => poisoned.into_inner(),
        };
    }
    let shared = done.clone().flatten();
    drop(done);
    match shared.map(|s| s.downcast::<V>()) {
        Some(Ok(value)) => Joined::Done(value, Role::Waiter),
        // The leader panicked, or asked for another result type: run independently.
        _ => Joined::Done(Arc::new(operation()), Role::Leader),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn key(n: u8) -> RequestKey {
        let d = crate::digest::Sha256Digest::from_bytes([n; 32]);
        RequestKey {
            root: PathBuf::from("/flight-test"),
            private_root: None,
            read_only: false,
            key: KeyDigest::from_digest(d),
            spec: SpecDigest::from_digest(d),
        }
    }

    #[test]
    fn overlapping_callers_share_one_run_and_entries_are_dropped() {
        let runs = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let runs = runs.clone();
                std::thread::spawn(move || {
                    match run(key(1), || {
                        runs.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(200));
                        Err::<u32, String>("boom".into())
                    }) {
                        Joined::Done(v, role) => ((*v).clone(), role),
                        Joined::Recursive => panic!("not recursive"),
                    }
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(runs.load(Ordering::SeqCst), 1, "one leader for all");
        assert!(
            results.iter().all(|(v, _)| v.as_ref().unwrap_err() == "boom"),
            "errors wake everyone"
        );
        assert_eq!(results.iter().filter(|(_, r)| *r == Role::Leader).count(), 1);
        // Nothing retained: a later call runs again.
        let Joined::Done(v, role) = run(key(1), || Ok::<u32, String>(7)) else { panic!() };
        assert_eq!((*v).clone(), Ok(7));
        assert_eq!(role, Role::Leader);
    }

    #[test]
    fn recursion_is_detected() {
        let Joined::Done(inner, _) =
            run(key(2), || matches!(run(key(2), || 1u8), Joined::Recursive))
        else {
            panic!()
        };
        assert!(*inner);
    }
}
