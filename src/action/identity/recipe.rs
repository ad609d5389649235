//! `recipe_hash`: how it is compiled.
//!
//! Records:
//! * `recipe_file[j]` → file hash of the j-th `--recipe-file` under the same text rule as
//!   prepared inputs ([`super::prepared::semantic_file_hash`]); the file's name and path do
//!   not enter the hash. Recipe files and prepared files are classified the same way (one
//!   "looks like text" rule).
//! * `recipe_value[j]` → the normalised j-th `--recipe-value`.
//! * `original_command` → the compact JSON array of the normalised command tokens; when a
//!   token is not UTF-8, `original_command_bytes` instead, every token in the name encoding
//!   ([`crate::fs::name`]).
//! * `set_env[j]` → SHA-256 hex of the exact `NAME=VALUE` bytes (not normalised: an
//!   override may point at inputs nothing else covers).
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
    pub command: &'a [std::ffi::OsString],
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
    // Arguments are bytes. A command of UTF-8 arguments is recorded as it always was; one
    // with an argument that is not UTF-8 is recorded under another name, every argument in
    // the name encoding, so no two commands share a record.
    let (record, tokens): (&str, Vec<String>) =
        match inputs.command.iter().map(|t| t.to_str()).collect::<Option<Vec<&str>>>() {
            Some(text) => ("original_command", text.iter().map(|t| normalizer.apply(t)).collect()),
            None => (
                "original_command_bytes",
                inputs.command.iter().map(|t| normalizer.apply(&fs::name::encode_os(t))).collect(),
            ),
        };
    let json = serde_json::to_string(&tokens).unwrap_or_default();
    records.push(record, json);
    for (j, env) in inputs.set_env.iter().enumerate() {
        records.push(format!("set_env[{j}]"), Sha256Digest::of_bytes(&env.text()).to_hex());
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

    fn args(argv: &[&[u8]]) -> Vec<std::ffi::OsString> {
        use std::os::unix::ffi::OsStringExt;
        argv.iter().map(|a| std::ffi::OsString::from_vec(a.to_vec())).collect()
    }

    fn base(command: &[std::ffi::OsString]) -> RecipeInputs<'_> {
        RecipeInputs {
            files: &[],
            values: &[],
            command,
            set_env: &[],
            working_directory: None,
            output_dir: None,
            artifact_include: &[],
        }
    }

    /// Arguments are bytes: a UTF-8 command keeps the record it always had; one with a
    /// byte that is not UTF-8 is recorded under its own name, losslessly and normalised.
    #[test]
    fn command_arguments_are_bytes() {
        let n = Normalizer::new(&["/r".to_owned()]);
        let plain = args(&[b"cc", b"-c", b"/r/a\\b.c"]);
        let records = recipe_records(&base(&plain), &n).unwrap();
        let rec = records.iter().find(|r| r.name == "original_command").unwrap();
        assert_eq!(rec.value, r#"["cc","-c","<PATH_0>/a\\b.c"]"#);
        let latin1 = args(&[b"cc", b"-c", b"/r/bad\xe9.c"]);
        let records = recipe_records(&base(&latin1), &n).unwrap();
        assert!(records.iter().all(|r| r.name != "original_command"));
        let rec = records.iter().find(|r| r.name == "original_command_bytes").unwrap();
        assert_eq!(rec.value, r#"["cc","-c","<PATH_0>/bad\\xe9.c"]"#);
        // The literal text `bad\xe9.c` is another command.
        let literal = args(&[b"cc", b"-c", b"/r/bad\\xe9.c"]);
        let hashes = [&plain, &latin1, &literal, &args(&[b"cc", b"-c", b"/r/bad\xe8.c"])]
            .map(|c| recipe_records(&base(c), &n).unwrap().hash());
        for (i, a) in hashes.iter().enumerate() {
            for b in hashes.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
        // --set-env values are bytes too.
        let e1 = [SetEnv::parse(std::ffi::OsStr::new("P=/x")).unwrap()];
        let e2 = [SetEnv::parse(&args(&[b"P=/x\xe9"])[0]).unwrap()];
        assert_eq!(e2[0].text(), b"P=/x\xe9");
        let with = |e: &[SetEnv]| {
            recipe_records(&RecipeInputs { set_env: e, ..base(&plain) }, &n).unwrap().hash()
        };
        assert_ne!(with(&e1), with(&e2));
    }

    fn hash(inputs: &RecipeInputs<'_>, roots: &[&str]) -> Sha256Digest {
        let n = Normalizer::new(&roots.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        recipe_records(inputs, &n).unwrap().hash()
    }

    #[test]
    fn command_relocation_and_flag_change() {
        let cmd_a = args(&[b"c++", b"-I/a/root/inc", b"-O2"]);
        let cmd_b = args(&[b"c++", b"-I/b/root/inc", b"-O2"]);
        let cmd_c = args(&[b"c++", b"-I/b/root/inc", b"-O3"]);
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
        let cmd = args(&[b"make"]);
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
        let cmd = args(&[b"sh"]);
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
