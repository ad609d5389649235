//! Algorithm-tagged content digests: [`DigestAlgorithm`], [`ContentDigest`], [`ContentHasher`].
//!
//! See the [module docs](super) for the text forms and the legacy rule.

use std::fmt;
use std::io::{self, Read};
use std::str::FromStr;

use serde::Deserialize as _;

use super::{Error, Sha256Digest, clip, parse_hex32, to_hex32, with_buffer, with_buffer_of};

/// Length in bytes of every [`ContentDigest`] (BLAKE3's default output and SHA-256 alike).
pub const CONTENT_DIGEST_LEN: usize = 32;

/// A single [`ContentHasher::update`] of at least this many bytes of BLAKE3 input is hashed
/// with `blake3::Hasher::update_rayon` (all cores of rayon's pool); smaller ones on the
/// calling thread.
///
/// Measured on the 2-core Xeon (AVX-512, SHA-NI) these figures come from, with other builds
/// running on the second core (release build, `blake3` 1.8.7): one thread hashes 4.6–5.3 GB/s
/// at every size from 16 KiB to 4 MiB, while `update_rayon` reached only 2.0 GB/s at 32 KiB,
/// 2.9 GB/s at 64 KiB, 4.1 GB/s at 128 KiB and 4.5–4.7 GB/s from 256 KiB to 4 MiB (the thread
/// hand-off costs more than a busy second core gives back); over 256 MiB with the second core
/// less loaded, `update_rayon` gave 4.6 GB/s against 3.7 GB/s single-threaded. 1 MiB keeps
/// every small file on one thread (no hand-off, no contention with a caller that already hashes
/// files in parallel) and lets large files use idle cores.
pub const RAYON_THRESHOLD_BYTES: usize = 1024 * 1024;

/// Read size [`ContentHasher::update_reader`] switches to once a BLAKE3 input proves larger
/// than the per-thread buffer, so that each update reaches [`RAYON_THRESHOLD_BYTES`].
const LARGE_READ_BYTES: usize = 4 * RAYON_THRESHOLD_BYTES;

/// Inputs of at least this many bytes (when the size is known up front) are read in
/// 4 MiB chunks and hashed on rayon's pool; smaller ones in
/// [`super::BUFFER_BYTES`] chunks on the calling thread. Measured on the 2-core Xeon over
/// 500 files of 2 MiB hashed two at a time (one per core): 256 KiB reads without rayon
/// 0.175 s, 1 MiB reads with rayon 0.189 s, 4 MiB reads with rayon 0.211 s (`b3sum`, mmap,
/// 0.16 s); a caller that already spreads files over the cores gains nothing from splitting
/// a small file, while one large file needs rayon to use more than one core.
pub const LARGE_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// A content digest algorithm.
///
/// Text names (Display, [`FromStr`], serde): `blake3`, `sha256`, lowercase, nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DigestAlgorithm {
    /// BLAKE3 with its default 32-byte output (the `blake3` crate).
    Blake3,
    /// SHA-256 (FIPS 180-4).
    Sha256,
}

impl DigestAlgorithm {
    /// Every algorithm, in text-name order.
    pub const ALL: [DigestAlgorithm; 2] = [DigestAlgorithm::Blake3, DigestAlgorithm::Sha256];

    /// The text name: `blake3` or `sha256`.
    pub fn name(self) -> &'static str {
        match self {
            DigestAlgorithm::Blake3 => "blake3",
            DigestAlgorithm::Sha256 => "sha256",
        }
    }
}

impl fmt::Display for DigestAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DigestAlgorithm {
    type Err = Error;

    /// Parses `blake3` or `sha256` exactly (no other case, no whitespace).
    ///
    /// # Errors
    /// [`Error::Algorithm`] for any other text.
    fn from_str(text: &str) -> Result<Self, Error> {
        DigestAlgorithm::ALL
            .into_iter()
            .find(|a| a.name() == text)
            .ok_or_else(|| Error::Algorithm { text: clip(text), name: clip(text) })
    }
}

impl serde::Serialize for DigestAlgorithm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for DigestAlgorithm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A digest of content that names its algorithm: `<algorithm>:<64 lowercase hex>`, as OCI
/// descriptors write it (`blake3:af1349b9…`, `sha256:e3b0c442…`).
///
/// Display, [`FromStr`] and serde use only that tagged form, so one digest has exactly one
/// spelling. Text written by the current release without a tag (bare 64 hex, always SHA-256)
/// parses only through [`ContentDigest::parse_legacy`] /
/// [`ContentDigest::deserialize_legacy`], never through [`FromStr`] or `Deserialize`, so a
/// new record cannot be written or read untagged by accident.
///
/// ```
/// use strata::digest::{ContentDigest, DigestAlgorithm};
/// let d = ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"");
/// assert_eq!(
///     d.to_string(),
///     "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
/// );
/// assert_eq!(d.to_string().parse::<ContentDigest>().unwrap(), d);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentDigest {
    algorithm: DigestAlgorithm,
    bytes: [u8; CONTENT_DIGEST_LEN],
}

impl ContentDigest {
    /// Wraps raw digest bytes produced by `algorithm`.
    pub fn from_bytes(algorithm: DigestAlgorithm, bytes: [u8; CONTENT_DIGEST_LEN]) -> Self {
        Self { algorithm, bytes }
    }

    /// The digest of `bytes` under `algorithm` (BLAKE3 input of at least
    /// [`RAYON_THRESHOLD_BYTES`] is hashed on rayon's pool).
    pub fn of_bytes(algorithm: DigestAlgorithm, bytes: &[u8]) -> Self {
        let mut h = ContentHasher::new(algorithm);
        h.update(bytes);
        h.finish()
    }

    /// The digest under `algorithm` of everything `reader` yields, and the number of bytes
    /// read. See [`ContentHasher::update_reader`] for how it reads.
    ///
    /// # Errors
    /// Any read error of `reader`, unchanged.
    pub fn of_reader(algorithm: DigestAlgorithm, reader: impl Read) -> io::Result<(Self, u64)> {
        let mut h = ContentHasher::new(algorithm);
        let len = h.update_reader(reader)?;
        Ok((h.finish(), len))
    }

    /// The algorithm that produced this digest.
    pub fn algorithm(&self) -> DigestAlgorithm {
        self.algorithm
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; CONTENT_DIGEST_LEN] {
        &self.bytes
    }

    /// The 64 lowercase hex characters, without the algorithm tag (for display and file
    /// names only: a record stores the tagged [`Display`](fmt::Display) form).
    pub fn to_hex(&self) -> String {
        to_hex32(&self.bytes)
    }

    /// The same value as a [`Sha256Digest`], if the algorithm is SHA-256.
    pub fn to_sha256(&self) -> Option<Sha256Digest> {
        match self.algorithm {
            DigestAlgorithm::Sha256 => Some(Sha256Digest::from_bytes(self.bytes)),
            DigestAlgorithm::Blake3 => None,
        }
    }

    /// Parses a digest read from a record written by the current release or later: the
    /// tagged form, or bare 64 lowercase hex, which those records hold and which is always
    /// SHA-256. Only readers of such records call this; everything else uses [`FromStr`].
    ///
    /// # Errors
    /// As [`FromStr`] for text with a `:`; [`Error::Length`] / [`Error::Charset`] for
    /// untagged text that is not 64 lowercase hex.
    pub fn parse_legacy(text: &str) -> Result<Self, Error> {
        if text.contains(':') {
            return text.parse();
        }
        let bytes = parse_hex32(text, text)?;
        Ok(Self::from_bytes(DigestAlgorithm::Sha256, bytes))
    }

    /// Serde `deserialize_with` for fields of records that may predate tagging: accepts what
    /// [`ContentDigest::parse_legacy`] accepts. Serialization always writes the tagged form.
    ///
    /// # Errors
    /// A string [`ContentDigest::parse_legacy`] rejects, or a non-string value.
    pub fn deserialize_legacy<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse_legacy(&text).map_err(serde::de::Error::custom)
    }
}

impl From<Sha256Digest> for ContentDigest {
    fn from(d: Sha256Digest) -> Self {
        Self::from_bytes(DigestAlgorithm::Sha256, *d.as_bytes())
    }
}

impl FromStr for ContentDigest {
    type Err = Error;

    /// Parses exactly `<algorithm>:<64 lowercase hex>` with `algorithm` one of `blake3`,
    /// `sha256`.
    ///
    /// # Errors
    /// [`Error::Untagged`] without a `:`; [`Error::Algorithm`] for a tag other than a known
    /// name (uppercase, whitespace or empty included); [`Error::Length`] / [`Error::Charset`]
    /// when the rest is not 64 lowercase hex (a doubled tag is a length error).
    fn from_str(text: &str) -> Result<Self, Error> {
        let Some((name, hex)) = text.split_once(':') else {
            return Err(Error::Untagged { text: clip(text) });
        };
        let algorithm = DigestAlgorithm::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| Error::Algorithm { text: clip(text), name: clip(name) })?;
        Ok(Self::from_bytes(algorithm, parse_hex32(hex, text)?))
    }
}

impl fmt::Display for ContentDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm.name(), self.to_hex())
    }
}

impl fmt::Debug for ContentDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentDigest({self})")
    }
}

impl serde::Serialize for ContentDigest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ContentDigest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Streaming digest under either [`DigestAlgorithm`], with a byte counter.
///
/// Feeding the same bytes in any chunking gives the same digest as
/// [`ContentDigest::of_bytes`].
#[derive(Clone)]
pub struct ContentHasher {
    state: State,
    len: u64,
}

#[derive(Clone)]
enum State {
    // Boxed: blake3's hasher is about 1.9 KB, ring's SHA-256 context a few hundred bytes.
    Blake3(Box<blake3::Hasher>),
    Sha256(Box<super::Hasher>),
}

impl ContentHasher {
    /// A fresh hasher for `algorithm`.
    pub fn new(algorithm: DigestAlgorithm) -> Self {
        let state = match algorithm {
            DigestAlgorithm::Blake3 => State::Blake3(Box::new(blake3::Hasher::new())),
            DigestAlgorithm::Sha256 => State::Sha256(Box::new(super::Hasher::new())),
        };
        Self { state, len: 0 }
    }

    /// The algorithm this hasher computes.
    pub fn algorithm(&self) -> DigestAlgorithm {
        match self.state {
            State::Blake3(_) => DigestAlgorithm::Blake3,
            State::Sha256(_) => DigestAlgorithm::Sha256,
        }
    }

    /// Feeds `bytes`. BLAKE3 input of at least [`RAYON_THRESHOLD_BYTES`] in one call is
    /// hashed on rayon's pool.
    pub fn update(&mut self, bytes: &[u8]) {
        match &mut self.state {
            State::Blake3(h) if bytes.len() >= RAYON_THRESHOLD_BYTES => {
                h.update_rayon(bytes);
            }
            State::Blake3(h) => {
                h.update(bytes);
            }
            State::Sha256(h) => h.update(bytes),
        }
        self.len += bytes.len() as u64;
    }

    /// Feeds everything `reader` yields and returns how many bytes that was.
    ///
    /// Reads through this thread's reusable buffer ([`super::BUFFER_BYTES`]); a BLAKE3 input
    /// that fills it switches to reads of 4 × [`RAYON_THRESHOLD_BYTES`] (the same reused
    /// buffer, grown) so that large files use rayon's pool; nothing is allocated per input.
    ///
    /// # Errors
    /// Any read error of `reader` other than `Interrupted` (which is retried), unchanged;
    /// the hasher then holds a prefix of the input and should be dropped.
    pub fn update_reader(&mut self, reader: impl Read) -> io::Result<u64> {
        self.update_reader_sized(reader, None)
    }

    /// [`ContentHasher::update_reader`] for an input whose size is known (`size_hint`, in
    /// bytes, e.g. from `fstat`): BLAKE3 input of at least [`LARGE_INPUT_BYTES`] is read in
    /// large chunks and hashed on rayon's pool from the start; smaller input is read through
    /// the 256 KiB thread buffer and hashed on the calling thread. Without a hint it behaves
    /// like [`ContentHasher::update_reader`]. The hint only chooses the chunk size: the
    /// digest covers exactly what `reader` yields.
    ///
    /// # Errors
    /// As [`ContentHasher::update_reader`].
    pub fn update_reader_sized(
        &mut self,
        mut reader: impl Read,
        size_hint: Option<u64>,
    ) -> io::Result<u64> {
        let start = self.len;
        let blake3 = matches!(self.state, State::Blake3(_));
        if let Some(size) = size_hint {
            let chunk = if blake3 && size >= LARGE_INPUT_BYTES {
                LARGE_READ_BYTES
            } else {
                super::BUFFER_BYTES
            };
            with_buffer_of(chunk, |buf| -> io::Result<()> {
                loop {
                    let n = read_full(&mut reader, buf)?;
                    self.update(buf.get(..n).unwrap_or_default());
                    if n < buf.len() {
                        return Ok(());
                    }
                }
            })?;
            return Ok(self.len - start);
        }
        let grow = with_buffer(|buf| -> io::Result<bool> {
            loop {
                let n = read_full(&mut reader, buf)?;
                self.update(buf.get(..n).unwrap_or_default());
                if n < buf.len() {
                    return Ok(false);
                }
                if matches!(self.state, State::Blake3(_)) {
                    return Ok(true);
                }
            }
        })?;
        if grow {
            with_buffer_of(LARGE_READ_BYTES, |large| -> io::Result<()> {
                loop {
                    let n = read_full(&mut reader, large)?;
                    self.update(large.get(..n).unwrap_or_default());
                    if n < large.len() {
                        return Ok(());
                    }
                }
            })?;
        }
        Ok(self.len - start)
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
    pub fn finish(self) -> ContentDigest {
        match self.state {
            State::Blake3(h) => {
                ContentDigest::from_bytes(DigestAlgorithm::Blake3, *h.finalize().as_bytes())
            }
            State::Sha256(h) => ContentDigest::from(h.finish()),
        }
    }
}

impl io::Write for ContentHasher {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads until `buf` is full or `reader` ends; returns the bytes read. Retries `Interrupted`.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..).filter(|r| !r.is_empty()) {
        match reader.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The input of the official BLAKE3 test vectors: bytes 0, 1, …, 250, 0, 1, ….
    fn vector_input(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    const ABC_SHA256: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    /// A reader that yields at most `step` bytes per read (exercises short reads).
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            let (head, tail) = self.data.split_at(n);
            buf.get_mut(..n).unwrap_or_default().copy_from_slice(head);
            self.data = tail;
            Ok(n)
        }
    }

    /// The size hint only picks the chunk size: every hint, right or wrong, gives the
    /// digest of exactly the bytes read, for both algorithms, around both thresholds.
    #[test]
    fn size_hinted_reads_hash_exactly_what_is_read() {
        let large = usize::try_from(LARGE_INPUT_BYTES).unwrap();
        let buf = crate::digest::BUFFER_BYTES;
        for len in [0, 1, buf - 1, buf, buf + 1, large + 4097] {
            let input = vector_input(len);
            for algorithm in DigestAlgorithm::ALL {
                let want = ContentDigest::of_bytes(algorithm, &input);
                for hint in [None, Some(0), Some(len as u64), Some(LARGE_INPUT_BYTES * 2)] {
                    let mut h = ContentHasher::new(algorithm);
                    let reader = Trickle { data: &input, step: 70_000 };
                    let n = h.update_reader_sized(reader, hint).unwrap();
                    assert_eq!((h.finish(), n), (want, len as u64), "{algorithm} {len} {hint:?}");
                }
            }
        }
    }

    #[test]
    fn blake3_official_vectors() {
        // From BLAKE3's test_vectors.json ("hash", first 32 bytes of the extended output).
        let cases = [
            (0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"),
            (1023, "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11"),
            (102_400, "bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085"),
        ];
        for (len, hex) in cases {
            let input = vector_input(len);
            let d = ContentDigest::of_bytes(DigestAlgorithm::Blake3, &input);
            assert_eq!(d.to_string(), format!("blake3:{hex}"), "input length {len}");
            let (r, n) = ContentDigest::of_reader(DigestAlgorithm::Blake3, &input[..]).unwrap();
            assert_eq!((r, n), (d, len as u64), "of_reader, input length {len}");
        }
    }

    #[test]
    fn blake3_rayon_path_equals_single_thread() {
        // Above the threshold: of_bytes goes through update_rayon; blake3::hash and updates
        // of 4000 bytes stay on one thread; of_reader grows its reads past the threshold.
        let input = vector_input(3 * RAYON_THRESHOLD_BYTES + 17);
        let single = *blake3::hash(&input).as_bytes();
        let parallel = ContentDigest::of_bytes(DigestAlgorithm::Blake3, &input);
        assert_eq!(parallel.as_bytes(), &single);
        let mut h = ContentHasher::new(DigestAlgorithm::Blake3);
        input.chunks(4000).for_each(|c| h.update(c));
        assert_eq!(h.len(), input.len() as u64);
        assert_eq!(h.finish(), parallel);
        let trickle = Trickle { data: &input, step: 100_000 };
        let (r, n) = ContentDigest::of_reader(DigestAlgorithm::Blake3, trickle).unwrap();
        assert_eq!((r, n), (parallel, input.len() as u64));
        // Exactly one buffer, then end of input.
        let buffer = vector_input(super::super::BUFFER_BYTES);
        let (r, n) = ContentDigest::of_reader(DigestAlgorithm::Blake3, &buffer[..]).unwrap();
        assert_eq!((r.as_bytes(), n), (blake3::hash(&buffer).as_bytes(), buffer.len() as u64));
    }

    #[test]
    fn sha256_abc() {
        let d = ContentDigest::of_bytes(DigestAlgorithm::Sha256, b"abc");
        assert_eq!(d.to_string(), format!("sha256:{ABC_SHA256}"));
        assert_eq!(d.algorithm(), DigestAlgorithm::Sha256);
        assert_eq!(d.to_sha256(), Some(Sha256Digest::of_bytes(b"abc")));
        assert_eq!(ContentDigest::from(Sha256Digest::of_bytes(b"abc")), d);
        assert_eq!(ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"abc").to_sha256(), None);
        let (r, n) = ContentDigest::of_reader(DigestAlgorithm::Sha256, &b"abc"[..]).unwrap();
        assert_eq!((r, n), (d, 3));
    }

    #[test]
    fn algorithm_names() {
        for a in DigestAlgorithm::ALL {
            assert_eq!(a.to_string().parse::<DigestAlgorithm>().unwrap(), a);
            assert_eq!(serde_json::to_string(&a).unwrap(), format!("\"{}\"", a.name()));
        }
        assert_eq!(DigestAlgorithm::Blake3.to_string(), "blake3");
        assert_eq!(DigestAlgorithm::Sha256.to_string(), "sha256");
        for bad in ["BLAKE3", "Sha256", "sha-256", " blake3", "blake3 ", "", "md5"] {
            let err = bad.parse::<DigestAlgorithm>().unwrap_err();
            assert!(matches!(err, Error::Algorithm { .. }), "{bad:?}: {err:?}");
            assert!(serde_json::from_str::<DigestAlgorithm>(&format!("{bad:?}")).is_err());
        }
    }

    #[test]
    fn rejects_every_malformed_spelling() {
        let hex = ABC_SHA256;
        let upper_hex = hex.to_uppercase();
        let spaced_hex = format!("{} {}", &hex[..31], &hex[32..]);
        let cases: Vec<(String, &str)> = vec![
            (hex.to_string(), "untagged"),
            (String::new(), "untagged"),
            (format!("sha256-{hex}"), "untagged"),
            (format!("sha256:{upper_hex}"), "charset"),
            (format!("sha256:{spaced_hex}"), "charset"),
            (format!("SHA256:{hex}"), "algorithm"),
            (format!("Blake3:{hex}"), "algorithm"),
            (format!("md5:{hex}"), "algorithm"),
            (format!("sha512:{hex}"), "algorithm"),
            (format!(":{hex}"), "algorithm"),
            (format!(" sha256:{hex}"), "algorithm"),
            (format!("sha256 :{hex}"), "algorithm"),
            (format!("sha256:{}", &hex[..63]), "length"),
            (format!("sha256:{hex}0"), "length"),
            (format!("blake3:{hex}{hex}"), "length"),
            ("sha256:".to_string(), "length"),
            (format!("sha256:sha256:{hex}"), "length"),
            (format!("blake3:sha256:{hex}"), "length"),
            (format!("sha256: {hex}"), "length"),
            (format!("sha256:{hex} "), "length"),
            (format!("sha256:{hex}\n"), "length"),
            (format!("sha256:{}", "é".repeat(32)), "length"),
            (format!("sha256:{}é", &hex[..63]), "charset"),
        ];
        for (text, want) in cases {
            let err = text.parse::<ContentDigest>().unwrap_err();
            let got = match err {
                Error::Untagged { .. } => "untagged",
                Error::Algorithm { .. } => "algorithm",
                Error::Length { .. } => "length",
                Error::Charset { .. } => "charset",
                Error::Prefix { .. } => "prefix",
            };
            assert_eq!(got, want, "{text:?}: {err}");
            let json = serde_json::to_string(&text).unwrap();
            assert!(serde_json::from_str::<ContentDigest>(&json).is_err(), "serde {text:?}");
        }
    }

    #[test]
    fn untagged_hex_parses_only_through_the_legacy_path() {
        let sha = Sha256Digest::of_bytes(b"abc");
        let tagged = ContentDigest::from(sha);
        assert!(matches!(ABC_SHA256.parse::<ContentDigest>(), Err(Error::Untagged { .. })));
        assert_eq!(ContentDigest::parse_legacy(ABC_SHA256).unwrap(), tagged);
        assert_eq!(ContentDigest::parse_legacy(&tagged.to_string()).unwrap(), tagged);
        let blake = ContentDigest::of_bytes(DigestAlgorithm::Blake3, b"abc");
        assert_eq!(ContentDigest::parse_legacy(&blake.to_string()).unwrap(), blake);
        // The legacy path is no looser about the hex itself or the tag.
        let upper = ABC_SHA256.to_uppercase();
        assert!(matches!(ContentDigest::parse_legacy(&upper), Err(Error::Charset { .. })));
        let short = &ABC_SHA256[..63];
        assert!(matches!(ContentDigest::parse_legacy(short), Err(Error::Length { len: 63, .. })));
        let md5 = format!("md5:{ABC_SHA256}");
        assert!(matches!(ContentDigest::parse_legacy(&md5), Err(Error::Algorithm { .. })));

        #[derive(serde::Serialize, serde::Deserialize)]
        struct Old {
            #[serde(deserialize_with = "ContentDigest::deserialize_legacy")]
            digest: ContentDigest,
        }
        let old: Old = serde_json::from_str(&format!(r#"{{"digest":"{ABC_SHA256}"}}"#)).unwrap();
        assert_eq!(old.digest, tagged);
        // Written back, it carries its tag.
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            format!(r#"{{"digest":"sha256:{ABC_SHA256}"}}"#)
        );
        let bare = format!("{ABC_SHA256:?}");
        assert!(serde_json::from_str::<ContentDigest>(&bare).is_err());
    }

    fn any_algorithm() -> impl Strategy<Value = DigestAlgorithm> {
        prop_oneof![Just(DigestAlgorithm::Blake3), Just(DigestAlgorithm::Sha256)]
    }

    proptest! {
        #[test]
        fn text_and_serde_round_trip(
            algorithm in any_algorithm(),
            bytes in proptest::array::uniform32(any::<u8>()),
        ) {
            let d = ContentDigest::from_bytes(algorithm, bytes);
            let text = d.to_string();
            prop_assert_eq!(text.len(), algorithm.name().len() + 1 + 64);
            let tag = format!("{}:", algorithm.name());
            prop_assert!(text.starts_with(&tag), "{} lacks {}", text, tag);
            prop_assert_eq!(text.parse::<ContentDigest>().unwrap(), d);
            prop_assert_eq!(ContentDigest::parse_legacy(&text).unwrap(), d);
            let json = serde_json::to_string(&d).unwrap();
            prop_assert_eq!(&json, &format!("\"{text}\""));
            prop_assert_eq!(serde_json::from_str::<ContentDigest>(&json).unwrap(), d);
        }

        #[test]
        fn streaming_equals_one_shot(
            algorithm in any_algorithm(),
            data in proptest::collection::vec(any::<u8>(), 0..20_000),
            cuts in proptest::collection::vec(0usize..20_000, 0..12),
            step in 1usize..5000,
        ) {
            let whole = ContentDigest::of_bytes(algorithm, &data);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let mut h = ContentHasher::new(algorithm);
            let mut at = 0;
            for cut in cuts.into_iter().chain([data.len()]) {
                io::Write::write_all(&mut h, &data[at..cut]).unwrap();
                at = cut;
            }
            prop_assert_eq!(h.algorithm(), algorithm);
            prop_assert_eq!(h.len(), data.len() as u64);
            prop_assert_eq!(h.is_empty(), data.is_empty());
            prop_assert_eq!(h.finish(), whole);
            let trickle = Trickle { data: &data, step };
            let (r, n) = ContentDigest::of_reader(algorithm, trickle).unwrap();
            prop_assert_eq!((r, n), (whole, data.len() as u64));
        }
    }

    #[test]
    fn reader_errors_pass_through() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        for a in DigestAlgorithm::ALL {
            let err = ContentDigest::of_reader(a, Failing).unwrap_err();
            assert_eq!(err.to_string(), "disk on fire");
        }
    }
}
