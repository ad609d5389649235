//! Names of the objects an index snapshot adds to a store (docs/snapshots.md "Index
//! snapshots"). Keys never start with `~` nor contain `/`, so none of these names is a
//! key, a sidecar, or in the listing of a key prefix.
//!
//! ```text
//! ~entries/<2 hex>/<64 hex>        entry object or pack; the hex is BLAKE3 of its bytes
//! ~refs/<2 hex>/<64 hex>.json      entry ref; the hex is SHA-256 of the entry path
//! ~leases/<save|gc>-<32 hex>.json  a running save's or gc's lease
//! ```

use crate::digest::{ContentDigest, DigestAlgorithm, Sha256Digest};

/// Prefix of every entry object and pack.
pub const ENTRIES_PREFIX: &str = "~entries/";
/// Prefix of every entry ref.
pub const REFS_PREFIX: &str = "~refs/";
/// Prefix of every lease.
pub const LEASES_PREFIX: &str = "~leases/";

/// `~entries/<2 hex>/<64 hex>` for an object whose bytes have the BLAKE3 digest `digest`.
/// `None` for a digest of another algorithm (entry objects are always named by BLAKE3).
pub fn entry_object_name(digest: &ContentDigest) -> Option<String> {
    if digest.algorithm() != DigestAlgorithm::Blake3 {
        return None;
    }
    let hex = digest.to_hex();
    Some(format!("{ENTRIES_PREFIX}{}/{hex}", hex.get(..2).unwrap_or_default()))
}

/// The BLAKE3 digest an entry object name states, if `name` is one
/// (`~entries/<2 hex>/<64 lowercase hex>` with matching first two digits).
pub fn entry_object_digest(name: &str) -> Option<ContentDigest> {
    let rest = name.strip_prefix(ENTRIES_PREFIX)?;
    let (fan, hex) = rest.split_once('/')?;
    if hex.len() != 64
        || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        || hex.get(..2) != Some(fan)
    {
        return None;
    }
    format!("blake3:{hex}").parse().ok()
}

/// `~refs/<2 hex>/<64 hex>.json`, the ref of the entry at `entry_path` (relative to
/// `actions-v1/`, e.g. `third_party/zlib/<key>`); the hex is SHA-256 of the path's bytes.
pub fn ref_name(entry_path: &str) -> String {
    let hex = Sha256Digest::of_bytes(entry_path.as_bytes()).to_hex();
    format!("{REFS_PREFIX}{}/{hex}.json", hex.get(..2).unwrap_or_default())
}

/// The ref of `entry_path` written by the producer whose key id is `key_id` (16 hex) when
/// another writer's ref already holds [`ref_name`]: `~refs/<2 hex>/<64 hex>.<key id>.json`.
/// Consumers with trusted keys read it (one small GET per trusted key) when the plain ref
/// is not signed by one of them, so a ref anyone with write access can put first never
/// hides a trusted producer's.
pub fn keyed_ref_name(entry_path: &str, key_id: &str) -> String {
    let plain = ref_name(entry_path);
    let stem = plain.strip_suffix(".json").unwrap_or(&plain);
    format!("{stem}.{key_id}.json")
}

/// What holds a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseKind {
    /// A running `snapshot save` of an index snapshot.
    Save,
    /// A running `snapshot gc`.
    Gc,
}

impl LeaseKind {
    /// `save` or `gc`.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseKind::Save => "save",
            LeaseKind::Gc => "gc",
        }
    }
}

/// `~leases/<kind>-<id>.json`; `id` is 32 lowercase hex digits chosen by the holder.
pub fn lease_name(kind: LeaseKind, id: &str) -> String {
    format!("{LEASES_PREFIX}{}-{id}.json", kind.as_str())
}

/// The kind of the lease named `name`, if it is one.
pub fn lease_kind(name: &str) -> Option<LeaseKind> {
    let rest = name.strip_prefix(LEASES_PREFIX)?.strip_suffix(".json")?;
    let (kind, id) = rest.split_once('-')?;
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    match kind {
        "save" => Some(LeaseKind::Save),
        "gc" => Some(LeaseKind::Gc),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_lookalikes() {
        let digest = ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"entry");
        let name = entry_object_name(&digest).unwrap();
        assert_eq!(name.len(), "~entries/".len() + 3 + 64);
        assert_eq!(entry_object_digest(&name), Some(digest));
        let sha = ContentDigest::of_bytes(DigestAlgorithm::Sha256, b"entry");
        assert_eq!(entry_object_name(&sha), None);
        let hex = digest.to_hex();
        for bad in [
            format!("~entries/00/{hex}"),
            format!("~entries/{}/{}", &hex[..2], hex.to_uppercase()),
            format!("~entries/{}/{}", &hex[..2], &hex[..63]),
            format!("~refs/{}/{hex}", &hex[..2]),
        ] {
            assert_eq!(entry_object_digest(&bad), None, "{bad}");
        }
        let r = ref_name("third_party/zlib/k");
        assert!(r.starts_with("~refs/") && r.ends_with(".json") && r.len() == 6 + 3 + 64 + 5);
        assert_ne!(r, ref_name("third_party/zlib/j"));
        let lease = lease_name(LeaseKind::Gc, &"a".repeat(32));
        assert_eq!(lease_kind(&lease), Some(LeaseKind::Gc));
        assert_eq!(
            lease_kind(&lease_name(LeaseKind::Save, &"0".repeat(32))),
            Some(LeaseKind::Save)
        );
        assert_eq!(lease_kind("~leases/gc-xyz.json"), None);
        assert_eq!(lease_kind(&format!("~leases/other-{}.json", "a".repeat(32))), None);
    }
}
