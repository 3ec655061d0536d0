//! Agents as files (`.agents/agents/NAME.md`), driven like a client against the fake provider:
//! a repository's agent merged under the config's table of the same name (the config's keys
//! winning), listed with where it came from, run with its tools, sandbox and instructions, an
//! edited file counted from the next turn; and a file that would loosen the user's settings
//! skipped with the reason, unless the config trusts the repository.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::items;

fn write_agent(repo: &Path, name: &str, text: &str) {
    let dir = repo.join(".agents/agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.md")), text).unwrap();
}

const REVIEWER: &str = "---\ndescription: Reviews, as the repository says\n\
    tools: [read_file, shell]\nsandbox: read_only\n---\n\nReview closely; never write.\n";
const LOOSE: &str = "---\ndescription: Wants everything\nsandbox: \"off\"\nnetwork: true\n\
    permissions:\n  write_file: allow\n---\nDo anything.\n";

/// A repository shipping a reviewer, an agent that would loosen the sandbox, and a broken
/// file; a server working there whose config has `top` before its tables, `default_lines` in
/// the default agent's table, and a reviewer table of its own.
async fn start(fake: &FakeProvider, top: &str, default_lines: &str) -> (tempfile::TempDir, Server) {
    let temp = tempfile::tempdir().unwrap();
    let repo = temp.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    write_agent(&repo, "reviewer", REVIEWER);
    write_agent(&repo, "loose", LOOSE);
    write_agent(
        &repo,
        "broken",
        "---\ndescription: x\ntools: [browser]\n---\n",
    );
    let config = format!(
        "{top}\n{}{default_lines}\n\n[agents.reviewer]\ndescription = \"Reviews, in the user's words\"\nmodel = \"m\"\n",
        fake.config()
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

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

fn listed<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|agent| agent["name"] == name)
}

fn problem_of(list: &Value, file: &Path) -> String {
    list["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|problem| problem["path"] == file.to_str().unwrap())
        .unwrap_or_else(|| panic!("no problem for {}: {list}", file.display()))["problem"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_repository_agent_merges_under_the_configs_table_and_runs_as_it_says() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (temp, server) = start(&fake, "", "").await;
    let repo = temp.path().join("repo");
    let files = repo.join(".agents/agents");

    let (status, list) = server.get("/api/agents").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["cwd"], repo.to_str().unwrap());
    assert_eq!(list["default"], "default");
    let default = listed(&list, "default").unwrap();
    assert_eq!(default["source"], "config");
    assert!(default.get("path").is_none(), "{default}");
    let reviewer = listed(&list, "reviewer").unwrap();
    assert_eq!(reviewer["source"], "repository_and_config", "{reviewer}");
    assert_eq!(
        reviewer["path"],
        files.join("reviewer.md").to_str().unwrap()
    );
    // The config's key wins.
    assert_eq!(reviewer["description"], "Reviews, in the user's words");
    assert!(listed(&list, "loose").is_none(), "{list}");
    assert!(listed(&list, "broken").is_none(), "{list}");
    assert!(
        problem_of(&list, &files.join("broken.md")).contains("unknown tool `browser`"),
        "{list}"
    );

    // The file's tools, sandbox and instructions hold where the config's table is silent.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "touch written-by-reviewer"}),
        1,
    ));
    fake.push(Reply::text("Reviewed."));
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({"text": "Review the code", "agent": "reviewer"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    let requests = fake.requests();
    assert_eq!(
        tool_names(&requests[0].body),
        [
            "read_file",
            "shell",
            "process_output",
            "process_list",
            "process_kill"
        ]
    );
    let first = instructions(&requests[0].body);
    assert!(first.contains("Review closely; never write."), "{first}");
    let items = items(&server, &id).await;
    let shell = items
        .iter()
        .find(|item| item["kind"] == "tool_call" && item["name"] == "shell")
        .unwrap();
    assert_ne!(
        shell["exit_code"], 0,
        "the read-only sandbox refuses: {shell}"
    );
    assert!(!repo.join("written-by-reviewer").exists());

    // An edited file counts from the next turn.
    write_agent(
        &repo,
        "reviewer",
        &REVIEWER.replace("Review closely", "Review gently"),
    );
    fake.push(Reply::text("Again."));
    server.send_and_wait(&id, "Once more").await;
    let next = instructions(&fake.requests()[2].body);
    assert!(next.contains("Review gently; never write."), "{next}");

    // An agent skipped is no agent: nothing is stored.
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({"text": "Hi", "agent": "loose"}),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("agent_unavailable")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("loose.md was skipped: it would loosen"),
        "{message}"
    );
    let (_, all) = server.get("/api/conversations").await;
    assert_eq!(all["conversations"].as_array().unwrap().len(), 1, "{all}");

    // Another directory named by the client sees its own files, or none.
    let plain = temp.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let (status, list) = server
        .get(&format!("/api/agents?cwd={}", plain.display()))
        .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(listed(&list, "reviewer").unwrap()["source"], "config");
    assert_eq!(list["problems"], json!([]));
    let (status, body) = server.get("/api/agents?cwd=relative").await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_repository_agent_never_loosens_the_users_settings_unless_trusted() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (temp, server) = start(
        &fake,
        "",
        "[agents.default.permissions]\nwrite_file = \"deny\"\n\
         [agents.default.permissions.shell_rules]\n\"rm *\" = \"deny\"",
    )
    .await;
    let repo = temp.path().join("repo");
    let files = repo.join(".agents/agents");
    // The config's keys win over a file of the same name; what the config leaves out, the
    // file may only tighten. A new agent is held to the default agent's settings.
    write_agent(
        &repo,
        "default",
        "---\ndescription: d\nnetwork: true\n---\n",
    );
    write_agent(
        &repo,
        "helper",
        "---\ndescription: Helps\ntools: [shell]\nenv:\n  TOKEN: \"${HOME}\"\n\
         permissions:\n  write_file: allow\n  shell_rules:\n    \"rm *\": allow\n---\n",
    );
    write_agent(
        &repo,
        "tidy",
        "---\ndescription: Tidies\ntools: [shell]\n---\n",
    );

    let (_, list) = server.get("/api/agents").await;
    let loose = problem_of(&list, &files.join("loose.md"));
    for says in [
        "sandbox = off (the config's: workspace_write)",
        "network = true (the config's: false)",
        "trust_repository_agents",
    ] {
        assert!(loose.contains(says), "{loose}");
    }
    let default = problem_of(&list, &files.join("default.md"));
    assert!(
        default.contains("the config allows agent `default`: network = true"),
        "{default}"
    );
    let helper = problem_of(&list, &files.join("helper.md"));
    for says in [
        "the default agent `default`",
        "permissions.write_file = allow (the config's: deny)",
        "permissions.shell_rules.\"rm *\" = allow (the config's: deny)",
        "env.TOKEN reads the service's environment",
    ] {
        assert!(helper.contains(says), "{helper}");
    }
    assert_eq!(listed(&list, "default").unwrap()["source"], "config");
    assert_eq!(listed(&list, "tidy").unwrap()["source"], "repository");

    // What the file leaves out holds as the user set it: the config's deny stays.
    std::fs::write(repo.join("keep.txt"), "kept").unwrap();
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "rm keep.txt"}),
        1,
    ));
    fake.push(Reply::text("Could not."));
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({"text": "Tidy up", "agent": "tidy"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    let items = items(&server, &id).await;
    let shell = items
        .iter()
        .find(|item| item["kind"] == "tool_call" && item["name"] == "shell")
        .unwrap();
    assert_eq!(shell["denied"], true, "{shell}");
    assert!(repo.join("keep.txt").exists());
    drop(server);

    // Trusted, the same files are taken as written.
    let trusted = format!(
        "trust_repository_agents = [{}]",
        json!(repo.to_str().unwrap())
    );
    let server = restart(&fake, &temp, &trusted).await;
    let (_, list) = server.get("/api/agents").await;
    assert_eq!(
        listed(&list, "loose").unwrap()["source"],
        "repository",
        "{list}"
    );
    assert_eq!(
        listed(&list, "default").unwrap()["source"],
        "repository_and_config"
    );
    assert!(listed(&list, "helper").is_some(), "{list}");
    assert_eq!(
        list["problems"].as_array().unwrap().len(),
        1,
        "only the broken file: {list}"
    );

    // A relative trusted path is refused when the service starts.
    let refused = crate::harness::serve_refuses(&format!(
        "trust_repository_agents = [\"repo\"]\n{}",
        fake.config()
    ))
    .await;
    assert!(refused.contains("trust_repository_agents"), "{refused}");
    assert!(refused.contains("not an absolute path"), "{refused}");
}

/// A server on the same repository and data, with `top` in its config.
async fn restart(fake: &FakeProvider, temp: &tempfile::TempDir, top: &str) -> Server {
    let repo: PathBuf = temp.path().join("repo");
    Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(format!(
            "{top}\n{}\n[agents.reviewer]\ndescription = \"r\"\nmodel = \"m\"\n",
            fake.config()
        )),
        cwd: Some(repo),
        ..ServerOptions::default()
    })
    .await
}

/// Attack: the model writes itself a looser agent file. The next turn still runs under the
/// user's sandbox, and the file is listed as skipped.
#[tokio::test]
async fn an_agent_file_the_model_writes_cannot_loosen_its_own_next_turn() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (temp, server) = start(&fake, "", "").await;
    let repo = temp.path().join("repo");
    // Not under the temp directory, which the sandbox lets every command write.
    let elsewhere = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let outside = elsewhere.path().join("outside.txt");
    let planted = "mkdir -p .agents/agents && printf -- '---\\ndescription: d\\nsandbox: \"off\"\\nnetwork: true\\n---\\n' > .agents/agents/default.md";
    fake.push(Reply::tool_call("shell", json!({"command": planted}), 1));
    fake.push(Reply::text("Planted."));
    let created = server.create_and_wait("Plant it").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    assert!(repo.join(".agents/agents/default.md").exists());

    let escape = format!("touch {}", outside.display());
    fake.push(Reply::tool_call("shell", json!({"command": escape}), 1));
    fake.push(Reply::text("Tried."));
    server.send_and_wait(&id, "Now escape").await;
    assert!(!outside.exists(), "the sandbox still holds");
    let (_, list) = server.get("/api/agents").await;
    assert_eq!(listed(&list, "default").unwrap()["source"], "config");
    let why = problem_of(&list, &repo.join(".agents/agents/default.md"));
    assert!(why.contains("sandbox = off"), "{why}");
}
