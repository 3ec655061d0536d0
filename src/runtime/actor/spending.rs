//! What a conversation spends, in the actor: each answered model call counted in its turn (at
//! its model's price) and, for a sub-agent's call, toward the root agent's running turn; and the
//! spending limits checked against it before every model call (`runtime::budget`).

use super::ConversationActor;
use crate::model::TokenUsage;
use crate::runtime::budget::{Limit, Limits, Reached, Spent};
use crate::runtime::usage;

impl ConversationActor {
    /// Counts one model call of a session's running turn that `model` (its configured name)
    /// answered; a sub-agent's counts toward the root agent's running turn too.
    pub(super) fn count_call(
        &mut self,
        session_id: &str,
        report: Option<&TokenUsage>,
        model: &str,
    ) {
        let price = self
            .shared
            .config
            .model(model)
            .and_then(|model| model.price);
        if let Some(running) = self.run_mut(session_id).and_then(|r| r.running.as_mut()) {
            usage::count_call(&mut running.usage, report, model, price.as_ref());
        }
        let root = self.root_id().to_owned();
        if session_id == root {
            return;
        }
        if let Some(running) = self.run_mut(&root).and_then(|r| r.running.as_mut()) {
            let tokens = report.map_or(0, |report| report.input_tokens + report.output_tokens);
            running.sub_agents.0 += tokens;
            running.sub_agents.1 += 1;
        }
    }

    /// The first spending limit a model call of `session_id` would go past, but for those a
    /// user let its turn pass: the conversation's and root agent's limits over the root turn
    /// (sub-agents' calls included), then a sub-agent's own agent's over its own turn. Without
    /// limits nothing is measured: this runs before every model call.
    pub(super) fn budget_reached(&self, session_id: &str, passed: &[Limit]) -> Option<Reached> {
        let config = &self.shared.config;
        let agents = &self.agents;
        let session = self.state.session(session_id)?;
        let conversation = &self.state.conversation;
        let mut checks = Vec::new();
        if let Some(agent) = agents.get(&conversation.agent) {
            let limits = Limits::resolve(&conversation.budget, &conversation.agent, &agent.budget);
            checks.push((limits, self.turn_spent(self.root_id(), true)));
        }
        if session_id != self.root_id()
            && let Some(agent) = agents.get(&session.agent)
        {
            let limits = Limits::resolve(&Default::default(), &session.agent, &agent.budget);
            checks.push((limits, self.turn_spent(session_id, false)));
        }
        checks.retain(|(limits, _)| !limits.is_empty());
        // The cost sums every turn: only a cost limit pays for it.
        let cost = checks
            .iter()
            .any(|(limits, _)| limits.limits_cost())
            .then(|| self.spent_cost());
        for (limits, mut spent) in checks {
            spent.cost = cost.unwrap_or(0.0);
            // A cost limit is kept only where every call has a price.
            if limits.limits_cost()
                && let Some(model) = config.unpriced_model(&session.model)
            {
                return Some(Reached::unkeepable(
                    format!(
                        "a cost limit is set, but model `{model}` has no price, so what its calls \
                         cost cannot be known (set models.{model}.price)"
                    ),
                    format!("models.{model}.price"),
                ));
            }
            if let Some(reached) = limits.reached(&spent, passed) {
                return Some(reached);
            }
        }
        None
    }

    /// The tokens and model calls of a session's running turn (none when it runs none), with
    /// those of its sub-agents' calls while it ran when `with_sub_agents`.
    fn turn_spent(&self, session_id: &str, with_sub_agents: bool) -> Spent {
        let Some(turn) = self
            .sessions
            .get(session_id)
            .and_then(|run| run.running.as_ref())
        else {
            return Spent::default();
        };
        let (tokens, calls) = if with_sub_agents {
            turn.sub_agents
        } else {
            (0, 0)
        };
        Spent {
            cost: 0.0,
            turn_tokens: turn.usage.input_tokens + turn.usage.output_tokens + tokens,
            turn_model_calls: turn.usage.model_calls + calls,
        }
    }

    /// What the conversation has cost: its ended turns and the calls of those running.
    fn spent_cost(&self) -> f64 {
        let running: f64 = self
            .sessions
            .values()
            .filter_map(|run| run.running.as_ref())
            .filter_map(|turn| turn.usage.cost)
            .sum();
        self.state.cost().unwrap_or(0.0) + running
    }
}
