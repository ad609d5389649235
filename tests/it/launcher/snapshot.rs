//! The launcher's entries travel in snapshots: build checkout A with cache C1, `strata
//! snapshot save` to a `file://` store, restore into an empty cache C2, build a relocated
//! copy of A with C2 and base directories: every TU hits, with the same objects.

use super::relocation::{checkout, cmake_style};
use super::{
    Launcher, TestContext, assert_entries_sound, assert_same_bytes, copy_tree, counts, read,
    require_tool, s,
};
use crate::snapshot::{Scratch, key, strata};

#[test]
fn launcher_a_relocated_checkout_restored_from_a_snapshot_hits_every_tu() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let scratch = Scratch::new();
    let store = vec![("STRATA_STORE", scratch.file_store())];
    let base_a = ctx.path("a");
    let a = checkout(&base_a);
    let c1 = ctx.path("c1");
    let map = |base: &std::path::Path| vec![format!("-ffile-prefix-map={}=.", s(base))];
    let tus = |proj: &std::path::Path, base: &std::path::Path| {
        vec![cmake_style(proj, "x", &[]), cmake_style(proj, "f", &map(base))]
    };
    let at_a = Launcher::new(&c1).base_dirs(&[&base_a]);
    for argv in tus(&a, &base_a) {
        at_a.expect(&a.join("build"), &argv, "miss");
    }

    let k1 = key(&scratch, "launcher_sources");
    let saved = strata(
        &scratch,
        &["snapshot", "save", "--cache-dir", &s(&c1), "--key", &k1, "--json"],
        &store,
    );
    saved.assert_ok();
    assert_eq!(saved.json()["outcome"]["status"], "saved", "{}", saved.stdout);

    let c2 = ctx.path("runner-b/c2");
    let k2 = key(&scratch, "launcher_sources");
    let restored = strata(
        &scratch,
        &["snapshot", "restore", "--cache-dir", &s(&c2), "--key", &k2, "--json"],
        &store,
    );
    restored.assert_ok();
    assert_eq!(restored.json()["status"], "restored", "{}", restored.stdout);
    assert_eq!(assert_entries_sound(&c2), 2, "both compile entries restored");
    assert!(super::counters(&c2).is_empty(), "counters are machine-local, not in the snapshot");

    let base_b = ctx.path("runner-b/checkout/deeper");
    std::fs::create_dir_all(&base_b).unwrap();
    copy_tree(&a, &base_b.join("proj"));
    let b = base_b.join("proj");
    for tu in ["x.o", "f.o", "x.o.d", "f.o.d"] {
        std::fs::remove_file(b.join("build").join(tu)).unwrap();
    }
    let at_b = Launcher::new(&c2).base_dirs(&[&base_b]);
    for argv in tus(&b, &base_b) {
        at_b.expect(&b.join("build"), &argv, "hit");
    }
    assert_eq!(at_b.counters(), counts(&[("hit", 2)]), "100 % hits");
    for tu in ["x.o", "f.o"] {
        assert_same_bytes(tu, &read(&b.join("build").join(tu)), &read(&a.join("build").join(tu)));
    }
    let dep = String::from_utf8(read(&b.join("build/x.o.d"))).unwrap();
    assert!(dep.contains(&s(&b.join("include/x.h"))) && !dep.contains(&s(&a)), "{dep}");
}
