//! A MISS: the compiler runs with the build's arguments (traced where the kernel allows),
//! and if it succeeds, what it looked at becomes a new candidate of the key.
//!
//! Not cached, with the reason counted: a failed compile; a source or input that changed
//! while the compiler ran (its stamp differs from the one seen, or its change time is not
//! older than the moment the compiler started); a time macro the compiler does not fix
//! from `SOURCE_DATE_EPOCH`; a trace that may be incomplete, or a write a HIT could not
//! repeat; a dependency file that names a file the trace did not see read (a warning:
//! the two must agree); in the fallback model, what it cannot vouch for.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::SystemTime;

use memchr::memmem;

use crate::content::VerifyMemo;
use crate::digest::ContentDigest;
use crate::fs::{self, FileStamp};

use super::args::{Compile, Depfile};
use super::compile::{Run, Source};
use super::entry::{
    self, Candidate, CompileKey, CompileManifest, EntryPlace, Input, Kind, Names, Origin, Output,
    Present,
};
use super::inputs::InputMemo;
use super::location::Location;
use super::stored::TracedInput;
use super::{Error, Outcome, Step, depfile, model, observe, remote, trace};

/// The counter domains of hints and of how compiles were observed (L1's counters).
pub use crate::l1::counters::{COMPILE_HINTS as HINTS, COMPILE_OBSERVED as OBSERVED};

/// Files at least this large are hashed once per machine and stamp (the compiler's back
/// ends, tens of MB), not once per entry.
pub(super) const SHARED_MEMO_BYTES: u64 = 1024 * 1024;

/// How a compile ran.
enum Ran {
    Traced(trace::Traced),
    Plain(std::process::Output),
}

/// What a MISS learnt, before it is checked and recorded.
#[derive(Default)]
struct Learnt {
    /// Inputs: the path (as the compiler named it, or absolute), the stamp seen when it
    /// was opened (traced), and whether it was run as a program.
    inputs: Vec<(PathBuf, Option<FileStamp>, bool)>,
    absent: Vec<PathBuf>,
    /// Those of `absent` to look at again after the compile: every one (`None`, the
    /// model), or those a look taken at a stop before its call found absent (traced; the
    /// rest every lookup found absent by its own result, the preload library's calls).
    absent_recheck: Option<rustc_hash::FxHashSet<PathBuf>>,
    present: Vec<(PathBuf, Kind)>,
    listed: Vec<PathBuf>,
    /// Files the compile left besides the known outputs (absolute).
    extra_outputs: Vec<PathBuf>,
}

type Verdict<T> = Result<Result<T, Outcome>, Error>;

fn not_cached<T>(reason: &str) -> Verdict<T> {
    Ok(Err(Outcome::NotCached(reason.to_owned())))
}

impl Run<'_> {
    /// Compiles, and saves the result when it can be cached.
    pub(super) fn miss(
        &self,
        here: &Location,
        place: &EntryPlace,
        key: &CompileKey,
        source: &Source<'_>,
        memo: &mut VerifyMemo,
    ) -> (Outcome, Step) {
        self.miss_with(here, place, key, source, memo, date_probe(self.compile, self.args))
    }

    /// [`Run::miss`], with `-Wdate-time` added when `probe_dates` (see [`date_probe`]).
    fn miss_with(
        &self,
        here: &Location,
        place: &EntryPlace,
        key: &CompileKey,
        source: &Source<'_>,
        memo: &mut VerifyMemo,
        probe_dates: bool,
    ) -> (Outcome, Step) {
        let private_dep = match &self.compile.depfile {
            Depfile::NotRequested => tempfile::Builder::new()
                .prefix("strata-dep-")
                .suffix(".d")
                .tempfile()
                .ok()
                .map(tempfile::NamedTempFile::into_temp_path),
            Depfile::Requested { .. } => None,
        };
        let mut extra: Vec<OsString> = Vec::new();
        if let Some(dep) = &private_dep {
            extra.extend([OsString::from("-MD"), OsString::from("-MF"), dep.as_os_str().into()]);
        }
        if probe_dates {
            extra.extend(DATE_PROBE.map(OsString::from));
        }
        let args = if extra.is_empty() {
            self.args.to_vec()
        } else {
            self.family.with_options(self.args, &extra)
        };
        let started = source.clock.marker();
        let ran = match self.run_compiler(&args) {
            Ok(ran) => ran,
            Err(e) => {
                self.out.warn(e.to_string());
                let step = Step::Exit { code: 1, stdout: Vec::new(), stderr: Vec::new() };
                return (Outcome::NotCached("error".into()), step);
            }
        };
        let (status, stdout, stderr) = match &ran {
            Ran::Traced(t) => (t.status, t.stdout.clone(), t.stderr.clone()),
            Ran::Plain(o) => (o.status, o.stdout.clone(), o.stderr.clone()),
        };
        let code = super::exit_code(status);
        let probe_fired =
            [&b"date-time"[..], b"might prevent reproducible builds", b"macro is not reproducible"]
                .iter()
                .any(|text| memmem::find(&stderr, text).is_some());
        if probe_dates && probe_fired {
            // The compiler expanded a time macro (however it was spelled: pasted, spliced)
            // or did not know the option: what it printed is not what a plain compile
            // prints. Where SOURCE_DATE_EPOCH makes the macros reproducible, compile again
            // without the probe and cache that; else compile as the build asked, uncached.
            // GCC names the macro (`macro "__TIME__" might prevent …`); Clang does not.
            let named = |m: &[u8]| memmem::find(&stderr, m).is_some();
            let gcc_style = named(b"might prevent reproducible builds");
            let stamp = !gcc_style || named(b"\"__TIMESTAMP__\"");
            let date = !gcc_style || named(b"\"__DATE__\"") || named(b"\"__TIME__\"");
            let fixed = crate::config::var_raw("SOURCE_DATE_EPOCH").is_some()
                && (!date || self.probe.epoch_fixes_date)
                && (!stamp || self.probe.epoch_fixes_timestamp);
            if code == 0 && fixed {
                drop(ran);
                return self.miss_with(here, place, key, source, memo, false);
            }
            let reason = if code == 0 { "uncacheable:time_macros" } else { "compile_failed" };
            return match self.command().args(self.args).stdin(Stdio::inherit()).output() {
                Ok(o) => (
                    Outcome::NotCached(reason.into()),
                    Step::Exit {
                        code: super::exit_code(o.status),
                        stdout: o.stdout,
                        stderr: o.stderr,
                    },
                ),
                Err(e) => {
                    self.out.warn(format!("cannot run {}: {e}", self.tool.display()));
                    let step = Step::Exit { code: 1, stdout: Vec::new(), stderr: Vec::new() };
                    (Outcome::NotCached("error".into()), step)
                }
            };
        }
        let step = Step::Exit { code, stdout, stderr };
        if code != 0 {
            return (Outcome::NotCached("compile_failed".into()), step);
        }
        let mode = if matches!(ran, Ran::Traced(_)) { "trace" } else { "model" };
        self.counted.borrow_mut().push((OBSERVED, mode));
        let saved =
            self.save(here, place, key, source, &ran, private_dep.as_deref(), started, memo);
        match saved {
            Ok(Ok(())) => {
                remote::offer(self, place);
                (Outcome::Miss, step)
            }
            Ok(Err(outcome)) => (outcome, step),
            Err(e) => {
                self.out.warn(format!("compiled, but not cached: {e}"));
                (Outcome::NotCached("save_failed".into()), step)
            }
        }
    }

    /// Runs the compiler with `args`: traced, unless tracing is off or refused here (then
    /// untraced, and the fallback model observes it).
    fn run_compiler(&self, args: &[OsString]) -> Result<Ran, Error> {
        if !self.config.model_only {
            let mut request = trace::Request::new(self.tool, self.compiler, args);
            request.pin = self.config.trace_pin;
            let claims = self.cache.cpu_claims_dir();
            request.pin_claims = Some(&claims);
            request.mechanism = self.config.trace_mechanism;
            let library = self.config.trace_preload.then(|| self.preload_library()).flatten();
            request.preload = library.as_deref();
            match trace::run(&request) {
                Ok(traced) => return Ok(Ran::Traced(traced)),
                Err(trace::Error::Refused { reason, .. }) => self.fallback(&reason),
                Err(trace::Error::Spawn { program, source }) => {
                    return Err(Error::Spawn { program, source });
                }
                Err(e) => {
                    self.out.warn(format!("{e}; compiling without tracing"));
                }
            }
        }
        let output = self
            .command()
            .args(args)
            .stdin(Stdio::inherit())
            .output()
            .map_err(|source| Error::Spawn { program: self.tool.to_path_buf(), source })?;
        Ok(Ran::Plain(output))
    }

    /// The preload library under the cache root; `None` (said under `STRATA_EXPLAIN`) where
    /// it cannot be used.
    fn preload_library(&self) -> Option<std::path::PathBuf> {
        match trace::preload::library(&self.config.cache_root) {
            Ok(path) => Some(path),
            Err(why) => {
                self.note(format!("traced without the preload library: {why}"));
                None
            }
        }
    }

    /// Says once per build that tracing is refused and the model observes compiles.
    fn fallback(&self, why: &str) {
        self.note(format!("observed by the model: tracing is refused ({why})"));
        if once_per_build(self.cache, "trace-refused") {
            self.out.warn(format!(
                "tracing the compiler is refused here ({why}); compiles are observed by the \
                 fallback model, which caches less (docs/launcher.md, \"Where tracing is \
                 refused\")"
            ));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn save(
        &self,
        here: &Location,
        place: &EntryPlace,
        key: &CompileKey,
        source: &Source<'_>,
        ran: &Ran,
        private_dep: Option<&Path>,
        started: i128,
        memo: &mut VerifyMemo,
    ) -> Verdict<()> {
        let learnt = match ran {
            Ran::Traced(t) => self.learn_traced(t, here, private_dep)?,
            Ran::Plain(_) => self.learn_model(here, private_dep, started)?,
        };
        let mut learnt = match learnt {
            Ok(l) => l,
            Err(outcome) => return Ok(Err(outcome)),
        };
        let mode = if matches!(ran, Ran::Traced(_)) { "trace" } else { "model" };
        // The source must be what the key hashed: unchanged since, and not written in the
        // clock tick the compiler started in.
        let now = fs::metadata(&source.path).map(|m| FileStamp::of(&m))?;
        if now != source.stamp || super::compile::changed_since(now.ctime_ns, started) {
            self.note(format!("{} changed while the compiler ran", source.path.display()));
            return not_cached("input_changed");
        }
        let traced: Option<(Vec<TracedInput>, Vec<PathBuf>)> =
            matches!(ran, Ran::Traced(_)).then(|| {
                (
                    learnt
                        .inputs
                        .iter()
                        .map(|(p, stamp, _)| (p.clone(), stamp.map(|s| (s.dev, s.ino))))
                        .collect(),
                    learnt.present.iter().map(|(p, _)| p.clone()).collect(),
                )
            });
        let traced = traced.as_ref().map(|(i, p)| (i.as_slice(), p.as_slice()));
        let (depfile, promote) = match self.depfile_record(here, traced, private_dep)? {
            Ok(d) => d,
            Err(o) => return Ok(Err(o)),
        };
        learnt.present.retain(|(p, _)| !promote.contains(p));
        learnt.inputs.extend(promote.into_iter().map(|p| (p, None, false)));
        let recorded = match self.record_inputs(here, source, &learnt, started, memo)? {
            Ok(r) => r,
            Err(o) => return Ok(Err(o)),
        };
        let _lock = super::lock_entry(self.cache, self.config, place)?;
        let stored = self.store_outputs(here, place, &learnt.extra_outputs, depfile.as_ref())?;
        let message = |bytes: &[u8]| -> Result<Option<Output>, Error> {
            if bytes.is_empty() {
                return Ok(None);
            }
            let digest = ContentDigest::of_bytes(self.config.digest, bytes);
            entry::store_bytes(place, &digest, bytes)?;
            Ok(Some(Output {
                role: "message".into(),
                digest,
                size_bytes: bytes.len() as u64,
                path: None,
            }))
        };
        let (stdout, stderr) = match ran {
            Ran::Traced(t) => (&t.stdout, &t.stderr),
            Ran::Plain(o) => (&o.stdout, &o.stderr),
        };
        let candidate = Candidate {
            observed_by: mode.into(),
            inputs: recorded,
            names: name_groups(
                here,
                &learnt.absent,
                &learnt.present,
                &learnt.inputs.iter().map(|(p, ..)| p.as_path()).collect::<Vec<_>>(),
            ),
            listed: learnt
                .listed
                .iter()
                .filter_map(|p| {
                    let digest = super::check::listing_digest(p, self.config.digest)?;
                    Some(Input { path: record_form(here, p), digest })
                })
                .collect(),
            pins: stored.pins,
            object_name: stored.object_name,
            origin: Origin::of(here),
            outputs: stored.outputs,
            depfile: depfile.map(|(record, _)| record),
            stdout: message(stdout)?,
            stderr: message(stderr)?,
            created_at: crate::record::Timestamp::now().rfc3339(),
        };
        let mut manifest = match entry::load(place, key) {
            Ok(Some(m)) => m,
            _ => CompileManifest { key: key.clone(), candidates: Vec::new() },
        };
        manifest.add(candidate, memo.used());
        entry::store(place, &manifest)?;
        remove_unreferenced(place, &manifest);
        let _ = fs::touch(&self.cache.updated_marker());
        Ok(Ok(()))
    }

    /// The facts of a traced compile.
    fn learn_traced(
        &self,
        traced: &trace::Traced,
        here: &Location,
        private_dep: Option<&Path>,
    ) -> Verdict<Learnt> {
        if let Some(why) = traced.incomplete.first() {
            self.note(format!("the trace may be incomplete: {why}"));
            return not_cached("uncacheable:trace_incomplete");
        }
        // The C library reads the time zone when the compiler formats a local time: GCC
        // and Clang do exactly when they expand `__DATE__`, `__TIME__` or `__TIMESTAMP__`
        // (with SOURCE_DATE_EPOCH, GCC's `__DATE__`/`__TIME__` use UTC and read nothing).
        // Neither pragmas, system headers nor `-w` hide this, as they hide the warning.
        // Where SOURCE_DATE_EPOCH fixes `__DATE__`/`__TIME__`, GCC still reads the zone;
        // `__TIMESTAMP__` is then found by the warning and the text scan only.
        let epoch_fixes =
            crate::config::var_raw("SOURCE_DATE_EPOCH").is_some() && self.probe.epoch_fixes_date;
        let time_zone = TimeZoneFiles::new();
        if let Some(e) = traced.events.iter().find(|e| !epoch_fixes && time_zone.is(&e.path)) {
            self.note(format!("the compiler read the time zone ({})", e.path.display()));
            return not_cached("uncacheable:time_macros");
        }
        let known: Vec<PathBuf> = self
            .outputs(here)
            .into_iter()
            .map(|(_, p)| p)
            .chain(self.depfile_path(here))
            .chain(private_dep.map(Path::to_path_buf))
            .collect();
        let may_write = |p: &Path| {
            known.iter().any(|k| k == p)
                || p.starts_with(&here.cwd)
                || here.under_base(p.as_os_str().as_bytes())
        };
        let seen = observe::from_trace(&traced.events, &may_write);
        if let Some(what) = seen.unsafe_write {
            self.note(what);
            return not_cached("uncacheable:untracked_write");
        }
        let search_dirs: Vec<PathBuf> =
            self.compile.include_dirs.iter().map(|d| here.absolute(&d.dir)).collect();
        if let Some(what) = observe::dropped_duplicate(&traced.events, &search_dirs) {
            self.note(what);
            return not_cached("uncacheable:duplicate_search_directory");
        }
        let programs: BTreeSet<&Path> = traced
            .events
            .iter()
            .filter(|e| e.op == trace::Op::Exec)
            .map(|e| e.path.as_path())
            .collect();
        let extra_outputs = seen.written.iter().filter(|p| !known.contains(p)).cloned().collect();
        // The working directory and the directories outputs go to exist wherever the
        // compile runs: that they (and their ancestors) are directories is implied by the
        // location, and a fact about them would name this build directory's own name
        // (`<checkout>/build-a` is present), so another checkout built in another
        // directory would never HIT.
        let implied: Vec<PathBuf> = std::iter::once(here.cwd.clone())
            .chain(here.pwd.clone())
            .chain(known.iter().filter_map(|p| p.parent().map(Path::to_path_buf)))
            .collect();
        let present = seen
            .present
            .into_iter()
            .filter(|(p, kind)| {
                *kind != Kind::Directory || !implied.iter().any(|i| i.starts_with(p))
            })
            .collect();
        Ok(Ok(Learnt {
            inputs: seen
                .inputs
                .iter()
                .map(|(p, stamp)| (p.clone(), Some(*stamp), programs.contains(p.as_path())))
                .collect(),
            absent: seen.absent,
            absent_recheck: Some(seen.absent_looked_before),
            present,
            listed: seen.listed,
            extra_outputs,
        }))
    }

    /// The facts of an untraced compile, from its dependency output and the model.
    fn learn_model(
        &self,
        here: &Location,
        private_dep: Option<&Path>,
        started: i128,
    ) -> Verdict<Learnt> {
        if let Some(reason) = &self.compile.needs_trace {
            self.note(format!("{reason} needs a traced compile"));
            return not_cached(&format!("uncacheable:{}", reason.name()));
        }
        let text = match (&self.compile.depfile, private_dep) {
            (_, Some(private)) => fs::read(private)?,
            (Depfile::Requested { system_headers: true, path, .. }, None) => {
                fs::read(&here.absolute(path))?
            }
            (Depfile::Requested { system_headers: false, .. }, None) => self.all_dependencies()?,
            (Depfile::NotRequested, None) => {
                return Err(Error::Depfile {
                    path: PathBuf::from("(none)"),
                    reason: "no dependency file".into(),
                });
            }
        };
        let rules = depfile::parse(&text)
            .map_err(|reason| Error::Depfile { path: "dependency output".into(), reason })?;
        let deps: Vec<PathBuf> = rules.first().map(|r| r.dependencies.clone()).unwrap_or_default();
        if !deps.iter().any(|d| same_file(&here.absolute(d), &here.absolute(&self.compile.source)))
        {
            self.note("the dependency output does not list the source".into());
            return not_cached("uncacheable:incomplete_depfile");
        }
        // With `-MMD` the list comes from a second run after the compile: every file the
        // compile's own dependency file names must be in it, or the second run found
        // something else (a header removed or moved while the compiler ran).
        if let (Depfile::Requested { system_headers: false, path, .. }, None) =
            (&self.compile.depfile, private_dep)
        {
            let own = depfile::parse(&fs::read(&here.absolute(path))?)
                .map_err(|reason| Error::Depfile { path: path.clone(), reason })?;
            let listed: std::collections::HashSet<PathBuf> =
                deps.iter().map(|d| here.absolute(d)).collect();
            let own_deps = own.first().map(|r| r.dependencies.as_slice()).unwrap_or_default();
            if let Some(gone) = own_deps.iter().find(|d| !listed.contains(&here.absolute(d))) {
                self.note(format!(
                    "{} was read by the compiler but is not where the second dependency run \
                     looked; it changed while the compiler ran",
                    gone.display()
                ));
                return not_cached("input_changed");
            }
        }
        let lists = self.search_lists()?;
        let contents = |p: &Path| fs::read(&here.absolute(p)).ok();
        let probes = match model::probes(
            &deps,
            &lists,
            &self.compile.forced_includes,
            &self.compile.include_dirs.iter().map(|d| d.dir.clone()).collect::<Vec<_>>(),
            &here.cwd,
            started,
            &contents,
        ) {
            Ok(p) => p,
            Err(why) => {
                self.note(format!("the fallback model cannot vouch for it: {why}"));
                return not_cached(&format!("uncacheable:{}", why.name()));
            }
        };
        if let Some(changed) = probes.changed.first() {
            self.note(format!("{} appeared or changed while the compiler ran", changed.display()));
            return not_cached("input_changed");
        }
        let present = probes
            .present
            .into_iter()
            .filter_map(|p| {
                let meta = fs::metadata(&here.absolute(&p)).ok()?;
                Some((p, super::check::kind_of(&meta)))
            })
            .collect();
        Ok(Ok(Learnt {
            inputs: deps.iter().skip(1).map(|d| (d.clone(), None, false)).collect(),
            absent: probes.absent,
            absent_recheck: None,
            present,
            listed: Vec::new(),
            extra_outputs: Vec::new(),
        }))
    }

    /// The compiler's include search lists for this compile (`-E -v`).
    fn search_lists(&self) -> Result<model::SearchLists, Error> {
        let output = self
            .command()
            .args(self.family.search_list_args(self.compile))
            .stdin(Stdio::null())
            .output()
            .map_err(|source| Error::Spawn { program: self.tool.to_path_buf(), source })?;
        Ok(model::parse_search_lists(&output.stderr))
    }

    /// Every dependency, system headers included, for a build that asked for `-MMD`: a
    /// dependency-only run of the preprocessor.
    fn all_dependencies(&self) -> Result<Vec<u8>, Error> {
        let tmp = tempfile::Builder::new()
            .prefix("strata-dep-")
            .suffix(".d")
            .tempfile()
            .map_err(|e| fs::Error::io("create", Path::new("strata-dep-*.d"), e))?
            .into_temp_path();
        let mut args: Vec<OsString> = Vec::new();
        for arg in &self.compile.key_args {
            match arg.to_str() {
                Some("-MD" | "-MMD" | "-MP" | "-c") => {}
                _ => args.push(arg.clone()),
            }
        }
        let extra = [OsString::from("-M"), OsString::from("-MF"), tmp.as_os_str().to_owned()];
        let args = self.family.with_options(&args, &extra);
        let status = self
            .command()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|source| Error::Spawn { program: self.tool.to_path_buf(), source })?;
        if !status.success() {
            return Err(Error::Depfile {
                path: tmp.to_path_buf(),
                reason: format!("the dependency run of the compiler failed ({status})"),
            });
        }
        Ok(fs::read(&tmp)?)
    }

    /// Hashes every input, checks it did not change while the compiler ran, looks for time
    /// macros, and checks the absent and present facts still hold; the inputs' records.
    fn record_inputs(
        &self,
        here: &Location,
        source: &Source<'_>,
        learnt: &Learnt,
        started: i128,
        memo: &mut VerifyMemo,
    ) -> Verdict<Vec<Input>> {
        let mut out: Vec<Input> = Vec::new();
        let mut seen_records: rustc_hash::FxHashSet<String> = Default::default();
        let mut files = rustc_hash::FxHashSet::default();
        let mut found = scan_text(source.bytes);
        let mut inputs = self.inputs.borrow_mut();
        // The source itself is not an input of its own entry: found by device and inode,
        // from the stamp the tracer saw at the open when there is one (one stat saved per
        // input on a MISS).
        let source_id = fs::metadata(&source.path).ok().map(|m| (m.dev(), m.ino()));
        for (path, seen, program) in &learnt.inputs {
            let abs = here.absolute(path);
            let id = match seen {
                Some(s) => Some((s.dev, s.ino)),
                None => fs::metadata(&abs).ok().map(|m| (m.dev(), m.ino())),
            };
            if id.is_some() && id == source_id {
                continue;
            }
            let record = record_form(here, path);
            if !seen_records.insert(record.clone()) {
                continue;
            }
            let seen_size = seen.as_ref().map(|s| s.size_bytes);
            let digested = self.digest_input(&abs, seen_size, *program, &mut inputs, source.began);
            let (digest, stamp) = match digested {
                Ok((digest, stamp, in_text)) => {
                    found.add(in_text);
                    (digest, stamp)
                }
                Err(e) => {
                    self.note(format!("{}: {e}", abs.display()));
                    return not_cached("input_changed");
                }
            };
            let moved = seen.is_some_and(|s| {
                (s.dev, s.ino, s.size_bytes, s.mtime_ns)
                    != (stamp.dev, stamp.ino, stamp.size_bytes, stamp.mtime_ns)
            });
            if moved || super::compile::changed_since(stamp.ctime_ns, started) {
                self.note(format!("{} changed while the compiler ran", abs.display()));
                return not_cached("input_changed");
            }
            if !super::check::distinct_file(&stamp, &mut files) {
                self.note(format!("{} is the same file as another input", abs.display()));
                return not_cached("uncacheable:aliased_inputs");
            }
            memo.remember(&entry::header_memo_name(&abs), stamp, digest, source.began);
            out.push(Input { path: record, digest });
        }
        // `#pragma GCC dependency "file"` warns when the file is newer than the current
        // one: the messages depend on mtimes, which no fact records.
        if found.dependency {
            return not_cached("uncacheable:pragma_dependency");
        }
        let epoch = crate::config::var_raw("SOURCE_DATE_EPOCH").is_some();
        if (found.dates && !(epoch && self.probe.epoch_fixes_date))
            || (found.stamp && !(epoch && self.probe.epoch_fixes_timestamp))
        {
            return not_cached("uncacheable:time_macros");
        }
        // A name in a directory that is absent is absent too, so the search list's misses
        // (hundreds per TU, in a few directories that mostly do not exist) cost one
        // `lstat` per such directory rather than one per name. A name the compiler's own
        // call found absent (through the preload library) needs no second look: nothing
        // came between the finding and the call; one looked at at a stop, before its call
        // ran, does (a file created in between was found by the compiler).
        let mut absent_dirs: rustc_hash::FxHashMap<PathBuf, bool> = Default::default();
        let recheck = |p: &PathBuf| learnt.absent_recheck.as_ref().is_none_or(|r| r.contains(p));
        for p in learnt.absent.iter().filter(|p| recheck(p)) {
            let abs = here.absolute(p);
            if let Some(dir) = abs.parent().filter(|d| !d.as_os_str().is_empty()) {
                let dir_absent = *absent_dirs
                    .entry(dir.to_path_buf())
                    .or_insert_with(|| fs::symlink_metadata_opt(dir).ok().flatten().is_none());
                if dir_absent {
                    continue;
                }
            }
            if fs::symlink_metadata_opt(&abs).ok().flatten().is_some()
                && !learnt.extra_outputs.contains(&abs)
            {
                self.note(format!("{} appeared while the compiler ran", p.display()));
                return not_cached("input_changed");
            }
        }
        Ok(Ok(out))
    }

    /// The digest and stamp of one input, and what the scan of its text found (nothing for
    /// a program or a binary file). A file the machine's memo of inputs vouches for by its
    /// stamp (hashed by an earlier MISS, its scan found nothing) is not read; one hashed
    /// here whose scan found nothing is remembered there. A program is never scanned: any
    /// digest the memo holds for its stamp will do, and one hashed here is remembered as a
    /// digest only (`d/`), which never stands for a scan.
    fn digest_input(
        &self,
        abs: &Path,
        seen_size: Option<u64>,
        program: bool,
        inputs: &mut InputMemo,
        began: SystemTime,
    ) -> Result<(ContentDigest, FileStamp, Found), Error> {
        // The size the tracer saw picks the way to hash; a file that changed since is
        // caught by the stamp comparison after.
        let size = match seen_size {
            Some(size) => size,
            None => fs::metadata(abs)?.size(),
        };
        if size >= SHARED_MEMO_BYTES {
            let digest = shared_digest(&self.cache.memo_dir(), abs, self.config.digest)?;
            let mut found = Found::default();
            if !program {
                let bytes = fs::read(abs)?;
                if is_text(&bytes) {
                    found = scan_text(&bytes);
                }
            }
            return Ok((digest, FileStamp::of(&fs::metadata(abs)?), found));
        }
        // A program (the assembler, the driver: up to a MiB each) is not scanned, so any
        // remembered digest of it will do; a header needs a MISS's clean scan.
        let stamp = FileStamp::of(&fs::metadata(abs)?);
        let remembered = if program {
            inputs.digest(abs, &stamp, self.config.digest)
        } else {
            inputs.clean(abs, &stamp, self.config.digest)
        };
        if let Some(digest) = remembered {
            return Ok((digest, stamp, Found::default()));
        }
        let (digest, bytes, stamp) = entry::read_input(abs, self.config.digest)?;
        if program {
            inputs.remember_digest(abs, stamp, digest, began);
            return Ok((digest, stamp, Found::default()));
        }
        let found = if is_text(&bytes) { scan_text(&bytes) } else { Found::default() };
        if !found.any() {
            inputs.remember_clean(abs, stamp, digest, began);
        }
        Ok((digest, stamp, found))
    }
}

/// What the scan of an input's text found that no fact records.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Found {
    /// `__DATE__` or `__TIME__`.
    dates: bool,
    /// `__TIMESTAMP__`.
    stamp: bool,
    /// `#pragma GCC dependency`.
    dependency: bool,
}

impl Found {
    fn any(self) -> bool {
        self.dates || self.stamp || self.dependency
    }

    fn add(&mut self, other: Found) {
        self.dates |= other.dates;
        self.stamp |= other.stamp;
        self.dependency |= other.dependency;
    }
}

/// Scans an input's text for what no fact records: time macros (`__DATE__`/`__TIME__`,
/// `__TIMESTAMP__`) and `#pragma GCC dependency`, after line splices are removed (and for
/// the pragma, comments too).
fn scan_text(bytes: &[u8]) -> Found {
    let text = model::unspliced(bytes);
    // Both words first: most system headers say `GCC`, few say `dependency`, and removing
    // comments copies the whole text.
    let dependency = has(&text, b"dependency")
        && has(&text, b"GCC")
        && (has(&text, b"GCC dependency")
            || has(&model::without_comments(&text), b"GCC dependency"));
    Found {
        dates: has(&text, b"__DATE__") || has(&text, b"__TIME__"),
        stamp: has(&text, b"__TIMESTAMP__"),
        dependency,
    }
}

/// The time-zone files the C library reads to format a local time: `/etc/localtime`,
/// `/etc/timezone`, anything under a `zoneinfo` directory, and the file `TZ` names.
struct TimeZoneFiles {
    /// `/zoneinfo`, found in a path's bytes.
    zoneinfo: memmem::Finder<'static>,
    /// The file `TZ` names (its value without a leading `:`), if it names one.
    tz: Option<Vec<u8>>,
}

impl TimeZoneFiles {
    /// Reads `TZ` once, for every path of a trace.
    fn new() -> Self {
        let tz = crate::config::var_raw("TZ").and_then(|tz| {
            let tz = tz.as_bytes();
            let file = tz.strip_prefix(b":").unwrap_or(tz);
            (!file.is_empty()).then(|| file.to_vec())
        });
        Self { zoneinfo: memmem::Finder::new(b"/zoneinfo"), tz }
    }

    /// Whether `path` is one of them.
    fn is(&self, path: &Path) -> bool {
        let b = path.as_os_str().as_bytes();
        if b == b"/etc/localtime" || b == b"/etc/timezone" || self.zoneinfo.find(b).is_some() {
            return true;
        }
        self.tz.as_deref().is_some_and(|file| {
            b == file || (b.ends_with(file) && b[..b.len() - file.len()].ends_with(b"/"))
        })
    }
}

/// What a MISS adds to learn whether the compile expanded `__DATE__`, `__TIME__` or
/// `__TIMESTAMP__`: GCC and Clang warn at every expansion, also of a name made by token
/// pasting or a line splice, which no scan of the text sees.
const DATE_PROBE: [&str; 2] = ["-Wdate-time", "-Wno-error=date-time"];

/// Whether a MISS may add [`DATE_PROBE`] to `args` without changing what the compile
/// writes: not with `-w` (which silences the warning), nor where an output records the
/// command line (`-frecord-command-line` and its aliases in the object, Clang's `-MJ`
/// compilation-database entry, GCC's `-fverbose-asm` in an assembler listing). Then only
/// the scan of the inputs' text finds time macros (docs/launcher.md, limits).
fn date_probe(compile: &Compile, args: &[OsString]) -> bool {
    !compile.records_command_line
        && !args
            .iter()
            .filter_map(|a| a.to_str())
            .any(|a| matches!(a, "-w" | "-fverbose-asm") || a.starts_with("-MJ"))
}

/// The record form of a fact's path: relative to the working directory when it lies under
/// it (as given, or as joined by the tracer), else [`Location::encode`].
fn record_form(here: &Location, path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    if bytes.first() != Some(&b'/') {
        return entry::encode_path(path);
    }
    if let Some(rest) = super::location::below(bytes, here.cwd.as_os_str().as_bytes()) {
        return entry::encode_path(Path::new(OsStr::from_bytes(rest)));
    }
    here.encode(path.as_os_str())
}

/// The facts about names to record, by directory: each absent path replaced by its
/// shortest prefix that is absent (`src/bits` for `src/bits/vector` when `src/bits` does
/// not exist: a stronger fact, in a directory that exists, so a HIT checks it with one
/// `stat` of that directory), and each present one, deduplicated; directories in record
/// form. The directories above each of `existing` (files the caller found there after the
/// compile: its inputs) are known to exist and are not looked at again.
fn name_groups<'a>(
    here: &Location,
    absent: &'a [PathBuf],
    present: &'a [(PathBuf, Kind)],
    existing: &[&'a Path],
) -> Vec<Names> {
    let mut groups: Vec<Names> = Vec::new();
    let mut index: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    // Most names share a few directories: each spelling's record form is made once.
    let mut spelled: rustc_hash::FxHashMap<&[u8], usize> = Default::default();
    let mut group = |dir: &'a Path| -> usize {
        *spelled.entry(dir.as_os_str().as_bytes()).or_insert_with(|| {
            let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
            let record = record_form(here, dir);
            *index.entry(record.clone()).or_insert_with(|| {
                groups.push(Names { dir: record, absent: Vec::new(), present: Vec::new() });
                groups.len() - 1
            })
        })
    };
    let mut at: Vec<(usize, String, Option<Kind>)> = Vec::new();
    // Absent names share a few directories (the search list): one `lstat` per directory,
    // none for one above a file that exists. Keyed by the paths' bytes (each an ancestor
    // as `Path::ancestors` cuts it), not hashed component by component.
    let mut exists: rustc_hash::FxHashMap<&[u8], bool> = Default::default();
    // One buffer for every name's ancestors.
    let mut ancestors: Vec<&'a Path> = Vec::new();
    for file in existing {
        ancestors.clear();
        proper_ancestors(file, &mut ancestors);
        for dir in &ancestors {
            // Its own ancestors went in with it.
            if exists.insert(dir.as_os_str().as_bytes(), true).is_some() {
                break;
            }
        }
    }
    fn exists_at<'a>(
        exists: &mut rustc_hash::FxHashMap<&'a [u8], bool>,
        here: &Location,
        dir: &'a Path,
    ) -> bool {
        *exists.entry(dir.as_os_str().as_bytes()).or_insert_with(|| {
            fs::symlink_metadata_opt(&here.absolute(dir)).ok().flatten().is_some()
        })
    }
    // The first absent ancestor depends only on a name's directory, which most absent
    // names share with others (hundreds of names in a few search directories): found once
    // per directory. Names that come to the same absent path are recorded once.
    let mut first_absent_under: rustc_hash::FxHashMap<&'a [u8], Option<&'a Path>> =
        Default::default();
    let mut recorded: rustc_hash::FxHashSet<&'a [u8]> = Default::default();
    for path in absent {
        let first_absent = match parent_of(path) {
            None => None,
            Some(dir) => {
                *first_absent_under.entry(dir.as_os_str().as_bytes()).or_insert_with(|| {
                    // From the root down: the first ancestor that is absent. Absent names
                    // share their first absent directory (`<build>/xercesc` for every
                    // header looked for under the build directory), so walking down looks
                    // at each directory once, where walking up would look at every
                    // distinct parent.
                    ancestors.clear();
                    ancestors.push(dir);
                    proper_ancestors(dir, &mut ancestors);
                    ancestors.iter().rev().find(|&&a| !exists_at(&mut exists, here, a)).copied()
                })
            }
        };
        let p: &'a Path = first_absent.unwrap_or(path);
        if !recorded.insert(p.as_os_str().as_bytes()) {
            continue;
        }
        let (dir, name) = split_name(p);
        at.push((group(dir), name, None));
    }
    for (path, kind) in present {
        let (dir, name) = split_name(path);
        at.push((group(dir), name, Some(*kind)));
    }
    for (k, name, kind) in at {
        let g = &mut groups[k];
        match kind {
            None if !g.absent.contains(&name) => g.absent.push(name),
            Some(kind) if !g.present.iter().any(|p| p.name == name) => {
                g.present.push(Present { name, kind });
            }
            _ => {}
        }
    }
    groups
}

/// A path as its directory and its last component (name-encoded; `.` for a path that ends
/// in `..` or is a root).
fn split_name(path: &Path) -> (&Path, String) {
    // A path in plain form splits at its last slash, as `parent` and `file_name` would
    // split it after parsing every component.
    if super::observe::plain(path) {
        let b = path.as_os_str().as_bytes();
        // A last component `..` has no file name: the parsed form below (`.` in the path).
        if let Some(at) = memchr::memrchr(b'/', b).filter(|_| b != b"/" && !b.ends_with(b"/..")) {
            let dir = if at == 0 { &b[..1] } else { &b[..at] };
            let name = OsStr::from_bytes(&b[at + 1..]);
            return (Path::new(OsStr::from_bytes(dir)), fs::name::encode_os(name));
        }
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => (dir, fs::name::encode_os(name)),
        _ => (path, ".".to_owned()),
    }
}

/// `path`'s nearest proper ancestor that is not empty: the first one [`proper_ancestors`]
/// gives (the parent, cut at the last slash for a path in plain form); `None` for a root or
/// a relative path of one component.
fn parent_of(path: &Path) -> Option<&Path> {
    let b = path.as_os_str().as_bytes();
    if super::observe::plain(path) {
        if b == b"/" {
            return None;
        }
        let at = memchr::memrchr(b'/', b)?;
        return Some(Path::new(OsStr::from_bytes(if at == 0 { &b[..1] } else { &b[..at] })));
    }
    path.ancestors().skip(1).find(|a| !a.as_os_str().is_empty())
}

/// Pushes `path`'s proper ancestors onto `out`, nearest first, as
/// `path.ancestors().skip(1)` gives them but without empty ones (a relative path's last).
/// A path in plain form (absolute, no `//`, `.` or trailing slash) is cut at its slashes
/// without parsing its components.
fn proper_ancestors<'a>(path: &'a Path, out: &mut Vec<&'a Path>) {
    let b = path.as_os_str().as_bytes();
    if !super::observe::plain(path) {
        out.extend(path.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()));
        return;
    }
    if b == b"/" {
        return;
    }
    for at in memchr::memrchr_iter(b'/', b) {
        let dir = if at == 0 { &b[..1] } else { &b[..at] };
        out.push(Path::new(OsStr::from_bytes(dir)));
    }
}

/// The digest of a large file (a compiler's back end, a program it runs), hashed once per
/// machine while its stamp holds (memoised under `memo_dir` like a tool's version), so
/// neither a MISS nor the first HIT of each entry hashes tens of MB again. A symlink is
/// followed, as the compiler follows it.
///
/// # Errors
/// [`Error::Fs`] when the file cannot be read; [`Error::Output`] for a damaged memo text.
pub(super) fn shared_digest(
    memo_dir: &Path,
    path: &Path,
    algorithm: crate::digest::DigestAlgorithm,
) -> Result<ContentDigest, Error> {
    let real = fs::canonicalize(path)?;
    let text = crate::toolchain::memoised(&real, Some(memo_dir), &format!("{algorithm}-"), || {
        let (digest, _, _) = fs::hash_file_stable(&real, algorithm)?;
        Ok(digest.to_string())
    })
    .map_err(|e| Error::Output { role: "input".into(), reason: e.to_string() })?;
    text.parse().map_err(|_| Error::Output {
        role: "input".into(),
        reason: format!("memoised digest {text:?}"),
    })
}

/// True if the two paths name the same file (device and inode).
pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// True for a file whose text is scanned for time macros and `#pragma GCC dependency`:
/// every input but a precompiled header (GCC's `gpch`, Clang's `CPCH` magic), whose
/// identifier tables hold macro names as data, not uses. A NUL does not make a header
/// binary: GCC and Clang read past one in a comment, so a header with a NUL in it is
/// scanned like any other. Other binary data (`.incbin`, profile data) is scanned too: a
/// macro's name found there only costs the caching of that compile.
fn is_text(bytes: &[u8]) -> bool {
    !(bytes.starts_with(b"gpch") || bytes.starts_with(b"CPCH"))
}

fn has(bytes: &[u8], needle: &[u8]) -> bool {
    memmem::find(bytes, needle).is_some()
}

/// Removes objects no candidate references (under the entry lock).
pub(super) fn remove_unreferenced(place: &EntryPlace, manifest: &CompileManifest) {
    let keep: BTreeSet<String> = manifest
        .candidates
        .iter()
        .flat_map(|c| c.outputs.iter().chain(&c.stdout).chain(&c.stderr))
        .map(|o| o.digest.to_hex())
        .collect();
    let Ok(entries) = fs::read_dir(&place.dir.join("objects")) else { return };
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !keep.contains(&name) {
            let _ = fs::remove_file(&path);
        }
    }
}

/// True the first time it is asked about `what` during one build (the launcher's parent
/// process, by pid and start time, stands for the build), false after.
pub(super) fn once_per_build(cache: &crate::l1::layout::CacheRoot, what: &str) -> bool {
    let ppid = std::os::unix::process::parent_id();
    let start = fs::read(Path::new(&format!("/proc/{ppid}/stat")))
        .ok()
        .and_then(|b| {
            let text = String::from_utf8_lossy(&b).into_owned();
            let after = text.rsplit_once(')')?.1.to_owned();
            after.split_whitespace().nth(19).map(str::to_owned)
        })
        .unwrap_or_default();
    let marker = cache.local_dir().join("launcher-warned").join(format!("{what}-{ppid}-{start}"));
    if fs::symlink_metadata_opt(&marker).ok().flatten().is_some() {
        return false;
    }
    let _ = fs::create_dir_all(marker.parent().unwrap_or(cache.path()));
    let _ = fs::write_atomic_nosync(&marker, b"", 0o644);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte cuts of plain paths give exactly what `Path`'s component parsing gives, and
    /// other paths take the parsing.
    #[test]
    fn ancestors_and_names_cut_at_slashes_equal_the_parsed_ones() {
        for path in [
            "/",
            "/a",
            "/a/b",
            "/usr/include/c++/12/bits/stl_vector.h",
            "/a//b",
            "/a/./b",
            "/a/b/",
            "/a/b/.",
            "/a/../b",
            "a/b",
            "a",
            ".",
            "..",
            "./a",
            "a/./b",
            "//a/b",
            "/a/b/c/",
            "/a/..",
            "/..",
            "",
        ] {
            let path = Path::new(path);
            let mut cut = Vec::new();
            proper_ancestors(path, &mut cut);
            let parsed: Vec<&Path> =
                path.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).collect();
            let bytes = |v: &[&Path]| {
                v.iter().map(|p| p.as_os_str().as_bytes().to_vec()).collect::<Vec<_>>()
            };
            assert_eq!(bytes(&cut), bytes(&parsed), "{}", path.display());
            // A name's directory and that directory's ancestors are the name's ancestors,
            // which name_groups relies on to look each directory up once.
            let mut via_parent = Vec::new();
            if let Some(dir) = parent_of(path) {
                via_parent.push(dir);
                proper_ancestors(dir, &mut via_parent);
            }
            assert_eq!(bytes(&via_parent), bytes(&parsed), "{}", path.display());
            let expected = match (path.parent(), path.file_name()) {
                (Some(dir), Some(name)) => (dir, fs::name::encode_os(name)),
                _ => (path, ".".to_owned()),
            };
            let (dir, name) = split_name(path);
            assert_eq!(
                (dir.as_os_str().as_bytes(), name.as_str()),
                (expected.0.as_os_str().as_bytes(), expected.1.as_str()),
                "{}",
                path.display()
            );
        }
    }

    #[test]
    fn absent_names_are_recorded_at_their_first_absent_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(&root.join("inc/sub")).unwrap();
        let here = Location::new(root, &[]);
        let absent: Vec<PathBuf> = [
            "inc/missing/deeper/x.h",
            "inc/missing/y.h",
            "inc/z.h",
            "inc/sub/w.h",
            "nothere/a/b.h",
            "top.h",
        ]
        .iter()
        .map(|p| root.join(p))
        .collect();
        let groups = name_groups(&here, &absent, &[], &[]);
        let mut seen: Vec<(String, Vec<String>)> =
            groups.into_iter().map(|g| (g.dir, g.absent)).collect();
        seen.sort();
        let want = |dir: &str, names: &[&str]| {
            (dir.to_owned(), names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
        };
        // The working directory's record form is its own (not a path).
        let cwd = record_form(&here, root);
        assert_eq!(
            seen,
            [
                want(&cwd, &["nothere", "top.h"]),
                want("inc", &["missing", "z.h"]),
                want("inc/sub", &["w.h"]),
            ]
        );
        // A directory above a file the caller found is taken to exist without a look: here
        // a file said to be under `nothere/a` makes `b.h` the absent name, in `nothere/a`.
        let said = root.join("nothere/a/read.h");
        let groups = name_groups(&here, &absent, &[], &[said.as_path()]);
        let nothere: Vec<(String, Vec<String>)> = groups
            .into_iter()
            .filter(|g| g.dir.starts_with("nothere"))
            .map(|g| (g.dir, g.absent))
            .collect();
        assert_eq!(nothere, [want("nothere/a", &["b.h"])]);
    }
}
