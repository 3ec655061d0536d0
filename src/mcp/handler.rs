//! What the service does with a server's notifications: progress of a running call goes to
//! that call's live output, and a changed tool list is listed again before its next use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
use rmcp::model::{ClientConfig, Implementation, ProgressNotificationParam, ProgressToken};
use rmcp::service::{NotificationContext, RoleClient};
use tokio::sync::mpsc::UnboundedSender;

/// One connection's handler; the connection keeps a clone of its shared parts.
#[derive(Clone, Default)]
pub struct Handler {
    /// Where each running call's progress goes, by its progress token.
    progress: Arc<Mutex<HashMap<ProgressToken, UnboundedSender<String>>>>,
    /// Set by `notifications/tools/list_changed`: the next use lists the tools again.
    pub tools_changed: Arc<AtomicBool>,
}

impl Handler {
    /// Routes the progress of the call with `token` to `live` until [`Handler::unwatch`].
    pub fn watch(&self, token: ProgressToken, live: UnboundedSender<String>) {
        lock(&self.progress).insert(token, live);
    }

    pub fn unwatch(&self, token: &ProgressToken) {
        lock(&self.progress).remove(token);
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
        let live = lock(&self.progress).get(&params.progress_token).cloned();
        if let Some(live) = live {
            let _ = live.send(progress_line(&params));
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            Default::default(),
            Implementation::new("openvaala", env!("CARGO_PKG_VERSION")),
        )
    }
}
