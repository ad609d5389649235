//! Index snapshots and entry objects (docs/snapshots.md "Index snapshots"): a snapshot
//! that lists content-addressed entry objects instead of holding the whole cache, so a
//! save uploads only new entries, a restore fetches only missing ones, and a local MISS
//! can fetch one entry (the remote entry tier).
//!
//! * [`names`]: the store names (`~entries/`, `~refs/`, `~leases/`);
//! * [`record`]: the `strata.snapshot_index` and `strata.entry_ref` records;
//! * [`entries`]: the entries of a local cache and their identities;
//! * [`object`]: one entry packed as an object, and its verified installation;
//! * [`save`] and [`restore`]: `snapshot save --format index` and the restore of an index
//!   snapshot;
//! * [`lease`]: the leases that keep a store gc and index saves apart.
//!
//! The remote entry tier, which fetches single entries on a local MISS and uploads new
//! ones by the same refs and entry objects, is [`crate::remote`].

pub mod entries;
pub mod held;
pub mod lease;
pub mod names;
pub mod object;
pub mod record;
pub mod restore;
pub mod save;
mod upload;

pub use entries::{LocalEntry, list};
pub use lease::{GuardPolicy, Lease, save_guard};
pub use object::{Installed, PackedEntry, install_entry, pack_entry};
pub use record::{EntryLocation, EntryRef, IndexEntry, SnapshotIndex};
