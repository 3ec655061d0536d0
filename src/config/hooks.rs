//! `[[hooks.<event>]]`: programs and URLs the service asks before a tool call
//! (`pre_tool_use`) or a user's message (`user_message`), or tells after a call
//! (`post_tool_use`), after a turn (`turn_ended`, `subagent_ended`), about approvals
//! (`approval_requested`, `approval_resolved`), around a compaction (`compaction`) and when a
//! conversation is made or deleted (`conversation_created`, `conversation_deleted`). Each table
//! runs a `command` (the payload on standard input, in the conversation's working directory,
//! under the agent's sandbox) or POSTs to a `url` (signed the Standard Webhooks way when a
//! `secret` is given). Hook commands come only from this file, never from a repository.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::validator::{ConfigError, Validator, join_names};

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookEvent {
    /// Before a tool call is checked against the permissions; may allow, deny or ask.
    PreToolUse,
    /// After a tool call ran; may add a note for the model.
    PostToolUse,
    /// After a turn of the root agent ended: a notification.
    TurnEnded,
    /// After a sub-agent's turn ended: a notification.
    SubagentEnded,
    /// A tool call waits for a user's answer: a notification.
    ApprovalRequested,
    /// An approval was answered, expired or cancelled: a notification.
    ApprovalResolved,
    /// Before a user's message is stored (and so starts or joins a turn); may block it, or add
    /// context for the model.
    UserMessage,
    /// Before and after a compaction summarizes a session's history: a notification.
    Compaction,
    /// A conversation was created (or forked): a notification.
    ConversationCreated,
    /// A conversation was deleted: a notification.
    ConversationDeleted,
}

impl HookEvent {
    pub const ALL: [HookEvent; 10] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserMessage,
        HookEvent::TurnEnded,
        HookEvent::SubagentEnded,
        HookEvent::ApprovalRequested,
        HookEvent::ApprovalResolved,
        HookEvent::Compaction,
        HookEvent::ConversationCreated,
        HookEvent::ConversationDeleted,
    ];

    /// Its name in the file and in payloads.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "pre_tool_use",
            HookEvent::PostToolUse => "post_tool_use",
            HookEvent::TurnEnded => "turn_ended",
            HookEvent::SubagentEnded => "subagent_ended",
            HookEvent::ApprovalRequested => "approval_requested",
            HookEvent::ApprovalResolved => "approval_resolved",
            HookEvent::UserMessage => "user_message",
            HookEvent::Compaction => "compaction",
            HookEvent::ConversationCreated => "conversation_created",
            HookEvent::ConversationDeleted => "conversation_deleted",
        }
    }

    fn from_name(name: &str) -> Option<HookEvent> {
        HookEvent::ALL
            .into_iter()
            .find(|event| event.name() == name)
    }

    /// What a hook of this event that fails or times out decides unless `on_error` says:
    /// a call waits on `pre_tool_use` and is denied; anything else goes on.
    pub fn default_on_error(self) -> OnHookError {
        match self {
            HookEvent::PreToolUse => OnHookError::Deny,
            _ => OnHookError::Allow,
        }
    }

    /// Whether it is about a tool call (and so takes a `matcher`).
    fn about_a_call(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }

    /// Whether a hook of this event decides something (and so may deny when it fails): a
    /// call, or a user's message.
    fn decides(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::UserMessage)
    }

    /// Whether something waits on its hooks (a call, a message); the others are notifications
    /// told in the background.
    pub fn blocks(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::UserMessage
        )
    }
}

/// What a hook does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAction {
    /// A shell command line, run with `sh -c`.
    Command(String),
    /// A POST of the payload.
    Url {
        url: String,
        headers: BTreeMap<String, String>,
        /// The signing key: the bytes of a `whsec_<base64>` secret.
        secret: Option<Vec<u8>>,
    },
}

/// Which calls a tool hook sees: a tool-name pattern (`shell`, `mcp__github__*`) and, for the
/// shell, a command pattern: `shell(git push*)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolMatcher {
    pub tool: String,
    pub command: Option<String>,
}

/// What a failed or timed-out hook decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnHookError {
    Allow,
    Deny,
}

impl OnHookError {
    pub fn name(self) -> &'static str {
        match self {
            OnHookError::Allow => "allow",
            OnHookError::Deny => "deny",
        }
    }
}

/// One `[[hooks.<event>]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    pub event: HookEvent,
    /// Its place among the event's tables, from 0: with the event, it names the hook
    /// (`hooks.pre_tool_use[0]`).
    pub index: usize,
    /// `None`: every call.
    pub matcher: Option<ToolMatcher>,
    pub action: HookAction,
    pub timeout: Duration,
    pub on_error: OnHookError,
}

impl HookConfig {
    /// Its key in the file: `hooks.pre_tool_use[0]`.
    pub fn key(&self) -> String {
        format!("hooks.{}[{}]", self.event.name(), self.index)
    }
}

/// A hook waits this long unless `timeout_s` says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest `timeout_s`: a turn never waits on a hook longer.
const MAX_TIMEOUT_S: u64 = 600;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHook {
    matcher: Option<String>,
    command: Option<String>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    secret: Option<String>,
    timeout_s: Option<u64>,
    on_error: Option<String>,
}

impl Validator<'_> {
    /// Every `[[hooks.<event>]]`, in the file's order per event.
    pub(super) fn hooks(
        &self,
        raw: BTreeMap<String, Vec<RawHook>>,
    ) -> Result<Vec<HookConfig>, ConfigError> {
        let mut hooks = Vec::new();
        for (name, tables) in raw {
            let Some(event) = HookEvent::from_name(&name) else {
                return Err(self.invalid(
                    format!("hooks.{name}"),
                    format!(
                        "unknown hook event `{name}` (events: {})",
                        join_names(HookEvent::ALL.iter().map(|event| event.name()))
                    ),
                ));
            };
            for (index, raw) in tables.into_iter().enumerate() {
                hooks.push(self.hook(event, index, raw)?);
            }
        }
        Ok(hooks)
    }

    fn hook(
        &self,
        event: HookEvent,
        index: usize,
        raw: RawHook,
    ) -> Result<HookConfig, ConfigError> {
        let key = format!("hooks.{}[{index}]", event.name());
        if raw.matcher.is_some() && !event.about_a_call() {
            return Err(self.invalid(
                format!("{key}.matcher"),
                format!(
                    "a {} hook is about no tool call: it takes no matcher",
                    event.name()
                ),
            ));
        }
        let matcher = raw
            .matcher
            .map(|text| {
                parse_matcher(&text)
                    .ok_or_else(|| self.invalid(format!("{key}.matcher"), matcher_rule(&text)))
            })
            .transpose()?;
        let action = match (raw.command, raw.url) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(self.invalid(format!("{key}.command"), "is empty"));
                }
                if raw.headers.is_some() || raw.secret.is_some() {
                    return Err(self.invalid(
                        key,
                        "`headers` and `secret` go with a `url`, not a `command`",
                    ));
                }
                HookAction::Command(command)
            }
            (None, Some(url)) => {
                let parsed = reqwest::Url::parse(&url).map_err(|error| {
                    self.invalid(format!("{key}.url"), format!("not a URL: {error}"))
                })?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(self.invalid(format!("{key}.url"), "must be http or https"));
                }
                let secret = raw
                    .secret
                    .map(|secret| {
                        signing_key(&secret).ok_or_else(|| {
                            self.invalid(
                                format!("{key}.secret"),
                                "must be `whsec_` followed by base64 (at least 24 bytes)",
                            )
                        })
                    })
                    .transpose()?;
                HookAction::Url {
                    url,
                    headers: raw.headers.unwrap_or_default(),
                    secret,
                }
            }
            _ => {
                return Err(self.invalid(key, "needs either a `command` or a `url`"));
            }
        };
        let timeout = match raw.timeout_s {
            None => DEFAULT_TIMEOUT,
            Some(seconds) if (1..=MAX_TIMEOUT_S).contains(&seconds) => Duration::from_secs(seconds),
            Some(_) => {
                return Err(self.invalid(
                    format!("{key}.timeout_s"),
                    format!("must be from 1 to {MAX_TIMEOUT_S}"),
                ));
            }
        };
        let on_error = match raw.on_error.as_deref() {
            None => event.default_on_error(),
            Some("allow") => OnHookError::Allow,
            Some("deny") if event.decides() => OnHookError::Deny,
            Some("deny") => {
                return Err(self.invalid(
                    format!("{key}.on_error"),
                    format!(
                        "a {} hook decides nothing, so it cannot deny when it fails (allow \
                         only)",
                        event.name()
                    ),
                ));
            }
            Some(other) => {
                return Err(self.invalid(
                    format!("{key}.on_error"),
                    format!("`{other}` is not one of: allow, deny"),
                ));
            }
        };
        Ok(HookConfig {
            event,
            index,
            matcher,
            action,
            timeout,
            on_error,
        })
    }
}

/// `shell`, `mcp__github__*` or `shell(git push*)`.
fn parse_matcher(text: &str) -> Option<ToolMatcher> {
    let text = text.trim();
    let (tool, command) = match text.split_once('(') {
        Some((tool, rest)) => {
            let command = rest.strip_suffix(')')?.trim();
            if command.is_empty() {
                return None;
            }
            (tool.trim(), Some(command.to_owned()))
        }
        None => (text, None),
    };
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-*".contains(c);
    if tool.is_empty() || !tool.chars().all(allowed) {
        return None;
    }
    if command.is_some() && tool != "shell" {
        return None;
    }
    Some(ToolMatcher {
        tool: tool.to_owned(),
        command,
    })
}

fn matcher_rule(text: &str) -> String {
    format!(
        "`{text}` is not a tool-name pattern (`shell`, `mcp__github__*`), optionally with a \
         command pattern for the shell (`shell(git push*)`)"
    )
}

/// The key of a `whsec_<base64>` secret.
fn signing_key(secret: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let encoded = secret.strip_prefix("whsec_")?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    (key.len() >= 24).then_some(key)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Some(Path::new("config.toml")))
    }

    #[test]
    fn hooks_are_read_in_the_files_order_with_their_defaults() {
        let config = parse(
            "[[hooks.pre_tool_use]]\nmatcher = \"shell(git push*)\"\ncommand = \"./vet.sh\"\n\
             [[hooks.pre_tool_use]]\nurl = \"https://policy.example/check\"\n\
             secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\ntimeout_s = 5\non_error = \"allow\"\n\
             headers = { Authorization = \"Bearer x\" }\n",
        )
        .unwrap();
        assert_eq!(config.hooks.len(), 2);
        let first = &config.hooks[0];
        assert_eq!(first.key(), "hooks.pre_tool_use[0]");
        assert_eq!(
            first.matcher,
            Some(ToolMatcher {
                tool: "shell".to_owned(),
                command: Some("git push*".to_owned())
            })
        );
        assert_eq!(first.action, HookAction::Command("./vet.sh".to_owned()));
        assert_eq!(
            (first.timeout, first.on_error),
            (DEFAULT_TIMEOUT, OnHookError::Deny)
        );
        let second = &config.hooks[1];
        assert_eq!(second.key(), "hooks.pre_tool_use[1]");
        assert_eq!(
            (second.timeout, second.on_error),
            (Duration::from_secs(5), OnHookError::Allow)
        );
        let HookAction::Url {
            headers, secret, ..
        } = &second.action
        else {
            panic!("{second:?}");
        };
        assert_eq!(headers["Authorization"], "Bearer x");
        assert_eq!(secret.as_ref().map(Vec::len), Some(24));
    }

    #[test]
    fn a_bad_hook_names_its_key() {
        let cases = [
            (
                "[[hooks.after_lunch]]\ncommand = \"x\"",
                "hooks.after_lunch",
                "unknown hook event",
            ),
            (
                "[[hooks.pre_tool_use]]\nmatcher = \"x\"",
                "hooks.pre_tool_use[0]",
                "either a `command` or a `url`",
            ),
            (
                "[[hooks.pre_tool_use]]\ncommand = \"x\"\nurl = \"http://h\"",
                "hooks.pre_tool_use[0]",
                "either",
            ),
            (
                "[[hooks.pre_tool_use]]\ncommand = \"x\"\nmatcher = \"read_file(x)\"",
                "hooks.pre_tool_use[0].matcher",
                "not a tool-name pattern",
            ),
            (
                "[[hooks.pre_tool_use]]\nurl = \"ftp://h\"",
                "hooks.pre_tool_use[0].url",
                "http or https",
            ),
            (
                "[[hooks.pre_tool_use]]\nurl = \"http://h\"\nsecret = \"abc\"",
                "hooks.pre_tool_use[0].secret",
                "whsec_",
            ),
            (
                "[[hooks.pre_tool_use]]\ncommand = \"x\"\ntimeout_s = 0",
                "hooks.pre_tool_use[0].timeout_s",
                "from 1",
            ),
            (
                "[[hooks.pre_tool_use]]\ncommand = \"x\"\non_error = \"maybe\"",
                "hooks.pre_tool_use[0].on_error",
                "allow, deny",
            ),
            (
                "[[hooks.post_tool_use]]\ncommand = \"x\"\non_error = \"deny\"",
                "hooks.post_tool_use[0].on_error",
                "cannot deny",
            ),
            (
                "[[hooks.turn_ended]]\ncommand = \"x\"\nmatcher = \"shell\"",
                "hooks.turn_ended[0].matcher",
                "takes no matcher",
            ),
            (
                "[[hooks.pre_tool_use]]\ncommand = \"x\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"",
                "hooks.pre_tool_use[0]",
                "go with a `url`",
            ),
        ];
        for (text, key, says) in cases {
            let error = parse(text).unwrap_err();
            assert_eq!(error.key(), Some(key), "{text}: {error}");
            assert!(error.to_string().contains(says), "{text}: {error}");
        }
    }
}
