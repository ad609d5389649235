//! `recipe_hash`: how it is compiled (seed 003 "配方与编译器环境"; spec/engine.md §2.4).
//!
//! Records:
//! * `recipe_file[j]` → file hash of the j-th `--recipe-file` under the same text rule as
//!   prepared inputs ([`super::prepared::semantic_file_hash`]); the file's name and path do
//!   not enter the hash. Recipe files and prepared files are classified the same way (the
//!   reference used two rules, §11 W23).
//! * `recipe_value[j]` → the normalised j-th `--recipe-value`.
//! * `original_command` → the compact JSON array of the normalised command tokens.
//! * `set_env[j]` → SHA-256 hex of the exact `NAME=VALUE` text (not normalised: an
//!   override may point at inputs nothing else covers, seed 003).
//! * `working_directory` → the normalised absolute `--working-directory`, only when given.
//!   Paths are recorded in the name encoding ([`crate::fs::name`]), so two directories
//!   whose names differ only in bytes that are not UTF-8 never share a record.
//! * `output_dir` → the normalised absolute `--output-dir`, and `artifact_include[k]` → each
//!   `--artifact-include` pattern: they decide which files an entry holds and where a HIT
//!   puts them, so changing them must not HIT an entry captured differently.

use std::path::{Path, PathBuf};

use super::normalize::Normalizer;
use super::prepared::semantic_file_hash;
use super::records::Records;
use crate::action::{Error, SetEnv};
use crate::digest::Sha256Digest;
use crate::fs;

/// What the recipe hash is computed from.
#[derive(Debug, Clone, Copy)]
pub struct RecipeInputs<'a> {
    /// `--recipe-file`, in order.
    pub files: &'a [PathBuf],
    /// `--recipe-value`, in order.
    pub values: &'a [String],
    /// The build command.
    pub command: &'a [String],
    /// `--set-env`, in order.
    pub set_env: &'a [SetEnv],
    /// `--working-directory`, if given.
    pub working_directory: Option<&'a Path>,
    /// `--output-dir`, if given.
    pub output_dir: Option<&'a Path>,
    /// `--artifact-include`, in order.
    pub artifact_include: &'a [String],
}

/// Computes the recipe records.
///
/// # Errors
/// [`Error::RecipeFileMissing`] if a recipe file is not a regular file; read errors.
pub fn recipe_records(
    inputs: &RecipeInputs<'_>,
    normalizer: &Normalizer,
) -> Result<Records, Error> {
    let mut records = Records::new();
    for (j, file) in inputs.files.iter().enumerate() {
        let resolved = fs::resolve_nonstrict(file)?;
        match fs::symlink_metadata_opt(&resolved)? {
            Some(m) if m.is_file() => {}
            _ => return Err(Error::RecipeFileMissing { path: file.clone() }),
        }
        let name = resolved.file_name().map(fs::name::encode_os).unwrap_or_default();
        let digest = semantic_file_hash(&resolved, &name, normalizer)?;
        records.push(format!("recipe_file[{j}]"), digest.to_hex());
    }
    for (j, value) in inputs.values.iter().enumerate() {
        records.push(format!("recipe_value[{j}]"), normalizer.apply(value));
    }
    let tokens: Vec<String> = inputs.command.iter().map(|t| normalizer.apply(t)).collect();
    let json = serde_json::to_string(&tokens).unwrap_or_default();
    records.push("original_command", json);
    for (j, env) in inputs.set_env.iter().enumerate() {
        records
            .push(format!("set_env[{j}]"), Sha256Digest::of_bytes(env.text().as_bytes()).to_hex());
    }
    if let Some(dir) = inputs.working_directory {
        let abs = fs::resolve_nonstrict(dir)?;
        records.push("working_directory", normalizer.apply(&fs::name::encode_os(abs.as_os_str())));
    }
    if let Some(dir) = inputs.output_dir {
        let abs = fs::resolve_nonstrict(dir)?;
        records.push("output_dir", normalizer.apply(&fs::name::encode_os(abs.as_os_str())));
    }
    for (k, pattern) in inputs.artifact_include.iter().enumerate() {
        records.push(format!("artifact_include[{k}]"), pattern.clone());
    }
    Ok(records)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn hash(inputs: &RecipeInputs<'_>, roots: &[&str]) -> Sha256Digest {
        let n = Normalizer::new(&roots.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        recipe_records(inputs, &n).unwrap().hash()
    }

    #[test]
    fn command_relocation_and_flag_change() {
        let cmd_a = vec!["c++".to_string(), "-I/a/root/inc".into(), "-O2".into()];
        let cmd_b = vec!["c++".to_string(), "-I/b/root/inc".into(), "-O2".into()];
        let cmd_c = vec!["c++".to_string(), "-I/b/root/inc".into(), "-O3".into()];
        let base = RecipeInputs {
            files: &[],
            values: &[],
            command: &cmd_a,
            set_env: &[],
            working_directory: None,
            output_dir: None,
            artifact_include: &[],
        };
        let ha = hash(&base, &["/a/root"]);
        assert_eq!(ha, hash(&RecipeInputs { command: &cmd_b, ..base }, &["/b/root"]));
        assert_ne!(ha, hash(&RecipeInputs { command: &cmd_c, ..base }, &["/b/root"]));
    }

    #[test]
    fn set_env_and_values_count() {
        let cmd = vec!["make".to_string()];
        let e1 = vec![SetEnv::parse("A=1").unwrap()];
        let e2 = vec![SetEnv::parse("A=2").unwrap()];
        let v1 = vec!["x".to_string()];
        let base = RecipeInputs {
            files: &[],
            values: &[],
            command: &cmd,
            set_env: &e1,
            working_directory: None,
            output_dir: None,
            artifact_include: &[],
        };
        let h = hash(&base, &[]);
        assert_ne!(h, hash(&RecipeInputs { set_env: &e2, ..base }, &[]));
        assert_ne!(h, hash(&RecipeInputs { values: &v1, ..base }, &[]));
    }

    #[test]
    fn recipe_file_content_not_name() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.sh"), b"cc x").unwrap();
        std::fs::write(d.path().join("b.sh"), b"cc x").unwrap();
        std::fs::write(d.path().join("c.sh"), b"cc y").unwrap();
        let cmd = vec!["sh".to_string()];
        let fa = vec![d.path().join("a.sh")];
        let fb = vec![d.path().join("b.sh")];
        let fc = vec![d.path().join("c.sh")];
        let base = RecipeInputs {
            files: &fa,
            values: &[],
            command: &cmd,
            set_env: &[],
            working_directory: None,
            output_dir: None,
            artifact_include: &[],
        };
        assert_eq!(hash(&base, &[]), hash(&RecipeInputs { files: &fb, ..base }, &[]));
        assert_ne!(hash(&base, &[]), hash(&RecipeInputs { files: &fc, ..base }, &[]));
        let missing = vec![d.path().join("nope.sh")];
        let n = Normalizer::default();
        assert!(matches!(
            recipe_records(&RecipeInputs { files: &missing, ..base }, &n),
            Err(Error::RecipeFileMissing { .. })
        ));
    }
}
