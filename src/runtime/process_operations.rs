//! A conversation's background processes, as clients see and stop them.

use std::time::Duration;

use super::{Runtime, RuntimeError};
use crate::api::responses::{ProcessList, ProcessOutput};
use crate::domain::ProcessInfo;

/// The most of a process's output one read returns.
const READ_MAX_BYTES: usize = 256 * 1024;
/// The longest a read waits for more output.
const MAX_WAIT: Duration = Duration::from_secs(60);

impl Runtime {
    pub fn processes(&self, id: &str) -> Result<ProcessList, RuntimeError> {
        self.known_conversation(id)?;
        Ok(ProcessList {
            processes: self.shared.processes.list(id),
        })
    }

    /// What a process wrote after `since`, waiting up to `wait` for more or for its end.
    pub async fn process_output(
        &self,
        id: &str,
        process_id: &str,
        since: u64,
        wait: Duration,
    ) -> Result<ProcessOutput, RuntimeError> {
        self.known_conversation(id)?;
        if let Some(process) = self.shared.processes.get(id, process_id)
            && !wait.is_zero()
        {
            process.wait_past(since, wait.min(MAX_WAIT)).await;
        }
        let (process, read) = self
            .shared
            .processes
            .read(id, process_id, since, READ_MAX_BYTES)
            .ok_or_else(|| RuntimeError::NotFound(format!("process {process_id}")))?;
        Ok(ProcessOutput {
            process,
            output: read.text,
            next: read.next,
            dropped: read.dropped,
        })
    }

    /// Stops a running process and its group (TERM, then KILL after a grace), and answers
    /// how it ended; a process that already ended is answered as it is.
    pub async fn stop_process(
        &self,
        id: &str,
        process_id: &str,
    ) -> Result<ProcessInfo, RuntimeError> {
        self.known_conversation(id)?;
        let Some(process) = self.shared.processes.get(id, process_id) else {
            return self
                .shared
                .processes
                .list(id)
                .into_iter()
                .find(|process| process.id == process_id)
                .ok_or_else(|| RuntimeError::NotFound(format!("process {process_id}")));
        };
        if process.stop("a user stopped it", libc::SIGTERM) {
            let _ = tokio::time::timeout(Duration::from_secs(5), process.ended()).await;
        }
        Ok(process.info())
    }

    /// A live handle on a process, for a client that follows its output.
    pub fn process(
        &self,
        id: &str,
        process_id: &str,
    ) -> Option<std::sync::Arc<crate::tools::background::Process>> {
        self.shared.processes.get(id, process_id)
    }

    fn known_conversation(&self, id: &str) -> Result<(), RuntimeError> {
        if self.shared.store.exists(id) {
            Ok(())
        } else {
            Err(RuntimeError::NotFound(format!("conversation {id}")))
        }
    }
}
