//! How the plain chat prints: to stdout, flushed at once (the prompt has no newline).

use std::io::Write as _;
use std::sync::Mutex;

use crate::client::render::Renderer;
use crate::domain::Item;

/// Prints stored items in full (see `Renderer::stored_item`).
pub(super) fn print_stored(renderer: &Mutex<Renderer>, items: &[Item]) {
    let mut out = String::new();
    {
        let mut renderer = renderer.lock().expect("renderer lock");
        for item in items {
            out += &renderer.stored_item(item);
        }
    }
    print_out(&out);
}

pub(super) fn print_out(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}
