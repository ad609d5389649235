//! `strata action prune`: the newest N operator-text versions per SoC/operator survive,
//! recency is `.last-used` (refreshed by a HIT), busy entries are never removed, and
//! `.updated` is touched only when something went.

use std::path::{Path, PathBuf};
use std::time::Duration;

use strata::action::layout::CacheRoot;

use super::{CustomOp, LockHolder, TestContext, write_file};

fn namespaces(op_dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(op_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    v.sort();
    v
}

#[test]
fn engine_prune_keeps_the_newest_operator_versions_by_last_use() {
    let ctx = TestContext::new();
    let source = ctx.path("ops/gemm");
    let stage = ctx.path("build/stage");
    let (publish, state) = (ctx.path("build/publish"), ctx.path("build/state"));
    let op = CustomOp {
        unit: "kernels",
        soc: "soc1",
        operator: "gemm",
        action: "compile",
        source: &source,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let action = ctx.custom(&op).cmd(&[
        "sh".as_ref(),
        "-c".as_ref(),
        "cp \"$1\"/kernel.c \"$0\"/kernel.o".as_ref(),
        stage.as_os_str(),
        source.as_os_str(),
    ]);
    let op_dir = ctx.cache.join("actions-v1/custom_operator/soc1/gemm");

    // Three operator-text versions, each its own namespace.
    let mut ns = Vec::new();
    for v in 1..=3 {
        write_file(&source.join("kernel.c"), format!("/* version {v} */\n"));
        ctx.run(&action).expect(&["MISS", "SAVED"]);
        let now = namespaces(&op_dir);
        let new: Vec<_> = now.iter().filter(|p| !ns.contains(*p)).cloned().collect();
        assert_eq!(new.len(), 1, "version {v} has a namespace of its own");
        ns.push(new[0].clone());
        std::thread::sleep(Duration::from_millis(30));
    }
    let (v1, v2, v3) = (ns[0].clone(), ns[1].clone(), ns[2].clone());
    // Using version 1 again refreshes it: version 2 becomes the oldest.
    write_file(&source.join("kernel.c"), "/* version 1 */\n");
    ctx.run(&action).expect(&["HIT"]);
    std::fs::remove_file(ctx.updated_marker()).unwrap();
    let all_there = || v1.is_dir() && v2.is_dir() && v3.is_dir();

    for disabled in ["0", "-1"] {
        let r = ctx.prune(&["--max-operator-versions", disabled]);
        r.expect_code(0);
        assert!(r.stdout.contains("removed 0 item(s)"), "{}", r.stdout);
        assert!(all_there(), "N = {disabled} disables version pruning");
    }

    let r = ctx.prune(&["--dry-run"]);
    r.expect_code(0);
    assert!(
        r.stdout.contains(&format!("would remove {} (operator_version", v2.display())),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("would remove 1 item(s)"), "{}", r.stdout);
    let r = ctx.prune(&["--dry-run", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["removed"].as_array().unwrap().len(), 1);
    assert_eq!(report["removed"][0]["path"], v2.display().to_string().as_str());
    assert_eq!(report["removed"][0]["kind"], "operator_version");
    assert!(report["removed"][0]["bytes"].as_u64().unwrap() > 0);
    assert!(all_there(), "--dry-run removes nothing");
    assert!(!ctx.updated_marker().exists(), "--dry-run touches nothing");

    // An entry whose lock is held keeps its whole namespace.
    let action_dir = v2.join("compile@kernels");
    let entries = namespaces(&action_dir);
    assert_eq!(entries.len(), 1);
    let rel = entries[0].strip_prefix(ctx.cache.join("actions-v1")).unwrap();
    let lock = CacheRoot::new(&ctx.cache).unwrap().entry_lock(&rel.to_string_lossy());
    let holder = LockHolder::hold(&lock);
    let r = ctx.prune(&[]);
    r.expect_code(0);
    assert!(r.stdout.contains(&format!("kept {} (in use)", v2.display())), "{}", r.stdout);
    assert!(all_there() && !ctx.updated_marker().exists());
    drop(holder);

    let r = ctx.prune(&[]);
    r.expect_code(0);
    assert!(
        r.stdout.contains(&format!("removed {} (operator_version", v2.display())),
        "{}",
        r.stdout
    );
    assert_eq!(namespaces(&op_dir), {
        let mut keep = vec![v1.clone(), v3.clone()];
        keep.sort();
        keep
    });
    assert!(ctx.updated_marker().is_file(), "a removal touches .updated");
    assert!(ctx.cache_dirs_containing(".trash-").is_empty());
    let r = ctx.prune(&[]);
    assert!(r.stdout.contains("removed 0 item(s)"), "{}", r.stdout);

    // The pruned version builds again; the kept ones still HIT.
    write_file(&source.join("kernel.c"), "/* version 2 */\n");
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    write_file(&source.join("kernel.c"), "/* version 3 */\n");
    ctx.run(&action).expect(&["HIT"]);
}

#[test]
fn engine_prune_never_fails() {
    let ctx = TestContext::new();
    let r = ctx.prune(&[]);
    r.expect_code(0);
    assert!(r.stdout.contains("removed 0 item(s)"), "{}", r.stdout);
    assert!(!ctx.cache.exists(), "pruning a missing cache creates nothing");
}

#[test]
fn engine_prune_never_touches_the_inside_of_a_valid_entry() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    // An output directory whose name looks like a save leftover, and one like a trash dir.
    let script = "mkdir -p out/.gen.tmp-0123456789abcdef out/.ns.trash-0123456789abcdef; \
                  echo h > out/.gen.tmp-0123456789abcdef/x.h; \
                  echo t > out/.ns.trash-0123456789abcdef/t.txt; echo o > out/a.o";
    let action = ctx.third_party("odd-names", &out).sh(script);
    ctx.run(&action).expect(&["MISS", "SAVED"]);
    let files = super::tree_files(&out);
    let r = ctx.prune(&[]);
    assert!(r.stdout.contains("removed 0 item(s)"), "{}", r.stdout);
    std::fs::remove_dir_all(&out).unwrap();
    let r = ctx.run(&action);
    r.expect(&["HIT"]);
    assert_eq!(super::tree_files(&out), files);
}

#[test]
fn engine_prune_removes_custom_operator_leftovers_beside_entries_and_namespaces() {
    let ctx = TestContext::new();
    let source = ctx.path("ops/add");
    write_file(&source.join("k.c"), "k");
    let (stage, publish, state) = (ctx.path("stage"), ctx.path("publish"), ctx.path("state"));
    let op = CustomOp {
        unit: "u",
        soc: "s",
        operator: "add",
        action: "a",
        source: &source,
        stage: &stage,
        publish: &publish,
        state: &state,
    };
    let action = ctx.custom(&op).cmd(&[
        "sh".as_ref(),
        "-c".as_ref(),
        "echo o > \"$0\"/o.o".as_ref(),
        stage.as_os_str(),
    ]);
    let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    let op_dir = ctx.cache.join("actions-v1/custom_operator/s/add");
    let ns = namespaces(&op_dir).pop().unwrap();
    let action_dir = ns.join("a@u");
    // What a killed save, a killed replacement and a killed prune leave behind.
    let leftovers = [
        action_dir.join(format!(".{key}.tmp-00000000000000aa")),
        action_dir.join(format!(".{key}.old-00000000000000bb")),
        op_dir
            .join(format!(".{}.trash-00000000000000cc", ns.file_name().unwrap().to_string_lossy())),
    ];
    for l in &leftovers {
        write_file(&l.join("artifacts/o.o"), "partial");
    }
    let r = ctx.prune(&["--dry-run"]);
    assert!(r.stdout.contains("would remove 3 item(s)"), "{}", r.stdout);
    assert!(leftovers.iter().all(|l| l.exists()));
    let r = ctx.prune(&[]);
    assert!(r.stdout.contains("removed 3 item(s)"), "{}", r.stdout);
    assert!(leftovers.iter().all(|l| !l.exists()));
    ctx.run(&action).expect(&["HIT"]);
}
