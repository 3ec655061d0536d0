//! Fork and rewind work on the bytes of the root session's file: the copy is the
//! prefix of complete lines before a cut, with the session id rewritten in place, so a fork of
//! 10,000 items is one sequential read and write rather than item-by-item work.

use memchr::memmem;

use crate::domain::{Item, ItemKind};
use crate::store::records::SessionRecord;

/// Where the copy stops.
pub enum Cut<'a> {
    /// Before the first record of this turn (the running one): only finished turns are copied.
    BeforeTurn(&'a str),
    /// Before the first record of this item (the user message a rewind goes back to).
    BeforeItem(&'a str),
}

/// The byte offset of the start of the first line that matches the cut, or the end.
pub fn cut_offset(content: &[u8], cut: &Cut<'_>) -> usize {
    let needle = match cut {
        Cut::BeforeTurn(turn_id) => format!("\"turn_id\":\"{turn_id}\""),
        Cut::BeforeItem(item_id) => format!("\"item\":{{\"id\":\"{item_id}\""),
    };
    let finder = memmem::Finder::new(needle.as_bytes());
    let mut start = 0;
    while start < content.len() {
        let end = memchr::memchr(b'\n', &content[start..]).map_or(content.len(), |i| start + i + 1);
        if finder.find(&content[start..end]).is_some() {
            return start;
        }
        start = end;
    }
    content.len()
}

/// The line starting at `offset`, parsed as an item record.
pub fn item_at(content: &[u8], offset: usize) -> Option<Item> {
    let end = memchr::memchr(b'\n', &content[offset..]).map_or(content.len(), |i| offset + i);
    parse_item(&content[offset..end])
}

/// The last item record in `prefix` (whole lines).
pub fn last_item(prefix: &[u8]) -> Option<Item> {
    let trimmed = prefix.strip_suffix(b"\n").unwrap_or(prefix);
    let start = memchr::memrchr(b'\n', trimmed).map_or(0, |i| i + 1);
    parse_item(&trimmed[start..])
}

fn parse_item(line: &[u8]) -> Option<Item> {
    let envelope: crate::store::records::Envelope<SessionRecord> =
        serde_json::from_slice(line).ok()?;
    match envelope.record {
        SessionRecord::Item { item } => Some(item),
        SessionRecord::Output { .. } => None,
    }
}

/// Whether an item is a user message (the only thing a rewind may go back to).
pub fn is_user_message(item: &Item) -> bool {
    matches!(item.kind, ItemKind::UserMessage { .. })
}

/// Replaces the session id in every record's `"session_id"` field, in place. Session ids all
/// have the same length, and the quoted key cannot occur unescaped inside a JSON string, so
/// this touches exactly the fields and nothing else.
pub fn rewrite_session_id(content: &mut [u8], old: &str, new: &str) {
    assert_eq!(old.len(), new.len(), "session ids have one length");
    let needle = format!("\"session_id\":\"{old}\"");
    let replacement = format!("\"session_id\":\"{new}\"");
    let positions: Vec<usize> = memmem::find_iter(content, needle.as_bytes()).collect();
    for position in positions {
        content[position..position + needle.len()].copy_from_slice(replacement.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ItemStatus, MessageSource, now};
    use crate::store::jsonl::encode_lines;

    fn item(id: &str, turn: &str, seq: u64, kind: ItemKind) -> SessionRecord {
        SessionRecord::Item {
            item: Item {
                id: id.to_owned(),
                session_id: "s_old".to_owned(),
                turn_id: turn.to_owned(),
                seq,
                created_at: now(),
                status: ItemStatus::Completed,
                compacted: false,
                step: None,
                kind,
            },
        }
    }

    fn user(text: &str) -> ItemKind {
        ItemKind::UserMessage {
            hooks: Vec::new(),
            text: text.to_owned(),
            source: MessageSource::User,
            from_session_id: None,
            images: Vec::new(),
            command: None,
        }
    }

    #[test]
    fn cuts_before_a_turn_or_an_item_and_rewrites_only_session_fields() {
        let records = vec![
            item(
                "m1",
                "t1",
                1,
                user("mentions \"session_id\":\"s_old\" in text"),
            ),
            item(
                "m2",
                "t1",
                2,
                ItemKind::AgentMessage {
                    text: "answer".into(),
                },
            ),
            item("m3", "t2", 3, user("second")),
            item(
                "m4",
                "t2",
                4,
                ItemKind::AgentMessage {
                    text: "partial".into(),
                },
            ),
        ];
        let content = encode_lines(&records, None).unwrap();
        let turn_cut = cut_offset(&content, &Cut::BeforeTurn("t2"));
        assert_eq!(last_item(&content[..turn_cut]).unwrap().id, "m2");
        let item_cut = cut_offset(&content, &Cut::BeforeItem("m3"));
        assert_eq!(item_cut, turn_cut);
        assert!(is_user_message(&item_at(&content, item_cut).unwrap()));
        assert_eq!(
            cut_offset(&content, &Cut::BeforeItem("missing")),
            content.len()
        );
        assert_eq!(cut_offset(&content, &Cut::BeforeItem("m1")), 0);

        let mut copy = content[..turn_cut].to_vec();
        rewrite_session_id(&mut copy, "s_old", "s_new");
        let log = crate::store::jsonl::parse_log::<SessionRecord>(
            std::path::Path::new("x"),
            &copy,
            &Default::default(),
        )
        .unwrap();
        let items = crate::store::fold_items(log.records);
        assert!(items.iter().all(|item| item.session_id == "s_new"));
        let ItemKind::UserMessage { text, .. } = &items[0].kind else {
            panic!()
        };
        assert_eq!(
            text, "mentions \"session_id\":\"s_old\" in text",
            "text is untouched"
        );
    }
}
