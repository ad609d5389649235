//! Showing the library's progress reports ([`strata::progress`]) on stderr.
//!
//! * On a terminal: a bar per phase (indicatif) with the bytes done and total, the rate
//!   and the ETA, redrawn at most 20 times a second and cleared when the phase ends.
//! * When stderr is not a terminal, or under GitHub Actions (`GITHUB_ACTIONS=true`), where
//!   a log keeps every line: a plain line at most every 10 s, e.g.
//!   `strata: restore 1.20 GiB / 3.40 GiB (35 %), 120.0 MiB/s, ETA 18 s`. The first comes
//!   10 s after the command started, so a quick command prints none; one interval holds
//!   across phases, so a save's `pack` and `upload` together still print at most one line
//!   per interval.
//! * `STRATA_PROGRESS=off`: nothing. `STRATA_PROGRESS=lines` forces the plain lines on a
//!   terminal too.
//!
//! `STRATA_PROGRESS_INTERVAL` (whole seconds, 1–3600) changes the interval of the plain
//! lines; by default 10 s ([`DEFAULT_INTERVAL`]).
//!
//! Log lines (`src/cli/log.rs`) go through [`suspend`], which hides an active bar while
//! they are written, so a warning during a restore is not drawn over.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::output::errln;

/// The least time between two plain progress lines, unless `STRATA_PROGRESS_INTERVAL`
/// says otherwise.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// The bar being drawn, if any: [`suspend`] hides it while a log line is written.
static ACTIVE_BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `write` with the active progress bar (if any) hidden, then redraws it.
pub(crate) fn suspend<R>(write: impl FnOnce() -> R) -> R {
    let bar = lock(&ACTIVE_BAR).clone();
    match bar {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Bar,
    Lines(Duration),
    Off,
}

/// The style for this process: `STRATA_PROGRESS`, `GITHUB_ACTIONS`, whether stderr is a
/// terminal, `STRATA_PROGRESS_INTERVAL` (see the module docs).
fn style(env: impl Fn(&str) -> Option<String>, stderr_is_terminal: bool) -> Style {
    let interval = interval(env("STRATA_PROGRESS_INTERVAL").as_deref());
    let chosen = env("STRATA_PROGRESS").unwrap_or_default().trim().to_ascii_lowercase();
    match chosen.as_str() {
        "off" | "none" | "0" | "false" => Style::Off,
        "lines" | "plain" => Style::Lines(interval),
        _ if env("GITHUB_ACTIONS").is_some_and(|v| v == "true") || !stderr_is_terminal => {
            Style::Lines(interval)
        }
        _ => Style::Bar,
    }
}

/// `STRATA_PROGRESS_INTERVAL` in whole seconds (1–3600); anything else is the default.
fn interval(value: Option<&str>) -> Duration {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| (1..=3600).contains(s))
        .map_or(DEFAULT_INTERVAL, Duration::from_secs)
}

/// Decides when a plain line may be printed: never twice within the interval, and the
/// first one interval after the start. Time is passed in, so tests drive it.
#[derive(Debug, Clone)]
pub(crate) struct Limiter {
    interval: Duration,
    next: Instant,
}

impl Limiter {
    /// A limiter whose first line is due one `interval` after `start`.
    pub(crate) fn new(start: Instant, interval: Duration) -> Self {
        Self { interval, next: start + interval }
    }

    /// True (and the next line is one interval away) if a line is due at `now`.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + self.interval;
        true
    }

    /// How long from `now` until a line is due.
    pub(crate) fn wait(&self, now: Instant) -> Duration {
        self.next.saturating_duration_since(now)
    }
}

/// `1.20 GiB / 3.40 GiB (35 %), 120.0 MiB/s, ETA 18 s` after the label; without a total,
/// `1.20 GiB, 120.0 MiB/s`.
pub(crate) fn line(label: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let bytes = strata::ci::human_bytes;
    let seconds = elapsed.as_secs_f64();
    let rate = if seconds > 0.0 { done as f64 / seconds } else { 0.0 };
    let mut text = format!("strata: {label} {}", bytes(done));
    if total > 0 {
        let percent = (done.min(total) as f64 * 100.0 / total as f64).floor();
        text.push_str(&format!(" / {} ({percent:.0} %)", bytes(total)));
    }
    text.push_str(&format!(", {}/s", bytes(rate as u64)));
    if total > done && rate > 0.0 {
        let eta = ((total - done) as f64 / rate).ceil() as u64;
        text.push_str(&format!(", ETA {}", duration_text(eta)));
    }
    text
}

/// `18 s`, `3 min 20 s`, `2 h 05 min`.
fn duration_text(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {} s", seconds / 60, seconds % 60),
        _ => format!("{} h {:02} min", seconds / 3600, seconds % 3600 / 60),
    }
}

/// The phase being reported as plain lines.
struct Current {
    label: String,
    total: u64,
    started: Instant,
}

/// What the plain-line ticker and the reporter share.
struct Lines {
    limiter: Mutex<Limiter>,
    current: Mutex<Option<Current>>,
    done: AtomicU64,
}

impl Lines {
    /// Prints the current phase's line if one is due at `now`.
    fn tick(&self, now: Instant) {
        // Taken first: a due line moves the next one away even without a phase, so the
        // ticker never spins.
        if !lock(&self.limiter).take(now) {
            return;
        }
        let current = lock(&self.current);
        let Some(current) = current.as_ref() else { return };
        let done = self.done.load(Ordering::Relaxed);
        let text = line(&current.label, done, current.total, now - current.started);
        errln!("{text}");
    }
}

/// A phase's ticker thread: wakes when a line is due, until told to stop.
struct Ticker {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

/// Shows the library's progress on stderr (see the module docs).
pub(crate) struct Reporter {
    style: Style,
    bar: Mutex<Option<ProgressBar>>,
    lines: Arc<Lines>,
    ticker: Mutex<Option<Ticker>>,
}

impl Reporter {
    /// A reporter in the style the environment and stderr call for.
    pub(crate) fn from_env() -> Self {
        Self::new(style(|name| std::env::var(name).ok(), std::io::stderr().is_terminal()))
    }

    fn new(style: Style) -> Self {
        let interval = match style {
            Style::Lines(interval) => interval,
            _ => DEFAULT_INTERVAL,
        };
        Self {
            style,
            bar: Mutex::new(None),
            lines: Arc::new(Lines {
                limiter: Mutex::new(Limiter::new(Instant::now(), interval)),
                current: Mutex::new(None),
                done: AtomicU64::new(0),
            }),
            ticker: Mutex::new(None),
        }
    }

    fn begin_bar(&self, label: &str, total_bytes: u64) {
        let bar = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
        let template = "strata: {msg} {binary_bytes}/{binary_total_bytes} [{wide_bar}] \
                        {binary_bytes_per_sec}, ETA {eta}";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.to_owned());
        bar.enable_steady_tick(Duration::from_millis(250));
        *lock(&ACTIVE_BAR) = Some(bar.clone());
        if let Some(old) = lock(&self.bar).replace(bar) {
            old.finish_and_clear();
        }
    }

    fn begin_lines(&self, label: &str, total_bytes: u64) {
        self.stop_ticker();
        self.lines.done.store(0, Ordering::Relaxed);
        *lock(&self.lines.current) =
            Some(Current { label: label.to_owned(), total: total_bytes, started: Instant::now() });
        let (stop, stopped) = channel::<()>();
        let lines = Arc::clone(&self.lines);
        let thread = std::thread::spawn(move || {
            loop {
                let wait = lock(&lines.limiter).wait(Instant::now());
                match stopped.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => lines.tick(Instant::now()),
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        });
        *lock(&self.ticker) = Some(Ticker { stop, thread });
    }

    fn stop_ticker(&self) {
        if let Some(ticker) = lock(&self.ticker).take() {
            let _ = ticker.stop.send(());
            let _ = ticker.thread.join();
        }
    }
}

impl strata::progress::Progress for Reporter {
    fn begin(&self, label: &str, total_bytes: u64) {
        match self.style {
            Style::Bar => self.begin_bar(label, total_bytes),
            Style::Lines(_) => self.begin_lines(label, total_bytes),
            Style::Off => {}
        }
    }

    fn advance(&self, bytes: u64) {
        match self.style {
            Style::Bar => {
                if let Some(bar) = lock(&self.bar).as_ref() {
                    bar.inc(bytes);
                }
            }
            Style::Lines(_) => {
                self.lines.done.fetch_add(bytes, Ordering::Relaxed);
            }
            Style::Off => {}
        }
    }

    fn finish(&self) {
        match self.style {
            Style::Bar => {
                if let Some(bar) = lock(&self.bar).take() {
                    bar.finish_and_clear();
                }
                *lock(&ACTIVE_BAR) = None;
            }
            Style::Lines(_) => {
                self.stop_ticker();
                *lock(&self.lines.current) = None;
            }
            Style::Off => {}
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        strata::progress::Progress::finish(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn the_style_follows_the_terminal_github_actions_and_strata_progress() {
        let ten = Style::Lines(DEFAULT_INTERVAL);
        assert_eq!(style(env(&[]), true), Style::Bar);
        assert_eq!(style(env(&[]), false), ten);
        assert_eq!(style(env(&[("GITHUB_ACTIONS", "true")]), true), ten);
        assert_eq!(style(env(&[("GITHUB_ACTIONS", "false")]), true), Style::Bar);
        assert_eq!(style(env(&[("STRATA_PROGRESS", "off")]), true), Style::Off);
        assert_eq!(style(env(&[("STRATA_PROGRESS", "OFF")]), false), Style::Off);
        assert_eq!(style(env(&[("STRATA_PROGRESS", "lines")]), true), ten);
        let two = env(&[("STRATA_PROGRESS_INTERVAL", "2")]);
        assert_eq!(style(two, false), Style::Lines(Duration::from_secs(2)));
        for bad in ["0", "-1", "0.5", "3601", "ten", ""] {
            assert_eq!(interval(Some(bad)), DEFAULT_INTERVAL, "{bad:?}");
        }
        assert_eq!(interval(None), Duration::from_secs(10));
    }

    /// The default: over 65 s of reports every 100 ms, a line at 10, 20, … 60 s, and never
    /// two within 10 s.
    #[test]
    fn lines_are_at_least_the_default_interval_apart() {
        let start = Instant::now();
        let mut limiter = Limiter::new(start, DEFAULT_INTERVAL);
        let mut printed = Vec::new();
        for step in 0..=650u64 {
            let now = start + Duration::from_millis(step * 100);
            if limiter.take(now) {
                printed.push(now - start);
            }
        }
        let secs: Vec<u64> = printed.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [10, 20, 30, 40, 50, 60]);
        assert!(printed.windows(2).all(|w| w[1] - w[0] >= DEFAULT_INTERVAL));
        // A quick command prints nothing; the wait is what is left of the interval.
        let limiter = Limiter::new(start, DEFAULT_INTERVAL);
        assert_eq!(limiter.wait(start + Duration::from_secs(4)), Duration::from_secs(6));
        assert_eq!(limiter.wait(start + Duration::from_secs(40)), Duration::ZERO);
        // A report that comes late moves the next line one interval past it.
        let mut limiter = Limiter::new(start, DEFAULT_INTERVAL);
        assert!(limiter.take(start + Duration::from_secs(25)));
        assert!(!limiter.take(start + Duration::from_secs(34)));
        assert!(limiter.take(start + Duration::from_secs(35)));
    }

    #[test]
    fn a_line_has_bytes_percent_rate_and_eta() {
        let gib = 1024 * 1024 * 1024;
        let text = line("restore", gib, 4 * gib, Duration::from_secs(8));
        assert_eq!(text, "strata: restore 1.00 GiB / 4.00 GiB (25 %), 128.0 MiB/s, ETA 24 s");
        let text = line("pack", 3 * 1024 * 1024, 0, Duration::from_secs(3));
        assert_eq!(text, "strata: pack 3.0 MiB, 1.0 MiB/s");
        // More than the estimated total: 100 %, no ETA.
        let text = line("verify", 2048, 1024, Duration::from_secs(1));
        assert_eq!(text, "strata: verify 2.0 KiB / 1.0 KiB (100 %), 2.0 KiB/s");
        assert_eq!(duration_text(200), "3 min 20 s");
        assert_eq!(duration_text(7500), "2 h 05 min");
    }
}
