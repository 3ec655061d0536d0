//! `/ps` in both chats: the conversation's background processes (the `shell` calls with
//! `background: true`), each with its id, status, ports and command; `/ps N` (or its id) shows
//! one with the end of its output, `/ps stop N` stops one.

use super::api::{Api, ApiError};
use crate::domain::{ProcessInfo, ProcessStatus};

const USAGE: &str = "[/ps lists the background processes; /ps N (or ID) shows one's latest \
     output; /ps stop N stops one]\n";
/// The most of a command one line shows.
const COMMAND_CHARS: usize = 80;
/// How much of a process's output `/ps N` reads, and the most lines of it shown.
const TAIL_BYTES: u64 = 8 * 1024;
const TAIL_LINES: usize = 40;

/// What `/ps ARGUMENT` says, as lines in brackets (the plain chat prints them, the full-screen
/// one shows them as a notice).
pub async fn command(api: &Api, conversation: &str, argument: &str) -> Result<String, ApiError> {
    let mut words = argument.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (None, _, _) => Ok(table(&api.processes(conversation).await?.processes)),
        (Some("stop"), Some(which), None) => stop(api, conversation, which).await,
        (Some(which), None, _) if which != "stop" => show(api, conversation, which).await,
        _ => Ok(USAGE.to_owned()),
    }
}

/// The process `which` names (its number in `/ps`, or its id), or what to say instead.
async fn find(
    api: &Api,
    conversation: &str,
    which: &str,
) -> Result<Result<ProcessInfo, String>, ApiError> {
    let processes = api.processes(conversation).await?.processes;
    let found = match which.parse::<usize>() {
        Ok(number) => processes.get(number.wrapping_sub(1)),
        Err(_) => processes.iter().find(|process| process.id == which),
    };
    Ok(found.cloned().ok_or_else(|| {
        format!("[no background process {which} in this conversation; /ps lists them]\n")
    }))
}

/// One process: its line of the table, then the last lines of its output.
async fn show(api: &Api, conversation: &str, which: &str) -> Result<String, ApiError> {
    let process = match find(api, conversation, which).await? {
        Ok(process) => process,
        Err(said) => return Ok(said),
    };
    let since = process.output_bytes.saturating_sub(TAIL_BYTES);
    let read = api.process_output(conversation, &process.id, since).await?;
    let mut out = format!(
        "[{} {} · $ {}]\n",
        read.process.id,
        read.process.status_text(),
        command_line(&read.process.command)
    );
    out.push_str(&tail(&read.output, since > 0 || read.dropped > 0));
    Ok(out)
}

/// The last `TAIL_LINES` lines of `output`, as a terminal can show them safely; `cut` when
/// output came before it.
fn tail(output: &str, cut: bool) -> String {
    if output.is_empty() {
        return "[no output yet]\n".to_owned();
    }
    let lines: Vec<&str> = output.lines().collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    let mut out = String::new();
    if cut || from > 0 {
        out.push_str("[… earlier output not shown]\n");
    }
    // Its own escape sequences never reach the user's terminal.
    out.push_str(&crate::text::visible(&lines[from..].join("\n")));
    out.push('\n');
    out
}

async fn stop(api: &Api, conversation: &str, which: &str) -> Result<String, ApiError> {
    let process = match find(api, conversation, which).await? {
        Ok(process) => process,
        Err(said) => return Ok(said),
    };
    if process.status != ProcessStatus::Running {
        return Ok(format!(
            "[{} is not running: {}]\n",
            process.id,
            process.status_text()
        ));
    }
    let ended = api.stop_process(conversation, &process.id).await?;
    Ok(format!("[{} {}]\n", ended.id, ended.status_text()))
}

/// The processes, numbered in the order they started, with a line that counts them.
pub fn table(processes: &[ProcessInfo]) -> String {
    if processes.is_empty() {
        return "[no background processes in this conversation]\n".to_owned();
    }
    let running = processes
        .iter()
        .filter(|process| process.status == ProcessStatus::Running)
        .count();
    let ended = processes.len() - running;
    let mut out = format!(
        "[background processes: {running} running, {ended} ended; /ps N shows one's output, /ps stop N stops it]\n"
    );
    for (at, process) in processes.iter().enumerate() {
        let ports = if process.ports.is_empty() {
            String::new()
        } else {
            let ports: Vec<String> = process.ports.iter().map(u16::to_string).collect();
            format!(
                " · port{} {}",
                if ports.len() == 1 { "" } else { "s" },
                ports.join(", ")
            )
        };
        out.push_str(&format!(
            "[{}] {} {}{ports} · $ {}\n",
            at + 1,
            process.id,
            process.status_text(),
            command_line(&process.command)
        ));
    }
    out
}

/// A command on one line: its first line, cut to COMMAND_CHARS, invisible characters written
/// out.
fn command_line(command: &str) -> String {
    let first = command.lines().next().unwrap_or_default();
    let mut shown: String = crate::text::visible(first)
        .chars()
        .take(COMMAND_CHARS)
        .collect();
    if shown.chars().count() < crate::text::visible(command).chars().count() {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::fixtures::process;

    #[test]
    fn processes_are_numbered_with_status_ports_and_command() {
        let serving = ProcessInfo {
            ports: vec![5173, 24678],
            ..process("p_1", "npm run dev", ProcessStatus::Running)
        };
        let built = ProcessInfo {
            exit_code: Some(2),
            ..process("p_2", "make build\nmake test", ProcessStatus::Exited)
        };
        let stopped = ProcessInfo {
            reason: Some("a user stopped it".to_owned()),
            ..process("p_3", "sleep 30\u{1b}[2J", ProcessStatus::Killed)
        };
        let lost = ProcessInfo {
            reason: Some("the service ended while it ran".to_owned()),
            ports: vec![8080],
            ..process("p_4", &"x".repeat(100), ProcessStatus::Lost)
        };
        assert_eq!(
            table(&[serving, built, stopped, lost]),
            format!(
                "[background processes: 1 running, 3 ended; /ps N shows one's output, /ps stop N stops it]\n\
                 [1] p_1 running · ports 5173, 24678 · $ npm run dev\n\
                 [2] p_2 exited 2 · $ make build…\n\
                 [3] p_3 stopped (a user stopped it) · $ sleep 30\\x1b[2J\n\
                 [4] p_4 lost (the service ended while it ran) · port 8080 · $ {}…\n",
                "x".repeat(80)
            )
        );
        assert_eq!(
            table(&[]),
            "[no background processes in this conversation]\n"
        );
    }

    #[test]
    fn a_processs_output_shows_its_last_lines_and_no_escape_sequence() {
        let output: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        let shown = tail(&output, false);
        assert!(
            shown.starts_with("[… earlier output not shown]\nline 11\n"),
            "{shown}"
        );
        assert!(shown.ends_with("line 50\n"));
        assert_eq!(tail("ok\u{1b}[2J\n", false), "ok\\x1b[2J\n");
        assert_eq!(tail("", false), "[no output yet]\n");
        assert_eq!(tail("last\n", true), "[… earlier output not shown]\nlast\n");
    }
}
