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

    // sh prints its own pid and its background child's, then waits for the child.
    let command = "sleep 300 & echo leader=$$ child=$! end; wait";
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
    .expect("the command's pids in its live output");
    let leader = pid_after(&output, "leader=");
    let child = pid_after(&output, "child=");
    // Whatever happens below, nothing is left running after the test.
    let _cleanup = KillGroupOnDrop::new(leader);

    assert_eq!(
        records(&server.data_dir),
        1,
        "a running command is recorded"
    );

    let data_dir = server.kill9().await;
    // The crash alone stops nothing: this is what the restart must clean up.
    assert!(process_alive(leader) && process_alive(child), "{output}");

    let server = Server::start_in(&data_dir).await;
    wait_until_gone(leader).await;
    wait_until_gone(child).await;
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

fn pid_after(output: &str, label: &str) -> libc::pid_t {
    output
        .split_whitespace()
        .find_map(|word| word.strip_prefix(label))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no {label} in {output:?}"))
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

/// Kills the command's group when the test ends, passing or failing, if its leader is still the
/// process the test saw (same start time), so a reused pid is never signalled.
struct KillGroupOnDrop {
    pgid: libc::pid_t,
    start_time: Option<String>,
}

impl KillGroupOnDrop {
    fn new(pgid: libc::pid_t) -> KillGroupOnDrop {
        KillGroupOnDrop {
            pgid,
            start_time: start_time(pgid),
        }
    }
}

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        if self.pgid > 1 && self.start_time.is_some() && start_time(self.pgid) == self.start_time {
            // SAFETY: kill(2) touches no memory of ours.
            unsafe {
                libc::kill(-self.pgid, libc::SIGKILL);
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
