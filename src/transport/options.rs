//! [`TransportOptions`]: timeouts, retries, part size and parallelism.

use std::time::Duration;

use super::Error;

/// Tuning for network stores (the directory store ignores it).
///
/// By default: 60 s per request, 10 s to connect, 4 retries with exponential backoff and
/// full jitter between 200 ms and 5 s, 8 MiB parts, 8 parts in flight. [`from_env`]
/// overrides these from `STRATA_S3_TIMEOUT_SECONDS`, `STRATA_S3_MAX_RETRIES`,
/// `STRATA_S3_PART_SIZE_MB` and `STRATA_S3_PARALLELISM`.
///
/// [`from_env`]: TransportOptions::from_env
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportOptions {
    /// Limit for one HTTP request, from connecting to the last body byte. A part of
    /// `part_size_bytes` must fit in it on the slowest link you expect.
    pub request_timeout: Duration,
    /// Limit for establishing a connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// Retries after the first attempt of each request (so `max_retries + 1` attempts).
    pub max_retries: u32,
    /// First backoff ceiling; attempt `n` sleeps a random time in `[0, min(cap, base·2ⁿ)]`.
    pub retry_base_delay: Duration,
    /// Upper bound of one backoff sleep.
    pub retry_max_delay: Duration,
    /// Size of one ranged GET or multipart part, in bytes. Objects smaller than this are
    /// moved with one request. Multipart uploads use at least 5 MiB (the S3 minimum) and
    /// grow the part size if the object would need more than 10,000 parts.
    pub part_size_bytes: u64,
    /// Parts in flight at once (uploads stream each part from the file in 256 KiB reads).
    pub parallelism: usize,
}

/// One mebibyte in bytes.
const MIB: u64 = 1024 * 1024;

impl Default for TransportOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            max_retries: 4,
            retry_base_delay: Duration::from_millis(200),
            retry_max_delay: Duration::from_secs(5),
            part_size_bytes: 8 * MIB,
            parallelism: 8,
        }
    }
}

impl TransportOptions {
    /// Defaults overridden by the process environment: `STRATA_S3_TIMEOUT_SECONDS`
    /// (request timeout, seconds, > 0), `STRATA_S3_MAX_RETRIES` (0–20),
    /// `STRATA_S3_PART_SIZE_MB` (MiB, 1–5120), `STRATA_S3_PARALLELISM` (1–64). Empty
    /// variables are ignored.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the variable whose value is not a number in range.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_env_with(crate::config::var_string)
    }

    /// [`from_env`](Self::from_env) with an explicit lookup.
    ///
    /// # Errors
    /// As [`from_env`](Self::from_env).
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let mut options = Self::default();
        if let Some(seconds) = number(&env, "STRATA_S3_TIMEOUT_SECONDS", 1, 86_400)? {
            options.request_timeout = Duration::from_secs(seconds);
        }
        if let Some(retries) = number(&env, "STRATA_S3_MAX_RETRIES", 0, 20)? {
            options.max_retries = u32::try_from(retries).unwrap_or(20);
        }
        if let Some(mib) = number(&env, "STRATA_S3_PART_SIZE_MB", 1, 5120)? {
            options.part_size_bytes = mib * MIB;
        }
        if let Some(parallelism) = number(&env, "STRATA_S3_PARALLELISM", 1, 64)? {
            options.parallelism = usize::try_from(parallelism).unwrap_or(64);
        }
        Ok(options)
    }
}

fn number(
    env: &impl Fn(&str) -> Option<String>,
    name: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, Error> {
    let Some(text) = env(name) else { return Ok(None) };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    match trimmed.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(Error::InvalidConfig {
            name: name.to_owned(),
            value: text.clone(),
            reason: format!("expected a whole number from {min} to {max}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_and_rejects() {
        let env = |name: &str| match name {
            "STRATA_S3_TIMEOUT_SECONDS" => Some("5".to_owned()),
            "STRATA_S3_PART_SIZE_MB" => Some("16".to_owned()),
            "STRATA_S3_PARALLELISM" => Some(" ".to_owned()),
            _ => None,
        };
        let options = TransportOptions::from_env_with(env).unwrap();
        assert_eq!(options.request_timeout, Duration::from_secs(5));
        assert_eq!(options.part_size_bytes, 16 * MIB);
        assert_eq!(options.parallelism, 8);
        assert_eq!(options.max_retries, 4);
        let bad = |name: &str| (name == "STRATA_S3_MAX_RETRIES").then(|| "many".to_owned());
        let err = TransportOptions::from_env_with(bad).unwrap_err();
        assert!(err.to_string().contains("STRATA_S3_MAX_RETRIES"), "{err}");
    }
}
