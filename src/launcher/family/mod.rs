//! Compiler families: everything the launcher knows that is specific to one kind of C/C++
//! compiler, behind one trait ([`Family`]). GCC ([`gcc`]) and Clang ([`clang`]) implement
//! it; adding another family (MSVC, nvcc) is one more file, a [`Kind`] variant and its arm
//! in [`Kind::family`], and a branch of the detection probe (`PROBE_SOURCE` and
//! `parse_probe`; docs/architecture.md).
//!
//! A compiler is put in a family by **what it reports**, never by what it is called: a
//! cross compiler (`aarch64-linux-gnu-gcc`), a vendor build of Clang (Huawei's `bisheng`
//! for Ascend C operators, `icx`), or a `cc` symlink are recognised by the macros their
//! preprocessor predefines (`__clang__`, `__GNUC__`). The same probe asks whether the
//! compiler fixes `__DATE__`/`__TIME__` and `__TIMESTAMP__` from `SOURCE_DATE_EPOCH`
//! (GCC 7+ fixes the first two and never `__TIMESTAMP__`; Clang only from version 16), so
//! a time macro is cached exactly where the compiler makes it reproducible. The probe runs
//! once per compiler binary and is memoised by the binary's stamp
//! ([`crate::toolchain::memoised`]), so a HIT spawns nothing.
//!
//! What a family holds (seed 003 §"compiler launcher"):
//! * its command line: which arguments are the source, the outputs, options with values,
//!   include directories, paths ([`Family::classify`]; GCC and Clang share the GCC-style
//!   vocabulary of [`super::args`], and Clang's extra options are in it);
//! * the environment variables that change its output ([`Family::key_environment`]);
//! * where extra options go ([`Family::with_options`]: before a `--` that ends the
//!   options);
//! * its dependency output: the targets it writes ([`Family::depfile_targets`]) and the
//!   exact bytes of its Make-format depfile writer ([`Family::render_depfile`]), so a HIT
//!   writes the depfile a plain compile would write for the current names and paths;
//! * its include search, for the fallback model ([`Family::search_list_args`]);
//! * how to observe it ([`Family::observation`]).

pub mod clang;
pub mod gcc;

use std::ffi::OsString;
use std::path::Path;

use super::args::{Classified, Compile, TargetOption};

/// The families strata knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// GCC and compilers derived from it.
    Gcc,
    /// Clang and compilers derived from it (Apple clang, bisheng, icx, …).
    Clang,
}

impl Kind {
    /// The family's implementation.
    pub fn family(self) -> &'static dyn Family {
        match self {
            Kind::Gcc => &gcc::Gcc,
            Kind::Clang => &clang::Clang,
        }
    }

    /// `gcc` or `clang`.
    pub fn name(self) -> &'static str {
        self.family().name()
    }
}

/// How the launcher learns what a compile read and wrote on a MISS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// Trace the compiler's process tree ([`super::trace`]), with the family's search model
    /// as the fallback where tracing is refused.
    Trace,
}

/// What is compiler-specific (see the module docs).
pub trait Family: Send + Sync {
    /// `gcc`, `clang`.
    fn name(&self) -> &'static str;

    /// Environment variables that change what a compile produces (they go into the key).
    fn key_environment(&self) -> &'static [&'static str];

    /// Reads a command line (the arguments after the compiler): one cacheable compile, or
    /// why not.
    fn classify(&self, args: &[OsString]) -> Classified {
        super::args::classify(args)
    }

    /// The arguments that make the compiler print its include search lists for `compile`
    /// (read by [`super::model::parse_search_lists`]).
    fn search_list_args(&self, compile: &Compile) -> Vec<OsString> {
        super::model::search_list_args(compile)
    }

    /// `args` with `extra` options added where the compiler still reads options: before
    /// a `--` that ends them (after it, every argument is an input file), else at the end.
    fn with_options(&self, args: &[OsString], extra: &[OsString]) -> Vec<OsString> {
        let mut out = Vec::with_capacity(args.len() + extra.len());
        match args.iter().position(|a| a == "--") {
            Some(at) => {
                out.extend_from_slice(&args[..at]);
                out.extend_from_slice(extra);
                out.extend_from_slice(&args[at..]);
            }
            None => {
                out.extend_from_slice(args);
                out.extend_from_slice(extra);
            }
        }
        out
    }

    /// The depfile's targets as this compiler writes them for `compile` (from `-MT`, `-MQ`,
    /// else the object as given), already quoted where the compiler quotes.
    fn depfile_targets(&self, compile: &Compile) -> Vec<Vec<u8>> {
        let quote = |t: &[u8]| self.quote_target(t);
        if compile.dep_targets.is_empty() {
            return vec![quote(compile.object.as_os_str().as_encoded_bytes())];
        }
        compile
            .dep_targets
            .iter()
            .map(|(option, value)| match option {
                TargetOption::Mt => value.as_encoded_bytes().to_vec(),
                TargetOption::Mq => quote(value.as_encoded_bytes()),
            })
            .collect()
    }

    /// A target as `-MQ` quotes it.
    fn quote_target(&self, name: &[u8]) -> Vec<u8>;

    /// The depfile this compiler writes with `targets` (as [`Family::depfile_targets`]
    /// gives them) and `deps` (the source first, unescaped, in the compiler's order), with
    /// phony rules for `-MP`: byte for byte.
    fn render_depfile(&self, targets: &[Vec<u8>], deps: &[Vec<u8>], phony: bool) -> Vec<u8>;

    /// How to observe this compiler on a MISS.
    fn observation(&self) -> Observation {
        Observation::Trace
    }
}

/// What a compiler reports about itself ([`probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Its family; `None` for a compiler that is neither GCC- nor Clang-like.
    pub kind: Option<Kind>,
    /// `__DATE__` and `__TIME__` follow `SOURCE_DATE_EPOCH`.
    pub epoch_fixes_date: bool,
    /// `__TIMESTAMP__` follows `SOURCE_DATE_EPOCH`.
    pub epoch_fixes_timestamp: bool,
}

/// The probe's source: one line per fact, read back by [`parse_probe`].
const PROBE_SOURCE: &str = "#if defined(__clang__)\nstrata_family clang\n#elif defined(__GNUC__) && !defined(__INTEL_COMPILER) && !defined(__NVCC__)\nstrata_family gcc\n#else\nstrata_family other\n#endif\nstrata_date __DATE__ __TIME__\nstrata_timestamp __TIMESTAMP__\n";

/// `SOURCE_DATE_EPOCH` of the probe: 1970-01-02 00:00:00 UTC.
const PROBE_EPOCH: &str = "86400";

/// What the compiler at `tool` reports about itself (see the module docs), memoised in
/// `memo_dir` by the binary's stamp.
///
/// # Errors
/// A reason when the compiler cannot be run or its preprocessor fails on the probe.
pub fn probe(tool: &Path, memo_dir: Option<&Path>) -> Result<Probe, String> {
    let text = crate::toolchain::memoised(tool, memo_dir, "family-v1-", || {
        run_probe(tool).map_err(|reason| crate::toolchain::Error::ToolVersion {
            tool: tool.to_path_buf(),
            reason,
        })
    })
    .map_err(|e| e.to_string())?;
    Ok(parse_probe(&text))
}

fn run_probe(tool: &Path) -> Result<String, String> {
    let dir = tempfile::Builder::new()
        .prefix("strata-probe-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let source = dir.path().join("probe.c");
    crate::fs::write_atomic_nosync(&source, PROBE_SOURCE.as_bytes(), 0o644)
        .map_err(|e| e.to_string())?;
    let output = std::process::Command::new(tool)
        .args(["-E", "-P", "-x", "c"])
        .arg(&source)
        .env("SOURCE_DATE_EPOCH", PROBE_EPOCH)
        .env("LC_ALL", "C")
        .env("TZ", "UTC")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    if !output.status.success() {
        return Err(format!(
            "its preprocessor failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or_default()
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text.lines().filter(|l| l.starts_with("strata_")).collect::<Vec<_>>().join("\n"))
}

/// Reads [`run_probe`]'s lines.
fn parse_probe(text: &str) -> Probe {
    let line = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or_default()
    };
    let kind = match line("strata_family") {
        "gcc" => Some(Kind::Gcc),
        "clang" => Some(Kind::Clang),
        _ => None,
    };
    Probe {
        kind,
        epoch_fixes_date: line("strata_date").contains("1970"),
        epoch_fixes_timestamp: line("strata_timestamp").contains("1970"),
    }
}

/// The Make quoting of one name as GCC's `munge` and Clang's `PrintFilename` apply it: `$`
/// doubled, `#` escaped, a space or tab escaped with the backslashes before it doubled;
/// other backslashes kept.
pub(crate) fn make_quote(name: &[u8], tabs: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 4);
    let mut slashes = 0usize;
    for &c in name {
        match c {
            b'\\' => slashes += 1,
            b'$' => {
                out.push(b'$');
                slashes = 0;
            }
            b' ' | b'\t' if c == b' ' || tabs => {
                out.extend(std::iter::repeat_n(b'\\', slashes));
                out.push(b'\\');
                slashes = 0;
            }
            b'#' => {
                out.push(b'\\');
                slashes = 0;
            }
            _ => slashes = 0,
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_lines_give_the_family_and_the_epoch_rules() {
        let gcc = "strata_family gcc\nstrata_date \"Jan  2 1970\" \"00:00:00\"\nstrata_timestamp \"Thu Dec  3 10:00:00 2026\"";
        assert_eq!(
            parse_probe(gcc),
            Probe { kind: Some(Kind::Gcc), epoch_fixes_date: true, epoch_fixes_timestamp: false }
        );
        let old_clang = "strata_family clang\nstrata_date \"Dec  3 2026\" \"10:00:00\"\nstrata_timestamp \"Thu Dec  3 10:00:00 2026\"";
        assert_eq!(
            parse_probe(old_clang),
            Probe {
                kind: Some(Kind::Clang),
                epoch_fixes_date: false,
                epoch_fixes_timestamp: false
            }
        );
        assert_eq!(parse_probe("strata_family other").kind, None);
    }

    #[test]
    fn make_quoting() {
        assert_eq!(make_quote(b"a b$c#d\\e", true), b"a\\ b$$c\\#d\\e");
        assert_eq!(make_quote(b"x\\ y", true), b"x\\\\\\ y");
        assert_eq!(make_quote(b"t\tu", false), b"t\tu");
    }

    #[test]
    fn extra_options_go_before_the_end_of_options() {
        let f = Kind::Clang.family();
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            f.with_options(&os(&["-c", "--", "a.c"]), &os(&["-MD", "-MF", "x.d"])),
            os(&["-c", "-MD", "-MF", "x.d", "--", "a.c"])
        );
        assert_eq!(f.with_options(&os(&["-c", "a.c"]), &os(&["-MD"])), os(&["-c", "a.c", "-MD"]));
    }
}
