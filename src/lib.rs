//! strata: a layered, content-verified build cache for CI.
//!
//! * L1, the action cache ([`action`]): each build action's outputs, keyed by what is
//!   compiled, how, and by which toolchain (docs/engine.md).
//! * L0, the artifact store ([`artifact`]): immutable, verified final outputs with stage
//!   promotion (docs/artifact-store.md).
//! * Records ([`record`]): the canonical, verified envelope every persisted JSON document
//!   uses (docs/records.md).
//! * Snapshots ([`snapshot`]) and transport ([`transport`]) move whole L1 caches between
//!   machines through object stores.
//!
//! * The content layer ([`content`]) and tool identity ([`toolchain`]) sit below all of
//!   them: the L1 layout names, temp/leftover names, staging directories, `--version`.
//!
//! Module dependencies point one way: `digest` → `fs` → `record` → `content`/`toolchain`
//! → `artifact` → `action` → `snapshot`/`transport` → `ci` → `cli`: a module never uses one
//! to its right. The library never prints; the binary (`src/main.rs`, `src/cli/`) does.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod action;
pub mod artifact;
pub mod ci;
pub mod config;
pub mod content;
pub mod digest;
pub mod fs;
pub mod l1;
pub mod launcher;
pub mod message;
pub mod parallel;
pub mod process;
pub mod progress;
pub mod record;
pub mod remote;
pub mod snapshot;
pub mod toolchain;
pub mod transport;
pub mod trust;

/// The producer string written into records: `strata <version>`.
pub const PRODUCER: &str = concat!("strata ", env!("CARGO_PKG_VERSION"));
