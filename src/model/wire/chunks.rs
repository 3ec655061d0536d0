//! Reading a streamed chunk's JSON: strictly where a broken chunk must fail (as a transient error),
//! leniently where a provider may put any type where text is expected, and tool-call arguments
//! always as an object.

use serde_json::{Value, json};

use super::errors::quote;
use super::sse::Event;
use crate::model::ModelError;

/// Parses one chunk's JSON; a chunk that is not JSON is worth retrying (a proxy cut it, or the
/// server hiccupped), so it is transient.
pub fn parse_chunk(data: &str) -> Result<Value, ModelError> {
    parse_chunk_as(data)
}

/// `parse_chunk` into a type of the protocol's own, which reads the fields it needs without
/// building a tree of the whole chunk.
pub fn parse_chunk_as<'a, T: serde::Deserialize<'a>>(data: &'a str) -> Result<T, ModelError> {
    serde_json::from_str(data).map_err(|error| {
        ModelError::transient(format!(
            "malformed chunk from provider: {error} in `{}`",
            quote(data)
        ))
    })
}

/// A model's tool-call arguments as a JSON object. Text that is not a JSON object is passed on
/// as `{"_raw": text}` so the tool can report the problem to the model instead of the turn
/// failing; no text at all means no arguments.
pub fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({ "_raw": text }),
    }
}

/// An event's type: its data's `type` field, or else its SSE event name.
pub fn kind_or_name<'a>(kind: &'a LenientText<'_>, event: &'a Event) -> &'a str {
    if kind.0.is_empty() {
        &event.event
    } else {
        &kind.0
    }
}

/// A text field of a streamed chunk, read leniently: a string (borrowed from the chunk when it
/// has no escapes), or empty for a null, a missing field or any other type, which a chunk
/// may carry where text is expected and which is not worth failing a stream over.
#[derive(Debug, Default)]
pub struct LenientText<'a>(pub std::borrow::Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for LenientText<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = LenientText<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(LenientText(text.into()))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(LenientText(text.to_owned().into()))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(LenientText(text.into()))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(LenientText::default())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(LenientText::default())
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

/// A string field of a JSON value, or "".
pub fn text_of<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_always_an_object() {
        assert_eq!(parse_arguments(r#"{"a": 1}"#), json!({"a": 1}));
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments(r#"{"a": "#), json!({"_raw": r#"{"a": "#}));
        assert_eq!(parse_arguments("[1]"), json!({"_raw": "[1]"}));
    }
}
