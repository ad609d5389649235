//! The verification memo of L1 entries (DESIGN.md invariant 1, issue 8 item 4): a HIT
//! whose cached files' stamps are unchanged since a full check copies them without hashing;
//! any change (a rewritten byte, a touch, a replaced entry) or an unusable memo means a full
//! verification, and a changed byte is a MISS and a rebuild, never a HIT with wrong bytes.
//!
//! Observed through the HIT event's `hashed_bytes` and `vouched_files`. Stamps younger than
//! 2 s are not remembered (racy stamps), hence the waits after a save.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Action, TestContext, count_lines, random_bytes, tree_files, write_file};

/// Copies `a.bin` and `b.txt` into the output; a present file with other bytes than the
/// sources fails the build (exit 9), so a wrong restored byte cannot go unnoticed.
const BUILD: &str = r#"set -e
out="$0"; src="$1"; count="$2"
for f in lib/a.bin b.txt; do
  if [ -e "$out/$f" ] && ! cmp -s "$out/$f" "$src/$(basename "$f")"; then
    echo "WRONG BYTES in $out/$f" >&2; exit 9
  fi
done
echo run >> "$count"
mkdir -p "$out/lib"
[ -e "$out/lib/a.bin" ] || cp "$src/a.bin" "$out/lib/a.bin"
[ -e "$out/b.txt" ] || cp "$src/b.txt" "$out/b.txt"
"#;

const UNIT: &str = "memo";
const A_BYTES: usize = 300_000;
const B_TEXT: &str = "hello from b\n";

struct Fixture {
    ctx: TestContext,
    out: PathBuf,
    count: PathBuf,
    action: Action,
    expected: Vec<(String, Vec<u8>)>,
}

impl Fixture {
    fn new() -> Self {
        let ctx = TestContext::new();
        let src = ctx.path("src");
        write_file(&src.join("a.bin"), random_bytes(A_BYTES, 11));
        write_file(&src.join("b.txt"), B_TEXT);
        let out = ctx.path("out");
        let count = ctx.path("count");
        let action = ctx.third_party(UNIT, &out).cmd(&[
            "sh".as_ref(),
            "-c".as_ref(),
            BUILD.as_ref(),
            out.as_os_str(),
            src.as_os_str(),
            count.as_os_str(),
        ]);
        let expected = vec![
            ("b.txt".to_owned(), B_TEXT.as_bytes().to_vec()),
            ("lib/a.bin".to_owned(), random_bytes(A_BYTES, 11)),
        ];
        Self { ctx, out, count, action, expected }
    }

    /// Runs into an empty output directory; returns the statuses and, for a HIT,
    /// `(hashed_bytes, vouched_files)` of its event.
    fn run_clean(&self, expect: &[&str]) -> Option<(u64, u64)> {
        if self.out.exists() {
            std::fs::remove_dir_all(&self.out).unwrap();
        }
        let r = self.ctx.run(&self.action);
        r.expect(expect);
        assert_eq!(tree_files(&self.out), self.expected, "restored or built bytes");
        let events = self.ctx.events();
        let last = events.iter().rev().find(|e| e["event"] == "cache_result").unwrap();
        (last["status"] == "HIT").then(|| {
            (last["hashed_bytes"].as_u64().unwrap(), last["vouched_files"].as_u64().unwrap())
        })
    }

    fn entry(&self, key: &str) -> PathBuf {
        self.ctx.third_party_entry(UNIT, key).dir
    }

    fn memo_dir(&self) -> PathBuf {
        self.ctx.cache.join(".local/verify-memo")
    }

    fn memo_files(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.memo_dir()) {
            Ok(d) => d.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

const TOTAL: u64 = A_BYTES as u64 + B_TEXT.len() as u64;

/// Stamps must be older than 2 s to be remembered.
fn age() {
    std::thread::sleep(Duration::from_millis(2_200));
}

fn cached(entry: &Path, rel: &str) -> PathBuf {
    entry.join("artifacts").join(rel)
}

#[test]
fn engine_memo_hit_after_hit_does_not_rehash_and_any_change_means_full_verification() {
    let f = Fixture::new();
    let key = f.ctx.run(&f.action).expect(&["MISS", "SAVED"]).key();
    let entry = f.entry(&key);

    // A HIT right after the save: the files are too young to remember.
    assert_eq!(f.run_clean(&["HIT"]), Some((TOTAL, 0)));
    assert!(f.memo_files().is_empty(), "young stamps are not remembered");
    age();
    // First HIT of aged files: full verification, memo written.
    assert_eq!(f.run_clean(&["HIT"]), Some((TOTAL, 0)));
    assert_eq!(f.memo_files().len(), 1);
    // HIT after HIT: nothing hashed, both files vouched for, bytes still right.
    assert_eq!(f.run_clean(&["HIT"]), Some((0, 2)));
    assert_eq!(f.run_clean(&["HIT"]), Some((0, 2)));

    // Touch only (mtime and ctime change, same bytes): that file is verified in full.
    let a = cached(&entry, "lib/a.bin");
    let file = std::fs::File::options().write(true).open(&a).unwrap();
    file.set_modified(std::time::SystemTime::now()).unwrap();
    drop(file);
    assert_eq!(f.run_clean(&["HIT"]), Some((A_BYTES as u64, 1)));
    age();
    assert_eq!(f.run_clean(&["HIT"]), Some((A_BYTES as u64, 1)), "aged again: remembered anew");
    assert_eq!(f.run_clean(&["HIT"]), Some((0, 2)));

    // One byte changed in place, same size: a MISS with a warning and a rebuild, never a
    // HIT with the wrong byte (the build itself would fail on a wrong byte: exit 9).
    let mut bytes = std::fs::read(&a).unwrap();
    bytes[A_BYTES / 2] ^= 0x01;
    std::fs::write(&a, &bytes).unwrap();
    std::fs::remove_dir_all(&f.out).unwrap();
    let r = f.ctx.run(&f.action);
    r.expect(&["MISS", "SAVED"]);
    assert_eq!(r.warnings().len(), 1, "{}", r.stderr);
    assert!(r.warnings()[0].contains("restore failed"), "{}", r.stderr);
    assert_eq!(tree_files(&f.out), f.expected);
    assert_eq!(count_lines(&f.count), 2, "the build ran again");

    // The replaced entry's files are new inodes: the old memo vouches for none of them.
    age();
    assert_eq!(f.run_clean(&["HIT"]), Some((TOTAL, 0)));
    assert_eq!(f.run_clean(&["HIT"]), Some((0, 2)));
    assert_eq!(count_lines(&f.count), 2, "HITs build nothing");
}

#[test]
fn engine_memo_unusable_memo_means_full_verification_then_a_hit() {
    let f = Fixture::new();
    f.ctx.run(&f.action).expect(&["MISS", "SAVED"]);
    age();
    assert_eq!(f.run_clean(&["HIT"]), Some((TOTAL, 0)));
    let [memo] = f.memo_files().try_into().unwrap();
    let good = std::fs::read(&memo).unwrap();
    // The binary form (docs/format.md "Verification memo"): magic, then the subject.
    assert!(good.starts_with(b"STRVMEM\x02"), "{good:?}");
    let subject_at = good.windows(12).position(|w| w == b"third_party/").expect("subject");
    let mut edited = good.clone();
    edited[good.len() / 2] ^= 0x40;
    let mut other_subject = good.clone();
    other_subject[subject_at] = b'T';

    let damaged: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("not a record", b"{}".to_vec()),
        // A stamp edited without resealing: the checksum no longer matches.
        ("edited", edited),
        ("another subject (edited)", other_subject),
    ];
    for (what, bytes) in damaged {
        assert_ne!(bytes, good, "{what}");
        std::fs::write(&memo, &bytes).unwrap();
        assert_eq!(f.run_clean(&["HIT"]), Some((TOTAL, 0)), "{what}: full verification");
        assert_eq!(std::fs::read(&memo).unwrap(), good, "{what}: memo rewritten");
        assert_eq!(f.run_clean(&["HIT"]), Some((0, 2)), "{what}: memo used again");
    }
    // A memo that is a directory, or a symlink to a valid memo, is not read.
    std::fs::remove_file(&memo).unwrap();
    let elsewhere = f.ctx.path("memo-copy.json");
    std::fs::write(&elsewhere, &good).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &memo).unwrap();
    assert_eq!(f.run_clean(&["HIT"]), Some((TOTAL, 0)), "a symlinked memo is not followed");
}

#[test]
fn engine_memo_that_cannot_be_written_never_fails_a_hit() {
    let f = Fixture::new();
    f.ctx.run(&f.action).expect(&["MISS", "SAVED"]);
    // `.local/verify-memo` is a file: no memo can be written there.
    write_file(&f.memo_dir(), "in the way");
    age();
    for _ in 0..2 {
        let r = f.run_clean(&["HIT"]);
        assert_eq!(r, Some((TOTAL, 0)), "every HIT verifies in full");
    }
    assert_eq!(std::fs::read(f.memo_dir()).unwrap(), b"in the way");
}

/// `action prune` removes the memos that vouch for nothing (their entry is gone, or they
/// do not load, or they sit under another entry's name) and keeps the live one; a memo
/// removal alone does not touch `.updated` (memos are never packed).
#[test]
fn engine_memo_prune_removes_memos_of_vanished_entries_only() {
    let f = Fixture::new();
    let key = f.ctx.run(&f.action).expect(&["MISS", "SAVED"]).key();
    age();
    assert_eq!(f.run_clean(&["HIT"]), Some((TOTAL, 0)));
    let [live] = f.memo_files().try_into().unwrap();
    let good = std::fs::read(&live).unwrap();
    // Another memo under a name no entry has (a vanished entry's), and a damaged one.
    let vanished = f.memo_dir().join(format!("{}.json", "e".repeat(64)));
    std::fs::write(&vanished, &good).unwrap();
    let damaged = f.memo_dir().join(format!("{}.json", "d".repeat(64)));
    std::fs::write(&damaged, b"{}").unwrap();
    let updated = f.ctx.cache.join(".updated");
    let before = std::fs::metadata(&updated).unwrap().modified().unwrap();

    let dry = f.ctx.prune(&["--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(f.memo_files().len(), 3, "a dry run removes nothing");
    let r = f.ctx.prune(&["--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let mut removed: Vec<String> = report["removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["kind"] == "verify_memo")
        .map(|x| x["path"].as_str().unwrap().to_owned())
        .collect();
    removed.sort();
    let mut want = vec![damaged.display().to_string(), vanished.display().to_string()];
    want.sort();
    assert_eq!(removed, want);
    assert_eq!(f.memo_files(), vec![live.clone()], "the live memo stays");
    assert_eq!(std::fs::metadata(&updated).unwrap().modified().unwrap(), before);
    assert_eq!(f.run_clean(&["HIT"]), Some((0, 2)), "the kept memo is still used");

    // Once the entry itself is gone, its memo goes too.
    std::fs::remove_dir_all(f.entry(&key)).unwrap();
    assert_eq!(f.ctx.prune(&[]).code, 0);
    assert!(f.memo_files().is_empty());
}
