//! The search tools: `grep` (the lines of files matching a regular expression, `grep.rs`, what
//! it finds collected in `hits.rs`) and `glob` (the files whose path matches a pattern,
//! `glob.rs`). Both walk the tree the same way (`walk.rs`: ignore files respected, hidden
//! entries and `.git` skipped, no link followed, the sandbox's read rules as for `read_file`)
//! and show their lines within the output cap, redacted (`shown.rs`). They run on the blocking
//! pool and stop between files once the call is interrupted.

mod glob;
mod grep;
mod hits;
mod shown;
mod walk;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::call::{ToolContext, ToolResult};
pub(super) use grep::MAX_CONTEXT;
pub(super) use shown::MAX_LIMIT;

/// Runs `grep` or `glob` (the only names `run_tool` sends here). An interrupt answers at once;
/// the search on its thread stops at the next file.
pub(super) async fn run(
    name: &str,
    arguments: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> ToolResult {
    let search = walk::SearchContext::new(ctx);
    let (is_grep, arguments, token) = (name == "grep", arguments.clone(), cancel.clone());
    let job = tokio::task::spawn_blocking(move || {
        if is_grep {
            grep::run(&arguments, &search, &token)
        } else {
            glob::run(&arguments, &search, &token)
        }
    });
    tokio::select! {
        biased;
        () = cancel.cancelled() => ToolResult::interrupted(format!("`{name}` was interrupted")),
        joined = job => match joined {
            Ok(Ok(output)) => ToolResult::completed(output),
            Ok(Err(error)) => ToolResult::failed(error),
            Err(error) => ToolResult::failed(format!("`{name}` failed: {error}")),
        },
    }
}
