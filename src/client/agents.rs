//! `/agents` in `chat`: the agents of a conversation as a tree, with what each waits for.

use super::api::{Api, ApiError};
use super::approval_prompt::subject_line;
use super::render::tool_label;
use crate::api::approvals::Approval;
use crate::domain::Session;

/// The tree of a conversation's agents, as it is now.
pub async fn show(api: &Api, conversation: &str) -> Result<String, ApiError> {
    let view = api.conversation(conversation).await?;
    Ok(agents_tree(&view.sessions, &view.approvals))
}

/// The root agent, then each sub-agent under its parent, indented by depth, with its status,
/// task and last answer, and under each agent the approvals it waits for (from the
/// conversation's `approvals`).
pub fn agents_tree(sessions: &[Session], approvals: &[Approval]) -> String {
    let depth = |session: &Session| {
        let mut depth = 0;
        let mut parent = session.parent_id.as_deref();
        while let Some(up) = parent.and_then(|id| sessions.iter().find(|s| s.id == id)) {
            depth += 1;
            parent = up.parent_id.as_deref();
        }
        depth
    };
    let mut out = String::new();
    // Depth-first from the root, children in the order they were created.
    let mut stack: Vec<&Session> = sessions
        .iter()
        .filter(|s| s.parent_id.is_none())
        .rev()
        .collect();
    while let Some(session) = stack.pop() {
        let indent = "  ".repeat(depth(session));
        let role = if session.parent_id.is_none() {
            "root"
        } else {
            "sub-agent"
        };
        let task = session
            .task
            .as_deref()
            .map(|task| format!(": {}", task.lines().next().unwrap_or_default()))
            .unwrap_or_default();
        out.push_str(&format!(
            "{indent}[{role} {} ({}) {}{task}]\n",
            session.agent,
            super::wire_text(&session.status),
            session.id
        ));
        if let Some(last) = &session.last_message {
            let line = last.lines().next().unwrap_or_default();
            let excerpt: String = line.chars().take(100).collect();
            out.push_str(&format!("{indent}  last: {excerpt}\n"));
        }
        for approval in approvals
            .iter()
            .filter(|approval| approval.session_id == session.id)
        {
            out.push_str(&format!(
                "{indent}  waits for approval {}: {} {}\n",
                approval.id,
                tool_label(&approval.tool),
                subject_line(&approval.subject)
            ));
        }
        stack.extend(
            sessions
                .iter()
                .filter(|s| s.parent_id.as_deref() == Some(&session.id))
                .rev(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::approvals::ApprovalSubject;
    use crate::client::fixtures;
    use crate::domain::SessionStatus;

    #[test]
    fn agents_are_listed_as_a_tree_under_their_parents_with_what_they_wait_for() {
        let session = |id: &str, parent: Option<&str>, task: Option<&str>, last: Option<&str>| {
            let mut session = fixtures::session(id, parent, "default", SessionStatus::Idle);
            session.task = task.map(str::to_owned);
            session.last_message = last.map(str::to_owned);
            session
        };
        let approval = Approval {
            id: "ap_7".to_owned(),
            session_id: "s_a1".to_owned(),
            subject: ApprovalSubject {
                command: Some("touch x".to_owned()),
                path: None,
                arguments: None,
                cwd: "/srv".to_owned(),
            },
            ..Approval::example()
        };
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
