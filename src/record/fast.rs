//! The fast way to read a record's payload, for records read on every cache lookup (compile
//! entries, verification memos): it accepts exactly what [`super::load_as`] accepts, in
//! one pass over the bytes instead of parse, re-encode and compare.
//!
//! A record is accepted here only if its bytes are already canonical JSON
//! ([`is_canonical`]: no white space, integers in `i64::MIN..=u64::MAX` in shortest form,
//! strings with exactly the mandatory escapes, object keys strictly increasing by code
//! point), its digest covers those bytes, the envelope has the six keys with the expected
//! schema and known features, and the payload deserialises into `T`. Canonical bytes are
//! what [`super::load`] requires anyway (it re-encodes the parsed value and compares), so
//! nothing is accepted that the full path would refuse; anything this path refuses goes to
//! the full path, which says precisely what is wrong.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::verify::OPTIONAL_FEATURE_PREFIX;
use super::{Result, Schema};
use crate::digest::Sha256Digest;

/// The envelope as stored, with the payload read straight into `T`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored<T> {
    content_digest: String,
    feature_set: Vec<String>,
    payload: T,
    #[allow(dead_code)]
    producer_version: String,
    schema_name: String,
    schema_version: u32,
}

/// The payload of the record `bytes` of schema `expected`, verified as
/// [`super::load_as`] verifies it.
///
/// # Errors
/// As [`super::load_as`].
pub fn load_payload_as<T: DeserializeOwned>(bytes: &[u8], expected: &Schema) -> Result<T> {
    match fast(bytes, expected) {
        Some(payload) => Ok(payload),
        None => super::load_as(bytes, expected).map(|(_, payload)| payload),
    }
}

fn fast<T: DeserializeOwned>(bytes: &[u8], expected: &Schema) -> Option<T> {
    const HEAD: &[u8] = b"{\"content_digest\":\"sha256:";
    let rest = bytes.strip_prefix(HEAD)?;
    let hex = std::str::from_utf8(rest.get(..64)?).ok()?;
    let after = rest.get(64..)?.strip_prefix(b"\",")?;
    let recorded = Sha256Digest::parse_prefixed(&format!("sha256:{hex}")).ok()?;
    std::str::from_utf8(bytes).ok()?;
    if !is_canonical(bytes) {
        return None;
    }
    let mut h = crate::digest::Hasher::new();
    h.update(b"{");
    h.update(after);
    if h.finish() != recorded {
        return None;
    }
    let stored: Stored<T> = serde_json::from_slice(bytes).ok()?;
    let sorted = stored.feature_set.windows(2).all(|w| w[0] < w[1]);
    let known = stored
        .feature_set
        .iter()
        .all(|f| f.starts_with(OPTIONAL_FEATURE_PREFIX) || expected.features.contains(&f.as_str()));
    (stored.schema_name == expected.name
        && stored.schema_version == expected.version
        && stored.content_digest == format!("sha256:{hex}")
        && sorted
        && known)
        .then_some(stored.payload)
}

/// True if `bytes` is canonical JSON (the module docs of [`super::canonical`]) with an
/// object at the top. `bytes` must be valid UTF-8.
pub fn is_canonical(bytes: &[u8]) -> bool {
    let mut scanner = Scanner { bytes, at: 0 };
    bytes.first() == Some(&b'{') && scanner.value(0) && scanner.at == bytes.len()
}

/// Deeper nesting than this is refused here (the full path then decides).
const MAX_DEPTH: usize = 128;

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.bytes.get(self.at..self.at + word.len()) == Some(word) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().is_some(),
            Some(b'n') => self.literal(b"null"),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            _ => false,
        }
    }

    fn array(&mut self, depth: usize) -> bool {
        self.at += 1;
        if self.eat(b']') {
            return true;
        }
        loop {
            if !self.value(depth + 1) {
                return false;
            }
            if self.eat(b']') {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    fn object(&mut self, depth: usize) -> bool {
        self.at += 1;
        if self.eat(b'}') {
            return true;
        }
        let mut previous: Option<std::borrow::Cow<'a, [u8]>> = None;
        loop {
            let Some(key) = self.string() else { return false };
            if previous.as_deref().is_some_and(|p| p >= key.as_ref()) {
                return false;
            }
            previous = Some(key);
            if !self.eat(b':') || !self.value(depth + 1) {
                return false;
            }
            if self.eat(b'}') {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    /// A canonical string; its decoded bytes (borrowed when it has no escape).
    fn string(&mut self) -> Option<std::borrow::Cow<'a, [u8]>> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        let mut decoded: Option<Vec<u8>> = None;
        loop {
            let b = self.peek()?;
            match b {
                b'"' => {
                    let raw = &self.bytes[start..self.at];
                    self.at += 1;
                    return Some(match decoded {
                        Some(d) => std::borrow::Cow::Owned(d),
                        None => std::borrow::Cow::Borrowed(raw),
                    });
                }
                0..=0x1f => return None,
                b'\\' => {
                    let d = decoded.get_or_insert_with(|| self.bytes[start..self.at].to_vec());
                    let escape = *self.bytes.get(self.at + 1)?;
                    let byte = match escape {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            // Only `\u00xx` in lowercase hex, for the control characters
                            // without a short escape.
                            let digits = self.bytes.get(self.at + 2..self.at + 6)?;
                            let (b'0', b'0', hi @ (b'0' | b'1'), lo) =
                                (digits[0], digits[1], digits[2], digits[3])
                            else {
                                return None;
                            };
                            let low = match lo {
                                b'0'..=b'9' => lo - b'0',
                                b'a'..=b'f' => lo - b'a' + 10,
                                _ => return None,
                            };
                            let value = (hi - b'0') * 16 + low;
                            if matches!(value, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                return None;
                            }
                            d.push(value);
                            self.at += 6;
                            continue;
                        }
                        _ => return None,
                    };
                    d.push(byte);
                    self.at += 2;
                }
                _ => {
                    if let Some(d) = decoded.as_mut() {
                        d.push(b);
                    }
                    self.at += 1;
                }
            }
        }
    }

    /// An integer in shortest form within `i64::MIN..=u64::MAX`.
    fn integer(&mut self) -> bool {
        let negative = self.eat(b'-');
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        let digits = &self.bytes[start..self.at];
        if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
            return false;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return false;
        }
        let Ok(text) = std::str::from_utf8(digits) else { return false };
        if negative {
            text != "0" && format!("-{text}").parse::<i64>().is_ok()
        } else {
            text.parse::<u64>().is_ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Envelope, to_canonical_bytes};

    const NOTE: Schema = Schema { name: "test.note", version: 1, features: &[] };

    #[derive(Debug, PartialEq, serde::Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Note {
        text: String,
        n: i64,
        tags: Vec<String>,
    }

    #[test]
    fn canonical_bytes_are_recognised_and_others_refused() {
        for value in [
            serde_json::json!({"a": 1, "b": [true, false, null, -5, 18446744073709551615u64], "c": {"": "x\u{1}\n\"\\/é"}}),
            serde_json::json!({}),
            serde_json::json!({"k": -9223372036854775808i64, "ｍ": "😀"}),
        ] {
            let bytes = to_canonical_bytes(&value).unwrap();
            assert!(is_canonical(&bytes), "{}", String::from_utf8_lossy(&bytes));
        }
        for bad in [
            &br#"{"b":1,"a":2}"#[..],
            br#"{"a":1,"a":2}"#,
            br#"{ "a":1}"#,
            br#"{"a":1.0}"#,
            br#"{"a":01}"#,
            br#"{"a":-0}"#,
            br#"{"a":18446744073709551616}"#,
            br#"{"a":"\u001B"}"#,
            br#"{"a":"\u000a"}"#,
            br#"{"a":"\/"}"#,
            br#"{"a":"x"}x"#,
            br#"[1]"#,
            br#"{"a":tru}"#,
        ] {
            assert!(!is_canonical(bad), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// The fast path gives the full path's payload, and anything else goes to the full path
    /// (so its errors are the same).
    #[test]
    fn payloads_equal_the_full_paths() {
        let note = Note { text: "héllo \"q\"\n".into(), n: -3, tags: vec!["a".into()] };
        let bytes = Envelope::seal(&NOTE, vec![], &note).unwrap().to_bytes();
        assert!(fast::<Note>(&bytes, &NOTE).is_some());
        assert_eq!(load_payload_as::<Note>(&bytes, &NOTE).unwrap(), note);
        // One byte changed anywhere: never accepted by either path.
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            assert!(fast::<Note>(&bad, &NOTE).is_none(), "byte {at}");
            assert!(load_payload_as::<Note>(&bad, &NOTE).is_err(), "byte {at}");
        }
        let other = Schema { name: "test.note", version: 2, features: &[] };
        assert!(load_payload_as::<Note>(&bytes, &other).is_err());
    }
}
