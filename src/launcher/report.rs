//! The compile domain's entry format as L1's one prune and one stats ask for it
//! ([`crate::l1::prune::CompileFormat`]): `strata action prune` removes compile entries
//! whose manifest does not load, and `strata stats` counts their candidates.

use crate::l1::layout::CacheRoot;
use crate::l1::prune::CompileFormat;

use super::entry;

/// The launcher's compile entries ([`entry::CompileManifest`]), for
/// [`crate::l1::prune::prune`] and [`crate::l1::stats::stats`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Format;

impl CompileFormat for Format {
    fn candidates(&self, cache: &CacheRoot, key: &str) -> Option<u64> {
        let key = entry::CompileKey::unchecked(key.to_owned());
        match entry::load(&entry::EntryPlace::new(cache, &key), &key) {
            Ok(Some(m)) => Some(m.candidates.len() as u64),
            _ => None,
        }
    }
}
