//! [`Secret`]: a string that never prints: credentials are never printed, logged, or put in
//! events, error messages or records.

use std::fmt;

/// A credential (secret access key, session token). `Debug` and `Display` print `***`;
/// only [`Secret::expose`] gives the text, and only the signer calls it.
///
/// ```
/// use strata::transport::Secret;
/// let secret = Secret::new("not-a-real-secret");
/// assert_eq!(format!("{secret} {secret:?}"), "*** ***");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The credential text. Never format, log or store the result.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}
