//! SHA-256 digests: the one hashing primitive strata uses for identity and verification.
//!
//! [`Sha256Digest`] is a validated 32-byte value. Its text form is always 64 lowercase hex
//! characters; [`FromStr`] accepts nothing else (no uppercase, no `sha256:` prefix, no
//! whitespace), so two spellings of one digest cannot exist. Records that want an algorithm
//! tag (`sha256:<hex>`) use [`Sha256Digest::to_prefixed`] / [`Sha256Digest::parse_prefixed`].
//!
//! [`Hasher`] is the streaming form. `sha2` picks the SHA-NI implementation at run time on
//! CPUs that have it (about 1.5–2 GB/s per core here), so no `unsafe` is needed.
//!
//! Hashing *files* lives in [`crate::fs`] (only that module touches the filesystem); this
//! module hashes bytes and readers.

use std::fmt;
use std::io::{self, Read};
use std::str::FromStr;

use sha2::Digest as _;

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
    /// The text is not exactly 64 characters long.
    #[error(
        "digest {text:?} has {len} characters; a SHA-256 digest is 64 lowercase hex characters"
    )]
    Length {
        /// The offending text (truncated to 80 characters).
        text: String,
        /// Its length in characters.
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
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(SHA256_LEN * 2);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        s
    }

    /// `sha256:<64 hex>`, the tagged form used in records (DESIGN.md §4).
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
        let len = text.chars().count();
        if len != SHA256_LEN * 2 {
            return Err(Error::Length { text: clip(text), len });
        }
        let mut out = [0u8; SHA256_LEN];
        let bytes = text.as_bytes();
        for (i, slot) in out.iter_mut().enumerate() {
            let mut value = 0u8;
            for offset in 0..2 {
                let c = bytes.get(i * 2 + offset).copied().unwrap_or(b'?');
                let nibble = match c {
                    b'0'..=b'9' => c - b'0',
                    b'a'..=b'f' => c - b'a' + 10,
                    _ => {
                        return Err(Error::Charset { text: clip(text), found: char::from(c) });
                    }
                };
                value = (value << 4) | nibble;
            }
            *slot = value;
        }
        Ok(Self(out))
    }
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
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < BUFFER_BYTES {
                buf.resize(BUFFER_BYTES, 0);
            }
            f(&mut buf)
        }
        Err(_) => f(&mut vec![0u8; BUFFER_BYTES]),
    })
}

/// Streaming SHA-256 with a byte counter.
#[derive(Clone, Default)]
pub struct Hasher {
    inner: sha2::Sha256,
    len: u64,
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
        let out = self.inner.finalize();
        let mut bytes = [0u8; SHA256_LEN];
        bytes.copy_from_slice(out.as_slice());
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
