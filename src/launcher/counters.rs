//! Launcher counters: hits, misses and the reasons compilations were not
//! cached, like `ccache -s`. Machine-local: they live under `.local/launcher-stats/` of the
//! cache root and are never packed into a snapshot.
//!
//! Concurrent launchers spread over [`SHARDS`] files chosen by process id; each update
//! takes the shard's `flock`, reads the JSON object of counters, adds one and rewrites it
//! in place. A damaged shard (a crash mid-write) reads as empty: counters are a report,
//! never an input to caching.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use crate::content::layout::CacheRoot;
use crate::fs;

/// Number of shard files.
pub const SHARDS: u32 = 16;

/// Counter names: `hit`, `miss`, `compile_failed`, `save_failed`, `error` (the launcher
/// could not look up and ran the compiler without the cache), `input_changed` (a source
/// or header changed while the compiler ran: not saved), or `uncacheable:<reason>` (a
/// [`super::args::Reason`] name, `compiler_not_found`, `environment_<variable>`,
/// `output_not_regular_file`, `time_macros`, `incomplete_depfile`).
pub type Counters = BTreeMap<String, u64>;

/// `.local/launcher-stats`.
pub fn dir(cache: &CacheRoot) -> PathBuf {
    cache.local_dir().join("launcher-stats")
}

/// Adds one to `name` (failures are logged at debug level and ignored).
pub fn bump(cache: &CacheRoot, name: &str) {
    if let Err(e) = try_bump(&dir(cache), name) {
        tracing::debug!("launcher counters not updated: {e}");
    }
}

fn try_bump(dir: &Path, name: &str) -> std::io::Result<()> {
    fs::create_dir_all(dir).map_err(std::io::Error::other)?;
    let path = dir.join(format!("{}.json", std::process::id() % SHARDS));
    let mut file = fs::open_update(&path).map_err(std::io::Error::other)?;
    flock(&file, FlockOperation::LockExclusive).map_err(std::io::Error::from)?;
    let mut text = Vec::new();
    let mut counters: Counters = match file.read_to_end(&mut text) {
        Ok(_) => serde_json::from_slice(&text).unwrap_or_default(),
        Err(_) => Counters::new(),
    };
    *counters.entry(name.to_owned()).or_default() += 1;
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
pub fn read(cache: &CacheRoot) -> Counters {
    let mut total = Counters::new();
    let Ok(entries) = fs::read_dir(&dir(cache)) else { return total };
    for path in entries {
        let Ok(text) = fs::read_to_string(&path) else { continue };
        let Ok(counters) = serde_json::from_str::<Counters>(&text) else { continue };
        for (name, n) in counters {
            *total.entry(name).or_default() += n;
        }
    }
    total
}

/// Removes every shard (`strata stats --zero`).
///
/// # Errors
/// I/O errors other than not-found, naming the directory.
pub fn zero(cache: &CacheRoot) -> Result<(), fs::Error> {
    match fs::remove_tree(&dir(cache)) {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_bumps_are_all_counted() {
        let d = tempfile::tempdir().unwrap();
        let cache = CacheRoot::new(d.path()).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..25 {
                        bump(&cache, "hit");
                    }
                });
            }
        });
        bump(&cache, "uncacheable:not_compile_only");
        let counters = read(&cache);
        assert_eq!(counters.get("hit"), Some(&100));
        assert_eq!(counters.get("uncacheable:not_compile_only"), Some(&1));
        zero(&cache).unwrap();
        assert!(read(&cache).is_empty());
    }

    /// A shard is rewritten in place, not truncated first: a damaged shard longer than the
    /// new text must not keep its tail (it would make the shard unreadable again).
    #[test]
    fn a_damaged_longer_shard_is_replaced_whole() {
        let d = tempfile::tempdir().unwrap();
        let cache = CacheRoot::new(d.path()).unwrap();
        std::fs::create_dir_all(dir(&cache)).unwrap();
        let shard = dir(&cache).join(format!("{}.json", std::process::id() % SHARDS));
        std::fs::write(&shard, vec![b'x'; 200]).unwrap();
        bump(&cache, "hit");
        assert_eq!(std::fs::read_to_string(&shard).unwrap(), r#"{"hit":1}"#);
        bump(&cache, "miss");
        assert_eq!(std::fs::read_to_string(&shard).unwrap(), r#"{"hit":1,"miss":1}"#);
    }
}
