//! Cluster mode under faults that come together: the shared data directory's disk filling
//! up, PostgreSQL frozen past the lease or restarted, instances killed, all under a load of
//! creates, messages, renames, forks and deletes. Nothing answers 500, nothing acknowledged
//! is lost, and the shared index agrees with the files (what a fresh `reindex
//! --database-url` of them writes).

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::{
    LEASE_MS, assert_index_matches_files, create, start_cluster_in, start_instance_at,
    start_slow_turn,
};
use crate::harness::{Server, TIMEOUT};
use openvaala::testkit::postgres::Postgres;

/// A small tmpfs mounted for one test, unmounted when dropped.
struct SmallDisk {
    mount_point: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` where this process may not mount (not root): the caller says the test did not run.
    fn mount(megabytes: u32) -> Option<SmallDisk> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let mount_point = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m")])
            .arg("tmpfs")
            .arg(mount_point.path())
            .status()
            .expect("mount runs");
        assert!(status.success(), "root could not mount a tmpfs");
        Some(SmallDisk { mount_point })
    }

    fn path(&self) -> &Path {
        self.mount_point.path()
    }

    fn filler(&self) -> PathBuf {
        self.path().join("filler")
    }

    /// Writes a file until the disk refuses another byte.
    fn fill(&self) {
        let mut file = std::fs::File::create(self.filler()).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        loop {
            if let Err(error) = file.write_all(&chunk) {
                assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "{error}");
                break;
            }
        }
        // The last partial chunk too: not one byte is left.
        while file.write_all(&[0]).is_ok() {}
    }

    fn free(&self) {
        std::fs::remove_file(self.filler()).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.mount_point.path())
            .status();
    }
}

async fn status_of(server: &Server, id: &str) -> String {
    let (status, body) = server.get(&format!("/api/conversations/{id}")).await;
    if status == 404 {
        return "deleted".to_owned();
    }
    assert_eq!(status, 200, "{body}");
    body["status"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn when_the_shared_disk_fills_under_turns_and_frees_the_index_agrees_with_the_files() {
    let Some(disk) = SmallDisk::mount(64) else {
        eprintln!("NOT RUN: mounting a small disk needs root");
        return;
    };
    let postgres = Postgres::start();
    let cluster = start_cluster_in(&postgres, 2, disk.path().join("data")).await;
    let [a, b] = &cluster.instances[..] else {
        unreachable!()
    };
    let mut ids = Vec::new();
    for (n, server) in [a, b, a, b].into_iter().enumerate() {
        let id = create(server, &format!("Conversation {n} before the disk fills")).await;
        server.wait_idle(&id).await;
        ids.push(id);
    }
    // A turn runs on each instance when the disk fills.
    start_slow_turn(a, &ids[0]).await;
    start_slow_turn(b, &ids[1]).await;
    disk.fill();

    // While it is full, every request is answered, none with a 500: new messages (through
    // the owner and through the other instance), a new conversation, a rename, a delete.
    // Each is larger than a page, so no file's last page has room for it.
    let large = format!("While the disk is full {}", "words ".repeat(4000));
    let mut answers = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let server = [a, b][n % 2];
        let (status, body) = server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": large }),
            )
            .await;
        answers.push((status, body));
    }
    answers.push(a.post("/api/conversations", json!({ "text": large })).await);
    answers.push(
        b.patch(
            &format!("/api/conversations/{}", ids[2]),
            json!({ "title": "Renamed on a full disk" }),
        )
        .await,
    );
    answers.push(a.delete(&format!("/api/conversations/{}", ids[3])).await);
    for (status, body) in &answers {
        assert!(*status < 500 || *status == 503, "{status} {body}");
    }
    eprintln!(
        "answers while full: {:?}",
        answers
            .iter()
            .map(|(status, _)| *status)
            .collect::<Vec<_>>()
    );
    // Every turn comes to an end, stored or not.
    for (n, id) in ids.iter().enumerate() {
        let server = [a, b][n % 2];
        tokio::time::timeout(TIMEOUT, async {
            while status_of(server, id).await == "running" {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{id} still runs on a full disk"));
    }

    disk.free();
    // With room again, every conversation takes messages, through either instance.
    for (n, id) in ids.iter().enumerate() {
        let server = [b, a][n % 2];
        let (status, body) = server.get(&format!("/api/conversations/{id}")).await;
        if status == 404 {
            continue; // the delete went through
        }
        assert_eq!(status, 200, "{body}");
        tokio::time::timeout(TIMEOUT, async {
            loop {
                let (status, body) = server
                    .post(
                        &format!("/api/conversations/{id}/messages"),
                        json!({ "text": "The disk has room again" }),
                    )
                    .await;
                match status {
                    202 => return,
                    409 | 503 => tokio::time::sleep(Duration::from_millis(100)).await,
                    _ => panic!("{status} {body}"),
                }
            }
        })
        .await
        .expect("a conversation never took a message again");
        server.wait_idle(id).await;
    }
    let after = create(b, "After the disk freed").await;
    b.wait_idle(&after).await;
    for server in [a, b] {
        server.wait_index_settled().await;
    }
    assert_index_matches_files(&postgres, &cluster.data_dir).await;
}

// ---------------------------------------------------------------------------------------------
// Combined rounds.

/// What the clients were told was done.
#[derive(Clone, Default)]
struct Acknowledged {
    /// Every conversation whose create or fork was acknowledged, with the texts of the
    /// messages acknowledged in it.
    messages: HashMap<String, Vec<String>>,
    /// Conversations whose delete was acknowledged.
    deleted: HashSet<String>,
    /// Operations acknowledged, and answers that were neither success nor a 4xx or 503.
    done: usize,
    server_errors: Vec<String>,
}

impl Acknowledged {
    fn live(&self) -> Vec<String> {
        let mut live: Vec<String> = self
            .messages
            .keys()
            .filter(|id| !self.deleted.contains(*id))
            .cloned()
            .collect();
        live.sort();
        live
    }
}

/// An instance's address and a client with its token, for the load while it may be down.
#[derive(Clone)]
struct Endpoint {
    base: String,
    client: reqwest::Client,
}

impl Endpoint {
    /// The answer, or `None` when none came (the instance down, the request cut).
    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> Option<(u16, Value)> {
        let response = self
            .client
            .request(method, format!("{}{path}", self.base))
            .timeout(Duration::from_secs(15))
            .json(&body)
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        Some((status, body))
    }
}

/// Creates, messages, renames, forks and deletes through random instances until `stop`,
/// recording what was acknowledged.
async fn load(
    endpoints: Vec<Endpoint>,
    seed: u64,
    round: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
    acknowledged: Arc<Mutex<Acknowledged>>,
) {
    use reqwest::Method;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        let endpoint = &endpoints[rng.usize(..endpoints.len())];
        // One text in four is larger than a page, so a full disk refuses it.
        let text = if rng.u8(..4) == 0 {
            format!("r{round}n{n} {}", "long ".repeat(2000))
        } else {
            format!("r{round}n{n} a message")
        };
        let live = acknowledged.lock().unwrap().live();
        let target = (!live.is_empty()).then(|| live[rng.usize(..live.len())].clone());
        let (kind, answer) = match (rng.u8(..10), target) {
            (0..=1, _) | (_, None) => (
                "create",
                endpoint
                    .send(Method::POST, "/api/conversations", json!({ "text": text }))
                    .await,
            ),
            (2..=5, Some(id)) => (
                "message",
                endpoint
                    .send(
                        Method::POST,
                        &format!("/api/conversations/{id}/messages"),
                        json!({ "text": text }),
                    )
                    .await
                    .map(|(status, body)| (status, json!({ "id": id, "body": body }))),
            ),
            (6..=7, Some(id)) => (
                "rename",
                endpoint
                    .send(
                        Method::PATCH,
                        &format!("/api/conversations/{id}"),
                        json!({ "title": format!("Title r{round}n{n}") }),
                    )
                    .await,
            ),
            (8, Some(id)) => (
                "fork",
                endpoint
                    .send(
                        Method::POST,
                        &format!("/api/conversations/{id}/fork"),
                        json!({}),
                    )
                    .await,
            ),
            (_, Some(id)) => (
                "delete",
                endpoint
                    .send(
                        Method::DELETE,
                        &format!("/api/conversations/{id}"),
                        Value::Null,
                    )
                    .await
                    .map(|(status, _)| (status, json!({ "id": id }))),
            ),
        };
        if let Some((status, body)) = answer {
            record(&acknowledged, kind, status, &body, text);
        }
        // A client's pace, not a wait for anything: the faults land among the requests.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Notes an answer: what it acknowledged, or a server error.
fn record(acknowledged: &Mutex<Acknowledged>, kind: &str, status: u16, body: &Value, text: String) {
    let mut acknowledged = acknowledged.lock().unwrap();
    if status >= 500 && status != 503 {
        acknowledged
            .server_errors
            .push(format!("{kind}: {status} {body}"));
        return;
    }
    if !(200..300).contains(&status) {
        return;
    }
    acknowledged.done += 1;
    match kind {
        "create" | "fork" => {
            let id = body["conversation"]["id"].as_str().unwrap().to_owned();
            let texts = if kind == "create" {
                vec![text]
            } else {
                Vec::new()
            };
            acknowledged.messages.insert(id, texts);
        }
        "message" => {
            let id = body["id"].as_str().unwrap();
            acknowledged.messages.get_mut(id).unwrap().push(text);
        }
        "delete" => {
            acknowledged
                .deleted
                .insert(body["id"].as_str().unwrap().to_owned());
        }
        _ => {}
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    KillInstance,
    FreezePostgres,
    RestartPostgres,
    FillDisk,
}

/// Every acknowledged conversation is there, through every instance, with every acknowledged
/// message (in its history, or still waiting); every acknowledged delete is gone. Waits for
/// each to have no turn running first.
async fn check_acknowledged(instances: &[&Server], data_dir: &Path, acknowledged: &Acknowledged) {
    for (n, id) in acknowledged.messages.keys().enumerate() {
        let server = instances[n % instances.len()];
        let path = format!("/api/conversations/{id}");
        let last = Mutex::new(Value::Null);
        let conversation = tokio::time::timeout(TIMEOUT, async {
            loop {
                let (status, body) = server.get(&path).await;
                match status {
                    200 if body["status"] != "running" => return Some(body),
                    404 => return None,
                    200 | 503 => {
                        *last.lock().unwrap() = body;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    _ => panic!("{status} {body}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| {
            let metadata = std::fs::read_to_string(
                data_dir
                    .join("conversations")
                    .join(id)
                    .join("metadata.jsonl"),
            );
            panic!("{id} never settled: {}\n{metadata:?}", last.lock().unwrap())
        });
        if acknowledged.deleted.contains(id) {
            assert!(conversation.is_none(), "{id} was deleted, yet is there");
            continue;
        }
        assert!(conversation.is_some(), "acknowledged {id} is gone");
        let (status, items) = server.get(&format!("{path}/items?limit=2000")).await;
        assert_eq!(status, 200, "{items}");
        let (status, pending) = server.get(&format!("{path}/pending")).await;
        assert_eq!(status, 200, "{pending}");
        let stored = format!("{items}{pending}");
        for text in &acknowledged.messages[id] {
            assert!(
                stored.contains(text.as_str()),
                "{id} lost an acknowledged message: {}",
                &text[..text.len().min(40)]
            );
        }
    }
}

/// Rounds of one or two faults at once under load, checked after every round; at the end the
/// shared index equals a reindex of the files. `OPENVAALA_FAULT_SEED` replays a run (each run
/// prints its seed), `OPENVAALA_FAULT_ROUNDS` runs more rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_of_combined_faults_lose_nothing_and_leave_the_index_agreeing_with_the_files() {
    let Some(disk) = SmallDisk::mount(256) else {
        eprintln!("NOT RUN: mounting a small disk needs root");
        return;
    };
    let seed = std::env::var("OPENVAALA_FAULT_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let rounds = std::env::var("OPENVAALA_FAULT_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(4);
    eprintln!("OPENVAALA_FAULT_SEED={seed} OPENVAALA_FAULT_ROUNDS={rounds}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let postgres = Postgres::start();
    let data_dir = disk.path().join("data");
    let cluster = start_cluster_in(&postgres, 3, data_dir.clone()).await;
    let mut instances: Vec<Option<Server>> = cluster.instances.into_iter().map(Some).collect();
    let endpoints: Vec<Endpoint> = instances
        .iter()
        .flatten()
        .map(|server| Endpoint {
            base: server.base.clone(),
            client: server.client.clone(),
        })
        .collect();
    let acknowledged = Arc::new(Mutex::new(Acknowledged::default()));
    let all = [
        Fault::KillInstance,
        Fault::FreezePostgres,
        Fault::RestartPostgres,
        Fault::FillDisk,
    ];
    for round in 0..rounds {
        let mut faults = vec![all[rng.usize(..all.len())]];
        let second = all[rng.usize(..all.len())];
        // PostgreSQL is frozen or stopped, not both.
        let postgres_faults = [Fault::FreezePostgres, Fault::RestartPostgres];
        let both_on_postgres =
            postgres_faults.contains(&faults[0]) && postgres_faults.contains(&second);
        if rng.bool() && !faults.contains(&second) && !both_on_postgres {
            faults.push(second);
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let load = tokio::spawn(load(
            endpoints.clone(),
            rng.u64(..),
            round,
            stop.clone(),
            acknowledged.clone(),
        ));
        // Load before the faults, during them, and after them.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut killed = None;
        for fault in &faults {
            match fault {
                Fault::KillInstance => {
                    let index = rng.usize(..instances.len());
                    instances[index].take().unwrap().kill9().await;
                    killed = Some(index);
                }
                Fault::FreezePostgres => postgres.freeze(true),
                Fault::RestartPostgres => postgres.stop(),
                Fault::FillDisk => disk.fill(),
            }
        }
        // Past a lease when PostgreSQL is frozen, so every lease lapses meanwhile.
        let hold = if faults.contains(&Fault::FreezePostgres) {
            LEASE_MS * 3 / 2
        } else {
            1000
        };
        tokio::time::sleep(Duration::from_millis(hold)).await;
        for fault in &faults {
            match fault {
                Fault::FreezePostgres => postgres.freeze(false),
                Fault::RestartPostgres => postgres.resume(),
                Fault::FillDisk => disk.free(),
                Fault::KillInstance => {}
            }
        }
        if let Some(index) = killed {
            let addr = endpoints[index]
                .base
                .trim_start_matches("http://")
                .to_owned();
            instances[index] = Some(start_instance_at(&postgres, &data_dir, Some(addr)).await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        load.await.unwrap();
        let live: Vec<&Server> = instances.iter().flatten().collect();
        let so_far = acknowledged.lock().unwrap().clone();
        assert!(
            so_far.server_errors.is_empty(),
            "round {round} ({faults:?}): {:?}",
            so_far.server_errors
        );
        check_acknowledged(&live, &data_dir, &so_far).await;
        eprintln!(
            "round {round}: {faults:?}: {} operations acknowledged so far, {} conversations, nothing lost",
            so_far.done,
            so_far.live().len()
        );
    }
    for server in instances.iter().flatten() {
        server.wait_index_settled().await;
    }
    assert_index_matches_files(&postgres, &data_dir).await;
}
