//! Agent Skills, driven like a client against the fake provider: the skills of a repository (and
//! the user's) listed by name and description in the instructions, one loaded with the `skill`
//! tool, its `allowed-tools` refusing other tools while it is in use, an edited skill counted
//! from the next turn, and bad or planted skills skipped with their reasons (`GET /api/skills`)
//! without failing a turn.

use std::path::Path;

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::items;

fn write_skill(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), text).unwrap();
}

/// A repository with a good skill that narrows the tools, a bad one, and one planted through a
/// symlink; and a server whose agent has the shell, `read_file` and `skill`, working there.
async fn start(fake: &FakeProvider) -> (tempfile::TempDir, Server) {
    let temp = tempfile::tempdir().unwrap();
    let repo = temp.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let skills = repo.join(".agents/skills");
    write_skill(
        &skills.join("release"),
        "---\nname: release\ndescription: Cut a release of the project\nallowed-tools: [read_file]\n---\nRead CHECKLIST.md, then report.\n",
    );
    std::fs::write(skills.join("release/CHECKLIST.md"), "- tag it\n").unwrap();
    write_skill(
        &repo.join(".claude/skills/Loud"),
        "---\nname: Loud\ndescription: shouts\n---\nbody",
    );
    let outside = temp.path().join("outside");
    write_skill(
        &outside.join("leak"),
        "---\nname: leak\ndescription: a file outside the repository\n---\nsecret body",
    );
    std::os::unix::fs::symlink(outside.join("leak"), skills.join("leak")).unwrap();
    let config = fake.config().replace(
        "tools = [\"shell\"]",
        "tools = [\"shell\", \"read_file\", \"skill\"]",
    );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(repo),
        ..ServerOptions::default()
    })
    .await;
    (temp, server)
}

fn instructions(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn tool_output(items: &[Value], name: &str) -> (String, Value) {
    let call = items
        .iter()
        .find(|item| item["kind"] == "tool_call" && item["name"] == name)
        .unwrap_or_else(|| panic!("no {name} call in {items:?}"));
    (call["output"].as_str().unwrap().to_owned(), call.clone())
}

#[tokio::test]
async fn a_skill_is_listed_loaded_and_narrows_the_tools_while_in_use() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (temp, server) = start(&fake).await;
    let repo = temp.path().join("repo");
    fake.push(Reply::tool_call("skill", json!({"name": "release"}), 1));
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "touch ran"}),
        1,
    ));
    fake.push(Reply::text("Released."));
    let created = server.create_and_wait("Cut the release").await;
    let id = created["conversation"]["id"].as_str().unwrap();

    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let first = instructions(&requests[0].body);
    assert!(first.contains("# Skills"), "{first}");
    assert!(
        first.contains("- release: Cut a release of the project"),
        "{first}"
    );
    assert!(
        !first.contains("Loud") && !first.contains("leak"),
        "{first}"
    );
    // The instructions stay the same bytes through the turn.
    assert_eq!(instructions(&requests[2].body), first);

    let items = items(&server, id).await;
    let (loaded, call) = tool_output(&items, "skill");
    assert_eq!(call["status"], "completed", "{call}");
    assert!(
        loaded.contains("Read CHECKLIST.md, then report."),
        "{loaded}"
    );
    let checklist = repo.join(".agents/skills/release/CHECKLIST.md");
    assert!(
        loaded.contains(&format!("- {}", checklist.display())),
        "{loaded}"
    );
    let (refused, call) = tool_output(&items, "shell");
    assert_eq!(call["denied"], true, "{call}");
    assert!(
        refused.contains(
            "while the skill `release` is in use, only these tools may be called: read_file"
        ),
        "{refused}"
    );
    assert!(!repo.join("ran").exists(), "the refused command never ran");

    // An edited skill counts from the next turn; the narrowing ended with the turn.
    write_skill(
        &repo.join(".agents/skills/release"),
        "---\nname: release\ndescription: Cut and publish a release\n---\nbody",
    );
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "touch ran"}),
        1,
    ));
    fake.push(Reply::text("Done."));
    server.send_and_wait(id, "Now run it").await;
    let next = instructions(&fake.requests()[3].body);
    assert!(
        next.contains("- release: Cut and publish a release"),
        "{next}"
    );
    assert!(repo.join("ran").exists(), "no skill narrows this turn");
}

#[tokio::test]
async fn bad_and_planted_skills_are_skipped_with_their_reasons() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (temp, server) = start(&fake).await;
    let repo = temp.path().join("repo");
    let (status, listed) = server.get("/api/skills").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["cwd"], repo.to_str().unwrap());
    let names: Vec<&str> = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|skill| skill["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["release"], "{listed}");
    assert_eq!(listed["skills"][0]["origin"], "repository");
    assert_eq!(listed["skills"][0]["allowed_tools"], json!(["read_file"]));
    assert!(listed["skills"][0].get("body").is_none());
    let problems = listed["problems"].as_array().unwrap();
    assert_eq!(
        problems.len(),
        1,
        "the planted link is not read at all: {listed}"
    );
    assert_eq!(
        problems[0]["path"],
        repo.join(".claude/skills/Loud/SKILL.md").to_str().unwrap()
    );
    assert!(
        problems[0]["problem"]
            .as_str()
            .unwrap()
            .contains("only lowercase letters, digits and hyphens"),
        "{listed}"
    );

    // Another directory, named by the client; bad ones refused.
    let plain = temp.path().join("plain");
    write_skill(
        &plain.join(".agents/skills/notes"),
        "---\nname: notes\ndescription: Take notes\n---\n",
    );
    let query = format!("/api/skills?cwd={}", plain.display());
    let (status, listed) = server.get(&query).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["skills"][0]["name"], "notes");
    let (status, body) = server.get("/api/skills?cwd=relative/dir").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = server.get("/api/skills?cwd=/no/such/dir").await;
    assert_eq!(status, 422, "{body}");

    // A turn goes on whatever the skills are.
    fake.push(Reply::text("Fine."));
    let created = server.create_and_wait("Hello").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let (_, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(view["last_turn"]["status"], "completed", "{view}");
}
