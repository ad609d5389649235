//! [`StoreUrl`]: parsing `file://`, `s3://` and `http(s)://` store URLs.
//!
//! Forms (docs/transport.md):
//! * `file:///abs/dir` or a bare absolute path `/abs/dir`: a directory store;
//! * `s3://bucket[/prefix][?endpoint=URL&region=NAME&addressing=path|virtual|auto]`: an
//!   S3-compatible store. The prefix is `/`-separated, without leading or trailing `/`; every
//!   key is stored as `prefix/key`. Query values may be percent-encoded. Unknown parameters
//!   are rejected so typos do not silently change behaviour.
//! * `http://host[:port][/path][?layout=flat|bazel]` (or `https://`): an HTTP build-cache
//!   server (WebDAV, ccache's HTTP storage, bazel-remote). `layout=flat` (the default)
//!   stores the object `k` at `<path>/k`; `layout=bazel` at `<path>/ac/<64 hex>`, the
//!   SHA-256 of `<path without slashes at its ends>/k` (bazel-remote's action cache).
//!
//! A parsed URL never holds a credential: user information in the URL is refused.
//! Everything a store URL means beyond its syntax (credentials, capabilities, which
//! backend) is in [`super::registry`].

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use percent_encoding::percent_decode_str;

use super::{Error, ObjectKey};

/// How the bucket appears in request URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Addressing {
    /// `https://endpoint/bucket/key` (MinIO, s3s, IP endpoints).
    Path,
    /// `https://bucket.endpoint/key` (AWS S3, Huawei OBS).
    Virtual,
    /// Path-style for IP-literal and `localhost` endpoints and for bucket names containing
    /// `.` (which break TLS wildcard certificates); virtual-hosted otherwise. The default.
    #[default]
    Auto,
}

impl FromStr for Addressing {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "path" => Ok(Addressing::Path),
            "virtual" => Ok(Addressing::Virtual),
            "auto" => Ok(Addressing::Auto),
            other => Err(format!("addressing={other:?} must be path, virtual or auto")),
        }
    }
}

/// The S3 part of a store URL, before the environment fills in defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Url {
    /// Bucket name.
    pub bucket: String,
    /// Key prefix without leading or trailing `/`; empty for the bucket root.
    pub prefix: String,
    /// `endpoint=` (scheme, host, optional port), if given.
    pub endpoint: Option<String>,
    /// `region=`, if given.
    pub region: Option<String>,
    /// `addressing=`, [`Addressing::Auto`] if absent.
    pub addressing: Addressing,
}

/// Where an HTTP store puts an object under its base URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// `<base>/<key>`: WebDAV servers, ccache's `layout=flat`.
    #[default]
    Flat,
    /// `<base>/ac/<64 hex>`, the SHA-256 of `<base path>/<key>`: bazel-remote's action
    /// cache (ccache's `layout=bazel`).
    Bazel,
}

impl FromStr for Layout {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "flat" => Ok(Layout::Flat),
            "bazel" => Ok(Layout::Bazel),
            other => Err(format!("layout={other:?} must be flat or bazel")),
        }
    }
}

/// The HTTP part of a store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    /// Scheme (`http` or `https`), host and port, and the base path without a trailing
    /// `/` (percent-encoded as given).
    pub base: reqwest::Url,
    /// `layout=`, [`Layout::Flat`] if absent.
    pub layout: Layout,
}

/// What a store URL names (one variant per backend; matched only inside `transport`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// A local directory (absolute path).
    File(PathBuf),
    /// An S3-compatible bucket and prefix.
    S3(S3Url),
    /// An HTTP build-cache server.
    Http(HttpUrl),
}

/// A parsed store URL: a directory, an S3 bucket and prefix, or an HTTP cache server
/// (see the module docs). What it can do and which credentials it reads are asked of it
/// ([`StoreUrl::capabilities`], [`StoreUrl::has_writer_credentials`]); it is opened with
/// [`StoreUrl::open`].
///
/// ```
/// use strata::transport::StoreUrl;
/// let url: StoreUrl = "s3://bucket/ci/cache?region=eu-west-1".parse().unwrap();
/// assert_eq!(url.to_string(), "s3://bucket/ci/cache?region=eu-west-1");
/// assert_eq!("/var/cache".parse::<StoreUrl>().unwrap().to_string(), "file:///var/cache");
/// let http: StoreUrl = "https://cache.example:8443/strata/?layout=bazel".parse().unwrap();
/// assert_eq!(http.to_string(), "https://cache.example:8443/strata?layout=bazel");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl(pub(crate) Location);

impl StoreUrl {
    /// The directory store at `root` (an absolute path).
    pub fn directory(root: impl Into<PathBuf>) -> Self {
        StoreUrl(Location::File(root.into()))
    }

    /// The directory of a `file://` URL, `None` for other stores.
    pub fn local_directory(&self) -> Option<&std::path::Path> {
        match &self.0 {
            Location::File(root) => Some(root),
            _ => None,
        }
    }
}

fn invalid(url: &str, reason: impl Into<String>) -> Error {
    Error::InvalidUrl { url: redact_store_url(url), reason: reason.into() }
}

/// The query parameters a store URL knows; only their values are ever shown.
const KNOWN_PARAMETERS: [&str; 4] = ["endpoint", "region", "addressing", "layout"];

/// `name` if it looks like a parameter name (ASCII letters, digits, `-`, `_`, `.`, at most
/// 40 characters), else a placeholder: a bare token in a query may be a pasted secret.
fn shown_name(name: &str) -> &str {
    let plausible = !name.is_empty()
        && name.len() <= 40
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if plausible { name } else { "***" }
}

/// A store URL as it may appear in messages: `user:password@` becomes `***@` anywhere, and
/// the value of every query parameter other than `endpoint`, `region`, `addressing` and
/// `layout` becomes `***` (as does every bare query token that is not one of those names), so a
/// secret pasted into a URL (`?secret=…`, `&x-amz-security-token=…`) is never echoed.
///
/// ```
/// use strata::transport::redact_store_url;
/// assert_eq!(redact_store_url("s3://b/p?region=x&token=abc"), "s3://b/p?region=x&token=***");
/// ```
pub fn redact_store_url(url: &str) -> String {
    let text = redact_userinfo(url);
    let Some((head, query)) = text.split_once('?') else { return text };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if KNOWN_PARAMETERS.contains(&name) => format!("{name}={value}"),
            Some((name, _)) => format!("{}=***", shown_name(name)),
            // A bare token may be a pasted secret, however plausible it looks.
            None if KNOWN_PARAMETERS.contains(&pair) => pair.to_owned(),
            None => "***".to_owned(),
        })
        .collect();
    format!("{head}?{}", pairs.join("&"))
}

/// Replaces `user:password@` in anything URL-like with `***@`, so a credential pasted into
/// a URL is never echoed.
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("://") {
        let (head, tail) = rest.split_at(start + 3);
        out.push_str(head);
        let authority_end = tail.find(['/', '?', '&', '#']).unwrap_or(tail.len());
        let (authority, after) = tail.split_at(authority_end);
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***");
                out.push_str(authority.get(at..).unwrap_or_default());
            }
            None => out.push_str(authority),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

fn decode(url: &str, value: &str) -> Result<String, Error> {
    percent_decode_str(value)
        .decode_utf8()
        .map(|v| v.into_owned())
        .map_err(|_| invalid(url, "a query value is not valid UTF-8 after percent-decoding"))
}

fn parse_s3(url: &str, rest: &str) -> Result<S3Url, Error> {
    if rest.contains('#') {
        return Err(invalid(url, "an s3 URL takes no fragment (#…); percent-encode '#' as %23"));
    }
    let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (bucket, prefix) = location.split_once('/').unwrap_or((location, ""));
    if bucket.is_empty() {
        return Err(invalid(url, "the bucket name is missing"));
    }
    if bucket.contains('@') {
        return Err(invalid(
            url,
            "credentials do not belong in the URL; use environment variables",
        ));
    }
    if !bucket.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')) {
        return Err(invalid(
            url,
            "a bucket name may only contain letters, digits, '.', '-' and '_'",
        ));
    }
    let prefix = prefix.trim_matches('/');
    if !prefix.is_empty() {
        ObjectKey::new(prefix).map_err(|e| match e {
            Error::InvalidKey { reason, .. } => invalid(url, format!("bad prefix: {reason}")),
            other => invalid(url, format!("bad prefix: {other}")),
        })?;
    }
    let mut s3 = S3Url {
        bucket: bucket.to_owned(),
        prefix: prefix.to_owned(),
        endpoint: None,
        region: None,
        addressing: Addressing::Auto,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode(url, value)?;
        match name {
            "endpoint" if !value.is_empty() => s3.endpoint = Some(value),
            "region" if !value.is_empty() => s3.region = Some(value),
            "addressing" => s3.addressing = value.parse().map_err(|e: String| invalid(url, e))?,
            "endpoint" | "region" => return Err(invalid(url, format!("{name}= is empty"))),
            other => {
                // A bare token (no `=`) may be a pasted secret: not even its name is shown.
                let shown = if pair.contains('=') { shown_name(other) } else { "***" };
                return Err(invalid(
                    url,
                    format!(
                        "unknown parameter {shown:?} (known: endpoint, region, addressing; values \
                         of other parameters are never shown)"
                    ),
                ));
            }
        }
    }
    Ok(s3)
}

fn parse_http(url: &str) -> Result<HttpUrl, Error> {
    let mut base =
        reqwest::Url::parse(url).map_err(|e| invalid(url, format!("not a URL ({e})")))?;
    if base.host_str().is_none_or(str::is_empty) {
        return Err(invalid(url, "the host is missing"));
    }
    if !base.username().is_empty() || base.password().is_some() {
        return Err(invalid(
            url,
            "credentials do not belong in the URL; set STRATA_HTTP_TOKEN, or STRATA_HTTP_USER \
             and STRATA_HTTP_PASSWORD",
        ));
    }
    if base.fragment().is_some() {
        return Err(invalid(url, "an http store URL takes no fragment (#…)"));
    }
    let mut layout = Layout::Flat;
    for pair in base.query().unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "layout" => {
                layout = decode(url, value)?.parse().map_err(|e: String| invalid(url, e))?
            }
            other => {
                let shown = if pair.contains('=') { shown_name(other) } else { "***" };
                return Err(invalid(
                    url,
                    format!(
                        "unknown parameter {shown:?} (known: layout; values of other parameters \
                         are never shown)"
                    ),
                ));
            }
        }
    }
    base.set_query(None);
    let path = base.path().trim_end_matches('/').to_owned();
    base.set_path(&path);
    Ok(HttpUrl { base, layout })
}

impl FromStr for StoreUrl {
    type Err = Error;

    fn from_str(url: &str) -> Result<Self, Error> {
        if let Some(rest) = url.strip_prefix("s3://") {
            return parse_s3(url, rest).map(|s3| StoreUrl(Location::S3(s3)));
        }
        if url.starts_with("http://") || url.starts_with("https://") {
            return parse_http(url).map(|http| StoreUrl(Location::Http(http)));
        }
        if url.contains(['?', '#']) && !url.starts_with('/') {
            // A query or fragment on a directory store is a mistake (or a pasted secret),
            // never part of the directory name.
            return Err(invalid(url, "a file URL takes no query (?…) or fragment (#…)"));
        }
        let path = if let Some(rest) = url.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(invalid(url, "a file URL needs an absolute path: file:///abs/dir"));
            }
            decode(url, rest)?
        } else if url.starts_with('/') {
            url.to_owned()
        } else {
            return Err(invalid(url, "unknown scheme or relative path"));
        };
        let trimmed = path.trim_end_matches('/');
        Ok(StoreUrl::directory(PathBuf::from(if trimmed.is_empty() { "/" } else { trimmed })))
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Location::File(path) => write!(f, "file://{}", path.display()),
            Location::Http(http) => {
                write!(f, "{}", http.base.as_str().trim_end_matches('/'))?;
                match http.layout {
                    Layout::Flat => Ok(()),
                    Layout::Bazel => write!(f, "?layout=bazel"),
                }
            }
            Location::S3(s3) => {
                write!(f, "s3://{}", s3.bucket)?;
                if !s3.prefix.is_empty() {
                    write!(f, "/{}", s3.prefix)?;
                }
                let mut params = Vec::new();
                if let Some(endpoint) = &s3.endpoint {
                    params.push(format!("endpoint={endpoint}"));
                }
                if let Some(region) = &s3.region {
                    params.push(format!("region={region}"));
                }
                match s3.addressing {
                    Addressing::Auto => {}
                    Addressing::Path => params.push("addressing=path".into()),
                    Addressing::Virtual => params.push("addressing=virtual".into()),
                }
                if !params.is_empty() {
                    write!(f, "?{}", params.join("&"))?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(url: &str) -> S3Url {
        match url.parse::<StoreUrl>().unwrap().0 {
            Location::S3(s3) => s3,
            other => panic!("{other:?}"),
        }
    }

    fn http(url: &str) -> HttpUrl {
        match url.parse::<StoreUrl>().unwrap().0 {
            Location::Http(http) => http,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_http_urls() {
        let u = http("http://127.0.0.1:8080/cache/strata/");
        assert_eq!(u.base.as_str(), "http://127.0.0.1:8080/cache/strata");
        assert_eq!(u.layout, Layout::Flat);
        let u = http("https://cache.example/?layout=bazel");
        assert_eq!((u.base.path(), u.layout), ("/", Layout::Bazel));
        for bad in [
            "http://user:secret@host/x",
            "http://host/x?layout=subdirs",
            "http://host/x?token=abc",
            "http://host/x#frag",
            "http://",
        ] {
            let err = bad.parse::<StoreUrl>().unwrap_err();
            assert!(matches!(err, Error::InvalidUrl { .. }), "{bad}: {err}");
            let text = err.to_string();
            assert!(!text.contains("secret") && !text.contains("abc"), "{text}");
        }
    }

    #[test]
    fn parses_s3_urls() {
        let u = s3(
            "s3://my-bucket/a/b/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=cn-north-4&addressing=path",
        );
        assert_eq!(u.bucket, "my-bucket");
        assert_eq!(u.prefix, "a/b");
        assert_eq!(u.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(u.region.as_deref(), Some("cn-north-4"));
        assert_eq!(u.addressing, Addressing::Path);
        let u = s3("s3://bucket?endpoint=https://obs.cn-north-4.myhuaweicloud.com");
        assert_eq!(u.prefix, "");
        assert_eq!(u.addressing, Addressing::Auto);
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in [
            "s3://",
            "s3:///prefix",
            "s3://b/../x",
            "s3://b?addressing=sideways",
            "s3://b?regoin=x",
            "s3://b?endpoint=",
            "relative/dir",
            "file://relative",
            "ftp://example.com/x",
        ] {
            let err = bad.parse::<StoreUrl>().unwrap_err();
            assert!(matches!(err, Error::InvalidUrl { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn never_echoes_userinfo() {
        let err = "s3://AKID:hunter2@bucket/x".parse::<StoreUrl>().unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert_eq!(
            redact_userinfo("x?endpoint=https://u:p@host/a"),
            "x?endpoint=https://***@host/a"
        );
    }

    #[test]
    fn never_echoes_query_values() {
        for (url, secret) in [
            ("s3://b/p?secret=hunter2", "hunter2"),
            ("s3://b/p?region=x&x-amz-security-token=tok3n", "tok3n"),
            ("s3://b/p?AKIAEXAMPLE/SECRETVALUE+x", "SECRETVALUE"),
            ("s3://b/p?SEKRET15", "SEKRET15"),
            ("file:///tmp/fq?token=SEKRET8", "SEKRET8"),
        ] {
            let err = url.parse::<StoreUrl>().unwrap_err();
            assert!(!err.to_string().contains(secret), "{err}");
            assert!(!redact_store_url(url).contains(secret), "{}", redact_store_url(url));
        }
        assert_eq!(
            redact_store_url("s3://b/p?endpoint=https://u:p@h&region=r&secret=s"),
            "s3://b/p?endpoint=https://***@h&region=r&secret=***"
        );
    }

    #[test]
    fn file_urls() {
        assert_eq!(
            "file:///tmp/store/".parse::<StoreUrl>().unwrap(),
            StoreUrl::directory("/tmp/store")
        );
        assert_eq!("/tmp/a%20b".parse::<StoreUrl>().unwrap(), StoreUrl::directory("/tmp/a%20b"));
        assert_eq!(
            "file:///tmp/a%20b".parse::<StoreUrl>().unwrap(),
            StoreUrl::directory("/tmp/a b")
        );
    }
}
