//! The integration test binary (STYLE rule 25): one module per feature.

#![allow(clippy::disallowed_methods)]
// Test helpers outside #[test] functions unwrap freely too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

mod artifact;
mod closed_output;
mod engine;
mod fixtures;
mod launcher;
mod limits;
mod names;
mod snapshot;
mod transport;
mod untrusted_sizes;
