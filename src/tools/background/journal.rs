//! What a conversation's background processes were, kept beside its history in
//! `<conversation>/processes/journal.jsonl`: a line when one starts, a line when it ends. A
//! process whose start has no end line, and that this run of the service does not know, ran
//! when the service died: it is `lost` (the next start killed its group, see
//! `group_records`). Not fsynced: the processes a line names do not outlive a power loss.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::domain::{ProcessInfo, ProcessStatus, Timestamp};

const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Started {
        v: u32,
        process: ProcessInfo,
    },
    Ended {
        v: u32,
        id: String,
        status: ProcessStatus,
        exit_code: Option<i32>,
        ended_at: Timestamp,
        reason: Option<String>,
        output_bytes: u64,
    },
}

/// The journal file in a conversation's processes folder.
pub fn path(dir: &Path) -> PathBuf {
    dir.join("journal.jsonl")
}

pub fn started(dir: &Path, process: &ProcessInfo) {
    append(
        dir,
        &Line::Started {
            v: VERSION,
            process: process.clone(),
        },
    );
}

pub fn ended(dir: &Path, process: &ProcessInfo) {
    append(
        dir,
        &Line::Ended {
            v: VERSION,
            id: process.id.clone(),
            status: process.status,
            exit_code: process.exit_code,
            ended_at: process.ended_at.unwrap_or_else(crate::domain::now),
            reason: process.reason.clone(),
            output_bytes: process.output_bytes,
        },
    );
}

/// A line that cannot be written is logged: only the listing after a crash would miss it.
fn append(dir: &Path, line: &Line) {
    let written = fs::create_dir_all(dir).and_then(|()| {
        let mut bytes = serde_json::to_vec(line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            // Never through a link planted where the journal goes.
            .custom_flags(libc::O_NOFOLLOW)
            .open(path(dir))?
            .write_all(&bytes)
    });
    if let Err(error) = written {
        tracing::warn!(%error, dir = %dir.display(), "cannot write a background process's journal line");
    }
}

/// Every process the journal names, in the order they started, with how each ended; one with
/// no end is `lost`. Lines that cannot be read (a torn last line) are skipped.
pub fn read(dir: &Path) -> Vec<ProcessInfo> {
    let Ok(text) = fs::read_to_string(path(dir)) else {
        return Vec::new();
    };
    let mut processes: Vec<ProcessInfo> = Vec::new();
    for line in text.lines() {
        match serde_json::from_str::<Line>(line) {
            Ok(Line::Started { process, .. }) => processes.push(ProcessInfo {
                status: ProcessStatus::Lost,
                reason: Some(
                    "the service stopped while it ran; it was killed at the next start".to_owned(),
                ),
                ..process
            }),
            Ok(Line::Ended {
                id,
                status,
                exit_code,
                ended_at,
                reason,
                output_bytes,
                ..
            }) => {
                if let Some(process) = processes.iter_mut().find(|process| process.id == id) {
                    process.status = status;
                    process.exit_code = exit_code;
                    process.ended_at = Some(ended_at);
                    process.reason = reason;
                    process.output_bytes = output_bytes;
                }
            }
            Err(_) => {}
        }
    }
    processes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(id: &str) -> ProcessInfo {
        ProcessInfo {
            id: id.to_owned(),
            conversation_id: "c".to_owned(),
            session_id: "s".to_owned(),
            call_id: "m".to_owned(),
            command: "sleep 100".to_owned(),
            status: ProcessStatus::Running,
            exit_code: None,
            started_at: crate::domain::now(),
            ended_at: None,
            reason: None,
            output_bytes: 0,
            ports: Vec::new(),
        }
    }

    #[test]
    fn a_link_planted_where_the_journal_goes_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, "kept\n").unwrap();
        std::os::unix::fs::symlink(&outside, path(dir.path())).unwrap();
        started(dir.path(), &process("p_1"));
        assert_eq!(fs::read_to_string(&outside).unwrap(), "kept\n");
    }

    #[test]
    fn a_start_without_an_end_reads_as_lost_and_a_torn_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let ended_one = ProcessInfo {
            status: ProcessStatus::Exited,
            exit_code: Some(0),
            ended_at: Some(crate::domain::now()),
            output_bytes: 12,
            ..process("p_1")
        };
        started(dir.path(), &process("p_1"));
        started(dir.path(), &process("p_2"));
        ended(dir.path(), &ended_one);
        fs::OpenOptions::new()
            .append(true)
            .open(path(dir.path()))
            .unwrap()
            .write_all(b"{\"ended\": {\"v\": 1, \"id\"")
            .unwrap();
        let read = read(dir.path());
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].status, ProcessStatus::Exited);
        assert_eq!(read[0].output_bytes, 12);
        assert_eq!(read[1].status, ProcessStatus::Lost);
        assert!(
            read[1]
                .reason
                .as_deref()
                .unwrap()
                .contains("killed at the next start")
        );
    }
}
