//! Snapshots: moving a whole L1 cache between machines through an object store (user guide
//! in `docs/snapshots.md`).
//!
//! * [`key`]: the snapshot key `<prefix>-schema<N>-<compat digest>-<source hash>-<suffix>`
//!   and its two prefixes; [`compat`] builds the compatibility descriptor (architecture,
//!   SoC, toolchain identity) and [`source`] the tracked-source hash.
//! * [`pack`] / [`unpack`]: one tar stream of `<cache root>/actions-v1/`, compressed with
//!   zstd or gzip ([`Compression`]), whose last entry is a `strata.snapshot_manifest` record
//!   ([`manifest`]), written and read by the content layer's codec
//!   ([`crate::content::codec`]). Both directions stream with bounded buffers.
//! * [`mod@restore`] and [`mod@save`]: the orchestration over an
//!   [`ObjectStore`](crate::transport::ObjectStore): lookup order (`lookup.rs`: exact key,
//!   then each prefix newest first, falling through candidates that fail verification),
//!   whole-object verification, staging and atomic swap into a cache directory of its own,
//!   writer gating; `commit.rs`: the commit protocol (an object of its own, the sidecar
//!   that binds it, read back; pending records of saves that could not clean up);
//!   [`leftovers`] removes stale temp files of killed runs beside the cache directory;
//!   [`outcome`] names how a restore or save ended and writes its event.
//!
//! # Objects in the store
//! `snapshot save` writes an index snapshot by default ([`index`]: entry objects under
//! `~entries/`, refs under `~refs/`, and a small index object committed by the sidecar);
//! `--format full` writes the single-object format described here. A full snapshot is
//! two objects: the compressed tar stream, under a name of its own
//! (`~<16 hex>-<32 hex>`; `<key>` for snapshots of earlier releases), and `<key>.json`, a
//! `strata.snapshot_sidecar` record naming that object and holding its size and SHA-256,
//! the format, the manifest digest and the producer. The sidecar is uploaded last: it is
//! the commit point, and restore only considers keys whose sidecar exists. However saves of
//! one key interleave, a visible sidecar commits an object of the same save.
//!
//! # Invariants
//! * Restores stay inside their target (no absolute paths, no `..`, no writing through
//!   symlinks, no hard links or devices, special mode bits dropped, sizes bounded): see
//!   [`unpack`].
//! * A full snapshot never half restores a cache directory: it is either untouched or
//!   replaced as a whole by a verified tree ([`mod@restore`]). An index snapshot adds
//!   whole verified entries in place, each by one rename, never replacing an existing one
//!   ([`index::restore`]). Either way a directory that is not strata's own (the workspace,
//!   `$HOME`, anything holding other files) is refused, untouched.
//! * Only an entry's `artifacts/` may hold symlinks; a symlink at a layout position is
//!   rejected on restore, skipped on pack, and never traversed by the engine.
//! * Nothing published is overwritten: uploads use
//!   [`put_file_if_absent`](crate::transport::ObjectStore::put_file_if_absent).
//! * This module knows no S3 wire details and never prints; the CLI reports.

mod arrivals;
mod commit;
pub mod compat;
mod error;
pub mod gc;
pub mod index;
pub mod key;
pub mod leftovers;
pub mod manifest;
pub mod outcome;
pub mod pack;
pub mod restore;
pub mod save;
pub mod source;
pub mod unpack;

pub use crate::content::codec::Compression;
pub use error::Error;
pub use key::{KeyReport, KeyRequest, Keys, SnapshotKey, compute_key};
pub use manifest::{Producer, Sidecar, SnapshotManifest};
pub use outcome::{RestoreOutcome, RestoreStatus, SaveEnd};
pub use restore::{MatchLevel, RestoreReport, RestoreRequest, restore};
pub use save::{SaveOutcome, SaveReport, SaveRequest, SkipReason, save};

/// The L1 layout version a snapshot carries: the `1` of `actions-v1`, rendered as
/// `schema1` in every key. Bumping the layout (see `crate::l1::layout`) must bump this.
pub const LAYOUT_VERSION: u32 = 1;

/// The directory under the cache root that a snapshot carries (everything else under the
/// root, such as `.locks/`, `.local/` and `.updated`, is machine-local).
pub const CARRIED_DIR: &str = crate::l1::layout::ACTIONS_DIR;
