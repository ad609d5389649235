//! Placeholder of the tracer (issue 25), replaced by the real module: the API the launcher
//! is written against. Every call is refused, so the launcher uses its model.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// What to run.
pub struct Request<'a> {
    /// The program.
    pub program: &'a Path,
    /// Its `argv[0]`.
    pub argv0: &'a OsStr,
    /// Its arguments.
    pub args: &'a [OsString],
}

/// A traced run.
pub struct Traced {
    /// Exit status of the root process.
    pub status: std::process::ExitStatus,
    /// Captured stdout.
    pub stdout: Vec<u8>,
    /// Captured stderr.
    pub stderr: Vec<u8>,
    /// Events in order.
    pub events: Vec<Event>,
    /// Why the record may be incomplete.
    pub incomplete: Vec<String>,
}

/// One file-system operation.
pub struct Event {
    /// The process.
    pub pid: u32,
    /// What it did.
    pub op: Op,
    /// The absolute path (joined as a string, never normalised).
    pub path: PathBuf,
    /// The given path was relative to the process's working directory.
    pub cwd_relative: bool,
    /// The path argument as given.
    pub given: OsString,
    /// What the tracer saw at the path.
    pub observed: Observed,
}

/// Operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Opened for reading.
    OpenRead,
    /// Opened for writing.
    OpenWrite {
        /// O_CREAT.
        create: bool,
        /// O_TRUNC.
        truncate: bool,
    },
    /// Opened as a directory.
    OpenDirectory,
    /// stat family.
    Stat {
        /// Follows symlinks.
        follow: bool,
    },
    /// access family.
    Access,
    /// readlink.
    Readlink,
    /// execve.
    Exec,
    /// chdir.
    Chdir,
    /// getdents.
    ListDirectory,
    /// unlink.
    Unlink,
    /// rmdir.
    Rmdir,
    /// mkdir.
    Mkdir,
    /// rename.
    Rename {
        /// New name.
        to: PathBuf,
    },
    /// link.
    Link {
        /// New name.
        to: PathBuf,
    },
    /// symlink.
    Symlink,
    /// truncate.
    Truncate,
    /// chmod.
    Chmod,
    /// chown.
    Chown,
    /// utimes.
    SetTimes,
    /// mknod.
    Mknod,
}

/// What the tracer saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Nothing there.
    Absent,
    /// A regular file.
    File(crate::fs::FileStamp),
    /// A directory.
    Directory(crate::fs::FileStamp),
    /// A symlink (not followed).
    Symlink(PathBuf),
    /// Something else.
    Other,
    /// Could not be looked at.
    Unreadable(i32),
}

/// Why tracing failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Tracing is refused here.
    #[error("tracing is refused: {0}")]
    Refused(String),
    /// The program could not be started.
    #[error("cannot start the program: {0}")]
    Spawn(#[source] std::io::Error),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Runs `request` traced.
///
/// # Errors
/// Always [`Error::Refused`] in this placeholder.
pub fn run(request: &Request<'_>) -> Result<Traced, Error> {
    let _ = request;
    Err(Error::Refused("the tracer is not built yet".into()))
}
