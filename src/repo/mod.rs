//! What a repository ships for its agents beside its code, and what a user keeps for every
//! repository: Markdown files with a YAML front matter, found in `.agents/<kind>/` folders from
//! the repository's top down to the working directory, and in the user's config directory.
//!
//! - `folders.rs` — which folders are searched, in which order (a later one wins a name).
//! - `markdown.rs` — a file's front matter and body.
//! - `files.rs` — reading those files without following a symlink anywhere below the folder's
//!   base: the model may write the repository, so a planted link must not pull the service's
//!   own files (or anything else outside) into a request.
//! - `skills.rs` — Agent Skills (`SKILL.md` in a directory of its own).
//! - `commands.rs` — commands: a prompt with `$ARGUMENTS`, named by its file.
//! - `agents.rs` — agents: what a config's `[agents.NAME]` table takes, as a file's front matter.
//!
//! Nothing here knows of turns or HTTP: the runtime reads a catalogue when a turn starts, and
//! the API lists one for a working directory.

pub mod agents;
pub mod commands;
mod files;
pub mod folders;
pub mod markdown;
pub mod skills;

pub use folders::{Folder, Origin};

/// A file that was skipped, and the rule it breaks.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Problem {
    #[schema(value_type = String)]
    pub path: std::path::PathBuf,
    pub problem: String,
}
