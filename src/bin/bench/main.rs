//! `openvaala-bench`: measures the release binary and prints the results beside their
//! targets. It measures and reports; it never fails because a number misses its target, since
//! machines are noisy. Each subcommand is one module; this file parses the command line and
//! dispatches to them. What they share is in `server` (running the server binary, reading its
//! memory) and `stats` (percentiles and formatting).
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
//! - `grep`: the `grep` tool over a 10,000-file tree, warm, in each output mode, and `glob`.
//! - `acp`: the latency `openvaala acp` adds per streamed chunk, and the time from
//!   `session/prompt` to the first chunk against the HTTP API's.
//! - `cache`: prompt caching over a 50-turn conversation with tool calls on each protocol,
//!   against a fake provider that caches as Anthropic and OpenAI do (`cache_provider`,
//!   `prompt_cache`): the share of input read from the cache, the input's cost with and without.
//! - `hooks`: what a no-op `pre_tool_use` HTTP hook adds to a tool call on loopback.
//! - `auth`: what checking a named token adds to a request, in process and through the service.

mod acp;
mod approvals;
mod auth;
mod background;
mod burst;
mod cache;
mod cache_provider;
mod checkpoints;
mod churn;
mod cluster;
mod decode;
mod encoder;
mod fake_provider;
mod fence;
mod fork;
mod foundation;
mod grep;
mod hooks;
mod live;
mod mcp;
mod meter;
mod prompt_cache;
mod rules;
mod sandbox;
mod seed;
mod server;
mod sse;
mod stats;
mod subagents;
mod text;
mod tokens;
mod turns;
mod turns_results;

use std::process::ExitCode;

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
    /// The `grep` tool over a tree of 10,000 files, warm: median and p90 per output mode,
    /// sandboxed and not, and `glob` beside it.
    Grep(grep::GrepArgs),
    /// Prompt caching over a long conversation with tool calls, on each protocol, against a
    /// fake provider that caches as Anthropic and OpenAI do: the share of input read from the
    /// cache, and the input's cost per turn with caching and with `prompt_cache = "off"`.
    Cache(cache::CacheArgs),
    /// Background processes printing 1 MB/s each for a minute: the service's resident memory
    /// over the run (bounded buffers, no growth) and its CPU time.
    Background(background::BackgroundArgs),
    /// What a no-op `pre_tool_use` HTTP hook (a local receiver answering `{}`) adds to a tool
    /// call: median and p90 of `read_file` calls with it and without.
    Hooks(hooks::HooksArgs),
    /// What checking a named token adds to a request: the check in process, and a request's
    /// median latency with a named token against `OPENVAALA_TOKEN`.
    Auth(auth::AuthArgs),
}

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
        Bench::Grep(args) => grep::grep(&args),
        Bench::Cache(args) => cache::cache(&args),
        Bench::Background(args) => background::background(&args),
        Bench::Hooks(args) => hooks::hooks(&args),
        Bench::Auth(args) => auth::auth(&args),
    }?;
    Ok(ExitCode::SUCCESS)
}
