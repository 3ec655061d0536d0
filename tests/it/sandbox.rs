//! The sandbox of tool commands (invariant 8, secure by default): by default a shell command
//! writes only in the conversation's working directory and the temp directory and opens no TCP
//! connection; `read_only` allows no writes; `network = true` and `sandbox = "off"` loosen it.
//! `write_file` follows the same rules, and no tool process sees a provider's key variable.
//!
//! Outside directories are made under the build's temp directory (`target/tmp`), which is
//! neither the working directory nor the system temp directory.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::items;

const KEY_VARIABLE: &str = "OPENVAALA_TEST_SANDBOX_KEY";
const KEY: &str = "vaala-sandbox-key-4b1d9e";

/// A server whose default agent uses the demo model with `agent_lines` added (the sandbox
/// settings), and a provider whose key variable is set.
async fn start(agent_lines: &str) -> Server {
    let config = format!(
        r#"
[providers.cloud]
protocol = "openai_chat"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "{KEY_VARIABLE}"

[agents.default]
description = "sandbox test agent"
model = "demo"
{agent_lines}
"#
    );
    Server::start_with(ServerOptions {
        config: Some(config),
        env: vec![(KEY_VARIABLE.to_owned(), KEY.to_owned())],
        ..ServerOptions::default()
    })
    .await
}

/// A directory outside the working directory and outside the system temp directory.
fn outside_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Runs `command` with the shell tool in a new conversation working in `cwd`; returns the
/// tool call item.
async fn shell(server: &Server, cwd: &Path, command: &str) -> Value {
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": format!("/shell {command}"), "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    server.wait_idle(id).await;
    items(server, id)
        .await
        .into_iter()
        .find(|item| item["kind"] == "tool_call")
        .expect("a tool call item")
}

fn output(tool: &Value) -> &str {
    tool["output"].as_str().unwrap()
}

/// A TCP listener of the test, and a command that connects to it and says so.
fn listener_and_connect() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected");
    (listener, command)
}

#[tokio::test]
async fn by_default_commands_write_only_in_the_workspace_and_the_temp_directory() {
    let server = start("").await;
    let workspace = outside_dir();
    let outside = outside_dir();
    let target = outside.path().join("x.txt");

    let tool = shell(
        &server,
        workspace.path(),
        &format!("echo hi > {}", target.display()),
    )
    .await;
    assert_ne!(tool["exit_code"], 0, "{tool}");
    assert!(output(&tool).contains("Permission denied"), "{tool}");
    let hint = format!(
        "[the sandbox may have blocked this: sandbox = \"workspace_write\" allows writes only \
         under {} and the temp directory; network = false blocks TCP connections]",
        workspace.path().display()
    );
    assert!(output(&tool).ends_with(&hint), "{tool}");
    assert!(!target.exists());

    // What a shell session needs works: writes in the workspace, a temp file, git, reading.
    let tool = shell(
        &server,
        workspace.path(),
        "echo hi > inside.txt && cat inside.txt && t=$(mktemp) && echo temp > $t && rm $t \
         && git init -q . && git status --short && ls && echo done 2>/dev/null",
    )
    .await;
    assert_eq!(tool["exit_code"], 0, "{tool}");
    assert_eq!(output(&tool), "hi\n?? inside.txt\ninside.txt\ndone\n");
    assert!(workspace.path().join(".git").is_dir());
}

#[tokio::test]
async fn a_read_only_sandbox_blocks_writes_in_the_workspace_too() {
    let server = start("sandbox = \"read_only\"").await;
    let workspace = outside_dir();
    let tool = shell(&server, workspace.path(), "echo hi > inside.txt").await;
    assert_ne!(tool["exit_code"], 0, "{tool}");
    assert!(
        output(&tool).ends_with(
            "[the sandbox may have blocked this: sandbox = \"read_only\" allows no writes; \
             network = false blocks TCP connections]"
        ),
        "{tool}"
    );
    assert!(!workspace.path().join("inside.txt").exists());
    let tool = shell(&server, workspace.path(), "ls / > /dev/null && echo read").await;
    assert_eq!(output(&tool), "read\n");
}

#[tokio::test]
async fn tcp_connections_are_blocked_unless_the_network_is_allowed() {
    let workspace = outside_dir();
    let (_listener, connect) = listener_and_connect();

    let server = start("").await;
    let tool = shell(&server, workspace.path(), &connect).await;
    assert_ne!(tool["exit_code"], 0, "{tool}");
    assert!(!output(&tool).contains("connected"), "{tool}");
    assert!(output(&tool).contains("Permission denied"), "{tool}");
    drop(server);

    let server = start("network = true").await;
    let tool = shell(&server, workspace.path(), &connect).await;
    assert_eq!(output(&tool), "connected\n", "{tool}");
}

#[tokio::test]
async fn with_the_sandbox_off_commands_run_as_before() {
    let server = start("sandbox = \"off\"").await;
    let workspace = outside_dir();
    let outside = outside_dir();
    let target = outside.path().join("x.txt");
    let (_listener, connect) = listener_and_connect();
    let tool = shell(
        &server,
        workspace.path(),
        &format!("echo hi > {} && {connect}", target.display()),
    )
    .await;
    assert_eq!(tool["exit_code"], 0, "{tool}");
    assert_eq!(output(&tool), "connected\n");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n");
}

#[tokio::test]
async fn tool_commands_do_not_see_the_provider_key_variables() {
    for sandbox in ["workspace_write", "off"] {
        let server = start(&format!("sandbox = \"{sandbox}\"")).await;
        let workspace = outside_dir();
        let tool = shell(&server, workspace.path(), "env").await;
        let env = output(&tool);
        // The rest of the environment is inherited.
        assert!(env.contains("OPENVAALA_LOG="), "{env}");
        assert!(!env.contains(KEY_VARIABLE), "{sandbox}: {env}");
        assert!(!env.contains(KEY), "{sandbox}: {env}");
    }
}

#[tokio::test]
async fn write_file_is_blocked_outside_the_workspace_even_through_a_link() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config().replace(
        "tools = [\"shell\"]",
        "tools = [\"shell\", \"write_file\", \"read_file\"]",
    );
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    // The conversation works where the server runs: the parent of its data directory.
    let workspace: PathBuf = setup.server.data_dir.parent().unwrap().to_owned();
    let outside = outside_dir();
    std::os::unix::fs::symlink(outside.path(), workspace.join("link")).unwrap();

    let blocked = format!(
        "blocked by the sandbox: write outside {} (sandbox = \"workspace_write\")",
        workspace.display()
    );
    let absolute = outside.path().join("a.txt");
    for path in [absolute.to_str().unwrap(), "link/b.txt"] {
        setup.fake.push(Reply::tool_call(
            "write_file",
            json!({ "path": path, "content": "x" }),
            1,
        ));
        setup.fake.push(Reply::text("Blocked."));
        let run = setup.turn("write it").await;
        let tool = run.completed("tool_call")[0];
        assert_eq!(tool["status"], "failed", "{tool}");
        assert!(output(tool).starts_with(&blocked), "{path}: {tool}");
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

    setup.fake.push(Reply::tool_call(
        "write_file",
        json!({ "path": "notes/inside.txt", "content": "kept" }),
        1,
    ));
    setup.fake.push(Reply::text("Written."));
    let run = setup.turn("write inside").await;
    assert_eq!(run.completed("tool_call")[0]["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/inside.txt")).unwrap(),
        "kept"
    );

    // A process's environment holds the keys: read_file does not read it.
    setup.fake.push(Reply::tool_call(
        "read_file",
        json!({ "path": "/proc/self/environ" }),
        1,
    ));
    setup.fake.push(Reply::text("Blocked."));
    let run = setup.turn("read the environment").await;
    let tool = run.completed("tool_call")[0];
    assert!(
        output(tool).starts_with("blocked by the sandbox: /proc/self/environ"),
        "{tool}"
    );
}

#[tokio::test]
async fn health_shows_the_sandbox_support_and_the_landlock_abi() {
    let server = start("").await;
    let (status, health) = server.get("/api/health").await;
    assert_eq!(status, 200);
    // The kernel's own answer: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION).
    // SAFETY: with these arguments the call only returns the ABI version; it touches no memory.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    assert!(
        abi >= 4,
        "this test needs a kernel with Landlock ABI 4 or later"
    );
    assert_eq!(
        health["sandbox"],
        json!({ "available": true, "landlock_abi": abi }),
        "{health}"
    );
}
