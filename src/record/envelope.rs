//! The record envelope: six keys around a payload, sealed with a digest (the stored form and digest
//! rule are in the [module docs](super)). Reading and verifying stored records is in `verify.rs`.
//!
//! Invariants of an [`Envelope`] returned by [`Envelope::seal`] or [`super::load`]:
//! * `feature_set` is sorted by code point and has no duplicates;
//! * `payload` is a JSON object holding integers only (no floats);
//! * `content_digest` is the SHA-256 of the canonical bytes of the envelope without its
//!   `content_digest` key;
//! * [`Envelope::to_bytes`] gives the one canonical stored form, and [`super::load`] of those
//!   bytes gives the envelope back.
//!
//! The fields are public for reading. Changing them breaks the digest: such an envelope still
//! encodes, but [`super::load`] rejects the bytes. Build new records with [`Envelope::seal`].

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::canonical::{Writer, Written};
use super::verify::check_features;
use super::{Error, Result};
use crate::digest::Sha256Digest;

/// A record schema as this build knows it: what [`Envelope::seal`] writes and what
/// [`super::load`] accepts.
///
/// ```
/// use strata::record::Schema;
/// const ACTION_ENTRY: Schema =
///     Schema { name: "strata.action_entry", version: 1, features: &["zstd-outputs"] };
/// # let _ = ACTION_ENTRY;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schema {
    /// Dotted schema name, for example `strata.action_entry`.
    pub name: &'static str,
    /// Schema version (an integer, bumped when the payload changes incompatibly).
    pub version: u32,
    /// Required features this build understands for this schema version. Features named
    /// `optional:<name>` need not be listed: readers ignore the ones they do not know.
    pub features: &'static [&'static str],
}

/// A record: header fields plus a JSON object payload, sealed by `content_digest`.
///
/// See the [module docs](super) for the stored form and the digest rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The schema name (`schema_name` key).
    pub schema_name: String,
    /// The schema version (`schema_version` key), `0..=u32::MAX`.
    pub schema_version: u32,
    /// Who wrote the record (`producer_version` key), `strata <version>` for this crate.
    pub producer_version: String,
    /// Features the record uses (`feature_set` key), sorted by code point, no duplicates.
    pub feature_set: Vec<String>,
    /// SHA-256 of the canonical bytes of the envelope without this field (`content_digest`
    /// key, stored as `sha256:<64 lowercase hex>`).
    pub content_digest: Sha256Digest,
    /// The record's content (`payload` key), a JSON object with integer numbers only.
    pub payload: Value,
}

impl Envelope {
    /// Seals `payload` as a record of `schema`, written by this build ([`crate::PRODUCER`]).
    ///
    /// `feature_set` is sorted and deduplicated.
    ///
    /// # Errors
    /// * [`Error::Serialize`] if `payload` cannot be serialised;
    /// * [`Error::Shape`] (field `payload`) if it does not serialise to a JSON object;
    /// * [`Error::NonInteger`] for a float in it (path `/payload/...`);
    /// * [`Error::UnknownRequiredFeature`] for a feature that is neither `optional:` nor in
    ///   `schema.features` (this build could not load the record it wrote).
    pub fn seal<T: Serialize + ?Sized>(
        schema: &Schema,
        feature_set: Vec<String>,
        payload: &T,
    ) -> Result<Envelope> {
        let payload =
            serde_json::to_value(payload).map_err(|source| Error::Serialize { source })?;
        let envelope = seal_value(schema.name, schema.version, feature_set, payload)?;
        check_features(&envelope, schema.features)?;
        Ok(envelope)
    }

    /// [`Envelope::seal`] and [`Envelope::to_bytes`] in one canonical encoding: the stored
    /// form of `payload` sealed as a record of `schema` (canonical JSON bytes, no trailing
    /// newline). `content_digest` sorts first, so the envelope is encoded once with a
    /// placeholder digest, hashed without that first member, and the digest's 64 hex
    /// digits written over the placeholder's (a launcher's MISS stores a manifest of
    /// hundreds of inputs; encoding it once saves a tenth of a millisecond there).
    ///
    /// # Errors
    /// As [`Envelope::seal`].
    pub fn seal_to_bytes<T: Serialize + ?Sized>(
        schema: &Schema,
        feature_set: Vec<String>,
        payload: &T,
    ) -> Result<Vec<u8>> {
        let payload =
            serde_json::to_value(payload).map_err(|source| Error::Serialize { source })?;
        let envelope = unsealed(schema.name, schema.version, feature_set, payload)?;
        // In `seal`'s order: a float is reported before an unknown feature.
        let mut bytes = envelope.encode(IncludeDigest::Yes).finish()?;
        check_features(&envelope, schema.features)?;
        let head = format!("{{\"content_digest\":\"{}\",", envelope.content_digest.to_prefixed());
        if !bytes.starts_with(head.as_bytes()) {
            // Not reached: the key sorts first. Kept as the plain two-encoding path.
            let mut envelope = envelope;
            envelope.content_digest = envelope.compute_digest()?;
            return Ok(envelope.to_bytes());
        }
        let mut h = crate::digest::Hasher::new();
        h.update(b"{");
        h.update(&bytes[head.len()..]);
        let digest = h.finish().to_prefixed();
        // The placeholder's and the digest's prefixed forms have the same length.
        let at = "{\"content_digest\":\"".len();
        bytes[at..at + digest.len()].copy_from_slice(digest.as_bytes());
        Ok(bytes)
    }

    /// The stored form: canonical JSON bytes of the whole envelope, no trailing newline.
    ///
    /// For an envelope from [`Envelope::seal`] or [`super::load`], loading these bytes returns
    /// an equal envelope. If the public fields were changed by hand, the bytes are still
    /// written but will not load (a stale digest gives [`Error::DigestMismatch`]; a float in the
    /// payload is written as `serde_json` prints it and gives [`Error::NonInteger`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode(IncludeDigest::Yes).finish_unchecked()
    }

    /// Deserialises the payload into `T`.
    ///
    /// # Errors
    /// [`Error::Payload`] naming the schema if the payload does not fit `T`.
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T> {
        T::deserialize(&self.payload).map_err(|source| Error::Payload {
            schema: schema_label(&self.schema_name, self.schema_version),
            source,
        })
    }

    /// The digest this envelope's fields call for: SHA-256 of the canonical bytes of the
    /// envelope object without its `content_digest` key.
    ///
    /// # Errors
    /// [`Error::NonInteger`] if the payload holds a float (only possible after changing the
    /// public fields by hand).
    pub fn compute_digest(&self) -> Result<Sha256Digest> {
        let bytes = self.encode(IncludeDigest::No).finish()?;
        Ok(Sha256Digest::of_bytes(&bytes))
    }

    /// The stored form ([`Envelope::to_bytes`]) and the SHA-256 its fields call for
    /// ([`Envelope::compute_digest`]), from one canonical encoding: `content_digest` sorts
    /// before every other key, so the digest input is the stored form without its first
    /// member.
    ///
    /// # Errors
    /// As [`Envelope::compute_digest`].
    pub(super) fn canonical_and_digest(&self) -> Result<(Vec<u8>, Sha256Digest)> {
        let bytes = self.encode(IncludeDigest::Yes).finish()?;
        let head = format!("{{\"content_digest\":\"{}\",", self.content_digest.to_prefixed());
        let digest = match bytes.strip_prefix(head.as_bytes()) {
            Some(rest) => {
                let mut h = crate::digest::Hasher::new();
                h.update(b"{");
                h.update(rest);
                h.finish()
            }
            None => self.compute_digest()?,
        };
        Ok((bytes, digest))
    }

    fn encode(&self, include_digest: IncludeDigest) -> Written {
        let content_digest = Value::String(self.content_digest.to_prefixed());
        let feature_set =
            Value::Array(self.feature_set.iter().cloned().map(Value::String).collect());
        let producer_version = Value::String(self.producer_version.clone());
        let schema_name = Value::String(self.schema_name.clone());
        let schema_version = Value::from(self.schema_version);
        let mut members = vec![
            ("feature_set", &feature_set),
            ("payload", &self.payload),
            ("producer_version", &producer_version),
            ("schema_name", &schema_name),
            ("schema_version", &schema_version),
        ];
        if include_digest == IncludeDigest::Yes {
            members.push(("content_digest", &content_digest));
        }
        let mut writer = Writer::new();
        writer.object(&mut members);
        writer.written()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IncludeDigest {
    Yes,
    No,
}

/// Seals a payload value without checking features against a schema.
pub(super) fn seal_value(
    schema_name: &str,
    schema_version: u32,
    feature_set: Vec<String>,
    payload: Value,
) -> Result<Envelope> {
    let mut envelope = unsealed(schema_name, schema_version, feature_set, payload)?;
    envelope.content_digest = envelope.compute_digest()?;
    Ok(envelope)
}

/// The envelope of `payload` with `feature_set` sorted and deduplicated and an all-zero
/// `content_digest` (to be computed by the caller).
///
/// # Errors
/// [`Error::Shape`] (field `payload`) if `payload` is not a JSON object.
fn unsealed(
    schema_name: &str,
    schema_version: u32,
    mut feature_set: Vec<String>,
    payload: Value,
) -> Result<Envelope> {
    if !payload.is_object() {
        return Err(Error::Shape { field: "payload".to_owned(), expected: "a JSON object" });
    }
    feature_set.sort_unstable();
    feature_set.dedup();
    Ok(Envelope {
        schema_name: schema_name.to_owned(),
        schema_version,
        producer_version: crate::PRODUCER.to_owned(),
        feature_set,
        content_digest: Sha256Digest::from_bytes([0; crate::digest::SHA256_LEN]),
        payload,
    })
}

/// `<schema_name> v<schema_version>`, as used in error messages.
pub(super) fn schema_label(name: &str, version: u32) -> String {
    format!("{name} v{version}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::testutil::{WIDGET, Widget, sealed_bytes, text, widget};
    use crate::record::{load, load_as};
    use serde::Deserialize;
    use serde_json::json;

    /// The one-encoding integrity check gives the same stored form and digest as the two
    /// separate encodings, also for a hand-changed (stale) digest and arbitrary payloads.
    #[test]
    fn canonical_and_digest_equal_to_bytes_and_compute_digest() {
        let mut envelope = load(&sealed_bytes(), &WIDGET).unwrap();
        let (bytes, digest) = envelope.canonical_and_digest().unwrap();
        assert_eq!((bytes, digest), (envelope.to_bytes(), envelope.compute_digest().unwrap()));
        envelope.content_digest = Sha256Digest::of_bytes(b"stale");
        let (bytes, digest) = envelope.canonical_and_digest().unwrap();
        assert_eq!((bytes, digest), (envelope.to_bytes(), envelope.compute_digest().unwrap()));
        assert_ne!(digest, envelope.content_digest);
        proptest::proptest!(|(payload in crate::record::testutil::json_object())| {
            let sealed = Envelope::seal(&WIDGET, vec![], &payload).unwrap();
            let (bytes, digest) = sealed.canonical_and_digest().unwrap();
            proptest::prop_assert_eq!(&bytes, &sealed.to_bytes());
            proptest::prop_assert_eq!(digest, sealed.content_digest);
        });
    }

    /// One encoding with the digest written over a placeholder gives what sealing and then
    /// encoding give, for arbitrary payloads and feature sets given unsorted.
    #[test]
    fn seal_to_bytes_equals_seal_then_to_bytes() {
        let features =
            || vec!["optional:x".to_owned(), "fast-path".to_owned(), "fast-path".to_owned()];
        let w = widget();
        assert_eq!(
            Envelope::seal_to_bytes(&WIDGET, features(), &w).unwrap(),
            Envelope::seal(&WIDGET, features(), &w).unwrap().to_bytes()
        );
        proptest::proptest!(|(payload in crate::record::testutil::json_object())| {
            proptest::prop_assert_eq!(
                Envelope::seal_to_bytes(&WIDGET, vec![], &payload).unwrap(),
                Envelope::seal(&WIDGET, vec![], &payload).unwrap().to_bytes()
            );
        });
        assert!(matches!(
            Envelope::seal_to_bytes(&WIDGET, vec![], &json!([1])),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            Envelope::seal_to_bytes(&WIDGET, vec!["unknown".to_owned()], &w),
            Err(Error::UnknownRequiredFeature { .. })
        ));
        let float = json!({"x": 1.5});
        let unknown = || vec!["unknown".to_owned()];
        assert_eq!(
            Envelope::seal_to_bytes(&WIDGET, unknown(), &float).unwrap_err().to_string(),
            Envelope::seal(&WIDGET, unknown(), &float).unwrap_err().to_string()
        );
    }

    #[test]
    fn stored_form_and_digest_rule_match_golden() {
        let bytes = sealed_bytes();
        let header_and_payload = format!(
            r#"{{"feature_set":["fast-path","optional:x"],"payload":{{"name":"gear\n\"é\"\u001b","size_bytes":12,"tags":["a","😀"]}},"producer_version":"{}","schema_name":"test.widget","schema_version":1}}"#,
            crate::PRODUCER
        );
        let digest = Sha256Digest::of_bytes(header_and_payload.as_bytes());
        let expected = format!(
            r#"{{"content_digest":"{}",{}"#,
            digest.to_prefixed(),
            header_and_payload.strip_prefix('{').unwrap()
        );
        assert_eq!(text(&bytes), expected);
        assert!(!bytes.ends_with(b"\n"));
        assert_eq!(crate::PRODUCER, concat!("strata ", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn round_trip() {
        let sealed = Envelope::seal(&WIDGET, vec!["fast-path".into()], &widget()).unwrap();
        assert_eq!(sealed.producer_version, crate::PRODUCER);
        assert_eq!(sealed.compute_digest().unwrap(), sealed.content_digest);
        let loaded = load(&sealed.to_bytes(), &WIDGET).unwrap();
        assert_eq!(loaded, sealed);
        let (envelope, payload) = load_as::<Widget>(&sealed.to_bytes(), &WIDGET).unwrap();
        assert_eq!(envelope, sealed);
        assert_eq!(payload, widget());
    }

    #[test]
    fn seal_sorts_and_deduplicates_features() {
        let features = vec!["optional:z".into(), "fast-path".into(), "optional:z".into()];
        let sealed = Envelope::seal(&WIDGET, features, &widget()).unwrap();
        assert_eq!(sealed.feature_set, ["fast-path", "optional:z"]);
    }

    #[test]
    fn seal_rejects_bad_payloads_and_unknown_required_features() {
        assert!(matches!(
            Envelope::seal(&WIDGET, vec![], &json!([1])),
            Err(Error::Shape { field, .. }) if field == "payload"
        ));
        assert!(matches!(
            Envelope::seal(&WIDGET, vec![], &json!({"build_ms": 1.5})),
            Err(Error::NonInteger { path }) if path == "/payload/build_ms"
        ));
        assert!(matches!(
            Envelope::seal(&WIDGET, vec!["warp-drive".into()], &widget()),
            Err(Error::UnknownRequiredFeature { feature, schema })
                if feature == "warp-drive" && schema == "test.widget v1"
        ));
        assert!(Envelope::seal(&WIDGET, vec!["optional:warp-drive".into()], &widget()).is_ok());
    }

    #[test]
    fn payload_type_mismatch_is_a_payload_error() {
        #[derive(Debug, Deserialize)]
        struct Other {
            #[allow(dead_code)]
            missing: u64,
        }
        match load_as::<Other>(&sealed_bytes(), &WIDGET) {
            Err(error @ Error::Payload { .. }) => {
                assert!(error.is_corrupt());
                assert!(error.to_string().contains("test.widget v1"), "{error}");
            }
            other => panic!("expected Payload, got {other:?}"),
        }
    }

    #[test]
    fn hand_edited_envelope_does_not_load() {
        let mut envelope = load(&sealed_bytes(), &WIDGET).unwrap();
        envelope.payload = json!({"ratio": 0.5});
        assert!(matches!(envelope.compute_digest(), Err(Error::NonInteger { .. })));
        assert!(matches!(load(&envelope.to_bytes(), &WIDGET), Err(Error::NonInteger { .. })));
        envelope.payload = json!({"ratio": 1});
        assert!(matches!(load(&envelope.to_bytes(), &WIDGET), Err(Error::DigestMismatch { .. })));
    }
}
