//! Ranged reads into memory ([`ObjectStore::get_range`](crate::transport::ObjectStore::get_range)):
//! one `GET` with `Range: bytes=start-last`, retried like every request; and small objects
//! read whole ([`get_small`]): one `GET`, no `HEAD`.
//!
//! Accepted answers:
//! * `206 Partial Content` whose `Content-Range` is `bytes start-last/total` for exactly the
//!   range asked for (and whose `Content-Length`, when sent, is its length). A `Content-Range`
//!   that starts where asked but ends early with a `total` below the range end (a server
//!   clamping the range to the object) is [`Error::InvalidRange`], as is a `416`.
//! * `200 OK` (a server that ignores `Range`): the whole object is streamed, bytes before
//!   `start` are dropped, `start..end` kept, and the connection is dropped once they arrived;
//!   an object shorter than `end` is [`Error::InvalidRange`].
//!
//! The body must deliver exactly the range: a body that breaks off or comes up short is a
//! retryable error (the whole `GET` is sent again), a longer one is an error. Memory is
//! bounded by the range length, itself capped at
//! [`MAX_RANGE_BYTES`](crate::transport::MAX_RANGE_BYTES).

use std::sync::atomic::AtomicU32;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};

use super::download::protocol_error;
use super::{Call, Exchange, body_error};
use crate::transport::{Attempts, Error, ObjectKey, check_range};

/// `Content-Range: bytes first-last/total` (`total` is `None` for `*`).
fn content_range(headers: &HeaderMap) -> Option<(u64, u64, Option<u64>)> {
    let text = headers.get("content-range")?.to_str().ok()?.trim();
    let rest = text.strip_prefix("bytes ")?;
    let (span, total) = rest.split_once('/')?;
    let (first, last) = span.split_once('-')?;
    let total = match total.trim() {
        "*" => None,
        number => Some(number.parse().ok()?),
    };
    Some((first.trim().parse().ok()?, last.trim().parse().ok()?, total))
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get("content-length")?.to_str().ok()?.trim().parse().ok()
}

fn invalid_range(location: &str, start: u64, end: u64, reason: String) -> Error {
    Error::InvalidRange { location: location.to_owned(), start, end, reason }
}

/// Bytes `start..end` of `key` (see the module docs), with `Connection: close` when
/// `close_connection` is set ([`crate::transport::NextRequest::None`]).
///
/// # Errors
/// [`Error::InvalidRange`] for bounds [`check_range`] refuses or a range past the end of the
/// object; [`Error::NotFound`]; network, HTTP and [`Error::Protocol`] errors.
pub(crate) async fn get_range(
    exchange: &impl Exchange,
    key: &ObjectKey,
    start: u64,
    end: u64,
    close_connection: bool,
    retries: &AtomicU32,
) -> Result<Vec<u8>, Error> {
    let location = exchange.location(key.as_str());
    check_range(&location, start, end)?;
    if start == end {
        // No byte to ask for (`bytes=a-(a-1)` is not a range): HEAD for existence and size.
        let meta = exchange.head(key, retries).await?.ok_or_else(|| Error::NotFound {
            location: location.clone(),
            attempts: Attempts::default(),
        })?;
        if end > meta.size_bytes {
            let reason = format!("the object holds only {} bytes", meta.size_bytes);
            return Err(invalid_range(&location, start, end, reason));
        }
        return Ok(Vec::new());
    }
    let mut call = Call::object(exchange, Method::GET, key.as_str());
    call.headers.push(("range", format!("bytes={start}-{}", end - 1)));
    call.close_connection = close_connection;
    let result = exchange
        .send(&call, retries, |response| {
            let location = location.clone();
            async move { read_range(response, &location, start, end).await }
        })
        .await;
    match result {
        Err(Error::Http { status: 416, .. }) => {
            let reason =
                format!("the object ends before byte {start} (HTTP 416 Range Not Satisfiable)");
            Err(invalid_range(&location, start, end, reason))
        }
        other => other,
    }
}

/// Reads one answer to the ranged `GET` of `start..end` (see the module docs).
async fn read_range(
    mut response: reqwest::Response,
    location: &str,
    start: u64,
    end: u64,
) -> Result<Vec<u8>, Error> {
    let length = end - start;
    let headers = response.headers();
    // Bytes of the body that precede the range (a 200 carries the whole object).
    let skip = match response.status() {
        StatusCode::PARTIAL_CONTENT => {
            match content_range(headers) {
                Some((first, last, _)) if first == start && last == end - 1 => {}
                Some((first, _, Some(total))) if first == start && total < end => {
                    let reason = format!("the object holds only {total} bytes");
                    return Err(invalid_range(location, start, end, reason));
                }
                Some((first, last, _)) => {
                    let reason =
                        format!("HTTP 206 for bytes {first}-{last}, asked for {start}-{}", end - 1);
                    return Err(protocol_error("GET", location, reason, false));
                }
                None => {
                    let reason = "HTTP 206 without a valid Content-Range".to_owned();
                    return Err(protocol_error("GET", location, reason, false));
                }
            }
            if let Some(declared) = content_length(headers)
                && declared != length
            {
                let reason =
                    format!("HTTP 206 with Content-Length {declared} for a {length}-byte range");
                return Err(protocol_error("GET", location, reason, false));
            }
            0
        }
        StatusCode::OK => {
            if let Some(size) = content_length(headers)
                && size < end
            {
                let reason = format!("the object holds only {size} bytes");
                return Err(invalid_range(location, start, end, reason));
            }
            start
        }
        status => {
            let reason = format!(
                "expected HTTP 206 (or 200) for bytes {start}-{}, got {}",
                end - 1,
                status.as_u16()
            );
            return Err(protocol_error("GET", location, reason, false));
        }
    };
    let whole = response.status() == StatusCode::OK;
    // Bounded by check_range (MAX_RANGE_BYTES).
    let mut out = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
    let mut seen = 0u64; // body bytes received
    while (out.len() as u64) < length {
        let Some(chunk) = response.chunk().await.map_err(|e| body_error("GET", location, e))?
        else {
            break;
        };
        let chunk_start = seen;
        seen += chunk.len() as u64;
        // The part of this chunk that lies in skip..skip+length, in chunk offsets.
        let from = skip.saturating_sub(chunk_start).min(chunk.len() as u64);
        let to = (skip + length).saturating_sub(chunk_start).min(chunk.len() as u64);
        if !whole && seen > length {
            let reason = format!("body longer than the {length} bytes of the range");
            return Err(protocol_error("GET", location, reason, false));
        }
        let from = usize::try_from(from).unwrap_or(usize::MAX);
        let to = usize::try_from(to).unwrap_or(usize::MAX);
        out.extend_from_slice(chunk.get(from..to).unwrap_or_default());
    }
    if (out.len() as u64) < length {
        if whole && content_length(response.headers()).is_none() {
            // A whole object without a declared length simply ended: it is too short.
            let reason = format!("the object holds only {seen} bytes");
            return Err(invalid_range(location, start, end, reason));
        }
        let reason = format!("body ended after {} of {length} bytes", out.len());
        return Err(protocol_error("GET", location, reason, true));
    }
    if !whole && response.chunk().await.map_err(|e| body_error("GET", location, e))?.is_some() {
        let reason = format!("body longer than the {length} bytes of the range");
        return Err(protocol_error("GET", location, reason, false));
    }
    Ok(out)
}

/// The whole object `key` of at most `max_bytes` bytes, or `None` if missing
/// ([`ObjectStore::get_small`](crate::transport::ObjectStore::get_small)): one `GET`; a
/// `Content-Length` above `max_bytes` is refused before the body is read, and a body that
/// grows past it is refused without reading further.
///
/// # Errors
/// [`Error::InvalidRange`] for an object above `max_bytes` (or `max_bytes` above
/// `MAX_RANGE_BYTES`); network, HTTP and [`Error::Protocol`] errors.
pub(crate) async fn get_small(
    exchange: &impl Exchange,
    key: &ObjectKey,
    max_bytes: u64,
    retries: &AtomicU32,
) -> Result<Option<Vec<u8>>, Error> {
    let location = exchange.location(key.as_str());
    check_range(&location, 0, max_bytes)?;
    let call = Call::object(exchange, Method::GET, key.as_str());
    let too_large = |size: &str| {
        let reason = format!("the object holds {size} bytes, more than the {max_bytes} read whole");
        invalid_range(&location, 0, max_bytes, reason)
    };
    let result = exchange
        .send(&call, retries, |mut response| {
            let location = location.clone();
            let too_large = &too_large;
            async move {
                if response.status() != StatusCode::OK {
                    let reason = format!("expected HTTP 200, got {}", response.status().as_u16());
                    return Err(protocol_error("GET", &location, reason, false));
                }
                let declared = content_length(response.headers());
                if let Some(size) = declared.filter(|n| *n > max_bytes) {
                    return Err(too_large(&size.to_string()));
                }
                let mut body = Vec::with_capacity(
                    usize::try_from(declared.unwrap_or(0).min(max_bytes)).unwrap_or(0),
                );
                while let Some(chunk) =
                    response.chunk().await.map_err(|e| body_error("GET", &location, e))?
                {
                    if (body.len() + chunk.len()) as u64 > max_bytes {
                        return Err(too_large("more than that"));
                    }
                    body.extend_from_slice(&chunk);
                }
                if let Some(size) = declared.filter(|n| *n != body.len() as u64) {
                    let reason = format!("body ended after {} of {size} bytes", body.len());
                    return Err(protocol_error("GET", &location, reason, true));
                }
                Ok(body)
            }
        })
        .await;
    match result {
        Ok(body) => Ok(Some(body)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_range() {
        let mut headers = HeaderMap::new();
        headers.insert("content-range", "bytes 10-19/100".parse().unwrap());
        assert_eq!(content_range(&headers), Some((10, 19, Some(100))));
        headers.insert("content-range", "bytes 0-0/*".parse().unwrap());
        assert_eq!(content_range(&headers), Some((0, 0, None)));
        headers.insert("content-range", "bytes */100".parse().unwrap());
        assert_eq!(content_range(&headers), None);
        headers.insert("content-range", "items 1-2/3".parse().unwrap());
        assert_eq!(content_range(&headers), None);
    }
}
