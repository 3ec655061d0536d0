//! Where `chat` is in a conversation's stream, so that a reconnect that cannot be replayed
//! reads from the history exactly what was not seen finished.

use serde_json::Value;

/// Where a terminal is in a conversation's stream, so that a reconnect misses nothing: the
/// last event's id, and the root session's items it has seen start and finish.
#[derive(Default)]
pub struct Position {
    pub last_event_id: Option<String>,
    pub root_session_id: String,
    /// The newest item seen.
    newest_seq: u64,
    /// Items seen start and not yet finish.
    open: std::collections::BTreeSet<u64>,
}

impl Position {
    pub fn observe(&mut self, kind: &str, data: &Value) {
        match kind {
            "snapshot" => {
                self.root_session_id = text(&data["conversation"]["root_session_id"]).to_owned();
                self.newest_seq = data["last_seq"][&self.root_session_id]
                    .as_u64()
                    .unwrap_or(0);
                self.open = data["running"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|turn| turn["items"].as_array().into_iter().flatten())
                    .filter(|item| self.is_root(item) && item["status"] == "running")
                    .filter_map(|item| item["seq"].as_u64())
                    .collect();
            }
            "item.started" | "item.completed" => {
                let item = &data["item"];
                let Some(seq) = item["seq"].as_u64().filter(|_| self.is_root(item)) else {
                    return;
                };
                self.newest_seq = self.newest_seq.max(seq);
                if kind == "item.started" {
                    self.open.insert(seq);
                } else {
                    self.open.remove(&seq);
                }
            }
            _ => {}
        }
    }

    fn is_root(&self, item: &Value) -> bool {
        item["session_id"] == self.root_session_id.as_str()
    }

    /// The history after this `seq` holds everything not seen finished.
    pub fn resume_after(&self) -> u64 {
        self.open
            .first()
            .map_or(self.newest_seq, |&first| first.saturating_sub(1))
    }
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(session: &str, seq: u64, status: &str) -> Value {
        json!({ "item": { "session_id": session, "seq": seq, "status": status } })
    }

    #[test]
    fn a_reconnect_asks_the_history_for_everything_not_seen_finished() {
        let mut position = Position::default();
        position.observe(
            "snapshot",
            &json!({
                "conversation": { "root_session_id": "s_root" },
                "last_seq": { "s_root": 5, "s_sub": 9 },
                "running": [{ "items": [
                    { "session_id": "s_root", "seq": 5, "status": "running" },
                    { "session_id": "s_sub", "seq": 9, "status": "running" },
                ] }],
            }),
        );
        // Item 5 is still streaming: the history after 4 holds its end.
        assert_eq!(position.resume_after(), 4);
        position.observe("item.completed", &item("s_root", 5, "completed"));
        assert_eq!(position.resume_after(), 5);
        position.observe("item.started", &item("s_root", 6, "running"));
        position.observe("item.started", &item("s_root", 7, "running"));
        position.observe("item.completed", &item("s_root", 7, "completed"));
        // A sub-agent's items have seqs of their own session: they do not count.
        position.observe("item.completed", &item("s_sub", 12, "completed"));
        assert_eq!(position.resume_after(), 5);
        position.observe("item.completed", &item("s_root", 6, "completed"));
        assert_eq!(position.resume_after(), 7);
    }
}
