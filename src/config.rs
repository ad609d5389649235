//! Settings that come from the environment, resolved in one place: the cache home and the
//! defaults derived from it (the object store, the L1 cache root), and the variables
//! several commands share (`STRATA_STORE`, `STRATA_CACHE_ROOT`, `STRATA_EVENT_LOG`).
//!
//! Precedence everywhere: a flag, then the `STRATA_*` variable, then the default
//! (DESIGN.md §5). An empty variable or flag value counts as unset (GitHub passes unset
//! inputs as empty strings).
//!
//! # The cache home
//! Defaults live under the cache home, chosen by the XDG base-directory rule:
//! `$XDG_CACHE_HOME` when it is an absolute path, else `$HOME/.cache` when `HOME` is an
//! absolute path. A relative `XDG_CACHE_HOME` is ignored, as the XDG specification says
//! ("all paths set in these environment variables must be absolute; if an implementation
//! encounters a relative path it should consider the path invalid and ignore it"). With
//! neither, there is no default: [`Error::NoCacheHome`] names both variables and the flag
//! or variable that would make a default unnecessary, and the command line exits 2.
//!
//! * the default object store is `file://<cache home>/strata/store` ([`default_store_url`]);
//! * the default L1 cache root (compiler launcher, `stats`, `prune`) is
//!   `<cache home>/strata/cache` ([`default_cache_root`]).
//!
//! Every function has a `*_with` form that takes the variable lookup, so the rules are
//! tested without changing the process environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A configuration problem (the command line exits 2 for each: see [`Error::is_usage`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No cache home to put a default under.
    #[error(
        "no {what}: neither XDG_CACHE_HOME nor HOME is set to an absolute path, so there is \
         no default location (give {instead}, or set XDG_CACHE_HOME or HOME)"
    )]
    NoCacheHome {
        /// What needed the default, e.g. `default object store`.
        what: &'static str,
        /// The flag and variable that replace the default, e.g. `--store or STRATA_STORE`.
        instead: &'static str,
    },
    /// A variable holds a value that cannot be used (a typo never silently becomes the
    /// default).
    #[error("environment variable {name}={value:?} is invalid: {expected}")]
    InvalidValue {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
}

impl Error {
    /// True for every configuration error: the user must change a flag or a variable.
    pub fn is_usage(&self) -> bool {
        true
    }
}

/// A variable of the process environment; `None` when unset or empty.
pub fn var(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// Parses an on/off setting (`STRATA_REMOTE_WRITE`, `STRATA_EXPLAIN`, …) like clap's
/// boolish values: `1 true yes on y t` / `0 false no off n f`, in any case; empty or blank
/// means off.
///
/// # Errors
/// Any other text, as a message for `NAME=<text>: …`.
pub fn parse_switch(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" | "off" | "n" | "f" => Ok(false),
        "1" | "true" | "yes" | "on" | "y" | "t" => Ok(true),
        _ => Err(format!("{text:?} is not on or off (use 1 or 0, true or false)")),
    }
}

/// A variable of the process environment as text; `None` when unset, empty or not UTF-8.
pub fn var_text(name: &str) -> Option<String> {
    var(name).and_then(|v| v.into_string().ok())
}

/// A variable of the process environment exactly as set (empty included); for values that
/// are inputs rather than settings (`PATH`, `PWD`, a compiler's environment), where an
/// empty value is not the same as none.
pub fn var_raw(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// A variable of the process environment as `std::env::var` reads it: `None` when unset
/// or not UTF-8; an empty value is `Some("")`. For lookups handed to the `*_with` forms.
pub fn var_string(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The directory for scratch files of this process: `$TMPDIR`, else `/tmp`
/// (`std::env::temp_dir`).
pub fn temp_dir() -> PathBuf {
    std::env::temp_dir()
}

/// What a timeout setting may be ([`parse_timeout`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeoutRange {
    /// Smallest number of seconds.
    pub min_seconds: f64,
    /// Largest number of seconds.
    pub max_seconds: f64,
    /// `inf` is allowed (wait forever).
    pub infinite: bool,
    /// What the value must be, for messages.
    pub expected: &'static str,
}

/// Lock timeouts (`STRATA_*_LOCK_TIMEOUT_SECONDS`): any non-negative number of seconds
/// (decimals allowed; `0` means one attempt) or `inf`.
pub const LOCK_TIMEOUT: TimeoutRange = TimeoutRange {
    min_seconds: 0.0,
    max_seconds: f64::MAX,
    infinite: true,
    expected: "a non-negative number of seconds or `inf`",
};

/// Per-request timeouts of the remote entry tier (`STRATA_REMOTE_TIMEOUT`): a decimal
/// number of seconds from 0.05 to 600.
pub const REQUEST_TIMEOUT: TimeoutRange = TimeoutRange {
    min_seconds: 0.05,
    max_seconds: 600.0,
    infinite: false,
    expected: "expected seconds, a number from 0.05 to 600",
};

/// A timeout setting ([`parse_timeout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// Wait at most this long (zero: one attempt).
    After(std::time::Duration),
    /// Wait as long as it takes (`inf`).
    Never,
}

/// Parses a timeout in seconds within `range` (surrounding white space ignored).
///
/// # Errors
/// `range.expected` for anything else, such as `60s`.
pub fn parse_timeout(text: &str, range: &TimeoutRange) -> Result<Timeout, &'static str> {
    let text = text.trim();
    if range.infinite && text == "inf" {
        return Ok(Timeout::Never);
    }
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (range.min_seconds..=range.max_seconds).contains(&s) => {
            std::time::Duration::try_from_secs_f64(s)
                .map(Timeout::After)
                .map_err(|_| range.expected)
        }
        _ => Err(range.expected),
    }
}

/// The timeout the variable `name` sets within `range`; `None` when it is unset, empty or
/// blank.
///
/// # Errors
/// [`Error::InvalidValue`] naming the variable for a value outside `range`.
pub fn timeout_var(name: &'static str, range: &TimeoutRange) -> Result<Option<Timeout>, Error> {
    let Some(value) = var_text(name).filter(|v| !v.trim().is_empty()) else { return Ok(None) };
    parse_timeout(&value, range).map(Some).map_err(|expected| Error::InvalidValue {
        name,
        value,
        expected,
    })
}

/// The cache home of the process environment (see the module docs).
///
/// # Errors
/// As [`cache_home_with`].
pub fn cache_home(what: &'static str, instead: &'static str) -> Result<PathBuf, Error> {
    cache_home_with(what, instead, var)
}

/// The cache home under the variables `env` returns (see the module docs): an absolute
/// `XDG_CACHE_HOME`, else `$HOME/.cache` for an absolute `HOME`. `what` and `instead` only
/// go into the error.
///
/// # Errors
/// [`Error::NoCacheHome`] when neither variable is an absolute path.
pub fn cache_home_with(
    what: &'static str,
    instead: &'static str,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, Error> {
    let absolute = |name: &str| {
        env(name).filter(|v| !v.is_empty()).map(PathBuf::from).filter(|p| p.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .ok_or(Error::NoCacheHome { what, instead })
}

/// The default object store, `file://<cache home>/strata/store`.
///
/// # Errors
/// [`Error::NoCacheHome`] naming `--store or STRATA_STORE`.
pub fn default_store_url() -> Result<String, Error> {
    default_store_url_with(var)
}

/// [`default_store_url`] under the variables `env` returns.
///
/// # Errors
/// As [`default_store_url`].
pub fn default_store_url_with(env: impl Fn(&str) -> Option<OsString>) -> Result<String, Error> {
    let home = cache_home_with("default object store", "--store or STRATA_STORE", env)?;
    Ok(format!("file://{}", home.join("strata").join("store").display()))
}

/// The object store URL: `flag` when given and not empty, else `STRATA_STORE`, else
/// [`default_store_url`].
///
/// # Errors
/// As [`default_store_url`], only when the default is needed.
pub fn store_url(flag: Option<&str>) -> Result<String, Error> {
    match flag
        .filter(|f| !f.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| var_text("STRATA_STORE"))
    {
        Some(url) => Ok(url),
        None => default_store_url(),
    }
}

/// The default L1 cache root (compiler launcher, `strata stats`, `strata action prune`),
/// `<cache home>/strata/cache`.
///
/// # Errors
/// [`Error::NoCacheHome`] naming `--cache-root or STRATA_CACHE_ROOT`.
pub fn default_cache_root() -> Result<PathBuf, Error> {
    default_cache_root_with(var)
}

/// [`default_cache_root`] under the variables `env` returns.
///
/// # Errors
/// As [`default_cache_root`].
pub fn default_cache_root_with(env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, Error> {
    let home = cache_home_with("default cache root", "--cache-root or STRATA_CACHE_ROOT", env)?;
    Ok(home.join("strata").join("cache"))
}

/// The L1 cache root when one was named: `flag` when given and not empty, else
/// `STRATA_CACHE_ROOT`; `None` otherwise (commands that need one then fail or use
/// [`default_cache_root`]). `~` is not expanded here.
pub fn cache_root(flag: Option<&Path>) -> Option<PathBuf> {
    flag.filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(|| var("STRATA_CACHE_ROOT").map(PathBuf::from))
}

/// [`cache_root`], else [`default_cache_root`].
///
/// # Errors
/// As [`default_cache_root`], only when the default is needed.
pub fn cache_root_or_default(flag: Option<&Path>) -> Result<PathBuf, Error> {
    match cache_root(flag) {
        Some(root) => Ok(root),
        None => default_cache_root(),
    }
}

/// The JSONL event log: `flag` when given and not empty, else `STRATA_EVENT_LOG`; `None`
/// means no events are written.
pub fn event_log(flag: Option<&Path>) -> Option<PathBuf> {
    flag.filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(|| var("STRATA_EVENT_LOG").map(PathBuf::from))
}

/// Parses a size: bytes, or a number with `K`, `M`, `G`, `T` (powers of 1024, an optional
/// `i`/`iB`/`B` after it), e.g. `500M`, `5G`, `5GiB`.
///
/// # Errors
/// A message naming the text when it is not such a size.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("{text:?} is not a size (e.g. 500M, 5G)"))?;
    let shift = match unit.trim_end_matches('B').trim_end_matches('i') {
        "" => 0,
        "K" | "k" => 10,
        "M" | "m" => 20,
        "G" | "g" => 30,
        "T" | "t" => 40,
        _ => return Err(format!("{text:?} is not a size (e.g. 500M, 5G)")),
    };
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn switches_parse_in_any_case_and_refuse_other_text() {
        for on in ["1", "true", "TRUE", " Yes ", "on", "Y", "t"] {
            assert_eq!(parse_switch(on), Ok(true), "{on}");
        }
        for off in ["", " ", "0", "false", "False", "no", "OFF", "n", "f"] {
            assert_eq!(parse_switch(off), Ok(false), "{off}");
        }
        for bad in ["banana", "2", "enable", "yess"] {
            assert!(parse_switch(bad).unwrap_err().contains("not on or off"), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("5G"), Ok(5 << 30));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1KB"), Ok(1024));
        assert!(parse_size("5X").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("").is_err());
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn an_absolute_xdg_cache_home_wins() {
        let vars = [("XDG_CACHE_HOME", "/xdg"), ("HOME", "/home/u")];
        assert_eq!(default_store_url_with(env(&vars)).unwrap(), "file:///xdg/strata/store");
        assert_eq!(default_cache_root_with(env(&vars)).unwrap(), Path::new("/xdg/strata/cache"));
    }

    #[test]
    fn a_relative_or_empty_xdg_cache_home_is_ignored() {
        for xdg in ["relative/cache", "./c", "~/.cache", ""] {
            let vars = [("XDG_CACHE_HOME", xdg), ("HOME", "/home/u")];
            assert_eq!(
                default_store_url_with(env(&vars)).unwrap(),
                "file:///home/u/.cache/strata/store",
                "XDG_CACHE_HOME={xdg:?}"
            );
            assert_eq!(
                default_cache_root_with(env(&vars)).unwrap(),
                Path::new("/home/u/.cache/strata/cache")
            );
        }
    }

    #[test]
    fn without_a_usable_home_there_is_no_default() {
        for vars in [
            &[][..],
            &[("HOME", "")][..],
            &[("HOME", "relative"), ("XDG_CACHE_HOME", "also/relative")][..],
        ] {
            let e = default_store_url_with(env(vars)).unwrap_err();
            assert!(e.is_usage());
            let text = e.to_string();
            for named in
                ["XDG_CACHE_HOME", "HOME", "--store or STRATA_STORE", "default object store"]
            {
                assert!(text.contains(named), "{text}");
            }
            assert!(!text.contains('~'), "{text}");
            let text = default_cache_root_with(env(vars)).unwrap_err().to_string();
            assert!(text.contains("--cache-root or STRATA_CACHE_ROOT"), "{text}");
            assert!(text.contains("XDG_CACHE_HOME nor HOME"), "{text}");
        }
    }
}
