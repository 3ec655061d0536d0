//! Every older data directory opens, and a newer one is refused (`store::format`). The older
//! ones are `tests/fixtures/data-<commit>/`, written by that commit's own binary through its
//! API (`scripts/make-fixture`, described in `tests/fixtures/README.md`): this binary lists,
//! searches and reads them, continues and forks a conversation, and a `reindex` derives the
//! same index from their files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use openvaala::store::format::{self, FORMAT_VERSION};
use serde_json::{Value, json};

use crate::harness::{Server, TIMEOUT, binary, reindex, snapshot_dir};
use crate::support::{items, session_items};

/// The fixtures, oldest first: one from before stamped lines and `Output` records, one from
/// the commit before the format file, one of format 1 (before `plan` items).
const FIXTURES: [&str; 3] = ["data-00ebfb5", "data-0c002ab", "data-6ca5b0d"];

/// What `make-fixture` put in place of the conversations' working directory.
const PLACEHOLDER: &str = "/FIXTURE_WORK";

/// Words the fixtures' messages hold, each in one or two conversations; `omega` is what this
/// test adds.
const SEARCHES: [&str; 6] = ["alpha", "delta", "epsilon", "zeta", "fixture", "omega"];

#[tokio::test]
async fn the_oldest_fixture_opens_continues_forks_and_reindexes_the_same() {
    // From before remembered rules.
    opens_and_carries_on(FIXTURES[0], &[]).await;
}

#[tokio::test]
async fn the_fixture_from_before_the_format_file_opens_continues_forks_and_reindexes_the_same() {
    // Its remembered rules still count (their marks hold): one for a conversation, one for
    // the agent in a directory.
    opens_and_carries_on(
        FIXTURES[1],
        &[("echo theta", "conversation"), ("echo iota", "always")],
    )
    .await;
}

#[tokio::test]
async fn the_last_fixture_of_format_1_opens_continues_forks_and_reindexes_the_same() {
    // Stamped with format 1, written before `plan` items.
    opens_and_carries_on(
        FIXTURES[2],
        &[("echo theta", "conversation"), ("echo iota", "always")],
    )
    .await;
}

#[tokio::test]
async fn a_directory_of_a_newer_format_is_refused_at_start_and_left_as_it_was() {
    let temp = tempfile::tempdir().unwrap();
    let (data, _) = install(FIXTURES[1], temp.path());
    let newer = FORMAT_VERSION + 1;
    std::fs::write(
        format::path(&data),
        format!(r#"{{"version":{newer},"written_by":"openvaala 9.0.0"}}"#),
    )
    .unwrap();
    let config = temp.path().join("empty.toml");
    std::fs::write(&config, "").unwrap();
    let untouched = snapshot_dir(&data);

    let output = tokio::time::timeout(
        TIMEOUT,
        tokio::process::Command::new(binary())
            .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .env("OPENVAALA_CONFIG", &config)
            .output(),
    )
    .await
    .expect("a refused start must not wait")
    .unwrap();
    assert!(!output.status.success(), "it served a newer directory");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for said in [
        format!("format {newer}, written by openvaala 9.0.0"),
        format!("reads formats up to {FORMAT_VERSION}"),
    ] {
        assert!(stderr.contains(&said), "{said:?} in {stderr}");
    }
    // `reindex` refuses it the same way.
    let (ok, said) = reindex(&data).await;
    assert!(!ok, "{said}");
    assert!(said.contains(&format!("format {newer}")), "{said}");
    // Nothing was created or written: not the lock, the token, the index nor the stamp.
    assert_eq!(snapshot_dir(&data), untouched);
}

/// Opens a copy of the fixture, checks what it holds (`rules`: each remembered rule's pattern
/// and scope), continues and forks its renamed conversation, then reindexes and compares.
async fn opens_and_carries_on(fixture: &str, rules: &[(&str, &str)]) {
    let temp = tempfile::tempdir().unwrap();
    let (data, work) = install(fixture, temp.path());
    // Unstamped (before the format file), or stamped with an older format.
    let stamped = format::check(&data).unwrap().map(|stamp| stamp.version);
    assert!(
        stamped.is_none_or(|version| version < FORMAT_VERSION),
        "{fixture} is of format {stamped:?}, not older than {FORMAT_VERSION}"
    );
    let server = Server::start_in(&data).await;
    // Read as it is, and stamped at the first start.
    assert_eq!(
        format::check(&data).unwrap().map(|stamp| stamp.version),
        Some(FORMAT_VERSION)
    );

    let opened = read_all(&server).await;
    let plan = check_contents(&opened, &work);
    let (status, listed) = server.get("/api/rules").await;
    assert_eq!(status, 200, "{listed}");
    let remembered: Vec<(&str, &str)> = listed["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| {
            (
                rule["pattern"].as_str().unwrap(),
                rule["scope"]["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(remembered, rules, "{listed}");

    // A turn of the demo model continues the renamed conversation, after its compaction.
    let before = items(&server, &plan).await.len();
    server
        .send_and_wait(&plan, "Continued after the upgrade: omega")
        .await;
    let continued = items(&server, &plan).await;
    assert_eq!(continued.len(), before + 2, "{continued:#?}");
    assert_eq!(continued[before]["kind"], "user_message");
    let answer = &continued[before + 1];
    assert_eq!(answer["kind"], "agent_message", "{answer}");
    assert!(!answer["text"].as_str().unwrap().is_empty(), "{answer}");

    // A fork copies the whole history, old items and new.
    let (status, forked) = server
        .post(&format!("/api/conversations/{plan}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{forked}");
    let fork = forked["conversation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        forked["conversation"]["forked_from"]["conversation_id"],
        plan
    );
    assert_eq!(
        texts(&items(&server, &fork).await),
        texts(&continued),
        "the fork's history"
    );
    server.wait_index_settled().await;

    let carried_on = read_all(&server).await;
    assert_eq!(
        carried_on.searches["omega"],
        BTreeMap::from([(plan.clone(), true), (fork.clone(), true)]),
        "the new message is found in both"
    );
    let data = server.stop().await;
    let (ok, said) = reindex(&data).await;
    assert!(ok, "{said}");
    let server = Server::start_in(&data).await;
    let reindexed = read_all(&server).await;
    assert_eq!(
        carried_on.list, reindexed.list,
        "{fixture}: the list as read from its index and as reindexed"
    );
    assert_eq!(carried_on.searches, reindexed.searches, "{fixture}");
    assert_eq!(carried_on.snippets, reindexed.snippets, "{fixture}");
    assert_eq!(carried_on.histories, reindexed.histories, "{fixture}");
}

/// Everything a client reads of the directory: the list (archived ones too), which
/// conversations each search finds (and whether by a message, with its snippet), and every
/// session's history with its turns.
#[derive(Debug)]
struct Read {
    list: Vec<Value>,
    searches: BTreeMap<&'static str, BTreeMap<String, bool>>,
    snippets: BTreeMap<&'static str, Value>,
    histories: BTreeMap<String, Vec<Value>>,
}

async fn read_all(server: &Server) -> Read {
    let (status, listed) = server
        .get("/api/conversations?archived=all&limit=500")
        .await;
    assert_eq!(status, 200, "{listed}");
    let list = listed["conversations"].as_array().unwrap().clone();
    let mut searches = BTreeMap::new();
    let mut snippets = BTreeMap::new();
    for word in SEARCHES {
        let (status, found) = server
            .get(&format!(
                "/api/conversations?archived=all&limit=500&q={word}"
            ))
            .await;
        assert_eq!(status, 200, "{found}");
        let by_message = &found["snippets"];
        searches.insert(
            word,
            found["conversations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let id = c["id"].as_str().unwrap().to_owned();
                    let in_message = by_message.get(&id).is_some();
                    (id, in_message)
                })
                .collect(),
        );
        snippets.insert(word, by_message.clone());
    }
    let mut histories = BTreeMap::new();
    for conversation in &list {
        let id = conversation["id"].as_str().unwrap();
        let (status, view) = server.get(&format!("/api/conversations/{id}")).await;
        assert_eq!(status, 200, "{view}");
        let (status, sessions) = server
            .get(&format!("/api/conversations/{id}/sessions"))
            .await;
        assert_eq!(status, 200, "{sessions}");
        for session in sessions["sessions"].as_array().unwrap() {
            let session = session["id"].as_str().unwrap();
            histories.insert(
                format!("{id}/{session}"),
                session_items(server, id, session).await,
            );
        }
        let (status, turns) = server.get(&format!("/api/conversations/{id}/turns")).await;
        assert_eq!(status, 200, "{turns}");
        histories.insert(format!("{id}/turns"), vec![turns]);
    }
    Read {
        list,
        searches,
        snippets,
        histories,
    }
}

/// What every fixture holds (`make-fixture`'s steps); returns the renamed conversation's id.
fn check_contents(read: &Read, work: &Path) -> String {
    let titled = |title: &str| -> &Value {
        read.list
            .iter()
            .find(|c| c["title"] == title)
            .unwrap_or_else(|| panic!("no conversation titled {title:?}: {:#?}", read.list))
    };
    for conversation in &read.list {
        assert_eq!(
            conversation["cwd"],
            work.to_str().unwrap(),
            "{conversation}"
        );
        assert_eq!(conversation["status"], "idle", "{conversation}");
    }
    let plan = titled("Release plan");
    assert_eq!(plan["title_custom"], true);
    let plan_id = plan["id"].as_str().unwrap().to_owned();
    let history =
        &read.histories[&format!("{plan_id}/{}", plan["root_session_id"].as_str().unwrap())];
    let kinds: Vec<&str> = history
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"summary"), "compacted: {kinds:?}");
    assert!(
        history.iter().any(|item| item["kind"] == "tool_call"
            && item["output"]
                .as_str()
                .is_some_and(|output| output.contains("fixture-shell-output"))),
        "the shell command's output: {history:#?}"
    );
    assert_eq!(titled("Notes about the delta index")["archived"], true);

    // The fork of the plan, and the conversation whose agent started a sub-agent.
    let forks: Vec<&Value> = read
        .list
        .iter()
        .filter(|c| c["forked_from"]["conversation_id"] == plan_id.as_str())
        .collect();
    assert_eq!(forks.len(), 1, "{:#?}", read.list);
    let sessions_of = |id: &str| {
        read.histories
            .keys()
            .filter(|key| key.starts_with(id) && !key.ends_with("/turns"))
            .count()
    };
    assert!(
        read.list
            .iter()
            .any(|c| sessions_of(c["id"].as_str().unwrap()) == 2),
        "a sub-agent's session"
    );

    // Search finds messages of every age, archived conversations too.
    let found = |word: &str| read.searches[word].keys().cloned().collect::<Vec<_>>();
    assert_eq!(found("zeta"), [forks[0]["id"].as_str().unwrap()]);
    assert_eq!(
        found("delta"),
        [titled("Notes about the delta index")["id"]
            .as_str()
            .unwrap()]
    );
    assert_eq!(read.searches["alpha"].len(), 2, "the plan and its fork");
    assert!(read.searches["omega"].is_empty());
    plan_id
}

/// Each item's kind and text, to compare histories that differ in their ids.
fn texts(items: &[Value]) -> Vec<(Value, Value)> {
    items
        .iter()
        .map(|item| (item["kind"].clone(), item["text"].clone()))
        .collect()
}

/// Copies the fixture into `<temp>/data`, with `<temp>/work` as the conversations' working
/// directory in place of the placeholder in their files. Not in `metadata.db`: an older
/// directory's index is rebuilt at the first start, so a row read from it would still say the
/// placeholder (and lack what was added since). Nor in `rules.jsonl`, whose lines are marked
/// as they are. Returns (data, work).
fn install(fixture: &str, temp: &Path) -> (PathBuf, PathBuf) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    let data = temp.join("data");
    let work = temp.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("notes.txt"),
        "a file the fixture's conversations work beside\n",
    )
    .unwrap();
    let work_text = work.to_str().unwrap();
    copy_tree(&source, &data, &|path, bytes| {
        if path.extension().is_some_and(|e| e == "jsonl")
            && path.starts_with(data.join("conversations"))
        {
            replace(bytes, PLACEHOLDER.as_bytes(), work_text.as_bytes())
        } else {
            bytes
        }
    });
    (data, work)
}

fn copy_tree(from: &Path, to: &Path, edit: &dyn Fn(&Path, Vec<u8>) -> Vec<u8>) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target, edit);
        } else {
            let bytes = std::fs::read(entry.path()).unwrap();
            std::fs::write(&target, edit(&target, bytes)).unwrap();
        }
    }
}

fn replace(bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes.as_slice();
    while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}
