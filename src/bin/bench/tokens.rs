//! `openvaala-bench tokens`: what the usage meter's token counting costs. A history
//! of about 100,000 tokens (generated prose of message size, and tool calls with JSON
//! arguments and output) is estimated the way the service does it (`UsageTracker::restart`,
//! as after a load or a compaction): the first time, when every item is encoded, and again,
//! when the counts of long texts are remembered; plus the encoder's first use.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use clap::Args;
use openvaala::domain::{Item, ItemKind, ItemStatus, MessageSource};
use openvaala::model::tokens::Tokenizer;
use openvaala::runtime::usage::UsageTracker;
use serde_json::json;

use super::stats::{median_duration, thousands, verdict};
use super::text::{Rng, prose};

#[derive(Args)]
pub struct TokensArgs {
    /// Tokens of the generated history.
    #[arg(long, default_value_t = 100_000)]
    history_tokens: u64,
    /// Timed estimates once the counts are remembered.
    #[arg(long, default_value_t = 21)]
    runs: usize,
    #[arg(long, default_value_t = 7341)]
    seed: u64,
}

/// The target for estimating a 100,000-token history.
const TARGET: Duration = Duration::from_millis(20);

pub fn tokens(args: &TokensArgs) -> anyhow::Result<()> {
    let tokenizer = Tokenizer::O200kBase;
    let started = Instant::now();
    tokenizer.encode_count("warm up");
    let first_use = started.elapsed();
    // Sized with cl100k_base (about the same count for English prose), so that o200k_base has
    // remembered nothing when it first estimates the history.
    let items = history(args.history_tokens, args.seed, Tokenizer::Cl100kBase);
    let bytes: usize = items.iter().map(|item| item_text_bytes(&item.kind)).sum();

    let started = Instant::now();
    let cold = UsageTracker::new(tokenizer, 0).restart(&items);
    let first_estimate = started.elapsed();
    let mut warm = Vec::with_capacity(args.runs);
    for _ in 0..args.runs {
        let started = Instant::now();
        let again = UsageTracker::new(tokenizer, 0).restart(&items);
        warm.push(started.elapsed());
        anyhow::ensure!(
            again.estimated_since_report == cold.estimated_since_report,
            "a remembered count differs"
        );
    }
    let warm = median_duration(&warm);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | Result | Target | |\n|---|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| estimating a {}-token history ({} items, {:.0} KB of text), counts remembered (median of {}) | {:.2} ms | < {} ms | {} |",
        thousands(cold.estimated_since_report),
        thousands(items.len() as u64),
        bytes as f64 / 1024.0,
        args.runs,
        warm.as_secs_f64() * 1e3,
        TARGET.as_millis(),
        verdict(warm < TARGET),
    );
    let _ = writeln!(
        out,
        "| the same, the first time (every item encoded: after a start, for a conversation's first load) | {:.1} ms ({:.1} MB/s) | | |",
        first_estimate.as_secs_f64() * 1e3,
        bytes as f64 / first_estimate.as_secs_f64() / 1e6,
    );
    let _ = writeln!(
        out,
        "| building the o200k_base encoder (first use in a process) | {:.0} ms | | |",
        first_use.as_secs_f64() * 1e3,
    );
    print!("{out}");
    Ok(())
}

/// Items until their estimate reaches `tokens`: user and agent messages of generated prose,
/// and a tool call with JSON arguments and output every few messages.
fn history(tokens: u64, seed: u64, tokenizer: Tokenizer) -> Vec<Item> {
    let mut rng = Rng::new(seed);
    let mut items = Vec::new();
    let mut counted = 0;
    while counted < tokens {
        let seq = items.len() as u64 + 1;
        let kind = match seq % 4 {
            1 => ItemKind::UserMessage {
                hooks: Vec::new(),
                text: prose(&rng.sentences(1, 4)),
                source: MessageSource::User,
                from_session_id: None,
                images: Vec::new(),
                command: None,
            },
            3 => ItemKind::ToolCall {
                hooks: Vec::new(),
                call_id: format!("call_{seq}"),
                name: "shell".to_owned(),
                arguments: json!({ "command": format!("grep -rn {} src", rng.words(1, 1)[0]) }),
                output: prose(&rng.sentences(5, 20)),
                exit_code: Some(0),
                files: None,
                images: Vec::new(),
                denied: false,
            },
            _ => ItemKind::AgentMessage {
                text: prose(&rng.sentences(2, 10)),
            },
        };
        let item = Item {
            id: format!("m_{seq}"),
            session_id: "s_bench".to_owned(),
            turn_id: format!("t_{}", seq / 4),
            seq,
            created_at: openvaala::domain::now(),
            status: ItemStatus::Completed,
            compacted: false,
            step: Some(1),
            kind,
        };
        let (written, added) = tokenizer.item_tokens(&item);
        counted += written + added;
        items.push(item);
    }
    items
}

fn item_text_bytes(kind: &ItemKind) -> usize {
    match kind {
        ItemKind::UserMessage { text, .. }
        | ItemKind::AgentMessage { text }
        | ItemKind::Summary { text, .. }
        | ItemKind::Notice { text }
        | ItemKind::Reasoning { text, .. } => text.len(),
        ItemKind::ToolCall {
            arguments, output, ..
        } => arguments.to_string().len() + output.len(),
        ItemKind::Plan { .. } => 0,
    }
}
