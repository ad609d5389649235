//! Schema migrations: a registry of version steps and the verified, migrated load
//! (`docs/records.md`, "Migrations").
//!
//! Rules the registry enforces at [`MigrationRegistry::register`]:
//! * a step goes from a version to a strictly higher one (`to > from`). Versions only grow
//!   along any chain of steps, so the step graph is acyclic by construction;
//! * at most one step starts at each `(schema_name, from)`. With one way out of every version,
//!   the path between two versions is unique, and a migrated load is deterministic;
//! * migration ids are unique across the registry (they are recorded in the result).
//!
//! [`MigrationRegistry::load_migrated`] never returns a record it has not verified: the
//! source record is verified like [`super::load`] (at its own version), every intermediate
//! record is re-sealed, encoded, parsed back strictly and verified, and the final record is
//! checked against the target schema's features.
//!
//! The production registry ([`MigrationRegistry::production`]) holds the steps of
//! [`super::steps`]; tests also use synthetic schemas.
//!
//! # Limitations
//! * Migrations transform the payload only. The source record's feature set is carried to
//!   every later version unchanged, so a required feature the target schema no longer lists
//!   makes the migrated load fail ([`Error::UnknownRequiredFeature`]).
//! * Migrations do not cross schema names.

use std::collections::BTreeMap;

use serde_json::Value;

use super::envelope::seal_value;
use super::verify::{check_features, check_integrity, check_schema, decode, kind};
use super::{Envelope, Error, Result, Schema};
use crate::digest::Sha256Digest;

/// One migration step: turns the payload of a `schema_name` record at version `from` into the
/// payload at version `to`.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Unique id, recorded in [`Migrated::migration_ids`] (for example `entry-1-to-2`).
    pub id: &'static str,
    /// The schema this step applies to.
    pub schema_name: &'static str,
    /// The version the step reads.
    pub from: u32,
    /// The version the step writes; must be greater than `from`.
    pub to: u32,
    /// The payload transformation. It receives the payload object of version `from` and must
    /// return a payload object for version `to` (integers only), or a message saying why it
    /// cannot.
    pub transform: fn(Value) -> Result<Value, String>,
}

/// What a migrated load returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The verified record at the target version. After a migration it is re-sealed by this
    /// build (`producer_version` is [`crate::PRODUCER`]).
    pub envelope: Envelope,
    /// Ids of the steps applied, in order; empty if the record was already at the target.
    pub migration_ids: Vec<String>,
    /// The verified `content_digest` of the record as read (before any step), for lineage.
    pub source_digest: Sha256Digest,
}

/// Loads a stored record of `target`'s schema at its version or any older version the
/// production registry can migrate from ([`MigrationRegistry::production`]), then decodes
/// the payload as `T`. Readers of records that had earlier versions use this instead of
/// [`super::load_as`].
///
/// # Errors
/// As [`MigrationRegistry::load_migrated`], and [`Error::Payload`] if the payload does not
/// fit `T`.
pub fn load_current_as<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    target: &Schema,
) -> Result<(Migrated, T)> {
    let migrated = MigrationRegistry::production().load_migrated(bytes, target, &[])?;
    let payload = migrated.envelope.payload_as()?;
    Ok((migrated, payload))
}

/// Why registering a migration, finding a path or applying a step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrationError {
    /// A step that does not go to a higher version.
    #[error(
        "migration {id} goes from v{from} to v{to}; a step must go to a higher version (this keeps the registry acyclic)"
    )]
    NotForward {
        /// The step's id.
        id: String,
        /// Its `from` version.
        from: u32,
        /// Its `to` version.
        to: u32,
    },
    /// A second step with an id already registered.
    #[error("migration id {id} is registered twice; ids must be unique")]
    DuplicateId {
        /// The repeated id.
        id: String,
    },
    /// A second step from the same `(schema_name, from)`.
    #[error(
        "migrations {existing_id} and {new_id} both start at {schema_name} v{from}; only one step may leave a version, so that every path is unique"
    )]
    Ambiguous {
        /// The schema.
        schema_name: String,
        /// The shared starting version.
        from: u32,
        /// The step already registered.
        existing_id: String,
        /// The step refused.
        new_id: String,
    },
    /// No chain of steps leads from one version to the other.
    #[error(
        "no migration path from {schema_name} v{from} to v{to}; the record was written by a strata version this build cannot read"
    )]
    NoPath {
        /// The schema.
        schema_name: String,
        /// The record's version.
        from: u32,
        /// The version wanted.
        to: u32,
    },
    /// A step's transformation refused the payload.
    #[error("migration {id} failed: {message}")]
    Transform {
        /// The step's id.
        id: String,
        /// The transformation's message.
        message: String,
    },
    /// A step's transformation returned something other than a JSON object.
    #[error("migration {id} returned a JSON {found}; payloads must be objects")]
    NotObject {
        /// The step's id.
        id: String,
        /// `"array"`, `"string"`, `"number"`, `"boolean"` or `"null"`.
        found: &'static str,
    },
    /// The record a step produced does not seal or verify (for example a float in it).
    #[error("migration {id} produced a record that does not verify")]
    Invalid {
        /// The step's id.
        id: String,
        /// Why the record is invalid.
        #[source]
        source: Box<Error>,
    },
}

/// The registered migration steps, keyed by `(schema_name, from)`.
///
/// A new registry is empty; [`MigrationRegistry::production`] holds the production steps.
#[derive(Debug, Clone, Default)]
pub struct MigrationRegistry {
    steps: BTreeMap<&'static str, BTreeMap<u32, Migration>>,
}

impl MigrationRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The registry this build uses for stored records: the steps of [`super::steps`]
    /// (version 1 records of entries, artifact manifests and snapshot manifests, whose
    /// untagged digests are SHA-256, to version 2's tagged content records).
    pub fn production() -> Self {
        let mut registry = Self::new();
        for step in super::steps::ALL {
            // The steps are constants that satisfy the rules (a test checks it), so this
            // cannot fail; if it ever did, the step would be missing and such records MISS.
            if let Err(e) = registry.register(step) {
                tracing::error!("production migration {} not registered: {e}", step.id);
            }
        }
        registry
    }

    /// Number of registered steps.
    pub fn len(&self) -> usize {
        self.steps.values().map(BTreeMap::len).sum()
    }

    /// True if no step is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a step.
    ///
    /// # Errors
    /// [`Error::Migration`] with [`MigrationError::NotForward`] unless `to > from`,
    /// [`MigrationError::DuplicateId`] for an id already registered, and
    /// [`MigrationError::Ambiguous`] for a second step from the same `(schema_name, from)`.
    pub fn register(&mut self, migration: Migration) -> Result<()> {
        if migration.to <= migration.from {
            return Err(MigrationError::NotForward {
                id: migration.id.to_owned(),
                from: migration.from,
                to: migration.to,
            }
            .into());
        }
        if self.steps.values().flat_map(BTreeMap::values).any(|step| step.id == migration.id) {
            return Err(MigrationError::DuplicateId { id: migration.id.to_owned() }.into());
        }
        let for_schema = self.steps.entry(migration.schema_name).or_default();
        if let Some(existing) = for_schema.get(&migration.from) {
            return Err(MigrationError::Ambiguous {
                schema_name: migration.schema_name.to_owned(),
                from: migration.from,
                existing_id: existing.id.to_owned(),
                new_id: migration.id.to_owned(),
            }
            .into());
        }
        for_schema.insert(migration.from, migration);
        Ok(())
    }

    /// The unique chain of steps from version `from` to version `to` of `schema_name`, in the
    /// order they apply; empty if `from == to`.
    ///
    /// # Errors
    /// [`Error::Migration`] with [`MigrationError::NoPath`] if a version on the way has no
    /// step, a step jumps past `to`, or `from > to`.
    pub fn path(&self, schema_name: &str, from: u32, to: u32) -> Result<Vec<&Migration>> {
        let no_path = || MigrationError::NoPath { schema_name: schema_name.to_owned(), from, to };
        let for_schema = self.steps.get(schema_name);
        let mut chain = Vec::new();
        let mut at = from;
        while at != to {
            // Each step raises `at`, and a step past `to` is refused: the loop ends.
            match for_schema.and_then(|steps| steps.get(&at)) {
                Some(step) if step.to <= to => {
                    chain.push(step);
                    at = step.to;
                }
                _ => return Err(no_path().into()),
            }
        }
        Ok(chain)
    }

    /// Reads a stored record and brings it to `target`'s version, verifying every record on
    /// the way.
    ///
    /// If the record is already at `target.version`, this is [`super::load`] with an empty
    /// id list. Otherwise the source record is verified at its own version, with its required
    /// features checked against `source_features`; each step of
    /// [`MigrationRegistry::path`] is applied to the payload, the result re-sealed (by this
    /// build, same feature set), encoded, parsed back and verified; and the final record's
    /// features are checked against `target.features`.
    ///
    /// Source checks, in order: strict parsing, top-level object, envelope shape
    /// (as [`super::load`]); schema name ([`Error::UnknownSchema`]); a migration path
    /// ([`MigrationError::NoPath`]); required features; digest; canonical bytes.
    ///
    /// # Errors
    /// * every error of [`super::load`] for the source record;
    /// * [`Error::Migration`]: [`MigrationError::NoPath`], or for a step (naming its id)
    ///   [`MigrationError::Transform`], [`MigrationError::NotObject`] or
    ///   [`MigrationError::Invalid`];
    /// * [`Error::UnknownRequiredFeature`] if the carried feature set has a required feature
    ///   `target.features` does not list.
    pub fn load_migrated(
        &self,
        bytes: &[u8],
        target: &Schema,
        source_features: &[&str],
    ) -> Result<Migrated> {
        let source = decode(bytes)?;
        if source.schema_name != target.name {
            // Migrations never cross schema names: this is Error::UnknownSchema.
            check_schema(&source, target.name, target.version)?;
        }
        if source.schema_version == target.version {
            check_features(&source, target.features)?;
            check_integrity(&source, bytes)?;
            return Ok(Migrated {
                source_digest: source.content_digest,
                envelope: source,
                migration_ids: Vec::new(),
            });
        }
        let steps = self.path(target.name, source.schema_version, target.version)?;
        check_features(&source, source_features)?;
        check_integrity(&source, bytes)?;

        let source_digest = source.content_digest;
        let mut migration_ids = Vec::with_capacity(steps.len());
        let mut current = source;
        for step in steps {
            current = apply(step, current)?;
            migration_ids.push(step.id.to_owned());
        }
        check_features(&current, target.features)?;
        Ok(Migrated { envelope: current, migration_ids, source_digest })
    }
}

/// Applies one step to a verified record and returns the verified record at `step.to`.
fn apply(step: &Migration, record: Envelope) -> Result<Envelope> {
    let id = || step.id.to_owned();
    let payload = (step.transform)(record.payload)
        .map_err(|message| MigrationError::Transform { id: id(), message })?;
    if !payload.is_object() {
        return Err(MigrationError::NotObject { id: id(), found: kind(&payload) }.into());
    }
    let invalid = |source: Error| MigrationError::Invalid { id: id(), source: Box::new(source) };
    let sealed =
        seal_value(&record.schema_name, step.to, record.feature_set, payload).map_err(invalid)?;
    // Verify the intermediate as a reader would: from its stored bytes.
    let bytes = sealed.to_bytes();
    let reread = decode(&bytes).map_err(invalid)?;
    check_schema(&reread, step.schema_name, step.to).map_err(invalid)?;
    check_integrity(&reread, &bytes).map_err(invalid)?;
    Ok(reread)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::load;
    use crate::record::testutil::edit_record;
    use serde_json::json;

    const W1: Schema = Schema { name: "test.widget", version: 1, features: &["fast-path"] };
    const W2: Schema = Schema { version: 2, ..W1 };
    const W3: Schema = Schema { version: 3, ..W1 };

    fn w1to2(mut payload: Value) -> Result<Value, String> {
        let object = payload.as_object_mut().ok_or("payload is not an object")?;
        object.insert("color".into(), json!("none"));
        Ok(payload)
    }

    fn w2to3(mut payload: Value) -> Result<Value, String> {
        let object = payload.as_object_mut().ok_or("payload is not an object")?;
        let size = object.remove("size").ok_or("v2 widget without size")?;
        object.insert("size_bytes".into(), size);
        Ok(payload)
    }

    fn to_array(_: Value) -> Result<Value, String> {
        Ok(json!([1]))
    }

    fn refuse(_: Value) -> Result<Value, String> {
        Err("widgets without a name cannot be migrated".into())
    }

    fn to_float(_: Value) -> Result<Value, String> {
        Ok(json!({"ratio": 0.5}))
    }

    fn step(
        id: &'static str,
        from: u32,
        to: u32,
        transform: fn(Value) -> Result<Value, String>,
    ) -> Migration {
        Migration { id, schema_name: "test.widget", from, to, transform }
    }

    fn registry(steps: &[Migration]) -> MigrationRegistry {
        let mut registry = MigrationRegistry::new();
        for migration in steps {
            registry.register(*migration).unwrap();
        }
        registry
    }

    fn widget_chain() -> MigrationRegistry {
        // Registered out of order: the result does not depend on registration order.
        registry(&[step("w2to3", 2, 3, w2to3), step("w1to2", 1, 2, w1to2)])
    }

    fn v1_record() -> Envelope {
        Envelope::seal(&W1, vec!["fast-path".into()], &json!({"name": "gear", "size": 12})).unwrap()
    }

    fn migration_error(result: Result<impl std::fmt::Debug>) -> MigrationError {
        match result {
            Err(Error::Migration(error)) => error,
            other => panic!("expected a migration error, got {other:?}"),
        }
    }

    #[test]
    fn chained_migration_records_ids_in_order() {
        let source = v1_record();
        let migrated =
            widget_chain().load_migrated(&source.to_bytes(), &W3, &["fast-path"]).unwrap();
        assert_eq!(migrated.migration_ids, ["w1to2", "w2to3"]);
        assert_eq!(migrated.source_digest, source.content_digest);
        let envelope = &migrated.envelope;
        assert_eq!((envelope.schema_name.as_str(), envelope.schema_version), ("test.widget", 3));
        assert_eq!(envelope.payload, json!({"name": "gear", "size_bytes": 12, "color": "none"}));
        assert_eq!(envelope.feature_set, ["fast-path"]);
        assert_eq!(envelope.producer_version, crate::PRODUCER);
        // The result is a verified v3 record in its own right.
        assert_eq!(&load(&envelope.to_bytes(), &W3).unwrap(), envelope);
    }

    #[test]
    fn migration_starts_at_the_record_version() {
        let v2 = Envelope::seal(&W2, vec![], &json!({"name": "gear", "size": 1, "color": "red"}))
            .unwrap();
        let migrated = widget_chain().load_migrated(&v2.to_bytes(), &W3, &[]).unwrap();
        assert_eq!(migrated.migration_ids, ["w2to3"]);
        assert_eq!(
            migrated.envelope.payload,
            json!({"name": "gear", "size_bytes": 1, "color": "red"})
        );
    }

    #[test]
    fn no_op_load_at_target_version() {
        let v3 = Envelope::seal(&W3, vec![], &json!({"name": "gear", "size_bytes": 1})).unwrap();
        for registry in [widget_chain(), MigrationRegistry::production()] {
            let migrated = registry.load_migrated(&v3.to_bytes(), &W3, &[]).unwrap();
            assert!(migrated.migration_ids.is_empty());
            assert_eq!(migrated.envelope, v3);
            assert_eq!(migrated.source_digest, v3.content_digest);
        }
    }

    #[test]
    fn production_registry_holds_every_step_with_one_path_each() {
        let production = MigrationRegistry::production();
        assert_eq!(production.len(), super::super::steps::ALL.len());
        for (name, from, to) in [
            ("strata.action_entry", 1, 2),
            ("strata.artifact_manifest", 1, 2),
            ("strata.snapshot_manifest", 1, 2),
            ("strata.publish_action", 1, 2),
            ("strata.publish_owners", 1, 2),
        ] {
            let path = production.path(name, from, to).unwrap();
            assert_eq!(path.len(), 1, "{name}");
        }
        assert!(matches!(
            migration_error(production.path("strata.action_entry", 2, 3)),
            MigrationError::NoPath { from: 2, to: 3, .. }
        ));
        assert_eq!(widget_chain().len(), 2);
    }

    #[test]
    fn second_step_from_same_version_is_ambiguous() {
        let mut registry = registry(&[step("w1to2", 1, 2, w1to2)]);
        let error = migration_error(registry.register(step("w1to3", 1, 3, w1to2)));
        assert!(matches!(
            &error,
            MigrationError::Ambiguous { schema_name, from: 1, existing_id, new_id }
                if schema_name == "test.widget" && existing_id == "w1to2" && new_id == "w1to3"
        ));
        // The same starting version of another schema is a different pair.
        let other = Migration { schema_name: "test.gadget", ..step("g1to2", 1, 2, w1to2) };
        registry.register(other).unwrap();
        assert_eq!(registry.len(), 2);
    }

    #[test]
    fn duplicate_id_rejected() {
        let mut registry = registry(&[step("w1to2", 1, 2, w1to2)]);
        assert!(matches!(
            migration_error(registry.register(step("w1to2", 2, 3, w2to3))),
            MigrationError::DuplicateId { id } if id == "w1to2"
        ));
    }

    #[test]
    fn steps_must_go_forward() {
        let mut registry = MigrationRegistry::new();
        assert!(matches!(
            migration_error(registry.register(step("same", 2, 2, w1to2))),
            MigrationError::NotForward { from: 2, to: 2, .. }
        ));
        assert!(matches!(
            migration_error(registry.register(step("back", 3, 1, w1to2))),
            MigrationError::NotForward { from: 3, to: 1, .. }
        ));
        assert!(registry.is_empty());
    }

    #[test]
    fn path_is_the_unique_chain_or_an_error() {
        let registry = registry(&[
            step("a", 1, 2, w1to2),
            step("b", 2, 4, w1to2),
            step("c", 4, 5, w1to2),
            step("d", 7, 8, w1to2),
        ]);
        let ids = |from, to| -> Vec<&str> {
            registry.path("test.widget", from, to).unwrap().iter().map(|m| m.id).collect()
        };
        assert_eq!(ids(1, 5), ["a", "b", "c"]);
        assert_eq!(ids(2, 4), ["b"]);
        assert!(ids(3, 3).is_empty());
        for (from, to) in [(1, 3), (1, 7), (5, 1), (3, 4), (1, 8)] {
            assert!(
                matches!(
                    migration_error(registry.path("test.widget", from, to)),
                    MigrationError::NoPath { from: f, to: t, .. } if (f, t) == (from, to)
                ),
                "{from} -> {to}"
            );
        }
        assert!(registry.path("test.gadget", 1, 2).is_err());
    }

    #[test]
    fn missing_path_is_a_schema_mismatch() {
        let partial = registry(&[step("w1to2", 1, 2, w1to2)]);
        let error =
            partial.load_migrated(&v1_record().to_bytes(), &W3, &["fast-path"]).unwrap_err();
        assert!(matches!(error, Error::Migration(MigrationError::NoPath { from: 1, to: 3, .. })));
        assert!(error.is_schema_mismatch() && !error.is_corrupt());
        // Downgrades have no path either.
        let v3 = Envelope::seal(&W3, vec![], &json!({})).unwrap();
        assert!(matches!(
            widget_chain().load_migrated(&v3.to_bytes(), &W1, &[]),
            Err(Error::Migration(MigrationError::NoPath { from: 3, to: 1, .. }))
        ));
    }

    #[test]
    fn tampered_source_is_rejected() {
        let edited = edit_record(&v1_record().to_bytes(), |map| {
            map.insert("payload".into(), json!({"name": "gear", "size": 13}));
        });
        match widget_chain().load_migrated(&edited, &W3, &["fast-path"]) {
            Err(error @ Error::DigestMismatch { .. }) => assert!(error.is_corrupt()),
            other => panic!("expected DigestMismatch, got {other:?}"),
        }
        let spaced = [v1_record().to_bytes(), b" ".to_vec()].concat();
        assert!(matches!(
            widget_chain().load_migrated(&spaced, &W3, &["fast-path"]),
            Err(Error::NonCanonical { .. })
        ));
    }

    #[test]
    fn every_single_byte_flip_of_the_source_is_rejected() {
        let chain = widget_chain();
        let bytes = v1_record().to_bytes();
        for position in 0..bytes.len() {
            for mask in 1..=255u8 {
                let mut flipped = bytes.clone();
                flipped[position] ^= mask;
                let result = chain.load_migrated(&flipped, &W3, &["fast-path"]);
                assert!(
                    result.is_err(),
                    "flip at {position} with {mask:#04x} migrated: {result:?}"
                );
            }
        }
    }

    #[test]
    fn transform_producing_non_object_is_rejected() {
        let registry = registry(&[step("w1to2", 1, 2, w1to2), step("w2to3-bad", 2, 3, to_array)]);
        let error =
            migration_error(registry.load_migrated(&v1_record().to_bytes(), &W3, &["fast-path"]));
        assert!(matches!(
            &error,
            MigrationError::NotObject { id, found: "array" } if id == "w2to3-bad"
        ));
        assert!(error.to_string().contains("w2to3-bad"), "{error}");
    }

    #[test]
    fn transform_refusal_names_the_migration() {
        let registry = registry(&[step("w1to2-refuse", 1, 2, refuse)]);
        assert!(matches!(
            migration_error(registry.load_migrated(&v1_record().to_bytes(), &W2, &["fast-path"])),
            MigrationError::Transform { id, message }
                if id == "w1to2-refuse" && message.contains("without a name")
        ));
    }

    #[test]
    fn transform_producing_float_is_invalid() {
        let registry = registry(&[step("w1to2-float", 1, 2, to_float)]);
        match migration_error(registry.load_migrated(&v1_record().to_bytes(), &W2, &["fast-path"]))
        {
            MigrationError::Invalid { id, source } => {
                assert_eq!(id, "w1to2-float");
                assert!(matches!(*source, Error::NonInteger { path } if path == "/payload/ratio"));
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn other_schema_name_is_not_migrated() {
        let gadget = Schema { name: "test.gadget", ..W3 };
        assert!(matches!(
            widget_chain().load_migrated(&v1_record().to_bytes(), &gadget, &["fast-path"]),
            Err(Error::UnknownSchema { found_name, .. }) if found_name == "test.widget"
        ));
    }

    #[test]
    fn required_features_are_checked_at_source_and_target() {
        let bytes = v1_record().to_bytes();
        // The source's feature must be known at the source version...
        assert!(matches!(
            widget_chain().load_migrated(&bytes, &W3, &[]),
            Err(Error::UnknownRequiredFeature { feature, schema })
                if feature == "fast-path" && schema == "test.widget v1"
        ));
        // ...and, carried forward, at the target version.
        let target = Schema { features: &[], ..W3 };
        assert!(matches!(
            widget_chain().load_migrated(&bytes, &target, &["fast-path"]),
            Err(Error::UnknownRequiredFeature { feature, schema })
                if feature == "fast-path" && schema == "test.widget v3"
        ));
    }
}
