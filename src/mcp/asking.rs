//! What a server asks of its client while one of its calls runs: a question for the user
//! (`elicitation/create`, a form of typed fields) or a completion from the agent's model
//! (`sampling/createMessage`). The hub knows nothing of turns: the call that runs brings a
//! [`CallPeer`] that answers for it (the runtime asks the user like an approval, and calls the
//! agent's model), and a request goes to the newest running call of that connection.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

/// A question a server asks the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub server: String,
    pub message: String,
    /// The fields asked for: a JSON Schema object whose properties are strings, numbers,
    /// integers, booleans or enums of strings.
    pub schema: Value,
}

/// The user's answer to a [`Question`].
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Submitted, with the fields' values (checked against the schema).
    Accepted(Map<String, Value>),
    /// Declined, or unanswered in time.
    Declined,
    /// The turn was interrupted or the service stops.
    Cancelled,
}

/// A server asks for a completion from the agent's model.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRequest {
    pub server: String,
    pub system_prompt: Option<String>,
    /// `(role, text)`: `user` or `assistant`.
    pub messages: Vec<(String, String)>,
    pub max_tokens: u32,
}

/// The model's completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// The provider's name of the model that wrote it.
    pub model: String,
    pub text: String,
}

/// Answers for one running call what its server asks.
pub trait CallPeer: Send + Sync {
    fn ask(&self, question: Question) -> BoxFuture<'static, Answer>;
    /// `Err` says why the server gets no completion (the user or the config refused it, or
    /// the model failed); the server is told.
    fn sample(&self, request: SampleRequest) -> BoxFuture<'static, Result<Sampled, String>>;
}

/// The longest question a server may ask, and the largest form: a server (a client-named one
/// runs what a model could have written) must not flood every client's approvals.
pub const MAX_MESSAGE_CHARS: usize = 4_000;
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// The most text a sampling request may send the model.
pub const MAX_SAMPLED_CHARS: usize = 100_000;

/// Why a question is not put to the user, if it is too big.
pub fn oversized_question(question: &Question) -> Option<String> {
    if question.message.chars().count() > MAX_MESSAGE_CHARS {
        return Some(format!(
            "its message is over {MAX_MESSAGE_CHARS} characters"
        ));
    }
    let schema = question.schema.to_string().len();
    (schema > MAX_SCHEMA_BYTES).then(|| format!("its form is over {MAX_SCHEMA_BYTES} bytes"))
}

/// Why a sampling request is refused, if it is too big.
pub fn oversized_sample(request: &SampleRequest) -> Option<String> {
    let chars: usize = request
        .messages
        .iter()
        .map(|(_, text)| text.chars().count())
        .chain(
            request
                .system_prompt
                .iter()
                .map(|text| text.chars().count()),
        )
        .sum();
    (chars > MAX_SAMPLED_CHARS)
        .then(|| format!("the request sends over {MAX_SAMPLED_CHARS} characters to the model"))
}

/// Checks a submitted answer against the question's schema: every required field present,
/// no field the schema does not ask for, each value of its type, in its enum and within its
/// bounds. The error names the field.
pub fn check_answer(schema: &Value, content: &Map<String, Value>) -> Result<(), String> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for required in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !content.contains_key(required) {
            return Err(format!("`{required}` is required"));
        }
    }
    for (name, value) in content {
        let Some(field) = properties.get(name) else {
            return Err(format!("the question asks for no field `{name}`"));
        };
        check_field(name, field, value)?;
    }
    Ok(())
}

fn check_field(name: &str, field: &Value, value: &Value) -> Result<(), String> {
    let kind = field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    let fits = match kind {
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => value.is_string(),
    };
    if !fits {
        return Err(format!("`{name}` must be {}", article(kind)));
    }
    if let Some(choices) = field.get("enum").and_then(Value::as_array)
        && !choices.contains(value)
    {
        let listed: Vec<String> = choices.iter().map(Value::to_string).collect();
        return Err(format!("`{name}` must be one of {}", listed.join(", ")));
    }
    if let Some(number) = value.as_f64() {
        if let Some(minimum) = field.get("minimum").and_then(Value::as_f64)
            && number < minimum
        {
            return Err(format!("`{name}` must be at least {minimum}"));
        }
        if let Some(maximum) = field.get("maximum").and_then(Value::as_f64)
            && number > maximum
        {
            return Err(format!("`{name}` must be at most {maximum}"));
        }
    }
    if let Some(text) = value.as_str() {
        let length = text.chars().count() as u64;
        if let Some(min) = field.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            return Err(format!("`{name}` must be at least {min} characters long"));
        }
        if let Some(max) = field.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            return Err(format!("`{name}` must be at most {max} characters long"));
        }
    }
    Ok(())
}

fn article(kind: &str) -> &'static str {
    match kind {
        "boolean" => "true or false",
        "integer" => "a whole number",
        "number" => "a number",
        _ => "a text",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "environment": {"type": "string", "enum": ["staging", "production"]},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                "confirm": {"type": "boolean"},
                "note": {"type": "string", "maxLength": 5}
            },
            "required": ["environment"]
        })
    }

    fn check(content: Value) -> Result<(), String> {
        check_answer(&schema(), content.as_object().unwrap())
    }

    #[test]
    fn a_question_or_a_sampling_request_too_big_is_refused() {
        let question = |message: String, schema: Value| Question {
            server: "s".to_owned(),
            message,
            schema,
        };
        assert_eq!(
            oversized_question(&question("Where?".to_owned(), schema())),
            None
        );
        assert!(
            oversized_question(&question("x".repeat(MAX_MESSAGE_CHARS + 1), schema())).is_some()
        );
        let huge = json!({"type": "object", "properties": {"a": {"type": "string", "description": "d".repeat(MAX_SCHEMA_BYTES)}}});
        assert!(oversized_question(&question("Where?".to_owned(), huge)).is_some());
        let sample = |text: String| SampleRequest {
            server: "s".to_owned(),
            system_prompt: None,
            messages: vec![("user".to_owned(), text)],
            max_tokens: 10,
        };
        assert_eq!(oversized_sample(&sample("hi".to_owned())), None);
        assert!(oversized_sample(&sample("x".repeat(MAX_SAMPLED_CHARS + 1))).is_some());
    }

    #[test]
    fn an_answer_must_fit_the_questions_fields() {
        assert_eq!(
            check(json!({"environment": "production", "replicas": 3, "confirm": true})),
            Ok(())
        );
        assert_eq!(check(json!({"environment": "staging"})), Ok(()));
        assert_eq!(
            check(json!({"replicas": 3})),
            Err("`environment` is required".to_owned())
        );
        assert_eq!(
            check(json!({"environment": "moon"})),
            Err("`environment` must be one of \"staging\", \"production\"".to_owned())
        );
        assert_eq!(
            check(json!({"environment": "staging", "replicas": 50})),
            Err("`replicas` must be at most 10".to_owned())
        );
        assert_eq!(
            check(json!({"environment": "staging", "replicas": 2.5})),
            Err("`replicas` must be a whole number".to_owned())
        );
        assert_eq!(
            check(json!({"environment": "staging", "confirm": "yes"})),
            Err("`confirm` must be true or false".to_owned())
        );
        assert_eq!(
            check(json!({"environment": "staging", "note": "too long"})),
            Err("`note` must be at most 5 characters long".to_owned())
        );
        assert_eq!(
            check(json!({"environment": "staging", "other": 1})),
            Err("the question asks for no field `other`".to_owned())
        );
    }
}
