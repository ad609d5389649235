//! `compiler_environment_hash`: which toolchain compiles it.
//!
//! Records:
//! * `profile`, `system` (uname sysname, e.g. `Linux`), `machine` (uname machine, e.g.
//!   `x86_64`);
//! * `tool:<name>` → version text ([`crate::toolchain`]) for the profile's default tools *and*
//!   every `--environment-tool` (giving one tool never drops the defaults). `<name>` is the
//!   basename of the tool as given (`c++`, `g++-12`), not of the resolved file, so an alternatives
//!   symlink does not change identity. Tools are deduplicated by canonical path. An explicit tool
//!   that cannot be found or whose `--version` fails is an error; a missing *default* tool records
//!   `absent` (a stable value, never silently dropped); a default tool whose `--version` fails
//!   records `unavailable`.
//! * `metadata:<basename>` → SHA-256 hex of each `--environment-file` (must be a regular
//!   file) and, for the `ascendc` profile, of each CANN metadata candidate that exists
//!   (an unreadable candidate records `unreadable`);
//! * `value[k]` → each `--environment-value`, verbatim.
//!
//! The tool's installation path is not identity: two copies with identical `--version`
//! output are the same toolchain.

use std::path::{Path, PathBuf};

use super::records::Records;
use crate::action::Error;
use crate::fs;
use crate::toolchain::{resolve_tool, tool_content, tool_version};

/// Compiler environment profile (`--environment-profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Host C/C++ builds: default tools `cc`, `c++`, `cmake`.
    HostCxx,
    /// Ascend C operator builds: default tools `bisheng`, `ccec`, plus CANN metadata files.
    Ascendc,
    /// No default tools; only what is given explicitly.
    Bare,
}

impl Profile {
    /// The flag spelling: `host-cxx`, `ascendc` or `bare`.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::HostCxx => "host-cxx",
            Profile::Ascendc => "ascendc",
            Profile::Bare => "bare",
        }
    }

    /// Parses the flag spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "host-cxx" => Some(Profile::HostCxx),
            "ascendc" => Some(Profile::Ascendc),
            "bare" => Some(Profile::Bare),
            _ => None,
        }
    }

    /// Tools hashed by default.
    pub fn default_tools(self) -> &'static [&'static str] {
        match self {
            Profile::HostCxx => &["cc", "c++", "cmake"],
            Profile::Ascendc => &["bisheng", "ccec"],
            Profile::Bare => &[],
        }
    }
}

/// What the environment hash is computed from.
#[derive(Debug, Clone, Copy)]
pub struct EnvironmentInputs<'a> {
    /// The profile.
    pub profile: Profile,
    /// `--environment-file`, in order.
    pub files: &'a [PathBuf],
    /// `--environment-value`, in order.
    pub values: &'a [String],
    /// `--environment-tool`, in order.
    pub tools: &'a [String],
    /// `--environment-tool-content`, in order: recorded as `tool-content:<name>`, the
    /// content digest of the tool ([`crate::toolchain::tool_content`]).
    pub content_tools: &'a [String],
    /// Compilers found in the build command ([`super::wrapper::command_compilers`]):
    /// recorded like explicit tools, but one that cannot be found or run records `absent` /
    /// `unavailable` instead of failing the build.
    pub detected_tools: &'a [String],
    /// The `PATH` the build command runs with (a `--set-env PATH=` override), used to find
    /// tools; `None` means strata's own `PATH`.
    pub path_var: Option<&'a std::ffi::OsStr>,
    /// Where tool versions are memoised (`None`: always run `--version`).
    pub memo_dir: Option<&'a Path>,
}

/// Computes the environment records.
///
/// # Errors
/// [`Error::EnvironmentFileMissing`], [`Error::ToolNotFound`], [`Error::Toolchain`], I/O.
pub fn environment_records(inputs: &EnvironmentInputs<'_>) -> Result<Records, Error> {
    let mut records = Records::new();
    records.push("profile", inputs.profile.as_str());
    let uname = rustix::system::uname();
    records.push("system", uname.sysname().to_string_lossy().into_owned());
    records.push("machine", uname.machine().to_string_lossy().into_owned());

    let mut seen: Vec<PathBuf> = Vec::new();
    // Default and detected tools may be missing or fail: that is recorded, never fatal.
    let lenient = inputs.profile.default_tools().iter().map(|t| (*t, *t)).chain(
        inputs.detected_tools.iter().map(|t| (t.as_str(), t.rsplit('/').next().unwrap_or(t))),
    );
    for (tool, base) in lenient {
        let name = format!("tool:{base}");
        match resolve_tool(tool, inputs.path_var) {
            None => records.push(name, "absent"),
            Some(canon) if seen.contains(&canon) => {}
            Some(canon) => {
                let version = tool_version(&canon, inputs.memo_dir).unwrap_or_else(|e| {
                    tracing::warn!("{e}");
                    "unavailable".to_owned()
                });
                records.push(name, version);
                seen.push(canon);
            }
        }
    }
    for tool in inputs.tools {
        let canon = resolve_tool(tool, inputs.path_var)
            .ok_or_else(|| Error::ToolNotFound { tool: tool.clone() })?;
        if seen.contains(&canon) {
            continue;
        }
        let base = tool.rsplit('/').next().unwrap_or(tool);
        records.push(format!("tool:{base}"), tool_version(&canon, inputs.memo_dir)?);
        seen.push(canon);
    }

    for tool in inputs.content_tools {
        let canon = resolve_tool(tool, inputs.path_var)
            .ok_or_else(|| Error::ToolNotFound { tool: tool.clone() })?;
        let base = tool.rsplit('/').next().unwrap_or(tool);
        records.push(format!("tool-content:{base}"), tool_content(&canon, inputs.memo_dir)?);
    }
    for file in inputs.files {
        let path = fs::expand_tilde(file);
        match fs::metadata(&path) {
            Ok(m) if m.is_file() => {}
            _ => return Err(Error::EnvironmentFileMissing { path }),
        }
        let (digest, _) = fs::hash_file(&path)?;
        records.push(format!("metadata:{}", basename(&path)), digest.to_hex());
    }
    if inputs.profile == Profile::Ascendc {
        for candidate in cann_candidates() {
            if !fs::metadata(&candidate).is_ok_and(|m| m.is_file()) {
                continue;
            }
            let value = match fs::hash_file(&candidate) {
                Ok((digest, _)) => digest.to_hex(),
                Err(_) => "unreadable".to_owned(),
            };
            records.push(format!("metadata:{}", basename(&candidate)), value);
        }
    }
    for (k, value) in inputs.values.iter().enumerate() {
        records.push(format!("value[{k}]"), value.clone());
    }
    Ok(records)
}

fn basename(path: &Path) -> String {
    path.file_name().map(fs::name::encode_os).unwrap_or_default()
}

/// CANN metadata candidates, from `ASCEND_HOME_PATH`, `ASCEND_TOOLKIT_HOME`, the parent of
/// `ASCEND_OPP_PATH`, then `/etc/ascend_install.info`; deduplicated.
fn cann_candidates() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for var in ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"] {
        if let Some(v) = crate::config::var(var) {
            roots.push(PathBuf::from(v));
        }
    }
    if let Some(v) = crate::config::var("ASCEND_OPP_PATH")
        && let Some(parent) = Path::new(&v).parent()
    {
        roots.push(parent.to_path_buf());
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for root in roots {
        for c in [
            root.join("version.info"),
            root.join("ascend_toolkit_install.info"),
            root.join("../version.info"),
        ] {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    let etc = PathBuf::from("/etc/ascend_install.info");
    if !out.contains(&etc) {
        out.push(etc);
    }
    out
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn files_and_values() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("version.info"), b"1").unwrap();
        let files = vec![d.path().join("version.info")];
        let vals = vec!["abi=1".to_string()];
        let base = EnvironmentInputs {
            profile: Profile::Bare,
            files: &files,
            values: &vals,
            tools: &[],
            content_tools: &[],
            detected_tools: &[],
            path_var: None,
            memo_dir: None,
        };
        let a = environment_records(&base).unwrap();
        std::fs::write(d.path().join("version.info"), b"2").unwrap();
        let b = environment_records(&base).unwrap();
        assert_ne!(a.hash(), b.hash());
        let missing = vec![d.path().join("nope")];
        assert!(matches!(
            environment_records(&EnvironmentInputs { files: &missing, ..base }),
            Err(Error::EnvironmentFileMissing { .. })
        ));
        let tools = vec!["no-such-compiler-xyz".to_string()];
        assert!(matches!(
            environment_records(&EnvironmentInputs { tools: &tools, ..base }),
            Err(Error::ToolNotFound { .. })
        ));
    }
}
