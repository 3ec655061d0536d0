//! Deltas that reach a subscriber together go out as one event. A subscriber that fell behind
//! the stream (its connection or its client slower than the model) would be sent every
//! `item.delta` of a burst, each a frame of its own for a few bytes of text, and its client
//! would parse each. Consecutive deltas of the same item and field in one batch become one
//! `item.delta` with their texts in order and the id of the last: the client sees the same
//! text, and a reconnect with that id resumes after all of them.

use std::borrow::Cow;

use serde::Deserialize;

use crate::api::events::{ConversationEvent, DeltaField};
use crate::bus::Event;

const DELTA: &str = "item.delta";

/// What a merge needs of an `item.delta` (borrowed where the JSON allows).
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    session_id: Cow<'a, str>,
    #[serde(borrow)]
    item_id: Cow<'a, str>,
    field: DeltaField,
    #[serde(borrow)]
    delta: Cow<'a, str>,
}

impl Delta<'_> {
    fn continues(&self, other: &Delta<'_>) -> bool {
        self.session_id == other.session_id
            && self.item_id == other.item_id
            && self.field == other.field
    }
}

/// `batch` with every run of two or more consecutive deltas of one item and field merged.
/// Events are left as they are (the same shared frames) when nothing merges.
pub fn coalesce(batch: Vec<Event>) -> Vec<Event> {
    let adjacent = batch
        .windows(2)
        .any(|pair| pair[0].kind == DELTA && pair[1].kind == DELTA);
    if !adjacent {
        return batch;
    }
    let mut out: Vec<Event> = Vec::with_capacity(batch.len());
    let mut run: Vec<Event> = Vec::new();
    for event in batch {
        if event.kind == DELTA {
            let continues = match (run.last(), parse(&event)) {
                (Some(last), Some(next)) => parse(last).is_some_and(|last| last.continues(&next)),
                _ => false,
            };
            if !continues {
                flush(&mut run, &mut out);
            }
            run.push(event);
        } else {
            flush(&mut run, &mut out);
            out.push(event);
        }
    }
    flush(&mut run, &mut out);
    out
}

fn parse(event: &Event) -> Option<Delta<'_>> {
    serde_json::from_str(event.data()).ok()
}

/// Moves the run into `out`: one event alone as it is, several merged into one.
fn flush(run: &mut Vec<Event>, out: &mut Vec<Event>) {
    if run.len() < 2 {
        out.append(run);
        return;
    }
    let parsed: Option<Vec<Delta<'_>>> = run.iter().map(parse).collect();
    let Some(parsed) = parsed else {
        out.append(run);
        return;
    };
    let first = &parsed[0];
    let merged = ConversationEvent::ItemDelta {
        session_id: first.session_id.to_string(),
        item_id: first.item_id.to_string(),
        field: first.field,
        delta: parsed.iter().map(|delta| delta.delta.as_ref()).collect(),
    };
    let last_id = run.last().expect("a run of two or more").id;
    out.push(Event::of(last_id, &merged));
    run.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::EventBus;

    fn delta(bus: &EventBus, item: &str, text: &str) -> Event {
        bus.publish(&ConversationEvent::ItemDelta {
            session_id: "s".into(),
            item_id: item.into(),
            field: DeltaField::Text,
            delta: text.into(),
        })
    }

    #[test]
    fn consecutive_deltas_of_one_item_merge_into_one_with_the_last_id() {
        let bus = EventBus::new();
        let started = bus.publish_as("item.started", &serde_json::json!({ "n": 0 }));
        let a = delta(&bus, "i1", "Hel");
        let b = delta(&bus, "i1", "lo, \"wo");
        let c = delta(&bus, "i1", "rld\"\n");
        let other = delta(&bus, "i2", "x");
        let alone = bus.publish_as("item.completed", &serde_json::json!({ "n": 1 }));
        let d = delta(&bus, "i2", "y");
        let batch = vec![
            started.clone(),
            a,
            b,
            c.clone(),
            other.clone(),
            alone.clone(),
            d.clone(),
        ];
        let merged = coalesce(batch);
        let ids: Vec<_> = merged.iter().map(|event| event.id).collect();
        assert_eq!(ids, [started.id, c.id, other.id, alone.id, d.id]);
        let data: serde_json::Value = serde_json::from_str(merged[1].data()).unwrap();
        assert_eq!(data["type"], "item.delta");
        assert_eq!(data["item_id"], "i1");
        assert_eq!(data["field"], "text");
        assert_eq!(data["delta"], "Hello, \"world\"\n");
        // Events that did not merge are the bus's own frames, not copies.
        assert_eq!(merged[2].frame.as_ptr(), other.frame.as_ptr());
        assert_eq!(merged[3].frame.as_ptr(), alone.frame.as_ptr());
    }

    #[test]
    fn a_batch_without_adjacent_deltas_is_left_alone() {
        let bus = EventBus::new();
        let a = delta(&bus, "i1", "a");
        let done = bus.publish_as("item.completed", &serde_json::json!({}));
        let b = delta(&bus, "i1", "b");
        let batch = vec![a.clone(), done, b.clone()];
        let out = coalesce(batch);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].frame.as_ptr(), a.frame.as_ptr());
        assert_eq!(out[2].frame.as_ptr(), b.frame.as_ptr());
    }
}
