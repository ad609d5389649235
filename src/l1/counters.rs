//! Hit and miss counters per domain (issue 10 item 6, issue 11 item 5), like `ccache -s`:
//! the compiler launcher counts its compilations (domain [`COMPILE`]), `strata action run`
//! its actions (domains `third_party` and `custom_operator`). `strata stats` and the step
//! summary of `strata snapshot save` show them with the hit rate ([`HitRate`]).
//!
//! Machine-local: they live under `.local/counters/` of the cache root and are never packed
//! into a snapshot; a restore that replaces the cache directory starts them from zero (so
//! in CI, the counts a save reports are the job's own).
//!
//! Format: shard files `<0..15>.json`, each one JSON object `{"<domain>": {"<name>": n}}`.
//! Concurrent processes spread over [`SHARDS`] files chosen by process id; each update
//! takes the shard's `flock`, reads it, adds one and rewrites it in place. A damaged shard
//! (a crash mid-write) reads as empty: counters are a report, never an input to caching.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use crate::fs;
use crate::l1::layout::CacheRoot;

/// Number of shard files.
pub const SHARDS: u32 = 16;

/// The launcher's domain: compilations through `strata <compiler>` or `strata compile`.
pub const COMPILE: &str = "compile";

/// The domain of archive steps through the launcher (`hit`, `miss`, `archive_failed`,
/// `save_failed`, `input_changed`, `error`, `uncacheable:<reason>`).
pub const ARCHIVE: &str = "archive";

/// The domain of how compiles that ran were observed (`trace`, `model`).
pub const COMPILE_OBSERVED: &str = "compile_observed";

/// The domain of the launcher's hints (`embedded_path_miss`: a MISS because the cached
/// objects embed another checkout's path; `saved_pinned`: a result saved that names this
/// checkout's paths, reusable only where they hold).
pub const COMPILE_HINTS: &str = "compile_hints";

/// The counters of one domain, by name.
///
/// Names: `hit`, `miss` (every domain); `bypass` (actions built without the cache, e.g. the
/// entry lock was unavailable); launcher only: `compile_failed`, `save_failed`, `error` (the
/// launcher could not look up and ran the compiler without the cache), `input_changed` (a
/// source or header changed while the compiler ran: not saved), or `uncacheable:<reason>`
/// (a `launcher::args::Reason` name, `compiler_not_found`, `compiler_is_a_wrapper`,
/// `environment_<variable>`, `output_not_regular_file`, `time_macros`, `incomplete_depfile`).
pub type Counters = BTreeMap<String, u64>;

/// Counters by domain (`compile`, `third_party`, `custom_operator`).
pub type ByDomain = BTreeMap<String, Counters>;

/// `.local/counters`.
pub fn dir(cache: &CacheRoot) -> PathBuf {
    cache.local_dir().join("counters")
}

/// The directory of earlier releases (the launcher's counters only); [`zero`] removes it.
fn legacy_dir(cache: &CacheRoot) -> PathBuf {
    cache.local_dir().join("launcher-stats")
}

/// Adds one to `name` of `domain` (failures are logged at debug level and ignored).
pub fn bump(cache: &CacheRoot, domain: &str, name: &str) {
    bump_all(cache, &[(domain, name)]);
}

/// Adds one to each `(domain, name)` of `counts` in one update of one shard (one lock, one
/// read, one write: a MISS counts how it was observed and its outcome together). Failures
/// are logged at debug level and ignored.
pub fn bump_all(cache: &CacheRoot, counts: &[(&str, &str)]) {
    if counts.is_empty() {
        return;
    }
    if let Err(e) = try_bump(&dir(cache), counts) {
        tracing::debug!("counters not updated: {e}");
    }
}

fn try_bump(dir: &Path, counts: &[(&str, &str)]) -> std::io::Result<()> {
    fs::create_dir_all(dir).map_err(std::io::Error::other)?;
    let path = dir.join(format!("{}.json", std::process::id() % SHARDS));
    let mut file = fs::open_update(&path).map_err(std::io::Error::other)?;
    flock(&file, FlockOperation::LockExclusive).map_err(std::io::Error::from)?;
    let mut text = Vec::new();
    let mut counters: ByDomain = match file.read_to_end(&mut text) {
        Ok(_) => serde_json::from_slice(&text).unwrap_or_default(),
        Err(_) => ByDomain::new(),
    };
    for (domain, name) in counts {
        *counters
            .entry((*domain).to_owned())
            .or_default()
            .entry((*name).to_owned())
            .or_default() += 1;
    }
    let bytes = serde_json::to_vec(&counters).map_err(std::io::Error::other)?;
    // Overwritten in place, never truncated to zero first: counters only grow, so the new
    // text is as long as the old one or longer (shorter only after a damaged shard read as
    // empty). On ext4, truncating a file that has data and rewriting it makes the kernel
    // flush it (`auto_da_alloc`), which cost a HIT several milliseconds.
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&bytes)?;
    if bytes.len() < text.len() {
        file.set_len(bytes.len() as u64)?;
    }
    Ok(())
}

/// The sum of every shard under `cache` (missing or damaged shards count as empty).
pub fn read(cache: &CacheRoot) -> ByDomain {
    let mut total = ByDomain::new();
    let Ok(entries) = fs::read_dir(&dir(cache)) else { return total };
    for path in entries {
        let Ok(text) = fs::read_to_string(&path) else { continue };
        let Ok(shard) = serde_json::from_str::<ByDomain>(&text) else { continue };
        for (domain, counters) in shard {
            let sum = total.entry(domain).or_default();
            for (name, n) in counters {
                *sum.entry(name).or_default() += n;
            }
        }
    }
    total
}

/// Removes every shard (`strata stats --zero`), and the launcher counters of earlier
/// releases.
///
/// # Errors
/// I/O errors other than not-found, naming the directory.
pub fn zero(cache: &CacheRoot) -> Result<(), fs::Error> {
    for dir in [dir(cache), legacy_dir(cache)] {
        match fs::remove_tree(&dir) {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Hits, misses and the hit rate of one domain.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct HitRate {
    /// `hit` count.
    pub hits: u64,
    /// `miss` count.
    pub misses: u64,
    /// `100 × hits / (hits + misses)`, rounded to one decimal; `None` before the first hit
    /// or miss.
    pub hit_rate_percent: Option<f64>,
}

impl HitRate {
    /// The rate of `counters` (a domain's counters; none: zero hits and misses).
    pub fn of(counters: Option<&Counters>) -> Self {
        let count = |name: &str| counters.and_then(|c| c.get(name)).copied().unwrap_or(0);
        let (hits, misses) = (count("hit"), count("miss"));
        let total = hits + misses;
        let hit_rate_percent =
            (total > 0).then(|| (hits as f64 * 1000.0 / total as f64).round() / 10.0);
        Self { hits, misses, hit_rate_percent }
    }

    /// `12 hits, 3 misses (80.0 % hit rate)`, or `12 hits, 3 misses` when there is no
    /// rate.
    pub fn describe(&self) -> String {
        let mut text = format!("{} hits, {} misses", self.hits, self.misses);
        if let Some(rate) = self.hit_rate_percent {
            text.push_str(&format!(" ({rate:.1} % hit rate)"));
        }
        text
    }
}

/// One line for a summary: `third_party 12/15 (80.0 %) · compile 90/100 (90.0 %)`, each
/// domain with hits or misses as hits / (hits + misses) and the hit rate, in the order
/// `third_party`, `custom_operator`, `compile`, then others; `no hits or misses counted`
/// when there are none.
pub fn summary(counters: &ByDomain) -> String {
    let known = ["third_party", "custom_operator", COMPILE];
    let others = counters.keys().filter(|d| !known.contains(&d.as_str())).map(String::as_str);
    let parts: Vec<String> = known
        .into_iter()
        .chain(others)
        .filter_map(|domain| {
            let rate = HitRate::of(counters.get(domain));
            let percent = rate.hit_rate_percent?;
            Some(format!("{domain} {}/{} ({percent:.1} %)", rate.hits, rate.hits + rate.misses))
        })
        .collect();
    if parts.is_empty() { "no hits or misses counted".to_owned() } else { parts.join(" · ") }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// A shard is rewritten in place, not truncated first: a damaged shard longer than the
    /// new text must not keep its tail (it would make the shard unreadable again).
    #[test]
    fn a_damaged_longer_shard_is_replaced_whole() {
        let d = tempfile::tempdir().unwrap();
        let cache = CacheRoot::new(d.path()).unwrap();
        std::fs::create_dir_all(dir(&cache)).unwrap();
        let shard = dir(&cache).join(format!("{}.json", std::process::id() % SHARDS));
        std::fs::write(&shard, vec![b'x'; 200]).unwrap();
        bump(&cache, "compile", "hit");
        assert_eq!(std::fs::read_to_string(&shard).unwrap(), r#"{"compile":{"hit":1}}"#);
        bump(&cache, "compile", "miss");
        assert_eq!(std::fs::read_to_string(&shard).unwrap(), r#"{"compile":{"hit":1,"miss":1}}"#);
    }

    #[test]
    fn bump_all_counts_each_pair_in_one_update() {
        let d = tempfile::tempdir().unwrap();
        let cache = CacheRoot::new(d.path()).unwrap();
        bump_all(&cache, &[]);
        assert!(!dir(&cache).exists(), "nothing to count creates nothing");
        bump_all(&cache, &[(COMPILE_OBSERVED, "trace"), (COMPILE, "miss")]);
        bump_all(&cache, &[(COMPILE_OBSERVED, "trace"), (COMPILE, "miss"), (COMPILE, "miss")]);
        let counters = read(&cache);
        assert_eq!(counters[COMPILE_OBSERVED].get("trace"), Some(&2));
        assert_eq!(counters[COMPILE].get("miss"), Some(&3));
    }

    #[test]
    fn concurrent_bumps_are_all_counted_per_domain() {
        let d = tempfile::tempdir().unwrap();
        let cache = CacheRoot::new(d.path()).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..25 {
                        bump(&cache, COMPILE, "hit");
                        bump(&cache, "third_party", "miss");
                    }
                });
            }
        });
        bump(&cache, COMPILE, "uncacheable:not_compile_only");
        bump(&cache, "third_party", "hit");
        let counters = read(&cache);
        assert_eq!(counters[COMPILE].get("hit"), Some(&100));
        assert_eq!(counters[COMPILE].get("uncacheable:not_compile_only"), Some(&1));
        assert_eq!(counters["third_party"].get("miss"), Some(&100));
        assert_eq!(counters["third_party"].get("hit"), Some(&1));
        assert_eq!(summary(&counters), "third_party 1/101 (1.0 %) · compile 100/100 (100.0 %)");
        std::fs::create_dir_all(legacy_dir(&cache)).unwrap();
        zero(&cache).unwrap();
        assert!(read(&cache).is_empty());
        assert!(!legacy_dir(&cache).exists());
        assert_eq!(summary(&read(&cache)), "no hits or misses counted");
    }

    #[test]
    fn hit_rates_round_to_one_decimal() {
        let counters: Counters = [("hit".to_owned(), 2), ("miss".to_owned(), 1)].into();
        let rate = HitRate::of(Some(&counters));
        assert_eq!(rate, HitRate { hits: 2, misses: 1, hit_rate_percent: Some(66.7) });
        assert_eq!(rate.describe(), "2 hits, 1 misses (66.7 % hit rate)");
        let none = HitRate::of(None);
        assert_eq!(none.hit_rate_percent, None);
        assert_eq!(none.describe(), "0 hits, 0 misses");
        // Bypasses are not misses: they say nothing about what the cache holds.
        let bypass: Counters = [("bypass".to_owned(), 5)].into();
        assert_eq!(HitRate::of(Some(&bypass)).hit_rate_percent, None);
    }
}
