//! How a server's tool is shown to the model: `mcp__<server>__<tool>`, its description and its
//! input schema, each cut to what every provider accepts. A name or schema that had to change
//! is logged once, when the server's tools are listed.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The prefix of every MCP tool name the model sees.
pub const PREFIX: &str = "mcp__";
/// Providers take tool names of at most 64 characters from `[a-zA-Z0-9_-]`.
pub const MAX_NAME: usize = 64;
/// Descriptions longer than this are cut (OpenAI's function description limit).
pub const MAX_DESCRIPTION: usize = 1024;
/// A schema larger than this, as JSON, is replaced by an open object schema.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;

/// The name the model sees for `tool` of `server` (whose name is already valid). Characters
/// providers refuse become `_`; a name too long keeps its start and gets a short hash of the
/// whole, so two long names stay apart.
pub fn model_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("{PREFIX}{server}__{clean}");
    if full.len() <= MAX_NAME && clean == tool {
        return full;
    }
    let hash = Sha256::digest(tool.as_bytes());
    let tag = format!(
        "_{:02x}{:02x}{:02x}{:02x}",
        hash[0], hash[1], hash[2], hash[3]
    );
    if full.len() <= MAX_NAME - tag.len() {
        return full + &tag;
    }
    // ASCII only by now: any byte is a character boundary.
    format!("{}{tag}", &full[..MAX_NAME - tag.len()])
}

/// The server's name in a model-facing tool name, if it is one.
pub fn server_of(model_name: &str) -> Option<&str> {
    split(model_name).map(|(server, _)| server)
}

/// A model-facing tool name's server and tool, if it is one.
pub fn split(model_name: &str) -> Option<(&str, &str)> {
    model_name.strip_prefix(PREFIX)?.split_once("__")
}

/// The description the model sees, at most [`MAX_DESCRIPTION`] characters; `None` when it
/// had to be cut.
pub fn description(server: &str, description: Option<&str>) -> (String, bool) {
    let text = match description.map(str::trim).filter(|text| !text.is_empty()) {
        Some(text) => text.to_owned(),
        None => format!("A tool of the MCP server `{server}`."),
    };
    if text.chars().count() <= MAX_DESCRIPTION {
        return (text, false);
    }
    let cut: String = text.chars().take(MAX_DESCRIPTION - 1).collect();
    (cut + "…", true)
}

/// The input schema the model sees: always an object schema; one larger than
/// [`MAX_SCHEMA_BYTES`] becomes an open object (the server still checks the arguments).
/// The flag says it was replaced.
pub fn schema(input: &Map<String, Value>) -> (Value, bool) {
    let mut schema = Value::Object(input.clone());
    if schema.to_string().len() > MAX_SCHEMA_BYTES {
        return (json!({"type": "object", "properties": {}}), true);
    }
    let object = schema.as_object_mut().expect("built from a map");
    object.insert("type".to_owned(), json!("object"));
    object.entry("properties").or_insert_with(|| json!({}));
    (schema, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_kept_and_others_made_valid_and_distinct() {
        assert_eq!(model_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(model_name("e", "get-sum"), "mcp__e__get-sum");
        let dotted = model_name("e", "a.b");
        assert!(dotted.starts_with("mcp__e__a_b_"), "{dotted}");
        assert_ne!(dotted, model_name("e", "a/b"));
        let long = "x".repeat(100);
        let cut = model_name("server", &long);
        assert_eq!(cut.len(), MAX_NAME);
        assert_ne!(cut, model_name("server", &format!("{long}y")));
        assert_eq!(server_of(&cut), Some("server"));
        assert_eq!(server_of("mcp__a-b__c__d"), Some("a-b"));
        assert_eq!(server_of("shell"), None);
    }

    #[test]
    fn descriptions_and_schemas_are_cut_to_the_limits() {
        assert_eq!(description("s", Some(" Echo ")), ("Echo".to_owned(), false));
        assert_eq!(description("s", None).0, "A tool of the MCP server `s`.");
        let (cut, was_cut) = description("s", Some(&"é".repeat(2000)));
        assert!(was_cut);
        assert_eq!(cut.chars().count(), MAX_DESCRIPTION);

        let given = json!({"properties": {"a": {"type": "string"}}});
        let (kept, replaced) = schema(given.as_object().unwrap());
        assert!(!replaced);
        assert_eq!(kept["type"], "object");
        assert_eq!(kept["properties"]["a"]["type"], "string");
        let huge = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        let (open, replaced) = schema(huge.as_object().unwrap());
        assert!(replaced);
        assert_eq!(open, json!({"type": "object", "properties": {}}));
    }
}
