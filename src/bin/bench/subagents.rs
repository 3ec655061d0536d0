//! `openvaala-bench subagents`: how fast a root agent's `spawn_agent` calls become running
//! sub-agents, and the runtime's own time per sub-agent turn against a root agent's. The model
//! is the in-process fake provider: its first answer to the root is N `spawn_agent` calls in one
//! step, every other answer is words at once, so what is measured is the runtime's work.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fake_provider::{Answered, FakeProvider, Script, monotonic_ns};
use super::server::{ServerProcess, http_client, server_binary};
use super::sse;
use super::stats::{ms, percentile, verdict};
use super::turns::{
    FILE_TOOLS, Session, TURN_TIMEOUT, bench_config, create_conversation, events_url,
    next_turn_end, post, wait_connected,
};

#[derive(Args)]
pub struct SubagentsArgs {
    /// Sub-agents the root starts in one step.
    #[arg(long, default_value_t = 8)]
    children: usize,
    /// Times the spawn of `--children` sub-agents is measured (one conversation each).
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Timed turns of the root agent and of one sub-agent, after the warm-up turns.
    #[arg(long, default_value_t = 100)]
    turns: usize,
    #[arg(long, default_value_t = 10)]
    warmups: usize,
    /// Deltas (about one token each) of every text answer.
    #[arg(long, default_value_t = 200)]
    reply_tokens: usize,
    /// Keep the data directory (its path is printed; the server's log is in it).
    #[arg(long)]
    keep: bool,
}

/// How many turns a measurement of overhead runs, and how long their answers are.
pub(super) struct TurnCounts {
    pub warmups: usize,
    pub turns: usize,
    pub reply_tokens: usize,
}

/// What `subagents` measured.
struct Results {
    children: usize,
    /// Per round: the provider's `spawn_agent` answer sent → each sub-agent's first request
    /// received, sorted.
    starts: Vec<Vec<Duration>>,
    root: Vec<Duration>,
    child: Vec<Duration>,
}

pub fn subagents(args: &SubagentsArgs) -> anyhow::Result<()> {
    if args.children == 0 || args.rounds == 0 || args.turns == 0 {
        bail!("--children, --rounds and --turns must be at least 1");
    }
    let server = server_binary()?;
    let dir = std::env::temp_dir().join(format!(
        "openvaala-bench-subagents-{}",
        uuid::Uuid::now_v7()
    ));
    let data_dir = dir.join("data");
    let workspace = dir.join("workspace");
    fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::create_dir_all(&workspace)?;
    let outcome = run(args, &server, &dir, &data_dir, &workspace);
    if args.keep {
        eprintln!("kept {}", dir.display());
    } else {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    print!("{}", table(&outcome?));
    Ok(())
}

fn run(
    args: &SubagentsArgs,
    server: &Path,
    dir: &Path,
    data_dir: &Path,
    workspace: &Path,
) -> anyhow::Result<Results> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let provider = FakeProvider::start(Script::Words {
        deltas: args.reply_tokens,
    })?;
    let config = dir.join("config.toml");
    fs::write(&config, config_file(&provider.base_url, args.children))?;
    let mut running = ServerProcess::start_with_config(server, data_dir, &config)?;
    runtime.block_on(running.wait_until_healthy())?;
    let session = Session {
        client: http_client()?,
        base: running.base.clone(),
        workspace: workspace.to_owned(),
    };
    let measured = runtime.block_on(async {
        let starts = spawn_rounds(&session, &provider, args).await?;
        provider.set_script(Script::Words {
            deltas: args.reply_tokens,
        });
        let counts = TurnCounts {
            warmups: args.warmups,
            turns: args.turns,
            reply_tokens: args.reply_tokens,
        };
        let root = turn_overheads(&session, &provider, &counts, None).await?;
        let child = turn_overheads(&session, &provider, &counts, Some(&starts.1)).await?;
        anyhow::Ok(Results {
            children: args.children,
            starts: starts.0,
            root,
            child,
        })
    });
    drop(runtime);
    running.stop()?;
    measured
}

/// The server's config: one agent with the sub-agent tools, a model whose window never fills,
/// and room for every child of a round to run at once.
fn config_file(base_url: &str, children: usize) -> String {
    let tools = format!(r#"{FILE_TOOLS}, "spawn_agent", "wait_agents", "list_agents""#);
    bench_config(
        base_url,
        &format!("[subagents]\nmax_live = {children}\n\n"),
        &tools,
    )
}

/// Runs `--rounds` conversations whose first answer spawns `--children` sub-agents; returns,
/// per round, how long after the spawn answer each child's first request reached the provider,
/// and the last round's (conversation, one child's session) for the turn measurements.
async fn spawn_rounds(
    session: &Session,
    provider: &FakeProvider,
    args: &SubagentsArgs,
) -> anyhow::Result<(Vec<Vec<Duration>>, (String, String))> {
    provider.set_script(Script::Spawner {
        children: args.children,
        deltas: args.reply_tokens,
    });
    eprintln!(
        "{} rounds of {} sub-agents started in one step…",
        args.rounds, args.children
    );
    let mut rounds = Vec::with_capacity(args.rounds);
    let mut last = None;
    for _ in 0..args.rounds {
        let before = provider.answered_count();
        // Returns once every session of the conversation is idle again.
        let conversation_id = create_conversation(session).await?;
        let answered: Vec<Answered> = provider.answered().split_off(before);
        let spawn = answered
            .iter()
            .find(|answer| answer.spawned)
            .context("the root never asked for sub-agents")?;
        // A child's first request is its first answer, in the order requests came.
        let mut starts: Vec<Duration> = answered
            .iter()
            .filter(|answer| answer.sub_agent)
            .take(args.children)
            .map(|child| Duration::from_nanos(child.started_ns.saturating_sub(spawn.finished_ns)))
            .collect();
        if starts.len() != args.children {
            bail!(
                "{} of {} sub-agents called the model",
                starts.len(),
                args.children
            );
        }
        starts.sort();
        rounds.push(starts);
        last = Some(conversation_id);
    }
    let conversation_id = last.expect("at least one round");
    let sessions = get(
        session,
        &format!("/api/conversations/{conversation_id}/sessions"),
    )
    .await?;
    let child = sessions["sessions"][1]["id"]
        .as_str()
        .context("no sub-agent session")?
        .to_owned();
    Ok((rounds, (conversation_id, child)))
}

/// The runtime's time per turn (POST → `turn.ended`, minus the provider's time) of the root
/// agent of a fresh conversation, or of a sub-agent (`child`: its conversation and session).
/// After each sub-agent turn, the root's turn that reads its report is waited for, so that
/// turns never overlap.
pub(super) async fn turn_overheads(
    session: &Session,
    provider: &FakeProvider,
    args: &TurnCounts,
    child: Option<&(String, String)>,
) -> anyhow::Result<Vec<Duration>> {
    let (conversation_id, session_id) = match child {
        Some((conversation_id, session_id)) => (conversation_id.clone(), Some(session_id.clone())),
        None => (create_conversation(session).await?, None),
    };
    let expected = Script::Words {
        deltas: args.reply_tokens,
    }
    .expected();
    let (reports_sender, mut reports) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let _stop_on_return = stop.clone().drop_guard();
    tokio::spawn(sse::subscribe(
        0,
        events_url(session, &conversation_id),
        reports_sender,
        expected,
        stop.clone(),
    ));
    wait_connected(&mut reports, 1, TURN_TIMEOUT).await?;
    let who = if child.is_some() { "sub-agent" } else { "root" };
    eprintln!("{} {who} turns…", args.warmups + args.turns);
    let mut overheads = Vec::with_capacity(args.turns);
    for turn in 0..args.warmups + args.turns {
        let before = provider.answered_count();
        let posted_ns = monotonic_ns();
        let mut body = json!({ "text": format!("Turn {turn}: go on.") });
        if let Some(session_id) = &session_id {
            body["session_id"] = json!(session_id);
        }
        let path = format!("/api/conversations/{conversation_id}/messages");
        let accepted = post(session, &path, &body, 202).await?;
        if accepted["message"]["status"] != "started" {
            bail!("the message did not start a turn: {accepted}");
        }
        let ended = next_turn_end(&mut reports, TURN_TIMEOUT).await?;
        if ended.status != "completed" {
            bail!("{who} turn {turn} ended {}", ended.status);
        }
        if child.is_some() {
            // The root reads the report in a turn of its own.
            let root_turn = next_turn_end(&mut reports, TURN_TIMEOUT).await?;
            if root_turn.session_id == ended.session_id {
                bail!("a sub-agent turn was followed by another of its own, not its report");
            }
        }
        let answered = provider.answered().split_off(before);
        let answer = answered
            .iter()
            .find(|answer| answer.sub_agent == child.is_some())
            .context("the turn's model call was not recorded")?;
        let total = Duration::from_nanos(ended.ended_ns.saturating_sub(posted_ns));
        if turn >= args.warmups {
            overheads.push(total.saturating_sub(answer.duration()));
        }
    }
    Ok(overheads)
}

async fn get(session: &Session, path: &str) -> anyhow::Result<Value> {
    let url = format!("{}{path}", session.base);
    Ok(session.client.get(&url).send().await?.json().await?)
}

fn table(results: &Results) -> String {
    let mut out = String::new();
    let children = results.children;
    let all: Vec<Duration> = results
        .starts
        .iter()
        .map(|round| round[children - 1])
        .collect();
    let first: Vec<Duration> = results.starts.iter().map(|round| round[0]).collect();
    let root = percentile(&results.root, 0.50);
    let child = percentile(&results.child, 0.50);
    let ratio = ms(child) / ms(root).max(f64::EPSILON);
    let _ = writeln!(out, "\n## Sub-agents benchmark\n");
    let _ = writeln!(out, "| Measurement | Result | Target | |");
    let _ = writeln!(out, "|---|---|---|---|");
    let _ = writeln!(
        out,
        "| spawn answer → all {children} sub-agents' first model request, median of {} rounds (p90) | {:.2} ms ({:.2} ms) | < 20 ms | {} |",
        all.len(),
        ms(percentile(&all, 0.50)),
        ms(percentile(&all, 0.90)),
        verdict(percentile(&all, 0.50) < Duration::from_millis(20))
    );
    let _ = writeln!(
        out,
        "| spawn answer → first sub-agent's first model request, median | {:.2} ms | | |",
        ms(percentile(&first, 0.50))
    );
    let _ = writeln!(
        out,
        "| runtime overhead per root turn, median of {} (p90) | {:.2} ms ({:.2} ms) | | |",
        results.root.len(),
        ms(root),
        ms(percentile(&results.root, 0.90))
    );
    let _ = writeln!(
        out,
        "| runtime overhead per sub-agent turn, median of {} (p90) | {:.2} ms ({:.2} ms) | | |",
        results.child.len(),
        ms(child),
        ms(percentile(&results.child, 0.90))
    );
    let _ = writeln!(
        out,
        "| sub-agent turn overhead / root turn overhead | {ratio:.2}× | ≤ 1.5× | {} |",
        verdict(ratio <= 1.5)
    );
    out
}
