//! The `shell` tool: `sh -c COMMAND` in its own process group, stdout and stderr streamed live.
//! When the command exits, times out or is interrupted the whole group is killed, so nothing it
//! started outlives the call or keeps it waiting. While it runs, a record in the data directory
//! (`group_records`) names the group, so that if the service dies first its next start kills it.
//! The command runs in the agent's sandbox (`crate::sandbox`), with an allow-listed environment.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::call::{ToolContext, ToolResult, ToolStatus, optional_number, required_string};
use super::group_records::{self, GroupRecords, RecordFile};
use super::output::CappedOutput;
use super::pipe::Pipe;
use crate::sandbox::{self, Program};

/// After `sh` exits, a background child may hold the pipes open for ever: wait this long for
/// the end of its output, then kill it.
const EXIT_GRACE: Duration = Duration::from_millis(250);
/// After a kill, the pipes may still hold what the command wrote before it died.
const KILL_GRACE: Duration = Duration::from_millis(100);
/// Live output stops at this many times the result cap: clients get far more than the model,
/// but a command printing for ever cannot flood them.
const LIVE_LIMIT_FACTOR: usize = 4;
const LIVE_LIMIT_MIN_BYTES: usize = 64 * 1024;

pub(super) async fn run(
    arguments: &Value,
    ctx: &ToolContext,
    live: &UnboundedSender<String>,
    cancel: &CancellationToken,
) -> ToolResult {
    let command = match required_string(arguments, "command") {
        Ok(command) => command,
        Err(message) => return ToolResult::failed(message),
    };
    match super::call::optional_bool(arguments, "background") {
        Ok(Some(true)) => return super::background::tool::start(command, ctx, cancel).await,
        Ok(_) => {}
        Err(message) => return ToolResult::failed(message),
    }
    let timeout = match timeout(arguments, ctx) {
        Ok(timeout) => timeout,
        Err(message) => return ToolResult::failed(message),
    };
    if !tokio::fs::metadata(&ctx.cwd)
        .await
        .is_ok_and(|metadata| metadata.is_dir())
    {
        return ToolResult::failed(format!(
            "the working directory {} does not exist",
            ctx.cwd.display()
        ));
    }
    let sandboxed = ctx.sandbox.enforced();
    let mut sh = match sandbox::command(&ctx.sandbox, &ctx.cwd, Program::Shell(command)) {
        Ok(sh) => sh,
        Err(message) => return ToolResult::failed(message),
    };
    sh.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so one kill reaches every process the command starts.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match sh.spawn() {
        Ok(child) => child,
        Err(error) if sandboxed => {
            return ToolResult::failed(format!(
                "could not start sh in the sandbox ({}): {error}",
                ctx.sandbox.setting()
            ));
        }
        Err(error) => return ToolResult::failed(format!("could not start sh: {error}")),
    };
    // The group is killed when this guard drops, even if the caller drops this future.
    let mut group = ProcessGroup::new(child.id(), command, ctx.process_records.as_ref());
    let mut stdout = Pipe::new(child.stdout.take());
    let mut stderr = Pipe::new(child.stderr.take());
    let mut sink = Sink::new(ctx.max_output_bytes, live);

    let deadline = Instant::now() + timeout;
    let mut exit_status: Option<ExitStatus> = None;
    let mut grace_end = deadline;
    let ending = loop {
        if let Some(status) = exit_status
            && !stdout.is_open()
            && !stderr.is_open()
        {
            break Ending::Exited(status);
        }
        tokio::select! {
            text = stdout.next_text(), if stdout.is_open() => sink.push(&text),
            text = stderr.next_text(), if stderr.is_open() => sink.push(&text),
            waited = child.wait(), if exit_status.is_none() => match waited {
                Ok(status) => {
                    exit_status = Some(status);
                    grace_end = Instant::now() + EXIT_GRACE;
                }
                Err(error) => break Ending::WaitFailed(error),
            },
            () = sleep_until(grace_end), if exit_status.is_some() => {
                if let Some(status) = exit_status {
                    break Ending::Exited(status);
                }
            }
            // Once sh has exited, only the short grace above is left to wait.
            () = sleep_until(deadline), if exit_status.is_none() => break Ending::TimedOut,
            () = cancel.cancelled() => break Ending::Interrupted,
        }
    };

    group.kill();
    // Best effort: sh is in the group and already dead or dying; this only reaps it.
    if exit_status.is_none() {
        let _ = child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
    }
    let drain_end = Instant::now() + KILL_GRACE;
    while stdout.is_open() || stderr.is_open() {
        tokio::select! {
            text = stdout.next_text(), if stdout.is_open() => sink.push(&text),
            text = stderr.next_text(), if stderr.is_open() => sink.push(&text),
            () = sleep_until(drain_end) => break,
        }
    }

    let (mut status, exit_code, note) = match ending {
        Ending::Exited(status) => match (status.code(), signal(status)) {
            (Some(code), _) => (ToolStatus::Completed, Some(code), None),
            // A limit of the sandbox stopped it: the call failed, and says why.
            (None, Some(signal)) if let Some(note) = ctx.sandbox.limits.note(Some(signal), "") => {
                (ToolStatus::Failed, None, Some(note))
            }
            (None, signal) => (
                ToolStatus::Completed,
                None,
                Some(format!(
                    "[command killed by signal {}]",
                    signal.unwrap_or(0)
                )),
            ),
        },
        Ending::TimedOut => (
            ToolStatus::Failed,
            None,
            Some(format!(
                "[command timed out after {} s]",
                timeout.as_secs_f64()
            )),
        ),
        Ending::Interrupted => (
            ToolStatus::Interrupted,
            None,
            Some("[command interrupted]".to_owned()),
        ),
        Ending::WaitFailed(error) => (
            ToolStatus::Failed,
            None,
            Some(format!("[could not wait for the command: {error}]")),
        ),
    };
    let stopped_by_a_limit = note
        .as_deref()
        .is_some_and(|note| note.starts_with("[stopped:"));
    let mut output = sink.finish(note);
    let hint = if !sandboxed || exit_code == Some(0) || stopped_by_a_limit {
        None
    } else if let Some(limit) = ctx.sandbox.limits.note(None, &output) {
        // A limit of the sandbox made it fail: the call failed, and says why.
        status = ToolStatus::Failed;
        Some(limit)
    } else if exit_code.is_some() && looks_denied(&output) {
        Some(ctx.sandbox.hint(&ctx.cwd))
    } else {
        None
    };
    if let Some(hint) = hint {
        let line = if output.is_empty() || output.ends_with('\n') {
            hint
        } else {
            format!("\n{hint}")
        };
        let _ = live.send(line.clone());
        output.push_str(&line);
    }
    ToolResult {
        output,
        exit_code,
        status,
        images: Vec::new(),
    }
}

/// Whether a failed command's output shows a permission error, which the sandbox may have
/// caused (the kernel's EACCES or EPERM as the usual tools print them).
fn looks_denied(output: &str) -> bool {
    output.contains("Permission denied") || output.contains("Operation not permitted")
}

/// How the wait for the command ended.
enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Interrupted,
    WaitFailed(std::io::Error),
}

/// The time limit: the model's `timeout_s` if it gave one, never more than the configured limit.
fn timeout(arguments: &Value, ctx: &ToolContext) -> Result<Duration, String> {
    let Some(seconds) = optional_number(arguments, "timeout_s")? else {
        return Ok(ctx.shell_timeout);
    };
    if seconds <= 0.0 {
        return Err(format!(
            "parameter `timeout_s` must be a positive number of seconds, not {seconds}"
        ));
    }
    // Clamping first keeps the value finite and in range for `from_secs_f64`.
    Ok(Duration::from_secs_f64(
        seconds.min(ctx.shell_timeout.as_secs_f64()),
    ))
}

fn signal(status: ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

/// The command's process group; its id is the id of the `sh` that leads it.
struct ProcessGroup {
    pgid: Option<libc::pid_t>,
    /// The group's record on disk, for a restart after a crash; removed only after the kill.
    record: Option<RecordFile>,
}

impl ProcessGroup {
    /// Takes charge of the group `sh` leads, and records it. Call before `sh` is reaped, while
    /// its pid still names it.
    fn new(pid: Option<u32>, command: &str, records: Option<&GroupRecords>) -> ProcessGroup {
        // Never 0 or 1: `kill(-0)` would signal our own group and `kill(-1)` every process.
        let pgid = pid
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .filter(|&pgid| pgid > 1);
        let record = pgid
            .zip(records)
            .and_then(|(pgid, records)| records.record_running(pgid, command));
        ProcessGroup { pgid, record }
    }

    /// Sends SIGKILL to every process of the group, once: after that the id may be reused.
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            group_records::kill_group(pgid);
        }
        // Only now: a record removed before the kill would let a crash in between leave the
        // group running with nothing to name it.
        self.record = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Where output goes: to clients live as it arrives, and into the capped result.
struct Sink<'a> {
    output: CappedOutput,
    live: &'a UnboundedSender<String>,
    live_bytes: usize,
    live_limit: usize,
}

impl<'a> Sink<'a> {
    fn new(max_output_bytes: usize, live: &'a UnboundedSender<String>) -> Sink<'a> {
        Sink {
            output: CappedOutput::new(max_output_bytes),
            live,
            live_bytes: 0,
            live_limit: max_output_bytes
                .saturating_mul(LIVE_LIMIT_FACTOR)
                .max(LIVE_LIMIT_MIN_BYTES),
        }
    }

    fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.output.push(text);
        if self.live_bytes > self.live_limit {
            return;
        }
        self.live_bytes += text.len();
        // A receiver that went away only means nobody watches; the result is still collected.
        if self.live_bytes <= self.live_limit {
            let _ = self.live.send(text.to_owned());
        } else {
            let _ = self.live.send(format!(
                "\n[... live output stops after {} bytes; the result keeps the head and the tail ...]\n",
                self.live_limit
            ));
        }
    }

    /// The result text, with `note` on a line of its own at the end (also sent live).
    fn finish(self, note: Option<String>) -> String {
        let mut output = self.output.finish();
        if let Some(note) = note {
            let line = if output.is_empty() || output.ends_with('\n') {
                note
            } else {
                format!("\n{note}")
            };
            let _ = self.live.send(line.clone());
            output.push_str(&line);
        }
        output
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
    use tokio::task::JoinHandle;

    use super::*;

    /// The tools' test context with the sandbox off: this test binary cannot be the
    /// sandbox's launcher (the sandbox is tested end to end, `tests/it/sandbox.rs`).
    fn context(dir: &Path) -> ToolContext {
        let mut ctx = super::super::tests::context(dir);
        ctx.sandbox.mode = crate::config::SandboxMode::Off;
        ctx
    }

    /// Long enough for a slow CI machine; a passing test never waits for it.
    const PATIENCE: Duration = Duration::from_secs(10);

    struct Running {
        handle: JoinHandle<ToolResult>,
        chunks: UnboundedReceiver<String>,
        cancel: CancellationToken,
    }

    fn start(ctx: &ToolContext, arguments: Value) -> Running {
        let (live, chunks) = unbounded_channel();
        let cancel = CancellationToken::new();
        let ctx = ctx.clone();
        let task_cancel = cancel.clone();
        let handle = tokio::spawn(async move { run(&arguments, &ctx, &live, &task_cancel).await });
        Running {
            handle,
            chunks,
            cancel,
        }
    }

    async fn shell(ctx: &ToolContext, arguments: Value) -> ToolResult {
        let running = start(ctx, arguments);
        finish(running.handle).await
    }

    async fn finish(handle: JoinHandle<ToolResult>) -> ToolResult {
        tokio::time::timeout(PATIENCE, handle)
            .await
            .expect("the shell tool hung")
            .unwrap()
    }

    /// Receives live chunks until their text contains `needle`; returns the text so far.
    async fn receive_until(chunks: &mut UnboundedReceiver<String>, needle: &str) -> String {
        let mut text = String::new();
        while !text.contains(needle) {
            let chunk = tokio::time::timeout(PATIENCE, chunks.recv())
                .await
                .unwrap_or_else(|_| panic!("no {needle:?} in the live output {text:?}"))
                .expect("the live channel closed");
            text.push_str(&chunk);
        }
        text
    }

    fn read_pid(path: &Path) -> libc::pid_t {
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Waits until `pid` is gone. A killed process that nobody has reaped yet is a zombie: dead,
    /// with only its table entry left, so it counts as gone.
    async fn wait_until_gone(pid: libc::pid_t) {
        let gone = || {
            // SAFETY: signal 0 only asks whether the process exists.
            if unsafe { libc::kill(pid, 0) } != 0 {
                return true;
            }
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            })
        };
        let waited = tokio::time::timeout(PATIENCE, async {
            while !gone() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "process {pid} is still alive");
    }

    #[tokio::test]
    async fn streams_output_before_the_command_ends() {
        let dir = tempfile::tempdir().unwrap();
        // The command waits for a file the test creates only after it saw "a" live.
        let mut running = start(
            &context(dir.path()),
            json!({"command": "echo a; while [ ! -e go ]; do sleep 0.01; done; echo b"}),
        );
        let seen = receive_until(&mut running.chunks, "a\n").await;
        assert_eq!(seen, "a\n");
        assert!(!running.handle.is_finished());
        std::fs::write(dir.path().join("go"), "").unwrap();
        let result = finish(running.handle).await;
        assert_eq!(result.status, ToolStatus::Completed);
        assert_eq!(result.exit_code, Some(0));
        assert_eq!(result.output, "a\nb\n");
        assert_eq!(receive_until(&mut running.chunks, "b\n").await, "b\n");
    }

    #[tokio::test]
    async fn keeps_a_non_zero_exit_code_and_both_streams() {
        let dir = tempfile::tempdir().unwrap();
        let result = shell(
            &context(dir.path()),
            json!({"command": "echo out; echo err >&2; exit 3"}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Completed);
        assert_eq!(result.exit_code, Some(3));
        assert!(result.output.contains("out\n"), "{}", result.output);
        assert!(result.output.contains("err\n"), "{}", result.output);
    }

    #[tokio::test]
    async fn runs_in_the_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker.txt"), "").unwrap();
        let result = shell(&context(dir.path()), json!({"command": "ls"})).await;
        assert_eq!(result.output, "marker.txt\n");
    }

    #[tokio::test]
    async fn caps_the_output_keeping_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = context(dir.path());
        ctx.max_output_bytes = 100;
        let result = shell(&ctx, json!({"command": "seq 1 2000"})).await;
        let full: String = (1..=2000).map(|n| format!("{n}\n")).collect();
        assert_eq!(result.status, ToolStatus::Completed);
        assert_eq!(
            result.output,
            format!(
                "{}\n[... {} bytes of output cut ...]\n{}",
                &full[..50],
                full.len() - 100,
                &full[full.len() - 50..]
            )
        );
    }

    #[tokio::test]
    async fn a_signal_gives_no_exit_code_and_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let result = shell(
            &context(dir.path()),
            json!({"command": "echo hi; kill -9 $$"}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Completed);
        assert_eq!(result.exit_code, None);
        assert_eq!(result.output, "hi\n[command killed by signal 9]");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = context(dir.path());
        // The model asks for more than the limit: the limit wins.
        ctx.shell_timeout = Duration::from_secs(1);
        let result = shell(
            &ctx,
            json!({
                "command": "sleep 30 & echo $! > pidfile; echo started; wait",
                "timeout_s": 60,
            }),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert_eq!(result.exit_code, None);
        assert_eq!(result.output, "started\n[command timed out after 1 s]");
        wait_until_gone(read_pid(&dir.path().join("pidfile"))).await;
    }

    #[tokio::test]
    async fn timeout_s_shortens_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let result = shell(
            &context(dir.path()),
            json!({"command": "sleep 30", "timeout_s": 0.2}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert_eq!(result.output, "[command timed out after 0.2 s]");
    }

    #[tokio::test]
    async fn cancel_kills_the_group_and_keeps_the_output() {
        let dir = tempfile::tempdir().unwrap();
        let mut running = start(
            &context(dir.path()),
            json!({"command": "sleep 30 & echo $! > pidfile; echo started; wait"}),
        );
        receive_until(&mut running.chunks, "started\n").await;
        running.cancel.cancel();
        let result = finish(running.handle).await;
        assert_eq!(result.status, ToolStatus::Interrupted);
        assert_eq!(result.exit_code, None);
        assert_eq!(result.output, "started\n[command interrupted]");
        wait_until_gone(read_pid(&dir.path().join("pidfile"))).await;
    }

    #[tokio::test]
    async fn a_background_child_holding_the_pipes_does_not_hang_the_tool() {
        let dir = tempfile::tempdir().unwrap();
        let result = shell(
            &context(dir.path()),
            json!({"command": "sleep 30 & echo $! > pidfile; echo done"}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Completed);
        assert_eq!(result.exit_code, Some(0));
        assert_eq!(result.output, "done\n");
        wait_until_gone(read_pid(&dir.path().join("pidfile"))).await;
    }

    #[tokio::test]
    async fn a_character_split_between_reads_arrives_whole() {
        let dir = tempfile::tempdir().unwrap();
        // "€" is E2 82 AC: its first byte comes in one write, the rest in a later one.
        let mut running = start(
            &context(dir.path()),
            json!({"command": "printf 'a\\342'; while [ ! -e go ]; do sleep 0.01; done; printf '\\202\\254b'"}),
        );
        let seen = receive_until(&mut running.chunks, "a").await;
        assert_eq!(seen, "a");
        std::fs::write(dir.path().join("go"), "").unwrap();
        assert_eq!(receive_until(&mut running.chunks, "b").await, "€b");
        assert_eq!(finish(running.handle).await.output, "a€b");
    }

    #[tokio::test]
    async fn bad_arguments_name_the_parameter() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        #[track_caller]
        fn check(result: ToolResult, expected: &str) {
            assert_eq!(result.status, ToolStatus::Failed);
            assert_eq!(result.output, expected);
        }
        check(
            shell(&ctx, json!({})).await,
            "missing required parameter `command` (a string)",
        );
        check(
            shell(&ctx, json!({"command": ["ls"]})).await,
            "parameter `command` must be a string, not an array",
        );
        check(
            shell(&ctx, json!({"command": "ls", "timeout_s": "10"})).await,
            "parameter `timeout_s` must be a number, not a string",
        );
        check(
            shell(&ctx, json!({"command": "ls", "timeout_s": -1})).await,
            "parameter `timeout_s` must be a positive number of seconds, not -1",
        );
    }

    #[tokio::test]
    async fn a_missing_working_directory_fails() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(&dir.path().join("gone"));
        let result = shell(&ctx, json!({"command": "true"})).await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert!(
            result.output.contains("does not exist"),
            "{}",
            result.output
        );
    }

    #[tokio::test]
    async fn a_program_that_cannot_launch_the_sandbox_refuses_sandboxed_commands() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = context(dir.path());
        ctx.sandbox.mode = crate::config::SandboxMode::WorkspaceWrite;
        let result = shell(&ctx, json!({"command": "echo ran > ran.txt"})).await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert!(
            result
                .output
                .contains("this program cannot start sandboxed commands"),
            "{}",
            result.output
        );
        assert!(!dir.path().join("ran.txt").exists());
    }

    #[tokio::test]
    async fn only_allowed_variables_reach_a_command_even_unsandboxed() {
        let dir = tempfile::tempdir().unwrap();
        // Cargo sets CARGO_PKG_NAME for the tests; it is not on the allow-list.
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let command = json!({"command": "echo \"${CARGO_PKG_NAME-unset} ${HOME:+home}\""});
        assert_eq!(
            shell(&context(dir.path()), command).await.output,
            "unset home\n"
        );
    }
}
