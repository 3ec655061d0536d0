//! `openvaala-bench`: measures the release binary and prints the results beside their
//! targets. It measures and reports; it never fails because a number misses its target, since
//! machines are noisy. Each subcommand is one module; this file holds what they share: running
//! the server binary, reading its memory, and percentiles and formatting.
//!
//! - `foundation`: reindex, start, list and search over many generated conversations.
//! - `turns`: the runtime's own overhead per turn and the fan-out of a turn to many SSE
//!   subscribers, against an in-process fake model provider; and the decoding of a provider's
//!   stream on its own (`decode`).
//! - `fork`: fork and rewind latency over a generated 10,000-item conversation.
//! - `live`: many conversations touched in a minute: live conversations at the cap, memory
//!   and open files during the load and after.
//! - `decode`: decoding a provider's stream alone, as a burst and at a provider's pace.
//! - `tokens`: estimating a 100,000-token history for the usage meter.
//! - `encoder`: the token encoder before and after the move to compact tables: the service's
//!   memory after the first turn, the time to count a 15 MB run, identical counts.
//! - `meter`: the meter's cost to the service: memory after the first turn, and
//!   `/api/health` latency while a 15 MB message is created.
//! - `cluster`: forwarding, turn overhead and failover in cluster mode.
//! - `subagents`: how fast `spawn_agent` calls become running sub-agents, and the runtime's
//!   time per sub-agent turn against a root agent's.
//! - `sandbox`: the sandbox's cost per shell command, against `sandbox = "off"`.
//! - `approvals`: the time from an approval's answer to its command starting.
//! - `mcp`: the runtime's own time per MCP call against the SDK alone, and a first call's
//!   server start against the server's own.
//! - `seed`: new conversations a second (create and exchange) with concurrent clients.
//! - `churn`: the time per turn before and after subscribers came and went.
//! - `burst`: a burst of deltas fanned out to many subscribers, before and after.
//! - `acp`: the latency `openvaala acp` adds per streamed chunk, and the time from
//!   `session/prompt` to the first chunk against the HTTP API's.

mod acp;
mod approvals;
mod burst;
mod checkpoints;
mod churn;
mod cluster;
mod decode;
mod encoder;
mod fake_provider;
mod fence;
mod fork;
mod foundation;
mod live;
mod mcp;
mod meter;
mod rules;
mod sandbox;
mod seed;
mod sse;
mod subagents;
mod text;
mod tokens;
mod turns;
mod turns_results;

use std::fs;
use std::io::Read as _;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "openvaala-bench",
    about = "Benchmarks of the openvaala release binary"
)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Reindex throughput, start time, list and search latency and memory over a large data
    /// directory.
    Foundation(foundation::FoundationArgs),
    /// The runtime's own overhead per turn, and the fan-out of one turn to many SSE subscribers
    /// with their latency and the server's memory per subscriber.
    Turns(turns::TurnsArgs),
    /// Fork and rewind latency over a conversation of 10,000 items.
    Fork(fork::ForkArgs),
    /// 10,000 conversations touched in a minute: live conversations held at the cap, memory
    /// and open files at the peak and after, against the targets in `live.rs`.
    Live(live::LiveArgs),
    /// Decoding a provider's stream on its own: a burst, and chunks at a provider's pace.
    Decode(decode::DecodeArgs),
    /// What counting tokens for the usage meter costs: estimating a 100,000-token history.
    Tokens(tokens::TokensArgs),
    /// The token encoder before and after: resident memory after the first turn (with
    /// `--before BINARY`), the time to count long runs, and identical counts.
    Encoder(encoder::EncoderArgs),
    /// What the usage meter costs the service: resident memory after the first turn, and
    /// `/api/health` latency while a 15 MB message is created.
    Meter(meter::MeterArgs),
    /// The time from a root agent's `spawn_agent` calls to its sub-agents' first model
    /// requests, and the overhead per sub-agent turn against a root turn's.
    Subagents(subagents::SubagentsArgs),
    /// Cluster mode against a PostgreSQL server it starts: a forwarded request against a direct
    /// one, the turn overhead against an embedded service, and the takeover after kill -9.
    Cluster(cluster::ClusterArgs),
    /// The sandbox's cost per shell command: many `true` commands through the shell tool with
    /// `sandbox = "workspace_write"` and with `sandbox = "off"`.
    Sandbox(sandbox::SandboxArgs),
    /// The time from an approval's `POST /api/approvals/{id}` to the approved command
    /// starting, sandboxed and not.
    Approvals(approvals::ApprovalsArgs),
    /// The time the permissions take to judge a shell command (parsing, wrappers, programs
    /// that run others, configured and remembered rules), per ordinary command and for scale.
    Rules(rules::RulesArgs),
    /// The runtime's own time per MCP call (stdio, a trivial tool) against the same call with
    /// the SDK alone, and a first call's server start against the server's own.
    Mcp(mcp::McpArgs),
    /// The latency `openvaala acp` adds per streamed chunk (median, p99), and the time from
    /// `session/prompt` to the first chunk against the same through the HTTP API.
    Acp(acp::AcpArgs),
    /// Checkpoints: the snapshot after a tool call that changed one file of a 10,000-file,
    /// 200 MB tree, and a restore of 100 changed files.
    Checkpoints(checkpoints::CheckpointsArgs),
    /// New conversations a second (a create and its exchange) with 8 clients, and the fsyncs
    /// each costs, against an older binary with `--before`.
    Seed(seed::SeedArgs),
    /// The runtime's time per turn before and after SSE subscribers opened and closed a
    /// conversation's stream, against an older binary with `--before`.
    Churn(churn::ChurnArgs),
    /// A burst of deltas fanned out to many SSE subscribers: delivery latency, against an
    /// older binary with `--before`.
    Burst(burst::BurstArgs),
}

/// The health check is polled this often while the server starts.
const HEALTH_POLL: Duration = Duration::from_millis(2);
const START_TIMEOUT: Duration = Duration::from_secs(120);

fn main() -> anyhow::Result<ExitCode> {
    // The shell tool's sandboxed commands start through this binary, as through the service's.
    if let Some(code) = openvaala::sandbox::launcher_main() {
        return Ok(code);
    }
    let cli = Cli::parse();
    match cli.bench {
        Bench::Foundation(args) => foundation::foundation(&args),
        Bench::Turns(args) => turns::turns(&args),
        Bench::Fork(args) => fork::fork(&args),
        Bench::Live(args) => live::live(&args),
        Bench::Decode(args) => decode::decode(&args),
        Bench::Tokens(args) => tokens::tokens(&args),
        Bench::Encoder(args) => encoder::encoder(&args),
        Bench::Meter(args) => meter::meter(&args),
        Bench::Subagents(args) => subagents::subagents(&args),
        Bench::Cluster(args) => cluster::cluster(&args),
        Bench::Sandbox(args) => sandbox::sandbox(&args),
        Bench::Approvals(args) => approvals::approvals(&args),
        Bench::Rules(args) => rules::rules(&args),
        Bench::Mcp(args) => mcp::mcp(&args),
        Bench::Acp(args) => acp::acp(&args),
        Bench::Checkpoints(args) => checkpoints::checkpoints(&args),
        Bench::Seed(args) => seed::seed(&args),
        Bench::Churn(args) => churn::churn(&args),
        Bench::Burst(args) => burst::burst(&args),
    }?;
    Ok(ExitCode::SUCCESS)
}

fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .default_headers(authorized())
        .build()?)
}

/// The token the servers this bench starts accept (`OPENVAALA_TOKEN`, one per bench run):
/// the service wants one on loopback too.
fn bench_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| format!("bench-{}", uuid::Uuid::now_v7().simple()))
}

/// The headers every request of the bench carries: its token.
fn authorized() -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {}", bench_token());
    headers.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_str(&value).expect("the token is ASCII"),
    );
    headers
}

// ---------------------------------------------------------------------------------------------
// The server and reindex processes.

/// The `openvaala` binary built beside this one (`target/release/openvaala`).
fn server_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let server = exe.with_file_name("openvaala");
    if !server.is_file() {
        bail!(
            "{} not found: build it with `cargo build --release --bin openvaala --bin openvaala-bench`",
            server.display()
        );
    }
    if server.components().any(|c| c.as_os_str() == "debug") {
        eprintln!("warning: {} is a debug build", server.display());
    }
    Ok(server)
}

/// A command running the server binary with nothing from the user's setup: no config file
/// (so the built-in config), the bench's own token, logs at `warn`.
fn openvaala(server: &Path) -> Command {
    let mut command = Command::new(server);
    for name in [
        "HOME",
        "OPENVAALA_CONFIG",
        "OPENVAALA_HOME",
        "XDG_DATA_HOME",
    ] {
        command.env_remove(name);
    }
    command
        .env("OPENVAALA_TOKEN", bench_token())
        .env("OPENVAALA_LOG", "warn")
        .stdin(Stdio::null());
    command
}

/// Runs `openvaala reindex` and returns how many conversations it indexed and its wall-clock
/// time (process start to exit, so it includes opening and migrating the new database).
fn reindex(server: &Path, data_dir: &Path) -> anyhow::Result<(usize, Duration)> {
    let started = Instant::now();
    let output = openvaala(server)
        .arg("reindex")
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .context("cannot run openvaala reindex")?;
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "openvaala reindex failed ({}): {stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // The last line reads "indexed N conversation(s), skipped M, in S s".
    let indexed = stdout
        .lines()
        .find_map(|line| line.strip_prefix("indexed "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse().ok())
        .with_context(|| format!("unexpected reindex output: {stdout}"))?;
    Ok((indexed, elapsed))
}

/// A running `openvaala serve`. Dropping it kills the process if it was not stopped, so an
/// error in the middle of a measurement leaves no server behind.
struct ServerProcess {
    server: PathBuf,
    data_dir: PathBuf,
    child: Child,
    base: String,
    spawned: Instant,
    log: PathBuf,
}

impl ServerProcess {
    /// Starts `openvaala serve` with the built-in config.
    fn start(server: &Path, data_dir: &Path) -> anyhow::Result<ServerProcess> {
        ServerProcess::spawn(server, data_dir, None)
    }

    /// Starts `openvaala serve --config FILE`.
    fn start_with_config(
        server: &Path,
        data_dir: &Path,
        config: &Path,
    ) -> anyhow::Result<ServerProcess> {
        ServerProcess::spawn(server, data_dir, Some(config))
    }

    fn spawn(
        server: &Path,
        data_dir: &Path,
        config: Option<&Path>,
    ) -> anyhow::Result<ServerProcess> {
        let port = free_port()?;
        let log = data_dir.join("bench-serve.log");
        let log_file = fs::File::create(&log)?;
        let mut command = openvaala(server);
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--addr")
            .arg(format!("127.0.0.1:{port}"));
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let spawned = Instant::now();
        let child = command
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .context("cannot run openvaala serve")?;
        Ok(ServerProcess {
            server: server.to_owned(),
            data_dir: data_dir.to_owned(),
            child,
            base: format!("http://127.0.0.1:{port}"),
            spawned,
            log,
        })
    }

    /// Polls `GET /api/health` until it answers 200 and returns the time since the spawn.
    async fn wait_until_healthy(&mut self) -> anyhow::Result<Duration> {
        let client = http_client()?;
        let url = format!("{}/api/health", self.base);
        loop {
            let answer = client
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await;
            if answer.is_ok_and(|response| response.status() == reqwest::StatusCode::OK) {
                return Ok(self.spawned.elapsed());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "openvaala serve exited ({status}) before answering:\n{}",
                    fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            if self.spawned.elapsed() > START_TIMEOUT {
                bail!("openvaala serve did not answer /api/health within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(HEALTH_POLL).await;
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn rss_kb(&self) -> anyhow::Result<u64> {
        proc_status_kb(self.child.id(), "VmRSS")
    }

    fn peak_rss_kb(&self) -> anyhow::Result<u64> {
        proc_status_kb(self.child.id(), "VmHWM")
    }

    /// SIGKILL, as a crash would (the process is reaped).
    fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `openvaala serve stop`, then waits for the process to exit; returns the time taken.
    fn stop(mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let status = openvaala(&self.server)
            .args(["serve", "stop", "--data-dir"])
            .arg(&self.data_dir)
            .stdout(Stdio::null())
            .status()
            .context("cannot run openvaala serve stop")?;
        if !status.success() {
            bail!("openvaala serve stop failed ({status})");
        }
        let exit = self.child.wait()?;
        if !exit.success() {
            eprintln!(
                "warning: openvaala serve exited with {exit}:\n{}",
                fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        Ok(started.elapsed())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = fs::remove_file(&self.log);
    }
}

/// A port nobody listens on right now: bound, read, released.
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Raises this process's soft limit of open files to at least `wanted` (within the hard
/// limit) and returns the limit now in force. Children inherit it, so a server started
/// afterwards can accept as many connections as the bench opens.
fn raise_open_file_limit(wanted: u64) -> anyhow::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        bail!(
            "cannot read the open-file limit: {}",
            std::io::Error::last_os_error()
        );
    }
    if limit.rlim_cur >= wanted {
        return Ok(limit.rlim_cur);
    }
    limit.rlim_cur = wanted.min(limit.rlim_max);
    // SAFETY: setrlimit(2) reads the struct we own; a soft limit within the hard one is allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        bail!(
            "cannot raise the open-file limit to {}: {}",
            limit.rlim_cur,
            std::io::Error::last_os_error()
        );
    }
    Ok(limit.rlim_cur)
}

/// The CPU time (user + system) a process has used so far, from `/proc/<pid>/stat`.
fn proc_cpu(pid: u32) -> anyhow::Result<Duration> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name in parentheses may hold spaces; the fields after it are plain. utime
    // and stime are fields 14 and 15, i.e. the 12th and 13th after the name.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .with_context(|| format!("unexpected /proc/{pid}/stat"))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = match (fields.get(11), fields.get(12)) {
        (Some(user), Some(system)) => user.parse::<u64>()? + system.parse::<u64>()?,
        _ => bail!("unexpected /proc/{pid}/stat"),
    };
    // SAFETY: sysconf(3) only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// Waits until a process has written nothing (`wchar` of `/proc/<pid>/io`, which counts writes
/// into the page cache too) for `quiet`, polling every 10 ms, or until `timeout`. Returns whether
/// it became quiet. Background work after an answer (an index job, a WAL checkpoint) shows up
/// as writes.
async fn wait_until_quiet(pid: u32, quiet: Duration, timeout: Duration) -> anyhow::Result<bool> {
    const POLL: Duration = Duration::from_millis(10);
    let written = || -> anyhow::Result<u64> {
        let io = fs::read_to_string(format!("/proc/{pid}/io"))?;
        io.lines()
            .find_map(|line| line.strip_prefix("wchar:"))
            .and_then(|value| value.trim().parse().ok())
            .with_context(|| format!("no wchar in /proc/{pid}/io"))
    };
    let started = Instant::now();
    let mut last = written()?;
    let mut unchanged_since = Instant::now();
    while started.elapsed() < timeout {
        tokio::time::sleep(POLL).await;
        let now = written()?;
        if now != last {
            last = now;
            unchanged_since = Instant::now();
        } else if unchanged_since.elapsed() >= quiet {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
fn proc_status_kb(pid: u32, field: &str) -> anyhow::Result<u64> {
    let mut status = String::new();
    fs::File::open(format!("/proc/{pid}/status"))?.read_to_string(&mut status)?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**not met**" }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The nearest-rank percentile of unsorted samples (`fraction` in 0..=1).
fn percentile(samples: &[Duration], fraction: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn median_duration(samples: &[Duration]) -> Duration {
    Duration::from_secs_f64(median(
        &samples
            .iter()
            .map(Duration::as_secs_f64)
            .collect::<Vec<_>>(),
    ))
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

fn plural(count: usize, noun: &str) -> String {
    let count_text = thousands(count as u64);
    if count == 1 {
        format!("{count_text} {noun}")
    } else {
        format!("{count_text} {noun}s")
    }
}

fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<_> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 0.50), Duration::from_millis(50));
        assert_eq!(percentile(&samples, 0.99), Duration::from_millis(99));
        assert_eq!(median(&[3.0, 1.0, 2.0, 4.0]), 2.5);
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
