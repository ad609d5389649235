//! `strata snapshot pack` and `unpack`: a local snapshot file, no store (for inspection and
//! benchmarks).

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{env, print_json};
use crate::cli::Failure;
use crate::cli::output::errln;
use strata::snapshot::{self, Producer};

#[derive(Debug, Args)]
pub(crate) struct PackArgs {
    #[command(flatten)]
    digest: crate::cli::DigestArgs,
    /// Cache directory whose actions-v1/ is packed.
    #[arg(long, value_name = "DIR")]
    cache_dir: PathBuf,
    /// The snapshot file to write (replaced if it exists).
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// Key recorded in the manifest (a snapshot key, or `entry:<entry path>`).
    #[arg(long, value_name = "KEY", default_value = "local",
          value_parser = |text: &str| snapshot::key::ManifestKey::parse(text))]
    key: snapshot::key::ManifestKey,
    #[command(flatten)]
    packing: super::PackingArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UnpackArgs {
    /// The snapshot file.
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// A directory that must not exist yet; it receives actions-v1/.
    #[arg(long, value_name = "DIR")]
    dest: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub(super) fn pack(args: PackArgs) -> Result<i32, Failure> {
    let level = args.packing.level()?;
    let options = snapshot::pack::PackOptions {
        digest: args.digest.digest,
        compression: args.packing.compression,
        level,
        threads: args.packing.threads,
        key: args.key,
        producer: Producer::from_env_with(env),
        parents: Vec::new(),
        subtree: None,
    };
    let started = std::time::Instant::now();
    let reporter = crate::cli::progress::Reporter::from_env();
    let report = snapshot::pack::pack_observed(&args.cache_dir, &args.output, &options, &reporter)?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        print_json(&json!({
            "output": strata::fs::name::display_text(&args.output),
            "object_size_bytes": report.object_size_bytes,
            "object_digest": report.object_digest,
            "manifest_digest": report.manifest_digest,
            "file_count": report.manifest.file_count(),
            "file_bytes": report.manifest.file_bytes,
            "seconds": seconds,
            "warnings": report.warnings,
        }))?;
    } else {
        for warning in &report.warnings {
            errln!("strata: WARNING snapshot pack: {warning}");
        }
        errln!(
            "strata: snapshot PACKED files={} file_bytes={} bytes={} digest={} seconds={seconds:.3} into {}",
            report.manifest.file_count(),
            report.manifest.file_bytes,
            report.object_size_bytes,
            report.object_digest,
            args.output.display()
        );
    }
    Ok(0)
}

pub(super) fn unpack(args: UnpackArgs) -> Result<i32, Failure> {
    let started = std::time::Instant::now();
    let reporter = crate::cli::progress::Reporter::from_env();
    let report = snapshot::unpack::unpack_into_new_observed(&args.input, &args.dest, &reporter)?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        print_json(&json!({
            "dest": strata::fs::name::display_text(&args.dest),
            "key": report.manifest.key,
            "manifest_digest": report.manifest_digest,
            "file_count": report.files,
            "file_bytes": report.file_bytes,
            "seconds": seconds,
        }))?;
    } else {
        errln!(
            "strata: snapshot UNPACKED key={} files={} file_bytes={} seconds={seconds:.3} into {}",
            report.manifest.key,
            report.files,
            report.file_bytes,
            args.dest.display()
        );
    }
    Ok(0)
}
