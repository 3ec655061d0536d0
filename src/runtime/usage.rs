//! Token accounting for the context-usage meter (SPEC §7.2): what the provider reported for the
//! last request plus an estimate of what was added since.

use crate::domain::{Item, ItemKind, Usage, UsageSource};
use crate::model::TokenUsage;

/// What a model call's token report means for the next request (SPEC §7.8): the reasoning it
/// wrote takes room there only if the model gets it back.
pub fn context_tokens(usage: &TokenUsage, reasoning_carried: bool) -> u64 {
    let total = usage.input_tokens + usage.output_tokens;
    if reasoning_carried {
        total
    } else {
        total.saturating_sub(usage.reasoning_tokens)
    }
}

/// A rough token estimate (about four bytes a token for English and code). Compaction will use
/// a real tokenizer; the meter says `estimated` whenever this is in play.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

pub fn estimate_item_tokens(item: &Item) -> u64 {
    if !super::turn::sent_to_model(item) {
        return 0;
    }
    let text_tokens = match &item.kind {
        // Reasoning text never goes back to a model: Chat Completions and Anthropic drop it,
        // and the Responses API takes back only its encrypted state, which the provider counts
        // in its next report.
        ItemKind::Reasoning { .. } => return 0,
        ItemKind::UserMessage { text, .. }
        | ItemKind::AgentMessage { text }
        | ItemKind::Summary { text, .. }
        | ItemKind::Notice { text } => estimate_tokens(text),
        ItemKind::ToolCall {
            name,
            arguments,
            output,
            ..
        } => {
            estimate_tokens(name)
                + estimate_tokens(&arguments.to_string())
                + estimate_tokens(output)
        }
    };
    // Every message carries a few tokens of framing in every protocol.
    text_tokens + 4
}

/// What the meter knows: the last report and what was added after it.
#[derive(Debug, Clone, Copy, Default)]
pub struct UsageTracker {
    pub reported: Option<u64>,
    pub estimated_since_report: u64,
}

impl UsageTracker {
    /// Starts from an estimate of the whole history (no report yet).
    pub fn estimated(items: &[Item]) -> UsageTracker {
        UsageTracker {
            reported: None,
            estimated_since_report: items.iter().map(estimate_item_tokens).sum(),
        }
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

    pub fn add(&mut self, item: &Item) {
        self.estimated_since_report += estimate_item_tokens(item);
    }

    pub fn view(&self, context_window: u64, max_output_tokens: u64) -> Usage {
        let used_tokens = self.reported.unwrap_or(0) + self.estimated_since_report;
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
            estimated_since_report: self.estimated_since_report,
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

    #[test]
    fn the_estimate_counts_only_what_a_model_is_sent() {
        use crate::domain::ItemStatus;
        let item = |kind: ItemKind, status: ItemStatus| Item {
            id: "m_1".into(),
            session_id: "s".into(),
            turn_id: "t".into(),
            seq: 1,
            created_at: crate::domain::now(),
            status,
            compacted: false,
            step: Some(1),
            kind,
        };
        let long = "x".repeat(4000);
        let answer = item(
            ItemKind::AgentMessage { text: long.clone() },
            ItemStatus::Completed,
        );
        assert_eq!(estimate_item_tokens(&answer), 1004);
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
        assert_eq!(estimate_item_tokens(&failed), 0);
        assert_eq!(estimate_item_tokens(&thought), 0);
        assert_eq!(
            UsageTracker::estimated(&[answer, failed, thought]).estimated_since_report,
            1004
        );
    }

    #[test]
    fn reasoning_counts_only_where_the_model_gets_it_back() {
        let report = TokenUsage {
            input_tokens: 100,
            output_tokens: 30,
            reasoning_tokens: 20,
        };
        assert_eq!(context_tokens(&report, true), 130);
        assert_eq!(context_tokens(&report, false), 110);
        let mut usage = UsageTracker::default();
        usage.report(130);
        usage.forget(20);
        assert_eq!(usage.reported, Some(110));
        usage.forget(1_000);
        assert_eq!(usage.reported, Some(0), "never below zero");
    }
}
