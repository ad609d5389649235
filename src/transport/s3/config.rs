//! [`S3Config`]: endpoint, region, addressing and credentials of an S3 store.
//!
//! Resolution (docs/transport.md), first match wins:
//! * endpoint: `endpoint=` in the URL, `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, else
//!   `https://s3.<region>.amazonaws.com`;
//! * region: `region=`, `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`;
//! * addressing: `addressing=`; `auto` (the default) is path-style for IP-literal and
//!   `localhost` endpoints and for bucket names with a `.`, an upper-case letter or `_`,
//!   virtual-hosted otherwise; `virtual` where it cannot work (those endpoints, those
//!   upper-case or `_` names) is [`Error::InvalidConfig`], before any request;
//! * credentials: `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`),
//!   else `HW_OBS_AK` + `HW_OBS_SK` (+ `HW_OBS_TOKEN`), else none: requests are sent
//!   unsigned (anonymous reads) and writes fail with [`Error::MissingCredentials`].

use std::fmt;

use reqwest::Url;

use crate::transport::wire::{encode_component, encode_key};
use crate::transport::{Addressing, Error, S3Url, Secret};

/// Static credentials. `Debug` never shows any part of them.
#[derive(Clone)]
pub struct Credentials {
    /// Access key id (not secret by itself, but never printed either).
    pub access_key_id: Secret,
    /// Secret access key.
    pub secret_access_key: Secret,
    /// Session token of temporary credentials.
    pub session_token: Option<Secret>,
    /// Which variables they came from, e.g. "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY".
    pub source: &'static str,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials(*** from {})", self.source)
    }
}

/// Everything needed to address and sign requests to one bucket and prefix.
#[derive(Debug, Clone)]
pub struct S3Config {
    /// Bucket name.
    pub bucket: String,
    /// Key prefix, empty or ending with `/` (e.g. `ci/cache/`).
    pub prefix: String,
    /// Service endpoint: scheme, host, optional port and base path (no bucket).
    pub endpoint: Url,
    /// Signing region.
    pub region: String,
    /// True for path-style (`endpoint/bucket/key`), false for virtual-hosted
    /// (`bucket.endpoint/key`).
    pub path_style: bool,
    /// Credentials, or `None` for anonymous (unsigned) requests.
    pub credentials: Option<Credentials>,
}

fn non_empty(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.trim().is_empty())
}

fn credential_pair(
    env: &dyn Fn(&str) -> Option<String>,
    id_var: &'static str,
    secret_var: &'static str,
    token_var: &'static str,
    source: &'static str,
) -> Result<Option<Credentials>, Error> {
    match (non_empty(env, id_var), non_empty(env, secret_var)) {
        (Some(id), Some(secret)) => Ok(Some(Credentials {
            access_key_id: Secret::new(id.trim()),
            secret_access_key: Secret::new(secret.trim()),
            session_token: non_empty(env, token_var).map(|t| Secret::new(t.trim())),
            source,
        })),
        (None, None) => Ok(None),
        (Some(_), None) | (None, Some(_)) => Err(Error::InvalidConfig {
            name: format!("{id_var}/{secret_var}"),
            value: String::new(),
            reason: format!("only one of {id_var} and {secret_var} is set; set both or neither"),
        }),
    }
}

/// The credential pairs of which only one half is set (non-empty) in `env`, as
/// `(the variable that is set, the one that is missing)`. Callers that can go on without
/// them (a restore reads anonymously; a save skips) warn and hide both halves from
/// `credentials_from_env`, which rejects a half pair.
pub fn incomplete_credential_pairs(
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    for (id, secret) in [("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), ("HW_OBS_AK", "HW_OBS_SK")]
    {
        match (non_empty(env, id).is_some(), non_empty(env, secret).is_some()) {
            (true, false) => out.push((id, secret)),
            (false, true) => out.push((secret, id)),
            _ => {}
        }
    }
    out
}

/// Reads credentials from `env` (see the module docs for the order).
///
/// # Errors
/// [`Error::InvalidConfig`] when only half of a key pair is set.
pub fn credentials_from_env(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Credentials>, Error> {
    let aws = credential_pair(
        env,
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
    )?;
    if aws.is_some() {
        return Ok(aws);
    }
    credential_pair(env, "HW_OBS_AK", "HW_OBS_SK", "HW_OBS_TOKEN", "HW_OBS_AK/HW_OBS_SK")
}

/// True for `localhost` and IP-literal hosts (`127.0.0.1`, `[::1]`).
fn is_local_or_ip(url: &Url) -> bool {
    match url.host_str() {
        Some(host) => {
            host.eq_ignore_ascii_case("localhost")
                || host.starts_with('[')
                || host.parse::<std::net::IpAddr>().is_ok()
        }
        None => false,
    }
}

/// Why `bucket` cannot be put in front of `endpoint`'s host (virtual-hosted addressing),
/// or `None` if it can: an IP-literal or `localhost` endpoint has no sub-domains, and a
/// bucket name with upper-case letters or `_` is not a host-name label (host names are
/// case-insensitive, so `MyBucket.host` would address `mybucket`).
fn virtual_host_problem(bucket: &str, endpoint: &Url) -> Option<String> {
    let host = endpoint.host_str().unwrap_or_default();
    if is_local_or_ip(endpoint) {
        let what =
            if host.eq_ignore_ascii_case("localhost") { "localhost" } else { "an IP address" };
        return Some(format!("the endpoint host {host} is {what}, which has no sub-domains"));
    }
    if bucket.chars().any(|c| c.is_ascii_uppercase() || c == '_') {
        return Some(format!(
            "the bucket name {bucket:?} has upper-case letters or '_', which a host name cannot \
             carry"
        ));
    }
    None
}

fn parse_endpoint(text: &str, origin: &str) -> Result<Url, Error> {
    let bad = |reason: &str| Error::InvalidConfig {
        name: origin.to_owned(),
        value: crate::transport::redact_store_url(text),
        reason: reason.to_owned(),
    };
    let mut url = Url::parse(text).map_err(|e| bad(&format!("not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the endpoint must start with http:// or https://"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("the endpoint has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials do not belong in the endpoint; use environment variables"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("the endpoint must not have a query or fragment"));
    }
    let path = url.path().trim_end_matches('/').to_owned();
    url.set_path(&path);
    Ok(url)
}

impl S3Config {
    /// Resolves `url` against the environment `env` (see the module docs).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an unusable endpoint, virtual-hosted addressing that cannot
    /// work (see the module docs) or half a credential pair.
    pub fn from_url(url: &S3Url, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let region = url
            .region
            .clone()
            .or_else(|| non_empty(env, "AWS_REGION"))
            .or_else(|| non_empty(env, "AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".to_owned());
        let endpoint = match (
            &url.endpoint,
            non_empty(env, "AWS_ENDPOINT_URL_S3"),
            non_empty(env, "AWS_ENDPOINT_URL"),
        ) {
            (Some(e), _, _) => parse_endpoint(e, "endpoint")?,
            (None, Some(e), _) => parse_endpoint(&e, "AWS_ENDPOINT_URL_S3")?,
            (None, None, Some(e)) => parse_endpoint(&e, "AWS_ENDPOINT_URL")?,
            (None, None, None) => {
                parse_endpoint(&format!("https://s3.{region}.amazonaws.com"), "region")?
            }
        };
        let path_style = match (url.addressing, virtual_host_problem(&url.bucket, &endpoint)) {
            (Addressing::Path, _) => true,
            (Addressing::Virtual, None) => false,
            (Addressing::Virtual, Some(problem)) => {
                return Err(Error::InvalidConfig {
                    name: "addressing".to_owned(),
                    value: "virtual".to_owned(),
                    reason: format!(
                        "virtual-hosted addressing puts the bucket in the host name \
                         ({}.{}), which cannot work: {problem}; use addressing=path (or leave \
                         addressing out: auto picks path-style here)",
                        url.bucket,
                        endpoint.host_str().unwrap_or_default()
                    ),
                });
            }
            (Addressing::Auto, problem) => problem.is_some() || url.bucket.contains('.'),
        };
        let prefix = if url.prefix.is_empty() { String::new() } else { format!("{}/", url.prefix) };
        Ok(Self {
            bucket: url.bucket.clone(),
            prefix,
            endpoint,
            region,
            path_style,
            credentials: credentials_from_env(env)?,
        })
    }

    /// The full object name in the bucket: prefix + key.
    pub fn full_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// `s3://bucket/prefix/key` for messages (`key` relative to the prefix; empty for the
    /// prefix itself).
    pub fn location(&self, key: &str) -> String {
        format!("s3://{}/{}{key}", self.bucket, self.prefix)
    }

    /// The encoded request URL for `full_key` (`None`: the bucket itself) and query
    /// parameters (names and values unencoded).
    pub fn request_url(&self, full_key: Option<&str>, query: &[(&str, String)]) -> String {
        let scheme = self.endpoint.scheme();
        let host = self.endpoint.host_str().unwrap_or_default();
        let port = self.endpoint.port().map(|p| format!(":{p}")).unwrap_or_default();
        let base_path = self.endpoint.path().trim_end_matches('/');
        let mut url = if self.path_style {
            format!("{scheme}://{host}{port}{base_path}/{}", encode_component(&self.bucket))
        } else {
            format!("{scheme}://{}.{host}{port}{base_path}", self.bucket)
        };
        match full_key {
            Some(key) => {
                url.push('/');
                url.push_str(&encode_key(key));
            }
            // Path-style bucket requests go to `/bucket`, virtual-hosted ones to `/`.
            None if self.path_style => {}
            None => url.push('/'),
        }
        if !query.is_empty() {
            let pairs: Vec<String> = query
                .iter()
                .map(|(name, value)| {
                    if value.is_empty() {
                        encode_component(name)
                    } else {
                        format!("{}={}", encode_component(name), encode_component(value))
                    }
                })
                .collect();
            url.push('?');
            url.push_str(&pairs.join("&"));
        }
        url
    }

    /// One-line description without secrets.
    pub fn describe(&self) -> String {
        let prefix = self.prefix.trim_end_matches('/');
        let slash = if prefix.is_empty() { "" } else { "/" };
        let style = if self.path_style { "path-style" } else { "virtual-hosted" };
        let auth = match &self.credentials {
            Some(c) => format!("credentials from {}", c.source),
            None => "anonymous".to_owned(),
        };
        format!(
            "s3://{}{slash}{prefix} (endpoint {}, region {}, {style}, {auth})",
            self.bucket,
            self.endpoint.as_str().trim_end_matches('/'),
            self.region
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, env: &[(&str, &str)]) -> S3Config {
        let s3 = match url.parse::<crate::transport::StoreUrl>().unwrap().0 {
            crate::transport::url::Location::S3(s3) => s3,
            other => panic!("{other:?}"),
        };
        let lookup =
            |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned());
        S3Config::from_url(&s3, &lookup).unwrap()
    }

    #[test]
    fn defaults_to_aws_virtual_hosted() {
        let c = config("s3://bucket/p", &[("AWS_REGION", "eu-central-1")]);
        assert_eq!(c.endpoint.as_str(), "https://s3.eu-central-1.amazonaws.com/");
        assert!(!c.path_style);
        assert_eq!(
            c.request_url(Some("p/a b+c"), &[]),
            "https://bucket.s3.eu-central-1.amazonaws.com/p/a%20b%2Bc"
        );
        assert!(c.credentials.is_none());
        let c = config("s3://bucket", &[("AWS_DEFAULT_REGION", "ap-east-1"), ("AWS_REGION", "")]);
        assert_eq!(c.region, "ap-east-1");
        assert_eq!(config("s3://b", &[]).region, "us-east-1");
    }

    #[test]
    fn auto_addressing() {
        let c = config("s3://bucket/x?endpoint=http://127.0.0.1:9000", &[]);
        assert!(c.path_style);
        assert_eq!(
            c.request_url(None, &[("list-type", "2".into()), ("prefix", "x/a=b".into())]),
            "http://127.0.0.1:9000/bucket?list-type=2&prefix=x%2Fa%3Db"
        );
        assert!(config("s3://b?endpoint=http://localhost:1", &[]).path_style);
        assert!(config("s3://b?endpoint=http://[::1]:1", &[]).path_style);
        assert!(config("s3://my.dotted.bucket", &[]).path_style);
        assert!(
            !config("s3://b", &[("AWS_ENDPOINT_URL", "https://obs.cn-north-4.myhuaweicloud.com")])
                .path_style
        );
        assert!(config("s3://b?addressing=path", &[]).path_style);
        assert!(config("s3://My_Bucket", &[]).path_style);
        assert!(!config("s3://b?endpoint=http://obs.example:1&addressing=virtual", &[]).path_style);
    }

    #[test]
    fn virtual_hosting_that_cannot_work_is_refused() {
        let error = |url: &str, env: &[(&str, &str)]| {
            let s3 = match url.parse::<crate::transport::StoreUrl>().unwrap().0 {
                crate::transport::url::Location::S3(s3) => s3,
                other => panic!("{other:?}"),
            };
            let lookup =
                |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned());
            S3Config::from_url(&s3, &lookup).unwrap_err().to_string()
        };
        let e = error("s3://b?endpoint=http://127.0.0.1:9000&addressing=virtual", &[]);
        assert_eq!(
            e,
            "invalid addressing=\"virtual\": virtual-hosted addressing puts the bucket in the \
             host name (b.127.0.0.1), which cannot work: the endpoint host 127.0.0.1 is an IP \
             address, which has no sub-domains; use addressing=path (or leave addressing out: \
             auto picks path-style here)"
        );
        let e = error("s3://b?addressing=virtual", &[("AWS_ENDPOINT_URL", "http://[::1]:9000")]);
        assert!(e.contains("the endpoint host [::1] is an IP address"), "{e}");
        let e = error("s3://b?endpoint=http://LocalHost:1&addressing=virtual", &[]);
        assert!(e.contains("is localhost, which has no sub-domains"), "{e}");
        let e = error("s3://Legacy_Bucket?addressing=virtual", &[]);
        assert!(e.contains("the bucket name \"Legacy_Bucket\" has upper-case"), "{e}");
        assert!(e.contains("use addressing=path"), "{e}");
    }

    #[test]
    fn credentials_order_and_redaction() {
        let c = config(
            "s3://b",
            &[
                ("HW_OBS_AK", "obs-id"),
                ("HW_OBS_SK", "obs-secret-value"),
                ("AWS_ACCESS_KEY_ID", ""),
            ],
        );
        let creds = c.credentials.clone().unwrap();
        assert_eq!(creds.source, "HW_OBS_AK/HW_OBS_SK");
        let shown = format!("{c:?} {}", c.describe());
        assert!(!shown.contains("obs-secret-value") && !shown.contains("obs-id"), "{shown}");
        let c = config(
            "s3://b",
            &[("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "s"), ("HW_OBS_AK", "o")],
        );
        assert_eq!(c.credentials.unwrap().source, "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY");
        let half = |name: &str| (name == "HW_OBS_AK").then(|| "id".to_owned());
        let err = credentials_from_env(&half).unwrap_err();
        assert!(err.to_string().contains("HW_OBS_SK"), "{err}");
        assert_eq!(incomplete_credential_pairs(&half), [("HW_OBS_AK", "HW_OBS_SK")]);
        let other = |name: &str| (name == "AWS_SECRET_ACCESS_KEY").then(|| "s".to_owned());
        assert_eq!(
            incomplete_credential_pairs(&other),
            [("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID")]
        );
        assert!(incomplete_credential_pairs(&|_: &str| None).is_empty());
    }
}
