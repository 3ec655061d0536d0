//! Shell commands do not outlive a crash of the service: the next start on the same data
//! directory kills the process groups that the killed run left running (`tools/group_records.rs`).

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use crate::harness::{Server, TIMEOUT, process_alive};

#[tokio::test]
async fn a_restart_kills_the_shell_commands_a_crashed_run_left_running() {
    let server = Server::start().await;
    let created = server.create_and_wait("hello").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server.events(&id).await;

    // sh starts a background child, says so, then waits for it. The command runs in a PID
    // namespace of its own: its processes are found by the child's arguments.
    let command = "sleep 300.67 & echo started end; wait";
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": format!("/shell {command}") }),
        )
        .await;
    assert_eq!(status, 202);
    let mut output = String::new();
    tokio::time::timeout(TIMEOUT, async {
        while !output.contains(" end") {
            let (kind, data) = events.next().await.expect("the event stream ended");
            if kind == "item.delta" && data["field"] == "output" {
                output.push_str(data["delta"].as_str().unwrap());
            }
        }
    })
    .await
    .expect("the command's start in its live output");
    // The launcher (its group's leader), the namespace's init, the shell and the `sleep`.
    let running = crate::harness::pids_running("sleep 300.67");
    assert!(running.len() >= 2, "{running:?}");
    // Whatever happens below, nothing is left running after the test.
    let _cleanup = KillOnDrop::new(running.clone());

    assert_eq!(
        records(&server.data_dir),
        1,
        "a running command is recorded"
    );

    let data_dir = server.kill9().await;
    // The crash alone stops nothing: this is what the restart must clean up.
    for &pid in &running {
        assert!(process_alive(pid), "{output}");
    }

    let server = Server::start_in(&data_dir).await;
    for &pid in &running {
        wait_until_gone(pid).await;
    }
    assert_eq!(records(&data_dir), 0, "the records are removed");
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["status"], "idle");

    // A command that ends on its own takes its record with it.
    server.create_and_wait("/shell echo done").await;
    assert_eq!(records(&data_dir), 0);
}

fn records(data_dir: &std::path::Path) -> usize {
    std::fs::read_dir(data_dir.join("processes"))
        .unwrap()
        .count()
}

async fn wait_until_gone(pid: libc::pid_t) {
    let gone = tokio::time::timeout(TIMEOUT, async {
        while process_alive(pid) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "process {pid} is still alive after the restart"
    );
}

/// Kills the command's processes when the test ends, passing or failing, each only while it is
/// still the process the test saw (same start time), so a reused pid is never signalled.
struct KillOnDrop {
    processes: Vec<(libc::pid_t, Option<String>)>,
}

impl KillOnDrop {
    fn new(pids: Vec<libc::pid_t>) -> KillOnDrop {
        KillOnDrop {
            processes: pids.into_iter().map(|pid| (pid, start_time(pid))).collect(),
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for (pid, started) in &self.processes {
            if *pid > 1 && started.is_some() && start_time(*pid) == *started {
                // SAFETY: kill(2) touches no memory of ours.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Field 22 of `/proc/<pid>/stat`, counted after the name's closing parenthesis.
fn start_time(pid: libc::pid_t) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(22 - 3).map(str::to_owned)
}
