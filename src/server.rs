//! Start-up and shutdown of `openvaala serve`: take the data directory's lock, open the store
//! and the index, repair what a crash left (reconcile, close running turns), serve HTTP until
//! told to stop, then stop every turn cleanly and mark the shutdown clean.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::credential::ClientKind;
use crate::http::security::KnownToken;
use crate::http::serve::ConnectionLimits;
use crate::index::rebuild;
use crate::index::{CLEAN_SHUTDOWN, Index};
use crate::runtime::{Runtime, RuntimeSettings};
use crate::store::Store;
use crate::store::lock::{LockOwner, RuntimeLock};
use crate::tools::group_records;

pub const DEFAULT_ADDR: &str = "127.0.0.1:7341";

pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub addr: SocketAddr,
    pub config: Config,
    /// Required when `addr` is not loopback.
    pub token: Option<String>,
    pub settings: RuntimeSettings,
}

/// A started service: the lock is held, the index is current, the listener is bound.
pub struct Service {
    pub addr: SocketAddr,
    runtime: Runtime,
    listener: TcpListener,
    lock: RuntimeLock,
    /// The tokens the API accepts, each with the kind of client that holds it: the local
    /// credential and those derived from it, and `OPENVAALA_TOKEN` if set.
    tokens: Vec<KnownToken>,
    /// The local credential, for the sign-in link.
    local_token: String,
    connection_limits: ConnectionLimits,
    /// HTTPS, when a certificate is configured.
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Cluster mode: the loops to stop at shutdown (and then leave the cluster).
    background: Option<crate::cluster::Background>,
}

impl Service {
    pub async fn start(options: ServeOptions) -> anyhow::Result<Service> {
        if !options.addr.ip().is_loopback() {
            let Some(token) = &options.token else {
                bail!(
                    "serving on {} (not loopback) needs a token: set OPENVAALA_TOKEN; clients then send `Authorization: Bearer <token>`",
                    options.addr
                );
            };
            if let Some(weakness) = crate::http::security::weak_token(token) {
                bail!(
                    "serving on {} (not loopback) needs a strong token: {weakness}",
                    options.addr
                );
            }
        }
        // Every live conversation and connection holds files: take all the system allows,
        // then size the caps to fit.
        let open_files = crate::limits::raise_open_file_limit();
        let caps = crate::limits::caps(open_files, &options.config.server);
        tracing::info!(
            open_files,
            max_live_conversations = caps.max_live_conversations,
            max_connections = caps.max_connections,
            "limits"
        );
        let store = Store::open(&options.data_dir).with_context(|| {
            format!("cannot open data directory {}", options.data_dir.display())
        })?;
        // What the sandbox can do here, found out once (the log says which layers hold).
        let _ = crate::sandbox::support();
        if let Some(cluster) = options.config.cluster.clone() {
            return Service::start_in_cluster(options, store, cluster, caps).await;
        }
        let mut lock = RuntimeLock::acquire(&store.lock_path())?;
        let (tokens, local_token) = api_tokens(&store, options.token.clone())?;
        // Under the lock and before anything runs: every shell command recorded now was left
        // running by a run that died, and dies with it (each kill is logged).
        let process_records = group_records::take_over(store.root())
            .context("cannot clean up the shell commands a previous run left")?;
        let upgrading = store.format_is_older()?;
        if upgrading {
            // Its index was derived by an older binary (rows without fields added since, or
            // derived by rules changed since): built again from the files before anything
            // reads it, as `openvaala reindex` does.
            let report = rebuild::reindex(&store)
                .await
                .context("cannot rebuild the index of a data directory an older openvaala wrote")?;
            tracing::info!(
                indexed = report.indexed,
                closed_turns = report.closed_turns,
                skipped = report.skipped.len(),
                "rebuilt the index of a data directory an older openvaala wrote"
            );
        }
        let index = Index::open(&store.index_path())
            .await
            .context("cannot open metadata.db")?;
        recover(&store, &index).await?;
        // Raised once the upgrade is whole: a crash before this upgrades it again.
        store.stamp_format()?;
        index.set_runtime_state(CLEAN_SHUTDOWN, "0").await?;

        let listener = TcpListener::bind(options.addr)
            .await
            .with_context(|| format!("cannot listen on {}", options.addr))?;
        let addr = listener.local_addr()?;
        lock.write_owner(&LockOwner {
            pid: std::process::id(),
            addr: Some(addr.to_string()),
            tls: options.config.server.tls.is_some(),
        })?;
        // Under the lock, the one writer of the outbox: what the last run left resumes.
        let outbox = open_outbox(&crate::hooks::outbox::outbox_path(store.root(), None))?;
        let settings = RuntimeSettings {
            process_records: Some(process_records),
            max_live_conversations: caps.max_live_conversations,
            outbox: Some(outbox),
            ..options.settings
        };
        let connection_limits = connection_limits(&caps, &options.config);
        let tls = tls_acceptor(&options.config)?;
        let runtime = Runtime::new(store, index, Arc::new(options.config), settings);
        read_rules(&runtime)?;
        Ok(Service {
            addr,
            runtime,
            listener,
            lock,
            tokens,
            local_token,
            connection_limits,
            tls,
            background: None,
        })
    }

    /// Cluster mode: several instances share the data directory (a shared lock, so an
    /// embedded service or a `reindex` stays out) and one PostgreSQL database (the index and
    /// the leases). Nothing here writes a conversation's files: an instance writes only those
    /// it takes, under their lease.
    async fn start_in_cluster(
        options: ServeOptions,
        store: Store,
        cluster_config: crate::config::ClusterConfig,
        caps: crate::limits::Caps,
    ) -> anyhow::Result<Service> {
        if options.addr.ip().is_unspecified() && cluster_config.advertise_addr.is_none() {
            bail!(
                "in cluster mode other instances reach this one at the address it listens on, \
                 and {} names no machine: give the address they can reach with \
                 --advertise-addr (or cluster.advertise_addr), or listen on it (--addr)",
                options.addr
            );
        }
        let lock = RuntimeLock::acquire_shared(&store.lock_path())?;
        let (tokens, local_token) = api_tokens(&store, options.token.clone())?;
        let index = Index::open_postgres(
            &cluster_config.database_url,
            &store.root().join(crate::index::POSTGRES_REPAIRS),
        )
        .await
        .context("cannot open the cluster's PostgreSQL database")?;
        let pool = index.postgres().expect("a PostgreSQL index").pool().clone();
        let listener = TcpListener::bind(options.addr)
            .await
            .with_context(|| format!("cannot listen on {}", options.addr))?;
        let addr = listener.local_addr()?;
        let advertised = cluster_config
            .advertise_addr
            .clone()
            .unwrap_or_else(|| addr.to_string());
        let cluster =
            crate::cluster::Cluster::join(pool, advertised.clone(), cluster_config.lease())
                .await
                .context("cannot join the cluster")?;
        // Each instance has an outbox of its own; a stopped instance's pending deliveries are
        // taken over by the next one to start.
        let outbox = open_outbox(&crate::hooks::outbox::outbox_path(
            store.root(),
            Some(cluster.instance_id()),
        ))?;
        let process_records = take_over_dead_instances(&store, &cluster, &outbox).await?;
        // Who this instance is, for `serve stop` (the shared lock cannot say it for several).
        let owner = LockOwner {
            pid: std::process::id(),
            addr: Some(addr.to_string()),
            tls: options.config.server.tls.is_some(),
        };
        std::fs::write(
            crate::store::lock::instance_owner_path(store.root(), cluster.instance_id()),
            serde_json::to_string(&owner)?,
        )
        .context("cannot record this instance in the data directory")?;
        let report = rebuild::catch_up(&store, &index).await?;
        if report.indexed > 0 {
            tracing::info!(
                reindexed = report.indexed,
                "the shared index caught up with the files"
            );
        }
        tracing::info!(
            instance = cluster.instance_id(),
            %addr,
            %advertised,
            "joined the cluster"
        );
        let settings = RuntimeSettings {
            process_records: Some(process_records),
            max_live_conversations: caps.max_live_conversations,
            cluster: Some(cluster.clone()),
            outbox: Some(outbox),
            ..options.settings
        };
        let connection_limits = connection_limits(&caps, &options.config);
        let tls = tls_acceptor(&options.config)?;
        let store_for_repairs = store.clone();
        let runtime = Runtime::new(store, index.clone(), Arc::new(options.config), settings);
        read_rules(&runtime)?;
        let (ticking, sweeping) = (runtime.clone(), runtime.clone());
        let background = crate::cluster::Background::start(
            cluster,
            store_for_repairs,
            index,
            runtime.list_events().clone(),
            move |lost| {
                let ticking = ticking.clone();
                async move { ticking.leases_lost(&lost).await }
            },
            move || {
                let sweeping = sweeping.clone();
                async move { sweeping.close_cut_turns().await }
            },
        );
        Ok(Service {
            addr,
            runtime,
            listener,
            lock,
            tokens,
            local_token,
            connection_limits,
            tls,
            background: Some(background),
        })
    }

    /// `https` when serving over TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The link that signs a browser in: the UI keeps the token from the URL's fragment (which
    /// no request carries) and forgets the fragment.
    pub fn sign_in_url(&self) -> String {
        let token = crate::credential::client_token(&self.local_token, ClientKind::Web);
        format!("{}://{}/#token={token}", self.scheme(), self.addr)
    }

    /// Serves until `shutdown` completes, then stops turns (as `interrupted`), ends event
    /// streams, waits for requests in flight and marks the index as cleanly closed.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Service {
            addr,
            runtime,
            listener,
            lock,
            tokens,
            connection_limits,
            tls,
            background,
            ..
        } = self;
        let streams_done = CancellationToken::new();
        let named = crate::auth::TokenStore::open(runtime.data_dir());
        let saving = save_token_uses(named.clone());
        let push = start_push(&runtime, &named);
        let app = crate::http::router(
            runtime.clone(),
            addr,
            tokens,
            named.clone(),
            push,
            streams_done.clone(),
        );
        let stopping = runtime.clone();
        let stopped = async move {
            shutdown.await;
            tracing::info!("stopping: interrupting running turns");
            stopping.shutdown().await;
            // Cluster mode: the loops stop once no conversation needs its lease renewed, then
            // the instance leaves the cluster; all before the pool closes below.
            if let Some(background) = background {
                background.stop().await;
            }
            streams_done.cancel();
        };
        tracing::info!(%addr, "openvaala is serving");
        crate::http::serve::serve(listener, app, connection_limits, tls, stopped).await;
        saving.abort();
        if let Err(error) = named.save_last_uses() {
            tracing::warn!(%error, "cannot write down the tokens' last uses");
        }
        if let Some(cluster) = runtime.cluster() {
            // Each instance's stop is its own; the shared index is caught up at every start.
            let folder =
                crate::store::lock::instance_owner_path(runtime.data_dir(), cluster.instance_id());
            if let Some(folder) = folder.parent() {
                let _ = std::fs::remove_dir_all(folder);
            }
            runtime.index().close().await;
            drop(lock);
            tracing::info!("stopped");
            return Ok(());
        }
        if !runtime.index().mark_clean_shutdown().await? {
            tracing::warn!("the index missed updates; the next start will reconcile it");
        }
        runtime.index().close().await;
        drop(lock);
        tracing::info!("stopped");
        Ok(())
    }
}

/// The tokens the API accepts besides the named ones: the data directory's local credential
/// (made on first start) and the configured one (`env`), each with the tokens derived from it
/// for each kind of client. All are secrets: nothing stored or sent shows them. Returns them,
/// and the local one.
fn api_tokens(
    store: &Store,
    configured: Option<String>,
) -> anyhow::Result<(Vec<KnownToken>, String)> {
    let local = crate::credential::load_or_create(store.root())
        .context("cannot make the local API token")?;
    let tokens: Vec<KnownToken> = std::iter::once((local.clone(), "local"))
        .chain(configured.map(|token| (token, "env")))
        .flat_map(|(base, name)| {
            ClientKind::ALL.map(|kind| KnownToken {
                token: crate::credential::client_token(&base, kind),
                kind,
                base: name,
            })
        })
        .collect();
    crate::redact::register_secrets(tokens.iter().map(|known| known.token.clone()));
    Ok((tokens, local))
}

/// Repairs what an unclean stop left: interrupted deletes and half-built conversations are
/// finished, and when the last run did not end cleanly the index is reconciled with the files
/// (which also closes turns left running).
async fn recover(store: &Store, index: &Index) -> anyhow::Result<()> {
    // Only "1" (written by a clean stop or a reindex) skips the reconcile; a missing value
    // means a new or replaced metadata.db that may not know the directories.
    let clean = index.was_clean_shutdown().await?;
    if clean {
        for id in store.finish_interrupted_work()? {
            index.remove_conversation(&id).await?;
        }
        return Ok(());
    }
    let report = rebuild::reconcile(store, index).await?;
    if report.indexed > 0 || !report.skipped.is_empty() || report.closed_turns > 0 {
        tracing::warn!(
            reindexed = report.indexed,
            closed_turns = report.closed_turns,
            skipped = report.skipped.len(),
            "recovered from an unclean stop"
        );
    }
    for (id, reason) in &report.skipped {
        tracing::warn!(conversation = %id, %reason, "skipped a conversation that cannot be read");
    }
    for path in &report.torn_files {
        tracing::warn!(path = %path.display(), "skipped a torn tail");
    }
    for (id, path, lines) in &report.damaged_files {
        tracing::warn!(conversation = %id, path = %path.display(), ?lines, "damaged lines: listed, but it cannot open until `openvaala repair` moves them aside");
    }
    Ok(())
}

/// The notification webhooks' outbox in the file at `path`, read back.
fn open_outbox(path: &std::path::Path) -> anyhow::Result<Arc<crate::hooks::Outbox>> {
    let outbox = crate::hooks::Outbox::open(path).map_err(anyhow::Error::msg)?;
    Ok(Arc::new(outbox))
}

/// Cluster mode: this instance records its shell commands in a folder of its own, and kills
/// those that instances which died on this machine left running (an instance that is still
/// seen in the database is alive: its folder is left alone). The pending webhook deliveries of
/// instances not alive (dead, or stopped) move into this one's `outbox`.
async fn take_over_dead_instances(
    store: &Store,
    cluster: &crate::cluster::Cluster,
    outbox: &crate::hooks::Outbox,
) -> anyhow::Result<group_records::GroupRecords> {
    let instances = store.root().join("instances");
    let live = cluster
        .seen_within(cluster.leases().ttl() * 3)
        .await
        .context("cannot read the instances table")?;
    if let Ok(entries) = std::fs::read_dir(&instances) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == cluster.instance_id() || live.contains(&name) {
                continue;
            }
            group_records::take_over(&entry.path())
                .context("cannot clean up the shell commands a dead instance left")?;
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    for (instance, path) in crate::hooks::outbox::instance_outboxes(store.root()) {
        if instance == cluster.instance_id() || live.contains(&instance) {
            continue;
        }
        let adopted = outbox
            .adopt(&path)
            .context("cannot take over the webhook deliveries a stopped instance left")?;
        if adopted > 0 {
            tracing::info!(%instance, adopted, "took over a stopped instance's webhook deliveries");
        }
    }
    let own = instances.join(cluster.instance_id());
    std::fs::create_dir_all(&own).with_context(|| format!("cannot create {}", own.display()))?;
    Ok(group_records::take_over(&own)?)
}

/// Push notifications: the VAPID key (made at the first start), the subscriptions, and the
/// task that sends what this instance's events call for. Without a key (an unwritable data
/// directory) the service runs without pushes, and says so.
fn start_push(
    runtime: &Runtime,
    named: &crate::auth::TokenStore,
) -> Option<crate::push::store::PushState> {
    let key = match crate::push::VapidKey::load_or_create(runtime.data_dir()) {
        Ok(key) => std::sync::Arc::new(key),
        Err(error) => {
            tracing::error!(%error, "push notifications are off: the VAPID key cannot be made");
            return None;
        }
    };
    let subscriptions = crate::push::store::SubscriptionStore::open(runtime.data_dir());
    if let Some(events) = runtime.watch_list_events() {
        tokio::spawn(crate::push::dispatch::run(
            events,
            key.clone(),
            subscriptions.clone(),
            named.clone(),
        ));
    }
    Some(crate::push::store::PushState { key, subscriptions })
}

/// Writes down the named tokens' last uses once a minute, off the request path.
fn save_token_uses(named: crate::auth::TokenStore) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let named = named.clone();
            let saved = tokio::task::spawn_blocking(move || named.save_last_uses()).await;
            if let Ok(Err(error)) = saved {
                tracing::warn!(%error, "cannot write down the tokens' last uses");
            }
        }
    })
}

/// The HTTPS acceptor of `[server] tls_cert` / `tls_key`, if set: a certificate that cannot
/// be used now stops the start.
fn tls_acceptor(config: &Config) -> anyhow::Result<Option<tokio_rustls::TlsAcceptor>> {
    config
        .server
        .tls
        .as_ref()
        .map(|files| crate::tls::server::acceptor(files).context("cannot serve HTTPS"))
        .transpose()
}

fn connection_limits(caps: &crate::limits::Caps, config: &Config) -> ConnectionLimits {
    ConnectionLimits {
        max_connections: caps.max_connections,
        header_read_timeout: std::time::Duration::from_secs(config.server.header_read_timeout_s),
        body_pace: crate::http::slow_body::BodyPace {
            total: std::time::Duration::from_secs(config.server.body_timeout_s),
            min_bytes_per_s: config.server.body_min_bytes_per_s,
            grace: std::time::Duration::from_secs(config.server.header_read_timeout_s),
            pause: std::time::Duration::from_secs(config.server.header_read_timeout_s),
        },
    }
}

/// Completes when the process gets SIGTERM (what `serve stop` sends) or SIGINT (Ctrl-C).
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
}

/// Reads the remembered rules once at start-up, so that a damaged `rules.jsonl` stops the
/// service with its reason instead of making every tool call ask.
fn read_rules(runtime: &Runtime) -> anyhow::Result<()> {
    let rules = runtime
        .prepare_rules()
        .map_err(|error| anyhow::anyhow!("cannot read the remembered rules: {error}"))?;
    tracing::debug!(count = rules.len(), "remembered rules");
    Ok(())
}
