//! The JSONL event log (`--event-log` or `STRATA_EVENT_LOG`; docs/reference.md "Events").
//!
//! One compact JSON object per line, keys sorted, each line written with a single
//! `write(2)` on a file opened `O_WRONLY|O_APPEND|O_CREAT` (mode 0644), so concurrent
//! strata processes interleave whole lines without a lock. Every error is swallowed:
//! telemetry never changes an outcome and never makes a build wait.
//!
//! Common fields: `event`, `ts_ms` (Unix time in milliseconds), `pid`. Action events add
//! `domain`, `unit`, `soc`, `operator`, `action` (null when absent) and `key`.
//!
//! | `event` | extra fields |
//! |---|---|
//! | `cache_result` | `status` (`HIT`, `MISS`, `SAVED`, `BYPASS`), then per status: HIT `hash_ms`, `lookup_ms`, `restore_ms`, `total_ms`, `artifacts`, `bytes`, `hashed_bytes`, `vouched_files`; MISS `hash_ms`, `lookup_ms`; SAVED `build_ms`, `save_ms`, `total_ms`, `artifacts`; BYPASS `reason`, `hash_ms`, `total_ms` (time until the cache was given up, lock wait included) |
//! | `warning` | `component` (`validate`, `restore`, `save`, `collect`, `updated_marker`, `prune`), `message` |
//! | `lock_wait` | `lock` (`entry`, `action`, `publish`), `path`, `waited_ms` (at 1 s, 6 s, 11 s, …) |
//! | `lock_acquired` | `lock`, `path`, `waited_ms` (only after waiting ≥ 1 s) |
//! | `lock_timeout` | `lock`, `path`, `waited_ms` |

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// An open event log (or a disabled one).
#[derive(Debug, Default)]
pub struct EventLog {
    file: Option<File>,
    base: Map<String, Value>,
}

impl EventLog {
    /// A log that drops everything.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Opens `path` for appending (creating parent directories); any failure gives a
    /// disabled log.
    pub fn open(path: Option<&Path>) -> Self {
        let Some(path) = path.filter(|p| !p.as_os_str().is_empty()) else {
            return Self::disabled();
        };
        let path = crate::fs::expand_tilde(path);
        if let Some(parent) = path.parent() {
            let _ = crate::fs::create_dir_all(parent);
        }
        Self { file: crate::fs::open_append(&path).ok(), base: Map::new() }
    }

    /// True if events are written somewhere.
    pub fn is_enabled(&self) -> bool {
        self.file.is_some()
    }

    /// Sets a field added to every later event (e.g. `domain`, `unit`, `key`).
    pub fn set_base(&mut self, name: &str, value: impl Into<Value>) {
        self.base.insert(name.to_owned(), value.into());
    }

    /// Writes one event with the base fields plus `fields`.
    pub fn emit(&self, event: &str, fields: &[(&str, Value)]) {
        let Some(file) = &self.file else { return };
        let mut map = self.base.clone();
        map.insert("event".into(), event.into());
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        map.insert("ts_ms".into(), (now.as_millis() as u64).into());
        map.insert("pid".into(), std::process::id().into());
        for (k, v) in fields {
            map.insert((*k).to_owned(), v.clone());
        }
        let mut line = Value::Object(map).to_string();
        line.push('\n');
        let mut f = file;
        let _ = f.write(line.as_bytes());
    }
}

/// Milliseconds as a JSON integer.
pub fn ms(d: Duration) -> Value {
    Value::from(d.as_millis() as u64)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_sorted_json() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/events.jsonl");
        let mut log = EventLog::open(Some(&p));
        log.set_base("unit", "u");
        log.emit(
            "cache_result",
            &[("status", "HIT".into()), ("hash_ms", ms(Duration::from_millis(3)))],
        );
        log.emit("warning", &[("message", "m".into())]);
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["status"], "HIT");
        assert_eq!(v["hash_ms"], 3);
        assert_eq!(v["unit"], "u");
        assert!(lines[0].starts_with("{\"event\":\"cache_result\",\"hash_ms\":3"));
        // An unwritable path disables the log without failing.
        let bad = EventLog::open(Some(Path::new("/proc/no/such/dir/x.jsonl")));
        assert!(!bad.is_enabled());
        bad.emit("x", &[]);
    }
}
