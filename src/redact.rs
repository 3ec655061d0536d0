//! Configured secrets never leave, in any form, by any path. Providers and gateways sometimes
//! echo the request's credentials (in error bodies, in error events inside a stream, even in
//! the model's own text), and a tool can print them. Everything that is stored or sent passes
//! through here first: model errors ([`model_error`], also key-shaped strings and URL
//! credentials), the model's streamed text and tool output ([`StreamRedactor`], then
//! [`redact`] on the stored whole), and tool arguments ([`redact_json`]).
//!
//! What counts as a secret: the values of the providers' key variables (`api_key_env`) and the
//! userinfo and query values of their `base_url`s. What is redacted: any stretch of 8 or more
//! characters of a secret, in any case, raw, URL-encoded or base64 (at any alignment). So a key
//! upper-cased, split in two halves or encoded is caught as well as the raw form. The secrets
//! are registered once, when the runtime starts ([`register_key_variables`],
//! [`register_secrets`]), and kept compiled as the set of their 8-character stretches.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use base64::Engine as _;
use serde_json::Value;

use crate::model::ModelError;

/// What stands where a secret was.
pub const REDACTED: &str = "[redacted]";

/// Key values shorter than this are not searched for (they would redact ordinary words); no
/// real API key is this short.
const MIN_SECRET_CHARS: usize = 6;
/// An `sk-` prefix needs this many key characters after it to count as a key.
const MIN_SK_TAIL: usize = 8;
/// The shortest stretch of a secret that is redacted wherever it appears.
const STRETCH: usize = 8;

/// The registered secrets, compiled.
#[derive(Default)]
struct Secrets {
    /// Every secret, raw (short ones are replaced whole: they have no stretch of 8).
    values: Vec<String>,
    /// Every 8-byte stretch of every form of every secret, lower-cased, as a number.
    stretches: HashSet<u64>,
    /// Every beginning (1 to 7 bytes) of those stretches and of the short secrets, with its
    /// length (`prefix_key`): the end of a streamed piece is held back only while it could be
    /// the start of one.
    prefixes: HashSet<u64>,
}

static SECRETS: RwLock<Option<Arc<Secrets>>> = RwLock::new(None);

fn secrets() -> Option<Arc<Secrets>> {
    SECRETS.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Adds the values of the variables holding API keys (the providers' `api_key_env`), as they
/// are now in the environment.
pub fn register_key_variables(names: impl IntoIterator<Item = String>) {
    register_secrets(
        names
            .into_iter()
            .filter_map(|name| std::env::var(name).ok()),
    );
}

/// Adds secrets given as values (the credentials in a `base_url`).
pub fn register_secrets(values: impl IntoIterator<Item = String>) {
    let mut guard = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    let mut all: Vec<String> = guard.as_ref().map(|s| s.values.clone()).unwrap_or_default();
    let known = all.len();
    for value in values {
        let value = value.trim().to_owned();
        if value.chars().count() >= MIN_SECRET_CHARS && !all.contains(&value) {
            all.push(value);
        }
    }
    // Nothing new (a conversation loaded again registers its servers' credentials again).
    if all.len() == known {
        return;
    }
    *guard = Some(Arc::new(compile(all)));
}

/// The secrets in a provider's `base_url`: its userinfo (user and password) and the values of
/// its query (an API key passed as `?key=…`).
pub fn url_secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Some((_, rest)) = url.split_once("://") else {
        return found;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        found.extend(userinfo.split(':').map(str::to_owned));
    }
    if let Some((_, query)) = rest.split_once('?') {
        let query = query.split('#').next().unwrap_or("");
        found.extend(form_urlencoded::parse(query.as_bytes()).map(|(_, value)| value.into_owned()));
    }
    found
}

fn compile(values: Vec<String>) -> Secrets {
    let mut stretches = HashSet::new();
    let mut prefixes = HashSet::new();
    for value in &values {
        for form in forms(value) {
            let bytes = form.to_ascii_lowercase().into_bytes();
            for window in bytes.windows(STRETCH) {
                stretches.insert(stretch_key(window));
                for len in 1..STRETCH {
                    prefixes.insert(prefix_key(&window[..len]));
                }
            }
        }
        if value.len() < STRETCH {
            let bytes = value.to_ascii_lowercase().into_bytes();
            for len in 1..bytes.len() {
                prefixes.insert(prefix_key(&bytes[..len]));
            }
        }
    }
    Secrets {
        values,
        stretches,
        prefixes,
    }
}

/// The key of a beginning of a stretch (shorter than a stretch): its bytes, lower-cased, and
/// its length in the last byte.
fn prefix_key(bytes: &[u8]) -> u64 {
    let mut key = [0u8; 8];
    for (to, from) in key.iter_mut().zip(bytes) {
        *to = from.to_ascii_lowercase();
    }
    key[7] = bytes.len() as u8;
    u64::from_le_bytes(key)
}

/// The forms a secret can travel in: raw, URL-encoded, and base64 (standard and URL-safe) at
/// each of the three alignments it can have inside a longer encoded text (the last characters
/// of each depend on what follows, so they are left out).
fn forms(value: &str) -> Vec<String> {
    let mut forms = vec![
        value.to_owned(),
        form_urlencoded::byte_serialize(value.as_bytes()).collect(),
    ];
    let bytes = value.as_bytes();
    for skip in 0..3.min(bytes.len()) {
        for engine in [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::URL_SAFE,
        ] {
            let encoded = engine.encode(&bytes[skip..]);
            let stable = encoded.len().saturating_sub(4);
            forms.push(encoded[..stable].to_owned());
        }
    }
    forms
}

fn stretch_key(window: &[u8]) -> u64 {
    let mut key = [0u8; 8];
    key.copy_from_slice(window);
    u64::from_le_bytes(key)
}

impl Secrets {
    /// The byte ranges of `text` that hold a stretch of a secret (merged, in order).
    /// Where a stretch of a secret starts in `bytes`, in order (any case).
    fn stretch_starts<'b>(&'b self, bytes: &'b [u8]) -> impl Iterator<Item = usize> + 'b {
        let mut window = [0u8; 8];
        let last = if self.stretches.is_empty() {
            None
        } else {
            bytes.len().checked_sub(STRETCH)
        };
        last.into_iter()
            .flat_map(|last| 0..=last)
            .filter(move |&start| {
                for (to, from) in window.iter_mut().zip(&bytes[start..start + STRETCH]) {
                    *to = from.to_ascii_lowercase();
                }
                self.stretches.contains(&u64::from_le_bytes(window))
            })
    }

    fn ranges(&self, text: &str) -> Vec<(usize, usize)> {
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        // Secrets are ASCII, so a match never starts or ends inside a character.
        for start in self.stretch_starts(text.as_bytes()) {
            let end = start + STRETCH;
            match ranges.last_mut() {
                Some(last) if start <= last.1 => last.1 = end,
                _ => ranges.push((start, end)),
            }
        }
        for value in self.values.iter().filter(|v| v.len() < STRETCH) {
            for (start, _) in text.match_indices(value.as_str()) {
                ranges.push((start, start + value.len()));
            }
        }
        ranges.sort_unstable();
        ranges
    }

    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let ranges = self.ranges(text);
        if ranges.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = 0;
        for (start, end) in ranges {
            if end <= rest {
                continue;
            }
            out.push_str(&text[rest..start.max(rest)]);
            out.push_str(REDACTED);
            rest = end;
        }
        out.push_str(&text[rest..]);
        Cow::Owned(out)
    }
}

/// Whether `bytes` hold a stretch of a configured secret in any of its forms: what may not be
/// stored at all, such as a file a checkpoint would keep (it cannot be redacted and still be
/// the file).
pub fn holds_secret(bytes: &[u8]) -> bool {
    secrets().is_some_and(|secrets| secrets.holds(bytes))
}

impl Secrets {
    fn holds(&self, bytes: &[u8]) -> bool {
        self.stretch_starts(bytes).next().is_some()
            || self
                .values
                .iter()
                .filter(|value| value.len() < STRETCH)
                .any(|value| memchr::memmem::find(bytes, value.as_bytes()).is_some())
    }
}

/// Whether any secret is configured: without one, nothing needs looking at.
pub fn active() -> bool {
    secrets().is_some()
}

/// `text` with every stretch of a configured secret replaced by [`REDACTED`]: the model's text,
/// a tool's output.
pub fn redact(text: &str) -> Cow<'_, str> {
    match secrets() {
        Some(secrets) => Cow::Owned(secrets.redact(text).into_owned()),
        None => Cow::Borrowed(text),
    }
}

/// Every string inside a JSON value redacted (a tool call's arguments).
pub fn redact_json(value: &mut Value) {
    let Some(secrets) = secrets() else {
        return;
    };
    fn walk(value: &mut Value, secrets: &Secrets) {
        match value {
            Value::String(text) => {
                if let Cow::Owned(clean) = secrets.redact(text) {
                    *text = clean;
                }
            }
            Value::Array(values) => values.iter_mut().for_each(|v| walk(v, secrets)),
            Value::Object(map) => map.values_mut().for_each(|v| walk(v, secrets)),
            _ => {}
        }
    }
    walk(value, &secrets);
}

/// Redacts a text that arrives in pieces (a streamed answer, a command's live output), so that
/// a secret split across pieces is caught too: the last characters of each piece are held back
/// until the next one (or the end) shows whether they start a secret.
#[derive(Debug, Default)]
pub struct StreamRedactor {
    pending: String,
}

impl StreamRedactor {
    /// What may be sent of the text so far, after this piece.
    pub fn push(&mut self, piece: &str) -> String {
        let Some(secrets) = secrets() else {
            return piece.to_owned();
        };
        self.pending.push_str(piece);
        let ranges = secrets.ranges(&self.pending);
        // Of the last STRETCH − 1 bytes, those that could begin a stretch the next piece
        // completes are held back (from the first that could); a stretch already found that
        // reaches into them is sent now, redacted.
        let bytes = self.pending.as_bytes();
        let mut cut = (bytes.len().saturating_sub(STRETCH - 1)..bytes.len())
            .find(|&start| secrets.prefixes.contains(&prefix_key(&bytes[start..])))
            .unwrap_or(bytes.len());
        if let Some(&(_, end)) = ranges
            .iter()
            .find(|(start, end)| *start < cut && *end > cut)
        {
            cut = end;
        }
        while !self.pending.is_char_boundary(cut) {
            cut -= 1;
        }
        let rest = self.pending.split_off(cut);
        let ready = std::mem::replace(&mut self.pending, rest);
        secrets.redact(&ready).into_owned()
    }

    /// Whether some of the text is held back (it could begin a secret).
    pub fn holds_back(&self) -> bool {
        !self.pending.is_empty()
    }

    /// What is held back, given up waiting for the next piece. Fewer bytes than a stretch: if
    /// they begin a secret, the rest of it is still redacted when it comes.
    pub fn flush(&mut self) -> String {
        self.finish()
    }

    /// What is left to send at the end of the text.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        redact(&rest).into_owned()
    }
}

/// A model error with every secret in its message redacted: configured secrets in any form,
/// key-shaped strings (`Bearer …`, `sk-…`), and the credentials of any URL it names.
pub fn model_error(error: ModelError) -> ModelError {
    match error {
        ModelError::Transient {
            message,
            retry_after,
        } => ModelError::Transient {
            message: redact_error(&message),
            retry_after,
        },
        ModelError::Fatal(message) => ModelError::Fatal(redact_error(&message)),
        ModelError::ContextOverflow(message) => ModelError::ContextOverflow(redact_error(&message)),
    }
}

/// An error message with secrets, key-shaped strings and URL credentials taken out.
pub fn redact_error(text: &str) -> String {
    let text = without_url_credentials(text);
    let text = redact(&text).into_owned();
    let text = redact_bearer_tokens(&text);
    redact_sk_keys(&text)
}

/// `text` with each of `keys` (and key-shaped strings) replaced by [`REDACTED`].
pub fn redact_with(text: &str, keys: &[String]) -> String {
    let secrets = compile(
        keys.iter()
            .map(|key| key.trim().to_owned())
            .filter(|key| key.chars().count() >= MIN_SECRET_CHARS)
            .collect(),
    );
    let text = secrets.redact(text).into_owned();
    let text = redact_bearer_tokens(&text);
    redact_sk_keys(&text)
}

/// URLs in an error message lose their userinfo and query (`https://user:pass@host/v1?key=…`
/// becomes `https://host/v1`): either can hold a credential.
fn without_url_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("://") {
        let scheme_start = rest[..found]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
            .map_or(0, |i| i + 1);
        let after = found + 3;
        let url_len = rest[after..]
            .find(|c: char| c.is_whitespace() || "\"'<>`)]},".contains(c))
            .unwrap_or(rest.len() - after);
        let url = &rest[after..after + url_len];
        out.push_str(&rest[..after]);
        let _ = scheme_start;
        let (authority, path) = match url.find(['/', '?', '#']) {
            Some(i) => url.split_at(i),
            None => (url, ""),
        };
        let host = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        let path = path.split(['?', '#']).next().unwrap_or("");
        out.push_str(host);
        out.push_str(path);
        rest = &rest[after + url_len..];
    }
    out.push_str(rest);
    out
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

/// A log writer that redacts what it passes on: the service's log (`OPENVAALA_LOG`, at any
/// level) never holds a configured secret, such as a key in a provider's `base_url` named in
/// a debug line. The log formatter writes each event whole, so a secret is never split
/// between two writes.
pub struct RedactingWriter<W>(pub W);

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match secrets() {
            Some(secrets) => {
                let text = String::from_utf8_lossy(buf);
                self.0.write_all(secrets.redact(&text).as_bytes())?;
            }
            None => self.0.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_holding_a_secret_in_any_form_are_found() {
        let key = "file-secret-0123456789abcdef";
        let secrets = compile(vec![key.to_owned()]);
        assert!(secrets.holds(format!("token={key}\n").as_bytes()));
        assert!(secrets.holds(key.to_uppercase().as_bytes()));
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("u:{key}"));
        assert!(secrets.holds(encoded.as_bytes()));
        assert!(!secrets.holds(b"an ordinary file\n"));
        assert!(!secrets.holds(b""));
    }

    #[test]
    fn a_secret_is_caught_in_any_case_split_or_encoded() {
        let key = "sk-test-Vaala0123456789abcdefXYZ";
        let secrets = compile(vec![key.to_owned()]);
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("user:{key}"));
        let (first, second) = key.split_at(15);
        let cases = [
            format!("echo {key} back"),
            format!("echo {} back", key.to_uppercase()),
            format!("half {first} and the other {second}"),
            format!(
                "percent {}",
                form_urlencoded::byte_serialize(key.as_bytes()).collect::<String>()
            ),
            format!("basic {encoded}"),
            format!("a stretch {} only", &key[7..16]),
        ];
        for text in cases {
            let clean = secrets.redact(&text);
            assert!(clean.contains(REDACTED), "{text} → {clean}");
            for window in key.as_bytes().windows(STRETCH) {
                let window = std::str::from_utf8(window).unwrap().to_ascii_lowercase();
                assert!(
                    !clean.to_ascii_lowercase().contains(&window),
                    "{text} → {clean}"
                );
            }
        }
        assert_eq!(
            secrets.redact("no secret here, 中文 too"),
            "no secret here, 中文 too"
        );
    }

    #[test]
    fn a_streamed_secret_split_across_pieces_never_goes_out() {
        let key = "Vaala-stream-secret-0123456789";
        *SECRETS.write().unwrap() = Some(Arc::new(compile(vec![key.to_owned()])));
        let text = format!("the key is {key}, done");
        for size in [1, 3, 7, 8, 13] {
            let mut redactor = StreamRedactor::default();
            let mut sent = String::new();
            for piece in text.as_bytes().chunks(size) {
                sent.push_str(&redactor.push(std::str::from_utf8(piece).unwrap()));
            }
            sent.push_str(&redactor.finish());
            assert!(!sent.contains(&key[..STRETCH]), "{size}: {sent}");
            assert!(
                sent.starts_with("the key is ") && sent.ends_with(", done"),
                "{sent}"
            );
            assert!(sent.contains(REDACTED), "{sent}");
        }
        // What cannot begin a secret is not held back: a command's line shows at once.
        let mut redactor = StreamRedactor::default();
        assert_eq!(redactor.push("waiting\n"), "waiting\n");
        assert_eq!(redactor.push("the Vaa"), "the ");
        assert!(redactor.push("se.\n").starts_with("Vaa"));
        *SECRETS.write().unwrap() = None;
    }

    #[test]
    fn urls_lose_their_credentials_and_queries_name_secrets() {
        assert_eq!(
            without_url_credentials(
                "calling https://bob:pw@api.example.com/v1/chat?key=abc failed"
            ),
            "calling https://api.example.com/v1/chat failed"
        );
        assert_eq!(
            url_secrets("https://bob:hunter2pw@host/v1?key=secret-in-query&x=1"),
            ["bob", "hunter2pw", "secret-in-query", "1"]
        );
    }

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
            ModelError::Fatal(_) | ModelError::ContextOverflow(_) => panic!("the class changed"),
        }
    }
}
