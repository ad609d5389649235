//! Transport: one contract suite every backend runs ([`contract`]: the directory store,
//! S3 against a real s3s-fs server on 127.0.0.1 started per test by [`server::S3sServer`],
//! WebDAV against a real nginx started per test by [`nginx::Nginx`]), the HTTP store's
//! answers to failing servers ([`http_store`]), and S3 faults injected by a small HTTP
//! proxy ([`proxy::FaultProxy`]).

pub mod contract;
mod faults;
mod http_store;
mod listing;
pub mod logs;
pub mod nginx;
pub mod proxy;
mod range;
pub mod server;
pub mod stub;

/// `len` bytes of pseudo-random data from `seed` (deterministic per test).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut data = vec![0u8; len];
    rng.fill(&mut data);
    data
}
