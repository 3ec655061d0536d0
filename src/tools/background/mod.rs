//! Background processes: commands a `shell` call started with `background: true`, which go on
//! after the call returns, owned by their conversation. One registry per service.
//!
//! - A process runs like any shell command (the agent's sandbox, its own process group, a
//!   record in `<data>/processes/` so the next start after a crash kills what is left), but
//!   with no call waiting on it: a task of its own reads its output into a bounded buffer of
//!   recent output (`buffer.rs`) and its newest output on disk (`log.rs`).
//! - It ends on its own, by `process_kill` or a user's stop, at its agent's
//!   `limits.background_max_s`, when its conversation is deleted, or when the service stops.
//!   Its group is killed then, so nothing it started lives on.
//! - `journal.rs` keeps a line per start and end, so the processes a dead run left show as
//!   `lost`; `ports.rs` finds the TCP ports a running one listens on.
//! - `tool.rs` is the tools' side: `shell` with `background`, `process_output`,
//!   `process_list` and `process_kill`.

mod buffer;
mod journal;
mod log;
mod ports;
mod scope;
pub mod tool;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use buffer::OutputBuffer;
pub use buffer::Read;
pub use scope::BackgroundScope;

use super::group_records::{self, GroupRecords, RecordFile};
use super::pipe::Pipe;
use crate::domain::{ProcessInfo, ProcessStatus, new_id, now};
use crate::sandbox::{Program, SandboxPolicy};

/// Recent output kept in memory per process; older output is in its log file.
const BUFFER_BYTES: usize = 256 * 1024;
/// Ended processes kept per conversation, in memory and with their logs on disk; the journal
/// keeps how the older ones ended.
const ENDED_KEPT: usize = 16;
/// After `sh` exits, a child may hold the pipes open: wait this long for their end.
const EXIT_GRACE: Duration = Duration::from_millis(250);
/// Output held back for a possible secret goes out after this long without more.
const HELD_OUTPUT_WAIT: Duration = Duration::from_millis(200);
/// A process asked to stop with a signal it may catch gets this long before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Told when a process starts (`true`) or ends (`false`): the runtime publishes it.
pub type Announcer = Arc<dyn Fn(&ProcessInfo, bool) + Send + Sync>;

/// Every background process this run of the service started.
pub struct Processes {
    processes: Mutex<HashMap<String, Arc<Process>>>,
    records: Option<GroupRecords>,
    conversations_dir: PathBuf,
    max_total: usize,
    announce: Option<Announcer>,
}

impl std::fmt::Debug for Processes {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Processes")
            .field("max_total", &self.max_total)
            .finish_non_exhaustive()
    }
}

/// One background process.
pub struct Process {
    info: Mutex<ProcessInfo>,
    output: Mutex<OutputBuffer>,
    /// Bumped whenever output arrives or the process ends.
    changed: tokio::sync::watch::Sender<u64>,
    pgid: libc::pid_t,
    /// Why it is being stopped, once something stops it.
    stopping: Mutex<Option<String>>,
}

/// What starting a process needs.
pub struct Start<'a> {
    pub conversation_id: &'a str,
    pub session_id: &'a str,
    pub call_id: &'a str,
    pub command: &'a str,
    pub cwd: &'a Path,
    pub sandbox: &'a SandboxPolicy,
    /// Running at once in the conversation, at most.
    pub max_per_conversation: usize,
    /// How long it may run.
    pub max_run: Duration,
}

impl Processes {
    pub fn new(
        records: Option<GroupRecords>,
        conversations_dir: PathBuf,
        max_total: usize,
        announce: Option<Announcer>,
    ) -> Processes {
        Processes {
            processes: Mutex::default(),
            records,
            conversations_dir,
            max_total,
            announce,
        }
    }

    /// The folder of a conversation's process logs and journal.
    fn dir(&self, conversation_id: &str) -> PathBuf {
        self.conversations_dir
            .join(conversation_id)
            .join("processes")
    }

    /// Starts `start.command` in the background; `Err` says why it could not (a limit, the
    /// sandbox).
    pub fn start(self: &Arc<Self>, start: Start<'_>) -> Result<Arc<Process>, String> {
        let mut processes = self.processes.lock().expect("processes");
        let running = |conversation: Option<&str>| {
            processes
                .values()
                .filter(|process| process.is_running())
                .filter(|process| {
                    conversation.is_none_or(|id| process.info().conversation_id == id)
                })
                .count()
        };
        if running(Some(start.conversation_id)) >= start.max_per_conversation {
            return Err(format!(
                "this conversation already runs {} background processes, its most \
                 (tools.max_background): stop one with process_kill first",
                start.max_per_conversation
            ));
        }
        if running(None) >= self.max_total {
            return Err(format!(
                "the service already runs {} background processes, its most \
                 (tools.max_background_total)",
                self.max_total
            ));
        }
        let dir = self.dir(start.conversation_id);
        std::fs::create_dir_all(&dir)
            .map_err(|error| format!("cannot make {}: {error}", dir.display()))?;
        let mut sh =
            crate::sandbox::command(start.sandbox, start.cwd, Program::Shell(start.command))?;
        sh.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = sh
            .spawn()
            .map_err(|error| format!("could not start sh: {error}"))?;
        let Some(pgid) = child
            .id()
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .filter(|&pgid| pgid > 1)
        else {
            return Err("sh ended before it could be followed".to_owned());
        };
        let record = self
            .records
            .as_ref()
            .and_then(|records| records.record_running(pgid, start.command));
        let info = ProcessInfo {
            id: new_id("p"),
            conversation_id: start.conversation_id.to_owned(),
            session_id: start.session_id.to_owned(),
            call_id: start.call_id.to_owned(),
            // Shown and stored like the call's arguments: redacted.
            command: crate::redact::redact(start.command).into_owned(),
            status: ProcessStatus::Running,
            exit_code: None,
            started_at: now(),
            ended_at: None,
            reason: None,
            output_bytes: 0,
            ports: Vec::new(),
        };
        journal::started(&dir, &info);
        let process = Arc::new(Process {
            info: Mutex::new(info.clone()),
            output: Mutex::new(OutputBuffer::new(BUFFER_BYTES)),
            changed: tokio::sync::watch::channel(0).0,
            pgid,
            stopping: Mutex::new(None),
        });
        processes.insert(info.id.clone(), process.clone());
        drop(processes);
        if let Some(announce) = &self.announce {
            announce(&info, true);
        }
        let stdout = Pipe::new(child.stdout.take());
        let stderr = Pipe::new(child.stderr.take());
        let supervised = Supervised {
            process: process.clone(),
            child,
            record,
            dir,
            deadline: Instant::now() + start.max_run,
            max_run: start.max_run,
        };
        tokio::spawn(supervise(self.clone(), supervised, stdout, stderr));
        Ok(process)
    }

    /// How many processes run now, in every conversation.
    pub fn running(&self) -> usize {
        self.processes
            .lock()
            .expect("processes")
            .values()
            .filter(|process| process.info().status == ProcessStatus::Running)
            .count()
    }

    /// A process of `conversation_id` this run knows (running, or ended not long ago).
    pub fn get(&self, conversation_id: &str, id: &str) -> Option<Arc<Process>> {
        self.processes
            .lock()
            .expect("processes")
            .get(id)
            .filter(|process| process.info().conversation_id == conversation_id)
            .cloned()
    }

    /// Every process of a conversation, in the order they started: those this run knows as
    /// they are (a running one with its ports), the others as the journal says (`lost` if
    /// they never ended).
    pub fn list(&self, conversation_id: &str) -> Vec<ProcessInfo> {
        let dir = self.dir(conversation_id);
        let mut listed = journal::read(&dir);
        for process in self.of_conversation(conversation_id) {
            let info = process.info_with_ports();
            match listed.iter_mut().find(|listed| listed.id == info.id) {
                Some(listed) => *listed = info,
                None => listed.push(info),
            }
        }
        // A process whose end was never recorded wrote what its log holds.
        if listed
            .iter()
            .any(|process| process.status == ProcessStatus::Lost)
        {
            let totals = log::totals(&dir);
            for process in &mut listed {
                if process.status == ProcessStatus::Lost {
                    process.output_bytes = totals.get(&process.id).copied().unwrap_or(0);
                }
            }
        }
        listed.sort_by_key(|process| process.started_at);
        listed
    }

    /// What a process wrote after `since`: from memory when this run knows it and still holds
    /// that part, else from its log. `None` when the conversation has no such process.
    pub fn read(
        &self,
        conversation_id: &str,
        id: &str,
        since: u64,
        max_bytes: usize,
    ) -> Option<(ProcessInfo, Read)> {
        let dir = self.dir(conversation_id);
        if let Some(process) = self.get(conversation_id, id) {
            let info = process.info();
            let read = process.read(since, max_bytes);
            if read.dropped == 0 {
                return Some((info, read));
            }
            // Older than memory holds: the log may still keep it.
            return Some((info, log::read(&dir, id, since, max_bytes)));
        }
        let info = self
            .list(conversation_id)
            .into_iter()
            .find(|process| process.id == id)?;
        Some((info, log::read(&dir, id, since, max_bytes)))
    }

    /// Stops every running process of a conversation (it is being deleted), and waits for
    /// their ends, a few seconds at most.
    pub async fn end_conversation(&self, conversation_id: &str, reason: &str) {
        end_all(&self.of_conversation(conversation_id), reason).await;
        self.processes
            .lock()
            .expect("processes")
            .retain(|_, process| process.info().conversation_id != conversation_id);
    }

    /// Whether a process of the conversation runs here.
    pub fn any_running(&self, conversation_id: &str) -> bool {
        self.of_conversation(conversation_id)
            .iter()
            .any(|process| process.is_running())
    }

    /// The processes of a conversation this run knows.
    fn of_conversation(&self, conversation_id: &str) -> Vec<Arc<Process>> {
        self.processes
            .lock()
            .expect("processes")
            .values()
            .filter(|process| process.info().conversation_id == conversation_id)
            .cloned()
            .collect()
    }

    /// Stops every running process (the service stops), and waits for their ends.
    pub async fn shutdown(&self) {
        let running: Vec<Arc<Process>> = self
            .processes
            .lock()
            .expect("processes")
            .values()
            .cloned()
            .collect();
        end_all(&running, "the service stopped").await;
    }

    /// Forgets the oldest ended processes of a conversation past `ENDED_KEPT`.
    fn trim(&self, conversation_id: &str) {
        let mut processes = self.processes.lock().expect("processes");
        let mut ended: Vec<(crate::domain::Timestamp, String)> = processes
            .values()
            .map(|process| process.info())
            .filter(|info| info.conversation_id == conversation_id)
            .filter(|info| info.status != ProcessStatus::Running)
            .map(|info| (info.started_at, info.id))
            .collect();
        if ended.len() <= ENDED_KEPT {
            return;
        }
        ended.sort();
        // Their logs go too: a model that starts process after process cannot fill the disk
        // a log at a time. The journal keeps how they ended.
        let dir = self.dir(conversation_id);
        for (_, id) in &ended[..ended.len() - ENDED_KEPT] {
            processes.remove(id);
            log::remove(&dir, id);
        }
    }
}

async fn end_all(processes: &[Arc<Process>], reason: &str) {
    for process in processes {
        process.stop(reason, libc::SIGKILL);
    }
    for process in processes {
        let _ = tokio::time::timeout(STOP_GRACE, process.ended()).await;
    }
}

impl Process {
    pub fn info(&self) -> ProcessInfo {
        self.info.lock().expect("process info").clone()
    }

    fn info_with_ports(&self) -> ProcessInfo {
        let mut info = self.info();
        if info.status == ProcessStatus::Running {
            info.ports = ports::listening(self.pgid);
        }
        info
    }

    pub fn is_running(&self) -> bool {
        self.info.lock().expect("process info").status == ProcessStatus::Running
    }

    pub fn read(&self, since: u64, max_bytes: usize) -> Read {
        self.output.lock().expect("output").read(since, max_bytes)
    }

    /// Waits until it writes past `since` or ends, `wait` at most.
    pub async fn wait_past(&self, since: u64, wait: Duration) {
        let mut changed = self.changed.subscribe();
        let _ = tokio::time::timeout(wait, async {
            loop {
                let total = self.output.lock().expect("output").total();
                if total > since || !self.is_running() {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    /// Waits until it has ended.
    pub async fn ended(&self) {
        let mut changed = self.changed.subscribe();
        while self.is_running() {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Signals its whole group, saying why; a signal it may catch is followed by SIGKILL
    /// after a grace. False when it was not running.
    pub fn stop(self: &Arc<Self>, reason: &str, signal: libc::c_int) -> bool {
        if !self.is_running() {
            return false;
        }
        self.stopping
            .lock()
            .expect("stopping")
            .get_or_insert_with(|| reason.to_owned());
        // SAFETY: kill(2) touches no memory of ours; the group is this process's own (its
        // leader is not reaped while it counts as running, so the id is not reused).
        unsafe {
            libc::kill(-self.pgid, signal);
        }
        if signal != libc::SIGKILL {
            let process = self.clone();
            tokio::spawn(async move {
                if tokio::time::timeout(STOP_GRACE, process.ended())
                    .await
                    .is_err()
                {
                    group_records::kill_group(process.pgid);
                }
            });
        }
        true
    }
}

/// A running process and what its supervisor owns.
struct Supervised {
    process: Arc<Process>,
    child: tokio::process::Child,
    record: Option<RecordFile>,
    dir: PathBuf,
    deadline: Instant,
    max_run: Duration,
}

/// Reads a process's output until it ends, then kills what is left of its group and says how
/// it ended.
async fn supervise(
    processes: Arc<Processes>,
    supervised: Supervised,
    mut stdout: Pipe<tokio::process::ChildStdout>,
    mut stderr: Pipe<tokio::process::ChildStderr>,
) {
    let Supervised {
        process,
        mut child,
        record,
        dir,
        deadline,
        max_run,
    } = supervised;
    let mut log = log::Log::open(&dir, &process.info().id).await;
    // Its output goes through the same redaction as everything stored or shown, piece by
    // piece: a secret split between two reads is still found.
    let mut redactor = crate::redact::StreamRedactor::default();
    let mut exit: Option<std::process::ExitStatus> = None;
    let mut grace_end = deadline;
    loop {
        if exit.is_some() && !stdout.is_open() && !stderr.is_open() {
            break;
        }
        tokio::select! {
            text = stdout.next_text(), if stdout.is_open() => {
                process.push(&redactor.push(&text), &mut log).await;
            }
            text = stderr.next_text(), if stderr.is_open() => {
                process.push(&redactor.push(&text), &mut log).await;
            }
            // A process that paused shows what it printed: the few bytes held back for a
            // secret go out after a moment.
            () = tokio::time::sleep(HELD_OUTPUT_WAIT), if redactor.holds_back() => {
                process.push(&redactor.flush(), &mut log).await;
            }
            waited = child.wait(), if exit.is_none() => {
                exit = waited.ok();
                grace_end = Instant::now() + EXIT_GRACE;
                if exit.is_none() {
                    break;
                }
            }
            () = sleep_until(grace_end), if exit.is_some() => break,
            () = sleep_until(deadline), if exit.is_none() => {
                process.stop(
                    &format!(
                        "it ran for its agent's limits.background_max_s = {}",
                        max_run.as_secs()
                    ),
                    libc::SIGKILL,
                );
                // Far in the future: the wait above now ends it.
                grace_end = Instant::now() + Duration::from_secs(3600);
            }
        }
    }
    process.push(&redactor.flush(), &mut log).await;
    // Whatever it started ends with it; the record goes only after the kill.
    group_records::kill_group(process.pgid);
    drop(record);
    if exit.is_none() {
        let _ = child.start_kill();
        exit = tokio::time::timeout(Duration::from_secs(1), child.wait())
            .await
            .ok()
            .and_then(Result::ok);
    }
    let stopping = process.stopping.lock().expect("stopping").clone();
    let info = {
        let mut info = process.info.lock().expect("process info");
        let code = exit.and_then(|status| status.code());
        let signal = exit.and_then(|status| std::os::unix::process::ExitStatusExt::signal(&status));
        (info.status, info.exit_code, info.reason) = match (stopping, code) {
            (Some(reason), _) => (ProcessStatus::Killed, code, Some(reason)),
            (None, Some(code)) => (ProcessStatus::Exited, Some(code), None),
            (None, None) => (
                ProcessStatus::Killed,
                None,
                Some(format!("killed by signal {}", signal.unwrap_or(0))),
            ),
        };
        info.ended_at = Some(now());
        info.ports.clear();
        info.clone()
    };
    journal::ended(&dir, &info);
    process.changed.send_modify(|version| *version += 1);
    if let Some(announce) = &processes.announce {
        announce(&info, false);
    }
    processes.trim(&info.conversation_id);
}

impl Process {
    async fn push(&self, text: &str, log: &mut log::Log) {
        if text.is_empty() {
            return;
        }
        self.output.lock().expect("output").push(text);
        self.info.lock().expect("process info").output_bytes += text.len() as u64;
        log.write(text).await;
        self.changed.send_modify(|version| *version += 1);
    }
}
