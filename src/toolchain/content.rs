//! Tool identity by content, like ccache's `compiler_check=content`: a
//! digest of the tool's executable and, for a GCC-style compiler driver, of the back ends
//! it runs, so that two toolchains printing the same `--version` (a rebuilt or patched
//! compiler, a fake one) never share a key.
//!
//! # What is hashed
//! BLAKE3 over, in order, for each file: its role, its size and its bytes:
//! * `driver`: the canonical executable;
//! * for a compiler driver ([`super::looks_like_compiler`]): each of `cc1`, `cc1plus`,
//!   `cc1obj`, `collect2`, `lto1`, `lto-wrapper` that `<driver> -print-prog-name=<name>`
//!   reports as an absolute path to an existing file (GCC's back ends; clang reports bare
//!   names, having its front end built in, so it contributes its driver only).
//!
//! The result is `blake3:<64 hex>`. Shared libraries the tool loads are not hashed (their
//! packages are covered by `--version` and the environment files of the profile).
//!
//! # Memo
//! `<memo_dir>/content-<sha256(canonical path)>.json`, a `strata.tool_content_memo` record
//! of every file hashed with its stamp (device, inode, size, mtime, ctime, mode) and the
//! result. It is used only if every file's stamp is unchanged, so a HIT neither re-hashes
//! the compiler nor spawns it; any change means a full recomputation.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::Error;
use crate::content::memo::{read_memo, write_memo};
use crate::digest::{ContentDigest, ContentHasher, DigestAlgorithm, Sha256Digest};
use crate::fs::{self, FileStamp};
use crate::record::{self, Envelope, Schema};

/// Schema of a content memo record.
pub const TOOL_CONTENT_MEMO_SCHEMA: Schema =
    Schema { name: "strata.tool_content_memo", version: 1, features: &[] };

/// GCC back ends asked for with `-print-prog-name`.
const BACK_ENDS: &[&str] = &["cc1", "cc1plus", "cc1obj", "collect2", "lto1", "lto-wrapper"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct MemoFile {
    role: String,
    path: String,
    /// Its stamp, in the one stored form of stamps (`crate::content::memo`).
    #[serde(flatten)]
    stamp: FileStamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Memo {
    tool: String,
    files: Vec<MemoFile>,
    digest: ContentDigest,
}

fn memo_file(role: &str, path: &Path, stamp: &FileStamp) -> MemoFile {
    MemoFile { role: role.to_owned(), path: fs::name::encode_os(path.as_os_str()), stamp: *stamp }
}

fn current_stamp(path: &Path) -> Option<FileStamp> {
    fs::metadata(path).ok().map(|m| FileStamp::of(&m))
}

/// The files that make up the tool at `canonical`: `(role, path)`, the driver first.
fn parts(canonical: &Path) -> Vec<(String, PathBuf)> {
    let mut out = vec![("driver".to_owned(), canonical.to_path_buf())];
    let name = canonical.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !super::looks_like_compiler(name) {
        return out;
    }
    for back_end in BACK_ENDS {
        let output = Command::new(canonical)
            .arg(format!("-print-prog-name={back_end}"))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        let Ok(output) = output else { continue };
        if !output.status.success() {
            continue;
        }
        let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let path = PathBuf::from(&text);
        if !path.is_absolute() {
            continue;
        }
        if let Ok(real) = fs::canonicalize(&path)
            && fs::metadata(&real).is_ok_and(|m| m.is_file())
            && !out.iter().any(|(_, p)| *p == real)
        {
            out.push(((*back_end).to_owned(), real));
        }
    }
    out
}

/// The content identity of the tool at `canonical` (see the module docs): from the memo
/// in `memo_dir` when every file's stamp is unchanged, else hashed (and remembered).
///
/// # Errors
/// [`Error::Fs`] when the driver or a back end cannot be read (or changed while read).
pub fn tool_content(canonical: &Path, memo_dir: Option<&Path>) -> Result<String, Error> {
    let memo_path = memo_dir.map(|d| {
        let key = Sha256Digest::of_bytes(canonical.as_os_str().as_encoded_bytes());
        d.join(format!("content-{}.json", key.to_hex()))
    });
    let tool = fs::name::encode_os(canonical.as_os_str());
    if let Some(path) = &memo_path
        && let Some(bytes) = read_memo(path)
        && let Ok((_, memo)) = record::load_as::<Memo>(&bytes, &TOOL_CONTENT_MEMO_SCHEMA)
        && memo.tool == tool
        && !memo.files.is_empty()
        && memo.files.iter().all(|f| {
            let Ok(real) = fs::name::decode_os(&f.path).map(PathBuf::from) else { return false };
            current_stamp(&real).is_some_and(|s| memo_file(&f.role, &real, &s) == *f)
        })
    {
        return Ok(memo.digest.to_string());
    }
    let mut total = ContentHasher::new(DigestAlgorithm::Blake3);
    let mut files = Vec::new();
    for (role, path) in parts(canonical) {
        let (digest, size, stamp) = fs::hash_file_stable(&path, DigestAlgorithm::Blake3)?;
        total.update(role.as_bytes());
        total.update(&[0]);
        total.update(&size.to_le_bytes());
        total.update(digest.as_bytes());
        files.push(memo_file(&role, &path, &stamp));
    }
    let digest = total.finish();
    if let Some(path) = &memo_path {
        let memo = Memo { tool, files, digest };
        if let Ok(env) = Envelope::seal(&TOOL_CONTENT_MEMO_SCHEMA, Vec::new(), &memo)
            && let Err(e) = write_memo(path, &env.to_bytes(), 0o644)
        {
            tracing::debug!("tool content memo not written: {e}");
        }
    }
    Ok(digest.to_string())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path
    }

    /// Two tools with the same `--version` but other bytes differ; a back end reported by
    /// `-print-prog-name` counts; the memo is used while stamps hold and dropped when the
    /// back end changes.
    #[test]
    fn content_identity_sees_bytes_and_back_ends_not_version_text() {
        let dir = tempfile::tempdir().unwrap();
        let memo = dir.path().join("memo");
        let back = script(dir.path(), "cc1", "echo backend v1");
        let gcc_body = format!(
            "case \"$1\" in -print-prog-name=cc1) echo {};; --version) echo 'gcc 9.1';; *) exit 1;; esac",
            back.display()
        );
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        let a = script(&dir.path().join("a"), "gcc", &gcc_body);
        let b = script(&dir.path().join("b"), "gcc", &format!("{gcc_body}\n# evil"));
        let a_id = tool_content(&a, Some(&memo)).unwrap();
        assert!(a_id.starts_with("blake3:"), "{a_id}");
        assert_ne!(a_id, tool_content(&b, Some(&memo)).unwrap(), "other bytes, same version");
        assert_eq!(tool_content(&a, Some(&memo)).unwrap(), a_id, "memo hit");
        // The back end changes (same size): a new identity, the memo is not trusted.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&back, "#!/bin/sh\necho backend v2\n").unwrap();
        let changed = tool_content(&a, Some(&memo)).unwrap();
        assert_ne!(changed, a_id);
        assert_eq!(changed, tool_content(&a, None).unwrap(), "memo and fresh agree");
        // A tool that is not a compiler driver: only its own bytes count.
        let other = script(dir.path(), "mytool", "echo x");
        assert!(tool_content(&other, None).unwrap().starts_with("blake3:"));
    }
}
