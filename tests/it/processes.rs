//! Background processes, driven like a client against the fake provider: a `shell` call with
//! `background` answers at once and the process goes on (a real `python3 -m http.server`
//! reached by a later call), its output read on from a cursor, stopped with its whole group,
//! ended with its conversation, with `serve stop`, and after `kill -9` killed by the next start
//! and listed as `lost`; the per-conversation limit.

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT, pids_running, process_alive};
use crate::support::items;

async fn start(
    fake: &FakeProvider,
    agent_lines: &str,
    data_dir: Option<&std::path::Path>,
) -> Server {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
        .keep();
    Server::start_with(ServerOptions {
        data_dir: data_dir.map(std::path::Path::to_path_buf),
        config: Some(format!(
            "{}{agent_lines}\n[tools]\nbackground_wait_ms = 1500\nmax_background = 2\n",
            fake.config()
        )),
        cwd: Some(work),
        ..ServerOptions::default()
    })
    .await
}

/// Has the model start `command` in the background, and returns the conversation, the
/// process id and the call's output.
async fn start_process(
    server: &Server,
    fake: &FakeProvider,
    id: Option<&str>,
    command: &str,
) -> (String, String, String) {
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": command, "background": true}),
        1,
    ));
    fake.push(Reply::text("Started."));
    let id = match id {
        Some(id) => {
            server.send_and_wait(id, "Start it").await;
            id.to_owned()
        }
        None => {
            let created = server.create_and_wait("Start it").await;
            created["conversation"]["id"].as_str().unwrap().to_owned()
        }
    };
    let call = items(server, &id)
        .await
        .into_iter()
        .rfind(|item| item["kind"] == "tool_call")
        .unwrap();
    let output = call["output"].as_str().unwrap().to_owned();
    // A refused start names no process.
    let process = output
        .strip_prefix("Started background process ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    (id, process, output)
}

/// A `sleep` no other run of this test starts: `sleep 300.<pid><n>` found by its arguments.
fn mark(n: u32) -> String {
    format!("300.{}{n:02}", std::process::id())
}

async fn processes(server: &Server, id: &str) -> Vec<Value> {
    let (status, list) = server
        .get(&format!("/api/conversations/{id}/processes"))
        .await;
    assert_eq!(status, 200, "{list}");
    list["processes"].as_array().unwrap().clone()
}

/// Waits until no process runs with `marker` in its arguments.
async fn wait_until_gone(marker: &str) {
    tokio::time::timeout(TIMEOUT, async {
        while !pids_running(marker).is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("`{marker}` still runs: {:?}", pids_running(marker)));
}

#[tokio::test]
async fn a_background_server_answers_a_later_call_and_its_output_is_read_on() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, "network = true", None).await;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let (id, process, output) = start_process(
        &server,
        &fake,
        None,
        &format!("echo serving; exec python3 -u -m http.server {port} --bind 127.0.0.1"),
    )
    .await;
    // The call answered while the server runs, with its first output and how to go on.
    assert!(output.contains("First output:\nserving\n"), "{output}");
    assert!(output.contains("process_output"), "{output}");

    // A later call reaches it.
    let mut reached = String::new();
    for _ in 0..50 {
        fake.push(Reply::tool_call(
            "shell",
            json!({"command": format!("curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/")}),
            1,
        ));
        fake.push(Reply::text("Fetched."));
        server.send_and_wait(&id, "Fetch it").await;
        let call = items(&server, &id)
            .await
            .into_iter()
            .rfind(|item| item["kind"] == "tool_call")
            .unwrap();
        reached = call["output"].as_str().unwrap().to_owned();
        if reached.starts_with("200") {
            break;
        }
    }
    assert!(reached.starts_with("200"), "{reached}");

    // Its output, read on from a cursor: the request it served.
    let path = format!("/api/conversations/{id}/processes/{process}/output");
    let (status, first) = server.get(&format!("{path}?since=0")).await;
    assert_eq!(status, 200, "{first}");
    let text = first["output"].as_str().unwrap();
    assert!(text.starts_with("serving\n"), "{first}");
    let next = first["next"].as_u64().unwrap();
    assert_eq!(next as usize, text.len());
    let (_, again) = server.get(&format!("{path}?since={next}")).await;
    assert_eq!(again["output"], "", "nothing new since the cursor: {again}");
    assert_eq!(again["next"], next);

    // The model reads it too, with process_output, and lists it with its port.
    fake.push(Reply::tool_call(
        "process_output",
        json!({"id": process, "since": 8}),
        1,
    ));
    fake.push(Reply::tool_call("process_list", json!({}), 2));
    fake.push(Reply::text("Read."));
    server.send_and_wait(&id, "Read it").await;
    let calls: Vec<Value> = items(&server, &id)
        .await
        .into_iter()
        .filter(|item| item["kind"] == "tool_call")
        .collect();
    let read = calls[calls.len() - 2]["output"].as_str().unwrap();
    assert!(read.contains("\"GET / HTTP/1.1\" 200"), "{read}");
    assert!(!read.contains("serving"), "read from the cursor on: {read}");
    let listed = calls[calls.len() - 1]["output"].as_str().unwrap();
    assert!(
        listed.contains(&process) && listed.contains(&format!("listening on port {port}")),
        "{listed}"
    );
    let listed = processes(&server, &id).await;
    assert_eq!(listed[0]["status"], "running");
    assert_eq!(listed[0]["ports"], json!([port]));

    // Stopped with its group.
    let (status, stopped) = server
        .post(
            &format!("/api/conversations/{id}/processes/{process}/stop"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["status"], "killed", "{stopped}");
    assert_eq!(stopped["reason"], "a user stopped it");
    wait_until_gone(&format!("http.server {port}")).await;
}

#[tokio::test]
async fn process_kill_ends_the_whole_group_and_the_limit_holds() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, "", None).await;
    let (id, process, _) = start_process(
        &server,
        &fake,
        None,
        &format!("sleep {} & sleep {} & echo two; wait", mark(31), mark(32)),
    )
    .await;
    assert!(!pids_running(&mark(31)).is_empty());
    let (_, _, _) = start_process(&server, &fake, Some(&id), &format!("sleep {}", mark(33))).await;

    // A third is past `max_background = 2`.
    let (_, _, output) =
        start_process(&server, &fake, Some(&id), &format!("sleep {}", mark(34))).await;
    assert!(
        output.contains("already runs 2 background processes")
            && output.contains("tools.max_background"),
        "{output}"
    );
    assert!(pids_running(&mark(34)).is_empty());

    fake.push(Reply::tool_call("process_kill", json!({"id": process}), 1));
    fake.push(Reply::text("Stopped."));
    server.send_and_wait(&id, "Stop the first").await;
    let call = items(&server, &id)
        .await
        .into_iter()
        .rfind(|item| item["kind"] == "tool_call")
        .unwrap();
    let output = call["output"].as_str().unwrap();
    assert!(
        output.starts_with(&format!("Sent SIGTERM to {process}")),
        "{output}"
    );
    assert!(output.contains("process_kill sent SIGTERM"), "{output}");
    wait_until_gone(&mark(31)).await;
    wait_until_gone(&mark(32)).await;
    assert!(!pids_running(&mark(33)).is_empty(), "the other one runs on");

    // Deleting the conversation ends the rest.
    let (status, body) = server.delete(&format!("/api/conversations/{id}")).await;
    assert!(status == 200 || status == 204, "{status} {body}");
    wait_until_gone(&mark(33)).await;
}

#[tokio::test]
async fn serve_stop_ends_them_and_after_a_crash_they_are_killed_and_listed_lost() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, "", None).await;
    let (id, _, _) = start_process(
        &server,
        &fake,
        None,
        &format!("echo up; sleep {}", mark(41)),
    )
    .await;
    assert!(!pids_running(&mark(41)).is_empty());
    let data_dir = server.stop().await;
    wait_until_gone(&mark(41)).await;

    let server = start(&fake, "", Some(&data_dir)).await;
    let listed = processes(&server, &id).await;
    assert_eq!(listed[0]["status"], "killed", "{listed:?}");
    assert_eq!(listed[0]["reason"], "the service stopped");
    // Its output is still there, read from its log.
    let process = listed[0]["id"].as_str().unwrap();
    let (_, read) = server
        .get(&format!(
            "/api/conversations/{id}/processes/{process}/output"
        ))
        .await;
    assert_eq!(read["output"], "up\n", "{read}");

    let (_, second, _) =
        start_process(&server, &fake, Some(&id), &format!("sleep {}", mark(42))).await;
    let running = pids_running(&mark(42));
    assert!(!running.is_empty());
    let data_dir = server.kill9().await;
    assert!(running.iter().all(|&pid| process_alive(pid)));

    let server = start(&fake, "", Some(&data_dir)).await;
    wait_until_gone(&mark(42)).await;
    let listed = processes(&server, &id).await;
    let lost = listed
        .iter()
        .find(|process| process["id"] == second.as_str())
        .unwrap();
    assert_eq!(lost["status"], "lost", "{lost}");
}

/// Attack: a background process, written by a hostile model, is held to everything a call is.
/// It reaches nothing over any socket protocol with the network off (TCP, MPTCP, IPv6, UDP,
/// raw, abstract UNIX, vsock), cannot read the service's token, leaves nothing running once it
/// ends (a `setsid` child included), cannot run outside the sandbox (`escalate` is refused
/// before anyone is asked), and a secret in its command is not shown.
#[tokio::test]
async fn a_background_process_is_held_to_the_sandbox_like_any_call() {
    use crate::sandbox::{KEY, KEY_VARIABLE};
    use crate::sandbox_escape::{NETWORK_PROBE, port_of, verdicts};
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(work.path().join("probe.py"), NETWORK_PROBE).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    use std::os::linux::net::SocketAddrExt;
    let abstract_name =
        std::os::unix::net::SocketAddr::from_abstract_name(b"openvaala-escape-test").unwrap();
    let unix = std::os::unix::net::UnixListener::bind_addr(&abstract_name).unwrap();
    unix.set_nonblocking(true).unwrap();
    let server = Server::start_with(ServerOptions {
        config: Some(format!(
            "{}\n[tools]\nbackground_wait_ms = 200\n",
            fake.config_with(&format!("api_key_env = \"{KEY_VARIABLE}\""))
        )),
        cwd: Some(work.path().to_path_buf()),
        env: vec![(KEY_VARIABLE.to_owned(), KEY.to_owned())],
        ..ServerOptions::default()
    })
    .await;
    let data = server.data_dir.canonicalize().unwrap();
    let command = format!(
        "python3 probe.py {} {}; cat {}/local-token; echo token=$?; \
         (setsid sleep {} &); echo {KEY} > /dev/null; echo done",
        port_of(&server),
        udp.local_addr().unwrap().port(),
        data.display(),
        mark(51)
    );
    let (id, process, _) = start_process(&server, &fake, None, &command).await;
    let path = format!("/api/conversations/{id}/processes/{process}/output");
    let read = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (status, read) = server.get(&format!("{path}?wait_s=5")).await;
            assert_eq!(status, 200, "{read}");
            if read["process"]["status"] != "running" {
                return read;
            }
        }
    })
    .await
    .expect("the probe ends");
    let output = read["output"].as_str().unwrap();
    let tries = verdicts(output);
    for name in ["tcp", "mptcp", "ipv6", "udp", "raw", "abstract", "vsock"] {
        assert!(
            tries
                .iter()
                .any(|(tried, verdict)| tried == name && verdict == "refused"),
            "{name}: {output}"
        );
    }
    assert!(
        !tries.iter().any(|(_, verdict)| verdict == "OPEN"),
        "{output}"
    );
    assert!(
        // Standard error interleaves with standard output in no fixed order.
        output.contains("token=1") && output.contains("done\n"),
        "{output}"
    );
    let mut buffer = [0u8; 16];
    assert!(udp.recv(&mut buffer).is_err() && unix.accept().is_err());
    // Its setsid child ended with it.
    wait_until_gone(&mark(51)).await;
    // The secret it wrote in its command is not shown.
    let listed = processes(&server, &id).await;
    let shown = listed[0]["command"].as_str().unwrap();
    assert!(!shown.contains(KEY), "{shown}");
    assert_eq!(read["process"]["command"], shown);

    // Never outside the sandbox, and nobody is asked.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": format!("sleep {}", mark(52)), "background": true, "escalate": "needs the network"}),
        1,
    ));
    fake.push(Reply::text("Refused."));
    server.send_and_wait(&id, "Start it outside").await;
    let call = items(&server, &id)
        .await
        .into_iter()
        .rfind(|item| item["kind"] == "tool_call")
        .unwrap();
    assert_eq!(call["denied"], true, "{call}");
    assert!(
        call["output"]
            .as_str()
            .unwrap()
            .contains("a background process always runs in the sandbox"),
        "{call}"
    );
    let (_, approvals) = server.get("/api/approvals?status=all").await;
    assert_eq!(approvals["approvals"], json!([]), "{approvals}");
    assert!(pids_running(&mark(52)).is_empty());
}

/// A process that wrote more than its log keeps: the log holds its newest output, so after a
/// restart (nothing in memory) its end is still read, and a read from the start is told what
/// was dropped.
#[tokio::test]
async fn a_long_outputs_end_is_kept_on_disk_and_read_after_a_restart() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, "", None).await;
    // 17 MB of one long line, then the end: past the 16 MiB two segments keep.
    let command = "head -c 17000000 /dev/zero | tr '\\0' x; echo; echo the-end";
    let (id, process, _) = start_process(&server, &fake, None, command).await;
    let path = format!("/api/conversations/{id}/processes/{process}/output");
    let mut since = 0;
    let ended = tokio::time::timeout(4 * TIMEOUT, async {
        loop {
            let (status, read) = server.get(&format!("{path}?since={since}&wait_s=5")).await;
            assert_eq!(status, 200, "{read}");
            since = read["next"].as_u64().unwrap();
            if read["process"]["status"] != "running" {
                return read["process"].clone();
            }
        }
    })
    .await
    .expect("the process ended");
    assert_eq!(ended["status"], "exited", "{ended}");
    let written = ended["output_bytes"].as_u64().unwrap();
    assert_eq!(written, 17_000_000 + "\nthe-end\n".len() as u64);

    let data_dir = server.stop().await;
    let server = start(&fake, "", Some(&data_dir)).await;
    let (_, tail) = server.get(&format!("{path}?since={}", written - 12)).await;
    assert_eq!(tail["output"], "xxx\nthe-end\n", "{tail}");
    assert_eq!(
        (tail["next"].as_u64(), tail["dropped"].as_u64()),
        (Some(written), Some(0))
    );
    let (_, from_start) = server.get(&format!("{path}?since=0")).await;
    let dropped = from_start["dropped"].as_u64().unwrap();
    assert!(
        dropped > 0 && dropped < written - 8 * 1024 * 1024,
        "{dropped}"
    );
    assert!(from_start["output"].as_str().unwrap().starts_with("xxxx"));
}
