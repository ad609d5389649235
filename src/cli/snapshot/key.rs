//! `strata snapshot key`: the snapshot key and its two prefixes, and the exports that come
//! first (the absolute cache directory, the event log).

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{check_github_output, env, github_write, non_empty, print_json, usage, warn};
use crate::cli::Failure;
use crate::cli::output::outln;
use strata::ci::Github;
use strata::snapshot::compat::PlatformFiles;
use strata::snapshot::key::{DEFAULT_PREFIX, RunContext, event_log_path};
use strata::snapshot::{self, KeyRequest};

#[derive(Debug, Args)]
pub(crate) struct KeyArgs {
    /// Key namespace prefix [env: STRATA_SNAPSHOT_PREFIX].
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// Target architecture: x64, x86_64, amd64, arm64 or aarch64 [default: the host's].
    #[arg(long, value_name = "ARCH")]
    architecture: Option<String>,
    /// SoC (canonicalised with the alias table) [default: none].
    #[arg(long, value_name = "SOC")]
    soc: Option<String>,
    /// Extra SoC aliases: a file of `alias = canonical` lines.
    #[arg(long, value_name = "FILE")]
    soc_aliases: Option<PathBuf>,
    /// Compiler image of a nested container build (wins over everything else; prefer
    /// image@sha256:<hex>).
    #[arg(long, value_name = "IMAGE")]
    toolchain_image: Option<String>,
    /// Host tool whose `--version` output is toolchain identity (repeatable), with the
    /// OS, libc and os-release digest.
    #[arg(long, value_name = "TOOL")]
    toolchain_tool: Vec<String>,
    /// Identify the --toolchain-tool tools by content too (the digest of the executable and,
    /// for a GCC-style driver, its back ends), so toolchains printing the same `--version`
    /// never share a namespace.
    #[arg(long)]
    toolchain_tool_content: bool,
    /// CANN metadata file [env: STRATA_CANN_METADATA; default:
    /// /usr/local/Ascend/ascend-toolkit/latest/<arch>-linux/ascend_toolkit_install.info].
    #[arg(long, value_name = "FILE")]
    cann_metadata: Option<PathBuf>,
    /// The os-release file whose SHA-256 is OS identity.
    #[arg(long, value_name = "FILE", default_value = "/etc/os-release")]
    os_release: PathBuf,
    /// Source tree whose tracked files give the source hash.
    #[arg(long, value_name = "DIR", default_value = ".")]
    source_root: PathBuf,
    /// git pathspec hashed under the source root (repeatable) [default: every tracked file].
    #[arg(long, value_name = "PATHSPEC")]
    source_path: Vec<std::ffi::OsString>,
    /// A path under the source root that must exist, else the tree is unsupported
    /// (repeatable).
    #[arg(long, value_name = "PATH")]
    require: Vec<PathBuf>,
    /// Use this source hash instead of running git (letters, digits, '.', '_').
    #[arg(long, value_name = "HASH")]
    source_hash: Option<String>,
    /// The cache directory to export (absolute) as STRATA_CACHE_ROOT with --github-output.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Print one JSON object (with the compatibility descriptor) instead of three lines.
    #[arg(long)]
    json: bool,
    /// Write outputs to $GITHUB_OUTPUT and variables to $GITHUB_ENV.
    #[arg(long)]
    github_output: bool,
}

pub(super) fn key(args: KeyArgs) -> Result<i32, Failure> {
    let gh = Github::from_env();
    check_github_output(&gh, args.github_output);
    let request = KeyRequest {
        prefix: non_empty(args.prefix)
            .or_else(|| env("STRATA_SNAPSHOT_PREFIX"))
            .unwrap_or_else(|| DEFAULT_PREFIX.to_owned()),
        architecture: non_empty(args.architecture).unwrap_or_else(snapshot::compat::host_machine),
        soc: non_empty(args.soc),
        soc_aliases: args.soc_aliases.filter(|p| !p.as_os_str().is_empty()),
        toolchain_image: non_empty(args.toolchain_image),
        toolchain_tools: args.toolchain_tool.into_iter().filter(|t| !t.trim().is_empty()).collect(),
        toolchain_tool_content: args.toolchain_tool_content,
        cann_metadata: args
            .cann_metadata
            .filter(|p| !p.as_os_str().is_empty())
            .or_else(|| env("STRATA_CANN_METADATA").map(PathBuf::from)),
        platform: PlatformFiles { os_release: args.os_release },
        source_root: args.source_root,
        source_paths: args.source_path.into_iter().filter(|p| !p.is_empty()).collect(),
        require: args.require.into_iter().filter(|p| !p.as_os_str().is_empty()).collect(),
        source_hash: non_empty(args.source_hash),
        run: RunContext { run_id: env("GITHUB_RUN_ID"), attempt: env("GITHUB_RUN_ATTEMPT") },
    };

    // Exports come first, even for an unsupported key (reference §1.8 step 2).
    let abs_cache = match args.cache_dir.filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => Some(
            strata::action::CacheRoot::new(&dir)
                .map_err(|e| usage("--cache-dir", e))?
                .path()
                .to_path_buf(),
        ),
        None => None,
    };
    let events = env("STRATA_EVENT_LOG").map(PathBuf::from).or_else(|| {
        let runner_temp = env("RUNNER_TEMP").map(PathBuf::from);
        let anchor = abs_cache.clone().or_else(|| runner_temp.clone())?;
        Some(event_log_path(runner_temp.as_deref(), &anchor, env("GITHUB_JOB").as_deref()))
    });
    if args.github_output {
        let mut vars = Vec::new();
        if let Some(dir) = &abs_cache {
            vars.push(("STRATA_CACHE_ROOT", dir.display().to_string()));
        }
        if let Some(log) = &events {
            vars.push(("STRATA_EVENT_LOG", log.display().to_string()));
        }
        github_write(&gh, gh.set_env(&vars));
    }

    let report = snapshot::compute_key(&request).map_err(Failure::of)?;
    for warning in &report.warnings {
        warn(&gh, "snapshot key", warning);
    }
    if let Some(reason) = &report.reason {
        warn(
            &gh,
            "snapshot key unavailable",
            &format!("{reason}; building without a persistent L1 snapshot"),
        );
    }
    if args.github_output {
        let keys = report.keys.as_ref();
        let field = |f: fn(&snapshot::Keys) -> &String| keys.map(f).cloned().unwrap_or_default();
        let outputs = vec![
            ("supported", report.supported.to_string()),
            ("primary-key", field(|k| &k.primary_key)),
            ("same-source-prefix", field(|k| &k.same_source_prefix)),
            ("compat-prefix", field(|k| &k.compat_prefix)),
            ("source-hash", field(|k| &k.source_hash)),
            ("compat-digest", field(|k| &k.compat_digest)),
            (
                "restore-keys",
                keys.map(|k| format!("{}\n{}", k.same_source_prefix, k.compat_prefix))
                    .unwrap_or_default(),
            ),
            ("cache-dir", abs_cache.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
            ("event-log", events.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
            ("reason", report.reason.clone().unwrap_or_default()),
        ];
        github_write(&gh, gh.set_outputs(&outputs));
    }
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["cache_dir"] = json!(abs_cache.as_deref().map(strata::fs::name::display_text));
        value["event_log"] = json!(events.as_deref().map(strata::fs::name::display_text));
        print_json(&value)?;
    } else if let Some(keys) = &report.keys {
        outln!("{}\n{}\n{}", keys.primary_key, keys.same_source_prefix, keys.compat_prefix)?;
    }
    Ok(0)
}
