//! Where the L1 cache keeps things under its cache root (docs/format.md "L1 layout"). The
//! names are the layout's; the front ends (`crate::action`, `crate::launcher`), the remote
//! tier and `crate::snapshot` (which packs and unpacks `actions-v1/`) use them from here.
//!
//! ```text
//! <cache root>/
//!   .updated                         touched after every newly saved entry (snapshot gate)
//!   actions-v1/                      everything a snapshot carries
//!     third_party/<unit>/<key>/                                   entry (strata action run)
//!     custom_operator/<soc>/<operator>/<operator_text_hash>/<action>@<unit>/<key>/   entry
//!       …/<operator_text_hash>/.last-used                         recency for prune
//!     compile/<first 2 hex of key>/<key>/    entry of a compilation or an archive step
//!                                            (the launcher; crate::launcher::entry)
//!     (beside an entry) .<key>.tmp-<16 hex>/   staging of a save (crash leftover if seen)
//!     (beside an entry) .<key>.old-<16 hex>/   an invalid entry being replaced
//!   .locks/entry/<sha256(entry path relative to actions-v1)>.lock
//!   .locks/output/<sha256(absolute output dir)>.lock     third-party action lock
//!   .locks/cpu/<n>.lock              a traced compile's claim of CPU n while its tree is
//!                                    pinned there (crate::launcher::trace::pin)
//!   .local/tool-memo/<sha256(tool path)>.json            machine-local, never packed
//!   .local/verify-memo/<sha256(entry path relative to actions-v1)>.json
//!                                     which artifacts a HIT verified, and their stamps
//!                                     (machine-local, never packed; crate::content::memo)
//!   .local/counters/<0..15>.json      hit and miss counters (crate::l1::counters)
//! ```
//!
//! The temp and leftover names (`.tmp-`, `.old-`, …) are spelled in one place,
//! [`crate::fs::temp`].
//!
//! Entry:
//! ```text
//! <entry>/manifest.json     strata.action_entry record (artifacts, hashes)
//! <entry>/identity.json     strata.action_identity record (component records, for explain)
//! <entry>/artifacts/<relative artifact paths>
//! ```
//!
//! Names that become path components (`--unit`, `--soc`, `--operator`, `--action`) are
//! encoded injectively ([`encode_component`]): ASCII letters, digits, `_`, `-` and
//! non-leading `.` stay; every other byte becomes `%XX`. So `a/b` and `a_b` never share a
//! directory (a lossy sanitiser would merge them), and no name can be `.`, `..`
//! or start with a dot (dot-names are reserved for strata's own files).
//!
//! Bumping the layout version means renaming [`ACTIONS_DIR`] and bumping
//! `crate::snapshot::LAYOUT_VERSION`; the tests in `tests/it/engine/` and
//! `tests/it/snapshot/` that spell the path must follow.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;
use crate::fs;

/// The directory under the cache root that holds every entry and that a snapshot carries.
pub const ACTIONS_DIR: &str = "actions-v1";

/// The lock directory under the cache root (machine-local).
pub const LOCKS_DIR: &str = ".locks";

/// The machine-local state directory under the cache root (memos, snapshot origin).
pub const LOCAL_DIR: &str = ".local";

/// The marker touched after every newly saved entry (the snapshot save gate).
pub const UPDATED_MARKER: &str = ".updated";

/// The domain directory of the compiler launcher's entries under `actions-v1` (compile and
/// archive steps alike).
pub const COMPILE_DIR: &str = "compile";

/// Every name strata itself creates directly under a cache root (crash leftovers aside).
pub const ROOT_NAMES: [&str; 4] = [ACTIONS_DIR, LOCKS_DIR, LOCAL_DIR, UPDATED_MARKER];

/// A name that cannot become a path component ([`encode_component`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {reason}")]
pub struct InvalidName {
    /// Which flag (`--unit`, `--soc`, …).
    pub what: &'static str,
    /// The value.
    pub value: String,
    /// Why.
    pub reason: &'static str,
}

/// Cache domain (`--domain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Domain {
    /// Outputs restored into `--output-dir` (e.g. a third-party library's own build).
    ThirdParty,
    /// Outputs built in a private stage and published into a shared `--publish-dir`.
    CustomOperator,
}

impl Domain {
    /// `third_party` or `custom_operator`.
    pub fn as_str(self) -> &'static str {
        match self {
            Domain::ThirdParty => "third_party",
            Domain::CustomOperator => "custom_operator",
        }
    }

    /// Parses the flag spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "third_party" => Some(Domain::ThirdParty),
            "custom_operator" => Some(Domain::CustomOperator),
            _ => None,
        }
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest encoded path component, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 200;

/// Encodes a user-given name as one path component (see the module docs).
///
/// # Errors
/// [`InvalidName`] if `value` is empty or encodes to more than [`MAX_COMPONENT_BYTES`].
pub fn encode_component(what: &'static str, value: &str) -> Result<String, InvalidName> {
    if value.is_empty() {
        return Err(InvalidName { what, value: value.into(), reason: "it is empty" });
    }
    let mut out = String::with_capacity(value.len());
    for (i, b) in value.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if keep {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.len() > MAX_COMPONENT_BYTES {
        return Err(InvalidName {
            what,
            value: value.into(),
            reason: "it is longer than 200 bytes once encoded",
        });
    }
    Ok(out)
}

/// Number of path components from the actions directory to an entry of `domain`:
/// `third_party/<unit>/<key>` (3) or
/// `custom_operator/<soc>/<operator>/<operator_text_hash>/<action>@<unit>/<key>` (6).
pub fn entry_depth(domain: Domain) -> usize {
    match domain {
        Domain::ThirdParty => 3,
        Domain::CustomOperator => 6,
    }
}

/// The path of an L1 entry relative to the actions directory (`actions-v1/`):
/// `/`-separated and relative, e.g. `third_party/zlib/<key>`,
/// `custom_operator/<soc>/<op>/<ns>/<action>@<unit>/<key>` or `compile/ab/<key>`. It names
/// the entry's directory, its lock and its memo ([`CacheRoot::entry_lock`],
/// [`CacheRoot::verify_memo`]) and, in a store, its ref. Serialized as that string (serde
/// transparent); never deserialized, so every value was built by the layout or parsed.
///
/// Built by the layout from encoded components ([`CacheRoot::compile_entry_rel`], the
/// engine's entry locations); text from elsewhere is checked by [`EntryPath::parse`]. It
/// dereferences to `str`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct EntryPath(String);

impl EntryPath {
    /// `text` as an entry path if it is a safe relative path ([`fs::RelPath`]: no empty,
    /// `.` or `..` component, not absolute) that does not start with `.`.
    ///
    /// # Errors
    /// The reason, naming `text`.
    pub fn parse(text: &str) -> Result<Self, String> {
        if fs::RelPath::new(text.to_owned()).is_err() || text.starts_with('.') {
            return Err(format!("{text:?} is not a relative entry path"));
        }
        Ok(EntryPath(text.to_owned()))
    }

    /// A path the layout built from components it encoded itself.
    pub(crate) fn built(text: String) -> Self {
        EntryPath(text)
    }

    /// The path's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for EntryPath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for EntryPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<Path> for EntryPath {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl fmt::Display for EntryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// True if `rel`, a `/`-separated path relative to the actions directory, lies strictly
/// below an entry's `artifacts/` directory (`<entry>/artifacts/<something>`). Only there may
/// an L1 cache hold symlinks (artifacts recorded as symlinks); a symlink at any layout
/// position (a domain, unit, namespace, key, `artifacts` itself) would let later writes
/// leave the cache root, so snapshots reject them (`crate::snapshot::unpack`) and the
/// engine never traverses them (`crate::action::entry`).
pub fn is_inside_entry_artifacts(rel: &str) -> bool {
    let mut parts = rel.split('/');
    let Some(domain) = parts.next().and_then(Domain::parse) else { return false };
    // Components after the domain up to the entry, then `artifacts`, then at least one more.
    let mut below = parts.skip(entry_depth(domain) - 1);
    below.next() == Some("artifacts") && below.next().is_some_and(|name| !name.is_empty())
}

/// Decodes [`encode_component`] output (for display).
pub fn decode_component(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(v) = u8::from_str_radix(hex, 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A resolved cache root.
#[derive(Debug, Clone)]
pub struct CacheRoot {
    root: PathBuf,
}

impl CacheRoot {
    /// Resolves `path` (`~` expanded, made absolute, symlinks resolved; it need not exist).
    ///
    /// # Errors
    /// [`crate::fs::Error`] if resolution fails for a reason other than non-existence.
    pub fn new(path: &Path) -> Result<Self, fs::Error> {
        Ok(Self { root: fs::resolve_nonstrict(&fs::expand_tilde(path))? })
    }

    /// The root directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `<root>/actions-v1` ([`ACTIONS_DIR`]): everything a snapshot carries.
    pub fn actions_dir(&self) -> PathBuf {
        self.root.join(ACTIONS_DIR)
    }

    /// `<root>/actions-v1/<domain>`.
    pub fn domain_dir(&self, domain: Domain) -> PathBuf {
        self.actions_dir().join(domain.as_str())
    }

    /// `<root>/actions-v1/compile` ([`COMPILE_DIR`]).
    pub fn compile_dir(&self) -> PathBuf {
        self.actions_dir().join(COMPILE_DIR)
    }

    /// The entry path of the compile entry of `key` (64 hex):
    /// `compile/<first 2 hex>/<key>` (`00` for a key shorter than 2).
    pub fn compile_entry_rel(key: &str) -> EntryPath {
        let prefix = key.get(..2).unwrap_or("00");
        EntryPath::built(format!("{COMPILE_DIR}/{prefix}/{key}"))
    }

    /// `<root>/.locks`.
    pub fn locks_dir(&self) -> PathBuf {
        self.root.join(LOCKS_DIR)
    }

    /// `<root>/.local`: machine-local state, never packed.
    pub fn local_dir(&self) -> PathBuf {
        self.root.join(LOCAL_DIR)
    }

    /// `<root>/.local/tool-memo`.
    pub fn memo_dir(&self) -> PathBuf {
        self.local_dir().join("tool-memo")
    }

    /// `<root>/.local/verify-memo/<sha256(rel)>.json`: the verification memo of the entry
    /// at `rel` (relative to the actions directory).
    pub fn verify_memo(&self, rel: &str) -> PathBuf {
        let h = Sha256Digest::of_bytes(rel.as_bytes());
        self.local_dir().join("verify-memo").join(format!("{}.json", h.to_hex()))
    }

    /// `<root>/.updated`.
    pub fn updated_marker(&self) -> PathBuf {
        self.root.join(UPDATED_MARKER)
    }

    /// Lock file of the entry at `rel` (relative to the actions directory):
    /// `.locks/entry/<sha256(rel)>.lock`, except for the launcher's compile entries
    /// (`compile/<2 hex>/<key>`), which share 16 lock files,
    /// `.locks/entry/compile-<first hex digit of sha256(rel)>.lock`.
    ///
    /// A compile entry's lock is held only while a save publishes (about a millisecond, not
    /// while the compiler runs), so sharing costs next to no waiting, and a cold build
    /// stops creating a file per MISS: an ext4 inode here costs 0.1–0.4 ms of CPU when the
    /// file system has freed many lately (issue 28). Whoever takes the lock of a compile
    /// entry (a save, `strata prune`) goes through this function and gets the shared file.
    pub fn entry_lock(&self, rel: &str) -> PathBuf {
        let h = Sha256Digest::of_bytes(rel.as_bytes()).to_hex();
        let name = if rel.starts_with("compile/") {
            format!("compile-{}.lock", &h[..1])
        } else {
            format!("{h}.lock")
        };
        self.locks_dir().join("entry").join(name)
    }

    /// `<root>/.locks/cpu`: the per-CPU claims of pinned traced trees, `<n>.lock` for CPU n
    /// (decimal), each held with `flock` while a launcher's tree is pinned to that CPU.
    pub fn cpu_claims_dir(&self) -> PathBuf {
        self.locks_dir().join("cpu")
    }

    /// Lock file serialising third-party builds into one output directory.
    pub fn output_lock(&self, output_dir: &Path) -> PathBuf {
        let h = Sha256Digest::of_bytes(output_dir.as_os_str().as_encoded_bytes());
        self.locks_dir().join("output").join(format!("{}.lock", h.to_hex()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_paths_are_relative_and_stored_as_strings() {
        let p = EntryPath::parse("third_party/zlib/abc").unwrap();
        assert_eq!(p.as_str(), "third_party/zlib/abc");
        assert_eq!(serde_json::to_string(&p).unwrap(), r#""third_party/zlib/abc""#);
        assert_eq!(CacheRoot::compile_entry_rel("abcd").as_str(), "compile/ab/abcd");
        for bad in ["", "/abs/x", "a/../b", "a//b", "./a", ".hidden/a", "a/./b"] {
            assert_eq!(
                EntryPath::parse(bad),
                Err(format!("{bad:?} is not a relative entry path")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn compile_entries_share_sixteen_lock_files_and_other_entries_have_their_own() {
        let root = CacheRoot::new(Path::new("/c")).unwrap();
        let dir = Path::new("/c/.locks/entry");
        let mut shared = std::collections::BTreeSet::new();
        for i in 0..400 {
            let key = format!("{:064x}", i * 7919 + 1);
            let lock = root.entry_lock(CacheRoot::compile_entry_rel(&key).as_str());
            assert_eq!(lock.parent(), Some(dir));
            let name = lock.file_name().unwrap().to_str().unwrap().to_owned();
            assert!(name.len() == "compile-0.lock".len() && name.starts_with("compile-"), "{name}");
            shared.insert(name);
        }
        assert_eq!(shared.len(), 16, "{shared:?}");
        let rel = "third_party/zlib/abc";
        let own = root.entry_lock(rel);
        let hex = Sha256Digest::of_bytes(rel.as_bytes()).to_hex();
        assert_eq!(own, dir.join(format!("{hex}.lock")));
        // Only the launcher's compile domain shares: an action named like it does not.
        assert_ne!(root.entry_lock("compile@kernels/x"), root.entry_lock("compile@kernels/y"));
    }

    #[test]
    fn encoding_is_injective_and_safe() {
        assert_eq!(encode_component("--unit", "zstd").unwrap(), "zstd");
        assert_ne!(
            encode_component("--unit", "a/b").unwrap(),
            encode_component("--unit", "a_b").unwrap()
        );
        assert_eq!(encode_component("--unit", "a/b").unwrap(), "a%2Fb");
        assert_eq!(encode_component("--unit", "..").unwrap(), "%2E.");
        assert_eq!(encode_component("--unit", ".hidden").unwrap(), "%2Ehidden");
        assert_eq!(encode_component("--unit", "100%").unwrap(), "100%25");
        assert_eq!(decode_component("a%2Fb"), "a/b");
        assert!(encode_component("--unit", "").is_err());
        assert!(encode_component("--unit", &"x".repeat(201)).is_err());
        assert_eq!(encode_component("--unit", "é").unwrap(), "%C3%A9");
    }

    #[test]
    fn only_paths_below_an_entrys_artifacts_count_as_artifacts() {
        for yes in [
            "third_party/zlib/k/artifacts/lib",
            "third_party/zlib/k/artifacts/lib/libz.so",
            "custom_operator/s/op/ns/a@u/k/artifacts/x",
        ] {
            assert!(is_inside_entry_artifacts(yes), "{yes}");
        }
        for no in [
            "",
            "third_party",
            "third_party/zlib",
            "third_party/zlib/k",
            "third_party/zlib/k/artifacts",
            "third_party/zlib/k/manifest.json",
            "third_party/zlib/k/other/x",
            "custom_operator/s/op/ns/a@u/k/artifacts",
            "custom_operator/s/op/artifacts/x/y/z",
            "other/zlib/k/artifacts/x",
        ] {
            assert!(!is_inside_entry_artifacts(no), "{no}");
        }
    }
}
