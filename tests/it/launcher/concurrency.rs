//! 16 launcher processes at once on one cache, compiling the same and different TUs, three
//! rounds: no failure, every object byte-identical to a plain compile, every entry sound,
//! and a later run hits every TU.

use std::process::Stdio;

use super::{
    Launcher, RUN_TIMEOUT, TestContext, assert_entries_sound, assert_same_bytes, plain_object,
    read, require_tool, write_file,
};

const PROCESSES: usize = 16;
const ROUNDS: usize = 3;
const TUS: usize = 4;

/// The command of TU `i`, run from `<root>/w/<round>/<process>` (the same arguments in
/// every directory, so processes of one TU share a key).
fn argv(i: usize) -> Vec<String> {
    ["gcc", "-O2", "-I../../../inc", "-c"]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("../../../src/t{i}.c"), "-o".into(), format!("t{i}.o")])
        .collect()
}

#[test]
fn launcher_sixteen_concurrent_processes_share_one_cache() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    write_file(&ctx.path("inc/common.h"), "#include <stdio.h>\n#define SCALE 3\n");
    for i in 0..TUS {
        write_file(
            &ctx.path(&format!("src/t{i}.c")),
            format!(
                "#include \"common.h\"\nint t{i}(int x) {{ return printf(\"%d\", x * SCALE + {i}); }}\n"
            ),
        );
    }
    // Plain objects from a directory at the same depth.
    let want: Vec<Vec<u8>> = (0..TUS)
        .map(|i| {
            let dir = ctx.path("w/plain/p");
            std::fs::create_dir_all(&dir).unwrap();
            plain_object(&dir, &argv(i), &format!("t{i}.o"))
        })
        .collect();
    let l = Launcher::new(&ctx.cache);
    let dir_of = |round: usize, p: usize| ctx.path(&format!("w/r{round}/p{p:02}"));
    for round in 0..ROUNDS {
        let mut children = Vec::new();
        for p in 0..PROCESSES {
            let dir = dir_of(round, p);
            std::fs::create_dir_all(&dir).unwrap();
            let mut cmd = l.command(&dir, &argv(p % TUS));
            cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
            children.push((p, cmd.spawn().unwrap()));
        }
        for (p, child) in children {
            let r = crate::engine::wait_bounded(child, RUN_TIMEOUT);
            assert_eq!(r.code, 0, "round {round} process {p}:\n{}", r.stderr);
            assert!(!r.stderr.contains("strata:"), "round {round} process {p}:\n{}", r.stderr);
            let i = p % TUS;
            assert_same_bytes(
                &format!("round {round} process {p}"),
                &read(&dir_of(round, p).join(format!("t{i}.o"))),
                &want[i],
            );
        }
    }
    let c = l.counters();
    let (hits, misses) = (c.get("hit").copied().unwrap_or(0), c.get("miss").copied().unwrap_or(0));
    assert_eq!(hits + misses, (PROCESSES * ROUNDS) as u64, "only hits and misses: {c:?}");
    assert!(c.keys().all(|k| k == "hit" || k == "miss"), "nothing else counted: {c:?}");
    assert!(misses >= TUS as u64, "every TU compiled at least once: {c:?}");
    assert_eq!(assert_entries_sound(&ctx.cache), TUS);
    // A later run hits every TU.
    for (i, want) in want.iter().enumerate() {
        let dir = ctx.path("w/after/p");
        std::fs::create_dir_all(&dir).unwrap();
        l.expect(&dir, &argv(i), "hit");
        assert_same_bytes("after the rounds", &read(&dir.join(format!("t{i}.o"))), want);
    }
}

/// The launcher's saves hold the entry lock under L1's one lock policy: the entry timeout
/// of `STRATA_ENTRY_LOCK_TIMEOUT_SECONDS` (not a fixed wait of their own). A held lock
/// makes a MISS compile without saving once that timeout runs out, saying which lock and
/// which variable; an unusable value runs the compiler without the cache, naming it.
#[test]
fn launcher_saves_wait_for_the_entry_lock_by_the_one_policy() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    write_file(&ctx.path("src/t.c"), "int t(int x) { return x + 1; }\n");
    let dir = ctx.path("w");
    std::fs::create_dir_all(&dir).unwrap();
    let args = ["gcc", "-O2", "-c", "../src/t.c", "-o", "t.o"];
    let l = Launcher::new(&ctx.cache).env("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS", "0.3");
    l.expect(&dir, &args, "miss");
    let entries = l.entries();
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    std::fs::remove_dir_all(&entry.dir).unwrap();
    let root = strata::l1::CacheRoot::new(&ctx.cache).unwrap();
    let rel = format!("compile/{}/{}", &entry.key[..2], entry.key);
    let lock = root.entry_lock(&rel);
    let held =
        strata::fs::lock_exclusive(&lock, strata::fs::LockWait::Immediately, &mut |_| {}).unwrap();
    let started = std::time::Instant::now();
    let (run, outcome) = l.compile(&dir, &args);
    assert_eq!((run.code, outcome.as_str()), (0, "save_failed"), "{}", run.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "bounded by the timeout");
    assert!(
        run.stderr.contains("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS")
            && run.stderr.contains(&lock.display().to_string()),
        "names the lock and the variable:\n{}",
        run.stderr
    );
    assert!(!entry.dir.join("manifest.json").exists(), "nothing saved while the lock was held");
    drop(held);
    l.expect(&dir, &args, "miss");
    assert!(entry.dir.join("manifest.json").exists());
    let typo = Launcher::new(&ctx.cache).env("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS", "60s");
    let run = typo.run(&dir, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("STRATA_ENTRY_LOCK_TIMEOUT_SECONDS=\"60s\" is invalid")
            && run.stderr.contains("without the cache"),
        "{}",
        run.stderr
    );
}
