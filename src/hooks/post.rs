//! One signed POST of a hook's payload: the Standard Webhooks headers (`webhook-id`,
//! `webhook-timestamp`, and `webhook-signature` when the hook has a secret), the hook's own
//! headers, bounded by its timeout. Shared by the hooks a call waits on (`run.rs`, a fresh id
//! each time) and the outbox's deliveries (one id for every try).

use std::collections::BTreeMap;
use std::time::Duration;

use super::answer::quoted;

/// Where and how to POST: a URL hook's settings.
pub(super) struct Target<'a> {
    pub url: &'a str,
    pub headers: &'a BTreeMap<String, String>,
    pub secret: Option<&'a [u8]>,
    pub timeout: Duration,
}

/// What the receiver answered.
pub(super) struct Posted {
    pub status: reqwest::StatusCode,
    pub text: String,
}

/// POSTs `body` as message `id`, stamped and signed now. `Err` says why no answer came (no
/// connection, the timeout, an answer that could not be read).
pub(super) async fn post(
    client: &reqwest::Client,
    target: &Target<'_>,
    id: &str,
    body: &str,
) -> Result<Posted, String> {
    let url = target.url;
    let timestamp = chrono::Utc::now().timestamp();
    let mut request = client
        .post(url)
        .timeout(target.timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string());
    for (name, value) in target.headers {
        request = request.header(name, value);
    }
    if let Some(key) = target.secret {
        request = request.header(
            "webhook-signature",
            super::signature::sign(key, id, timestamp, body),
        );
    }
    let response = request
        .body(body.to_owned())
        .send()
        .await
        .map_err(|error| format!("the POST to {url} failed: {error}"))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|error| format!("its answer could not be read: {error}"))?;
    Ok(Posted { status, text })
}

impl Posted {
    /// "<url> answered 503 Service Unavailable: <the start of its body>".
    pub fn refusal(&self, url: &str) -> String {
        format!("{url} answered {}: {}", self.status, quoted(&self.text))
    }
}
