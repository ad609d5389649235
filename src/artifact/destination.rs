//! [`Destination`]: a directory outside the store that verified artifacts (or private
//! builds) are copied into (`materialize --dest`, `get-or-build --output`, `promote
//! --output`, `pull --dest`; docs/artifact-store.md "Destinations").
//!
//! # Invariants
//! * **Checking creates nothing.** [`Destination::check`] resolves the destination without
//!   creating anything: the nearest existing ancestor is resolved through symlinks and the
//!   missing rest is appended lexically. The result must be outside the cache root (and
//!   must not contain it), and must be a new path or an empty directory. Callers check
//!   every destination before they build, download or create anything, so a refused
//!   destination leaves no trace (and nothing is ever created under the root outside the
//!   publish protocol: read-only means read-only).
//! * **A destination never holds unverified bytes.** Filling a destination re-checks it,
//!   copies into a private staging directory (`0700`), and moves the content into place
//!   only after every file was copied and checked:
//!   * a new destination: the staging directory `.<name>.strata-tmp-<16 hex>` is created
//!     beside it and renamed onto it (no-replace);
//!   * an existing empty directory: the staging directory `.strata-tmp-<16 hex>` is
//!     created inside it (so a mount point works) and its top-level entries are renamed
//!     into the destination one by one, once all of them are complete.
//!
//!   On failure the staging directory, anything already moved, and the missing ancestors
//!   this call created are removed, so the destination is as it was.
//!
//! # Limitations
//! A process killed while copying leaves its staging directory (a hidden `.strata-tmp-…` /
//! `.<name>.strata-tmp-…` directory); it never holds a complete-looking destination.

use std::path::{Path, PathBuf};

use super::Error;
use super::handle::MaterializeReport;
use super::layout::StoreRoot;
use super::verify;
use crate::fs::temp::{self, Purpose};
use crate::fs::{self, Sharing};

/// A destination directory that was checked (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    root: StoreRoot,
    given: PathBuf,
    resolved: PathBuf,
}

/// What is at a checked destination.
enum State {
    /// Nothing; `ancestor` is the nearest existing directory above it.
    Missing { ancestor: PathBuf },
    /// An empty real directory.
    Empty,
}

impl Destination {
    /// Checks `given` as a destination for the store rooted at `root` without creating
    /// anything: `~` expanded, made absolute, the nearest existing ancestor resolved
    /// through symlinks, the rest appended lexically. The result must be outside `root`,
    /// must not contain `root`, and must be missing (its nearest existing ancestor a
    /// directory) or an empty directory.
    ///
    /// # Errors
    /// [`Error::Destination`] naming the path and what to do; [`Error::Fs`] if a path
    /// cannot be examined (permissions).
    pub(crate) fn check(root: &StoreRoot, given: &Path) -> Result<Self, Error> {
        Self::examine(root, given).map(|(destination, _)| destination)
    }

    fn examine(root: &StoreRoot, given: &Path) -> Result<(Self, State), Error> {
        let refuse = |reason: String| Error::Destination { path: given.to_path_buf(), reason };
        let resolved = fs::resolve_nonstrict(&fs::expand_tilde(given))?;
        if root.contains(&resolved) {
            return Err(refuse(format!(
                "it resolves to {}, inside the cache root {}; choose a directory outside the cache root",
                resolved.display(),
                root.path().display()
            )));
        }
        if root.path().starts_with(&resolved) {
            return Err(refuse(format!(
                "it resolves to {}, which contains the cache root {}; choose a directory outside the cache root",
                resolved.display(),
                root.path().display()
            )));
        }
        let state = match lstat(&resolved)? {
            Some(meta) if meta.is_dir() => {
                if !fs::read_dir(&resolved)?.is_empty() {
                    return Err(refuse("it is not empty; use a new or empty directory".to_owned()));
                }
                State::Empty
            }
            Some(meta) if meta.file_type().is_symlink() => {
                return Err(refuse(format!(
                    "{} is a symlink to a missing target; use a new or empty directory",
                    resolved.display()
                )));
            }
            Some(_) => {
                return Err(refuse(
                    "it exists and is not a directory; use a new or empty directory".to_owned(),
                ));
            }
            None => {
                let mut ancestor = resolved.parent();
                loop {
                    let Some(dir) = ancestor else {
                        return Err(refuse("no existing ancestor directory".to_owned()));
                    };
                    match lstat(dir)? {
                        Some(meta) if meta.is_dir() => {
                            break State::Missing { ancestor: dir.to_path_buf() };
                        }
                        Some(meta) if meta.file_type().is_symlink() => {
                            return Err(refuse(format!(
                                "{} is a symlink to a missing target; use a new or empty directory",
                                dir.display()
                            )));
                        }
                        Some(_) => {
                            return Err(refuse(format!(
                                "{} is not a directory; use a new or empty directory",
                                dir.display()
                            )));
                        }
                        None => ancestor = dir.parent(),
                    }
                }
            }
        };
        Ok((Self { root: root.clone(), given: given.to_path_buf(), resolved }, state))
    }

    /// The destination as given.
    pub fn path(&self) -> &Path {
        &self.given
    }

    /// The resolved absolute destination (what is filled).
    pub fn resolved(&self) -> &Path {
        &self.resolved
    }

    /// The cache root the destination was checked against.
    pub(crate) fn root(&self) -> &StoreRoot {
        &self.root
    }

    /// Copies the tree `src` (a private build directory: regular files and directories
    /// only) into the destination: new files, mode 0600 or 0700 with owner-exec,
    /// directories 0700, each file checked unchanged while read. Nothing appears at the
    /// destination unless every file was copied.
    ///
    /// # Errors
    /// As `Destination::check`; [`Error::InvalidBuildOutput`] if `src` holds something
    /// other than regular files and directories; [`Error::Fs`].
    pub fn copy_tree(&self, src: &Path) -> Result<MaterializeReport, Error> {
        let (files, bytes) = self.fill(|staging| {
            let (files, _) = verify::enumerate(src, false).map_err(|p| {
                Error::InvalidBuildOutput { dir: src.to_path_buf(), reason: p.reason() }
            })?;
            let mut bytes = 0;
            for file in &files {
                if let Some(parent) = file.rel.parent() {
                    fs::create_dir_all_within(
                        staging,
                        &parent.to_relative_path(),
                        Sharing::Private.dir_mode(),
                    )?;
                }
                let mode = Sharing::Private.file_mode(file.executable);
                let (_, size) = fs::copy_new_file(
                    &file.rel.to_path(src),
                    &file.rel.to_path(staging),
                    mode,
                    false,
                    crate::content::DEFAULT_ALGORITHM,
                )?;
                bytes += size;
            }
            Ok((files.len(), bytes))
        })?;
        Ok(MaterializeReport { dest: self.resolved.clone(), files, bytes })
    }

    /// Re-checks the destination, calls `copy(staging)` to fill a fresh private staging
    /// directory, and moves the staged content into place only if `copy` succeeded (module
    /// docs). On failure the destination is left as it was.
    ///
    /// # Errors
    /// As `Destination::check`; `copy`'s error; [`Error::Fs`] for the staging directory
    /// or the final renames.
    pub(crate) fn fill<T>(&self, copy: impl FnOnce(&Path) -> Result<T, Error>) -> Result<T, Error> {
        let (_, state) = Self::examine(&self.root, &self.given)?;
        match state {
            State::Missing { ancestor } => self.fill_new(&ancestor, copy),
            State::Empty => self.fill_empty(copy),
        }
    }

    fn fill_new<T>(
        &self,
        ancestor: &Path,
        copy: impl FnOnce(&Path) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let (Some(parent), Some(name)) = (self.resolved.parent(), self.resolved.file_name()) else {
            return Err(Error::Destination {
                path: self.given.clone(),
                reason: "it has no parent directory".into(),
            });
        };
        let mut created = Vec::new();
        let result = create_missing(ancestor, parent, &mut created).and_then(|()| {
            let stem = name.to_string_lossy();
            let staging =
                temp::create_dir(parent, Purpose::Filling, &stem, Sharing::Private.dir_mode())?;
            let value = copy(staging.path())?;
            fs::rename_noreplace(staging.path(), &self.resolved)?;
            let _renamed = staging.keep();
            Ok(value)
        });
        if result.is_err() {
            for dir in created.iter().rev() {
                if let Err(e) = fs::remove_dir_if_empty(dir) {
                    tracing::warn!("could not remove {}: {e}", dir.display());
                }
            }
        }
        result
    }

    fn fill_empty<T>(&self, copy: impl FnOnce(&Path) -> Result<T, Error>) -> Result<T, Error> {
        let staging =
            temp::create_dir(&self.resolved, Purpose::Filling, "", Sharing::Private.dir_mode())?;
        let mut moved = Vec::new();
        let result = copy(staging.path()).and_then(|value| {
            for entry in fs::read_dir(staging.path())? {
                let Some(name) = entry.file_name() else { continue };
                let target = self.resolved.join(name);
                fs::rename_noreplace(&entry, &target)?;
                moved.push(target);
            }
            fs::remove_dir_if_empty(staging.path())?;
            Ok(value)
        });
        match &result {
            Ok(_) => {
                let _emptied = staging.keep();
            }
            // Dropping the staging directory removes it.
            Err(_) => moved.iter().for_each(|path| discard(path)),
        }
        result
    }
}

/// `lstat` with "not found" and "a component is not a directory" mapped to `None`.
fn lstat(path: &Path) -> Result<Option<std::fs::Metadata>, Error> {
    match fs::symlink_metadata_opt(path) {
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) => Ok(None),
        other => Ok(other?),
    }
}

/// Creates the directories between `ancestor` (exists) and `dir`, recording each one it
/// created; refuses symlinks and non-directories met on the way (a concurrent change).
fn create_missing(ancestor: &Path, dir: &Path, created: &mut Vec<PathBuf>) -> Result<(), Error> {
    let Ok(rest) = dir.strip_prefix(ancestor) else { return Ok(()) };
    let mut current = ancestor.to_path_buf();
    for component in rest.components() {
        current.push(component);
        if fs::create_dir(&current)? {
            created.push(current.clone());
        }
        let meta = fs::symlink_metadata(&current)?;
        if !meta.is_dir() || meta.file_type().is_symlink() {
            return Err(
                fs::Error::NotADirectory { path: dir.to_path_buf(), component: current }.into()
            );
        }
    }
    Ok(())
}

/// Removes a staging leftover, logging (never failing) if that does not work.
fn discard(path: &Path) {
    if let Err(e) = fs::remove_tree(path) {
        tracing::warn!("could not remove {}: {e}", path.display());
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn root_in(dir: &Path) -> StoreRoot {
        StoreRoot::new(std::fs::canonicalize(dir).unwrap().join("cache"))
    }

    #[test]
    fn check_creates_nothing_and_refuses_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = root_in(dir.path());
        std::fs::create_dir_all(root.path()).unwrap();
        std::os::unix::fs::symlink(root.path(), dir.path().join("rootlink")).unwrap();
        for inside in [root.path().join("x/y"), dir.path().join("rootlink/x"), dir.path().into()] {
            let err = Destination::check(&root, &inside).unwrap_err();
            assert!(matches!(err, Error::Destination { .. }), "{err}");
        }
        assert!(!root.path().join("x").exists());
        let ok = Destination::check(&root, &dir.path().join("out/a/b")).unwrap();
        assert!(ok.resolved().ends_with("out/a/b"));
        assert!(!dir.path().join("out").exists(), "check created the destination");
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        for bad in [dir.path().join("file"), dir.path().join("file/sub")] {
            let err = Destination::check(&root, &bad).unwrap_err();
            assert!(err.to_string().contains("not a directory"), "{err}");
        }
    }

    #[test]
    fn failed_fill_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let root = root_in(dir.path());
        let boom = || Error::Corrupt { path: "x".into(), reason: "test".into() };
        let new = Destination::check(&root, &dir.path().join("new/deeper")).unwrap();
        let err = new
            .fill(|staging| {
                std::fs::write(staging.join("a"), b"unverified").unwrap();
                Err::<(), _>(boom())
            })
            .unwrap_err();
        assert!(err.is_corrupt());
        assert!(!dir.path().join("new").exists(), "created ancestors left behind");
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let existing = Destination::check(&root, &empty).unwrap();
        existing
            .fill(|staging| {
                std::fs::write(staging.join("a"), b"unverified").unwrap();
                Err::<(), _>(boom())
            })
            .unwrap_err();
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
        existing
            .fill(|staging| {
                std::fs::create_dir(staging.join("d")).unwrap();
                std::fs::write(staging.join("d/a"), b"ok")
                    .map_err(|e| Error::from(fs::Error::io("write", "a", e)))
            })
            .unwrap();
        assert_eq!(std::fs::read(empty.join("d/a")).unwrap(), b"ok");
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 1, "staging left behind");
        new.fill(|staging| {
            std::fs::write(staging.join("b"), b"ok")
                .map_err(|e| Error::from(fs::Error::io("write", "b", e)))
        })
        .unwrap();
        assert_eq!(std::fs::read(dir.path().join("new/deeper/b")).unwrap(), b"ok");
        assert_eq!(std::fs::read_dir(dir.path().join("new")).unwrap().count(), 1);
    }
}
