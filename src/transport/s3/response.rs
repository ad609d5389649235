//! Turning S3 responses into results: status mapping, the XML error body, and small XML
//! helpers shared by the other submodules.
//!
//! Mapping:
//! * 403/401 → [`Error::AccessDenied`] ("check the credentials / signature / clock skew", or that none are set);
//! * 404 `NoSuchBucket` → [`Error::NoSuchBucket`]; other 404 → [`Error::NotFound`];
//! * 301, `PermanentRedirect`, `AuthorizationHeaderMalformed` or
//!   `IllegalLocationConstraintException` → [`Error::WrongRegion`], naming the bucket's
//!   region from the `<Region>` element or the `x-amz-bucket-region` header (a 400 without
//!   a body, as a HEAD gets, naming another region in that header too; a 400 to a HEAD
//!   without it is asked again as a one-byte GET, whose body carries the code, see
//!   `Inner::head`);
//! * anything else → [`Error::Http`] with the S3 `Code` and `Message`.
//!
//! Error bodies are read up to 64 KiB; a body that is not XML is ignored.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use super::config::S3Config;
use crate::transport::wire::read_error_body;
use crate::transport::{Attempts, Error};

/// The fields of an S3 `<Error>` document.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct S3ErrorBody {
    /// `Code`, e.g. `NoSuchKey`.
    pub code: Option<String>,
    /// `Message`.
    pub message: Option<String>,
    /// `Region` (sent with redirects and `AuthorizationHeaderMalformed`).
    pub region: Option<String>,
}

/// The text of the first child element of `node` named `name`.
pub(crate) fn child_text(node: roxmltree::Node<'_, '_>, name: &str) -> Option<String> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
        .map(|c| c.text().unwrap_or_default().to_owned())
}

/// Parses an S3 `<Error>` document; `None` if `body` is not one.
pub(crate) fn parse_error_body(body: &str) -> Option<S3ErrorBody> {
    let document = roxmltree::Document::parse(body).ok()?;
    let root = document.root_element();
    if root.tag_name().name() != "Error" {
        return None;
    }
    let clean = |s: Option<String>| s.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    Some(S3ErrorBody {
        code: clean(child_text(root, "Code")),
        message: clean(child_text(root, "Message")),
        region: clean(child_text(root, "Region")),
    })
}

/// Maps a non-success `response` of `method` on `location` to an [`Error`], reading the
/// XML error body.
pub(crate) async fn error_from_response(
    method: &str,
    location: &str,
    config: &S3Config,
    response: reqwest::Response,
) -> Error {
    let status = response.status();
    let headers = response.headers().clone();
    let body = if method == "HEAD" { String::new() } else { read_error_body(response).await };
    let parsed = parse_error_body(&body).unwrap_or_default();
    classify(method, location, config, status, &headers, parsed)
}

/// Maps a status, headers and parsed error body to an [`Error`] (no I/O; unit-tested).
pub(crate) fn classify(
    method: &str,
    location: &str,
    config: &S3Config,
    status: StatusCode,
    headers: &HeaderMap,
    body: S3ErrorBody,
) -> Error {
    let attempts = Attempts::default();
    let header_region =
        headers.get("x-amz-bucket-region").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let code = body.code.as_deref();
    let named_region = body.region.clone().or(header_region);
    // A HEAD has no body to carry a code: a 400 naming another region in its
    // `x-amz-bucket-region` header is the same mistake (AWS answers a HEAD signed for the
    // wrong region so).
    let region_error = status == StatusCode::MOVED_PERMANENTLY
        || matches!(
            code,
            Some(
                "PermanentRedirect"
                    | "AuthorizationHeaderMalformed"
                    | "IllegalLocationConstraintException"
            )
        )
        || (status == StatusCode::BAD_REQUEST && code.is_none() && named_region.is_some());
    if region_error && named_region.as_deref() != Some(config.region.as_str()) {
        return Error::WrongRegion {
            location: location.to_owned(),
            configured: config.region.clone(),
            bucket_region: named_region,
            status: status.as_u16(),
            attempts,
        };
    }
    match (status.as_u16(), code) {
        (404, Some("NoSuchBucket")) => Error::NoSuchBucket {
            bucket: config.bucket.clone(),
            endpoint: config.endpoint.as_str().trim_end_matches('/').to_owned(),
            attempts,
        },
        (404, Some("NoSuchKey") | None) => {
            Error::NotFound { location: location.to_owned(), attempts }
        }
        (401 | 403, _) => Error::AccessDenied {
            method: method.to_owned(),
            location: location.to_owned(),
            status: status.as_u16(),
            code: body.code,
            message: body.message,
            anonymous: config.credentials.is_none(),
            backend: crate::transport::Backend::S3,
            attempts,
        },
        _ => Error::Http {
            method: method.to_owned(),
            location: location.to_owned(),
            status: status.as_u16(),
            code: body.code,
            message: body.message,
            attempts,
        },
    }
}

/// Escapes text for an XML element body.
pub(crate) fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store `s3://bkt/p`, with stub credentials when `signed`, else anonymous.
    fn config_with(signed: bool) -> S3Config {
        let url =
            match "s3://bkt/p?region=us-east-1".parse::<crate::transport::StoreUrl>().unwrap().0 {
                crate::transport::url::Location::S3(s3) => s3,
                other => panic!("{other:?}"),
            };
        let env = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" if signed => Some("stub-access".to_owned()),
            "AWS_SECRET_ACCESS_KEY" if signed => Some("stub-secret".to_owned()),
            _ => None,
        };
        S3Config::from_url(&url, &env).unwrap()
    }

    fn config() -> S3Config {
        config_with(false)
    }

    fn map(status: u16, body: &str, headers: &[(&'static str, &'static str)]) -> Error {
        let mut map = HeaderMap::new();
        for (n, v) in headers {
            map.insert(*n, v.parse().unwrap());
        }
        let parsed = parse_error_body(body).unwrap_or_default();
        classify(
            "GET",
            "s3://bkt/p/k",
            &config(),
            StatusCode::from_u16(status).unwrap(),
            &map,
            parsed,
        )
    }

    #[test]
    fn maps_statuses() {
        let e = map(404, "<Error><Code>NoSuchBucket</Code><Message>no</Message></Error>", &[]);
        assert!(matches!(e, Error::NoSuchBucket { .. }) && !e.is_not_found(), "{e}");
        let e = map(404, "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code></Error>", &[]);
        assert!(e.is_not_found(), "{e}");
        let e = map(
            403,
            "<Error><Code>SignatureDoesNotMatch</Code><Message>sig</Message></Error>",
            &[],
        );
        assert!(e.is_auth());
        assert!(
            e.to_string().contains("access denied (no credentials are set, so the request was"),
            "{e}"
        );
        let body = "<Error><Code>SignatureDoesNotMatch</Code><Message>sig</Message></Error>";
        let e = classify(
            "GET",
            "s3://bkt/p/k",
            &config_with(true),
            StatusCode::FORBIDDEN,
            &HeaderMap::new(),
            parse_error_body(body).unwrap_or_default(),
        );
        assert!(
            e.to_string().contains(
                "access denied (check the credentials / signature / clock skew) for s3://bkt/p/k"
            ),
            "{e}"
        );
        let e = map(301, "", &[("x-amz-bucket-region", "eu-west-1")]);
        assert!(e.to_string().contains("the bucket is in eu-west-1; set region=eu-west-1"), "{e}");
        let e = map(
            400,
            "<Error><Code>AuthorizationHeaderMalformed</Code><Region>ap-southeast-1</Region></Error>",
            &[],
        );
        assert!(
            matches!(&e, Error::WrongRegion { bucket_region: Some(r), .. } if r == "ap-southeast-1"),
            "{e}"
        );
        let e = map(503, "<Error><Code>SlowDown</Code></Error>", &[]);
        assert!(e.is_retryable(), "{e}");
        let e = map(500, "not xml", &[]);
        assert!(e.is_retryable() && e.to_string().contains("HTTP 500"), "{e}");
    }

    #[test]
    fn escapes_xml() {
        assert_eq!(xml_escape("\"a\"&<b>"), "&quot;a&quot;&amp;&lt;b&gt;");
    }
}
