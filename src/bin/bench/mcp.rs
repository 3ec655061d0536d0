//! `openvaala-bench mcp`: what the runtime adds to an MCP call. A trivial tool (`echo` of
//! server-everything, over stdio) is called many times through the shell-free tool path the
//! turn uses (`tools::run_tool` → the MCP hub), alternately with the same call made directly
//! with the SDK on a connection of its own, so drift in the machine's load falls on both alike.
//! Then the first call of a fresh hub, which must start the server, against the server's own
//! start with the SDK alone doing the same work: spawn, handshake, the tool list (the runtime
//! needs it to know the tools) and the call.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use openvaala::config::{McpServerConfig, McpTransport};
use openvaala::mcp::{McpAccess, McpHub};
use openvaala::tools::{SandboxPolicy, ToolContext, ToolStatus, run_tool};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::stats::{median_duration, ms, percentile, thousands, verdict};

#[derive(Args)]
pub struct McpArgs {
    /// Calls timed each way.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// First calls timed each way (each starts a server).
    #[arg(long, default_value_t = 10)]
    starts: usize,
    /// server-everything's entry script (installed by `npm ci --prefix tests/mcp`).
    #[arg(
        long,
        default_value = "tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    )]
    server: String,
}

/// Targets: the runtime's own time per call, and a first call's start beyond the server's own.
const CALL_TARGET: Duration = Duration::from_millis(1);
const START_TARGET: Duration = Duration::from_millis(50);
const WARM_UP: usize = 50;

pub fn mcp(args: &McpArgs) -> anyhow::Result<()> {
    ensure!(
        Path::new(&args.server).is_file(),
        "{} is missing: run `npm ci --prefix tests/mcp` from the repository",
        args.server
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (through, direct) = runtime.block_on(time_calls(&args.server, args.calls))?;
    let (first, own) = runtime.block_on(time_starts(&args.server, args.starts))?;

    let overhead = median_duration(&through).saturating_sub(median_duration(&direct));
    let start_cost = median_duration(&first).saturating_sub(median_duration(&own));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | Result | Target | |\n|---|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| the runtime's own time per MCP call (median through the tool path minus median with the SDK alone; {} calls each) | {:.3} ms | < {} ms | {} |",
        thousands(args.calls as u64),
        ms(overhead),
        ms(CALL_TARGET),
        verdict(overhead < CALL_TARGET),
    );
    let _ = writeln!(
        out,
        "| a first call's start beyond the server's own (median of {} each) | {:.1} ms | < {} ms | {} |",
        args.starts,
        ms(start_cost),
        ms(START_TARGET),
        verdict(start_cost < START_TARGET),
    );
    for (label, samples) in [
        ("`echo` through the tool path", &through),
        ("`echo` with the SDK alone", &direct),
        (
            "first call of a fresh hub (start, handshake, tools/list, call)",
            &first,
        ),
        (
            "the server's own start with the SDK (spawn, handshake, tools/list, call)",
            &own,
        ),
    ] {
        let _ = writeln!(
            out,
            "| {label}: median / p99 | {:.3} / {:.3} ms | | |",
            ms(median_duration(samples)),
            ms(percentile(samples, 0.99)),
        );
    }
    print!("{out}");
    Ok(())
}

fn server_config(script: &str) -> BTreeMap<String, McpServerConfig> {
    BTreeMap::from([(
        "everything".to_owned(),
        McpServerConfig {
            transport: McpTransport::Stdio {
                command: "node".to_owned(),
                args: vec![script.to_owned(), "stdio".to_owned()],
                env: BTreeMap::new(),
                cwd: None,
            },
            timeout: Duration::from_secs(30),
            expand_variables: true,
            unsandboxed: false,
        },
    )])
}

fn context(hub: Arc<McpHub>) -> ToolContext {
    ToolContext {
        background: None,
        cwd: std::env::temp_dir(),
        shell_timeout: Duration::from_secs(30),
        max_output_bytes: 64 * 1024,
        process_records: None,
        sandbox: SandboxPolicy::default(),
        mcp: Some(McpAccess {
            hub,
            holder: openvaala::mcp::Holder {
                conversation_id: "bench".to_owned(),
                generation: 0,
            },
            servers: vec!["everything".to_owned()],
            own: Default::default(),
            sandbox: SandboxPolicy::default(),
            cwd: std::env::temp_dir(),
            sampling: Default::default(),
            start_wait: Duration::from_secs(60),
            peer: None,
        }),
    }
}

async fn sdk_client(
    script: &str,
) -> anyhow::Result<rmcp::service::RunningService<rmcp::RoleClient, ()>> {
    let mut command = tokio::process::Command::new("node");
    command.arg(script).arg("stdio");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("cannot start node")?;
    Ok(().serve(transport).await?)
}

fn echo_params() -> CallToolRequestParams {
    let Value::Object(arguments) = json!({"message": "x"}) else {
        unreachable!("an object")
    };
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

/// `calls` echo calls each way, alternating; returns the times through the tool path and
/// with the SDK alone.
async fn time_calls(script: &str, calls: usize) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let hub = Arc::new(McpHub::new(&server_config(script), None));
    let ctx = context(hub.clone());
    let direct = sdk_client(script).await?;
    let (live, _chunks) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let arguments = json!({"message": "x"});
    let mut through = Vec::with_capacity(calls);
    let mut alone = Vec::with_capacity(calls);
    for round in 0..WARM_UP + calls {
        let started = Instant::now();
        let result = run_tool("mcp__everything__echo", &arguments, &ctx, &live, &cancel).await;
        let took = started.elapsed();
        ensure!(result.status == ToolStatus::Completed, "{}", result.output);
        let started = Instant::now();
        direct.call_tool(echo_params()).await?;
        let took_direct = started.elapsed();
        if round >= WARM_UP {
            through.push(took);
            alone.push(took_direct);
        }
    }
    hub.shutdown().await;
    direct.cancel().await?;
    Ok((through, alone))
}

/// `starts` first calls each way, each on a server started for it. Which way goes first
/// alternates: a start right after the other way's server was killed shares the machine with
/// that server's exit.
async fn time_starts(
    script: &str,
    starts: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut first = Vec::with_capacity(starts);
    let mut own = Vec::with_capacity(starts);
    for round in 0..starts {
        if round % 2 == 0 {
            first.push(hub_first_call(script).await?);
            own.push(sdk_first_call(script).await?);
        } else {
            own.push(sdk_first_call(script).await?);
            first.push(hub_first_call(script).await?);
        }
    }
    Ok((first, own))
}

/// A fresh hub's first call, which starts the server.
async fn hub_first_call(script: &str) -> anyhow::Result<Duration> {
    let (live, _chunks) = tokio::sync::mpsc::unbounded_channel();
    let hub = Arc::new(McpHub::new(&server_config(script), None));
    let ctx = context(hub.clone());
    let arguments = json!({"message": "x"});
    let started = Instant::now();
    let result = run_tool(
        "mcp__everything__echo",
        &arguments,
        &ctx,
        &live,
        &CancellationToken::new(),
    )
    .await;
    let took = started.elapsed();
    ensure!(result.status == ToolStatus::Completed, "{}", result.output);
    hub.shutdown().await;
    Ok(took)
}

/// The same work with the SDK alone: spawn, handshake, tools/list, call.
async fn sdk_first_call(script: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let direct = sdk_client(script).await?;
    direct.list_all_tools().await?;
    direct.call_tool(echo_params()).await?;
    let took = started.elapsed();
    direct.cancel().await?;
    Ok(took)
}
