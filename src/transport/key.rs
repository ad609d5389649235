//! [`ObjectKey`]: a validated object name, safe both as an S3 key and as a relative path.
//!
//! # Invariants
//! A key is 1 to 1,024 bytes of UTF-8 made of `/`-separated segments; no segment is empty
//! (so no leading, trailing or doubled `/`), `.` or `..`; no control character and no
//! backslash. So a key joined under a directory store's root never leaves it, and an S3 key
//! never needs normalising.

use std::fmt;
use std::str::FromStr;

use super::Error;

/// The longest key S3 accepts, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 1024;

/// A validated object key such as `cache/owner/repo/v1/snapshot-abc`.
///
/// Keys are relative to the store (a directory store's root, an S3 store's prefix).
///
/// ```
/// use strata::transport::ObjectKey;
/// let key: ObjectKey = "cache/owner/repo/key-1".parse().unwrap();
/// assert_eq!(key.to_string(), "cache/owner/repo/key-1");
/// assert_eq!(key.to_string().parse::<ObjectKey>().unwrap(), key);
/// assert!("../escape".parse::<ObjectKey>().is_err());
/// assert!("/absolute".parse::<ObjectKey>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey(String);

impl ObjectKey {
    /// Validates `text` as a key.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] naming the rule broken.
    pub fn new(text: impl Into<String>) -> Result<Self, Error> {
        let text = text.into();
        match violation(&text) {
            None => Ok(Self(text)),
            Some(reason) => Err(Error::InvalidKey { key: text.escape_debug().to_string(), reason }),
        }
    }

    /// The key text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn violation(text: &str) -> Option<&'static str> {
    if text.is_empty() {
        return Some("a key must not be empty");
    }
    if text.len() > MAX_KEY_BYTES {
        return Some("a key must be at most 1024 bytes");
    }
    if text.starts_with('/') {
        return Some("a key must not start with '/'");
    }
    if text.chars().any(char::is_control) {
        return Some("a key must not contain control characters");
    }
    if text.contains('\\') {
        return Some("a key must not contain a backslash");
    }
    for segment in text.split('/') {
        match segment {
            "" => return Some("a key must not contain an empty segment ('//' or a trailing '/')"),
            "." | ".." => return Some("a key must not contain a '.' or '..' segment"),
            _ => {}
        }
    }
    None
}

impl FromStr for ObjectKey {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        Self::new(text)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_keys() {
        for ok in
            ["a", "a/b/c", "cache/o/r/2cea/key-1.tzst", "unicode/ключ", "dots/.hidden", "a..b"]
        {
            assert_eq!(ObjectKey::new(ok).unwrap().as_str(), ok);
        }
        ObjectKey::new("k".repeat(MAX_KEY_BYTES)).unwrap();
    }

    #[test]
    fn rejects_unsafe_keys() {
        for bad in
            ["", "/a", "a//b", "a/", "./a", "a/./b", "../a", "a/..", "a\\b", "a\nb", "a\u{7f}b"]
        {
            let err = ObjectKey::new(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidKey { .. }), "{bad:?}: {err}");
        }
        assert!(ObjectKey::new("k".repeat(MAX_KEY_BYTES + 1)).is_err());
    }

    proptest::proptest! {
        #[test]
        fn valid_keys_round_trip_and_stay_inside_a_root(text in "[a-z./\\\\_-]{0,24}") {
            if let Ok(key) = ObjectKey::new(text.clone()) {
                proptest::prop_assert_eq!(key.to_string().parse::<ObjectKey>().unwrap(), key.clone());
                let joined = std::path::Path::new("/root").join(key.as_str());
                let mut depth = 0i32;
                for component in joined.strip_prefix("/root").unwrap().components() {
                    match component {
                        std::path::Component::Normal(_) => depth += 1,
                        other => proptest::prop_assert!(false, "{text:?} gave {other:?}"),
                    }
                }
                proptest::prop_assert!(depth >= 1);
            }
        }
    }
}
