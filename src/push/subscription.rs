//! A browser's push subscription, as `PushSubscription.toJSON()` gives it:
//! `{"endpoint": …, "keys": {"p256dh": …, "auth": …}}` (other fields, such as
//! `expirationTime`, are ignored). It comes from a client, so it is checked before anything
//! is sent: the endpoint must be an https URL (plain http only on this machine's loopback, for
//! a local receiver), and the keys must decode to a usable key and secret.

use std::net::IpAddr;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::encrypt::{ClientKeys, KeyError};

/// The subscription a browser hands over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    /// The push service's URL for this browser; the POSTs go there.
    pub endpoint: String,
    pub keys: SubscriptionKeys,
}

/// The browser's keys for this subscription, base64url.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionKeys {
    /// Its P-256 public key, an uncompressed point.
    pub p256dh: String,
    /// Its 16-byte authentication secret.
    pub auth: String,
}

/// Why a subscription cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    #[error("the endpoint {endpoint:?} {reason}")]
    Endpoint { endpoint: String, reason: String },
    #[error(transparent)]
    Keys(#[from] KeyError),
}

impl Subscription {
    /// Checks the subscription and gives its keys, decoded.
    pub fn check(&self) -> Result<ClientKeys, SubscriptionError> {
        self.endpoint_url()?;
        Ok(ClientKeys::decode(&self.keys.p256dh, &self.keys.auth)?)
    }

    /// The endpoint, if it is one the service sends to.
    pub fn endpoint_url(&self) -> Result<Url, SubscriptionError> {
        let refuse = |reason: &str| SubscriptionError::Endpoint {
            endpoint: self.endpoint.clone(),
            reason: reason.to_owned(),
        };
        let url = Url::parse(&self.endpoint)
            .map_err(|error| refuse(&format!("is not a URL: {error}")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("carries credentials"));
        }
        match url.scheme() {
            "https" if url.host().is_some() => Ok(url),
            "http" if url.host_str().is_some_and(is_loopback) => Ok(url),
            "http" => Err(refuse("is plain http, which only a loopback host may use")),
            _ => Err(refuse("is not an https URL")),
        }
    }
}

/// Whether a URL's host (IPv6 in brackets) is this machine's loopback.
fn is_loopback(host: &str) -> bool {
    let address = host.trim_start_matches('[').trim_end_matches(']');
    match address.parse::<IpAddr>() {
        Ok(address) => address.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P256DH: &str =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
    const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";

    fn at(endpoint: &str) -> Subscription {
        Subscription {
            endpoint: endpoint.to_owned(),
            keys: SubscriptionKeys {
                p256dh: P256DH.to_owned(),
                auth: AUTH.to_owned(),
            },
        }
    }

    #[test]
    fn reads_what_a_browser_gives() {
        let json = format!(
            r#"{{"endpoint":"https://fcm.googleapis.com/fcm/send/abc","expirationTime":null,
               "keys":{{"p256dh":"{P256DH}","auth":"{AUTH}"}}}}"#
        );
        let subscription: Subscription = serde_json::from_str(&json).unwrap();
        assert_eq!(subscription, at("https://fcm.googleapis.com/fcm/send/abc"));
        assert_eq!(
            subscription.check().unwrap(),
            ClientKeys::decode(P256DH, AUTH).unwrap()
        );
    }

    #[test]
    fn https_anywhere_and_http_only_on_loopback() {
        for endpoint in [
            "https://updates.push.services.mozilla.com/wpush/v2/x",
            "https://web.push.apple.com/abc",
            "http://127.0.0.1:8080/push/1",
            "http://127.8.9.10/push/1",
            "http://localhost:9/push",
            "http://[::1]:9/push",
        ] {
            assert!(at(endpoint).check().is_ok(), "{endpoint}");
        }
        for (endpoint, said) in [
            (
                "http://push.example.net/x",
                "the endpoint \"http://push.example.net/x\" is plain http, which only a loopback host may use",
            ),
            (
                "http://10.0.0.1/x",
                "the endpoint \"http://10.0.0.1/x\" is plain http, which only a loopback host may use",
            ),
            (
                "ftp://push.example.net/x",
                "the endpoint \"ftp://push.example.net/x\" is not an https URL",
            ),
            (
                "https://user:pw@push.example.net/x",
                "the endpoint \"https://user:pw@push.example.net/x\" carries credentials",
            ),
            (
                "/push/1",
                "the endpoint \"/push/1\" is not a URL: relative URL without a base",
            ),
        ] {
            assert_eq!(at(endpoint).check().unwrap_err().to_string(), said);
        }
    }

    #[test]
    fn bad_keys_are_named() {
        let mut subscription = at("https://push.example.net/x");
        subscription.keys.auth = "c2hvcnQ".into();
        assert_eq!(
            subscription.check().unwrap_err().to_string(),
            "keys.auth has 5 bytes; it should have 16"
        );
    }
}
