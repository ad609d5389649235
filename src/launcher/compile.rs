//! One compilation through the cache: the key, the lookup, and the hand-over to
//! [`super::restore`] (HIT) or [`super::save`] (MISS).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::content::VerifyMemo;
use crate::digest::{ContentDigest, DigestAlgorithm};
use crate::fs;
use crate::l1::layout::CacheRoot;

use super::args::{Compile, Depfile, Language};
use super::entry::{self, CompileKey, EntryPlace};
use super::family::{Family, Kind, Probe};
use super::location::Location;
use super::{Config, Error, KeyBuilder, Messages, Outcome, Step, check, remote};

/// A launcher failure before the compiler ran (after it ran, problems only skip the save).
#[derive(Debug)]
pub(super) enum Failed {
    /// Something the user should hear about.
    BeforeCompile(Error),
    /// Not the cache's business (the compiler reports it): count it under this name.
    Quietly(&'static str),
}

/// Variables that hold `:`-separated directory lists: relocated element by element in the
/// key.
const PATH_LIST_VARIABLES: &[&str] =
    &["CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "COMPILER_PATH"];

/// Everything one launcher run works with.
pub(super) struct Run<'a> {
    pub(super) config: &'a Config,
    pub(super) cache: &'a CacheRoot,
    /// The compiler as the build named it (`argv[0]`).
    pub(super) compiler: &'a OsStr,
    /// The resolved compiler.
    pub(super) tool: &'a Path,
    pub(super) args: &'a [OsString],
    pub(super) compile: &'a Compile,
    pub(super) family: &'static dyn Family,
    pub(super) kind: Kind,
    pub(super) probe: Probe,
    pub(super) out: &'a Messages,
    /// Why candidates were passed over, for `STRATA_EXPLAIN`.
    pub(super) notes: std::cell::RefCell<Vec<String>>,
    /// The machine's memo of input files (saved by [`Run::go`]).
    pub(super) inputs: std::cell::RefCell<super::inputs::InputMemo>,
    /// Counters to add with the outcome's (domain, name), in one update of the counters.
    pub(super) counted: std::cell::RefCell<Vec<(&'static str, &'static str)>>,
}

/// The source as the key saw it.
pub(super) struct Source<'a> {
    pub(super) path: PathBuf,
    pub(super) bytes: &'a [u8],
    pub(super) stamp: fs::FileStamp,
    /// Read before the source was.
    pub(super) clock: FsClock,
    /// When the lookup began (the verification memo's reference time).
    pub(super) began: SystemTime,
}

impl Run<'_> {
    pub(super) fn note(&self, text: String) {
        if self.config.explain {
            self.notes.borrow_mut().push(text);
        }
    }

    /// Looks the compile up and replays or runs it; then writes the machine's memo of
    /// input files if it learnt something.
    pub(super) fn go(&self) -> Result<(Outcome, Step), Failed> {
        let result = self.lookup_or_run();
        self.inputs.borrow().save();
        result
    }

    fn lookup_or_run(&self) -> Result<(Outcome, Step), Failed> {
        let before = Failed::BeforeCompile;
        let cwd = std::env::current_dir().map_err(|e| before(Error::WorkingDirectory(e)))?;
        let here = Location::new(&cwd, &self.config.base_dirs);
        // The first reading of the file system clock, before anything is hashed.
        let clock = FsClock::start(&here.absolute(&self.compile.object));
        let source_path = here.absolute(&self.compile.source);
        let (source_digest, source_bytes, source_stamp) =
            entry::read_input(&source_path, DigestAlgorithm::Blake3)
                .map_err(|_| Failed::Quietly("uncacheable:source_unreadable"))?;
        let key = self.key(&here, &source_digest).map_err(before)?;
        let place = EntryPlace::new(self.cache, &key);
        let began = SystemTime::now();
        let source =
            Source { path: source_path, bytes: &source_bytes, stamp: source_stamp, clock, began };
        // An output directory that does not exist: the compiler reports it, as it would
        // without the launcher (a HIT could not place the files there).
        let placeable = output_paths(self.compile).iter().all(|path| {
            let path = here.absolute(path);
            let parent = path.parent().unwrap_or(Path::new("/"));
            fs::metadata(parent).is_ok_and(|m| m.is_dir())
        });
        let mut memo = VerifyMemo::load(&place.memo, &place.rel);
        if !placeable {
            return Ok(self.miss(&here, &place, &key, &source, &mut memo));
        }
        if let Some(step) = self.lookup(&here, &place, &key, &mut memo, began) {
            return Ok((Outcome::Hit, step));
        }
        // What a MISS adds to the entry's memo (every input's stamp) is not written: the
        // first HIT vouches for the inputs through the machine's memo of inputs at the same
        // cost (7.1 ms of CPU with or without it for xerces-c's median TU), and writes the
        // entry's memo then, while a cold build saves a file per MISS (issue 28). What the
        // lookup learnt of an entry that was there is written as before.
        let looked = memo.is_changed();
        let result = self.miss(&here, &place, &key, &source, &mut memo);
        if looked {
            save_memo(&memo, &place);
        }
        Ok(result)
    }

    /// The first candidate of the entry that applies here, placed: the step that replays
    /// its messages. `None`: a MISS (the notes say why).
    fn lookup(
        &self,
        here: &Location,
        place: &EntryPlace,
        key: &CompileKey,
        memo: &mut VerifyMemo,
        began: SystemTime,
    ) -> Option<Step> {
        let mut loaded = entry::load(place, key);
        let fetched = matches!(loaded, Ok(None)) && remote::fetch(self, place);
        if fetched {
            loaded = entry::load(place, key);
        }
        let manifest = match loaded {
            Ok(Some(m)) => m,
            Ok(None) => {
                self.note(format!("no entry for key {key}"));
                return None;
            }
            Err(e) => {
                self.out.warn(format!("{e}; compiling"));
                return None;
            }
        };
        let order = manifest.lookup_order(memo.used());
        let mut passed_over: Vec<check::Mismatch> = Vec::new();
        for candidate in &order {
            let depfile = match &self.compile.depfile {
                super::args::Depfile::Requested { path, .. } => Some(path.as_path()),
                super::args::Depfile::NotRequested => None,
            };
            let checked = check::check(
                candidate,
                here,
                &self.compile.object,
                depfile,
                memo,
                &mut self.inputs.borrow_mut(),
                began,
            );
            if let Err(why) = checked {
                passed_over.push(why);
                continue;
            }
            match self.restore(place, candidate, here, memo, began) {
                Ok(step) => {
                    // Recency for `prune --compile-max-size`.
                    let _ = fs::touch(&place.manifest());
                    memo.mark_used(&candidate.id(), entry::MAX_CANDIDATES);
                    save_memo(memo, place);
                    if fetched {
                        remote::count(self, remote::counter::HIT);
                    }
                    if candidate.observed_by == "model" {
                        self.note("observed by the model (no trace)".into());
                    }
                    return Some(step);
                }
                Err(e) => {
                    self.out
                        .warn(format!("cached result of {} unusable ({e}); compiling", place.rel));
                    return None;
                }
            }
        }
        self.note(format!("{}; key {key}", check::summary(&passed_over)));
        if let Some(pin) = passed_over.iter().find_map(|m| match m {
            check::Mismatch::Pinned(p) => Some(p.clone()),
            _ => None,
        }) {
            self.embedded_path_hint(here, &order, &pin);
        }
        None
    }

    /// A MISS because the cached objects embed another checkout's path: counted
    /// (`compile_hints`: `embedded_path_miss`), and said once per build with what to add.
    fn embedded_path_hint(&self, here: &Location, order: &[&entry::Candidate], pin: &str) {
        crate::l1::counters::bump(self.cache, super::save::HINTS, "embedded_path_miss");
        if !super::save::once_per_build(self.cache, "embedded-path") {
            return;
        }
        let pinned = entry::decode_path(pin);
        // This checkout's name for the place the cached object names.
        let origin =
            order.iter().find(|c| c.pins.iter().any(|p| p == pin)).map(|c| c.origin.location());
        let moved = origin
            .and_then(|o| here.here(&o.spell(pinned.as_os_str())))
            .map(PathBuf::from)
            .unwrap_or_else(|| here.cwd.clone());
        let dir = here
            .base_spellings()
            .filter(|b| moved.starts_with(b))
            .min_by_key(|b| b.as_os_str().len())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| here.cwd.clone());
        let mapped = self.args.iter().filter_map(|a| a.to_str()).any(|a| {
            ["-ffile-prefix-map=", "-fmacro-prefix-map=", "-fdebug-prefix-map="].iter().any(|o| {
                a.strip_prefix(o)
                    .and_then(|m| m.split_once('='))
                    .is_some_and(|(old, _)| dir.starts_with(old) || moved.starts_with(old))
            })
        });
        let advice = if mapped {
            "the arguments already map that directory, so the path comes from other text (a -D value, a string in the source): no flag will make these objects relocatable"
                .to_owned()
        } else {
            format!(
                "build with -ffile-prefix-map={}=. (strata_enable_launcher() adds it unless NO_PREFIX_MAP or STRATA_PREFIX_MAP=OFF; docs/launcher.md, \"Prefix maps\")",
                dir.display()
            )
        };
        self.out.warn(format!(
            "hint: compiles in {} miss because the cached objects embed the absolute path of the checkout that built them ({}; __FILE__, debug information): {advice}",
            here.cwd.display(),
            pinned.display()
        ));
    }

    /// The key (64 hex): see the module docs of [`super`].
    fn key(&self, here: &Location, source: &ContentDigest) -> Result<CompileKey, Error> {
        let mut key = KeyBuilder::new("strata.compile_key");
        key.field("entry_schema", b"2");
        key.tool(self.cache, self.config, self.tool, self.compiler, "compiler")?;
        key.field("family", self.kind.name().as_bytes());
        key.field(
            "language",
            match self.compile.language {
                Language::C => b"c",
                Language::Cxx => b"c++",
            },
        );
        for arg in &self.compile.key_args {
            key.field("arg", here.relocate_arg(arg).as_bytes());
        }
        for arg in &self.compile.recorded_names {
            key.field("recorded_arg", here.relocate_arg(arg).as_bytes());
        }
        key.field("source", source.to_string().as_bytes());
        for name in self.family.key_environment() {
            let Some(value) = crate::config::var_raw(name) else { continue };
            if PATH_LIST_VARIABLES.contains(name) {
                let mut relocated = Vec::new();
                for (k, dir) in value.as_bytes().split(|&b| b == b':').enumerate() {
                    if k > 0 {
                        relocated.push(b':');
                    }
                    relocated.extend(here.relocate_arg(OsStr::from_bytes(dir)).as_bytes());
                }
                key.field(name, &relocated);
            } else {
                key.field(name, value.as_bytes());
            }
        }
        Ok(key.finish())
    }

    /// The compiler command: the resolved program, with `argv[0]` as given.
    pub(super) fn command(&self) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(self.tool);
        cmd.arg0(self.compiler);
        cmd
    }

    /// The files the command writes, with their roles, as paths here: the object, the
    /// depfile when asked for, the side outputs named after the object.
    pub(super) fn outputs(&self, here: &Location) -> Vec<(String, PathBuf)> {
        let mut out = vec![("object".to_owned(), here.absolute(&self.compile.object))];
        for side in &self.compile.side_outputs {
            let role = side.extension().map(|e| e.to_string_lossy().into_owned());
            out.push((role.unwrap_or_else(|| "side".into()), here.absolute(side)));
        }
        out
    }

    /// The depfile's path here, when the build asked for one.
    pub(super) fn depfile_path(&self, here: &Location) -> Option<PathBuf> {
        match &self.compile.depfile {
            Depfile::Requested { path, .. } => Some(here.absolute(path)),
            Depfile::NotRequested => None,
        }
    }
}

/// The files `compile` writes, as given (relative to the working directory).
pub(super) fn output_paths(compile: &Compile) -> Vec<&Path> {
    let mut out = vec![compile.object.as_path()];
    if let Depfile::Requested { path, .. } = &compile.depfile {
        out.push(path);
    }
    out.extend(compile.side_outputs.iter().map(PathBuf::as_path));
    out
}

/// Writes the entry's verification memo if it changed ([`VerifyMemo::save`]: whole, without
/// fsync, as every memo).
pub(super) fn save_memo(memo: &VerifyMemo, place: &EntryPlace) {
    if memo.is_changed()
        && let Err(e) = memo.save(&place.memo, 0o644)
    {
        tracing::debug!("verification memo not saved: {e}");
    }
}

/// `CLOCK_REALTIME_COARSE` in nanoseconds since the Unix epoch: the clock the kernel stamps
/// files with (its current tick; with multigrain times a file's stamp may run up to a tick
/// ahead of it, never behind). `None` where it cannot be read.
fn coarse_now() -> Option<i128> {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE).ok()?;
    Some(i128::from(now.tv_sec()) * 1_000_000_000 + i128::from(now.tv_nsec()))
}

/// The file system's clock, for telling whether a source or header changed while the
/// compiler ran: its change time is then not older than [`FsClock::marker`], taken just
/// before the compiler starts, and its result is not cached.
///
/// File times come from the kernel's coarse clock, so this reads that clock, not
/// `SystemTime::now()` (which runs up to a tick ahead of it): the change time of the
/// directory the object goes to (the build tree's file system), just after setting that
/// directory's access time to now (`futimens` with `UTIME_NOW` for the access time and
/// `UTIME_OMIT` for the modification time: the kernel stamps the change time as it
/// stamps a new file's; the compile itself then creates or replaces a file there, which
/// changes the directory's times anyway). Where that is refused (a directory the user
/// may not write), the change time of a new, unnamed file beside the object stands in
/// (`O_TMPFILE`; else in the temporary directory). A reading makes no inode: on ext4
/// each new inode costs a scan of the recently deleted ones (issue 28).
///
/// The marker is a reading that has moved on from the first one, taken when the launcher
/// started, so a file written before the launcher started, even in the same tick, reads
/// as older, while anything written after the compiler started does not. Where change
/// times are fine-grained once looked at (multigrain times: Linux 6.13 and later on ext4,
/// xfs, btrfs and tmpfs), the directory's next reading has moved on at once; else it
/// waits for the coarse clock's next tick (usually the launcher's own work takes that
/// long; at most one tick, a few milliseconds), watching that clock rather than reading
/// the file system every 250 µs. Any reading is safe as a marker: it was taken before the
/// compiler started, so every later change is stamped at or after it (a tie counts as
/// changed). Where the clock does not move within 50 ms (a file system with one- or two-second times) the first
/// reading is used, which only leaves more results uncached; where no reading can be
/// taken, `now` less 20 ms (longer than a tick at 100 Hz) stands in.
pub(super) struct FsClock {
    dir: PathBuf,
    /// The directory, open for [`FsClock::read`]; `None` once touching it was refused.
    handle: std::cell::RefCell<Option<std::os::fd::OwnedFd>>,
    first: Option<i128>,
}

impl FsClock {
    pub(super) fn start(object: &Path) -> Self {
        use rustix::fs::{Mode, OFlags};
        let dir = object.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let handle = rustix::fs::open(dir, flags, Mode::empty()).ok();
        let mut clock = FsClock {
            dir: dir.to_path_buf(),
            handle: std::cell::RefCell::new(handle),
            first: None,
        };
        clock.first = clock.read().ok();
        clock
    }

    /// One reading of the file system's clock, in nanoseconds since the Unix epoch.
    fn read(&self) -> std::io::Result<i128> {
        let mut handle = self.handle.borrow_mut();
        if let Some(dir) = handle.as_ref() {
            match touched_ctime(dir) {
                Ok(ctime) => return Ok(ctime),
                Err(_) => *handle = None,
            }
        }
        let file = tempfile::tempfile_in(&self.dir).or_else(|_| tempfile::tempfile())?;
        Ok(fs::FileStamp::of(&file.metadata()?).ctime_ns)
    }

    pub(super) fn marker(&self) -> i128 {
        let Some(first) = self.first else {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i128);
            return now - 20_000_000;
        };
        // A reading of the directory is two system calls, so try one at once: where change
        // times are fine-grained once looked at (multigrain times, Linux 6.13 and later, on
        // ext4, xfs, btrfs, tmpfs) it has moved on already, and no tick need pass.
        if self.handle.borrow().is_some()
            && let Ok(next) = self.read()
            && next > first
        {
            return next;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(50);
        // Wait for the tick on the kernel's coarse clock, which file times follow and which
        // reads without a system call, and then take the reading that counts.
        while coarse_now().is_some_and(|now| now <= first) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(250));
        }
        loop {
            match self.read() {
                Ok(next) if next > first => return next,
                Ok(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_micros(250));
                }
                _ => return first,
            }
        }
    }
}

/// Whether a file whose change time is `ctime_ns` may have changed since `marker`
/// ([`FsClock::marker`], nanoseconds since the Unix epoch): its change time is not older
/// than the marker (a tie counts as changed), or it is a whole second that lies less than
/// [`COARSE_SECONDS`] before the marker. The marker comes from the object directory's file
/// system; an input on a file system that keeps whole seconds (ext4 with 128-byte inodes)
/// or two (FAT) stamps a change made after the marker with the rounded-down time, which
/// would read as older. Such a file written in the two seconds before the compile counts as
/// changed too (the compile is not cached; on a file system with nanoseconds, a change
/// time of exactly `.000000000` is one in a billion).
pub(super) fn changed_since(ctime_ns: i128, marker: i128) -> bool {
    ctime_ns >= marker
        || (ctime_ns % 1_000_000_000 == 0
            && ctime_ns > marker - i128::from(COARSE_SECONDS) * 1_000_000_000)
}

/// The coarsest file time [`changed_since`] allows for, in seconds (FAT's).
const COARSE_SECONDS: u32 = 2;

/// Sets `dir`'s access time to now (its modification time stays) and returns its change
/// time, which that stamped (nanoseconds since the Unix epoch).
fn touched_ctime(dir: &std::os::fd::OwnedFd) -> std::io::Result<i128> {
    use rustix::fs::{Timespec, Timestamps, UTIME_NOW, UTIME_OMIT};
    let times = Timestamps {
        last_access: Timespec { tv_sec: 0, tv_nsec: UTIME_NOW },
        last_modification: Timespec { tv_sec: 0, tv_nsec: UTIME_OMIT },
    };
    rustix::fs::futimens(dir, &times)?;
    let stat = rustix::fs::fstat(dir)?;
    Ok(i128::from(stat.st_ctime) * 1_000_000_000 + i128::from(stat.st_ctime_nsec))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctime(path: &Path) -> i128 {
        fs::FileStamp::of(&fs::metadata(path).unwrap()).ctime_ns
    }

    #[test]
    fn the_clock_reads_the_object_directory_without_making_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let before = dir.path().join("before.h");
        fs::write_new(&before, b"x", 0o644).unwrap();
        let mtime = |p: &Path| fs::FileStamp::of(&fs::metadata(p).unwrap()).mtime_ns;
        let dir_mtime = mtime(dir.path());
        let clock = FsClock::start(&dir.path().join("a.o"));
        assert!(clock.handle.borrow().is_some(), "the directory was opened");
        let first = clock.first.expect("a first reading");
        assert!(first >= ctime(&before), "{first} {}", ctime(&before));
        let marker = clock.marker();
        assert!(marker >= first);
        // The reading is the directory's change time; its modification time (what a build
        // tool might look at) is as it was, and no file was made.
        assert_eq!(ctime(dir.path()), marker);
        assert_eq!(mtime(dir.path()), dir_mtime);
        assert_eq!(fs::read_dir(dir.path()).unwrap().len(), 1);
        let after = dir.path().join("after.h");
        fs::write_new(&after, b"y", 0o644).unwrap();
        assert!(ctime(&after) >= marker, "{} {marker}", ctime(&after));
    }

    #[test]
    fn whole_second_change_times_near_the_marker_count_as_changed() {
        let second = 1_000_000_000_i128;
        let marker = 1_700_000_000 * second + 300_000_000;
        // Nanosecond stamps: only at or after the marker.
        assert!(changed_since(marker, marker));
        assert!(changed_since(marker + 1, marker));
        assert!(!changed_since(marker - 1, marker));
        assert!(!changed_since(marker - 5 * second + 7, marker));
        // A file system with whole seconds stamps a change made 0.2 s after the marker
        // with the marker's second, and FAT (two seconds) with the even second before it.
        assert!(changed_since(1_700_000_000 * second, marker));
        assert!(changed_since(1_699_999_999 * second, marker));
        // Whole seconds two or more seconds before: settled.
        assert!(!changed_since(1_699_999_998 * second, marker));
        assert!(!changed_since(1_699_999_990 * second, marker));
    }

    #[test]
    fn where_the_directory_cannot_be_touched_a_new_file_stands_in() {
        let dir = tempfile::tempdir().unwrap();
        let before = dir.path().join("before.h");
        fs::write_new(&before, b"x", 0o644).unwrap();
        let mut clock = FsClock::start(&dir.path().join("a.o"));
        clock.handle = std::cell::RefCell::new(None);
        clock.first = clock.read().ok();
        let first = clock.first.expect("a reading from a new file");
        assert!(first >= ctime(&before));
        let marker = clock.marker();
        let after = dir.path().join("after.h");
        fs::write_new(&after, b"y", 0o644).unwrap();
        assert!(marker >= first && ctime(&after) >= marker);
        assert_eq!(fs::read_dir(dir.path()).unwrap().len(), 2, "the file had no name");
    }
}
