//! Snapshot keys (docs/snapshots.md "Key anatomy").
//!
//! ```text
//! compat prefix       = <prefix>-schema<N>-<compat digest>-
//! same-source prefix  = <compat prefix><source hash>-
//! primary key         = <same-source prefix><suffix>
//! suffix              = <UTC yyyymmddThhmmss.uuuuuuZ>-<run id>-<attempt>-<pid>-<8 hex random>
//! ```
//!
//! * `<prefix>` (default `strata-l1`): 1–64 characters from `[A-Za-z0-9._-]`, starting
//!   with a letter or digit; put a repository or branch in it to scope a namespace.
//! * `N` is [`super::LAYOUT_VERSION`]: a layout bump makes every older
//!   snapshot unreachable by prefix.
//! * The compat digest and a computed source hash appear as the first
//!   [`KEY_DIGEST_HEX`] (32) lowercase hex characters of their SHA-256 (128 bits: ample to
//!   keep namespaces apart, and it keeps keys near 125 characters, so `<key>.json` and
//!   stores that derive file names from keys stay under the usual 255-byte name limit).
//!   The full 64-hex values are in `--json` output. A given `--source-hash` is used
//!   verbatim and must not contain `-` ([`super::source`]).
//! * The suffix starts with the UTC time to the microsecond, so among keys of one
//!   same-source prefix the lexicographically largest is the newest, deterministically,
//!   even among snapshots saved within one second; the run id
//!   (`GITHUB_RUN_ID`, else `local`; only letters and digits kept), the attempt
//!   (`GITHUB_RUN_ATTEMPT`, else `0`), the pid and 4 random bytes make it unique.
//!   Keys made before the microseconds were added carry `yyyymmddThhmmssZ`; both forms
//!   parse, and [`SuffixTime`] orders them together (a whole-second time counts as its
//!   second's start).
//!
//! Every key and prefix uses only `[A-Za-z0-9._-]`, so it is a valid object key, has no
//! comma (actions/cache), and is at most [`MAX_KEY_CHARS`] long. A key never ends in
//! `.json` (that names its sidecar).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::SystemTime;

use serde_json::Value;

use super::compat::{self, PlatformFiles, SocTable, ToolchainSource};
use super::{Error, LAYOUT_VERSION, source};
use crate::fs;

/// The default key namespace prefix.
pub const DEFAULT_PREFIX: &str = "strata-l1";
/// Longest key, in characters (actions/cache's limit).
pub const MAX_KEY_CHARS: usize = 512;
/// Longest namespace prefix, in characters.
pub const MAX_PREFIX_CHARS: usize = 64;
/// Hex characters of a digest that go into a key (the first 128 bits).
pub const KEY_DIGEST_HEX: usize = 32;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Checks a key or key prefix: non-empty, at most [`MAX_KEY_CHARS`], only
/// `[A-Za-z0-9._-]`, not starting with `.` or `-`, not ending with `.json`.
///
/// # Errors
/// [`Error::InvalidInput`] naming `what` and the rule.
pub fn check_key_text(what: &'static str, text: &str) -> Result<(), Error> {
    let reason = if text.is_empty() {
        Some("it is empty".to_owned())
    } else if text.len() > MAX_KEY_CHARS {
        Some(format!("it is longer than {MAX_KEY_CHARS} characters"))
    } else if let Some(c) = text.chars().find(|c| !allowed(*c)) {
        Some(format!("it contains {c:?}; keys use only letters, digits, '.', '_' and '-'"))
    } else if text.starts_with(['.', '-']) {
        Some("it starts with '.' or '-'".to_owned())
    } else if text.ends_with(".json") {
        Some("it ends with .json, which names a sidecar".to_owned())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidInput { what, reason }),
        None => Ok(()),
    }
}

/// A validated snapshot key (see the module docs).
///
/// ```
/// use strata::snapshot::SnapshotKey;
/// let text = format!("strata-l1-schema1-{}-{}-20250102T030405Z-77-1-42-0a0b0c0d",
///     "c".repeat(32), "s".repeat(32));
/// let key: SnapshotKey = text.parse().unwrap();
/// assert_eq!(key.to_string(), text);
/// let parts = key.parts().unwrap();
/// assert!(key.as_str().starts_with(&parts.same_source_prefix()));
/// assert_eq!(parts.suffix_time(), "20250102T030405Z");
/// assert!("a,b".parse::<SnapshotKey>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotKey(String);

impl SnapshotKey {
    /// Validates `text` with [`check_key_text`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] (what: `--key`).
    pub fn new(text: impl Into<String>) -> Result<Self, Error> {
        let text = text.into();
        check_key_text("--key", &text)?;
        Ok(Self(text))
    }

    /// The key text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name of the key's sidecar object, `<key>.json`.
    pub fn sidecar_name(&self) -> String {
        format!("{}.json", self.0)
    }

    /// The key's fields, if it has strata's shape (a key made by another tool has none).
    pub fn parts(&self) -> Option<KeyParts> {
        KeyParts::parse(&self.0)
    }
}

impl FromStr for SnapshotKey {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        Self::new(text)
    }
}

impl fmt::Display for SnapshotKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `key` of a snapshot manifest (docs/format.md, "Snapshot manifest"): what the
/// record is about. Either a [`SnapshotKey`] (a snapshot saved under that key) or
/// `entry:<entry path>` (an entry object of the index format, one L1 entry;
/// [`crate::l1::layout::EntryPath`]). Stored as that text (serde transparent, the bytes of
/// existing manifests unchanged); a manifest whose key is neither does not load.
/// Dereferences to the text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct ManifestKey(String);

impl ManifestKey {
    /// The manifest key of a snapshot saved under `key`.
    pub fn snapshot(key: &SnapshotKey) -> Self {
        Self(key.as_str().to_owned())
    }

    /// The manifest key of the entry object of `entry` (`entry:<entry path>`).
    pub fn entry(entry: &crate::l1::layout::EntryPath) -> Self {
        Self(format!("entry:{}", entry.as_str()))
    }

    /// The key of the entry object of `entry_path`, an entry path the caller checked.
    pub(crate) fn of_entry_text(entry_path: &str) -> Self {
        Self(format!("entry:{entry_path}"))
    }

    /// Checks stored text: `entry:` and an entry path, or a valid snapshot key.
    ///
    /// # Errors
    /// The reason, naming `text`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.strip_prefix("entry:") {
            Some(path) => crate::l1::layout::EntryPath::parse(path).map(|e| Self::entry(&e)),
            None => SnapshotKey::new(text)
                .map(|k| Self::snapshot(&k))
                .map_err(|e| format!("manifest key {text:?}: {e}")),
        }
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The snapshot key, unless this is an entry object's key.
    pub fn snapshot_key(&self) -> Option<SnapshotKey> {
        if self.0.starts_with("entry:") { None } else { SnapshotKey::new(&self.0).ok() }
    }
}

impl std::ops::Deref for ManifestKey {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ManifestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ManifestKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The fields of a strata-shaped key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParts {
    /// Namespace prefix.
    pub prefix: String,
    /// Layout version.
    pub schema: u32,
    /// Compatibility digest as it appears in keys ([`KEY_DIGEST_HEX`] lowercase hex).
    pub compat: String,
    /// Source hash.
    pub source: String,
    /// Unique suffix (five `-`-separated fields, the first a UTC time).
    pub suffix: String,
}

/// True for `yyyymmddThhmmssZ` and `yyyymmddThhmmss.uuuuuuZ`.
fn is_suffix_time(text: &str) -> bool {
    SuffixTime::parse(text).is_some()
}

/// The time field of strata's key suffix, as an order: the UTC second, then the
/// nanoseconds within it. Compare these, not the field's text: a whole-second field
/// (`…ssZ`, keys made before microseconds were added) would sort after every
/// microsecond field (`…ss.uuuuuuZ`) of its second by bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SuffixTime {
    /// `yyyymmddThhmmss` (UTC; fixed width, so byte order is time order).
    second: String,
    /// Nanoseconds within the second (0..1e9; keys carry microseconds).
    nanos: u32,
}

impl SuffixTime {
    /// Parses `yyyymmddThhmmssZ` or `yyyymmddThhmmss.uuuuuuZ`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        let digits = |range: std::ops::Range<usize>| {
            b.get(range).is_some_and(|d| d.iter().all(u8::is_ascii_digit))
        };
        if b.len() < 16 || !digits(0..8) || b[8] != b'T' || !digits(9..15) {
            return None;
        }
        let nanos = match &b[15..] {
            b"Z" => 0,
            [b'.', micros @ .., b'Z'] if micros.len() == 6 && digits(16..22) => {
                std::str::from_utf8(micros).ok()?.parse::<u32>().ok()? * 1000
            }
            _ => return None,
        };
        Some(Self { second: text[..15].to_owned(), nanos })
    }

    /// The time of `time` (UTC), to the nanosecond.
    pub fn of(time: SystemTime) -> Self {
        let text = format_time(time);
        let nanos = time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        Self { second: text[..15].to_owned(), nanos }
    }
}

impl KeyParts {
    /// Parses `<prefix>-schema<N>-<32 hex>-<source>-<time>-<run>-<attempt>-<pid>-<hex>`.
    pub fn parse(text: &str) -> Option<Self> {
        let mut fields: Vec<&str> = text.rsplitn(7, '-').collect();
        fields.reverse();
        // fields: [head, source, time, run, attempt, pid, random]; head = prefix-schemaN-compat
        let [head, source, time, run, attempt, pid, random] = fields.as_slice() else {
            return None;
        };
        if !is_suffix_time(time)
            || run.is_empty()
            || attempt.is_empty()
            || pid.is_empty()
            || random.is_empty()
            || source.is_empty()
        {
            return None;
        }
        let (rest, compat) = head.rsplit_once('-')?;
        let (prefix, schema) = rest.rsplit_once("-schema")?;
        if compat.len() != KEY_DIGEST_HEX
            || !compat.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return None;
        }
        Some(Self {
            prefix: prefix.to_owned(),
            schema: schema.parse().ok()?,
            compat: compat.to_owned(),
            source: (*source).to_owned(),
            suffix: [*time, *run, *attempt, *pid, *random].join("-"),
        })
    }

    /// `<prefix>-schema<N>-<compat>-`.
    pub fn compat_prefix(&self) -> String {
        format!("{}-schema{}-{}-", self.prefix, self.schema, self.compat)
    }

    /// `<compat prefix><source>-`.
    pub fn same_source_prefix(&self) -> String {
        format!("{}{}-", self.compat_prefix(), self.source)
    }

    /// The suffix's UTC time field, `yyyymmddThhmmss.uuuuuuZ` (or `yyyymmddThhmmssZ`).
    pub fn suffix_time(&self) -> &str {
        self.suffix.split('-').next().unwrap_or_default()
    }
}

/// The time sort field of any key: the `yyyymmddThhmmss.uuuuuuZ` (or, in older keys,
/// `yyyymmddThhmmssZ`) field that starts strata's suffix, if the key has one.
pub fn key_time(key: &str) -> Option<&str> {
    let mut fields = key.rsplitn(6, '-');
    let _random = fields.next()?;
    let _pid = fields.next()?;
    let _attempt = fields.next()?;
    let _run = fields.next()?;
    let time = fields.next()?;
    is_suffix_time(time).then_some(time)
}

/// Formats a time as `yyyymmddThhmmssZ` (UTC).
pub fn format_time(time: SystemTime) -> String {
    let t = time::OffsetDateTime::from(time);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Formats a time as `yyyymmddThhmmss.uuuuuuZ` (UTC, microseconds): the first field of
/// a new key's suffix.
pub fn format_suffix_time(time: SystemTime) -> String {
    let micros = time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_micros());
    let second = format_time(time);
    format!("{}.{micros:06}Z", &second[..15])
}

/// The CI run a key is made in (`GITHUB_RUN_ID`, `GITHUB_RUN_ATTEMPT`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunContext {
    /// Run id; `local` when absent.
    pub run_id: Option<String>,
    /// Run attempt; `0` when absent.
    pub attempt: Option<String>,
}

/// A fresh unique suffix (see the module docs).
pub fn unique_suffix(run: &RunContext, now: SystemTime) -> String {
    let clean = |value: &Option<String>, default: &str| {
        let kept: String = value
            .as_deref()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(32)
            .collect();
        if kept.is_empty() { default.to_owned() } else { kept }
    };
    format!(
        "{}-{}-{}-{}-{:08x}",
        format_suffix_time(now),
        clean(&run.run_id, "local"),
        clean(&run.attempt, "0"),
        std::process::id(),
        fastrand::u32(..)
    )
}

/// What `strata snapshot key` needs.
#[derive(Debug, Clone)]
pub struct KeyRequest {
    /// Namespace prefix (default [`DEFAULT_PREFIX`]).
    pub prefix: String,
    /// Architecture as given (default: the host's `uname -m`).
    pub architecture: String,
    /// SoC as given; `None` records `none`.
    pub soc: Option<String>,
    /// Extra SoC aliases (`alias = canonical` lines).
    pub soc_aliases: Option<PathBuf>,
    /// `--toolchain-image`.
    pub toolchain_image: Option<String>,
    /// `--toolchain-tool` (repeatable).
    pub toolchain_tools: Vec<String>,
    /// `--toolchain-tool-content`: identify the toolchain tools by content too.
    pub toolchain_tool_content: bool,
    /// CANN metadata file (default by architecture, [`compat::default_cann_metadata`]).
    pub cann_metadata: Option<PathBuf>,
    /// Platform files (os-release).
    pub platform: PlatformFiles,
    /// Source root (default `.`).
    pub source_root: PathBuf,
    /// Pathspecs hashed under the source root (none: every tracked file); bytes, like the
    /// names they match.
    pub source_paths: Vec<std::ffi::OsString>,
    /// Files (relative to the source root) that must exist for strata support.
    pub require: Vec<PathBuf>,
    /// A given source hash (skips git).
    pub source_hash: Option<String>,
    /// The CI run.
    pub run: RunContext,
}

impl KeyRequest {
    /// A request for the host with defaults: prefix `strata-l1`, the host architecture,
    /// no SoC, no toolchain, source root `.`.
    pub fn new() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_owned(),
            architecture: compat::host_machine(),
            soc: None,
            soc_aliases: None,
            toolchain_image: None,
            toolchain_tools: Vec::new(),
            toolchain_tool_content: false,
            cann_metadata: None,
            platform: PlatformFiles::default(),
            source_root: PathBuf::from("."),
            source_paths: Vec::new(),
            require: Vec::new(),
            source_hash: None,
            run: RunContext::default(),
        }
    }
}

impl Default for KeyRequest {
    fn default() -> Self {
        Self::new()
    }
}

/// The three strings a supported key computation yields.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Keys {
    /// The unique key to save under.
    pub primary_key: String,
    /// The newest snapshot of the same sources is found under this prefix.
    pub same_source_prefix: String,
    /// The newest compatible snapshot is found under this prefix.
    pub compat_prefix: String,
    /// The source hash in the key.
    pub source_hash: String,
    /// The full compatibility digest (64 lowercase hex; the key holds its first
    /// [`KEY_DIGEST_HEX`] characters).
    pub compat_digest: String,
}

/// The result of [`compute_key`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KeyReport {
    /// True if a key was computed.
    pub supported: bool,
    /// Why not, when unsupported.
    pub reason: Option<String>,
    /// Things the user should fix that did not prevent a key (unknown SoC, mutable tag).
    pub warnings: Vec<String>,
    /// The keys, when supported.
    pub keys: Option<Keys>,
    /// The compatibility descriptor that was hashed, when it could be built.
    pub descriptor: Option<Value>,
}

impl KeyReport {
    fn unsupported(reason: String, warnings: Vec<String>, descriptor: Option<Value>) -> Self {
        Self { supported: false, reason: Some(reason), warnings, keys: None, descriptor }
    }
}

fn check_prefix(prefix: &str) -> Result<(), Error> {
    let ok_start = prefix.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if prefix.len() > MAX_PREFIX_CHARS || !ok_start || !prefix.chars().all(allowed) {
        return Err(Error::InvalidInput {
            what: "--prefix",
            reason: format!(
                "{prefix:?} must be 1 to {MAX_PREFIX_CHARS} characters from [A-Za-z0-9._-], \
                 starting with a letter or digit"
            ),
        });
    }
    Ok(())
}

/// The canonical source root, if it exists and carries every `--require` path (the files
/// that mark strata support); else why the key is unsupported.
fn supported_root(request: &KeyRequest) -> Result<PathBuf, String> {
    let given_root = &request.source_root;
    let root = match fs::metadata(given_root) {
        Ok(meta) if meta.is_dir() => {
            fs::canonicalize(given_root).map_err(|e| format!("source root: {e}"))?
        }
        Ok(_) => {
            return Err(format!(
                "the source root {} is not a directory (--source-root: pass the checkout's \
                 top directory)",
                given_root.display()
            ));
        }
        Err(e) if e.is_not_found() => {
            return Err(format!(
                "the source root {} does not exist (--source-root: pass the checkout's top \
                 directory)",
                given_root.display()
            ));
        }
        Err(e) => return Err(format!("source root: {e}")),
    };
    for required in &request.require {
        let path = root.join(required);
        if !matches!(fs::symlink_metadata_opt(&path), Ok(Some(_))) {
            return Err(format!(
                "the source tree {} has no {} (--require): it predates strata support",
                root.display(),
                required.display()
            ));
        }
    }
    Ok(root)
}

/// The canonical architecture and SoC (`none` without `--soc`); an alias adds a warning.
fn platform(
    request: &KeyRequest,
    warnings: &mut Vec<String>,
) -> Result<(&'static str, String), String> {
    let architecture = compat::canonical_architecture(&request.architecture)?;
    let mut table = SocTable::builtin();
    if let Some(path) = &request.soc_aliases {
        compat::load_aliases(&mut table, path)?;
    }
    let soc = match request.soc.as_deref() {
        None => "none".to_owned(),
        Some(text) => {
            let (soc, warning) = table.canonical(text)?;
            warnings.extend(warning);
            soc
        }
    };
    Ok((architecture, soc))
}

/// Where toolchain identity comes from: `--toolchain-image` wins, then the
/// `--toolchain-tool`s (by content too with `--toolchain-tool-content`), else the CANN
/// metadata file.
fn toolchain_source(request: &KeyRequest, architecture: &str) -> ToolchainSource {
    match (&request.toolchain_image, request.toolchain_tools.is_empty()) {
        (Some(image), _) if !image.trim().is_empty() => ToolchainSource::Image(image.clone()),
        (_, false) if request.toolchain_tool_content => {
            ToolchainSource::HostToolsContent(request.toolchain_tools.clone())
        }
        (_, false) => ToolchainSource::HostTools(request.toolchain_tools.clone()),
        _ => ToolchainSource::Cann(
            request
                .cann_metadata
                .clone()
                .unwrap_or_else(|| compat::default_cann_metadata(architecture)),
        ),
    }
}

/// Computes the snapshot key (see the module docs). Environment problems (unknown
/// architecture, no toolchain identity, a tree without strata support, git failures) give
/// `supported: false` with the reason, not an error: key preparation fails open.
///
/// # Errors
/// [`Error::InvalidInput`] for a malformed `--prefix` or `--source-hash`.
pub fn compute_key(request: &KeyRequest) -> Result<KeyReport, Error> {
    check_prefix(&request.prefix)?;
    if let Some(hash) = &request.source_hash {
        source::check_given_hash(hash)
            .map_err(|reason| Error::InvalidInput { what: "--source-hash", reason })?;
    }
    let mut warnings = Vec::new();
    let root = match supported_root(request) {
        Ok(root) => root,
        Err(reason) => return Ok(KeyReport::unsupported(reason, warnings, None)),
    };
    let (architecture, soc) = match platform(request, &mut warnings) {
        Ok(found) => found,
        Err(reason) => return Ok(KeyReport::unsupported(reason, warnings, None)),
    };
    let toolchain_source = toolchain_source(request, architecture);
    let toolchain = match compat::toolchain_identity(&toolchain_source, &request.platform) {
        Ok((toolchain, more)) => {
            warnings.extend(more);
            toolchain
        }
        Err(reason) => return Ok(KeyReport::unsupported(reason, warnings, None)),
    };
    let descriptor = compat::descriptor(architecture, &soc, toolchain);
    let compat_digest = match compat::descriptor_digest(&descriptor) {
        Ok(d) => d.to_hex(),
        Err(reason) => return Ok(KeyReport::unsupported(reason, warnings, Some(descriptor))),
    };

    let source_hash = match &request.source_hash {
        Some(hash) => hash.clone(),
        None => match source::tracked_source_hash(&root, &request.source_paths) {
            Ok(hash) => hash.get(..KEY_DIGEST_HEX).unwrap_or(&hash).to_owned(),
            Err(reason) => {
                return Ok(KeyReport::unsupported(reason, warnings, Some(descriptor)));
            }
        },
    };
    let short_compat = compat_digest.get(..KEY_DIGEST_HEX).unwrap_or(&compat_digest);
    let compat_prefix = format!("{}-schema{LAYOUT_VERSION}-{short_compat}-", request.prefix);
    let same_source_prefix = format!("{compat_prefix}{source_hash}-");
    let primary_key =
        format!("{same_source_prefix}{}", unique_suffix(&request.run, SystemTime::now()));
    check_key_text("the computed key", &primary_key)?;
    Ok(KeyReport {
        supported: true,
        reason: None,
        warnings,
        keys: Some(Keys {
            primary_key,
            same_source_prefix,
            compat_prefix,
            source_hash,
            compat_digest,
        }),
        descriptor: Some(descriptor),
    })
}

/// The event log path a CI job uses: `<dir>/strata-events-<job>.jsonl`, where `dir` is
/// `RUNNER_TEMP` (else the cache directory's parent) and `job` is `GITHUB_JOB` (else
/// `job`) with every character other than letters, digits, `_`, `.` and `-` replaced by
/// `_`.
pub fn event_log_path(runner_temp: Option<&Path>, cache_dir: &Path, job: Option<&str>) -> PathBuf {
    let dir = runner_temp
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cache_dir.parent().unwrap_or(Path::new("/tmp")).to_path_buf());
    let job: String = job
        .filter(|j| !j.is_empty())
        .unwrap_or("job")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') { c } else { '_' })
        .collect();
    dir.join(format!("strata-events-{job}.jsonl"))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn request(dir: &Path) -> KeyRequest {
        KeyRequest {
            architecture: "x86_64".into(),
            toolchain_image: Some("img@sha256:".to_owned() + &"b".repeat(64)),
            source_root: dir.to_path_buf(),
            source_hash: Some("h".repeat(64)),
            ..KeyRequest::new()
        }
    }

    #[test]
    fn keys_nest_and_parse_back() {
        let dir = tempfile::tempdir().unwrap();
        let report = compute_key(&request(dir.path())).unwrap();
        assert!(report.supported, "{report:?}");
        let keys = report.keys.unwrap();
        assert!(keys.primary_key.starts_with(&keys.same_source_prefix));
        assert!(keys.same_source_prefix.starts_with(&keys.compat_prefix));
        assert!(keys.compat_prefix.starts_with("strata-l1-schema1-"));
        let key: SnapshotKey = keys.primary_key.parse().unwrap();
        let parts = key.parts().unwrap();
        assert_eq!(parts.same_source_prefix(), keys.same_source_prefix);
        assert_eq!(parts.compat_prefix(), keys.compat_prefix);
        assert_eq!(parts.prefix, "strata-l1");
        assert_eq!(key_time(key.as_str()), Some(parts.suffix_time()));
        // Same inputs, same prefixes; a new primary key every time.
        let again = compute_key(&request(dir.path())).unwrap().keys.unwrap();
        assert_eq!(again.same_source_prefix, keys.same_source_prefix);
        assert_ne!(again.primary_key, keys.primary_key);
        // The architecture spelling does not matter; the SoC does.
        let arm = compute_key(&KeyRequest { architecture: "amd64".into(), ..request(dir.path()) })
            .unwrap()
            .keys
            .unwrap();
        assert_eq!(arm.compat_prefix, keys.compat_prefix);
        let soc = compute_key(&KeyRequest { soc: Some("a2".into()), ..request(dir.path()) })
            .unwrap()
            .keys
            .unwrap();
        assert_ne!(soc.compat_prefix, keys.compat_prefix);
    }

    #[test]
    fn suffix_sorts_by_time_first() {
        let run = RunContext { run_id: Some("9/9".into()), attempt: None };
        let early =
            unique_suffix(&run, SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let late = unique_suffix(&run, SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_001));
        assert!(early < late);
        assert!(early.starts_with("20231114T221320.000000Z-99-0-"), "{early}");
    }

    #[test]
    fn saves_within_one_second_sort_by_their_microseconds_whatever_their_pids() {
        // The fault of issue 28's CI run: two saves in one second by pids 937 and 1000 sorted
        // by the pid's digits. The microseconds come first now.
        let at = |micros: u64| SystemTime::UNIX_EPOCH + Duration::from_micros(micros);
        let base = 1_700_000_000_000_000;
        let first = format!("{}-local-0-937-ffffffff", format_suffix_time(at(base + 5)));
        let second = format!("{}-local-0-1000-00000000", format_suffix_time(at(base + 6)));
        assert!(first.starts_with("20231114T221320.000005Z-"), "{first}");
        assert!(first < second, "{first} {second}");
        let time = |key: &str| SuffixTime::parse(key_time(&format!("p-{key}")).unwrap()).unwrap();
        assert!(time(&first) < time(&second));
        // An older whole-second key counts as its second's start: before every microsecond
        // key of that second, after every one of the second before (by bytes it would be
        // after all of them).
        let old = time("20231114T221320Z-local-0-1-aa");
        assert!(old < time(&first));
        assert!(time("20231114T221319.999999Z-local-0-1-aa") < old);
        // The time of a clock reading and of the key made from it are the same.
        assert_eq!(
            SuffixTime::of(at(base + 5)),
            SuffixTime::parse("20231114T221320.000005Z").unwrap()
        );
    }

    #[test]
    fn suffix_times_parse_only_their_two_shapes() {
        for good in ["20250101T000000Z", "20250101T000000.000000Z", "20991231T235959.999999Z"] {
            assert!(SuffixTime::parse(good).is_some(), "{good}");
        }
        for bad in [
            "20250101T000000",
            "20250101T000000.Z",
            "20250101T000000.12345Z",
            "20250101T000000.1234567Z",
            "20250101T000000.12345aZ",
            "2025010AT000000Z",
            "20250101X000000Z",
            "20250101T000000ZZ",
            "",
        ] {
            assert!(SuffixTime::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn unsupported_cases_fail_open() {
        let dir = tempfile::tempdir().unwrap();
        let report =
            compute_key(&KeyRequest { architecture: "X86".into(), ..request(dir.path()) }).unwrap();
        assert!(
            !report.supported && report.reason.unwrap().contains("X86".to_lowercase().as_str())
        );
        let report = compute_key(&KeyRequest {
            require: vec!["CMakeLists.txt".into()],
            ..request(dir.path())
        })
        .unwrap();
        assert!(report.reason.unwrap().contains("predates strata support"));
        let report = compute_key(&KeyRequest {
            toolchain_image: None,
            cann_metadata: Some(dir.path().join("none")),
            ..request(dir.path())
        })
        .unwrap();
        assert!(!report.supported && report.reason.unwrap().contains("--toolchain-tool"));
        let report = compute_key(&KeyRequest { source_hash: None, ..request(dir.path()) }).unwrap();
        assert!(!report.supported, "not a git repository");
        let missing = dir.path().join("no-such-dir");
        let report =
            compute_key(&KeyRequest { source_root: missing, ..request(dir.path()) }).unwrap();
        let reason = report.reason.unwrap();
        assert!(reason.contains("no-such-dir does not exist (--source-root"), "{reason}");
        let file = dir.path().join("file");
        crate::fs::write_new(&file, b"", 0o644).unwrap();
        let report = compute_key(&KeyRequest { source_root: file, ..request(dir.path()) }).unwrap();
        assert!(report.reason.unwrap().contains("is not a directory (--source-root"));
        let report = compute_key(&KeyRequest {
            toolchain_image: None,
            toolchain_tools: vec!["no-such-tool-for-strata-tests".into()],
            ..request(dir.path())
        })
        .unwrap();
        let reason = report.reason.unwrap();
        assert!(reason.starts_with("no toolchain identity") && reason.contains("--toolchain-tool"));
        let err = compute_key(&KeyRequest { prefix: "-x".into(), ..request(dir.path()) });
        assert!(err.unwrap_err().is_usage());
        let err =
            compute_key(&KeyRequest { source_hash: Some("a-b".into()), ..request(dir.path()) });
        assert!(err.unwrap_err().is_usage());
    }

    #[test]
    fn key_texts() {
        for bad in ["", "a,b", "a b", "a/b", ".a", "-a", "k.json", &"k".repeat(513)] {
            assert!(check_key_text("--key", bad).is_err(), "{bad:?}");
        }
        check_key_text("--key", "strata-l1-schema1-").unwrap();
        assert!(KeyParts::parse("plain-key").is_none());
        assert_eq!(key_time("x-20250101T000000Z-local-0-1-abcd"), Some("20250101T000000Z"));
        assert_eq!(
            key_time("x-20250101T000000.000042Z-local-0-1-abcd"),
            Some("20250101T000000.000042Z")
        );
        assert_eq!(key_time("x-2025-local-0-1-abcd"), None);
    }

    #[test]
    fn event_log_names() {
        let p = event_log_path(Some(Path::new("/rt")), Path::new("/c/cache"), Some("selected/a2"));
        assert_eq!(p, Path::new("/rt/strata-events-selected_a2.jsonl"));
        let p = event_log_path(None, Path::new("/c/cache"), None);
        assert_eq!(p, Path::new("/c/strata-events-job.jsonl"));
    }
}
