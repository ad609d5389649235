//! Names are bytes (issue 7 item 2): file names, directory names and symlink texts that are
//! not UTF-8 go through every layer — action identity, entry outputs, snapshot pack/unpack
//! and save/restore, the artifact store and L0 push/pull — recorded in the name encoding
//! (`\xHH`, docs/format.md "Names") and restored byte for byte. Names that look like an
//! escape (`a%E9`, a literal `a\xe9`) stay distinct from the byte name `a<0xE9>`.
//!
//! Every name here is made with `OsStr::from_bytes`; build scripts make theirs with
//! `printf` octal escapes, so the command line itself stays ASCII.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::engine::{Action, TestContext, load_manifest, require_tool, run_bounded};

/// `dir/<bytes>`.
fn at(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(OsStr::from_bytes(name))
}

/// Everything under `root`, byte for byte: raw relative path → kind, mode and content
/// (files), or the raw link text (symlinks).
fn listing(root: &Path) -> BTreeMap<Vec<u8>, String> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap().as_os_str().as_bytes().to_vec();
        let meta = std::fs::symlink_metadata(e.path()).unwrap();
        let desc = if meta.file_type().is_symlink() {
            format!("link {:?}", std::fs::read_link(e.path()).unwrap().into_os_string().into_vec())
        } else if meta.is_dir() {
            "dir".to_owned()
        } else {
            let exec = meta.permissions().mode() & 0o100 != 0;
            format!("file exec={exec} {:?}", std::fs::read(e.path()).unwrap())
        };
        out.insert(rel, desc);
    }
    out
}

/// The action that runs [`NAMES_SCRIPT`] into `out`, cached in `cache`.
fn names_action(cache: &Path, out: &Path) -> Action {
    Action::default()
        .flag("--cache-root", cache)
        .flag("--domain", "third_party")
        .flag("--unit", "outs")
        .flag("--output-dir", out)
        .flag("--environment-profile", "bare")
        .cmd(&[OsStr::new("sh"), OsStr::new("-c"), OsStr::new(NAMES_SCRIPT), out.as_os_str()])
}

/// A build script that makes, under `$0`: files whose names are not UTF-8, a directory
/// whose name is not UTF-8, a symlink whose name and text are not UTF-8, and the three
/// look-alikes `a%E9` (percent), `a<0xE9>` (a byte) and `a\xe9` (a literal backslash).
const NAMES_SCRIPT: &str = r#"set -e
out="$0"
mkdir -p "$out/$(printf 'd\351')" "$out/foo" "$out/foo-1"
printf 'latin-1 file\n' > "$out/$(printf 'o\377.bin')"
printf 'in a latin-1 dir\n' > "$out/$(printf 'd\351')/f.txt"
ln -s "$(printf 'o\377.bin')" "$out/$(printf 'l\351')"
printf 'percent\n' > "$out/a%E9"
printf 'byte\n' > "$out/$(printf 'a\351')"
printf 'backslash\n' > "$out/a\\xe9"
printf 'y\n' > "$out/foo/y"
printf 'x\n' > "$out/foo-1/x"
"#;

/// The example of the issue: a prepared input directory holding `bad<0xE9>.h` (and a
/// directory `d<0xE9>`) is cached, not an exit 1; the key is the same under `LC_ALL=C` and
/// a UTF-8 locale; the name and content of such a file both count.
#[test]
fn names_prepared_input_that_is_not_utf8_is_cached_under_every_locale() {
    let ctx = TestContext::new();
    let src = ctx.path("src");
    std::fs::create_dir_all(at(&src, b"d\xe9")).unwrap();
    std::fs::write(at(&src, b"bad\xe9.h"), b"#define BAD 1\n").unwrap();
    std::fs::write(at(&src, b"d\xe9/x\xff.h"), b"#define X 2\n").unwrap();
    std::fs::write(src.join("a.c"), b"int a;\n").unwrap();
    let out = ctx.path("out");
    let action = ctx
        .third_party("latin1", &out)
        .flag("--prepared-input", &src)
        .sh("mkdir -p out && cat src/*.h > out/all.h");
    let cold = ctx.run(&action.clone().env("LC_ALL", "C"));
    cold.expect(&["MISS", "SAVED"]);
    let key = cold.key();
    assert_eq!(std::fs::read(out.join("all.h")).unwrap(), b"#define BAD 1\n");

    // The identity names the files in the name encoding.
    let entry = ctx.third_party_entry("latin1", &key).dir;
    let identity = std::fs::read_to_string(entry.join("identity.json")).unwrap();
    assert!(identity.contains(r#""input[0]/bad\\xe9.h""#), "{identity}");
    assert!(identity.contains(r#""input[0]/d\\xe9/x\\xff.h""#), "{identity}");

    std::fs::remove_dir_all(&out).unwrap();
    let warm = ctx.run(&action.clone().env("LC_ALL", "C.UTF-8").env("LANG", "C.UTF-8"));
    warm.expect(&["HIT"]);
    assert_eq!(warm.key(), key, "the key does not depend on the locale");
    assert_eq!(std::fs::read(out.join("all.h")).unwrap(), b"#define BAD 1\n");
    let unset = ctx.run(&action.clone().env("LC_ALL", "en_US.ISO-8859-1"));
    assert_eq!((unset.statuses(), unset.key()), (vec!["HIT"], key.clone()));

    // The content of the Latin-1 file is identity, and explain names it ...
    std::fs::write(at(&src, b"d\xe9/x\xff.h"), b"#define X 3\n").unwrap();
    let explained = ctx.explain(&action, false);
    explained.expect_code(0);
    assert!(
        explained.stdout.contains("prepared input input[0]/d\\xe9/x\\xff.h changed"),
        "{}",
        explained.stdout
    );
    let changed = ctx.run(&action);
    changed.expect(&["MISS", "SAVED"]);
    assert_ne!(changed.key(), key);
    std::fs::write(at(&src, b"d\xe9/x\xff.h"), b"#define X 2\n").unwrap();
    assert_eq!(ctx.run(&action).expect(&["HIT"]).key(), key);
    // ... and so is its exact name: another byte is another key.
    std::fs::rename(at(&src, b"bad\xe9.h"), at(&src, b"bad\xe8.h")).unwrap();
    let renamed = ctx.run(&action);
    renamed.expect(&["MISS", "SAVED"]);
    assert_ne!(renamed.key(), key);
    // A literal `bad%E9.h` or `bad\xe9.h` (ASCII) is not the byte name either.
    for literal in [&b"bad%E9.h"[..], b"bad\\xe9.h"] {
        std::fs::rename(at(&src, b"bad\xe8.h"), at(&src, literal)).unwrap();
        let run = ctx.run(&action);
        run.expect(&["MISS", "SAVED"]);
        assert_ne!(run.key(), key, "{}", String::from_utf8_lossy(literal));
        std::fs::rename(at(&src, literal), at(&src, b"bad\xe8.h")).unwrap();
    }
    std::fs::rename(at(&src, b"bad\xe8.h"), at(&src, b"bad\xe9.h")).unwrap();
    assert_eq!(ctx.run(&action).expect(&["HIT"]).key(), key);
}

/// Outputs whose names and link texts are not UTF-8 are saved and restored byte for byte;
/// `a%E9`, `a<0xE9>` and the literal `a\xe9` are three artifacts; an entry holding `foo/y`
/// and `foo-1/x` verifies (the walk's byte order is not the manifest's text order).
#[test]
fn names_outputs_that_are_not_utf8_are_restored_byte_exact() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let action = names_action(&ctx.cache, &out);
    let cold = ctx.run(&action);
    cold.expect(&["MISS", "SAVED"]);
    let built = listing(&out);
    assert_eq!(built.len(), 11, "{built:?}");
    assert_eq!(built[&b"a\xe9".to_vec()], format!("file exec=false {:?}", b"byte\n"));
    assert_eq!(built[&b"a%E9".to_vec()], format!("file exec=false {:?}", b"percent\n"));
    assert_eq!(built[&b"a\\xe9".to_vec()], format!("file exec=false {:?}", b"backslash\n"));

    let manifest = load_manifest(&ctx.third_party_entry("outs", &cold.key()).dir);
    let mut recorded: Vec<(String, Option<String>)> = manifest
        .artifacts
        .iter()
        .map(|a| match a {
            strata::content::Record::File(f) => (f.path.to_string(), None),
            strata::content::Record::Symlink { path, target } => {
                (path.to_string(), Some(target.clone()))
            }
            strata::content::Record::Directory { path } => panic!("directory record {path}"),
        })
        .collect();
    recorded.sort();
    let expected: Vec<(String, Option<String>)> = [
        ("a%E9", None),
        ("a\\x5cxe9", None),
        ("a\\xe9", None),
        ("d\\xe9/f.txt", None),
        ("foo-1/x", None),
        ("foo/y", None),
        ("l\\xe9", Some("o\\xff.bin")),
        ("o\\xff.bin", None),
    ]
    .iter()
    .map(|(p, t)| (p.to_string(), t.map(str::to_owned)))
    .collect();
    assert_eq!(recorded, expected);

    std::fs::remove_dir_all(&out).unwrap();
    ctx.run(&action).expect(&["HIT"]);
    assert_eq!(listing(&out), built, "every name, link text and byte comes back");
    // A HIT over the existing outputs changes nothing either.
    ctx.run(&action).expect(&["HIT"]);
    assert_eq!(listing(&out), built);
}

/// The L1 cache of the previous test travels through `snapshot save`/`restore` (file://
/// store) and `snapshot pack`/`unpack`: the tar members carry the exact bytes, the restored
/// cache HITs, and the HIT restores the exact names.
#[test]
fn names_survive_snapshot_save_restore_and_pack_unpack() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let action = names_action(&ctx.cache, &out);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    let built = listing(&out);
    let store = format!("file://{}", ctx.path("store").display());
    let key = "names-snapshot-1";
    let save = ctx
        .strata()
        .args(["snapshot", "save", "--format", "full", "--json", "--key", key, "--store", &store])
        .arg("--cache-dir")
        .arg(&ctx.cache)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&save.stderr);
    assert!(save.status.success(), "{stderr}");
    let saved: serde_json::Value = serde_json::from_slice(&save.stdout).unwrap();
    assert_eq!(saved["outcome"]["status"], "saved", "{saved} {stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");

    // The object's tar members are the raw bytes (not the recorded text).
    // The data object is the one stored file beside the sidecar (a save names it uniquely).
    let objects: Vec<_> = std::fs::read_dir(ctx.path("store"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_none_or(|x| x != "json"))
        .collect();
    assert_eq!(objects.len(), 1, "{objects:?}");
    let object = std::fs::read(&objects[0]).unwrap();
    let tar_bytes = zstd::decode_all(object.as_slice()).unwrap();
    let mut archive = tar::Archive::new(tar_bytes.as_slice());
    let members: Vec<Vec<u8>> =
        archive.entries().unwrap().map(|e| e.unwrap().path_bytes().into_owned()).collect();
    assert!(members.iter().any(|m| m.ends_with(b"/artifacts/a\xe9")), "{members:?}");
    assert!(members.iter().any(|m| m.ends_with(b"/artifacts/a\\xe9")), "{members:?}");
    assert!(members.iter().any(|m| m.ends_with(b"/artifacts/d\xe9/f.txt")), "{members:?}");

    // Restore on "runner B" (another cache), then HIT there.
    let cache_b = ctx.path("cache-b");
    let restore = ctx
        .strata()
        .args(["snapshot", "restore", "--key", key, "--store", &store, "--cache-dir"])
        .arg(&cache_b)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&restore.stderr);
    assert!(restore.status.success() && stderr.contains("RESTORED"), "{stderr}");
    std::fs::remove_dir_all(&out).unwrap();
    let on_b = names_action(&cache_b, &out);
    ctx.run(&on_b).expect(&["HIT"]);
    assert_eq!(listing(&out), built);

    // pack/unpack: the unpacked tree equals the packed one, byte for byte.
    let packed = ctx.path("local.tzst");
    let pack = ctx
        .strata()
        .args(["snapshot", "pack", "--cache-dir"])
        .arg(&ctx.cache)
        .arg("--output")
        .arg(&packed)
        .output()
        .unwrap();
    assert!(pack.status.success(), "{}", String::from_utf8_lossy(&pack.stderr));
    let dest = ctx.path("unpacked");
    let unpack = ctx
        .strata()
        .args(["snapshot", "unpack", "--input"])
        .arg(&packed)
        .arg("--dest")
        .arg(&dest)
        .output()
        .unwrap();
    assert!(unpack.status.success(), "{}", String::from_utf8_lossy(&unpack.stderr));
    let original = listing(&ctx.cache.join("actions-v1"));
    let mut unpacked = listing(&dest.join("actions-v1"));
    // Modes of files are normalised on unpack (not the subject here): compare names only
    // for files, everything for links.
    assert_eq!(
        original.keys().collect::<Vec<_>>(),
        unpacked.keys().collect::<Vec<_>>(),
        "the same names, byte for byte"
    );
    let link = b"third_party/outs".to_vec();
    unpacked.retain(|k, v| k.starts_with(&link) && v.starts_with("link"));
    assert_eq!(unpacked.len(), 1, "{unpacked:?}");
    assert!(unpacked.values().all(|v| *v == format!("link {:?}", b"o\xff.bin")), "{unpacked:?}");
}

/// The artifact store and L0: a build whose outputs have names that are not UTF-8 (also a
/// required one, given to `--require` as raw bytes) is published, pushed to a directory
/// store, pulled into another store and materialized, byte for byte.
#[test]
fn names_survive_the_artifact_store_and_l0_push_pull() {
    let producer = tempfile::tempdir().unwrap();
    let consumer = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let flags = |root: &Path| -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--root".into(), root.into()];
        for (k, v) in [
            ("--env", format!("cc={}", "a".repeat(64))),
            ("--source", "b".repeat(64)),
            ("--specialization", "c".repeat(64)),
            ("--stage", "generated".to_owned()),
        ] {
            args.push(k.into());
            args.push(v.into());
        }
        args.push("--require".into());
        args.push(OsString::from_vec(b"lib/bad\xe9.a".to_vec()));
        args
    };
    let strata = || Command::new(crate::strata_exe());
    let script = r#"set -e
o="$STRATA_ARTIFACT_OUT"
mkdir -p "$o/lib" "$o/$(printf 'd\351')"
printf 'archive' > "$o/lib/$(printf 'bad\351').a"
printf 'nested' > "$o/$(printf 'd\351')/$(printf 'x\377')"
printf 'percent' > "$o/a%E9"
printf 'byte' > "$o/$(printf 'a\351')"
printf 'backslash' > "$o/a\\xe9"
"#;
    let private = producer.path().join("private");
    let out = strata()
        .args(["artifact", "get-or-build", "--json"])
        .args(flags(&producer.path().join("root")))
        .arg("--private-root")
        .arg(&private)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["disposition"], "published", "{v}");
    let slot = PathBuf::from(v["dir"].as_str().unwrap());
    let mut published = listing(&slot);
    published.remove(b"artifact_manifest.json".as_slice());
    assert_eq!(published.len(), 7, "{published:?}");
    assert_eq!(published[&b"a\xe9".to_vec()], format!("file exec=false {:?}", b"byte"));
    let manifest = std::fs::read_to_string(slot.join("artifact_manifest.json")).unwrap();
    for text in [r#""a%E9""#, r#""a\\xe9""#, r#""a\\x5cxe9""#, r#""d\\xe9/x\\xff""#] {
        assert!(manifest.contains(text), "{text} not in {manifest}");
    }

    // A HIT through the CLI (the required byte name verifies), then L0 push and pull.
    let hit = strata()
        .args(["artifact", "get-or-build", "--json"])
        .args(flags(&producer.path().join("root")))
        .args(["--", "false"])
        .output()
        .unwrap();
    assert!(hit.status.success(), "{}", String::from_utf8_lossy(&hit.stderr));
    let push = strata()
        .args(["artifact", "push", "--json", "--store", &url])
        .args(flags(&producer.path().join("root")))
        .output()
        .unwrap();
    assert!(push.status.success(), "{}", String::from_utf8_lossy(&push.stderr));
    let dest = consumer.path().join("out");
    let pull = strata()
        .args(["artifact", "pull", "--json", "--store", &url])
        .args(flags(&consumer.path().join("root")))
        .arg("--dest")
        .arg(&dest)
        .output()
        .unwrap();
    assert!(pull.status.success(), "{}", String::from_utf8_lossy(&pull.stderr));
    let v: serde_json::Value = serde_json::from_slice(&pull.stdout).unwrap();
    assert_eq!(v["outcome"], "pulled", "{v}");
    let strip = |l: BTreeMap<Vec<u8>, String>| -> BTreeMap<Vec<u8>, String> {
        l.into_iter().filter(|(k, _)| k != b"artifact_manifest.json").collect()
    };
    assert_eq!(
        strip(listing(&dest)).keys().collect::<Vec<_>>(),
        published.keys().collect::<Vec<_>>()
    );
    for (name, desc) in strip(listing(&dest)) {
        if desc.starts_with("file") {
            let content = std::fs::read(at(&dest, &name)).unwrap();
            assert_eq!(content, std::fs::read(at(&slot, &name)).unwrap());
        }
    }
}

/// A crafted snapshot whose names are not UTF-8 is restored when it is safe, and rejected
/// when the bytes climb out (`..`) or are absolute: the checks hold for bytes.
#[test]
fn names_snapshot_safety_checks_hold_for_bytes() {
    use crate::snapshot::craft::{Entry, publish_entries};
    let ctx = TestContext::new();
    let store = ctx.path("store");
    let url = format!("file://{}", store.display());
    let restore = |cache: &Path, key: &str| {
        let mut cmd = ctx.strata();
        cmd.args(["snapshot", "restore", "--key", key, "--store", &url, "--cache-dir"]).arg(cache);
        run_bounded(cmd, crate::engine::RUN_TIMEOUT)
    };
    let dirs = [
        Entry::Dir("actions-v1"),
        Entry::Dir("actions-v1/third_party"),
        Entry::Dir("actions-v1/third_party/u"),
        Entry::Dir("actions-v1/third_party/u/k"),
        Entry::Dir("actions-v1/third_party/u/k/artifacts"),
    ];
    let mut good: Vec<Entry> = dirs.to_vec();
    good.push(Entry::BytesFile {
        path: b"actions-v1/third_party/u/k/artifacts/bad\xe9.o".to_vec(),
        data: b"object".to_vec(),
    });
    publish_entries(&store, "good-1", &good);
    let cache = ctx.path("cache-good");
    let run = restore(&cache, "good-1");
    run.expect_code(0).expect_stderr("RESTORED");
    assert_eq!(
        std::fs::read(at(&cache, b"actions-v1/third_party/u/k/artifacts/bad\xe9.o")).unwrap(),
        b"object"
    );

    let outside = ctx.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let absolute = [outside.as_os_str().as_bytes(), b"/evil\xe9"].concat();
    for (key, path, reason) in [
        ("dotdot-1", b"actions-v1/third_party/u/../../../../outside/evil\xe9".to_vec(), "unsafe"),
        ("dotdot-2", b"actions-v1/\xe9/../../outside/evil\xe9".to_vec(), "unsafe"),
        ("absolute-1", absolute, "absolute"),
    ] {
        let mut entries: Vec<Entry> = dirs.to_vec();
        entries.push(Entry::BytesFile { path, data: b"x".to_vec() });
        publish_entries(&store, key, &entries);
        let victim = ctx.path(&format!("cache-{key}"));
        let run = restore(&victim, key);
        run.expect_code(0).expect_stderr("rejected").expect_stderr(reason);
        assert!(!victim.exists(), "nothing of a rejected snapshot is left");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing written outside");
    }
}

/// A custom operator's sources tracked by git under a name that is not UTF-8 count: a
/// change to such a file is a new namespace (a MISS), never a HIT on stale outputs. Its
/// outputs with such names are published and restored byte for byte.
#[test]
fn names_operator_sources_tracked_by_git_count_whatever_their_names() {
    require_tool("git", "apt-get install git");
    let ctx = TestContext::new();
    let repo = ctx.path("repo");
    let source = repo.join("ops/k");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(at(&source, b"kernel\xe9.py"), b"v = 1\n").unwrap();
    std::fs::write(source.join("plain.py"), b"w = 1\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"],
    ] {
        let st = Command::new("git").args(args).current_dir(&repo).status().unwrap();
        assert!(st.success(), "git {args:?}");
    }
    let (stage, publish, state) = (ctx.path("stage"), ctx.path("pub"), ctx.path("state"));
    let op = crate::engine::CustomOp {
        unit: "u",
        soc: "s",
        operator: "k",
        action: "build",
        source: &source,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let action: Action = ctx
        .custom(&op)
        .flag("--repo-root", &repo)
        .sh(&format!("mkdir -p {0} && echo built > \"{0}/$(printf 'k\\351.o')\"", stage.display()));
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    // Outputs whose names are not UTF-8 are published (and owned) under their exact bytes.
    assert_eq!(std::fs::read(at(&publish, b"k\xe9.o")).unwrap(), b"built\n");
    std::fs::remove_file(at(&publish, b"k\xe9.o")).unwrap();
    ctx.run(&action).expect(&["HIT"]);
    assert_eq!(std::fs::read(at(&publish, b"k\xe9.o")).unwrap(), b"built\n");
    std::fs::write(at(&source, b"kernel\xe9.py"), b"v = 2\n").unwrap();
    ctx.run(&action).expect(&["MISS", "SAVED"]);
}

/// Command arguments and `--set-env` values are bytes: a build whose command names a file
/// that is not UTF-8 runs with the exact bytes (no usage error), is cached, and another
/// byte in the argument is another key.
#[test]
fn names_command_arguments_and_set_env_values_are_bytes() {
    let ctx = TestContext::new();
    std::fs::create_dir_all(ctx.path("src")).unwrap();
    std::fs::write(at(&ctx.root, b"src/bad\xe9.c"), b"int bad;\n").unwrap();
    std::fs::write(at(&ctx.root, b"src/bad\xe8.c"), b"int other;\n").unwrap();
    let out = ctx.path("out");
    let script = r#"mkdir -p out && cat "$1" > out/copy.c && printf '%s' "$V" > out/v"#;
    let action = |arg: &[u8], value: &[u8]| {
        let mut set_env = b"V=".to_vec();
        set_env.extend_from_slice(value);
        ctx.third_party("args", &out)
            .flag("--prepared-input", ctx.path("src"))
            .flag("--set-env", OsStr::from_bytes(&set_env))
            .cmd(&[
                OsStr::new("sh"),
                OsStr::new("-c"),
                OsStr::new(script),
                OsStr::new("sh"),
                OsStr::from_bytes(arg),
            ])
    };
    let first = action(b"src/bad\xe9.c", b"/opt/\xff");
    let cold = ctx.run(&first);
    cold.expect(&["MISS", "SAVED"]);
    assert_eq!(std::fs::read(out.join("copy.c")).unwrap(), b"int bad;\n");
    assert_eq!(std::fs::read(out.join("v")).unwrap(), b"/opt/\xff", "the value's exact bytes");
    std::fs::remove_dir_all(&out).unwrap();
    let warm = ctx.run(&first);
    warm.expect(&["HIT"]);
    assert_eq!(warm.key(), cold.key());
    assert_eq!(std::fs::read(out.join("copy.c")).unwrap(), b"int bad;\n");
    for (arg, value) in [
        (&b"src/bad\xe8.c"[..], &b"/opt/\xff"[..]),
        (b"src/bad\xe9.c", b"/opt/\xfe"),
        (b"src/bad\\xe9.c", b"/opt/\xff"),
    ] {
        let run = ctx.run(&action(arg, value));
        assert_ne!(run.key(), cold.key(), "{}", String::from_utf8_lossy(arg));
    }

    // The artifact store runs its build command with the exact bytes too.
    let root = ctx.path("artifacts");
    let get = ctx
        .strata()
        .args(["artifact", "get-or-build", "--json", "--root"])
        .arg(&root)
        .args(["--env", &format!("cc={}", "a".repeat(64))])
        .args(["--source", &"b".repeat(64), "--specialization", &"c".repeat(64)])
        .args(["--require", "copy.c", "--"])
        .args(["sh", "-c", r#"cat "$1" > "$STRATA_ARTIFACT_OUT/copy.c""#, "sh"])
        .arg(at(&ctx.root, b"src/bad\xe9.c"))
        .output()
        .unwrap();
    assert!(get.status.success(), "{}", String::from_utf8_lossy(&get.stderr));
    let v: serde_json::Value = serde_json::from_slice(&get.stdout).unwrap();
    let slot = PathBuf::from(v["dir"].as_str().unwrap());
    assert_eq!(std::fs::read(slot.join("copy.c")).unwrap(), b"int bad;\n");
}

/// A compiler reached through a directory whose name is not UTF-8 is still identified:
/// upgrading it is a MISS, never a HIT on outputs of the old version; so is a tool named
/// by `--environment-tool` there.
#[test]
fn names_compiler_in_a_non_utf8_directory_is_toolchain_identity() {
    let ctx = TestContext::new();
    let bin = at(&ctx.root, b"tools\xe9/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let gcc = bin.join("gcc");
    let fake = |version: &str| {
        crate::engine::write_script(
            &gcc,
            &format!(
                "[ \"$1\" = --version ] && {{ echo \"gcc (Fake) {version}\"; exit 0; }}\n\
                 mkdir -p out && cp \"$2\" \"$3\""
            ),
        );
    };
    fake("12.1");
    ctx.write("src/m.c", "int m;\n");
    let out = ctx.path("out");
    let action = ctx.third_party("cc", &out).flag("--prepared-input", ctx.path("src")).cmd(&[
        gcc.as_os_str(),
        OsStr::new("-c"),
        OsStr::new("src/m.c"),
        OsStr::new("out/m.o"),
    ]);
    let cold = ctx.run(&action);
    cold.expect(&["MISS", "SAVED"]);
    ctx.run(&action).expect(&["HIT"]);
    fake("12.2");
    let upgraded = ctx.run(&action);
    upgraded.expect(&["MISS", "SAVED"]);
    assert_ne!(upgraded.key(), cold.key());

    // `--environment-tool` with such a path (given as raw bytes) counts the same way.
    let tool = bin.join("gen");
    let gen_version = |v: &str| crate::engine::write_script(&tool, &format!("echo gen {v}"));
    gen_version("1");
    let with_tool = action.flag("--environment-tool", &tool);
    let first = ctx.run(&with_tool);
    first.expect(&["MISS", "SAVED"]);
    ctx.run(&with_tool).expect(&["HIT"]);
    gen_version("2");
    let changed = ctx.run(&with_tool);
    changed.expect(&["MISS", "SAVED"]);
    assert_ne!(changed.key(), first.key());
}

/// `--json` reports of commands given paths that are not UTF-8 print those paths in the
/// name encoding instead of panicking (exit 101) or failing (exit 1).
#[test]
fn names_json_reports_show_paths_that_are_not_utf8() {
    let ctx = TestContext::new();
    let json_of = |out: &std::process::Output| -> serde_json::Value {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let shown = |p: &Path| strata::fs::name::encode_os(p.as_os_str());

    let root = at(&ctx.root, b"store\xe9");
    let built = ctx
        .strata()
        .args(["artifact", "get-or-build", "--json", "--root"])
        .arg(&root)
        .args(["--env", &format!("cc={}", "a".repeat(64))])
        .args(["--source", &"b".repeat(64), "--specialization", &"c".repeat(64)])
        .args(["--require", "x", "--", "sh", "-c", "echo > \"$STRATA_ARTIFACT_OUT/x\""])
        .output()
        .unwrap();
    let v = json_of(&built);
    assert!(v["dir"].as_str().unwrap().starts_with(&format!("{}/", shown(&root))), "{v}");

    let cache = at(&ctx.root, b"cache\xe9");
    std::fs::create_dir_all(cache.join("actions-v1")).unwrap();
    std::fs::write(cache.join(".updated"), b"").unwrap();
    let store = format!("file://{}", ctx.path("store").display());
    let save = ctx
        .strata()
        .args(["snapshot", "save", "--json", "--key", "k-1", "--store", &store, "--cache-dir"])
        .arg(&cache)
        .output()
        .unwrap();
    let v = json_of(&save);
    assert_eq!(v["cache_dir"], shown(&cache), "{v}");
    assert_eq!(v["outcome"]["status"], "saved", "{v}");
    let restored = at(&ctx.root, b"restored\xff");
    let restore = ctx
        .strata()
        .args(["snapshot", "restore", "--json", "--key", "k-1", "--store", &store, "--cache-dir"])
        .arg(&restored)
        .output()
        .unwrap();
    let v = json_of(&restore);
    assert_eq!(v["cache_dir"], shown(&restored), "{v}");

    let source = at(&ctx.root, b"src\xe9/a.c");
    std::fs::create_dir_all(source.parent().unwrap()).unwrap();
    std::fs::write(&source, b"int a;\n").unwrap();
    let scan =
        ctx.strata().args(["artifact", "scan-includes", "--json"]).arg(&source).output().unwrap();
    let v = json_of(&scan);
    assert_eq!(v["files"][0], shown(&source), "{v}");
}

/// Symlink texts are bytes in snapshots too, including texts that a path library would
/// normalise (`..//x`, `../x/.`, `../x/./y`) and a long text that would collapse to a short
/// one: a saved snapshot restores (before, `snapshot pack`/`save` wrote the normalised text
/// into the tar member, so every restore rejected the snapshot: "the symlinks differ").
#[test]
fn names_symlink_texts_that_are_not_normal_survive_snapshots_byte_exact() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    let texts: Vec<Vec<u8>> = vec![
        b"..//src/f".to_vec(),
        b"../src/.".to_vec(),
        b"../src/./f".to_vec(),
        b"./../src/f".to_vec(),
        [b"..".as_slice(), &[b'/'; 120], b"src/f"].concat(),
        [b"/nonexistent/".as_slice(), &[0xe9; 150]].concat(),
    ];
    let mut script = String::from("set -e\nprintf 'f\\n' > \"$0/f\"\n");
    for (i, text) in texts.iter().enumerate() {
        let octal: String = text.iter().map(|b| format!("\\{b:03o}")).collect();
        script.push_str(&format!("ln -s \"$(printf '{octal}')\" \"$0/l{i}\"\n"));
    }
    let action = |cache: &Path| {
        Action::default()
            .flag("--cache-root", cache)
            .flag("--domain", "third_party")
            .flag("--unit", "links")
            .flag("--output-dir", &out)
            .flag("--environment-profile", "bare")
            .cmd(&[OsStr::new("sh"), OsStr::new("-c"), OsStr::new(&script), out.as_os_str()])
    };
    ctx.run(&action(&ctx.cache)).expect(&["MISS", "SAVED"]);
    for (i, text) in texts.iter().enumerate() {
        let got = std::fs::read_link(out.join(format!("l{i}"))).unwrap().into_os_string();
        assert_eq!(got.as_bytes(), text.as_slice(), "the build made link l{i}");
    }
    let built = listing(&out);

    // pack → unpack: every link text byte for byte.
    let packed = ctx.path("local.tzst");
    let mut pack = ctx.strata();
    pack.args(["snapshot", "pack", "--cache-dir"]).arg(&ctx.cache).arg("--output").arg(&packed);
    run_bounded(pack, crate::engine::RUN_TIMEOUT).expect_code(0);
    let dest = ctx.path("unpacked");
    let mut unpack = ctx.strata();
    unpack.args(["snapshot", "unpack", "--input"]).arg(&packed).arg("--dest").arg(&dest);
    run_bounded(unpack, crate::engine::RUN_TIMEOUT).expect_code(0).expect_stderr("UNPACKED");
    let links = |root: &Path| -> BTreeMap<Vec<u8>, String> {
        listing(root).into_iter().filter(|(_, v)| v.starts_with("link")).collect()
    };
    let original = links(&ctx.cache.join("actions-v1"));
    assert_eq!(original.len(), texts.len(), "{original:?}");
    assert_eq!(links(&dest.join("actions-v1")), original);

    // save → restore on another cache → HIT restores the same links.
    let url = format!("file://{}", ctx.path("store").display());
    let mut save = ctx.strata();
    save.args(["snapshot", "save", "--key", "links-1", "--store", &url, "--cache-dir"])
        .arg(&ctx.cache);
    run_bounded(save, crate::engine::RUN_TIMEOUT).expect_code(0).expect_stderr("SAVED");
    let cache_b = ctx.path("cache-b");
    let mut restore = ctx.strata();
    restore
        .args(["snapshot", "restore", "--key", "links-1", "--store", &url, "--cache-dir"])
        .arg(&cache_b);
    run_bounded(restore, crate::engine::RUN_TIMEOUT).expect_code(0).expect_stderr("RESTORED");
    std::fs::remove_dir_all(&out).unwrap();
    ctx.run(&action(&cache_b)).expect(&["HIT"]);
    assert_eq!(listing(&out), built);
}

/// Long names (255 bytes, the Linux limit) whose first bytes are not UTF-8 are packed into
/// L0 objects and snapshots: before, `artifact push` failed ("paths in archives must have
/// at least one component") because the tar library truncated the header name to its
/// UTF-8 prefix, which was empty.
#[test]
fn names_long_names_that_start_with_a_byte_survive_l0_push_pull() {
    let producer = tempfile::tempdir().unwrap();
    let consumer = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let long_file = vec![0xe9u8; 255];
    let long_dir = [vec![0xffu8; 150], b"/".to_vec(), vec![0xfe; 200]].concat();
    let flags = |root: &Path| -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--root".into(), root.into()];
        for (k, v) in [
            ("--env", format!("cc={}", "a".repeat(64))),
            ("--source", "b".repeat(64)),
            ("--specialization", "d".repeat(64)),
        ] {
            args.push(k.into());
            args.push(v.into());
        }
        args.push("--require".into());
        args.push(OsString::from_vec(long_file.clone()));
        args
    };
    let strata = || Command::new(crate::strata_exe());
    let octal = |b: &[u8]| b.iter().map(|b| format!("\\{b:03o}")).collect::<String>();
    let script = format!(
        "set -e\no=\"$STRATA_ARTIFACT_OUT\"\nprintf long > \"$o/$(printf '{}')\"\n\
         mkdir \"$o/$(printf '{}')\"\nprintf nested > \"$o/$(printf '{}')\"\n",
        octal(&long_file),
        octal(&long_dir[..150]),
        octal(&long_dir),
    );
    let out = strata()
        .args(["artifact", "get-or-build", "--json"])
        .args(flags(&producer.path().join("root")))
        .arg("--private-root")
        .arg(producer.path().join("private"))
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let slot = PathBuf::from(v["dir"].as_str().unwrap());
    let push = strata()
        .args(["artifact", "push", "--json", "--store", &url])
        .args(flags(&producer.path().join("root")))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&push.stdout);
    assert!(push.status.success(), "{stdout} {}", String::from_utf8_lossy(&push.stderr));
    assert!(stdout.contains(r#""outcome":"uploaded""#), "{stdout}");
    let dest = consumer.path().join("out");
    let pull = strata()
        .args(["artifact", "pull", "--json", "--store", &url])
        .args(flags(&consumer.path().join("root")))
        .arg("--dest")
        .arg(&dest)
        .output()
        .unwrap();
    assert!(pull.status.success(), "{}", String::from_utf8_lossy(&pull.stderr));
    assert_eq!(std::fs::read(at(&dest, &long_file)).unwrap(), b"long");
    assert_eq!(std::fs::read(at(&dest, &long_dir)).unwrap(), b"nested");
    let mut published = listing(&slot);
    published.remove(b"artifact_manifest.json".as_slice());
    assert_eq!(listing(&dest), published);
}
