//! One push message sent (RFC 8030 §5): the encrypted payload POSTed to the subscription's
//! endpoint with the VAPID signature, and the push service's answer read as what the caller
//! does next: nothing (sent), drop the subscription (gone), or try again later (a failure
//! that says it is retryable).

use std::time::{Duration, SystemTime};

use reqwest::header::{AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap};

use super::encrypt::encrypt;
use super::subscription::Subscription;
use super::vapid::VapidKey;

/// How long one POST may take, answer included.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// How much of a push service's error answer a failure quotes.
const QUOTED_BYTES: usize = 300;

/// How soon the browser should be woken for the message (RFC 8030 §5.3): a push service may
/// hold back messages of low urgency while the device saves power.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    VeryLow,
    Low,
    Normal,
    /// An approval someone waits on.
    High,
}

impl Urgency {
    /// The `Urgency` header's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Urgency::VeryLow => "very-low",
            Urgency::Low => "low",
            Urgency::Normal => "normal",
            Urgency::High => "high",
        }
    }
}

/// What became of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The push service took it (it delivers when the browser is reachable, within the TTL).
    Sent,
    /// The subscription no longer exists (404 or 410): the caller drops it.
    Gone,
    /// Not sent. `retryable` says whether the same message may succeed later (a network
    /// failure, 429 or a 5xx), waiting at least `retry_after` if the push service named a
    /// wait; otherwise the message or subscription is at fault and a retry would fail alike.
    Failed {
        error: String,
        retryable: bool,
        retry_after: Option<Duration>,
    },
}

impl SendOutcome {
    fn failed(error: String, retryable: bool) -> SendOutcome {
        SendOutcome::Failed {
            error,
            retryable,
            retry_after: None,
        }
    }
}

/// The client to send with: the process's TLS, no redirects (a push service answers where it
/// is asked; a redirect would carry the signed request elsewhere), and [`TIMEOUT`].
pub fn client() -> reqwest::Result<reqwest::Client> {
    crate::tls::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
        .build()
}

/// Sends `payload` to the browser of `subscription`, signed with `key` naming `subject` (a
/// `mailto:` or `https:` contact for the push service's operator). The push service keeps the
/// message for up to `ttl_s` seconds while the browser is unreachable (0: deliver now or
/// never). `client` should come from [`client`].
pub async fn send(
    client: &reqwest::Client,
    key: &VapidKey,
    subject: &str,
    subscription: &Subscription,
    payload: &[u8],
    ttl_s: u32,
    urgency: Urgency,
) -> SendOutcome {
    let keys = match subscription.check() {
        Ok(keys) => keys,
        Err(error) => return SendOutcome::failed(format!("unusable subscription: {error}"), false),
    };
    let body = match encrypt(&keys, payload) {
        Ok(body) => body,
        Err(error) => return SendOutcome::failed(format!("not encrypted: {error}"), false),
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let authorization = match key.authorization(&subscription.endpoint, subject, now) {
        Ok(header) => header,
        Err(error) => return SendOutcome::failed(format!("not signed: {error}"), false),
    };
    // Named by origin only: the path identifies the browser to whoever reads the log.
    let service = subscription
        .endpoint_url()
        .map(|url| url.origin().ascii_serialization())
        .unwrap_or_default();
    let response = client
        .post(&subscription.endpoint)
        .header(CONTENT_ENCODING, "aes128gcm")
        .header(CONTENT_TYPE, "application/octet-stream")
        .header("TTL", ttl_s)
        .header("Urgency", urgency.as_str())
        .header(AUTHORIZATION, authorization)
        .body(body)
        .send()
        .await;
    let mut response = match response {
        Ok(response) => response,
        Err(error) => {
            let retryable = !error.is_builder();
            return SendOutcome::failed(
                format!(
                    "the push service at {service} was not reached: {}",
                    in_words(&error.without_url())
                ),
                retryable,
            );
        }
    };
    let status = response.status();
    if status.is_success() {
        return SendOutcome::Sent;
    }
    if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::GONE {
        return SendOutcome::Gone;
    }
    let retryable = status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
    let retry_after = retryable.then(|| retry_after(response.headers())).flatten();
    let said = quoted_answer(&mut response).await;
    SendOutcome::Failed {
        error: format!("the push service at {service} answered {status}{said}"),
        retryable,
        retry_after,
    }
}

/// A `Retry-After` in seconds or as an HTTP date (a date past means now).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    crate::model::wire::retry_after(headers, SystemTime::now())
}

/// The start of an error answer, which push services use to say what they refused, as
/// `: <text>`; nothing if it is empty or unreadable in time.
async fn quoted_answer(response: &mut reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < QUOTED_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let end = crate::text::floor_char_boundary(text, QUOTED_BYTES);
    let cut = if end < text.len() { "…" } else { "" };
    let one_line = text[..end].split_whitespace().collect::<Vec<_>>().join(" ");
    format!(": {}{cut}", crate::text::visible(&one_line))
}

/// An error and its causes on one line: reqwest's own message rarely says what went wrong.
fn in_words(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urgency_values_are_rfc_8030s() {
        let values = [
            Urgency::VeryLow,
            Urgency::Low,
            Urgency::Normal,
            Urgency::High,
        ]
        .map(Urgency::as_str);
        assert_eq!(values, ["very-low", "low", "normal", "high"]);
    }

    #[tokio::test]
    async fn a_subscription_that_fails_its_checks_is_not_sent_nor_retried() {
        let dir = tempfile::tempdir().unwrap();
        let key = VapidKey::load_or_create(dir.path()).unwrap();
        let subscription = Subscription {
            endpoint: "http://push.example.net/x".into(),
            keys: super::super::SubscriptionKeys {
                p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4".into(),
                auth: "BTBZMqHH6r4Tts7J_aSIgg".into(),
            },
        };
        let outcome = send(
            &client().unwrap(),
            &key,
            "mailto:ops@example.org",
            &subscription,
            b"hi",
            60,
            Urgency::High,
        )
        .await;
        assert_eq!(
            outcome,
            SendOutcome::Failed {
                error: "unusable subscription: the endpoint \"http://push.example.net/x\" is \
                        plain http, which only a loopback host may use"
                    .into(),
                retryable: false,
                retry_after: None,
            }
        );
    }
}
