//! Transport: the directory store, and the S3 store against a real s3s-fs server on
//! 127.0.0.1 (started per test by [`server::S3sServer`]), with faults injected by a small
//! HTTP proxy ([`proxy::FaultProxy`]).

mod faults;
mod fs_store;
mod listing;
pub mod logs;
pub mod proxy;
mod range;
mod s3_store;
pub mod server;
pub mod stub;

/// `len` bytes of pseudo-random data from `seed` (deterministic per test).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut data = vec![0u8; len];
    rng.fill(&mut data);
    data
}
