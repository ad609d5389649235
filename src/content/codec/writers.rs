//! Parallel file writers for [`super::read::extract`]: the thread that parses the archive
//! hands each regular file's bytes to one of a few writer threads, which create the file
//! (with its final mode; a `chmod` only where the umask clears bits of it), hash and write
//! the bytes (each byte hashed once, under the algorithm the reader names). So
//! decompression, parsing, hashing and writing overlap.
//!
//! All checks on an entry (path, type, limits, parent directories) happen on the parsing
//! thread *before* the file is handed over, against its record of what the extraction has
//! made so far (the destination is private: nothing else writes there); a writer only
//! creates the file with `O_CREAT|O_EXCL`. The directories the parsing thread has
//! admitted but not yet created travel with the next file ([`NewFile::dirs`]), so the
//! writers create them too (`mkdir` costs the kernel as much as a file, and one thread
//! making them all was the bottleneck of an unpack): in order, before the file. A
//! directory whose parent another writer has not made yet gets its missing ancestors
//! made first; a `mkdir` that finds a directory already there accepts it, anything else
//! there is an error. Files are assigned round-robin; the chunks of one file go to one
//! writer in order.
//!
//! Memory is bounded: each writer's queue holds at most [`QUEUE_CHUNKS`] chunks of at most
//! [`CHUNK_BYTES`], whatever the snapshot size. Written chunks go back to the parsing
//! thread and are filled again, so a chunk is allocated (and zeroed) once, not per file.
//!
//! Disk use follows the data: a file grows only by bytes that have arrived from the
//! archive. Nothing is reserved or pre-sized from the size an entry's header declares (a
//! 236-byte archive may claim a 1 TiB file; `fallocate` on that claim filled the disk
//! before the archive was found truncated).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::content::record::FileRecord;
use crate::digest::{ContentHasher, DigestAlgorithm};
use crate::fs::{self, RelPath};

/// Largest chunk handed to a writer, in bytes.
pub(crate) const CHUNK_BYTES: usize = super::CHUNK_BYTES;
/// Chunks a writer's queue holds.
pub(crate) const QUEUE_CHUNKS: usize = 4;
/// Most writer threads.
const MAX_WRITERS: usize = 4;

/// A file to create: its entry, destination path, owner-exec bit, final mode and the
/// algorithm its bytes are hashed with.
pub(crate) struct NewFile {
    pub(crate) rel: RelPath,
    pub(crate) path: PathBuf,
    pub(crate) executable: bool,
    pub(crate) mode: u32,
    pub(crate) algorithm: DigestAlgorithm,
    /// Directories to create first, parents before children (admitted by the parsing
    /// thread since the previous file).
    pub(crate) dirs: Vec<PathBuf>,
}

/// How the directories handed over with files are created: below `root` (the
/// destination, which exists), with `mode`, and a `chmod` after the `mkdir` if `chmod`.
#[derive(Debug, Clone)]
pub(crate) struct DirSpec {
    pub(crate) root: PathBuf,
    pub(crate) mode: u32,
    pub(crate) chmod: bool,
}

impl DirSpec {
    /// Creates `dir` (a directory the parsing thread admitted, below the root); if its
    /// parent is not there yet (another writer's directory), its missing ancestors first.
    /// A directory already there is accepted.
    ///
    /// # Errors
    /// [`fs::Error::SymlinkInPath`] / [`fs::Error::NotADirectory`] when something else is
    /// there; I/O errors.
    pub(crate) fn make(&self, dir: &Path) -> Result<(), fs::Error> {
        match fs::create_dir_in_checked_parent(dir, self.mode, self.chmod) {
            Err(fs::Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                self.make_ancestors(dir)?;
                fs::create_dir_in_checked_parent(dir, self.mode, self.chmod)
            }
            done => done,
        }
    }

    /// Creates every missing directory strictly between the root and `path`, top-down.
    fn make_ancestors(&self, path: &Path) -> Result<(), fs::Error> {
        let Some(parent) = path.parent() else { return Ok(()) };
        let Ok(below) = parent.strip_prefix(&self.root) else { return Ok(()) };
        let mut current = self.root.clone();
        for component in below.components() {
            current.push(component);
            fs::create_dir_in_checked_parent(&current, self.mode, self.chmod)?;
        }
        Ok(())
    }

    /// Creates the directories of `new` and then the file itself (`O_EXCL`, with its
    /// final mode); a parent another writer has not made yet is made here.
    fn create_file(&self, new: &NewFile) -> Result<File, WriteError> {
        let dir_error = |e: fs::Error| match e {
            fs::Error::SymlinkInPath { .. } | fs::Error::NotADirectory { .. } => {
                WriteError::Exists(new.rel.clone())
            }
            other => WriteError::Io(other),
        };
        for dir in &new.dirs {
            self.make(dir).map_err(dir_error)?;
        }
        let created = match fs::create_new(&new.path, new.mode) {
            Err(fs::Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                self.make_ancestors(&new.path).map_err(dir_error)?;
                fs::create_new(&new.path, new.mode)
            }
            created => created,
        };
        match created {
            Ok(file) => Ok(file),
            Err(fs::Error::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => {
                Err(WriteError::Exists(new.rel.clone()))
            }
            Err(e) => Err(WriteError::Io(e)),
        }
    }
}

enum Message {
    Open(NewFile),
    /// A chunk and the number of its leading bytes that are the file's.
    Data(Vec<u8>, usize),
    Close,
}

/// Why a writer failed.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// The path already existed (the archive's fault: a conflicting entry).
    Exists(RelPath),
    /// A local I/O failure.
    Io(fs::Error),
}

/// Why handing a file to the pool failed.
#[derive(Debug)]
pub(crate) enum FeedError {
    /// Reading the archive failed or it ended early (the archive's fault).
    Archive(String),
    /// A writer stopped (see [`WriterPool::finish`] for its error).
    WriterStopped,
}

struct Output {
    records: Vec<FileRecord>,
    error: Option<WriteError>,
}

/// A pool of writer threads, or none: [`WriterPool::inline`] writes each file on the
/// calling thread.
pub(crate) struct WriterPool {
    senders: Vec<SyncSender<Message>>,
    /// Chunks the writers are done with, to be filled again.
    spare: Option<Receiver<Vec<u8>>>,
    handles: Vec<JoinHandle<Output>>,
    next: usize,
    failed: Arc<AtomicBool>,
    /// Files written by [`WriterPool::inline`] (and its error) and how it makes
    /// directories; `None` for threads.
    inline: Option<(Output, DirSpec)>,
}

fn run_writer(
    receiver: Receiver<Message>,
    spare: SyncSender<Vec<u8>>,
    dirs: &DirSpec,
    failed: Arc<AtomicBool>,
) -> Output {
    let mut out = Output { records: Vec::new(), error: None };
    let mut current: Option<(File, NewFile, ContentHasher)> = None;
    for message in receiver {
        if out.error.is_some() {
            continue; // drain so the sender never blocks
        }
        let result: Result<(), WriteError> = match message {
            Message::Open(new) => dirs.create_file(&new).map(|file| {
                let hasher = ContentHasher::new(new.algorithm);
                current = Some((file, new, hasher));
            }),
            Message::Data(chunk, len) => {
                let written = match current.as_mut() {
                    Some((file, new, hasher)) => {
                        let bytes = chunk.get(..len).unwrap_or_default();
                        hasher.update(bytes);
                        file.write_all(bytes).map_err(|e| {
                            WriteError::Io(fs::Error::io("write", new.path.as_path(), e))
                        })
                    }
                    None => Ok(()),
                };
                // A full return queue means enough spares: this one is dropped.
                let _ = spare.try_send(chunk);
                written
            }
            Message::Close => match current.take() {
                Some((file, new, hasher)) => close_file(&file, new, hasher).map(|record| {
                    out.records.push(record);
                }),
                None => Ok(()),
            },
        };
        if let Err(e) = result {
            out.error = Some(e);
            failed.store(true, Ordering::Relaxed);
            current = None;
        }
    }
    out
}

impl WriterPool {
    /// Starts one writer per CPU (at most [`MAX_WRITERS`], at least one), creating the
    /// directories handed over with files as `dirs` says.
    pub(crate) fn new(dirs: &DirSpec) -> Self {
        let count =
            std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, MAX_WRITERS);
        let failed = Arc::new(AtomicBool::new(false));
        let mut senders = Vec::with_capacity(count);
        let mut handles = Vec::with_capacity(count);
        // Every chunk in a queue or in a writer's hands can come back.
        let (spare_sender, spare) = sync_channel(count * (QUEUE_CHUNKS + 1));
        for _ in 0..count {
            let (sender, receiver) = sync_channel(QUEUE_CHUNKS);
            let failed = Arc::clone(&failed);
            let spare = spare_sender.clone();
            let dirs = dirs.clone();
            senders.push(sender);
            handles.push(std::thread::spawn(move || run_writer(receiver, spare, &dirs, failed)));
        }
        Self { senders, spare: Some(spare), handles, next: 0, failed, inline: None }
    }

    /// A pool that writes, hashes and chmods each file on the calling thread, through one
    /// reused buffer: no threads and no chunks in flight. For trees installed side by side
    /// (entry objects), where the callers already use the cores and threads per tree
    /// would only add memory. The files' directories are made as `dirs` says.
    pub(crate) fn inline(dirs: &DirSpec) -> Self {
        Self {
            senders: Vec::new(),
            spare: None,
            handles: Vec::new(),
            next: 0,
            failed: Arc::new(AtomicBool::new(false)),
            inline: Some((Output { records: Vec::new(), error: None }, dirs.clone())),
        }
    }

    /// A pool with no writers (a placeholder after [`WriterPool::finish`] took the real
    /// one); feeding it fails.
    pub(crate) fn empty() -> Self {
        Self {
            senders: Vec::new(),
            spare: None,
            handles: Vec::new(),
            next: 0,
            failed: Arc::new(AtomicBool::new(true)),
            inline: None,
        }
    }

    /// True once any writer has failed.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Hands `file` to the next writer: reads exactly `size` bytes from `data` in chunks and
    /// queues them. `size` is what the archive declares (untrusted): it only says how much
    /// to read, never how much to reserve.
    pub(crate) fn write_file(
        &mut self,
        file: NewFile,
        size: u64,
        data: &mut dyn Read,
    ) -> Result<(), FeedError> {
        if let Some((out, dirs)) = &mut self.inline {
            return write_inline(out, dirs, &self.failed, file, size, data);
        }
        let Some(sender) = self.senders.get(self.next % self.senders.len().max(1)) else {
            return Err(FeedError::WriterStopped);
        };
        self.next = self.next.wrapping_add(1);
        let send = |m| sender.send(m).map_err(|_| FeedError::WriterStopped);
        let rel = file.rel.clone();
        send(Message::Open(file))?;
        let mut remaining = size;
        while remaining > 0 {
            let want = usize::try_from(remaining.min(CHUNK_BYTES as u64)).unwrap_or(CHUNK_BYTES);
            let mut chunk = self.spare_chunk(want);
            let mut filled = 0;
            while filled < want {
                let slot = chunk.get_mut(filled..want).unwrap_or_default();
                match data.read(slot) {
                    Ok(0) => {
                        return Err(FeedError::Archive(format!(
                            "{rel}: the archive ends inside the file"
                        )));
                    }
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(FeedError::Archive(format!(
                            "{rel}: cannot read the archive: {e}"
                        )));
                    }
                }
            }
            remaining -= want as u64;
            send(Message::Data(chunk, want))?;
        }
        send(Message::Close)
    }

    /// A chunk of at least `want` bytes: one a writer is done with, or a new one (a whole
    /// [`CHUNK_BYTES`] if `want` is small, so that it serves any later file).
    fn spare_chunk(&self, want: usize) -> Vec<u8> {
        let mut chunk = self.spare.as_ref().and_then(|s| s.try_recv().ok()).unwrap_or_default();
        if chunk.len() < want {
            chunk = vec![0u8; want.max(CHUNK_BYTES / 4)];
        }
        chunk
    }

    /// Waits for every writer; returns all records, or the first writer error.
    pub(crate) fn finish(self) -> Result<Vec<FileRecord>, WriteError> {
        if let Some((out, _)) = self.inline {
            return match out.error {
                Some(e) => Err(e),
                None => Ok(out.records),
            };
        }
        drop(self.senders);
        let mut records = Vec::new();
        let mut first_error = None;
        for handle in self.handles {
            match handle.join() {
                Ok(out) => {
                    records.extend(out.records);
                    if first_error.is_none() {
                        first_error = out.error;
                    }
                }
                Err(_) => {
                    if first_error.is_none() {
                        let e = io::Error::other("an archive writer thread panicked");
                        first_error =
                            Some(WriteError::Io(fs::Error::io("write", PathBuf::new(), e)));
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(records),
        }
    }
}

/// [`WriterPool::write_file`] of an inline pool: creates the file, copies exactly `size`
/// bytes of `data` into it while hashing them, sets its mode, and records it in `out`. A
/// write failure is kept in `out` (reported by [`WriterPool::finish`]) and stops the feed.
fn write_inline(
    out: &mut Output,
    dirs: &DirSpec,
    failed: &AtomicBool,
    new: NewFile,
    size: u64,
    data: &mut dyn Read,
) -> Result<(), FeedError> {
    if out.error.is_some() {
        return Err(FeedError::WriterStopped);
    }
    let stop = |out: &mut Output, e: WriteError| {
        out.error = Some(e);
        failed.store(true, Ordering::Relaxed);
        Err(FeedError::WriterStopped)
    };
    let mut file = match dirs.create_file(&new) {
        Ok(file) => file,
        Err(e) => return stop(out, e),
    };
    let mut hasher = ContentHasher::new(new.algorithm);
    // Err(Ok(reason)): the archive's fault; Err(Err(e)): writing failed.
    let copied = crate::digest::with_buffer(|buf| -> Result<(), Result<String, fs::Error>> {
        let mut remaining = size;
        while remaining > 0 {
            let want = usize::try_from(remaining.min(buf.len() as u64)).unwrap_or(buf.len());
            let slot = buf.get_mut(..want).unwrap_or_default();
            let n = match data.read(slot) {
                Ok(0) => return Err(Ok(format!("{}: the archive ends inside the file", new.rel))),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Ok(format!("{}: cannot read the archive: {e}", new.rel))),
            };
            let bytes = slot.get(..n).unwrap_or_default();
            hasher.update(bytes);
            file.write_all(bytes).map_err(|e| Err(fs::Error::io("write", &new.path, e)))?;
            remaining -= n as u64;
        }
        Ok(())
    });
    match copied {
        Ok(()) => {}
        Err(Ok(reason)) => return Err(FeedError::Archive(reason)),
        Err(Err(e)) => return stop(out, WriteError::Io(e)),
    }
    match close_file(&file, new, hasher) {
        Ok(record) => {
            out.records.push(record);
            Ok(())
        }
        Err(e) => stop(out, e),
    }
}

/// Sets the final mode of a written file (created with it: only if the umask cleared some
/// of its bits) and returns its record (size and digest of the bytes hashed while it was
/// written).
fn close_file(file: &File, new: NewFile, hasher: ContentHasher) -> Result<FileRecord, WriteError> {
    if !fs::perm::umask_keeps(new.mode) {
        file.set_permissions(std::fs::Permissions::from_mode(new.mode))
            .map_err(|e| WriteError::Io(fs::Error::io("chmod", &new.path, e)))?;
    }
    let size_bytes = hasher.len();
    Ok(FileRecord {
        path: new.rel,
        size_bytes,
        digest: hasher.finish(),
        executable: new.executable,
    })
}
