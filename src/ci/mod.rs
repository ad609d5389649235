//! GitHub Actions I/O, for the composite actions in `actions/`: step outputs and environment files,
//! the step summary, workflow commands (`::warning::`, `::notice::`, `::add-mask::`, groups) and
//! the HIT/MISS counts of a strata event log.
//!
//! Only the command line calls this module; library code never does (it returns reports
//! and the CLI decides how to show them).
//!
//! # Formats
//! * `GITHUB_OUTPUT` / `GITHUB_ENV`: one `name=value` line per entry, or for a value
//!   containing a newline the block form `name<<DELIM` / value lines / `DELIM`, with a
//!   random delimiter `ghadelimiter_<32 hex>` checked not to occur in the value. Names are
//!   `[A-Za-z0-9_-]+` (no `=`, no newline). Files are appended to, never truncated.
//! * Workflow commands are single lines: `::warning title=T::message`, with `%`, `\r` and
//!   `\n` escaped in the message (`%25`, `%0D`, `%0A`) and additionally `:` and `,` in
//!   properties, as the runner expects.
//! * The event log is strata's JSONL (`crate::l1::events`): every line with
//!   `"event":"cache_result"` is counted by its `status`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::fs;

/// A GitHub I/O failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A name that cannot be written to an environment file.
    #[error("invalid GitHub output/env name {name:?}: use letters, digits, '_' and '-'")]
    InvalidName {
        /// The name.
        name: String,
    },
    /// The file could not be written.
    #[error(transparent)]
    Local(#[from] fs::Error),
}

/// The GitHub Actions files of the current step, from the environment.
#[derive(Debug, Clone, Default)]
pub struct Github {
    /// True when `GITHUB_ACTIONS=true` (annotations are printed as workflow commands).
    pub actions: bool,
    output: Option<PathBuf>,
    env: Option<PathBuf>,
    summary: Option<PathBuf>,
}

fn check_name(name: &str) -> Result<(), Error> {
    let ok =
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok { Ok(()) } else { Err(Error::InvalidName { name: name.to_owned() }) }
}

/// Formats one entry for `GITHUB_OUTPUT` / `GITHUB_ENV` (see the module docs).
///
/// # Errors
/// [`Error::InvalidName`].
pub fn format_entry(name: &str, value: &str) -> Result<String, Error> {
    check_name(name)?;
    if !value.contains('\n') && !value.contains('\r') {
        return Ok(format!("{name}={value}\n"));
    }
    let mut delimiter;
    loop {
        delimiter = format!("ghadelimiter_{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        if !value.contains(&delimiter) {
            break;
        }
    }
    Ok(format!("{name}<<{delimiter}\n{value}\n{delimiter}\n"))
}

fn append(path: &Path, text: &str) -> Result<(), Error> {
    let mut file = fs::open_append(path)?;
    file.write_all(text.as_bytes()).map_err(|e| fs::Error::io("write", path, e))?;
    Ok(())
}

impl Github {
    /// Reads `GITHUB_ACTIONS`, `GITHUB_OUTPUT`, `GITHUB_ENV` and `GITHUB_STEP_SUMMARY`
    /// through `env` (empty values count as unset).
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Self {
        let path = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Self {
            actions: env("GITHUB_ACTIONS").is_some_and(|v| v == "true"),
            output: path("GITHUB_OUTPUT"),
            env: path("GITHUB_ENV"),
            summary: path("GITHUB_STEP_SUMMARY"),
        }
    }

    /// The same, from the process environment.
    pub fn from_env() -> Self {
        Self::from_env_with(crate::config::var_string)
    }

    /// True if `GITHUB_OUTPUT` is set.
    pub fn has_output_file(&self) -> bool {
        self.output.is_some()
    }

    /// Appends step outputs (no-op without `GITHUB_OUTPUT`).
    ///
    /// # Errors
    /// [`Error::InvalidName`] or a write failure naming the file.
    pub fn set_outputs(&self, entries: &[(&str, String)]) -> Result<(), Error> {
        self.write_entries(self.output.as_deref(), entries)
    }

    /// Appends environment variables for later steps (no-op without `GITHUB_ENV`).
    ///
    /// # Errors
    /// As [`Github::set_outputs`].
    pub fn set_env(&self, entries: &[(&str, String)]) -> Result<(), Error> {
        self.write_entries(self.env.as_deref(), entries)
    }

    fn write_entries(&self, file: Option<&Path>, entries: &[(&str, String)]) -> Result<(), Error> {
        let Some(file) = file else { return Ok(()) };
        let mut text = String::new();
        for (name, value) in entries {
            text.push_str(&format_entry(name, value)?);
        }
        append(file, &text)
    }

    /// Appends Markdown to the step summary (no-op without `GITHUB_STEP_SUMMARY`).
    ///
    /// # Errors
    /// A write failure naming the file.
    pub fn append_summary(&self, markdown: &str) -> Result<(), Error> {
        match &self.summary {
            Some(path) => append(path, markdown),
            None => Ok(()),
        }
    }
}

/// Escapes a workflow command's message.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a workflow command's property value.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// `::warning title=<title>::<message>`.
pub fn warning(title: &str, message: &str) -> String {
    format!("::warning title={}::{}", escape_property(title), escape_data(message))
}

/// `::notice title=<title>::<message>`.
pub fn notice(title: &str, message: &str) -> String {
    format!("::notice title={}::{}", escape_property(title), escape_data(message))
}

/// `::error title=<title>::<message>`.
pub fn error(title: &str, message: &str) -> String {
    format!("::error title={}::{}", escape_property(title), escape_data(message))
}

/// `::add-mask::<value>`: tells the runner to replace `value` with `***` in every later
/// log line. Print it only from a step that already holds the value.
pub fn add_mask(value: &str) -> String {
    format!("::add-mask::{}", escape_data(value))
}

/// `::group::<title>`; close it with [`end_group`].
pub fn group(title: &str) -> String {
    format!("::group::{}", escape_data(title))
}

/// `::endgroup::`.
pub fn end_group() -> &'static str {
    "::endgroup::"
}

/// `cache_result` events of an event log, counted by `status` (`HIT`, `MISS`, `SAVED`,
/// `BYPASS`, …). Lines that are not JSON objects are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// Count per status.
    pub by_status: BTreeMap<String, u64>,
}

impl EventCounts {
    /// Reads `path`; a missing file counts nothing.
    ///
    /// # Errors
    /// A read failure other than not-found.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let text = match fs::read(path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.is_not_found() => return Ok(Self::default()),
            Err(e) => return Err(e.into()),
        };
        let mut counts = Self::default();
        for line in text.lines() {
            let Ok(serde_json::Value::Object(map)) = serde_json::from_str(line) else { continue };
            if map.get("event").and_then(|v| v.as_str()) != Some("cache_result") {
                continue;
            }
            if let Some(status) = map.get("status").and_then(|v| v.as_str()) {
                *counts.by_status.entry(status.to_owned()).or_default() += 1;
            }
        }
        Ok(counts)
    }

    /// The count for `status`.
    pub fn get(&self, status: &str) -> u64 {
        self.by_status.get(status).copied().unwrap_or(0)
    }

    /// HIT + MISS + BYPASS: the actions that ran.
    pub fn actions(&self) -> u64 {
        self.get("HIT") + self.get("MISS") + self.get("BYPASS")
    }

    /// `HIT 12 · MISS 3 · SAVED 3` (statuses in a fixed order, zeros left out), or
    /// `no cache events`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = ["HIT", "MISS", "SAVED", "BYPASS"]
            .iter()
            .filter(|s| self.get(s) > 0)
            .map(|s| format!("{s} {}", self.get(s)))
            .collect();
        if parts.is_empty() { "no cache events".to_owned() } else { parts.join(" · ") }
    }
}

/// A two-column Markdown table with a heading, for the step summary. Values are put in
/// code spans when `code` is true; `|` and newlines are escaped.
pub fn summary_table(heading: &str, rows: &[(&str, String, bool)]) -> String {
    let cell = |text: &str| text.replace('|', "\\|").replace(['\n', '\r'], " ");
    let mut out = format!("### {heading}\n\n| | |\n|---|---|\n");
    for (name, value, code) in rows {
        let value = cell(value);
        if *code && !value.is_empty() {
            out.push_str(&format!("| {name} | `{value}` |\n"));
        } else {
            out.push_str(&format!("| {name} | {value} |\n"));
        }
    }
    out.push('\n');
    out
}

/// Human size: `123 B`, `4.5 KiB`, `67.8 MiB`, `1.20 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KIB {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else if b < KIB * KIB * KIB {
        format!("{:.1} MiB", b / KIB / KIB)
    } else {
        format!("{:.2} GiB", b / KIB / KIB / KIB)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn entries_use_delimiters_for_multiline_values() {
        assert_eq!(format_entry("cache-hit", "true").unwrap(), "cache-hit=true\n");
        let block = format_entry("list", "a\nb").unwrap();
        let lines: Vec<&str> = block.lines().collect();
        assert_eq!(lines.len(), 4);
        let delimiter = lines[0].strip_prefix("list<<").unwrap();
        assert!(delimiter.starts_with("ghadelimiter_"));
        assert_eq!(&lines[1..3], ["a", "b"]);
        assert_eq!(lines[3], delimiter);
        assert!(format_entry("bad=name", "x").is_err());
        assert!(format_entry("bad\nname", "x").is_err());
    }

    #[test]
    fn files_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let env_path = dir.path().join("env");
        let (o, e) = (out.clone(), env_path.clone());
        let gh = Github::from_env_with(move |name| match name {
            "GITHUB_OUTPUT" => Some(o.display().to_string()),
            "GITHUB_ENV" => Some(e.display().to_string()),
            "GITHUB_ACTIONS" => Some("true".into()),
            _ => None,
        });
        assert!(gh.actions && gh.has_output_file());
        gh.set_outputs(&[("a", "1".into())]).unwrap();
        gh.set_outputs(&[("b", "2".into())]).unwrap();
        gh.set_env(&[("X", "y".into())]).unwrap();
        gh.append_summary("ignored: no summary file").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "a=1\nb=2\n");
        assert_eq!(std::fs::read_to_string(&env_path).unwrap(), "X=y\n");
    }

    #[test]
    fn commands_are_escaped() {
        assert_eq!(warning("a:b,c", "50%\ndone"), "::warning title=a%3Ab%2Cc::50%25%0Adone");
        assert_eq!(add_mask("s"), "::add-mask::s");
        assert_eq!(group("g"), "::group::g");
    }

    #[test]
    fn event_counts() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        std::fs::write(
            &log,
            "{\"event\":\"cache_result\",\"status\":\"HIT\"}\n\
             {\"event\":\"cache_result\",\"status\":\"MISS\"}\n\
             {\"event\":\"cache_result\",\"status\":\"HIT\"}\n\
             {\"event\":\"warning\",\"status\":\"HIT\"}\n\
             not json\n",
        )
        .unwrap();
        let counts = EventCounts::read(&log).unwrap();
        assert_eq!((counts.get("HIT"), counts.get("MISS"), counts.actions()), (2, 1, 3));
        assert_eq!(counts.describe(), "HIT 2 · MISS 1");
        assert_eq!(
            EventCounts::read(&dir.path().join("none")).unwrap().describe(),
            "no cache events"
        );
        assert_eq!(human_bytes(1536), "1.5 KiB");
        let table = summary_table("t", &[("key", "a|b".into(), true)]);
        assert!(table.contains("| key | `a\\|b` |"), "{table}");
    }
}
