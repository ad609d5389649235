//! Canonical JSON: the one byte encoding of a JSON value that records are stored and hashed
//! in (`docs/records.md`, "Canonical JSON").
//!
//! Rules, all enforced here:
//! * compact: no whitespace outside strings;
//! * object keys sorted by Unicode code point, i.e. by their UTF-8 bytes (not by UTF-16 code
//!   units: `"｡"` U+FF61 sorts before `"😀"` U+1F600). Sorting is done here explicitly and does
//!   not rely on the map type `serde_json` happens to be built with;
//! * numbers are integers in `i64::MIN..=u64::MAX`, written in shortest decimal form; any
//!   other number is [`Error::NonInteger`] naming its JSON pointer;
//! * strings are UTF-8 with only the mandatory escapes `\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
//!   `\t`, and `\u00xx` (lowercase hex) for the remaining characters below U+0020; everything
//!   else (including `/`, U+007F, U+2028, U+2029 and non-ASCII) is written raw.
//!
//! Two equal values therefore always encode to the same bytes, and two different values to
//! different bytes, which is what makes the digest of the bytes a digest of the value.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Number, Value};

use super::{Error, Result, push_pointer_token};

/// Encodes `value` as canonical JSON bytes (UTF-8, no trailing newline).
///
/// # Errors
/// [`Error::NonInteger`] for the first number (in key order) that is not an integer, with its
/// JSON pointer (for example `/payload/build_ms`).
///
/// ```
/// use strata::record::to_canonical_bytes;
/// let v = serde_json::json!({"b": [1, -2], "a": "x\ny"});
/// assert_eq!(to_canonical_bytes(&v).unwrap(), br#"{"a":"x\ny","b":[1,-2]}"#);
/// ```
pub fn to_canonical_bytes(value: &Value) -> Result<Vec<u8>> {
    let mut writer = Writer::new();
    writer.value(value);
    writer.finish()
}

/// Serialises `value` with serde and encodes the result as canonical JSON bytes.
///
/// # Errors
/// [`Error::Serialize`] if serde cannot turn `value` into JSON (a map with non-string keys, a
/// failing `Serialize` impl); [`Error::NonInteger`] for a float field.
pub fn canonical_bytes_of<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    let value = serde_json::to_value(value).map_err(|source| Error::Serialize { source })?;
    to_canonical_bytes(&value)
}

/// The SHA-256 of `value`'s canonical JSON bytes: the key recipe of documents whose JSON
/// encoding delimits every value (artifact identities, the snapshot compatibility
/// descriptor; length-prefixed keys use [`crate::digest::FieldHasher`]).
///
/// # Errors
/// As [`to_canonical_bytes`].
pub fn canonical_sha256(value: &Value) -> Result<crate::digest::Sha256Digest> {
    to_canonical_bytes(value).map(|bytes| crate::digest::Sha256Digest::of_bytes(&bytes))
}

/// A canonical JSON writer that knows the JSON pointer of what it is writing.
///
/// A number that is not an integer is written in `serde_json`'s form and remembered as an
/// error: [`Writer::finish`] reports it, [`Writer::finish_unchecked`] ignores it (the output is
/// then not canonical and the strict parser rejects it). The pointer is kept as a stack of
/// borrowed keys and indexes and only formatted for an error, so writing costs no
/// formatting per value.
pub(super) struct Writer<'v> {
    out: Vec<u8>,
    path: Vec<Segment<'v>>,
    error: Option<Error>,
}

/// What a [`Writer`] wrote.
pub(super) struct Written {
    out: Vec<u8>,
    error: Option<Error>,
}

impl Written {
    /// The canonical bytes.
    ///
    /// # Errors
    /// [`Error::NonInteger`] for the first non-integer number written.
    pub(super) fn finish(self) -> Result<Vec<u8>> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.out),
        }
    }

    /// The bytes written, even if a non-integer number made them non-canonical.
    pub(super) fn finish_unchecked(self) -> Vec<u8> {
        self.out
    }
}

/// One step of a JSON pointer.
#[derive(Clone, Copy)]
enum Segment<'v> {
    Key(&'v str),
    Index(usize),
}

impl<'v> Writer<'v> {
    pub(super) fn new() -> Self {
        Writer { out: Vec::new(), path: Vec::new(), error: None }
    }

    /// The canonical bytes.
    ///
    /// # Errors
    /// [`Error::NonInteger`] for the first non-integer number written.
    pub(super) fn finish(self) -> Result<Vec<u8>> {
        self.written().finish()
    }

    /// The bytes written, even if a non-integer number made them non-canonical.
    #[cfg(test)]
    pub(super) fn finish_unchecked(self) -> Vec<u8> {
        self.out
    }

    /// What was written, without the borrows of the values.
    pub(super) fn written(self) -> Written {
        Written { out: self.out, error: self.error }
    }

    /// Writes any JSON value.
    pub(super) fn value(&mut self, value: &'v Value) {
        match value {
            Value::Null => self.out.extend_from_slice(b"null"),
            Value::Bool(true) => self.out.extend_from_slice(b"true"),
            Value::Bool(false) => self.out.extend_from_slice(b"false"),
            Value::Number(number) => self.number(number),
            Value::String(text) => self.string(text),
            Value::Array(items) => {
                self.out.push(b'[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        self.out.push(b',');
                    }
                    self.path.push(Segment::Index(index));
                    self.value(item);
                    self.path.pop();
                }
                self.out.push(b']');
            }
            Value::Object(map) => {
                let mut members: Vec<(&str, &Value)> =
                    map.iter().map(|(key, value)| (key.as_str(), value)).collect();
                self.object(&mut members);
            }
        }
    }

    /// Writes an object made of `members`, sorting them by key first. Keys must be unique.
    pub(super) fn object(&mut self, members: &mut [(&'v str, &'v Value)]) {
        if !members.is_sorted_by(|a, b| a.0.as_bytes() <= b.0.as_bytes()) {
            members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        }
        self.out.push(b'{');
        for (index, (key, value)) in members.iter().enumerate() {
            if index > 0 {
                self.out.push(b',');
            }
            self.string(key);
            self.out.push(b':');
            self.path.push(Segment::Key(key));
            self.value(value);
            self.path.pop();
        }
        self.out.push(b'}');
    }

    /// The JSON pointer of the value being written.
    fn pointer(&self) -> String {
        let mut out = String::new();
        for segment in &self.path {
            match segment {
                Segment::Key(key) => push_pointer_token(&mut out, key),
                Segment::Index(index) => {
                    let _ = write!(out, "/{index}");
                }
            }
        }
        out
    }

    fn number(&mut self, number: &Number) {
        if let Some(unsigned) = number.as_u64() {
            self.out.extend_from_slice(unsigned.to_string().as_bytes());
        } else if let Some(signed) = number.as_i64() {
            self.out.extend_from_slice(signed.to_string().as_bytes());
        } else {
            if self.error.is_none() {
                self.error = Some(Error::NonInteger { path: self.pointer() });
            }
            self.out.extend_from_slice(number.to_string().as_bytes());
        }
    }

    fn string(&mut self, text: &str) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.out.push(b'"');
        // Every character that needs an escape is ASCII, and no byte of a multi-byte UTF-8
        // sequence is below 0x80, so the text is copied in runs between the bytes to escape.
        let bytes = text.as_bytes();
        let mut run = 0;
        for (at, &byte) in bytes.iter().enumerate() {
            let short: &[u8] = match byte {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                0x08 => b"\\b",
                0x0c => b"\\f",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0..=0x1f => b"",
                _ => continue,
            };
            self.out.extend_from_slice(&bytes[run..at]);
            if short.is_empty() {
                // The other characters below U+0020: `\u00` and two lowercase hex digits.
                self.out.extend_from_slice(b"\\u00");
                self.out.push(HEX[usize::from(byte >> 4)]);
                self.out.push(HEX[usize::from(byte & 0xf)]);
            } else {
                self.out.extend_from_slice(short);
            }
            run = at + 1;
        }
        self.out.extend_from_slice(&bytes[run..]);
        self.out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canonical_text(value: &Value) -> String {
        String::from_utf8(to_canonical_bytes(value).unwrap()).unwrap()
    }

    #[test]
    fn keys_sorted_by_code_point_including_non_ascii() {
        // U+FF61 sorts before U+1F600 by code point (and UTF-8), although UTF-16 would put the
        // emoji's surrogate 0xD83D first.
        let value = json!({"😀": 1, "｡": 2, "é": 3, "b": 4, "a": 5, "ab": 6, "B": 7, "": 8});
        assert_eq!(canonical_text(&value), r#"{"":8,"B":7,"a":5,"ab":6,"b":4,"é":3,"｡":2,"😀":1}"#);
    }

    #[test]
    fn object_sorts_members_given_in_any_order() {
        let one = json!(1);
        let two = json!(2);
        let mut members = [("z", &one), ("a", &two)];
        let mut writer = Writer::new();
        writer.object(&mut members);
        assert_eq!(writer.finish().unwrap(), br#"{"a":2,"z":1}"#);
    }

    #[test]
    fn string_escapes_match_golden() {
        let value = json!("q\"b\\\u{8}\u{c}\n\r\t\u{0}\u{1}\u{1f}\u{7f}\u{2028}\u{2029}/é😀");
        let expected =
            "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\u{7f}\u{2028}\u{2029}/é😀\"";
        assert_eq!(canonical_text(&value), expected);
    }

    #[test]
    fn keys_are_escaped_like_strings() {
        let value = json!({"a\nb": true, "\u{1b}": false});
        assert_eq!(canonical_text(&value), r#"{"\u001b":false,"a\nb":true}"#);
    }

    #[test]
    fn nested_arrays_and_objects() {
        let value =
            json!({"z": [[], {}, [1, [2, {"y": null, "x": false}]]], "a": {"c": {"b": "s"}}});
        assert_eq!(
            canonical_text(&value),
            r#"{"a":{"c":{"b":"s"}},"z":[[],{},[1,[2,{"x":false,"y":null}]]]}"#
        );
    }

    #[test]
    fn integer_extremes_and_scalars() {
        let value = json!([u64::MAX, i64::MIN, 0, -1, true, false, null]);
        assert_eq!(
            canonical_text(&value),
            "[18446744073709551615,-9223372036854775808,0,-1,true,false,null]"
        );
    }

    #[test]
    fn float_rejected_with_its_path() {
        let value = json!({"payload": {"name": "x", "build_ms": 1.5}});
        match to_canonical_bytes(&value) {
            Err(Error::NonInteger { path }) => assert_eq!(path, "/payload/build_ms"),
            other => panic!("expected NonInteger, got {other:?}"),
        }
    }

    #[test]
    fn float_path_through_arrays_and_escaped_keys() {
        let value = json!({"a/b": [0, 1, {"~": 2.0}]});
        match to_canonical_bytes(&value) {
            Err(Error::NonInteger { path }) => assert_eq!(path, "/a~1b/2/~0"),
            other => panic!("expected NonInteger, got {other:?}"),
        }
        match to_canonical_bytes(&json!(0.5)) {
            Err(Error::NonInteger { path }) => assert_eq!(path, ""),
            other => panic!("expected NonInteger, got {other:?}"),
        }
    }

    #[test]
    fn unchecked_output_keeps_floats_as_written_by_serde_json() {
        let mut writer = Writer::new();
        let value = json!({"x": 1.5, "y": 2.0});
        writer.value(&value);
        assert_eq!(writer.finish_unchecked(), br#"{"x":1.5,"y":2.0}"#);
    }

    #[test]
    fn canonical_bytes_of_sorts_struct_fields() {
        #[derive(Serialize)]
        struct Entry {
            zeta: u32,
            alpha: &'static str,
        }
        let bytes = canonical_bytes_of(&Entry { zeta: 7, alpha: "a" }).unwrap();
        assert_eq!(bytes, br#"{"alpha":"a","zeta":7}"#);
    }

    #[test]
    fn canonical_bytes_of_rejects_float_field_and_non_string_keys() {
        #[derive(Serialize)]
        struct Timing {
            build_ms: f64,
        }
        assert!(matches!(
            canonical_bytes_of(&Timing { build_ms: 2.5 }),
            Err(Error::NonInteger { path }) if path == "/build_ms"
        ));
        let map: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
        assert!(matches!(canonical_bytes_of(&map), Err(Error::Serialize { .. })));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Encoding is idempotent through the strict parser, and the parser gives back the
        /// value that was encoded.
        #[test]
        fn canonical_encoding_is_idempotent(value in crate::record::testutil::json_value()) {
            let bytes = to_canonical_bytes(&value).unwrap();
            let reparsed = crate::record::parse_strict(&bytes).unwrap();
            proptest::prop_assert_eq!(&reparsed, &value);
            proptest::prop_assert_eq!(to_canonical_bytes(&reparsed).unwrap(), bytes);
        }
    }
}
