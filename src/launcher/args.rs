//! Classifying a compiler command line: is it one cacheable
//! compilation of one C or C++ source into one object file, and if so, what are its source,
//! outputs, dependency-file flags and include directories?
//!
//! Conservative by design: a command is [`Classified::Cacheable`] only when every argument
//! is understood; anything else is [`Classified::Uncacheable`] with a [`Reason`], and the
//! launcher then runs the compiler unchanged. Understood means:
//!
//! * exactly one `-c`, exactly one source whose language is C or C++ (by `-x c`/`-x c++` or
//!   by extension: `.c`, `.cc`, `.cp`, `.cxx`, `.cpp`, `.CPP`, `.c++`, `.C`);
//! * options taking a separate value are known (`-o`, `-MF`, `-MT`, `-MQ`, `-I`, `-D`, `-U`,
//!   `-include`, `-imacros`, `-isystem`, `-iquote`, `-idirafter`, `-iprefix`,
//!   `-iwithprefix`, `-iwithprefixbefore`, `-isysroot`, `--sysroot`, `-x`, `-Xpreprocessor`,
//!   `-Xassembler`, `-Xclang`, `-target`, `--target`, `-arch`, `-MJ`, `--param`, `-aux-info`),
//!   so a value is never mistaken for the source;
//! * nothing asks for a kind of output or input the cache cannot reproduce: preprocessing or
//!   assembly only (`-E`, `-S`, `-M`/`-MM` without `-MD`/`-MMD`), temporaries (`-save-temps`),
//!   profile instrumentation that writes at run time relative to the object
//!   (`-fprofile-generate`, `-fprofile-arcs`), precompiled-header creation (a header as the
//!   source, `-x c-header`), response files (`@file`), standard input (`-`), a CPU-dependent
//!   target (`-march=native`, `-mcpu=native`, `-mtune=native`), or an input the dependency
//!   output does not list (`-fprofile-use`, `-fauto-profile`, clang's profile and
//!   sanitizer lists, `-specs=`, `-fplugin=`, `-B`, C++ and clang modules): a change to it
//!   would go unnoticed.
//!
//! Side outputs the flags ask for are listed so the launcher caches them with the object:
//! the depfile (`-MD`/`-MMD`, at `-MF` or beside the object), `.dwo` (`-gsplit-dwarf`),
//! `.gcno` (`-ftest-coverage`, `--coverage`) and `.su` (`-fstack-usage`).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The source language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// C.
    C,
    /// C++.
    Cxx,
}

/// How the build asked for a dependency file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Depfile {
    /// Not asked for: the launcher adds `-MD -MF <private file>` on a MISS to learn the
    /// headers, and writes no depfile for the build.
    NotRequested,
    /// `-MD` or `-MMD` (`system_headers` false for `-MMD`), written at `path` (from `-MF`,
    /// or the object's path with `.d` when `-MF` is absent).
    Requested {
        /// Where the compiler writes it (as given, relative to the working directory).
        path: PathBuf,
        /// False for `-MMD` (system headers left out).
        system_headers: bool,
        /// `-MP`: a phony rule for every header.
        phony: bool,
    },
}

/// One include directory option, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludeDir {
    /// The option: `-I`, `-iquote`, `-isystem` or `-idirafter`.
    pub option: &'static str,
    /// The directory as given.
    pub dir: PathBuf,
}

/// A cacheable compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compile {
    /// The source file as given.
    pub source: PathBuf,
    /// Its language.
    pub language: Language,
    /// The object file as given (`-o`), or the default `<source stem>.o`.
    pub object: PathBuf,
    /// The dependency file the build asked for.
    pub depfile: Depfile,
    /// Other files the flags make the compiler write beside the object.
    pub side_outputs: Vec<PathBuf>,
    /// Include directories, in order.
    pub include_dirs: Vec<IncludeDir>,
    /// `-MT`/`-MQ` targets, in order (empty: the compiler's default target, the object).
    pub dep_targets: Vec<(TargetOption, OsString)>,
    /// The arguments that go into the key: all but the ones that only name outputs (`-o`,
    /// `-MF`, `-MT`, `-MQ` and their values), so a renamed object or depfile finds the same
    /// entry and a HIT writes the outputs under the current names.
    pub key_args: Vec<OsString>,
    /// The output-naming options and values (`-o x.o`, `-MF x.d`, …, in order) when the
    /// object records the whole command line (`-frecord-command-line`,
    /// `-grecord-command-line` and their gcc-spelled aliases, which clang takes): then they
    /// are part of the key too, since a HIT under other names would hold the old ones.
    /// Empty otherwise.
    pub recorded_names: Vec<OsString>,
    /// The object records the whole command line (`-frecord-command-line`,
    /// `-grecord-command-line` or a gcc-spelled alias, the last of them and their `-fno-`
    /// forms deciding): the launcher may add no option to a MISS that shows in it.
    pub records_command_line: bool,
    /// `-include`/`-imacros` files, in order (as given).
    pub forced_includes: Vec<PathBuf>,
    /// The first flag only a traced compile can vouch for (it reads or writes files the
    /// dependency output does not list: profile data, `-B` components, `-aux-info`,
    /// `-fdump-…`, assembler listings, `-MJ`, `-fcallgraph-info`): the fallback model does not
    /// cache the compile, and says why.
    pub needs_trace: Option<Reason>,
}

/// How a depfile target was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetOption {
    /// `-MT`: written as given.
    Mt,
    /// `-MQ`: quoted for Make.
    Mq,
}

/// Why a command is not cached (the launcher counts these, like `ccache -s`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// No `-c`: linking, or a single-step compile and link.
    NotCompileOnly,
    /// `-E`, `-S`, or `-M`/`-MM` without `-MD`/`-MMD`.
    NotObjectOutput(String),
    /// No source file.
    NoSource,
    /// More than one source file.
    SeveralSources,
    /// A source whose language is not C or C++ (assembly, Objective-C, Fortran, …).
    UnsupportedLanguage(String),
    /// A header as the source (precompiled-header creation).
    PrecompiledHeader,
    /// A flag whose effect the cache cannot reproduce, with the flag.
    UncacheableFlag(String),
    /// A flag that makes the compiler read a file the dependency output does not list
    /// (profile data, sanitizer lists, spec files, plugins, compiler components from
    /// `-B`, clang modules), with the flag: a change to that file would not be noticed.
    UntrackedInput(String),
    /// A flag that makes the compiler write a file the launcher would not know of without
    /// tracing (an assembler listing, `-aux-info`, `-fdump-…`, `-MJ`), with the flag.
    UntrackedOutput(String),
    /// A response file (`@file`).
    ResponseFile,
    /// The source is standard input.
    StandardInput,
    /// An option that needs a value came last.
    MissingValue(String),
    /// An argument that is not valid UTF-8 where an option or value was expected.
    NotText,
}

impl Reason {
    /// A short stable name for statistics (`no_compile_only`, `several_sources`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Reason::NotCompileOnly => "not_compile_only",
            Reason::NotObjectOutput(_) => "not_object_output",
            Reason::NoSource => "no_source",
            Reason::SeveralSources => "several_sources",
            Reason::UnsupportedLanguage(_) => "unsupported_language",
            Reason::PrecompiledHeader => "precompiled_header",
            Reason::UncacheableFlag(_) => "uncacheable_flag",
            Reason::UntrackedInput(_) => "untracked_input",
            Reason::UntrackedOutput(_) => "untracked_output",
            Reason::ResponseFile => "response_file",
            Reason::StandardInput => "standard_input",
            Reason::MissingValue(_) => "missing_value",
            Reason::NotText => "not_text",
        }
    }
}

impl std::fmt::Display for Reason {
    /// The flag or argument at fault where there is one, else [`Reason::name`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::NotObjectOutput(a)
            | Reason::UnsupportedLanguage(a)
            | Reason::UncacheableFlag(a)
            | Reason::UntrackedInput(a)
            | Reason::UntrackedOutput(a)
            | Reason::MissingValue(a) => f.write_str(a),
            other => f.write_str(other.name()),
        }
    }
}

/// The result of [`classify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Classified {
    /// One cacheable compilation.
    Cacheable(Box<Compile>),
    /// Run the compiler unchanged, for this reason.
    Uncacheable(Reason),
}

/// Options whose value is the next argument (or joined, for the one-letter ones).
const WITH_VALUE: &[&str] = &[
    "-o",
    "-MF",
    "-MT",
    "-MQ",
    "-I",
    "-D",
    "-U",
    "-include",
    "-imacros",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-iprefix",
    "-iwithprefix",
    "-iwithprefixbefore",
    "-isysroot",
    "--sysroot",
    "-x",
    "-Xpreprocessor",
    "-Xassembler",
    "-Xclang",
    "-target",
    "--target",
    "-arch",
    "-MJ",
    "--param",
    "-aux-info",
    "-B",
    "-include-pch",
    "-iframework",
    "-ivfsoverlay",
    "-mllvm",
    "-Xlinker",
    "-Xanalyzer",
    "-serialize-diagnostics",
    "--serialize-diagnostics",
    "-dependency-file",
    "-dependency-dot",
    "-module-dependency-dir",
];

/// Include-directory options recorded in order.
const INCLUDE_OPTIONS: &[&str] = &["-I", "-iquote", "-isystem", "-idirafter"];

fn language_of(path: &Path) -> Result<Language, Reason> {
    let ext = path.extension().and_then(OsStr::to_str).unwrap_or_default();
    match ext {
        "c" => Ok(Language::C),
        "cc" | "cp" | "cxx" | "cpp" | "CPP" | "c++" | "C" => Ok(Language::Cxx),
        "h" | "hh" | "hpp" | "hxx" | "H" | "h++" | "tcc" => Err(Reason::PrecompiledHeader),
        other => Err(Reason::UnsupportedLanguage(format!(".{other}"))),
    }
}

/// Prefixes of flags that make the compiler read a file the dependency output does not
/// list ([`Reason::UntrackedInput`]): cacheable only when the compile is traced, which sees
/// every file it reads.
const UNTRACKED_INPUT_FLAGS: &[&str] = &[
    "-fprofile-use",
    "-fauto-profile",
    "-fprofile-sample-use",
    "-fprofile-instr-use",
    "-fprofile-remapping-file",
    "-fprofile-list",
    "-fsanitize-blacklist",
    "-fsanitize-ignorelist",
    "-fsanitize-coverage-allowlist",
    "-fsanitize-coverage-blocklist",
    "-fsanitize-coverage-whitelist",
    "-fsanitize-coverage-blacklist",
    "-fxray-attr-list",
    "-fxray-always-instrument",
    "-fxray-never-instrument",
    "-specs",
    "--specs",
    "-B",
    "-include-pch",
    "-fembed-dir",
    "-ivfsoverlay",
];

/// Prefixes of flags that load code into the compiler or share state between compiles
/// (plugins, module caches): never cached, traced or not.
const UNCACHEABLE_INPUT_FLAGS: &[&str] =
    &["-fplugin", "-fpass-plugin", "-fmodule", "-fprebuilt-module-path", "-fimplicit-modules"];

/// Prefixes of flags that make the compiler write files beside the object that only a
/// traced compile discovers ([`Reason::UntrackedOutput`]).
const UNTRACKED_OUTPUT_FLAGS: &[&str] = &[
    "-aux-info",
    "-fdump-",
    "-fcallgraph-info",
    "-fopt-info",
    "-MJ",
    "-Wa,-a",
    "-Wa,--MD",
    "-Wa,-MD",
    "-fsave-optimization-record",
    "-foptimization-record-file",
    "-ftime-trace",
    "-fstats-file",
    "-serialize-diagnostics",
    "--serialize-diagnostics",
    "-dependency-dot",
    "-module-dependency-dir",
];

/// The `--` long options classified like their short forms (`--output` is `-o`; the rest
/// are values of [`WITH_VALUE`] or flags the scan knows). Any other long option is not
/// cached: GCC takes long spellings of many short ones (`--include-directory`,
/// `--write-dependencies`, `--no-warnings`, `--preprocess`, …) and one the scan did not
/// know would be misread.
const KNOWN_LONG: &[&str] = &[
    "--output",
    "--sysroot",
    "--target",
    "--param",
    "--serialize-diagnostics",
    "--specs",
    "--coverage",
    "--gcc-toolchain",
    "--std",
    "--stdlib",
    "--rtlib",
    "--unwindlib",
    "--driver-mode",
    "--config",
    "--offload-arch",
];

fn flag_reason(arg: &str) -> Option<Reason> {
    if UNCACHEABLE_INPUT_FLAGS.iter().any(|f| arg.starts_with(f)) {
        return Some(Reason::UntrackedInput(arg.to_owned()));
    }
    if arg.starts_with("--")
        && arg != "--"
        && !KNOWN_LONG
            .iter()
            .any(|k| arg == *k || arg.strip_prefix(k).is_some_and(|r| r.starts_with('=')))
    {
        return Some(Reason::UncacheableFlag(arg.to_owned()));
    }
    let uncacheable = arg.starts_with("-save-temps")
        || arg.starts_with("-fprofile-generate")
        || arg == "-fprofile-arcs"
        || arg.starts_with("-fprofile-instr-generate")
        || arg.starts_with("-fcs-profile-generate")
        || arg.ends_with("=native")
            && (arg.starts_with("-march=")
                || arg.starts_with("-mcpu=")
                || arg.starts_with("-mtune="))
        || arg == "-Wp,-MD"
        || arg.starts_with("-Wp,-M")
        || arg == "-fsyntax-only"
        // Timing and memory reports differ at every run; a HIT would replay old ones.
        || arg == "-ftime-report"
        || arg.starts_with("-ftime-trace")
        || arg.starts_with("-fproc-stat-report")
        // The assembler's own dependency file names the compiler's temporary `.s`.
        || arg.starts_with("-Wa,--MD")
        // The commands it runs, with their temporary files' random names, on stderr.
        || arg == "-v"
        || arg == "-###";
    uncacheable.then(|| Reason::UncacheableFlag(arg.to_owned()))
}

/// The reason a traced compile is needed for `arg`, if any.
fn trace_reason(arg: &str) -> Option<Reason> {
    if UNTRACKED_INPUT_FLAGS.iter().any(|f| arg.starts_with(f)) {
        return Some(Reason::UntrackedInput(arg.to_owned()));
    }
    UNTRACKED_OUTPUT_FLAGS
        .iter()
        .any(|f| arg.starts_with(f))
        .then(|| Reason::UntrackedOutput(arg.to_owned()))
}

/// Options whose value only names an output: left out of the key.
const OUTPUT_NAMING: &[&str] = &["-o", "-MF", "-MT", "-MQ"];

/// Classifies the arguments `args` (without the compiler itself) of one compiler run.
pub fn classify(args: &[OsString]) -> Classified {
    let mut scan = Scan::default();
    let mut i = 0;
    let mut options_ended = false;
    while let Some(raw) = args.get(i) {
        i += 1;
        let Some(arg) = raw.to_str() else {
            // A source path may hold any bytes; an option may not.
            if raw.as_bytes().first() == Some(&b'-') && !options_ended {
                return Classified::Uncacheable(Reason::NotText);
            }
            scan.sources.push((PathBuf::from(raw), scan.forced.clone().and_then(Result::ok)));
            scan.key_args.push(raw.clone());
            continue;
        };
        if options_ended || !arg.starts_with('-') || arg.len() == 1 {
            if arg.starts_with('@') && !options_ended {
                return Classified::Uncacheable(Reason::ResponseFile);
            }
            if arg == "-" {
                return Classified::Uncacheable(Reason::StandardInput);
            }
            let language = match &scan.forced {
                Some(Ok(language)) => Some(*language),
                Some(Err(reason)) => return Classified::Uncacheable(reason.clone()),
                None => None,
            };
            scan.sources.push((PathBuf::from(arg), language));
            scan.key_args.push(raw.clone());
            continue;
        }
        if arg == "--" {
            options_ended = true;
            scan.key_args.push(raw.clone());
            continue;
        }
        if let Some(reason) = flag_reason(arg) {
            return Classified::Uncacheable(reason);
        }
        if scan.needs_trace.is_none() {
            scan.needs_trace = trace_reason(arg);
        }
        if let Err(reason) = scan.flag(arg) {
            return Classified::Uncacheable(reason);
        }
        // `--output FILE` and `--output=FILE` are `-o FILE`.
        if arg == "--output" || arg.starts_with("--output=") {
            let value = match arg.strip_prefix("--output=") {
                Some(v) => OsString::from(v),
                None => match args.get(i) {
                    Some(v) => {
                        i += 1;
                        v.clone()
                    }
                    None => return Classified::Uncacheable(Reason::MissingValue(arg.to_owned())),
                },
            };
            scan.naming_args.push(raw.clone());
            if arg == "--output" {
                scan.naming_args.push(value.clone());
            }
            if let Err(reason) = scan.value("-o", value) {
                return Classified::Uncacheable(reason);
            }
            continue;
        }
        // Options with a value: separate, or joined for the one-letter/`-M?` forms.
        let name = WITH_VALUE
            .iter()
            .find(|o| arg == **o)
            .copied()
            .or_else(|| {
                ["-o", "-I", "-D", "-U", "-MF", "-MT", "-MQ", "-x", "-B"]
                    .into_iter()
                    .find(|o| arg.starts_with(o) && arg.len() > o.len())
            })
            .or_else(|| {
                ["-isystem", "-iquote", "-idirafter"]
                    .into_iter()
                    .find(|o| arg.starts_with(o) && arg.len() > o.len())
            });
        let Some(name) = name else {
            scan.key_args.push(raw.clone());
            continue;
        };
        let value: OsString = if arg == name {
            match args.get(i) {
                Some(v) => {
                    i += 1;
                    if OUTPUT_NAMING.contains(&name) {
                        scan.naming_args.extend([raw.clone(), v.clone()]);
                    } else {
                        scan.key_args.push(raw.clone());
                        scan.key_args.push(v.clone());
                    }
                    v.clone()
                }
                None => return Classified::Uncacheable(Reason::MissingValue(arg.to_owned())),
            }
        } else {
            if OUTPUT_NAMING.contains(&name) {
                scan.naming_args.push(raw.clone());
            } else {
                scan.key_args.push(raw.clone());
            }
            OsString::from(arg.get(name.len()..).unwrap_or_default())
        };
        if let Err(reason) = scan.value(name, value) {
            return Classified::Uncacheable(reason);
        }
    }
    scan.finish()
}

/// What [`classify`] collected from the arguments.
#[derive(Default)]
struct Scan {
    compile_only: bool,
    sources: Vec<(PathBuf, Option<Language>)>,
    object: Option<PathBuf>,
    /// `Some(system_headers)` for `-MD` (true) / `-MMD` (false).
    md: Option<bool>,
    mf: Option<PathBuf>,
    phony: bool,
    forced: Option<Result<Language, Reason>>,
    includes: Vec<IncludeDir>,
    split_dwarf: bool,
    coverage: bool,
    stack_usage: bool,
    dep_targets: Vec<(TargetOption, OsString)>,
    key_args: Vec<OsString>,
    /// The output-naming options and values left out of `key_args`, in order.
    naming_args: Vec<OsString>,
    /// The object will hold the whole command line (`-frecord-command-line`): the
    /// output-naming options are part of the key then.
    records_command_line: bool,
    forced_includes: Vec<PathBuf>,
    needs_trace: Option<Reason>,
}

impl Scan {
    /// Takes a flag without a value: what it asks for, or why it is not cached.
    fn flag(&mut self, arg: &str) -> Result<(), Reason> {
        match arg {
            "-c" => self.compile_only = true,
            "-E" | "-S" | "-M" | "-MM" => return Err(Reason::NotObjectOutput(arg.to_owned())),
            "-MD" => self.md = Some(true),
            "-MMD" => self.md = Some(false),
            "-MP" => self.phony = true,
            "-gsplit-dwarf" => self.split_dwarf = true,
            "-ftest-coverage" | "--coverage" => self.coverage = true,
            "-fstack-usage" => self.stack_usage = true,
            // Clang writes the whole command line into the object (gcc's recorded
            // switches leave out -o and -M…; clang takes the gcc spellings as aliases).
            "-frecord-command-line"
            | "-grecord-command-line"
            | "-frecord-gcc-switches"
            | "-grecord-gcc-switches" => self.records_command_line = true,
            "-fno-record-command-line"
            | "-gno-record-command-line"
            | "-fno-record-gcc-switches"
            | "-gno-record-gcc-switches" => self.records_command_line = false,
            _ => {}
        }
        Ok(())
    }

    /// Takes the value of the option `name`.
    fn value(&mut self, name: &str, value: OsString) -> Result<(), Reason> {
        match name {
            "-o" => self.object = Some(PathBuf::from(value)),
            "-MF" => self.mf = Some(PathBuf::from(value)),
            "-MT" => self.dep_targets.push((TargetOption::Mt, value)),
            "-MQ" => self.dep_targets.push((TargetOption::Mq, value)),
            "-include" | "-imacros" => self.forced_includes.push(PathBuf::from(value)),
            "-x" => {
                self.forced = match value.to_str() {
                    Some("c") => Some(Ok(Language::C)),
                    Some("c++") => Some(Ok(Language::Cxx)),
                    Some("c-header" | "c++-header") => Some(Err(Reason::PrecompiledHeader)),
                    Some("none") => None,
                    other => Some(Err(Reason::UnsupportedLanguage(format!(
                        "-x {}",
                        other.unwrap_or("?")
                    )))),
                };
            }
            option if INCLUDE_OPTIONS.contains(&option) => {
                self.includes.push(IncludeDir {
                    option: INCLUDE_OPTIONS.iter().find(|o| **o == option).copied().unwrap_or("-I"),
                    dir: PathBuf::from(value),
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// The classification once every argument is read.
    fn finish(self) -> Classified {
        let Scan {
            compile_only,
            mut sources,
            object,
            md,
            mf,
            phony,
            forced: _,
            includes,
            split_dwarf,
            coverage,
            stack_usage,
            dep_targets,
            key_args,
            naming_args,
            records_command_line,
            forced_includes,
            needs_trace,
        } = self;
        if !compile_only {
            return Classified::Uncacheable(Reason::NotCompileOnly);
        }
        if records_command_line && md.is_none() {
            // A MISS adds `-MD -MF <private file>` when the build asks for no depfile, and
            // Clang would record it in the object.
            return Classified::Uncacheable(Reason::UncacheableFlag(
                "-frecord-command-line without -MD/-MMD".to_owned(),
            ));
        }
        let (source, forced_language) = match sources.len() {
            0 => return Classified::Uncacheable(Reason::NoSource),
            1 => sources.remove(0),
            _ => return Classified::Uncacheable(Reason::SeveralSources),
        };
        let language = match forced_language {
            Some(language) => language,
            None => match language_of(&source) {
                Ok(language) => language,
                Err(reason) => return Classified::Uncacheable(reason),
            },
        };
        if object.as_deref() == Some(Path::new("/dev/null")) {
            return Classified::Uncacheable(Reason::NotObjectOutput("-o /dev/null".into()));
        }
        let object = object.unwrap_or_else(|| {
            let stem = source.file_stem().unwrap_or_default();
            let mut name = stem.to_owned();
            name.push(".o");
            PathBuf::from(name)
        });
        let depfile = match md {
            None => Depfile::NotRequested,
            Some(system_headers) => Depfile::Requested {
                path: mf.unwrap_or_else(|| object.with_extension("d")),
                system_headers,
                phony,
            },
        };
        let mut side_outputs = Vec::new();
        if split_dwarf {
            side_outputs.push(object.with_extension("dwo"));
        }
        if coverage {
            side_outputs.push(object.with_extension("gcno"));
        }
        if stack_usage {
            side_outputs.push(object.with_extension("su"));
        }
        Classified::Cacheable(Box::new(Compile {
            source,
            language,
            object,
            depfile,
            side_outputs,
            include_dirs: includes,
            dep_targets,
            key_args,
            recorded_names: if records_command_line { naming_args } else { Vec::new() },
            records_command_line,
            forced_includes,
            needs_trace,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<OsString> {
        text.split_whitespace().map(OsString::from).collect()
    }

    fn cacheable(text: &str) -> Compile {
        match classify(&args(text)) {
            Classified::Cacheable(c) => *c,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn reason(text: &str) -> Reason {
        match classify(&args(text)) {
            Classified::Uncacheable(r) => r,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn cmake_style_compiles_are_cacheable_with_their_outputs() {
        let c = cacheable(
            "-DNDEBUG -I/src/include -isystem /usr/include/x -O2 -g -std=c++17 -MD -MT obj/a.o -MF obj/a.o.d -o obj/a.o -c /src/a.cpp",
        );
        assert_eq!(c.source, PathBuf::from("/src/a.cpp"));
        assert_eq!(c.language, Language::Cxx);
        assert_eq!(c.object, PathBuf::from("obj/a.o"));
        assert_eq!(
            c.depfile,
            Depfile::Requested {
                path: PathBuf::from("obj/a.o.d"),
                system_headers: true,
                phony: false
            }
        );
        assert_eq!(
            c.include_dirs,
            [
                IncludeDir { option: "-I", dir: PathBuf::from("/src/include") },
                IncludeDir { option: "-isystem", dir: PathBuf::from("/usr/include/x") },
            ]
        );
        // Make style: -MMD, default depfile and object names, joined values.
        let c = cacheable("-c lib/x.c -MMD -Iinc -DX=1");
        assert_eq!((c.object.clone(), c.language), (PathBuf::from("x.o"), Language::C));
        assert_eq!(
            c.depfile,
            Depfile::Requested { path: PathBuf::from("x.d"), system_headers: false, phony: false }
        );
        assert_eq!(c.include_dirs, [IncludeDir { option: "-I", dir: PathBuf::from("inc") }]);
        assert_eq!(cacheable("-c a.c -o a.o").depfile, Depfile::NotRequested);
        // Side outputs.
        let c = cacheable("-c a.cc -o o/a.o -gsplit-dwarf --coverage -fstack-usage");
        assert_eq!(
            c.side_outputs,
            [PathBuf::from("o/a.dwo"), PathBuf::from("o/a.gcno"), PathBuf::from("o/a.su")]
        );
        // A value that looks like a source is never taken for one.
        let c = cacheable("-c main.c -o out.o -include pre.h -MT dep.c -D FOO");
        assert_eq!(c.source, PathBuf::from("main.c"));
        // -x forces the language of what follows.
        assert_eq!(cacheable("-x c++ -c a.inl -o a.o").language, Language::Cxx);
    }

    #[test]
    fn everything_else_is_uncacheable_with_a_reason() {
        for (text, name) in [
            ("a.c -o a", "not_compile_only"),
            ("-E a.c", "not_object_output"),
            ("-S -c a.c", "not_object_output"),
            ("-M -c a.c", "not_object_output"),
            ("-c", "no_source"),
            ("-c a.c b.c", "several_sources"),
            ("-c a.s", "unsupported_language"),
            ("-c a.m", "unsupported_language"),
            ("-x assembler -c a.c", "unsupported_language"),
            ("-c a.h -o a.h.gch", "precompiled_header"),
            ("-x c++-header -c a.hpp", "precompiled_header"),
            ("-c a.c -save-temps", "uncacheable_flag"),
            ("-c a.c -fprofile-generate", "uncacheable_flag"),
            ("-c a.c -fprofile-arcs", "uncacheable_flag"),
            ("-c a.c -fplugin=./plugin.so", "untracked_input"),
            ("-c a.cpp -fmodules", "untracked_input"),
            ("-c a.c -march=native", "uncacheable_flag"),
            ("-c a.c -Wp,-MD,a.d", "uncacheable_flag"),
            ("-c @args.rsp", "response_file"),
            ("-x c -c -", "standard_input"),
            ("-c a.c -o", "missing_value"),
            ("-c a.c -o /dev/null", "not_object_output"),
        ] {
            assert_eq!(reason(text).name(), name, "{text}");
        }
    }

    /// Cached only when traced: the model cannot see what these read or write.
    #[test]
    fn some_flags_need_a_traced_compile() {
        for (text, name) in [
            ("-c a.c -fprofile-use", "untracked_input"),
            ("-c a.c -fprofile-use=prof/", "untracked_input"),
            ("-c a.c -fauto-profile=a.afdo", "untracked_input"),
            ("-c a.c -fprofile-instr-use=a.profdata", "untracked_input"),
            ("-c a.c -fsanitize=address -fsanitize-ignorelist=ign.txt", "untracked_input"),
            ("-c a.c -specs=my.specs", "untracked_input"),
            ("-c a.c -B /opt/other-cc1/", "untracked_input"),
            ("-c a.c -B/opt/other-cc1/", "untracked_input"),
            ("-c a.c -fcallgraph-info", "untracked_output"),
            ("-c a.c -Wa,-adhln=a.lst", "untracked_output"),
            ("-c a.c -aux-info a.aux", "untracked_output"),
            ("-c a.c -fdump-tree-original", "untracked_output"),
            ("-c a.c -MJ a.json", "untracked_output"),
        ] {
            let c = cacheable(text);
            assert_eq!(c.needs_trace.map(|r| r.name()), Some(name), "{text}");
        }
        assert_eq!(cacheable("-c a.c -O2").needs_trace, None);
    }

    /// Output names stay out of the key; `--` ends the options.
    #[test]
    fn key_arguments_leave_out_output_names() {
        let c = cacheable("-O2 -MD -MT tgt -MQ q -MF dep.d -o out/x.o -c x.c -Iinc");
        assert_eq!(
            c.key_args,
            args("-O2 -MD -c x.c -Iinc"),
            "-o, -MF, -MT, -MQ and their values are not in the key"
        );
        assert_eq!(
            c.dep_targets,
            [(TargetOption::Mt, OsString::from("tgt")), (TargetOption::Mq, OsString::from("q"))]
        );
        let c = cacheable("-c -ox.o -MFx.d -MD -- -odd.c");
        assert_eq!(c.source, PathBuf::from("-odd.c"));
        assert_eq!(c.key_args, args("-c -MD -- -odd.c"));
    }
}
