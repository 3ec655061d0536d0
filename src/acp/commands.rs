//! The slash commands the editor offers (`available_commands_update`), run through the
//! service's API; the answer is shown as the agent's reply (`/retry` runs a turn, which the
//! bridge follows like a prompt's). The repository's own commands (`.agents/commands/`) come
//! after these and are sent as `{"command", "arguments"}` messages (`bridge.rs`). Anything else
//! starting with `/` (the demo model's directives) is sent as a message.

use crate::client::api::Api;
use crate::client::render::usage_line;
use crate::client::{agents, calls};

/// The command a prompt is, with its argument.
pub fn parse(prompt: &str) -> Option<(&str, &str)> {
    let line = prompt.trim();
    let rest = line.strip_prefix('/')?;
    let (name, argument) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    is_builtin(name).then_some((name, argument.trim()))
}

/// Whether `name` is one of the bridge's own commands (a repository's command of the same name
/// is not offered).
pub fn is_builtin(name: &str) -> bool {
    matches!(
        name,
        "compact" | "fork" | "rewind" | "context" | "agents" | "retry"
    )
}

/// Runs a command on `conversation` (`None`: the session has no conversation yet).
pub async fn run(
    api: &Api,
    conversation: Option<&str>,
    name: &str,
    argument: &str,
) -> Result<String, String> {
    let Some(id) = conversation else {
        return Ok(format!(
            "/{name} needs a conversation: send a message first."
        ));
    };
    let fail = |error: crate::client::api::ApiError| error.to_string();
    match name {
        "compact" => {
            let answer = api.compact(id).await.map_err(fail)?;
            Ok(format!(
                "Compacted the older history. {}",
                usage_line(&answer.usage)
            ))
        }
        "fork" => {
            let copy = api.fork(id).await.map_err(fail)?.conversation;
            Ok(format!(
                "Forked into conversation {} (\"{}\"): open it from the session list.",
                copy.id, copy.title
            ))
        }
        "context" => {
            let usage = api.usage(id).await.map_err(fail)?;
            Ok(usage_line(&usage))
        }
        "agents" => agents::show(api, id).await.map_err(fail),
        _ => rewind(api, id, argument).await,
    }
}

/// `/rewind` lists the user's messages; `/rewind N` copies the conversation up to before the
/// Nth.
async fn rewind(api: &Api, id: &str, argument: &str) -> Result<String, String> {
    let items = api
        .items(id, None, Some(0))
        .await
        .map_err(|error| error.to_string())?;
    let messages = calls::user_messages(items);
    if argument.is_empty() {
        let mut list =
            String::from("Your messages (/rewind N restarts from before message N, in a copy):\n");
        for (n, (_, text)) in messages.iter().enumerate() {
            let first = text.lines().next().unwrap_or_default();
            list.push_str(&format!("{}. {first}\n", n + 1));
        }
        return Ok(list);
    }
    let n: usize = argument
        .parse()
        .map_err(|_| format!("/rewind takes a message number, not {argument:?}"))?;
    let (message_id, _) = n
        .checked_sub(1)
        .and_then(|index| messages.get(index))
        .ok_or_else(|| format!("there is no message {n}"))?;
    let answer = calls::rewind(api, id, message_id, false)
        .await
        .map_err(|error| error.to_string())?;
    Ok(match answer.conversation {
        Some(copy) => format!(
            "Restarted from before message {n} in conversation {}: open it from the session list. Your message was:\n{}",
            copy.id, answer.text
        ),
        None => format!(
            "That was the first message: nothing to copy. Your message was:\n{}",
            answer.text
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bridges_commands_are_taken_from_a_prompt() {
        assert_eq!(parse("/rewind 2"), Some(("rewind", "2")));
        assert_eq!(parse("/retry"), Some(("retry", "")));
        assert_eq!(parse(" /context "), Some(("context", "")));
        assert_eq!(parse("/shell ls"), None);
        assert_eq!(parse("what is /fork?"), None);
    }
}
