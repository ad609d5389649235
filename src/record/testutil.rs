//! Test helpers shared by the record tests: proptest strategies for JSON values.

use proptest::prelude::*;
use serde_json::Value;

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
