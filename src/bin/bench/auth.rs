//! `openvaala-bench auth`: what a named token's check adds to a request. In process, the check
//! itself (`TokenStore::check`: a `stat` of the token file, a SHA-256 and a map lookup) against
//! a store of 1, 100 and 1,000 tokens; then through a release service, the median latency of
//! `GET /api/session` over one kept-alive connection with a named token against the same
//! request with `OPENVAALA_TOKEN` (a constant-time comparison with the few derived tokens),
//! interleaved request by request so that the machine's drift falls on both alike.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use openvaala::auth::{Scope, TokenKind, TokenStore};

use super::server::{ServerProcess, http_client, openvaala, server_binary};
use super::stats::{median_duration, percentile, verdict};

#[derive(Args)]
pub struct AuthArgs {
    /// Requests timed with each token.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
}

/// What a named token's check may add to a request.
const TARGET: Duration = Duration::from_micros(50);
const WARM_UP: usize = 100;
/// Checks timed in process per store size.
const CHECKS: usize = 20_000;

pub fn auth(args: &AuthArgs) -> anyhow::Result<()> {
    if args.requests == 0 {
        bail!("--requests must be at least 1");
    }
    let mut out = String::new();
    writeln!(out, "| named token check, in process | median | p99 |")?;
    writeln!(out, "|---|---|---|")?;
    for count in [1, 100, 1000] {
        let (median, p99) = in_process(count)?;
        writeln!(
            out,
            "| store of {count} token(s) | {:.1} µs | {:.1} µs |",
            micros(median),
            micros(p99)
        )?;
    }
    let (named, env) = through_the_service(args.requests)?;
    let added = named.saturating_sub(env);
    writeln!(out)?;
    writeln!(
        out,
        "| `GET /api/session`, {} requests each | median |",
        args.requests
    )?;
    writeln!(out, "|---|---|")?;
    writeln!(out, "| with `OPENVAALA_TOKEN` | {:.1} µs |", micros(env))?;
    writeln!(out, "| with a named token | {:.1} µs |", micros(named))?;
    writeln!(
        out,
        "| added by the named token's check | {:.1} µs (target ≤ {} µs: {}) |",
        micros(added),
        TARGET.as_micros(),
        verdict(added <= TARGET)
    )?;
    print!("{out}");
    Ok(())
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Median and 99th percentile of `check` with a valid token among `count`.
fn in_process(count: usize) -> anyhow::Result<(Duration, Duration)> {
    let dir = scratch("store")?;
    let store = TokenStore::open(&dir);
    let mut last = None;
    for at in 0..count {
        last = Some(store.add(&format!("t{at}"), Scope::Full, TokenKind::Token)?);
    }
    let token = last.context("no token made")?.token;
    let mut samples = Vec::with_capacity(CHECKS);
    for round in 0..WARM_UP + CHECKS {
        let started = Instant::now();
        let found = store.check(&token);
        let took = started.elapsed();
        if found.is_none() {
            bail!("the token was not found");
        }
        if round >= WARM_UP {
            samples.push(took);
        }
    }
    std::fs::remove_dir_all(&dir)?;
    samples.sort();
    Ok((median_duration(&samples), percentile(&samples, 0.99)))
}

/// A new folder of the bench's in the system's temporary folder.
fn scratch(what: &str) -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "openvaala-bench-auth-{what}-{}",
        uuid::Uuid::now_v7().simple()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Medians of `GET /api/session` with a named token and with `OPENVAALA_TOKEN`.
fn through_the_service(requests: usize) -> anyhow::Result<(Duration, Duration)> {
    let server_path = server_binary()?;
    let dir = scratch("service")?;
    let data_dir = dir.join("data");
    std::fs::create_dir_all(&data_dir)?;
    let output = openvaala(&server_path)
        .args(["token", "add", "bench", "--data-dir"])
        .arg(&data_dir)
        .output()
        .context("cannot run openvaala token add")?;
    let named = String::from_utf8(output.stdout)?.trim().to_owned();
    if !named.starts_with("ovt_") {
        bail!("openvaala token add printed no token");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let medians = runtime.block_on(async {
        let mut server = ServerProcess::start(&server_path, &data_dir)?;
        server.wait_until_healthy().await?;
        let client = http_client()?;
        let url = format!("{}/api/session", server.base);
        let (mut with_named, mut with_env) = (Vec::new(), Vec::new());
        for round in 0..WARM_UP + requests {
            let started = Instant::now();
            let answer = client.get(&url).bearer_auth(&named).send().await?;
            answer.error_for_status()?.bytes().await?;
            let named_took = started.elapsed();
            let started = Instant::now();
            client
                .get(&url)
                .send()
                .await?
                .error_for_status()?
                .bytes()
                .await?;
            let env_took = started.elapsed();
            if round >= WARM_UP {
                with_named.push(named_took);
                with_env.push(env_took);
            }
        }
        with_named.sort();
        with_env.sort();
        Ok::<_, anyhow::Error>((median_duration(&with_named), median_duration(&with_env)))
    });
    std::fs::remove_dir_all(&dir)?;
    medians
}
