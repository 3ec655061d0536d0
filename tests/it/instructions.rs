//! What every request starts with: the base prompt, the agent's instructions, the environment
//! block and the AGENTS.md files, byte-identical across the calls of a conversation; and the
//! tools a model may call being only those it was offered.

use std::path::Path;

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::items;

/// The instructions a request carries, where its protocol puts them.
fn instructions(wire: Wire, body: &Value) -> String {
    let value = match wire {
        Wire::OpenaiChat => {
            let first = &body["messages"][0];
            assert_eq!(first["role"], "system", "{body}");
            &first["content"]
        }
        Wire::OpenaiResponses => &body["instructions"],
        // As one text block when it carries a cache breakpoint.
        Wire::AnthropicMessages if body["system"].is_array() => &body["system"][0]["text"],
        Wire::AnthropicMessages => &body["system"],
    };
    value
        .as_str()
        .unwrap_or_else(|| panic!("no instructions in {body}"))
        .to_owned()
}

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// A server whose conversation works in `<repo>/pkg`, a git repository holding AGENTS.md at its
/// top and in `pkg`, with a global AGENTS.md beside the config file.
async fn start_in_repository(
    wire: Wire,
    agent_lines: &str,
) -> (tempfile::TempDir, FakeProvider, Server, String) {
    let temp = tempfile::tempdir().unwrap();
    let repo = temp.path().join("repo");
    let pkg = repo.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    git(&repo, &["init", "-q", "-b", "trunk"]);
    std::fs::write(repo.join("AGENTS.md"), "Top rule: run the tests.").unwrap();
    std::fs::write(pkg.join("AGENTS.md"), "Package rule: no unsafe.").unwrap();
    std::fs::write(temp.path().join("AGENTS.md"), "Global rule: be brief.").unwrap();
    let fake = FakeProvider::start(wire).await;
    let config = fake.config().replace(
        "tools = [\"shell\"]",
        &format!("tools = [\"shell\", \"read_file\"]\n{agent_lines}"),
    );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(pkg.clone()),
        ..ServerOptions::default()
    })
    .await;
    fake.push(Reply::text("Ready."));
    let created = server.create_and_wait("Hello").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    (temp, fake, server, id)
}

#[tokio::test]
async fn every_call_of_a_conversation_starts_with_the_same_instructions() {
    for wire in [
        Wire::OpenaiChat,
        Wire::OpenaiResponses,
        Wire::AnthropicMessages,
    ] {
        let (temp, fake, server, id) =
            start_in_repository(wire, "instructions = \"Answer in English.\"").await;
        let pkg = temp.path().join("repo/pkg");
        fake.push(Reply::tool_call(
            "read_file",
            json!({"path": "AGENTS.md"}),
            1,
        ));
        fake.push(Reply::text("Read it."));
        server.send_and_wait(&id, "Read the rules").await;
        // A change of the tree between turns leaves the block of the session as it was.
        std::fs::write(pkg.join("new.txt"), "x").unwrap();
        fake.push(Reply::text("Still here."));
        server.send_and_wait(&id, "Again").await;

        let requests = fake.requests();
        assert_eq!(requests.len(), 4, "{wire:?}");
        let first = instructions(wire, &requests[0].body);
        for request in &requests[1..] {
            assert_eq!(instructions(wire, &request.body), first, "{wire:?}");
        }
        let at = |needle: &str| {
            first
                .find(needle)
                .unwrap_or_else(|| panic!("{wire:?}: `{needle}` missing from:\n{first}"))
        };
        // The base prompt, then the agent's own, then the environment, then AGENTS.md from the
        // global one down to the working directory's.
        assert!(at("You are a coding agent") < at("Answer in English."));
        assert!(at("Answer in English.") < at("# Environment"));
        assert!(at("# Environment") < at("Global rule: be brief."));
        assert!(at("Global rule: be brief.") < at("Top rule: run the tests."));
        assert!(at("Top rule: run the tests.") < at("Package rule: no unsafe."));
        at(&format!("- Working directory: {}", pkg.display()));
        // git ran (in the sandbox): the two AGENTS.md are untracked.
        at("- Git: a git repository, branch `trunk`, 2 changed files");
        at("- Sandbox: workspace_write");
        at("- Today's date: ");
        at("- Model: fake-model");
        // Only the offered tools are described.
        at("`read_file` returns numbered lines");
        assert!(!first.contains("`update_plan`"), "{wire:?}");
    }
}

#[tokio::test]
async fn base_instructions_can_be_replaced_from_a_file() {
    let temp = tempfile::tempdir().unwrap();
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    std::fs::write(temp.path().join("house.md"), "House prompt.").unwrap();
    let config = fake.config().replace(
        "tools = [\"shell\"]",
        "tools = [\"shell\"]\nbase_instructions = \"house.md\"",
    );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    fake.push(Reply::text("Ready."));
    server.create_and_wait("Hello").await;
    let text = instructions(Wire::OpenaiChat, &fake.requests()[0].body);
    assert!(text.starts_with("House prompt.\n\n# Environment"), "{text}");
    assert!(!text.contains("You are a coding agent"));
}

#[tokio::test]
async fn a_tool_the_agent_was_not_offered_never_runs() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake
        .config()
        .replace("tools = [\"shell\"]", "tools = [\"read_file\"]");
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(work.clone()),
        ..ServerOptions::default()
    })
    .await;
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "touch made.txt"}),
        1,
    ));
    fake.push(Reply::text("Tried."));
    let created = server.create_and_wait("Make a file").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let call = items(&server, id)
        .await
        .into_iter()
        .find(|item| item["kind"] == "tool_call")
        .expect("the call is stored");
    assert_eq!(call["status"], "failed", "{call}");
    assert!(
        call["output"]
            .as_str()
            .unwrap()
            .starts_with("unknown tool `shell`: this agent has no such tool"),
        "{call}"
    );
    assert!(!work.join("made.txt").exists());
}
