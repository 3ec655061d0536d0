//! Cluster mode over links that fail: an instance reached at an advertised address other than
//! the one it listens on (a NAT, a container's port map), and followers reading through an
//! instance whose link to the owner is reset or frozen. A forwarded stream never strands its
//! follower: it ends, and the follower reconnects with `Last-Event-ID` and misses nothing.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::cluster::{cluster_config, create};
use crate::harness::{Server, ServerOptions, TIMEOUT};
use crate::proxy::{Proxy, STREAM_END_WAIT};
use openvaala::testkit::postgres::Postgres;

/// Two instances on one database: A behind a proxy, advertised at the proxy's address (another
/// port than it listens on), and B, through which A is reached. A owns one conversation.
struct Linked {
    _postgres: Postgres,
    _dir: tempfile::TempDir,
    proxy: Proxy,
    a: Server,
    b: Server,
    id: String,
}

async fn linked() -> Linked {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let proxy = Proxy::start().await;
    let a = Server::start_with(ServerOptions {
        data_dir: Some(data.clone()),
        config: Some(format!(
            "{}advertise_addr = \"{}\"\n",
            cluster_config(&postgres),
            proxy.addr
        )),
        ..ServerOptions::default()
    })
    .await;
    proxy.forward_to(a.base.strip_prefix("http://").unwrap());
    let b = Server::start_with(ServerOptions {
        data_dir: Some(data),
        config: Some(cluster_config(&postgres)),
        ..ServerOptions::default()
    })
    .await;
    let id = create(&a, "Hello").await;
    a.wait_idle(&id).await;
    Linked {
        _postgres: postgres,
        _dir: dir,
        proxy,
        a,
        b,
        id,
    }
}

/// The events of a stream until it ends, `STREAM_END_WAIT` at most.
async fn rest_of(
    events: impl futures::Stream<Item = (String, String, Value)> + Unpin,
) -> Vec<(String, String, Value)> {
    tokio::time::timeout(STREAM_END_WAIT, events.collect())
        .await
        .expect("the forwarded stream never ended")
}

#[tokio::test]
async fn an_instance_behind_port_translation_is_reached_at_its_advertised_address() {
    // Every part is held to the end (a `..` pattern would drop the database at once).
    let linked = linked().await;
    let (b, id) = (&linked.b, &linked.id);
    // Through B: forwarded to A at its advertised address, whose Host A accepts.
    let (status, body) = b
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "Again" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    b.wait_idle(id).await;
    let items = crate::support::items(b, id).await;
    assert_eq!(items.len(), 4, "{items:?}");
}

/// Follows the conversation through B, breaks the link with `fault`, and checks that the
/// stream ends and a reconnect with `Last-Event-ID` (the link back) gets what came meanwhile.
async fn a_broken_link_ends_the_stream(fault: impl Fn(&Proxy), heal: impl Fn(&Proxy)) {
    let linked = linked().await;
    let (proxy, a, b, id) = (&linked.proxy, &linked.a, &linked.b, &linked.id);
    let path = format!("/api/conversations/{id}/events");
    let mut events = b.raw_events(&path, None).await;
    let (first_id, kind, _) = events.next().await.expect("a snapshot");
    assert_eq!(kind, "snapshot");

    fault(proxy);
    let started = std::time::Instant::now();
    let rest = rest_of(events).await;
    let took = started.elapsed();
    eprintln!("the forwarded stream ended {took:?} after the fault");
    let last = rest.last().map_or(first_id, |(id, _, _)| id.clone());

    // Meanwhile the conversation goes on at its owner.
    let (status, body) = a
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "While the link was down" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    a.wait_idle(id).await;

    heal(proxy);
    let mut resumed = b.raw_events(&path, Some(&last)).await;
    let ended = tokio::time::timeout(TIMEOUT, async {
        while let Some((_, kind, data)) = resumed.next().await {
            if kind == "turn.ended" || (kind == "snapshot" && data["running"] == json!([])) {
                return (kind, data);
            }
        }
        panic!("the resumed stream ended early");
    })
    .await
    .expect("the resumed stream brought the turn's end");
    assert!(
        ended.0 == "turn.ended" || ended.1["conversation"]["last_turn"]["status"] == "completed",
        "{ended:?}"
    );
}

#[tokio::test]
async fn a_follower_through_an_instance_whose_link_is_reset_is_never_stranded() {
    a_broken_link_ends_the_stream(Proxy::reset, |_| {}).await;
}

#[tokio::test]
async fn a_follower_through_an_instance_whose_link_freezes_is_never_stranded() {
    a_broken_link_ends_the_stream(|proxy| proxy.freeze(true), |proxy| proxy.freeze(false)).await;
}
