//! Network failures of the HTTP backends, and the bounded read of an error answer's body.

use crate::transport::{Attempts, Error, NetworkErrorKind, NetworkPhase};

const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// A network-level failure of `method` on `location` while sending it or waiting for the
/// answer's head.
pub(crate) fn network_error(method: &str, location: &str, source: reqwest::Error) -> Error {
    network_error_in(method, location, source, NetworkPhase::Request)
}

/// A network-level failure of `method` on `location` while reading the answer's body
/// (the head had arrived): the message says so, whatever the client's own error text
/// ("error sending request", "error decoding response body") suggests.
pub(crate) fn body_error(method: &str, location: &str, source: reqwest::Error) -> Error {
    network_error_in(method, location, source, NetworkPhase::Body)
}

fn network_error_in(
    method: &str,
    location: &str,
    source: reqwest::Error,
    phase: NetworkPhase,
) -> Error {
    let kind = if source.is_timeout() {
        NetworkErrorKind::Timeout
    } else if source.is_connect() {
        NetworkErrorKind::Connect
    } else {
        NetworkErrorKind::Other
    };
    // Drop the URL from the client's error: it may carry query parameters we do not want
    // repeated (upload ids), and the location already names the object.
    Error::Network {
        method: method.to_owned(),
        location: location.to_owned(),
        kind,
        phase,
        attempts: Attempts::default(),
        source: source.without_url(),
    }
}

/// Reads at most 64 KiB of `response`'s body as text (lossy UTF-8).
pub(crate) async fn read_error_body(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(MAX_ERROR_BODY_BYTES);
    String::from_utf8_lossy(&body).into_owned()
}
