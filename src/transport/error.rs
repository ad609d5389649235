//! [`Error`]: everything that can go wrong moving objects, with predicates for callers.
//!
//! Callers classify with [`Error::is_not_found`], [`Error::is_retryable`], [`Error::is_auth`] and
//! [`Error::is_timeout`], never by matching message text. Errors from the network record how many
//! retries were made and how long the operation took ([`Error::retries`], [`Error::elapsed`]).
//!
//! No variant holds a credential, a signature, a signed URL or a request header.

use std::fmt;
use std::time::Duration;

/// How many times a request was retried and how long it took in total before it failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attempts {
    /// Retries made after the first attempt.
    pub retries: u32,
    /// Time from the first attempt to giving up.
    pub elapsed: Duration,
}

impl fmt::Display for Attempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.retries > 0 {
            write!(f, " (after {} retries, {:.1}s)", self.retries, self.elapsed.as_secs_f64())
        } else if !self.elapsed.is_zero() {
            write!(f, " (after {:.1}s)", self.elapsed.as_secs_f64())
        } else {
            Ok(())
        }
    }
}

/// What kind of network failure a [`Error::Network`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkErrorKind {
    /// The request (connect, send or receive) did not finish within its timeout.
    Timeout,
    /// The connection could not be established (refused, unreachable, DNS, TLS handshake).
    Connect,
    /// The connection failed while sending or receiving (reset, closed, malformed HTTP).
    Other,
}

impl fmt::Display for NetworkErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NetworkErrorKind::Timeout => "timed out",
            NetworkErrorKind::Connect => "cannot connect",
            NetworkErrorKind::Other => "connection failed",
        })
    }
}

/// When a [`Error::Network`] failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkPhase {
    /// Connecting, sending the request or waiting for the answer's head.
    Request,
    /// Reading the answer's body (the head had arrived).
    Body,
}

/// `timed out waiting for the answer`, `timed out while reading the answer's body`, …
pub(crate) fn network_failure_text(kind: NetworkErrorKind, phase: NetworkPhase) -> String {
    match (kind, phase) {
        (NetworkErrorKind::Timeout, NetworkPhase::Request) => {
            "timed out waiting for the answer".to_owned()
        }
        (NetworkErrorKind::Connect, _) => kind.to_string(),
        (_, NetworkPhase::Request) => kind.to_string(),
        (_, NetworkPhase::Body) => format!("{kind} while reading the answer's body"),
    }
}

/// The advice of [`Error::WrongRegion`]: the region to set when the server named it, else
/// how to find it (never "set region=another region").
fn wrong_region(configured: &str, named: Option<&str>, status: u16) -> String {
    match named {
        Some(region) => format!(
            "the bucket is in {region}; set region={region} in the store URL or AWS_REGION \
             (requests were signed for {configured})"
        ),
        None => format!(
            "the server answered HTTP {status} (a redirect or a malformed authorization) \
             without naming the bucket's region, so the bucket is not in {configured}, the \
             region requests were signed for; set region=<the bucket's region> in the store \
             URL or AWS_REGION (the provider's console shows it, as does \
             `aws s3api get-bucket-location --bucket <bucket>`), or check the endpoint"
        ),
    }
}

/// The network backend an [`Error::AccessDenied`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An `s3://` store (credentials `AWS_*` or `HW_OBS_*`).
    S3,
    /// An `http(s)://` store (credentials `STRATA_HTTP_*`).
    Http,
}

/// What to check after a 403: the credentials, or that there are none.
fn denied_advice(anonymous: bool, backend: Backend) -> &'static str {
    match (backend, anonymous) {
        (Backend::S3, true) => {
            "no credentials are set, so the request was anonymous: set AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, or allow anonymous reads on the bucket"
        }
        (Backend::S3, false) => "check the credentials / signature / clock skew",
        (Backend::Http, true) => {
            "no credentials are set, so the request was anonymous: set STRATA_HTTP_TOKEN, or \
             STRATA_HTTP_USER and STRATA_HTTP_PASSWORD"
        }
        (Backend::Http, false) => {
            "check the credentials in STRATA_HTTP_TOKEN, or STRATA_HTTP_USER and \
             STRATA_HTTP_PASSWORD, and the server's access rules"
        }
    }
}

/// `NAME="value"`, or `NAME` alone when the value is withheld (a credential) or empty.
fn setting(name: &str, value: &str) -> String {
    if value.is_empty() { name.to_owned() } else { format!("{name}={value:?}") }
}

fn detail(code: &Option<String>, message: &Option<String>) -> String {
    match (code, message) {
        (Some(code), Some(message)) => format!(": {code}: {message}"),
        (Some(code), None) => format!(": {code}"),
        (None, Some(message)) => format!(": {message}"),
        (None, None) => String::new(),
    }
}

/// A transport failure. Locations are spelled `s3://bucket/prefix/key` or as local paths.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A string is not a valid [`ObjectKey`](super::ObjectKey).
    #[error("invalid object key \"{key}\": {reason}")]
    InvalidKey {
        /// The rejected text (escaped).
        key: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A store URL could not be parsed.
    #[error(
        "invalid store URL {url:?}: {reason} (expected file:///abs/dir, s3://bucket/prefix?endpoint=…&region=…&addressing=path|virtual|auto or http(s)://host[:port]/path[?layout=flat|bazel])"
    )]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An environment variable or option has an unusable value. Never holds a secret: for
    /// credential variables `value` is empty, and the message then names the variables
    /// alone (`invalid AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY: …`, never `=""`).
    #[error("invalid {}: {reason}", setting(name, value))]
    InvalidConfig {
        /// The variable or option name.
        name: String,
        /// Its value (empty for credentials).
        value: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A write was attempted on an S3 store without credentials.
    #[error(
        "{operation} on {location} needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials), or HW_OBS_AK and HW_OBS_SK"
    )]
    MissingCredentials {
        /// What was attempted ("upload", "delete").
        operation: &'static str,
        /// The object it was attempted on.
        location: String,
    },
    /// A store lacks a capability that a use of it needs ([`super::Capability`]): said
    /// when the store is opened for that use, before anything is done.
    #[error(
        "the store {store} cannot {}; {purpose} needs {capability} ({}): {}",
        capability.ability(),
        super::registry::schemes_with(*capability),
        capability.instead(purpose)
    )]
    Unsupported {
        /// The store, as [`ObjectStore::describe`](super::ObjectStore::describe) prints it.
        store: String,
        /// What it lacks.
        capability: super::Capability,
        /// What needed it, e.g. `snapshot gc`.
        purpose: String,
    },
    /// The HTTP client or its runtime could not be created.
    #[error("cannot set up the store's HTTP client: {reason}")]
    Setup {
        /// What failed.
        reason: String,
    },
    /// The object does not exist.
    #[error("{location} does not exist{attempts}")]
    NotFound {
        /// The object.
        location: String,
        /// Retries and elapsed time.
        attempts: Attempts,
    },
    /// The bucket does not exist.
    #[error(
        "bucket {bucket:?} does not exist at {endpoint} (check the bucket name in the store URL){attempts}"
    )]
    NoSuchBucket {
        /// The bucket name.
        bucket: String,
        /// The endpoint asked.
        endpoint: String,
        /// Retries and elapsed time.
        attempts: Attempts,
    },
    /// HTTP 403 (or 401): bad key, bad signature, clock skew, or a policy denies access.
    #[error(
        "access denied ({}) for {location}: {method} got HTTP {status}{}{attempts}",
        denied_advice(*anonymous, *backend),
        detail(code, message)
    )]
    AccessDenied {
        /// HTTP method.
        method: String,
        /// The object or bucket.
        location: String,
        /// HTTP status (403 or 401).
        status: u16,
        /// The S3 error code (`AccessDenied`, `SignatureDoesNotMatch`, …), if sent.
        code: Option<String>,
        /// The S3 error message, if sent.
        message: Option<String>,
        /// No credentials were set, so the request went out unsigned.
        anonymous: bool,
        /// Which backend answered (its credential variables go in the advice).
        backend: Backend,
        /// Retries and elapsed time.
        attempts: Attempts,
    },
    /// The bucket lives in another region than the one requests were signed for.
    #[error("wrong region for {location}: {}{attempts}", wrong_region(configured, bucket_region.as_deref(), *status))]
    WrongRegion {
        /// The object or bucket.
        location: String,
        /// The region used for signing.
        configured: String,
        /// The region the server named, if it named one.
        bucket_region: Option<String>,
        /// The HTTP status of the answer (301, 400, …).
        status: u16,
        /// Retries and elapsed time.
        attempts: Attempts,
    },
    /// Any other HTTP error status.
    #[error("{method} {location} failed with HTTP {status}{}{attempts}", detail(code, message))]
    Http {
        /// HTTP method.
        method: String,
        /// The object or bucket.
        location: String,
        /// HTTP status.
        status: u16,
        /// The S3 error code, if sent.
        code: Option<String>,
        /// The S3 error message, if sent.
        message: Option<String>,
        /// Retries and elapsed time.
        attempts: Attempts,
    },
    /// The connection failed or timed out.
    #[error("{method} {location}: {}{attempts}", network_failure_text(*kind, *phase))]
    Network {
        /// HTTP method.
        method: String,
        /// The object or bucket.
        location: String,
        /// Timeout, connect or other.
        kind: NetworkErrorKind,
        /// Before or while the answer's body arrived.
        phase: NetworkPhase,
        /// Retries and elapsed time.
        attempts: Attempts,
        /// The client's error (names the URL, never a header).
        #[source]
        source: reqwest::Error,
    },
    /// The server answered something that does not follow the S3 protocol (bad XML, a
    /// missing header, a body shorter than announced).
    #[error("{method} {location}: unexpected response: {reason}{attempts}")]
    Protocol {
        /// HTTP method.
        method: String,
        /// The object or bucket.
        location: String,
        /// What was wrong.
        reason: String,
        /// Whether trying again may help (a truncated body may; bad XML does not).
        retryable: bool,
        /// Retries and elapsed time.
        attempts: Attempts,
    },
    /// A byte range that cannot be read ([`ObjectStore::get_range`](super::ObjectStore::get_range)):
    /// reversed bounds, longer than [`MAX_RANGE_BYTES`](super::MAX_RANGE_BYTES), or reaching
    /// past the end of the object (a wrong offset, or the object is not the one expected).
    /// Offsets in bytes, `end` exclusive. Never retryable.
    #[error("cannot read bytes {start}..{end} of {location}: {reason}")]
    InvalidRange {
        /// The object.
        location: String,
        /// First byte asked for.
        start: u64,
        /// One past the last byte asked for.
        end: u64,
        /// What is wrong and, where known, the object's size.
        reason: String,
    },
    /// A local file could not be read or written.
    #[error(transparent)]
    Local(#[from] crate::fs::Error),
}

impl Error {
    /// True if the object (not the bucket) does not exist.
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::NotFound { .. } => true,
            Error::Local(e) => e.is_not_found(),
            _ => false,
        }
    }

    /// True if the same request may succeed later: HTTP 5xx (but 501 and 505: the server
    /// lacks what the request asks for, and always will), 429, 408, `SlowDown`,
    /// `RequestTimeout`, a conditional-write conflict (409), network failures and
    /// truncated bodies.
    pub fn is_retryable(&self) -> bool {
        if self.is_not_implemented() {
            return false;
        }
        match self {
            Error::Network { .. } => true,
            Error::Protocol { retryable, .. } => *retryable,
            Error::Http { status, code, .. } => {
                (*status >= 500 && *status != 505)
                    || *status == 429
                    || *status == 408
                    || matches!(
                        code.as_deref(),
                        Some(
                            "SlowDown"
                                | "RequestTimeout"
                                | "InternalError"
                                | "ConditionalRequestConflict"
                        )
                    )
            }
            _ => false,
        }
    }

    /// True if the server does not implement what the request asked for: HTTP 501, or the
    /// S3 code `NotImplemented` with any status (Ceph RGW, s3gw and other S3-compatible
    /// servers answer an `If-None-Match: *` write, an `UNSIGNED-PAYLOAD` part or a
    /// ListObjectsV2 request this way when they lack the feature). Never retryable; the
    /// S3 store falls back to what it can do without the feature (`docs/transport.md`).
    pub fn is_not_implemented(&self) -> bool {
        match self {
            Error::Http { status, code, .. } | Error::AccessDenied { status, code, .. } => {
                *status == 501 || code.as_deref() == Some("NotImplemented")
            }
            _ => false,
        }
    }

    /// True for malformed input that no request can fix (a usage error): an invalid object
    /// key, store URL, or setting ([`Error::InvalidKey`], [`Error::InvalidUrl`],
    /// [`Error::InvalidConfig`]). Their messages name what is invalid, so callers show them
    /// as they are, without a prefix of their own.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::InvalidKey { .. }
                | Error::InvalidUrl { .. }
                | Error::InvalidConfig { .. }
                | Error::Unsupported { .. }
        )
    }

    /// True if a store lacks a capability a use of it needs ([`Error::Unsupported`]).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Error::Unsupported { .. })
    }

    /// True if a ranged read asked for bytes the object does not hold, or for a range no
    /// call may ask for ([`Error::InvalidRange`]).
    pub fn is_invalid_range(&self) -> bool {
        matches!(self, Error::InvalidRange { .. })
    }

    /// True for authentication and authorisation failures: access denied (bad key,
    /// signature, clock skew, policy) and missing credentials.
    pub fn is_auth(&self) -> bool {
        matches!(self, Error::AccessDenied { .. } | Error::MissingCredentials { .. })
    }

    /// True if a request timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Network { kind: NetworkErrorKind::Timeout, .. })
    }

    /// The retry count and elapsed time, for errors that came from the network.
    pub fn attempts(&self) -> Option<Attempts> {
        match self {
            Error::NotFound { attempts, .. }
            | Error::NoSuchBucket { attempts, .. }
            | Error::AccessDenied { attempts, .. }
            | Error::WrongRegion { attempts, .. }
            | Error::Http { attempts, .. }
            | Error::Network { attempts, .. }
            | Error::Protocol { attempts, .. } => Some(*attempts),
            _ => None,
        }
    }

    /// Retries made before giving up (0 if none, or not a network error).
    pub fn retries(&self) -> u32 {
        self.attempts().map_or(0, |a| a.retries)
    }

    /// Time spent before giving up (zero if not a network error).
    pub fn elapsed(&self) -> Duration {
        self.attempts().map_or(Duration::ZERO, |a| a.elapsed)
    }

    /// Records the retry count and elapsed time on a network error.
    pub(crate) fn with_attempts(mut self, new: Attempts) -> Self {
        match &mut self {
            Error::NotFound { attempts, .. }
            | Error::NoSuchBucket { attempts, .. }
            | Error::AccessDenied { attempts, .. }
            | Error::WrongRegion { attempts, .. }
            | Error::Http { attempts, .. }
            | Error::Network { attempts, .. }
            | Error::Protocol { attempts, .. } => *attempts = new,
            _ => {}
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let http = |status: u16, code: Option<&str>| Error::Http {
            method: "PUT".into(),
            location: "s3://b/k".into(),
            status,
            code: code.map(str::to_owned),
            message: None,
            attempts: Attempts::default(),
        };
        assert!(http(500, None).is_retryable());
        assert!(http(503, Some("SlowDown")).is_retryable());
        assert!(http(429, None).is_retryable());
        assert!(http(408, None).is_retryable());
        assert!(!http(400, Some("InvalidArgument")).is_retryable());
        assert!(!http(412, Some("PreconditionFailed")).is_retryable());
        // A server that lacks a feature never gains it by being asked again.
        assert!(!http(501, Some("NotImplemented")).is_retryable());
        assert!(!http(501, None).is_retryable() && http(501, None).is_not_implemented());
        assert!(http(400, Some("NotImplemented")).is_not_implemented());
        assert!(!http(500, Some("InternalError")).is_not_implemented());
        let denied = Error::AccessDenied {
            method: "GET".into(),
            location: "s3://b/k".into(),
            status: 403,
            code: Some("SignatureDoesNotMatch".into()),
            message: None,
            anonymous: false,
            backend: Backend::S3,
            attempts: Attempts { retries: 0, elapsed: Duration::from_millis(20) },
        };
        assert!(denied.is_auth() && !denied.is_retryable() && !denied.is_not_found());
        assert!(denied.to_string().starts_with("access denied (check the credentials"), "{denied}");
        let unsigned = Error::AccessDenied {
            method: "GET".into(),
            location: "s3://b/k".into(),
            status: 403,
            code: None,
            message: None,
            anonymous: true,
            backend: Backend::S3,
            attempts: Attempts::default(),
        };
        assert!(
            unsigned.to_string().starts_with(
                "access denied (no credentials are set, so the request was anonymous: set \
                 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            ),
            "{unsigned}"
        );
        let missing =
            Error::NotFound { location: "s3://b/k".into(), attempts: Attempts::default() };
        assert!(missing.is_not_found());
        let e =
            http(500, None).with_attempts(Attempts { retries: 4, elapsed: Duration::from_secs(3) });
        assert_eq!(e.retries(), 4);
        assert!(e.to_string().contains("after 4 retries, 3.0s"), "{e}");
    }
}
