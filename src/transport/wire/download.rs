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
//! deliver exactly its length.
//!
//! A server may ignore `Range` and answer `200` with the whole object (RFC 9110 allows it;
//! riak_cs, several gateways and caches do). The first ranged GET decides, and the other
//! parts wait for its answer before they send their own: a `200` is streamed whole into the
//! file, once, and no other part is requested; a `206` lets every part fetch its range. A
//! later part answered `200` all the same keeps its own range of the body and drops the
//! connection after it.
//!
//! # Limitations
//! The store checks sizes only; the caller verifies the content (snapshots carry their
//! own digests).

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

use futures::{StreamExt, TryStreamExt};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};

use super::{Call, Exchange, body_error};
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
    /// The object's size from the HEAD, in bytes.
    size: u64,
}

/// How the server answered the first ranged GET of a download: every other part waits for
/// it ([`RangeSupport::wait`]) before it sends its own request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// `206`: the server honours `Range`; each part fetches its own range.
    Ranged,
    /// `200`: the server ignores `Range` (RFC 9110 allows it) and sent the whole object,
    /// which the first part writes; no other part sends a request.
    Whole,
    /// The first part failed; its error ends the download.
    Failed,
}

/// What the first part learnt about `Range`, shared with the other parts.
struct RangeSupport {
    answer: tokio::sync::watch::Sender<Option<Answer>>,
}

impl RangeSupport {
    fn new() -> Self {
        Self { answer: tokio::sync::watch::channel(None).0 }
    }

    /// Records `answer` unless one is known (the first answer decides); returns the
    /// answer that holds.
    fn set(&self, answer: Answer) -> Answer {
        let mut holds = answer;
        self.answer.send_if_modified(|known| match known {
            Some(earlier) => {
                holds = *earlier;
                false
            }
            None => {
                *known = Some(answer);
                true
            }
        });
        holds
    }

    /// Waits for the first part's answer.
    async fn wait(&self) -> Answer {
        let mut receiver = self.answer.subscribe();
        match receiver.wait_for(Option::is_some).await {
            Ok(answer) => answer.unwrap_or(Answer::Failed),
            Err(_) => Answer::Failed,
        }
    }
}

/// GETs `length` bytes at `offset` (the whole object if `ranged` is false) and writes them
/// at the same offset of the target, with retries; reports the range to the target's
/// progress once it is complete (never a partial attempt that a retry rewrites).
///
/// A ranged GET answered `200` (a server that ignores `Range`) carries the whole object:
/// when `support` is given (the first part of a download), the whole body is written and
/// reported as it arrives, and the other parts are told not to ask ([`Answer::Whole`]);
/// otherwise (a later part of a server that honoured the first range) the bytes before
/// `offset` are skipped, the range is kept, and the connection is dropped after it.
#[allow(clippy::too_many_arguments)]
async fn fetch(
    exchange: &impl Exchange,
    key: &ObjectKey,
    target: &Target<'_>,
    offset: u64,
    length: u64,
    ranged: bool,
    support: Option<&RangeSupport>,
    retries: &AtomicU32,
) -> Result<(), Error> {
    let mut call = Call::object(exchange, Method::GET, key.as_str());
    if ranged {
        let last = offset + length - 1;
        call.headers.push(("range", format!("bytes={offset}-{last}")));
    }
    let location = call.location.clone();
    // Bytes of a whole-object answer already reported (a retry rewrites them silently).
    let reported = std::sync::atomic::AtomicU64::new(0);
    let result = exchange
        .send(&call, retries, |mut response| {
            let location = location.clone();
            let reported = &reported;
            async move {
                let status = response.status();
                let whole = status == StatusCode::OK && ranged;
                // A `200` to the first part is the whole object for everyone, unless an
                // earlier attempt of it was answered `206` (the other parts are on their way).
                let for_all =
                    whole && support.is_some_and(|s| s.set(Answer::Whole) == Answer::Whole);
                if ranged && status == StatusCode::PARTIAL_CONTENT {
                    if let Some(support) = support {
                        support.set(Answer::Ranged);
                    }
                } else if status != StatusCode::OK {
                    let expected = if ranged { "206 (or 200)" } else { "200" };
                    let reason = format!(
                        "expected HTTP {expected} for bytes {offset}+{length}, got {}",
                        status.as_u16()
                    );
                    return Err(protocol_error("GET", &location, reason, false));
                }
                // What this answer's body holds, and which of its bytes are written.
                let (keep_from, keep_to) = match (whole, for_all) {
                    (true, true) => (0, target.size),
                    (true, false) => (offset, offset + length),
                    (false, _) => (0, length),
                };
                let body_offset = if whole { 0 } else { offset };
                let expected_body = if whole { target.size } else { length };
                let mut seen = 0u64;
                while seen < keep_to {
                    let Some(chunk) =
                        response.chunk().await.map_err(|e| body_error("GET", &location, e))?
                    else {
                        break;
                    };
                    let chunk_start = seen;
                    seen += chunk.len() as u64;
                    if seen > expected_body {
                        let reason = format!(
                            "body longer than the {expected_body} bytes expected (object changed?)"
                        );
                        return Err(protocol_error("GET", &location, reason, false));
                    }
                    let from = keep_from.saturating_sub(chunk_start).min(chunk.len() as u64);
                    let to = keep_to.saturating_sub(chunk_start).min(chunk.len() as u64);
                    let (from, to) = (
                        usize::try_from(from).unwrap_or(usize::MAX),
                        usize::try_from(to).unwrap_or(usize::MAX),
                    );
                    if let Some(kept) = chunk.get(from..to).filter(|k| !k.is_empty()) {
                        let at = body_offset + chunk_start + from as u64;
                        crate::fs::write_at(target.file, target.path, kept, at)?;
                        if for_all {
                            // The whole object streams in order: report it as it arrives.
                            let end = at + kept.len() as u64;
                            let before = reported.fetch_max(end, Ordering::Relaxed);
                            if end > before {
                                target.progress.written(before.max(at), end);
                            }
                        }
                    }
                }
                if seen < keep_to {
                    let reason = format!("body ended after {seen} of {expected_body} bytes");
                    return Err(protocol_error("GET", &location, reason, true));
                }
                if !whole
                    && response
                        .chunk()
                        .await
                        .map_err(|e| body_error("GET", &location, e))?
                        .is_some()
                {
                    let reason =
                        format!("body longer than the {length} bytes expected (object changed?)");
                    return Err(protocol_error("GET", &location, reason, false));
                }
                Ok(for_all)
            }
        })
        .await;
    match result {
        Ok(true) => Ok(()),
        Ok(false) => {
            target.progress.written(offset, offset + length);
            Ok(())
        }
        Err(e) => {
            if let Some(support) = support {
                support.set(Answer::Failed);
            }
            Err(e)
        }
    }
}

/// A part after the first: waits for the first part's answer, then fetches its own range
/// only if the server honours `Range`.
async fn fetch_later(
    exchange: &impl Exchange,
    key: &ObjectKey,
    target: &Target<'_>,
    (offset, length): (u64, u64),
    support: &RangeSupport,
    retries: &AtomicU32,
) -> Result<(), Error> {
    match support.wait().await {
        Answer::Ranged => fetch(exchange, key, target, offset, length, true, None, retries).await,
        // The first part wrote (or failed to write) the whole object.
        Answer::Whole | Answer::Failed => Ok(()),
    }
}

/// Downloads `key` into `dest` (created or truncated), telling `progress` of each part
/// once written; returns the HEAD metadata. Objects above the part size are fetched in
/// parallel ranged GETs once the first one showed that the server honours `Range`; a
/// server that answers it with `200` and the whole object has that one answer written,
/// and no other part is requested.
///
/// # Errors
/// [`Error::NotFound`] for a missing object; network, HTTP and local I/O errors.
pub(crate) async fn download(
    exchange: &impl Exchange,
    key: &ObjectKey,
    dest: &Path,
    retries: &AtomicU32,
    progress: &dyn DownloadProgress,
) -> Result<ObjectMeta, Error> {
    let meta = exchange.head(key, retries).await?.ok_or_else(|| Error::NotFound {
        location: exchange.location(key.as_str()),
        attempts: Attempts::default(),
    })?;
    let file = crate::fs::create_truncate(dest, 0o644)?;
    let size = meta.size_bytes;
    progress.started(size);
    if size == 0 {
        return Ok(meta);
    }
    let target = Target { file: &file, path: dest, progress, size };
    let part = exchange.wire().options.part_size_bytes.max(1);
    if size <= part {
        fetch(exchange, key, &target, 0, size, false, None, retries).await?;
    } else {
        let support = RangeSupport::new();
        let first = fetch(exchange, key, &target, 0, part, true, Some(&support), retries);
        let rest = (1..size.div_ceil(part)).map(|i| {
            let start = i * part;
            (start, part.min(size - start))
        });
        let later = rest.map(|range| {
            futures::future::Either::Right(fetch_later(
                exchange, key, &target, range, &support, retries,
            ))
        });
        futures::stream::iter(std::iter::once(futures::future::Either::Left(first)).chain(later))
            .buffer_unordered(exchange.wire().options.parallelism.max(1))
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
    exchange: &impl Exchange,
    key: &ObjectKey,
    retries: &AtomicU32,
) -> Result<Option<(u64, Sha256Digest)>, Error> {
    let Some(meta) = exchange.head(key, retries).await? else { return Ok(None) };
    let call = Call::object(exchange, Method::GET, key.as_str());
    let location = call.location.clone();
    let size = meta.size_bytes;
    let digest = exchange
        .send(&call, retries, |mut response| {
            let location = location.clone();
            async move {
                let mut hasher = Hasher::new();
                while let Some(chunk) =
                    response.chunk().await.map_err(|e| body_error("GET", &location, e))?
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
