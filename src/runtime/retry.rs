//! The retry policy of model calls: which errors are retried, how long to wait before the next
//! attempt (doubling from the initial delay, capped at `max_delay_ms`; a provider's
//! `Retry-After` is waited in full up to `max_retry_after_ms`, and a longer one fails the turn),
//! and the announcement clients see as `model.retry`.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::RetryConfig;
use crate::model::ModelError;

/// A retry of a model call, announced to clients as `model.retry`.
#[derive(Debug)]
pub struct Retry {
    pub attempt: u32,
    pub max_attempts: u32,
    pub delay_ms: u64,
    pub error: String,
}

pub enum BackOff {
    Retry,
    GiveUp,
    /// The provider asks to wait longer than `max_retry_after_ms`: the turn fails with this.
    WaitTooLong(String),
    Interrupted,
}

/// After failed attempt number `attempt` of a model call: gives up on a fatal error or the
/// last allowed attempt; otherwise announces the retry and waits for it, or until `now` is
/// notified (a user's "retry now"), or `cancel`.
pub async fn back_off(
    retry: &RetryConfig,
    attempt: u32,
    error: &ModelError,
    (cancel, now): (&CancellationToken, Option<&tokio::sync::Notify>),
    announce: impl FnOnce(Retry),
) -> BackOff {
    let max_attempts = retry.max_attempts.max(1);
    let retry_after = match error {
        ModelError::Transient { retry_after, .. } if attempt < max_attempts => *retry_after,
        _ => return BackOff::GiveUp,
    };
    let delay = retry_delay(retry, attempt, retry_after);
    if let Some(wanted) = retry_after
        && wanted > Duration::from_millis(retry.max_retry_after_ms)
    {
        return BackOff::WaitTooLong(format!(
            "the provider asks to wait {} s before trying again (Retry-After), longer than \
             retry.max_retry_after_ms allows ({} s); last error: {error}",
            wanted.as_secs(),
            retry.max_retry_after_ms / 1000
        ));
    }
    announce(Retry {
        attempt,
        max_attempts,
        delay_ms: delay.as_millis() as u64,
        error: error.to_string(),
    });
    let now = async {
        match now {
            Some(now) => now.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = tokio::time::sleep(delay) => BackOff::Retry,
        () = now => BackOff::Retry,
        () = cancel.cancelled() => BackOff::Interrupted,
    }
}

pub(crate) fn model_failure(error: &ModelError, attempt: u32) -> String {
    match error {
        ModelError::Transient { message, .. } => {
            format!("the model call failed {attempt} times; last error: {message}")
        }
        ModelError::Fatal(message) | ModelError::ContextOverflow(message) => {
            format!("the model call failed: {message}")
        }
    }
}

/// The wait before retry number `attempt`: a provider's `Retry-After` as asked (never sooner:
/// a request sent early is refused again; `back_off` refuses waits past `max_retry_after_ms`),
/// else from the initial delay, doubling, capped at `max_delay_ms`.
pub fn retry_delay(retry: &RetryConfig, attempt: u32, retry_after: Option<Duration>) -> Duration {
    let cap = Duration::from_millis(retry.max_delay_ms);
    if let Some(wanted) = retry_after {
        return wanted.min(Duration::from_millis(retry.max_retry_after_ms));
    }
    let factor = 2u64.saturating_pow(attempt.saturating_sub(1));
    Duration::from_millis(retry.initial_delay_ms.saturating_mul(factor)).min(cap)
}
