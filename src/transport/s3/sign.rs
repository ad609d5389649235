//! SigV4 header signing (via `aws-sigv4`), as a typestate: an [`UnsignedRequest`] becomes
//! a [`SignedRequest`] only through [`UnsignedRequest::sign`] or, for anonymous reads,
//! [`UnsignedRequest::anonymous`].
//!
//! Rules:
//! * the signature goes in the `Authorization` header (no presigned URLs);
//! * the payload hash is sent as `x-amz-content-sha256`: the hex SHA-256 of small bodies,
//!   or `UNSIGNED-PAYLOAD` for part uploads; never `aws-chunked` bodies and never the
//!   default CRC checksum headers (Huawei OBS rejects them);
//! * only the headers this module is given are signed (plus `host`, `x-amz-date`,
//!   `x-amz-content-sha256` and `x-amz-security-token`, which SigV4 requires);
//! * keys are encoded once (S3 does not double-encode) and paths are not normalised.
//!
//! `Debug` of both request types shows the method and URL only: never a header value.
//! The signer's own trace events (canonical request, access key id) are suppressed.

use std::fmt;
use std::time::SystemTime;

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use std::sync::Arc;

use bytes::Bytes;
use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};

use super::config::Credentials;
use crate::digest::Sha256Digest;
use crate::transport::Error;

/// A request body and how its hash enters the signature.
#[derive(Clone)]
pub(crate) enum Payload {
    /// No body; hashed as the SHA-256 of zero bytes.
    Empty,
    /// A body whose SHA-256 is signed (small PUTs, XML documents).
    Signed(Bytes),
    /// A byte range of a file, sent with `UNSIGNED-PAYLOAD` and read while it is sent
    /// (upload parts): memory holds one read buffer, not the part.
    UnsignedFile(FileRange),
    /// A byte range of a file whose SHA-256 (hex) was computed beforehand and is signed;
    /// the body is read while it is sent, as for [`Payload::UnsignedFile`] (for servers
    /// that refuse `UNSIGNED-PAYLOAD`, `super::fallback`).
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
    fn stream(self) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
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

/// The body of a signed request.
enum Body {
    Bytes(Bytes),
    File(FileRange),
}

impl Payload {
    fn body(&self) -> Body {
        match self {
            Payload::Empty => Body::Bytes(Bytes::new()),
            Payload::Signed(b) => Body::Bytes(b.clone()),
            Payload::UnsignedFile(range) | Payload::HashedFile(range, _) => {
                Body::File(range.clone())
            }
        }
    }
}

/// A request that has not been signed yet.
pub(crate) struct UnsignedRequest {
    method: Method,
    url: String,
    headers: Vec<(&'static str, String)>,
    payload: Payload,
}

/// A request ready to send: signed, or deliberately anonymous.
pub(crate) struct SignedRequest {
    method: Method,
    url: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Body,
}

impl fmt::Debug for UnsignedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UnsignedRequest({} {})", self.method, self.url)
    }
}

impl fmt::Debug for SignedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignedRequest({} {})", self.method, self.url)
    }
}

fn setup(reason: impl Into<String>) -> Error {
    Error::Setup { reason: reason.into() }
}

fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), Error> {
    let name = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| setup(format!("invalid header name {name:?}")))?;
    // Never echo the value: it may be a signature or a token.
    let value = HeaderValue::from_str(value)
        .map_err(|_| setup(format!("invalid value for header {name}")))?;
    Ok((name, value))
}

impl UnsignedRequest {
    /// A request for `url` (already percent-encoded, see `S3Config::request_url`) with
    /// `headers` (lower-case names) and `payload`.
    pub(crate) fn new(
        method: Method,
        url: String,
        headers: Vec<(&'static str, String)>,
        payload: Payload,
    ) -> Self {
        Self { method, url, headers, payload }
    }

    /// Signs with SigV4 for service `s3` in `region` at `time`.
    ///
    /// # Errors
    /// [`Error::Setup`] if the request cannot be signed (malformed URL or header).
    pub(crate) fn sign(
        self,
        credentials: &Credentials,
        region: &str,
        time: SystemTime,
    ) -> Result<SignedRequest, Error> {
        let mut settings = SigningSettings::default();
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        let identity = aws_credential_types::Credentials::new(
            credentials.access_key_id.expose(),
            credentials.secret_access_key.expose(),
            credentials.session_token.as_ref().map(|t| t.expose().to_owned()),
            None,
            "strata-env",
        )
        .into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name("s3")
            .time(time)
            .settings(settings)
            .build()
            .map_err(|e| setup(format!("cannot sign: {e}")))?
            .into();
        let body = match &self.payload {
            Payload::Empty => SignableBody::Precomputed(Sha256Digest::of_bytes(&[]).to_hex()),
            Payload::Signed(bytes) => {
                SignableBody::Precomputed(Sha256Digest::of_bytes(bytes).to_hex())
            }
            Payload::UnsignedFile(_) => SignableBody::UnsignedPayload,
            Payload::HashedFile(_, hex) => SignableBody::Precomputed(hex.clone()),
        };
        let signable = SignableRequest::new(
            self.method.as_str(),
            self.url.as_str(),
            self.headers.iter().map(|(n, v)| (*n, v.as_str())),
            body,
        )
        .map_err(|e| setup(format!("cannot sign {} {}: {e}", self.method, self.url)))?;
        // aws-sigv4 traces the canonical request and the access key id; silence it so no
        // subscriber configuration can put credential material in a log.
        let signed =
            tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
                sign(signable, &params)
            });
        let (instructions, _signature) = signed
            .map_err(|e| setup(format!("cannot sign {} {}: {e}", self.method, self.url)))?
            .into_parts();
        let mut headers = Vec::with_capacity(self.headers.len() + 4);
        for (name, value) in &self.headers {
            headers.push(header(name, value)?);
        }
        for (name, value) in instructions.headers() {
            headers.push(header(name, value)?);
        }
        Ok(SignedRequest { method: self.method, url: self.url, headers, body: self.payload.body() })
    }

    /// Sends the request unsigned (anonymous access to a public bucket).
    ///
    /// # Errors
    /// [`Error::Setup`] for a malformed header.
    pub(crate) fn anonymous(self) -> Result<SignedRequest, Error> {
        let mut headers = Vec::with_capacity(self.headers.len());
        for (name, value) in &self.headers {
            headers.push(header(name, value)?);
        }
        Ok(SignedRequest { method: self.method, url: self.url, headers, body: self.payload.body() })
    }
}

impl SignedRequest {
    /// The request as a reqwest builder on `client`.
    pub(crate) fn into_builder(self, client: &reqwest::Client) -> reqwest::RequestBuilder {
        let mut builder = client.request(self.method, self.url);
        for (name, value) in self.headers {
            builder = builder.header(name, value);
        }
        match self.body {
            Body::Bytes(bytes) if bytes.is_empty() => builder,
            Body::Bytes(bytes) => builder.body(bytes),
            Body::File(range) => builder
                .header(reqwest::header::CONTENT_LENGTH, range.length)
                .body(reqwest::Body::wrap_stream(range.stream())),
        }
    }

    #[cfg(test)]
    fn header_value(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.as_str() == name).and_then(|(_, v)| v.to_str().ok())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::transport::Secret;

    /// The example credentials and time of AWS's published S3 SigV4 examples ("Signature
    /// Calculations for the Authorization Header: Transferring Payload in a Single Chunk",
    /// Amazon S3 API reference). They are AWS's documented placeholders, not real keys.
    fn example() -> (Credentials, SystemTime) {
        let credentials = Credentials {
            access_key_id: Secret::new("AKIAIOSFODNN7EXAMPLE"),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            session_token: None,
            source: "test",
        };
        // 20130524T000000Z
        (credentials, UNIX_EPOCH + Duration::from_secs(1_369_353_600))
    }

    #[test]
    fn aws_example_get_object() {
        let (credentials, time) = example();
        let request = UnsignedRequest::new(
            Method::GET,
            "https://examplebucket.s3.amazonaws.com/test.txt".into(),
            vec![("range", "bytes=0-9".into())],
            Payload::Empty,
        );
        let signed = request.sign(&credentials, "us-east-1", time).unwrap();
        assert_eq!(
            signed.header_value("authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
                 SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
                 Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
            )
        );
        assert_eq!(
            signed.header_value("x-amz-content-sha256"),
            Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
        let shown = format!("{signed:?}");
        assert!(!shown.contains("Signature") && !shown.contains("AKIA"), "{shown}");
    }

    #[test]
    fn aws_example_list_objects() {
        let (credentials, time) = example();
        let request = UnsignedRequest::new(
            Method::GET,
            "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J".into(),
            Vec::new(),
            Payload::Empty,
        );
        let signed = request.sign(&credentials, "us-east-1", time).unwrap();
        let auth = signed.header_value("authorization").unwrap();
        assert!(
            auth.ends_with(
                "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
            ),
            "{auth}"
        );
    }

    #[test]
    fn unsigned_payload_and_session_token() {
        let (mut credentials, time) = example();
        credentials.session_token = Some(Secret::new("session-token-value"));
        let request = UnsignedRequest::new(
            Method::PUT,
            "http://127.0.0.1:9000/b/k?partNumber=1&uploadId=x".into(),
            Vec::new(),
            Payload::UnsignedFile(FileRange {
                file: Arc::new(tempfile::tempfile().unwrap()),
                path: Arc::from(std::path::Path::new("part")),
                offset: 0,
                length: 0,
            }),
        );
        let signed = request.sign(&credentials, "us-east-1", time).unwrap();
        assert_eq!(signed.header_value("x-amz-content-sha256"), Some("UNSIGNED-PAYLOAD"));
        assert_eq!(signed.header_value("x-amz-security-token"), Some("session-token-value"));
        let auth = signed.header_value("authorization").unwrap();
        assert!(auth.contains("x-amz-security-token"), "{auth}");
        assert!(signed.header_value("x-amz-checksum-crc32").is_none());
    }
}
