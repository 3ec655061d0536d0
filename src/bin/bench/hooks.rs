//! `openvaala-bench hooks`: what a no-op `pre_tool_use` HTTP hook adds to a tool call. Two
//! release services run against the same in-process fake provider, one with a
//! `pre_tool_use` hook whose URL is a receiver in this process that answers `{}` at once (on a
//! thread of its own, like the provider), one without. Each round starts a conversation on
//! each service in turn, so that drift in the machine's load falls on both alike; its first
//! model answer is one `read_file` call of a small file. A call's time runs from the
//! provider's last byte of that answer to the next request (carrying the call's result)
//! reaching it: the runtime reading the answer, asking the hooks, checking the permissions,
//! running the tool, storing its result and sending the next request.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use axum::Router;
use axum::routing::post;
use clap::Args;
use serde_json::{Value, json};

use super::fake_provider::{FakeProvider, Script, serve_on_own_thread};
use super::server::{ServerProcess, http_client, server_binary};
use super::stats::{median, median_duration, ms, percentile, thousands, verdict};
use super::turns::{FILE_TOOLS, Session, bench_config, post as post_json};

#[derive(Args)]
pub struct HooksArgs {
    /// Tool calls timed on each service.
    #[arg(long, default_value_t = 200)]
    calls: usize,
}

/// The target for what the hook adds to a call (the difference of the medians).
const TARGET: Duration = Duration::from_millis(2);
/// Untimed rounds first: the first calls warm both services' caches and connections.
const WARM_UP: usize = 10;
/// How often the provider's answers and the conversation are polled.
const POLL: Duration = Duration::from_millis(1);
/// The longest one round may take.
const ROUND_TIMEOUT: Duration = Duration::from_secs(30);
/// The file each call reads, in the workspace.
const READ: &str = "notes.txt";

pub fn hooks(args: &HooksArgs) -> anyhow::Result<()> {
    if args.calls == 0 {
        bail!("--calls must be at least 1");
    }
    let server = server_binary()?;
    let dir = std::env::temp_dir().join(format!("openvaala-bench-hooks-{}", uuid::Uuid::now_v7()));
    let workspace = dir.join("workspace");
    fs::create_dir_all(&workspace).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::write(workspace.join(READ), "one line\n")?;
    let outcome = run(args, &server, &dir, &workspace);
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    let (hooked, plain) = outcome?;
    print!("{}", table(args.calls, &hooked, &plain));
    Ok(())
}

fn table(calls: usize, hooked: &[Duration], plain: &[Duration]) -> String {
    let added = ms(median_duration(hooked)) - ms(median_duration(plain));
    // Each round timed one call of each: their difference, round by round, in ms.
    let paired: Vec<f64> = hooked
        .iter()
        .zip(plain)
        .map(|(with, without)| ms(*with) - ms(*without))
        .collect();
    let mut sorted = paired.clone();
    sorted.sort_by(f64::total_cmp);
    let rank = ((0.9 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | Result | Target | |\n|---|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| what a no-op `pre_tool_use` HTTP hook adds to a tool call on loopback (median with it minus median without; {} `read_file` calls each) | {added:.2} ms | < {} ms | {} |",
        thousands(calls as u64),
        TARGET.as_millis(),
        verdict(added < ms(TARGET)),
    );
    let _ = writeln!(
        out,
        "| the difference round by round (with minus without): median / p90 | {:.2} / {:.2} ms | | |",
        median(&paired),
        sorted[rank - 1],
    );
    for (label, samples) in [
        ("a call with the hook: median / p90", hooked),
        ("a call without a hook: median / p90", plain),
    ] {
        let _ = writeln!(
            out,
            "| {label} | {:.2} / {:.2} ms | | |",
            ms(median_duration(samples)),
            ms(percentile(samples, 0.9)),
        );
    }
    out
}

/// Starts the receiver, the provider and both services, and times `calls` calls on each.
fn run(
    args: &HooksArgs,
    server: &Path,
    dir: &Path,
    workspace: &Path,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    // Two workers, like the services: the client side competes with them for the two cores.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let receiver = Router::new().route(
        "/hook",
        post(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            async { axum::Json(json!({})) }
        }),
    );
    let (hook_address, _stop_receiver) = serve_on_own_thread(receiver, "hook-receiver")?;
    let provider = FakeProvider::start(Script::Caller {
        tool: "read_file",
        arguments: json!({ "path": READ }).to_string(),
        deltas: 1,
    })?;
    let hook = format!("[[hooks.pre_tool_use]]\nurl = \"http://{hook_address}/hook\"\n\n");
    let mut services = Vec::new();
    for (name, tables) in [("hooked", hook.as_str()), ("plain", "")] {
        let data_dir = dir.join(name).join("data");
        fs::create_dir_all(&data_dir)?;
        let config = dir.join(name).join("config.toml");
        fs::write(
            &config,
            bench_config(&provider.base_url, tables, FILE_TOOLS),
        )?;
        let mut running = ServerProcess::start_with_config(server, &data_dir, &config)?;
        runtime.block_on(running.wait_until_healthy())?;
        services.push(running);
    }
    let sessions: Vec<Session> = services
        .iter()
        .map(|running| {
            Ok(Session {
                client: http_client()?,
                base: running.base.clone(),
                workspace: workspace.to_owned(),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    eprintln!("{} read_file calls on each service…", args.calls);
    let measured = runtime.block_on(async {
        let (mut hooked, mut plain) = (Vec::new(), Vec::new());
        for round in 0..WARM_UP + args.calls {
            for (session, samples) in sessions.iter().zip([&mut hooked, &mut plain]) {
                let took = tokio::time::timeout(ROUND_TIMEOUT, one_call(session, &provider))
                    .await
                    .context("a round did not end in time")??;
                if round >= WARM_UP {
                    samples.push(took);
                }
            }
        }
        anyhow::Ok((hooked, plain))
    });
    // Every call of the hooked service asked the hook, and only those.
    let rounds = WARM_UP + args.calls;
    let asked = asked.load(Ordering::Relaxed);
    if measured.is_ok() && asked != rounds {
        bail!("the hook was asked {asked} times for {rounds} calls");
    }
    drop(runtime);
    for running in services {
        running.stop()?;
    }
    measured
}

/// One conversation whose first answer is the `read_file` call: the call's time, from the
/// provider's last byte of the call to the request carrying its result.
async fn one_call(session: &Session, provider: &FakeProvider) -> anyhow::Result<Duration> {
    let before = provider.answered_count();
    let body = json!({"text": "Read the notes.", "cwd": session.workspace});
    let created = post_json(session, "/api/conversations", &body, 201).await?;
    let id = created["conversation"]["id"]
        .as_str()
        .context("no conversation id")?
        .to_owned();
    // The provider's own record, polled in this process: nothing asks the service anything
    // while the call runs.
    while provider.answered_count() < before + 2 {
        tokio::time::sleep(POLL).await;
    }
    let answers = provider.answered();
    let (call, next) = (&answers[before], &answers[before + 1]);
    if !call.called || next.called {
        bail!("the provider's answers are not a call and then its result's: {answers:?}");
    }
    let took = Duration::from_nanos(next.started_ns.saturating_sub(call.finished_ns));
    // The turn ends before the next round starts, so the two never share the machine.
    let url = format!("{}/api/conversations/{id}", session.base);
    loop {
        let conversation: Value = session.client.get(&url).send().await?.json().await?;
        if conversation["status"] == "idle" {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(took)
}
