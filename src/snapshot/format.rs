//! [`Compression`]: how a snapshot's tar stream is compressed.
//!
//! The format is detected from the object's first bytes (zstd frame magic `28 B5 2F FD`,
//! gzip `1F 8B`), never from the key: a reader finds a snapshot whatever compressed it
//! (§7.2). The sidecar records the format too, and the two must agree.

use std::fmt;
use std::str::FromStr;

/// A snapshot compression format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Zstandard, multi-threaded, level 1 by default. The default.
    #[default]
    Zstd,
    /// gzip (DEFLATE), level 6 by default; single-threaded, for consumers without zstd.
    Gzip,
}

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

impl Compression {
    /// `zstd` or `gzip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
        }
    }

    /// The format whose magic number starts `head`, if any.
    pub fn detect(head: &[u8]) -> Option<Self> {
        if head.starts_with(&ZSTD_MAGIC) {
            Some(Compression::Zstd)
        } else if head.starts_with(&GZIP_MAGIC) {
            Some(Compression::Gzip)
        } else {
            None
        }
    }

    /// The default compression level: zstd 1 (ccache's default too: a cache is read and
    /// written on every job, so speed beats the last few percent of size), gzip 6.
    pub fn default_level(self) -> i32 {
        match self {
            Compression::Zstd => 1,
            Compression::Gzip => 6,
        }
    }

    /// The accepted levels (zstd -7–19, where negative levels are the fast modes; gzip 1–9).
    pub fn levels(self) -> std::ops::RangeInclusive<i32> {
        match self {
            Compression::Zstd => -7..=19,
            Compression::Gzip => 1..=9,
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Compression {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "zstd" => Ok(Compression::Zstd),
            "gzip" => Ok(Compression::Gzip),
            other => Err(format!("unknown compression {other:?} (zstd or gzip)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers() {
        assert_eq!(Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]), Some(Compression::Zstd));
        assert_eq!(Compression::detect(&[0x1f, 0x8b, 8]), Some(Compression::Gzip));
        assert_eq!(Compression::detect(b"ustar"), None);
        assert_eq!(Compression::detect(&[]), None);
        assert_eq!("gzip".parse::<Compression>().unwrap(), Compression::Gzip);
        assert!("xz".parse::<Compression>().is_err());
    }
}
