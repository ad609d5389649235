//! strata: a layered, content-verified build cache for CI.
//!
//! * L1, the local cache root ([`l1`]: layout, the one entry writer and lock policy,
//!   counters, prune and stats), filled by the action engine ([`action`], docs/engine.md),
//!   the compiler launcher ([`launcher`], docs/launcher.md) and the remote entry tier
//!   ([`remote`], docs/remote-tier.md).
//! * L0, the artifact store ([`artifact`]): immutable, verified final outputs with stage
//!   promotion, and L0 transfer through object stores ([`artifact::l0`];
//!   docs/artifact-store.md).
//! * Records ([`record`]): the canonical, verified envelope every persisted JSON document
//!   uses (docs/records.md).
//! * Snapshots ([`snapshot`]) and transport ([`transport`]) move whole L1 caches between
//!   machines through object stores.
//!
//! Module dependencies point one way, down the layers of docs/architecture.md (checked by
//! `tests/it/architecture.rs`). From the bottom up: `config`, `message`, `progress`;
//! `digest`; `fs`; `record`, `trust`, `process`, `parallel`; `content`; `l1`, `toolchain`;
//! `transport`; `action`, `artifact`, `launcher`, `snapshot`; `remote`; `ci`. A module uses
//! only modules of earlier layers. The library never prints; the binary (`src/main.rs`,
//! `src/cli/`) does.

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
