//! The name encoding: file names and symlink texts are bytes on Linux; records are UTF-8
//! text. This module maps one to the other, injectively and without loss
//! (docs/format.md "Names").
//!
//! # The encoding
//! * Every run of bytes that is valid UTF-8 is kept as it is, except the backslash `\`,
//!   which becomes `\x5c`.
//! * Every byte that is not part of valid UTF-8 becomes `\x` and two lowercase hex digits
//!   (`bad\xe9.h` for the Latin-1 name `bad<0xE9>.h`).
//!
//! Decoding reads `\xHH` back as the byte `HH`; every other character stands for its UTF-8
//! bytes. A text is *canonical* if it is the encoding of some bytes, i.e. every `\` starts
//! `\x` plus two lowercase hex digits that name either `\` itself or a byte that is not part
//! of valid UTF-8 where it stands. [`decode`] accepts only canonical texts, so each name has
//! exactly one text and each text exactly one name.
//!
//! Why the backslash: strata never recorded a name containing a backslash before this
//! encoding ([`super::RelPath`] rejected it), so every name that an existing cache, entry,
//! snapshot or key holds keeps its recorded text byte for byte, and no text an older strata
//! wrote can be read as a different name. A real file named `a%E9` or `ax` stays as it is; a
//! real file named `a\xe9` (four ASCII characters after the `a`) is recorded as `a\x5cxe9`.
//!
//! The encoding is a function of the bytes alone: it never looks at the locale (`LANG`,
//! `LC_ALL`), so keys are the same under every locale.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Encodes `bytes` as text (see the module docs). Never fails; valid UTF-8 without a
/// backslash comes back unchanged.
///
/// ```
/// use strata::fs::name::encode;
/// assert_eq!(encode(b"lib/libz.a"), "lib/libz.a");
/// assert_eq!(encode(b"bad\xe9.h"), "bad\\xe9.h");
/// assert_eq!(encode(b"a\\b"), "a\\x5cb");
/// assert_eq!(encode("é".as_bytes()), "é");
/// ```
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\x5c");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            push_escape(&mut out, *b);
        }
    }
    out
}

/// Encodes an OS string (a file name, a path, a symlink text).
pub fn encode_os(os: &OsStr) -> String {
    encode(os.as_bytes())
}

fn push_escape(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('\\');
    out.push('x');
    out.push(char::from(HEX[usize::from(byte >> 4)]));
    out.push(char::from(HEX[usize::from(byte & 0x0f)]));
}

/// Decodes a text made by [`encode`] back to the exact bytes.
///
/// # Errors
/// The reason, if `text` is not canonical: a `\` that does not start `\x` plus two
/// lowercase hex digits, or an escape that [`encode`] would not have written (a byte that is
/// part of valid UTF-8 where it stands, other than `\`).
///
/// ```
/// use strata::fs::name::decode;
/// assert_eq!(decode("bad\\xe9.h").unwrap(), b"bad\xe9.h");
/// assert_eq!(decode("a\\x5cb").unwrap(), b"a\\b");
/// assert!(decode("a\\x41").is_err(), "`A` is never escaped");
/// assert!(decode("a\\b").is_err(), "a bare backslash");
/// ```
pub fn decode(text: &str) -> Result<Vec<u8>, &'static str> {
    let bytes = decode_lenient(text)?;
    if encode(&bytes) != text {
        return Err("a `\\x` escape of a byte that is valid UTF-8 where it stands");
    }
    Ok(bytes)
}

/// Decodes to an [`OsString`].
///
/// # Errors
/// As [`decode`].
pub fn decode_os(text: &str) -> Result<OsString, &'static str> {
    decode(text).map(OsString::from_vec)
}

/// True if `text` is canonical (see [`decode`]).
pub fn is_canonical(text: &str) -> bool {
    // Fast path: no backslash means no escape, and valid UTF-8 text encodes to itself.
    !text.contains('\\') || decode(text).is_ok()
}

/// The text of a path in reports and JSON output: the path itself when it is UTF-8 (a
/// script can open it as printed), else its encoding ([`encode`]), which shows every byte.
/// Identity and records never use this form: they use [`encode`], which is injective.
pub fn display_text(path: &Path) -> String {
    match path.to_str() {
        Some(text) => text.to_owned(),
        None => encode_os(path.as_os_str()),
    }
}

/// `serialize_with` helper: a path as [`display_text`] (serde's own impl fails on a path
/// that is not UTF-8).
///
/// # Errors
/// Those of the serializer.
pub fn serialize_path<S: serde::Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&display_text(path))
}

/// `serialize_with` helper for `Option<PathBuf>` (see [`serialize_path`]).
///
/// # Errors
/// Those of the serializer.
pub fn serialize_opt_path<S: serde::Serializer>(
    path: &Option<PathBuf>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match path {
        Some(path) => serializer.serialize_some(&display_text(path)),
        None => serializer.serialize_none(),
    }
}

/// `serialize_with` helper for a list of paths (see [`serialize_path`]).
///
/// # Errors
/// Those of the serializer.
pub fn serialize_paths<S: serde::Serializer>(
    paths: &[PathBuf],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(paths.iter().map(|p| display_text(p)))
}

/// Reads every `\xHH` as a byte, without checking that the result re-encodes to `text`.
fn decode_lenient(text: &str) -> Result<Vec<u8>, &'static str> {
    let raw = text.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let (Some(b'x'), Some(&hi), Some(&lo)) = (raw.get(i + 1), raw.get(i + 2), raw.get(i + 3))
        else {
            return Err("a backslash that does not start a `\\xHH` escape");
        };
        let (Some(hi), Some(lo)) = (lower_hex(hi), lower_hex(lo)) else {
            return Err("a `\\x` escape without two lowercase hex digits");
        };
        out.push(hi << 4 | lo);
        i += 4;
    }
    Ok(out)
}

fn lower_hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        assert_eq!(encode(b"a%E9"), "a%E9", "percent is not special");
        assert_eq!(encode(b"a\xe9"), "a\\xe9");
        assert_eq!(encode(b"a\\xe9"), "a\\x5cxe9", "a literal escape-looking name stays distinct");
        assert_eq!(encode(b"\xff\xfe"), "\\xff\\xfe");
        assert_eq!(encode("naïve/ü".as_bytes()), "naïve/ü");
        // A truncated UTF-8 sequence: each stray byte is escaped, the valid rest kept.
        assert_eq!(encode(b"\xc3x\xc3\xa9"), "\\xc3xé");
        for text in ["a\\xe9", "a\\x5cxe9", "\\xc3xé", "plain"] {
            assert_eq!(encode(&decode(text).unwrap()), text);
        }
    }

    #[test]
    fn non_canonical_texts_are_rejected() {
        for bad in
            ["\\", "a\\x", "a\\xe", "a\\xE9", "a\\xzz", "a\\u00e9", "\\x41", "\\xc3\\xa9", "\\x2f"]
        {
            assert!(decode(bad).is_err(), "{bad:?}");
            assert!(!is_canonical(bad), "{bad:?}");
        }
        assert!(is_canonical("a%E9"));
    }

    proptest! {
        #[test]
        fn round_trip_and_injective(a in proptest::collection::vec(any::<u8>(), 0..24),
                                    b in proptest::collection::vec(any::<u8>(), 0..24)) {
            let ta = encode(&a);
            prop_assert_eq!(decode(&ta).unwrap(), a.clone());
            prop_assert!(is_canonical(&ta));
            prop_assert_eq!(ta == encode(&b), a == b);
        }

        #[test]
        fn utf8_without_backslash_is_unchanged(s in "[^\\\\]{0,16}") {
            prop_assert_eq!(encode(s.as_bytes()), s);
        }
    }
}
