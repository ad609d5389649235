//! The outputs a MISS stores, and what a HIT needs to write them again exactly: the
//! depfile's record (checked against the compiler's own file), the paths the outputs
//! embed (pins), and whether they depend on the object's name.

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use memchr::memmem;

use crate::digest::ContentDigest;
use crate::fs;

use super::compile::Run;
use super::entry::{self, DepfileRecord, EntryPlace, Output};
use super::location::Location;
use super::restore::{RENDERED, VERBATIM};
use super::save::same_file;
use super::{Error, Outcome, depfile};

/// What [`Run::store_outputs`] stored.
pub(super) struct Stored {
    pub(super) outputs: Vec<Output>,
    pub(super) pins: Vec<String>,
    pub(super) object_name: Option<String>,
}

/// The build's depfile as a record, and for the `verbatim` form its bytes.
pub(super) type DepfileFacts = (DepfileRecord, Option<Vec<u8>>);

/// A traced input for [`Run::depfile_record`]: its path and the device and inode the
/// tracer saw when it was opened (`None` where the tracer saw no stamp).
pub(super) type TracedInput = (PathBuf, Option<(u64, u64)>);

/// What [`Run::depfile_record`] found: the depfile's record and the files to promote to
/// inputs, or why the compile is not cached.
pub(super) type DepfileFound = Result<(Option<DepfileFacts>, Vec<PathBuf>), Outcome>;

impl Run<'_> {
    /// Reads the dependency output (the build's depfile, or the private one), checks it is
    /// this compile's and, for a traced compile (`traced`: the files it read and the names
    /// it found), that every file it names was looked at; returns the record of the build's
    /// depfile (`None` when it asked for none) and the files it names that the trace saw
    /// looked up but not read (Clang checks a precompiled header's sources by their stamps):
    /// they become inputs, so a change to them is a MISS as it is an error for the
    /// compiler.
    pub(super) fn depfile_record(
        &self,
        here: &Location,
        traced: Option<(&[TracedInput], &[PathBuf])>,
        private_dep: Option<&Path>,
    ) -> Result<DepfileFound, Error> {
        let build = self.depfile_path(here);
        let Some(path) = build.clone().or_else(|| private_dep.map(Path::to_path_buf)) else {
            return Ok(Ok((None, Vec::new())));
        };
        let text = fs::read(&path)?;
        let rules = depfile::parse(&text)
            .map_err(|reason| Error::Depfile { path: path.clone(), reason })?;
        let deps: Vec<PathBuf> = rules.first().map(|r| r.dependencies.clone()).unwrap_or_default();
        let source = here.absolute(&self.compile.source);
        if !deps.iter().any(|d| same_file(&here.absolute(d), &source)) {
            self.note(format!("{} does not list the source", path.display()));
            return Ok(Err(Outcome::NotCached("uncacheable:incomplete_depfile".into())));
        }
        let mut promote = Vec::new();
        if let Some((inputs, looked_up)) = traced {
            let id_now = |p: &Path| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
            // A traced input's identity is the one the tracer saw at the open; a dependency
            // named by the very path the compiler opened is that input (the stamps of
            // inputs are checked against the compile's start after this).
            let read_paths: HashSet<PathBuf> =
                inputs.iter().map(|(p, _)| here.absolute(p)).collect();
            let read: BTreeSet<(u64, u64)> = inputs
                .iter()
                .filter_map(|(p, id)| id.or_else(|| id_now(&here.absolute(p))))
                .collect();
            let seen: BTreeSet<(u64, u64)> =
                looked_up.iter().filter_map(|p| id_now(&here.absolute(p))).collect();
            for given in &deps {
                let dep = here.absolute(given);
                if read_paths.contains(&dep) {
                    continue;
                }
                match id_now(&dep) {
                    Some(id) if read.contains(&id) => {}
                    Some(id) if seen.contains(&id) => promote.push(dep.clone()),
                    _ => {
                        self.out.warn(format!(
                            "the dependency file of {} names {}, which the trace did not see \
                             looked at; not cached (please report this)",
                            self.compile.source.display(),
                            given.display()
                        ));
                        return Ok(Err(Outcome::NotCached("depfile_mismatch".into())));
                    }
                }
            }
        }
        let Some(build) = build else { return Ok(Ok((None, promote))) };
        let phony =
            matches!(self.compile.depfile, super::args::Depfile::Requested { phony: true, .. });
        let targets = self.family.depfile_targets(self.compile);
        let dep_bytes: Vec<Vec<u8>> =
            deps.iter().map(|d| d.as_os_str().as_bytes().to_vec()).collect();
        let rendered = self.family.render_depfile(&targets, &dep_bytes, phony);
        let verbatim = rendered != text;
        if verbatim {
            tracing::debug!(
                "{}: the {} depfile writer does not render it byte for byte; stored as is",
                build.display(),
                self.family.name()
            );
        }
        let record = DepfileRecord {
            form: if verbatim { VERBATIM } else { RENDERED }.into(),
            deps: deps.iter().map(|d| here.encode(d.as_os_str())).collect(),
            phony,
            targets: if verbatim {
                targets.iter().map(|t| fs::name::encode(t)).collect()
            } else {
                Vec::new()
            },
        };
        Ok(Ok((Some((record, verbatim.then_some(text))), promote)))
    }

    /// Copies the outputs into the entry's `objects/` (under the entry lock), hashing them
    /// as they are copied: the object and side outputs, `extra` files the compile left
    /// (role `file`), a verbatim depfile. Finds the pins and whether the outputs name the
    /// object.
    pub(super) fn store_outputs(
        &self,
        here: &Location,
        place: &EntryPlace,
        extra: &[PathBuf],
        depfile: Option<&DepfileFacts>,
    ) -> Result<Stored, Error> {
        let cwd = &here.cwd;
        fs::create_dir_all(&place.dir.join("objects"))?;
        let mut outputs = Vec::new();
        let mut embedded: Vec<Vec<u8>> = Vec::new();
        let mut names_object = false;
        let object_text = self.compile.object.as_os_str().as_bytes();
        // Names made from the object's: `-gsplit-dwarf` writes the `.dwo` name into the
        // object, coverage the `.gcda` one. Found in an output, the candidate is for this
        // object name only (with `-o a.o` as much as with `-o dir/a.o`).
        let derived: Vec<Vec<u8>> = self
            .compile
            .side_outputs
            .iter()
            .cloned()
            .chain([self.compile.object.with_extension("gcda")])
            .map(|p| p.into_os_string().into_vec())
            .collect();
        let files =
            self.outputs(here).into_iter().map(|(role, path)| (role, path, None)).chain(
                extra.iter().map(|p| ("file".to_owned(), p.clone(), Some(record_of(here, p)))),
            );
        for (role, path, record) in files {
            let objects = place.dir.join("objects");
            let (digest, size) =
                crate::l1::write::add_copy(&path, &objects, self.config.digest, |d| {
                    place.object(d)
                })?;
            let bytes = fs::read(&place.object(&digest))?;
            embedded.extend(pins_in(&bytes, here));
            // The directory by the name the shell gave it, if the compiler embedded that
            // one (GCC does, for -g): pinned as the working directory itself.
            if let Some(logical) = &here.pwd
                && memmem::find(&bytes, logical.as_os_str().as_bytes()).is_some()
            {
                embedded.push(cwd.as_os_str().as_bytes().to_vec());
            }
            names_object |=
                object_text.contains(&b'/') && memmem::find(&bytes, object_text).is_some();
            names_object |= derived.iter().any(|name| memmem::find(&bytes, name).is_some());
            outputs.push(Output { role, digest, size_bytes: size, path: record });
        }
        if let Some((_, Some(bytes))) = depfile {
            let digest = ContentDigest::of_bytes(self.config.digest, bytes);
            entry::store_bytes(place, &digest, bytes)?;
            outputs.push(Output {
                role: "depfile".into(),
                digest,
                size_bytes: bytes.len() as u64,
                path: None,
            });
        }
        embedded.sort();
        embedded.dedup();
        let pins: Vec<String> =
            embedded.iter().map(|p| entry::encode_path(Path::new(OsStr::from_bytes(p)))).collect();
        if !pins.is_empty() {
            crate::l1::counters::bump(self.cache, super::save::HINTS, "saved_pinned");
            warn_debug_paths_once(self, cwd);
        }
        let verbatim = depfile.is_some_and(|(_, bytes)| bytes.is_some());
        let object_name = (names_object || verbatim || !extra.is_empty())
            .then(|| here.encode(self.compile.object.as_os_str()));
        Ok(Stored { outputs, pins, object_name })
    }
}

/// The record form of an output the compile left (see `save::record_form`).
fn record_of(here: &Location, path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    if let Some(rest) = super::location::below(bytes, here.cwd.as_os_str().as_bytes()) {
        return entry::encode_path(Path::new(OsStr::from_bytes(rest)));
    }
    here.encode(path.as_os_str())
}

/// The absolute paths of this location that `bytes` (an output) embeds: wherever the
/// working directory or a base directory (other than `/`) occurs, the whole path string
/// that starts there (up to a NUL, a control byte, a quote or white space; at most 4 KiB).
/// A lookup elsewhere must map each one to itself ([`super::check`]), so a result naming
/// this checkout is reused only where the same paths hold.
pub(super) fn pins_in(bytes: &[u8], here: &Location) -> Vec<Vec<u8>> {
    let mut roots: Vec<&[u8]> = vec![here.cwd.as_os_str().as_bytes()];
    roots.extend(here.base_spellings().map(|b| b.as_os_str().as_bytes()));
    roots.retain(|r| *r != b"/" && !r.is_empty());
    let mut starts: Vec<usize> = roots.iter().flat_map(|r| memmem::find_iter(bytes, r)).collect();
    starts.sort_unstable();
    let mut found = Vec::new();
    let mut covered_to = 0;
    for start in starts {
        if start < covered_to {
            continue;
        }
        let rest = bytes.get(start..).unwrap_or_default();
        let len = rest
            .iter()
            .take(4096)
            .position(|&b| b < 0x20 || b == 0x7f || matches!(b, b'"' | b'\'' | b' '))
            .unwrap_or(rest.len().min(4096));
        let path = rest.get(..len).unwrap_or_default();
        covered_to = start + len;
        // Trailing separators name the same directory.
        let path = path.strip_suffix(b"/").unwrap_or(path);
        if !found.iter().any(|f: &Vec<u8>| f == path) {
            found.push(path.to_vec());
        }
    }
    found
}

/// Warns once per working directory that debug information pins objects to it.
fn warn_debug_paths_once(run: &Run<'_>, cwd: &Path) {
    let h = crate::digest::Sha256Digest::of_bytes(cwd.as_os_str().as_bytes());
    let marker = run.cache.local_dir().join("launcher-warned").join(h.to_hex());
    if fs::symlink_metadata_opt(&marker).ok().flatten().is_some() {
        return;
    }
    let _ = fs::create_dir_all(marker.parent().unwrap_or(run.cache.path()));
    let _ = fs::write_atomic_nosync(&marker, b"", 0o644);
    run.out.warn(format!(
        "objects compiled in {} embed absolute paths of this checkout (debug information, \
         __FILE__): they are cached, but only reused where those paths are the same. Add \
         -ffile-prefix-map=<base dir>=. to the compile flags to share them across checkouts \
         (strata_enable_launcher() does; docs/launcher.md, \"Prefix maps\").",
        cwd.display()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_the_whole_embedded_paths_under_the_location() {
        let here = Location::with_pwd(
            Path::new("/w/a/build"),
            None,
            &[PathBuf::from("/w/a/src"), PathBuf::from("/")],
        );
        let object = b"\x00/w/a/src/x.c\x00junk/w/a/build\x00\"/w/a/src/gtc/y.cc\" /usr/include/z.h\x00/w/a/src/x.c\x00";
        let pins = pins_in(object, &here);
        assert_eq!(
            pins,
            vec![b"/w/a/src/x.c".to_vec(), b"/w/a/build".to_vec(), b"/w/a/src/gtc/y.cc".to_vec()]
        );
        assert!(pins_in(b"\x00nothing here /usr/lib\x00", &here).is_empty());
    }
}
