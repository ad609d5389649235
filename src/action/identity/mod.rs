//! Action identity: the key of one build action.
//!
//! ```text
//! action key = canonical_hash({ ("compiler_environment_hash", E),
//!                               ("prepared_input_hash",       P),
//!                               ("recipe_hash",               R) })
//! ```
//!
//! * P, [`prepared`]: what is compiled (files and trees, normalised text);
//! * R, [`recipe`]: how (recipe files and values, the command, `--set-env`);
//! * E, [`environment`]: which toolchain (platform, tool versions, metadata files, values);
//! * `operator_text_hash`, [`operator`]: custom operators only; a namespace in the entry
//!   path, not part of the key.
//!
//! Every component is a multiset of `(name, value)` records hashed by [`Records::hash`].
//! The records themselves are stored beside each entry so `strata action explain` can name
//! what changed. Relocating a checkout keeps every key as long as the moved roots are
//! passed as `--normalize-path` ([`normalize`]); any semantic change changes a key. Both
//! directions of every normalisation rule are tested: relocation stays a HIT, a semantic
//! change becomes a MISS.

pub mod environment;
pub mod glob;
pub mod normalize;
pub mod operator;
pub mod prepared;
pub mod recipe;
pub mod records;
pub mod wrapper;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use environment::{EnvironmentInputs, Profile};
pub use glob::Patterns;
pub use normalize::Normalizer;
pub use recipe::RecipeInputs;
pub use records::{Record, Records};

use crate::action::Error;
use crate::digest::Sha256Digest;
use crate::fs;

/// The key of one build action: 64 lowercase hex characters.
///
/// ```
/// use strata::action::ActionKey;
/// let text = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// let key: ActionKey = text.parse().unwrap();
/// assert_eq!(key.to_string(), text);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ActionKey(Sha256Digest);

impl ActionKey {
    /// The key of the three component hashes.
    pub fn from_components(
        prepared: &Sha256Digest,
        recipe: &Sha256Digest,
        environment: &Sha256Digest,
    ) -> Self {
        let mut r = Records::new();
        r.push("compiler_environment_hash", environment.to_hex());
        r.push("prepared_input_hash", prepared.to_hex());
        r.push("recipe_hash", recipe.to_hex());
        ActionKey(r.hash())
    }

    /// The digest.
    pub fn digest(&self) -> &Sha256Digest {
        &self.0
    }
}

impl FromStr for ActionKey {
    type Err = crate::digest::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(ActionKey)
    }
}

impl fmt::Display for ActionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for ActionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActionKey({})", self.0)
    }
}

/// Everything identity is computed from (the identity-relevant `strata action run` flags).
#[derive(Debug, Clone, Default)]
pub struct IdentityInputs {
    /// `--prepared-input`, in order.
    pub prepared_inputs: Vec<PathBuf>,
    /// `--exclude` (added to the defaults).
    pub excludes: Vec<String>,
    /// `--normalize-path`, in order (made absolute and resolved here).
    pub normalize_paths: Vec<PathBuf>,
    /// `--recipe-file`, in order.
    pub recipe_files: Vec<PathBuf>,
    /// `--recipe-value`, in order.
    pub recipe_values: Vec<String>,
    /// The build command (arguments are bytes).
    pub command: Vec<std::ffi::OsString>,
    /// `--set-env`, in order.
    pub set_env: Vec<crate::action::SetEnv>,
    /// `--working-directory`.
    pub working_directory: Option<PathBuf>,
    /// `--environment-profile`.
    pub profile: Option<Profile>,
    /// `--environment-file`.
    pub environment_files: Vec<PathBuf>,
    /// `--environment-value`.
    pub environment_values: Vec<String>,
    /// `--environment-tool` (a path that is not UTF-8 in the name encoding, which tool
    /// lookup decodes).
    pub environment_tools: Vec<String>,
    /// `--environment-tool-content`: tools identified by the digest of their executable and
    /// back ends as well ([`crate::toolchain::content`]), in the name encoding.
    pub environment_tool_contents: Vec<String>,
    /// `--operator-source` (custom operators).
    pub operator_source: Option<PathBuf>,
    /// `--repo-root`.
    pub repo_root: Option<PathBuf>,
    /// `--output-dir` (part of the recipe: it decides what an entry captures).
    /// [`crate::action::prepare::prepare`] sets it from [`crate::action::RunOptions`].
    pub output_dir: Option<PathBuf>,
    /// `--artifact-include` (part of the recipe); set by `prepare` like `output_dir`.
    pub artifact_include: Vec<String>,
    /// Absolute, resolved paths never walked inside prepared inputs: directories with
    /// their subtrees (the cache root, output, publish and state directories) and files
    /// (the event log). What strata and the build write is not an input. Not identity
    /// themselves; [`crate::action::prepare::prepare`] fills them.
    pub skip_dirs: Vec<PathBuf>,
}

/// The computed identity of an action.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The action key.
    pub key: ActionKey,
    /// Hash of the prepared-input records ([`Components::prepared`]).
    pub prepared_input_hash: Sha256Digest,
    /// Hash of the recipe records ([`Components::recipe`]).
    pub recipe_hash: Sha256Digest,
    /// Hash of the environment records ([`Components::environment`]).
    pub compiler_environment_hash: Sha256Digest,
    /// Namespace of custom operators.
    pub operator_text_hash: Option<Sha256Digest>,
    /// Component records, sorted.
    pub components: Components,
    /// Time spent hashing.
    pub elapsed: Duration,
}

/// The records of each identity component (stored as an entry's `identity.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Components {
    /// Prepared-input records.
    pub prepared: Records,
    /// Recipe records.
    pub recipe: Records,
    /// Compiler-environment records.
    pub environment: Records,
    /// Operator-text records (custom operators).
    pub operator_text: Option<Records>,
}

/// The texts a root path is spelled with: its recorded form (the name encoding of
/// [`crate::fs::name`], as paths are recorded in identity), and, when it differs (a
/// backslash in the path), the plain text as it appears in files and commands. A root that
/// is not UTF-8 has only its recorded form: it cannot occur in UTF-8 text.
fn root_spellings(path: &Path) -> Vec<String> {
    let recorded = fs::name::encode_os(path.as_os_str());
    match path.to_str() {
        Some(plain) if plain != recorded => vec![plain.to_owned(), recorded],
        _ => vec![recorded],
    }
}

/// Computes the identity.
///
/// # Errors
/// Any unreadable or missing declared input, an unknown tool, an invalid glob
/// (see [`Error`]).
pub fn compute(inputs: &IdentityInputs, memo_dir: Option<&Path>) -> Result<Identity, Error> {
    let start = Instant::now();
    // Each root in its resolved form and as given (made absolute): a checkout reached
    // through a symlinked directory is spelled both ways in commands and files.
    let mut roots = Vec::new();
    for p in &inputs.normalize_paths {
        let given = fs::expand_tilde(p);
        let mut spellings = root_spellings(&fs::resolve_nonstrict(&given)?);
        for spelling in root_spellings(&fs::absolute(&given)?) {
            if !spellings.contains(&spelling) {
                spellings.push(spelling);
            }
        }
        roots.push(spellings);
    }
    let normalizer = Normalizer::with_spellings(&roots);
    let excludes = Patterns::excludes_with(&inputs.excludes)?;
    let prepared = prepared::prepared_input_records(
        &inputs.prepared_inputs,
        &excludes,
        &inputs.skip_dirs,
        &normalizer,
    )?;
    let recipe = recipe::recipe_records(
        &RecipeInputs {
            files: &inputs.recipe_files,
            values: &inputs.recipe_values,
            command: &inputs.command,
            set_env: &inputs.set_env,
            working_directory: inputs.working_directory.as_deref(),
            output_dir: inputs.output_dir.as_deref(),
            artifact_include: &inputs.artifact_include,
        },
        &normalizer,
    )?;
    // Tools are looked up on the PATH the build runs with.
    let path_var = inputs.set_env.iter().rev().find(|e| e.name() == "PATH").map(|e| e.value());
    // The compiler is found by the text of the arguments: UTF-8 ones as they are, others
    // in the name encoding (which `resolve_tool` decodes back to the real path).
    let command_text: Vec<String> = inputs
        .command
        .iter()
        .map(|t| t.to_str().map_or_else(|| fs::name::encode_os(t), str::to_owned))
        .collect();
    let detected = wrapper::command_compilers(&command_text);
    let environment = environment::environment_records(&EnvironmentInputs {
        profile: inputs.profile.unwrap_or(Profile::HostCxx),
        files: &inputs.environment_files,
        values: &inputs.environment_values,
        tools: &inputs.environment_tools,
        content_tools: &inputs.environment_tool_contents,
        detected_tools: &detected,
        path_var,
        memo_dir,
    })?;
    let operator_text = match &inputs.operator_source {
        Some(src) => Some(operator::operator_text_records(src, inputs.repo_root.as_deref())?),
        None => None,
    };
    let prepared_input_hash = prepared.hash();
    let recipe_hash = recipe.hash();
    let compiler_environment_hash = environment.hash();
    Ok(Identity {
        key: ActionKey::from_components(
            &prepared_input_hash,
            &recipe_hash,
            &compiler_environment_hash,
        ),
        prepared_input_hash,
        recipe_hash,
        compiler_environment_hash,
        operator_text_hash: operator_text.as_ref().map(Records::hash),
        components: Components {
            prepared: prepared.into_sorted(),
            recipe: recipe.into_sorted(),
            environment: environment.into_sorted(),
            operator_text: operator_text.map(Records::into_sorted),
        },
        elapsed: start.elapsed(),
    })
}
