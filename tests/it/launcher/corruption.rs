//! A damaged cache never hands back a wrong file and never fails the build: a stored
//! output (object, message; the depfile is written anew for each HIT) with other bytes,
//! truncated or gone is a MISS with a
//! warning; a damaged manifest (bytes flipped, truncated, not an object, duplicate keys,
//! another key's) is a MISS with a warning; the save of that MISS repairs the entry.

use std::path::Path;

use super::{
    Launcher, TestContext, assert_entries_sound, assert_same_bytes, plain, read, require_tool,
    write_file,
};

const SOURCE: &str = "#include \"k.h\"\nint k(void) { int unused; return K; }\n";

fn argv(tu: &str) -> Vec<String> {
    ["gcc", "-Wall", "-O2", "-MD", "-MF"]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("{tu}.d"), "-c".into(), format!("{tu}.c"), "-o".into(), format!("{tu}.o")])
        .collect()
}

/// The plain compiler's object and depfile and stderr for `tu` (then removed).
fn reference(dir: &Path, tu: &str) -> (Vec<u8>, Vec<u8>, String) {
    let r = plain(dir, &argv(tu), &[]);
    r.expect_code(0);
    let out = (read(&dir.join(format!("{tu}.o"))), read(&dir.join(format!("{tu}.d"))), r.stderr);
    std::fs::remove_file(dir.join(format!("{tu}.o"))).unwrap();
    std::fs::remove_file(dir.join(format!("{tu}.d"))).unwrap();
    out
}

fn flip_byte(path: &Path) {
    let mut bytes = read(path);
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn launcher_a_damaged_stored_output_is_a_miss_with_a_warning_never_a_wrong_file() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("k.h"), "#define K 11\n");
    write_file(&dir.join("k.c"), SOURCE);
    let (want_o, want_d, want_err) = reference(&dir, "k");
    assert!(want_err.contains("unused"), "{want_err}");
    let l = Launcher::new(&ctx.cache);
    l.expect(&dir, &argv("k"), "miss");
    let entry = l.entries().remove(0);
    type Damage = fn(&Path);
    let damages: [(&str, Damage); 3] = [
        ("flipped", flip_byte),
        ("truncated", |p| std::fs::write(p, &read(p)[..read(p).len() / 2]).unwrap()),
        ("removed", |p| std::fs::remove_file(p).unwrap()),
    ];
    for role in ["object", "stderr"] {
        for (how, damage) in damages {
            // A HIT first, so the entry's verification memo vouches for the object.
            l.expect(&dir, &argv("k"), "hit");
            let stored = if role == "stderr" {
                let m = entry.manifest(&ctx.cache);
                entry
                    .dir
                    .join("objects")
                    .join(m.candidates[0].stderr.as_ref().unwrap().digest.to_hex())
            } else {
                entry.output(&ctx.cache, role)
            };
            damage(&stored);
            for out in ["k.o", "k.d"] {
                std::fs::remove_file(dir.join(out)).unwrap();
            }
            let r = l.expect(&dir, &argv("k"), "miss");
            assert!(
                r.stderr.contains("strata: warning: cached result of compile/")
                    && r.stderr.contains("unusable"),
                "{role} {how}: no warning:\n{}",
                r.stderr
            );
            assert!(r.stderr.contains(&want_err), "{role} {how}: the compiler's own warning");
            assert_same_bytes(&format!("k.o ({role} {how})"), &read(&dir.join("k.o")), &want_o);
            assert_eq!(read(&dir.join("k.d")), want_d, "k.d ({role} {how})");
            // The save repaired it.
            assert_eq!(assert_entries_sound(&ctx.cache), 1, "{role} {how}");
            let again = l.expect(&dir, &argv("k"), "hit");
            assert_eq!(again.stderr, want_err, "{role} {how}: the HIT replays the warning only");
            assert_same_bytes("k.o after the repair", &read(&dir.join("k.o")), &want_o);
        }
    }
}

#[test]
fn launcher_a_damaged_manifest_is_a_miss_and_the_save_repairs_it() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let dir = ctx.path("proj");
    write_file(&dir.join("k.h"), "#define K 11\n");
    write_file(&dir.join("k.c"), SOURCE);
    write_file(&dir.join("other.c"), "int other(void) { return 99; }\n");
    let (want_o, want_d, _) = reference(&dir, "k");
    let l = Launcher::new(&ctx.cache);
    l.expect(&dir, &argv("k"), "miss");
    let k_entry = l.entries().remove(0);
    l.expect(&dir, &argv("other"), "miss");
    let other = l.entries().into_iter().find(|e| e.key != k_entry.key).unwrap();
    let manifest = k_entry.dir.join("manifest.json");
    let good = read(&manifest);
    let text = String::from_utf8(good.clone()).unwrap();
    assert!(text.starts_with("{\""), "{text}");
    let damages: Vec<(&str, Vec<u8>)> = vec![
        ("a flipped byte in the payload", {
            let at = text.find("\"created_at\":\"").unwrap() + "\"created_at\":\"".len() + 3;
            let mut b = good.clone();
            b[at] = if b[at] == b'1' { b'2' } else { b'1' };
            b
        }),
        ("truncated", good[..good.len() / 2].to_vec()),
        // What a lost write leaves (the manifest is not fsynced): its length, zeros.
        ("zeros from the middle on, its length kept", {
            let mut b = good.clone();
            let half = b.len() / 2;
            b[half..].fill(0);
            b
        }),
        ("all zeros, its length kept", vec![0; good.len()]),
        ("empty", Vec::new()),
        ("not an object", b"[1,2,3]".to_vec()),
        ("not JSON", read(&dir.join("other.o"))),
        ("a duplicate key", {
            let mut b = b"{\"schema_version\":1,".to_vec();
            b.extend_from_slice(&good[1..]);
            b
        }),
        ("another key's manifest", read(&other.dir.join("manifest.json"))),
    ];
    for (how, bytes) in damages {
        std::fs::write(&manifest, &bytes).unwrap();
        for out in ["k.o", "k.d"] {
            let _ = std::fs::remove_file(dir.join(out));
        }
        let (r, outcome) = l.compile(&dir, &argv("k"));
        assert_eq!((r.code, outcome.as_str()), (0, "miss"), "{how}:\n{}", r.stderr);
        assert!(
            r.stderr.contains("strata: warning: compile entry compile/")
                && r.stderr.contains("unusable"),
            "{how}: no warning:\n{}",
            r.stderr
        );
        assert_same_bytes(&format!("k.o ({how})"), &read(&dir.join("k.o")), &want_o);
        assert_eq!(read(&dir.join("k.d")), want_d, "{how}");
        assert_eq!(k_entry.manifest(&ctx.cache).key, k_entry.compile_key(), "{how}: repaired");
        l.expect(&dir, &argv("k"), "hit");
        assert_same_bytes(
            &format!("k.o after the repair ({how})"),
            &read(&dir.join("k.o")),
            &want_o,
        );
    }
    assert_eq!(assert_entries_sound(&ctx.cache), 2);
}
