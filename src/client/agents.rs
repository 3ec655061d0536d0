//! `/agents` in `chat`: the agents of a conversation as a tree, with what each waits for.

use serde_json::Value;

use super::api::{Api, ApiError};
use super::approval_prompt::subject_line;
use super::render::tool_label;

/// The tree of a conversation's agents, as it is now.
pub async fn show(api: &Api, conversation: &str) -> Result<String, ApiError> {
    let view = api
        .get(&format!("/api/conversations/{conversation}"))
        .await?;
    let list = |key: &str| view[key].as_array().cloned().unwrap_or_default();
    Ok(agents_tree(&list("sessions"), &list("approvals")))
}

/// The root agent, then each sub-agent under its parent, indented by depth, with its status,
/// task and last answer, and under each agent the approvals it waits for (from the
/// conversation's `approvals`).
pub fn agents_tree(sessions: &[Value], approvals: &[Value]) -> String {
    let depth = |session: &Value| {
        let mut depth = 0;
        let mut parent = &session["parent_id"];
        while let Some(up) = sessions.iter().find(|s| s["id"] == *parent) {
            depth += 1;
            parent = &up["parent_id"];
        }
        depth
    };
    let mut out = String::new();
    // Depth-first from the root, children in the order they were created.
    let mut stack: Vec<&Value> = sessions
        .iter()
        .filter(|s| s["parent_id"].is_null())
        .rev()
        .collect();
    while let Some(session) = stack.pop() {
        let indent = "  ".repeat(depth(session));
        let role = if session["parent_id"].is_null() {
            "root"
        } else {
            "sub-agent"
        };
        let task = session["task"]
            .as_str()
            .map(|task| format!(": {}", task.lines().next().unwrap_or_default()))
            .unwrap_or_default();
        out.push_str(&format!(
            "{indent}[{role} {} ({}) {}{task}]\n",
            text(&session["agent"]),
            text(&session["status"]),
            text(&session["id"])
        ));
        if let Some(last) = session["last_message"].as_str() {
            let line = last.lines().next().unwrap_or_default();
            let excerpt: String = line.chars().take(100).collect();
            out.push_str(&format!("{indent}  last: {excerpt}\n"));
        }
        for approval in approvals
            .iter()
            .filter(|approval| approval["session_id"] == session["id"])
        {
            out.push_str(&format!(
                "{indent}  waits for approval {}: {} {}\n",
                text(&approval["id"]),
                tool_label(text(&approval["tool"])),
                subject_line(&approval["subject"])
            ));
        }
        stack.extend(
            sessions
                .iter()
                .filter(|s| s["parent_id"] == session["id"])
                .rev(),
        );
    }
    out
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agents_are_listed_as_a_tree_under_their_parents_with_what_they_wait_for() {
        let session = |id: &str, parent: Option<&str>, task: Option<&str>, last: Option<&str>| json!({ "id": id, "parent_id": parent, "agent": "default", "status": "idle", "task": task, "last_message": last });
        let approval = json!({
            "id": "ap_7", "session_id": "s_a1", "tool": "shell",
            "subject": { "command": "touch x", "cwd": "/srv" },
        });
        let tree = agents_tree(
            &[
                session("s_root", None, None, Some("All done.")),
                session("s_a", Some("s_root"), Some("look at A"), None),
                session(
                    "s_b",
                    Some("s_root"),
                    Some("look at B\nin depth"),
                    Some("B is fine"),
                ),
                session("s_a1", Some("s_a"), Some("deeper"), None),
            ],
            &[approval],
        );
        assert_eq!(
            tree,
            "[root default (idle) s_root]\n  last: All done.\n\
             \x20 [sub-agent default (idle) s_a: look at A]\n\
             \x20   [sub-agent default (idle) s_a1: deeper]\n\
             \x20     waits for approval ap_7: shell $ touch x\n\
             \x20 [sub-agent default (idle) s_b: look at B]\n    last: B is fine\n"
        );
    }
}
