//! The tracked-source hash: which sources a snapshot was built from.
//!
//! In the source root, strata runs
//! `git -c safe.directory=<root> ls-files -s -- <pathspecs>` and takes the SHA-256 (64
//! lowercase hex; keys use its first 32) of the **raw stdout bytes** (lines
//! `<mode> <blob id> <stage>\t<path>\n`, git's default quoting). No pathspec means every tracked file. So the hash reflects the
//! git *index*: staged blob ids, not unstaged work-tree edits, and a submodule only by its
//! commit id. A caller that builds from an edited work tree passes its own hash with
//! `--source-hash`.
//!
//! An empty listing, a missing `git` or a tree that is not a repository makes the key
//! unsupported, with the reason: one strict rule, never a made-up hash such as `adhoc`
//! that unrelated trees would share.
//!
//! A given `--source-hash` is used verbatim. It must be 1 to 128 characters from
//! `[A-Za-z0-9._]`: no `-`, so that a same-source prefix can never match a longer
//! neighbouring hash.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::digest::Sha256Digest;

/// Longest accepted `--source-hash`, in characters.
pub const MAX_SOURCE_HASH_CHARS: usize = 128;

/// Checks a caller-given source hash.
///
/// # Errors
/// A reason naming the rule broken.
pub fn check_given_hash(text: &str) -> Result<(), String> {
    if text.is_empty() || text.len() > MAX_SOURCE_HASH_CHARS {
        return Err(format!("must be 1 to {MAX_SOURCE_HASH_CHARS} characters"));
    }
    if let Some(c) = text.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '_')) {
        return Err(format!("contains {c:?}; only letters, digits, '.' and '_' are allowed"));
    }
    Ok(())
}

/// The tracked-source hash of `root` over `pathspecs` (see the module docs).
///
/// # Errors
/// A reason (for `supported=false`): git missing or failing, or nothing tracked.
pub fn tracked_source_hash(
    root: &Path,
    pathspecs: &[std::ffi::OsString],
) -> Result<String, String> {
    let mut command = Command::new("git");
    command
        .arg("-c")
        .arg(format!("safe.directory={}", root.display()))
        // Names that are not ASCII are listed quoted (`"bad\351.h"`, git's default), whatever
        // the user's git configuration says, so the same tree hashes the same everywhere.
        .args(["-c", "core.quotePath=true"])
        .args(["ls-files", "-s", "--"])
        .args(pathspecs)
        .current_dir(root)
        .stdin(Stdio::null());
    let output = command.output().map_err(|e| format!("cannot run git ls-files: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "git ls-files failed in {}: {}",
            root.display(),
            stderr.trim().lines().next().unwrap_or("no message")
        ));
    }
    if output.stdout.is_empty() {
        return Err(format!(
            "no tracked file in {} matches the source pathspecs {pathspecs:?}; pass \
             --source-path for the sources the cache depends on, or --source-hash",
            root.display()
        ));
    }
    Ok(Sha256Digest::of_bytes(&output.stdout).to_hex())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn reference_vector_and_index_semantics() {
        // The example of vllm-ascend's key script: the listing bytes hash as documented.
        assert_eq!(
            Sha256Digest::of_bytes(b"100644 blob 0\tcsrc/kernel.cpp\n").to_hex(),
            "48a069db4fa18c98b8092dd8c774dc5a90e77e4a20946654d780f32434764cea"
        );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.c"), b"int a;\n").unwrap();
        std::fs::write(root.join("README"), b"readme\n").unwrap();
        git(root, &["add", "."]);
        let all = tracked_source_hash(root, &[]).unwrap();
        let src = tracked_source_hash(root, &["src".into()]).unwrap();
        assert_ne!(all, src);
        // A work-tree edit that is not staged does not change the hash; staging it does.
        std::fs::write(root.join("src/a.c"), b"int a = 1;\n").unwrap();
        assert_eq!(tracked_source_hash(root, &["src".into()]).unwrap(), src);
        git(root, &["add", "src/a.c"]);
        assert_ne!(tracked_source_hash(root, &["src".into()]).unwrap(), src);
        // Files outside the pathspecs do not take part.
        let before = tracked_source_hash(root, &["src".into()]).unwrap();
        std::fs::write(root.join("README"), b"changed\n").unwrap();
        git(root, &["add", "README"]);
        assert_eq!(tracked_source_hash(root, &["src".into()]).unwrap(), before);
        let err = tracked_source_hash(root, &["nothing-here".into()]).unwrap_err();
        assert!(err.contains("--source-hash"), "{err}");
        let plain = tempfile::tempdir().unwrap();
        assert!(tracked_source_hash(plain.path(), &[]).is_err());
    }

    #[test]
    fn given_hashes_are_checked() {
        check_given_hash(&"a".repeat(64)).unwrap();
        check_given_hash("adhoc").unwrap();
        assert!(check_given_hash("a-b").is_err());
        assert!(check_given_hash("").is_err());
        assert!(check_given_hash(&"a".repeat(129)).is_err());
    }
}
