//! Identity records and their canonical hash.
//!
//! An identity component is a multiset of `(name, value)` string pairs. Its hash is
//! SHA-256 over the pairs sorted by name then value (byte-wise, which is code-point order),
//! each framed as `len(name) || name || len(value) || value`, lengths as unsigned 64-bit
//! big-endian ([`crate::digest::FieldHasher`]). No records hash to the SHA-256 of the empty string. The framing makes the
//! encoding injective: no two different multisets share a byte stream.

use serde::{Deserialize, Serialize};

use crate::digest::{DigestAlgorithm, FieldHasher, LengthOrder, Sha256Digest};

/// One `(name, value)` identity record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Record {
    /// Record name, e.g. `input[0]/src/a.c`, `recipe_value[1]`, `tool:c++`.
    pub name: String,
    /// Record value: a hex digest, a normalised string or a tool's version text.
    pub value: String,
}

/// A multiset of records. Order of insertion does not matter for the hash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Records(Vec<Record>);

impl Records {
    /// An empty multiset.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a record.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.push(Record { name: name.into(), value: value.into() });
    }

    /// Adds all records of `other`.
    pub fn extend(&mut self, other: Records) {
        self.0.extend(other.0);
    }

    /// The records, sorted by name then value.
    pub fn sorted(&self) -> Vec<Record> {
        let mut v = self.0.clone();
        v.sort();
        v
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there are no records.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The canonical hash (see the module docs).
    pub fn hash(&self) -> Sha256Digest {
        let mut refs: Vec<&Record> = self.0.iter().collect();
        refs.sort();
        let mut h = FieldHasher::new(DigestAlgorithm::Sha256, LengthOrder::BigEndian);
        for r in refs {
            h.bytes(r.name.as_bytes());
            h.bytes(r.value.as_bytes());
        }
        h.finish().to_sha256().expect("a SHA-256 hasher gives a SHA-256 digest")
    }

    /// Sorts in place (so stored records are in canonical order).
    pub fn into_sorted(mut self) -> Self {
        self.0.sort();
        self
    }

    /// Iterates the records in stored order.
    pub fn iter(&self) -> impl Iterator<Item = &Record> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_sha256_of_nothing() {
        assert_eq!(
            Records::new().hash().to_hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn order_free_and_framed() {
        let mut a = Records::new();
        a.push("b", "2");
        a.push("a", "1");
        let mut b = Records::new();
        b.push("a", "1");
        b.push("b", "2");
        assert_eq!(a.hash(), b.hash());
        let mut c = Records::new();
        c.push("ab", "");
        let mut d = Records::new();
        d.push("a", "b");
        assert_ne!(c.hash(), d.hash());
        // Golden value: one record ("a","b") = sha256(00..01 'a' 00..01 'b').
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&1u64.to_be_bytes());
        bytes.push(b'a');
        bytes.extend_from_slice(&1u64.to_be_bytes());
        bytes.push(b'b');
        assert_eq!(d.hash(), Sha256Digest::of_bytes(&bytes));
    }
}
