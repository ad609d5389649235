//! `strata action run | explain | prune`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::Failure;
use super::output::{errln, outln};
use strata::action::explain::Verdict;
use strata::action::run::Notice;
use strata::action::{Domain, IdentityInputs, Profile, RunOptions, SetEnv};
use strata::l1::lock::Timeouts;

#[derive(Debug, Subcommand)]
pub(crate) enum ActionCommand {
    /// Run one build action through the cache: restore it on a HIT, build and save on a MISS.
    Run(RunArgs),
    /// Explain why an action would miss: the identity records that differ from the nearest
    /// existing entry. Takes the same flags as `run`; builds nothing.
    Explain {
        #[command(flatten)]
        args: RunArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove old operator-text versions and crash leftovers. Run after a successful build.
    Prune {
        /// Cache root [env: STRATA_CACHE_ROOT; default: $XDG_CACHE_HOME/strata/cache].
        #[arg(long, value_name = "DIR")]
        cache_root: Option<PathBuf>,
        /// Operator-text versions kept per SoC/operator; 0 or less keeps all.
        #[arg(long, default_value_t = strata::l1::prune::DEFAULT_MAX_OPERATOR_VERSIONS, allow_negative_numbers = true)]
        max_operator_versions: i64,
        /// Evict the least recently used compile entries (the launcher's) until they fit in
        /// SIZE (bytes, or with K/M/G/T: 500M, 5G) [env: STRATA_COMPILE_MAX_SIZE].
        #[arg(long, value_name = "SIZE", value_parser = strata::config::parse_size)]
        compile_max_size: Option<u64>,
        /// List what would be removed without removing it.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DomainArg {
    #[value(name = "third_party")]
    ThirdParty,
    #[value(name = "custom_operator")]
    CustomOperator,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProfileArg {
    #[value(name = "host-cxx")]
    HostCxx,
    #[value(name = "ascendc")]
    Ascendc,
    #[value(name = "bare")]
    Bare,
}

/// The flags of `strata action run`: those of vllm-ascend's `csrc/scripts/build_cache.py run`,
/// with the same names and meaning, plus strata's own.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    digest: super::DigestArgs,
    /// Root of the persistent action cache (`~` expanded, symlinks resolved)
    /// [env: STRATA_CACHE_ROOT].
    #[arg(long, value_name = "DIR")]
    cache_root: Option<PathBuf>,
    /// Cache domain.
    #[arg(long, value_enum)]
    domain: DomainArg,
    /// Logical build unit (a path component for third_party; part of the action identity).
    #[arg(long)]
    unit: String,
    /// SoC name (custom_operator).
    #[arg(long)]
    soc: Option<String>,
    /// Operator name (custom_operator).
    #[arg(long)]
    operator: Option<String>,
    /// Action name, e.g. `OpType-3` (custom_operator).
    #[arg(long)]
    action: Option<String>,
    /// Operator source tree; its text is the entry namespace (custom_operator).
    #[arg(long, value_name = "DIR")]
    operator_source: Option<PathBuf>,
    /// Git repository whose tracked files define the operator text.
    #[arg(long, value_name = "DIR")]
    repo_root: Option<PathBuf>,
    /// Where the build writes outputs (custom_operator: the private stage, wiped by strata).
    #[arg(long, value_name = "DIR")]
    output_dir: PathBuf,
    /// Shared directory stage artifacts are published into (custom_operator).
    #[arg(long, value_name = "DIR")]
    publish_dir: Option<PathBuf>,
    /// Ownership state and locks of the publish directory (custom_operator).
    #[arg(long, value_name = "DIR")]
    publish_state_dir: Option<PathBuf>,
    /// What is compiled: files or directories (repeatable; order matters).
    #[arg(long, value_name = "PATH")]
    prepared_input: Vec<PathBuf>,
    /// Recipe files, e.g. a generated compile script (repeatable; order matters).
    #[arg(long, value_name = "PATH")]
    recipe_file: Vec<PathBuf>,
    /// Explicit recipe strings (repeatable; order matters).
    #[arg(long, value_name = "STR", allow_hyphen_values = true)]
    recipe_value: Vec<String>,
    /// Compiler environment profile.
    #[arg(long, value_enum)]
    environment_profile: ProfileArg,
    /// Toolchain metadata files (repeatable; each must exist).
    #[arg(long, value_name = "PATH")]
    environment_file: Vec<PathBuf>,
    /// Explicit environment strings (repeatable).
    #[arg(long, value_name = "STR", allow_hyphen_values = true)]
    environment_value: Vec<String>,
    /// Tools whose `--version` output is identity, added to the profile's defaults (a path
    /// may hold any bytes).
    #[arg(long, value_name = "TOOL")]
    environment_tool: Vec<OsString>,
    /// Tools identified by content too: the digest of the executable and, for a GCC-style
    /// driver, of its back ends (cc1, cc1plus, …), so toolchains that print the same
    /// `--version` never share entries (repeatable; memoised by stamp).
    #[arg(long, value_name = "TOOL")]
    environment_tool_content: Vec<OsString>,
    /// Physical roots replaced by `<PATH_i>` placeholders in text (repeatable; order gives i).
    #[arg(long, value_name = "DIR")]
    normalize_path: Vec<PathBuf>,
    /// Only cache output paths matching these globs (`*` crosses `/`).
    #[arg(long, value_name = "GLOB")]
    artifact_include: Vec<String>,
    /// Extra exclusions for directory walks of prepared inputs.
    #[arg(long, value_name = "GLOB")]
    exclude: Vec<String>,
    /// Environment override for the build command, NAME=VALUE (part of the recipe; the
    /// value is any bytes).
    #[arg(long, value_name = "NAME=VALUE", allow_hyphen_values = true)]
    set_env: Vec<OsString>,
    /// Working directory of the build command.
    #[arg(long, value_name = "DIR")]
    working_directory: Option<PathBuf>,
    /// Append JSONL events to this file [env: STRATA_EVENT_LOG; empty means none].
    #[arg(long, value_name = "FILE")]
    event_log: Option<PathBuf>,
    #[command(flatten)]
    remote: super::remote::RemoteArgs,
    /// The build command and its arguments (after the options, optionally after `--`);
    /// arguments are bytes, passed on exactly.
    #[arg(trailing_var_arg = true, value_name = "CMD", required = true)]
    command: Vec<OsString>,
}

impl RunArgs {
    fn into_options(self) -> Result<RunOptions, Failure> {
        let mut set_env = Vec::new();
        for text in &self.set_env {
            set_env.push(SetEnv::parse(text).map_err(Failure::of)?);
        }
        let timeouts = Timeouts::from_env().map_err(Failure::of)?;
        let mut command = self.command;
        if command.first().is_some_and(|c| c == "--") {
            command.remove(0);
        }
        let t = |p: PathBuf| strata::fs::expand_tilde(&p);
        let ts = |v: Vec<PathBuf>| {
            v.into_iter().map(|p| strata::fs::expand_tilde(&p)).collect::<Vec<_>>()
        };
        Ok(RunOptions {
            digest: self.digest.digest,
            cache_root: t(cache_root(self.cache_root)?),
            domain: match self.domain {
                DomainArg::ThirdParty => Domain::ThirdParty,
                DomainArg::CustomOperator => Domain::CustomOperator,
            },
            unit: self.unit,
            soc: self.soc,
            operator: self.operator,
            action: self.action,
            output_dir: t(self.output_dir),
            publish_dir: self.publish_dir.map(t),
            publish_state_dir: self.publish_state_dir.map(t),
            artifact_include: self.artifact_include,
            identity: IdentityInputs {
                prepared_inputs: ts(self.prepared_input),
                excludes: self.exclude,
                normalize_paths: ts(self.normalize_path),
                recipe_files: ts(self.recipe_file),
                recipe_values: self.recipe_value,
                command,
                set_env,
                working_directory: self.working_directory.map(t),
                profile: Some(match self.environment_profile {
                    ProfileArg::HostCxx => Profile::HostCxx,
                    ProfileArg::Ascendc => Profile::Ascendc,
                    ProfileArg::Bare => Profile::Bare,
                }),
                environment_files: ts(self.environment_file),
                environment_values: self.environment_value,
                environment_tools: self
                    .environment_tool
                    .iter()
                    .map(|t| strata::fs::name::display_text(std::path::Path::new(t)))
                    .collect(),
                environment_tool_contents: self
                    .environment_tool_content
                    .iter()
                    .map(|t| strata::fs::name::display_text(std::path::Path::new(t)))
                    .collect(),
                operator_source: self.operator_source.map(t),
                repo_root: self.repo_root.map(t),
                // Filled from the fields above by `strata::action::prepare::prepare`, the one
                // preparation `run` and `explain` share.
                output_dir: None,
                artifact_include: Vec::new(),
                skip_dirs: Vec::new(),
            },
            timeouts,
            event_log: strata::config::event_log(self.event_log.map(t).as_deref()),
            remote: self.remote.tier()?,
        })
    }
}

/// `--cache-root`, else a non-empty `STRATA_CACHE_ROOT`, else a usage error.
fn cache_root(flag: Option<PathBuf>) -> Result<PathBuf, Failure> {
    strata::config::cache_root(flag.as_deref()).ok_or_else(|| Failure {
        code: super::exit::USAGE,
        error: anyhow::anyhow!("missing --cache-root (or set STRATA_CACHE_ROOT)"),
    })
}

pub(crate) fn run(cmd: ActionCommand) -> Result<i32, Failure> {
    match cmd {
        ActionCommand::Run(args) => run_action(args),
        ActionCommand::Explain { args, json } => explain(args, json),
        ActionCommand::Prune {
            cache_root: root,
            max_operator_versions,
            compile_max_size,
            dry_run,
            json,
        } => {
            let compile_max_size = match compile_max_size {
                Some(size) => Some(size),
                None => strata::config::var_text("STRATA_COMPILE_MAX_SIZE")
                    .map(|v| strata::config::parse_size(&v))
                    .transpose()
                    .map_err(|e| Failure::usage(anyhow::anyhow!("STRATA_COMPILE_MAX_SIZE: {e}")))?,
            };
            prune(
                super::stats::cache_root_or_default(root)?,
                max_operator_versions,
                compile_max_size,
                dry_run,
                json,
            )
        }
    }
}

fn run_action(args: RunArgs) -> Result<i32, Failure> {
    let opts = args.into_options()?;
    if opts.remote.is_some() {
        // The remote store's transport warns through the log (e.g. a store that lacks an
        // optional S3 feature, said once): show it on stderr, as snapshot commands do.
        super::log::init();
    }
    let domain = opts.domain;
    // `unit=<u>` for third-party actions; custom operators also name soc, operator, action.
    let mut unit = opts.unit.clone();
    for (name, value) in
        [("soc", &opts.soc), ("operator", &opts.operator), ("action", &opts.action)]
    {
        if let Some(v) = value.as_ref().filter(|_| domain == Domain::CustomOperator) {
            unit.push_str(&format!(" {name}={v}"));
        }
    }
    let mut notify = |n: Notice| {
        let line = match n {
            Notice::Hit { key, artifacts, remote } => {
                // A remote HIT says where the entry came from (it was fetched and installed
                // just now); a local one is the plain line.
                let source = if remote { " source=remote" } else { "" };
                format!(
                    "strata: HIT domain={domain} unit={unit} key={key} artifacts={artifacts}{source}"
                )
            }
            Notice::Miss { key } => format!("strata: MISS domain={domain} unit={unit} key={key}"),
            Notice::Saved { key, artifacts, build } => format!(
                "strata: SAVED domain={domain} unit={unit} key={key} artifacts={artifacts} build_seconds={:.3}",
                build.as_secs_f64()
            ),
            Notice::Bypass { reason } => {
                format!("strata: BYPASS domain={domain} unit={unit} reason={reason}")
            }
            Notice::Warning { component, message } => {
                format!("strata: WARNING {component} domain={domain} unit={unit}: {message}")
            }
            Notice::Signal { signal, interrupted: false } => {
                format!("strata: build command killed by signal {signal}")
            }
            Notice::Signal { signal, interrupted: true } => format!(
                "strata: interrupted by signal {signal}, forwarded to the build command; nothing saved"
            ),
        };
        errln!("{line}");
    };
    let report = strata::action::run(&opts, &mut notify).map_err(Failure::of)?;
    Ok(report.exit_code)
}

fn explain(args: RunArgs, json: bool) -> Result<i32, Failure> {
    let opts = args.into_options()?;
    let ex = strata::action::explain::explain(&opts).map_err(Failure::of)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&ex)?)?;
        return Ok(0);
    }
    outln!("strata: explain domain={} unit={} key={}", ex.domain, ex.unit, ex.key)?;
    match &ex.verdict {
        Verdict::Hit { entry } => outln!(
            "HIT: an entry for this key exists at {} and is structurally valid (run verifies every byte as it restores)",
            entry.display()
        )?,
        Verdict::Invalid { entry, reason } => {
            outln!("MISS: the entry at {} exists but is invalid: {reason}", entry.display())?
        }
        Verdict::NoEntries => outln!("MISS: the cache holds no entry for this unit/action yet")?,
        Verdict::Nearest { nearest_key, entry, created_at, differences }
            if *nearest_key == ex.key =>
        {
            outln!(
                "MISS: an entry with this action key exists under another operator-text namespace \
                 (saved {created_at}) at {}; the operator's source text changed:",
                entry.display()
            )?;
            for d in differences {
                outln!("  {}", d.describe())?;
            }
        }
        Verdict::Nearest { nearest_key: key, entry, created_at, differences } => {
            outln!(
                "MISS: nearest entry {key} (saved {created_at}, {} difference{}) at {}",
                differences.len(),
                if differences.len() == 1 { "" } else { "s" },
                entry.display()
            )?;
            for d in differences {
                outln!("  {}", d.describe())?;
            }
        }
    }
    Ok(0)
}

fn prune(
    cache_root: PathBuf,
    max: i64,
    compile_max_size: Option<u64>,
    dry_run: bool,
    json: bool,
) -> Result<i32, Failure> {
    let options = strata::l1::prune::PruneOptions {
        max_operator_versions: max,
        compile_max_bytes: compile_max_size,
        dry_run,
    };
    let report = strata::l1::prune::prune(&cache_root, &options, &strata::launcher::report::Format);
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(0);
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    for r in &report.removed {
        outln!("strata: prune {verb} {} ({}, {} bytes)", r.path.display(), r.kind, r.bytes)?;
    }
    for p in &report.skipped_busy {
        outln!("strata: prune kept {} (in use)", p.display())?;
    }
    for w in &report.warnings {
        errln!("strata: WARNING prune: {w}");
    }
    let total: u64 = report.removed.iter().map(|r| r.bytes).sum();
    outln!("strata: prune {verb} {} item(s), {total} bytes", report.removed.len())?;
    Ok(0)
}
