//! One provider's HTTP side: its client, the base URL its endpoints go under (written the way
//! either kind of SDK writes it) and its API key, read from the environment per request.

use std::time::Duration;

use reqwest::RequestBuilder;
use serde_json::Value;

use crate::config::{Protocol, ProviderConfig};
use crate::model::ModelError;

/// How long establishing a connection may take. There is deliberately no overall timeout: a
/// stream may run for minutes, and the turn loop times out the gap between chunks instead.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One provider's HTTP side: its client (one per provider, so connections are reused), its base
/// URL and where its key comes from.
#[derive(Debug, Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    base_url: String,
    /// The query of the configured `base_url` (`?api-version=…`, a gateway's `?key=…`): kept
    /// on every request, after the endpoint's path.
    query: Option<String>,
    /// The name of the variable holding the key; the key itself is read per request and never
    /// stored or logged.
    api_key_env: Option<String>,
}

impl Endpoint {
    pub fn new(provider: &ProviderConfig) -> Endpoint {
        let http = crate::tls::client_builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .expect("the HTTP client can be built (its TLS backend is compiled in)");
        let (base, query) = match provider.base_url.split_once('?') {
            Some((base, query)) => (base, Some(query.to_owned())),
            None => (provider.base_url.as_str(), None),
        };
        Endpoint {
            http,
            base_url: api_base(provider.protocol, base),
            query: query.filter(|query| !query.is_empty()),
            api_key_env: provider.api_key_env.clone(),
        }
    }

    /// A JSON POST to `{base_url}{path}`, where the base ends with the API's version (`/v1`)
    /// and `path` is the endpoint under it (`/chat/completions`, `/messages`), with the base
    /// URL's query after it.
    pub fn post(&self, path: &str, body: &Value) -> RequestBuilder {
        let url = match &self.query {
            Some(query) => format!("{}{path}?{query}", self.base_url),
            None => format!("{}{path}", self.base_url),
        };
        self.http
            .post(url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(body)
    }

    /// The API key, if the provider names a variable for it.
    pub fn api_key(&self) -> Result<Option<String>, ModelError> {
        let Some(name) = &self.api_key_env else {
            return Ok(None);
        };
        match std::env::var(name) {
            Ok(key) if !key.is_empty() => Ok(Some(key)),
            _ => Err(ModelError::Fatal(format!(
                "environment variable {name} is not set"
            ))),
        }
    }
}

/// The base URL the endpoints go under, from a `base_url` written the way either kind of SDK
/// writes it. The Anthropic SDK's base has no version (`https://api.anthropic.com`, and
/// gateways that stand in for it) and adds `/v1/messages`; the OpenAI SDK's base includes it
/// (`https://api.openai.com/v1`, `http://localhost:11434/v1`). So an Anthropic base gets `/v1`
/// unless it ends with it, and an OpenAI base gets `/v1` only when it is a bare host: other
/// OpenAI-compatible servers put their API under paths of their own (`…/v1beta/openai`,
/// `…/openai/v1`), which are used as written.
pub fn api_base(protocol: Protocol, base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let bare_host = reqwest::Url::parse(base).is_ok_and(|url| url.path() == "/");
    let add_version = match protocol {
        Protocol::AnthropicMessages => !base.ends_with("/v1"),
        Protocol::OpenaiChat | Protocol::OpenaiResponses => bare_host,
        Protocol::Demo => false,
    };
    if add_version {
        format!("{base}/v1")
    } else {
        base.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_keys_are_fatal_and_name_the_variable() {
        let endpoint = Endpoint::new(&ProviderConfig {
            protocol: crate::config::Protocol::OpenaiChat,
            base_url: "http://127.0.0.1:1/v1/".into(),
            api_key_env: Some("OPENVAALA_TEST_SURELY_UNSET_KEY".into()),
        });
        assert_eq!(
            endpoint.api_key(),
            Err(ModelError::Fatal(
                "environment variable OPENVAALA_TEST_SURELY_UNSET_KEY is not set".into()
            ))
        );
        assert_eq!(endpoint.base_url, "http://127.0.0.1:1/v1");
    }

    #[test]
    fn a_base_urls_query_stays_after_the_endpoints_path() {
        let endpoint = Endpoint::new(&ProviderConfig {
            protocol: crate::config::Protocol::OpenaiChat,
            base_url: "https://gateway.test/openai/v1?api-version=2025-01-01&key=k".into(),
            api_key_env: None,
        });
        let request = endpoint
            .post("/chat/completions", &Value::Null)
            .build()
            .unwrap();
        assert_eq!(
            request.url().as_str(),
            "https://gateway.test/openai/v1/chat/completions?api-version=2025-01-01&key=k"
        );
    }

    #[test]
    fn base_urls_work_as_either_sdk_writes_them() {
        let check = |protocol, base_url: &str, expected: &str| {
            assert_eq!(
                api_base(protocol, base_url),
                expected,
                "{protocol:?} {base_url}"
            );
        };
        let anthropic = Protocol::AnthropicMessages;
        check(
            anthropic,
            "https://api.anthropic.com",
            "https://api.anthropic.com/v1",
        );
        check(
            anthropic,
            "https://api.anthropic.com/",
            "https://api.anthropic.com/v1",
        );
        check(
            anthropic,
            "https://api.anthropic.com/v1",
            "https://api.anthropic.com/v1",
        );
        check(
            anthropic,
            "https://api.anthropic.com/v1/",
            "https://api.anthropic.com/v1",
        );
        check(
            anthropic,
            "https://gw.example/a/anthropic",
            "https://gw.example/a/anthropic/v1",
        );
        for openai in [Protocol::OpenaiChat, Protocol::OpenaiResponses] {
            check(
                openai,
                "https://api.openai.com",
                "https://api.openai.com/v1",
            );
            check(
                openai,
                "https://api.openai.com/",
                "https://api.openai.com/v1",
            );
            check(
                openai,
                "https://api.openai.com/v1",
                "https://api.openai.com/v1",
            );
            check(
                openai,
                "http://127.0.0.1:11434/v1/",
                "http://127.0.0.1:11434/v1",
            );
            // Compatible servers with paths of their own are used as written.
            check(
                openai,
                "https://g.example/v1beta/openai",
                "https://g.example/v1beta/openai",
            );
            check(
                openai,
                "https://r.example/api/v1",
                "https://r.example/api/v1",
            );
        }
    }
}
