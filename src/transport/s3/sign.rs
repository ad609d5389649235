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
use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};

use super::config::Credentials;
use crate::digest::Sha256Digest;
use crate::transport::Error;
use crate::transport::wire::Payload;

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
    payload: Payload,
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
            Payload::Bytes(bytes) => {
                SignableBody::Precomputed(Sha256Digest::of_bytes(bytes).to_hex())
            }
            Payload::File(_) => SignableBody::UnsignedPayload,
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
        Ok(SignedRequest { method: self.method, url: self.url, headers, payload: self.payload })
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
        Ok(SignedRequest { method: self.method, url: self.url, headers, payload: self.payload })
    }
}

impl SignedRequest {
    /// The request as a reqwest builder on `client`.
    pub(crate) fn into_builder(self, client: &reqwest::Client) -> reqwest::RequestBuilder {
        let mut builder = client.request(self.method, self.url);
        for (name, value) in self.headers {
            builder = builder.header(name, value);
        }
        self.payload.attach(builder)
    }

    #[cfg(test)]
    fn header_value(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.as_str() == name).and_then(|(_, v)| v.to_str().ok())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use std::sync::Arc;

    use super::*;
    use crate::transport::Secret;
    use crate::transport::wire::FileRange;

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
            Payload::File(FileRange {
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
