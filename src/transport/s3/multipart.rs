//! Multipart uploads: CreateMultipartUpload, parallel UploadPart, CompleteMultipartUpload
//! with `If-None-Match: *`, and AbortMultipartUpload on any failure.
//!
//! * Part bodies are streamed from the file at their offsets while they are sent (256 KiB
//!   reads), so memory holds a few read buffers per part in flight, not whole parts; a
//!   retried part reads its range again.
//! * Part bodies are sent with `x-amz-content-sha256: UNSIGNED-PAYLOAD` (no aws-chunked
//!   encoding, no CRC trailers).
//! * The part size is the configured one, raised to the S3 minimum of 5 MiB and, for very
//!   large files, to keep within 10,000 parts.
//! * Completion can answer 200 with an `<Error>` body; that is treated as the error it
//!   names. A completion retried after a lost answer may be refused because the earlier
//!   attempt succeeded: 412 (the object now exists), `NoSuchUpload` (404) or 403 (s3s and
//!   some stores check the upload id, used up by the completion, before anything else). Then
//!   the stored object is compared with the local file (size, then SHA-256 of a GET,
//!   `wire::own_object_stored`): the same bytes mean the upload succeeded
//!   (`Created`, nothing aborted); otherwise a 412 is `AlreadyExists` and a 403/404 is an
//!   error that says the completion was refused after a lost answer.
//! * Any failure after CreateMultipartUpload aborts the upload (best effort, logged) so no
//!   invisible parts keep costing storage.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use reqwest::Method;

use super::Inner;
use super::fallback::Feature;
use super::put::is_precondition_failed;
use super::response::{child_text, parse_error_body, xml_escape};
use crate::progress::Progress;
use crate::transport::wire::{Call, Exchange, own_object_stored};
use crate::transport::wire::{FileRange, Payload};
use crate::transport::{Attempts, Error, ObjectKey, PutOutcome};

/// The smallest part S3 accepts (except the last), in bytes.
const MIN_PART_BYTES: u64 = 5 * 1024 * 1024;
/// The most parts one upload may have.
const MAX_PARTS: u64 = 10_000;

/// The part size used for a file of `size` bytes given the configured `part_size` (both
/// in bytes).
pub(crate) fn effective_part_size(size: u64, part_size: u64) -> u64 {
    let needed = size.div_ceil(MAX_PARTS);
    part_size.max(MIN_PART_BYTES).max(needed)
}

fn protocol(location: &str, method: &str, reason: String) -> Error {
    Error::Protocol {
        method: method.to_owned(),
        location: location.to_owned(),
        reason,
        retryable: false,
        attempts: Attempts::default(),
    }
}

/// Reads a whole response body as text.
async fn body_text(
    response: reqwest::Response,
    location: &str,
    method: &str,
) -> Result<String, Error> {
    response.text().await.map_err(|e| crate::transport::wire::body_error(method, location, e))
}

/// Uploads `file` (opened from `src`, `size` bytes) under `key` as a multipart upload.
///
/// # Errors
/// Network, HTTP and local I/O errors; the upload is aborted first.
pub(crate) async fn upload(
    inner: &Inner,
    key: &ObjectKey,
    file: &Arc<File>,
    src: &Path,
    size: u64,
    retries: &AtomicU32,
    progress: &dyn Progress,
) -> Result<(PutOutcome, u64), Error> {
    let mut create = Call::object(inner, Method::POST, key.as_str());
    create.query.push(("uploads", String::new()));
    create.headers.push(("content-type", "application/octet-stream".to_owned()));
    let location = create.location.clone();
    let upload_id = inner
        .send(&create, retries, |response| {
            let location = location.clone();
            async move {
                let text = body_text(response, &location, "POST").await?;
                let document = roxmltree::Document::parse(&text).map_err(|e| {
                    protocol(
                        &location,
                        "POST",
                        format!("CreateMultipartUpload answer is not XML: {e}"),
                    )
                })?;
                child_text(document.root_element(), "UploadId")
                    .filter(|id| !id.is_empty())
                    .ok_or_else(|| protocol(&location, "POST", "no UploadId in the answer".into()))
            }
        })
        .await?;
    let upload = Upload { inner, key, file, src, upload_id: &upload_id, retries, progress };
    let result = upload_parts_and_complete(&upload, size).await;
    match &result {
        Ok((PutOutcome::Created, _)) => {}
        Ok((PutOutcome::AlreadyExists, _)) | Err(_) => abort(inner, key, &upload_id).await,
    }
    result
}

/// One multipart upload in progress: what every part request needs.
struct Upload<'a> {
    inner: &'a Inner,
    key: &'a ObjectKey,
    file: &'a Arc<File>,
    src: &'a Path,
    upload_id: &'a str,
    retries: &'a AtomicU32,
    progress: &'a dyn Progress,
}

async fn upload_parts_and_complete(
    upload: &Upload<'_>,
    size: u64,
) -> Result<(PutOutcome, u64), Error> {
    let part_size = effective_part_size(size, upload.inner.wire.options.part_size_bytes);
    let count = size.div_ceil(part_size);
    let mut parts: Vec<(u64, String)> = futures::stream::iter(1..=count)
        .map(|number| {
            let offset = (number - 1) * part_size;
            let length = part_size.min(size - offset);
            upload_part(upload, number, offset, length)
        })
        .buffer_unordered(upload.inner.wire.options.parallelism.max(1))
        .try_collect()
        .await?;
    parts.sort_by_key(|(number, _)| *number);
    let Upload { inner, key, src, upload_id, retries, .. } = *upload;
    complete(inner, key, upload_id, &parts, src, size, retries).await
}

/// Uploads one part; once the server accepted it, its length is reported to the upload's
/// progress.
async fn upload_part(
    upload: &Upload<'_>,
    number: u64,
    offset: u64,
    length: u64,
) -> Result<(u64, String), Error> {
    let Upload { inner, key, file, src, upload_id, retries, progress } = *upload;
    let mut call = Call::object(inner, Method::PUT, key.as_str());
    call.query.push(("partNumber", number.to_string()));
    call.query.push(("uploadId", upload_id.to_owned()));
    let range = FileRange { file: Arc::clone(file), path: Arc::from(src), offset, length };
    let unsigned = !inner.lacks.lacks(Feature::UnsignedPayload);
    call.payload =
        if unsigned { Payload::File(range.clone()) } else { hashed(range.clone()).await? };
    let mut etag = send_part(inner, &call, number, retries).await;
    if unsigned
        && let Err(e) = &etag
        && inner.lacks.fall_back(Feature::UnsignedPayload, &inner.config.describe(), e)
    {
        call.payload = hashed(range).await?;
        etag = send_part(inner, &call, number, retries).await;
    }
    let etag = etag?;
    progress.advance(length);
    Ok((number, etag))
}

/// Sends one part (with retries); returns its ETag.
async fn send_part(
    inner: &Inner,
    call: &Call,
    number: u64,
    retries: &AtomicU32,
) -> Result<String, Error> {
    let location = call.location.clone();
    inner
        .send(call, retries, |response| {
            let location = location.clone();
            async move {
                response
                    .headers()
                    .get("etag")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
                    .ok_or_else(|| protocol(&location, "PUT", format!("no ETag for part {number}")))
            }
        })
        .await
}

/// `range` as a signed payload: its SHA-256, read on the blocking pool.
async fn hashed(range: FileRange) -> Result<Payload, Error> {
    let (file, path, offset, length) =
        (Arc::clone(&range.file), Arc::clone(&range.path), range.offset, range.length);
    let digest = tokio::task::spawn_blocking(move || {
        let mut hasher = crate::digest::Hasher::new();
        let mut buffer = vec![0u8; 256 * 1024];
        let mut done = 0u64;
        while done < length {
            let want = usize::try_from((length - done).min(buffer.len() as u64)).unwrap_or(0);
            let chunk = buffer.get_mut(..want).unwrap_or_default();
            crate::fs::read_exact_at(&file, &path, chunk, offset + done)?;
            hasher.update(chunk);
            done += want as u64;
        }
        Ok::<_, crate::fs::Error>(hasher.finish())
    })
    .await
    .map_err(|e| Error::Setup { reason: format!("hashing a part: {e}") })??;
    Ok(Payload::HashedFile(range, digest.to_hex()))
}

fn completion_document(parts: &[(u64, String)]) -> String {
    let mut xml =
        String::from("<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for (number, etag) in parts {
        xml.push_str(&format!(
            "<Part><PartNumber>{number}</PartNumber><ETag>{}</ETag></Part>",
            xml_escape(etag)
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    xml
}

async fn complete(
    inner: &Inner,
    key: &ObjectKey,
    upload_id: &str,
    parts: &[(u64, String)],
    src: &Path,
    size: u64,
    retries: &AtomicU32,
) -> Result<(PutOutcome, u64), Error> {
    let mut call = Call::object(inner, Method::POST, key.as_str());
    call.query.push(("uploadId", upload_id.to_owned()));
    let conditional = !inner.lacks.lacks(Feature::ConditionalWrites);
    if conditional {
        call.headers.push(("if-none-match", "*".to_owned()));
    }
    call.headers.push(("content-type", "application/xml".to_owned()));
    call.payload = Payload::Bytes(Bytes::from(completion_document(parts)));
    let location = call.location.clone();
    let mut result = send_completion(inner, &call, retries).await;
    if conditional
        && let Err(e) = &result
        && inner.lacks.fall_back(Feature::ConditionalWrites, &inner.config.describe(), e)
    {
        // The upload id is still open: complete it without the condition.
        call.headers.retain(|(name, _)| *name != "if-none-match");
        result = send_completion(inner, &call, retries).await;
    }
    match result {
        Ok(()) => Ok((PutOutcome::Created, size)),
        Err(e) if e.retries() > 0 && refused_after_retry(&e) => {
            // An earlier attempt may have completed the upload and lost its answer.
            let (sent, _) = crate::fs::hash_file(src)?;
            if own_object_stored(inner, key, size, &sent, retries).await? {
                Ok((PutOutcome::Created, size))
            } else if is_precondition_failed(&e) {
                Ok((PutOutcome::AlreadyExists, 0))
            } else {
                Err(Error::Protocol {
                    method: "POST".into(),
                    location,
                    reason: format!(
                        "CompleteMultipartUpload was retried after its answer was lost and the \
                         retry was refused ({}); the store holds no object with the uploaded \
                         bytes, so the upload did not complete",
                        refusal(&e)
                    ),
                    retryable: false,
                    attempts: e.attempts().unwrap_or_default(),
                })
            }
        }
        Err(e) if is_precondition_failed(&e) => Ok((PutOutcome::AlreadyExists, 0)),
        Err(e) => Err(e),
    }
}

/// Sends the completion `call` (with retries); a `200` answer carrying an `<Error>`
/// document is that error.
async fn send_completion(inner: &Inner, call: &Call, retries: &AtomicU32) -> Result<(), Error> {
    let location = call.location.clone();
    inner
        .send(call, retries, |response| {
            let location = location.clone();
            async move {
                // A 200 answer may still carry an <Error> document.
                let text = body_text(response, &location, "POST").await?;
                match parse_error_body(&text) {
                    None => Ok(()),
                    Some(body) => Err(Error::Http {
                        method: "POST".into(),
                        location,
                        status: 200,
                        code: body.code,
                        message: body.message,
                        attempts: Attempts::default(),
                    }),
                }
            }
        })
        .await
}

/// The status and S3 code of a refusal, e.g. `HTTP 403 AccessDenied` (the full error would
/// suggest checking credentials, which is not the problem here).
fn refusal(error: &Error) -> String {
    let (status, code) = match error {
        Error::AccessDenied { status, code, .. } | Error::Http { status, code, .. } => {
            (*status, code.as_deref())
        }
        Error::NotFound { .. } => (404, None),
        _ => return error.to_string(),
    };
    match code {
        Some(code) => format!("HTTP {status} {code}"),
        None => format!("HTTP {status}"),
    }
}

/// A refusal that a completion retried after a lost answer gets when the earlier attempt
/// succeeded: 412, 403 (upload id used up, s3s) or `NoSuchUpload`.
fn refused_after_retry(error: &Error) -> bool {
    is_precondition_failed(error) || is_no_such_upload(error) || error.is_auth()
}

fn is_no_such_upload(error: &Error) -> bool {
    matches!(error, Error::Http { code: Some(code), .. } if code == "NoSuchUpload")
        || matches!(error, Error::NotFound { .. })
}

/// AbortMultipartUpload, best effort: a failure is logged, not returned.
async fn abort(inner: &Inner, key: &ObjectKey, upload_id: &str) {
    let mut call = Call::object(inner, Method::DELETE, key.as_str());
    call.query.push(("uploadId", upload_id.to_owned()));
    let retries = AtomicU32::new(0);
    match inner.send(&call, &retries, |_| async { Ok(()) }).await {
        Ok(()) => {
            tracing::info!(object = %call.location, "aborted the incomplete multipart upload")
        }
        Err(e) => tracing::warn!(
            object = %call.location,
            "could not abort the incomplete multipart upload ({e}); a bucket lifecycle rule \
             (AbortIncompleteMultipartUpload) removes leftovers"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_sizes() {
        const MIB: u64 = 1024 * 1024;
        assert_eq!(effective_part_size(20 * MIB, 5 * MIB), 5 * MIB);
        assert_eq!(effective_part_size(20 * MIB, MIB), 5 * MIB);
        assert_eq!(effective_part_size(20 * MIB, 8 * MIB), 8 * MIB);
        let huge = 200 * 1024 * MIB;
        let part = effective_part_size(huge, 8 * MIB);
        assert!(huge.div_ceil(part) <= MAX_PARTS);
    }

    #[test]
    fn completion_xml_escapes_etags() {
        let xml = completion_document(&[(1, "\"abc\"".into()), (2, "\"d&e\"".into())]);
        let document = roxmltree::Document::parse(&xml).unwrap();
        let etags: Vec<_> = document
            .descendants()
            .filter(|n| n.tag_name().name() == "ETag")
            .map(|n| n.text().unwrap().to_owned())
            .collect();
        assert_eq!(etags, ["\"abc\"", "\"d&e\""]);
    }
}
