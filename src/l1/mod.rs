//! L1: the local cache root, whatever front end fills it (docs/format.md "L1 layout";
//! docs/architecture.md).
//!
//! `strata action run` (the engine, [`crate::action`]), the compiler launcher
//! ([`crate::launcher`]) and the remote entry tier ([`crate::remote`]) all keep entries
//! under one cache root. This module owns what they share, so that each rule exists once:
//!
//! * [`layout`]: the typed layout of the cache root, every domain (`third_party`,
//!   `custom_operator`, `compile`; archive steps keep their entries in `compile`), the
//!   lock and memo paths, entry-path component encoding;
//! * [`write`](mod@write): the one entry writer (staged, durable before visible, never in place) and
//!   [`lock`]: the one lock policy (kinds, timeouts, acquisition with events);
//! * [`counters`]: the machine-local hit and miss counters per domain;
//! * [`events`]: the JSONL event log;
//! * [`prune`] and [`stats`]: one prune and one report over every domain (the compile
//!   domain's entry format is asked through [`prune::CompileFormat`]);
//! * [`remote`]: the interface of the remote entry tier ([`remote::EntrySource`]), which
//!   the engine and the launcher call on a local MISS without knowing any store.
//!
//! It never touches the network, and knows no front end: a domain's entry format is the
//! front end's.

pub mod counters;
pub mod events;
pub mod layout;
pub mod lock;
pub mod prune;
pub mod remote;
pub mod stats;
pub mod write;

pub use layout::{CacheRoot, Domain};
