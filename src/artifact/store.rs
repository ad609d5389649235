//! [`ArtifactStore`]: lookup, `get_or_build`, publication and promotion
//! (docs/artifact-store.md "Protocol").
//!
//! # get_or_build
//! 1. Coalesce identical in-process requests ([`super::flight`]).
//! 2. Look up without writing. HIT → return it.
//! 3. Read-only store: build privately (below) and return PRIVATE with the lookup's reason
//!    ("cache is read-only" for a MISS) and failure INVALID / STORAGE / none.
//! 4. Writable: create `<root>/locks` (never through a symlink), take the key's `flock`
//!    (`O_NOFOLLOW`, 0600, waiting per [`StoreOptions::lock_wait`]); failure → PRIVATE/LOCK.
//!    Under the lock, look up again: HIT → HIT; INVALID / STORAGE_ERROR → build privately,
//!    still under the lock (private builds of a key are serialized), PRIVATE with that
//!    failure (an invalid slot is never repaired online; `gc` removes it offline).
//! 5. MISS: build privately, then publish (write order below); a publication failure
//!    returns the usable private build as PRIVATE/PUBLICATION.
//!
//! Private builds happen in a fresh `strata-build-<16 hex>` directory (0700) under the
//! explicit private root, which must lie outside the cache root; the store never guesses
//! one. The builder's errors propagate unchanged (as [`Error::Builder`]), and so do invalid
//! build outputs (symlinks, special files, a missing required file, the reserved manifest
//! name). The private directory is never deleted by the store.
//!
//! # Write order of a publication (under the key lock)
//! 1. create `<bucket>/<env>/<key>/<spec>` (0700, never through a symlink) and fsync every
//!    directory of that chain in its parent (so a crash cannot lose a new ancestor);
//! 2. create the staging directory `.<stage>.tmp-<16 hex>` (0700) beside the slot;
//! 3. copy every file (new files, never hard links; 0600, or 0700 with owner-exec; the
//!    bytes hashed while copied and compared with the private inventory);
//! 4. verify the staging tree again (walk, listing, SHA-256 of every file);
//! 5. fsync every file and directory; write the manifest (exclusive create, fsync); fsync
//!    the staging directory;
//! 6. `renameat2(RENAME_NOREPLACE)` onto the slot: never replaces anything, not even an
//!    empty directory; filesystems without the flag are a publication failure;
//! 7. fsync the spec directory.
//!
//! If the rename finds the slot occupied, the slot is looked up again: a valid one makes the
//! result a HIT, not PRIVATE. If the final fsync fails after the rename, the result is
//! PUBLISHED with a warning, because the slot exists. A failed publication removes its staging
//! directory; a crash leaves it for `gc`.
//!
//! # Locks
//! One lock per key: `<root>/locks/<key digest>.lock`, shared by every spec and stage of the
//! key, held from the second lookup to the end of publication. A builder that asks the same
//! store for another spec of the key *it is building* gets [`Error::RecursiveLock`] at once
//! instead of deadlocking; other threads and processes wait.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::destination::Destination;
use super::flight::{self, Joined, RequestKey, Role};
use super::handle::ArtifactHandle;
use super::identity::{ArtifactKey, ArtifactSpec};
use super::layout::{SlotPath, StoreRoot};
use super::manifest::{FileRecord, ManifestDigest};
use super::publish::{self, Published};
use super::verify::{self, Problem};
use super::{BuilderError, Error};
use crate::digest::DigestAlgorithm;
use crate::fs::temp::{self, Purpose};
use crate::fs::{self, LockGuard, LockProgress, LockWait, Sharing};

/// Whether a store may write under its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Locks, publishes and reads.
    ReadWrite,
    /// Creates, locks and modifies nothing under the root; misses build privately.
    ReadOnly,
}

/// How a store is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Read-write or read-only. By default read-write.
    pub mode: Mode,
    /// Where private builds go: a directory outside the cache root, created if missing.
    /// By default none: a needed build then fails with [`Error::NoPrivateRoot`].
    pub private_root: Option<PathBuf>,
    /// How long to wait for a key lock before building privately (PRIVATE/LOCK). By
    /// default forever.
    pub lock_wait: LockWait,
    /// Content digest algorithm of new manifests' file records. By default
    /// [`crate::content::DEFAULT_ALGORITHM`] (BLAKE3); slots already stored keep theirs.
    pub digest: DigestAlgorithm,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            mode: Mode::ReadWrite,
            private_root: None,
            lock_wait: LockWait::Forever,
            digest: crate::content::DEFAULT_ALGORITHM,
        }
    }
}

/// The status of a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupStatus {
    /// A slot verified.
    Hit,
    /// No slot.
    Miss,
    /// A slot exists but does not verify.
    Invalid,
    /// The store could not be read.
    StorageError,
}

impl LookupStatus {
    /// `hit`, `miss`, `invalid` or `storage_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            LookupStatus::Hit => "hit",
            LookupStatus::Miss => "miss",
            LookupStatus::Invalid => "invalid",
            LookupStatus::StorageError => "storage_error",
        }
    }
}

/// The result of [`ArtifactStore::lookup`].
#[derive(Debug, Clone)]
pub enum Lookup {
    /// A verified slot.
    Hit(ArtifactHandle),
    /// No slot.
    Miss,
    /// A slot that does not verify, with the reason.
    Invalid(String),
    /// The store could not be read, with the reason.
    StorageError(String),
}

impl Lookup {
    /// The status.
    pub fn status(&self) -> LookupStatus {
        match self {
            Lookup::Hit(_) => LookupStatus::Hit,
            Lookup::Miss => LookupStatus::Miss,
            Lookup::Invalid(_) => LookupStatus::Invalid,
            Lookup::StorageError(_) => LookupStatus::StorageError,
        }
    }

    /// The diagnostic reason (INVALID and STORAGE_ERROR).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Lookup::Invalid(r) | Lookup::StorageError(r) => Some(r),
            _ => None,
        }
    }

    /// The handle of a HIT.
    pub fn handle(&self) -> Option<&ArtifactHandle> {
        match self {
            Lookup::Hit(h) => Some(h),
            _ => None,
        }
    }
}

/// How [`ArtifactStore::get_or_build`] produced its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// A published slot verified; the builder did not run (or, after a lost publication
    /// race, ran but a valid slot was already there).
    Hit,
    /// The builder ran and its output was published.
    Published,
    /// The builder ran and its output stays private.
    Private,
}

impl Disposition {
    /// `hit`, `published` or `private`.
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Hit => "hit",
            Disposition::Published => "published",
            Disposition::Private => "private",
        }
    }
}

/// Why a build stayed private (independent of the wording of the reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildFailure {
    /// The published slot is invalid.
    Invalid,
    /// The store could not be read.
    Storage,
    /// The key lock could not be taken.
    Lock,
    /// Publication failed.
    Publication,
}

impl BuildFailure {
    /// `invalid`, `storage`, `lock` or `publication`.
    pub fn as_str(self) -> &'static str {
        match self {
            BuildFailure::Invalid => "invalid",
            BuildFailure::Storage => "storage",
            BuildFailure::Lock => "lock",
            BuildFailure::Publication => "publication",
        }
    }
}

/// The result of [`ArtifactStore::get_or_build`].
///
/// | disposition | handle | private_dir | value | reason | failure |
/// |---|---|---|---|---|---|
/// | HIT | yes | — (yes after a lost race) | — (yes after a lost race) | — | — |
/// | PUBLISHED | yes | yes (kept) | yes | — | — |
/// | PRIVATE, read-only MISS | — | yes | yes | "cache is read-only" | — |
/// | PRIVATE, otherwise | — | yes | yes | why | INVALID / STORAGE / LOCK / PUBLICATION |
///
/// Waiters of a coalesced request that ended with a handle get a HIT without value or
/// private directory; waiters of a PRIVATE result share its value and directory.
#[derive(Debug)]
pub struct ArtifactBuild<T> {
    /// What happened.
    pub disposition: Disposition,
    /// The verified slot (HIT, PUBLISHED).
    pub handle: Option<ArtifactHandle>,
    /// The private build directory (kept; the caller cleans it up).
    pub private_dir: Option<PathBuf>,
    /// The builder's value.
    pub value: Option<Arc<T>>,
    /// Why the build stayed private.
    pub reason: Option<String>,
    /// Structured cause of a PRIVATE result (none for a read-only MISS).
    pub failure: Option<BuildFailure>,
    /// Non-fatal problems (e.g. the parent fsync after a successful rename failed).
    pub warnings: Vec<String>,
}

impl<T> Clone for ArtifactBuild<T> {
    fn clone(&self) -> Self {
        Self {
            disposition: self.disposition,
            handle: self.handle.clone(),
            private_dir: self.private_dir.clone(),
            value: self.value.clone(),
            reason: self.reason.clone(),
            failure: self.failure,
            warnings: self.warnings.clone(),
        }
    }
}

impl<T> ArtifactBuild<T> {
    /// After the build: fills `output`, removes the private build once published (unless
    /// [`PrivateBuild::Keep`](super::PrivateBuild::Keep)) and says which paths outlive the
    /// process ([`super::settle`]).
    ///
    /// # Errors
    /// As [`super::settle`].
    pub fn settle(
        &self,
        output: Option<&Destination>,
        private_build: super::PrivateBuild,
        private: &mut super::PrivateRoot,
    ) -> Result<super::Kept, Error> {
        let dir = self.private_dir.as_deref();
        super::settle(self.handle.as_ref(), dir, output, private_build, private)
    }

    fn hit(handle: ArtifactHandle) -> Self {
        Self {
            disposition: Disposition::Hit,
            handle: Some(handle),
            private_dir: None,
            value: None,
            reason: None,
            failure: None,
            warnings: vec![],
        }
    }

    fn private(built: Built<T>, reason: String, failure: Option<BuildFailure>) -> Self {
        Self {
            disposition: Disposition::Private,
            handle: None,
            private_dir: Some(built.dir),
            value: Some(Arc::new(built.value)),
            reason: Some(reason),
            failure,
            warnings: vec![],
        }
    }

    /// The directory holding the result: the slot for HIT/PUBLISHED, the private
    /// directory for PRIVATE.
    pub fn dir(&self) -> Option<PathBuf> {
        self.handle.as_ref().map(|h| h.dir()).or_else(|| self.private_dir.clone())
    }
}

/// A private build and its inventory.
struct Built<T> {
    dir: PathBuf,
    value: T,
    parents: Vec<ManifestDigest>,
    files: Vec<FileRecord>,
}

thread_local! {
    /// Key lock files this thread holds (self-deadlock detection).
    static HELD: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
}

/// A key lock held by this thread.
struct HeldLock {
    _guard: LockGuard,
    path: PathBuf,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        HELD.with(|held| held.borrow_mut().retain(|p| p != &self.path));
    }
}

/// An immutable, content-verified artifact store rooted at one directory.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    root: StoreRoot,
    mode: Mode,
    private_root: Option<PathBuf>,
    lock_wait: LockWait,
    digest: DigestAlgorithm,
}

impl ArtifactStore {
    /// Opens the store at `root`, which is resolved once to a canonical absolute path
    /// (symlinks above and at the root are followed here, once; a missing tail is kept
    /// lexically). Nothing is created.
    ///
    /// # Errors
    /// [`Error::PrivateRootInsideStore`] if the private root is the root or inside it;
    /// [`Error::Fs`] if a path cannot be resolved.
    pub fn open(root: &Path, options: StoreOptions) -> Result<Self, Error> {
        let root = StoreRoot::new(fs::resolve_nonstrict(&fs::expand_tilde(root))?);
        let private_root = match options.private_root {
            Some(p) => Some(check_private_root(&root, &p)?),
            None => None,
        };
        Ok(Self {
            root,
            mode: options.mode,
            private_root,
            lock_wait: options.lock_wait,
            digest: options.digest,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &StoreRoot {
        &self.root
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The resolved private root, if any.
    pub fn private_root(&self) -> Option<&Path> {
        self.private_root.as_deref()
    }

    /// Checks `path` as a destination for copies out of this store (materialization,
    /// `--output`, `--dest`) without creating anything: it must resolve outside the root,
    /// not contain the root, and be new or an empty directory. Check destinations before
    /// building or downloading, so a bad one costs nothing.
    ///
    /// # Errors
    /// [`Error::Destination`]; [`Error::Fs`] if a path cannot be examined.
    pub fn destination(&self, path: &Path) -> Result<Destination, Error> {
        Destination::check(&self.root, path)
    }

    /// The slot `key` and `spec` select.
    pub fn slot(&self, key: &ArtifactKey, spec: &ArtifactSpec) -> SlotPath {
        self.root.bucket().slot(key, spec)
    }

    /// Looks up and fully verifies the slot of `key` and `spec`. Writes nothing, in any
    /// mode. INVALID is logged as a warning (it is never silent).
    pub fn lookup(&self, key: &ArtifactKey, spec: &ArtifactSpec) -> Lookup {
        let slot = self.slot(key, spec);
        let memo = ArtifactHandle::new_memo();
        match verify::verify_slot(&self.root, &slot, Some((key, spec)), Some(&memo)) {
            Ok(verified) => {
                Lookup::Hit(ArtifactHandle::from_verified(self.root.clone(), slot, verified, memo))
            }
            Err(Problem::Missing) => Lookup::Miss,
            Err(Problem::Invalid(reason)) => {
                tracing::warn!("invalid artifact slot {}: {reason}", slot.dir().display());
                Lookup::Invalid(reason)
            }
            Err(Problem::Storage(reason)) => Lookup::StorageError(reason),
        }
    }

    /// Returns the artifact of `key` and `spec`, calling `builder(private_dir)` only when no
    /// valid published slot can be used (protocol in the module docs). The builder must
    /// finish writing every output file before it returns.
    ///
    /// # Errors
    /// [`Error::Builder`] (the builder's own error), [`Error::InvalidBuildOutput`],
    /// [`Error::NoPrivateRoot`], [`Error::RecursiveRequest`], [`Error::RecursiveLock`],
    /// [`Error::Fs`] for the private root. Cache trouble (invalid slots, locks, storage,
    /// publication) is not an error: it gives a PRIVATE result.
    pub fn get_or_build<T, E, F>(
        &self,
        key: &ArtifactKey,
        spec: &ArtifactSpec,
        builder: F,
    ) -> Result<ArtifactBuild<T>, Error>
    where
        T: Send + Sync + 'static,
        E: Into<BuilderError>,
        F: FnOnce(&Path) -> Result<T, E>,
    {
        self.get_or_build_derived(key, spec, |dir| builder(dir).map(|v| (v, Vec::new())))
    }

    /// [`ArtifactStore::get_or_build`] for a derived artifact: the builder also returns
    /// the manifests it derives from, recorded as the new manifest's `parents` (lineage).
    ///
    /// # Errors
    /// As [`ArtifactStore::get_or_build`].
    pub fn get_or_build_derived<T, E, F>(
        &self,
        key: &ArtifactKey,
        spec: &ArtifactSpec,
        builder: F,
    ) -> Result<ArtifactBuild<T>, Error>
    where
        T: Send + Sync + 'static,
        E: Into<BuilderError>,
        F: FnOnce(&Path) -> Result<(T, Vec<ManifestDigest>), E>,
    {
        let request = RequestKey {
            root: self.root.path().to_path_buf(),
            private_root: self.private_root.clone(),
            read_only: self.mode == Mode::ReadOnly,
            key: key.digest(),
            spec: spec.digest(),
        };
        match flight::run(request, || self.transaction(key, spec, builder)) {
            Joined::Recursive => {
                Err(Error::RecursiveRequest { key: key.digest(), spec: spec.digest() })
            }
            Joined::Done(shared, role) => {
                let result: Result<ArtifactBuild<T>, Error> = (*shared).clone();
                match (role, result) {
                    (Role::Waiter, Ok(build)) if build.handle.is_some() => {
                        Ok(ArtifactBuild::hit(build.handle.clone().expect("checked is_some")))
                    }
                    (_, result) => result,
                }
            }
        }
    }

    fn transaction<T, E, F>(
        &self,
        key: &ArtifactKey,
        spec: &ArtifactSpec,
        builder: F,
    ) -> Result<ArtifactBuild<T>, Error>
    where
        E: Into<BuilderError>,
        F: FnOnce(&Path) -> Result<(T, Vec<ManifestDigest>), E>,
    {
        let first = self.lookup(key, spec);
        if let Lookup::Hit(handle) = first {
            return Ok(ArtifactBuild::hit(handle));
        }
        if self.mode == Mode::ReadOnly {
            let (reason, failure) = private_reason(&first, "cache is read-only");
            let built = self.build_private(spec, builder)?;
            return Ok(ArtifactBuild::private(built, reason, failure));
        }
        let lock = match self.lock_key(key) {
            Ok(lock) => lock,
            Err(e @ Error::RecursiveLock { .. }) => return Err(e),
            Err(e) => {
                let built = self.build_private(spec, builder)?;
                return Ok(ArtifactBuild::private(
                    built,
                    format!("artifact lock unavailable: {e}"),
                    Some(BuildFailure::Lock),
                ));
            }
        };
        let second = self.lookup(key, spec);
        if let Lookup::Hit(handle) = second {
            return Ok(ArtifactBuild::hit(handle));
        }
        if second.status() != LookupStatus::Miss {
            // Still under the lock: private builds of one key are serialized.
            let (reason, failure) = private_reason(&second, "");
            let built = self.build_private(spec, builder)?;
            drop(lock);
            return Ok(ArtifactBuild::private(built, reason, failure));
        }
        let built = self.build_private(spec, builder)?;
        let slot = self.slot(key, spec);
        let outcome = publish::publish(
            &self.root,
            &slot,
            &built.dir,
            &built.files,
            &built.parents,
            key,
            spec,
            || self.lookup(key, spec),
        );
        drop(lock);
        match outcome {
            Ok(Published::New(warnings)) => match self.lookup(key, spec) {
                Lookup::Hit(handle) => Ok(ArtifactBuild {
                    disposition: Disposition::Published,
                    handle: Some(handle),
                    private_dir: Some(built.dir),
                    value: Some(Arc::new(built.value)),
                    reason: None,
                    failure: None,
                    warnings,
                }),
                other => Ok(ArtifactBuild::private(
                    built,
                    format!(
                        "artifact publication unavailable: the new slot does not verify: {}",
                        other.reason().unwrap_or("not found")
                    ),
                    Some(BuildFailure::Publication),
                )),
            },
            Ok(Published::AlreadyThere(handle)) => Ok(ArtifactBuild {
                disposition: Disposition::Hit,
                handle: Some(handle),
                private_dir: Some(built.dir),
                value: Some(Arc::new(built.value)),
                reason: None,
                failure: None,
                warnings: vec![],
            }),
            Err(reason) => Ok(ArtifactBuild::private(
                built,
                format!("artifact publication unavailable: {reason}"),
                Some(BuildFailure::Publication),
            )),
        }
    }

    /// Takes the key lock (creating `<root>` and `<root>/locks` if needed, never through a
    /// symlink).
    fn lock_key(&self, key: &ArtifactKey) -> Result<HeldLock, Error> {
        let path = self.root.lock_file(&key.digest());
        if HELD.with(|held| held.borrow().contains(&path)) {
            return Err(Error::RecursiveLock { key: key.digest(), lock: path });
        }
        fs::create_dir_all(self.root.path())?;
        fs::create_dir_all_within(
            self.root.path(),
            Path::new("locks"),
            Sharing::Private.dir_mode(),
        )?;
        let mut report = |p: LockProgress| match p {
            LockProgress::Waiting(d) => {
                tracing::info!(
                    "waiting {:.0}s for artifact lock {}",
                    d.as_secs_f64(),
                    path.display()
                )
            }
            LockProgress::Acquired(d) => {
                tracing::info!(
                    "acquired artifact lock {} after {:.1}s",
                    path.display(),
                    d.as_secs_f64()
                )
            }
            LockProgress::TimedOut(d) => tracing::warn!(
                "gave up after {:.0}s waiting for artifact lock {}; building privately",
                d.as_secs_f64(),
                path.display()
            ),
        };
        let guard = fs::lock_exclusive_nofollow(&path, 0o600, self.lock_wait, &mut report)?;
        HELD.with(|held| held.borrow_mut().push(path.clone()));
        Ok(HeldLock { _guard: guard, path })
    }

    /// Builds in a fresh private directory and inventories the result.
    fn build_private<T, E, F>(&self, spec: &ArtifactSpec, builder: F) -> Result<Built<T>, Error>
    where
        E: Into<BuilderError>,
        F: FnOnce(&Path) -> Result<(T, Vec<ManifestDigest>), E>,
    {
        let Some(private_root) = &self.private_root else {
            return Err(Error::NoPrivateRoot { root: self.root.path().to_path_buf() });
        };
        let private_root = check_private_root(&self.root, private_root)?;
        fs::create_dir_all(&private_root)?;
        // Kept: the caller owns the build directory (and an error names it).
        let dir = temp::create_dir(
            &private_root,
            Purpose::Scratch,
            "build",
            Sharing::Private.dir_mode(),
        )?
        .keep();
        let (value, parents) =
            builder(&dir).map_err(|e| Error::Builder { source: Arc::from(e.into()) })?;
        let files = verify::inventory_build(&dir, self.digest)
            .map_err(|p| Error::InvalidBuildOutput { dir: dir.clone(), reason: p.reason() })?;
        let missing: Vec<&str> = spec
            .required()
            .iter()
            .filter(|r| files.binary_search_by(|f| f.path.cmp(r)).is_err())
            .map(|r| r.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(Error::InvalidBuildOutput {
                dir,
                reason: format!("missing required files: {missing:?}"),
            });
        }
        Ok(Built { dir, value, parents, files })
    }

    /// Promotes a GENERATED artifact: looks up `generated` (it must HIT), then
    /// [`ArtifactStore::get_or_build_derived`] of `ready` whose builder first materializes
    /// the verified GENERATED files into its private directory, then calls
    /// `builder(private_dir)` on that owner-writable copy. The BINARY_READY manifest names
    /// the GENERATED manifest digest in `parents`. The GENERATED slot is only read.
    ///
    /// # Errors
    /// [`Error::NotAvailable`] if GENERATED does not HIT; [`Error::InvalidSpec`] if the
    /// stages are not GENERATED → BINARY_READY; as [`ArtifactStore::get_or_build`].
    pub fn promote<T, E, F>(
        &self,
        key: &ArtifactKey,
        generated: &ArtifactSpec,
        ready: &ArtifactSpec,
        builder: F,
    ) -> Result<(ArtifactHandle, ArtifactBuild<T>), Error>
    where
        T: Send + Sync + 'static,
        E: Into<BuilderError>,
        F: FnOnce(&Path) -> Result<T, E>,
    {
        use super::identity::Stage;
        if generated.stage() != Stage::Generated || ready.stage() != Stage::BinaryReady {
            return Err(Error::InvalidSpec {
                reason: "promotion goes from a generated spec to a ready spec".into(),
            });
        }
        let parent = match self.lookup(key, generated) {
            Lookup::Hit(handle) => handle,
            other => {
                return Err(Error::NotAvailable {
                    what: "the generated artifact",
                    status: other.status(),
                    reason: other.reason().unwrap_or("not found").to_owned(),
                });
            }
        };
        let source = parent.clone();
        let build = self.get_or_build_derived(key, ready, move |dir| {
            source.materialize(dir).map_err(BuilderError::from)?;
            let value = builder(dir).map_err(Into::into)?;
            Ok::<_, BuilderError>((value, vec![source.manifest_digest()]))
        })?;
        Ok((parent, build))
    }
}

fn private_reason(lookup: &Lookup, default: &str) -> (String, Option<BuildFailure>) {
    match lookup {
        Lookup::Invalid(r) => (r.clone(), Some(BuildFailure::Invalid)),
        Lookup::StorageError(r) => (r.clone(), Some(BuildFailure::Storage)),
        _ => (default.to_owned(), None),
    }
}

/// Resolves `private_root` and checks it is outside `root`.
fn check_private_root(root: &StoreRoot, private_root: &Path) -> Result<PathBuf, Error> {
    let resolved = fs::resolve_nonstrict(&fs::expand_tilde(private_root))?;
    if root.contains(&resolved) {
        return Err(Error::PrivateRootInsideStore {
            private_root: resolved,
            root: root.path().to_path_buf(),
        });
    }
    Ok(resolved)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::artifact::identity::{BuildKind, EnvironmentIdentity, MANIFEST_NAME, Stage};
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn key() -> ArtifactKey {
        let env = EnvironmentIdentity::new([("cc", Some("1".repeat(64)))]).unwrap();
        ArtifactKey::new(env, &"2".repeat(64), &"3".repeat(64)).unwrap()
    }

    fn spec(stage: Stage, files: &[&str]) -> ArtifactSpec {
        ArtifactSpec::new(stage, BuildKind::Single, files).unwrap()
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        private: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        let private = dir.path().join("private");
        Fixture { root, private, _dir: dir }
    }

    fn store(f: &Fixture, mode: Mode) -> ArtifactStore {
        let options =
            StoreOptions { mode, private_root: Some(f.private.clone()), ..Default::default() };
        ArtifactStore::open(&f.root, options).unwrap()
    }

    fn write_outputs(dir: &Path) -> Result<u32, std::io::Error> {
        std::fs::create_dir_all(dir.join("bin"))?;
        std::fs::write(dir.join("bin/tool"), b"#!/bin/sh\necho hi\n")?;
        std::fs::set_permissions(dir.join("bin/tool"), std::fs::Permissions::from_mode(0o755))?;
        std::fs::write(dir.join("cfg.txt"), b"config")?;
        Ok(7)
    }

    #[test]
    fn publish_then_hit_with_private_permissions() {
        let f = fixture();
        let s = store(&f, Mode::ReadWrite);
        let sp = spec(Stage::Generated, &["cfg.txt", "bin/tool"]);
        let built = s.get_or_build(&key(), &sp, write_outputs).unwrap();
        assert_eq!(built.disposition, Disposition::Published);
        assert_eq!(*built.value.unwrap(), 7);
        assert!(built.private_dir.unwrap().join("cfg.txt").is_file(), "private build kept");
        let slot = built.handle.unwrap().dir();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&slot), 0o700);
        assert_eq!(mode(&slot.join("cfg.txt")), 0o600);
        assert_eq!(mode(&slot.join("bin/tool")), 0o700);
        assert_eq!(mode(&slot.join(MANIFEST_NAME)), 0o600);
        let calls = AtomicUsize::new(0);
        let again = s
            .get_or_build(&key(), &sp, |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(0u32)
            })
            .unwrap();
        assert_eq!(again.disposition, Disposition::Hit);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert!(again.value.is_none() && again.private_dir.is_none());
        // A changed spec is a clean miss; the old spec stays usable.
        let other = spec(Stage::Generated, &["cfg.txt"]);
        assert_eq!(s.lookup(&key(), &other).status(), LookupStatus::Miss);
        assert_eq!(s.lookup(&key(), &sp).status(), LookupStatus::Hit);
    }

    #[test]
    fn handle_memo_skips_unchanged_bytes_and_catches_changes() {
        let f = fixture();
        let s = store(&f, Mode::ReadWrite);
        let sp = spec(Stage::Generated, &["cfg.txt"]);
        s.get_or_build(&key(), &sp, write_outputs).unwrap();
        // Racy-stamp rule: a file younger than MIN_STAMP_AGE is hashed every time.
        let young = s.lookup(&key(), &sp).handle().unwrap().clone();
        assert!(young.verify().unwrap().hashed_bytes > 0, "a fresh stamp vouches for nothing");
        std::thread::sleep(
            crate::content::memo::MIN_STAMP_AGE + std::time::Duration::from_millis(100),
        );
        let handle = s.lookup(&key(), &sp).handle().unwrap().clone();
        assert_eq!(handle.verify().unwrap().hashed_bytes, 0, "unchanged stamps are not re-hashed");
        let file = handle.dir().join("cfg.txt");
        std::fs::write(&file, b"CONFIG").unwrap(); // same size, new bytes, new ctime
        let err = handle.verify().unwrap_err();
        assert!(err.is_corrupt(), "{err}");
    }

    #[test]
    fn read_only_builds_privately_and_needs_a_private_root() {
        let f = fixture();
        let sp = spec(Stage::Generated, &["cfg.txt"]);
        let ro = store(&f, Mode::ReadOnly);
        let built = ro.get_or_build(&key(), &sp, write_outputs).unwrap();
        assert_eq!(built.disposition, Disposition::Private);
        assert_eq!(built.failure, None);
        assert_eq!(built.reason.as_deref(), Some("cache is read-only"));
        assert!(!f.root.exists(), "read-only mode created the root");
        let bare = ArtifactStore::open(
            &f.root,
            StoreOptions { mode: Mode::ReadOnly, ..Default::default() },
        )
        .unwrap();
        let err = bare.get_or_build(&key(), &sp, write_outputs).unwrap_err();
        assert!(matches!(err, Error::NoPrivateRoot { .. }), "{err}");
        let inside = StoreOptions { private_root: Some(f.root.join("p")), ..Default::default() };
        assert!(matches!(
            ArtifactStore::open(&f.root, inside),
            Err(Error::PrivateRootInsideStore { .. })
        ));
    }

    #[test]
    fn builder_errors_and_bad_outputs_propagate() {
        let f = fixture();
        let s = store(&f, Mode::ReadWrite);
        let sp = spec(Stage::Generated, &["cfg.txt"]);
        let err = s
            .get_or_build(&key(), &sp, |_| Err::<(), _>(std::io::Error::other("compiler crashed")))
            .unwrap_err();
        assert!(err.builder_error().unwrap().to_string().contains("compiler crashed"));
        let err = s
            .get_or_build(&key(), &sp, |dir| {
                write_outputs(dir)?;
                std::os::unix::fs::symlink("cfg.txt", dir.join("link"))
            })
            .unwrap_err();
        assert!(matches!(err, Error::InvalidBuildOutput { .. }), "{err}");
        let err = s.get_or_build(&key(), &sp, |_| Ok::<_, std::io::Error>(())).unwrap_err();
        assert!(err.to_string().contains("missing required files"), "{err}");
        assert_eq!(s.lookup(&key(), &sp).status(), LookupStatus::Miss);
    }

    #[test]
    fn recursive_requests_fail_instead_of_deadlocking() {
        let f = fixture();
        let s = store(&f, Mode::ReadWrite);
        let a = spec(Stage::Generated, &["cfg.txt"]);
        let b = spec(Stage::BinaryReady, &["cfg.txt"]);
        let err = s
            .get_or_build(&key(), &a, |_| match s.get_or_build(&key(), &b, write_outputs) {
                Err(e @ Error::RecursiveLock { .. }) => Err::<(), _>(e),
                other => panic!("expected RecursiveLock, got {other:?}"),
            })
            .unwrap_err();
        assert!(err.to_string().contains("builder"), "{err}");
        let err = s
            .get_or_build(&key(), &a, |_| match s.get_or_build(&key(), &a, write_outputs) {
                Err(e @ Error::RecursiveRequest { .. }) => Err::<(), _>(e),
                other => panic!("expected RecursiveRequest, got {other:?}"),
            })
            .unwrap_err();
        assert!(matches!(err, Error::Builder { .. }));
    }

    #[test]
    fn lock_timeout_builds_privately() {
        let f = fixture();
        let options = StoreOptions {
            private_root: Some(f.private.clone()),
            lock_wait: LockWait::Timeout(std::time::Duration::from_millis(100)),
            ..Default::default()
        };
        let s = ArtifactStore::open(&f.root, options).unwrap();
        let sp = spec(Stage::Generated, &["cfg.txt"]);
        std::fs::create_dir_all(f.root.join("locks")).unwrap();
        let lock = s.root().lock_file(&key().digest());
        let held = crate::fs::lock_exclusive(&lock, LockWait::Immediately, &mut |_| {}).unwrap();
        let built = s.get_or_build(&key(), &sp, write_outputs).unwrap();
        assert_eq!(built.disposition, Disposition::Private);
        assert_eq!(built.failure, Some(BuildFailure::Lock));
        assert!(built.reason.unwrap().contains("lock"));
        drop(held);
        let built = s.get_or_build(&key(), &sp, write_outputs).unwrap();
        assert_eq!(built.disposition, Disposition::Published);
    }

    #[test]
    fn invalid_slot_is_never_repaired_online() {
        let f = fixture();
        let s = store(&f, Mode::ReadWrite);
        let sp = spec(Stage::Generated, &["cfg.txt"]);
        let slot = s.slot(&key(), &sp).dir();
        std::fs::create_dir_all(&slot).unwrap(); // a crashed or foreign mkdir
        assert_eq!(s.lookup(&key(), &sp).status(), LookupStatus::Invalid);
        let built = s.get_or_build(&key(), &sp, write_outputs).unwrap();
        assert_eq!(built.disposition, Disposition::Private);
        assert_eq!(built.failure, Some(BuildFailure::Invalid));
        assert_eq!(std::fs::read_dir(&slot).unwrap().count(), 0, "slot left untouched");
    }

    #[test]
    fn promotion_keeps_generated_and_records_lineage() {
        let f = fixture();
        let s = store(&f, Mode::ReadWrite);
        let g = spec(Stage::Generated, &["cfg.txt"]);
        let r = g.with_stage_and_more(Stage::BinaryReady, ["bin/app"]).unwrap();
        let err = s.promote(&key(), &g, &r, |_| Ok::<_, std::io::Error>(())).unwrap_err();
        assert!(err.is_not_available(), "{err}");
        s.get_or_build(&key(), &g, write_outputs).unwrap();
        let before = crate::fs::inventory(&s.slot(&key(), &g).dir()).unwrap();
        let (parent, built) = s
            .promote(&key(), &g, &r, |dir| {
                assert_eq!(std::fs::read(dir.join("cfg.txt"))?, b"config");
                std::fs::write(dir.join("cfg.txt"), b"rewritten by the compiler")?;
                std::fs::create_dir_all(dir.join("bin"))?;
                std::fs::write(dir.join("bin/app"), b"\x7fELF")
            })
            .unwrap();
        assert_eq!(built.disposition, Disposition::Published);
        let ready = built.handle.unwrap();
        assert_eq!(ready.manifest().parents, vec![parent.manifest_digest()]);
        assert_eq!(crate::fs::inventory(&s.slot(&key(), &g).dir()).unwrap(), before);
        parent.verify().unwrap();
        assert_eq!(
            s.lookup(&key(), &g).handle().unwrap().manifest_digest(),
            parent.manifest_digest()
        );
    }
}
