//! The notices a turn stores for its users and its model: a spending limit reached, and the
//! MCP servers not ready for a model call (still starting, ready later, or failed).

use super::spec::TurnSpec;
use crate::domain::{Item, notice_item};
use crate::tools;

/// A notice of the turn, at `step`.
pub(super) fn turn_notice(spec: &TurnSpec, step: u32, text: String) -> Item {
    notice_item(
        spec.session_id.clone(),
        spec.turn_id.clone(),
        Some(step),
        text,
    )
}

/// A notice in the turn of `after`, stored after it.
pub(super) fn after(after: &Item, text: String) -> Item {
    notice_item(
        after.session_id.clone(),
        after.turn_id.clone(),
        after.step,
        text,
    )
}

/// What the turn says of MCP servers not ready for its first model call, if any.
pub(super) fn mcp_starting(starting: &[String], failed: &[(String, String)]) -> Option<String> {
    let mut said = Vec::new();
    if !starting.is_empty() {
        said.push(format!(
            "{} still starting: {} left out of this model call, and offered once ready.",
            servers(starting),
            if starting.len() == 1 {
                "its tools are"
            } else {
                "their tools are"
            }
        ));
    }
    for (name, error) in failed {
        said.push(format!(
            "The MCP server `{name}` could not start, so its tools are not offered: {error}"
        ));
    }
    (!said.is_empty()).then(|| said.join(" "))
}

/// What the turn says when servers that were starting are ready or failed.
pub(super) fn mcp_ready(starting: &[String], found: &tools::McpSpecs) -> Option<String> {
    let ready: Vec<String> = starting
        .iter()
        .filter(|name| !found.starting.contains(name))
        .filter(|name| !found.failed.iter().any(|(failed, _)| failed == *name))
        .cloned()
        .collect();
    let mut said = Vec::new();
    if !ready.is_empty() {
        said.push(format!(
            "{} ready: {} offered from this model call on.",
            servers(&ready),
            if ready.len() == 1 {
                "its tools are"
            } else {
                "their tools are"
            }
        ));
    }
    for (name, error) in &found.failed {
        said.push(format!(
            "The MCP server `{name}` could not start, so its tools are not offered: {error}"
        ));
    }
    (!said.is_empty()).then(|| said.join(" "))
}

/// "The MCP server `a` is" or "The MCP servers `a` and `b` are".
fn servers(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    match quoted.as_slice() {
        [one] => format!("The MCP server {one} is"),
        [rest @ .., last] => format!("The MCP servers {} and {last} are", rest.join(", ")),
        [] => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn servers_not_ready_are_named_with_what_happens_to_their_tools() {
        assert_eq!(mcp_starting(&[], &[]), None);
        assert_eq!(
            mcp_starting(
                &names(&["files"]),
                &[("search".to_owned(), "no answer".to_owned())]
            )
            .unwrap(),
            "The MCP server `files` is still starting: its tools are left out of this model \
             call, and offered once ready. The MCP server `search` could not start, so its \
             tools are not offered: no answer"
        );
        let found = tools::McpSpecs {
            specs: Vec::new(),
            starting: names(&["c"]),
            failed: Vec::new(),
        };
        assert_eq!(
            mcp_ready(&names(&["a", "b", "c"]), &found).unwrap(),
            "The MCP servers `a` and `b` are ready: their tools are offered from this model \
             call on."
        );
        let still = tools::McpSpecs {
            starting: names(&["a"]),
            ..tools::McpSpecs::default()
        };
        assert_eq!(mcp_ready(&names(&["a"]), &still), None);
    }
}
