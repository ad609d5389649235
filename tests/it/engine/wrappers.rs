//! Wrapper parsing fails closed (issue 7, item 10): the compiler behind a wrapper prefix
//! (`env -u NAME`, `nice -n N`, `timeout -s SIG D`, `time -o FILE`, `taskset MASK`, a
//! `sh -c` string, …) is toolchain identity, so upgrading it is a MISS; an unchanged
//! compiler still HITs through every wrapper, also from a relocated checkout. Real
//! wrappers (coreutils, util-linux, GNU time, cmake), a fake `gcc` script as in the issue.

use std::path::Path;
use std::process::Command;

use super::{Action, TestContext, require_tool, write_file, write_script};

/// The fake compiler: `--version` says 12.1, otherwise `gcc -c SRC -o OBJ` copies.
const FAKE_GCC: &str =
    "[ \"$1\" = --version ] && { echo \"gcc (Fake) 12.1\"; exit 0; }\ncp \"$2\" \"$4\"";

fn make_tree(root: &Path) {
    write_file(&root.join("src/m.c"), "int m(void) { return 1; }\n");
    write_script(&root.join("fb/gcc"), FAKE_GCC);
    // A wrapper strata does not know (a CI retry helper): it runs its arguments.
    write_script(&root.join("fb/retry"), "shift 2; exec \"$@\"");
}

/// "The compiler is upgraded": `sed -i s/12.1/12.2/ fb/gcc`.
fn upgrade(root: &Path) {
    let st = Command::new("sed").arg("-i").arg("s/12.1/12.2/").arg(root.join("fb/gcc")).status();
    assert!(st.unwrap().success());
}

/// The build command of one wrapper form, given the fake gcc's absolute path; the compile
/// arguments are `-c src/m.c -o out/m.o` (relative to the checkout).
type Form = fn(&str) -> Vec<String>;

fn prefixed(prefix: &[&str], gcc: &str) -> Vec<String> {
    prefix
        .iter()
        .copied()
        .chain([gcc, "-c", "src/m.c", "-o", "out/m.o"])
        .map(str::to_owned)
        .collect()
}

const FORMS: &[(&str, Form)] = &[
    ("env -u X (the issue)", |g| prefixed(&["env", "-u", "X"], g)),
    ("env -uX", |g| prefixed(&["env", "-uX"], g)),
    ("env --unset X", |g| prefixed(&["env", "--unset", "X"], g)),
    ("env --unset=X -i PATH=", |g| prefixed(&["env", "--unset=X", "-i", "PATH=/usr/bin:/bin"], g)),
    ("env -C .", |g| prefixed(&["env", "-C", ".", "A=1"], g)),
    ("env -S", |g| prefixed(&["env", "-S", "A=1 B=2"], g)),
    ("env -S with the compiler inside", |g| {
        vec!["env".into(), "-S".into(), format!("{g} -c src/m.c -o out/m.o")]
    }),
    ("nice -n 5", |g| prefixed(&["nice", "-n", "5"], g)),
    ("nice -5", |g| prefixed(&["nice", "-5"], g)),
    ("nice --adjustment=3", |g| prefixed(&["nice", "--adjustment=3"], g)),
    ("timeout -s KILL -k 5 60", |g| prefixed(&["timeout", "-s", "KILL", "-k", "5", "60"], g)),
    ("timeout --foreground 60", |g| prefixed(&["timeout", "--foreground", "60"], g)),
    ("time -o FILE -f FMT", |g| prefixed(&["/usr/bin/time", "-o", "time.txt", "-f", "%e"], g)),
    ("stdbuf -o L", |g| prefixed(&["stdbuf", "-o", "L", "-eL"], g)),
    ("taskset MASK", |g| prefixed(&["taskset", "0xffffffff"], g)),
    ("taskset -c LIST", |g| prefixed(&["taskset", "-c", "0-1023"], g)),
    ("ionice -c 3", |g| prefixed(&["ionice", "-c", "3"], g)),
    ("chrt -o 0", |g| prefixed(&["chrt", "-o", "0"], g)),
    ("flock FILE", |g| prefixed(&["flock", "-w", "30", "lockfile"], g)),
    ("flock FILE -c STRING", |g| {
        vec!["flock".into(), "lockfile".into(), "-c".into(), format!("'{g}' -c src/m.c -o out/m.o")]
    }),
    ("setsid -w", |g| prefixed(&["setsid", "-w"], g)),
    ("nohup", |g| prefixed(&["nohup"], g)),
    ("xargs -0 -n 9", |g| prefixed(&["xargs", "-0", "-n", "9"], g)),
    ("cmake -E env", |g| prefixed(&["cmake", "-E", "env", "--unset=X", "A=1"], g)),
    ("cmake -E chdir", |g| prefixed(&["cmake", "-E", "chdir", "."], g)),
    ("sh -c STRING", |g| {
        vec!["sh".into(), "-c".into(), format!("exec '{g}' -c src/m.c -o out/m.o")]
    }),
    ("sh -c \"$0\" \"$@\"", |g| prefixed(&["sh", "-c", "\"$0\" \"$@\""], g)),
    ("bash -o pipefail -ec STRING", |g| {
        vec![
            "bash".into(),
            "-o".into(),
            "pipefail".into(),
            "-ec".into(),
            format!("CC='{g}'; $CC -c src/m.c -o out/m.o"),
        ]
    }),
    // Wrappers the table does not know: every word naming a compiler counts.
    ("setpriv --no-new-privs (unknown wrapper)", |g| prefixed(&["setpriv", "--no-new-privs"], g)),
    ("fb/retry --times 3 (unknown wrapper)", |g| {
        let retry = g.strip_suffix("gcc").map(|d| format!("{d}retry")).unwrap_or_default();
        prefixed(&[retry.as_str(), "--times", "3"], g)
    }),
    ("nested: nice env timeout", |g| {
        prefixed(&["nice", "-n", "1", "env", "-u", "X", "timeout", "-s", "TERM", "60"], g)
    }),
];

fn action(ctx: &TestContext, root: &Path, unit: &str, form: Form) -> Action {
    let gcc = root.join("fb/gcc");
    ctx.third_party(unit, &root.join("out"))
        .flag("--prepared-input", root.join("src"))
        .flag("--normalize-path", root)
        .cwd(root)
        .cmd(&form(gcc.to_str().unwrap()))
}

/// The example, exactly.
#[test]
fn engine_wrappers_an_upgraded_compiler_behind_env_u_is_a_miss() {
    let ctx = TestContext::new();
    let root = ctx.path("w");
    make_tree(&root);
    let act = action(&ctx, &root, "m", FORMS[0].1);
    let k1 = ctx.run(&act).expect(&["MISS", "SAVED"]).key();
    assert_eq!(
        std::fs::read_to_string(root.join("out/m.o")).unwrap(),
        "int m(void) { return 1; }\n"
    );
    assert_eq!(ctx.run(&act).expect(&["HIT"]).key(), k1);
    upgrade(&root);
    // explain names the compiler's version as what changed.
    let why = ctx.explain(&act, false);
    why.expect_code(0);
    assert!(why.stdout.contains("tool gcc version differs"), "{}", why.stdout);
    let k2 = ctx.run(&act).expect(&["MISS", "SAVED"]).key();
    assert_ne!(k1, k2, "the toolchain changed");
}

/// Every wrapper form: an unchanged compiler HITs (also relocated), an upgraded one MISSes.
#[test]
fn engine_wrappers_every_form_makes_the_compiler_identity() {
    require_tool("cmake", "apt-get install cmake");
    require_tool("bash", "apt-get install bash");
    require_tool("flock", "apt-get install util-linux");
    assert!(Path::new("/usr/bin/time").is_file(), "GNU time is required: apt-get install time");
    let ctx = TestContext::new();
    let (a, b) = (ctx.path("checkout-a"), ctx.path("elsewhere/checkout-b"));
    make_tree(&a);
    make_tree(&b);
    let mut failures = Vec::new();
    let mut keys = Vec::new();
    for (i, (name, form)) in FORMS.iter().enumerate() {
        let unit = format!("form{i}");
        let first = ctx.run(&action(&ctx, &a, &unit, *form));
        if first.code != 0 || first.statuses() != ["MISS", "SAVED"] {
            failures.push(format!("{name}: first run {:?}\n{}", first.statuses(), first.stderr));
            keys.push(String::new());
            continue;
        }
        let out = std::fs::read_to_string(a.join("out/m.o")).unwrap_or_default();
        if out != "int m(void) { return 1; }\n" {
            failures.push(format!("{name}: the wrapped compile did not run ({out:?})"));
        }
        std::fs::remove_file(a.join("out/m.o")).unwrap_or_default();
        keys.push(first.key());
        // Relocated, compiler unchanged: a HIT with the same key.
        let moved = ctx.run(&action(&ctx, &b, &unit, *form));
        if moved.statuses() != ["HIT"] || moved.key() != first.key() {
            failures.push(format!("{name}: relocated {:?}\n{}", moved.statuses(), moved.stderr));
        }
    }
    upgrade(&b);
    for (i, (name, form)) in FORMS.iter().enumerate() {
        if keys[i].is_empty() {
            continue;
        }
        let unit = format!("form{i}");
        let r = ctx.run(&action(&ctx, &b, &unit, *form));
        if r.statuses() != ["MISS", "SAVED"] || r.key() == keys[i] {
            failures.push(format!(
                "{name}: upgraded compiler gave {:?}\n{}",
                r.statuses(),
                r.stderr
            ));
        }
        // The checkout whose compiler did not change still HITs its own entry.
        let r = ctx.run(&action(&ctx, &a, &unit, *form));
        if r.statuses() != ["HIT"] || r.key() != keys[i] {
            failures.push(format!(
                "{name}: unchanged compiler gave {:?}\n{}",
                r.statuses(),
                r.stderr
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} forms failed:\n{}",
        failures.len(),
        FORMS.len(),
        failures.join("\n")
    );
}
