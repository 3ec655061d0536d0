//! The `user_message` hooks, asked before a user's message is stored: they may block it (the
//! request is refused as `message_blocked`, with nothing stored) or add context for the model,
//! which is kept with the message so every later request reads the same.

use super::{Runtime, RuntimeError};
use crate::domain::HookRun;
use crate::hooks::Subject;
use crate::sandbox::SandboxPolicy;

impl Runtime {
    /// The hooks' runs for a message (none when no `user_message` hook is configured); `whom`
    /// says who it goes to, and is only worked out when a hook will be asked.
    pub(super) async fn user_message_hooks(
        &self,
        whom: impl Future<Output = Result<(Subject, SandboxPolicy), RuntimeError>>,
        text: &str,
        images: usize,
        command: Option<&str>,
    ) -> Result<Vec<HookRun>, RuntimeError> {
        if !self.shared.hooks.any(crate::config::HookEvent::UserMessage) {
            return Ok(Vec::new());
        }
        let (subject, sandbox) = whom.await?;
        let fields = serde_json::json!({
            "text": text,
            "images": images,
            "command": command,
        });
        self.shared
            .hooks
            .user_message(&subject, &sandbox, fields)
            .await
            .map_err(RuntimeError::MessageBlocked)
    }
}
