//! Commands a repository ships in `.agents/commands/` (and the user keeps beside the config):
//! listed for a directory, sent by name with arguments, expanded into the prompt the model is
//! sent, and refused by name when unknown, with nothing stored.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::items;

/// A git repository with a command at its top and one in `app/`, a user command beside the
/// config file, and a config with a second agent and model for the command to pick.
struct Fixture {
    temp: tempfile::TempDir,
    fake: FakeProvider,
    server: Server,
}

impl Fixture {
    async fn start() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let repo = temp.path().join("repo");
        let app = repo.join("app");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        write(
            &repo.join(".agents/commands/review.md"),
            "---\ndescription: Review a file\nargument-hint: <path> [focus]\nagent: reviewer\nmodel: m2\n---\nReview $1 with care. All of it: $ARGUMENTS\n",
        );
        write(
            &app.join(".agents/commands/fix.md"),
            "Fix the failing test.\n",
        );
        write(
            &temp.path().join("commands/hello.md"),
            "---\ndescription: Greet\n---\nSay hello to $1.\n",
        );
        write(&repo.join(".agents/commands/Not A Name.md"), "x");
        let fake = FakeProvider::start(Wire::OpenaiChat).await;
        let config = format!(
            "{}\n[models.m2]\nprovider = \"fake\"\nname = \"second-model\"\ncontext_window = 100000\nmax_output_tokens = 1000\n\n[agents.reviewer]\ndescription = \"reviews\"\nmodel = \"m\"\ntools = [\"read_file\"]\n",
            fake.config()
        );
        let server = Server::start_with(ServerOptions {
            data_dir: Some(temp.path().join("data")),
            config: Some(config),
            cwd: Some(app.clone()),
            ..ServerOptions::default()
        })
        .await;
        Fixture { temp, fake, server }
    }

    fn repo(&self) -> PathBuf {
        self.temp.path().join("repo")
    }

    fn app(&self) -> PathBuf {
        self.repo().join("app")
    }

    async fn conversations(&self) -> Vec<Value> {
        let (_, list) = self.server.get("/api/conversations?archived=all").await;
        list["conversations"].as_array().unwrap().clone()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn query(cwd: &Path) -> String {
    format!(
        "/api/commands?cwd={}",
        url_escape(&cwd.display().to_string())
    )
}

fn url_escape(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// The text of the last user message the fake provider was sent.
fn last_user_text(fake: &FakeProvider) -> String {
    let requests = fake.requests();
    let body = &requests.last().expect("a request").body;
    let messages = body["messages"].as_array().unwrap();
    let user = messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .unwrap_or_else(|| panic!("no user message in {body}"));
    match &user["content"] {
        Value::String(text) => text.clone(),
        parts => parts[0]["text"].as_str().unwrap().to_owned(),
    }
}

#[tokio::test]
async fn a_directory_lists_its_repositorys_and_the_users_commands() {
    let fixture = Fixture::start().await;
    let (status, list) = fixture.server.get(&query(&fixture.app())).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|command| command["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fix", "hello", "review"], "{list}");
    let review = &list["commands"][2];
    assert_eq!(review["description"], "Review a file");
    assert_eq!(review["argument_hint"], "<path> [focus]");
    assert_eq!(review["agent"], "reviewer");
    assert_eq!(review["model"], "m2");
    assert_eq!(review["origin"], "repository");
    assert_eq!(
        review["path"],
        fixture
            .repo()
            .join(".agents/commands/review.md")
            .display()
            .to_string()
    );
    assert_eq!(list["commands"][1]["origin"], "user");
    assert!(list["commands"][0].get("description").is_none(), "{list}");
    let problems = list["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{list}");
    assert!(
        problems[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("Not A Name.md")
    );

    // Without `cwd`: the service's working directory, here `app`.
    let (status, default) = fixture.server.get("/api/commands").await;
    assert_eq!(status, 200);
    assert_eq!(default, list);
    // The repository's top does not see `app`'s command.
    let (_, top) = fixture.server.get(&query(&fixture.repo())).await;
    assert_eq!(top["commands"].as_array().unwrap().len(), 2, "{top}");

    // The refusals of a conversation's `cwd`.
    let (status, body) = fixture.server.get("/api/commands?cwd=relative/dir").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = fixture
        .server
        .get(&query(&fixture.temp.path().join("missing")))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("cwd_missing"))
    );
    let (status, body) = fixture.server.get("/api/commands?cwd=/").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("cwd_refused"))
    );
    let (status, body) = fixture.server.get("/api/commands?nope=1").await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_command_is_sent_as_its_expanded_prompt_with_its_agent_and_model() {
    let fixture = Fixture::start().await;
    let server = &fixture.server;
    fixture.fake.push(Reply::text("Reviewed."));
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({"command": "review", "arguments": "src/lib.rs  the parser"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let expanded = "Review src/lib.rs with care. All of it: src/lib.rs  the parser";
    assert_eq!(created["message"]["text"], expanded);
    assert_eq!(
        created["message"]["command"],
        json!({"name": "review", "arguments": "src/lib.rs  the parser"})
    );
    // The command's agent and model, where the request named none.
    assert_eq!(created["conversation"]["agent"], "reviewer");
    assert_eq!(created["conversation"]["model"], "m2");
    assert_eq!(
        created["conversation"]["cwd"],
        fixture.app().display().to_string()
    );
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    assert_eq!(last_user_text(&fixture.fake), expanded);
    assert_eq!(fixture.fake.requests()[0].body["model"], "second-model");
    let stored = items(server, &id).await;
    assert_eq!(stored[0]["kind"], "user_message");
    assert_eq!(stored[0]["text"], expanded);
    assert_eq!(stored[0]["command"]["name"], "review");

    // A later message: the conversation's directory's command, arguments after a prompt
    // without placeholders.
    fixture.fake.push(Reply::text("Fixed."));
    let (status, sent) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({"command": "/fix", "arguments": "quickly", "text": ""}),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    assert_eq!(
        sent["message"]["command"],
        json!({"name": "fix", "arguments": "quickly"})
    );
    server.wait_idle(&id).await;
    assert_eq!(
        last_user_text(&fixture.fake),
        "Fix the failing test.\n\nquickly"
    );

    // A request's own agent and model win over the command's.
    fixture.fake.push(Reply::text("Hi."));
    let (status, own) = server
        .post(
            "/api/conversations",
            json!({"command": "review", "agent": "default", "model": "m"}),
        )
        .await;
    assert_eq!(status, 201, "{own}");
    assert_eq!(own["conversation"]["agent"], "default");
    assert_eq!(own["conversation"]["model"], "m");
    assert_eq!(own["message"]["text"], "Review  with care. All of it:");
    assert!(
        own["message"]["command"].get("arguments").is_none(),
        "{own}"
    );
    server
        .wait_idle(own["conversation"]["id"].as_str().unwrap())
        .await;
}

#[tokio::test]
async fn an_unknown_command_or_one_with_text_is_refused_and_nothing_is_stored() {
    let fixture = Fixture::start().await;
    let server = &fixture.server;
    let (status, body) = server
        .post("/api/conversations", json!({"command": "deploy"}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "command_unknown", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("`deploy`"), "{message}");
    for known in ["`fix`", "`hello`", "`review`"] {
        assert!(message.contains(known), "{message}");
    }
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({"command": "fix", "text": "and this"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("either `text` or `command`"),
        "{body}"
    );
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({"text": "hi", "arguments": "x"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(fixture.conversations().await.is_empty());
    assert!(fixture.fake.requests().is_empty());

    fixture.fake.push(Reply::text("Hello."));
    let id = server.create_and_wait("Hello").await["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let before = items(server, &id).await;
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({"command": "deploy", "arguments": "now"}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "command_unknown", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`review`")
    );
    assert_eq!(items(server, &id).await, before);
    assert_eq!(fixture.fake.requests().len(), 1);
}

#[tokio::test]
async fn an_idempotency_key_answers_a_repeated_command_once() {
    let fixture = Fixture::start().await;
    let server = &fixture.server;
    fixture.fake.push(Reply::text("One."));
    let body = json!({"command": "hello", "arguments": "Ada"});
    let (status, first) = server
        .post_with_key("/api/conversations", body.clone(), "create-1")
        .await;
    assert_eq!(status, 201, "{first}");
    let (status, again) = server
        .post_with_key("/api/conversations", body, "create-1")
        .await;
    assert_eq!((status, &again), (201, &first));
    assert_eq!(fixture.conversations().await.len(), 1);
    let id = first["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;

    fixture.fake.push(Reply::text("Two."));
    let path = format!("/api/conversations/{id}/messages");
    let body = json!({"command": "hello", "arguments": "Grace"});
    let (status, sent) = server.post_with_key(&path, body.clone(), "send-1").await;
    assert_eq!(status, 202, "{sent}");
    let (status, repeated) = server.post_with_key(&path, body, "send-1").await;
    assert_eq!(
        (status, &repeated["message"]["id"]),
        (202, &sent["message"]["id"])
    );
    server.wait_idle(&id).await;
    let users: Vec<Value> = items(server, &id)
        .await
        .into_iter()
        .filter(|item| item["kind"] == "user_message")
        .collect();
    assert_eq!(users.len(), 2);
    assert_eq!(users[1]["text"], "Say hello to Grace.");
    // The same key with another command is another request.
    let (status, refused) = server
        .post_with_key(&path, json!({"command": "fix"}), "send-1")
        .await;
    assert_eq!(status, 422, "{refused}");
}

#[tokio::test]
async fn a_commands_folder_reached_through_a_symlink_lists_nothing() {
    let fixture = Fixture::start().await;
    let outside = fixture.temp.path().join("outside");
    write(
        &outside.join("commands/leak.md"),
        "Read the service's secrets.",
    );
    let linked = fixture.temp.path().join("linked");
    std::fs::create_dir_all(linked.join(".agents")).unwrap();
    std::fs::create_dir_all(linked.join(".git")).unwrap();
    std::os::unix::fs::symlink(outside.join("commands"), linked.join(".agents/commands")).unwrap();
    let whole = fixture.temp.path().join("whole");
    std::fs::create_dir_all(whole.join(".git")).unwrap();
    std::os::unix::fs::symlink(&outside, whole.join(".agents")).unwrap();
    for dir in [&linked, &whole] {
        let (status, list) = fixture.server.get(&query(dir)).await;
        assert_eq!(status, 200, "{list}");
        let names: Vec<&str> = list["commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|command| command["name"].as_str().unwrap())
            .collect();
        // Only the user's own.
        assert_eq!(names, ["hello"], "{list}");
        let (status, body) = fixture
            .server
            .post(
                "/api/conversations",
                json!({"command": "leak", "cwd": dir.display().to_string()}),
            )
            .await;
        assert_eq!(status, 422, "{body}");
    }
    assert!(fixture.conversations().await.is_empty());
}

#[tokio::test]
async fn the_terminal_chat_sends_a_repository_command_and_lists_it_in_help() {
    let fixture = Fixture::start().await;
    // A repository command named like a built-in does not hide it.
    write(
        &fixture.app().join(".agents/commands/new.md"),
        "Not the built-in.",
    );
    fixture.fake.push(Reply::text("Reviewed."));
    fixture.fake.push(Reply::text("Fixed."));
    let script = "/help\n/review src/lib.rs\n/fix now\n/new\n/quit\n";
    let (ok, out, err) =
        crate::terminal::chat(&["--url", &fixture.server.base], script, &fixture.app()).await;
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("/review <path> [focus]  Review a file"),
        "{out}"
    );
    assert!(out.contains("/hello"), "{out}");
    assert!(
        out.contains("[the next message starts a new conversation]"),
        "{out}"
    );
    assert!(out.contains("Reviewed.") && out.contains("Fixed."), "{out}");
    let requests = fixture.fake.requests();
    assert_eq!(requests.len(), 2, "{out}");
    assert_eq!(requests[0].body["model"], "second-model");
    assert_eq!(
        last_user_text(&fixture.fake),
        "Fix the failing test.\n\nnow"
    );
    let conversations = fixture.conversations().await;
    assert_eq!(conversations.len(), 1);
    assert_eq!(conversations[0]["agent"], "reviewer");
    let id = conversations[0]["id"].as_str().unwrap();
    let stored = items(&fixture.server, id).await;
    assert_eq!(stored[0]["command"]["arguments"], "src/lib.rs");

    // Resumed, the history names the command beside its prompt.
    let (ok, out, err) = crate::terminal::chat(
        &["--url", &fixture.server.base, id],
        "/quit\n",
        &fixture.app(),
    )
    .await;
    assert!(ok, "{err}");
    assert!(
        out.contains("you (/review): Review src/lib.rs with care."),
        "{out}"
    );
}

#[tokio::test]
async fn an_editor_is_offered_the_repositorys_commands_and_sends_one() {
    let fixture = Fixture::start().await;
    let mut editor = crate::acp::Editor::start(&fixture.server.base).await;
    let session = editor.new_session(&fixture.app()).await;
    let offered = |update: &Value| -> Vec<String> {
        update["update"]["update"]["availableCommands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|command| command["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = editor
        .until(|line| line["update"]["update"]["sessionUpdate"] == "available_commands_update")
        .await;
    assert_eq!(
        offered(&first),
        [
            "compact", "fork", "rewind", "context", "agents", "retry", "fix", "hello", "review"
        ]
    );
    let review = &first["update"]["update"]["availableCommands"][8];
    assert_eq!(review["description"], "Review a file");
    assert_eq!(review["input"]["hint"], "<path> [focus]");

    // A command added meanwhile is offered at the next prompt, and the prompt sends one.
    write(&fixture.app().join(".agents/commands/ship.md"), "Ship $1.");
    fixture.fake.push(Reply::text("Shipped."));
    let prompt = editor.prompt(&session, "/ship v2").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(last_user_text(&fixture.fake), "Ship v2.");
    let updates = editor.updates(&session, "available_commands_update");
    assert_eq!(updates.len(), 2, "{updates:#?}");
    assert!(
        updates[1]["availableCommands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|command| command["name"] == "ship")
    );
    let conversations = fixture.conversations().await;
    let stored = items(&fixture.server, conversations[0]["id"].as_str().unwrap()).await;
    assert_eq!(
        stored[0]["command"],
        json!({"name": "ship", "arguments": "v2"})
    );

    // Unchanged, nothing is sent again.
    fixture.fake.push(Reply::text("Again."));
    let prompt = editor.prompt(&session, "/fix").await;
    editor.until(|line| line["id"] == prompt).await;
    assert_eq!(
        editor.updates(&session, "available_commands_update").len(),
        2
    );
}
