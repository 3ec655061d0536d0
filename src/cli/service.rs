//! `openvaala serve` and `serve stop`: the service in the foreground, and stopping the one
//! that runs for a data directory (or every instance of a cluster sharing it).

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::config::Config;
use crate::runtime::RuntimeSettings;
use crate::server::{self, ServeOptions, Service};
use crate::store::Store;
use crate::store::lock::{self};

use super::args::*;

pub(crate) fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // What the config's loading logs (a skipped agent file, say) goes out as plain text; the
    // service then logs and exports as its `[log]` and `[telemetry]` say.
    let plain = tracing_subscriber::fmt()
        .with_writer(|| crate::redact::RedactingWriter(std::io::stderr()))
        .finish();
    let mut config =
        tracing::subscriber::with_default(plain, || Config::load(args.config.as_deref()))?;
    if let Err(error) = crate::telemetry::init(config.log, &config.telemetry) {
        crate::telemetry::init_plain();
        tracing::warn!("traces are not exported: {error}");
    }
    if let Some(url) = args.database_url {
        crate::config::check_database_url(&url)
            .map_err(|message| anyhow::anyhow!("--database-url {message}"))?;
        let (lease_ms, advertise_addr) = config.cluster.take().map_or(
            (crate::config::ClusterConfig::DEFAULT_LEASE_MS, None),
            |c| (c.lease_ms, c.advertise_addr),
        );
        config.cluster = Some(crate::config::ClusterConfig {
            database_url: url,
            lease_ms,
            advertise_addr,
        });
    }
    if let Some(addr) = args.advertise_addr {
        crate::config::check_advertise_addr(&addr)
            .map_err(|message| anyhow::anyhow!("--advertise-addr {message}"))?;
        let cluster = config.cluster.as_mut().ok_or_else(|| {
            anyhow::anyhow!(
                "--advertise-addr is for cluster mode: give --database-url (or a [cluster] table) too"
            )
        })?;
        cluster.advertise_addr = Some(addr);
    }
    let data_dir = args.data.resolve()?;
    let addr = match (args.addr, config.server.addr) {
        (Some(addr), _) | (None, Some(addr)) => addr,
        (None, None) => server::DEFAULT_ADDR.parse().expect("default address"),
    };
    let token = std::env::var("OPENVAALA_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let idle_unload_s = config.server.idle_unload_s;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ran = runtime.block_on(async move {
        let service = Service::start(ServeOptions {
            data_dir,
            addr,
            config,
            token,
            settings: RuntimeSettings {
                idle_unload: Duration::from_secs(idle_unload_s),
                ..RuntimeSettings::default()
            },
        })
        .await?;
        eprintln!(
            "openvaala is serving on {}://{}",
            service.scheme(),
            service.addr
        );
        // The link carries the local token: shown to a person at a terminal, never logged.
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!("sign in from a browser: {}", service.sign_in_url());
        } else {
            eprintln!("sign in from a browser with the link `openvaala token url` prints");
        }
        service.run(server::stop_signal()).await
    });
    // Off the runtime: the exporter's last batch goes out on its own thread.
    crate::telemetry::shutdown();
    ran
}

pub(crate) fn stop(data_dir: &Path) -> anyhow::Result<()> {
    if !data_dir.is_dir() {
        anyhow::bail!("{} is not a data directory", data_dir.display());
    }
    let lock_path = Store::lock_path_in(data_dir);
    let Some(owner) = lock::holder(&lock_path)? else {
        say!("no openvaala is serving {}", data_dir.display());
        return Ok(());
    };
    if owner.pid == 0 {
        // Cluster instances hold the lock together and each says who it is in its folder.
        return stop_instances(data_dir);
    }
    signal_stop(&owner)?;
    say!("stopping openvaala ({owner})…");
    if !lock::wait_until_free(&lock_path, Duration::from_secs(60)) {
        anyhow::bail!("openvaala ({owner}) did not stop within 60 s");
    }
    say!("stopped");
    Ok(())
}

/// Sends SIGTERM (a graceful stop) to a service.
pub(crate) fn signal_stop(owner: &lock::LockOwner) -> anyhow::Result<()> {
    let pid = libc::pid_t::try_from(owner.pid).context("invalid pid")?;
    // Never a process group or init: 0, 1 and negative pids mean something else to kill(2).
    if pid <= 1 {
        anyhow::bail!("refusing to signal pid {pid} ({owner})");
    }
    // SAFETY: kill(2) with a positive pid read from the data directory and a valid signal.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        anyhow::bail!(
            "cannot signal openvaala ({owner}): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Cluster mode: stops every instance serving this data directory on this machine.
pub(crate) fn stop_instances(data_dir: &Path) -> anyhow::Result<()> {
    let owners = crate::store::lock::instance_owners(data_dir);
    if owners.is_empty() {
        say!(
            "no openvaala instance of this machine is serving {}",
            data_dir.display()
        );
        return Ok(());
    }
    for owner in &owners {
        signal_stop(owner)?;
        say!("stopping openvaala ({owner})…");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while owners
        .iter()
        .any(|owner| crate::store::lock::process_runs(owner.pid))
    {
        if std::time::Instant::now() > deadline {
            anyhow::bail!("the instances did not stop within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    say!("stopped");
    Ok(())
}
