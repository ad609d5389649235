//! Restoring a HIT: the entry's artifacts into the output directory or stage, verified
//! as they are placed, then published (custom operators).

use std::path::Path;

use super::Ctx;
use crate::action::Error;
use crate::action::entry::{self, Restored};
use crate::action::layout::EntryLocation;
use crate::content::{Record, VerifyMemo};
use crate::fs;

/// Restores a HIT and, for custom operators, publishes it. `Ok(Err(_))`: the entry could
/// not be restored, and the caller rebuilds. `Err(_)`: publication failed (ownership
/// conflict, an output changed by hand, corrupt state, lock timeout, I/O), which a rebuild
/// would only meet again after wasting a build, so it is fatal as on the MISS path.
///
/// The entry's verification memo at `memo_path` is read (an unusable one is ignored) and,
/// after a successful restore that hashed something new, rewritten atomically; a memo that
/// cannot be written is only logged (the next HIT verifies in full).
pub(super) fn restore_hit(
    ctx: &mut Ctx<'_>,
    loc: &EntryLocation,
    memo_path: &Path,
    artifacts: &[Record],
) -> Result<Result<Restored, Error>, Error> {
    ctx.target.empty(&ctx.dir)?;
    let mut memo = VerifyMemo::load(memo_path, &loc.rel);
    let restored = match entry::restore(&loc.dir, artifacts, &ctx.dir, &mut memo) {
        Ok(restored) => {
            if memo.is_changed()
                && let Err(e) = memo.save(memo_path, fs::Sharing::Shared.file_mode(false))
            {
                tracing::debug!("verification memo not written: {e}");
            }
            restored
        }
        Err(e) => {
            ctx.target.restore_failed(&ctx.dir, artifacts);
            return Ok(Err(e));
        }
    };
    if let Err(e) = ctx.publish_artifacts(artifacts) {
        let _ = ctx.target.empty(&ctx.dir);
        return Err(e);
    }
    Ok(Ok(restored))
}

/// True if a restore failure lies with the entry (a digest mismatch, an unreadable entry
/// file) rather than with the destination.
pub(super) fn entry_at_fault(e: &Error, entry_dir: &Path) -> bool {
    match e {
        Error::Fs(fs::Error::DigestMismatch { .. }) => true,
        Error::Fs(
            fs::Error::ChangedWhileReading { path } | fs::Error::WrongFileType { path, .. },
        ) => path.starts_with(entry_dir),
        Error::Fs(fs::Error::Io { path, .. }) => path.starts_with(entry_dir),
        _ => false,
    }
}
