//! Test helpers shared by the record tests: proptest strategies for JSON values and a helper
//! that edits a stored record and re-encodes it canonically.

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Envelope, Schema, parse_strict, to_canonical_bytes};

/// A synthetic schema that knows one required feature.
pub(super) const WIDGET: Schema =
    Schema { name: "test.widget", version: 1, features: &["fast-path"] };

/// A synthetic payload type.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Widget {
    pub(super) name: String,
    pub(super) size_bytes: u64,
    pub(super) tags: Vec<String>,
}

/// A widget whose name needs escapes, including one (`\u001b`) whose hex digit can change case
/// without changing the value.
pub(super) fn widget() -> Widget {
    Widget {
        name: "gear\n\"é\"\u{1b}".into(), size_bytes: 12, tags: vec!["a".into(), "😀".into()]
    }
}

/// A stored `WIDGET` record with a required and an unknown optional feature.
pub(super) fn sealed_bytes() -> Vec<u8> {
    let features = vec!["optional:x".into(), "fast-path".into(), "optional:x".into()];
    Envelope::seal(&WIDGET, features, &widget()).unwrap().to_bytes()
}

/// `bytes` as text (test records are UTF-8).
pub(super) fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

/// Object keys: mostly short ASCII (so keys collide and order matters), sometimes any string.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-c_/~]{0,3}", 1 => any::<String>()]
}

/// Strings: arbitrary Unicode (control characters, U+2028, astral planes) and escape-heavy
/// ASCII.
fn string() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[\"\\\\\u{0}-\u{1f}\u{7f}\u{2028}a-z]{0,8}"]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        string().prop_map(Value::String),
    ]
}

/// Any JSON value without floats, nested up to four levels.
pub(super) fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// Any JSON object without floats (a valid record payload).
pub(super) fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(key(), json_value(), 0..6)
        .prop_map(|members| Value::Object(members.into_iter().collect()))
}

/// Parses `bytes` (a record), lets `edit` change the top-level object, and returns the
/// canonical encoding of the result.
pub(super) fn edit_record(bytes: &[u8], edit: impl FnOnce(&mut Map<String, Value>)) -> Vec<u8> {
    let mut value = parse_strict(bytes).unwrap();
    edit(value.as_object_mut().unwrap());
    to_canonical_bytes(&value).unwrap()
}
