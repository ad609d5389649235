//! Request bodies of the HTTP backends: nothing, bytes in memory, or a byte range of a
//! file read while it is sent (so memory holds one read buffer, not the range).

use std::sync::Arc;

use bytes::Bytes;

/// A request body. How its hash enters a signature is the S3 backend's business
/// (`s3::sign`); the HTTP backend sends it as it is.
#[derive(Clone)]
pub(crate) enum Payload {
    /// No body (hashed as the SHA-256 of zero bytes when signed).
    Empty,
    /// A body in memory (small PUTs, XML documents; its SHA-256 is signed).
    Bytes(Bytes),
    /// A byte range of a file, read while it is sent (S3: `UNSIGNED-PAYLOAD`).
    File(FileRange),
    /// A byte range of a file whose SHA-256 (hex) was computed beforehand (S3 signs it),
    /// read while it is sent as for [`Payload::File`].
    HashedFile(FileRange, String),
}

/// A byte range of an open file.
#[derive(Clone)]
pub(crate) struct FileRange {
    /// The file.
    pub file: Arc<std::fs::File>,
    /// Its path, for errors.
    pub path: Arc<std::path::Path>,
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
}

/// Bytes read per step of a [`FileRange`] body.
const FILE_READ_BYTES: u64 = 256 * 1024;

impl FileRange {
    /// The range as a stream of chunks, read on the blocking pool.
    pub(crate) fn stream(
        self,
    ) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
        futures::stream::try_unfold((self, 0u64), |(range, done)| async move {
            if done >= range.length {
                return Ok(None);
            }
            let want = (range.length - done).min(FILE_READ_BYTES);
            let (file, path, offset) =
                (Arc::clone(&range.file), Arc::clone(&range.path), range.offset + done);
            let chunk = tokio::task::spawn_blocking(move || {
                let mut buffer = vec![0u8; usize::try_from(want).unwrap_or(0)];
                crate::fs::read_exact_at(&file, &path, &mut buffer, offset)
                    .map(|()| buffer)
                    .map_err(std::io::Error::other)
            })
            .await
            .map_err(std::io::Error::other)??;
            Ok(Some((Bytes::from(chunk), (range, done + want))))
        })
    }
}

impl Payload {
    /// `builder` with this body (and, for a file range, its `Content-Length`).
    pub(crate) fn attach(self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Payload::Empty => builder,
            Payload::Bytes(bytes) if bytes.is_empty() => builder,
            Payload::Bytes(bytes) => builder.body(bytes),
            Payload::File(range) | Payload::HashedFile(range, _) => builder
                .header(reqwest::header::CONTENT_LENGTH, range.length)
                .body(reqwest::Body::wrap_stream(range.stream())),
        }
    }
}
