//! Downloads: HEAD for the size, then one GET (objects up to the part size) or parallel
//! ranged GETs (`Range: bytes=a-b`), each streamed to its offset of the destination file
//! with positioned writes.
//!
//! Memory stays bounded whatever the object size: bodies are written chunk by chunk as
//! they arrive, and at most `parallelism` parts are in flight. Disk use follows the data
//! too: the destination is never pre-sized from the `Content-Length` the server declares
//! (untrusted: a HEAD claiming 1 TiB must not make a 1 TiB file); positioned writes extend
//! it as bytes arrive. A part whose body breaks
//! off or comes up short is retried as a whole (rewriting the same range). Every part must
//! deliver exactly its length; a server that ignores `Range` is an error.
//!
//! # Limitations
//! The store checks sizes only; the caller verifies the content (snapshots carry their
//! own digests).

use std::fs::File;
use std::path::Path;
use std::sync::atomic::AtomicU32;
use std::time::SystemTime;

use futures::{StreamExt, TryStreamExt};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};

use super::response::network_error;
use super::{Call, Inner};
use crate::digest::{Hasher, Sha256Digest};
use crate::transport::{Attempts, DownloadProgress, Error, ObjectKey, ObjectMeta};

/// Parses an HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`).
pub(crate) fn parse_http_date(text: &str) -> Option<SystemTime> {
    let format = time::format_description::parse(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT",
    )
    .ok()?;
    let parsed = time::PrimitiveDateTime::parse(text.trim(), &format).ok()?;
    Some(parsed.assume_utc().into())
}

pub(crate) fn protocol_error(
    method: &str,
    location: &str,
    reason: String,
    retryable: bool,
) -> Error {
    Error::Protocol {
        method: method.to_owned(),
        location: location.to_owned(),
        reason,
        retryable,
        attempts: Attempts::default(),
    }
}

/// Object metadata from HEAD (or GET) response headers.
///
/// # Errors
/// [`Error::Protocol`] if `Content-Length` is missing or not a number.
pub(crate) fn meta_from_headers(
    key: &ObjectKey,
    location: &str,
    method: &str,
    headers: &HeaderMap,
) -> Result<ObjectMeta, Error> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let size_bytes = text("content-length")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| protocol_error(method, location, "no valid Content-Length".into(), false))?;
    let last_modified = text("last-modified").and_then(parse_http_date).unwrap_or_else(|| {
        tracing::debug!(object = location, "no parsable Last-Modified header");
        SystemTime::UNIX_EPOCH
    });
    Ok(ObjectMeta {
        key: key.clone(),
        size_bytes,
        last_modified,
        etag: text("etag").map(str::to_owned),
    })
}

/// Where one GET's bytes go, and who is told when a part is complete.
struct Target<'a> {
    file: &'a File,
    path: &'a Path,
    progress: &'a dyn DownloadProgress,
}

/// GETs `length` bytes at `offset` (the whole object if `ranged` is false) and writes them
/// at the same offset of the target, with retries; reports the range to the target's
/// progress once it is complete (never a partial attempt that a retry rewrites).
async fn fetch(
    inner: &Inner,
    key: &ObjectKey,
    target: &Target<'_>,
    offset: u64,
    length: u64,
    ranged: bool,
    retries: &AtomicU32,
) -> Result<(), Error> {
    let mut call = Call::object(inner, Method::GET, key.as_str());
    if ranged {
        let last = offset + length - 1;
        call.headers.push(("range", format!("bytes={offset}-{last}")));
    }
    let location = call.location.clone();
    inner
        .send(&call, retries, |mut response| {
            let location = location.clone();
            async move {
                let expected = if ranged { StatusCode::PARTIAL_CONTENT } else { StatusCode::OK };
                if response.status() != expected {
                    let reason = format!(
                        "expected HTTP {} for bytes {offset}+{length}, got {} (does the server support Range?)",
                        expected.as_u16(),
                        response.status().as_u16()
                    );
                    return Err(protocol_error("GET", &location, reason, false));
                }
                let mut written = 0u64;
                while let Some(chunk) =
                    response.chunk().await.map_err(|e| network_error("GET", &location, e))?
                {
                    let end = written + chunk.len() as u64;
                    if end > length {
                        let reason = format!("body longer than the {length} bytes expected (object changed?)");
                        return Err(protocol_error("GET", &location, reason, false));
                    }
                    crate::fs::write_at(target.file, target.path, &chunk, offset + written)?;
                    written = end;
                }
                if written != length {
                    let reason = format!("body ended after {written} of {length} bytes");
                    return Err(protocol_error("GET", &location, reason, true));
                }
                Ok(())
            }
        })
        .await?;
    target.progress.written(offset, offset + length);
    Ok(())
}

/// Downloads `key` into `dest` (created or truncated), telling `progress` of each part
/// once written; returns the HEAD metadata.
///
/// # Errors
/// [`Error::NotFound`] for a missing object; network, HTTP and local I/O errors.
pub(crate) async fn download(
    inner: &Inner,
    key: &ObjectKey,
    dest: &Path,
    retries: &AtomicU32,
    progress: &dyn DownloadProgress,
) -> Result<ObjectMeta, Error> {
    let meta = inner.head(key, retries).await?.ok_or_else(|| Error::NotFound {
        location: inner.config.location(key.as_str()),
        attempts: Attempts::default(),
    })?;
    let file = crate::fs::create_truncate(dest, 0o644)?;
    let size = meta.size_bytes;
    progress.started(size);
    if size == 0 {
        return Ok(meta);
    }
    let target = Target { file: &file, path: dest, progress };
    let part = inner.options.part_size_bytes.max(1);
    if size <= part {
        fetch(inner, key, &target, 0, size, false, retries).await?;
    } else {
        let ranges = (0..size.div_ceil(part)).map(|i| {
            let start = i * part;
            (start, part.min(size - start))
        });
        futures::stream::iter(ranges)
            .map(|(start, length)| fetch(inner, key, &target, start, length, true, retries))
            .buffer_unordered(inner.options.parallelism.max(1))
            .try_collect::<Vec<()>>()
            .await?;
    }
    Ok(meta)
}

/// Size and SHA-256 of the stored object `key` (one HEAD, then one GET streamed through a
/// hash, nothing written to disk), or `None` if there is no such object. Used to tell
/// whether an object is the one an earlier, unanswered write stored ([`super::put`]).
///
/// # Errors
/// Network and HTTP errors; [`Error::Protocol`] if the body is not the size HEAD reported.
pub(crate) async fn stored_digest(
    inner: &Inner,
    key: &ObjectKey,
    retries: &AtomicU32,
) -> Result<Option<(u64, Sha256Digest)>, Error> {
    let Some(meta) = inner.head(key, retries).await? else { return Ok(None) };
    let call = Call::object(inner, Method::GET, key.as_str());
    let location = call.location.clone();
    let size = meta.size_bytes;
    let digest = inner
        .send(&call, retries, |mut response| {
            let location = location.clone();
            async move {
                let mut hasher = Hasher::new();
                while let Some(chunk) =
                    response.chunk().await.map_err(|e| network_error("GET", &location, e))?
                {
                    hasher.update(&chunk);
                }
                if hasher.len() != size {
                    let reason = format!(
                        "the body has {} bytes, HEAD said {size} (object changed?)",
                        hasher.len()
                    );
                    return Err(protocol_error("GET", &location, reason, false));
                }
                Ok(hasher.finish())
            }
        })
        .await;
    match digest {
        Ok(digest) => Ok(Some((size, digest))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn parses_http_dates() {
        let t = parse_http_date("Fri, 24 May 2013 00:00:00 GMT").unwrap();
        assert_eq!(t, SystemTime::UNIX_EPOCH + Duration::from_secs(1_369_353_600));
        assert!(parse_http_date("yesterday").is_none());
    }
}
