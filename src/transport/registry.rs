//! The scheme registry: everything a store URL's scheme decides, in one place.
//!
//! * **Parsing** is [`StoreUrl`]'s `FromStr` (`super::url`); nothing else parses a store
//!   URL, and nothing outside `transport` looks at its scheme.
//! * **Capabilities** ([`StoreUrl::capabilities`]): known from the URL alone, so a use that
//!   needs one the backend lacks ([`StoreUse`]) is refused when the store is opened,
//!   before a request is sent.
//! * **Credential policy**: which variables a backend reads, which pairs may be set by
//!   half ([`StoreUrl::incomplete_credentials`], with the warning's text), and whether a
//!   job may write ([`StoreUrl::has_writer_credentials`], and the variables to name when
//!   it may not, [`StoreUrl::writer_credentials_hint`]).
//! * **Construction** ([`StoreUrl::open`]): the one place a backend is built.
//!
//! | scheme | backend | credentials | writer credentials |
//! |---|---|---|---|
//! | `file://`, `/abs` | [`FsStore`] | none | always (the directory's permissions decide) |
//! | `s3://` | [`S3Store`] | `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`), else `HW_OBS_AK` + `HW_OBS_SK` (+ `HW_OBS_TOKEN`) | a complete pair |
//! | `http://`, `https://` | [`HttpStore`] | `STRATA_HTTP_TOKEN` (bearer), else `STRATA_HTTP_USER` + `STRATA_HTTP_PASSWORD` (basic) | a token, a complete pair, or `STRATA_HTTP_ANONYMOUS_WRITES=1` |

use std::fmt;

use super::capability::unsupported;
use super::url::Location;
use super::{
    Capabilities, Capability, Error, FsStore, HttpStore, ObjectStore, S3Config, S3Store, StoreUrl,
    StoreUse, TransportOptions,
};

/// The capabilities of each backend (see [`super::capability`]).
const FILE_CAPABILITIES: [Capability; 3] =
    [Capability::List, Capability::Delete, Capability::ConditionalWrites];
const S3_CAPABILITIES: [Capability; 4] = Capability::ALL;
const HTTP_CAPABILITIES: [Capability; 0] = [];

/// Which schemes have `capability`, for [`Error::Unsupported`]'s advice.
pub(crate) fn schemes_with(capability: Capability) -> &'static str {
    match capability {
        Capability::List | Capability::Delete => "file:// and s3:// stores have it",
        Capability::ConditionalWrites => "file:// stores and most s3:// services have it",
        Capability::Multipart => "s3:// stores have it",
    }
}

/// A credential pair of which only one half is set (non-empty): probably a misnamed or
/// empty secret. `Display` is the warning to show; it names the variables, never a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IncompleteCredentials {
    /// The variable that is set.
    pub set: &'static str,
    /// Its partner, missing or empty.
    pub missing: &'static str,
    /// What is used instead, e.g. `the other pair is used if it is complete`.
    otherwise: &'static str,
}

impl fmt::Display for IncompleteCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "only {} is set ({} is missing or empty; a misnamed secret?): ignoring this \
             incomplete credential pair; {}, else the store is accessed anonymously",
            self.set, self.missing, self.otherwise
        )
    }
}

/// What [`StoreUrl::open`] does with a credential pair set by half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfPairs {
    /// Refuse to open: [`Error::InvalidConfig`] naming both variables (the library's
    /// default, and the remote entry tier's).
    Refuse,
    /// Ignore both halves, as if unset; the caller shows
    /// [`StoreUrl::incomplete_credentials`] as warnings (the command line).
    Ignore,
}

impl StoreUrl {
    /// What the store can do beyond the core ([`Capability`]), known from the URL alone.
    pub fn capabilities(&self) -> Capabilities {
        Capabilities::of(match &self.0 {
            Location::File(_) => &FILE_CAPABILITIES,
            Location::S3(_) => &S3_CAPABILITIES,
            Location::Http(_) => &HTTP_CAPABILITIES,
        })
    }

    /// Checks that the store has what `usage` needs.
    ///
    /// # Errors
    /// [`Error::Unsupported`] naming the store, the first capability it lacks and
    /// `usage.purpose`.
    pub fn check_use(&self, usage: &StoreUse) -> Result<(), Error> {
        match self.capabilities().first_missing(usage.needs) {
            Some(capability) => Err(unsupported(self.to_string(), capability, usage.purpose)),
            None => Ok(()),
        }
    }

    /// The credential pairs of this store's scheme of which `env` sets only one half;
    /// empty for a directory store (which reads no credentials).
    pub fn incomplete_credentials(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<IncompleteCredentials> {
        let (pairs, otherwise) = match &self.0 {
            Location::File(_) => return Vec::new(),
            Location::S3(_) => (super::s3::incomplete_credential_pairs(env), S3_OTHERWISE),
            Location::Http(_) => (super::http::incomplete_credential_pairs(env), HTTP_OTHERWISE),
        };
        pairs
            .into_iter()
            .map(|(set, missing)| IncompleteCredentials { set, missing, otherwise })
            .collect()
    }

    /// True if a job with the variables of `env` may write to this store (a save, a gc,
    /// an upload of the remote entry tier): always for a directory store; a complete
    /// key pair for `s3://`; a token, a complete user/password pair or
    /// `STRATA_HTTP_ANONYMOUS_WRITES` on for `http(s)://` (see the module docs). Blank
    /// values count as unset.
    pub fn has_writer_credentials(&self, env: &dyn Fn(&str) -> Option<String>) -> bool {
        let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
        match &self.0 {
            Location::File(_) => true,
            Location::S3(_) => {
                (set("HW_OBS_AK") && set("HW_OBS_SK"))
                    || (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
            }
            Location::Http(_) => super::http::has_writer_credentials(env),
        }
    }

    /// The variables a writer of this store sets, for messages: e.g. `HW_OBS_AK +
    /// HW_OBS_SK, or AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY`; `None` for a directory
    /// store.
    pub fn writer_credentials_hint(&self) -> Option<&'static str> {
        match &self.0 {
            Location::File(_) => None,
            Location::S3(_) => {
                Some("HW_OBS_AK + HW_OBS_SK, or AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY")
            }
            Location::Http(_) => Some(
                "STRATA_HTTP_TOKEN, or STRATA_HTTP_USER + STRATA_HTTP_PASSWORD, or \
                 STRATA_HTTP_ANONYMOUS_WRITES=1 for a server that takes anonymous uploads",
            ),
        }
    }

    /// Opens the store for `usage`, reading settings and credentials through `env` (see
    /// `docs/transport.md`); a credential pair set by half is handled as `half_pairs` says.
    /// Nothing is sent: a directory need not exist, a server need not answer yet.
    ///
    /// # Errors
    /// [`Error::Unsupported`] if the store lacks what `usage` needs;
    /// [`Error::InvalidConfig`] for inconsistent settings (an unusable endpoint, half a
    /// pair under [`HalfPairs::Refuse`]); [`Error::Setup`] if the HTTP client or runtime
    /// cannot be created.
    pub fn open(
        &self,
        options: &TransportOptions,
        env: &dyn Fn(&str) -> Option<String>,
        half_pairs: HalfPairs,
        usage: &StoreUse,
    ) -> Result<Box<dyn ObjectStore>, Error> {
        self.check_use(usage)?;
        let ignored: Vec<&'static str> = match half_pairs {
            HalfPairs::Refuse => Vec::new(),
            HalfPairs::Ignore => self
                .incomplete_credentials(env)
                .iter()
                .flat_map(|pair| [pair.set, pair.missing])
                .collect(),
        };
        let env = |name: &str| if ignored.contains(&name) { None } else { env(name) };
        match &self.0 {
            Location::File(root) => Ok(Box::new(FsStore::new(root.clone()))),
            Location::S3(s3) => {
                let config = S3Config::from_url(s3, &env)?;
                Ok(Box::new(S3Store::new(config, options.clone())?))
            }
            Location::Http(http) => {
                let config = super::http::HttpConfig::from_url(http, &env)?;
                Ok(Box::new(HttpStore::new(config, options.clone())?))
            }
        }
    }
}

const S3_OTHERWISE: &str = "the other pair is used if it is complete";
const HTTP_OTHERWISE: &str = "STRATA_HTTP_TOKEN is used if it is set";

/// Opens the store named by `url` for the core operations, reading settings and
/// credentials from the process environment (`AWS_*`, `HW_OBS_*`, `STRATA_HTTP_*`; see
/// `docs/transport.md`). For tests and tools; the command line parses its URL once and
/// calls [`StoreUrl::open`].
///
/// # Errors
/// [`Error::InvalidUrl`] for a malformed URL; otherwise as [`StoreUrl::open`] with
/// [`HalfPairs::Refuse`].
pub fn open_store(url: &str, options: &TransportOptions) -> Result<Box<dyn ObjectStore>, Error> {
    open_store_with_env(url, options, crate::config::var_string)
}

/// [`open_store`] with an explicit environment lookup instead of the process environment.
///
/// # Errors
/// As [`open_store`].
pub fn open_store_with_env(
    url: &str,
    options: &TransportOptions,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Box<dyn ObjectStore>, Error> {
    let url: StoreUrl = url.parse()?;
    url.open(options, &env, HalfPairs::Refuse, &StoreUse::core("this use"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    }

    fn url(text: &str) -> StoreUrl {
        text.parse().unwrap()
    }

    #[test]
    fn writer_credentials() {
        let s3 = url("s3://bucket/prefix");
        assert!(url("file:///tmp/store").has_writer_credentials(&env(&[])));
        assert!(!s3.has_writer_credentials(&env(&[])));
        assert!(!s3.has_writer_credentials(&env(&[("HW_OBS_AK", "a")])));
        assert!(!s3.has_writer_credentials(&env(&[("HW_OBS_AK", "a"), ("HW_OBS_SK", " ")])));
        assert!(s3.has_writer_credentials(&env(&[("HW_OBS_AK", "a"), ("HW_OBS_SK", "b")])));
        assert!(s3.has_writer_credentials(&env(&[
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "b")
        ])));
        let http = url("http://127.0.0.1:1/cache");
        assert!(!http.has_writer_credentials(&env(&[])));
        assert!(!http.has_writer_credentials(&env(&[("STRATA_HTTP_USER", "u")])));
        assert!(http.has_writer_credentials(&env(&[("STRATA_HTTP_TOKEN", "t")])));
        assert!(http.has_writer_credentials(&env(&[
            ("STRATA_HTTP_USER", "u"),
            ("STRATA_HTTP_PASSWORD", "p")
        ])));
        assert!(http.has_writer_credentials(&env(&[("STRATA_HTTP_ANONYMOUS_WRITES", "1")])));
        assert!(!http.has_writer_credentials(&env(&[("STRATA_HTTP_ANONYMOUS_WRITES", "0")])));
        for store in [&s3, &http] {
            assert!(store.writer_credentials_hint().is_some());
        }
        assert!(url("/tmp/x").writer_credentials_hint().is_none());
    }

    #[test]
    fn incomplete_pairs_are_named_per_scheme() {
        let half = env(&[("AWS_ACCESS_KEY_ID", "a"), ("STRATA_HTTP_PASSWORD", "p")]);
        let s3 = url("s3://b").incomplete_credentials(&half);
        assert_eq!(s3.len(), 1);
        assert_eq!((s3[0].set, s3[0].missing), ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"));
        assert!(s3[0].to_string().contains("the other pair is used if it is complete"));
        let http = url("https://h/p").incomplete_credentials(&half);
        assert_eq!(http.len(), 1);
        assert_eq!((http[0].set, http[0].missing), ("STRATA_HTTP_PASSWORD", "STRATA_HTTP_USER"));
        assert!(url("/tmp/x").incomplete_credentials(&half).is_empty());
    }

    #[test]
    fn a_use_needing_what_the_backend_lacks_is_refused_at_open() {
        let gc = StoreUse::needing("snapshot gc", &[Capability::List, Capability::Delete]);
        let http = url("http://127.0.0.1:1/cache");
        let err = http.open(&TransportOptions::default(), &env(&[]), HalfPairs::Refuse, &gc);
        let err = err.err().unwrap();
        assert!(err.is_unsupported() && err.is_usage(), "{err}");
        assert_eq!(
            err.to_string(),
            "the store http://127.0.0.1:1/cache cannot list objects; snapshot gc needs listing \
             (file:// and s3:// stores have it): clean the store with its own tools instead \
             (bazel-remote evicts by size; an nginx directory can be trimmed by age with find)"
        );
        for ok in ["/tmp/x", "s3://b?endpoint=http://127.0.0.1:1"] {
            assert!(
                url(ok)
                    .open(&TransportOptions::default(), &env(&[]), HalfPairs::Refuse, &gc)
                    .is_ok()
            );
        }
        assert_eq!(http.capabilities(), Capabilities::NONE);
        assert!(url("s3://b").capabilities().has(Capability::Multipart));
    }

    #[test]
    fn half_pairs_are_refused_or_ignored() {
        let half = env(&[("AWS_ACCESS_KEY_ID", "a")]);
        let s3 = url("s3://b?endpoint=http://127.0.0.1:1");
        let core = StoreUse::core("test");
        let refused = s3.open(&TransportOptions::default(), &half, HalfPairs::Refuse, &core);
        assert!(refused.err().unwrap().to_string().contains("only one of"));
        let store = s3.open(&TransportOptions::default(), &half, HalfPairs::Ignore, &core).unwrap();
        assert!(store.describe().contains("anonymous"), "{}", store.describe());
    }
}
