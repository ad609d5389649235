//! [`FieldHasher`]: the one hasher of length-prefixed fields behind strata's identity keys,
//! so that no two sequences of fields hash the same bytes.
//!
//! A field is its length as 8 bytes, then its bytes ([`FieldHasher::bytes`]); a named field
//! is its name, a 0 byte, then the field ([`FieldHasher::named`]). Two recipes use it, and
//! each keeps the bytes it has always hashed (the keys of existing caches stay valid):
//!
//! | key | algorithm | lengths | fields |
//! |---|---|---|---|
//! | compile and archive keys (`launcher`) | BLAKE3 | little-endian | named, the first naming the key's kind and version |
//! | action identity components (`action::identity::records`) | SHA-256 | big-endian | unnamed: each record's name, then its value, sorted |
//!
//! Keys built from JSON documents (artifact identities, the snapshot compatibility
//! descriptor) hash canonical JSON instead ([`crate::record::canonical_sha256`]), where the
//! encoding itself delimits every value.

use super::{ContentDigest, ContentHasher, DigestAlgorithm};

/// How a [`FieldHasher`] writes a field's length (always 8 bytes, unsigned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthOrder {
    /// Least significant byte first.
    LittleEndian,
    /// Most significant byte first.
    BigEndian,
}

/// A key being hashed from length-prefixed fields (see the module docs).
pub struct FieldHasher {
    hasher: ContentHasher,
    order: LengthOrder,
}

impl std::fmt::Debug for FieldHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FieldHasher")
            .field("algorithm", &self.hasher.algorithm())
            .field("order", &self.order)
            .finish()
    }
}

impl FieldHasher {
    /// An empty key hashed with `algorithm`, lengths written in `order`.
    pub fn new(algorithm: DigestAlgorithm, order: LengthOrder) -> Self {
        Self { hasher: ContentHasher::new(algorithm), order }
    }

    /// Adds a field: `bytes.len()` as 8 bytes, then `bytes`.
    pub fn bytes(&mut self, bytes: &[u8]) {
        let len = bytes.len() as u64;
        let len = match self.order {
            LengthOrder::LittleEndian => len.to_le_bytes(),
            LengthOrder::BigEndian => len.to_be_bytes(),
        };
        self.hasher.update(&len);
        self.hasher.update(bytes);
    }

    /// Adds a named field: `name`, a 0 byte, then the field as [`FieldHasher::bytes`] adds it.
    pub fn named(&mut self, name: &str, bytes: &[u8]) {
        self.hasher.update(name.as_bytes());
        self.hasher.update(&[0]);
        self.bytes(bytes);
    }

    /// The digest of the fields added.
    pub fn finish(self) -> ContentDigest {
        self.hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Sha256Digest;

    /// The launcher's recipe, as it was written out before this type: BLAKE3 over
    /// `name || 0 || len_le64 || value` per field.
    #[test]
    fn named_little_endian_fields_hash_the_launchers_bytes() {
        let fields: [(&str, &[u8]); 3] =
            [("strata.compile_key", b"1"), ("source", b"blake3:00"), ("arg", b"")];
        let mut old = blake3::Hasher::new();
        for (name, value) in fields {
            old.update(name.as_bytes());
            old.update(&[0]);
            old.update(&(value.len() as u64).to_le_bytes());
            old.update(value);
        }
        let mut new = FieldHasher::new(DigestAlgorithm::Blake3, LengthOrder::LittleEndian);
        for (name, value) in fields {
            new.named(name, value);
        }
        assert_eq!(new.finish().to_hex(), old.finalize().to_hex().to_string());
    }

    /// The action identity recipe: SHA-256 over `len_be64 || name || len_be64 || value`.
    #[test]
    fn unnamed_big_endian_fields_hash_the_identity_records_bytes() {
        let mut bytes = Vec::new();
        for part in [&b"a"[..], b"b", b"input[0]/x.c", b"00ff"] {
            bytes.extend_from_slice(&(part.len() as u64).to_be_bytes());
            bytes.extend_from_slice(part);
        }
        let mut new = FieldHasher::new(DigestAlgorithm::Sha256, LengthOrder::BigEndian);
        for part in [&b"a"[..], b"b", b"input[0]/x.c", b"00ff"] {
            new.bytes(part);
        }
        assert_eq!(new.finish().to_sha256(), Some(Sha256Digest::of_bytes(&bytes)));
    }

    /// Framing keeps field boundaries: moving a byte from one field to the next changes
    /// the key.
    #[test]
    fn boundaries_are_part_of_the_key() {
        let key = |fields: &[(&str, &[u8])]| {
            let mut h = FieldHasher::new(DigestAlgorithm::Blake3, LengthOrder::LittleEndian);
            for (name, value) in fields {
                h.named(name, value);
            }
            h.finish()
        };
        assert_ne!(key(&[("a", b"bc")]), key(&[("ab", b"c")]));
        assert_ne!(key(&[("a", b"b"), ("c", b"")]), key(&[("a", b"bc")]));
    }
}
