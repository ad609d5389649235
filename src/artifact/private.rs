//! The private root of one invocation (`strata artifact get-or-build`, `promote`, `push`,
//! `pull`) and what survives it.
//!
//! Builds and transfers happen in a private root outside the cache root: the one given
//! (`--private-root`, `STRATA_ARTIFACT_PRIVATE_ROOT`), which is never removed, or else a
//! fresh `strata-artifact-<16 hex>` directory under `$TMPDIR` (mode 0700), removed when the
//! [`PrivateRoot`] is dropped unless a result in it must outlive the process.
//!
//! After a build or a pull, [`settle`] copies the result into the requested destination,
//! removes a private build that was published (unless asked to keep it), and says which
//! paths still exist once the process exits ([`Kept`]), so a report never names a
//! directory that is about to disappear:
//! * a published result (a slot) with its private build: the private build is removed,
//!   or kept with [`PrivateBuild::Keep`] (and then the temporary root is kept too);
//! * a PRIVATE result (no slot): it is the only copy, so the temporary root is kept when no
//!   destination received it; with a destination it is removed with the root;
//! * a given private root always survives.

use std::path::{Path, PathBuf};

use super::{ArtifactHandle, Destination, Error};
use crate::fs::temp::{self, Purpose};
use crate::fs::{self, StagingDir};

/// A private root for this invocation (see the module docs).
#[derive(Debug)]
pub struct PrivateRoot {
    path: PathBuf,
    temporary: Option<StagingDir>,
    keep: bool,
}

impl PrivateRoot {
    /// `given`, or a fresh temporary directory under `$TMPDIR`.
    ///
    /// # Errors
    /// [`Error::Fs`] if the temporary directory cannot be created.
    pub fn new(given: Option<&Path>) -> Result<Self, Error> {
        match given {
            Some(p) => Ok(Self { path: p.to_path_buf(), temporary: None, keep: true }),
            None => {
                let dir = temp::create_dir(
                    &crate::config::temp_dir(),
                    Purpose::Scratch,
                    "artifact",
                    0o700,
                )?;
                Ok(Self { path: dir.path().to_path_buf(), temporary: Some(dir), keep: false })
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps a temporary root when dropped: what it holds is a result.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// True if what is inside outlives this process (a given or kept private root).
    pub fn survives(&self) -> bool {
        self.temporary.is_none() || self.keep
    }
}

impl Drop for PrivateRoot {
    fn drop(&mut self) {
        if self.keep
            && let Some(dir) = self.temporary.take()
        {
            let _kept = dir.keep();
        }
    }
}

/// What happens to a private build once its result is published (`--keep-private`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrivateBuild {
    /// Remove it: the slot holds the result.
    Remove,
    /// Keep it (and the temporary private root holding it).
    Keep,
}

/// The paths a report may name: only those that still exist when strata exits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    /// The slot (HIT, PUBLISHED) or the surviving private result (PRIVATE).
    pub dir: Option<PathBuf>,
    /// The private build directory, if it survives.
    pub private_dir: Option<PathBuf>,
    /// The filled destination (`--output`, `--dest`).
    pub output: Option<PathBuf>,
}

/// Settles a result: the verified slot `handle` and/or the private directory
/// `private_dir` that holds it (see the module docs).
///
/// # Errors
/// The error of filling `output` (the destination is filled through a staging directory,
/// never with unverified bytes).
pub fn settle(
    handle: Option<&ArtifactHandle>,
    private_dir: Option<&Path>,
    output: Option<&Destination>,
    private_build: PrivateBuild,
    private: &mut PrivateRoot,
) -> Result<Kept, Error> {
    let copied = match (output, handle, private_dir) {
        (Some(dest), Some(handle), _) => Some(handle.materialize_into(dest)?.dest),
        (Some(dest), None, Some(dir)) => Some(dest.copy_tree(dir)?.dest),
        _ => None,
    };
    let mut private_dir = private_dir.map(Path::to_path_buf);
    match (handle, &private_dir) {
        (Some(_), Some(dir)) if private_build == PrivateBuild::Remove => {
            if let Err(e) = fs::remove_tree(dir) {
                tracing::warn!("cannot remove the published private build {}: {e}", dir.display());
            }
            private_dir = None;
        }
        (Some(_), Some(_)) => private.keep(),
        (None, Some(_)) if output.is_none() => private.keep(),
        _ => {}
    }
    if !private.survives() {
        private_dir = None;
    }
    let dir = handle.map(ArtifactHandle::dir).or_else(|| private_dir.clone());
    Ok(Kept { dir, private_dir, output: copied })
}
