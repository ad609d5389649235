//! The strict JSON parser records are read with: duplicate keys and anything else that
//! could read two ways are rejected (`docs/records.md`, "Reading a record").
//!
//! `serde_json::from_slice::<Value>` silently keeps the last of two equal keys and turns
//! `1.0` into a float, so two different byte strings could be read as one record, or a
//! record could carry a key a reader never sees. [`parse_strict`] drives `serde_json`'s
//! tokenizer with its own visitor, which builds the [`Value`] while tracking the JSON pointer
//! of every node, and rejects duplicate keys and non-integer numbers where they occur.
//!
//! The visitor reports its typed error through a side slot (a serde visitor can only return
//! the deserializer's error type), and [`parse_strict`] prefers that slot over the
//! deserializer's generic error.
//!
//! # Limitations
//! * Nesting deeper than 128 levels is a syntax error (`serde_json`'s recursion limit), which
//!   also bounds stack use.
//! * Leading and trailing JSON whitespace is accepted here; [`super::load`] rejects it later
//!   as non-canonical.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::{Error, Result, push_pointer_token};

/// Parses `bytes` as exactly one JSON value, strictly.
///
/// Any JSON value is accepted at the top level (checking for an object is [`super::load`]'s
/// job). Leading and trailing whitespace is allowed; anything else after the value is not.
///
/// # Errors
/// * [`Error::Utf8`] if `bytes` is not UTF-8;
/// * [`Error::Syntax`] for a syntax error, truncated input, trailing data, an invalid escape
///   (including a lone surrogate) or nesting deeper than 128;
/// * [`Error::DuplicateKey`] for an object with two equal keys (compared after unescaping,
///   so `"a"` and `"\u0061"` are equal), at any depth;
/// * [`Error::NonInteger`] for a fraction, an exponent, `-0`, or an integer outside
///   `-2^63..=2^64-1`.
///
/// When a document has several problems, the first in reading order is reported.
///
/// ```
/// use strata::record::{Error, parse_strict};
/// assert!(parse_strict(br#"{"a":{"b":1}}"#).is_ok());
/// assert!(matches!(parse_strict(br#"{"a":1,"a":2}"#), Err(Error::DuplicateKey { .. })));
/// assert!(matches!(parse_strict(b"[1.0]"), Err(Error::NonInteger { .. })));
/// ```
pub fn parse_strict(bytes: &[u8]) -> Result<Value> {
    let text = std::str::from_utf8(bytes)
        .map_err(|source| Error::Utf8 { offset: source.valid_up_to(), source })?;
    let state = RefCell::new(State { path: String::new(), error: None });
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = ValueSeed { state: &state }
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    match parsed {
        Ok(value) => Ok(value),
        Err(json_error) => Err(state.into_inner().error.unwrap_or_else(|| syntax(&json_error))),
    }
}

/// Converts a `serde_json` error into [`Error::Syntax`], keeping the message without the
/// position suffix that `serde_json` appends.
fn syntax(error: &serde_json::Error) -> Error {
    let (line, column) = (error.line(), error.column());
    let text = error.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = text.strip_suffix(&suffix).unwrap_or(&text).to_owned();
    Error::Syntax { line, column, message }
}

/// Shared parser state: the pointer of the node being read and the first typed error.
struct State {
    path: String,
    error: Option<Error>,
}

/// Deserializes one JSON value at the current path.
#[derive(Clone, Copy)]
struct ValueSeed<'a> {
    state: &'a RefCell<State>,
}

impl ValueSeed<'_> {
    /// Stores `error` (if none is stored yet) and returns a placeholder serde error that
    /// aborts deserialization; [`parse_strict`] reports the stored error instead.
    fn fail<E: de::Error>(self, error: Error) -> E {
        let mut state = self.state.borrow_mut();
        if state.error.is_none() {
            state.error = Some(error);
        }
        E::custom("strict record parsing failed")
    }

    fn current_path(self) -> String {
        self.state.borrow().path.clone()
    }

    /// Appends `token` to the path; returns the length to truncate back to.
    fn enter(self, token: &str) -> usize {
        let mut state = self.state.borrow_mut();
        let len = state.path.len();
        push_pointer_token(&mut state.path, token);
        len
    }

    /// [`ValueSeed::enter`] for an array index (no escape needed, no allocation).
    fn enter_index(self, index: usize) -> usize {
        use std::fmt::Write as _;
        let mut state = self.state.borrow_mut();
        let len = state.path.len();
        let _ = write!(state.path, "/{index}");
        len
    }

    fn leave(self, len: usize) {
        self.state.borrow_mut().path.truncate(len);
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(Number::from(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(Number::from(value)))
    }

    fn visit_f64<E: de::Error>(self, _value: f64) -> Result<Value, E> {
        Err(self.fail(Error::NonInteger { path: self.current_path() }))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let len = self.enter_index(items.len());
            let item = seq.next_element_seed(self)?;
            self.leave(len);
            match item {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let len = self.enter(&key);
            if object.contains_key(&key) {
                let path = self.current_path();
                return Err(self.fail(Error::DuplicateKey { key, path }));
            }
            let value = map.next_value_seed(self)?;
            self.leave(len);
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn duplicate(input: &str) -> (String, String) {
        match parse_strict(input.as_bytes()) {
            Err(Error::DuplicateKey { key, path }) => (key, path),
            other => panic!("expected DuplicateKey for {input}, got {other:?}"),
        }
    }

    fn non_integer(input: &str) -> String {
        match parse_strict(input.as_bytes()) {
            Err(Error::NonInteger { path }) => path,
            other => panic!("expected NonInteger for {input}, got {other:?}"),
        }
    }

    fn syntax_error(input: &[u8]) -> (usize, usize, String) {
        match parse_strict(input) {
            Err(Error::Syntax { line, column, message }) => (line, column, message),
            other => panic!("expected Syntax for {input:?}, got {other:?}"),
        }
    }

    #[test]
    fn parses_nested_values() {
        let value = parse_strict(br#" {"b":[1,"x",null,true,-7],"a":{"c":{}}} "#).unwrap();
        assert_eq!(value, json!({"a": {"c": {}}, "b": [1, "x", null, true, -7]}));
    }

    #[test]
    fn duplicate_key_top_level() {
        assert_eq!(duplicate(r#"{"a":1,"a":2}"#), ("a".to_owned(), "/a".to_owned()));
    }

    #[test]
    fn duplicate_key_nested() {
        assert_eq!(duplicate(r#"{"a":{"b":1,"b":2}}"#), ("b".to_owned(), "/a/b".to_owned()));
        assert_eq!(duplicate(r#"[{"x":1},{"y":0,"x":1,"x":1}]"#), ("x".into(), "/1/x".into()));
        assert_eq!(
            duplicate(r#"{"p":{"a/b":[{"k":{},"k":{}}]}}"#),
            ("k".into(), "/p/a~1b/0/k".into())
        );
    }

    #[test]
    fn duplicate_key_detected_after_unescaping() {
        assert_eq!(duplicate(r#"{"a":1,"\u0061":1}"#), ("a".to_owned(), "/a".to_owned()));
    }

    #[test]
    fn equal_keys_in_sibling_objects_are_fine() {
        assert!(parse_strict(br#"{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}"#).is_ok());
    }

    #[test]
    fn non_object_top_levels_parse_as_values() {
        // Rejecting them is `load`'s job (Error::NotObject), tested in envelope.rs.
        assert_eq!(parse_strict(b"[1]").unwrap(), json!([1]));
        assert_eq!(parse_strict(br#""s""#).unwrap(), json!("s"));
        assert_eq!(parse_strict(b"42").unwrap(), json!(42));
        assert_eq!(parse_strict(b"null").unwrap(), Value::Null);
        assert_eq!(parse_strict(b"true").unwrap(), json!(true));
    }

    #[test]
    fn invalid_utf8_rejected_with_offset() {
        match parse_strict(b"{\"a\":\"\xff\"}") {
            Err(Error::Utf8 { offset, .. }) => assert_eq!(offset, 6),
            other => panic!("expected Utf8, got {other:?}"),
        }
        // A truncated multi-byte sequence is invalid too.
        assert!(matches!(parse_strict(b"\"\xc3\""), Err(Error::Utf8 { offset: 1, .. })));
    }

    #[test]
    fn trailing_garbage_rejected() {
        let (line, column, message) = syntax_error(br#"{"a":1}x"#);
        assert_eq!((line, column), (1, 8));
        assert!(message.contains("trailing"), "{message}");
        assert!(!message.contains(" at line "), "{message}");
        syntax_error(br#"{"a":1} {"b":2}"#);
        syntax_error(b"1 2");
        // Surrounding whitespace alone is not garbage.
        assert_eq!(parse_strict(b" {\"a\":1}\n").unwrap(), json!({"a": 1}));
    }

    #[test]
    fn syntax_errors_carry_position() {
        assert_eq!(syntax_error(b"{\n  \"a\": }").0, 2);
        syntax_error(br#"{"a":1"#);
        syntax_error(b"");
        syntax_error(br#"{'a':1}"#);
        syntax_error(br#"{"a":01}"#);
        syntax_error(br#"["\ud800"]"#);
        syntax_error(b"\xef\xbb\xbf{}");
    }

    #[test]
    fn deep_nesting_is_a_syntax_error_not_a_crash() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        let (_, _, message) = syntax_error(deep.as_bytes());
        assert!(message.contains("recursion"), "{message}");
    }

    #[test]
    fn floats_rejected_with_path() {
        assert_eq!(non_integer("1.0"), "");
        assert_eq!(non_integer("1e3"), "");
        assert_eq!(non_integer("1E3"), "");
        assert_eq!(non_integer("0.0"), "");
        assert_eq!(non_integer("-0"), "");
        assert_eq!(non_integer(r#"{"a":[1,2.5]}"#), "/a/1");
        assert_eq!(non_integer(r#"{"payload":{"build_ms":12.0}}"#), "/payload/build_ms");
    }

    #[test]
    fn integer_extremes() {
        assert_eq!(parse_strict(b"18446744073709551615").unwrap(), json!(u64::MAX));
        assert_eq!(parse_strict(b"-9223372036854775808").unwrap(), json!(i64::MIN));
        assert_eq!(parse_strict(b"0").unwrap(), json!(0));
        // Beyond the range serde_json reads a float: rejected, never truncated or wrapped.
        assert_eq!(non_integer("18446744073709551616"), "");
        assert_eq!(non_integer("-9223372036854775809"), "");
        assert_eq!(non_integer(r#"{"n":123456789012345678901234567890}"#), "/n");
    }

    #[test]
    fn first_problem_in_reading_order_wins() {
        assert_eq!(non_integer(r#"{"a":1.5,"a":1}"#), "/a");
        assert_eq!(duplicate(r#"{"a":1,"a":1.5}"#).0, "a");
    }
}
