//! What a tool call gets and gives: where and within which limits it runs ([`ToolContext`]),
//! its arguments as the model sent them (read by name and type here) and its result. Kept apart
//! from the front (`tools/mod.rs`), which runs the tools, so that the tools use no module that
//! uses them.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::group_records;
use crate::sandbox::SandboxPolicy;

/// Where and within which limits a tool call runs; the turn loop builds it from the conversation.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The conversation's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// The longest a shell command may run. A model's `timeout_s` can shorten it, never extend it.
    pub shell_timeout: Duration,
    /// Cap on the text a tool returns, so one command cannot flood the model's context.
    pub max_output_bytes: usize,
    /// Where running shell commands are recorded, so a restart after a crash can kill them
    /// (`group_records`); `None` records nothing.
    pub process_records: Option<group_records::GroupRecords>,
    /// What the tools may write and reach, and the variables their processes never see.
    pub sandbox: SandboxPolicy,
    /// The MCP servers the agent uses (`None`: none).
    pub mcp: Option<crate::mcp::McpAccess>,
    /// Where `shell` with `background` starts processes, and whose they are (`None`: it
    /// cannot).
    pub background: Option<super::background::BackgroundScope>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    /// The tool did its work; for `shell` this includes a non-zero exit code.
    Completed,
    /// The tool could not do its work (bad arguments, missing file, timeout); the output says why.
    Failed,
    /// The turn was interrupted while the tool ran; the output so far is kept.
    Interrupted,
    /// Not run: the permissions refused it, or a user denied it; the output says why.
    Denied,
}

#[derive(Debug, Clone)]
pub struct ToolResult {
    pub output: String,
    /// Only `shell` sets it, and only when the command exited on its own (not by a signal).
    pub exit_code: Option<i32>,
    pub status: ToolStatus,
    /// Images for the model with the result (only MCP tools return some).
    pub images: Vec<crate::domain::Image>,
}

impl ToolResult {
    pub fn completed(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            exit_code: None,
            status: ToolStatus::Completed,
            images: Vec::new(),
        }
    }

    pub fn failed(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            exit_code: None,
            status: ToolStatus::Failed,
            images: Vec::new(),
        }
    }

    pub fn denied(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            exit_code: None,
            status: ToolStatus::Denied,
            images: Vec::new(),
        }
    }

    pub fn interrupted(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            exit_code: None,
            status: ToolStatus::Interrupted,
            images: Vec::new(),
        }
    }
}

/// A required string parameter; the error names the parameter so the model can fix its call.
pub(crate) fn required_string<'a>(arguments: &'a Value, name: &str) -> Result<&'a str, String> {
    optional_string(arguments, name)?
        .ok_or_else(|| format!("missing required parameter `{name}` (a string)"))
}

/// An optional string parameter; `null` counts as absent.
pub(crate) fn optional_string<'a>(
    arguments: &'a Value,
    name: &str,
) -> Result<Option<&'a str>, String> {
    match parameter(arguments, name)? {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(format!(
            "parameter `{name}` must be a string, not {}",
            json_kind(other)
        )),
    }
}

/// The `path` parameter, which must name something: an empty path would silently mean the cwd.
pub(crate) fn required_path(arguments: &Value) -> Result<&str, String> {
    let path = required_string(arguments, "path")?;
    if path.is_empty() {
        return Err("parameter `path` must not be empty".to_owned());
    }
    Ok(path)
}

/// An optional parameter of any JSON type; `null` counts as absent.
pub(crate) fn optional_value<'a>(
    arguments: &'a Value,
    name: &str,
) -> Result<Option<&'a Value>, String> {
    parameter(arguments, name)
}

/// An optional number parameter; `null` counts as absent.
pub(crate) fn optional_number(arguments: &Value, name: &str) -> Result<Option<f64>, String> {
    match parameter(arguments, name)? {
        None => Ok(None),
        Some(Value::Number(number)) => Ok(number.as_f64()),
        Some(other) => Err(format!(
            "parameter `{name}` must be a number, not {}",
            json_kind(other)
        )),
    }
}

/// An optional boolean parameter; `null` counts as absent.
pub(crate) fn optional_bool(arguments: &Value, name: &str) -> Result<Option<bool>, String> {
    match parameter(arguments, name)? {
        None => Ok(None),
        Some(Value::Bool(value)) => Ok(Some(*value)),
        Some(other) => Err(format!(
            "parameter `{name}` must be true or false, not {}",
            json_kind(other)
        )),
    }
}

/// An optional whole number within `range` (a count of lines or results); `null` counts as
/// absent. `5.0` is taken as 5, as some models write numbers that way.
pub(crate) fn optional_count(
    arguments: &Value,
    name: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, String> {
    let out_of_range = || {
        format!(
            "parameter `{name}` must be a whole number from {} to {}",
            range.start(),
            range.end()
        )
    };
    let Some(number) = optional_number(arguments, name)? else {
        return Ok(None);
    };
    if number.fract() != 0.0 || number < *range.start() as f64 || number > *range.end() as f64 {
        return Err(out_of_range());
    }
    Ok(Some(number as u64))
}

fn parameter<'a>(arguments: &'a Value, name: &str) -> Result<Option<&'a Value>, String> {
    match arguments {
        // A model that calls a tool without arguments may send nothing at all.
        Value::Null => Ok(None),
        Value::Object(map) => Ok(map.get(name).filter(|value| !value.is_null())),
        other => Err(format!(
            "the arguments must be a JSON object, not {}",
            json_kind(other)
        )),
    }
}

pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parameters_are_checked_by_name_and_type() {
        let arguments = json!({"command": 3, "path": null, "timeout_s": "soon"});
        assert_eq!(
            required_string(&arguments, "command").unwrap_err(),
            "parameter `command` must be a string, not a number"
        );
        assert_eq!(
            required_string(&arguments, "path").unwrap_err(),
            "missing required parameter `path` (a string)"
        );
        assert_eq!(
            optional_number(&arguments, "timeout_s").unwrap_err(),
            "parameter `timeout_s` must be a number, not a string"
        );
        assert_eq!(optional_string(&Value::Null, "path"), Ok(None));
    }

    #[test]
    fn booleans_and_counts() {
        let arguments = json!({"yes": true, "no": "false", "n": 5.0, "half": 2.5, "zero": 0});
        assert_eq!(optional_bool(&arguments, "yes"), Ok(Some(true)));
        assert_eq!(optional_bool(&arguments, "absent"), Ok(None));
        assert_eq!(
            optional_bool(&arguments, "no").unwrap_err(),
            "parameter `no` must be true or false, not a string"
        );
        assert_eq!(optional_count(&arguments, "n", 1..=10), Ok(Some(5)));
        assert_eq!(optional_count(&arguments, "absent", 1..=10), Ok(None));
        for name in ["half", "zero"] {
            assert_eq!(
                optional_count(&arguments, name, 1..=10).unwrap_err(),
                format!("parameter `{name}` must be a whole number from 1 to 10")
            );
        }
        assert!(optional_count(&arguments, "n", 1..=4).is_err());
    }
}
