//! Values of the API's types for the clients' unit tests: what the service would send, with
//! plain defaults for what a test does not look at (the root session is `s_root`, every item
//! is of turn `t_1`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::approvals::Approval;
use crate::api::events::{ConversationEvent, RunningTurnView};
use crate::domain::{
    Conversation, ConversationStatus, Item, ItemKind, ItemStatus, MessageSource, PlanStep,
    PlanStepStatus, ProcessInfo, ProcessStatus, Session, SessionStatus, Timestamp, Usage,
    UsageSource,
};

pub const ROOT: &str = "s_root";

pub fn at() -> Timestamp {
    "2025-01-02T03:04:05Z".parse().expect("a time")
}

/// An item of the root session.
pub fn item(id: &str, status: ItemStatus, kind: ItemKind) -> Item {
    Item {
        id: id.to_owned(),
        session_id: ROOT.to_owned(),
        turn_id: "t_1".to_owned(),
        seq: 0,
        created_at: at(),
        status,
        compacted: false,
        step: None,
        kind,
    }
}

pub fn agent(id: &str, text: &str, status: ItemStatus) -> Item {
    let text = text.to_owned();
    item(id, status, ItemKind::AgentMessage { text })
}

pub fn user(id: &str, text: &str, source: MessageSource) -> Item {
    let kind = ItemKind::UserMessage {
        hooks: Vec::new(),
        text: text.to_owned(),
        source,
        from_session_id: None,
        images: Vec::new(),
        command: None,
    };
    item(id, ItemStatus::Completed, kind)
}

pub fn tool(id: &str, name: &str, arguments: Value, output: &str, status: ItemStatus) -> Item {
    let kind = ItemKind::ToolCall {
        hooks: Vec::new(),
        call_id: format!("call_{id}"),
        name: name.to_owned(),
        arguments,
        output: output.to_owned(),
        exit_code: None,
        files: None,
        images: Vec::new(),
        denied: false,
    };
    item(id, status, kind)
}

/// A plan item of the root session: `steps` as (text, status).
pub fn plan(id: &str, explanation: Option<&str>, steps: &[(&str, PlanStepStatus)]) -> Item {
    let kind = ItemKind::Plan {
        explanation: explanation.map(str::to_owned),
        steps: steps
            .iter()
            .map(|(step, status)| PlanStep {
                step: (*step).to_owned(),
                status: *status,
            })
            .collect(),
    };
    item(id, ItemStatus::Completed, kind)
}

pub fn session(id: &str, parent: Option<&str>, agent: &str, status: SessionStatus) -> Session {
    Session {
        id: id.to_owned(),
        parent_id: parent.map(str::to_owned),
        agent: agent.to_owned(),
        model: "m".to_owned(),
        task: None,
        status,
        created_at: at(),
        last_message: None,
    }
}

pub fn conversation() -> Conversation {
    Conversation {
        id: "c_1".to_owned(),
        title: "A conversation".to_owned(),
        title_custom: false,
        created_at: at(),
        updated_at: at(),
        archived: false,
        status: ConversationStatus::Idle,
        cwd: "/srv/app".to_owned(),
        agent: "default".to_owned(),
        model: "m".to_owned(),
        root_session_id: ROOT.to_owned(),
        forked_from: None,
        last_turn: None,
        mcp: BTreeMap::new(),
        budget: Default::default(),
    }
}

pub fn usage() -> Usage {
    Usage {
        used_tokens: 100,
        source: UsageSource::Estimated,
        reported_tokens: None,
        estimated_since_report: 100,
        context_window: 1000,
        max_output_tokens: 100,
        threshold_tokens: 800,
        percent: 10.0,
    }
}

/// A running turn of `session` with these items.
pub fn running(session: &str, turn: &str, items: Vec<Item>) -> RunningTurnView {
    RunningTurnView {
        session_id: session.to_owned(),
        turn_id: turn.to_owned(),
        items,
        retry: None,
    }
}

/// A snapshot of the fixture conversation.
pub fn snapshot(sessions: Vec<Session>, running: Vec<RunningTurnView>) -> ConversationEvent {
    ConversationEvent::Snapshot {
        conversation: conversation(),
        sessions,
        pending: Vec::new(),
        usage: usage(),
        running,
        compacting: false,
        approvals: Vec::<Approval>::new(),
        last_seq: BTreeMap::new(),
        cost: None,
    }
}

/// A background process of conversation `c_1`, started by the root session.
pub fn process(id: &str, command: &str, status: ProcessStatus) -> ProcessInfo {
    ProcessInfo {
        id: id.to_owned(),
        conversation_id: "c_1".to_owned(),
        session_id: ROOT.to_owned(),
        call_id: "m_1".to_owned(),
        command: command.to_owned(),
        status,
        exit_code: None,
        started_at: at(),
        ended_at: None,
        reason: None,
        output_bytes: 0,
        ports: Vec::new(),
    }
}
