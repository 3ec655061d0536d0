//! Spending limits (`Budget`): an agent's keys in the config file, and a conversation's own in
//! the API. What they mean when a turn runs is in `runtime::budget`.

use serde::{Deserialize, Serialize};

/// Spending limits, checked before every model call: `max_cost` over the whole conversation
/// (sub-agents included; it needs the models' prices), `max_turn_tokens` (input and output)
/// and `max_turn_model_calls` over one turn of the root agent and the sub-agents' calls while
/// it runs. What happens when one is reached is `on_budget`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// In the currency units of the models' `price`; more than 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(exclusive_minimum = 0)]
    pub max_cost: Option<f64>,
    /// At least 1.
    #[serde(
        default,
        deserialize_with = "super::whole_number::optional_u64",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1)]
    pub max_turn_tokens: Option<u64>,
    /// At least 1.
    #[serde(
        default,
        deserialize_with = "super::whole_number::optional_u32",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1)]
    pub max_turn_model_calls: Option<u32>,
    /// Unset: the agent's, else `fail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_budget: Option<OnBudget>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }

    /// Each limit this budget gives, else `under`'s.
    pub fn over(self, under: &Budget) -> Budget {
        Budget {
            max_cost: self.max_cost.or(under.max_cost),
            max_turn_tokens: self.max_turn_tokens.or(under.max_turn_tokens),
            max_turn_model_calls: self.max_turn_model_calls.or(under.max_turn_model_calls),
            on_budget: self.on_budget.or(under.on_budget),
        }
    }

    /// Why the limits cannot be kept, naming the first that is out of range.
    pub fn invalid(&self) -> Option<String> {
        if self
            .max_cost
            .is_some_and(|cost| !cost.is_finite() || cost <= 0.0)
        {
            return Some("max_cost must be a number greater than 0".to_owned());
        }
        if self.max_turn_tokens == Some(0) {
            return Some("max_turn_tokens must be at least 1".to_owned());
        }
        if self.max_turn_model_calls == Some(0) {
            return Some("max_turn_model_calls must be at least 1".to_owned());
        }
        None
    }
}

/// What a turn does when it reaches a limit of its `Budget`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnBudget {
    /// It ends `failed` with the code `budget_exceeded`.
    #[default]
    Fail,
    /// It waits as an approval (tool `budget`) any client may answer: allowed, the turn goes on
    /// past that limit to its end; denied or expired, it fails as with `fail`.
    Ask,
}
