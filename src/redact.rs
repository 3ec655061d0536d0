//! Secrets never travel in a provider's error. Providers and gateways sometimes echo the
//! request's credentials in their error bodies; an error is stored (the turn's notice, its end
//! record, the index) and sent (`turn.ended`, `model.retry`, a compaction's answer), so every
//! model error is passed through [`model_error`] where it enters the runtime. Redacted: the
//! values of the configured key variables, and strings shaped like keys (`Bearer <token>`,
//! `sk-…`).
//!
//! The key values live in the process environment, which is global; so is the list of the
//! variables that hold them ([`register_key_variables`], called when the runtime starts).

use std::sync::RwLock;

use crate::model::ModelError;

/// What stands where a secret was.
pub const REDACTED: &str = "[redacted]";

/// The environment variables whose values are API keys.
static KEY_VARIABLES: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Key values shorter than this are not searched for (they would redact ordinary words); no
/// real API key is this short.
const MIN_SECRET_CHARS: usize = 6;
/// An `sk-` prefix needs this many key characters after it to count as a key.
const MIN_SK_TAIL: usize = 8;

/// Adds the variables holding API keys (the providers' `api_key_env`).
pub fn register_key_variables(names: impl IntoIterator<Item = String>) {
    let mut variables = KEY_VARIABLES.write().unwrap_or_else(|e| e.into_inner());
    for name in names {
        if !variables.contains(&name) {
            variables.push(name);
        }
    }
}

/// A model error with every secret in its message redacted.
pub fn model_error(error: ModelError) -> ModelError {
    match error {
        ModelError::Transient {
            message,
            retry_after,
        } => ModelError::Transient {
            message: redact(&message),
            retry_after,
        },
        ModelError::Fatal(message) => ModelError::Fatal(redact(&message)),
    }
}

/// `text` with the configured key values and key-shaped strings replaced by [`REDACTED`].
pub fn redact(text: &str) -> String {
    let keys: Vec<String> = KEY_VARIABLES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .collect();
    redact_with(text, &keys)
}

/// `text` with each of `keys` (and key-shaped strings) replaced by [`REDACTED`].
pub fn redact_with(text: &str, keys: &[String]) -> String {
    let mut text = text.to_owned();
    // Longest first: a key that contains another is replaced whole.
    let mut keys: Vec<&str> = keys
        .iter()
        .map(|key| key.trim())
        .filter(|key| key.chars().count() >= MIN_SECRET_CHARS)
        .collect();
    keys.sort_by_key(|key| std::cmp::Reverse(key.len()));
    for key in keys {
        text = text.replace(key, REDACTED);
    }
    let text = redact_bearer_tokens(&text);
    redact_sk_keys(&text)
}

/// Characters of a token in `Authorization: Bearer <token>` (RFC 6750's b64token).
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~+/=".contains(c)
}

/// `Bearer <token>` (the scheme in any case) becomes `Bearer [redacted]`.
fn redact_bearer_tokens(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    let mut search_from = 0;
    while let Some(found) = lower[search_from..].find("bearer") {
        let start = search_from + found;
        let after = start + "bearer".len();
        search_from = after;
        let starts_word = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_ascii_alphanumeric());
        let spaces = text[after..].len() - text[after..].trim_start_matches([' ', '\t']).len();
        if !starts_word || spaces == 0 {
            continue;
        }
        let token_start = after + spaces;
        let token_len: usize = text[token_start..]
            .chars()
            .take_while(|c| is_token_char(*c))
            .map(char::len_utf8)
            .sum();
        // A short word after "bearer" is prose ("the bearer of"), not a credential.
        if token_len < MIN_SECRET_CHARS {
            continue;
        }
        out.push_str(&text[rest..token_start]);
        out.push_str(REDACTED);
        rest = token_start + token_len;
        search_from = rest;
    }
    out.push_str(&text[rest..]);
    out
}

/// `sk-…` keys (OpenAI's and Anthropic's shapes: `sk-`, `sk-proj-`, `sk-ant-…`) become
/// [`REDACTED`].
fn redact_sk_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    let mut search_from = 0;
    while let Some(found) = text[search_from..].find("sk-") {
        let start = search_from + found;
        search_from = start + 3;
        let starts_word = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_ascii_alphanumeric());
        let tail_len: usize = text[start + 3..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .count();
        if !starts_word || tail_len < MIN_SK_TAIL {
            continue;
        }
        out.push_str(&text[rest..start]);
        out.push_str(REDACTED);
        rest = start + 3 + tail_len;
        search_from = rest;
    }
    out.push_str(&text[rest..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_keys_and_key_shaped_strings_are_redacted() {
        let keys = vec!["vaala-key-123456".to_owned(), "abc".to_owned()];
        #[rustfmt::skip]
        let cases: &[(&str, &str)] = &[
            ("invalid key vaala-key-123456!", "invalid key [redacted]!"),
            ("authorization=Bearer vaala-key-123456", "authorization=Bearer [redacted]"),
            ("header: bearer eyJhbGciOi.payload.sig rest", "header: bearer [redacted] rest"),
            ("BEARER   tok_123/+= and more", "BEARER   [redacted] and more"),
            ("key sk-proj-AbCdEfGh12345678, bad", "key [redacted], bad"),
            ("sk-ant-api03-abcdefgh", "[redacted]"),
            // Too short to be a key, or inside a word: left alone.
            ("an abc of sk-short and task-abcdefghijk", "an abc of sk-short and task-abcdefghijk"),
            ("the bearer of bad news", "the bearer of bad news"),
            ("unbearer token", "unbearer token"),
            ("no secrets here", "no secrets here"),
            ("中文 Bearer 密钥", "中文 Bearer 密钥"),
        ];
        for (text, expected) in cases {
            assert_eq!(redact_with(text, &keys), *expected, "{text:?}");
        }
    }

    #[test]
    fn a_model_errors_message_is_redacted_and_its_class_kept() {
        let error = model_error(ModelError::Transient {
            message: "echo: Bearer sk-abcdefghijkl".to_owned(),
            retry_after: Some(std::time::Duration::from_secs(2)),
        });
        match error {
            ModelError::Transient {
                message,
                retry_after,
            } => {
                assert_eq!(message, "echo: Bearer [redacted]");
                assert_eq!(retry_after, Some(std::time::Duration::from_secs(2)));
            }
            ModelError::Fatal(_) => panic!("the class changed"),
        }
    }
}
