//! `openvaala-bench cache`: what prompt caching saves over a long conversation. One
//! conversation of `--turns` turns, each a tool-call round (`read_file`, `shell`,
//! `update_plan`) and an answer, runs on each protocol against `cache_provider`, which caches
//! as Anthropic and OpenAI document; then again with `prompt_cache = "off"` on the model. From
//! the turns' usage (`GET …/turns`) it reports the share of input read from the cache and the
//! input's cost per turn with and without caching, at example prices (Anthropic: input 3.00,
//! cache write 3.75, cache read 0.30; OpenAI: input 1.25, cached 0.125; per million tokens).
//! It also checks the service's figures against the provider's own and lists any request
//! whose prefix changed under the cache.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use openvaala::config::Price;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::cache_provider::{CacheProvider, NOTES_FILE, PrefixChange};
use super::fake_provider::ExpectedReply;
use super::server::{ServerProcess, http_client, server_binary};
use super::sse::{self, Report};
use super::stats::{median, thousands, verdict};
use super::text::WORDS;
use super::turns::{Session, post, wait_connected};

#[derive(Args)]
pub struct CacheArgs {
    /// Turns of each conversation.
    #[arg(long, default_value_t = 50)]
    turns: usize,
    /// Keep the data directory (its path is printed) instead of removing it.
    #[arg(long)]
    keep: bool,
}

/// The target share of input tokens read from the cache, with caching on.
const SHARE_TARGET: f64 = 0.85;
/// How long one turn (two model calls and the tools) may take before the bench gives up.
const TURN_TIMEOUT: Duration = Duration::from_secs(60);

/// One protocol as the bench configures it: its provider and models (cached, and not), the
/// model's name at the provider, and its example price.
struct Wire {
    label: &'static str,
    protocol: &'static str,
    model_name: &'static str,
    price: Price,
}

const WIRES: [Wire; 3] = [
    Wire {
        label: "Anthropic Messages",
        protocol: "anthropic_messages",
        model_name: "claude-sonnet-4-5",
        price: Price {
            input: 3.00,
            output: 15.00,
            cached_input: Some(0.30),
            cache_write: Some(3.75),
        },
    },
    Wire {
        label: "OpenAI Chat Completions",
        protocol: "openai_chat",
        model_name: "gpt-5",
        price: Price {
            input: 1.25,
            output: 10.00,
            cached_input: Some(0.125),
            cache_write: None,
        },
    },
    Wire {
        label: "OpenAI Responses",
        protocol: "openai_responses",
        model_name: "gpt-5",
        price: Price {
            input: 1.25,
            output: 10.00,
            cached_input: Some(0.125),
            cache_write: None,
        },
    },
];

/// What one conversation's turns used.
#[derive(Debug, Default)]
struct Run {
    turns: usize,
    model_calls: u64,
    input: u64,
    cached: u64,
    written: u64,
    /// The input's cost per turn at the wire's price.
    input_costs: Vec<f64>,
    /// The sum of the turns' `cost` as the service gave it (input and output).
    service_cost: f64,
    /// Whether the service's token sums equal the provider's own.
    agrees: bool,
    changes: Vec<PrefixChange>,
}

impl Run {
    fn share(&self) -> f64 {
        if self.input == 0 {
            0.0
        } else {
            self.cached as f64 / self.input as f64
        }
    }

    fn total_input_cost(&self) -> f64 {
        self.input_costs.iter().sum()
    }
}

pub fn cache(args: &CacheArgs) -> anyhow::Result<()> {
    if args.turns == 0 {
        bail!("--turns must be at least 1");
    }
    let server = server_binary()?;
    let dir = std::env::temp_dir().join(format!("openvaala-bench-cache-{}", uuid::Uuid::now_v7()));
    let data_dir = dir.join("data");
    fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", dir.display()))?;
    eprintln!("data directory: {}", data_dir.display());
    let outcome = run(args, &server, &dir, &data_dir);
    if args.keep {
        eprintln!("kept {}", dir.display());
    } else {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    print!("{}", table(args.turns, &outcome?));
    Ok(())
}

fn run(
    args: &CacheArgs,
    server: &Path,
    dir: &Path,
    data_dir: &Path,
) -> anyhow::Result<Vec<(Run, Run)>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let provider = CacheProvider::start()?;
    let config = dir.join("config.toml");
    fs::write(&config, config_file(&provider.base_url))?;
    let mut running = ServerProcess::start_with_config(server, data_dir, &config)?;
    runtime.block_on(running.wait_until_healthy())?;
    let client = http_client()?;
    let measured = runtime.block_on(async {
        let mut runs = Vec::new();
        for (index, wire) in WIRES.iter().enumerate() {
            let mut pair = Vec::new();
            for cached in [true, false] {
                // Names of one length: the path is in every request, and the two runs compare.
                let mode = if cached { "on" } else { "no" };
                let workspace = dir.join(format!("workspace-{index}-{mode}"));
                fs::create_dir_all(&workspace)?;
                fs::write(workspace.join(NOTES_FILE), notes())?;
                let session = Session {
                    client: client.clone(),
                    base: running.base.clone(),
                    workspace,
                };
                eprintln!(
                    "{}, caching {}: {} turns…",
                    wire.label,
                    if cached { "on" } else { "off" },
                    args.turns
                );
                let run = conversation(&session, &provider, wire, cached, args.turns).await?;
                eprintln!(
                    "  {:.1} % of {} input tokens from the cache",
                    run.share() * 100.0,
                    thousands(run.input)
                );
                pair.push(run);
            }
            let off = pair.pop().expect("two runs");
            let on = pair.pop().expect("two runs");
            runs.push((on, off));
        }
        anyhow::Ok(runs)
    });
    drop(runtime);
    running.stop()?;
    measured
}

/// The model's id in the config for a wire, cached or not.
fn model_id(wire: &Wire, cached: bool) -> String {
    format!("{}{}", wire.protocol, if cached { "" } else { "_off" })
}

/// The server's config: one provider per protocol, all at the fake; two models each, one with
/// `prompt_cache = "off"`; a default agent with the file tools, the shell (unsandboxed: this
/// measures the requests, not the sandbox) and the plan.
fn config_file(base_url: &str) -> String {
    let mut config = String::from(
        "default_agent = \"default\"\n\n[retry]\nmax_attempts = 3\ninitial_delay_ms = 10\nmax_delay_ms = 50\n\n",
    );
    for wire in &WIRES {
        let _ = write!(
            config,
            "[providers.{protocol}]\nprotocol = \"{protocol}\"\nbase_url = \"{base_url}\"\n\n",
            protocol = wire.protocol
        );
        let price = wire.price;
        let mut price_table = format!("input = {}, output = {}", price.input, price.output);
        if let Some(cached) = price.cached_input {
            let _ = write!(price_table, ", cached_input = {cached}");
        }
        if let Some(write) = price.cache_write {
            let _ = write!(price_table, ", cache_write = {write}");
        }
        for cached in [true, false] {
            let _ = write!(
                config,
                "[models.{id}]\nprovider = \"{protocol}\"\nname = \"{name}\"\ncontext_window = 1000000\nmax_output_tokens = 32000\nprice = {{ {price_table} }}\n{off}\n",
                id = model_id(wire, cached),
                protocol = wire.protocol,
                name = wire.model_name,
                off = if cached {
                    ""
                } else {
                    "prompt_cache = \"off\"\n"
                },
            );
        }
    }
    config.push_str(
        r#"[agents.default]
description = "benchmark agent"
model = "anthropic_messages"
sandbox = "off"
tools = ["shell", "read_file", "write_file", "edit_file", "list_dir", "grep", "glob", "update_plan"]
"#,
    );
    config
}

/// The notes the scripted calls read: about 600 words in lines of ten.
fn notes() -> String {
    (0..60)
        .map(|line| {
            let words: Vec<&str> = (0..10)
                .map(|word| WORDS[(line * 10 + word) % WORDS.len()])
                .collect();
            format!("{}\n", words.join(" "))
        })
        .collect()
}

/// Runs one conversation of `turns` turns and reads what each used.
async fn conversation(
    session: &Session,
    provider: &CacheProvider,
    wire: &Wire,
    cached: bool,
    turns: usize,
) -> anyhow::Result<Run> {
    provider.new_conversation();
    let created = post(
        session,
        "/api/conversations",
        &json!({
            "text": message(0),
            "cwd": session.workspace,
            "model": model_id(wire, cached),
        }),
        201,
    )
    .await?;
    let id = created["conversation"]["id"]
        .as_str()
        .context("no conversation id in the answer")?
        .to_owned();
    let first_turn = created["turn_id"].as_str().unwrap_or_default().to_owned();

    let (reports_sender, mut reports) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let _stop_on_return = stop.clone().drop_guard();
    let nothing = ExpectedReply {
        text: "".into(),
        ends: Vec::new().into(),
    };
    let url = format!("{}/api/conversations/{id}/events", session.base);
    tokio::spawn(sse::subscribe(
        0,
        url,
        reports_sender,
        nothing,
        stop.clone(),
    ));
    wait_connected(&mut reports, 1, TURN_TIMEOUT).await?;
    // The first turn began with the conversation; it may have ended before the stream opened,
    // so the conversation's status says whether to wait for its end.
    let status: Value = session
        .client
        .get(format!("{}/api/conversations/{id}", session.base))
        .send()
        .await?
        .json()
        .await?;
    let mut ended = std::collections::HashSet::new();
    if status["conversation"]["status"] == "idle" || status["status"] == "idle" {
        ended.insert(first_turn.clone());
    } else {
        wait_turn_end(&mut reports, &mut ended).await?;
    }
    for turn in 1..turns {
        let path = format!("/api/conversations/{id}/messages");
        let accepted = post(session, &path, &json!({ "text": message(turn) }), 202).await?;
        if accepted["message"]["status"] != "started" {
            bail!("message {turn} did not start a turn: {accepted}");
        }
        wait_turn_end(&mut reports, &mut ended).await?;
    }

    let listed: Value = session
        .client
        .get(format!(
            "{}/api/conversations/{id}/turns?limit=2000",
            session.base
        ))
        .send()
        .await?
        .json()
        .await?;
    let mut run = Run::default();
    for turn in listed["turns"].as_array().context("no turns listed")? {
        if turn["status"] != "completed" {
            bail!("a turn ended {}: {}", turn["status"], turn["error"]);
        }
        let usage = &turn["usage"];
        let count = |field: &str| usage[field].as_u64().unwrap_or(0);
        let (input, read, written) = (
            count("input_tokens"),
            count("cached_input_tokens"),
            count("cache_write_tokens"),
        );
        run.turns += 1;
        run.model_calls += count("model_calls");
        run.input += input;
        run.cached += read;
        run.written += written;
        run.input_costs
            .push(wire.price.cost(input, read, written, 0));
        run.service_cost += usage["cost"].as_f64().unwrap_or(0.0);
    }
    let (calls, changes) = provider.conversation();
    run.agrees = calls.len() as u64 == run.model_calls
        && calls.iter().map(|call| call.input_tokens).sum::<u64>() == run.input
        && calls.iter().map(|call| call.cache_read_tokens).sum::<u64>() == run.cached
        && calls
            .iter()
            .map(|call| call.cache_write_tokens)
            .sum::<u64>()
            == run.written;
    run.changes = changes;
    Ok(run)
}

/// The user's message of turn `turn`.
fn message(turn: usize) -> String {
    format!("Turn {turn}: look at {NOTES_FILE} again and tell me what changed.")
}

/// Waits for the end of a turn not seen yet; it must have completed.
async fn wait_turn_end(
    reports: &mut mpsc::UnboundedReceiver<Report>,
    ended: &mut std::collections::HashSet<String>,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + TURN_TIMEOUT;
    loop {
        let report = tokio::time::timeout_at(deadline, reports.recv())
            .await
            .with_context(|| format!("no turn.ended within {TURN_TIMEOUT:?}"))?
            .context("the subscriber stopped")?;
        match report {
            Report::TurnEnded(turn) if ended.insert(turn.turn_id.clone()) => {
                if turn.status != "completed" {
                    bail!("turn {} ended {}", turn.turn_id, turn.status);
                }
                return Ok(());
            }
            Report::Gone { reason, .. } => bail!("the subscriber gave up: {reason}"),
            _ => {}
        }
    }
}

fn table(turns: usize, runs: &[(Run, Run)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Protocol | Input read from the cache | Target | | Input cost per turn, median: cached / off | Input cost, {turns} turns: cached / off | Cached ÷ off |\n|---|---|---|---|---|---|---|"
    );
    for (wire, (on, off)) in WIRES.iter().zip(runs) {
        let _ = writeln!(
            out,
            "| {} | {:.1} % ({} of {} tokens) | ≥ {:.0} % | {} | ${:.4} / ${:.4} | ${:.3} / ${:.3} | {:.2} |",
            wire.label,
            on.share() * 100.0,
            thousands(on.cached),
            thousands(on.input),
            SHARE_TARGET * 100.0,
            verdict(on.share() >= SHARE_TARGET),
            median(&on.input_costs),
            median(&off.input_costs),
            on.total_input_cost(),
            off.total_input_cost(),
            on.total_input_cost() / off.total_input_cost().max(f64::MIN_POSITIVE),
        );
    }
    let _ = writeln!(
        out,
        "\n| Protocol, caching | Turns | Model calls | Input tokens | read from the cache | written to it | Cost (service, with output) | Service = provider |\n|---|---|---|---|---|---|---|---|"
    );
    for (wire, (on, off)) in WIRES.iter().zip(runs) {
        for (label, run) in [("on", on), ("off", off)] {
            let _ = writeln!(
                out,
                "| {}, {label} | {} | {} | {} | {} | {} | ${:.3} | {} |",
                wire.label,
                run.turns,
                run.model_calls,
                thousands(run.input),
                thousands(run.cached),
                thousands(run.written),
                run.service_cost,
                if run.agrees { "yes" } else { "**no**" },
            );
        }
    }
    let changes: Vec<_> = WIRES
        .iter()
        .zip(runs)
        .flat_map(|(wire, (on, off))| {
            [("on", on), ("off", off)]
                .into_iter()
                .flat_map(move |(label, run)| {
                    run.changes
                        .iter()
                        .map(move |change| (wire.label, label, change))
                })
        })
        .collect();
    if changes.is_empty() {
        let _ = writeln!(
            out,
            "\nEvery request started with the bytes of the one before it."
        );
    } else {
        let _ = writeln!(out, "\nRequests whose prefix changed from the one before:");
        for (wire, label, change) in changes {
            let _ = writeln!(
                out,
                "- {wire}, caching {label}: request {}, part {}: `{}` became `{}`",
                change.request, change.part, change.before, change.after
            );
        }
    }
    let _ = writeln!(
        out,
        "\nExample prices per million tokens: Anthropic input 3.00, cache write 3.75, cache read 0.30, output 15.00; OpenAI input 1.25, cached input 0.125, output 10.00."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_is_valid() {
        let path =
            std::env::temp_dir().join(format!("bench-cache-config-{}.toml", std::process::id()));
        fs::write(&path, config_file("http://127.0.0.1:9/v1")).unwrap();
        let loaded = openvaala::config::Config::load(Some(&path));
        fs::remove_file(&path).unwrap();
        let config = loaded.unwrap();
        for wire in &WIRES {
            let on = &config.models[&model_id(wire, true)];
            let off = &config.models[&model_id(wire, false)];
            assert!(on.options.prompt_cache);
            assert!(!off.options.prompt_cache);
            assert_eq!(on.price, Some(wire.price));
        }
    }
}
