//! Keeping the tracer and the traced process tree on one CPU while that CPU is not contended.
//!
//! Every traced system call stops the tracee and wakes the tracer, and the tracer's
//! `PTRACE_CONT` wakes the tracee again. When the two run on different CPUs each of those
//! wake-ups is an inter-processor interrupt to a CPU that has usually gone idle meanwhile;
//! on a virtual machine that is a VM exit and the host rescheduling the vCPU. Measured on
//! the project's 2-vCPU VM with a minimal tracer that only continues every stop
//! (`scripts/bench/ptrace-floor.c`) on zstd's `entropy_common.c` (528 stops, 160 ms of
//! compile): +18 % wall and +12 % CPU on two CPUs, +0.5 % and +0.5 % with the tracer and the
//! tree on one (docs/performance.md). So [`Pin::start`] restricts the tracer's thread and
//! the stopped root tracee (whose descendants inherit the mask) to one CPU: the one the
//! tracer runs on, unless another launcher's tree is pinned there.
//!
//! # Claims
//! The kernel places a new program on the CPU it finds least loaded at `exec`, which is
//! often the one where another pinned compiler runs (measured: in a `-j2` build on two
//! CPUs, 39 % of the samples where two traced compiles ran had both pinned to one CPU).
//! So with a claims directory ([`Pinning::claims`], `<cache root>/.locks/cpu`) a pinned
//! tree holds an exclusive `flock` on `<n>.lock` for its CPU n, taken with one try; a
//! launcher tries its own CPU first and then the others in order, and when every allowed
//! CPU is claimed its tree is not pinned at all (more traced trees than CPUs: the kernel
//! places them). A CPU whose lock file cannot be opened (another user's directory without
//! a file for that CPU yet) is skipped; only where no lock file can be opened at all (the
//! directory cannot be made) is the tree pinned to the tracer's CPU without a claim, as
//! before claims existed, so a tree is never pinned, unclaimed, to a CPU found claimed.
//!
//! # Invariants
//! * Only the tracer's own thread and the traced tree are restricted; the launcher's other
//!   threads are not, and dropping the [`Pin`] gives the tracer's thread its former mask back
//!   before the launcher goes on (hashing, writing the entry).
//! * A pinned tree never waits for its CPU while another one idles for long (a tree with
//!   threads or parallel children, or two launchers that started on one CPU): every
//!   [`CHECK_EVERY`] [`Pin::check`] compares how long the stopped tracee waited to run
//!   (`run_delay` of `/proc/<tid>/schedstat`) with the time passed, and when it waited more
//!   than a quarter of it while another allowed CPU was idle more than half of the time
//!   since `/proc/stat` was last read (read only at such a check; the first check that
//!   finds the tree waiting only reads it, the next one decides), gives the tracer and
//!   every live tracee the former mask back and leaves placement to the kernel for the
//!   rest of the trace.
//! * Nothing here can fail a compile: where the masks cannot be read or set (a kernel
//!   without `/proc/<tid>/schedstat`, a seccomp profile that denies `sched_setaffinity`),
//!   the tracer runs unpinned as before.
//!
//! # Limitations
//! * A tracee that sets its own CPU mask (rare for compilers) leaves the pin; tracing goes
//!   on at the unpinned cost.
//! * `/proc/stat` counts idle time in clock ticks (10 ms), so a release is decided on
//!   [`CHECK_EVERY`] (100 ms) of history at the finest; a tree that is contended only
//!   briefly stays pinned.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sched::{CpuSet, sched_getaffinity, sched_getcpu, sched_setaffinity};
use nix::unistd::Pid;

use crate::fs::{self, LockGuard, LockWait};

/// How often [`Pin::check`] looks at contention (at a stop, not by a timer).
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(100);

/// Whether and how a traced tree is pinned (`trace::Request::pin`, `pin_claims`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pinning<'a> {
    /// Pin at all.
    pub on: bool,
    /// The directory of per-CPU claims (`<cache root>/.locks/cpu`); `None`: pinned to the
    /// tracer's CPU without a claim.
    pub claims: Option<&'a Path>,
}

impl Pinning<'_> {
    /// [`Pin::start`] for `root` when pinning is on; `None` when it is off.
    pub(crate) fn start(self, root: Pid) -> Option<Pin> {
        if self.on { Pin::start(root, self.claims) } else { None }
    }
}

/// What [`claim`] found.
#[derive(Debug)]
enum Claim {
    /// CPU n is this launcher's while the guard is held.
    Cpu(usize, LockGuard),
    /// Every allowed CPU is claimed by another tree.
    AllTaken,
    /// The claims directory cannot be used.
    Unusable,
}

/// The tracer's and the tree's CPU, and what the tracer's thread had before.
#[derive(Debug)]
pub(crate) struct Pin {
    /// The tracer thread's mask before [`Pin::start`].
    former: CpuSet,
    /// The CPUs `former` allows.
    allowed: Vec<usize>,
    /// The CPU the tracer and the tree are restricted to.
    cpu: usize,
    /// The pin was given up (contention): everything has its former mask again.
    released: bool,
    /// When the last contention sample was taken.
    sampled_at: Instant,
    /// The last `run_delay` read (ns) and whose.
    delay: Option<(Pid, u64)>,
    /// Idle clock ticks per CPU (index: CPU number) at `idle_at`; `None` until a check
    /// first finds the tree waiting. `/proc/stat` (tens of microseconds to read, more on
    /// a machine with many CPUs) is read only at such a check, never at the start: most
    /// compiles end before their first check.
    idle: Option<Vec<u64>>,
    /// When `idle` was read.
    idle_at: Instant,
    /// The claim on `cpu` (see the module docs), held until the pin is given up or dropped.
    claim: Option<LockGuard>,
}

impl Pin {
    /// Restricts the calling thread (the tracer) and `root` (the stopped shim) to one CPU:
    /// the one the calling thread runs on or, with `claims`, the first unclaimed one from
    /// there (see the module docs). `None`, with nothing changed, where the mask allows one
    /// CPU only or cannot be read or set, or every allowed CPU is claimed.
    pub(crate) fn start(root: Pid, claims: Option<&Path>) -> Option<Pin> {
        let me = Pid::from_raw(0);
        let former = sched_getaffinity(me).ok()?;
        let allowed = cpus_of(&former);
        let here = sched_getcpu().ok()?;
        if allowed.len() < 2 || !allowed.contains(&here) {
            return None;
        }
        let (cpu, claim) = match claims.map(|dir| claim(dir, here, &allowed)) {
            None | Some(Claim::Unusable) => (here, None),
            Some(Claim::AllTaken) => return None,
            Some(Claim::Cpu(cpu, guard)) => (cpu, Some(guard)),
        };
        let one = only(cpu)?;
        sched_setaffinity(me, &one).ok()?;
        if sched_setaffinity(root, &one).is_err() {
            let _ = sched_setaffinity(me, &former);
            return None;
        }
        Some(Pin {
            former,
            allowed,
            cpu,
            released: false,
            sampled_at: Instant::now(),
            delay: run_delay(root).map(|d| (root, d)),
            idle: None,
            idle_at: Instant::now(),
            claim,
        })
    }

    /// Whether the pin still holds (it was not given up).
    pub(crate) fn holds(&self) -> bool {
        !self.released
    }

    /// Called at a stop of `stopped` (under notification also every [`CHECK_EVERY`]
    /// without one, with the last process that stopped): every [`CHECK_EVERY`], gives the tracer and the
    /// `live` tracees their former mask back for good when `stopped` waited for its CPU
    /// more than a quarter of the time while another CPU idled more than half of it.
    pub(crate) fn check(&mut self, stopped: Pid, live: impl Iterator<Item = Pid>) {
        let now = Instant::now();
        let passed = now.duration_since(self.sampled_at);
        if self.released || passed < CHECK_EVERY {
            return;
        }
        let delay = run_delay(stopped);
        let waited = match (self.delay, delay) {
            (Some((pid, before)), Some(after)) if pid == stopped => {
                Duration::from_nanos(after.saturating_sub(before))
            }
            _ => Duration::ZERO,
        };
        self.sampled_at = now;
        self.delay = delay.map(|d| (stopped, d));
        if waited * 4 <= passed {
            return;
        }
        // The first time the tree is found waiting there is no earlier reading of the idle
        // ticks to compare with: this one is the baseline, and the next check decides.
        let Some(before) = self.idle.replace(idle_ticks().unwrap_or_default()) else {
            self.idle_at = now;
            return;
        };
        let window = Window { waited, passed, idle: now.duration_since(self.idle_at) };
        let after = self.idle.as_deref().unwrap_or_default();
        if contended(window, &self.allowed, self.cpu, &before, after) {
            // Back to the kernel's placement: a tree with threads or parallel children
            // (LTO jobs, a wrapper running two compilers) must not share one CPU.
            let _ = sched_setaffinity(Pid::from_raw(0), &self.former);
            for pid in live {
                let _ = sched_setaffinity(pid, &self.former);
            }
            self.released = true;
            self.claim = None;
        }
        self.idle_at = now;
    }
}

impl Drop for Pin {
    /// Gives the tracer's thread its former mask back.
    fn drop(&mut self) {
        let _ = sched_setaffinity(Pid::from_raw(0), &self.former);
    }
}

/// The times a contention check compares.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// How long the tracee waited for its CPU during `passed`.
    waited: Duration,
    /// Since the last check.
    passed: Duration,
    /// Since the idle ticks compared were read (at least `passed`).
    idle: Duration,
}

/// True when the tracee waited for its CPU more than a quarter of the time passed while
/// another allowed CPU than `cpu` idled more than half of the idle window (idle ticks from
/// `before` to `after`, 1/100 s each, USER_HZ).
fn contended(window: Window, allowed: &[usize], cpu: usize, before: &[u64], after: &[u64]) -> bool {
    if window.waited * 4 <= window.passed {
        return false;
    }
    let half = u64::try_from(window.idle.as_millis() / 20).unwrap_or(u64::MAX);
    allowed.iter().filter(|&&c| c != cpu).any(|&c| {
        let gained = match (after.get(c), before.get(c)) {
            (Some(a), Some(b)) => a.saturating_sub(*b),
            _ => 0,
        };
        gained > half
    })
}

/// Claims one of the `allowed` CPUs in `dir` (`<n>.lock`, one `flock` try each): `here`
/// first, then the ones after it, wrapping around. A CPU whose lock file cannot be opened
/// (another user's directory without a file for it yet) is skipped; [`Claim::Unusable`]
/// only when no lock file could be opened at all, so a tree is never pinned, unclaimed, to
/// a CPU found claimed.
fn claim(dir: &Path, here: usize, allowed: &[usize]) -> Claim {
    let start = allowed.iter().position(|&c| c == here).unwrap_or(0);
    let (before, after) = allowed.split_at(start);
    let mut made_dir = false;
    let mut any_opened = false;
    for &cpu in after.iter().chain(before) {
        let path = dir.join(format!("{cpu}.lock"));
        loop {
            match fs::lock_exclusive(&path, LockWait::Immediately, &mut |_| {}) {
                Ok(guard) => return Claim::Cpu(cpu, guard),
                Err(e) if e.is_lock_timeout() => {
                    any_opened = true;
                    break;
                }
                Err(e) if e.is_not_found() && !made_dir => {
                    made_dir = true;
                    if fs::create_dir_all(dir).is_err() {
                        return Claim::Unusable;
                    }
                }
                Err(_) => break,
            }
        }
    }
    if any_opened { Claim::AllTaken } else { Claim::Unusable }
}

/// The CPUs `mask` allows, in ascending order.
fn cpus_of(mask: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count()).filter(|&c| mask.is_set(c).unwrap_or(false)).collect()
}

/// The mask of one CPU.
fn only(cpu: usize) -> Option<CpuSet> {
    let mut set = CpuSet::new();
    set.set(cpu).ok()?;
    Some(set)
}

/// How long `tid` has waited on a run queue in all (ns): the second field of
/// `/proc/<tid>/schedstat`.
fn run_delay(tid: Pid) -> Option<u64> {
    let text = crate::fs::read_proc(Path::new(&format!("/proc/{tid}/schedstat"))).ok()?;
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Idle plus I/O-wait clock ticks of every CPU, indexed by CPU number (`/proc/stat`).
fn idle_ticks() -> Option<Vec<u64>> {
    let text = crate::fs::read_proc(Path::new("/proc/stat")).ok()?;
    Some(parse_idle(&text))
}

/// The per-CPU lines of `/proc/stat` (`cpuN user nice system idle iowait …`) as idle plus
/// I/O-wait ticks indexed by N; CPUs missing from the text count 0.
fn parse_idle(text: &str) -> Vec<u64> {
    let mut idle = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(n) = fields
            .next()
            .and_then(|f| f.strip_prefix("cpu"))
            .and_then(|n| if n.is_empty() { None } else { n.parse::<usize>().ok() })
        else {
            continue;
        };
        let ticks: Vec<u64> = fields.take(5).filter_map(|f| f.parse().ok()).collect();
        let (Some(i), Some(w)) = (ticks.get(3), ticks.get(4)) else { continue };
        if idle.len() <= n {
            idle.resize(n + 1, 0);
        }
        if let Some(slot) = idle.get_mut(n) {
            *slot = i + w;
        }
    }
    idle
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_gives_idle_and_iowait_per_cpu() {
        let text = "cpu  10 0 5 900 7 0 0 0 0 0\n\
                    cpu0 5 0 2 400 3 0 0 0 0 0\n\
                    cpu2 5 0 3 500 4 0 0 0 0 0\n\
                    intr 12345\nctxt 99\n";
        assert_eq!(parse_idle(text), vec![403, 0, 504]);
    }

    #[test]
    fn released_only_when_waiting_while_another_cpu_idles() {
        let ms = Duration::from_millis;
        let w = |waited: u64| Window { waited: ms(waited), passed: ms(100), idle: ms(100) };
        let (before, after) = (vec![100, 100, 100, 100], vec![101, 115, 108, 100]);
        // 100 ms passed; CPU 1 idled 150 ms of ticks, CPU 2 80 ms, CPU 3 none.
        assert!(contended(w(30), &[0, 1, 2, 3], 0, &before, &after));
        // Waiting a quarter or less: stay.
        assert!(!contended(w(25), &[0, 1, 2, 3], 0, &before, &after));
        // CPU 1 not allowed: CPU 2 idled 80 ms > 50 ms.
        assert!(contended(w(30), &[0, 2, 3], 0, &before, &after));
        // Over a longer idle window (the ticks read 200 ms ago), CPU 2's 80 ms is not half.
        let longer = Window { idle: ms(200), ..w(30) };
        assert!(!contended(longer, &[0, 2, 3], 0, &before, &after));
        // Only CPU 3 (never idle) besides ours: every CPU is busy, stay.
        assert!(!contended(w(90), &[0, 3], 0, &before, &after));
        // Our own CPU's idle time does not count.
        assert!(!contended(w(90), &[0, 1], 1, &before, &after));
        // A CPU missing from /proc/stat counts as busy.
        assert!(!contended(w(90), &[0, 7], 0, &before, &after));
    }

    #[test]
    fn schedstat_of_this_thread_is_read() {
        // The tests run on Linux with schedstats (every kernel since 2.6.x exposes them).
        let delay = run_delay(nix::unistd::gettid());
        assert!(delay.is_some(), "/proc/<tid>/schedstat unreadable");
    }

    /// `Pin::start` for `pid` on a thread of its own (the pin restricts the calling thread,
    /// so a second pin from one thread would see one allowed CPU).
    fn pin_from_a_thread(pid: Pid, claims: &Path) -> Option<Pin> {
        let claims = claims.to_path_buf();
        std::thread::spawn(move || Pin::start(pid, Some(&claims))).join().unwrap()
    }

    fn allowed_cpus() -> Vec<usize> {
        cpus_of(&sched_getaffinity(Pid::from_raw(0)).unwrap())
    }

    fn sleeper() -> (std::process::Child, Pid) {
        let child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        (child, pid)
    }

    #[test]
    fn claims_give_each_pinned_tree_its_own_cpu_and_no_pin_when_all_are_taken() {
        let cpus = allowed_cpus();
        if cpus.len() < 2 {
            return; // one CPU: nothing is pinned (start_pins_a_child… checks that)
        }
        let d = tempfile::tempdir().unwrap();
        let claims = d.path().join("locks/cpu");
        let mut children = Vec::new();
        let mut pins = Vec::new();
        for _ in 0..cpus.len() {
            let (child, pid) = sleeper();
            children.push(child);
            pins.push(pin_from_a_thread(pid, &claims).expect("a CPU is still free"));
        }
        let mut got: Vec<usize> = pins.iter().map(|p| p.cpu).collect();
        got.sort_unstable();
        assert_eq!(got, cpus, "every pinned tree on a CPU of its own");
        for (p, c) in pins.iter().zip(&children) {
            let mask = sched_getaffinity(Pid::from_raw(i32::try_from(c.id()).unwrap())).unwrap();
            assert_eq!(cpus_of(&mask), vec![p.cpu]);
            assert!(claims.join(format!("{}.lock", p.cpu)).is_file());
        }
        // Every CPU claimed: the next tree is left to the kernel.
        let (extra, extra_pid) = sleeper();
        children.push(extra);
        assert!(pin_from_a_thread(extra_pid, &claims).is_none());
        // A tree that ends gives its CPU back.
        let freed = pins.remove(0).cpu;
        let again = pin_from_a_thread(extra_pid, &claims).expect("the freed CPU");
        assert_eq!(again.cpu, freed);
        assert_eq!(cpus_of(&sched_getaffinity(extra_pid).unwrap()), vec![freed]);
        stop(children);
    }

    /// Holds `path` with util-linux `flock --no-fork` (the lock dies with the killed
    /// process) and waits until it is taken.
    fn hold(path: &Path) -> std::process::Child {
        let child = std::process::Command::new("flock")
            .arg("--no-fork")
            .arg(path)
            .args(["sleep", "30"])
            .spawn()
            .expect("util-linux flock");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(path.exists()
            && fs::lock_exclusive(path, LockWait::Immediately, &mut |_| {})
                .is_err_and(|e| e.is_lock_timeout()))
        {
            assert!(Instant::now() < deadline, "flock never took {}", path.display());
            std::thread::sleep(Duration::from_millis(10));
        }
        child
    }

    /// A claims directory in which other processes hold every allowed CPU's claim but the
    /// last one's: the directory's guard, its path, the last CPU, the holders. `None` with
    /// one allowed CPU (nothing is pinned there).
    fn all_claimed_but_the_last()
    -> Option<(tempfile::TempDir, std::path::PathBuf, usize, Vec<std::process::Child>)> {
        let cpus = allowed_cpus();
        let (&last, held) = cpus.split_last()?;
        if held.is_empty() {
            return None;
        }
        let d = tempfile::tempdir().unwrap();
        let claims = d.path().join("cpu");
        std::fs::create_dir_all(&claims).unwrap();
        let holders = held.iter().map(|c| hold(&claims.join(format!("{c}.lock")))).collect();
        Some((d, claims, last, holders))
    }

    fn stop(children: Vec<std::process::Child>) {
        for mut c in children {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    #[test]
    fn a_cpu_claimed_by_another_process_is_skipped() {
        let Some((_d, claims, last, mut holders)) = all_claimed_but_the_last() else { return };
        let (child, pid) = sleeper();
        let pin = pin_from_a_thread(pid, &claims).expect("one CPU is free");
        assert_eq!(pin.cpu, last);
        drop(pin);
        // Every claim held by others: not pinned.
        holders.push(hold(&claims.join(format!("{last}.lock"))));
        assert!(pin_from_a_thread(pid, &claims).is_none());
        holders.push(child);
        stop(holders);
    }

    #[test]
    fn a_lock_file_that_cannot_be_opened_never_pins_to_a_claimed_cpu() {
        let Some((_d, claims, last, mut holders)) = all_claimed_but_the_last() else { return };
        // The last CPU's lock file cannot be opened (a directory stands there).
        std::fs::create_dir(claims.join(format!("{last}.lock"))).unwrap();
        let (child, pid) = sleeper();
        // From whichever CPU the thread starts on: never pinned to a claimed CPU.
        for _ in 0..20 {
            assert!(pin_from_a_thread(pid, &claims).is_none());
        }
        holders.push(child);
        stop(holders);
    }

    #[test]
    fn an_unusable_claims_directory_pins_without_a_claim() {
        if allowed_cpus().len() < 2 {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let not_a_dir = d.path().join("cpu");
        std::fs::write(&not_a_dir, b"a file where the claims directory would be").unwrap();
        let (mut child, pid) = sleeper();
        let pin = pin_from_a_thread(pid, &not_a_dir).expect("pinned without a claim");
        assert!(pin.claim.is_none());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn start_pins_a_child_and_drop_restores_the_tracer() {
        let me = Pid::from_raw(0);
        let before = sched_getaffinity(me).unwrap();
        let cpus = (0..CpuSet::count()).filter(|&c| before.is_set(c).unwrap()).count();
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        let pin = Pin::start(pid, None);
        if cpus < 2 {
            assert!(pin.is_none(), "one allowed CPU: nothing to pin");
        } else {
            let pin = pin.expect("pinned");
            let mask = sched_getaffinity(pid).unwrap();
            let set: Vec<usize> =
                (0..CpuSet::count()).filter(|&c| mask.is_set(c).unwrap()).collect();
            assert_eq!(set, vec![pin.cpu]);
            drop(pin);
            let after = sched_getaffinity(me).unwrap();
            assert_eq!((0..CpuSet::count()).filter(|&c| after.is_set(c).unwrap()).count(), cpus);
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
