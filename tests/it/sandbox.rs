//! The sandbox of tool commands (invariant 8, secure by default), as a hostile model meets it:
//! by default a shell command writes only in the conversation's working directory and the temp
//! directory, reaches no network by any protocol, cannot see the service's state, environment
//! or process, and ends with everything it started; `read_only` allows no writes; `network =
//! true` and `sandbox = "off"` loosen it. The file tools follow the same rules.
//! `sandbox_escape.rs` has the ways around it an outside audit found, each closed.
//!
//! Outside directories are made under the build's temp directory (`target/tmp`), which is
//! neither the working directory nor the system temp directory.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::items;

pub(crate) const KEY_VARIABLE: &str = "OPENVAALA_TEST_SANDBOX_KEY";
pub(crate) const KEY: &str = "vaala-sandbox-key-4b1d9e";

/// A server whose default agent uses the demo model with `agent_lines` added (the sandbox
/// settings), a provider whose key variable is set, and `OPENVAALA_TOKEN` set too.
pub(crate) async fn start(agent_lines: &str) -> Server {
    start_with(agent_lines, "").await
}

/// The same, with `more` appended to the config (other agents, MCP servers).
pub(crate) async fn start_with(agent_lines: &str, more: &str) -> Server {
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
{more}
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
pub(crate) fn outside_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Runs `command` with the shell tool in a new conversation working in `cwd`; returns the
/// tool call item.
pub(crate) async fn shell(server: &Server, cwd: &Path, command: &str) -> Value {
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

pub(crate) fn output(tool: &Value) -> &str {
    tool["output"].as_str().unwrap()
}

/// A TCP listener of the test, and a command that connects to it and says so.
pub(crate) fn listener_and_connect() -> (std::net::TcpListener, String) {
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
         under {} and the temp directory; network = false blocks the network]",
        workspace.path().canonicalize().unwrap().display()
    );
    assert!(output(&tool).ends_with(&hint), "{tool}");
    assert!(!target.exists());

    // What a shell session needs works: writes in the workspace, a temp file, git, reading,
    // a pipeline, a local server of its own on the loopback of its network.
    let tool = shell(
        &server,
        workspace.path(),
        "echo hi > inside.txt && cat inside.txt && t=$(mktemp) && echo temp > $t && rm $t \
         && git init -q . && git status --short && ls && yes | head -n 1 && echo done 2>/dev/null",
    )
    .await;
    assert_eq!(tool["exit_code"], 0, "{tool}");
    assert_eq!(output(&tool), "hi\n?? inside.txt\ninside.txt\ny\ndone\n");
    assert!(workspace.path().join(".git").is_dir());
    let tool = shell(
        &server,
        workspace.path(),
        "python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); \
         c=socket.create_connection(s.getsockname()); print('local loopback works')\"",
    )
    .await;
    assert_eq!(output(&tool), "local loopback works\n", "{tool}");
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
             network = false blocks the network]"
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
    assert!(output(&tool).contains("Connection refused"), "{tool}");
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
async fn tool_commands_get_an_allow_listed_environment_and_the_agents_own() {
    for sandbox in ["workspace_write", "off"] {
        let server = Server::start_with(ServerOptions {
            config: Some(format!(
                "[providers.cloud]\nprotocol = \"openai_chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
                 api_key_env = \"{KEY_VARIABLE}\"\n\n[agents.default]\ndescription = \"d\"\n\
                 model = \"demo\"\nsandbox = \"{sandbox}\"\n\
                 env = {{ PROJECT_MODE = \"test\", FROM_SERVICE = \"${{OPENVAALA_LOG}}\" }}\n"
            )),
            env: vec![(KEY_VARIABLE.to_owned(), KEY.to_owned())],
            token: Some("service-token-of-the-test-0123456789".to_owned()),
            ..ServerOptions::default()
        })
        .await;
        let workspace = outside_dir();
        let tool = shell(&server, workspace.path(), "env").await;
        let env = output(&tool);
        assert!(env.contains("PATH="), "{env}");
        assert!(env.contains("PROJECT_MODE=test"), "{env}");
        // The agent's `env` may take a value of the service's environment, by name.
        assert!(env.contains("FROM_SERVICE=info"), "{env}");
        for absent in [
            KEY_VARIABLE,
            KEY,
            "OPENVAALA_TOKEN",
            "service-token-of-the-test",
            "OPENVAALA_LOG=",
        ] {
            assert!(!env.contains(absent), "{sandbox}: {absent} in {env}");
        }
    }
}

#[tokio::test]
async fn write_file_is_blocked_outside_the_workspace_and_through_any_link() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config().replace(
        "tools = [\"shell\"]",
        "tools = [\"shell\", \"write_file\", \"read_file\", \"list_dir\"]",
    );
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    // The conversation works where the server runs, beside its data directory.
    let workspace: PathBuf = setup
        .server
        .data_dir
        .parent()
        .unwrap()
        .join("work")
        .canonicalize()
        .unwrap();
    let outside = outside_dir();
    std::os::unix::fs::symlink(outside.path(), workspace.join("link")).unwrap();
    let absolute = outside.path().join("a.txt");
    let data = setup.server.data_dir.canonicalize().unwrap();
    let cases = [
        (
            absolute.to_str().unwrap().to_owned(),
            "blocked by the sandbox: write outside",
        ),
        ("link/b.txt".to_owned(), "`link` is a symbolic link"),
        (
            data.join("rules.jsonl").to_str().unwrap().to_owned(),
            "blocked by the sandbox: the service's own files are out of reach",
        ),
    ];
    for (path, expected) in &cases {
        setup.fake.push(Reply::tool_call(
            "write_file",
            json!({ "path": path, "content": "x" }),
            1,
        ));
        setup.fake.push(Reply::text("Blocked."));
        let run = setup.turn("write it").await;
        let tool = run.completed("tool_call")[0];
        assert_eq!(tool["status"], "failed", "{tool}");
        assert!(output(tool).contains(expected), "{path}: {tool}");
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(!data.join("rules.jsonl").exists());

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

    // Neither a process's environment nor the service's own files are read or listed.
    for (tool, path, expected) in [
        (
            "read_file",
            "/proc/self/environ".to_owned(),
            "is a process's environment",
        ),
        (
            "read_file",
            data.join("local-token").to_str().unwrap().to_owned(),
            "is the service's own state",
        ),
        (
            "list_dir",
            data.to_str().unwrap().to_owned(),
            "is the service's own state",
        ),
    ] {
        setup
            .fake
            .push(Reply::tool_call(tool, json!({ "path": path }), 1));
        setup.fake.push(Reply::text("Blocked."));
        let run = setup.turn("read it").await;
        let call = run.completed("tool_call")[0];
        assert_eq!(call["status"], "failed", "{call}");
        assert!(output(call).contains(expected), "{path}: {call}");
        assert!(!output(call).contains(&setup.server.token), "{call}");
    }
}

#[tokio::test]
async fn a_working_directory_holding_the_services_state_is_refused() {
    let server = start("").await;
    let data = server.data_dir.canonicalize().unwrap();
    for (cwd, expected) in [
        (PathBuf::from("/"), "may not be `/`"),
        (
            data.parent().unwrap().to_owned(),
            "contains the service's data directory",
        ),
        (
            data.join("conversations"),
            "is inside the service's data directory",
        ),
    ] {
        let (status, body) = server
            .post(
                "/api/conversations",
                json!({ "text": "/shell id", "cwd": cwd.to_str().unwrap() }),
            )
            .await;
        // A well-formed path the service will not work in: 422, like a missing directory.
        assert_eq!(status, 422, "{}: {body}", cwd.display());
        assert_eq!(body["error"]["code"], "cwd_refused", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{}: {message}", cwd.display());
    }
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"], json!([]), "nothing was stored");

    // Repointing a conversation there is refused the same way, and changes nothing.
    let created = server.create_and_wait("hello").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let path = format!("/api/conversations/{id}");
    let (status, body) = server.patch(&path, json!({ "cwd": "/" })).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "cwd_refused", "{body}");
    let (_, conversation) = server.get(&path).await;
    assert_eq!(conversation["cwd"], created["conversation"]["cwd"]);
}

#[tokio::test]
async fn health_lists_each_layer_of_the_sandbox() {
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
    let sandbox = &health["sandbox"];
    assert_eq!(sandbox["available"], true, "{health}");
    assert_eq!(sandbox["landlock_abi"], abi, "{health}");
    assert_eq!(
        sandbox["namespaces"], true,
        "this machine allows user namespaces: {health}"
    );
    // SAFETY: geteuid cannot fail.
    assert_eq!(sandbox["runs_as_root"], unsafe { libc::geteuid() } == 0);
    let names: Vec<&str> = sandbox["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|layer| layer["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "filesystem",
            "network",
            "api",
            "pid",
            "limits",
            "privileges"
        ]
    );
    for layer in sandbox["layers"].as_array().unwrap() {
        if layer["name"] != "privileges" {
            assert_eq!(layer["active"], true, "{layer}");
        }
        assert!(!layer["detail"].as_str().unwrap().is_empty(), "{layer}");
    }
}
