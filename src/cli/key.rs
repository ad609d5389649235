//! `strata key generate`: a producer's Ed25519 signing key (docs/snapshots.md "Security and
//! trust model").

use std::path::PathBuf;

use clap::Subcommand;

use super::Failure;
use super::output::{errln, outln};

/// `strata key …`.
#[derive(Debug, Subcommand)]
pub(crate) enum KeyCommand {
    /// Generate an Ed25519 signing key for a producer: the secret key goes to --out (mode
    /// 0600, never overwritten); the public key is printed on stdout as one line
    /// (`strata-ed25519:<key id>:<base64>`) to give to consumers (`--trusted-key`).
    Generate {
        /// The new secret key file (must not exist). Keep it secret: store it as a CI
        /// secret, never in the repository.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// Runs a `strata key` command.
pub(crate) fn run(cmd: KeyCommand) -> Result<i32, Failure> {
    match cmd {
        KeyCommand::Generate { out } => {
            let out = strata::fs::expand_tilde(&out);
            let key = strata::trust::SigningKey::generate(&out).map_err(|e| {
                anyhow::Error::new(e)
                    .context(format!("cannot write a new signing key to {} (strata never overwrites a key file: remove it first or choose another --out)", out.display()))
            })?;
            errln!(
                "strata: wrote the secret key {} to {} (mode 0600); its public key (give this to consumers):",
                key.public_key().id(),
                out.display()
            );
            outln!("{}", key.public_key())?;
            Ok(0)
        }
    }
}
