//! Reading stored records: strict parse, envelope shape, schema, features, digest and
//! canonical form, in that order (the order is listed in the [module docs](super)).
//!
//! [`load`] returns only envelopes that passed every check. The single-byte-flip tests at
//! the bottom are the reason for the digest rule (the header is bound) and for the final
//! canonical-bytes check (an edit that keeps the value, such as `\u001b` → `\u001B`, changes
//! no digest input).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::envelope::schema_label;
use super::{Envelope, Error, Result, Schema, parse_strict};
use crate::digest::Sha256Digest;

/// Prefix of features a reader may ignore when it does not know them.
pub(super) const OPTIONAL_FEATURE_PREFIX: &str = "optional:";

/// The six envelope keys, in canonical (sorted) order.
const FIELDS: [&str; 6] = [
    "content_digest",
    "feature_set",
    "payload",
    "producer_version",
    "schema_name",
    "schema_version",
];

/// Reads a stored record of schema `expected` and verifies it.
///
/// Checks, in order, each with its own error: strict parsing ([`Error::Utf8`],
/// [`Error::Syntax`], [`Error::DuplicateKey`], [`Error::NonInteger`]); a top-level object
/// ([`Error::NotObject`]); exactly the six envelope keys with the right types, a
/// `sha256:<hex>` digest, a sorted duplicate-free `feature_set` and an object payload
/// ([`Error::Shape`]); schema name and version equal to `expected`
/// ([`Error::UnknownSchema`]); every feature not starting with `optional:` listed in
/// `expected.features` ([`Error::UnknownRequiredFeature`]); the digest
/// ([`Error::DigestMismatch`]); and that `bytes` is exactly the canonical encoding
/// ([`Error::NonCanonical`]).
///
/// # Errors
/// The first failed check, as listed above.
///
/// ```
/// use strata::record::{Envelope, Schema, load};
/// const NOTE: Schema = Schema { name: "example.note", version: 1, features: &[] };
/// let sealed = Envelope::seal(&NOTE, vec![], &serde_json::json!({"text": "hi"})).unwrap();
/// let bytes = sealed.to_bytes();
/// assert_eq!(load(&bytes, &NOTE).unwrap(), sealed);
/// ```
pub fn load(bytes: &[u8], expected: &Schema) -> Result<Envelope> {
    let envelope = decode(bytes)?;
    check_schema(&envelope, expected.name, expected.version)?;
    check_features(&envelope, expected.features)?;
    check_integrity(&envelope, bytes)?;
    Ok(envelope)
}

/// [`load`], then [`Envelope::payload_as`].
///
/// # Errors
/// As [`load`], and [`Error::Payload`] if the payload does not fit `T`.
pub fn load_as<T: DeserializeOwned>(bytes: &[u8], expected: &Schema) -> Result<(Envelope, T)> {
    let envelope = load(bytes, expected)?;
    let payload = envelope.payload_as()?;
    Ok((envelope, payload))
}

/// Strict parse, top-level object and envelope shape (steps 1–3 of [`load`]).
pub(super) fn decode(bytes: &[u8]) -> Result<Envelope> {
    let value = parse_strict(bytes)?;
    let Value::Object(mut map) = value else {
        return Err(Error::NotObject { found: kind(&value) });
    };
    if let Some(unknown) = map.keys().find(|key| !FIELDS.contains(&key.as_str())) {
        return Err(Error::Shape {
            field: unknown.clone(),
            expected: "no such field; an envelope has exactly content_digest, feature_set, \
                       payload, producer_version, schema_name and schema_version",
        });
    }
    let content_digest = match take(&mut map, "content_digest")? {
        Value::String(text) => Sha256Digest::parse_prefixed(&text).ok(),
        _ => None,
    }
    .ok_or_else(|| shape("content_digest", "\"sha256:\" followed by 64 lowercase hex digits"))?;
    let feature_set = match take(&mut map, "feature_set")? {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(feature) => Some(feature),
                _ => None,
            })
            .collect::<Option<Vec<String>>>()
            .filter(|features| features.windows(2).all(|pair| matches!(pair, [a, b] if a < b))),
        _ => None,
    }
    .ok_or_else(|| {
        shape("feature_set", "an array of strings sorted by code point without duplicates")
    })?;
    let payload = take(&mut map, "payload")?;
    if !payload.is_object() {
        return Err(shape("payload", "a JSON object"));
    }
    let producer_version = match take(&mut map, "producer_version")? {
        Value::String(text) => text,
        _ => return Err(shape("producer_version", "a string")),
    };
    let schema_name = match take(&mut map, "schema_name")? {
        Value::String(text) => text,
        _ => return Err(shape("schema_name", "a string")),
    };
    let schema_version = take(&mut map, "schema_version")?
        .as_u64()
        .and_then(|version| u32::try_from(version).ok())
        .ok_or_else(|| shape("schema_version", "an integer in 0..=4294967295"))?;
    Ok(Envelope {
        schema_name,
        schema_version,
        producer_version,
        feature_set,
        content_digest,
        payload,
    })
}

fn shape(field: &str, expected: &'static str) -> Error {
    Error::Shape { field: field.to_owned(), expected }
}

fn take(map: &mut Map<String, Value>, field: &str) -> Result<Value> {
    map.remove(field).ok_or_else(|| shape(field, "the field to be present; it is missing"))
}

/// Step 4 of [`load`]: schema name and version.
pub(super) fn check_schema(envelope: &Envelope, name: &str, version: u32) -> Result<()> {
    if envelope.schema_name == name && envelope.schema_version == version {
        return Ok(());
    }
    Err(Error::UnknownSchema {
        found_name: envelope.schema_name.clone(),
        found_version: envelope.schema_version,
        expected_name: name.to_owned(),
        expected_version: version,
    })
}

/// Step 5 of [`load`]: every required feature is in `known`.
pub(super) fn check_features(envelope: &Envelope, known: &[&str]) -> Result<()> {
    let unknown = envelope.feature_set.iter().find(|feature| {
        !feature.starts_with(OPTIONAL_FEATURE_PREFIX) && !known.contains(&feature.as_str())
    });
    match unknown {
        None => Ok(()),
        Some(feature) => Err(Error::UnknownRequiredFeature {
            feature: feature.clone(),
            schema: schema_label(&envelope.schema_name, envelope.schema_version),
        }),
    }
}

/// Steps 6 and 7 of [`load`]: the digest, then the canonical form of `bytes`.
pub(super) fn check_integrity(envelope: &Envelope, bytes: &[u8]) -> Result<()> {
    let (canonical, computed) = envelope.canonical_and_digest()?;
    if computed != envelope.content_digest {
        return Err(Error::DigestMismatch { recorded: envelope.content_digest, computed });
    }
    if canonical != bytes {
        let offset = canonical
            .iter()
            .zip(bytes)
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| canonical.len().min(bytes.len()));
        return Err(Error::NonCanonical { offset });
    }
    Ok(())
}

/// The JSON type of `value`, as named in [`Error::NotObject`].
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::testutil::{WIDGET, edit_record, json_object, sealed_bytes, text};
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn other_schema_name_rejected() {
        let other = Schema { name: "test.gadget", ..WIDGET };
        match load(&sealed_bytes(), &other) {
            Err(error @ Error::UnknownSchema { .. }) => {
                assert!(error.is_schema_mismatch() && !error.is_corrupt());
                let Error::UnknownSchema { found_name, found_version, expected_name, .. } = error
                else {
                    unreachable!()
                };
                assert_eq!((found_name.as_str(), found_version), ("test.widget", 1));
                assert_eq!(expected_name, "test.gadget");
            }
            other => panic!("expected UnknownSchema, got {other:?}"),
        }
    }

    #[test]
    fn other_schema_version_rejected() {
        let v2 = Schema { version: 2, ..WIDGET };
        assert!(matches!(
            load(&sealed_bytes(), &v2),
            Err(Error::UnknownSchema { found_version: 1, expected_version: 2, .. })
        ));
    }

    #[test]
    fn unknown_required_feature_rejected() {
        let older = Schema { features: &[], ..WIDGET };
        match load(&sealed_bytes(), &older) {
            Err(error @ Error::UnknownRequiredFeature { .. }) => {
                assert!(error.is_schema_mismatch() && !error.is_corrupt());
                assert!(error.to_string().contains("\"fast-path\""), "{error}");
            }
            other => panic!("expected UnknownRequiredFeature, got {other:?}"),
        }
    }

    #[test]
    fn unknown_optional_feature_accepted() {
        // sealed_bytes() carries "optional:x", which WIDGET does not list.
        let loaded = load(&sealed_bytes(), &WIDGET).unwrap();
        assert!(loaded.feature_set.contains(&"optional:x".to_owned()));
    }

    #[test]
    fn digest_mismatch_detected() {
        let edited = edit_record(&sealed_bytes(), |map| {
            map.insert("payload".into(), json!({"name": "gear", "size_bytes": 13, "tags": []}));
        });
        match load(&edited, &WIDGET) {
            Err(error @ Error::DigestMismatch { .. }) => assert!(error.is_corrupt()),
            other => panic!("expected DigestMismatch, got {other:?}"),
        }
        // The header is bound too.
        let edited = edit_record(&sealed_bytes(), |map| {
            map.insert("producer_version".into(), json!("strata 9.9.9"));
        });
        assert!(matches!(load(&edited, &WIDGET), Err(Error::DigestMismatch { .. })));
    }

    #[test]
    fn non_canonical_bytes_rejected() {
        let bytes = sealed_bytes();
        let spaced = text(&bytes).replacen("\"schema_version\":1", "\"schema_version\": 1", 1);
        assert!(matches!(
            load(spaced.as_bytes(), &WIDGET),
            Err(Error::NonCanonical { offset }) if offset == spaced.find(" 1").unwrap()
        ));
        let mut newline = bytes.clone();
        newline.push(b'\n');
        assert!(matches!(
            load(&newline, &WIDGET),
            Err(Error::NonCanonical { offset }) if offset == bytes.len()
        ));
        // Same value, other spelling: an escaped character.
        let escaped = text(&bytes).replacen("\"a\"", "\"\\u0061\"", 1);
        assert!(matches!(load(escaped.as_bytes(), &WIDGET), Err(Error::NonCanonical { .. })));
        // Same value, other key order.
        let value = parse_strict(&bytes).unwrap();
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        assert!(matches!(load(&pretty, &WIDGET), Err(Error::NonCanonical { offset: 1 })));
    }

    #[test]
    fn missing_field_rejected() {
        for field in FIELDS {
            let edited = edit_record(&sealed_bytes(), |map| {
                map.remove(field);
            });
            match load(&edited, &WIDGET) {
                Err(Error::Shape { field: found, expected }) => {
                    assert_eq!(found, field);
                    assert!(expected.contains("missing"), "{expected}");
                }
                other => panic!("expected Shape for missing {field}, got {other:?}"),
            }
        }
    }

    #[test]
    fn extra_field_rejected() {
        let edited = edit_record(&sealed_bytes(), |map| {
            map.insert("parents".into(), json!([]));
        });
        assert!(matches!(
            load(&edited, &WIDGET),
            Err(Error::Shape { field, .. }) if field == "parents"
        ));
    }

    #[test]
    fn payload_not_an_object_rejected() {
        for payload in [json!([1]), json!("x"), json!(null), json!(3)] {
            let edited = edit_record(&sealed_bytes(), |map| {
                map.insert("payload".into(), payload.clone());
            });
            match load(&edited, &WIDGET) {
                Err(error @ Error::Shape { .. }) => {
                    assert!(error.is_corrupt());
                    assert!(matches!(error, Error::Shape { field, .. } if field == "payload"));
                }
                other => panic!("expected Shape for payload {payload}, got {other:?}"),
            }
        }
    }

    #[test]
    fn wrongly_typed_header_fields_rejected() {
        let cases = [
            ("content_digest", json!("sha256:ABC")),
            ("content_digest", json!(Sha256Digest::of_bytes(b"").to_hex())),
            ("feature_set", json!(["b", "a"])),
            ("feature_set", json!(["a", "a"])),
            ("feature_set", json!([1])),
            ("feature_set", json!("a")),
            ("producer_version", json!(1)),
            ("schema_name", json!(null)),
            ("schema_version", json!(-1)),
            ("schema_version", json!(u64::from(u32::MAX) + 1)),
            ("schema_version", json!("1")),
        ];
        for (field, value) in cases {
            let edited = edit_record(&sealed_bytes(), |map| {
                map.insert(field.into(), value.clone());
            });
            assert!(
                matches!(load(&edited, &WIDGET), Err(Error::Shape { field: found, .. }) if found == field),
                "{field} = {value}"
            );
        }
    }

    #[test]
    fn non_object_top_levels_rejected() {
        let cases: [(&[u8], &str); 5] = [
            (b"[1]", "array"),
            (b"\"record\"", "string"),
            (b"7", "number"),
            (b"null", "null"),
            (b"true", "boolean"),
        ];
        for (input, found) in cases {
            match load(input, &WIDGET) {
                Err(error @ Error::NotObject { .. }) => {
                    assert!(error.is_corrupt());
                    assert!(matches!(error, Error::NotObject { found: f } if f == found));
                }
                other => panic!("expected NotObject for {input:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn parse_errors_surface_from_load() {
        let bytes = sealed_bytes();
        let duplicated = text(&bytes).replacen(
            "{\"content_digest\"",
            "{\"schema_version\":1,\"content_digest\"",
            1,
        );
        assert!(matches!(load(duplicated.as_bytes(), &WIDGET), Err(Error::DuplicateKey { .. })));
        let float = text(&bytes).replacen("\"size_bytes\":12", "\"size_bytes\":12.0", 1);
        assert!(matches!(
            load(float.as_bytes(), &WIDGET),
            Err(Error::NonInteger { path }) if path == "/payload/size_bytes"
        ));
        assert!(matches!(load(&bytes[..bytes.len() - 1], &WIDGET), Err(Error::Syntax { .. })));
        assert!(matches!(load(b"{\"a\":\"\xfe\"}", &WIDGET), Err(Error::Utf8 { .. })));
    }

    /// Every single-byte change of a stored record, at every position and with every XOR mask,
    /// is rejected.
    #[test]
    fn every_single_byte_flip_is_rejected() {
        let bytes = sealed_bytes();
        for position in 0..bytes.len() {
            for mask in 1..=255u8 {
                let mut flipped = bytes.clone();
                flipped[position] ^= mask;
                assert!(
                    load(&flipped, &WIDGET).is_err(),
                    "flip at {position} with {mask:#04x} loaded: {}",
                    String::from_utf8_lossy(&flipped)
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn seal_load_round_trips(payload in json_object(), optional in "[a-z]{0,3}") {
            let features = vec!["fast-path".to_owned(), format!("optional:{optional}")];
            let sealed = Envelope::seal(&WIDGET, features, &payload).unwrap();
            let bytes = sealed.to_bytes();
            prop_assert_eq!(crate::record::to_canonical_bytes(&parse_strict(&bytes).unwrap()).unwrap(), bytes.clone());
            let loaded = load(&bytes, &WIDGET).unwrap();
            prop_assert_eq!(&loaded.payload, &payload);
            prop_assert_eq!(loaded, sealed);
        }

        #[test]
        fn any_single_byte_flip_is_rejected(
            payload in json_object(),
            position in any::<prop::sample::Index>(),
            mask in 1..=255u8,
        ) {
            let bytes = Envelope::seal(&WIDGET, vec![], &payload).unwrap().to_bytes();
            let mut flipped = bytes.clone();
            let at = position.index(flipped.len());
            flipped[at] ^= mask;
            let result = load(&flipped, &WIDGET);
            prop_assert!(result.is_err(), "flip at {} with {:#04x} loaded", at, mask);
        }
    }

    /// The one-line example in `docs/records.md` is a valid record.
    #[test]
    fn docs_example_verifies() {
        const ACTION_ENTRY: Schema =
            Schema { name: "strata.action_entry", version: 1, features: &[] };
        let doc = include_str!("../../docs/records.md");
        let example =
            doc.split("```json\n").nth(1).and_then(|rest| rest.split('\n').next()).unwrap();
        let envelope = load(example.as_bytes(), &ACTION_ENTRY).unwrap();
        assert_eq!(envelope.feature_set, ["optional:build-timing"]);
        assert_eq!(envelope.payload["note"], "línea 1\nlínea 2");
    }
}
