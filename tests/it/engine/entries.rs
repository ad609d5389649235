//! Entries (DESIGN.md invariant 1): a damaged entry is a MISS with a warning, the build runs
//! again, the entry is replaced, and the next run HITs with the right bytes. A wrong byte
//! never reaches the output: the build command itself fails (exit 9) if it finds one.

use std::path::Path;

use strata::action::entry::ENTRY_SCHEMA;
use strata::record::{self, Envelope, Schema};

use super::{TestContext, count_lines, load_manifest, random_bytes, tree_files, write_file};

/// Copies `a.bin` and `b.txt` into the output like an incremental build: a file already
/// present is kept (so a partially restored output is not rebuilt), and a present file with
/// other bytes than the sources fails the build.
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

type Corrupt = fn(&Path);

fn manifest(entry: &Path) -> String {
    std::fs::read_to_string(entry.join("manifest.json")).unwrap()
}

fn set_manifest(entry: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::write(entry.join("manifest.json"), bytes).unwrap();
}

fn reseal(entry: &Path, schema: &Schema) {
    let bytes = std::fs::read(entry.join("manifest.json")).unwrap();
    let env = record::load(&bytes, &ENTRY_SCHEMA).unwrap();
    let other = Envelope::seal(schema, Vec::new(), &env.payload).unwrap();
    set_manifest(entry, other.to_bytes());
}

/// Edits the payload and seals it again (a valid record whose content lies).
fn reseal_payload(entry: &Path, edit: fn(&mut serde_json::Value)) {
    let env = record::load(manifest(entry).as_bytes(), &ENTRY_SCHEMA).unwrap();
    let mut payload = env.payload.clone();
    edit(&mut payload);
    set_manifest(entry, Envelope::seal(&ENTRY_SCHEMA, Vec::new(), &payload).unwrap().to_bytes());
}

const CORRUPTIONS: &[(&str, Corrupt)] = &[
    ("flipped artifact byte", |e| {
        let p = e.join("artifacts/lib/a.bin");
        let mut d = std::fs::read(&p).unwrap();
        let mid = d.len() / 2;
        d[mid] ^= 0x20;
        std::fs::write(&p, d).unwrap();
    }),
    ("truncated artifact", |e| {
        let p = e.join("artifacts/lib/a.bin");
        let d = std::fs::read(&p).unwrap();
        std::fs::write(&p, &d[..d.len() / 2]).unwrap();
    }),
    ("empty artifact", |e| std::fs::write(e.join("artifacts/b.txt"), b"").unwrap()),
    ("extra file under artifacts/", |e| write_file(&e.join("artifacts/extra.txt"), "x")),
    ("extra file in an artifact directory", |e| write_file(&e.join("artifacts/lib/x.so"), "x")),
    ("artifact replaced by a symlink to the right bytes", |e| {
        let p = e.join("artifacts/b.txt");
        let good = e.parent().unwrap().parent().unwrap().join("good-b.txt");
        std::fs::copy(&p, &good).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&good, &p).unwrap();
    }),
    ("artifact missing", |e| std::fs::remove_file(e.join("artifacts/b.txt")).unwrap()),
    ("artifacts/ missing", |e| std::fs::remove_dir_all(e.join("artifacts")).unwrap()),
    ("missing manifest.json", |e| std::fs::remove_file(e.join("manifest.json")).unwrap()),
    ("empty manifest.json", |e| set_manifest(e, "")),
    ("manifest.json is a directory", |e| {
        std::fs::remove_file(e.join("manifest.json")).unwrap();
        std::fs::create_dir(e.join("manifest.json")).unwrap();
    }),
    ("duplicate-key manifest", |e| {
        let text = manifest(e);
        assert!(text.contains("\"schema_version\":2"));
        set_manifest(e, text.replacen('{', "{\"schema_version\":2,", 1));
    }),
    ("non-object manifest: array", |e| set_manifest(e, "[]")),
    ("non-object manifest: string", |e| set_manifest(e, "\"strata.action_entry\"")),
    ("non-object manifest: null", |e| set_manifest(e, "null")),
    ("non-object manifest: number", |e| set_manifest(e, "1")),
    ("other schema, resealed", |e| {
        reseal(e, &Schema { name: "strata.publish_owners", version: 1, features: &[] })
    }),
    ("newer schema version, resealed", |e| {
        reseal(e, &Schema { name: "strata.action_entry", version: 3, features: &[] })
    }),
    ("other schema, text edited", |e| {
        set_manifest(e, manifest(e).replace("strata.action_entry", "strata.action_other"))
    }),
    ("payload edited (digest mismatch)", |e| {
        let text = manifest(e);
        let at = text.find("\"created_at\":\"2").unwrap() + "\"created_at\":\"".len();
        let mut bytes = text.into_bytes();
        bytes[at] = b'3';
        set_manifest(e, bytes);
    }),
    ("invalid UTF-8 manifest", |e| {
        let text = manifest(e);
        let at = text.find("\"created_at\":\"2").unwrap() + "\"created_at\":\"".len();
        let mut bytes = text.into_bytes();
        bytes[at] = 0xff;
        set_manifest(e, bytes);
    }),
    ("resealed manifest with an escaping artifact path", |e| {
        reseal_payload(e, |p| p["artifacts"][0]["path"] = "../escaped-b.txt".into())
    }),
    ("resealed manifest with an absolute artifact path", |e| {
        reseal_payload(e, |p| p["artifacts"][0]["path"] = "/tmp/strata-escaped-b.txt".into())
    }),
    ("resealed manifest with a wrong artifact digest", |e| {
        reseal_payload(e, |p| p["artifacts"][0]["sha256"] = "0".repeat(64).into())
    }),
    ("manifest of another unit", |e| reseal_payload(e, |p| p["unit"] = "someone-else".into())),
];

#[test]
fn engine_entries_corruption_is_a_miss_then_a_replacement_then_a_hit() {
    let ctx = TestContext::new();
    let src = ctx.path("src");
    write_file(&src.join("a.bin"), random_bytes(200_000, 3));
    write_file(&src.join("b.txt"), "hello from b\n");
    std::fs::create_dir_all(ctx.path("count")).unwrap();
    let expected = tree_files(&src);
    let expected: Vec<(String, Vec<u8>)> = expected
        .into_iter()
        .map(|(name, bytes)| (if name == "a.bin" { "lib/a.bin".into() } else { name }, bytes))
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_iter()
        .collect();

    for (i, (what, corrupt)) in CORRUPTIONS.iter().enumerate() {
        let unit = format!("u{i}");
        let out = ctx.path(&format!("out/{i}"));
        let count = ctx.path(&format!("count/{i}"));
        let action = ctx.third_party(&unit, &out).cmd(&[
            "sh".as_ref(),
            "-c".as_ref(),
            BUILD.as_ref(),
            out.as_os_str(),
            src.as_os_str(),
            count.as_os_str(),
        ]);
        let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
        let loc = ctx.third_party_entry(&unit, &key);
        assert_eq!(load_manifest(&loc.dir).artifacts.len(), 2, "{what}");

        corrupt(&loc.dir);
        std::fs::remove_dir_all(&out).unwrap();
        let r = ctx.run(&action);
        assert_eq!((what, r.code, r.statuses()), (what, 0, vec!["MISS", "SAVED"]), "{}", r.stderr);
        assert_eq!(r.warnings().len(), 1, "{what}: one warning expected:\n{}", r.stderr);
        assert_eq!(count_lines(&count), 2, "{what}: the build ran again");
        assert_eq!(tree_files(&out), expected, "{what}: output after the rebuild");

        // The entry was replaced by a complete, valid one, and nothing was left beside it.
        let m = load_manifest(&loc.dir);
        let paths: Vec<&str> = m.artifacts.iter().map(|a| a.path().as_str()).collect();
        assert_eq!(paths, ["b.txt", "lib/a.bin"], "{what}: the new entry holds every artifact");
        assert_eq!(tree_files(&loc.dir.join("artifacts")), expected, "{what}: entry bytes");
        let siblings: Vec<String> = std::fs::read_dir(&loc.parent)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(siblings, [key.as_str()], "{what}: no staging or replaced entry left");

        std::fs::remove_dir_all(&out).unwrap();
        ctx.run(&action).expect(&["HIT"]);
        assert_eq!(count_lines(&count), 2, "{what}: a HIT builds nothing");
        assert_eq!(tree_files(&out), expected, "{what}: output after the HIT");
    }
    assert!(!ctx.path("out/escaped-b.txt").exists(), "a restore never leaves its output");
    assert!(!Path::new("/tmp/strata-escaped-b.txt").exists());
}

#[test]
fn engine_entries_validate_warning_names_the_entry_and_the_reason() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let action = ctx.third_party("w", &out).sh("echo data > out/f.txt");
    let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    let loc = ctx.third_party_entry("w", &key);
    std::fs::write(loc.dir.join("manifest.json"), "[]").unwrap();
    let r = ctx.run(&action);
    r.expect(&["MISS", "SAVED"]);
    let w = r.warnings()[0];
    assert!(w.starts_with("strata: WARNING validate domain=third_party unit=w:"), "{w}");
    assert!(w.contains(&loc.dir.display().to_string()), "{w}");
    assert!(w.contains("manifest.json"), "{w}");
    let warning_events: Vec<_> =
        ctx.events().into_iter().filter(|e| e["event"] == "warning").collect();
    assert_eq!(warning_events.len(), 1);
    assert_eq!(warning_events[0]["component"], "validate");
    assert_eq!(warning_events[0]["key"], key.as_str());
}

#[test]
fn engine_entries_unusable_cache_never_fails_the_build() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    // The unit directory is a regular file: lookup and save fail, the build result stands.
    write_file(&ctx.cache.join("actions-v1/third_party/blocked"), "not a directory");
    let r = ctx.run(&ctx.third_party("blocked", &out).sh("echo built > out/a.txt"));
    r.expect(&["MISS"]);
    assert!(r.warnings().iter().any(|w| w.contains("WARNING save")), "{}", r.stderr);
    assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"built\n");
    assert!(!ctx.updated_marker().exists());

    // The cache root itself is a regular file: no lock can be taken, so BYPASS.
    let file_root = ctx.write("root-is-a-file", "x");
    let action = super::Action::default()
        .flag("--cache-root", &file_root)
        .flag("--domain", "third_party")
        .flag("--unit", "u")
        .flag("--output-dir", &out)
        .flag("--environment-profile", "bare")
        .sh("echo again > out/b.txt");
    ctx.run(&action).expect(&["BYPASS"]);
    assert_eq!(std::fs::read(out.join("b.txt")).unwrap(), b"again\n");
}

/// Snapshot review finding 1: a symlinked directory between `actions-v1` and an entry (as
/// a restored snapshot could once plant) is never traversed: no HIT is served from behind
/// it, no entry is saved through it, and the build still succeeds.
#[test]
fn engine_entries_never_follow_a_symlinked_layout_directory() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let action = ctx.third_party("u", &out).sh("echo built > out/a.txt");

    // A planted `actions-v1/third_party -> <outside>` before anything was cached: the
    // save refuses to write through it.
    let outside = ctx.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(ctx.cache.join("actions-v1")).unwrap();
    std::os::unix::fs::symlink(&outside, ctx.cache.join("actions-v1/third_party")).unwrap();
    let r = ctx.run(&action);
    r.expect(&["MISS"]);
    assert!(
        r.warnings().iter().any(|w| w.contains("WARNING save") && w.contains("symlink")),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing saved outside");
    assert!(!ctx.updated_marker().exists());

    // A real entry whose unit directory is then moved outside and symlinked back: a
    // MISS with a warning naming the symlink, never a HIT from outside.
    std::fs::remove_file(ctx.cache.join("actions-v1/third_party")).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
    let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    let loc = ctx.third_party_entry("u", &key);
    let moved = outside.join("u");
    std::fs::rename(&loc.parent, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &loc.parent).unwrap();
    let before = tree_files(&outside);
    let r = ctx.run(&action);
    r.expect(&["MISS"]);
    let symlink = loc.parent.display().to_string();
    assert!(
        r.warnings().iter().any(|w| w.contains("WARNING validate") && w.contains(&symlink)),
        "{}",
        r.stderr
    );
    assert!(r.warnings().iter().any(|w| w.contains("WARNING save")), "{}", r.stderr);
    assert_eq!(tree_files(&outside), before, "nothing written outside");
    assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"built\n");
}
