//! The compatibility descriptor: which machines may share a snapshot (docs/snapshots.md
//! "The compatibility descriptor").
//!
//! The descriptor is a JSON object
//! `{"architecture": <canonical arch>, "soc_version": <canonical SoC>, "toolchain": {...}}`,
//! serialised as canonical JSON (sorted keys, no whitespace; [`crate::record`]) and hashed
//! with SHA-256 into the key's compatibility digest. `toolchain` is one of:
//!
//! | `kind` | chosen when | other fields |
//! |---|---|---|
//! | `container-image` | `--toolchain-image` is given | `value`: the image reference; with a `@sha256:` digest, `<repository>@sha256:<hex>` (the tag is dropped: the digest is the identity) |
//! | `host-tools` | `--toolchain-tool` is given | `tools`: `[{"name", "version"}]` sorted by name (`version` is the tool's `--version` output; with `--toolchain-tool-content` also `content`, the digest of the tool's executable and back ends), `platform` |
//! | `runtime-container` | otherwise, if the CANN metadata file exists | `cann_metadata_sha256`, `platform` |
//!
//! `platform` is `{"system", "machine", "libc": [name, version], "os_release_sha256"}` (the
//! last key only if the os-release file exists): the host's `uname` system and machine,
//! `getconf GNU_LIBC_VERSION` split in two (`["", ""]` when unavailable), and the SHA-256
//! of `/etc/os-release`. The `container-image` and `runtime-container` shapes are those
//! vllm-ascend's CI key script hashes, so its example gives the same digest (for ASCII
//! values; strata writes non-ASCII characters as UTF-8, that script as `\u` escapes).
//!
//! Canonicalisation: the architecture is lower-cased and mapped (`x64`/`x86_64`/`amd64` →
//! `x64`, `arm64`/`aarch64` → `arm64`), anything else is unsupported. The SoC is trimmed,
//! lower-cased and looked up in [`SocTable`] (vllm-ascend's aliases plus any file given
//! with `--soc-aliases`); an unknown SoC is kept lower-cased **with a warning** (silently,
//! a typo would open a new namespace). No SoC given is the value `none`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::digest::Sha256Digest;
use crate::fs;
use crate::record;
use crate::toolchain::{resolve_tool, tool_content, tool_version};

/// The default CANN metadata file for a canonical architecture (`x64` → `x86_64-linux`,
/// `arm64` → `aarch64-linux`), where a CANN toolkit installs it.
pub fn default_cann_metadata(architecture: &str) -> PathBuf {
    let machine = if architecture == "arm64" { "aarch64" } else { "x86_64" };
    PathBuf::from(format!(
        "/usr/local/Ascend/ascend-toolkit/latest/{machine}-linux/ascend_toolkit_install.info"
    ))
}

/// Canonical architecture of `text` (see the module docs).
///
/// # Errors
/// A reason naming the accepted spellings.
pub fn canonical_architecture(text: &str) -> Result<&'static str, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "x64" | "x86_64" | "amd64" => Ok("x64"),
        "arm64" | "aarch64" => Ok("arm64"),
        other => Err(format!(
            "architecture {other:?} is not supported (accepted: x64, x86_64, amd64, arm64, aarch64)"
        )),
    }
}

/// The host architecture as `uname -m` names it (`x86_64`, `aarch64`, …).
pub fn host_machine() -> String {
    rustix::system::uname().machine().to_string_lossy().into_owned()
}

/// The SoC alias table: lower-case spelling → canonical SoC.
#[derive(Debug, Clone)]
pub struct SocTable {
    aliases: BTreeMap<String, String>,
}

/// vllm-ascend's SoC aliases: each canonical SoC with its accepted spellings.
const BUILTIN_SOCS: &[(&str, &[&str])] = &[
    ("ascend910b1", &["a2", "910b", "ascend910b1"]),
    ("ascend910_9391", &["a3", "a3-560t", "ascend910_9391"]),
    ("ascend310p1", &["310p", "ascend310p1"]),
    ("ascend950dt_9582", &["a5", "950", "ascend950dt_9582"]),
];

impl SocTable {
    /// The built-in table.
    pub fn builtin() -> Self {
        let mut aliases = BTreeMap::new();
        for (canonical, spellings) in BUILTIN_SOCS {
            for spelling in *spellings {
                aliases.insert((*spelling).to_owned(), (*canonical).to_owned());
            }
        }
        Self { aliases }
    }

    /// Adds aliases from `text`: one `alias = canonical` per line (blank lines and lines
    /// starting with `#` ignored; both sides trimmed and lower-cased). A later line wins.
    ///
    /// # Errors
    /// A reason naming the first malformed line (1-based).
    pub fn extend_from_text(&mut self, text: &str) -> Result<(), String> {
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let parsed = line
                .split_once('=')
                .map(|(a, c)| (a.trim().to_ascii_lowercase(), c.trim().to_ascii_lowercase()));
            match parsed {
                Some((alias, canonical)) if !alias.is_empty() && !canonical.is_empty() => {
                    self.aliases.insert(alias, canonical.clone());
                    // A canonical name is also its own spelling.
                    self.aliases.entry(canonical.clone()).or_insert(canonical);
                }
                _ => {
                    return Err(format!(
                        "line {} is not `alias = canonical`: {line:?}",
                        number + 1
                    ));
                }
            }
        }
        Ok(())
    }

    /// The canonical SoC for `text`, and a warning if it is not in the table.
    ///
    /// # Errors
    /// A reason if `text` is empty after trimming.
    pub fn canonical(&self, text: &str) -> Result<(String, Option<String>), String> {
        let lower = text.trim().to_ascii_lowercase();
        if lower.is_empty() {
            return Err("the SoC is empty".into());
        }
        match self.aliases.get(&lower) {
            Some(canonical) => Ok((canonical.clone(), None)),
            None => {
                let warning = format!(
                    "unknown SoC {lower:?}: it is used as given (lower-cased) and forms its own \
                     snapshot namespace; if it is another spelling of a known SoC, map it with \
                     --soc-aliases FILE (`{lower} = <canonical>`)"
                );
                Ok((lower, Some(warning)))
            }
        }
    }
}

/// How the toolchain is identified (see the module docs for the precedence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolchainSource {
    /// An explicit compiler image reference.
    Image(String),
    /// Host tools whose `--version` output is identity.
    HostTools(Vec<String>),
    /// Host tools identified by `--version` and by content ([`crate::toolchain::tool_content`]):
    /// `--toolchain-tool` with `--toolchain-tool-content`.
    HostToolsContent(Vec<String>),
    /// The CANN metadata file of the runtime container.
    Cann(PathBuf),
}

/// Where the platform facts come from (overridable for tests).
#[derive(Debug, Clone)]
pub struct PlatformFiles {
    /// The os-release file (by default `/etc/os-release`).
    pub os_release: PathBuf,
}

impl Default for PlatformFiles {
    fn default() -> Self {
        Self { os_release: PathBuf::from("/etc/os-release") }
    }
}

/// Runs `getconf GNU_LIBC_VERSION` and splits `glibc 2.36` into `["glibc", "2.36"]`.
fn libc_identity() -> (String, String) {
    let output = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match output {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            match text.split_once(' ') {
                Some((name, version)) => (name.to_owned(), version.trim().to_owned()),
                None => (text, String::new()),
            }
        }
        _ => (String::new(), String::new()),
    }
}

fn platform(files: &PlatformFiles) -> Result<Value, String> {
    let uname = rustix::system::uname();
    let (libc_name, libc_version) = libc_identity();
    let mut platform = json!({
        "system": uname.sysname().to_string_lossy(),
        "machine": uname.machine().to_string_lossy(),
        "libc": [libc_name, libc_version],
    });
    match fs::hash_file(&files.os_release) {
        Ok((digest, _)) => {
            platform["os_release_sha256"] = Value::String(digest.to_hex());
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(format!("cannot read the OS identity: {e}")),
    }
    Ok(platform)
}

/// Normalises an image reference: `repo[:tag]@sha256:<hex>` → `repo@sha256:<hex>`; other
/// references are returned as given with a warning that a tag is mutable.
pub fn image_identity(image: &str) -> (String, Option<String>) {
    let image = image.trim();
    if let Some((name, digest)) = image.rsplit_once("@sha256:")
        && digest.len() == 64
        && digest.bytes().all(|b| b.is_ascii_hexdigit())
    {
        // Drop a tag on the last path component: the digest alone names the content.
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let repository = match name.get(last_slash..).and_then(|last| last.rfind(':')) {
            Some(colon) => name.get(..last_slash + colon).unwrap_or(name),
            None => name,
        };
        return (format!("{repository}@sha256:{}", digest.to_ascii_lowercase()), None);
    }
    let warning = format!(
        "toolchain image {image:?} is named by a mutable tag; pin it by digest \
         (image@sha256:<hex>) so that a republished tag cannot share a snapshot namespace"
    );
    (image.to_owned(), Some(warning))
}

/// The `toolchain` object of the descriptor, and warnings.
///
/// # Errors
/// A reason (for `supported=false`) if the identity cannot be taken: a tool that cannot be
/// found or run, an unreadable CANN metadata file or os-release file.
pub fn toolchain_identity(
    source: &ToolchainSource,
    files: &PlatformFiles,
) -> Result<(Value, Vec<String>), String> {
    match source {
        ToolchainSource::Image(image) => {
            let (value, warning) = image_identity(image);
            Ok((json!({"kind": "container-image", "value": value}), warning.into_iter().collect()))
        }
        ToolchainSource::HostTools(tools) | ToolchainSource::HostToolsContent(tools) => {
            let by_content = matches!(source, ToolchainSource::HostToolsContent(_));
            let mut entries = BTreeMap::new();
            for name in tools {
                let name = name.trim();
                if name.is_empty() {
                    continue;
                }
                let path = resolve_tool(name, None).ok_or_else(|| {
                    format!(
                        "no toolchain identity: toolchain tool {name:?} was not found on PATH; \
                         install it or pass another --toolchain-tool TOOL (host builds) or \
                         --toolchain-image IMAGE (nested container builds)"
                    )
                })?;
                let version = tool_version(&path, None)
                    .map_err(|e| format!("toolchain tool {name:?}: {e}"))?;
                let content = if by_content {
                    Some(
                        tool_content(&path, None)
                            .map_err(|e| format!("toolchain tool {name:?}: {e}"))?,
                    )
                } else {
                    None
                };
                entries.insert(name.to_owned(), (version, content));
            }
            if entries.is_empty() {
                return Err("--toolchain-tool names no tool".into());
            }
            let tools: Vec<Value> = entries
                .into_iter()
                .map(|(name, (version, content))| match content {
                    Some(content) => json!({"name": name, "version": version, "content": content}),
                    None => json!({"name": name, "version": version}),
                })
                .collect();
            Ok((
                json!({"kind": "host-tools", "tools": tools, "platform": platform(files)?}),
                vec![],
            ))
        }
        ToolchainSource::Cann(path) => {
            let digest = match fs::hash_file(path) {
                Ok((digest, _)) => digest,
                Err(e) if e.is_not_found() => {
                    return Err(format!(
                        "no toolchain identity: the CANN metadata file {} does not exist; pass \
                         --toolchain-image IMAGE (nested container builds) or --toolchain-tool \
                         TOOL (host builds)",
                        path.display()
                    ));
                }
                Err(e) => return Err(format!("cannot read the CANN metadata: {e}")),
            };
            Ok((
                json!({
                    "kind": "runtime-container",
                    "cann_metadata_sha256": digest.to_hex(),
                    "platform": platform(files)?,
                }),
                vec![],
            ))
        }
    }
}

/// The full descriptor object.
pub fn descriptor(architecture: &str, soc: &str, toolchain: Value) -> Value {
    json!({"architecture": architecture, "soc_version": soc, "toolchain": toolchain})
}

/// SHA-256 of the descriptor's canonical JSON bytes.
///
/// # Errors
/// A reason if the descriptor cannot be encoded (it holds no floats, so never in practice).
pub fn descriptor_digest(descriptor: &Value) -> Result<Sha256Digest, String> {
    record::canonical_sha256(descriptor)
        .map_err(|e| format!("cannot encode the compatibility descriptor: {e}"))
}

/// Reads an alias file into `table`.
///
/// # Errors
/// A reason naming the file.
pub fn load_aliases(table: &mut SocTable, path: &Path) -> Result<(), String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read --soc-aliases: {e}"))?;
    table.extend_from_text(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn reference_test_vector() {
        let (value, warning) = image_identity("quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.12");
        assert!(warning.is_some());
        let toolchain = json!({"kind": "container-image", "value": value});
        let d = descriptor("arm64", "ascend910b1", toolchain);
        assert_eq!(
            String::from_utf8(record::to_canonical_bytes(&d).unwrap()).unwrap(),
            r#"{"architecture":"arm64","soc_version":"ascend910b1","toolchain":{"kind":"container-image","value":"quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.12"}}"#
        );
        assert_eq!(
            descriptor_digest(&d).unwrap().to_hex(),
            "abfe0d5fa48b37fe3d8e873a2ded312a954386ad9c1906ecf825e58d02dafde3"
        );
    }

    #[test]
    fn architectures_and_socs() {
        assert_eq!(canonical_architecture(" AMD64 ").unwrap(), "x64");
        assert_eq!(canonical_architecture("aarch64").unwrap(), "arm64");
        assert_eq!(canonical_architecture("ARM64").unwrap(), "arm64");
        assert!(canonical_architecture("X86").is_err());
        let table = SocTable::builtin();
        for spelling in ["a3-560t", "A3-560T", "a3", "ascend910_9391"] {
            assert_eq!(table.canonical(spelling).unwrap(), ("ascend910_9391".into(), None));
        }
        assert_eq!(table.canonical("A2").unwrap().0, "ascend910b1");
        let (soc, warning) = table.canonical("Ascend999X").unwrap();
        assert_eq!(soc, "ascend999x");
        assert!(warning.unwrap().contains("--soc-aliases"));
        assert!(table.canonical("  ").is_err());
    }

    #[test]
    fn alias_files_extend_the_table() {
        let mut table = SocTable::builtin();
        table.extend_from_text("# comment\n\n Ascend999X = ASCEND910B1 \nnew = newsoc\n").unwrap();
        assert_eq!(table.canonical("ascend999x").unwrap(), ("ascend910b1".into(), None));
        assert_eq!(table.canonical("NEWSOC").unwrap(), ("newsoc".into(), None));
        let err = table.extend_from_text("ok = fine\nbroken line\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn image_digests_drop_the_tag() {
        let hex = "a".repeat(64);
        let (value, warning) = image_identity(&format!("registry:5000/team/cc:1.2@sha256:{hex}"));
        assert_eq!(value, format!("registry:5000/team/cc@sha256:{hex}"));
        assert!(warning.is_none());
        let (same, _) = image_identity(&format!("registry:5000/team/cc@sha256:{hex}"));
        assert_eq!(same, value);
    }

    #[test]
    fn runtime_identity_follows_os_release() {
        let dir = tempfile::tempdir().unwrap();
        let cann = dir.path().join("cann.info");
        std::fs::write(&cann, b"version=9.1.0\n").unwrap();
        let os_a = dir.path().join("os-a");
        let os_b = dir.path().join("os-b");
        std::fs::write(&os_a, b"ID=ubuntu\n").unwrap();
        std::fs::write(&os_b, b"ID=openEuler\n").unwrap();
        let source = ToolchainSource::Cann(cann.clone());
        let digest = |os: &Path| {
            let files = PlatformFiles { os_release: os.to_path_buf() };
            let (toolchain, _) = toolchain_identity(&source, &files).unwrap();
            descriptor_digest(&descriptor("x64", "ascend910b1", toolchain)).unwrap()
        };
        assert_ne!(digest(&os_a), digest(&os_b));
        assert_eq!(digest(&os_a), digest(&os_a));
        let missing = ToolchainSource::Cann(dir.path().join("absent"));
        let err = toolchain_identity(&missing, &PlatformFiles::default()).unwrap_err();
        assert!(err.contains("--toolchain-image"), "{err}");
    }

    #[test]
    fn host_tools_are_sorted_and_checked() {
        let files = PlatformFiles::default();
        let (a, _) = toolchain_identity(
            &ToolchainSource::HostTools(vec!["ls".into(), "cat".into()]),
            &files,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (b, _) = toolchain_identity(
            &ToolchainSource::HostTools(vec!["cat".into(), "ls".into()]),
            &files,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b);
        assert_eq!(a["tools"][0]["name"], "cat");
        let err = toolchain_identity(
            &ToolchainSource::HostTools(vec!["no-such-tool-xyz".into()]),
            &files,
        )
        .unwrap_err();
        assert!(err.contains("not found"), "{err}");
    }
}
