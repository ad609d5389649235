//! The content layer (issue 8): what action, artifact, snapshot and L0 share about files
//! on disk and how they are named, below all of them (DESIGN.md §2).
//!
//! * [`layout`]: the L1 layout names under a cache root (`actions-v1/`, `.locks/`,
//!   `.local/`, `.updated`), entry-path component encoding, the cache-root paths;
//! * [`temp`]: the one spelling (and parser) of strata's temp and crash-leftover names,
//!   and the one self-deleting staging directory made with it.

pub mod layout;
pub mod temp;
