//! Sub-agents inside the actor: the session tree, `spawn_agent` and the other
//! collaboration tools (carried out here for a turn, `runtime::collab`), and the report a
//! sub-agent sends its parent after each of its turns. An agent can only address its own
//! descendants; limits on depth and on running sub-agents are tool errors, never crashes.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::ConversationActor;
use super::session::{InterruptCause, SessionRun};
use crate::agents::Agents;
use crate::config::AgentConfig;
use crate::domain::{
    Item, ItemKind, ItemStatus, Message, MessageMode, MessageSource, MessageStatus, Session,
    SessionStatus, TurnStatus, new_id, now,
};
use crate::model::ToolSpec;
use crate::runtime::agent_requests::{AgentsReply, AgentsRequest, IncludeHistory, SpawnRequest};
use crate::runtime::compaction;
use crate::store::records::{MetaRecord, SessionCreated};

/// `spawn_agent`'s description names every agent `caller` may start (its `spawnable`), so the
/// model can choose one.
pub(super) fn described(spec: ToolSpec, agents: &Agents, caller: &AgentConfig) -> ToolSpec {
    if spec.name != "spawn_agent" {
        return spec;
    }
    let mut description = spec.description.into_owned();
    description.push_str("\n\nAgents you may start:");
    let listed = agents.list();
    let spawnable = listed
        .iter()
        .filter(|listed| caller.spawnable.iter().any(|name| name == listed.name));
    for listed in spawnable {
        description.push_str(&format!(
            "\n- `{}` (model `{}`): {}",
            listed.name, listed.agent.model, listed.agent.description
        ));
    }
    ToolSpec {
        description: Cow::Owned(description),
        ..spec
    }
}

impl ConversationActor {
    /// Carries out a collaboration tool call made by a turn of `caller`.
    pub(super) async fn collaborate(
        &mut self,
        caller: &str,
        request: AgentsRequest,
    ) -> Result<AgentsReply, String> {
        match request {
            AgentsRequest::Spawn(requests) => {
                Ok(AgentsReply::Spawned(self.spawn_agents(caller, requests)))
            }
            AgentsRequest::Send {
                session_id,
                text,
                mode,
            } => {
                self.check_descendant(caller, &session_id)?;
                let message = Message {
                    hooks: Vec::new(),
                    id: new_id("m"),
                    session_id: session_id.clone(),
                    text,
                    mode,
                    source: MessageSource::Agent,
                    from_session_id: Some(caller.to_owned()),
                    status: MessageStatus::Waiting,
                    created_at: now(),
                    images: Vec::new(),
                    command: None,
                };
                let answer = self
                    .deliver(message, None)
                    .map_err(|error| format!("the message could not be delivered: {error}"))?;
                let message = answer.message();
                Ok(AgentsReply::Done(json!({
                    "message_id": message.id,
                    "session_id": session_id,
                    "status": message.status,
                })))
            }
            AgentsRequest::Interrupt { session_id } => {
                self.check_descendant(caller, &session_id)?;
                let run = self.sessions.get_mut(&session_id).expect("checked");
                let interrupted = run.interrupt(InterruptCause::User);
                Ok(AgentsReply::Done(json!({
                    "session_id": session_id,
                    "interrupted": interrupted,
                })))
            }
            AgentsRequest::List => {
                let agents: Vec<Value> = self
                    .state
                    .sessions
                    .iter()
                    .filter(|session| self.is_descendant(caller, &session.id))
                    .map(|session| self.describe(session))
                    .collect();
                Ok(AgentsReply::Done(json!({ "agents": agents })))
            }
            AgentsRequest::Status { session_ids } => {
                for session_id in &session_ids {
                    self.check_descendant(caller, session_id)?;
                }
                let sessions: Vec<&Session> = session_ids
                    .iter()
                    .filter_map(|id| self.state.session(id))
                    .collect();
                Ok(AgentsReply::Status {
                    all_idle: sessions
                        .iter()
                        .all(|session| session.status != SessionStatus::Running),
                    agents: sessions
                        .into_iter()
                        .map(|session| self.describe(session))
                        .collect(),
                    changes: self.session_changes.subscribe(),
                })
            }
        }
    }

    /// `spawn_agent` calls of one answer of `caller`: each valid one becomes a new session
    /// under it, stored with its task as its first turn. All of them are stored with one
    /// append to `metadata.jsonl` (and one to each new session's file), then run at once.
    /// One result per request, in order.
    fn spawn_agents(
        &mut self,
        caller: &str,
        requests: Vec<SpawnRequest>,
    ) -> Vec<Result<Value, String>> {
        let mut results = Vec::with_capacity(requests.len());
        let mut records = Vec::new();
        let mut turns = Vec::new();
        for request in requests {
            let model = match self.check_spawn(caller, &request, turns.len()) {
                Ok(model) => model,
                Err(error) => {
                    results.push(Err(error));
                    continue;
                }
            };
            let session_id = new_id("s");
            let created_at = now();
            let history = self.inherited_history(caller, &session_id, request.include_history);
            records.push(MetaRecord::SessionCreated {
                session: SessionCreated {
                    id: session_id.clone(),
                    parent_id: Some(caller.to_owned()),
                    agent: request.agent.clone(),
                    model: model.clone(),
                    task: Some(request.task.clone()),
                    created_at,
                },
            });
            let mut run = SessionRun::new(session_id.clone(), Vec::new());
            run.last_seq = history.len() as u64;
            self.sessions.insert(session_id.clone(), run);
            let message = Message {
                hooks: Vec::new(),
                id: new_id("m"),
                session_id: session_id.clone(),
                text: request.task,
                mode: MessageMode::Steer,
                source: MessageSource::Agent,
                from_session_id: Some(caller.to_owned()),
                status: MessageStatus::Waiting,
                created_at,
                images: Vec::new(),
                command: None,
            };
            let (turn_records, turn, _) =
                self.prepare_turn(&session_id, vec![message], None, history, true);
            records.extend(turn_records);
            turns.push(turn);
            results.push(Ok(json!({
                "session_id": session_id,
                "agent": request.agent,
                "model": model,
                "status": "running",
            })));
        }
        if turns.is_empty() {
            return results;
        }
        if let Err(error) = self.append_meta(records) {
            // Nothing of them is on disk: the sessions never existed.
            self.sessions
                .retain(|id, _| self.state.session(id).is_some());
            let error = format!("the sub-agent could not be started: {error}");
            return results
                .into_iter()
                .map(|result| result.and(Err(error.clone())))
                .collect();
        }
        for turn in turns {
            self.reset_meter(turn.session_id());
            if let Err(error) = self.begin_turn(turn) {
                // It ended at once, failed (`end_unbegun_turn`).
                tracing::error!(%error, conversation = %self.id, "a sub-agent's first turn could not begin");
            }
        }
        results
    }

    /// Whether `caller` may start a sub-agent as `request` asks, `planned` more being started
    /// with it; the model to use.
    fn check_spawn(
        &mut self,
        caller: &str,
        request: &SpawnRequest,
        planned: usize,
    ) -> Result<String, String> {
        let config = &self.shared.config;
        let agents = self.agents.clone();
        let agent_name = &request.agent;
        let caller_agent = self
            .state
            .session(caller)
            .and_then(|session| agents.get(&session.agent))
            .ok_or_else(|| "the caller's agent is no longer configured".to_owned())?;
        if !caller_agent.spawnable.contains(agent_name) {
            return Err(format!(
                "agent `{agent_name}` may not be started from here; agents this one may start \
                 (its `spawnable`): {}",
                caller_agent.spawnable.join(", ")
            ));
        }
        let agent = agents.get(agent_name).ok_or_else(|| {
            format!(
                "agent `{agent_name}` is not configured; agents: {}",
                agents
                    .list()
                    .iter()
                    .map(|listed| listed.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let model = request.model.clone().unwrap_or_else(|| agent.model.clone());
        if config.model(&model).is_none() {
            return Err(format!(
                "model `{model}` is not configured; configured models: {}",
                config.models.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        self.shared.models.client(config, &model)?;
        let limits = &config.subagents;
        let depth = self.depth(caller) + 1;
        if depth > limits.max_depth {
            return Err(format!(
                "cannot start a sub-agent here: sub-agents nest at most {} deep \
                 (subagents.max_depth), and this one would be at depth {depth}; do the work \
                 yourself",
                limits.max_depth
            ));
        }
        let live = planned
            + self
                .sessions
                .values()
                .filter(|run| run.running.is_some() && run.id != self.root_id())
                .count();
        if live >= limits.max_live as usize {
            return Err(format!(
                "cannot start a sub-agent now: {live} sub-agents are already running in this \
                 conversation, the most allowed (subagents.max_live); wait for some with \
                 wait_agents, or interrupt one"
            ));
        }
        // Last, so that a place taken here is only given back by the step's count.
        let max_total = limits.max_running_total as usize;
        let taken = self.shared.running_subagents.fetch_update(
            Ordering::SeqCst,
            Ordering::SeqCst,
            |running| (running < max_total).then_some(running + 1),
        );
        if let Err(running) = taken {
            return Err(format!(
                "cannot start a sub-agent now: {running} sub-agents are already running across \
                 the whole service, the most allowed (subagents.max_running_total); wait for \
                 yours with wait_agents, or do the work yourself"
            ));
        }
        self.subagents_counted += 1;
        Ok(model)
    }

    /// Brings the service-wide count of running sub-agents in step with this conversation's
    /// (after every step of the actor): places taken by spawns that did not start are given
    /// back, and turns started or ended otherwise are counted.
    pub(super) fn count_running_subagents(&mut self) {
        let running = self
            .sessions
            .values()
            .filter(|run| run.running.is_some() && run.id != self.root_id())
            .count();
        let counted = std::mem::replace(&mut self.subagents_counted, running);
        let total = &self.shared.running_subagents;
        if running > counted {
            total.fetch_add(running - counted, Ordering::SeqCst);
        } else {
            total.fetch_sub(counted - running, Ordering::SeqCst);
        }
    }

    /// The part of `caller`'s history a new sub-agent starts with: none, the last finished
    /// turn, or everything finished (never the running turn). Copied as the model reads it
    /// (a summary first, then what it does not cover), with fresh ids, renumbered from 1.
    fn inherited_history(
        &self,
        caller: &str,
        session_id: &str,
        include: IncludeHistory,
    ) -> Vec<Item> {
        let Some(parent) = self.sessions.get(caller) else {
            return Vec::new();
        };
        let running_turn = parent
            .running
            .as_ref()
            .map(|running| running.turn_id.as_str());
        let finished: Vec<Item> = compaction::model_view(&parent.history)
            .into_iter()
            .filter(|item| Some(item.turn_id.as_str()) != running_turn)
            .filter(|item| item.status != ItemStatus::Running && item.sent_to_model())
            .collect();
        let chosen: Vec<Item> = match include {
            IncludeHistory::None => Vec::new(),
            IncludeHistory::All => finished,
            IncludeHistory::LastTurn => {
                let last_turn = self
                    .state
                    .turns
                    .iter()
                    .rev()
                    .find(|turn| turn.session_id == caller && turn.status != TurnStatus::Running)
                    .map(|turn| turn.id.clone());
                finished
                    .into_iter()
                    .filter(|item| Some(&item.turn_id) == last_turn.as_ref())
                    .collect()
            }
        };
        chosen
            .into_iter()
            .enumerate()
            .map(|(index, mut item)| {
                item.id = new_id("m");
                item.session_id = session_id.to_owned();
                item.seq = index as u64 + 1;
                item.compacted = false;
                if let ItemKind::Summary {
                    covers_through_seq, ..
                } = &mut item.kind
                {
                    // It stands for the parent's items, none of which are in this file.
                    *covers_through_seq = 0;
                }
                item
            })
            .collect()
    }

    /// After each turn of a sub-agent, its parent gets a report as a waiting message:
    /// the final answer, or how the turn failed or was interrupted. The parent takes it after
    /// the user's messages, and not before the user speaks again if the user interrupted the
    /// parent.
    pub(super) fn report_to_parent(
        &mut self,
        session_id: &str,
        turn_id: &str,
        status: TurnStatus,
        error: Option<&str>,
    ) {
        let Some(session) = self.state.session(session_id) else {
            return;
        };
        let Some(parent_id) = session.parent_id.clone() else {
            return;
        };
        if !self.sessions.contains_key(&parent_id) {
            return;
        }
        let answer = self.sessions.get(session_id).and_then(|run| {
            run.history.iter().rev().find_map(|item| match &item.kind {
                ItemKind::AgentMessage { text } if item.turn_id == turn_id => Some(text.clone()),
                _ => None,
            })
        });
        let who = format!(
            "Report from sub-agent {}",
            subagent_name(&self.state.sessions, session)
        );
        let text = match status {
            TurnStatus::Completed => format!(
                "{who}: its turn completed.\n\n{}",
                answer.as_deref().unwrap_or("(it gave no final message)")
            ),
            TurnStatus::Failed => format!(
                "{who}: its turn failed: {}.{}",
                error.unwrap_or("unknown error"),
                answer.map_or(String::new(), |text| format!(
                    "\n\nIts last answer:\n{text}"
                ))
            ),
            TurnStatus::Interrupted | TurnStatus::Running => format!(
                "{who}: its turn was interrupted before it finished.{}",
                answer.map_or(String::new(), |text| format!(
                    "\n\nWhat it had written:\n{text}"
                ))
            ),
        };
        let report = Message {
            hooks: Vec::new(),
            id: new_id("m"),
            session_id: parent_id,
            text,
            mode: MessageMode::Steer,
            source: MessageSource::Agent,
            from_session_id: Some(session_id.to_owned()),
            status: MessageStatus::Waiting,
            created_at: now(),
            images: Vec::new(),
            command: None,
        };
        if let Err(error) = self.deliver(report, None) {
            tracing::error!(%error, conversation = %self.id, session = %session_id, "a sub-agent's report could not be delivered");
        }
    }

    /// Whether `message` is a sub-agent's report to its parent (rather than something from
    /// above: the user's message, or a parent agent's).
    pub(super) fn is_report(&self, message: &Message) -> bool {
        message.source == MessageSource::Agent
            && message
                .from_session_id
                .as_deref()
                .and_then(|from| self.state.session(from))
                .and_then(|from| from.parent_id.as_deref())
                == Some(message.session_id.as_str())
    }

    /// How many parents a session has (the root agent is at depth 0).
    fn depth(&self, session_id: &str) -> u32 {
        let mut depth = 0;
        let mut current = self.state.session(session_id);
        while let Some(parent) = current.and_then(|session| session.parent_id.as_deref()) {
            depth += 1;
            current = self.state.session(parent);
        }
        depth
    }

    /// Whether `session_id` is below `ancestor` in the tree (itself excluded).
    fn is_descendant(&self, ancestor: &str, session_id: &str) -> bool {
        let mut current = self.state.session(session_id);
        while let Some(parent) = current.and_then(|session| session.parent_id.as_deref()) {
            if parent == ancestor {
                return true;
            }
            current = self.state.session(parent);
        }
        false
    }

    fn check_descendant(&self, caller: &str, session_id: &str) -> Result<(), String> {
        if self.is_descendant(caller, session_id) {
            return Ok(());
        }
        Err(if self.state.session(session_id).is_none() {
            format!("there is no sub-agent with session id `{session_id}` in this conversation")
        } else {
            format!(
                "session `{session_id}` is not one of your sub-agents; you can only address \
                 sub-agents you started (or they started)"
            )
        })
    }

    /// A sub-agent as `list_agents` and `wait_agents` show it to a model.
    fn describe(&self, session: &Session) -> Value {
        json!({
            "session_id": session.id,
            "parent_id": session.parent_id,
            "agent": session.agent,
            "model": session.model,
            "task": session.task,
            "status": session.status,
            "last_message": session.last_message,
        })
    }
}

/// An actor that stops, however it stops, gives back the places its running sub-agents held
/// in the service-wide count.
impl Drop for ConversationActor {
    fn drop(&mut self) {
        self.shared
            .running_subagents
            .fetch_sub(self.subagents_counted, Ordering::SeqCst);
    }
}

/// A sub-agent as people read its name everywhere: its agent, its number among that agent's
/// sub-agents in the order they started, and its task's first words ("reviewer #2 · Check
/// the parser"); never its session id.
pub fn subagent_name(
    sessions: &[crate::domain::Session],
    session: &crate::domain::Session,
) -> String {
    let mut same: Vec<&crate::domain::Session> = sessions
        .iter()
        .filter(|other| other.parent_id.is_some() && other.agent == session.agent)
        .collect();
    same.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    let number = same
        .iter()
        .position(|other| other.id == session.id)
        .map_or(1, |at| at + 1);
    let words = first_words(session.task.as_deref().unwrap_or_default(), 40);
    if words.is_empty() {
        format!("{} #{number}", session.agent)
    } else {
        format!("{} #{number} · {words}", session.agent)
    }
}

/// A task's first line that has text, cut at a word near `max` characters (marked `…`).
fn first_words(task: &str, max: usize) -> String {
    let line = task
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let cut: String = line.chars().take(max).collect();
    let at_word = match cut.rfind(' ') {
        Some(space) if cut[..space].chars().count() > max / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    let trimmed = at_word.trim_end_matches(|c: char| c.is_whitespace() || ",.;:–—-".contains(c));
    format!("{trimmed}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, agent: &str, task: &str, at_ms: i64) -> crate::domain::Session {
        crate::domain::Session {
            id: id.to_owned(),
            parent_id: Some("s_root".to_owned()),
            agent: agent.to_owned(),
            model: "m".to_owned(),
            task: Some(task.to_owned()),
            status: crate::domain::SessionStatus::Idle,
            created_at: chrono::DateTime::from_timestamp_millis(at_ms).unwrap(),
            last_message: None,
        }
    }

    #[test]
    fn a_sub_agent_is_named_by_its_agent_number_and_task() {
        let sessions = [
            session("s_b", "reviewer", "Check the parser", 2),
            session("s_a", "reviewer", "\n  Look at the lexer first", 1),
            session(
                "s_c",
                "counter",
                "Count every file in this rather large repository please",
                3,
            ),
        ];
        let names: Vec<String> = sessions
            .iter()
            .map(|s| subagent_name(&sessions, s))
            .collect();
        assert_eq!(
            names,
            [
                "reviewer #2 · Check the parser",
                "reviewer #1 · Look at the lexer first",
                "counter #1 · Count every file in this rather large…",
            ]
        );
    }
}
