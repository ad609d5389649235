//! What a HIT writes: the candidate's outputs under the current names, the depfile for the
//! current targets and directories, and the messages with this checkout's paths.
//!
//! Every destination and every stored byte is checked before the first output is
//! written. Each output is placed through a temp file and renamed into place with a fresh
//! mtime (make and ninja see it as new), hashed on the way against its recorded digest
//! unless the entry's verification memo vouches for the stored file's stamp. The previous
//! file is removed first, as the compiler itself rewrites its outputs: on ext4, renaming over
//! a file with data makes the kernel flush the new one (`auto_da_alloc`), which cost a HIT
//! milliseconds.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::content::VerifyMemo;
use crate::digest::ContentDigest;
use crate::fs::{self, Placement};

use super::compile::Run;
use super::entry::{self, Candidate, EntryPlace, Output};
use super::location::{Location, Spelled};
use super::{Error, Step};

/// A depfile record's form: rendered anew for the current names and paths.
pub(super) const RENDERED: &str = "rendered";
/// A depfile record's form: the stored bytes, where names and places are the origin's.
pub(super) const VERBATIM: &str = "verbatim";

impl Run<'_> {
    /// Places `candidate`'s outputs here and returns the step that replays its messages.
    ///
    /// # Errors
    /// [`Error::Output`] when the candidate does not fit this command or a stored file is
    /// missing or damaged; [`Error::Fs`] when an output cannot be written.
    pub(super) fn restore(
        &self,
        place: &EntryPlace,
        candidate: &Candidate,
        here: &Location,
        memo: &mut VerifyMemo,
        began: SystemTime,
    ) -> Result<Step, Error> {
        let unfit = |reason: String| Error::Output { role: "outputs".into(), reason };
        let origin = candidate.origin.location();
        let mut plan: Vec<(&Output, PathBuf)> = Vec::new();
        for output in &candidate.outputs {
            let dest = match output.role.as_str() {
                "object" => here.absolute(&self.compile.object),
                "depfile" => continue,
                "file" => {
                    let text = output.path.as_deref().unwrap_or_default();
                    let path = here
                        .decode(text)
                        .ok_or_else(|| unfit(format!("{text} has no place here")))?;
                    here.absolute(&path)
                }
                ext => here.absolute(&self.compile.object.with_extension(ext)),
            };
            plan.push((output, dest));
        }
        for (role, path) in self.outputs(here) {
            if !plan.iter().any(|(o, d)| o.role == role && *d == path) {
                return Err(unfit(format!("it holds no {role} output")));
            }
        }
        let depfile = match (&candidate.depfile, self.depfile_path(here)) {
            (None, None) => None,
            (Some(record), Some(path)) => {
                Some((path, self.depfile_bytes(place, candidate, record, here, &origin)?))
            }
            (Some(_), None) => {
                return Err(unfit("it holds a depfile, the command asks for none".into()));
            }
            (None, Some(_)) => return Err(unfit("it holds no depfile".into())),
        };
        // Messages: read and verified before anything is written.
        let stdout = candidate.stdout.as_ref().map(|o| read_verified(place, o)).transpose()?;
        let stderr = candidate.stderr.as_ref().map(|o| read_verified(place, o)).transpose()?;
        for (output, dest) in &plan {
            let _ = fs::remove_file(dest);
            place_output(place, output, dest, memo, began)?;
        }
        if let Some((path, bytes)) = depfile {
            let _ = fs::remove_file(&path);
            fs::write_atomic_nosync(&path, &bytes, 0o644)?;
        }
        let text =
            |b: Option<Vec<u8>>| b.map(|b| here.rewrite_text(&origin, &b)).unwrap_or_default();
        Ok(Step::Exit { code: 0, stdout: text(stdout), stderr: text(stderr) })
    }

    /// The depfile a plain compile would write here (see [`entry::DepfileRecord`]).
    fn depfile_bytes(
        &self,
        place: &EntryPlace,
        candidate: &Candidate,
        record: &entry::DepfileRecord,
        here: &Location,
        origin: &Location,
    ) -> Result<Vec<u8>, Error> {
        let unfit = |reason: String| Error::Output { role: "depfile".into(), reason };
        let mut deps = Vec::with_capacity(record.deps.len());
        for text in &record.deps {
            let spelled = Spelled::decode(text).map_err(|e| unfit(e.to_string()))?;
            let path =
                here.here(&spelled).ok_or_else(|| unfit(format!("{text} has no place here")))?;
            if record.form == VERBATIM && origin.here(&spelled).as_ref() != Some(&path) {
                return Err(unfit(format!("{text} names another place here")));
            }
            deps.push(path.as_bytes().to_vec());
        }
        let targets = self.family.depfile_targets(self.compile);
        match record.form.as_str() {
            RENDERED => Ok(self.family.render_depfile(&targets, &deps, record.phony)),
            VERBATIM => {
                let recorded: Vec<Vec<u8>> = record
                    .targets
                    .iter()
                    .map(|t| entry::decode_path(t).into_os_string().into_encoded_bytes())
                    .collect();
                if recorded != targets {
                    return Err(unfit("it names other targets".into()));
                }
                let stored = candidate
                    .outputs
                    .iter()
                    .find(|o| o.role == "depfile")
                    .ok_or_else(|| unfit("the stored depfile is missing".into()))?;
                read_verified(place, stored)
            }
            other => Err(unfit(format!("unknown depfile form {other:?}"))),
        }
    }
}

/// Places the stored file of `output` at `dest` (mode 0644, no fsync), verified against
/// its digest unless `memo` vouches for the stored file's stamp; a file that had to be
/// hashed is remembered in `memo` as of `began`, once it is durable.
///
/// Durable before vouched for: a MISS stores its outputs without fsync (the wait was on
/// the build's critical path), so the bytes this HIT hashed may still be only in the page
/// cache. A background write that fails later leaves the file reading back as zeros under
/// the same stamp once the cache evicts it, so the stored file is fsynced before its stamp
/// is remembered (an already written-back file costs a few microseconds), and a file whose
/// fsync fails is removed from the entry: what was placed here was verified, and a later
/// HIT finds no object and compiles instead of trusting a stamp.
///
/// # Errors
/// [`Error::Fs`]: the stored file is missing or its bytes do not match the digest, or
/// `dest` cannot be written (the error says which).
pub(super) fn place_output(
    place: &EntryPlace,
    output: &Output,
    dest: &std::path::Path,
    memo: &mut VerifyMemo,
    began: SystemTime,
) -> Result<(), Error> {
    let name = entry::object_memo_name(&output.digest);
    let stored = place.object(&output.digest);
    let placed = fs::place_file_checked(
        &stored,
        dest,
        Placement { expected: output.digest, mode: 0o644, sync: false },
        &|stamp| memo.vouches(&name, stamp, &output.digest),
    )?;
    if placed.hashed && memo.would_remember(&placed.stamp, began) {
        match fs::open(&stored).and_then(|file| fs::sync_file(&file, &stored)) {
            Ok(()) => memo.remember(&name, placed.stamp, output.digest, began),
            Err(_) => {
                let _ = fs::remove_file(&stored);
            }
        }
    }
    Ok(())
}

/// Reads a stored file of `place` and checks its digest.
///
/// # Errors
/// [`Error::Output`] when it is missing, unreadable or has other bytes.
pub(super) fn read_verified(place: &EntryPlace, output: &Output) -> Result<Vec<u8>, Error> {
    let path = place.object(&output.digest);
    let unusable = |reason: String| Error::Output { role: output.role.clone(), reason };
    let bytes = fs::read(&path).map_err(|e| unusable(e.to_string()))?;
    let actual = ContentDigest::of_bytes(output.digest.algorithm(), &bytes);
    if actual != output.digest {
        return Err(unusable(format!("{} does not have digest {}", path.display(), output.digest)));
    }
    Ok(bytes)
}
