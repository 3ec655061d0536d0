//! `openvaala-bench sandbox`: what the sandbox costs per shell command. Many `true` commands
//! run through the shell tool's own code (`tools::run_tool`), alternately with
//! `sandbox = "workspace_write"` and with `sandbox = "off"`, so that drift in the machine's load
//! falls on both alike. The sandbox's cost is the launcher: this binary started again, which
//! makes the namespaces, mounts and the PID namespace's init, then confines the program
//! (limits, Landlock, capabilities, seccomp) before it starts. The process is given resident
//! memory like a running service's (`--resident-mb`), to show the cost does not grow with it.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use openvaala::config::SandboxMode;
use openvaala::tools::{SandboxPolicy, ToolContext, ToolStatus, run_tool};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::stats::{median_duration, ms, percentile, thousands, verdict};

#[derive(Args)]
pub struct SandboxArgs {
    /// Commands timed in each mode.
    #[arg(long, default_value_t = 1000)]
    commands: usize,
    /// Memory the process holds (written, so resident) while it runs the commands, in MB.
    #[arg(long, default_value_t = 128)]
    resident_mb: usize,
}

/// The target for the sandbox's cost per command (the difference of the medians).
const TARGET: Duration = Duration::from_millis(5);
/// Untimed commands first: the first spawns warm the caches of both modes.
const WARM_UP: usize = 20;

pub fn sandbox(args: &SandboxArgs) -> anyhow::Result<()> {
    let support = openvaala::sandbox::support();
    ensure!(
        support.available(),
        "the sandbox cannot be set up here: {}",
        support.error.as_deref().unwrap_or("unknown reason")
    );
    let workspace =
        std::env::temp_dir().join(format!("openvaala-bench-sandbox-{}", std::process::id()));
    std::fs::create_dir_all(&workspace).context("cannot create the workspace")?;
    let resident = vec![1u8; args.resident_mb * 1024 * 1024];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let timed = runtime.block_on(time_commands(&workspace, args.commands));
    std::hint::black_box(&resident);
    drop(resident);
    let _ = std::fs::remove_dir_all(&workspace);
    let (sandboxed, off) = timed?;

    let cost = median_duration(&sandboxed).saturating_sub(median_duration(&off));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | Result | Target | |\n|---|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| the sandbox's cost per shell command (median with it minus median without; {} commands each, {} MB resident, Landlock ABI {}, namespaces {}) | {:.2} ms | < {} ms | {} |",
        thousands(args.commands as u64),
        args.resident_mb,
        support.landlock_abi.unwrap_or(0),
        if support.namespaces { "on" } else { "off" },
        ms(cost),
        TARGET.as_millis(),
        verdict(cost < TARGET),
    );
    for (label, samples) in [
        ("`true` with sandbox = \"workspace_write\"", &sandboxed),
        ("`true` with sandbox = \"off\"", &off),
    ] {
        let _ = writeln!(
            out,
            "| {label}: median / p99 | {:.2} / {:.2} ms | | |",
            ms(median_duration(samples)),
            ms(percentile(samples, 0.99)),
        );
    }
    print!("{out}");
    Ok(())
}

/// Runs `true` `commands` times in each mode, alternating; returns the sandboxed times and
/// the unsandboxed ones.
async fn time_commands(
    workspace: &Path,
    commands: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let context = |mode| ToolContext {
        background: None,
        cwd: workspace.to_path_buf(),
        shell_timeout: Duration::from_secs(30),
        max_output_bytes: 64 * 1024,
        process_records: None,
        sandbox: SandboxPolicy {
            mode,
            ..SandboxPolicy::default()
        },
        mcp: None,
    };
    let sandboxed_context = context(SandboxMode::WorkspaceWrite);
    let off_context = context(SandboxMode::Off);
    let (live, _chunks) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let arguments = json!({ "command": "true" });
    let mut sandboxed = Vec::with_capacity(commands);
    let mut off = Vec::with_capacity(commands);
    for round in 0..WARM_UP + commands {
        for (ctx, samples) in [
            (&sandboxed_context, &mut sandboxed),
            (&off_context, &mut off),
        ] {
            let started = Instant::now();
            let result = run_tool("shell", &arguments, ctx, &live, &cancel).await;
            let elapsed = started.elapsed();
            ensure!(
                result.status == ToolStatus::Completed && result.exit_code == Some(0),
                "`true` failed: {}",
                result.output
            );
            if round >= WARM_UP {
                samples.push(elapsed);
            }
        }
    }
    Ok((sandboxed, off))
}
