//! The `user_message` hooks, asked before a user's message is stored: they may block it (the
//! request is refused as `message_blocked`, with nothing stored) or add context for the model,
//! which is kept with the message so every later request reads the same.

use super::{Runtime, RuntimeError};
use crate::domain::HookRun;
use crate::hooks::Subject;
use crate::sandbox::SandboxPolicy;

impl Runtime {
    pub(super) async fn user_message_hooks(
        &self,
        subject: &Subject,
        sandbox: &SandboxPolicy,
        text: &str,
        images: usize,
        command: Option<&str>,
    ) -> Result<Vec<HookRun>, RuntimeError> {
        let fields = serde_json::json!({
            "text": text,
            "images": images,
            "command": command,
        });
        self.shared
            .hooks
            .user_message(subject, sandbox, fields)
            .await
            .map_err(RuntimeError::MessageBlocked)
    }
}
