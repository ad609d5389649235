//! Concurrency: real processes racing on one cache and one publish directory.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use strata::action::publish::{ActionId, owned_paths};

use super::{
    Action, CustomOp, RUN_TIMEOUT, TestContext, count_lines, random_bytes, tree_files,
    wait_bounded, write_file,
};

#[test]
fn engine_concurrency_eight_processes_one_action_build_once() {
    let ctx = TestContext::new();
    let src = ctx.write("src/data.bin", random_bytes(1 << 20, 11));
    let counter = ctx.path("counter");
    // One output directory for all eight (the output directory is part of the action's
    // identity): the first builds, the others wait for the locks and then HIT.
    let script =
        r#"echo run >> "$0"; sleep 0.3; mkdir -p lib; cp "$1" lib/data.bin; echo done > stamp.txt"#;
    let outs: Vec<PathBuf> = (0..8).map(|_| ctx.path("out/shared")).collect();
    let children: Vec<_> = outs
        .iter()
        .map(|out| {
            std::fs::create_dir_all(out).unwrap();
            let action = ctx
                .third_party("shared", out)
                .cmd(&[
                    "sh".as_ref(),
                    "-c".as_ref(),
                    script.as_ref(),
                    counter.as_os_str(),
                    src.as_os_str(),
                ])
                .cwd(out);
            ctx.spawn(&action)
        })
        .collect();
    let results: Vec<_> = children.into_iter().map(|c| wait_bounded(c, RUN_TIMEOUT)).collect();

    assert_eq!(count_lines(&counter), 1, "the command ran exactly once");
    let key = results[0].key();
    let mut saved = 0;
    for r in &results {
        r.expect_code(0);
        assert_eq!(r.key(), key);
        match r.statuses().as_slice() {
            ["MISS", "SAVED"] => saved += 1,
            ["HIT"] => {}
            other => panic!("unexpected statuses {other:?}:\n{}", r.stderr),
        }
    }
    assert_eq!(saved, 1);
    let expected = vec![
        ("lib/data.bin".to_owned(), std::fs::read(&src).unwrap()),
        ("stamp.txt".to_owned(), b"done\n".to_vec()),
    ];
    for out in &outs {
        assert_eq!(tree_files(out), expected, "{}", out.display());
    }
    assert_eq!(ctx.cache_dirs_containing(".tmp-"), Vec::<PathBuf>::new());
    assert_eq!(ctx.cache_dirs_containing(".old-"), Vec::<PathBuf>::new());
    // Eight writers of one event log: every line is whole JSON.
    let mut statuses = ctx.event_statuses();
    statuses.sort();
    assert_eq!(statuses, ["HIT", "HIT", "HIT", "HIT", "HIT", "HIT", "HIT", "MISS", "SAVED"]);
}

/// Paths of one custom_operator action in a shared publish directory.
struct Op {
    name: String,
    source: PathBuf,
    stage: PathBuf,
    publish: PathBuf,
    state: PathBuf,
}

impl Op {
    fn new(ctx: &TestContext, name: &str) -> Self {
        let source = ctx.path(&format!("ops/{name}"));
        write_file(&source.join("kernel.c"), format!("/* kernel {name} */\n"));
        Op {
            name: name.to_owned(),
            source,
            stage: ctx.path(&format!("build/stages/{name}")),
            publish: ctx.path("build/publish"),
            state: ctx.path("build/state"),
        }
    }

    /// The action; `script` runs as `sh -c script <stage> <extra>...`.
    fn action(&self, ctx: &TestContext, script: &str, extra: &[&str]) -> Action {
        let op = CustomOp {
            unit: "kernels",
            soc: "soc1",
            operator: &self.name,
            action: "compile",
            source: &self.source,
            stage: &self.stage,
            publish: &self.publish,
            state: &self.state,
        };
        let mut argv = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
        argv.push(self.stage.display().to_string());
        argv.extend(extra.iter().map(|s| s.to_string()));
        ctx.custom(&op).cmd(&argv)
    }

    fn id(&self) -> ActionId {
        ActionId {
            unit: "kernels".into(),
            soc: "soc1".into(),
            operator: self.name.clone(),
            action: "compile".into(),
        }
    }
}

#[test]
fn engine_concurrency_eight_custom_operators_publish_into_one_directory() {
    let ctx = TestContext::new();
    let script = r#"mkdir -p "$0/sub"; echo "object $1" > "$0/$1.o"; echo "doc $1" > "$0/sub/$1.txt"; sleep 0.2"#;
    let ops: Vec<Op> = (0..8).map(|i| Op::new(&ctx, &format!("op{i}"))).collect();
    let mut expected_files = Vec::new();
    let mut expected_owners = BTreeMap::new();
    for op in &ops {
        expected_files
            .push((format!("{}.o", op.name), format!("object {}\n", op.name).into_bytes()));
        expected_files
            .push((format!("sub/{}.txt", op.name), format!("doc {}\n", op.name).into_bytes()));
        expected_owners.insert(format!("{}.o", op.name), op.id());
        expected_owners.insert(format!("sub/{}.txt", op.name), op.id());
    }
    expected_files.sort();
    let publish = ops[0].publish.clone();
    let state = ops[0].state.clone();

    for (round, expect) in [(0, ["MISS", "SAVED"].as_slice()), (1, ["HIT"].as_slice())] {
        if round == 1 {
            // A fresh build tree (new publish and state directories): every action HITs and
            // publishes again.
            std::fs::remove_dir_all(ctx.path("build")).unwrap();
        }
        let children: Vec<_> =
            ops.iter().map(|op| ctx.spawn(&op.action(&ctx, script, &[&op.name]))).collect();
        for r in children.into_iter().map(|c| wait_bounded(c, RUN_TIMEOUT)) {
            r.expect(expect);
        }
        assert_eq!(tree_files(&publish), expected_files, "round {round}");
        assert_eq!(owned_paths(&state).unwrap(), expected_owners, "round {round}");
    }
}

#[test]
fn engine_concurrency_eight_processes_one_custom_operator_action_build_once() {
    let ctx = TestContext::new();
    let op = Op::new(&ctx, "same");
    let counter = ctx.path("counter");
    let script = r#"echo run >> "$1"; sleep 0.3; echo object > "$0/same.o""#;
    let c = counter.display().to_string();
    let children: Vec<_> = (0..8).map(|_| ctx.spawn(&op.action(&ctx, script, &[&c]))).collect();
    let mut statuses: Vec<Vec<&str>> = Vec::new();
    let results: Vec<_> = children.into_iter().map(|ch| wait_bounded(ch, RUN_TIMEOUT)).collect();
    for r in &results {
        r.expect_code(0);
        statuses.push(r.statuses());
    }
    statuses.sort();
    let mut expected = vec![vec!["HIT"]; 7];
    expected.push(vec!["MISS", "SAVED"]);
    assert_eq!(statuses, expected);
    assert_eq!(count_lines(&counter), 1, "the action lock serialises identical requests");
    assert_eq!(tree_files(&op.publish), [("same.o".to_owned(), b"object\n".to_vec())]);
    assert_eq!(owned_paths(&op.state).unwrap().into_values().collect::<Vec<_>>(), [op.id()]);
}

#[test]
fn engine_concurrency_two_actions_claiming_one_output_is_a_hard_error() {
    let ctx = TestContext::new();
    let x = Op::new(&ctx, "opx");
    let y = Op::new(&ctx, "opy");
    let script = r#"echo "from $1" > "$0/shared.o"; echo "own $1" > "$0/$1.o""#;
    ctx.run(&x.action(&ctx, script, &["x"])).expect(&["MISS", "SAVED"]);
    let shared = x.publish.join("shared.o");
    let before = std::fs::metadata(&shared).unwrap();
    assert_eq!(std::fs::read(&shared).unwrap(), b"from x\n");

    for attempt in 0..2 {
        let r = ctx.run(&y.action(&ctx, script, &["y"]));
        r.expect_code(1)
            .expect_stderr("artifact ownership collision")
            .expect_stderr(&shared.display().to_string())
            .expect_stderr("operator \"opx\"")
            .expect_stderr("operator \"opy\"");
        assert_eq!(r.statuses(), ["MISS"], "attempt {attempt}: nothing saved for the loser");
    }
    let after = std::fs::metadata(&shared).unwrap();
    assert_eq!(std::fs::read(&shared).unwrap(), b"from x\n", "the owner's file is untouched");
    assert_eq!((after.ino(), after.mtime_nsec()), (before.ino(), before.mtime_nsec()));
    assert!(!x.publish.join("y.o").exists(), "publication is all-or-nothing");
    let owners = owned_paths(&x.state).unwrap();
    assert_eq!(owners.keys().collect::<Vec<_>>(), ["shared.o", "x.o"]);
    assert!(owners.values().all(|id| *id == x.id()));
}

#[test]
fn engine_concurrency_stale_outputs_are_removed_and_foreign_edits_are_fatal() {
    let ctx = TestContext::new();
    let op = Op::new(&ctx, "opstale");
    let counter = ctx.path("counter");
    // $1: produce stale.o too ("both") or only keep.o ("one").
    let script = r#"echo run >> "$2"; echo keep > "$0/keep.o"; if [ "$1" = both ]; then echo stale > "$0/stale.o"; fi"#;
    let c = counter.display().to_string();
    let both = op.action(&ctx, script, &["both", &c]);
    let one = op.action(&ctx, script, &["one", &c]);
    let stale = op.publish.join("stale.o");

    ctx.run(&both).expect(&["MISS", "SAVED"]);
    assert!(stale.is_file());
    ctx.run(&one).expect(&["MISS", "SAVED"]);
    assert!(!stale.exists(), "an output the action no longer produces is removed");
    assert_eq!(owned_paths(&op.state).unwrap().keys().collect::<Vec<_>>(), ["keep.o"]);
    ctx.run(&both).expect(&["HIT"]);
    assert_eq!(std::fs::read(&stale).unwrap(), b"stale\n", "a HIT publishes it again");
    assert_eq!(count_lines(&counter), 2);

    // Someone else edits an output the action is about to remove: a hard error, on the HIT
    // path (no rebuild: it would not help) and on the MISS path alike.
    std::fs::write(&stale, "edited by hand\n").unwrap();
    let r = ctx.run(&one);
    r.expect_code(1)
        .expect_stderr("changed outside its owning action")
        .expect_stderr(&stale.display().to_string());
    assert_eq!(count_lines(&counter), 2, "the HIT path fails without building:\n{}", r.stderr);
    let miss = op.action(&ctx, script, &["one", &c, "variant"]);
    ctx.run(&miss).expect_code(1).expect_stderr("changed outside its owning action");
    assert_eq!(count_lines(&counter), 3);
    assert_eq!(std::fs::read(&stale).unwrap(), b"edited by hand\n", "the edit is not deleted");
}

#[test]
fn engine_concurrency_lost_owner_index_is_rebuilt_without_deleting_outputs() {
    let ctx = TestContext::new();
    let (x, y, z) = (Op::new(&ctx, "opx"), Op::new(&ctx, "opy"), Op::new(&ctx, "opz"));
    let script = r#"for f in "$@"; do echo "$f by $1" > "$0/$f"; done"#;
    ctx.run(&x.action(&ctx, script, &["x.o", "shared.o"])).expect(&["MISS", "SAVED"]);
    ctx.run(&y.action(&ctx, script, &["y.o"])).expect(&["MISS", "SAVED"]);
    let published = tree_files(&x.publish);
    let owners = owned_paths(&x.state).unwrap();

    for damage in ["remove", "[]", "{\"schema_name\":1}"] {
        let index = x.state.join("owners.json");
        if damage == "remove" {
            std::fs::remove_file(&index).unwrap();
        } else {
            std::fs::write(&index, damage).unwrap();
        }
        // Another action publishes again (a HIT): the index is rebuilt from the per-action
        // state, and nobody's outputs are deleted.
        ctx.run(&y.action(&ctx, script, &["y.o"])).expect(&["HIT"]);
        assert_eq!(tree_files(&x.publish), published, "{damage}: outputs kept");
        assert_eq!(owned_paths(&x.state).unwrap(), owners, "{damage}: index rebuilt");
        // And ownership is still enforced.
        ctx.run(&z.action(&ctx, script, &["shared.o"]))
            .expect_code(1)
            .expect_stderr("artifact ownership collision")
            .expect_stderr("operator \"opx\"");
    }

    // A damaged per-action state cannot be trusted: a hard error naming it.
    let actions = x.state.join("actions");
    let file = std::fs::read_dir(&actions).unwrap().next().unwrap().unwrap().path();
    std::fs::write(&file, "garbage").unwrap();
    std::fs::remove_file(x.state.join("owners.json")).unwrap();
    ctx.run(&y.action(&ctx, script, &["y.o"]))
        .expect_code(1)
        .expect_stderr("publication state")
        .expect_stderr(&file.display().to_string());
    assert_eq!(tree_files(&x.publish), published, "outputs kept");
}

#[test]
fn engine_concurrency_stale_directories_go_with_their_outputs() {
    let ctx = TestContext::new();
    let op = Op::new(&ctx, "shape");
    // $1 = dir: publishes x/y.o and deep/a/b.o; $1 = file: publishes x (a file) only.
    let script = r#"if [ "$1" = dir ]; then mkdir -p "$0/x" "$0/deep/a"; echo y > "$0/x/y.o"; echo b > "$0/deep/a/b.o"; else echo x > "$0/x"; fi"#;
    let as_dir = op.action(&ctx, script, &["dir"]);
    let as_file = op.action(&ctx, script, &["file"]);
    ctx.run(&as_dir).expect(&["MISS", "SAVED"]);
    // Someone else's file in a shared directory keeps that directory.
    let other = Op::new(&ctx, "other");
    ctx.run(&other.action(&ctx, r#"mkdir -p "$0/deep"; echo o > "$0/deep/other.o""#, &[]))
        .expect(&["MISS", "SAVED"]);

    ctx.run(&as_file).expect(&["MISS", "SAVED"]);
    assert_eq!(
        tree_files(&op.publish),
        [("deep/other.o".to_owned(), b"o\n".to_vec()), ("x".to_owned(), b"x\n".to_vec())]
    );
    assert!(!op.publish.join("deep/a").exists(), "an emptied directory is removed");
    ctx.run(&as_dir).expect(&["HIT"]);
    let names: Vec<String> = tree_files(&op.publish).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["deep/a/b.o", "deep/other.o", "x/y.o"]);
}
