//! Output that passes through a redactor (a tool's, a model's text) is held back by a few bytes
//! that could begin a secret: how long it waits, and what goes out at the stream's end. Used by
//! both the tool calls (`mod.rs`) and the model call (`model_call.rs`).

use crate::api::events::DeltaField;
use crate::domain::Item;
use crate::redact::StreamRedactor;
use crate::runtime::link::{ActorLink, TurnMsg};

/// How long the last bytes of a paused command's output (or a paused model's text) are held
/// back, in case they begin a secret that the next piece completes (at most 7 bytes of one
/// could then show).
pub(super) const HELD_OUTPUT_WAIT: std::time::Duration = std::time::Duration::from_millis(150);

/// What a stream's redactor still held (a tool's output, a text item's text), sent at its end.
pub(super) fn forward_rest(
    redactor: &mut StreamRedactor,
    item: &Item,
    field: DeltaField,
    link: &ActorLink,
) {
    let rest = redactor.finish();
    if !rest.is_empty() {
        link.send(TurnMsg::Delta {
            item_id: item.id.clone(),
            field,
            delta: rest,
        });
    }
}
