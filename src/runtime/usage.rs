//! Token accounting for the context-usage meter: what the provider reported for the
//! last request plus an estimate of what was added since; without a report, an estimate of the
//! whole request (its fixed overhead and the history), counted with the model's tokenizer
//! (`model::tokens`).

use crate::config::Price;
use crate::domain::{Item, ItemKind, ItemStatus, ModelUsage, TurnUsage, Usage, UsageSource};
use crate::model::TokenUsage;
use crate::model::tokens::Tokenizer;

/// What a model call's token report means for the next request: the reasoning it
/// wrote takes room there only if the model gets it back. `None` when the provider reported
/// no input tokens: every request has some, so a 0 is a provider that does not count (some
/// compatible servers send zeros), and the estimate stands.
pub fn context_tokens(usage: &TokenUsage, reasoning_carried: bool) -> Option<u64> {
    if usage.input_tokens == 0 {
        return None;
    }
    let total = usage.input_tokens + usage.output_tokens;
    Some(if reasoning_carried {
        total
    } else {
        total.saturating_sub(usage.reasoning_tokens)
    })
}

/// Adds one model call that `model` (its configured name) answered to its turn's figures, and
/// to that model's own, with its cost when the model has a `price`. A report without input
/// tokens is no report (see `context_tokens`).
pub fn count_call(
    turn: &mut TurnUsage,
    report: Option<&TokenUsage>,
    model: &str,
    price: Option<&Price>,
) {
    let index = match turn.models.iter().position(|entry| entry.model == model) {
        Some(index) => index,
        None => {
            turn.models.push(ModelUsage {
                model: model.to_owned(),
                ..ModelUsage::default()
            });
            turn.models.len() - 1
        }
    };
    let own = &mut turn.models[index];
    turn.model_calls += 1;
    own.model_calls += 1;
    let Some(report) = report.filter(|report| report.input_tokens > 0) else {
        turn.unreported_calls += 1;
        return;
    };
    if let Some(price) = price {
        let cost = price.cost(
            report.input_tokens,
            report.cache_read_tokens,
            report.cache_write_tokens,
            report.output_tokens,
        );
        *turn.cost.get_or_insert(0.0) += cost;
        *own.cost.get_or_insert(0.0) += cost;
    }
    turn.input_tokens += report.input_tokens;
    turn.output_tokens += report.output_tokens;
    turn.reasoning_tokens += report.reasoning_tokens;
    turn.cached_input_tokens += report.cache_read_tokens;
    turn.cache_write_tokens += report.cache_write_tokens;
    own.input_tokens += report.input_tokens;
    own.output_tokens += report.output_tokens;
    own.cached_input_tokens += report.cache_read_tokens;
    own.cache_write_tokens += report.cache_write_tokens;
}

/// An item's tokens in the next request: both parts of `Tokenizer::item_tokens`, or nothing
/// for what a model is never sent.
pub fn estimate_item_tokens(tokenizer: Tokenizer, item: &Item) -> u64 {
    if !sent_to_model(item) {
        return 0;
    }
    let (written, added) = tokenizer.item_tokens(item);
    written + added
}

/// Reasoning text never goes back to a model (Chat Completions and Anthropic drop it; the
/// Responses API takes back only its encrypted state, which the provider counts in its next
/// report), and a failed attempt's partial output is never sent.
fn sent_to_model(item: &Item) -> bool {
    !matches!(item.kind, ItemKind::Reasoning { .. }) && item.sent_to_model()
}

/// What the meter knows: the model's tokenizer, the fixed part of every request, the last
/// report and what was added after it.
#[derive(Debug, Clone, Copy, Default)]
pub struct UsageTracker {
    pub tokenizer: Tokenizer,
    /// What every request carries besides the history: the instructions (with AGENTS.md) and
    /// the tool schemas (`Tokenizer::request_overhead`). A report includes it.
    pub request_overhead: u64,
    pub reported: Option<u64>,
    /// The history's items added since the report (all of them without one).
    pub estimated_since_report: u64,
}

impl UsageTracker {
    pub fn new(tokenizer: Tokenizer, request_overhead: u64) -> UsageTracker {
        UsageTracker {
            tokenizer,
            request_overhead,
            ..UsageTracker::default()
        }
    }

    /// The same tokenizer and overhead, starting from an estimate of `items` (no report).
    /// Items counted before are not encoded again (the tokenizer remembers long texts).
    pub fn restart(self, items: &[Item]) -> UsageTracker {
        UsageTracker {
            reported: None,
            estimated_since_report: items
                .iter()
                .map(|item| estimate_item_tokens(self.tokenizer, item))
                .sum(),
            ..self
        }
    }

    /// Takes the tokenizer and the request overhead of `other` (a turn built with other
    /// instructions, or another model), keeping what was counted.
    pub fn adopt(&mut self, other: UsageTracker) {
        self.tokenizer = other.tokenizer;
        self.request_overhead = other.request_overhead;
    }

    pub fn report(&mut self, tokens: u64) {
        self.reported = Some(tokens);
        self.estimated_since_report = 0;
    }

    /// Takes tokens out of the last report: reasoning that will not be sent again.
    pub fn forget(&mut self, tokens: u64) {
        if let Some(reported) = &mut self.reported {
            *reported = reported.saturating_sub(tokens);
        }
    }

    /// A whole item joins the history (a message, a notice, a finished answer).
    pub fn add(&mut self, item: &Item) {
        self.estimated_since_report += estimate_item_tokens(self.tokenizer, item);
    }

    /// An item of a turn was stored (`first`: for the first time). Each part is counted once:
    /// a tool call's name and arguments when the model's answer is stored (the call is still
    /// `running`; the report of that answer, which comes next, covers them), its output when
    /// it finishes. Other items count when they are stored finished.
    pub fn stored(&mut self, item: &Item, first: bool) {
        if !sent_to_model(item) {
            return;
        }
        let (written, added) = self.tokenizer.item_tokens(item);
        let running = item.status == ItemStatus::Running;
        self.estimated_since_report += match (&item.kind, first, running) {
            (ItemKind::ToolCall { .. }, true, true) => written,
            (ItemKind::ToolCall { .. }, true, false) => written + added,
            (ItemKind::ToolCall { .. }, false, false) => added,
            (_, _, true) => 0,
            (_, _, false) => written + added,
        };
    }

    pub fn view(&self, context_window: u64, max_output_tokens: u64) -> Usage {
        // Without a report, the estimate is of the whole request, its fixed part included.
        let estimated_since_report = match self.reported {
            Some(_) => self.estimated_since_report,
            None => self.request_overhead + self.estimated_since_report,
        };
        let used_tokens = self.reported.unwrap_or(0) + estimated_since_report;
        let threshold_tokens = ((context_window as f64 * 0.8) as u64)
            .min(context_window.saturating_sub(max_output_tokens));
        Usage {
            used_tokens,
            source: if self.reported.is_some() {
                UsageSource::Reported
            } else {
                UsageSource::Estimated
            },
            reported_tokens: self.reported,
            estimated_since_report,
            context_window,
            max_output_tokens,
            threshold_tokens,
            percent: if context_window == 0 {
                0.0
            } else {
                used_tokens as f64 * 100.0 / context_window as f64
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ItemStatus;

    fn item(kind: ItemKind, status: ItemStatus) -> Item {
        Item {
            id: "m_1".into(),
            session_id: "s".into(),
            turn_id: "t".into(),
            seq: 1,
            created_at: crate::domain::now(),
            status,
            compacted: false,
            step: Some(1),
            kind,
        }
    }

    #[test]
    fn the_estimate_counts_only_what_a_model_is_sent() {
        let tokenizer = Tokenizer::O200kBase;
        let long = "word ".repeat(1000);
        let answer = item(
            ItemKind::AgentMessage { text: long.clone() },
            ItemStatus::Completed,
        );
        let expected = tokenizer.count(&long) + crate::model::tokens::MESSAGE_FRAMING;
        assert_eq!(estimate_item_tokens(tokenizer, &answer), expected);
        let failed = item(
            ItemKind::AgentMessage { text: long.clone() },
            ItemStatus::Failed,
        );
        let thought = item(
            ItemKind::Reasoning {
                text: long,
                state: None,
            },
            ItemStatus::Completed,
        );
        assert_eq!(estimate_item_tokens(tokenizer, &failed), 0);
        assert_eq!(estimate_item_tokens(tokenizer, &thought), 0);
        let usage = UsageTracker::new(tokenizer, 100).restart(&[answer, failed, thought]);
        assert_eq!(usage.estimated_since_report, expected);
        // Without a report, the estimate is of the whole request: its overhead too.
        let view = usage.view(100_000, 1_000);
        assert_eq!(view.source, UsageSource::Estimated);
        assert_eq!(view.used_tokens, 100 + expected);
        assert_eq!(view.estimated_since_report, 100 + expected);
    }

    #[test]
    fn a_tool_calls_arguments_count_once_across_the_report_of_its_answer() {
        let tokenizer = Tokenizer::O200kBase;
        let mut call = item(
            ItemKind::ToolCall {
                hooks: Vec::new(),
                call_id: "c".into(),
                name: "write_file".into(),
                arguments: serde_json::json!({ "path": "a.txt", "content": "x ".repeat(500) }),
                output: String::new(),
                exit_code: None,
                files: None,
                images: Vec::new(),
                denied: false,
            },
            ItemStatus::Running,
        );
        let mut usage = UsageTracker::new(tokenizer, 50);
        // The answer is stored (the call still running), then its report covers it.
        usage.stored(&call, true);
        let (written, _) = tokenizer.item_tokens(&call);
        assert_eq!(usage.estimated_since_report, written);
        usage.report(1_234);
        // The call finishes: only its output is new.
        if let ItemKind::ToolCall { output, .. } = &mut call.kind {
            *output = "wrote 1000 bytes".into();
        }
        call.status = ItemStatus::Completed;
        usage.stored(&call, false);
        assert_eq!(
            usage.estimated_since_report,
            tokenizer.count("wrote 1000 bytes")
        );
        let view = usage.view(100_000, 1_000);
        assert_eq!(view.source, UsageSource::Reported);
        assert_eq!(
            view.used_tokens,
            1_234 + tokenizer.count("wrote 1000 bytes")
        );
    }

    #[test]
    fn reasoning_counts_only_where_the_model_gets_it_back() {
        let report = TokenUsage {
            input_tokens: 100,
            output_tokens: 30,
            reasoning_tokens: 20,
            ..TokenUsage::default()
        };
        assert_eq!(context_tokens(&report, true), Some(130));
        assert_eq!(context_tokens(&report, false), Some(110));
        let mut usage = UsageTracker::default();
        usage.report(130);
        usage.forget(20);
        assert_eq!(usage.reported, Some(110));
        usage.forget(1_000);
        assert_eq!(usage.reported, Some(0), "never below zero");
    }

    #[test]
    fn a_report_of_no_input_tokens_is_no_report() {
        let zero = TokenUsage {
            input_tokens: 0,
            output_tokens: 12,
            reasoning_tokens: 0,
            ..TokenUsage::default()
        };
        assert_eq!(context_tokens(&zero, false), None);
        assert_eq!(context_tokens(&TokenUsage::default(), true), None);
    }
}
