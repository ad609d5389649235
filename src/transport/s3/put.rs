//! Uploads that never overwrite: HEAD first, then a conditional write.
//!
//! Order: require credentials; HEAD the key (an existing object → `AlreadyExists`, nothing
//! is sent); objects below the part size go up in one `PUT` with `If-None-Match: *` and a
//! signed SHA-256 of the body; larger ones use a multipart upload ([`super::multipart`]).
//! HTTP 412 (`PreconditionFailed`) from the conditional write means another writer won the
//! race: `AlreadyExists`, and their object is untouched.
//!
//! # Limitations
//! A server that ignores `If-None-Match` only has the HEAD check to protect it; see the
//! parent module.

use std::path::Path;
use std::sync::atomic::AtomicU32;

use bytes::Bytes;
use reqwest::Method;

use super::sign::Payload;
use super::{Call, Inner, multipart};
use crate::transport::{Error, ObjectKey, PutOutcome};

/// True if `error` is a failed `If-None-Match: *` precondition (the object exists).
pub(crate) fn is_precondition_failed(error: &Error) -> bool {
    matches!(error, Error::Http { status: 412, .. })
}

/// Uploads `src` under `key` unless it exists; returns the outcome and the bytes sent.
///
/// # Errors
/// [`Error::MissingCredentials`], local I/O errors naming `src`, network and HTTP errors.
pub(crate) async fn upload(
    inner: &Inner,
    key: &ObjectKey,
    src: &Path,
    retries: &AtomicU32,
) -> Result<(PutOutcome, u64), Error> {
    inner.require_credentials("upload", key.as_str())?;
    if inner.head(key, retries).await?.is_some() {
        return Ok((PutOutcome::AlreadyExists, 0));
    }
    let file = crate::fs::open(src)?;
    let size = file.metadata().map_err(|e| crate::fs::Error::io("stat", src, e))?.len();
    if size < inner.options.part_size_bytes {
        drop(file);
        let body = Bytes::from(crate::fs::read(src)?);
        if body.len() as u64 != size {
            return Err(crate::fs::Error::io(
                "read",
                src,
                std::io::Error::other("the file changed size while being uploaded"),
            )
            .into());
        }
        put_single(inner, key, body, retries).await
    } else {
        multipart::upload(inner, key, &std::sync::Arc::new(file), src, size, retries).await
    }
}

async fn put_single(
    inner: &Inner,
    key: &ObjectKey,
    body: Bytes,
    retries: &AtomicU32,
) -> Result<(PutOutcome, u64), Error> {
    let size = body.len() as u64;
    let mut call = Call::object(inner, Method::PUT, key.as_str());
    call.headers.push(("if-none-match", "*".to_owned()));
    call.headers.push(("content-type", "application/octet-stream".to_owned()));
    call.payload = Payload::Signed(body);
    match inner.send(&call, retries, |_| async { Ok(()) }).await {
        Ok(()) => Ok((PutOutcome::Created, size)),
        Err(e) if is_precondition_failed(&e) => Ok((PutOutcome::AlreadyExists, 0)),
        Err(e) => Err(e),
    }
}
