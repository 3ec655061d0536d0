//! The parts of `docs/api.md` that are generated from the typed contract, so the reference
//! cannot drift from what the service sends: the table of each SSE stream's events, from the
//! schemas of `ConversationEvent` and `ListEvent`. A test compares them with the file;
//! `OPENVAALA_WRITE_DOCS=1 cargo test --lib api::reference` writes them into it.

use serde_json::Value;
use utoipa::PartialSchema;

use super::events::{ConversationEvent, ListEvent};

/// A generated section of `docs/api.md`: its name (in the markers around it) and its text.
pub fn sections() -> Vec<(&'static str, String)> {
    vec![
        (
            "conversation-events",
            event_table(&schema_json::<ConversationEvent>()),
        ),
        ("list-events", event_table(&schema_json::<ListEvent>())),
    ]
}

fn schema_json<T: PartialSchema>() -> Value {
    serde_json::to_value(T::schema()).expect("a schema is plain JSON")
}

/// One row per event: its `type`, the fields of its `data` besides `type`, and what it means.
fn event_table(schema: &Value) -> String {
    let mut table = String::from("| event (`type`) | data | meaning |\n|---|---|---|\n");
    for event in schema["oneOf"].as_array().into_iter().flatten() {
        let name = event["properties"]["type"]["enum"][0]
            .as_str()
            .unwrap_or("?");
        // `required` keeps the fields' order of declaration (every field is required: an
        // absent value is sent as `null`).
        let fields: Vec<String> = event["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|field| *field != "type")
            .map(|field| {
                let property = &event["properties"][field];
                format!("\"{field}\": {}", type_name(property))
            })
            .collect();
        let meaning = event["description"]
            .as_str()
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        table.push_str(&format!(
            "| `{name}` | `{{{}}}` | {meaning} |\n",
            fields.join(", ")
        ));
    }
    table
}

/// A property's type as the reference shows it: a schema's name, `[Item]` for an array of
/// them, the values of a string enum, or the JSON type.
fn type_name(property: &Value) -> String {
    if let Some(reference) = property["$ref"].as_str() {
        return reference.rsplit('/').next().unwrap_or(reference).to_owned();
    }
    if property["type"] == "array" {
        return format!("[{}]", type_name(&property["items"]));
    }
    if let Some(values) = property["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        return values.join(" \\| ");
    }
    match &property["type"] {
        Value::String(name) => name.clone(),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" \\| "),
        _ if property["oneOf"].is_array() => property["oneOf"]
            .as_array()
            .into_iter()
            .flatten()
            .map(type_name)
            .collect::<Vec<_>>()
            .join(" \\| "),
        _ => "object".to_owned(),
    }
}

/// `text` with each generated section replaced by its current content; `None` when a
/// section's markers are missing.
pub fn updated(text: &str) -> Result<String, String> {
    let mut text = text.to_owned();
    for (name, content) in sections() {
        let (begin, end) = (
            format!("<!-- generated: {name} -->\n"),
            format!("<!-- end: {name} -->"),
        );
        let start = text
            .find(&begin)
            .ok_or_else(|| format!("docs/api.md has no `{}` marker", begin.trim()))?
            + begin.len();
        let stop = text[start..]
            .find(&end)
            .ok_or_else(|| format!("docs/api.md has no `{end}` marker"))?
            + start;
        text.replace_range(start..stop, &content);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/api.md shows every event exactly as the types define it.
    #[test]
    fn the_reference_shows_every_event_as_the_types_define_it() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md");
        let text = std::fs::read_to_string(path).expect("docs/api.md");
        let current = updated(&text).expect("the markers are in place");
        if std::env::var_os("OPENVAALA_WRITE_DOCS").is_some() {
            std::fs::write(path, &current).expect("docs/api.md is writable");
            return;
        }
        assert!(
            current == text,
            "docs/api.md is out of date with the event types; run \
             `OPENVAALA_WRITE_DOCS=1 cargo test --lib api::reference` and commit the result"
        );
    }

    #[test]
    fn every_event_kind_has_a_row() {
        for (name, table) in sections() {
            let rows = table.lines().count() - 2;
            let expected = if name == "conversation-events" { 20 } else { 8 };
            assert_eq!(rows, expected, "{name}:\n{table}");
        }
        let table = &sections()[0].1;
        assert!(table.contains(
            "| `item.delta` | `{\"session_id\": string, \"item_id\": string, \"field\": DeltaField, \"delta\": string}` |"
        ));
    }
}
