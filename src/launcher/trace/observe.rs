//! The tracer's own look at a path while the tracee is stopped: [`Observed`], and the
//! interpreters the kernel opens for an `execve` (`#!` lines, `PT_INTERP`).

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use super::Observed;
use crate::fs::FileStamp;

/// Whether a look at a path follows a final symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Follow {
    /// `stat`: a final symlink is followed.
    Yes,
    /// `lstat`: a final symlink is the object.
    No,
}

/// The state of `path` (absolute) as `stat` (or `lstat`) sees it now.
pub(crate) fn observe(path: &Path, follow: Follow) -> Observed {
    let metadata = match follow {
        Follow::Yes => crate::fs::metadata(path),
        Follow::No => crate::fs::symlink_metadata(path),
    };
    match metadata {
        Ok(meta) if meta.is_file() => Observed::File(FileStamp::of(&meta)),
        Ok(meta) if meta.is_dir() => Observed::Directory(FileStamp::of(&meta)),
        Ok(meta) if meta.file_type().is_symlink() => {
            match crate::fs::read_link(path).and_then(|text| crate::fs::link_text_bytes(&text)) {
                Ok(target) => Observed::Symlink(PathBuf::from(target)),
                Err(e) => Observed::Unreadable(e.raw_os_error().unwrap_or(libc::EIO)),
            }
        }
        Ok(_) => Observed::Other,
        Err(e) => match e.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR) => Observed::Absent,
            errno => Observed::Unreadable(errno.unwrap_or(libc::EIO)),
        },
    }
}

/// The kernel reads at most this many bytes of a `#!` line (`BINPRM_BUF_SIZE`).
const SHEBANG_MAX: usize = 256;
/// How deep the kernel follows interpreters of interpreters.
const INTERPRETER_DEPTH: usize = 4;

/// Interpreters as [`interpreters`] finds them: each name as written, and resolved.
pub(crate) type Interpreters = Vec<(OsString, PathBuf)>;

/// The interpreters the kernel opens itself when it executes the file at `path`: the
/// program of a `#!` line (and its own, up to the kernel's depth), or an ELF file's
/// `PT_INTERP` (the dynamic loader). Relative names are as written; the kernel resolves
/// them against the working directory. A file that is not there gives none (the kernel's
/// `exec` fails too).
///
/// # Errors
/// What was found so far, and why the rest is unknown: a file the kernel can execute but
/// the tracer cannot read (no read permission, no descriptor left, …). The record must
/// then be marked incomplete: the kernel may open an interpreter nobody saw.
pub(crate) fn interpreters(
    path: &Path,
    mut cwd: impl FnMut() -> Option<PathBuf>,
) -> Result<Interpreters, (Interpreters, String)> {
    let mut found = Vec::new();
    let mut current = path.to_owned();
    for _ in 0..INTERPRETER_DEPTH {
        let unreadable = |e: crate::fs::Error| e.to_string();
        let head = match read_head(&current) {
            Ok(Some(head)) => head,
            Ok(None) => break,
            Err(e) => return Err((found, unreadable(e))),
        };
        let next = if head.starts_with(b"#!") {
            shebang(&head)
        } else if head.starts_with(b"\x7fELF") {
            match elf_interpreter(&current) {
                Ok(next) => next,
                Err(e) => return Err((found, unreadable(e))),
            }
        } else {
            None
        };
        let Some(given) = next else { break };
        let resolved = if given.as_encoded_bytes().starts_with(b"/") {
            PathBuf::from(&given)
        } else {
            match cwd() {
                Some(dir) => dir.join(&given),
                None => break,
            }
        };
        let script = head.starts_with(b"#!");
        found.push((given, resolved.clone()));
        if !script {
            break;
        }
        current = resolved;
    }
    Ok(found)
}

/// The first bytes of `path`; `None` when it is not there (`ENOENT`, `ENOTDIR`).
fn read_head(path: &Path) -> Result<Option<Vec<u8>>, crate::fs::Error> {
    let file = match crate::fs::open(path) {
        Ok(file) => file,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let mut head = Vec::with_capacity(SHEBANG_MAX);
    file.take(SHEBANG_MAX as u64)
        .read_to_end(&mut head)
        .map_err(|e| crate::fs::Error::io("read", path, e))?;
    Ok(Some(head))
}

/// The interpreter of a `#!` line: after `#!` and blanks, up to a blank or the line end.
fn shebang(head: &[u8]) -> Option<OsString> {
    let line = head.get(2..)?;
    let line = line.split(|&b| b == b'\n').next()?;
    let start = line.iter().position(|&b| b != b' ' && b != b'\t')?;
    let rest = line.get(start..)?;
    let end = rest.iter().position(|&b| b == b' ' || b == b'\t' || b == 0).unwrap_or(rest.len());
    let name = rest.get(..end)?;
    (!name.is_empty()).then(|| OsString::from_vec(name.to_vec()))
}

/// `PT_INTERP` of the ELF file at `path`, if it has one (64- and 32-bit, little-endian).
///
/// # Errors
/// The error of opening the file (it was just read, so one that matters: no descriptor
/// left, permissions changed).
fn elf_interpreter(path: &Path) -> Result<Option<OsString>, crate::fs::Error> {
    Ok(elf_interpreter_of(&crate::fs::open(path)?))
}

/// [`elf_interpreter`] of an open file; `None` for no `PT_INTERP` or a header that does not
/// parse (the kernel's `exec` fails on that too).
fn elf_interpreter_of(file: &std::fs::File) -> Option<OsString> {
    use std::os::unix::fs::FileExt;
    const PT_INTERP: u32 = 3;
    let mut header = [0u8; 64];
    file.read_exact_at(&mut header, 0).ok()?;
    let u16_at = |b: &[u8], o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |b: &[u8], o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |b: &[u8], o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
    if header.get(5) != Some(&1) {
        return None; // big-endian: not a native executable here
    }
    let wide = header.get(4) == Some(&2);
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(&header, 0x20)?, u16_at(&header, 0x36)?, u16_at(&header, 0x38)?)
    } else {
        (u64::from(u32_at(&header, 0x1c)?), u16_at(&header, 0x2a)?, u16_at(&header, 0x2c)?)
    };
    let size = usize::from(phentsize) * usize::from(phnum);
    if size == 0 || size > 64 * 1024 {
        return None;
    }
    let mut table = vec![0u8; size];
    file.read_exact_at(&mut table, phoff).ok()?;
    for entry in table.chunks_exact(usize::from(phentsize)) {
        if u32_at(entry, 0)? != PT_INTERP {
            continue;
        }
        let (offset, length) = if wide {
            (u64_at(entry, 0x08)?, u64_at(entry, 0x20)?)
        } else {
            (u64::from(u32_at(entry, 0x04)?), u64::from(u32_at(entry, 0x10)?))
        };
        let length = usize::try_from(length).ok().filter(|&l| l > 0 && l <= 4096)?;
        let mut name = vec![0u8; length];
        file.read_exact_at(&mut name, offset).ok()?;
        let end = memchr::memchr(0, &name).unwrap_or(name.len());
        name.truncate(end);
        return Some(OsString::from_vec(name));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_takes_the_first_word_after_blanks() {
        assert_eq!(shebang(b"#!/bin/sh\necho"), Some("/bin/sh".into()));
        assert_eq!(shebang(b"#! \t/usr/bin/env python3 -u\n"), Some("/usr/bin/env".into()));
        assert_eq!(shebang(b"#!\n"), None);
        assert_eq!(shebang(b"#!sh"), Some("sh".into()));
    }

    /// What cannot be read is not "no interpreter": the caller marks the record incomplete
    /// (a directory stands in for a file the tracer cannot read: no descriptor left, no
    /// read permission, which root here would not see). A missing file has none.
    #[test]
    fn an_unreadable_program_is_an_error_and_a_missing_one_has_no_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let (found, why) = interpreters(dir.path(), || None).unwrap_err();
        assert!(found.is_empty());
        assert!(why.contains(&dir.path().display().to_string()), "{why}");
        assert_eq!(interpreters(&dir.path().join("missing"), || None).unwrap(), vec![]);
    }

    #[test]
    fn the_dynamic_loader_of_a_real_program_is_found() {
        let found = interpreters(Path::new("/bin/sh"), || None).unwrap();
        let (given, resolved) = found.first().expect("/bin/sh is dynamically linked");
        assert!(given.to_string_lossy().contains("ld-linux"), "{given:?}");
        assert_eq!(resolved.as_os_str(), given.as_os_str());
    }
}
