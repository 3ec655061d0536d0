//! `openvaala-bench approvals`: the time from a user's answer to an approval to the approved
//! command starting. A release server runs the demo model with `shell = "ask"`; each round
//! starts a conversation whose command prints the wall clock (`date +%s%N`), waits for its
//! approval, notes the wall clock and posts `allow_once`. The command's own time minus the
//! time before the POST is the latency, up to `date` printing. What `sh -c date` itself takes to
//! print, spawned directly by this process, is measured too and taken off: the rest is the
//! time to the command starting. Rounds alternate an agent with the sandbox and one with
//! `sandbox = "off"`.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use super::server::{ServerProcess, http_client, server_binary};
use super::stats::{median_duration, ms, percentile, verdict};
use super::turns::{Session, post};

#[derive(Args)]
pub struct ApprovalsArgs {
    /// Approvals answered per agent.
    #[arg(long, default_value_t = 50)]
    rounds: usize,
}

/// The target from an approval's POST to the command starting.
const TARGET: Duration = Duration::from_millis(5);
/// How often the approvals and the conversation are polled.
const POLL: Duration = Duration::from_millis(1);
/// The longest one round may take.
const ROUND_TIMEOUT: Duration = Duration::from_secs(30);

const CONFIG: &str = r#"
default_agent = "sandboxed"

[agents.sandboxed]
description = "asks before every command, sandboxed"
model = "demo"
[agents.sandboxed.permissions]
shell = "ask"

[agents.open]
description = "asks before every command, no sandbox"
model = "demo"
sandbox = "off"
[agents.open.permissions]
shell = "ask"
"#;

pub fn approvals(args: &ApprovalsArgs) -> anyhow::Result<()> {
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let server = server_binary()?;
    let dir = std::env::temp_dir().join(format!(
        "openvaala-bench-approvals-{}",
        uuid::Uuid::now_v7()
    ));
    let data_dir = dir.join("data");
    let workspace = dir.join("workspace");
    fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::create_dir_all(&workspace)?;
    let outcome = run(args, &server, &dir, &data_dir, &workspace);
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    let (sandboxed, open, answers) = outcome?;
    let baseline = median_duration(&shell_start_up(args.rounds)?);
    let start = |samples: &[Duration]| median_duration(samples).saturating_sub(baseline);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | Result | Target | |\n|---|---|---|---|"
    );
    let median = start(&sandboxed);
    let _ = writeln!(
        out,
        "| an approval's POST to its command starting, sandboxed (median of {}, less `sh -c date`'s own {:.2} ms) | {:.2} ms | < {} ms | {} |",
        sandboxed.len(),
        ms(baseline),
        ms(median),
        TARGET.as_millis(),
        verdict(median < TARGET),
    );
    let _ = writeln!(
        out,
        "| the same with sandbox = \"off\" | {:.2} ms | | |",
        ms(start(&open)),
    );
    for (label, samples) in [
        (
            "POST to `date` printing, sandboxed: median / p99",
            &sandboxed,
        ),
        (
            "POST to `date` printing with sandbox = \"off\": median / p99",
            &open,
        ),
        ("the POST's own answer: median / p99", &answers),
    ] {
        let _ = writeln!(
            out,
            "| {label} | {:.2} / {:.2} ms | | |",
            ms(median_duration(samples)),
            ms(percentile(samples, 0.99)),
        );
    }
    print!("{out}");
    Ok(())
}

/// How long `sh -c 'date +%s%N'` takes to print the time, spawned directly.
fn shell_start_up(rounds: usize) -> anyhow::Result<Vec<Duration>> {
    (0..rounds)
        .map(|_| {
            let before = SystemTime::now().duration_since(UNIX_EPOCH)?;
            let output = std::process::Command::new("sh")
                .args(["-c", "date +%s%N"])
                .output()?;
            let printed: u64 = String::from_utf8_lossy(&output.stdout).trim().parse()?;
            Ok(Duration::from_nanos(printed).saturating_sub(before))
        })
        .collect()
}

type Samples = (Vec<Duration>, Vec<Duration>, Vec<Duration>);

fn run(
    args: &ApprovalsArgs,
    server: &Path,
    dir: &Path,
    data_dir: &Path,
    workspace: &Path,
) -> anyhow::Result<Samples> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let config = dir.join("config.toml");
    fs::write(&config, CONFIG)?;
    let mut running = ServerProcess::start_with_config(server, data_dir, &config)?;
    runtime.block_on(running.wait_until_healthy())?;
    let session = Session {
        client: http_client()?,
        base: running.base.clone(),
        workspace: workspace.to_owned(),
    };
    eprintln!("{} approvals answered per agent…", args.rounds);
    let measured = runtime.block_on(async {
        let (mut sandboxed, mut open, mut answers) = (Vec::new(), Vec::new(), Vec::new());
        // Two untimed rounds first: the first commands warm the caches.
        for round in 0..args.rounds + 2 {
            for (agent, samples) in [("sandboxed", &mut sandboxed), ("open", &mut open)] {
                let (start, answer) =
                    tokio::time::timeout(ROUND_TIMEOUT, one_round(&session, agent))
                        .await
                        .context("a round did not end in time")??;
                if round >= 2 {
                    samples.push(start);
                    answers.push(answer);
                }
            }
        }
        anyhow::Ok((sandboxed, open, answers))
    });
    drop(runtime);
    running.stop()?;
    measured
}

/// One approval: returns the time from before the POST to the command's start, and the
/// POST's own answer time.
async fn one_round(session: &Session, agent: &str) -> anyhow::Result<(Duration, Duration)> {
    let body = json!({
        "text": "/shell date +%s%N",
        "cwd": session.workspace,
        "agent": agent,
    });
    let created = post(session, "/api/conversations", &body, 201).await?;
    let id = created["conversation"]["id"]
        .as_str()
        .context("no conversation id")?
        .to_owned();
    let approval_id = loop {
        let list: Value = session
            .client
            .get(format!("{}/api/approvals", session.base))
            .send()
            .await?
            .json()
            .await?;
        let found = list["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|approval| approval["conversation_id"] == id.as_str())
            .and_then(|approval| approval["id"].as_str().map(str::to_owned));
        if let Some(approval_id) = found {
            break approval_id;
        }
        tokio::time::sleep(POLL).await;
    };
    let before = SystemTime::now().duration_since(UNIX_EPOCH)?;
    let posted = Instant::now();
    post(
        session,
        &format!("/api/approvals/{approval_id}"),
        &json!({"decision": "allow_once"}),
        200,
    )
    .await?;
    let answer = posted.elapsed();
    let conversation_url = format!("{}/api/conversations/{id}", session.base);
    loop {
        let conversation: Value = session
            .client
            .get(&conversation_url)
            .send()
            .await?
            .json()
            .await?;
        if conversation["status"] == "idle" {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let items: Value = session
        .client
        .get(format!("{conversation_url}/items"))
        .send()
        .await?
        .json()
        .await?;
    let output = items["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| item["kind"] == "tool_call")
        .and_then(|item| item["output"].as_str())
        .context("no tool output")?;
    let started_ns: u128 = output
        .trim()
        .parse()
        .with_context(|| format!("the command printed no time: {output:?}"))?;
    let started = Duration::from_nanos(u64::try_from(started_ns)?);
    Ok((started.saturating_sub(before), answer))
}
