//! [`HttpConfig`]: base URL, layout and credentials of an HTTP cache store.
//!
//! Credentials come from the environment, never from the URL (docs/transport.md):
//! * `STRATA_HTTP_TOKEN`: sent as `Authorization: Bearer <token>`;
//! * else `STRATA_HTTP_USER` + `STRATA_HTTP_PASSWORD`: HTTP basic authentication;
//! * else none: requests are anonymous (reads of an open server; writes where the server
//!   takes anonymous uploads, which a writer declares with `STRATA_HTTP_ANONYMOUS_WRITES=1`).

use std::fmt;

use base64::Engine;
use reqwest::Url;

use crate::transport::{Error, HttpUrl, Layout, Secret};

/// The token variable.
pub(crate) const TOKEN: &str = "STRATA_HTTP_TOKEN";
/// The basic-authentication user variable.
pub(crate) const USER: &str = "STRATA_HTTP_USER";
/// The basic-authentication password variable.
pub(crate) const PASSWORD: &str = "STRATA_HTTP_PASSWORD";
/// The variable a writer sets for a server that takes anonymous uploads.
pub(crate) const ANONYMOUS_WRITES: &str = "STRATA_HTTP_ANONYMOUS_WRITES";

/// How requests authenticate. `Debug` never shows a credential.
#[derive(Clone)]
pub(crate) enum HttpAuth {
    /// `Authorization: Bearer <token>`.
    Bearer(Secret),
    /// `Authorization: Basic base64(user:password)`.
    Basic {
        /// The user.
        user: Secret,
        /// The password.
        password: Secret,
    },
}

impl fmt::Debug for HttpAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.source())
    }
}

impl HttpAuth {
    /// Which variables the credentials came from.
    fn source(&self) -> &'static str {
        match self {
            HttpAuth::Bearer(_) => TOKEN,
            HttpAuth::Basic { .. } => "STRATA_HTTP_USER/STRATA_HTTP_PASSWORD",
        }
    }

    /// The `Authorization` header's value.
    pub(crate) fn header_value(&self) -> String {
        match self {
            HttpAuth::Bearer(token) => format!("Bearer {}", token.expose()),
            HttpAuth::Basic { user, password } => {
                let pair = format!("{}:{}", user.expose(), password.expose());
                format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
            }
        }
    }
}

fn non_empty(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.trim().is_empty())
}

/// The user/password pair when only one half of it is set, as `(set, missing)`.
pub(crate) fn incomplete_credential_pairs(
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(&'static str, &'static str)> {
    match (non_empty(env, USER).is_some(), non_empty(env, PASSWORD).is_some()) {
        (true, false) => vec![(USER, PASSWORD)],
        (false, true) => vec![(PASSWORD, USER)],
        _ => Vec::new(),
    }
}

/// True if `env` holds a token, a complete user/password pair, or
/// `STRATA_HTTP_ANONYMOUS_WRITES` switched on.
pub(crate) fn has_writer_credentials(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let anonymous = non_empty(env, ANONYMOUS_WRITES)
        .is_some_and(|text| crate::config::parse_switch(&text).unwrap_or(false));
    non_empty(env, TOKEN).is_some()
        || (non_empty(env, USER).is_some() && non_empty(env, PASSWORD).is_some())
        || anonymous
}

/// Everything needed to address and authenticate requests to one HTTP cache store.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Scheme, host, port and base path (no trailing `/`).
    pub base: Url,
    /// Where objects lie under the base ([`Layout`]).
    pub layout: Layout,
    /// Credentials, or `None` for anonymous requests.
    pub(crate) auth: Option<HttpAuth>,
}

impl HttpConfig {
    /// Resolves `url` against the environment `env` (see the module docs).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming both variables when only one of
    /// `STRATA_HTTP_USER` and `STRATA_HTTP_PASSWORD` is set (and no token).
    pub fn from_url(url: &HttpUrl, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let auth = match (non_empty(env, TOKEN), non_empty(env, USER), non_empty(env, PASSWORD)) {
            (Some(token), _, _) => Some(HttpAuth::Bearer(Secret::new(token.trim()))),
            (None, Some(user), Some(password)) => Some(HttpAuth::Basic {
                user: Secret::new(user.trim()),
                password: Secret::new(password),
            }),
            (None, None, None) => None,
            (None, _, _) => {
                return Err(Error::InvalidConfig {
                    name: format!("{USER}/{PASSWORD}"),
                    value: String::new(),
                    reason: format!(
                        "only one of {USER} and {PASSWORD} is set; set both or neither"
                    ),
                });
            }
        };
        Ok(Self { base: url.base.clone(), layout: url.layout, auth })
    }

    /// True when no credentials are set (requests are anonymous).
    pub fn is_anonymous(&self) -> bool {
        self.auth.is_none()
    }

    /// The base URL without a trailing `/`.
    fn base_text(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    /// The path of the object `key` under the base URL (percent-encoded): `key` itself
    /// (flat), or `ac/<64 hex>` (bazel), the SHA-256 of `<base path>/<key>` with the base
    /// path's slashes at its ends removed (`<key>` alone for an empty base path).
    pub fn object_path(&self, key: &str) -> String {
        match self.layout {
            Layout::Flat => crate::transport::wire::encode_key(key),
            Layout::Bazel => {
                let base = self.base.path().trim_matches('/');
                let named = if base.is_empty() { key.to_owned() } else { format!("{base}/{key}") };
                format!("ac/{}", crate::digest::Sha256Digest::of_bytes(named.as_bytes()).to_hex())
            }
        }
    }

    /// The request URL of `path` (an [`HttpConfig::object_path`], or a collection path
    /// ending in `/`), or of the base itself for `None`.
    pub(crate) fn request_url(&self, path: Option<&str>) -> String {
        match path {
            Some(path) => format!("{}/{path}", self.base_text()),
            None => format!("{}/", self.base_text()),
        }
    }

    /// The object `key` as messages name it: `<base>/<key>` (flat), or
    /// `<base>/ac/<64 hex> (<key>)` (bazel).
    pub fn location(&self, key: &str) -> String {
        match self.layout {
            Layout::Flat => format!("{}/{key}", self.base_text()),
            Layout::Bazel => format!("{}/{} ({key})", self.base_text(), self.object_path(key)),
        }
    }

    /// One-line description without secrets, e.g.
    /// `http://127.0.0.1:8080/cache (layout flat, anonymous)`.
    pub fn describe(&self) -> String {
        let layout = match self.layout {
            Layout::Flat => "flat",
            Layout::Bazel => "bazel",
        };
        let auth = match &self.auth {
            Some(auth) => format!("credentials from {}", auth.source()),
            None => "anonymous".to_owned(),
        };
        format!("{} (layout {layout}, {auth})", self.base_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, env: &[(&str, &str)]) -> Result<HttpConfig, Error> {
        let parsed: crate::transport::StoreUrl = url.parse().unwrap();
        let crate::transport::url::Location::Http(http) = parsed.0 else { panic!("{url}") };
        let lookup =
            |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned());
        HttpConfig::from_url(&http, &lookup)
    }

    #[test]
    fn layouts_place_objects() {
        let flat = config("http://h:1/cache/", &[]).unwrap();
        assert_eq!(
            flat.request_url(Some(&flat.object_path("~refs/a b"))),
            "http://h:1/cache/~refs/a%20b"
        );
        assert_eq!(flat.location("~refs/a b"), "http://h:1/cache/~refs/a b");
        let bazel = config("http://h:1/strata?layout=bazel", &[]).unwrap();
        // sha256("strata/k")
        let path = bazel.object_path("k");
        assert!(path.starts_with("ac/") && path.len() == 67, "{path}");
        assert_eq!(
            path,
            format!("ac/{}", crate::digest::Sha256Digest::of_bytes(b"strata/k").to_hex())
        );
        let root = config("http://h:1?layout=bazel", &[]).unwrap();
        assert_eq!(
            root.object_path("k"),
            format!("ac/{}", crate::digest::Sha256Digest::of_bytes(b"k").to_hex())
        );
        assert_eq!(root.request_url(Some("ac/x")), "http://h:1/ac/x");
    }

    #[test]
    fn credentials_order_and_redaction() {
        let c = config("https://h/p", &[(TOKEN, "tok-secret"), (USER, "u")]).unwrap();
        assert_eq!(c.auth.as_ref().unwrap().header_value(), "Bearer tok-secret");
        let shown = format!("{c:?} {}", c.describe());
        assert!(!shown.contains("tok-secret"), "{shown}");
        assert!(c.describe().ends_with("(layout flat, credentials from STRATA_HTTP_TOKEN)"));
        let c = config("https://h/p", &[(USER, "Aladdin"), (PASSWORD, "open sesame")]).unwrap();
        // RFC 7617's example.
        assert_eq!(c.auth.unwrap().header_value(), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        let err = config("https://h/p", &[(PASSWORD, "pw-secret")]).unwrap_err().to_string();
        assert!(err.contains("STRATA_HTTP_USER") && !err.contains("pw-secret"), "{err}");
        assert!(config("https://h/p", &[]).unwrap().is_anonymous());
    }
}
