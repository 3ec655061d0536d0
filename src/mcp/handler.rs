//! What the service does with a server's notifications and requests: progress of a running
//! call goes to that call's live output, a changed tool list is listed again before its next
//! use, and a question for the user or a request for the model goes to the call that runs
//! (`asking`), answered by the peer that call brought.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
#[allow(deprecated)]
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, ProgressNotificationParam, ProgressToken,
    SamplingCapability, SamplingMessage,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use tokio::sync::mpsc::UnboundedSender;

use super::asking::{
    Answer, CallPeer, Question, SampleRequest, oversized_question, oversized_sample,
};

/// One connection's handler; the connection keeps a clone of its shared parts.
#[derive(Clone, Default)]
pub struct Handler {
    /// The server's name, as questions and sampling requests name it.
    server: Arc<str>,
    /// The running calls, by their progress token.
    calls: Arc<Mutex<HashMap<ProgressToken, Watched>>>,
    /// Orders the calls: a request goes to the newest.
    started: Arc<AtomicU64>,
    /// Set by `notifications/tools/list_changed`: the next use lists the tools again.
    pub tools_changed: Arc<AtomicBool>,
}

/// A running call: where its progress goes, who answers for it, and how many of its
/// server's requests wait on that answer (its time limit does not run meanwhile).
struct Watched {
    live: UnboundedSender<String>,
    peer: Option<Arc<dyn CallPeer>>,
    waiting: Arc<AtomicUsize>,
    order: u64,
    /// The progress last shown: the SDK hands each notification to a task of its own, so one
    /// may arrive after a later one; the protocol's progress only grows, so it is dropped.
    shown: Option<f64>,
}

impl Handler {
    pub fn new(server: &str) -> Handler {
        Handler {
            server: server.into(),
            ..Handler::default()
        }
    }

    /// Routes the progress of the call with `token` to `live`, and the server's requests to
    /// `peer`, until [`Handler::unwatch`]. The count it returns is of the server's requests
    /// waiting on the peer.
    pub fn watch(
        &self,
        token: ProgressToken,
        live: UnboundedSender<String>,
        peer: Option<Arc<dyn CallPeer>>,
    ) -> Arc<AtomicUsize> {
        let waiting = Arc::new(AtomicUsize::new(0));
        let order = self.started.fetch_add(1, Ordering::Relaxed);
        lock(&self.calls).insert(
            token,
            Watched {
                live,
                peer,
                waiting: waiting.clone(),
                order,
                shown: None,
            },
        );
        waiting
    }

    pub fn unwatch(&self, token: &ProgressToken) {
        lock(&self.calls).remove(token);
    }

    /// The peer of the newest running call that has one. The protocol does not say which call
    /// a request belongs to over stdio: a server asks while the call it serves runs, so with
    /// one call at a time (the usual case) this is that call.
    fn peer(&self) -> Option<(Arc<dyn CallPeer>, Arc<AtomicUsize>)> {
        lock(&self.calls)
            .values()
            .filter(|watched| watched.peer.is_some())
            .max_by_key(|watched| watched.order)
            .and_then(|watched| Some((watched.peer.clone()?, watched.waiting.clone())))
    }
}

/// Counts a request waiting on a peer while it lives.
struct Waiting(Arc<AtomicUsize>);

impl Waiting {
    fn new(count: Arc<AtomicUsize>) -> Waiting {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One progress notification as a line of output.
pub fn progress_line(params: &ProgressNotificationParam) -> String {
    let amount = match params.total {
        Some(total) => format!("{}/{}", params.progress, total),
        None => format!("{}", params.progress),
    };
    match params.message.as_deref().filter(|m| !m.is_empty()) {
        Some(message) => format!("[progress {amount}] {message}\n"),
        None => format!("[progress {amount}]\n"),
    }
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut calls = lock(&self.calls);
        let Some(watched) = calls.get_mut(&params.progress_token) else {
            return;
        };
        if watched.shown.is_some_and(|shown| params.progress <= shown) {
            return;
        }
        watched.shown = Some(params.progress);
        let _ = watched.live.send(progress_line(&params));
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            tracing::info!(mcp_server = %self.server, "declined a request to open a URL: only forms are asked");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let Some((peer, waiting)) = self.peer() else {
            tracing::info!(mcp_server = %self.server, "declined a question asked while none of its calls runs");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let question = Question {
            server: self.server.to_string(),
            message,
            schema: serde_json::to_value(&requested_schema).unwrap_or_default(),
        };
        if let Some(why) = oversized_question(&question) {
            tracing::warn!(mcp_server = %self.server, "declined a question: {why}");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        let _waiting = Waiting::new(waiting);
        Ok(match peer.ask(question).await {
            Answer::Accepted(content) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(serde_json::Value::Object(content)),
            Answer::Declined => ElicitResult::new(ElicitationAction::Decline),
            Answer::Cancelled => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    // Sampling is deprecated by a newer revision of the protocol, but servers still use it,
    // and the SDK's types for it are the ones there are.
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        let Some((peer, waiting)) = self.peer() else {
            return Err(rmcp::ErrorData::invalid_request(
                "the client samples only while one of this server's calls runs",
                None,
            ));
        };
        let request = sample_request(&self.server, &params);
        if let Some(why) = oversized_sample(&request) {
            return Err(rmcp::ErrorData::invalid_request(why, None));
        }
        let _waiting = Waiting::new(waiting);
        match peer.sample(request).await {
            Ok(sampled) => {
                let mut result = CreateMessageResult::new(
                    SamplingMessage::assistant_text(sampled.text),
                    sampled.model,
                );
                result.stop_reason = Some(CreateMessageResult::STOP_REASON_END_TURN.to_owned());
                Ok(result)
            }
            Err(why) => Err(rmcp::ErrorData::invalid_request(why, None)),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        capabilities.sampling = Some(SamplingCapability::default());
        ClientConfig::new(
            capabilities,
            Implementation::new("openvaala", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A sampling request's text: each message's text parts (others are named, not sent).
#[allow(deprecated)]
fn sample_request(server: &str, params: &CreateMessageRequestParams) -> SampleRequest {
    let messages = params
        .messages
        .iter()
        .map(|message| {
            let value = serde_json::to_value(message).unwrap_or_default();
            let role = value["role"].as_str().unwrap_or("user").to_owned();
            let parts = match &value["content"] {
                serde_json::Value::Array(parts) => parts.clone(),
                part => vec![part.clone()],
            };
            let text: Vec<String> = parts
                .iter()
                .map(|part| match part["type"].as_str() {
                    Some("text") => part["text"].as_str().unwrap_or_default().to_owned(),
                    Some(other) => format!("[{other} left out]"),
                    None => String::new(),
                })
                .collect();
            (role, text.join("\n"))
        })
        .collect();
    SampleRequest {
        server: server.to_owned(),
        system_prompt: params.system_prompt.clone(),
        messages,
        max_tokens: params.max_tokens,
    }
}
