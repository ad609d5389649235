//! Which compilers a build command runs: its program, or the program behind wrappers.
//!
//! A build command's compiler is toolchain identity (its `--version` output, see
//! [`crate::toolchain`]). When the command's program is a compiler driver
//! ([`looks_like_compiler`]) that is the compiler. When it is a known wrapper — a program
//! that runs the command named after its own options (`env`, `nice`, `timeout`, `time`,
//! `stdbuf`, `taskset`, `ionice`, `chrt`, `flock`, `xargs`, `setsid`, `nohup`,
//! `cmake -E env|time|chdir`, the compiler caches `ccache`, `sccache`, `distcc`, `icecc`,
//! `buildcache`, and shells) — its options are parsed by that wrapper's own grammar, so an
//! option's argument (`env -u NAME`, `nice -n 5`, `time -o FILE`, `taskset MASK`) is never
//! taken for the program, and the program found is examined in turn.
//!
//! # Failing closed
//! When the program cannot be identified for certain, every word that could be it counts:
//! each word after the wrapper, and each word inside those words split the way a shell
//! would and at `=`, quotes and shell operators, that names a compiler driver. This covers
//! an option the wrapper table does not know, a command string (`sh -c '…'`, `env -S '…'`,
//! `flock -c '…'`), a lone numeric operand that is not (`chrt` without a priority), a
//! compiler cache given options or no compiler (`distcc -c a.c` runs `cc`, which counts),
//! and wrappers whose grammar or program lookup strata does not model (`sudo`, `doas`,
//! `su`, `chroot`, `setarch`, `strace`, `valgrind`, `libtool`, …). The price is a needless
//! MISS when a word that only looks like a compiler changes version; a false HIT after a
//! compiler upgrade is never the price.
//!
//! A program that is neither a compiler driver nor a modelled wrapper (`make CC=gcc`, a
//! script, or a wrapper the table does not know: `retry gcc`, `setpriv … gcc`,
//! `gomacc gcc`) is treated the same way: every word after it that names a compiler counts.
//!
//! # Limitations
//! A command that names no compiler (`make`, `cmake --build`, `python3 build.py`) does not
//! identify its compiler: declare it with `--environment-tool`. A compiler whose name does
//! not look like one (`mycc`) is found only through `--environment-tool`. Candidates are looked up on the build's `PATH`,
//! not on `sudo`'s `secure_path` or inside a `chroot`.

use crate::toolchain::looks_like_compiler;

/// How one wrapper program reads its command line. Options not listed make parsing
/// uncertain (fail closed).
#[derive(Debug, Clone, Copy)]
struct Wrapper {
    /// Program names (basenames).
    names: &'static [&'static str],
    /// Short options that take an argument, attached (`-uX`) or as the next word (`-u X`).
    short_arg: &'static str,
    /// Short options whose optional argument can only be attached (`xargs -l5`).
    short_optional: &'static str,
    /// Short options without an argument (may be bundled: `-iv`).
    short_flag: &'static str,
    /// Short options whose value is a command line to split or run by a shell.
    short_string: &'static str,
    /// Short options after which no program runs (`taskset -p`, `-h`).
    short_exit: &'static str,
    /// Long options that take an argument (`--unset=X` or `--unset X`).
    long_arg: &'static [&'static str],
    /// Long options without an argument, or with an optional one attached by `=`.
    long_flag: &'static [&'static str],
    /// Long options whose value is a command line (`env --split-string`).
    long_string: &'static [&'static str],
    /// Long options after which no program runs.
    long_exit: &'static [&'static str],
    /// Operands that come before the program (`timeout DURATION`, `taskset MASK`).
    operands: usize,
    /// Whether each operand must be a number; one that is not makes parsing uncertain.
    numeric_operands: bool,
    /// Whether `NAME=VALUE` words before the program are settings (`env`, `ccache`).
    assignments: bool,
    /// Whether `-N`, `--N`, `-+N` are options (`nice`'s historical adjustment).
    numeric_options: bool,
    /// Whether a lone `-` is an option (`env -` is `env -i`).
    dash_option: bool,
    /// Whether options may also start with `+` (`sh +e`, `bash +o pipefail`).
    plus_options: bool,
    /// Programs run when the words after the options name none, or name a program that is
    /// not a compiler driver (`distcc -c a.c` runs `cc`).
    implicit: &'static [&'static str],
    /// The command line is never parsed: everything after the wrapper is a candidate.
    unmodelled: bool,
}

const NONE: Wrapper = Wrapper {
    names: &[],
    short_arg: "",
    short_optional: "",
    short_flag: "",
    short_string: "",
    short_exit: "",
    long_arg: &[],
    long_flag: &[],
    long_string: &[],
    long_exit: &["help", "version"],
    operands: 0,
    numeric_operands: false,
    assignments: false,
    numeric_options: false,
    dash_option: false,
    plus_options: false,
    implicit: &[],
    unmodelled: false,
};

/// The wrappers whose grammar is modelled, and those that are not (every word after them
/// is a candidate). GNU coreutils, util-linux, findutils and GNU time as in Debian 12.
const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        names: &["env"],
        short_arg: "uC",
        short_flag: "i0v",
        short_string: "S",
        long_arg: &["unset", "chdir"],
        long_flag: &[
            "ignore-environment",
            "null",
            "debug",
            "block-signal",
            "default-signal",
            "ignore-signal",
            "list-signal-handling",
        ],
        long_string: &["split-string"],
        assignments: true,
        dash_option: true,
        ..NONE
    },
    Wrapper {
        names: &["nice"],
        short_arg: "n",
        long_arg: &["adjustment"],
        numeric_options: true,
        ..NONE
    },
    Wrapper {
        names: &["timeout"],
        short_arg: "ks",
        short_flag: "v",
        long_arg: &["kill-after", "signal"],
        long_flag: &["preserve-status", "foreground", "verbose"],
        operands: 1,
        ..NONE
    },
    Wrapper {
        names: &["stdbuf"],
        short_arg: "ioe",
        long_arg: &["input", "output", "error"],
        ..NONE
    },
    Wrapper { names: &["nohup"], ..NONE },
    Wrapper {
        names: &["setsid"],
        short_flag: "cfw",
        short_exit: "hV",
        long_flag: &["ctty", "fork", "wait"],
        ..NONE
    },
    Wrapper {
        names: &["taskset"],
        short_flag: "ac",
        short_exit: "phV",
        long_flag: &["all-tasks", "cpu-list"],
        long_exit: &["pid", "help", "version"],
        operands: 1,
        ..NONE
    },
    Wrapper {
        names: &["ionice"],
        short_arg: "cn",
        short_flag: "t",
        short_exit: "pPuhV",
        long_arg: &["class", "classdata"],
        long_flag: &["ignore"],
        long_exit: &["pid", "pgid", "uid", "help", "version"],
        ..NONE
    },
    Wrapper {
        names: &["chrt"],
        short_arg: "TPD",
        short_flag: "bdfioraRv",
        short_exit: "mphV",
        long_arg: &["sched-runtime", "sched-period", "sched-deadline"],
        long_flag: &[
            "batch",
            "deadline",
            "fifo",
            "idle",
            "other",
            "rr",
            "reset-on-fork",
            "all-tasks",
            "verbose",
        ],
        long_exit: &["max", "pid", "help", "version"],
        operands: 1,
        numeric_operands: true,
        ..NONE
    },
    Wrapper {
        names: &["time"],
        short_arg: "of",
        short_flag: "apqv",
        short_exit: "hV",
        long_arg: &["output", "format"],
        long_flag: &["append", "portability", "quiet", "verbose"],
        ..NONE
    },
    Wrapper {
        names: &["flock"],
        short_arg: "wE",
        short_flag: "sxunoF",
        short_string: "c",
        short_exit: "hV",
        long_arg: &["timeout", "wait", "conflict-exit-code"],
        long_flag: &[
            "shared",
            "exclusive",
            "unlock",
            "nonblock",
            "nb",
            "close",
            "no-fork",
            "verbose",
        ],
        long_string: &["command"],
        operands: 1,
        ..NONE
    },
    Wrapper {
        names: &["xargs"],
        short_arg: "adEILnPs",
        short_optional: "eil",
        short_flag: "0oprtx",
        long_arg: &[
            "arg-file",
            "delimiter",
            "max-lines",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ],
        long_flag: &[
            "null",
            "open-tty",
            "interactive",
            "no-run-if-empty",
            "verbose",
            "exit",
            "show-limits",
            "eof",
            "replace",
        ],
        ..NONE
    },
    // Shells: `-c STRING` and `-s` (commands from stdin) are uncertain; otherwise the first
    // operand is a script, an ordinary program.
    Wrapper {
        names: &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "yash"],
        short_arg: "oO",
        short_flag: "abefhiklmnprtuvxBCEHPTD",
        short_string: "cs",
        long_arg: &["rcfile", "init-file"],
        long_flag: &[
            "login",
            "noprofile",
            "norc",
            "posix",
            "restricted",
            "verbose",
            "noediting",
            "debugger",
        ],
        plus_options: true,
        ..NONE
    },
    // Compiler caches: `ccache [KEY=VALUE…] compiler …`; an option makes it uncertain.
    Wrapper { names: &["ccache", "sccache", "buildcache"], assignments: true, ..NONE },
    Wrapper { names: &["distcc", "icecc"], implicit: &["cc"], ..NONE },
    Wrapper {
        names: &[
            "sudo",
            "doas",
            "su",
            "runuser",
            "pkexec",
            "chroot",
            "schroot",
            "setarch",
            "linux32",
            "linux64",
            "unshare",
            "nsenter",
            "numactl",
            "prlimit",
            "cgexec",
            "systemd-run",
            "strace",
            "ltrace",
            "valgrind",
            "perf",
            "catchsegv",
            "eatmydata",
            "fakeroot",
            "faketime",
            "firejail",
            "bwrap",
            "proot",
            "unbuffer",
            "scl",
            "libtool",
            "rr",
            "watch",
        ],
        unmodelled: true,
        ..NONE
    },
];

/// What a wrapper's command line says about the program it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parsed {
    /// The program is the word at this index (of the words after the wrapper).
    Program(usize),
    /// No program runs (`env` alone prints the environment, `taskset -p`).
    NoProgram,
    /// The program cannot be identified for certain.
    Uncertain,
}

/// How deep nested command strings (`sh -c "sh -c '…'"`) are split.
const MAX_NESTING: usize = 4;

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn wrapper(program: &str) -> Option<&'static Wrapper> {
    let base = basename(program);
    WRAPPERS.iter().find(|w| w.names.contains(&base))
}

/// The compilers `argv` may run, in order and without duplicates: the program when it is a
/// compiler driver, the program behind wrappers, or — where the program cannot be
/// identified for certain — every word that could be it (see the module docs).
pub fn command_compilers(argv: &[String]) -> Vec<String> {
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mut found = Vec::new();
    program_compilers(&words, &mut found);
    let mut unique: Vec<String> = Vec::with_capacity(found.len());
    for word in found {
        if !unique.contains(&word) {
            unique.push(word);
        }
    }
    unique
}

/// Follows `words` from its program through wrappers, pushing what it finds.
fn program_compilers(mut words: &[&str], found: &mut Vec<String>) {
    while let Some((&program, rest)) = words.split_first() {
        if looks_like_compiler(program) {
            found.push(program.to_owned());
            return;
        }
        if basename(program) == "cmake" {
            match cmake_command(rest) {
                Parsed::Program(k) => {
                    words = rest.get(k..).unwrap_or_default();
                    continue;
                }
                Parsed::NoProgram => return,
                Parsed::Uncertain => {
                    candidates(rest, found, 0);
                    return;
                }
            }
        }
        let Some(spec) = wrapper(program) else {
            // A program that is neither a compiler nor a wrapper strata models (make, a
            // script, or a wrapper it does not know: `retry`, `setpriv`, `gomacc`,
            // `qemu-aarch64`): it may run any of its words, so each that names a compiler
            // counts (fail closed).
            candidates(rest, found, 0);
            return;
        };
        match parse(spec, rest) {
            Parsed::Program(k) => {
                let next = rest.get(k..).unwrap_or_default();
                let named = next.first().copied().unwrap_or_default();
                if !spec.implicit.is_empty() && !looks_like_compiler(named) {
                    found.extend(spec.implicit.iter().map(|p| (*p).to_owned()));
                    candidates(next, found, 0);
                    return;
                }
                words = next;
            }
            Parsed::NoProgram => {
                found.extend(spec.implicit.iter().map(|p| (*p).to_owned()));
                return;
            }
            Parsed::Uncertain => {
                found.extend(spec.implicit.iter().map(|p| (*p).to_owned()));
                candidates(rest, found, 0);
                return;
            }
        }
    }
}

/// `cmake -E env [--unset=NAME]… [NAME=VALUE]… [--] COMMAND…`, `cmake -E time COMMAND…`,
/// `cmake -E chdir DIR COMMAND…`; any other cmake command runs no program of its argv.
fn cmake_command(rest: &[&str]) -> Parsed {
    match rest {
        ["-E", "time", ..] => Parsed::Program(2),
        ["-E", "chdir", _, ..] => Parsed::Program(3),
        ["-E", "env", args @ ..] => {
            for (k, arg) in args.iter().enumerate() {
                if *arg == "--" {
                    return Parsed::Program(k + 3);
                }
                if arg.starts_with("--unset=") || is_assignment(arg) {
                    continue;
                }
                if arg.starts_with('-') {
                    return Parsed::Uncertain;
                }
                return Parsed::Program(k + 2);
            }
            Parsed::NoProgram
        }
        ["-E", ..] => Parsed::NoProgram,
        _ => Parsed::NoProgram,
    }
}

/// `NAME=VALUE` with a name that is a plausible variable name.
fn is_assignment(word: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(name, _)| !name.is_empty() && !name.starts_with('-') && !name.contains('/'))
}

/// True for `-N`, `--N`, `-+N` (`nice`'s historical adjustment).
fn is_numeric_option(word: &str) -> bool {
    let digits = word
        .strip_prefix("--")
        .or_else(|| word.strip_prefix("-+"))
        .or_else(|| word.strip_prefix('-'))
        .unwrap_or_default();
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// What the long option `name` (before any `=`) is, allowing an unambiguous prefix as
/// getopt_long does; `None` for an option the table does not know.
fn long_kind(spec: &Wrapper, name: &str) -> Option<LongKind> {
    let tables: [(&[&str], LongKind); 4] = [
        (spec.long_arg, LongKind::Arg),
        (spec.long_flag, LongKind::Flag),
        (spec.long_string, LongKind::String),
        (spec.long_exit, LongKind::Exit),
    ];
    if let Some((_, kind)) = tables.iter().find(|(table, _)| table.contains(&name)) {
        return Some(*kind);
    }
    let mut prefixed = tables
        .iter()
        .flat_map(|(table, kind)| table.iter().map(move |o| (*o, *kind)))
        .filter(|(o, _)| o.starts_with(name));
    match (prefixed.next(), prefixed.next()) {
        (Some((_, kind)), None) => Some(kind),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LongKind {
    Arg,
    Flag,
    String,
    Exit,
}

/// Parses the words after a wrapper by its grammar.
fn parse(spec: &Wrapper, words: &[&str]) -> Parsed {
    if spec.unmodelled {
        return Parsed::Uncertain;
    }
    let mut k = 0;
    let mut operands_left = spec.operands;
    while let Some(&word) = words.get(k) {
        if word == "--" {
            // End of options: operands, then the program.
            let program = k + 1 + operands_left;
            return match words.get(k + 1..program) {
                Some(ops) if spec.numeric_operands && !ops.iter().all(|o| is_number(o)) => {
                    Parsed::Uncertain
                }
                _ if program < words.len() => Parsed::Program(program),
                _ => Parsed::NoProgram,
            };
        }
        if let Some(long) = word.strip_prefix("--").filter(|l| !l.is_empty()) {
            if spec.numeric_options && is_numeric_option(word) {
                k += 1;
                continue;
            }
            let (name, attached) = match long.split_once('=') {
                Some((name, _)) => (name, true),
                None => (long, false),
            };
            match long_kind(spec, name) {
                Some(LongKind::Arg) => k += if attached { 1 } else { 2 },
                Some(LongKind::Flag) => k += 1,
                Some(LongKind::String) | None => return Parsed::Uncertain,
                Some(LongKind::Exit) => return Parsed::NoProgram,
            }
            continue;
        }
        let cluster = word
            .strip_prefix('-')
            .or_else(|| word.strip_prefix('+').filter(|_| spec.plus_options))
            .filter(|c| !c.is_empty());
        if let Some(cluster) = cluster {
            if spec.numeric_options && is_numeric_option(word) {
                k += 1;
                continue;
            }
            match short_cluster(spec, cluster) {
                Cluster::Done => k += 1,
                Cluster::TakesNext => k += 2,
                Cluster::Exit => return Parsed::NoProgram,
                Cluster::Uncertain => return Parsed::Uncertain,
            }
            continue;
        }
        if word == "-" {
            if spec.dash_option {
                k += 1;
                continue;
            }
            return Parsed::Uncertain;
        }
        if spec.assignments && is_assignment(word) {
            k += 1;
            continue;
        }
        if operands_left > 0 {
            if spec.numeric_operands && !is_number(word) {
                return Parsed::Uncertain;
            }
            operands_left -= 1;
            k += 1;
            continue;
        }
        return Parsed::Program(k);
    }
    Parsed::NoProgram
}

fn is_number(word: &str) -> bool {
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit())
}

enum Cluster {
    /// The word is consumed.
    Done,
    /// The word and the next (the last option's argument) are consumed.
    TakesNext,
    Exit,
    Uncertain,
}

/// One bundle of short options (`-iu` + `NAME`, `-nNAME`, `-xe`).
fn short_cluster(spec: &Wrapper, cluster: &str) -> Cluster {
    for (at, c) in cluster.char_indices() {
        let attached = cluster.get(at + c.len_utf8()..).is_some_and(|r| !r.is_empty());
        if spec.short_string.contains(c) || !c.is_ascii_alphanumeric() {
            return Cluster::Uncertain;
        }
        if spec.short_exit.contains(c) {
            return Cluster::Exit;
        }
        if spec.short_arg.contains(c) {
            return if attached { Cluster::Done } else { Cluster::TakesNext };
        }
        if spec.short_optional.contains(c) {
            return Cluster::Done;
        }
        if !spec.short_flag.contains(c) {
            return Cluster::Uncertain;
        }
    }
    Cluster::Done
}

/// Fail closed: every word of `words`, and every word inside them, that names a compiler.
fn candidates(words: &[&str], found: &mut Vec<String>, depth: usize) {
    for word in words {
        word_candidates(word, found, depth);
    }
}

fn word_candidates(word: &str, found: &mut Vec<String>, depth: usize) {
    check_candidate(word, found);
    if depth >= MAX_NESTING {
        return;
    }
    // Split the way a shell would (quotes and backslashes removed)…
    let shell = shell_words(word);
    if shell.len() > 1 || shell.first().is_some_and(|w| w != word) {
        for inner in &shell {
            word_candidates(inner, found, depth + 1);
        }
    }
    // …and, since a command string may quote or expand a compiler anywhere
    // (`${CC:-gcc}`, `$(gcc -print-file-name=…)`), at every quote, operator and brace too.
    for piece in word.split(|c: char| c.is_whitespace() || "'\"`;&|()<>{}$\\:,".contains(c)) {
        if piece != word {
            check_candidate(piece.trim_start_matches('-'), found);
        }
    }
}

/// Pushes `word` if it names a compiler; for `NAME=VALUE` and `--option=VALUE`, the value.
/// (`-std=c99` is a compiler option, not a compiler.)
fn check_candidate(word: &str, found: &mut Vec<String>) {
    let value = match word.split_once('=') {
        Some((_, value)) if is_assignment(word) || word.starts_with("--") => value,
        _ => word,
    };
    if looks_like_compiler(value) {
        found.push(value.to_owned());
    }
}

/// `text` split into words as a POSIX shell would: unquoted whitespace and the operators
/// `; & | ( ) < >` separate words, quotes and backslashes are removed. Expansions are not
/// performed; an unterminated quote ends the text.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    current.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => current.push(e),
                            Some('\n') => {}
                            Some(e) => {
                                current.push('\\');
                                current.push(e);
                            }
                            None => current.push('\\'),
                        },
                        _ => current.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(e) => current.push(e),
                }
            }
            c if c.is_whitespace() || ";&|()<>".contains(c) => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                current.push(c);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compilers(argv: &[&str]) -> Vec<String> {
        command_compilers(&argv.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn the_program_behind_each_wrapper_is_found() {
        let cases: &[(&[&str], &[&str])] = &[
            (&["gcc", "-c", "a.c"], &["gcc"]),
            (&["make"], &[]),
            (&["env", "-u", "X", "/p/fb/gcc", "-c"], &["/p/fb/gcc"]),
            (&["env", "-uX", "gcc"], &["gcc"]),
            (&["env", "-iu", "X", "gcc"], &["gcc"]),
            (&["env", "--unset", "X", "gcc"], &["gcc"]),
            (&["env", "--unset=X", "gcc"], &["gcc"]),
            (&["env", "--uns", "X", "gcc"], &["gcc"]),
            (&["env", "-C", "/tmp", "CC=x", "clang", "a.c"], &["clang"]),
            (&["env", "--chdir=/tmp", "-", "-0", "A=1", "--", "g++"], &["g++"]),
            (&["env", "-i", "CC=x", "clang", "a.c"], &["clang"]),
            (&["env", "--block-signal", "gcc"], &["gcc"]),
            (&["env"], &[]),
            (&["env", "A=1"], &[]),
            (&["env", "--help", "gcc"], &[]),
            (&["nice", "-n", "5", "gcc"], &["gcc"]),
            (&["nice", "-n5", "gcc"], &["gcc"]),
            (&["nice", "--adjustment=5", "gcc"], &["gcc"]),
            (&["nice", "--adjustment", "5", "gcc"], &["gcc"]),
            (&["nice", "-10", "gcc"], &["gcc"]),
            (&["nice", "--10", "gcc"], &["gcc"]),
            (&["timeout", "10", "gcc"], &["gcc"]),
            (&["timeout", "-s", "KILL", "-k", "5", "10s", "gcc"], &["gcc"]),
            (&["timeout", "--signal=TERM", "--foreground", "1m", "cc"], &["cc"]),
            (&["time", "-o", "t.txt", "-f", "%e", "gcc"], &["gcc"]),
            (&["/usr/bin/time", "--output=t", "-v", "gcc"], &["gcc"]),
            (&["stdbuf", "-o", "L", "-eL", "gcc"], &["gcc"]),
            (&["stdbuf", "--output=0", "gcc"], &["gcc"]),
            (&["taskset", "0x3", "gcc"], &["gcc"]),
            (&["taskset", "-c", "0-3", "gcc"], &["gcc"]),
            (&["taskset", "-p", "0x3", "1234"], &[]),
            (&["ionice", "-c", "3", "gcc"], &["gcc"]),
            (&["ionice", "-c3", "-n", "7", "gcc"], &["gcc"]),
            (&["chrt", "-f", "10", "gcc"], &["gcc"]),
            (&["chrt", "--sched-runtime", "5", "-d", "0", "gcc"], &["gcc"]),
            (&["flock", "/tmp/l", "gcc"], &["gcc"]),
            (&["flock", "-w", "10", "/tmp/l", "gcc"], &["gcc"]),
            (&["xargs", "-0", "-n", "1", "gcc"], &["gcc"]),
            (&["xargs", "-I{}", "gcc", "{}"], &["gcc"]),
            (&["setsid", "-w", "gcc"], &["gcc"]),
            (&["nohup", "gcc"], &["gcc"]),
            (&["ccache", "gcc", "-c", "a.c"], &["gcc"]),
            (&["ccache", "max_size=5G", "gcc"], &["gcc"]),
            (&["distcc", "/usr/bin/g++-12", "x"], &["/usr/bin/g++-12"]),
            (&["distcc", "-c", "a.c"], &["cc"]),
            (&["distcc", "a.c", "-c"], &["cc"]),
            (&["ccache"], &[]),
            (&["nice", "-n", "5", "env", "-u", "X", "ccache", "gcc"], &["gcc"]),
            (&["cmake", "-E", "env", "--unset=X", "A=1", "gcc"], &["gcc"]),
            (&["cmake", "-E", "env", "A=1", "--", "gcc"], &["gcc"]),
            (&["cmake", "-E", "chdir", "/tmp", "gcc"], &["gcc"]),
            (&["cmake", "-E", "time", "gcc"], &["gcc"]),
            (&["cmake", "--build", "."], &[]),
            (&["sh", "script.sh"], &[]),
            (&["bash", "-e", "-o", "pipefail", "script.sh"], &[]),
        ];
        for (argv, want) in cases {
            assert_eq!(compilers(argv), *want, "{argv:?}");
        }
    }

    #[test]
    fn uncertain_parsing_counts_every_candidate() {
        let cases: &[(&[&str], &[&str])] = &[
            // Unknown options of a modelled wrapper.
            (&["env", "--frobnicate", "X", "gcc"], &["gcc"]),
            (&["env", "-Z", "gcc", "clang"], &["gcc", "clang"]),
            (&["nice", "-q", "cc"], &["cc"]),
            // Command strings.
            (&["env", "-S", "gcc -O2", "a.c"], &["gcc"]),
            (&["env", "--split-string=clang++ -O2"], &["clang++"]),
            (&["sh", "-c", "cat x > y; gcc -c a.c && ./cc.sh"], &["gcc"]),
            (&["bash", "-ec", "CC=/opt/x/gcc-12 make"], &["/opt/x/gcc-12"]),
            (&["sh", "-c", "'/opt/my tools/gcc' -c a.c"], &["/opt/my tools/gcc", "tools/gcc"]),
            (&["sh", "-c", "sh -c \"ccache g++ -c a.cc\""], &["g++"]),
            (&["sh", "-c", "\"$@\"", "sh", "gcc", "-c"], &["gcc"]),
            (&["flock", "/tmp/l", "-c", "gcc -c a.c"], &["gcc"]),
            (&["sh", "-s", "gcc"], &["gcc"]),
            // An operand that is not what it must be.
            (&["chrt", "--other", "gcc"], &["gcc"]),
            // Unmodelled wrappers.
            (&["sudo", "-u", "build", "gcc", "-c"], &["gcc"]),
            (&["setarch", "-R", "gcc"], &["gcc"]),
            (&["strace", "-f", "-o", "cc", "clang"], &["cc", "clang"]),
            (&["libtool", "--mode=compile", "gcc", "-c", "a.c"], &["gcc"]),
            // Programs the table does not know: ordinary ones and unknown wrappers.
            (&["make", "CC=gcc"], &["gcc"]),
            (&["./build.sh", "gcc"], &["gcc"]),
            (&["sh", "script.sh", "gcc"], &["gcc"]),
            (&["retry", "--times", "3", "/p/fb/gcc", "-c"], &["/p/fb/gcc"]),
            (&["setpriv", "--reuid=1000", "clang++", "-c"], &["clang++"]),
            (&["nice", "-n", "5", "gomacc", "g++-12", "-c"], &["g++-12"]),
            (&["python3", "build.py", "--cc=x86_64-linux-gnu-gcc"], &["x86_64-linux-gnu-gcc"]),
            (&["make", "-j8", "all"], &[]),
            // Compiler caches given options.
            (&["ccache", "--debug", "gcc"], &["gcc"]),
            (&["distcc", "-j", "gcc"], &["cc", "gcc"]),
            (&["cmake", "-E", "env", "--modify", "X", "gcc"], &["gcc"]),
            (&["env", "-u", "gcc", "-Q", "clang"], &["gcc", "clang"]),
        ];
        for (argv, want) in cases {
            assert_eq!(compilers(argv), *want, "{argv:?}");
        }
    }

    #[test]
    fn shell_words_follow_posix_quoting() {
        assert_eq!(
            shell_words(r#"a 'b c' "d \"e\" \$f" g\ h;i|j"#),
            ["a", "b c", "d \"e\" $f", "g h", "i", "j"]
        );
        assert_eq!(shell_words("  "), Vec::<String>::new());
        assert_eq!(shell_words("''"), [""]);
        assert_eq!(shell_words("'unterminated"), ["unterminated"]);
    }
}
