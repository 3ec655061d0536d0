//! What the editor has been sent of each item, so that the same item seen again (in a
//! snapshot, in the history read after a reconnect or a load, as `item.completed` after its
//! deltas) sends only what is new: nothing is lost and nothing is shown twice.

use std::collections::{HashMap, HashSet};

use agent_client_protocol::v1::schema::SessionUpdate;

use super::updates::{self, Call};
use crate::api::events::DeltaField;
use crate::domain::{Item, ItemKind, ItemStatus, MessageSource, Session, TurnStatus};

/// An update and the session it goes to: `None` is the editor's session (the conversation's
/// root), `Some` a sub-agent's session, when the editor follows them as sessions of their own.
pub type Routed = (Option<String>, SessionUpdate);

/// What an item's live text extends, as far as the editor goes.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Answer,
    Reasoning,
    Call,
    #[default]
    Other,
}

#[derive(Default)]
struct Sent {
    kind: Kind,
    /// Whether the editor is shown this item (a sub-agent's own text is not, unless the
    /// editor follows sub-agents as sessions).
    shown: bool,
    /// The sub-agent session it is shown in (`None`: the editor's).
    session: Option<String>,
    /// Bytes of its text sent.
    text: usize,
    started: bool,
    /// Its output so far (a tool call's).
    output: String,
    /// The status the editor was last told (a tool call's).
    status: Option<ItemStatus>,
    finished: bool,
}

/// The conversation as the ledger needs it to decide what an item shows as.
#[derive(Default)]
pub struct Ledger {
    items: HashMap<String, Sent>,
    /// Messages this editor sent: the editor shows them already.
    own_messages: HashSet<String>,
    /// The root turns its messages started or joined: the editor's prompts.
    prompted_turns: HashSet<String>,
    pub root_session_id: String,
    pub cwd: String,
    /// Each sub-agent's agent name, by session id.
    pub agents: HashMap<String, String>,
    /// The highest root `seq` seen in a stored item, for catching up from the history.
    pub newest_seq: u64,
    /// The editor follows sub-agents as sessions of their own (the protocol's sub-agent
    /// extension): their items go to their session, announced by a `subagent_update`.
    pub subagents: bool,
    /// Sub-agent sessions announced to the editor, each with the session it was announced
    /// in (its parent's: `None` for the editor's).
    announced: HashMap<String, Option<String>>,
}

fn to(session: &Option<String>, updates: Vec<SessionUpdate>) -> Vec<Routed> {
    updates
        .into_iter()
        .map(|update| (session.clone(), update))
        .collect()
}

impl Ledger {
    pub fn own_message(&mut self, message_id: &str) {
        self.own_messages.insert(message_id.to_owned());
    }

    /// Whether this editor sent the message.
    pub fn owns(&self, message_id: &str) -> bool {
        self.own_messages.contains(message_id)
    }

    fn is_root(&self, item: &Item) -> bool {
        item.session_id == self.root_session_id
    }

    /// The session a service session's updates go to: the editor's for the root, its own for
    /// a sub-agent the editor follows as a session.
    fn route(&self, session_id: &str) -> Option<String> {
        (self.subagents && session_id != self.root_session_id).then(|| session_id.to_owned())
    }

    /// A sub-agent session as the service describes it (`session.created`, `session.updated`,
    /// a snapshot): announced once to an editor that follows sub-agents, under its parent.
    pub fn session(&mut self, session: &Session) -> Vec<Routed> {
        let id = session.id.clone();
        self.agents.insert(id.clone(), session.agent.clone());
        if !self.subagents || id == self.root_session_id || self.announced.contains_key(&id) {
            return Vec::new();
        }
        let parent = self.route(session.parent_id.as_deref().unwrap_or_default());
        self.announced.insert(id, parent.clone());
        vec![(parent, updates::subagent(session, &self.cwd))]
    }

    /// A sub-agent's turn started or ended (with this status): its state, for an editor that
    /// follows it.
    pub fn session_turn(&mut self, session_id: &str, ended: Option<TurnStatus>) -> Vec<Routed> {
        let Some(parent) = self.announced.get(session_id) else {
            return Vec::new();
        };
        vec![(parent.clone(), updates::subagent_state(session_id, ended))]
    }

    /// The updates for an item seen whole (started, completed, in a snapshot or the history).
    pub fn item(&mut self, item: &Item) -> Vec<Routed> {
        let id = item.id.clone();
        let status = item.status;
        let finished = !status.is_open();
        let root = self.is_root(item);
        if root && finished {
            self.newest_seq = self.newest_seq.max(item.seq);
        }
        let session = self.route(&item.session_id);
        // Shown where it belongs: the root's, and a followed sub-agent's in its own session.
        let visible = root || session.is_some();
        let agent = (!visible).then(|| {
            self.agents
                .get(&item.session_id)
                .cloned()
                .unwrap_or_else(|| "sub-agent".to_owned())
        });
        let own = self.own_messages.contains(&id);
        let from = match &item.kind {
            ItemKind::UserMessage {
                from_session_id, ..
            } => from_session_id.as_deref().unwrap_or_default(),
            _ => "",
        };
        let report_from = self
            .agents
            .get(from)
            .cloned()
            .unwrap_or_else(|| "a sub-agent".to_owned());
        let report_route = self.route(from);
        let cwd = self.cwd.clone();
        let subagents = self.subagents;
        let sent = self.items.entry(id.clone()).or_default();
        if sent.finished {
            return Vec::new();
        }
        sent.session.clone_from(&session);
        let mut out: Vec<SessionUpdate> = Vec::new();
        match &item.kind {
            ItemKind::UserMessage {
                text,
                source,
                images,
                ..
            } => {
                sent.finished = true;
                if own && root {
                    self.prompted_turns.insert(item.turn_id.clone());
                }
                if own || !visible {
                    return Vec::new();
                }
                let report = format!("[report from {report_from}]\n{text}");
                if *source == MessageSource::Agent && subagents {
                    // A message from another session: the extension's session message.
                    out.push(updates::session_message(&id, text, report_route.as_deref()));
                } else if *source == MessageSource::Agent
                    && root
                    && !self.prompted_turns.contains(&item.turn_id)
                {
                    // A report that starts a turn of its own after the editor's prompt ended:
                    // shown as the agent's message, or an editor that hides thoughts between
                    // prompts would show nothing of the turn that follows.
                    out.push(updates::agent_text(report));
                } else if *source == MessageSource::Agent && root {
                    out.push(updates::thought(report));
                } else {
                    out.extend(updates::user_message(text, images));
                }
            }
            ItemKind::AgentMessage { text: full } | ItemKind::Reasoning { text: full, .. } => {
                let reasoning = matches!(item.kind, ItemKind::Reasoning { .. });
                sent.kind = if reasoning {
                    Kind::Reasoning
                } else {
                    Kind::Answer
                };
                sent.shown = visible;
                sent.finished = finished;
                if visible && full.len() > sent.text && full.is_char_boundary(sent.text) {
                    let rest = &full[sent.text..];
                    out.push(if reasoning {
                        updates::thought(rest)
                    } else {
                        updates::agent_text(rest)
                    });
                    sent.text = full.len();
                }
            }
            ItemKind::ToolCall { output, .. } => {
                let call = Call::of(item).expect("a tool call");
                sent.kind = Kind::Call;
                sent.shown = true;
                let first = !sent.started;
                if first {
                    sent.started = true;
                    sent.output.clone_from(output);
                    out.push(updates::tool_call(&call, &cwd, agent.as_deref()));
                }
                if finished {
                    sent.finished = true;
                    out.push(updates::tool_end(&call, &cwd));
                } else if output.len() > sent.output.len() {
                    sent.output.clone_from(output);
                    out.push(updates::tool_output(&call, &cwd, &sent.output));
                } else if !first && sent.status != Some(status) {
                    // Seen again while it runs, approved meanwhile, say.
                    out.push(updates::tool_output(&call, &cwd, &sent.output));
                }
                sent.status = Some(status);
            }
            ItemKind::Summary { .. } | ItemKind::Notice { .. } => {
                sent.kind = Kind::Other;
                sent.finished = finished;
            }
            // The editor's plan is the root agent's; a sub-agent's goes to its own session
            // when the editor follows sub-agents, and nowhere otherwise.
            ItemKind::Plan { steps, .. } => {
                sent.kind = Kind::Other;
                sent.finished = finished;
                if visible {
                    out.push(updates::plan(steps));
                }
            }
        }
        to(&session, out)
    }

    /// The updates for live text of a started item (`item.delta`).
    pub fn delta(&mut self, item_id: &str, field: DeltaField, delta: &str) -> Vec<Routed> {
        let Some(sent) = self.items.get_mut(item_id) else {
            // An item this stream never showed starting: its `item.completed` carries it.
            return Vec::new();
        };
        if sent.finished || !sent.shown {
            return Vec::new();
        }
        let update = match (field, sent.kind) {
            (DeltaField::Text, Kind::Answer) => {
                sent.text += delta.len();
                updates::agent_text(delta)
            }
            (DeltaField::Text, Kind::Reasoning) => {
                sent.text += delta.len();
                updates::thought(delta)
            }
            (DeltaField::Output, Kind::Call) => {
                sent.output.push_str(delta);
                updates::tool_output(&Call::running(item_id), &self.cwd, &sent.output)
            }
            _ => return Vec::new(),
        };
        vec![(sent.session.clone(), update)]
    }

    /// Whether the editor follows this sub-agent session as a session of its own.
    pub fn followed(&self, session_id: &str) -> bool {
        self.announced.contains_key(session_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::fixtures::{agent, user};
    use agent_client_protocol::v1::schema::PlanEntryStatus;

    fn chunk_text(routed: &Routed) -> String {
        assert_eq!(routed.0, None, "the editor's session");
        match &routed.1 {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                agent_client_protocol::v1::schema::ContentBlock::Text(text) => text.text.clone(),
                other => panic!("text, got {other:?}"),
            },
            other => panic!("a message chunk, got {other:?}"),
        }
    }

    #[test]
    fn an_item_seen_again_sends_only_what_was_not_sent() {
        let mut ledger = Ledger {
            root_session_id: "s_root".into(),
            ..Ledger::default()
        };
        let mut running = agent("m_1", "Hel", ItemStatus::Running);
        running.seq = 2;
        assert_eq!(chunk_text(&ledger.item(&running)[0]), "Hel");
        let lo = ledger.delta("m_1", DeltaField::Text, "lo");
        assert_eq!(chunk_text(&lo[0]), "lo");
        // The reconnect's history has it whole: only the rest goes out.
        let mut stored = agent("m_1", "Hello, world", ItemStatus::Completed);
        stored.seq = 2;
        assert_eq!(chunk_text(&ledger.item(&stored)[0]), ", world");
        assert!(ledger.item(&stored).is_empty());
        assert!(ledger.delta("m_1", DeltaField::Text, "late").is_empty());
        assert_eq!(ledger.newest_seq, 2);
    }

    #[test]
    fn the_editors_own_messages_and_sub_agents_text_are_not_echoed() {
        let mut ledger = Ledger {
            root_session_id: "s_root".into(),
            ..Ledger::default()
        };
        ledger.own_message("m_own");
        let own = user("m_own", "hi", MessageSource::User);
        assert!(ledger.item(&own).is_empty());
        let other = user("m_web", "from the browser", MessageSource::User);
        assert_eq!(ledger.item(&other).len(), 1);
        let mut sub = agent("m_2", "x", ItemStatus::Running);
        sub.session_id = "s_sub".to_owned();
        assert!(ledger.item(&sub).is_empty());
        assert!(ledger.delta("m_2", DeltaField::Text, "y").is_empty());
    }

    #[test]
    fn the_root_plan_is_the_editors_plan_and_a_sub_agents_stays_in_its_session() {
        use crate::domain::PlanStepStatus::{Completed, InProgress};
        let mut ledger = Ledger {
            root_session_id: "s_root".into(),
            ..Ledger::default()
        };
        let plan =
            crate::client::fixtures::plan("m_p", None, &[("a", Completed), ("b", InProgress)]);
        let sent = ledger.item(&plan);
        let [(None, SessionUpdate::Plan(shown))] = sent.as_slice() else {
            panic!("one plan update for the editor's session, got {sent:?}");
        };
        let entries: Vec<(&str, &PlanEntryStatus)> = shown
            .entries
            .iter()
            .map(|entry| (entry.content.as_str(), &entry.status))
            .collect();
        assert_eq!(
            entries,
            [
                ("a", &PlanEntryStatus::Completed),
                ("b", &PlanEntryStatus::InProgress)
            ]
        );
        // Seen again (item.completed after item.started, a replay): nothing more.
        assert!(ledger.item(&plan).is_empty());

        let mut sub = crate::client::fixtures::plan("m_q", None, &[("c", Completed)]);
        sub.session_id = "s_sub".to_owned();
        assert!(ledger.item(&sub).is_empty());
        // An editor that follows sub-agents gets it in the sub-agent's session.
        ledger.subagents = true;
        sub.id = "m_r".to_owned();
        let sent = ledger.item(&sub);
        assert!(
            matches!(sent.as_slice(), [(Some(session), SessionUpdate::Plan(_))] if session == "s_sub"),
            "{sent:?}"
        );
    }
}
