//! Cluster mode's background loops, started with the service and joined at its stop: lease
//! renewals and the heartbeat, the repair of index updates that failed, and the list events
//! other instances notify. `stop` signals them, waits for each to finish what it was doing
//! (no loop is cut in the middle of a statement or a repair), then leaves the cluster.

use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bus::EventBus;
use crate::index::{Index, rebuild};
use crate::store::Store;

use super::{Cluster, notify};

/// The running loops of this instance; `stop` ends them.
pub struct Background {
    cluster: Cluster,
    stop: CancellationToken,
    loops: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts the loops. `leases_lost` is told the conversations whose lease is lost (their
    /// actors must stop at once), as soon as a renewal or a refused write shows it;
    /// `close_cut` is called once a lease, to close the turns a lost lease cut that nobody
    /// closed yet. The index must be the PostgreSQL one; `list_events` is the bus the other
    /// instances' events are republished on.
    pub fn start<F, Fut, G, GFut>(
        cluster: Cluster,
        store: Store,
        index: Index,
        list_events: EventBus,
        leases_lost: F,
        close_cut: G,
    ) -> Background
    where
        F: Fn(Vec<String>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
        G: Fn() -> GFut + Send + 'static,
        GFut: Future<Output = ()> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let mut loops = Vec::new();
        // Leases renewed in the background; a conversation whose lease is lost stops here, as
        // soon as a renewal or a refused write shows it.
        let (ticking, stopped) = (cluster.clone(), stop.clone());
        let mut lost_now = cluster.leases().lost_now().expect("taken once, here");
        loops.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(ticking.tick_interval());
            while !stopped.is_cancelled() {
                let lost = tokio::select! {
                    _ = stopped.cancelled() => break,
                    _ = ticks.tick() => ticking.tick().await,
                    Some(_) = lost_now.recv() => ticking.leases().expired(),
                };
                if !lost.is_empty() {
                    leases_lost(lost).await;
                }
            }
        }));
        // Index updates that failed while PostgreSQL was down are redone once it answers.
        let (repair_every, stopped) = (cluster.tick_interval(), stop.clone());
        let repair_index = index.clone();
        loops.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(repair_every);
            while !stopped.is_cancelled() {
                tokio::select! {
                    _ = stopped.cancelled() => break,
                    _ = ticks.tick() => {}
                }
                match rebuild::repair_noted(&store, &repair_index).await {
                    Ok(0) => {}
                    Ok(repaired) => tracing::info!(
                        repaired,
                        "re-indexed conversations whose index updates had failed"
                    ),
                    Err(error) => {
                        tracing::debug!(%error, "the index repair waits for the database")
                    }
                }
            }
        }));
        // Turns cut by a lost lease are closed in the files and the index within about a
        // lease, whether or not anyone asks for their conversation.
        let (sweep_every, stopped) = (cluster.leases().ttl(), stop.clone());
        loops.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(sweep_every);
            while !stopped.is_cancelled() {
                tokio::select! {
                    _ = stopped.cancelled() => break,
                    _ = ticks.tick() => close_cut().await,
                }
            }
        }));
        let pg = index.postgres().expect("a PostgreSQL index").clone();
        loops.push(tokio::spawn(notify::listen(
            cluster.pool().clone(),
            cluster.instance_id().to_owned(),
            list_events,
            pg,
            stop.clone(),
        )));
        Background {
            cluster,
            stop,
            loops,
        }
    }

    /// Stops the loops and waits for each, then leaves the cluster (every lease released, this
    /// instance's row removed). Called once the conversations have stopped and the index queue
    /// is flushed (nothing needs a lease renewed any more), and before the pool closes. The
    /// renewals stop before the leave, so that no heartbeat registers this instance again
    /// after its row is gone.
    pub async fn stop(self) {
        self.stop.cancel();
        for handle in self.loops {
            if let Err(error) = handle.await {
                tracing::warn!(%error, "a cluster loop ended abnormally");
            }
        }
        self.cluster.leave().await;
    }
}
