//! The commands for a data directory: `token`, `gc`, `repair` and `reindex`.

use std::path::Path;

use anyhow::Context;

use crate::auth::{Scope, TokenKind, TokenStore};
use crate::config::Config;
use crate::credential::ClientKind;
use crate::server::{self};
use crate::store::Store;
use crate::store::lock::{self, LockError, RuntimeLock};

use super::args::*;

/// `openvaala token show|url|add|list|revoke`.
pub(crate) fn token(action: TokenAction, data_dir: &Path) -> anyhow::Result<()> {
    let named = || TokenStore::open(data_dir);
    match action {
        TokenAction::Add { name, scope } => {
            let scope = Scope::parse(&scope).context("the scope is `full` or `read`")?;
            let minted = named().add(&name, scope, TokenKind::Token)?;
            eprintln!(
                "token `{}` ({}, scope {}): shown this once, send it as `Authorization: Bearer <token>`",
                minted.record.name,
                minted.record.id,
                scope.name()
            );
            println!("{}", minted.token);
            return Ok(());
        }
        TokenAction::List { json } => {
            let tokens = named().list()?;
            if json {
                let infos: Vec<_> = tokens
                    .iter()
                    .map(|record| crate::api::tokens::TokenInfo::of(record, None))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&infos)?);
            } else if tokens.is_empty() {
                println!("no named tokens or signed-in devices");
            } else {
                for record in tokens {
                    let used = record.last_used_at.map_or("never used".to_owned(), |at| {
                        format!("last used {}", at.format("%Y-%m-%d %H:%M UTC"))
                    });
                    println!(
                        "{}  {:<6} {:<4}  {}  (made {}, {used})",
                        record.id,
                        record.kind.name(),
                        record.scope.name(),
                        record.name,
                        record.created_at.format("%Y-%m-%d %H:%M UTC"),
                    );
                }
            }
            return Ok(());
        }
        TokenAction::Revoke { id_or_name } => {
            let record = named().revoke(&id_or_name)?;
            println!(
                "revoked {} `{}` ({})",
                record.kind.name(),
                record.name,
                record.id
            );
            return Ok(());
        }
        TokenAction::Show | TokenAction::Url => {}
    }
    let token = crate::credential::read(data_dir)
        .with_context(|| format!("cannot read the token of {}", data_dir.display()))?
        .with_context(|| {
            format!(
                "{} has no token yet: the service makes it when it first starts",
                data_dir.display()
            )
        })?;
    match action {
        TokenAction::Show => println!("{token}"),
        TokenAction::Url => {
            let web = crate::credential::client_token(&token, ClientKind::Web);
            println!("{}/#token={web}", running_url(data_dir, Opened::Here));
        }
        _ => unreachable!("handled above"),
    }
    Ok(())
}

/// Where a printed link will be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opened {
    /// In a browser on this machine (`token url`).
    Here,
    /// On another device (`pair`).
    Elsewhere,
}

/// The base URL of the service running for `data_dir`, else of the default address.
fn running_url(data_dir: &Path, opened: Opened) -> String {
    let url = lock::holder(&Store::lock_path_in(data_dir))
        .ok()
        .flatten()
        .and_then(|owner| owner.url())
        .unwrap_or_else(|| format!("http://{}", server::DEFAULT_ADDR));
    let host_name = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    reachable(&url, opened, &host_name)
}

/// `url` with a host a browser can reach: a service listening on every interface
/// (`0.0.0.0`, `[::]`) is no address to open, so it becomes this machine's loopback for a
/// link opened here, and its host name for one opened on another device (`--url` gives
/// another when that name does not resolve there).
fn reachable(url: &str, opened: Opened, host_name: &str) -> String {
    let Some((scheme, address)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Ok(address) = address.parse::<std::net::SocketAddr>() else {
        return url.to_owned();
    };
    if !address.ip().is_unspecified() {
        return url.to_owned();
    }
    let port = address.port();
    match (opened, address.is_ipv6()) {
        (Opened::Elsewhere, _) if !host_name.is_empty() => format!("{scheme}://{host_name}:{port}"),
        (_, false) => format!("{scheme}://127.0.0.1:{port}"),
        (_, true) => format!("{scheme}://[::1]:{port}"),
    }
}

/// `openvaala pair`: a one-time sign-in link for another device, and its QR code.
pub(crate) fn pair(
    data_dir: &Path,
    scope: &str,
    url: Option<&str>,
    qr: bool,
) -> anyhow::Result<()> {
    let scope = Scope::parse(scope).context("the scope is `full` or `read`")?;
    let base = match url {
        Some(url) => {
            let url = url.trim_end_matches('/');
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                anyhow::bail!("--url is the service's base URL, starting with http:// or https://");
            }
            url.to_owned()
        }
        None => running_url(data_dir, Opened::Elsewhere),
    };
    let code = TokenStore::open(data_dir).add_pairing(scope)?;
    let link = format!("{base}/pair#code={code}");
    if qr {
        use qrcode::render::unicode::Dense1x2;
        let code =
            qrcode::QrCode::new(link.as_bytes()).context("the link is too long for a QR code")?;
        // Light modules drawn dark on a terminal's usual dark background read as a QR code.
        let picture = code
            .render::<Dense1x2>()
            .dark_color(Dense1x2::Light)
            .light_color(Dense1x2::Dark)
            .quiet_zone(true)
            .build();
        println!("{picture}");
    }
    println!("{link}");
    eprintln!(
        "open it on the device within {} minutes; it works once and signs the device in with \
         scope {} (sign it out from the web UI's devices, or `openvaala token revoke`)",
        crate::auth::tokens::PAIRING_VALID_S / 60,
        scope.name()
    );
    if base.starts_with("http://")
        && !base.contains("://127.0.0.1")
        && !base.contains("://localhost")
        && !base.contains("://[::1]")
    {
        eprintln!(
            "note: {base} is plain HTTP: the session cookie crosses the network unencrypted; \
             serve HTTPS ([server] tls_cert and tls_key) or put a reverse proxy with TLS in front"
        );
    }
    Ok(())
}

pub(crate) fn gc(data_dir: &Path) -> anyhow::Result<()> {
    let store = Store::open(data_dir)?;
    let _lock = match RuntimeLock::acquire(&store.lock_path()) {
        Ok(lock) => lock,
        Err(LockError::Held { owner }) => anyhow::bail!(
            "the service is running ({owner}); it collects the store itself once a day, or stop \
             it first with `openvaala serve stop`"
        ),
        Err(error) => return Err(error.into()),
    };
    let started = std::time::Instant::now();
    let checkpoints = crate::checkpoints::Checkpoints::open(data_dir, Default::default());
    let collected = crate::runtime::checkpoint_gc::collect(
        &store,
        &checkpoints,
        crate::runtime::checkpoint_gc::Service::Stopped,
    )?;
    say!(
        "removed {} snapshot(s) and {} stored file(s), {:.1} MB, in {:.2} s; {} working \
         director(ies) no longer exist and nothing named their snapshots",
        collected.snapshots,
        collected.blobs,
        collected.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        collected.trees,
    );
    for tree in &collected.unnamed {
        say!(
            "left whole: {} {}; its snapshots are kept (delete its folder to drop them)",
            tree.file.display(),
            tree.reason
        );
    }
    Ok(())
}

pub(crate) fn repair(data_dir: &Path, id: &str) -> anyhow::Result<()> {
    let store = Store::open(data_dir)?;
    let _lock = service_stopped(&store)?;
    if !store.exists(id) {
        anyhow::bail!("no conversation {id} in {}", data_dir.display());
    }
    let repaired = store.repair_conversation(id)?;
    if repaired.is_empty() {
        say!("nothing to repair in {id}");
        return Ok(());
    }
    for file in &repaired {
        say!(
            "{}: moved damaged line(s) {} and {} byte(s) of torn tail to {}",
            file.path.display(),
            numbers(&file.lines),
            file.torn_bytes,
            file.aside.display()
        );
    }
    // The embedded index learns of the shorter files at the next start (a cluster's
    // instances compare file lengths at every start anyway).
    crate::index::note_for_reindex(&store, &[id])?;
    Ok(())
}

pub(crate) fn numbers(lines: &[usize]) -> String {
    if lines.is_empty() {
        return "none".to_owned();
    }
    let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
    lines.join(", ")
}

pub(crate) fn reindex(
    data_dir: &Path,
    database_url: Option<String>,
    config: Option<&Path>,
) -> anyhow::Result<()> {
    let database_url = match database_url {
        Some(url) => Some(url),
        None => Config::load(config)?
            .cluster
            .map(|cluster| cluster.database_url),
    };
    if let Some(url) = &database_url {
        crate::config::check_database_url(url)
            .map_err(|message| anyhow::anyhow!("--database-url {message}"))?;
    }
    let store = Store::open(data_dir)?;
    let _lock = service_stopped(&store)?;
    let started = std::time::Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        match &database_url {
            Some(url) => crate::index::rebuild::reindex_postgres(&store, url).await,
            None => crate::index::rebuild::reindex(&store).await,
        }
    })?;
    if database_url.is_none() {
        // The index is now this binary's derivation of the files: the directory is upgraded.
        store.stamp_format()?;
    }
    let seconds = started.elapsed().as_secs_f64();
    for id in &report.finished_deletes {
        say!("finished the interrupted delete of {id}");
    }
    for path in &report.torn_files {
        say!("skipped a torn tail in {}", path.display());
    }
    for (id, path, lines) in &report.damaged_files {
        say!(
            "damaged line(s) {} in {}: {id} is listed but cannot open; run `openvaala repair {id}`",
            numbers(lines),
            path.display()
        );
    }
    if report.closed_turns > 0 {
        say!(
            "closed {} turn(s) left running as interrupted",
            report.closed_turns
        );
    }
    for (id, reason) in &report.skipped {
        say!("skipped {id}: {reason}");
    }
    say!(
        "indexed {} conversation(s), skipped {}, in {seconds:.2} s",
        report.indexed,
        report.skipped.len()
    );
    Ok(())
}

/// The data directory's lock, for a command that must run while the service is stopped.
fn service_stopped(store: &Store) -> anyhow::Result<RuntimeLock> {
    match RuntimeLock::acquire(&store.lock_path()) {
        Ok(lock) => Ok(lock),
        Err(LockError::Held { owner }) => anyhow::bail!(
            "the service is running ({owner}); stop it first with `openvaala serve stop`"
        ),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_never_names_the_address_of_every_interface() {
        let here = |url| reachable(url, Opened::Here, "box");
        let elsewhere = |url| reachable(url, Opened::Elsewhere, "box");
        assert_eq!(here("http://0.0.0.0:7341"), "http://127.0.0.1:7341");
        assert_eq!(here("https://[::]:7341"), "https://[::1]:7341");
        assert_eq!(elsewhere("http://0.0.0.0:7341"), "http://box:7341");
        assert_eq!(elsewhere("https://[::]:8443"), "https://box:8443");
        assert_eq!(
            reachable("http://0.0.0.0:7341", Opened::Elsewhere, ""),
            "http://127.0.0.1:7341"
        );
        // A chosen address stays as it is.
        assert_eq!(
            elsewhere("http://192.168.1.5:7341"),
            "http://192.168.1.5:7341"
        );
        assert_eq!(here("http://127.0.0.1:7341"), "http://127.0.0.1:7341");
    }
}
