//! Custom-operator publication: from an action's private stage into the shared
//! `--publish-dir`, with per-path ownership.
//!
//! State (in `--publish-state-dir`, part of the disposable build tree):
//! ```text
//! .publish.lock                               serialises publication into one directory
//! .action_locks/<sha256(action id)>.lock      one build of an action at a time
//! owners.json                                 strata.publish_owners: path → owning action
//! actions/<sha256(action id)>.json            strata.publish_action: what the action published
//! ```
//! The action id is the canonical JSON array `["<unit>","<soc>","<operator>","<action>"]`
//! (unambiguous: a `unit/action` string could name two different pairs).
//!
//! Under the publish lock, publication first *plans* and only then *changes* anything
//! (all-or-nothing with respect to conflicts):
//! 1. load the owners index; if it is missing or corrupt, rebuild it from the per-action
//!    files (never wipe the publish directory, which holds other actions' outputs); a
//!    corrupt per-action file is a hard error;
//! 2. every path this action publishes must be unowned or owned by it, else
//!    [`Error::OwnershipConflict`] naming both actions and the path;
//! 3. every path it published last time and no longer produces must still hold exactly
//!    what it published (else [`Error::PublishedArtifactChanged`]); those are removed,
//!    with the directories they leave empty;
//! 4. each artifact is placed atomically (temp + rename, digest verified before the
//!    rename), files before symlinks; then the owners index and the action's file are
//!    rewritten atomically.
//!
//! An unowned file already in the publish directory (left by an older build layout) is
//! overwritten by the first action that produces it.
//!
//! # Limitations
//! A crash between steps 4's placements and the state writes leaves placed files not yet
//! recorded as owned; the next publication by any action re-plans from the recorded
//! state, and the same action republishing repairs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::action::entry::{WriteMode, place_parent, write_record};
use crate::action::{Error, LockKind};
use crate::content::{FileRecord, Record};
use crate::digest::Sha256Digest;
use crate::fs::{self, LockWait, Placement, RelPath, Sharing};
use crate::l1::events::EventLog;
use crate::l1::lock::lock_with_events;
use crate::record::{self, Schema};

/// Schema of `owners.json`.
pub const OWNERS_SCHEMA: Schema =
    Schema { name: "strata.publish_owners", version: 2, features: &[] };
/// Schema of `actions/<id>.json`.
pub const ACTION_SCHEMA: Schema =
    Schema { name: "strata.publish_action", version: 2, features: &[] };

/// The identity of a custom-operator action: unit, SoC, operator and action name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionId {
    /// `--unit`.
    pub unit: String,
    /// `--soc`.
    pub soc: String,
    /// `--operator`.
    pub operator: String,
    /// `--action`.
    pub action: String,
}

impl ActionId {
    /// SHA-256 hex of the canonical JSON array `["unit","soc","operator","action"]`.
    pub fn digest(&self) -> String {
        let parts = [&self.unit, &self.soc, &self.operator, &self.action];
        let json = serde_json::to_string(&parts).unwrap_or_default();
        Sha256Digest::of_bytes(json.as_bytes()).to_hex()
    }
}

impl std::fmt::Display for ActionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unit {:?} soc {:?} operator {:?} action {:?}",
            self.unit, self.soc, self.operator, self.action
        )
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Owners {
    owners: BTreeMap<String, Owner>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Owner {
    id: ActionId,
    artifact: Record,
}

/// What a publication changes, planned before anything is.
struct Plan {
    /// Paths already holding exactly what this action publishes there.
    unchanged: BTreeSet<String>,
    /// Paths this action published last time and no longer produces.
    stale: Vec<RelPath>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionState {
    id: ActionId,
    artifacts: Vec<Record>,
}

/// Where and how to publish.
#[derive(Debug, Clone)]
pub struct Publisher<'a> {
    /// The shared output directory.
    pub publish_dir: &'a Path,
    /// The state directory.
    pub state_dir: &'a Path,
    /// Publish-lock policy.
    pub lock_wait: LockWait,
    /// Event log for lock waits and warnings.
    pub events: &'a EventLog,
}

/// The action lock path for `id`.
pub fn action_lock_path(state_dir: &Path, id: &ActionId) -> PathBuf {
    state_dir.join(".action_locks").join(format!("{}.lock", id.digest()))
}

impl Publisher<'_> {
    /// Publishes `artifacts` of `id` from `stage` (see the module docs).
    ///
    /// Returns warnings for the caller to show (a rebuilt ownership index).
    ///
    /// # Errors
    /// [`Error::OwnershipConflict`], [`Error::PublishedArtifactChanged`],
    /// [`Error::PublishStateCorrupt`], [`Error::LockTimeout`], I/O errors.
    pub fn publish(
        &self,
        id: &ActionId,
        stage: &Path,
        artifacts: &[Record],
    ) -> Result<Vec<String>, Error> {
        fs::create_dir_all(self.publish_dir)?;
        fs::create_dir_all(&self.state_dir.join("actions"))?;
        let _lock = lock_with_events(
            &self.state_dir.join(".publish.lock"),
            LockKind::Publish,
            self.lock_wait,
            self.events,
        )?;
        let mut warnings = Vec::new();
        let mut owners = self.load_owners(&mut warnings)?;
        let state_path = self.action_path(id);
        let previous = match read_state(&state_path, self.state_dir)? {
            Some(s) => s.artifacts,
            None => Vec::new(),
        };
        let plan = self.plan(&owners, id, artifacts, &previous)?;
        self.remove_stale(&mut owners, &plan.stale)?;
        self.place(&mut owners, id, stage, artifacts, &plan.unchanged)?;
        write_record(
            &self.state_dir.join("owners.json"),
            &OWNERS_SCHEMA,
            &owners,
            WriteMode::ReplaceAtomically,
        )?;
        let state = ActionState { id: id.clone(), artifacts: artifacts.to_vec() };
        write_record(&state_path, &ACTION_SCHEMA, &state, WriteMode::ReplaceAtomically)?;
        Ok(warnings)
    }

    /// Step 2 and 3 of the module docs: conflicts first, nothing changed yet. A path this
    /// action already owns must still hold what it published (nobody else may have edited
    /// it); one that already holds exactly the new bytes need not be copied again
    /// ([`Plan::unchanged`]). What this action published last time and no longer produces
    /// must be unchanged too, and goes ([`Plan::stale`]).
    fn plan(
        &self,
        owners: &Owners,
        id: &ActionId,
        artifacts: &[Record],
        previous: &[Record],
    ) -> Result<Plan, Error> {
        let mut unchanged = BTreeSet::new();
        for a in artifacts {
            let Some(owner) = owners.owners.get(a.path().as_str()) else { continue };
            if owner.id != *id {
                return Err(Error::OwnershipConflict {
                    path: a.path().to_path(self.publish_dir),
                    owner: owner.id.to_string(),
                    requester: id.to_string(),
                });
            }
            let dest = a.path().to_path(self.publish_dir);
            if fs::symlink_metadata_opt(&dest)?.is_some() {
                if !matches_record(&dest, &owner.artifact)? {
                    return Err(Error::PublishedArtifactChanged {
                        path: dest,
                        owner: id.to_string(),
                    });
                }
                if owner.artifact == *a {
                    unchanged.insert(a.path().as_str().to_owned());
                }
            }
        }
        let current: BTreeSet<&str> = artifacts.iter().map(|a| a.path().as_str()).collect();
        let mut stale = Vec::new();
        for old in previous {
            let path = old.path().as_str();
            if current.contains(path) {
                continue;
            }
            match owners.owners.get(path) {
                Some(o) if o.id == *id => {}
                _ => continue,
            }
            let dest = old.path().to_path(self.publish_dir);
            if fs::symlink_metadata_opt(&dest)?.is_some() && !matches_record(&dest, old)? {
                return Err(Error::PublishedArtifactChanged { path: dest, owner: id.to_string() });
            }
            stale.push(old.path().clone());
        }
        Ok(Plan { unchanged, stale })
    }

    /// Removes the stale outputs and the directories they leave empty: one could be in
    /// the way of a file this action now publishes at that path.
    fn remove_stale(&self, owners: &mut Owners, stale: &[RelPath]) -> Result<(), Error> {
        for rel in stale {
            fs::remove_file(&rel.to_path(self.publish_dir))?;
            owners.owners.remove(rel.as_str());
            let mut dir = rel.parent();
            while let Some(d) = dir {
                if !fs::remove_dir_if_empty(&d.to_path(self.publish_dir))? {
                    break;
                }
                dir = d.parent();
            }
        }
        Ok(())
    }

    /// Step 4: places each artifact from `stage` atomically, files before symlinks, and
    /// records its owner.
    fn place(
        &self,
        owners: &mut Owners,
        id: &ActionId,
        stage: &Path,
        artifacts: &[Record],
        unchanged: &BTreeSet<String>,
    ) -> Result<(), Error> {
        let mut ordered: Vec<&Record> = artifacts.iter().collect();
        ordered.sort_by_key(|a| (matches!(a, Record::Symlink { .. }), a.path().clone()));
        for a in ordered {
            if unchanged.contains(a.path().as_str()) {
                continue;
            }
            let dest = place_parent(self.publish_dir, a.path())?;
            match a {
                Record::File(FileRecord { path, digest, executable, .. }) => {
                    let opts = Placement {
                        expected: *digest,
                        mode: Sharing::Shared.file_mode(*executable),
                        sync: false,
                    };
                    fs::place_file_atomic(&path.to_path(stage), &dest, opts)?;
                }
                Record::Symlink { target, .. } => fs::place_symlink_atomic(target, &dest)?,
                Record::Directory { path } => {
                    fs::create_dir_all_within(
                        self.publish_dir,
                        &path.to_relative_path(),
                        Sharing::Shared.dir_mode(),
                    )?;
                }
            }
            owners.owners.insert(
                a.path().as_str().to_owned(),
                Owner { id: id.clone(), artifact: a.clone() },
            );
        }
        Ok(())
    }

    fn action_path(&self, id: &ActionId) -> PathBuf {
        self.state_dir.join("actions").join(format!("{}.json", id.digest()))
    }

    fn load_owners(&self, warnings: &mut Vec<String>) -> Result<Owners, Error> {
        let path = self.state_dir.join("owners.json");
        let problem = match fs::read(&path) {
            Ok(bytes) => match record::load_current_as::<Owners>(&bytes, &OWNERS_SCHEMA) {
                Ok((_, o)) => return Ok(o),
                Err(e) => Some(format!("{} is unusable ({e})", path.display())),
            },
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e.into()),
        };
        // Rebuild the index from the per-action files.
        let mut owners = Owners::default();
        for file in fs::read_dir(&self.state_dir.join("actions"))? {
            if file.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Some(state) = read_state(&file, self.state_dir)? else { continue };
            for a in state.artifacts {
                let key = a.path().as_str().to_owned();
                if let Some(prev) = owners.owners.get(&key)
                    && prev.id != state.id
                {
                    return Err(Error::PublishStateCorrupt {
                        path: file,
                        state_dir: self.state_dir.to_path_buf(),
                        reason: format!("{key} is claimed by two actions"),
                    });
                }
                owners.owners.insert(key, Owner { id: state.id.clone(), artifact: a });
            }
        }
        let problem = problem.or_else(|| {
            (!owners.owners.is_empty()).then(|| format!("{} is missing", path.display()))
        });
        if let Some(problem) = problem {
            warnings.push(format!(
                "{problem}; rebuilt the ownership index from {} per-action records",
                self.state_dir.join("actions").display()
            ));
        }
        Ok(owners)
    }
}

fn read_state(path: &Path, state_dir: &Path) -> Result<Option<ActionState>, Error> {
    match fs::read(path) {
        Ok(bytes) => record::load_current_as::<ActionState>(&bytes, &ACTION_SCHEMA)
            .map(|(_, s)| Some(s))
            .map_err(|e| Error::PublishStateCorrupt {
                path: path.into(),
                state_dir: state_dir.into(),
                // The problem only: the variant gives its own advice (what to delete).
                reason: e.problem(),
            }),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// True if the thing at `dest` is exactly what `artifact` records.
fn matches_record(dest: &Path, artifact: &Record) -> Result<bool, Error> {
    let meta = fs::symlink_metadata(dest)?;
    Ok(match artifact {
        Record::File(FileRecord { digest, .. }) => {
            meta.is_file() && fs::hash_file_stable(dest, digest.algorithm())?.0 == *digest
        }
        Record::Directory { .. } => meta.is_dir(),
        Record::Symlink { target, .. } => {
            meta.file_type().is_symlink() && fs::read_link(dest)? == *target
        }
    })
}

/// A published path relative to the publish directory (for tests and tools).
pub fn owned_paths(state_dir: &Path) -> Result<BTreeMap<String, ActionId>, Error> {
    let path = state_dir.join("owners.json");
    let bytes = fs::read(&path)?;
    let (_, owners) = record::load_current_as::<Owners>(&bytes, &OWNERS_SCHEMA)
        .map_err(|source| Error::Record { path, source })?;
    Ok(owners.owners.into_iter().map(|(k, v)| (k, v.id)).collect())
}
