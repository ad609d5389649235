//! Uploads to an HTTP cache server that never overwrite on purpose: HEAD first, then one
//! `PUT` of the whole object with `If-None-Match: *`.
//!
//! * An existing object (HEAD `200`) is `AlreadyExists`; nothing is sent.
//! * `412 Precondition Failed` to the `PUT` means another writer stored the key between the
//!   HEAD and the `PUT`: `AlreadyExists` — unless the `PUT` was retried after a lost answer,
//!   when the stored object is compared with the bytes sent first
//!   (`wire::own_object_stored`), as on S3.
//! * `409 Conflict` (a WebDAV server whose parent collection of the object is missing, as
//!   nginx without `create_full_put_path` answers): each parent collection is made with
//!   `MKCOL`, from the base down (`405`, "exists", counts as made), then the `PUT` is sent
//!   once more.
//!
//! The body is streamed from the file (memory holds one read buffer), or sent from memory
//! for [`upload_bytes`].

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use bytes::Bytes;
use reqwest::Method;

use super::Inner;
use crate::digest::Sha256Digest;
use crate::transport::wire::{Call, Exchange, FileRange, Payload, own_object_stored};
use crate::transport::{Error, ObjectKey, PutOutcome};

/// Uploads the file `src` under `key` unless an object is there; returns the outcome and
/// the bytes sent.
///
/// # Errors
/// Local I/O errors naming `src`, network and HTTP errors.
pub(crate) async fn upload_file(
    inner: &Inner,
    key: &ObjectKey,
    src: &Path,
    retries: &AtomicU32,
) -> Result<(PutOutcome, u64), Error> {
    if inner.head(key, retries).await?.is_some() {
        return Ok((PutOutcome::AlreadyExists, 0));
    }
    let file = crate::fs::open(src)?;
    let length = file.metadata().map_err(|e| crate::fs::Error::io("stat", src, e))?.len();
    let range = FileRange { file: Arc::new(file), path: Arc::from(src), offset: 0, length };
    let digest = || {
        let file = crate::fs::open(src)?;
        let (digest, _) = Sha256Digest::of_reader(file)
            .map_err(|e| Error::from(crate::fs::Error::io("read", src, e)))?;
        Ok(digest)
    };
    put(inner, key, Payload::File(range), length, digest, retries).await
}

/// Stores `bytes` under `key` unless an object is there, in one `PUT` after the HEAD.
///
/// # Errors
/// Network and HTTP errors.
pub(crate) async fn upload_bytes(
    inner: &Inner,
    key: &ObjectKey,
    bytes: Bytes,
    retries: &AtomicU32,
) -> Result<(PutOutcome, u64), Error> {
    if inner.head(key, retries).await?.is_some() {
        return Ok((PutOutcome::AlreadyExists, 0));
    }
    let length = bytes.len() as u64;
    let digest = Sha256Digest::of_bytes(&bytes);
    put(inner, key, Payload::Bytes(bytes), length, || Ok(digest), retries).await
}

/// The conditional `PUT` (see the module docs); `digest` gives the SHA-256 of the body
/// when a refused retry must be told from another writer's object.
async fn put(
    inner: &Inner,
    key: &ObjectKey,
    payload: Payload,
    length: u64,
    digest: impl FnOnce() -> Result<Sha256Digest, Error>,
    retries: &AtomicU32,
) -> Result<(PutOutcome, u64), Error> {
    let mut call = Call::object(inner, Method::PUT, key.as_str());
    call.headers.push(("if-none-match", "*".to_owned()));
    call.headers.push(("content-type", "application/octet-stream".to_owned()));
    call.payload = payload;
    let mut sent = inner.send(&call, retries, |_| async { Ok(()) }).await;
    if let Err(Error::Http { status: 409, .. }) = &sent {
        make_collections(inner, key, retries).await?;
        sent = inner.send(&call, retries, |_| async { Ok(()) }).await;
    }
    match sent {
        Ok(()) => Ok((PutOutcome::Created, length)),
        Err(e) if is_precondition_failed(&e) && e.retries() > 0 => {
            if own_object_stored(inner, key, length, &digest()?, retries).await? {
                Ok((PutOutcome::Created, length))
            } else {
                Ok((PutOutcome::AlreadyExists, 0))
            }
        }
        Err(e) if is_precondition_failed(&e) => Ok((PutOutcome::AlreadyExists, 0)),
        Err(e) => Err(e),
    }
}

fn is_precondition_failed(error: &Error) -> bool {
    matches!(error, Error::Http { status: 412, .. })
}

/// `MKCOL` of every parent collection of `key`'s path, from the base down; a collection
/// that exists (`405 Method Not Allowed`) counts as made.
///
/// # Errors
/// The first `MKCOL` that fails otherwise.
async fn make_collections(
    inner: &Inner,
    key: &ObjectKey,
    retries: &AtomicU32,
) -> Result<(), Error> {
    let path = inner.object_path(key.as_str());
    let segments: Vec<&str> = path.split('/').collect();
    let parents = segments.len().saturating_sub(1);
    for depth in 1..=parents {
        let collection = format!("{}/", segments.get(..depth).unwrap_or_default().join("/"));
        let mkcol = Method::from_bytes(b"MKCOL").expect("MKCOL is a valid method token");
        let mut call = Call::object(inner, mkcol, key.as_str());
        call.location = format!("{} (collection {collection})", call.location);
        call.target = Some(collection);
        match inner.send(&call, retries, |_| async { Ok(()) }).await {
            Ok(()) | Err(Error::Http { status: 405, .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
