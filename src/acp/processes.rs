//! Background processes in the editor: a `shell` call that started one (`background: true`)
//! goes on showing the process's output after the call itself returned, until the process
//! ends. An editor that says it shows agent terminals (`clientCapabilities._meta.
//! terminal_output: true`, the convention Zed reads) gets the call's content as a terminal,
//! fed with `_meta.terminal_output` chunks and closed with `_meta.terminal_exit`; any other
//! editor gets the output's tail as the call's text, with the process's status.
//!
//! The output is read from the service's process output stream (its documented SSE), resumed
//! from the last cursor when the stream drops.

use std::time::{Duration, Instant};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    Meta, SessionNotification, SessionUpdate, Terminal, ToolCallContent, ToolCallUpdate,
    ToolCallUpdateFields,
};
use futures::StreamExt;
use serde_json::{Value, json};

use super::updates::text_block;
use crate::client::api::Api;
use crate::client::events::ProcessEvent;
use crate::domain::{Item, ItemKind, ItemStatus, ProcessInfo, ProcessStatus};

/// How much of an output that is already long is shown when following starts.
const SHOWN_BEFORE: u64 = 64 * 1024;
/// The most of the output an editor without terminals is shown (the call's text).
const TEXT_TAIL_BYTES: usize = 16 * 1024;
/// An editor without terminals gets the tail again at most this often.
const TEXT_EVERY: Duration = Duration::from_millis(250);
/// How long the stream may fail to start again before following gives up.
const RETRY_LIMIT: Duration = Duration::from_secs(20);

/// Whether the editor's capabilities say it shows agent terminals.
pub fn shows_terminals(meta: Option<&Meta>) -> bool {
    meta.and_then(|meta| meta.get("terminal_output")) == Some(&Value::Bool(true))
}

/// Whether `item` is a finished `shell` call that started a background process.
pub fn started_by(item: &Item) -> bool {
    matches!(&item.kind, ItemKind::ToolCall { name, arguments, .. }
        if name == "shell" && arguments["background"] == true)
        && item.status == ItemStatus::Completed
}

/// Following one process for the editor.
pub struct Watch {
    pub api: Api,
    pub conversation: String,
    /// The `shell` call that started it.
    pub call_id: String,
    /// The editor's session that shows the call.
    pub acp_session: String,
    pub cx: ConnectionTo<Client>,
    pub terminals: bool,
    pub cwd: String,
}

impl Watch {
    fn send(&self, fields: ToolCallUpdateFields, meta: Option<Meta>) {
        let update = ToolCallUpdate::new(self.call_id.clone(), fields).meta(meta);
        // The editor went away: nothing to do but stop sending.
        let _ = self.cx.send_notification(SessionNotification::new(
            self.acp_session.clone(),
            SessionUpdate::ToolCallUpdate(update),
        ));
    }

    fn terminal_meta(&self, key: &str, value: Value) -> Option<Meta> {
        let mut meta = Meta::new();
        meta.insert(key.to_owned(), value);
        Some(meta)
    }

    fn terminal_chunk(&self, process: &str, data: &str) {
        let meta = self.terminal_meta(
            "terminal_output",
            json!({"terminal_id": process, "data": data}),
        );
        self.send(ToolCallUpdateFields::new(), meta);
    }

    fn text(&self, process: &ProcessInfo, tail: &str) {
        let status = process.status_text();
        let mut text = format!("Background process {} ({status})", process.id);
        if !tail.is_empty() {
            text.push_str(":\n");
            text.push_str(tail);
        }
        self.send(
            ToolCallUpdateFields::new().content(vec![ToolCallContent::from(text_block(text))]),
            None,
        );
    }

    /// Follows the process the call started until it ends (or the service cannot say).
    pub async fn run(self) {
        let Ok(list) = self.api.processes(&self.conversation).await else {
            return;
        };
        let Some(mut process) = list
            .processes
            .into_iter()
            .find(|process| process.call_id == self.call_id)
        else {
            return;
        };
        let mut since = process.output_bytes.saturating_sub(SHOWN_BEFORE);
        let mut tail = String::new();
        if self.terminals {
            let terminal = Terminal::new(process.id.clone());
            let meta = self.terminal_meta(
                "terminal_info",
                json!({"terminal_id": process.id, "cwd": self.cwd}),
            );
            self.send(
                ToolCallUpdateFields::new().content(vec![ToolCallContent::Terminal(terminal)]),
                meta,
            );
        } else {
            self.text(&process, "");
        }
        if since > 0 {
            let note = format!("[{since} bytes of earlier output not shown]\n");
            if self.terminals {
                self.terminal_chunk(&process.id, &note);
            } else {
                tail.push_str(&note);
            }
        }
        let mut failing_since: Option<Instant> = None;
        let mut last_text = Instant::now();
        let mut unsent = false;
        let ended = 'follow: loop {
            let stream = self
                .api
                .process_output_events(&self.conversation, &process.id, since)
                .await;
            let stream = match stream {
                Ok(stream) => {
                    failing_since = None;
                    stream
                }
                Err(error) if error.is(crate::api::errors::ErrorCode::NotFound) => return,
                Err(_) => {
                    if failing_since.get_or_insert_with(Instant::now).elapsed() > RETRY_LIMIT {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            tokio::pin!(stream);
            loop {
                let event = match tokio::time::timeout(TEXT_EVERY, stream.next()).await {
                    Ok(Some(event)) => event.event,
                    // The stream dropped (a restart): read on from the cursor.
                    Ok(None) => break,
                    Err(_) => {
                        if unsent {
                            self.text(&process, &tail);
                            (unsent, last_text) = (false, Instant::now());
                        }
                        continue;
                    }
                };
                match event {
                    ProcessEvent::Output {
                        output,
                        next,
                        dropped,
                    } => {
                        since = next;
                        let mut chunk = String::new();
                        if dropped > 0 {
                            chunk.push_str(&format!("[{dropped} bytes of output not kept]\n"));
                        }
                        chunk.push_str(&output);
                        if self.terminals {
                            self.terminal_chunk(&process.id, &chunk);
                        } else {
                            tail.push_str(&chunk);
                            keep_tail(&mut tail);
                            unsent = true;
                            if last_text.elapsed() >= TEXT_EVERY {
                                self.text(&process, &tail);
                                (unsent, last_text) = (false, Instant::now());
                            }
                        }
                    }
                    ProcessEvent::Ended { process: info } => break 'follow info,
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        process = ended;
        if self.terminals {
            let signal = (process.status == ProcessStatus::Killed).then_some("SIGKILL");
            let meta = self.terminal_meta(
                "terminal_exit",
                json!({
                    "terminal_id": process.id,
                    "exit_code": process.exit_code,
                    "signal": signal,
                }),
            );
            self.send(ToolCallUpdateFields::new(), meta);
        } else {
            self.text(&process, &tail);
        }
    }
}

/// Keeps the last `TEXT_TAIL_BYTES` of `tail`, cut at a line's start where one is near.
fn keep_tail(tail: &mut String) {
    if tail.len() <= TEXT_TAIL_BYTES {
        return;
    }
    let cut = crate::text::floor_char_boundary(tail, tail.len() - TEXT_TAIL_BYTES);
    let cut = tail[cut..].find('\n').map_or(cut, |line| cut + line + 1);
    tail.drain(..cut);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_tail_is_cut_at_a_lines_start() {
        let mut tail = "a".repeat(10) + "\n" + &"é\n".repeat(TEXT_TAIL_BYTES / 3);
        keep_tail(&mut tail);
        assert!(tail.len() <= TEXT_TAIL_BYTES);
        assert!(tail.starts_with('é'), "{}", &tail[..10]);
    }

    #[test]
    fn terminals_are_shown_only_to_an_editor_that_says_so() {
        let mut meta = Meta::new();
        assert!(!shows_terminals(None));
        assert!(!shows_terminals(Some(&meta)));
        meta.insert("terminal_output".to_owned(), json!(true));
        assert!(shows_terminals(Some(&meta)));
    }
}
