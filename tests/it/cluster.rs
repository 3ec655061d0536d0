//! Cluster mode over a real PostgreSQL server (started by the test): the shared index, the
//! leases that make one instance the writer of a conversation, and three instances of the
//! binary sharing one data directory.

use std::time::Duration;

use openvaala::cluster::{Claim, Leases};
use openvaala::domain::{Conversation, ConversationStatus, now};
use openvaala::index::postgres::PgIndex;
use openvaala::index::{ArchivedFilter, IndexUpdate, ListQuery};

use crate::postgres::Postgres;

fn conversation(id: &str, title: &str) -> Conversation {
    Conversation {
        id: id.to_owned(),
        title: title.to_owned(),
        title_custom: false,
        created_at: now(),
        updated_at: now(),
        archived: false,
        status: ConversationStatus::Idle,
        cwd: "/".to_owned(),
        agent: "default".to_owned(),
        model: "demo".to_owned(),
        root_session_id: "s_1".to_owned(),
        forked_from: None,
    }
}

#[tokio::test]
async fn the_postgres_index_lists_pages_and_searches_substrings_in_any_script() {
    let postgres = Postgres::start();
    let index = PgIndex::open(&postgres.url()).await.unwrap();
    let first = conversation("c_1", "Release plan");
    let second = conversation("c_2", "发布计划");
    for (conversation, text) in [
        (&first, "ship the parser on Friday"),
        (&second, "周五发布解析器"),
    ] {
        index
            .apply(&[
                IndexUpdate::Conversation {
                    conversation,
                    meta_len: 10,
                },
                IndexUpdate::Title {
                    conversation_id: &conversation.id,
                    title: &conversation.title,
                },
                IndexUpdate::SearchText {
                    conversation_id: &conversation.id,
                    seq: 1,
                    text,
                },
            ])
            .await
            .unwrap();
    }
    let search = |q: &str| ListQuery {
        archived: ArchivedFilter::Active,
        search: Some(q.to_owned()),
        limit: 50,
        cursor: None,
    };
    let ids = |page: openvaala::index::ListPage| -> Vec<String> {
        page.conversations.into_iter().map(|c| c.id).collect()
    };
    assert_eq!(ids(index.list(&search("PARSER")).await.unwrap()), ["c_1"]);
    assert_eq!(ids(index.list(&search("解析")).await.unwrap()), ["c_2"]);
    assert_eq!(
        ids(index.list(&search("plan ship")).await.unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(index.list(&search("100%")).await.unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(index.list(&search("a\0b")).await.unwrap()),
        Vec::<String>::new()
    );
    let page = index
        .list(&ListQuery {
            limit: 1,
            ..search("")
        })
        .await
        .unwrap();
    assert_eq!(page.conversations.len(), 1);
    let rest = index
        .list(&ListQuery {
            limit: 1,
            cursor: page.next_cursor,
            ..search("")
        })
        .await
        .unwrap();
    assert_eq!(rest.conversations.len(), 1);
    assert_ne!(rest.conversations[0].id, page.conversations[0].id);

    // A row never moves back in its log.
    let mut older = first.clone();
    older.title = "stale".to_owned();
    index
        .apply(&[IndexUpdate::Conversation {
            conversation: &older,
            meta_len: 5,
        }])
        .await
        .unwrap();
    assert_eq!(
        index.get("c_1").await.unwrap().unwrap().title,
        "Release plan"
    );
    index.remove_conversation("c_1").await.unwrap();
    assert!(index.get("c_1").await.unwrap().is_none());
    assert_eq!(
        ids(index.list(&search("parser")).await.unwrap()),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn one_instance_at_a_time_holds_a_lease_and_each_new_owner_has_a_larger_epoch() {
    let postgres = Postgres::start();
    let index = PgIndex::open(&postgres.url()).await.unwrap();
    let pool = index.pool().clone();
    for (id, addr) in [("i_a", "127.0.0.1:1"), ("i_b", "127.0.0.1:2")] {
        sqlx::query("INSERT INTO instances (id, addr) VALUES ($1, $2)")
            .bind(id)
            .bind(addr)
            .execute(&pool)
            .await
            .unwrap();
    }
    let ttl = Duration::from_millis(1500);
    let a = Leases::new(pool.clone(), "i_a".to_owned(), ttl);
    let b = Leases::new(pool.clone(), "i_b".to_owned(), ttl);

    // Both race for one idle conversation: exactly one wins.
    let (claim_a, claim_b) = tokio::join!(a.claim("c_1", 0), b.claim("c_1", 0));
    let (claim_a, claim_b) = (claim_a.unwrap(), claim_b.unwrap());
    let winners = [&claim_a, &claim_b]
        .iter()
        .filter(|claim| matches!(claim, Claim::Owned(_)))
        .count();
    assert_eq!(winners, 1, "{claim_a:?} {claim_b:?}");
    let (owner, other, first) = match (claim_a, claim_b) {
        (Claim::Owned(fence), Claim::HeldBy { addr, .. }) => {
            assert_eq!(addr, "127.0.0.1:1");
            (&a, &b, fence)
        }
        (Claim::HeldBy { addr, .. }, Claim::Owned(fence)) => {
            assert_eq!(addr, "127.0.0.1:2");
            (&b, &a, fence)
        }
        claims => panic!("{claims:?}"),
    };
    assert!(first.holds());
    assert_eq!(first.epoch, 1);

    // Renewed, it holds past its first deadline; released, the other takes it with epoch 2.
    assert!(owner.renew().await.unwrap().is_empty());
    owner.release("c_1").await;
    assert!(!first.holds(), "a released lease stops writes at once");
    let Claim::Owned(second) = other.claim("c_1", 0).await.unwrap() else {
        panic!("the released conversation was not taken");
    };
    assert_eq!(second.epoch, 2);

    // An owner that stops renewing loses the right to write before another can take over.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while second.holds() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fence never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let taken = loop {
        match owner.claim("c_1", 0).await.unwrap() {
            Claim::Owned(fence) => break fence,
            Claim::HeldBy { .. } => {
                assert!(!second.holds());
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the lease never expired"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(taken.epoch, 3);
    // The files' epoch wins over a table that was rebuilt.
    owner.release("c_1").await;
    let Claim::Owned(after_rebuild) = other.claim("c_1", 41).await.unwrap() else {
        panic!("not taken");
    };
    assert_eq!(after_rebuild.epoch, 42);
    // The renewal reports what the other instance took meanwhile.
    assert_eq!(owner.renew().await.unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn while_postgres_is_down_leases_cannot_be_renewed_and_stop_writes_in_time() {
    let postgres = Postgres::start();
    let index = PgIndex::open(&postgres.url()).await.unwrap();
    let pool = index.pool().clone();
    sqlx::query("INSERT INTO instances (id, addr) VALUES ('i_a', '127.0.0.1:1')")
        .execute(&pool)
        .await
        .unwrap();
    let leases = Leases::new(pool, "i_a".to_owned(), Duration::from_millis(1500));
    let Claim::Owned(fence) = leases.claim("c_1", 0).await.unwrap() else {
        panic!("not claimed");
    };
    postgres.stop();
    assert!(leases.renew().await.is_err());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while fence.holds() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fence never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(leases.expired(), ["c_1"]);
    postgres.resume();
    // The pool reconnects; the conversation can be owned again, with a new epoch.
    let claimed = loop {
        match leases.claim("c_1", 0).await {
            Ok(Claim::Owned(fence)) => break fence,
            Ok(other) => panic!("{other:?}"),
            Err(_) => {
                assert!(tokio::time::Instant::now() < deadline, "no reconnection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(claimed.epoch, 2);
}
