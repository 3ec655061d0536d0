//! `openvaala acp`: an Agent Client Protocol agent on stdio that is a client of the running
//! service, so that editors (Zed, JetBrains, Neovim, Emacs) use OpenVaala as their agent. Every
//! ACP session is a conversation of the service: the browser, `curl` and the editor see the
//! same live turn. Only this module knows the `agent-client-protocol` crate.
//!
//! `service.rs` finds the service (or starts one); `bridge.rs` answers the editor's requests;
//! `follow.rs` follows a conversation's event stream and turns it into `session/update`s
//! (`updates.rs` builds them, `ledger.rs` remembers what was sent so a replay or a reconnect
//! sends nothing twice); `approvals.rs` carries the service's approvals as
//! `session/request_permission`; `prompt.rs` turns a prompt into a message; `commands.rs`
//! runs the slash commands; `processes.rs` shows background processes' output after their
//! call returned.

mod approvals;
mod bridge;
mod commands;
mod follow;
mod ledger;
mod processes;
mod prompt;
pub mod service;
mod updates;

use std::sync::Arc;

use agent_client_protocol::v1::schema::{CancelNotification, ClientRequest};
use agent_client_protocol::{Agent, Lines};
use tokio::io::AsyncBufReadExt as _;

use crate::client::api::Api;

/// Runs the agent on stdin and stdout until the editor closes stdin.
pub async fn run(api: Api) -> anyhow::Result<()> {
    let bridge = Arc::new(bridge::Bridge::new(api));
    let for_requests = bridge.clone();
    let after_the_editor = bridge.clone();
    let connected = Agent
        .v1()
        .name("openvaala")
        .on_receive_request(
            async move |request: ClientRequest, responder, cx| {
                // Every answer may wait on the service: the dispatch loop must go on meanwhile
                // (a `session/cancel` has to reach a running prompt).
                let bridge = for_requests.clone();
                cx.clone().spawn(async move {
                    let answer = bridge.handle(request, &cx).await;
                    let follow_up = answer.as_ref().ok().and_then(|(_, after)| after.clone());
                    responder.respond_with_result(answer.map(|(value, _)| value))?;
                    if let Some(session) = follow_up {
                        bridge.after_session_opened(&session, &cx).await;
                    }
                    Ok(())
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelNotification, cx| {
                let bridge = bridge.clone();
                cx.spawn(async move {
                    bridge.cancel(&cancel.session_id.0).await;
                    Ok(())
                })
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(stdio())
        .await;
    after_the_editor.withdraw_waiting_prompts().await;
    connected.map_err(|error| anyhow::anyhow!("the ACP connection failed: {error}"))
}

/// The protocol's transport: a line of JSON each way. Lines go to stdout with a plain write
/// from the task that sends them: the crate's own `Stdio` hands every write to a thread pool,
/// and that hand-off was most of the bridge's added latency per chunk (`openvaala-bench acp`).
/// A write blocks only while the editor's pipe is full, and then nothing could be sent anyway.
fn stdio() -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let outgoing = futures::sink::unfold((), async |(), line: String| {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(line.as_bytes())?;
        stdout.write_all(b"\n")?;
        stdout.flush()
    });
    let incoming = tokio_stream::wrappers::LinesStream::new(
        tokio::io::BufReader::new(tokio::io::stdin()).lines(),
    );
    Lines::new(outgoing, incoming)
}
