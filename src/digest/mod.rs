//! Digests: the hashing primitives strata uses for identity and verification.
//!
//! # Content digests (algorithm-tagged)
//!
//! A [`ContentDigest`] names its algorithm, as OCI descriptors do. Its only text form is
//! `<algorithm>:<64 lowercase hex>`:
//!
//! ```text
//! blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262   (empty input)
//! sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855   (empty input)
//! ```
//!
//! Parsing ([`FromStr`], serde) is strict: one spelling per digest. No uppercase, no
//! whitespace, no missing, doubled or unknown tag, no other length.
//!
//! [`DigestAlgorithm::Blake3`] (the `blake3` crate, multi-threaded through rayon for large
//! inputs, see [`RAYON_THRESHOLD_BYTES`]) is the default algorithm for file content: entries,
//! artifact manifests, snapshots and L0 archives write `blake3:` content records
//! (docs/format.md "Content records"); [`DigestAlgorithm::Sha256`] stays wherever a format or
//! an outside specification requires it (snapshot key digests, the source hash, SigV4, the
//! record envelope's `content_digest`) and for users who must stay on SHA-256
//! (`--digest sha256`).
//!
//! **Legacy rule.** Records written by releases before the content layer hold digests as bare
//! 64-hex with no tag; those are always SHA-256. Only [`ContentDigest::parse_legacy`] (and its
//! serde form [`ContentDigest::deserialize_legacy`]) accepts them; `FromStr` and `Deserialize`
//! reject untagged text ([`Error::Untagged`]) and Display always writes the tag, so a new record
//! can never be written untagged.
//!
//! [`ContentHasher`] is the streaming form for either algorithm (with a byte counter and
//! [`io::Write`]); [`ContentDigest::of_bytes`] and [`ContentDigest::of_reader`] are the
//! one-shot forms.
//!
//! # SHA-256 digests (untagged)
//!
//! [`Sha256Digest`] is a validated 32-byte SHA-256 value. Its text form is always 64
//! lowercase hex characters; [`FromStr`] accepts nothing else (no uppercase, no `sha256:`
//! prefix, no whitespace), so two spellings of one digest cannot exist. Records that want an
//! algorithm tag (`sha256:<hex>`) use [`Sha256Digest::to_prefixed`] /
//! [`Sha256Digest::parse_prefixed`]. [`Hasher`] is its streaming form.
//!
//! SHA-256 uses `ring` (already linked for TLS), which picks SHA-NI, AVX2 or SSSE3 code at run
//! time, so no `unsafe` is needed here. Measured over 256 MiB in memory on one core of a Xeon with
//! SHA-NI (release build): `ring` 1.22–1.27 GB/s, `sha2` 1.27 GB/s; without SHA-NI, `sha2` falls
//! back to its portable code (0.26 GB/s here, ≈ 0.12 GB/s on the 2-core CI runner the content layer
//! was measured on) while `ring` keeps vector code (≈ 0.15–0.23 GB/s there). `ring` is therefore
//! the faster choice on both kinds of machine, and the only SHA-256 in strata.
//!
//! Hashing *files* lives in [`crate::fs`] (only that module touches the filesystem); this
//! module hashes bytes and readers.

use std::fmt;
use std::io::{self, Read};
use std::str::FromStr;

mod content;
mod fields;

pub use content::{
    CONTENT_DIGEST_LEN, ContentDigest, ContentHasher, DigestAlgorithm, LARGE_INPUT_BYTES,
    RAYON_THRESHOLD_BYTES,
};
pub use fields::{FieldHasher, LengthOrder};

/// Length in bytes of a SHA-256 digest.
pub const SHA256_LEN: usize = 32;

/// A SHA-256 digest.
///
/// Display and serde use 64 lowercase hex characters.
///
/// ```
/// use strata::digest::Sha256Digest;
/// let d = Sha256Digest::of_bytes(b"");
/// assert_eq!(d.to_string(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
/// assert_eq!(d.to_string().parse::<Sha256Digest>().unwrap(), d);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; SHA256_LEN]);

/// Why a string is not a digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The hex part is not exactly 64 characters long.
    #[error("digest {text:?} has {len} hex characters; a digest is 64 lowercase hex characters")]
    Length {
        /// The offending text (truncated to 80 characters).
        text: String,
        /// The length of its hex part, in characters.
        len: usize,
    },
    /// The text contains a character other than `0-9a-f`.
    #[error("digest {text:?} contains {found:?}; only lowercase hex (0-9, a-f) is allowed")]
    Charset {
        /// The offending text (truncated to 80 characters).
        text: String,
        /// The first bad character.
        found: char,
    },
    /// The `sha256:` algorithm prefix is missing.
    #[error("digest {text:?} lacks the \"sha256:\" prefix")]
    Prefix {
        /// The offending text (truncated to 80 characters).
        text: String,
    },
    /// A [`ContentDigest`] without its `<algorithm>:` tag (bare hex is accepted only by
    /// [`ContentDigest::parse_legacy`]).
    #[error(
        "digest {text:?} has no algorithm tag; write \"blake3:<64 hex>\" or \"sha256:<64 hex>\""
    )]
    Untagged {
        /// The offending text (truncated to 80 characters).
        text: String,
    },
    /// The algorithm tag or name is not one strata knows.
    #[error(
        "digest {text:?} names the unknown algorithm {name:?}; known algorithms: blake3, sha256 (lowercase)"
    )]
    Algorithm {
        /// The offending text (truncated to 80 characters).
        text: String,
        /// The algorithm name as written (truncated to 80 characters).
        name: String,
    },
}

fn clip(text: &str) -> String {
    text.chars().take(80).collect()
}

impl Sha256Digest {
    /// The digest of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        let mut h = Hasher::new();
        h.update(bytes);
        h.finish()
    }

    /// The digest of everything `reader` yields, and the number of bytes read.
    ///
    /// # Errors
    /// Any read error of `reader`, unchanged.
    pub fn of_reader(mut reader: impl Read) -> io::Result<(Self, u64)> {
        let mut h = Hasher::new();
        with_buffer(|buf| {
            loop {
                match reader.read(buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => h.update(buf.get(..n).unwrap_or_default()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        })?;
        let len = h.len();
        Ok((h.finish(), len))
    }

    /// Wraps raw digest bytes.
    pub fn from_bytes(bytes: [u8; SHA256_LEN]) -> Self {
        Self(bytes)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; SHA256_LEN] {
        &self.0
    }

    /// 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        to_hex32(&self.0)
    }

    /// `sha256:<64 hex>`, the tagged form used in records (`docs/records.md`).
    pub fn to_prefixed(&self) -> String {
        format!("sha256:{}", self.to_hex())
    }

    /// Parses the tagged form `sha256:<64 lowercase hex>`.
    ///
    /// # Errors
    /// [`Error::Prefix`] without the tag; otherwise as [`FromStr`].
    pub fn parse_prefixed(text: &str) -> Result<Self, Error> {
        match text.strip_prefix("sha256:") {
            Some(hex) => hex.parse(),
            None => Err(Error::Prefix { text: clip(text) }),
        }
    }

    /// The first `n` hex characters (for short display only; never for identity).
    pub fn short(&self, n: usize) -> String {
        let mut s = self.to_hex();
        s.truncate(n);
        s
    }
}

impl FromStr for Sha256Digest {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        parse_hex32(text, text).map(Self)
    }
}

/// 64 lowercase hex characters for 32 bytes.
fn to_hex32(bytes: &[u8; 32]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(64);
    for &b in bytes {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

/// Parses exactly 64 lowercase hex characters; errors quote `whole` (the full text the hex
/// came from, tag included).
fn parse_hex32(hex: &str, whole: &str) -> Result<[u8; 32], Error> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    // The common case in one pass over the bytes; anything else is diagnosed below.
    if hex.len() == 64 {
        let mut out = [0u8; 32];
        let parsed =
            out.iter_mut().zip(hex.as_bytes().chunks_exact(2)).all(|(slot, pair)| match pair {
                [high, low] => match (nibble(*high), nibble(*low)) {
                    (Some(high), Some(low)) => {
                        *slot = (high << 4) | low;
                        true
                    }
                    _ => false,
                },
                _ => false,
            });
        if parsed {
            return Ok(out);
        }
    }
    let len = hex.chars().count();
    if len != 64 {
        return Err(Error::Length { text: clip(whole), len });
    }
    if let Some(found) = hex.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(Error::Charset { text: clip(whole), found });
    }
    // 64 characters, all lowercase hex: the fast path above took them.
    Err(Error::Length { text: clip(whole), len })
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Digest({})", self.to_hex())
    }
}

impl serde::Serialize for Sha256Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for Sha256Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Size of the per-thread I/O buffer used for hashing and copying, in bytes.
pub const BUFFER_BYTES: usize = 256 * 1024;

thread_local! {
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's reusable I/O buffer of [`BUFFER_BYTES`]. Reusing it avoids a
/// fresh 256 KiB allocation (an `mmap` and its page faults) per file, which dominated
/// hashing many small files. A nested call gets a temporary buffer instead.
pub fn with_buffer<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    with_buffer_of(BUFFER_BYTES, f)
}

/// Runs `f` with exactly `len` bytes of this thread's reusable I/O buffer (grown on first
/// use and kept: a thread that once read large chunks keeps that much memory, at most a few
/// MiB). A nested call gets a temporary buffer instead.
pub fn with_buffer_of<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0);
            }
            f(buf.get_mut(..len).unwrap_or_default())
        }
        Err(_) => f(&mut vec![0u8; len]),
    })
}

/// Streaming SHA-256 with a byte counter.
#[derive(Clone)]
pub struct Hasher {
    inner: ring::digest::Context,
    len: u64,
}

impl Default for Hasher {
    fn default() -> Self {
        Self { inner: ring::digest::Context::new(&ring::digest::SHA256), len: 0 }
    }
}

impl Hasher {
    /// A fresh hasher.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
        self.len += bytes.len() as u64;
    }

    /// Bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if nothing was fed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The digest of everything fed.
    pub fn finish(self) -> Sha256Digest {
        let out = self.inner.finish();
        let mut bytes = [0u8; SHA256_LEN];
        bytes.copy_from_slice(out.as_ref());
        Sha256Digest(bytes)
    }
}

impl io::Write for Hasher {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_vectors() {
        assert_eq!(
            Sha256Digest::of_bytes(b"abc").to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let (d, n) = Sha256Digest::of_reader(&b"abc"[..]).unwrap();
        assert_eq!(n, 3);
        assert_eq!(d, Sha256Digest::of_bytes(b"abc"));
    }

    #[test]
    fn rejects_bad_text() {
        let good = Sha256Digest::of_bytes(b"x").to_hex();
        assert!(matches!(good.to_uppercase().parse::<Sha256Digest>(), Err(Error::Charset { .. })));
        assert!(matches!(good[..63].parse::<Sha256Digest>(), Err(Error::Length { len: 63, .. })));
        assert!(matches!(Sha256Digest::parse_prefixed(&good), Err(Error::Prefix { .. })));
        assert_eq!(Sha256Digest::parse_prefixed(&format!("sha256:{good}")).unwrap().to_hex(), good);
        // 64 characters but multi-byte: must not panic.
        let weird = "é".repeat(32);
        assert!(weird.parse::<Sha256Digest>().is_err());
    }

    proptest! {
        #[test]
        fn hex_round_trip(bytes in proptest::array::uniform32(any::<u8>())) {
            let d = Sha256Digest::from_bytes(bytes);
            prop_assert_eq!(d.to_hex().parse::<Sha256Digest>().unwrap(), d);
            prop_assert_eq!(Sha256Digest::parse_prefixed(&d.to_prefixed()).unwrap(), d);
        }
    }
}
