//! The production migration steps: the schemas whose content digests became
//! algorithm-tagged (and the snapshot sidecar, whose object digest did).
//!
//! Version 1 of the entry, artifact-manifest and snapshot-manifest schemas recorded each
//! file's content as `"sha256": "<64 hex>"` in three different record shapes. Version 2
//! uses the one content record of [`crate::content::record`]:
//! `{"kind":"file","path":…,"size_bytes":…,"digest":"<algorithm>:<64 hex>","executable":…}`
//! (symlinks `{"kind":"symlink","path":…,"target":…}`, directories
//! `{"kind":"directory","path":…}`). Each step rewrites only those records: an untagged
//! digest of version 1 is SHA-256 by definition, so it becomes `sha256:<hex>` and every
//! stored byte stays verifiable. Everything else in the payload is carried unchanged.
//!
//! The steps are pure JSON transformations, so this module depends on nothing above
//! `record` (module dependencies point one way). The lineage of a migrated record is
//! [`super::Migrated::source_digest`] (the digest of the stored record, which never
//! changes: stored records are never rewritten) plus the ordered step ids.

use serde_json::{Map, Value};

use super::Migration;

/// `strata.action_entry` v1 → v2: `artifacts[]` become content records.
pub const ENTRY_1_TO_2: Migration = Migration {
    id: "action-entry-1-to-2-tagged-digests",
    schema_name: "strata.action_entry",
    from: 1,
    to: 2,
    transform: entry_1_to_2,
};

/// `strata.artifact_manifest` v1 → v2: `files[]` become file records (tagged digests).
pub const ARTIFACT_MANIFEST_1_TO_2: Migration = Migration {
    id: "artifact-manifest-1-to-2-tagged-digests",
    schema_name: "strata.artifact_manifest",
    from: 1,
    to: 2,
    transform: artifact_manifest_1_to_2,
};

/// `strata.snapshot_manifest` v1 → v2: `directories[]`, `files[]` and `symlinks[]` become
/// one sorted `entries[]` list of content records.
pub const SNAPSHOT_MANIFEST_1_TO_2: Migration = Migration {
    id: "snapshot-manifest-1-to-2-content-records",
    schema_name: "strata.snapshot_manifest",
    from: 1,
    to: 2,
    transform: snapshot_manifest_1_to_2,
};

/// `strata.publish_action` v1 → v2: `artifacts[]` become content records (the same
/// transformation as an entry's).
pub const PUBLISH_ACTION_1_TO_2: Migration = Migration {
    id: "publish-action-1-to-2-tagged-digests",
    schema_name: "strata.publish_action",
    from: 1,
    to: 2,
    transform: entry_1_to_2,
};

/// `strata.publish_owners` v1 → v2: each owner's `artifact` becomes a content record.
pub const PUBLISH_OWNERS_1_TO_2: Migration = Migration {
    id: "publish-owners-1-to-2-tagged-digests",
    schema_name: "strata.publish_owners",
    from: 1,
    to: 2,
    transform: publish_owners_1_to_2,
};

/// `strata.snapshot_sidecar` v1 → v2: the same fields (a version 1 sidecar has no
/// `object`: its object is the key itself, which the reader checks after the migration).
pub const SNAPSHOT_SIDECAR_1_TO_2: Migration = Migration {
    id: "snapshot-sidecar-1-to-2-same-fields",
    schema_name: "strata.snapshot_sidecar",
    from: 1,
    to: 2,
    transform: same_fields,
};

/// `strata.snapshot_sidecar` v2 → v3: the untagged `object_sha256` becomes the tagged
/// `object_digest` (`sha256:<hex>`).
pub const SNAPSHOT_SIDECAR_2_TO_3: Migration = Migration {
    id: "snapshot-sidecar-2-to-3-object-digest",
    schema_name: "strata.snapshot_sidecar",
    from: 2,
    to: 3,
    transform: snapshot_sidecar_2_to_3,
};

/// `strata.snapshot_sidecar` v3 → v4: adds `kind` = `full` (every earlier snapshot is one
/// whole object; index snapshots are new in version 4).
pub const SNAPSHOT_SIDECAR_3_TO_4: Migration = Migration {
    id: "snapshot-sidecar-3-to-4-kind",
    schema_name: "strata.snapshot_sidecar",
    from: 3,
    to: 4,
    transform: snapshot_sidecar_3_to_4,
};

/// Every production step.
pub const ALL: [Migration; 8] = [
    ENTRY_1_TO_2,
    ARTIFACT_MANIFEST_1_TO_2,
    SNAPSHOT_MANIFEST_1_TO_2,
    PUBLISH_ACTION_1_TO_2,
    PUBLISH_OWNERS_1_TO_2,
    SNAPSHOT_SIDECAR_1_TO_2,
    SNAPSHOT_SIDECAR_2_TO_3,
    SNAPSHOT_SIDECAR_3_TO_4,
];

fn object(value: Value, what: &str) -> Result<Map<String, Value>, String> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(format!("{what} is not an object")),
    }
}

/// Adds `field`, which the source version never wrote: a source record that already has it
/// is refused (silently overwriting it would accept a record its own version calls
/// malformed, and drop a value the record's digest vouched for).
fn insert_new(map: &mut Map<String, Value>, field: &str, value: Value) -> Result<(), String> {
    if map.contains_key(field) {
        return Err(format!(
            "a record already has a `{field}` field, which its version never has; the record is malformed"
        ));
    }
    map.insert(field.into(), value);
    Ok(())
}

fn take_array(map: &mut Map<String, Value>, field: &str) -> Result<Vec<Value>, String> {
    match map.remove(field) {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(format!("`{field}` is missing or not an array")),
    }
}

/// A v1 file record (any of the three shapes) as a v2 content record: `sha256` becomes a
/// tagged `digest`, `kind` becomes `file`.
fn file_record(value: Value) -> Result<Value, String> {
    let mut map = object(value, "a file record")?;
    // Entry and publication records of v1 already say `"kind":"file"`; snapshot file
    // records have no kind. Any other kind is not a file record.
    match map.remove("kind") {
        None => {}
        Some(Value::String(kind)) if kind == "file" => {}
        Some(other) => return Err(format!("a file record has the kind {other}, not \"file\"")),
    }
    let mut map = object(bare_file_record(Value::Object(map))?, "a file record")?;
    insert_new(&mut map, "kind", Value::String("file".into()))?;
    Ok(Value::Object(map))
}

/// A v1 file record as a v2 file record without the `kind` tag (artifact manifests list
/// only files): `sha256` becomes a tagged `digest`.
fn bare_file_record(value: Value) -> Result<Value, String> {
    let mut map = object(value, "a file record")?;
    let hex = match map.remove("sha256") {
        Some(Value::String(hex)) => hex,
        _ => return Err("a file record has no `sha256` string".into()),
    };
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(format!("a file record's `sha256` {hex:?} is not 64 lowercase hex"));
    }
    insert_new(&mut map, "digest", Value::String(format!("sha256:{hex}")))?;
    Ok(Value::Object(map))
}

fn entry_1_to_2(payload: Value) -> Result<Value, String> {
    let mut map = object(payload, "the payload")?;
    let artifacts = take_array(&mut map, "artifacts")?;
    let mut out = Vec::with_capacity(artifacts.len());
    for a in artifacts {
        let is_file = a.get("kind").and_then(Value::as_str) == Some("file");
        out.push(if is_file { file_record(a)? } else { a });
    }
    insert_new(&mut map, "artifacts", Value::Array(out))?;
    Ok(Value::Object(map))
}

fn publish_owners_1_to_2(payload: Value) -> Result<Value, String> {
    let mut map = object(payload, "the payload")?;
    let owners = match map.remove("owners") {
        Some(Value::Object(owners)) => owners,
        _ => return Err("`owners` is missing or not an object".into()),
    };
    let mut out = Map::new();
    for (path, owner) in owners {
        let mut owner = object(owner, "an owner")?;
        let artifact = owner.remove("artifact").ok_or("an owner has no `artifact`")?;
        let is_file = artifact.get("kind").and_then(Value::as_str) == Some("file");
        owner.insert("artifact".into(), if is_file { file_record(artifact)? } else { artifact });
        out.insert(path, Value::Object(owner));
    }
    insert_new(&mut map, "owners", Value::Object(out))?;
    Ok(Value::Object(map))
}

fn artifact_manifest_1_to_2(payload: Value) -> Result<Value, String> {
    let mut map = object(payload, "the payload")?;
    let files = take_array(&mut map, "files")?;
    let files = files.into_iter().map(bare_file_record).collect::<Result<Vec<_>, _>>()?;
    insert_new(&mut map, "files", Value::Array(files))?;
    Ok(Value::Object(map))
}

fn same_fields(payload: Value) -> Result<Value, String> {
    Ok(payload)
}

fn snapshot_sidecar_2_to_3(payload: Value) -> Result<Value, String> {
    let mut map = object(payload, "the payload")?;
    let hex = match map.remove("object_sha256") {
        Some(Value::String(hex)) => hex,
        _ => return Err("`object_sha256` is missing or not a string".into()),
    };
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(format!("`object_sha256` {hex:?} is not 64 lowercase hex"));
    }
    insert_new(&mut map, "object_digest", Value::String(format!("sha256:{hex}")))?;
    Ok(Value::Object(map))
}

fn snapshot_sidecar_3_to_4(payload: Value) -> Result<Value, String> {
    let mut map = object(payload, "the payload")?;
    insert_new(&mut map, "kind", Value::String("full".into()))?;
    Ok(Value::Object(map))
}

fn snapshot_manifest_1_to_2(payload: Value) -> Result<Value, String> {
    let mut map = object(payload, "the payload")?;
    let mut entries: Vec<(String, Value)> = Vec::new();
    for dir in take_array(&mut map, "directories")? {
        let Value::String(path) = dir else { return Err("a directory is not a string".into()) };
        let mut record = Map::new();
        record.insert("kind".into(), Value::String("directory".into()));
        record.insert("path".into(), Value::String(path.clone()));
        entries.push((path, Value::Object(record)));
    }
    for file in take_array(&mut map, "files")? {
        let record = file_record(file)?;
        let path = record.get("path").and_then(Value::as_str).unwrap_or_default().to_owned();
        entries.push((path, record));
    }
    for link in take_array(&mut map, "symlinks")? {
        let mut record = object(link, "a symlink record")?;
        insert_new(&mut record, "kind", Value::String("symlink".into()))?;
        let path = record.get("path").and_then(Value::as_str).unwrap_or_default().to_owned();
        entries.push((path, Value::Object(record)));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    insert_new(&mut map, "entries", Value::Array(entries.into_iter().map(|(_, r)| r).collect()))?;
    Ok(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const HEX: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn entry_files_get_tagged_digests_and_symlinks_stay() {
        let v1 = json!({"unit": "u", "artifacts": [
            {"kind": "file", "path": "a", "size_bytes": 0, "sha256": HEX, "executable": false},
            {"kind": "symlink", "path": "b", "target": "a"},
        ]});
        let v2 = entry_1_to_2(v1).unwrap();
        assert_eq!(
            v2,
            json!({"unit": "u", "artifacts": [
                {"kind": "file", "path": "a", "size_bytes": 0, "digest": format!("sha256:{HEX}"), "executable": false},
                {"kind": "symlink", "path": "b", "target": "a"},
            ]})
        );
    }

    #[test]
    fn artifact_files_become_file_records() {
        let v1 = json!({"parents": [], "files": [
            {"path": "x", "size_bytes": 0, "sha256": HEX, "executable": true},
        ]});
        let v2 = artifact_manifest_1_to_2(v1).unwrap();
        assert_eq!(
            v2.get("files"),
            Some(
                &json!([{"path": "x", "size_bytes": 0, "digest": format!("sha256:{HEX}"), "executable": true}])
            )
        );
    }

    #[test]
    fn snapshot_lists_merge_into_sorted_entries() {
        let v1 = json!({"key": "k", "directories": ["actions-v1", "actions-v1/d"],
            "files": [{"path": "actions-v1/d/f", "size_bytes": 0, "executable": false, "sha256": HEX}],
            "symlinks": [{"path": "actions-v1/a", "target": "d/f"}]});
        let v2 = snapshot_manifest_1_to_2(v1).unwrap();
        let paths: Vec<&str> =
            v2["entries"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
        assert_eq!(paths, ["actions-v1", "actions-v1/a", "actions-v1/d", "actions-v1/d/f"]);
        assert_eq!(v2["entries"][1]["kind"], "symlink");
        assert!(v2.get("files").is_none() && v2.get("symlinks").is_none());
    }

    #[test]
    fn malformed_v1_records_are_refused_not_guessed() {
        for bad in [
            json!({"artifacts": "no"}),
            json!({"artifacts": [{"kind": "file", "path": "a", "size_bytes": 0, "executable": false}]}),
            json!({"artifacts": [{"kind": "file", "path": "a", "size_bytes": 0, "sha256": "ABC", "executable": false}]}),
            json!([1]),
        ] {
            assert!(entry_1_to_2(bad.clone()).is_err(), "{bad}");
        }
    }

    /// A v1 record that already carries a field version 2 adds (`digest`, `kind`,
    /// `object_digest`, the new lists) is malformed: refused, never overwritten (the
    /// migration used to drop a stored `digest` and accept the record).
    #[test]
    fn a_field_the_step_adds_is_refused_when_already_present() {
        let file = json!({"kind": "file", "path": "a", "size_bytes": 0, "sha256": HEX, "executable": false, "digest": format!("sha256:{HEX}")});
        let err = entry_1_to_2(json!({"artifacts": [file.clone()]})).unwrap_err();
        assert!(err.contains("`digest`"), "{err}");
        assert!(publish_action_like(&file).is_err());
        let owners = json!({"owners": {"a": {"id": {}, "artifact": file}}});
        assert!(publish_owners_1_to_2(owners).unwrap_err().contains("`digest`"));
        let bare =
            json!({"path": "x", "size_bytes": 0, "sha256": HEX, "executable": true, "digest": 5});
        assert!(
            artifact_manifest_1_to_2(json!({"files": [bare]})).unwrap_err().contains("`digest`")
        );
        let snap_file = json!({"path": "actions-v1/f", "size_bytes": 0, "executable": false, "sha256": HEX, "kind": "symlink"});
        let snap = json!({"directories": ["actions-v1"], "files": [snap_file], "symlinks": []});
        assert!(snapshot_manifest_1_to_2(snap).unwrap_err().contains("kind"));
        let link = json!({"path": "actions-v1/l", "target": "x", "kind": "file"});
        let snap = json!({"directories": ["actions-v1"], "files": [], "symlinks": [link]});
        assert!(snapshot_manifest_1_to_2(snap).unwrap_err().contains("`kind`"));
        let snap = json!({"directories": [], "files": [], "symlinks": [], "entries": []});
        assert!(snapshot_manifest_1_to_2(snap).unwrap_err().contains("`entries`"));
        let sidecar = json!({"object_sha256": HEX, "object_digest": format!("blake3:{HEX}")});
        assert!(snapshot_sidecar_2_to_3(sidecar).unwrap_err().contains("`object_digest`"));
        // The well-formed records still migrate.
        let ok = json!({"kind": "file", "path": "a", "size_bytes": 0, "sha256": HEX, "executable": false});
        assert!(entry_1_to_2(json!({"artifacts": [ok]})).is_ok());
    }

    fn publish_action_like(file: &Value) -> Result<Value, String> {
        (PUBLISH_ACTION_1_TO_2.transform)(json!({"id": {}, "artifacts": [file.clone()]}))
    }
}
