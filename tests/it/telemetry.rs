//! What an operator's tools see, with real parts: the traces of a turn received over OTLP/HTTP
//! by a receiver decoding them with OpenTelemetry's own protobuf definitions (the span tree of
//! a turn with a tool call and a sub-agent, the attribute names of the GenAI conventions, no
//! message content unless asked for), `/metrics` scraped by a real Prometheus and checked by
//! `promtool`, and JSON log lines that name their trace and carry no secret.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT};

/// A span as the receiver got it.
#[derive(Debug, Clone)]
struct Received {
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    attributes: HashMap<String, String>,
}

/// An OTLP/HTTP trace receiver on a loopback port: every span of every export, decoded.
struct Receiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let spans: Arc<Mutex<Vec<Received>>> = Arc::default();
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let request = ExportTraceServiceRequest::decode(body.as_ref())
                        .expect("an OTLP trace export");
                    let mut kept = kept.lock().unwrap();
                    for resource in request.resource_spans {
                        for scope in resource.scope_spans {
                            for span in scope.spans {
                                let attributes = span
                                    .attributes
                                    .iter()
                                    .map(|kv| {
                                        let value = match kv
                                            .value
                                            .as_ref()
                                            .and_then(|v| v.value.as_ref())
                                        {
                                            Some(AnyValue::StringValue(text)) => text.clone(),
                                            Some(AnyValue::IntValue(n)) => n.to_string(),
                                            Some(AnyValue::DoubleValue(n)) => n.to_string(),
                                            Some(AnyValue::BoolValue(b)) => b.to_string(),
                                            other => format!("{other:?}"),
                                        };
                                        (kv.key.clone(), value)
                                    })
                                    .collect();
                                kept.push(Received {
                                    name: span.name,
                                    trace_id: span.trace_id,
                                    span_id: span.span_id,
                                    parent_span_id: span.parent_span_id,
                                    attributes,
                                });
                            }
                        }
                    }
                    ""
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { addr, spans }
    }

    /// The spans received once `done` holds of them (polled, bounded by [`TIMEOUT`]).
    async fn until(&self, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let found = tokio::time::timeout(TIMEOUT, async {
            loop {
                let spans = self.spans.lock().unwrap().clone();
                if done(&spans) {
                    return spans;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        found.unwrap_or_else(|_| {
            let names: Vec<String> = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .map(|s| s.name.clone())
                .collect();
            panic!("the spans never came; received: {names:?}")
        })
    }
}

/// The GenAI semantic conventions' attribute names this service sets (a typo would be a name
/// no tool reads).
const GEN_AI_ATTRIBUTES: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.conversation.id",
    "gen_ai.agent.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
];

/// `tables` first, then the fake provider's config (`provider_lines` in its table), its
/// agent able to start sub-agents.
fn config(fake: &FakeProvider, provider_lines: &str, tables: &str) -> String {
    let agent = "tools = [\"shell\"]\n";
    let with_spawn = "tools = [\"shell\", \"spawn_agent\"]\nspawnable = [\"default\"]\n";
    let config = fake.config_with(provider_lines);
    assert!(config.contains(agent), "{config}");
    format!("{tables}\n{}", config.replace(agent, with_spawn))
}

/// The request's first user message, a session's task.
fn first_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .count()
}

#[tokio::test]
async fn a_turn_with_a_tool_call_and_a_sub_agent_is_one_trace_by_the_genai_conventions() {
    let receiver = Receiver::start().await;
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    fake.script(|body| {
        Some(if first_user(body) == "Check the parser" {
            Reply::text("The parser is fine.")
        } else {
            match tool_results(body) {
                0 => Reply::tool_call("shell", json!({"command": "echo hi"}), 1),
                1 => Reply::tool_call(
                    "spawn_agent",
                    json!({"agent": "default", "task": "Check the parser"}),
                    1,
                ),
                _ => Reply::text("Done."),
            }
        })
    });
    let tables = format!("[telemetry]\nendpoint = \"http://{}\"\n", receiver.addr);
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake, "", &tables)),
        // The batch goes out every 100 ms instead of every 5 s.
        env: vec![("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "100".to_owned())],
        ..ServerOptions::default()
    })
    .await;
    let created = server.create_and_wait("Review it").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let invoked = |spans: &[Received]| {
        spans
            .iter()
            .filter(|span| span.name == "invoke_agent default")
            .count()
    };
    // The root turn and the sub-agent's.
    let spans = receiver.until(|spans| invoked(spans) >= 2).await;
    let find = |name: &str| -> Vec<&Received> { spans.iter().filter(|s| s.name == name).collect() };
    let root = find("invoke_agent default")
        .into_iter()
        .find(|span| span.parent_span_id.is_empty())
        .unwrap_or_else(|| panic!("no root invoke_agent span: {spans:#?}"));
    let attr = |span: &Received, key: &str| span.attributes.get(key).cloned().unwrap_or_default();
    assert_eq!(attr(root, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(root, "gen_ai.provider.name"), "openai");
    assert_eq!(attr(root, "gen_ai.request.model"), "fake-model");
    assert_eq!(attr(root, "gen_ai.conversation.id"), id);
    assert_eq!(attr(root, "gen_ai.agent.name"), "default");
    assert_eq!(attr(root, "openvaala.turn.status"), "completed");

    // Three model calls of the root turn, each a child of it, with its usage.
    let chats: Vec<&Received> = find("chat fake-model")
        .into_iter()
        .filter(|span| span.parent_span_id == root.span_id)
        .collect();
    assert_eq!(chats.len(), 3, "{spans:#?}");
    for chat in &chats {
        assert_eq!(chat.trace_id, root.trace_id);
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(chat, "gen_ai.response.model"), "fake-model");
        assert!(
            attr(chat, "gen_ai.usage.input_tokens")
                .parse::<u64>()
                .is_ok(),
            "{chat:?}"
        );
        assert!(
            attr(chat, "gen_ai.usage.output_tokens")
                .parse::<u64>()
                .is_ok(),
            "{chat:?}"
        );
        // No message content unless `capture_content` is on.
        assert!(
            !chat.attributes.contains_key("gen_ai.input.messages"),
            "{chat:?}"
        );
    }
    let shell = find("execute_tool shell")[0];
    assert_eq!(shell.parent_span_id, root.span_id);
    assert_eq!(attr(shell, "gen_ai.tool.name"), "shell");
    assert!(
        attr(shell, "gen_ai.tool.call.id").starts_with("m_"),
        "{shell:?}"
    );
    assert_eq!(attr(shell, "openvaala.tool.status"), "completed");
    assert!(!shell.attributes.contains_key("gen_ai.tool.call.arguments"));
    // The checkpoint snapshots around the call are its children.
    assert!(
        spans
            .iter()
            .any(|span| span.name == "checkpoint snapshot" && span.parent_span_id == shell.span_id),
        "{spans:#?}"
    );

    // The sub-agent's turn is a child of the call that started it, in the same trace.
    let spawn = find("execute_tool spawn_agent")[0];
    assert_eq!(spawn.parent_span_id, root.span_id);
    let sub = find("invoke_agent default")
        .into_iter()
        .find(|span| span.parent_span_id == spawn.span_id)
        .unwrap_or_else(|| panic!("no sub-agent turn under spawn_agent: {spans:#?}"));
    assert_eq!(sub.trace_id, root.trace_id);
    assert_ne!(
        attr(sub, "openvaala.session.id"),
        attr(root, "openvaala.session.id")
    );
    assert!(
        spans
            .iter()
            .any(|span| span.name == "chat fake-model" && span.parent_span_id == sub.span_id),
        "the sub-agent's model call is its child: {spans:#?}"
    );

    // Requests are server spans named by their route, never the raw path.
    assert!(
        spans
            .iter()
            .any(|span| span.name == "POST /api/conversations"
                && attr(span, "http.route") == "/api/conversations"
                && attr(span, "http.response.status_code") == "201"),
        "{spans:#?}"
    );
    // Every gen_ai attribute is one of the conventions' names.
    for span in &spans {
        for key in span
            .attributes
            .keys()
            .filter(|key| key.starts_with("gen_ai."))
        {
            assert!(
                GEN_AI_ATTRIBUTES.contains(&key.as_str()),
                "{key} on {span:?}"
            );
        }
    }
}

#[tokio::test]
async fn message_content_goes_on_spans_only_when_asked_and_redacted() {
    let receiver = Receiver::start().await;
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo sk-telemetry-secret-0123456789"}),
        1,
    ));
    fake.push(Reply::text("Printed it."));
    let tables = format!(
        "[telemetry]\nendpoint = \"http://{}\"\ncapture_content = true\n",
        receiver.addr
    );
    let server = Server::start_with(keeping_a_secret(&fake, &tables, &[])).await;
    server.create_and_wait("Print my key").await;
    let spans = receiver
        .until(|spans| spans.iter().any(|span| span.name == "execute_tool shell"))
        .await;
    let shell = spans
        .iter()
        .find(|span| span.name == "execute_tool shell")
        .unwrap();
    let arguments = shell
        .attributes
        .get("gen_ai.tool.call.arguments")
        .cloned()
        .unwrap_or_default();
    assert!(arguments.contains("echo"), "{shell:?}");
    let chat = spans
        .iter()
        .find(|span| span.name == "chat fake-model")
        .unwrap();
    assert!(
        chat.attributes
            .get("gen_ai.input.messages")
            .is_some_and(|messages| messages.contains("Print my key")),
        "{chat:?}"
    );
    for span in &spans {
        for value in span.attributes.values() {
            assert!(
                !value.contains("sk-telemetry-secret"),
                "a secret on {span:?}"
            );
        }
    }
}

/// The provider's key, a secret nothing exported or logged may show.
const SECRET: &str = "sk-telemetry-secret-0123456789";

/// A service with `tables`, whose provider's key is [`SECRET`], exporting every 100 ms (not
/// every 5 s), with `env` besides.
fn keeping_a_secret(fake: &FakeProvider, tables: &str, env: &[(&str, &str)]) -> ServerOptions {
    let mut all = vec![
        ("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "100".to_owned()),
        ("FAKE_PROVIDER_KEY".to_owned(), SECRET.to_owned()),
    ];
    all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    ServerOptions {
        config: Some(config(fake, "api_key_env = \"FAKE_PROVIDER_KEY\"", tables)),
        env: all,
        ..ServerOptions::default()
    }
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn a_real_prometheus_scrapes_the_metrics_and_promtool_accepts_them() {
    let (Some(prometheus), Some(promtool)) = (which("prometheus"), which("promtool")) else {
        panic!(
            "prometheus and promtool are missing: install Debian's `prometheus` package \
             (.ci/run does it)"
        );
    };
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    fake.push(Reply::tool_call("shell", json!({"command": "echo hi"}), 1));
    fake.push(Reply::text("Done."));
    let server = Server::start_with(ServerOptions {
        config: Some(fake.config()),
        ..ServerOptions::default()
    })
    .await;
    server.create_and_wait("Say hi").await;

    // The text format as Prometheus's own linter reads it.
    let text = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        "openvaala_http_requests_total{route=\"/api/conversations\",status=\"201\"} 1",
        "openvaala_turns_total{status=\"completed\"} 1",
        "openvaala_model_calls_total{model=\"m\",outcome=\"ok\"} 2",
        "openvaala_tool_calls_total{tool=\"shell\",outcome=\"completed\"} 1",
        "openvaala_live_conversations 1",
        "openvaala_approvals_pending 0",
    ] {
        assert!(text.contains(series), "{series} missing from:\n{text}");
    }
    assert!(
        text.contains("openvaala_turn_duration_seconds_bucket"),
        "{text}"
    );
    assert!(
        text.contains("openvaala_model_time_to_first_token_seconds_bucket"),
        "{text}"
    );
    let mut check = tokio::process::Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = check.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).await.unwrap();
    }
    let checked = check.wait_with_output().await.unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // A real Prometheus scrapes it, and the series are there.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = server.base.trim_start_matches("http://");
    std::fs::write(
        dir.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: openvaala\n    \
             static_configs:\n      - targets: [\"{target}\"]\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let _prometheus = tokio::process::Command::new(&prometheus)
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let query = format!(
        "http://127.0.0.1:{port}/api/v1/query?query=openvaala_turns_total%7Bstatus%3D%22completed%22%7D"
    );
    let answered = tokio::time::timeout(TIMEOUT, async {
        loop {
            if let Ok(response) = reqwest::get(&query).await
                && let Ok(body) = response.json::<Value>().await
                && body["data"]["result"][0]["value"][1] == "1"
            {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("Prometheus never scraped the turn");
    assert_eq!(answered["data"]["result"][0]["metric"]["job"], "openvaala");
    let targets: Value = reqwest::get(format!("http://127.0.0.1:{port}/api/v1/targets"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        targets["data"]["activeTargets"][0]["health"], "up",
        "{targets}"
    );
}

#[tokio::test]
async fn off_loopback_the_metrics_need_the_token() {
    let port = free_port();
    // Kept running while it is asked.
    let _server = Server::start_with(ServerOptions {
        addr: Some(format!("0.0.0.0:{port}")),
        token: Some("a-long-enough-token-for-the-network".to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let url = format!("http://127.0.0.1:{port}/metrics");
    let refused = reqwest::get(&url).await.unwrap();
    assert_eq!(refused.status(), 401);
    let allowed = openvaala::tls::client_builder()
        .build()
        .unwrap()
        .get(&url)
        .bearer_auth("a-long-enough-token-for-the-network")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
    assert!(
        allowed
            .text()
            .await
            .unwrap()
            .contains("openvaala_live_conversations")
    );
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|path| Path::new(path).is_file())
    })
}

#[tokio::test]
async fn json_log_lines_name_their_trace_and_never_hold_a_secret() {
    let receiver = Receiver::start().await;
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo sk-telemetry-secret-0123456789"}),
        1,
    ));
    fake.push(Reply::text("Printed sk-telemetry-secret-0123456789."));
    let tables = format!(
        "[log]\nformat = \"json\"\n[telemetry]\nendpoint = \"http://{}\"\n",
        receiver.addr
    );
    // Every line the service writes, the debug ones too.
    let debug = [("OPENVAALA_LOG", "debug")];
    let server = Server::start_with(keeping_a_secret(&fake, &tables, &debug)).await;
    server.create_and_wait("Print my key").await;
    let log = server.wait_for_log("turn ended").await;
    let spans = receiver
        .until(|spans| spans.iter().any(|span| span.name == "invoke_agent default"))
        .await;
    let turn = spans
        .iter()
        .find(|span| span.name == "invoke_agent default")
        .unwrap();
    let mut ended = None;
    for line in log.lines().filter(|line| line.starts_with('{')) {
        let parsed: Value =
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        assert!(
            parsed["timestamp"].is_string() && parsed["level"].is_string(),
            "{line}"
        );
        if parsed["message"] == "turn ended" {
            ended = Some(parsed);
        }
    }
    let ended = ended.unwrap_or_else(|| panic!("no turn ended line: {log}"));
    assert_eq!(ended["fields"]["status"], "completed", "{ended}");
    // The line leads to its trace: the turn's span.
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(ended["trace_id"], hex(&turn.trace_id), "{ended}");
    assert_eq!(ended["span_id"], hex(&turn.span_id), "{ended}");
    assert!(
        !log.contains("sk-telemetry-secret"),
        "a secret was logged:\n{log}"
    );
}
