//! [`pull`]: an L0 object to the local artifact store (see the parent module).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::signature::signed_statement;
use super::{
    Error, MAX_KEYED_OBJECTS, MAYBE_TRANSIENT, PullOutcome, PullReport, Trust, keyed_object_key,
    object_key, scratch,
};
use crate::artifact::{
    self, ArtifactHandle, ArtifactKey, ArtifactSpec, ArtifactStore, Lookup, archive,
};
use crate::fs;
use crate::progress::Progress;
use crate::transport::{DownloadPhase, ObjectKey, ObjectStore};
use crate::trust::TrustPolicy;

/// Makes the artifact of `key` and `spec` available locally: a local HIT, or a download
/// that is verified and published (module docs).
///
/// # Errors
/// [`Error::Transport`] for remote failures other than "not found"; local store errors.
/// Needs the store's private root.
pub fn pull(
    store: &ArtifactStore,
    remote: &dyn ObjectStore,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    trust: &Trust<'_>,
    progress: &dyn Progress,
) -> Result<PullReport, Error> {
    let start = Instant::now();
    let object = object_key(key, spec);
    let mut report = PullReport {
        object: object.clone(),
        outcome: PullOutcome::LocalHit,
        handle: None,
        disposition: None,
        private_dir: None,
        reason: None,
        downloaded_bytes: 0,
        seconds: 0.0,
        warnings: Vec::new(),
    };
    report.handle = look_locally(store, key, spec, &mut report.warnings);
    if report.handle.is_none() {
        let dir = scratch(store)?;
        let fetch = Fetch { remote, object: &object, key, spec, policy: &trust.policy, progress };
        let file = dir.path().join("artifact.tar.zst");
        let mut fetched = fetch.download(dir.path(), &file)?;
        if let Err(PullOutcome::Rejected(plain)) = &fetched
            && !trust.policy.is_empty()
        {
            // The plain object is not a trusted producer's (anyone with write access may
            // have put one there first): a trusted producer then pushed to its keyed name.
            let plain = plain.clone();
            let mut tried = Vec::new();
            for public in trust.policy.keys().iter().take(MAX_KEYED_OBJECTS) {
                let keyed = keyed_object_key(key, spec, &public.id().to_string());
                let fetch = Fetch { object: &keyed, ..fetch };
                match fetch.download(dir.path(), &file)? {
                    Ok(bytes) => {
                        report.object = keyed;
                        fetched = Ok(bytes);
                        break;
                    }
                    Err(PullOutcome::NotInRemote) => tried.push(format!("no {keyed}")),
                    Err(PullOutcome::Rejected(why)) => tried.push(format!("{keyed}: {why}")),
                    Err(other) => tried.push(format!("{keyed}: {}", other.as_str())),
                }
            }
            if fetched.is_err() {
                fetched = Err(PullOutcome::Rejected(format!(
                    "{plain}; no trusted producer's object either ({})",
                    tried.join("; ")
                )));
            }
        }
        match fetched {
            Ok(bytes) => {
                report.downloaded_bytes = bytes;
                publish_pulled(store, key, spec, &file, &mut report)?;
            }
            Err(outcome) => report.outcome = outcome,
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// The local slot, if it HITs; an INVALID or unreadable slot adds a warning (the pulled
/// artifact cannot be published over it).
fn look_locally(
    store: &ArtifactStore,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    warnings: &mut Vec<String>,
) -> Option<ArtifactHandle> {
    match store.lookup(key, spec) {
        Lookup::Hit(handle) => return Some(handle),
        Lookup::Miss => {}
        Lookup::Invalid(reason) => warnings.push(format!(
            "the local slot {} is invalid: {reason}; an invalid slot is never repaired or \
             replaced online, so the pulled artifact stays private; remove the slot offline \
             with `strata artifact gc --root {}`",
            store.slot(key, spec).dir().display(),
            store.root().path().display()
        )),
        Lookup::StorageError(reason) => warnings.push(format!(
            "the local slot {} cannot be read: {reason}; the pulled artifact stays private \
             (check the permissions of the cache root)",
            store.slot(key, spec).dir().display()
        )),
    }
    None
}

/// One object to download and check.
#[derive(Clone, Copy)]
struct Fetch<'a> {
    remote: &'a dyn ObjectStore,
    object: &'a ObjectKey,
    key: &'a ArtifactKey,
    spec: &'a ArtifactSpec,
    policy: &'a TrustPolicy,
    progress: &'a dyn Progress,
}

impl Fetch<'_> {
    /// Downloads the archive into `file` (its signature first, into `scratch_dir`, when
    /// producers are checked). `Ok(Ok(bytes))`: downloaded (and, when signed, the bytes its
    /// producer signed); `Ok(Err(outcome))`: not in the store, or rejected.
    fn download(&self, scratch_dir: &Path, file: &Path) -> Result<Result<u64, PullOutcome>, Error> {
        let (remote, object) = (self.remote, self.object);
        let signed = if self.policy.is_empty() {
            None
        } else {
            match signed_statement(remote, object, self.key, self.spec, self.policy, scratch_dir)? {
                Ok(statement) => Some(statement),
                Err(reason) => return Ok(Err(rejected(object, reason))),
            }
        };
        let phase = DownloadPhase::new(self.progress, "download");
        let fetched = remote.get_to_file_observed(object, file, &phase);
        drop(phase);
        let bytes = match fetched {
            Ok((meta, _)) => meta.size_bytes,
            Err(e) if e.is_not_found() => return Ok(Err(PullOutcome::NotInRemote)),
            Err(source) => {
                return Err(Error::Transport {
                    store: remote.describe(),
                    object: object.clone(),
                    source: Box::new(source),
                });
            }
        };
        if let Some(statement) = &signed {
            let (digest, size, _) =
                fs::hash_file_stable(file, statement.object_digest.algorithm())?;
            if digest != statement.object_digest || size != statement.object_size_bytes {
                let reason = format!(
                    "the archive ({size} bytes, {digest}) is not the one its producer signed \
                     ({} bytes, {}); {MAYBE_TRANSIENT}",
                    statement.object_size_bytes, statement.object_digest
                );
                return Ok(Err(rejected(object, reason)));
            }
        }
        Ok(Ok(bytes))
    }
}

/// A rejection of `object`, logged.
fn rejected(object: &ObjectKey, reason: String) -> PullOutcome {
    tracing::warn!("rejected L0 object {object}: {reason}");
    PullOutcome::Rejected(reason)
}

/// Publishes the downloaded archive `file` through the store: unpacked and checked into a
/// private directory, then verified and published (or kept private). A corrupt archive is
/// a rejection; its partial private directory is removed.
fn publish_pulled(
    store: &ArtifactStore,
    key: &ArtifactKey,
    spec: &ArtifactSpec,
    file: &Path,
    report: &mut PullReport,
) -> Result<(), Error> {
    let mut unpacked_into: Option<PathBuf> = None;
    let result = store.get_or_build_derived(key, spec, |dest| {
        unpacked_into = Some(dest.to_path_buf());
        archive::unpack(file, dest, key, spec).map(|(manifest, _)| ((), manifest.parents))
    });
    let e = match result {
        Ok(build) => {
            report.outcome = PullOutcome::Pulled;
            report.disposition = Some(build.disposition);
            report.handle = build.handle;
            report.private_dir = build.private_dir;
            report.reason = build.reason;
            // With a slot (published, or a HIT after a lost race) the unpacked copy is
            // only a staging area: it is removed, so pulls never pile up copies in the
            // private root. A PRIVATE result keeps it (it is the result).
            if report.handle.is_some()
                && let Some(dir) = report.private_dir.take()
                && let Err(e) = fs::remove_tree(&dir)
            {
                tracing::warn!("cannot remove the pulled private copy {}: {e}", dir.display());
            }
            return Ok(());
        }
        Err(e) => e,
    };
    // A rejected or failed unpack leaves a partial private directory: remove it.
    if let Some(dir) = &unpacked_into
        && let Err(e) = fs::remove_tree(dir)
    {
        tracing::warn!("cannot remove the rejected private copy {}: {e}", dir.display());
    }
    let corrupt = e
        .builder_error()
        .and_then(|b| b.downcast_ref::<artifact::Error>())
        .filter(|inner| inner.is_corrupt())
        .map(|inner| format!("{inner}; {MAYBE_TRANSIENT}"));
    match corrupt {
        Some(reason) => {
            report.outcome = rejected(&report.object, reason);
            Ok(())
        }
        None => Err(e.into()),
    }
}
