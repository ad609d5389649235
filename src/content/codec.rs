//! The one verified tar + zstd (or gzip) codec: how every tree strata moves as one stream
//! is written and read back (docs/snapshots.md "Format", docs/artifact-store.md "L0 objects,
//! push and pull").
//!
//! Snapshots (`crate::snapshot`: entries in walk order, the manifest **last**) and L0
//! archives (`crate::artifact::archive`: the manifest **first**, then the files in manifest
//! order) are both streams of this codec. The containers decide only what goes first or
//! last, which records they allow and how their errors read; the rules below hold for
//! both.
//!
//! # Writing ([`ArchiveWriter`])
//! Tar headers are GNU format with deterministic fields: mode from the owner-exec bit only
//! (the container picks the two modes), uid/gid 0, mtime 0, no user or group names, so the
//! same tree gives the same tar bytes. Member names and link texts are the exact bytes on
//! disk (`codec/tar_entry.rs`); names longer than 100 bytes go into GNU long-name entries;
//! no pax or sparse headers are ever written. Every file's bytes are hashed in the pass that
//! copies them into the stream ([`ArchiveWriter::file`]), or by the caller's reader thread
//! that hands them over ([`ArchiveWriter::begin_file`]); the compressed output is hashed as
//! it is written, so the object's digest costs no second read.
//!
//! # Reading ([`read::extract`])
//! Every entry is checked before anything is written for it; the first failure stops with
//! [`read::Error::Archive`] (the container's "corrupt" / "invalid archive"):
//! * the compression is detected from the magic number (zstd `28 B5 2F FD`, gzip `1F 8B`)
//!   and must be the one the container expects, if it names one;
//! * a reader in front of the `tar` crate (`tar_entry::ExtensionLimit`) rejects GNU
//!   long-name entries over 64 KiB and any pax or sparse header from the header alone;
//! * names, taken as bytes, must be [`RelPath`]s (no absolute path, no `.`/`..`, no empty
//!   segment, no NUL) and lie under the container's root, if it names one; no path twice;
//! * only directories (if the container allows them), regular files and symlinks (only at
//!   paths the container allows); hard links, devices, FIFOs and anything else are rejected;
//! * parents are created without passing through a symlink, files with `O_CREAT|O_EXCL`,
//!   so nothing is ever written through a symlink or over an earlier entry;
//! * modes come from the owner-exec bit only (setuid, setgid, sticky and group/other
//!   write are dropped); ownership and times are ignored;
//! * the number of entries and the sum of file bytes are bounded by the container's limits,
//!   checked before each file is written; with the manifest first, every entry must also be
//!   the next listed record with its kind and size, checked before it is written;
//! * after the end-of-archive block only zero padding (at most 1 MiB) may follow;
//! * at the end, what was written (kind, path, size, owner-exec bit, link text and the
//!   digest of the bytes actually written) must equal the manifest's records exactly.
//!
//! For one large tree the decompressor runs ahead on its own thread (`ahead.rs`), the
//! calling thread parses and checks the entries, and a few writer threads (`writers.rs`)
//! create the directories and files, hash and write the bytes; so decompression, parsing,
//! hashing and the kernel's work of creating thousands of inodes overlap. Every thread
//! is joined before [`read::extract`] returns. Nothing is fsynced file by file: a
//! container that publishes the tree makes it durable once (snapshots: one `syncfs`
//! before the swap).

mod ahead;
pub mod read;
mod tar_entry;
pub(crate) mod writers;

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::str::FromStr;

use crate::digest::{ContentDigest, ContentHasher, DigestAlgorithm};
use crate::fs::{self, RelPath};

pub use read::{Error, Extracted, ManifestAt, ReadSpec, extract};

/// Size of the chunks files are read and handed on in, in bytes.
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// A compression format of the codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Zstandard (multi-threaded when writing). The default.
    #[default]
    Zstd,
    /// gzip (DEFLATE); single-threaded, for consumers without zstd.
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

    /// The default level of snapshots: zstd 1 (ccache's default too: a cache is read and
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

/// How [`ArchiveWriter`] compresses and hashes its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// Compression format.
    pub compression: Compression,
    /// Compression level ([`Compression::levels`]).
    pub level: i32,
    /// zstd worker threads; 0 means one per available CPU.
    pub threads: u32,
    /// The algorithm of the object digest ([`ArchiveWriter::finish`]).
    pub object_digest: DigestAlgorithm,
}

/// A writer that hashes and counts what passes through.
struct HashWriter<W: Write> {
    inner: W,
    hasher: ContentHasher,
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The compressing writer of either format.
enum Encoder<W: Write> {
    Zstd(zstd::stream::write::Encoder<'static, W>),
    Gzip(flate2::write::GzEncoder<W>),
}

impl<W: Write> Encoder<W> {
    fn new(out: W, options: &WriteOptions) -> io::Result<Self> {
        match options.compression {
            Compression::Zstd => {
                let mut encoder = zstd::stream::write::Encoder::new(out, options.level)?;
                let threads = if options.threads == 0 {
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                } else {
                    options.threads as usize
                };
                if threads > 1 {
                    encoder.multithread(u32::try_from(threads).unwrap_or(1))?;
                }
                encoder.include_checksum(true)?;
                Ok(Encoder::Zstd(encoder))
            }
            Compression::Gzip => {
                let level = u32::try_from(options.level).unwrap_or(6);
                Ok(Encoder::Gzip(flate2::write::GzEncoder::new(
                    out,
                    flate2::Compression::new(level),
                )))
            }
        }
    }

    fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Zstd(e) => e.finish(),
            Encoder::Gzip(e) => e.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Zstd(e) => e.write(buf),
            Encoder::Gzip(e) => e.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Zstd(e) => e.flush(),
            Encoder::Gzip(e) => e.flush(),
        }
    }
}

/// The one header builder: deterministic fields (module docs).
fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header
}

/// What [`ArchiveWriter::finish`] returns.
#[derive(Debug)]
pub struct Written<W> {
    /// The output, flushed.
    pub out: W,
    /// Digest of the compressed bytes written.
    pub object_digest: ContentDigest,
    /// Number of compressed bytes written.
    pub object_size_bytes: u64,
}

/// Writes one archive of the codec (module docs) into `W`.
pub struct ArchiveWriter<W: Write> {
    builder: tar::Builder<Encoder<HashWriter<W>>>,
    /// The file whose data is being written: declared size, bytes so far.
    open: Option<(u64, u64)>,
    buf: Vec<u8>,
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

impl<W: Write> ArchiveWriter<W> {
    /// Starts an archive written into `out`.
    ///
    /// # Errors
    /// The compressor cannot be set up (e.g. a level it rejects).
    pub fn new(out: W, options: &WriteOptions) -> io::Result<Self> {
        let hashing = HashWriter { inner: out, hasher: ContentHasher::new(options.object_digest) };
        let builder = tar::Builder::new(Encoder::new(hashing, options)?);
        Ok(Self { builder, open: None, buf: Vec::new() })
    }

    fn check_closed(&self) -> io::Result<()> {
        match self.open {
            Some(_) => Err(invalid_input("a file entry is still open".into())),
            None => Ok(()),
        }
    }

    /// Appends a directory entry (mode 0755).
    ///
    /// # Errors
    /// Write errors of the output.
    pub fn directory(&mut self, rel: &RelPath) -> io::Result<()> {
        self.check_closed()?;
        let mut h = header(tar::EntryType::Directory, 0o755, 0);
        tar_entry::append(&mut self.builder, &mut h, &rel.to_bytes(), None, io::empty())
    }

    /// Appends a symlink entry whose link text is `target` (name encoding) as exact bytes.
    ///
    /// # Errors
    /// A text that is not in the name encoding (`InvalidInput`); write errors.
    pub fn symlink(&mut self, rel: &RelPath, target: &str) -> io::Result<()> {
        self.check_closed()?;
        let bytes = fs::link_text_bytes(target).map_err(|e| invalid_input(e.to_string()))?;
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        tar_entry::append(
            &mut self.builder,
            &mut h,
            &rel.to_bytes(),
            Some(bytes.as_bytes()),
            io::empty(),
        )
    }

    /// Appends a regular file entry named by the exact bytes `name` holding `bytes` (a
    /// container's own manifest).
    ///
    /// # Errors
    /// Write errors.
    pub fn small_file(&mut self, name: &[u8], mode: u32, bytes: &[u8]) -> io::Result<()> {
        self.check_closed()?;
        let mut h = header(tar::EntryType::Regular, mode, bytes.len() as u64);
        tar_entry::append(&mut self.builder, &mut h, name, None, bytes)
    }

    /// Appends a regular file of `size` bytes read from `data` (exactly that many: more are
    /// not read, fewer is an `UnexpectedEof` error), hashing them under `algorithm` in the
    /// same pass. Returns their digest.
    ///
    /// # Errors
    /// Read errors of `data`, `UnexpectedEof` if it ends early, write errors.
    pub fn file(
        &mut self,
        rel: &RelPath,
        size: u64,
        mode: u32,
        mut data: impl Read,
        algorithm: DigestAlgorithm,
    ) -> io::Result<ContentDigest> {
        self.begin_file(rel, size, mode)?;
        let mut hasher = ContentHasher::new(algorithm);
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(CHUNK_BYTES, 0);
        let mut remaining = size;
        let result = (|| {
            while remaining > 0 {
                let want =
                    usize::try_from(remaining.min(CHUNK_BYTES as u64)).unwrap_or(CHUNK_BYTES);
                let chunk = buf.get_mut(..want).unwrap_or_default();
                data.read_exact(chunk).map_err(|e| {
                    if e.kind() == io::ErrorKind::UnexpectedEof {
                        io::Error::new(e.kind(), "the file shrank while it was archived")
                    } else {
                        e
                    }
                })?;
                hasher.update(chunk);
                self.file_data(chunk)?;
                remaining -= want as u64;
            }
            self.end_file()
        })();
        self.buf = buf;
        result?;
        Ok(hasher.finish())
    }

    /// Starts a regular file of `size` bytes whose data follows through
    /// [`ArchiveWriter::file_data`] (the caller hashes it) and ends with
    /// [`ArchiveWriter::end_file`].
    ///
    /// # Errors
    /// Write errors; a file still open.
    pub fn begin_file(&mut self, rel: &RelPath, size: u64, mode: u32) -> io::Result<()> {
        self.check_closed()?;
        let mut h = header(tar::EntryType::Regular, mode, size);
        tar_entry::append(&mut self.builder, &mut h, &rel.to_bytes(), None, io::empty())?;
        self.open = Some((size, 0));
        Ok(())
    }

    /// Writes the next bytes of the open file.
    ///
    /// # Errors
    /// More bytes than declared, no open file (`InvalidInput`); write errors.
    pub fn file_data(&mut self, bytes: &[u8]) -> io::Result<()> {
        let Some((size, written)) = self.open.as_mut() else {
            return Err(invalid_input("file data without an open file entry".into()));
        };
        *written += bytes.len() as u64;
        if *written > *size {
            return Err(invalid_input("more file data than the entry declares".into()));
        }
        self.builder.get_mut().write_all(bytes)
    }

    /// Ends the open file (pads it to the next 512-byte block).
    ///
    /// # Errors
    /// Fewer bytes than declared (`InvalidInput`); write errors.
    pub fn end_file(&mut self) -> io::Result<()> {
        let Some((size, written)) = self.open.take() else {
            return Err(invalid_input("no open file entry to end".into()));
        };
        if written != size {
            return Err(invalid_input(format!("{written} bytes written of {size} declared")));
        }
        let padding = ((512 - size % 512) % 512) as usize;
        self.builder.get_mut().write_all([0u8; 512].get(..padding).unwrap_or_default())
    }

    /// Ends the archive (end-of-archive blocks), finishes the compressed stream and returns
    /// the output with the digest and size of the compressed bytes.
    ///
    /// # Errors
    /// A file still open; write errors.
    pub fn finish(self) -> io::Result<Written<W>> {
        self.check_closed()?;
        let encoder = self.builder.into_inner()?;
        let mut hashing = encoder.finish()?;
        hashing.flush()?;
        let object_size_bytes = hashing.hasher.len();
        Ok(Written {
            out: hashing.inner,
            object_digest: hashing.hasher.finish(),
            object_size_bytes,
        })
    }
}
