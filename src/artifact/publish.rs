//! Publication: the write order of a slot (docs/artifact-store.md "Write order"), run by
//! [`super::ArtifactStore`] under the key lock.
//!
//! 1. create `<bucket>/<env>/<key>/<spec>` (0700, never through a symlink) and fsync every
//!    directory of that chain in its parent;
//! 2. create the staging directory `.<stage>.tmp-<16 hex>` (0700) beside the slot;
//! 3. copy every file (new files, never hard links; 0600, or 0700 with owner-exec; bytes
//!    hashed while copied and compared with the private inventory, under its digests'
//!    algorithm);
//! 4. check the staging tree's listing (walk: exactly the inventoried files, sizes and
//!    owner-exec bits; the bytes were hashed in step 3);
//! 5. fsync files and directories; write the manifest (exclusive create, fsync); fsync the
//!    staging directory;
//! 6. `renameat2(RENAME_NOREPLACE)` onto the slot (no fallback);
//! 7. fsync the spec directory (a failure here is a warning: the slot exists).
//!
//! A failed publication drops its [`crate::fs::StagingDir`] (named by
//! [`crate::fs::temp`]), which removes it.

use std::path::Path;

use super::handle::ArtifactHandle;
use super::identity::{ArtifactKey, ArtifactSpec, MANIFEST_NAME};
use super::layout::{Bucket, SlotPath, StoreRoot};
use super::manifest::{FileRecord, ManifestDigest, ManifestPayload};
use super::store::Lookup;
use super::verify;
use crate::content;
use crate::fs::temp;
use crate::fs::{self, Sharing};

/// Publishes `files` of `private_dir` at `slot` (write order in the module docs). `Err` is
/// the reason of a publication failure. `relookup` looks the slot up again when the rename
/// finds it occupied.
#[allow(clippy::too_many_arguments)]
pub(super) fn publish(
    root: &StoreRoot,
    slot: &SlotPath,
    private_dir: &Path,
    files: &[FileRecord],
    parents: &[ManifestDigest],
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    relookup: impl Fn() -> Lookup,
) -> Result<Published, String> {
    let manifest = ManifestPayload::new(key, spec, files.to_vec(), parents.to_vec());
    let (manifest_bytes, _) = manifest.seal().map_err(|e| e.to_string())?;
    let rel = Path::new(Bucket::NAME).join(slot.spec_relative());
    let spec_dir = fs::create_dir_all_within(root.path(), &rel, Sharing::Private.dir_mode())
        .map_err(|e| e.to_string())?;
    // Make the chain of (possibly new) directories durable, each in its parent.
    let mut dir = spec_dir.clone();
    while dir != root.path() {
        let Some(parent) = dir.parent() else { break };
        fs::fsync_dir(parent).map_err(|e| e.to_string())?;
        dir = parent.to_path_buf();
    }
    let staging = temp::staging_beside(&slot.dir(), Sharing::Private.dir_mode())
        .map_err(|e| e.to_string())?;
    copy_into(private_dir, staging.path(), files)?;
    // Every byte was hashed as it was copied (a second read would find the same page-cache
    // bytes); the listing check makes sure the staging tree holds nothing else.
    let records = verify::records_of(files);
    content::tree::compare(staging.path(), &records, &verify::SLOT_RULES)
        .map_err(|p| format!("publication staging differs from the build: {}", p.reason()))?;
    fs::fsync_tree(staging.path()).map_err(|e| e.to_string())?;
    fs::write_new(&staging.path().join(MANIFEST_NAME), &manifest_bytes, 0o600)
        .map_err(|e| e.to_string())?;
    fs::fsync_dir(staging.path()).map_err(|e| e.to_string())?;
    match fs::rename_noreplace_strict(staging.path(), &slot.dir()) {
        Ok(()) => {
            let _published = staging.keep();
            let mut warnings = Vec::new();
            if let Err(e) = fs::fsync_dir(&spec_dir) {
                let warning = format!(
                    "published {} but could not make the rename durable: {e}",
                    slot.dir().display()
                );
                tracing::warn!("{warning}");
                warnings.push(warning);
            }
            Ok(Published::New(warnings))
        }
        Err(fs::Error::AlreadyExists { path }) => match relookup() {
            Lookup::Hit(handle) => Ok(Published::AlreadyThere(handle)),
            other => Err(format!(
                "{} already exists and is not a valid slot ({}); it is never replaced \
                 online, run `strata artifact gc` offline",
                path.display(),
                other.reason().unwrap_or("not found")
            )),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// What a publication ended with.
pub(super) enum Published {
    New(Vec<String>),
    AlreadyThere(ArtifactHandle),
}

/// Copies `files` from `src` into `dest` (a fresh staging directory), comparing digests.
pub(super) fn copy_into(src: &Path, dest: &Path, files: &[FileRecord]) -> Result<(), String> {
    let modes = content::verify::Modes::of(Sharing::Private);
    content::verify::copy_files(src, files, dest, modes).map(drop).map_err(|e| match e {
        fs::Error::DigestMismatch { path, .. } | fs::Error::ChangedWhileReading { path } => {
            format!("{} changed while copying to publication staging", path.display())
        }
        other => other.to_string(),
    })
}
