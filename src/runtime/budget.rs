//! Spending limits: which apply to a model call, and whether one is reached. A conversation's
//! own `budget` takes the place of its root agent's limit by limit; a sub-agent's calls count
//! toward the root agent's turn and the conversation's cost, and its own agent's limits apply to
//! its own turns too. The actor measures what was spent (`Spent`); the turn asks before every
//! model call, and stops, or asks a user, when a limit is reached.

use crate::domain::{Budget, OnBudget};
use crate::runtime::RuntimeError;

/// Why a conversation's `budget` cannot be kept on its model and root agent: a limit out of
/// range (`Invalid`), or a cost limit (its own or the agent's) on a model, or a fallback,
/// without a price (`PriceMissing`).
pub fn refusal(
    config: &crate::config::Config,
    budget: &Budget,
    agent: &crate::config::AgentConfig,
    model: &str,
) -> Option<RuntimeError> {
    if let Some(problem) = budget.invalid() {
        return Some(RuntimeError::Invalid(format!("budget.{problem}")));
    }
    let max_cost = budget.over(&agent.budget).max_cost;
    let unpriced = max_cost.and_then(|_| config.unpriced_model(model))?;
    Some(RuntimeError::PriceMissing(format!(
        "a cost limit (max_cost) needs prices, and model `{unpriced}` has none \
         (set models.{unpriced}.price)"
    )))
}

/// One kind of limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The conversation's whole cost.
    Cost,
    /// Input and output tokens of one turn.
    TurnTokens,
    /// Model calls of one turn.
    TurnModelCalls,
}

impl Limit {
    pub fn key(self) -> &'static str {
        match self {
            Limit::Cost => "max_cost",
            Limit::TurnTokens => "max_turn_tokens",
            Limit::TurnModelCalls => "max_turn_model_calls",
        }
    }
}

/// What was spent, as the limits read it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// The conversation's cost so far, sub-agents and running turns included.
    pub cost: f64,
    pub turn_tokens: u64,
    pub turn_model_calls: u32,
}

/// The limits in force for one measure of spending, each with the setting that gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    rules: Vec<(Limit, f64, String)>,
    pub on_budget: OnBudget,
}

impl Limits {
    /// The conversation's limits over the agent's (`agents.<agent>.…`).
    pub fn resolve(conversation: &Budget, agent_name: &str, agent: &Budget) -> Limits {
        let mut rules = Vec::new();
        let mut add = |limit: Limit, own: Option<f64>, agents: Option<f64>| {
            let key = limit.key();
            if let Some(max) = own {
                rules.push((limit, max, format!("the conversation's budget.{key}")));
            } else if let Some(max) = agents {
                rules.push((limit, max, format!("agents.{agent_name}.{key}")));
            }
        };
        add(Limit::Cost, conversation.max_cost, agent.max_cost);
        add(
            Limit::TurnTokens,
            conversation.max_turn_tokens.map(|n| n as f64),
            agent.max_turn_tokens.map(|n| n as f64),
        );
        add(
            Limit::TurnModelCalls,
            conversation.max_turn_model_calls.map(f64::from),
            agent.max_turn_model_calls.map(f64::from),
        );
        Limits {
            rules,
            on_budget: conversation
                .on_budget
                .or(agent.on_budget)
                .unwrap_or_default(),
        }
    }

    /// Whether no limit is set at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether a cost limit is among them (it needs every model's price).
    pub fn limits_cost(&self) -> bool {
        self.rules.iter().any(|(limit, ..)| *limit == Limit::Cost)
    }

    /// The first limit `spent` has reached, but for those a user let the turn pass.
    pub fn reached(&self, spent: &Spent, passed: &[Limit]) -> Option<Reached> {
        self.rules
            .iter()
            .filter(|(limit, ..)| !passed.contains(limit))
            .find_map(|(limit, max, setting)| {
                let (used, what) = match limit {
                    Limit::Cost => (
                        spent.cost,
                        format!("the conversation has cost {}", amount(spent.cost)),
                    ),
                    Limit::TurnTokens => (
                        spent.turn_tokens as f64,
                        format!("the turn has used {} tokens", spent.turn_tokens),
                    ),
                    Limit::TurnModelCalls => (
                        f64::from(spent.turn_model_calls),
                        match spent.turn_model_calls {
                            1 => "the turn has made 1 model call".to_owned(),
                            calls => format!("the turn has made {calls} model calls"),
                        },
                    ),
                };
                (used >= *max).then(|| Reached {
                    limit: *limit,
                    max: amount(*max),
                    message: format!(
                        "{what}, reaching its limit {} = {} ({setting})",
                        limit.key(),
                        amount(*max)
                    ),
                    setting: setting.clone(),
                    ask: self.on_budget == OnBudget::Ask,
                })
            })
    }
}

/// A limit that was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    pub limit: Limit,
    /// The limit as written for people (`2`, `0.5`, `10000`).
    pub max: String,
    /// What was spent and the limit, with the setting that gave it.
    pub message: String,
    /// The setting that gave the limit (`agents.default.max_cost`).
    pub setting: String,
    /// Whether a user is asked to let the turn go on (`on_budget = "ask"`).
    pub ask: bool,
}

impl Reached {
    /// A limit that cannot be kept: never asked about.
    pub fn unkeepable(message: String, setting: String) -> Reached {
        Reached {
            limit: Limit::Cost,
            max: String::new(),
            message,
            setting,
            ask: false,
        }
    }
}

/// A number for people: whole numbers as such, else at most four decimals without trailing
/// zeros (`2`, `0.0123`).
fn amount(value: f64) -> String {
    let text = format!("{value:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(cost: Option<f64>, tokens: Option<u64>, calls: Option<u32>) -> Budget {
        Budget {
            max_cost: cost,
            max_turn_tokens: tokens,
            max_turn_model_calls: calls,
            on_budget: None,
        }
    }

    #[test]
    fn the_conversations_limits_take_the_place_of_the_agents_one_by_one() {
        let limits = Limits::resolve(
            &budget(None, Some(100), None),
            "coder",
            &Budget {
                on_budget: Some(OnBudget::Ask),
                ..budget(Some(2.0), Some(5_000), None)
            },
        );
        let spent = Spent {
            cost: 2.5,
            turn_tokens: 150,
            turn_model_calls: 9,
        };
        let reached = limits.reached(&spent, &[]).expect("the cost is reached");
        assert_eq!(reached.limit, Limit::Cost);
        assert_eq!(reached.setting, "agents.coder.max_cost");
        assert!(reached.ask);
        assert_eq!(
            reached.message,
            "the conversation has cost 2.5, reaching its limit max_cost = 2 (agents.coder.max_cost)"
        );
        let next = limits.reached(&spent, &[Limit::Cost]).expect("tokens");
        assert_eq!(next.limit, Limit::TurnTokens);
        assert_eq!(next.setting, "the conversation's budget.max_turn_tokens");
        assert_eq!(
            limits.reached(&spent, &[Limit::Cost, Limit::TurnTokens]),
            None
        );
    }

    #[test]
    fn a_limit_counts_as_reached_once_spending_is_at_it() {
        let limits = Limits::resolve(&budget(None, None, Some(3)), "a", &Budget::default());
        let at = |calls| Spent {
            turn_model_calls: calls,
            ..Spent::default()
        };
        assert_eq!(limits.reached(&at(2), &[]), None);
        let reached = limits.reached(&at(3), &[]).expect("reached at the limit");
        assert_eq!(reached.limit, Limit::TurnModelCalls);
        assert!(!reached.ask, "fail unless on_budget says ask");
        assert!(!limits.limits_cost());
    }

    #[test]
    fn amounts_read_as_people_write_them() {
        assert_eq!(amount(2.0), "2");
        assert_eq!(amount(0.01234), "0.0123");
        assert_eq!(amount(10_000.0), "10000");
    }
}
