//! `strata artifact get-or-build` and `promote`: one library call each
//! ([`ArtifactStore::get_or_build`], [`ArtifactStore::promote`]), then
//! [`ArtifactBuild::settle`] and the report.

use std::ffi::OsString;
use std::path::Path;

use serde_json::{Value, json};

use super::args::{IdArgs, StoreArgs, recorded_paths, spec_from};
use super::{print, shown};
use crate::cli::Failure;
use crate::cli::exit::ExitCode;
use strata::artifact::{
    self, ArtifactBuild, ArtifactKey, ArtifactSpec, ArtifactStore, BuildCommand, CommandStdout,
    Kept, PrivateBuild, Stage,
};

/// `promote`'s own flags: the ready stage's extra required files and `--output`.
pub(super) struct ReadyStage<'a> {
    /// `--ready-require`.
    pub(super) require: &'a [OsString],
    /// `--output`.
    pub(super) output: Option<&'a Path>,
}

/// `strata artifact get-or-build`.
pub(super) fn get_or_build(
    store: &StoreArgs,
    id: &IdArgs,
    output: Option<&Path>,
    keep_private: bool,
    command: Vec<OsString>,
    json: bool,
) -> Result<i32, Failure> {
    let (key, spec) = (id.key()?, id.spec()?);
    let output = store.destination(output)?;
    let mut private = store.private_root()?;
    let opened = store.open(Some(&private))?;
    let command = build_command(command, json);
    let build = opened.get_or_build(&key, &spec, |dir| command.run(dir)).map_err(build_failure)?;
    let private_build = if keep_private { PrivateBuild::Keep } else { PrivateBuild::Remove };
    let kept = build.settle(output.as_ref(), private_build, &mut private).map_err(Failure::of)?;
    let (value, text) = build_report(&build, &key, &spec, &kept);
    print(json, &value, &text)?;
    Ok(0)
}

/// `strata artifact promote`: the spec flags describe the generated stage.
pub(super) fn promote(
    store: &StoreArgs,
    id: &IdArgs,
    ready: &ReadyStage<'_>,
    command: Vec<OsString>,
    json: bool,
) -> Result<i32, Failure> {
    let key = id.key()?;
    let generated = spec_from(Stage::Generated, id.kind, &id.require)?;
    let ready_spec = generated
        .with_stage_and_more(Stage::BinaryReady, recorded_paths(ready.require))
        .map_err(Failure::usage)?;
    let output = store.destination(ready.output)?;
    let mut private = store.private_root()?;
    let opened: ArtifactStore = store.open(Some(&private))?;
    let command = build_command(command, json);
    let (parent, build) = opened
        .promote(&key, &generated, &ready_spec, |dir| command.run(dir))
        .map_err(build_failure)?;
    let kept =
        build.settle(output.as_ref(), PrivateBuild::Remove, &mut private).map_err(Failure::of)?;
    let (mut value, text) = build_report(&build, &key, &ready_spec, &kept);
    value["parent"] = json!(parent.manifest_digest().to_string());
    print(json, &value, &text)?;
    Ok(0)
}

/// The build command; with `--json` its stdout goes to stderr so that stdout carries only
/// strata's JSON object.
fn build_command(command: Vec<OsString>, json: bool) -> BuildCommand {
    let stdout = if json { CommandStdout::Stderr } else { CommandStdout::Inherit };
    BuildCommand::new(command, stdout)
}

/// A failed build command is shown as itself (with its own exit code); other errors as
/// the library reports them.
fn build_failure(e: artifact::Error) -> Failure {
    match e.build_command_failure() {
        Some(failed) => {
            Failure { code: failed.exit_code(), error: anyhow::Error::new(failed.clone()) }
        }
        None => Failure::of(e),
    }
}

fn build_report<T>(
    build: &ArtifactBuild<T>,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    kept: &Kept,
) -> (Value, String) {
    let value = json!({
        "disposition": build.disposition.as_str(),
        "key": key.digest().to_string(),
        "spec": spec.digest().to_string(),
        "stage": spec.stage().as_str(),
        "dir": kept.dir.as_deref().map(shown),
        "manifest_digest": build.handle.as_ref().map(|h| h.manifest_digest().to_string()),
        "private_dir": kept.private_dir.as_deref().map(shown),
        "output": kept.output.as_deref().map(shown),
        "reason": build.reason,
        "failure": build.failure.map(|f| f.as_str()),
        "warnings": build.warnings,
    });
    let mut text = format!(
        "strata: {} key={} stage={}",
        build.disposition.as_str().to_uppercase(),
        key.digest(),
        spec.stage()
    );
    if let Some(dir) = &kept.dir {
        text.push_str(&format!(" dir={}", dir.display()));
    }
    if let Some(output) = &kept.output {
        text.push_str(&format!(" output={}", output.display()));
    }
    if let Some(f) = build.failure {
        text.push_str(&format!(" failure={}", f.as_str()));
    }
    if let Some(r) = &build.reason {
        text.push_str(&format!(" reason={r}"));
    }
    for w in &build.warnings {
        text.push_str(&format!("\nstrata: warning: {w}"));
    }
    (value, text)
}
