//! Bounded retries with exponential backoff and full jitter.
//!
//! Attempt `n` (0-based) that fails with a retryable error ([`Error::is_retryable`]: HTTP
//! 5xx, 429, 408, `SlowDown`, network failures, timeouts, truncated bodies) sleeps a random
//! duration in `[0, min(max_delay, base_delay · 2ⁿ)]` and tries again, at most
//! `max_retries` times. Other errors (403, 404, 412, other 4xx) return at once. Every retry
//! is logged with `tracing::warn!` naming the method, the object, the attempt and the
//! status or error kind; never a header, signature or credential. The final error records
//! the retry count and the elapsed time.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::transport::error::Attempts;
use crate::transport::{Error, TransportOptions};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Backoff ceiling of the first retry.
    pub base_delay: Duration,
    /// Largest backoff ceiling.
    pub max_delay: Duration,
    /// What the log lines call a request: `S3` or `HTTP`.
    pub label: &'static str,
}

impl RetryPolicy {
    /// The policy of `options`, for requests the logs call `label` requests.
    pub(crate) fn from_options(options: &TransportOptions, label: &'static str) -> Self {
        Self {
            max_retries: options.max_retries,
            base_delay: options.retry_base_delay,
            max_delay: options.retry_max_delay,
            label,
        }
    }

    /// The backoff before retry number `retry` (0-based): full jitter under an exponential
    /// ceiling.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(20)).unwrap_or(u32::MAX);
        let ceiling = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let ceiling_micros = u64::try_from(ceiling.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(fastrand::u64(0..=ceiling_micros))
    }
}

/// A short, secret-free description of an error for retry logs: status and code, or the
/// network error kind.
fn brief(error: &Error) -> String {
    match error {
        Error::Http { status, code, .. } => match code {
            Some(code) => format!("HTTP {status} {code}"),
            None => format!("HTTP {status}"),
        },
        Error::Network { kind, phase, .. } => {
            crate::transport::error::network_failure_text(*kind, *phase)
        }
        Error::Protocol { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

/// Runs `attempt` until it succeeds, fails with a non-retryable error, or has been retried
/// `policy.max_retries` times. Each retry increments `retries` (shared by the parts of one
/// transfer, so it sums into `TransferStats::retries`).
///
/// # Errors
/// The last attempt's error, with [`Attempts`] recorded.
pub(crate) async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    method: &str,
    location: &str,
    retries: &AtomicU32,
    mut attempt: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let started = Instant::now();
    let mut retry = 0u32;
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) if error.is_retryable() && retry < policy.max_retries => {
                let delay = policy.backoff(retry);
                retry += 1;
                retries.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    method,
                    object = location,
                    attempt = retry,
                    max_retries = policy.max_retries,
                    "{} request failed ({}); retrying in {:.2}s",
                    policy.label,
                    brief(&error),
                    delay.as_secs_f64()
                );
                tokio::time::sleep(delay).await;
            }
            Err(error) => {
                return Err(
                    error.with_attempts(Attempts { retries: retry, elapsed: started.elapsed() })
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded() {
        let policy = RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            label: "S3",
        };
        for retry in 0..40 {
            let delay = policy.backoff(retry);
            let ceiling = Duration::from_millis(200)
                .saturating_mul(1 << retry.min(20))
                .min(Duration::from_secs(5));
            assert!(delay <= ceiling, "retry {retry}: {delay:?} > {ceiling:?}");
        }
    }

    #[test]
    fn retries_then_gives_up_with_count() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let policy = RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            label: "S3",
        };
        let counter = AtomicU32::new(0);
        let mut calls = 0;
        let result: Result<(), Error> =
            runtime.block_on(with_retries(&policy, "PUT", "s3://b/k", &counter, || {
                calls += 1;
                async {
                    Err(Error::Http {
                        method: "PUT".into(),
                        location: "s3://b/k".into(),
                        status: 503,
                        code: Some("SlowDown".into()),
                        message: None,
                        attempts: Attempts::default(),
                    })
                }
            }));
        let err = result.unwrap_err();
        assert_eq!(calls, 4);
        assert_eq!(err.retries(), 3);
        assert_eq!(counter.load(Ordering::Relaxed), 3);
        let counter = AtomicU32::new(0);
        let mut calls = 0;
        let result: Result<(), Error> =
            runtime.block_on(with_retries(&policy, "GET", "s3://b/k", &counter, || {
                calls += 1;
                async {
                    Err(Error::NotFound {
                        location: "s3://b/k".into(),
                        attempts: Attempts::default(),
                    })
                }
            }));
        assert!(result.unwrap_err().is_not_found());
        assert_eq!(calls, 1);
    }
}
