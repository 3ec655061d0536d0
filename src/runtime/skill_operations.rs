//! `Runtime::skills`: the skills a working directory sees, as a turn there would read them.

use super::{Runtime, RuntimeError};
use crate::api::responses::SkillList;

impl Runtime {
    /// The skills of `cwd` (default: the service's working directory) and the files skipped.
    /// Read on the blocking pool: it walks folders on disk.
    pub async fn skills(&self, cwd: Option<String>) -> Result<SkillList, RuntimeError> {
        let cwd = self.cwd_or_default(cwd.as_deref())?;
        let user_dir = self.shared.config.directory();
        let dir = cwd.clone();
        let catalogue = tokio::task::spawn_blocking(move || {
            crate::repo::skills::discover(std::path::Path::new(&dir), user_dir.as_deref())
        })
        .await
        .map_err(|error| RuntimeError::Internal(format!("reading the skills failed: {error}")))?;
        Ok(SkillList {
            cwd,
            skills: catalogue.skills,
            problems: catalogue.problems,
        })
    }
}
