//! How the plain chat prints: to stdout, flushed at once (the prompt has no newline).

use std::io::Write as _;
use std::sync::Mutex;

use serde_json::Value;

use crate::client::render::Renderer;

/// Prints stored items in full (see `Renderer::stored_item`).
pub(super) fn print_stored(renderer: &Mutex<Renderer>, items: &[Value]) {
    let mut out = String::new();
    {
        let mut renderer = renderer.lock().expect("renderer lock");
        for item in items {
            out += &renderer.stored_item(item);
        }
    }
    print_out(&out);
}

pub(super) fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

pub(super) fn text_or<'a>(value: &'a Value, default: &'a str) -> &'a str {
    value.as_str().unwrap_or(default)
}

pub(super) fn print_out(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Percent-encodes a search query for the URL.
pub(super) fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
