//! Writing tar entries whose member name and link text are exact bytes (docs/format.md
//! "Names"), for snapshots and L0 archives.
//!
//! The `tar` crate's `append_data` / `append_link` treat names as paths: they normalise a
//! link text (`..//x` becomes `../x`, `x/.` becomes `x`, a long text that collapses is
//! stored short), and for a name longer than the header field they keep only its UTF-8
//! prefix in the header, failing when that prefix is empty (a 255-byte name starting with
//! byte 0xE9). Here the bytes are written as given: a name or link text of at most 100
//! bytes goes into its header field literally; a longer one into a GNU long-name (`L`) or
//! long-link (`K`) entry first (the bytes and a NUL, as GNU tar writes them), with its
//! first 100 bytes in the header field. Readers (`tar` crate, GNU tar, bsdtar) take the long
//! entry's bytes.

use std::io::{self, Read, Write};

/// Size of the `name` and `linkname` fields of a tar header, in bytes.
const FIELD_BYTES: usize = 100;

/// The name GNU tar gives its long-name and long-link entries.
const LONG_LINK_NAME: &[u8] = b"././@LongLink";

fn check(what: &str, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a tar {what} must be non-empty and hold no NUL byte"),
        ));
    }
    Ok(())
}

/// Copies `bytes` (at most `field.len()`) into `field`, zero-filling the rest.
fn fill(field: &mut [u8], bytes: &[u8]) {
    let n = bytes.len().min(field.len());
    for (i, slot) in field.iter_mut().enumerate() {
        *slot = if i < n { bytes.get(i).copied().unwrap_or(0) } else { 0 };
    }
}

/// Writes a GNU long-name (`kind` = `L`) or long-link (`K`) entry holding `bytes` + NUL.
fn long_entry<W: Write>(
    builder: &mut tar::Builder<W>,
    kind: tar::EntryType,
    bytes: &[u8],
) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    fill(&mut header.as_old_mut().name, LONG_LINK_NAME);
    header.set_entry_type(kind);
    header.set_mode(0o644);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_size(bytes.len() as u64 + 1);
    header.set_cksum();
    builder.append(&header, bytes.chain(&[0u8][..]))
}

/// Appends one entry to `builder`: `header` (type, mode, size, ... already set) with the
/// member name `path` and, for a symlink, the link text `link`, both exactly these bytes,
/// followed by `data` (which must hold `header`'s size in bytes; pass `io::empty()` to write
/// the data separately).
///
/// # Errors
/// An empty name or link text, a NUL byte in one (`InvalidInput`), or a write error.
pub(crate) fn append<W: Write, R: Read>(
    builder: &mut tar::Builder<W>,
    header: &mut tar::Header,
    path: &[u8],
    link: Option<&[u8]>,
    data: R,
) -> io::Result<()> {
    check("member name", path)?;
    if path.len() > FIELD_BYTES {
        long_entry(builder, tar::EntryType::GNULongName, path)?;
    }
    fill(&mut header.as_old_mut().name, path);
    if let Some(link) = link {
        check("link text", link)?;
        if link.len() > FIELD_BYTES {
            long_entry(builder, tar::EntryType::GNULongLink, link)?;
        }
        fill(&mut header.as_old_mut().linkname, link);
    }
    header.set_cksum();
    builder.append(header, data)
}

/// Largest GNU long-name or long-link entry accepted, in bytes (Linux paths are at most
/// 4096 bytes; strata's own archives never come near this).
pub(crate) const MAX_LONG_NAME_BYTES: u64 = 64 * 1024;

/// A reader between the decompressor and the `tar` crate that follows the tar framing and
/// fails on a header the crate would read into memory whole: a GNU long-name (`L`) or
/// long-link (`K`) entry over [`MAX_LONG_NAME_BYTES`], and any pax (`x`, `g`) or sparse
/// (`S`) header (strata never writes them; pax can also change the next entry's size).
/// Without it, a zstd object of a few kilobytes could claim a long name of gigabytes and
/// make `artifact pull` or `snapshot unpack` allocate it all (untrusted sizes never decide
/// what is held in memory).
/// It stops looking at the first all-zero block (the end of the archive).
pub(crate) struct ExtensionLimit<R> {
    inner: R,
    /// Bytes passed through so far.
    pos: u64,
    /// Offset of the next header block.
    next_header: u64,
    /// The bytes of the header block being passed through.
    header: Vec<u8>,
    /// The end-of-archive block was seen.
    done: bool,
    /// What the archive is, for messages ("L0 archives", "snapshots").
    kind_of_archive: &'static str,
}

impl<R> ExtensionLimit<R> {
    /// Wraps `inner`, the decompressed tar stream of an archive of the kind named by
    /// `kind_of_archive` (plural, for messages: "L0 archives").
    pub(crate) fn new(inner: R, kind_of_archive: &'static str) -> Self {
        Self {
            inner,
            pos: 0,
            next_header: 0,
            header: Vec::with_capacity(512),
            done: false,
            kind_of_archive,
        }
    }

    /// The wrapped reader (to read what follows the tar stream).
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }
}

/// The size field of a tar header (octal text, or GNU base-256 when the high bit is set).
fn header_size(block: &[u8]) -> Option<u64> {
    let field = block.get(124..136)?;
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        // Base-256: the low 8 bytes, big-endian; anything above them must be zero.
        let (high, low) = field.split_at(4);
        if high.iter().skip(1).any(|b| *b != 0) || high.first().is_some_and(|b| b & 0x7f != 0) {
            return None;
        }
        return Some(low.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)));
    }
    let text = std::str::from_utf8(field).ok()?;
    let digits = text.trim_matches(|c: char| c == ' ' || c == '\0');
    if digits.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(digits, 8).ok()
}

impl<R: Read> Read for ExtensionLimit<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let data = buf.get(..n).unwrap_or_default();
        let mut i = 0usize;
        while i < n && !self.done {
            let at = self.pos + i as u64;
            if at < self.next_header {
                let skip = (self.next_header - at).min((n - i) as u64) as usize;
                i += skip;
                continue;
            }
            let take = (512 - self.header.len()).min(n - i);
            self.header.extend_from_slice(data.get(i..i + take).unwrap_or_default());
            i += take;
            if self.header.len() < 512 {
                continue;
            }
            if self.header.iter().all(|b| *b == 0) {
                self.done = true;
                break;
            }
            let damaged = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
            let size = header_size(&self.header)
                .ok_or_else(|| damaged("a tar header with an unreadable size".into()))?;
            let kind = self.header.get(156).copied().unwrap_or(0);
            match kind {
                b'L' | b'K' if size > MAX_LONG_NAME_BYTES => {
                    return Err(damaged(format!(
                        "a GNU long-name entry of {size} bytes (at most {MAX_LONG_NAME_BYTES})"
                    )));
                }
                b'x' | b'g' | b'S' => {
                    return Err(damaged(format!(
                        "a {} header ({} hold none)",
                        if kind == b'S' { "sparse" } else { "pax" },
                        self.kind_of_archive
                    )));
                }
                _ => {}
            }
            self.next_header = self
                .next_header
                .saturating_add(512)
                .saturating_add(size.div_ceil(512).saturating_mul(512));
            self.header.clear();
        }
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes entries with `append` and reads them back with the `tar` crate.
    fn round_trip(entries: &[(&[u8], Option<&[u8]>)]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, link) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(if link.is_some() {
                tar::EntryType::Symlink
            } else {
                tar::EntryType::Regular
            });
            header.set_size(if link.is_some() { 0 } else { 3 });
            let data: &[u8] = if link.is_some() { b"" } else { b"abc" };
            append(&mut builder, &mut header, path, *link, data).unwrap();
        }
        let bytes = builder.into_inner().unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        archive
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let path = e.path_bytes().into_owned();
                let link = e.link_name_bytes().map(|l| l.into_owned());
                if link.is_none() {
                    let mut data = Vec::new();
                    e.read_to_end(&mut data).unwrap();
                    assert_eq!(data, b"abc");
                }
                (path, link)
            })
            .collect()
    }

    #[test]
    fn names_and_link_texts_keep_their_bytes() {
        let long_byte_name = [0xe9u8; 255];
        let exact = [b'x'; 100];
        let collapsing_link = [b"..".as_slice(), &[b'/'; 120], b"x"].concat();
        let entries: Vec<(&[u8], Option<&[u8]>)> = vec![
            (b"a\xe9", None),
            (&long_byte_name, None),
            (&exact, None),
            (b"l1", Some(b"..//x")),
            (b"l2", Some(b"x/.")),
            (b"l3", Some(b"./x/./y/")),
            (b"l4", Some(&collapsing_link)),
            (&long_byte_name, Some(&long_byte_name)),
        ];
        let got = round_trip(&entries);
        let want: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            entries.iter().map(|(p, l)| (p.to_vec(), l.map(<[u8]>::to_vec))).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn empty_or_nul_names_are_refused() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        for (path, link) in [(&b""[..], None), (b"a\0b", None), (b"l", Some(&b"a\0"[..]))] {
            let err = append(&mut builder, &mut header, path, link, io::empty()).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
