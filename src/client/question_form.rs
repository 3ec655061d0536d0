//! An MCP server's question (an approval with `question`) as the terminal clients ask it: one
//! field at a time, each typed value read as its schema says (a choice by its text or its
//! number, yes or no, a number within its bounds). The service checks the whole answer again.

use serde_json::{Map, Value};

use crate::api::approvals::ApprovalQuestion;
use crate::text::visible;

/// One field of the form.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    label: String,
    description: Option<String>,
    kind: Kind,
    required: bool,
    default: Option<Value>,
    minimum: Option<f64>,
    maximum: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Choice(Vec<String>),
    Boolean,
    Integer,
    Number,
    Text,
}

/// The question's fields, in the schema's order (the service keeps the server's).
pub fn fields(question: &ApprovalQuestion) -> Vec<Field> {
    let required: Vec<&str> = question.schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(properties) = question.schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, field)| {
            let choices: Option<Vec<String>> = field["enum"].as_array().map(|choices| {
                choices
                    .iter()
                    .map(|choice| choice.as_str().map_or(choice.to_string(), str::to_owned))
                    .collect()
            });
            let kind = match (choices, field["type"].as_str()) {
                (Some(choices), _) => Kind::Choice(choices),
                (None, Some("boolean")) => Kind::Boolean,
                (None, Some("integer")) => Kind::Integer,
                (None, Some("number")) => Kind::Number,
                _ => Kind::Text,
            };
            Field {
                name: name.clone(),
                label: field["title"].as_str().unwrap_or(name).to_owned(),
                description: field["description"].as_str().map(str::to_owned),
                kind,
                required: required.contains(&name.as_str()),
                default: field.get("default").cloned(),
                minimum: field["minimum"].as_f64(),
                maximum: field["maximum"].as_f64(),
            }
        })
        .collect()
}

impl Field {
    /// What the field takes, in words: `one of staging, production; required`.
    pub fn takes(&self) -> String {
        let mut what = match &self.kind {
            Kind::Choice(choices) => format!(
                "one of {}",
                choices
                    .iter()
                    .map(|choice| visible(choice).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Kind::Boolean => "yes or no".to_owned(),
            Kind::Integer => "a whole number".to_owned(),
            Kind::Number => "a number".to_owned(),
            Kind::Text => "text".to_owned(),
        };
        match (self.minimum, self.maximum) {
            (Some(min), Some(max)) => what += &format!(" from {min} to {max}"),
            (Some(min), None) => what += &format!(" of at least {min}"),
            (None, Some(max)) => what += &format!(" of at most {max}"),
            (None, None) => {}
        }
        if self.required {
            what += "; required";
        }
        what
    }

    /// The line that asks for it.
    pub fn prompt(&self) -> String {
        let choices = match &self.kind {
            Kind::Choice(choices) => format!(
                " [{}]",
                choices
                    .iter()
                    .enumerate()
                    .map(|(at, choice)| format!("{} {}", at + 1, visible(choice)))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ),
            Kind::Boolean => " [y/n]".to_owned(),
            _ => String::new(),
        };
        let about = self
            .description
            .as_deref()
            .map(|text| format!(" ({})", visible(text)))
            .unwrap_or_default();
        let empty = match (&self.default, self.required) {
            (Some(default), _) => format!(", Enter for {}", shown(default)),
            (None, false) => ", Enter to leave it out".to_owned(),
            (None, true) => String::new(),
        };
        format!("{}{about}{choices}{empty}: ", visible(&self.label))
    }

    /// The value a typed line gives the field: `Ok(None)` leaves an optional field out.
    pub fn read(&self, line: &str) -> Result<Option<Value>, String> {
        let line = line.trim();
        if line.is_empty() {
            return match (&self.default, self.required) {
                (Some(default), _) => Ok(Some(default.clone())),
                (None, false) => Ok(None),
                (None, true) => Err(format!("{} is required", self.label)),
            };
        }
        let value = match &self.kind {
            Kind::Choice(choices) => {
                let picked = line
                    .parse::<usize>()
                    .ok()
                    .and_then(|number| choices.get(number.checked_sub(1)?))
                    .or_else(|| {
                        choices
                            .iter()
                            .find(|choice| choice.eq_ignore_ascii_case(line))
                    });
                match picked {
                    Some(choice) => Value::String(choice.clone()),
                    None => return Err(format!("answer {}", self.takes())),
                }
            }
            Kind::Boolean => match line.to_lowercase().as_str() {
                "y" | "yes" | "true" => Value::Bool(true),
                "n" | "no" | "false" => Value::Bool(false),
                _ => return Err("answer y or n".to_owned()),
            },
            Kind::Integer => match line.parse::<i64>() {
                Ok(number) => Value::from(number),
                Err(_) => return Err("answer a whole number".to_owned()),
            },
            Kind::Number => match line.parse::<f64>() {
                Ok(number) if number.is_finite() => Value::from(number),
                _ => return Err("answer a number".to_owned()),
            },
            Kind::Text => Value::String(line.to_owned()),
        };
        if let Some(number) = value.as_f64()
            && (self.minimum.is_some_and(|min| number < min)
                || self.maximum.is_some_and(|max| number > max))
        {
            return Err(format!("answer {}", self.takes()));
        }
        Ok(Some(value))
    }
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => visible(text).into_owned(),
        Value::Bool(true) => "yes".to_owned(),
        Value::Bool(false) => "no".to_owned(),
        other => other.to_string(),
    }
}

/// The question and its fields, for the approval's description.
pub fn describe(question: &ApprovalQuestion) -> String {
    let mut out = format!(
        "the MCP server `{}` asks: {}\n",
        visible(&question.server),
        visible(&question.message)
    );
    for field in fields(question) {
        out += &format!("  {}: {}\n", visible(&field.label), field.takes());
    }
    out
}

/// A question's answer as a line: `environment: production, replicas: 3`.
pub fn answered(content: &Map<String, Value>) -> String {
    content
        .iter()
        .map(|(name, value)| format!("{}: {}", visible(name), shown(value)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn question() -> ApprovalQuestion {
        ApprovalQuestion {
            server: "asker".to_owned(),
            message: "Where should the service be deployed?".to_owned(),
            schema: json!({
                "type": "object",
                "properties": {
                    "environment": {"type": "string", "title": "Environment", "enum": ["staging", "production"]},
                    "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10},
                    "confirm": {"type": "boolean", "title": "Run the migrations too", "default": false}
                },
                "required": ["environment"]
            }),
            answer: None,
        }
    }

    #[test]
    fn each_field_reads_its_own_kind_of_value() {
        let fields = fields(&question());
        let names: Vec<&str> = fields.iter().map(|field| field.name.as_str()).collect();
        // In the server's order (serde_json keeps it here).
        assert_eq!(names, ["environment", "replicas", "confirm"]);
        let (environment, replicas, confirm) = (&fields[0], &fields[1], &fields[2]);
        assert_eq!(
            environment.prompt(),
            "Environment [1 staging | 2 production]: "
        );
        assert_eq!(environment.read("2"), Ok(Some(json!("production"))));
        assert_eq!(environment.read("Staging"), Ok(Some(json!("staging"))));
        assert_eq!(
            environment.read(""),
            Err("Environment is required".to_owned())
        );
        assert_eq!(
            environment.read("moon"),
            Err("answer one of staging, production; required".to_owned())
        );
        assert_eq!(replicas.read("3"), Ok(Some(json!(3))));
        assert_eq!(replicas.read(""), Ok(None));
        assert_eq!(
            replicas.read("50"),
            Err("answer a whole number from 1 to 10".to_owned())
        );
        assert_eq!(
            replicas.read("two"),
            Err("answer a whole number".to_owned())
        );
        assert_eq!(confirm.read(""), Ok(Some(json!(false))));
        assert_eq!(confirm.read("yes"), Ok(Some(json!(true))));
        assert_eq!(
            confirm.prompt(),
            "Run the migrations too [y/n], Enter for no: "
        );
        assert_eq!(
            describe(&question()),
            "the MCP server `asker` asks: Where should the service be deployed?\n  \
             Environment: one of staging, production; required\n  Replicas: a whole number \
             from 1 to 10\n  Run the migrations too: yes or no\n"
        );
    }
}
