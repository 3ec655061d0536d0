//! One hook run: a command under the agent's sandbox with the payload on standard input, or a
//! POST of the payload; either bounded by the hook's timeout, and read as an `Answer`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;

use super::answer::{Answer, Decision, quoted};
use super::post::{Target, post};
use crate::config::{HookAction, HookConfig};
use crate::sandbox::{Program, SandboxPolicy};

/// How a hook's output (a command's standard output, an HTTP answer's body) is read.
pub(super) type Reader = fn(&str) -> Result<Answer, String>;

/// Runs `hook` with `body`, reading what it answers with `read`; `Err` says how it failed.
pub(super) async fn run(
    hook: &HookConfig,
    body: &str,
    cwd: &Path,
    sandbox: &SandboxPolicy,
    client: &reqwest::Client,
    read: Reader,
) -> Result<Answer, String> {
    match &hook.action {
        HookAction::Command(command) => {
            run_command(command, body, cwd, sandbox, hook.timeout, read).await
        }
        HookAction::Url {
            url,
            headers,
            secret,
        } => {
            let target = Target {
                url,
                headers,
                secret: secret.as_deref(),
                timeout: hook.timeout,
            };
            let id = format!("msg_{}", uuid::Uuid::now_v7().simple());
            let posted = post(client, &target, &id, body).await?;
            if !posted.status.is_success() {
                return Err(posted.refusal(url));
            }
            read(&posted.text)
        }
    }
}

async fn run_command(
    command: &str,
    body: &str,
    cwd: &Path,
    sandbox: &SandboxPolicy,
    timeout: Duration,
    read: Reader,
) -> Result<Answer, String> {
    let mut sh = crate::sandbox::command(sandbox, cwd, Program::Shell(command))?;
    sh.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so that a timeout ends everything it started.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = sh
        .spawn()
        .map_err(|error| format!("`{command}` could not start: {error}"))?;
    let _group = Group(child.id().and_then(|pid| libc::pid_t::try_from(pid).ok()));
    let stdin = child.stdin.take();
    let ran = tokio::time::timeout(timeout, async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input closes the pipe: that is its business.
            let _ = stdin.write_all(body.as_bytes()).await;
        }
        child.wait_with_output().await
    })
    .await;
    let output = match ran {
        Err(_) => return Err(format!("it did not answer within {} s", timeout.as_secs())),
        Ok(Err(error)) => return Err(format!("it could not be waited for: {error}")),
        Ok(Ok(output)) => output,
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => read(&String::from_utf8_lossy(&output.stdout)),
        // As in other agents' hooks: exit code 2 denies, with standard error as the reason.
        Some(2) => Ok(Answer {
            decision: Some(Decision::Deny),
            reason: Some(quoted(&stderr)),
            ..Answer::default()
        }),
        Some(code) => Err(format!("it exited with {code}: {}", quoted(&stderr))),
        None => Err("it was killed by a signal".to_owned()),
    }
}

/// Kills the hook's process group when dropped: on a timeout, an interrupt, or after it ended.
struct Group(Option<libc::pid_t>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            crate::tools::group_records::kill_group(pgid);
        }
    }
}
