//! The delivery task: sends each due delivery, a few at once, and records how each try went.
//! The hook's URL, headers, secret and timeout are read from the config at each try; a
//! delivery whose hook is gone or has another URL ends `failed` without being sent.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::backoff::{Backoff, MAX_ATTEMPTS};
use super::delivery::{Delivery, State, Status, url_fingerprint};
use super::queue::Outbox;
use crate::config::{HookAction, HookConfig};
use crate::hooks::post::{Posted, Target, post};

/// Deliveries tried at once: a receiver that takes its whole timeout holds up only its own.
const AT_ONCE: usize = 8;

/// Told of each failed try: the hook's key and what went wrong (`GET /api/hooks` shows it).
pub type FailureReport = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// Starts the delivery task; it ends when the outbox is closed.
pub fn start(
    outbox: Arc<Outbox>,
    hooks: Arc<[HookConfig]>,
    client: reqwest::Client,
    report: FailureReport,
) {
    tokio::spawn(async move {
        while !outbox.is_closed() {
            let (due, next) = outbox.take_due(AT_ONCE);
            for delivery in due {
                let (outbox, hooks) = (outbox.clone(), hooks.clone());
                let (client, report) = (client.clone(), report.clone());
                tokio::spawn(async move {
                    let state = try_once(&delivery, &hooks, &client, outbox.backoff()).await;
                    if let (Status::Pending | Status::Failed, Some(error)) =
                        (state.status, &state.last_error)
                    {
                        tracing::warn!(id = %delivery.id, hook = %delivery.hook, attempts = state.attempts, status = state.status.name(), %error, "a webhook delivery failed");
                        report(&delivery.hook, error);
                    }
                    if let Err(error) = outbox.settle(&delivery.id, state) {
                        tracing::error!(id = %delivery.id, %error, "cannot record a webhook delivery's try");
                    }
                });
            }
            outbox.wait(next).await;
        }
    });
}

/// One try of `delivery`, if its hook is still configured with the same URL; its new state.
async fn try_once(
    delivery: &Delivery,
    hooks: &[HookConfig],
    client: &reqwest::Client,
    backoff: Backoff,
) -> State {
    let key = &delivery.hook;
    let Some(hook) = hooks.iter().find(|hook| hook.key() == *key) else {
        return given_up(
            &delivery.state,
            format!("{key} is no longer configured: not sent"),
        );
    };
    let HookAction::Url {
        url,
        headers,
        secret,
    } = &hook.action
    else {
        return given_up(
            &delivery.state,
            format!("{key} is now a command, not a URL: not sent"),
        );
    };
    if url_fingerprint(url) != delivery.url_sha256 {
        return given_up(
            &delivery.state,
            format!("{key} has another URL than when this was queued: not sent to it"),
        );
    }
    let target = Target {
        url,
        headers,
        secret: secret.as_deref(),
        timeout: hook.timeout,
    };
    let answer = post(client, &target, &delivery.id, &delivery.body).await;
    after_try(
        &delivery.state,
        answer,
        url,
        backoff,
        &delivery.id,
        Utc::now(),
    )
}

/// The state after a try at `now` that got `answer`: delivered on a 2xx; failed on 410 Gone
/// or after the last try; otherwise pending, tried again after the back-off.
fn after_try(
    before: &State,
    answer: Result<Posted, String>,
    url: &str,
    backoff: Backoff,
    id: &str,
    now: DateTime<Utc>,
) -> State {
    let attempts = before.attempts + 1;
    let tried = |status, next_attempt_at, last_error: Option<String>| State {
        status,
        attempts,
        last_attempt_at: Some(now),
        next_attempt_at,
        last_error: last_error.map(|error| crate::redact::redact(&error).into_owned()),
    };
    let error = match answer {
        Ok(posted) if posted.status.is_success() => return tried(Status::Delivered, None, None),
        Ok(posted) if posted.status == reqwest::StatusCode::GONE => {
            let error = format!("{}; it wants no more deliveries", posted.refusal(url));
            return tried(Status::Failed, None, Some(error));
        }
        Ok(posted) => posted.refusal(url),
        Err(error) => error,
    };
    match backoff.after(attempts, id) {
        Some(wait) => {
            let next = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
            tried(Status::Pending, Some(next), Some(error))
        }
        None => tried(
            Status::Failed,
            None,
            Some(format!("{error} (given up after {MAX_ATTEMPTS} tries)")),
        ),
    }
}

/// `before`, failed for `why` without a try.
fn given_up(before: &State, why: String) -> State {
    State {
        status: Status::Failed,
        next_attempt_at: None,
        last_error: Some(why),
        ..before.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16) -> Result<Posted, String> {
        Ok(Posted {
            status: reqwest::StatusCode::from_u16(status).unwrap(),
            text: "busy".to_owned(),
        })
    }

    #[test]
    fn a_2xx_delivers_410_ends_anything_else_is_tried_again_until_the_last_try() {
        let now = Utc::now();
        let backoff = Backoff::default();
        let url = "http://127.0.0.1:9/hook";
        let first = State::new_at(now);
        let delivered = after_try(&first, answered(204), url, backoff, "msg_a", now);
        assert_eq!(delivered.status, Status::Delivered);
        assert_eq!((delivered.attempts, delivered.next_attempt_at), (1, None));

        let again = after_try(&first, answered(503), url, backoff, "msg_a", now);
        assert_eq!(again.status, Status::Pending);
        assert_eq!(again.attempts, 1);
        let wait = again.next_attempt_at.unwrap() - now;
        assert!(
            (24..=36).contains(&wait.num_seconds()),
            "the second try about 30 s later: {wait}"
        );
        assert!(
            again.last_error.as_deref().unwrap().contains("503"),
            "{again:?}"
        );

        let no_answer = after_try(
            &first,
            Err("the POST to x failed: connection refused".to_owned()),
            url,
            backoff,
            "msg_a",
            now,
        );
        assert_eq!(no_answer.status, Status::Pending);

        let gone = after_try(&again, answered(410), url, backoff, "msg_a", now);
        assert_eq!((gone.status, gone.attempts), (Status::Failed, 2));
        assert!(gone.last_error.unwrap().contains("410"));

        let mut state = first;
        for _ in 0..MAX_ATTEMPTS {
            assert_eq!(state.status, Status::Pending);
            state = after_try(&state, answered(500), url, backoff, "msg_a", now);
        }
        assert_eq!(
            (state.status, state.attempts),
            (Status::Failed, MAX_ATTEMPTS)
        );
        assert!(
            state.last_error.unwrap().contains("given up after 5 tries"),
            "the last try ends it"
        );
    }
}
