//! The commands for a data directory: `token`, `gc`, `repair` and `reindex`.

use std::path::Path;

use anyhow::Context;

use crate::config::Config;
use crate::credential::ClientKind;
use crate::server::{self};
use crate::store::Store;
use crate::store::lock::{self, LockError, RuntimeLock};

use super::args::*;

/// `openvaala token show|url`.
pub(crate) fn token(action: TokenAction, data_dir: &Path) -> anyhow::Result<()> {
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
            let addr = lock::holder(&Store::lock_path_in(data_dir))
                .ok()
                .flatten()
                .and_then(|owner| owner.addr)
                .unwrap_or_else(|| server::DEFAULT_ADDR.to_owned());
            let web = crate::credential::client_token(&token, ClientKind::Web);
            println!("http://{addr}/#token={web}");
        }
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
    println!(
        "removed {} snapshot(s) and {} stored file(s), {:.1} MB, in {:.2} s; {} working \
         director(ies) no longer exist and nothing named their snapshots",
        collected.snapshots,
        collected.blobs,
        collected.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        collected.trees,
    );
    for tree in &collected.unnamed {
        println!(
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
        println!("nothing to repair in {id}");
        return Ok(());
    }
    for file in &repaired {
        println!(
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
        println!("finished the interrupted delete of {id}");
    }
    for path in &report.torn_files {
        println!("skipped a torn tail in {}", path.display());
    }
    for (id, path, lines) in &report.damaged_files {
        println!(
            "damaged line(s) {} in {}: {id} is listed but cannot open; run `openvaala repair {id}`",
            numbers(lines),
            path.display()
        );
    }
    if report.closed_turns > 0 {
        println!(
            "closed {} turn(s) left running as interrupted",
            report.closed_turns
        );
    }
    for (id, reason) in &report.skipped {
        println!("skipped {id}: {reason}");
    }
    println!(
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
