//! Reading and searching files through a turn: `read_file` with an offset and a limit, and an
//! image read that goes to the model as an image; `grep` in each output mode, which leaves a
//! `.gitignore`d file out and redacts a configured secret a file holds; `glob`. The model is
//! the fake provider; what is checked is the tool items' stored outputs and what the next
//! request carries.

use std::path::Path;

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Setup, TurnRun, Wire};
use crate::harness::{Server, ServerOptions};

const WIRE: Wire = Wire::OpenaiChat;
/// The provider's key: a file holding it must come back redacted.
const KEY: &str = "vaala-search-key-5e8d2c71b4a9";
/// A 1×1 PNG (one red pixel).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\
    \x89\0\0\0\x0dIDAT\x78\x9c\x63\xf8\xcf\xc0\xf0\x1f\0\x05\0\x01\xff\x89\x99\x3d\x1d\0\0\0\0IEND\
    \xae\x42\x60\x82";

fn seed(dir: &Path) {
    let files: Vec<(&str, Vec<u8>)> = vec![
        (
            "notes.txt",
            (1..=10)
                .map(|n| format!("line {n}\n"))
                .collect::<String>()
                .into_bytes(),
        ),
        ("src/main.rs", b"fn main() {\n    needle();\n}\n".to_vec()),
        ("src/lib.rs", b"pub fn needle() {}\n".to_vec()),
        (".gitignore", b"build/\n".to_vec()),
        (
            "build/generated.rs",
            b"fn needle_in_ignored() {}\n".to_vec(),
        ),
        (
            "settings.toml",
            format!("api_key = \"{KEY}\" # needle\n").into_bytes(),
        ),
        ("logo.png", PNG.to_vec()),
    ];
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

/// The service working in `project`, its default agent with the reading tools, the provider's
/// key configured (a secret to redact), and a conversation whose first turn has ended.
async fn start(project: &Path) -> Setup {
    let fake = FakeProvider::start(WIRE).await;
    let config = fake
        .config_with(r#"api_key_env = "FAKE_PROVIDER_KEY""#)
        .replace(
            "tools = [\"shell\"]",
            "tools = [\"read_file\", \"grep\", \"glob\"]",
        );
    let server = Server::start_with(ServerOptions {
        config: Some(config),
        env: vec![("FAKE_PROVIDER_KEY".to_owned(), KEY.to_owned())],
        cwd: Some(project.to_path_buf()),
        ..ServerOptions::default()
    })
    .await;
    fake.push(Reply::text("Ready."));
    let created = server.create_and_wait("Hello").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    Setup { fake, server, id }
}

/// Runs one turn in which the model calls each tool in turn, then answers.
async fn run_calls(setup: &Setup, calls: &[(&str, Value)]) -> TurnRun {
    for (name, arguments) in calls {
        setup
            .fake
            .push(Reply::tool_call(name, arguments.clone(), 1));
    }
    setup.fake.push(Reply::text("Done."));
    let turn = setup.turn("Look around.").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    turn
}

/// The turn's completed tool calls' outputs, in order, each checked to be what the model got.
fn outputs(turn: &TurnRun) -> Vec<String> {
    let calls = turn.completed("tool_call");
    let last = &turn.requests.last().unwrap().body;
    calls
        .iter()
        .map(|call| {
            assert_eq!(call["status"], "completed", "{call}");
            let output = call["output"].as_str().unwrap().to_owned();
            let sent = WIRE
                .tool_result(last, call["call_id"].as_str().unwrap())
                .unwrap_or_else(|| panic!("no result for {call} in {last}"));
            assert_eq!(sent, output);
            output
        })
        .collect()
}

#[tokio::test]
async fn read_grep_and_glob_through_a_turn() {
    let project = tempfile::tempdir().unwrap();
    seed(project.path());
    let setup = start(project.path()).await;
    let turn = run_calls(
        &setup,
        &[
            ("read_file", json!({"path": "notes.txt", "offset": 4, "limit": 3})),
            ("grep", json!({"pattern": "needle"})),
            ("grep", json!({"pattern": "needle", "output_mode": "content"})),
            ("grep", json!({"pattern": "NEEDLE", "case_insensitive": true, "output_mode": "count"})),
            (
                "grep",
                json!({"pattern": "needle", "output_mode": "content", "glob": "src/*.rs", "context": 1}),
            ),
            ("glob", json!({"pattern": "**/*.rs"})),
        ],
    )
    .await;
    let outputs = outputs(&turn);
    assert_eq!(outputs.len(), 6);
    assert_eq!(
        outputs[0],
        "     4\tline 4\n     5\tline 5\n     6\tline 6\n[... 4 more lines: call read_file with \
         offset=7 to read on ...]"
    );
    // The ignored file stays out; the secret is redacted, the rest of its line kept.
    assert_eq!(outputs[1], "settings.toml\nsrc/lib.rs\nsrc/main.rs");
    assert_eq!(
        outputs[2],
        "settings.toml:1:api_key = \"[redacted]\" # needle\nsrc/lib.rs:1:pub fn needle() {}\n\
         src/main.rs:2:    needle();"
    );
    assert_eq!(outputs[3], "settings.toml:1\nsrc/lib.rs:1\nsrc/main.rs:1");
    assert_eq!(
        outputs[4],
        "src/lib.rs:1:pub fn needle() {}\n--\nsrc/main.rs-1-fn main() {\n\
         src/main.rs:2:    needle();\nsrc/main.rs-3-}"
    );
    let mut found: Vec<&str> = outputs[5].lines().collect();
    found.sort_unstable();
    assert_eq!(found, ["src/lib.rs", "src/main.rs"]);
    // Nothing the service stored holds the key.
    let items = serde_json::to_string(&setup.items().await).unwrap();
    assert!(!items.contains(KEY));
    assert!(!items.contains("needle_in_ignored"));
}

#[tokio::test]
async fn bad_calls_fail_with_a_clear_result() {
    let project = tempfile::tempdir().unwrap();
    seed(project.path());
    let setup = start(project.path()).await;
    for (name, arguments, says) in [
        (
            "read_file",
            json!({"path": "notes.txt", "offset": 11}),
            "offset 11 is past the end of notes.txt, which has 10 lines",
        ),
        ("grep", json!({"pattern": "fn ("}), "invalid regex `fn (`: "),
        (
            "glob",
            json!({"pattern": "src/[x"}),
            "invalid glob `src/[x`: ",
        ),
        (
            "grep",
            json!({"pattern": "x", "path": "nowhere"}),
            "no such file or directory: nowhere",
        ),
    ] {
        setup.fake.push(Reply::tool_call(name, arguments, 1));
        setup.fake.push(Reply::text("Noted."));
        let turn = setup.turn("Try it.").await;
        let calls = turn.completed("tool_call");
        assert_eq!(calls.len(), 1, "{:?}", turn.events);
        assert_eq!(calls[0]["status"], "failed", "{}", calls[0]);
        let output = calls[0]["output"].as_str().unwrap();
        assert!(
            output.starts_with(says),
            "{output} should start with {says}"
        );
    }
}

#[tokio::test]
async fn an_image_read_reaches_the_model_as_an_image() {
    let project = tempfile::tempdir().unwrap();
    seed(project.path());
    let setup = start(project.path()).await;
    let turn = run_calls(&setup, &[("read_file", json!({"path": "logo.png"}))]).await;
    let calls = turn.completed("tool_call");
    let call = calls[0];
    assert_eq!(call["output"], "[image: image/png, 1x1, 70 bytes]");
    let images = call["images"].as_array().expect("the call's images");
    assert_eq!(images.len(), 1, "{call}");
    assert_eq!(images[0]["media_type"], "image/png");
    let data = images[0]["data"].as_str().unwrap();
    use base64::Engine as _;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
        PNG
    );
    // A tool message holds text only: the image follows in a user message naming the call.
    let next = &turn.requests.last().unwrap().body;
    let call_id = call["call_id"].as_str().unwrap();
    let sent = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| {
            message["role"] == "user"
                && message["content"][0]["text"]
                    .as_str()
                    .is_some_and(|text| text.contains(call_id))
        })
        .flat_map(|message| message["content"].as_array().into_iter().flatten())
        .find_map(|part| part["image_url"]["url"].as_str())
        .unwrap_or_else(|| panic!("no image with the result in {next}"));
    assert_eq!(sent, format!("data:image/png;base64,{data}"));
}
