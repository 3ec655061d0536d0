//! Checks of a request's content before anything is stored (invariant 7, bad input changes
//! nothing).

use std::path::Path;

use super::*;
use crate::domain::{Conversation, Image};
use crate::images::Refusal;

/// A conversation opens only where its working directory and agent exist; its
/// model is checked only when a turn would run, so the user can still switch it.
pub(super) fn check_openable(
    agents: &crate::agents::Agents,
    conversation: &Conversation,
) -> Result<(), RuntimeError> {
    if !Path::new(&conversation.cwd).is_dir() {
        return Err(RuntimeError::CwdMissing(conversation.cwd.clone()));
    }
    if agents.get(&conversation.agent).is_none() {
        return Err(RuntimeError::AgentUnavailable(format!(
            "this conversation's {}",
            agents.unavailable(&conversation.agent)
        )));
    }
    Ok(())
}

/// A message needs text (or at least an image).
pub(super) fn validate_text(text: &str, images: &[Image]) -> Result<(), RuntimeError> {
    if text.trim().is_empty() && images.is_empty() {
        return Err(RuntimeError::Invalid("text must not be empty".to_owned()));
    }
    crate::images::check(images).map_err(|refusal| match refusal {
        Refusal::Invalid(message) => RuntimeError::Invalid(message),
        Refusal::Unusable(message) => RuntimeError::InvalidImage(message),
    })?;
    Ok(())
}

impl Runtime {
    /// A request's working directory, or the service's own when it names none; either is
    /// checked as `checked_cwd` checks it.
    pub(super) fn cwd_or_default(&self, cwd: Option<&str>) -> Result<String, RuntimeError> {
        let default;
        let cwd = match cwd {
            Some(cwd) => cwd,
            None => {
                default = self.shared.settings.default_cwd.to_string_lossy();
                &default
            }
        };
        checked_cwd(cwd, &self.shared.protected)
    }
}

/// A working directory must be an absolute path to an existing directory, and not one that
/// is `/` or holds (or lies in) the service's state: its tools could reach that state.
pub(super) fn checked_cwd(
    cwd: &str,
    protected: &crate::sandbox::Protected,
) -> Result<String, RuntimeError> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(RuntimeError::Invalid(format!(
            "cwd must be an absolute path, got `{cwd}`"
        )));
    }
    if !path.is_dir() {
        return Err(RuntimeError::CwdMissing(cwd.to_owned()));
    }
    if let Some(reason) = protected.refuses_cwd(path) {
        return Err(RuntimeError::CwdRefused(reason));
    }
    Ok(cwd.to_owned())
}
