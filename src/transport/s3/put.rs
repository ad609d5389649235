//! Uploads that never overwrite: HEAD first, then a conditional write.
//!
//! Order: require credentials; HEAD the key (an existing object → `AlreadyExists`, nothing
//! is sent); objects below the part size (and every buffer of [`upload_bytes`]) go up in one
//! `PUT` with `If-None-Match: *` and a signed SHA-256 of the body; larger files use a
//! multipart upload ([`super::multipart`]).
//! HTTP 412 (`PreconditionFailed`) from the conditional write means another writer won the
//! race: `AlreadyExists`, and their object is untouched.
//!
//! **A write retried after a lost answer** (the request reached the store, the answer did
//! not) may be refused because the earlier attempt succeeded: the retry then finds "its
//! own" object. So whenever a conditional write was retried and the retry is refused (412,
//! and for a multipart completion also 403 or `NoSuchUpload`, which stores send once the
//! upload id is used up), the stored object is compared with what was sent — size from a
//! HEAD, then the SHA-256 of a GET against the SHA-256 of the local bytes
//! (`wire::own_object_stored`). The same bytes are `Created` (the truth: our write landed);
//! anything else keeps the refusal's meaning. A write refused on its first attempt is never
//! ours, and costs no extra request.
//!
//! A server that does not implement `If-None-Match` and says so (501 `NotImplemented`) gets
//! the write again without it, and no later write of the store carries it
//! ([`super::fallback`]).
//!
//! # Limitations
//! A server that ignores (or lacks) `If-None-Match` only has the HEAD check to protect it;
//! see the parent module.

use std::path::Path;
use std::sync::atomic::AtomicU32;

use bytes::Bytes;
use reqwest::Method;

use super::fallback::Feature;
use super::{Inner, multipart};
use crate::digest::Sha256Digest;
use crate::progress::Progress;
use crate::transport::wire::Payload;
use crate::transport::wire::{Call, Exchange, own_object_stored};
use crate::transport::{Error, ObjectKey, PutOutcome};

/// True if `error` is a failed `If-None-Match: *` precondition (the object exists).
pub(crate) fn is_precondition_failed(error: &Error) -> bool {
    matches!(error, Error::Http { status: 412, .. })
}

/// Uploads `src` under `key` unless it exists; returns the outcome and the bytes sent.
/// `progress` is advanced by each part (or the single `PUT`) the server accepted.
///
/// # Errors
/// [`Error::MissingCredentials`], local I/O errors naming `src`, network and HTTP errors.
pub(crate) async fn upload(
    inner: &Inner,
    key: &ObjectKey,
    src: &Path,
    retries: &AtomicU32,
    progress: &dyn Progress,
) -> Result<(PutOutcome, u64), Error> {
    inner.require_credentials("upload", key.as_str())?;
    if inner.head(key, retries).await?.is_some() {
        return Ok((PutOutcome::AlreadyExists, 0));
    }
    let file = crate::fs::open(src)?;
    let size = file.metadata().map_err(|e| crate::fs::Error::io("stat", src, e))?.len();
    if size < inner.wire.options.part_size_bytes {
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
        let put = put_single(inner, key, body, retries).await?;
        if put.0 == PutOutcome::Created {
            progress.advance(size);
        }
        Ok(put)
    } else {
        let file = std::sync::Arc::new(file);
        multipart::upload(inner, key, &file, src, size, retries, progress).await
    }
}

/// Stores `bytes` under `key` unless it exists, in one conditional `PUT` (after the HEAD),
/// whatever the part size; returns the outcome and the bytes sent.
///
/// # Errors
/// [`Error::MissingCredentials`], network and HTTP errors.
pub(crate) async fn upload_bytes(
    inner: &Inner,
    key: &ObjectKey,
    bytes: Bytes,
    retries: &AtomicU32,
) -> Result<(PutOutcome, u64), Error> {
    inner.require_credentials("upload", key.as_str())?;
    if inner.head(key, retries).await?.is_some() {
        return Ok((PutOutcome::AlreadyExists, 0));
    }
    put_single(inner, key, bytes, retries).await
}

async fn put_single(
    inner: &Inner,
    key: &ObjectKey,
    body: Bytes,
    retries: &AtomicU32,
) -> Result<(PutOutcome, u64), Error> {
    let size = body.len() as u64;
    let mut call = Call::object(inner, Method::PUT, key.as_str());
    let conditional = !inner.lacks.lacks(Feature::ConditionalWrites);
    if conditional {
        call.headers.push(("if-none-match", "*".to_owned()));
    }
    call.headers.push(("content-type", "application/octet-stream".to_owned()));
    call.payload = Payload::Bytes(body.clone());
    let mut sent = inner.send(&call, retries, |_| async { Ok(()) }).await;
    if conditional
        && let Err(e) = &sent
        && inner.lacks.fall_back(Feature::ConditionalWrites, &inner.config.describe(), e)
    {
        // The HEAD above found no object; without the condition it is all that protects.
        call.headers.retain(|(name, _)| *name != "if-none-match");
        sent = inner.send(&call, retries, |_| async { Ok(()) }).await;
    }
    match sent {
        Ok(()) => Ok((PutOutcome::Created, size)),
        Err(e) if is_precondition_failed(&e) && e.retries() > 0 => {
            let sent = Sha256Digest::of_bytes(&body);
            if own_object_stored(inner, key, size, &sent, retries).await? {
                Ok((PutOutcome::Created, size))
            } else {
                Ok((PutOutcome::AlreadyExists, 0))
            }
        }
        Err(e) if is_precondition_failed(&e) => Ok((PutOutcome::AlreadyExists, 0)),
        Err(e) => Err(e),
    }
}
