//! The ways out of the sandbox an outside audit found, with the model's tool calls written by
//! an attacker, each tried again and each closed: the network by another protocol, the
//! service's own API, the service's process and environment, its data directory, processes
//! that outlive their call, resources without limit, command MCP servers, looser sub-agents,
//! and writes redirected by a symlink swapped in at the right moment.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::checkpoints::{create, seed, write};
use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::sandbox::{listener_and_connect, output, outside_dir, shell, start, start_with};
use crate::support::{items, session_items};

/// A Python script that tries every way to reach `PORT` (the service's) and the host: one line
/// per try, `NAME refused …` or `NAME OPEN`.
pub(crate) const NETWORK_PROBE: &str = r#"
import socket, sys
port, udp_port = int(sys.argv[1]), int(sys.argv[2])
def attempt(name, make):
    try:
        make()
        print(name, "OPEN")
    except Exception as error:
        print(name, "refused", type(error).__name__)
def connect(family, kind, proto, address):
    s = socket.socket(family, kind, proto)
    s.settimeout(2)
    s.connect(address)
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("127.0.0.1", udp_port))
    s.settimeout(0.5)
    s.recv(10)
attempt("tcp", lambda: connect(socket.AF_INET, socket.SOCK_STREAM, 0, ("127.0.0.1", port)))
attempt("mptcp", lambda: connect(socket.AF_INET, socket.SOCK_STREAM, 262, ("127.0.0.1", port)))
attempt("ipv6", lambda: connect(socket.AF_INET6, socket.SOCK_STREAM, 0, ("::1", port)))
attempt("udp", udp)
attempt("udp_out", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("192.0.2.1", 53)))
attempt("sctp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
attempt("icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP).sendto(b"\x08\0\0\0\0\0\0\0", ("127.0.0.1", 0)))
attempt("abstract", lambda: socket.socket(socket.AF_UNIX).connect("\0openvaala-escape-test"))
attempt("vsock", lambda: socket.socket(40, socket.SOCK_STREAM))
"#;

pub(crate) fn port_of(server: &Server) -> u16 {
    server.base.rsplit(':').next().unwrap().parse().unwrap()
}

/// The lines of the probe's output, as (try, verdict).
pub(crate) fn verdicts(output: &str) -> Vec<(String, String)> {
    output
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?.to_owned(), words.next()?.to_owned()))
        })
        .collect()
}

#[tokio::test]
async fn with_the_network_off_nothing_is_reached_by_any_protocol() {
    let server = start("").await;
    let workspace = outside_dir();
    std::fs::write(workspace.path().join("probe.py"), NETWORK_PROBE).unwrap();
    // What the command would reach on the host: a UDP socket and an abstract UNIX socket.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    use std::os::linux::net::SocketAddrExt;
    let abstract_name =
        std::os::unix::net::SocketAddr::from_abstract_name(b"openvaala-escape-test").unwrap();
    let unix = std::os::unix::net::UnixListener::bind_addr(&abstract_name).unwrap();
    unix.set_nonblocking(true).unwrap();

    let command = format!(
        "python3 probe.py {} {}",
        port_of(&server),
        udp.local_addr().unwrap().port()
    );
    let tool = shell(&server, workspace.path(), &command).await;
    let verdicts = verdicts(output(&tool));
    let names: Vec<&str> = verdicts.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "tcp", "mptcp", "ipv6", "udp", "udp_out", "sctp", "raw", "packet", "icmp", "abstract",
            "vsock"
        ],
        "{tool}"
    );
    for (name, verdict) in &verdicts {
        assert_eq!(verdict, "refused", "{name}: {tool}");
    }
    // Nothing arrived on the host's side either.
    let mut buffer = [0u8; 16];
    assert_eq!(
        udp.recv(&mut buffer).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(unix.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
}

#[tokio::test]
async fn a_tool_cannot_use_the_service_api_even_with_the_network_on() {
    let server = start("network = true").await;
    // Named tokens and push keys sit beside the local token: none may be read either.
    let (ok, made) =
        crate::harness::with_data_dir(&["token", "add", "kept"], &server.data_dir).await;
    assert!(ok, "{made}");
    let workspace = outside_dir();
    let script = format!(
        r#"
import os, socket, urllib.request, urllib.error
base = "{base}"
def call(method, path, body=None):
    request = urllib.request.Request(base + path, method=method, data=body,
        headers={{"content-type": "application/json"}})
    try:
        print(method, path, urllib.request.urlopen(request, timeout=5).status)
    except urllib.error.HTTPError as error:
        print(method, path, error.code)
call("POST", "/api/conversations", b'{{"text": "/shell id"}}')
call("POST", "/api/approvals/a_0", b'{{"decision": "allow"}}')
call("DELETE", "/api/rules/r_0")
call("GET", "/api/conversations")
call("POST", "/metrics", b"")
call("POST", "/api/pair", b'{{"code": "00000000000000000000000000000000"}}')
call("GET", "/api/push/key")
# The metrics are open on loopback, for a scraper: they must hold nothing of a conversation.
try:
    open("metrics.txt", "w").write(urllib.request.urlopen(base + "/metrics", timeout=5).read().decode())
except Exception as error:
    print("metrics", type(error).__name__)
for path in ["{token_file}", "{data}/tokens.json", "{data}/push-vapid-key", "/proc/1/environ"]:
    try:
        print(path, "read", len(open(path).read()))
    except OSError as error:
        print(path, "unreadable", type(error).__name__)
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
    print("mptcp open")
except OSError:
    print("mptcp refused")
"#,
        base = server.base,
        token_file = server.data_dir.join("local-token").display(),
        data = server.data_dir.display(),
    );
    std::fs::write(workspace.path().join("api.py"), script).unwrap();
    let tool = shell(
        &server,
        workspace.path(),
        "python3 api.py; env | grep -ci token",
    )
    .await;
    let out = output(&tool);
    for expected in [
        "POST /api/conversations 401",
        "POST /api/approvals/a_0 401",
        "DELETE /api/rules/r_0 401",
        "GET /api/conversations 401",
        "POST /metrics 405",
        "POST /api/pair 401",
        "GET /api/push/key 401",
        "local-token unreadable",
        "tokens.json unreadable",
        "push-vapid-key unreadable",
        "mptcp refused",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
    assert!(!out.contains(&server.token), "{out}");
    // `env | grep -ci token`: no variable of the tool's names a token.
    assert!(out.trim_end().ends_with('0'), "{out}");
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1, "{list}");
    let metrics = std::fs::read_to_string(workspace.path().join("metrics.txt")).unwrap();
    assert!(
        metrics.contains("openvaala_http_requests_total"),
        "{metrics}"
    );
    let id = list["conversations"][0]["id"].as_str().unwrap();
    for private in [id, server.token.as_str(), KEY_FRAGMENT, "/shell"] {
        assert!(!metrics.contains(private), "{private} in the metrics");
    }
}

#[tokio::test]
async fn the_service_is_out_of_sight_and_reach_and_its_state_hidden() {
    let server = start("").await;
    let workspace = outside_dir();
    let first = shell(&server, workspace.path(), "echo first").await;
    assert_eq!(output(&first), "first\n");
    let service = server.child.id().unwrap();
    let data = server.data_dir.canonicalize().unwrap();
    let command = format!(
        "kill -9 $PPID; echo ppid=$?; kill -9 {service}; echo service=$?; \
         cat /proc/$PPID/environ /proc/{service}/environ; echo environ=$?; \
         ls /proc | grep -c '^[0-9]'; ls -A {data}; cat {data}/conversations/*/metadata.jsonl; \
         echo metadata=$?; echo planted > {data}/rules.jsonl; echo plant=$?",
        data = data.display()
    );
    let tool = shell(&server, workspace.path(), &command).await;
    let out = output(&tool);
    for expected in ["ppid=1", "service=1", "environ=1", "metadata=1", "plant=2"] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
    assert!(!out.contains(KEY_FRAGMENT), "{out}");
    // The PID namespace holds the launcher's init, the shell and `ls` at most.
    let processes: usize = out
        .lines()
        .find_map(|line| line.trim().parse().ok())
        .unwrap();
    assert!(processes <= 4, "{out}");
    assert!(!data.join("rules.jsonl").exists());
    let (status, _) = server.get("/api/health").await;
    assert_eq!(status, 200, "the service lives on");
}

/// A piece of the provider key `sandbox::start` sets.
const KEY_FRAGMENT: &str = "vaala-sandbox-key";

#[tokio::test]
async fn everything_a_call_started_ends_with_it_setsid_or_not() {
    let server = start("").await;
    let workspace = outside_dir();
    let tool = shell(
        &server,
        workspace.path(),
        "setsid sleep 31337 & nohup sleep 31338 >/dev/null 2>&1 & (setsid sh -c 'sleep 31339' &); echo started",
    )
    .await;
    assert_eq!(output(&tool), "started\n", "{tool}");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("cmdline")).ok())
        .filter(|cmdline| cmdline.contains("3133"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "processes outlived their call");
}

#[tokio::test]
async fn limits_stop_a_fork_bomb_a_memory_bomb_and_a_disk_filler() {
    let server = start_with(
        "[agents.default.limits]\nprocesses = 300\nmemory_mb = 256\nfile_size_mb = 10",
        "[tools]\nshell_timeout_s = 4",
    )
    .await;
    let workspace = outside_dir();
    // The fork bomb runs until the call's timeout (or until the shell itself cannot fork its
    // `sleep`); meanwhile another conversation is served.
    let (status, bomb) = server
        .post(
            "/api/conversations",
            json!({ "text": "/shell bomb() { bomb | bomb & }; bomb; sleep 10", "cwd": workspace.path() }),
        )
        .await;
    assert_eq!(status, 201, "{bomb}");
    let other = shell(&server, workspace.path(), "echo still served").await;
    assert_eq!(output(&other), "still served\n");
    let id = bomb["conversation"]["id"].as_str().unwrap();
    server.wait_idle(id).await;
    let tool = items(&server, id)
        .await
        .into_iter()
        .find(|item| item["kind"] == "tool_call")
        .unwrap();
    assert_eq!(tool["status"], "failed", "{tool}");
    assert!(
        output(&tool)
            .ends_with("[the command reached its limit of 300 processes (limits.processes)]"),
        "{tool}"
    );

    let tool = shell(
        &server,
        workspace.path(),
        "python3 -c 'b = bytearray(1 << 30)'",
    )
    .await;
    assert_eq!(tool["status"], "failed", "{tool}");
    assert!(output(&tool).contains("MemoryError"), "{tool}");
    assert!(
        output(&tool).ends_with("memory limit of 256 MiB per process (limits.memory_mb)]"),
        "{tool}"
    );

    let tool = shell(
        &server,
        workspace.path(),
        "head -c 50000000 /dev/zero > big.bin",
    )
    .await;
    assert_eq!(tool["status"], "failed", "{tool}");
    assert!(
        output(&tool)
            .ends_with("[stopped: a file reached the size limit of 10 MiB (limits.file_size_mb)]"),
        "{tool}"
    );
    assert_eq!(
        std::fs::metadata(workspace.path().join("big.bin"))
            .unwrap()
            .len(),
        10 << 20
    );
}

#[tokio::test]
async fn raw_sockets_and_new_namespaces_are_refused_with_the_network_on_too() {
    let server = start("network = true").await;
    let workspace = outside_dir();
    let tool = shell(
        &server,
        workspace.path(),
        "unshare -n true; echo net=$?; unshare -Ur true; echo user=$?; \
         python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)' 2>/dev/null; \
         echo raw=$?",
    )
    .await;
    let out = output(&tool);
    for expected in ["net=1", "user=1", "raw=1"] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
}

#[tokio::test]
async fn command_mcp_servers_run_in_the_sandbox_unless_the_config_says_off() {
    let outside = outside_dir();
    let target = |name: &str| outside.path().join(name);
    let server_table = |name: &str, extra: &str| {
        format!(
            "[mcp.{name}]\ncommand = \"sh\"\nargs = [\"-c\", \"echo planted > {}\"]\n{extra}\n",
            target(name).display()
        )
    };
    let config = format!(
        "{}{}",
        server_table("boxed", ""),
        server_table("trusted", "sandbox = \"off\"")
    );
    let server = start_with("mcp = [\"boxed\", \"trusted\"]", &config).await;
    let workspace = outside_dir();
    // A turn lists the agent's servers, which starts them; neither speaks MCP, so both fail
    // after what they did.
    shell(&server, workspace.path(), "true").await;
    assert!(
        !target("boxed").exists(),
        "the sandboxed server wrote outside"
    );
    assert_eq!(
        std::fs::read_to_string(target("trusted")).unwrap(),
        "planted\n"
    );
    let (_, mcp) = server.get("/api/mcp").await;
    let boxed = mcp["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["name"] == "boxed")
        .unwrap()
        .clone();
    assert_eq!(boxed["state"], "failed", "{mcp}");

    // A client may not name a command server, unless the agent lets it; then it is sandboxed.
    let named = json!({ "named": { "command": "sh", "args": ["-c", format!("echo planted > {}", target("named").display())] } });
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({ "text": "/shell true", "cwd": workspace.path(), "mcp": named }),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("client_mcp = true"),
        "{body}"
    );
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({ "text": "/shell true", "cwd": workspace.path(), "mcp": { "x": { "command": "sh", "sandbox": "off" } } }),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only the service's config file"),
        "{body}"
    );
    drop(server);
    let server = start("client_mcp = true").await;
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({ "text": "/shell true", "cwd": workspace.path(), "mcp": named }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    server
        .wait_idle(body["conversation"]["id"].as_str().unwrap())
        .await;
    assert!(!target("named").exists(), "a client's server wrote outside");
}

#[tokio::test]
async fn a_sub_agent_is_never_looser_than_its_parent() {
    let (_listener, connect) = listener_and_connect();
    let server = start_with(
        "tools = [\"shell\", \"spawn_agent\"]\nspawnable = [\"loose\"]\n\
         [agents.default.permissions.shell_rules]\n\"rm *\" = \"deny\"",
        "[agents.loose]\ndescription = \"no sandbox\"\nmodel = \"demo\"\nsandbox = \"off\"\n\
         network = true\n\n[agents.other]\ndescription = \"not spawnable\"\nmodel = \"demo\"\n",
    )
    .await;
    let workspace = outside_dir();
    std::fs::write(workspace.path().join("victim.txt"), "keep").unwrap();
    let outside = outside_dir();
    let text = format!(
        "/spawn loose: /shell rm victim.txt\n/spawn loose: /shell {connect}\n\
         /spawn loose: /shell echo x > {}/escaped\n/spawn other: /shell id",
        outside.path().display()
    );
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": text, "cwd": workspace.path() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    server.wait_idle(id).await;
    let root: Vec<Value> = items(&server, id).await;
    let spawns: Vec<&Value> = root
        .iter()
        .filter(|item| item["kind"] == "tool_call" && item["name"] == "spawn_agent")
        .collect();
    assert_eq!(spawns.len(), 4, "{root:?}");
    let refused = spawns
        .iter()
        .find(|call| call["arguments"]["agent"] == "other")
        .unwrap();
    assert!(
        output(refused).contains("may not be started from here"),
        "{refused}"
    );

    let (_, sessions) = server
        .get(&format!("/api/conversations/{id}/sessions"))
        .await;
    let mut outputs = String::new();
    for session in sessions["sessions"].as_array().unwrap().iter().skip(1) {
        let session_id = session["id"].as_str().unwrap();
        server.wait_idle(id).await;
        for item in session_items(&server, id, session_id).await {
            if item["kind"] == "tool_call" {
                outputs.push_str(&format!("{}\n", item["output"]));
            }
        }
    }
    assert!(
        std::fs::read_to_string(workspace.path().join("victim.txt")).is_ok(),
        "{outputs}"
    );
    assert!(outputs.contains("denied"), "{outputs}");
    assert!(!outputs.contains("connected"), "{outputs}");
    assert!(!outside.path().join("escaped").exists(), "{outputs}");
}

#[tokio::test]
async fn write_file_racing_a_symlink_swap_never_lands_outside() {
    racing_a_symlink_swap(|path| write(path, "x")).await;
}

#[tokio::test]
async fn an_edit_racing_a_symlink_swap_never_lands_outside() {
    // An empty `old_string` creates the file: the edit tools' own write path.
    racing_a_symlink_swap(|path| {
        Reply::tool_call(
            "edit_file",
            json!({"path": path, "old_string": "", "new_string": "x"}),
            1,
        )
    })
    .await;
}

/// 80 calls, each creating `d/f<n>.txt` with `call(path)`, while `d` is swapped between a
/// directory and a link to the outside: every file lands inside or its call is refused.
async fn racing_a_symlink_swap(call: impl Fn(&str) -> Reply) {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = crate::checkpoints::config(&fake, "");
    let server = Server::start_with(ServerOptions {
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    let workspace = outside_dir();
    let outside = outside_dir();
    let dir = workspace.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    // Swaps `d` between a directory and a link to the outside for as long as the turn runs.
    let swapper = Swapper::start(&dir, outside.path());
    let writes: Vec<Reply> = (0..80).map(|n| call(&format!("d/f{n}.txt"))).collect();
    let (id, _) = create(&server, &fake, workspace.path(), writes).await;
    let swaps = swapper.stop();
    assert!(swaps > 80, "the swapper ran ({swaps} swaps)");
    let calls: Vec<Value> = items(&server, &id)
        .await
        .into_iter()
        .filter(|item| item["kind"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 80);
    let landed: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        landed,
        Vec::<std::path::PathBuf>::new(),
        "writes landed outside"
    );
    // A write that came while `d` was away made a new `d`: the files are in it or in the
    // swapper's `d.real`, never outside.
    let count = |dir: &Path| {
        std::fs::read_dir(dir)
            .map(|entries| entries.count())
            .unwrap_or(0)
    };
    let inside = count(&dir) + count(&dir.with_extension("real"));
    let refused = calls
        .iter()
        .filter(|call| call["status"] == "failed")
        .count();
    assert_eq!(
        inside + refused,
        80,
        "every write landed inside or was refused"
    );
}

/// A skill a model planted as a directory it keeps swapping for a link to a directory outside
/// (holding a `SKILL.md` of its own): the service, which reads skills itself, outside any
/// sandbox, never reads the outside one, however the reads and the swaps interleave.
#[tokio::test]
async fn a_skill_racing_a_symlink_swap_is_never_read_from_outside() {
    let server = Server::start().await;
    let workspace = outside_dir();
    let outside = outside_dir();
    std::fs::write(
        outside.path().join("SKILL.md"),
        "---\nname: planted\ndescription: read from outside\n---\nthe outside body",
    )
    .unwrap();
    let skill = workspace.path().join(".agents/skills/planted");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: planted\ndescription: read from inside\n---\nthe inside body",
    )
    .unwrap();
    let swapper = Swapper::start(&skill, outside.path());
    let query = format!("/api/skills?cwd={}", workspace.path().display());
    let mut seen_inside = 0;
    for _ in 0..200 {
        let (status, listed) = server.get(&query).await;
        assert_eq!(status, 200, "{listed}");
        let text = listed.to_string();
        assert!(!text.contains("read from outside"), "{listed}");
        seen_inside += usize::from(text.contains("read from inside"));
    }
    let swaps = swapper.stop();
    assert!(swaps > 200, "the swapper ran ({swaps} swaps)");
    assert!(
        seen_inside > 0,
        "the skill was read while it was a directory"
    );
}

#[tokio::test]
async fn a_restore_counts_a_link_swapped_in_after_the_turn_as_a_conflict_even_forced() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = crate::checkpoints::start(&fake, None, Vec::new()).await;
    let workspace = outside_dir();
    let outside = outside_dir();
    seed(workspace.path(), &[("sub/f.txt", "before")]);
    std::fs::write(outside.path().join("f.txt"), "victim").unwrap();
    let (id, _) = create(
        &server,
        &fake,
        workspace.path(),
        vec![write("sub/f.txt", "after")],
    )
    .await;
    // After the turn, the directory is swapped for a link to the outside.
    let sub = workspace.path().join("sub");
    std::fs::rename(&sub, workspace.path().join("sub.real")).unwrap();
    std::os::unix::fs::symlink(outside.path(), &sub).unwrap();
    let (status, body) = forced_rewind(&server, &id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["restore"]["conflicts"], json!(["sub/f.txt"]), "{body}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f.txt")).unwrap(),
        "victim"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    assert!(Path::new(&workspace.path().join("sub.real/f.txt")).exists());
}

/// A rewind to the conversation's first message that restores its files, conflicts or not.
async fn forced_rewind(server: &Server, id: &str) -> (u16, Value) {
    let first = items(server, id)
        .await
        .into_iter()
        .find(|item| item["kind"] == "user_message")
        .unwrap();
    server
        .post(
            &format!("/api/conversations/{id}/rewind"),
            json!({ "message_id": first["id"], "restore_files": true, "force": true }),
        )
        .await
}

/// A thread that swaps a directory for a symlink to `outside` and back, again and again, until
/// stopped: what a background process of a hostile command would do to redirect a write.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u32>,
}

impl Swapper {
    fn start(dir: &Path, outside: &Path) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, dir, outside) = (stop.clone(), dir.to_owned(), outside.to_owned());
        let thread = std::thread::spawn(move || {
            let real = dir.with_extension("real");
            let mut swaps = 0u32;
            while !flag.load(Ordering::Relaxed) {
                let _ = std::fs::rename(&dir, &real);
                let _ = std::os::unix::fs::symlink(&outside, &dir);
                let _ = std::fs::remove_file(&dir);
                let _ = std::fs::rename(&real, &dir);
                swaps += 1;
            }
            swaps
        });
        Swapper { stop, thread }
    }

    /// Stops it; how many swaps it made.
    fn stop(self) -> u32 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

#[tokio::test]
async fn a_restore_racing_a_symlink_swap_never_writes_outside() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = crate::checkpoints::start(&fake, None, Vec::new()).await;
    let workspace = outside_dir();
    let outside = outside_dir();
    let names: Vec<String> = (0..30).map(|n| format!("sub/f{n}.txt")).collect();
    let before: Vec<(&str, &str)> = names.iter().map(|name| (name.as_str(), "before")).collect();
    seed(workspace.path(), &before);
    let writes = names.iter().map(|name| write(name, "after")).collect();
    let (id, _) = create(&server, &fake, workspace.path(), writes).await;
    let swapper = Swapper::start(&workspace.path().join("sub"), outside.path());
    let (status, body) = forced_rewind(&server, &id).await;
    let swaps = swapper.stop();
    assert!(swaps > 0, "the swapper ran");
    assert_eq!(status, 200, "{body}");
    let restored = body["restore"]["restored"].as_array().unwrap().len();
    let conflicts = body["restore"]["conflicts"].as_array().unwrap().len();
    assert_eq!(restored + conflicts, 30, "{body}");
    let landed: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        landed,
        Vec::<std::path::PathBuf>::new(),
        "a restore wrote outside"
    );
}

/// The tools that run inside the service (not behind the kernel's layers) keep to the same
/// rules: `grep` and `glob` find nothing of the service's state, an edit cannot plant a rule,
/// and an AGENTS.md planted as a link to the token never reaches a request.
#[tokio::test]
async fn the_in_service_tools_and_agents_md_never_reach_the_services_state() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config().replace(
        "tools = [\"shell\"]",
        "tools = [\"grep\", \"glob\", \"read_file\", \"edit_file\"]",
    );
    let server = Server::start_with(ServerOptions {
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    let data = server.data_dir.canonicalize().unwrap();
    let token = std::fs::read_to_string(data.join("local-token")).unwrap();
    let workspace = outside_dir();
    std::os::unix::fs::symlink(data.join("local-token"), workspace.path().join("AGENTS.md"))
        .unwrap();
    let data_path = data.to_str().unwrap();
    for reply in [
        Reply::tool_call("grep", json!({"pattern": ".", "path": data_path}), 1),
        Reply::tool_call("glob", json!({"pattern": "**/*", "path": data_path}), 1),
        Reply::tool_call(
            "edit_file",
            json!({"path": format!("{data_path}/rules.jsonl"), "old_string": "", "new_string": "planted"}),
            1,
        ),
        Reply::tool_call("read_file", json!({"path": "AGENTS.md"}), 1),
    ] {
        fake.push(reply);
    }
    fake.push(Reply::text("Tried."));
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({"text": "look around", "cwd": workspace.path().to_str().unwrap()}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    let calls: Vec<Value> = items(&server, &id)
        .await
        .into_iter()
        .filter(|item| item["kind"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 4);
    for call in &calls {
        assert_eq!(call["status"], "failed", "{call}");
        assert!(
            !call["output"].as_str().unwrap().contains(token.trim()),
            "{call}"
        );
    }
    assert!(!data.join("rules.jsonl").exists());
    for request in fake.requests() {
        assert!(
            !request.body.to_string().contains(token.trim()),
            "the token was sent"
        );
    }
}

/// A background process of conversation `id`, once it has ended: (its info, its output).
async fn ended_process(server: &Server, id: &str) -> (Value, String) {
    let path = format!("/api/conversations/{id}/processes");
    let process = tokio::time::timeout(crate::harness::TIMEOUT, async {
        loop {
            let (_, listed) = server.get(&path).await;
            if let Some(process) = listed["processes"].as_array().and_then(|all| all.first())
                && process["status"] != "running"
            {
                return process.clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the background process ended");
    let (_, read) = server
        .get(&format!(
            "{path}/{}/output",
            process["id"].as_str().unwrap()
        ))
        .await;
    (
        process,
        read["output"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Attack: the model asks a spawnable agent with no sandbox and the network on to start a
/// background process that connects out and writes outside the workspace. The sub-agent is
/// held to its parent's sandbox, and so is the process it leaves running: nothing connects,
/// nothing lands outside, and the process is its (the sub-agent's) own.
#[tokio::test]
async fn a_looser_sub_agents_background_process_is_held_to_its_parent() {
    let (listener, connect) = listener_and_connect();
    listener.set_nonblocking(true).unwrap();
    let server = start_with(
        "tools = [\"shell\", \"spawn_agent\"]\nspawnable = [\"loose\"]",
        "[agents.loose]\ndescription = \"no sandbox\"\nmodel = \"demo\"\nsandbox = \"off\"\n\
         network = true\n",
    )
    .await;
    let workspace = outside_dir();
    let outside = outside_dir();
    let text = format!(
        "/spawn loose: /background {connect}; echo x > {}/escaped; echo finished",
        outside.path().display()
    );
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": text, "cwd": workspace.path() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    let root_session = created["conversation"]["root_session_id"].clone();
    let (process, out) = ended_process(&server, id).await;
    assert!(out.contains("finished"), "{out}");
    assert!(!out.contains("connected"), "{out}");
    assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    assert!(!outside.path().join("escaped").exists(), "{out}");
    assert_ne!(process["session_id"], root_session, "{process}");
}

/// Attack: with the network on, a background process tries the service's own API (creating
/// a conversation, answering an approval, listing) and its token file: every call is 401 and
/// the token stays unreadable, as for any call.
#[tokio::test]
async fn a_background_process_cannot_use_the_service_api() {
    let server = start("network = true").await;
    let workspace = outside_dir();
    let script = format!(
        r#"
import urllib.request, urllib.error
def call(method, path, body=None):
    request = urllib.request.Request("{base}" + path, method=method, data=body,
        headers={{"content-type": "application/json"}})
    try:
        print(method, path, urllib.request.urlopen(request, timeout=5).status)
    except urllib.error.HTTPError as error:
        print(method, path, error.code)
call("POST", "/api/conversations", b'{{"text": "/shell id"}}')
call("POST", "/api/approvals/a_0", b'{{"decision": "allow"}}')
call("GET", "/api/conversations")
try:
    print("token read", len(open("{token_file}").read()))
except OSError as error:
    print("token unreadable", type(error).__name__)
"#,
        base = server.base,
        token_file = server.data_dir.join("local-token").display(),
    );
    std::fs::write(workspace.path().join("api.py"), script).unwrap();
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "/background python3 api.py", "cwd": workspace.path() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    let (_, out) = ended_process(&server, id).await;
    for expected in [
        "POST /api/conversations 401",
        "POST /api/approvals/a_0 401",
        "GET /api/conversations 401",
        "token unreadable",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1, "{list}");
}

/// Attack: a background process, with the network off, tries every socket protocol (MPTCP,
/// UDP, SCTP, raw, abstract UNIX, vsock…), then leaves children behind in new sessions
/// (`setsid`, `nohup`, a double fork) and keeps running. Nothing is reached, and stopping the
/// process ends every one of its children too.
#[tokio::test]
async fn a_background_process_reaches_nothing_and_its_setsid_children_end_with_it() {
    let server = start("").await;
    let workspace = outside_dir();
    std::fs::write(workspace.path().join("probe.py"), NETWORK_PROBE).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    // Sleeps of this run's own lengths, told apart from any other run's.
    let marker = format!("74{}", udp.local_addr().unwrap().port());
    let command = format!(
        "python3 probe.py {} {}; setsid sleep {marker}1 & (setsid sh -c 'sleep {marker}2' &); \
         nohup sleep {marker}3 >/dev/null 2>&1 & echo children; sleep {marker}4",
        port_of(&server),
        udp.local_addr().unwrap().port()
    );
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": format!("/background {command}"), "cwd": workspace.path() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    let path = format!("/api/conversations/{id}/processes");
    let (process_id, out) = tokio::time::timeout(crate::harness::TIMEOUT, async {
        loop {
            let (_, listed) = server.get(&path).await;
            if let Some(process_id) = listed["processes"][0]["id"].as_str() {
                let (_, read) = server.get(&format!("{path}/{process_id}/output")).await;
                let out = read["output"].as_str().unwrap_or_default().to_owned();
                if out.contains("children") {
                    return (process_id.to_owned(), out);
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the background process got to its children");
    let verdicts = verdicts(&out);
    assert_eq!(verdicts.len(), 11, "{out}");
    for (name, verdict) in &verdicts {
        assert_eq!(verdict, "refused", "{name}: {out}");
    }
    let mut buffer = [0u8; 16];
    assert_eq!(
        udp.recv(&mut buffer).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // The four sleeps, and the shells and launcher whose command line names them.
    assert!(crate::harness::pids_running(&marker).len() >= 4, "{out}");
    let (status, stopped) = server
        .post(&format!("{path}/{process_id}/stop"), json!({}))
        .await;
    assert_eq!(status, 200, "{stopped}");
    tokio::time::timeout(crate::harness::TIMEOUT, async {
        while !crate::harness::pids_running(&marker).is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a child of the stopped background process outlived it");
}
