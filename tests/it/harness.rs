//! The test harness: runs the real `openvaala` binary on an ephemeral port with a temporary
//! data directory, and talks to it like a client (HTTP + SSE). Everything waits on events with
//! a timeout; nothing sleeps to let something happen.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::{Stream, StreamExt};
use openvaala::model::wire::sse_events;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const TIMEOUT: Duration = Duration::from_secs(20);

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_openvaala")
}

/// The local token of each running test server by its base URL, so that a client the tests
/// start (`openvaala send --url …`) can be given it as any client would be.
static TOKENS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// The token the server at `url` (its base, or a URL under it) accepts.
pub fn token_for(url: &str) -> Option<String> {
    TOKENS
        .lock()
        .unwrap()
        .iter()
        .rev()
        // An address may come without its scheme (`127.0.0.1:PORT`).
        .find(|(base, _)| {
            url.starts_with(base.as_str()) || url.starts_with(base.trim_start_matches("http://"))
        })
        .map(|(_, token)| token.clone())
}

/// A client command for the server at `url`, with its token in `OPENVAALA_TOKEN`.
pub fn with_token(command: &mut Command, url: &str) {
    if let Some(token) = token_for(url) {
        command.env("OPENVAALA_TOKEN", token);
    }
}

/// A running server process.
pub struct Server {
    pub base: String,
    /// The token its API wants: the data directory's local token, or the one the test set.
    pub token: String,
    pub data_dir: PathBuf,
    pub child: Child,
    pub client: reqwest::Client,
    /// Every line the server logged after it started serving.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _temp: Option<tempfile::TempDir>,
}

#[derive(Default)]
pub struct ServerOptions {
    pub data_dir: Option<PathBuf>,
    pub config: Option<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Where to listen (default: a free port of 127.0.0.1 chosen by the server).
    pub addr: Option<String>,
    /// The open-file limit (soft and hard) the server runs under, as `ulimit -n` would set it.
    pub open_files: Option<u64>,
    /// `OPENVAALA_TOKEN` for the server, which the harness's client then sends with every call.
    pub token: Option<String>,
}

impl Server {
    pub async fn start() -> Server {
        Server::start_with(ServerOptions::default()).await
    }

    pub async fn start_in(data_dir: &Path) -> Server {
        Server::start_with(ServerOptions {
            data_dir: Some(data_dir.to_owned()),
            ..ServerOptions::default()
        })
        .await
    }

    pub async fn start_with(options: ServerOptions) -> Server {
        let (temp, data_dir) = match options.data_dir {
            Some(dir) => (None, dir),
            None => {
                let temp = tempfile::tempdir().expect("temp dir");
                let dir = temp.path().join("data");
                (Some(temp), dir)
            }
        };
        std::fs::create_dir_all(&data_dir).unwrap();
        let config_path = data_dir.with_extension("config.toml");
        let mut command = Command::new(binary());
        command
            .arg("serve")
            .arg("--addr")
            .arg(options.addr.as_deref().unwrap_or("127.0.0.1:0"))
            .arg("--data-dir")
            .arg(&data_dir)
            .env("OPENVAALA_CONFIG", &config_path)
            .env("OPENVAALA_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        match &options.config {
            Some(config) => std::fs::write(&config_path, config).unwrap(),
            // An empty config file means the built-in defaults, without reading the user's.
            None => std::fs::write(&config_path, "").unwrap(),
        }
        if let Some(cwd) = &options.cwd {
            command.current_dir(cwd);
        } else {
            // Beside the data directory, not holding it: a conversation may not work in a
            // directory that holds the service's state.
            let work = data_dir.parent().unwrap().join("work");
            std::fs::create_dir_all(&work).unwrap();
            command.current_dir(work);
        }
        for (key, value) in &options.env {
            command.env(key, value);
        }
        if let Some(limit) = options.open_files {
            limit_open_files(&mut command, limit);
        }
        if let Some(token) = &options.token {
            command.env("OPENVAALA_TOKEN", token);
        }
        let mut child = command.spawn().expect("spawn openvaala");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let base = tokio::time::timeout(TIMEOUT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.split("serving on ").nth(1) {
                    return url.trim().to_owned();
                }
                eprintln!("server: {line}");
            }
            panic!("the server exited before serving");
        })
        .await
        .expect("the server did not start in time");
        // Keep draining stderr so the server never blocks on a full pipe.
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("server: {line}");
                kept.lock().unwrap().push(line);
            }
        });
        // The service made its local token before it served.
        let token = options.token.clone().unwrap_or_else(|| {
            std::fs::read_to_string(data_dir.join("local-token"))
                .expect("the service's local token")
                .trim()
                .to_owned()
        });
        TOKENS.lock().unwrap().push((base.clone(), token.clone()));
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        let client = openvaala::tls::client_builder().default_headers(headers);
        Server {
            base,
            token,
            data_dir,
            child,
            client: client.build().unwrap(),
            log,
            _temp: temp,
        }
    }

    /// Waits until the server has logged a line holding `needle`; answers the whole log.
    pub async fn wait_for_log(&self, needle: &str) -> String {
        tokio::time::timeout(TIMEOUT, async {
            loop {
                let log = self.log.lock().unwrap().join("\n");
                if log.contains(needle) {
                    return log;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the server never logged {needle:?}"))
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = self.client.get(self.url(path)).send().await.unwrap();
        read(response).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        read(response).await
    }

    pub async fn post_with_key(&self, path: &str, body: Value, key: &str) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
            .await
            .unwrap();
        read(response).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .patch(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        read(response).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        let response = self.client.delete(self.url(path)).send().await.unwrap();
        read(response).await
    }

    /// Creates a conversation and waits until its first turn has ended.
    pub async fn create_and_wait(&self, text: &str) -> Value {
        let (status, body) = self
            .post("/api/conversations", json!({ "text": text }))
            .await;
        assert_eq!(status, 201, "{body}");
        let id = body["conversation"]["id"].as_str().unwrap().to_owned();
        self.wait_idle(&id).await;
        body
    }

    /// Sends a message to a conversation (202) and waits until its turn has ended.
    pub async fn send_and_wait(&self, id: &str, text: &str) {
        let (status, body) = self
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": text }),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        self.wait_idle(id).await;
    }

    /// Waits until a conversation has no running turn, following its event stream.
    pub async fn wait_idle(&self, id: &str) {
        let mut events = self.events(id).await;
        tokio::time::timeout(TIMEOUT, async {
            while let Some((kind, data)) = events.next().await {
                let status = match kind.as_str() {
                    "snapshot" | "conversation.updated" => &data["conversation"]["status"],
                    _ => continue,
                };
                if status == "idle" {
                    return;
                }
            }
            panic!("the event stream ended before the conversation was idle");
        })
        .await
        .expect("the conversation did not become idle in time");
    }

    /// Waits until the server's background index work (a fork's search rows, conversations
    /// to re-index after a failed update) is done.
    pub async fn wait_index_settled(&self) {
        let settled = tokio::time::timeout(TIMEOUT, async {
            loop {
                let (_, health) = self.get("/api/health").await;
                if health["index_jobs_pending"] == 0 && health["index_repairs_pending"] == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            settled.is_ok(),
            "background index work did not finish in time"
        );
    }

    /// The conversation's event stream as (event type, data) pairs.
    pub async fn events(&self, id: &str) -> impl Stream<Item = (String, Value)> + Unpin + use<> {
        self.events_from(&format!("/api/conversations/{id}/events"), None)
            .await
    }

    pub async fn events_from(
        &self,
        path: &str,
        last_event_id: Option<&str>,
    ) -> impl Stream<Item = (String, Value)> + Unpin + use<> {
        self.raw_events(path, last_event_id)
            .await
            .map(|(_, kind, data)| (kind, data))
    }

    /// Events with their ids: (id, type, data).
    pub async fn raw_events(
        &self,
        path: &str,
        last_event_id: Option<&str>,
    ) -> impl Stream<Item = (String, String, Value)> + Unpin + use<> {
        let mut request = self.client.get(self.url(path));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "event stream {path}");
        // Every block the service sends has an id, a type and JSON data; keep-alive comments
        // are not blocks. (eventsource-stream, fed pieces of a few KB by `sse_events`.)
        Box::pin(sse_events(response.bytes_stream()).map(|event| {
            let event = event.expect("a well-formed SSE event");
            let data = serde_json::from_str(&event.data).expect("JSON event data");
            assert!(!event.id.is_empty(), "an event id: {event:?}");
            (event.id, event.event, data)
        }))
    }

    pub fn conversation_dir(&self, id: &str) -> PathBuf {
        self.data_dir.join("conversations").join(id)
    }

    /// Stops the server with SIGKILL, as a crash would.
    pub async fn kill9(mut self) -> PathBuf {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
        let dir = self.data_dir.clone();
        if let Some(temp) = self._temp.take() {
            // Keep the directory for the restart.
            let _ = temp.keep();
        }
        dir
    }

    /// Stops this one server gracefully with SIGTERM (what `serve stop` sends), as when one
    /// instance of a cluster stops and the others go on.
    pub async fn terminate(self) -> PathBuf {
        let pid = self.child.id().expect("a running server") as i32;
        // SAFETY: kill(2) on our own child's pid with a valid signal.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        self.stopped().await
    }

    /// Stops the server gracefully through `openvaala serve stop`.
    pub async fn stop(self) -> PathBuf {
        let output = Command::new(binary())
            .args(["serve", "stop", "--data-dir"])
            .arg(&self.data_dir)
            .output()
            .await
            .unwrap();
        assert!(output.status.success(), "serve stop: {output:?}");
        self.stopped().await
    }

    /// Waits for a server told to stop to exit cleanly; keeps its data directory.
    async fn stopped(mut self) -> PathBuf {
        let status = tokio::time::timeout(TIMEOUT, self.child.wait())
            .await
            .expect("the server did not exit")
            .unwrap();
        assert!(status.success(), "the server exited with {status}");
        let dir = self.data_dir.clone();
        if let Some(temp) = self._temp.take() {
            let _ = temp.keep();
        }
        dir
    }
}

/// Runs the command under an open-file limit (soft and hard, so the server cannot raise it).
fn limit_open_files(command: &mut Command, limit: u64) {
    // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            let value = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &value) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

pub async fn read(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"))
    };
    (status, body)
}

/// Runs `openvaala reindex` on a data directory; returns (success, stdout + stderr).
pub async fn reindex(data_dir: &Path) -> (bool, String) {
    on_data_dir("reindex", data_dir).await
}

/// Runs `openvaala <command> --data-dir <data_dir>`; returns (success, stdout + stderr).
pub async fn on_data_dir(command: &str, data_dir: &Path) -> (bool, String) {
    with_data_dir(&[command], data_dir).await
}

/// Runs `openvaala <args…> --data-dir <data_dir>`; returns (success, stdout + stderr).
/// What `openvaala serve` says when it refuses to start with the config file `config`: its
/// stderr (the test fails if it starts).
pub async fn serve_refuses(config: &str) -> String {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("config.toml");
    std::fs::write(&path, config).unwrap();
    let output = Command::new(binary())
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(temp.path().join("data"))
        .env("OPENVAALA_CONFIG", &path)
        .output()
        .await
        .unwrap();
    assert!(!output.status.success(), "it started with:\n{config}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub async fn with_data_dir(args: &[&str], data_dir: &Path) -> (bool, String) {
    let output = Command::new(binary())
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Every file under a directory with its bytes, for "nothing changed on disk" checks.
/// Makes the JSON list `key` of the file at `path` hold `count` copies of its first record,
/// each made distinct by `vary` (with its number): a store at its limit without `count`
/// requests. Returns the file's new text.
pub fn fill_list(path: &Path, key: &str, count: usize, vary: impl Fn(&mut Value, usize)) -> String {
    let mut kept: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let first = kept[key][0].clone();
    let records: Vec<Value> = (0..count)
        .map(|n| {
            let mut record = first.clone();
            vary(&mut record, n);
            record
        })
        .collect();
    kept[key] = json!(records);
    let text = serde_json::to_string(&kept).unwrap();
    std::fs::write(path, &text).unwrap();
    text
}

pub fn snapshot_dir(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// The conversation files only (the index is allowed to change, e.g. its WAL).
pub fn snapshot_conversations(data_dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    snapshot_dir(&data_dir.join("conversations"))
}

/// Whether a process exists and is not a zombie. A killed process whose parent is gone (a
/// crashed server) stays a zombie until its new parent reaps it: dead, so it does not count.
/// The processes alive (as this test sees them) whose command line holds `marker`. A
/// sandboxed command runs in a PID namespace of its own and knows only its pids there, so a
/// test finds its processes by something unique in their arguments (`sleep 300.17`).
pub fn pids_running(marker: &str) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|&pid: &i32| pid != std::process::id() as i32)
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
        })
        .filter(|&pid| process_alive(pid))
        .collect();
    pids.sort_unstable();
    pids
}

pub fn process_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// Sends `signal` to `pid`, a process the test started.
pub fn signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) on our own child's pid with a valid signal.
    unsafe {
        libc::kill(pid, signal);
    }
}
