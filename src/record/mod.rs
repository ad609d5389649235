//! Records: the canonical, verified envelope every persisted JSON document uses (user
//! reference in `docs/records.md`).
//!
//! This module works on bytes and [`serde_json::Value`]s only. It never touches the
//! filesystem or the network; callers read and write the bytes through [`crate::fs`] or a
//! transport.
//!
//! # Stored form
//!
//! A record is one JSON object with exactly six keys, stored as canonical bytes (below) with
//! no trailing newline:
//!
//! ```text
//! {"content_digest":"sha256:<64 lowercase hex>","feature_set":["<feature>",...],
//!  "payload":{...},"producer_version":"strata 0.1.0",
//!  "schema_name":"strata.action_entry","schema_version":1}
//! ```
//!
//! (shown wrapped; the stored bytes are one line). `schema_version` is an integer in
//! `0..=4294967295`; `feature_set` is an array of strings, sorted by code point without
//! duplicates; `payload` is an object. A feature whose name starts with `optional:` may be
//! ignored by a reader that does not know it; any other feature is *required*, and a reader
//! whose [`Schema::features`] does not list it rejects the record.
//!
//! # Canonical JSON
//!
//! [`to_canonical_bytes`] writes exactly one byte sequence per JSON value:
//! * no insignificant whitespace;
//! * object keys sorted by Unicode code point (equivalently, by their UTF-8 bytes);
//! * integers only, in `-9223372036854775808..=18446744073709551615`, in shortest decimal
//!   form; fractions and exponents are rejected ([`Error::NonInteger`]);
//! * strings in UTF-8 with only the mandatory escapes: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
//!   `\t`, and `\u00xx` (lowercase hex) for the other characters below U+0020. Everything else,
//!   including U+007F, U+2028 and U+2029, is written raw.
//!
//! # Digest rule: the header is bound too, not only the payload
//!
//! `content_digest` is the SHA-256 of the canonical bytes of the envelope object **without** its
//! `content_digest` key, i.e. it binds `feature_set`, `payload`, `producer_version`, `schema_name`
//! and `schema_version`. A payload-only digest would leave the header unprotected: a flipped byte
//! in `producer_version` or a feature name would load as a different, unnoticed record. With the
//! header bound, and with the final check that the input bytes equal their canonical re-encoding
//! ([`Error::NonCanonical`]), every single-byte change of a stored record is rejected; the tests
//! flip every byte of sample records with every XOR mask.
//!
//! # Verification order
//!
//! [`load`] checks, stopping at the first failure:
//! 1. strict parsing ([`parse_strict`]): UTF-8 ([`Error::Utf8`]), JSON syntax and trailing
//!    data ([`Error::Syntax`]), duplicate keys at any depth ([`Error::DuplicateKey`]),
//!    non-integer numbers ([`Error::NonInteger`]); within one document the first problem in
//!    reading order is reported;
//! 2. the top level is an object ([`Error::NotObject`]);
//! 3. the envelope shape: exactly the six keys, each of the right type ([`Error::Shape`]);
//! 4. schema name and version ([`Error::UnknownSchema`]);
//! 5. required features ([`Error::UnknownRequiredFeature`]);
//! 6. the digest ([`Error::DigestMismatch`]);
//! 7. the bytes are canonical ([`Error::NonCanonical`]).
//!
//! # Error taxonomy
//!
//! [`Error::is_corrupt`] is true when the stored bytes are bad (damaged, edited, or not a
//! record): the parse, shape, digest and canonical-form errors, and a payload that does not
//! fit its type ([`Error::Payload`]). [`Error::is_schema_mismatch`] is true when the record
//! is intact but written for a schema or feature this build does not read (another strata
//! version): [`Error::UnknownSchema`], [`Error::UnknownRequiredFeature`] and a missing
//! migration path. The two are disjoint so that a cache can delete corrupt records while
//! leaving records of other versions alone; both mean "miss" to a cache
//! ([`Error::is_unusable_record`]).
//!
//! # Migrations
//!
//! A [`MigrationRegistry`] holds steps `(schema_name, from) -> to` with `to > from`, at most
//! one step per `(schema_name, from)`, and unique ids. Versions only grow, so the step graph
//! is acyclic by construction, and with one step per starting point the path between two
//! versions is unique. [`MigrationRegistry::load_migrated`] verifies the source record,
//! applies each step to the payload, re-seals and re-verifies every intermediate record, and
//! returns the final record with the ordered migration ids. Migrations change the payload
//! only; the feature set is carried forward and the final record must pass the target's
//! feature check.
//!
//! **The production registry ([`MigrationRegistry::production`]) is empty**: no schema has a
//! compatibility boundary yet. Tests use synthetic schemas.
//!
//! # Limitations
//!
//! * Serialising a payload goes through [`serde_json::to_value`], which turns non-finite
//!   floats (NaN, infinities) into `null`; finite floats are rejected. Payload types should
//!   not contain floats at all. A `null` where a float was is caught when the payload is read
//!   back into its type ([`Error::Payload`]).
//! * Nesting is limited to 128 levels by `serde_json`; deeper input is a syntax error.

mod canonical;
mod digest;
mod envelope;
mod fast;
mod migrate;
mod parse;
pub mod steps;
#[cfg(test)]
mod testutil;
mod time;
mod verify;

pub use canonical::{canonical_bytes_of, canonical_sha256, to_canonical_bytes};
pub use digest::RecordDigest;
pub use envelope::{Envelope, Schema};
pub use fast::load_payload_as;
pub use migrate::{Migrated, Migration, MigrationError, MigrationRegistry, load_current_as};
pub use parse::parse_strict;
pub use time::Timestamp;
pub use verify::{load, load_as};

use crate::digest::Sha256Digest;

/// Result alias for this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a record could not be encoded, parsed, verified or migrated.
///
/// Paths (`path` fields) are JSON pointers (RFC 6901) from the document root: `""` is the
/// root itself, `/payload/build_ms` is the member `build_ms` of the member `payload`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not valid UTF-8.
    #[error("{}; the record is corrupt, delete it", self.problem())]
    Utf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
        /// The decoder's error.
        #[source]
        source: std::str::Utf8Error,
    },
    /// The bytes are not one JSON value (syntax error, truncation, trailing data, nesting
    /// deeper than 128 levels).
    #[error("{}; the record is corrupt, delete it", self.problem())]
    Syntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in bytes) of the error.
        column: usize,
        /// The parser's description, without the position.
        message: String,
    },
    /// An object has the same key twice (after unescaping).
    #[error("{}; records must have unique keys, delete the record", self.problem())]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// JSON pointer of the repeated member.
        path: String,
    },
    /// A number that is not an integer in `-2^63..=2^64-1`: a fraction, an exponent, `-0`,
    /// or an integer out of that range (all of which `serde_json` reads as floats).
    #[error(
        "number at {path:?} is not an integer in -2^63..=2^64-1; records hold integers only (no fractions, exponents or -0)"
    )]
    NonInteger {
        /// JSON pointer of the number.
        path: String,
    },
    /// The top level is not a JSON object.
    #[error("record top level is a JSON {found}, expected an object; this is not a strata record")]
    NotObject {
        /// `"array"`, `"string"`, `"number"`, `"boolean"` or `"null"`.
        found: &'static str,
    },
    /// An envelope field is missing, unknown, or of the wrong type or form.
    #[error(
        "record envelope field {field:?}: expected {expected}; this is not a valid strata record"
    )]
    Shape {
        /// The field's name (for an unknown field, the key found).
        field: String,
        /// What the field must be.
        expected: &'static str,
    },
    /// The record belongs to another schema or schema version.
    #[error(
        "record has schema {found_name} v{found_version}, expected {expected_name} v{expected_version}; it was written by another strata version (no migration applies)"
    )]
    UnknownSchema {
        /// `schema_name` found in the record.
        found_name: String,
        /// `schema_version` found in the record.
        found_version: u32,
        /// The schema name the reader expects.
        expected_name: String,
        /// The schema version the reader expects.
        expected_version: u32,
    },
    /// The record requires a feature this build does not know.
    #[error(
        "record requires feature {feature:?} that this build does not support for schema {schema}; upgrade strata to read it"
    )]
    UnknownRequiredFeature {
        /// The unknown feature (does not start with `optional:`).
        feature: String,
        /// `<schema_name> v<schema_version>` of the record.
        schema: String,
    },
    /// The recorded digest differs from the digest of the record's content.
    #[error("{}; the record is corrupt or was edited, delete it", self.problem())]
    DigestMismatch {
        /// The `content_digest` stored in the record.
        recorded: Sha256Digest,
        /// The digest of the record as read.
        computed: Sha256Digest,
    },
    /// The record's value verifies but its bytes are not the canonical encoding.
    #[error("{}; records are never edited by hand, delete it", self.problem())]
    NonCanonical {
        /// Offset of the first byte that differs from the canonical encoding.
        offset: usize,
    },
    /// The payload does not deserialise into the requested type.
    #[error(
        "payload of schema {schema} does not match its type; the record is corrupt or from an incompatible build"
    )]
    Payload {
        /// `<schema_name> v<schema_version>` of the record.
        schema: String,
        /// The deserialiser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A value could not be turned into JSON (for example a map with non-string keys).
    #[error(
        "value cannot be serialised to JSON; record payloads must be JSON objects with string keys"
    )]
    Serialize {
        /// The serialiser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A migration registry or migration step failed.
    #[error(transparent)]
    Migration(#[from] MigrationError),
}

impl Error {
    /// What is wrong, without the advice the message gives for a record stored on this
    /// machine ("… delete it"): for bytes that just arrived over the network, where the
    /// damage may have happened in transit and the right advice is to retry, the caller
    /// adds its own. Equal to the message for errors that carry no such advice.
    pub fn problem(&self) -> String {
        match self {
            Error::Utf8 { offset, .. } => {
                format!("record is not valid UTF-8 (first bad byte at offset {offset})")
            }
            Error::Syntax { line, column, message } => {
                format!("record is not valid JSON at line {line} column {column}: {message}")
            }
            Error::DuplicateKey { key, path } => {
                format!("record has duplicate key {key:?} at {path:?}")
            }
            Error::DigestMismatch { recorded, computed } => format!(
                "record digest mismatch: recorded {}, computed {}",
                recorded.to_prefixed(),
                computed.to_prefixed()
            ),
            Error::NonCanonical { offset } => {
                format!("record bytes are not canonical (first difference at byte {offset})")
            }
            other => other.to_string(),
        }
    }

    /// True if the stored bytes are bad: damaged, edited by hand, or not a record at all.
    ///
    /// Covers [`Error::Utf8`], [`Error::Syntax`], [`Error::DuplicateKey`],
    /// [`Error::NonInteger`], [`Error::NotObject`], [`Error::Shape`],
    /// [`Error::DigestMismatch`], [`Error::NonCanonical`] and [`Error::Payload`]. Disjoint from
    /// [`Error::is_schema_mismatch`].
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            Error::Utf8 { .. }
                | Error::Syntax { .. }
                | Error::DuplicateKey { .. }
                | Error::NonInteger { .. }
                | Error::NotObject { .. }
                | Error::Shape { .. }
                | Error::DigestMismatch { .. }
                | Error::NonCanonical { .. }
                | Error::Payload { .. }
        )
    }

    /// True if the record is intact but written for a schema, schema version or required
    /// feature this build cannot read: [`Error::UnknownSchema`],
    /// [`Error::UnknownRequiredFeature`], or [`MigrationError::NoPath`].
    pub fn is_schema_mismatch(&self) -> bool {
        matches!(
            self,
            Error::UnknownSchema { .. }
                | Error::UnknownRequiredFeature { .. }
                | Error::Migration(MigrationError::NoPath { .. })
        )
    }

    /// True if a stored record cannot be used, for either reason: [`Error::is_corrupt`] or
    /// [`Error::is_schema_mismatch`]. A cache maps this to a miss.
    pub fn is_unusable_record(&self) -> bool {
        self.is_corrupt() || self.is_schema_mismatch()
    }
}

/// Appends one JSON-pointer reference token (`~` → `~0`, `/` → `~1`) to `path`.
fn push_pointer_token(path: &mut String, token: &str) {
    path.push('/');
    // Most tokens (every key strata writes, every index) need no escape.
    if !token.bytes().any(|b| b == b'~' || b == b'/') {
        path.push_str(token);
        return;
    }
    for c in token.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_problem_leaves_out_the_local_advice() {
        let digest = |b: u8| Sha256Digest::of_bytes(&[b]);
        let cases = [
            Error::Syntax { line: 1, column: 7, message: "EOF".into() },
            Error::DuplicateKey { key: "k".into(), path: "/payload".into() },
            Error::DigestMismatch { recorded: digest(1), computed: digest(2) },
            Error::NonCanonical { offset: 9 },
        ];
        for e in cases {
            let (shown, problem) = (e.to_string(), e.problem());
            assert!(shown.starts_with(&format!("{problem}; ")), "{shown} / {problem}");
            assert!(shown.contains("delete") && !problem.contains("delete"), "{problem}");
        }
        let e = Error::NonCanonical { offset: 9 };
        assert_eq!(
            e.to_string(),
            "record bytes are not canonical (first difference at byte 9); records are never \
             edited by hand, delete it"
        );
        let other = Error::NotObject { found: "array" };
        assert_eq!(other.problem(), other.to_string());
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        let mut path = String::new();
        push_pointer_token(&mut path, "a/b");
        push_pointer_token(&mut path, "~x");
        push_pointer_token(&mut path, "");
        assert_eq!(path, "/a~1b/~0x/");
    }

    #[test]
    fn predicates_are_disjoint_and_cover_load_errors() {
        let corrupt = Error::NonCanonical { offset: 3 };
        assert!(corrupt.is_corrupt() && !corrupt.is_schema_mismatch());
        let schema = Error::UnknownRequiredFeature { feature: "x".into(), schema: "s v1".into() };
        assert!(schema.is_schema_mismatch() && !schema.is_corrupt());
        assert!(corrupt.is_unusable_record() && schema.is_unusable_record());
        let registry = Error::Migration(MigrationError::DuplicateId { id: "a".into() });
        assert!(!registry.is_unusable_record());
    }

    #[test]
    fn messages_name_the_problem() {
        let e = Error::NonInteger { path: "/payload/build_ms".into() };
        assert!(e.to_string().contains("\"/payload/build_ms\""), "{e}");
        let e = Error::NotObject { found: "array" };
        assert!(e.to_string().contains("JSON array"), "{e}");
    }
}
