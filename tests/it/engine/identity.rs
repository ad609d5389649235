//! Identity both ways (DESIGN.md invariant 7): a relocated checkout keeps every key (HIT),
//! every semantic change gives a new key (MISS). Real C compiled with `gcc -c`.

use std::collections::BTreeSet;
use std::os::unix::fs::symlink;
use std::path::Path;

use super::{Action, TestContext, require_tool, write_file, write_script};

/// What can vary between two runs of the compile action besides the tree itself.
#[derive(Clone)]
struct Knobs {
    recipe_value: &'static str,
    set_env: &'static str,
    opt_flag: &'static str,
}

const BASE: Knobs = Knobs { recipe_value: "opt=1", set_env: "HELLO_FLAVOUR=a", opt_flag: "-O0" };

/// A small C project at `root`: sources, a symlinked header (relative and absolute links),
/// a recipe file, an environment file and a fake tool whose `--version` is identity.
fn make_tree(root: &Path) {
    write_file(
        &root.join("src/main.c"),
        "#include \"foo.h\"\n#include \"cfg.h\"\n#include \"abs.h\"\nint answer(void) { return FOO + CFG + ABS; }\n",
    );
    write_file(&root.join("src/inc/foo.h"), "#define FOO 1\n");
    write_file(&root.join("src/inc/cfg_a.h"), "#define CFG 2\n");
    write_file(&root.join("src/inc/cfg_b.h"), "#define CFG 2\n");
    write_file(&root.join("src/inc/real_abs.h"), "#define ABS 3\n");
    symlink("cfg_a.h", root.join("src/inc/cfg.h")).unwrap();
    // An absolute in-tree link: its text is normalised, so it survives relocation.
    symlink(root.join("src/inc/real_abs.h"), root.join("src/inc/abs.h")).unwrap();
    write_file(&root.join("recipe/build.txt"), format!("compile {}/src/main.c\n", root.display()));
    write_file(&root.join("env/toolchain.info"), "toolchain 1\n");
    write_script(&root.join("tools/fake-cc"), "echo 'fake-cc 1.0'");
}

fn compile_action(ctx: &TestContext, root: &Path, k: &Knobs) -> Action {
    ctx.third_party("hello", &root.join("out"))
        .flag("--prepared-input", root.join("src"))
        .flag("--recipe-file", root.join("recipe/build.txt"))
        .flag("--recipe-value", k.recipe_value)
        .flag("--set-env", k.set_env)
        .flag("--environment-tool", root.join("tools/fake-cc"))
        .flag("--environment-file", root.join("env/toolchain.info"))
        .flag("--normalize-path", root)
        .flag("--working-directory", root.join("src"))
        .cmd(&[
            "gcc".to_owned(),
            k.opt_flag.to_owned(),
            "-c".to_owned(),
            root.join("src/main.c").display().to_string(),
            format!("-I{}/src/inc", root.display()),
            "-o".to_owned(),
            root.join("out/main.o").display().to_string(),
        ])
}

#[test]
fn engine_identity_relocation_hits_and_every_semantic_change_misses() {
    require_tool("gcc", "apt-get install gcc");
    let ctx = TestContext::new();
    let base = ctx.path("checkouts/a");
    make_tree(&base);
    let first = ctx.run(&compile_action(&ctx, &base, &BASE));
    first.expect(&["MISS", "SAVED"]);
    let base_key = first.key();
    let object = std::fs::read(base.join("out/main.o")).unwrap();
    assert!(object.starts_with(b"\x7fELF"), "gcc produced an object file");

    // Relocation: the same tree at another absolute path is a HIT with the same key and
    // the cached object restored byte for byte.
    let moved = ctx.path("elsewhere/deeper/b");
    make_tree(&moved);
    let hit = ctx.run(&compile_action(&ctx, &moved, &BASE));
    hit.expect(&["HIT"]);
    assert_eq!(hit.key(), base_key);
    assert_eq!(std::fs::read(moved.join("out/main.o")).unwrap(), object);

    // Each semantic change, applied to a relocated copy, is a MISS with a key of its own.
    type Mutation = fn(&Path);
    let changes: Vec<(&str, Mutation, Knobs)> = vec![
        ("source byte", |r| replace_in(&r.join("src/main.c"), "FOO + CFG", "FOO - CFG"), BASE),
        ("header", |r| write_file(&r.join("src/inc/foo.h"), "#define FOO 7\n"), BASE),
        ("recipe file", |r| append(&r.join("recipe/build.txt"), "-DX\n"), BASE),
        ("recipe value", |_| {}, Knobs { recipe_value: "opt=2", ..BASE }),
        ("command flag", |_| {}, Knobs { opt_flag: "-O1", ..BASE }),
        ("set-env value", |_| {}, Knobs { set_env: "HELLO_FLAVOUR=b", ..BASE }),
        ("tool version", |r| write_script(&r.join("tools/fake-cc"), "echo 'fake-cc 2.0'"), BASE),
        ("environment file", |r| write_file(&r.join("env/toolchain.info"), "toolchain 2\n"), BASE),
        (
            "symlink target",
            |r| {
                std::fs::remove_file(r.join("src/inc/cfg.h")).unwrap();
                symlink("cfg_b.h", r.join("src/inc/cfg.h")).unwrap();
            },
            BASE,
        ),
    ];
    let mut keys = BTreeSet::from([base_key.clone()]);
    for (i, (what, mutate, knobs)) in changes.into_iter().enumerate() {
        let root = ctx.path(&format!("changed/{i}"));
        make_tree(&root);
        mutate(&root);
        let r = ctx.run(&compile_action(&ctx, &root, &knobs));
        assert_eq!((what, r.code, r.statuses()), (what, 0, vec!["MISS", "SAVED"]), "{}", r.stderr);
        assert!(keys.insert(r.key()), "{what}: key {} seen before", r.key());
        assert!(root.join("out/main.o").is_file(), "{what}: the compile ran");
    }
    assert_eq!(keys.len(), 10);
}

#[test]
fn engine_identity_tool_replaced_in_place_is_a_miss_despite_the_memo() {
    let ctx = TestContext::new();
    let tool = ctx.path("tools/cc-wrapper");
    // Same size before and after: only the memo's mtime/ctime check can notice.
    write_script(&tool, "echo 'wrapper 1.0'");
    let out = ctx.path("out");
    let action =
        ctx.third_party("tool", &out).flag("--environment-tool", &tool).sh("echo x > out/o");
    let k1 = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    assert_eq!(ctx.run(&action).expect(&["HIT"]).key(), k1, "the memo is used on a HIT");
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_script(&tool, "echo 'wrapper 2.0'");
    let k2 = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    assert_ne!(k1, k2);
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_script(&tool, "echo 'wrapper 1.0'");
    assert_eq!(ctx.run(&action).expect(&["HIT"]).key(), k1, "back to the first version");
}

/// How a value spelled through `{A}` (the root of the first run) and `{B}` (the root of
/// the relocated run) must compare.
const BOUNDARY_CASES: &[(&str, &str, &str, bool)] = &[
    ("whole root", "{A}", "{B}", true),
    ("option token -I", "-I{A}/inc", "-I{B}/inc", true),
    ("after a semicolon", "x;{A}/a", "x;{B}/a", true),
    ("after =", "--gen={A}/gen", "--gen={B}/gen", true),
    ("quoted", "\"{A}/f.h\"", "\"{B}/f.h\"", true),
    // /root vs /rootx: a sibling that merely starts with the root's text is not the root.
    ("sibling /rootx stays literal", "{A}x/a", "{A}x/a", true),
    ("sibling /rootx is not relocated", "{A}x/a", "{B}x/a", false),
    ("sibling /root-backup", "{A}-backup/x", "{B}-backup/x", false),
    ("root inside another path", "/other{A}/a", "/other{B}/a", false),
    ("option glued to a word", "a-I{A}/inc", "a-I{B}/inc", false),
    ("relocated to a different file", "-I{A}/inc", "-I{B}/other", false),
];

#[test]
fn engine_identity_normalisation_boundaries_through_values_and_command_tokens() {
    let ctx = TestContext::new();
    let a = ctx.path("root");
    let b = ctx.path("moved/root");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let out = ctx.path("out");
    let spell = |t: &str| {
        t.replace("{A}", &a.display().to_string()).replace("{B}", &b.display().to_string())
    };
    for (i, (what, ta, tb, same)) in BOUNDARY_CASES.iter().enumerate() {
        for channel in ["recipe-value", "command-token"] {
            let unit = format!("case{i}-{channel}");
            let action = |root: &Path, value: &str| {
                let act = ctx.third_party(&unit, &out).flag("--normalize-path", root);
                if channel == "recipe-value" {
                    act.flag("--recipe-value", value).sh("echo x > out/o")
                } else {
                    act.cmd(&["sh", "-c", "echo x > out/o", value])
                }
            };
            let first = ctx.run(&action(&a, &spell(ta)));
            first.expect(&["MISS", "SAVED"]);
            let second = ctx.run(&action(&b, &spell(tb)));
            let label = format!("{what} via {channel}: {ta} vs {tb}");
            if *same {
                assert_eq!(
                    (second.statuses(), second.key()),
                    (vec!["HIT"], first.key()),
                    "{label}"
                );
            } else {
                assert_eq!(second.statuses(), ["MISS", "SAVED"], "{label}");
                assert_ne!(second.key(), first.key(), "{label}");
            }
            second.expect_code(0);
        }
    }
}

#[test]
fn engine_identity_binary_and_non_utf8_inputs_are_hashed_byte_exact() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    type Content = fn(&str) -> Vec<u8>;
    // (case, content as a function of the tree's own root, relocation stays a HIT)
    let cases: &[(&str, &str, Content, bool)] = &[
        ("text naming its root", "paths.txt", |r| format!("{r}/include\n").into_bytes(), true),
        ("binary naming its root", "blob.bin", |r| [r.as_bytes(), b"/x\0\x01\x02"].concat(), false),
        ("binary .h naming its root", "gen.h", |r| [r.as_bytes(), b"\0"].concat(), false),
        ("latin-1 naming its root", "names.txt", |r| [r.as_bytes(), b"/caf\xe9\n"].concat(), false),
        ("binary without a root", "plain.bin", |_| vec![0, 1, 2, 255, 254, 0, 7], true),
    ];
    for (i, (what, name, content, relocates)) in cases.iter().enumerate() {
        let unit = format!("bin{i}");
        let run = |root: &Path| {
            write_file(&root.join("gen").join(name), content(&root.display().to_string()));
            ctx.run(
                &ctx.third_party(&unit, &out)
                    .flag("--prepared-input", root.join("gen"))
                    .flag("--normalize-path", root)
                    .sh("echo x > out/o"),
            )
        };
        let first = run(&ctx.path(&format!("a{i}/root")));
        first.expect(&["MISS", "SAVED"]);
        let second = run(&ctx.path(&format!("b{i}/elsewhere/root")));
        let expected: &[&str] = if *relocates { &["HIT"] } else { &["MISS", "SAVED"] };
        assert_eq!(second.statuses(), expected, "{what}: {}", second.stderr);
        assert_eq!(second.key() == first.key(), *relocates, "{what}");
    }

    // One flipped byte in a binary input (same size, no root inside) is a MISS.
    let blob = ctx.path("flip/data.bin");
    let mut data = super::random_bytes(4096, 7);
    data[100] = 0;
    write_file(&blob, &data);
    let action = ctx.third_party("flip", &out).flag("--prepared-input", &blob).sh("echo x > out/o");
    let k1 = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    data[2000] ^= 0x01;
    write_file(&blob, &data);
    let k2 = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    assert_ne!(k1, k2);
}

fn replace_in(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from:?} not in {}", path.display());
    std::fs::write(path, text.replace(from, to)).unwrap();
}

fn append(path: &Path, text: &str) {
    let mut s = std::fs::read_to_string(path).unwrap();
    s.push_str(text);
    std::fs::write(path, s).unwrap();
}

#[test]
fn engine_identity_an_explicit_tool_whose_version_fails_is_an_error() {
    let ctx = TestContext::new();
    let out = ctx.path("out");
    for (name, body, reason) in [
        ("silent", "exit 0", "printed nothing"),
        ("failing", "echo 'unknown option --version' >&2; exit 2", "failed with exit status 2"),
    ] {
        let tool = ctx.path(&format!("tools/{name}"));
        write_script(&tool, body);
        let r = ctx.run(
            &ctx.third_party(name, &out).flag("--environment-tool", &tool).sh("echo x > out/o"),
        );
        r.expect_code(1).expect_stderr(&tool.display().to_string()).expect_stderr(reason);
        assert!(r.statuses().is_empty(), "{name}: nothing runs:\n{}", r.stderr);
    }
}

#[test]
fn engine_identity_excluded_paths_do_not_count_and_everything_else_does() {
    let ctx = TestContext::new();
    let src = ctx.path("src");
    for (rel, text) in [
        ("a.c", "int a;\n"),
        ("build/gen.o", "object"),
        ("sub/.git/HEAD", "ref: refs/heads/main\n"),
        (".git", "gitdir: ../.git/modules/x\n"),
        ("sub/__pycache__/m.cpython-311.pyc", "pyc"),
        ("sub/run.log", "log"),
    ] {
        write_file(&src.join(rel), text);
    }
    let out = ctx.path("out");
    let action = ctx
        .third_party("excl", &out)
        .flag("--prepared-input", &src)
        .flag("--exclude", "build")
        .sh("echo x > out/o");
    let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
    // Excluded (by --exclude or the defaults, at any depth): still a HIT.
    for rel in [
        "build/gen.o",
        "build/new/deep.o",
        "sub/.git/HEAD",
        ".git",
        "sub/__pycache__/m.cpython-311.pyc",
        "sub/run.log",
    ] {
        write_file(&src.join(rel), "changed");
        assert_eq!(ctx.run(&action).expect(&["HIT"]).key(), key, "{rel} is excluded");
    }
    // Anything else: a MISS, including a new empty file and a file under a directory whose
    // name merely starts like an excluded one.
    for rel in ["a.c", "new.h", "builds/x.h", "sub/git/HEAD"] {
        write_file(&src.join(rel), "");
        let r = ctx.run(&action);
        r.expect(&["MISS", "SAVED"]);
        assert_ne!(r.key(), key, "{rel} counts");
    }
}
