//! The `[mcp.*]` tables: Model Context Protocol servers whose tools agents may use, each started
//! as a child process (`command`) or reached over streamable HTTP (`url`). Values keep their
//! `${VAR}` references: they are expanded when a server starts, so the file never holds the
//! secrets and the config never reads them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::validator::{ConfigError, Validator};

/// A call to a server's tool that takes longer than this fails (`timeout_s`).
pub const DEFAULT_MCP_TIMEOUT_S: u64 = 120;
const MAX_MCP_TIMEOUT_S: u64 = 86_400;
/// The longest server name: the model sees `mcp__<server>__<tool>`, and providers cap a tool
/// name at 64 characters.
pub const MAX_SERVER_NAME: usize = 24;

/// At most this many servers may be named in one create body.
pub const MAX_CONVERSATION_SERVERS: usize = 16;

/// Whether an MCP server may have the agent's model write for it (`sampling/createMessage`):
/// an agent's `mcp_sampling`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpSampling {
    /// Answered without asking; counted in the turn's usage.
    Allow,
    /// A user allows or denies each request, like a tool call's approval.
    #[default]
    Ask,
    /// Refused: the server is told.
    Deny,
}

impl McpSampling {
    pub fn name(self) -> &'static str {
        match self {
            McpSampling::Allow => "allow",
            McpSampling::Ask => "ask",
            McpSampling::Deny => "deny",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct McpServerConfig {
    pub transport: McpTransport,
    /// A tool call past this fails with a clear result; the turn goes on.
    pub timeout: Duration,
    /// Whether `${VAR}` references are expanded from the service's environment when the server
    /// starts: true for the config file, false for servers a client names (a client must not
    /// read the service's environment, so its values are taken as written).
    pub expand_variables: bool,
    /// A command server the config file runs outside the sandbox (`sandbox = "off"`); every
    /// other runs in the sandbox of the agent that uses it.
    pub unsandboxed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to the service's environment (`${VAR}` expanded at start).
        env: BTreeMap<String, String>,
        /// Where it runs; `None`: the service's working directory.
        cwd: Option<String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        url: String,
        /// Sent with every request (`${VAR}` expanded at start).
        headers: BTreeMap<String, String>,
    },
}

/// One server as written: a `[mcp.<name>]` table of the config file, or an entry of a create
/// body's `mcp` (stored with the conversation as given). Give `command` (with `args`, `env`,
/// `cwd`) or `url` (with `headers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerSpec {
    /// The program of a server started as a child process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Added to the child's environment. Secret: never shown back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Where the child runs (an absolute path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The endpoint of a streamable HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent with every request. Secret: never shown back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// A call past this many seconds fails; default 120.
    #[serde(
        default,
        deserialize_with = "super::whole_number::optional_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout_s: Option<u64>,
    /// Only in the config file, and only `"off"`: the command server runs outside the
    /// sandbox. Left out, it runs in the sandbox of the agent that uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

/// What stands, in a shown server, where a secret value was.
pub const HIDDEN: &str = "[hidden]";

impl McpServerSpec {
    /// The spec as it may be shown: every `env` and `headers` value hidden, the keys kept.
    pub fn shown(&self) -> McpServerSpec {
        let hide = |values: &Option<BTreeMap<String, String>>| {
            values.as_ref().map(|values| {
                values
                    .keys()
                    .map(|key| (key.clone(), HIDDEN.to_owned()))
                    .collect()
            })
        };
        McpServerSpec {
            env: hide(&self.env),
            headers: hide(&self.headers),
            ..self.clone()
        }
    }

    /// The values that are credentials: registered as secrets while the service runs.
    pub fn secret_values(&self) -> Vec<String> {
        [&self.env, &self.headers]
            .into_iter()
            .flatten()
            .flat_map(|values| values.values().cloned())
            .collect()
    }
}

/// Validates the servers a client names when it creates a conversation: the rules of the
/// config file, with keys `mcp.<name>…`, and values taken as written (no `${VAR}`). A child
/// server runs in `default_cwd` (the conversation's directory) unless it names its own.
pub fn conversation_servers(
    specs: &BTreeMap<String, McpServerSpec>,
    default_cwd: &str,
) -> Result<BTreeMap<String, McpServerConfig>, ConfigError> {
    let validator = Validator { source: None };
    if specs.len() > MAX_CONVERSATION_SERVERS {
        return Err(validator.invalid(
            "mcp",
            format!(
                "at most {MAX_CONVERSATION_SERVERS} servers, got {}",
                specs.len()
            ),
        ));
    }
    specs
        .iter()
        .map(|(name, spec)| {
            let key = format!("mcp.{name}");
            validator.server_name(&key, name)?;
            let mut config = validator.mcp_server(&key, spec.clone(), false)?;
            if let McpTransport::Stdio { cwd, .. } = &mut config.transport {
                match cwd {
                    Some(cwd) if !std::path::Path::new(cwd).is_absolute() => {
                        return Err(
                            validator.invalid(format!("{key}.cwd"), "must be an absolute path")
                        );
                    }
                    Some(_) => {}
                    None => *cwd = Some(default_cwd.to_owned()),
                }
            }
            Ok((name.clone(), config))
        })
        .collect()
}

/// Whether `name` may name a server: letters, digits, `-` and single `_` inside, so that
/// `mcp__<server>__<tool>` splits back at its first `__` after the prefix.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Where `${` opens a reference that never closes, or names nothing usable, if anywhere.
pub fn bad_reference(text: &str) -> Option<String> {
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Some(format!("`${{` without a closing `}}` in `{text}`"));
        };
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Some(format!("`${{{name}}}` is not a variable name"));
        }
        rest = &after[end + 1..];
    }
    None
}

impl Validator<'_> {
    pub(super) fn mcp_servers(
        &self,
        raw: BTreeMap<String, McpServerSpec>,
    ) -> Result<BTreeMap<String, McpServerConfig>, ConfigError> {
        raw.into_iter()
            .map(|(name, server)| {
                let key = format!("mcp.{name}");
                let config = self.mcp_server(&key, server, true)?;
                self.server_name(&key, &name)?;
                Ok((name, config))
            })
            .collect()
    }

    fn server_name(&self, key: &str, name: &str) -> Result<(), ConfigError> {
        if valid_server_name(name) {
            return Ok(());
        }
        Err(self.invalid(
            key,
            format!(
                "a server name is 1 to {MAX_SERVER_NAME} letters, digits, `-` or `_`, without \
                 `__` and not starting or ending with `_`"
            ),
        ))
    }

    /// One server's table; `key` is where it is (`mcp.<name>`). With `expand_variables`,
    /// `${VAR}` references must be well formed (they are expanded when the server starts).
    fn mcp_server(
        &self,
        key: &str,
        raw: McpServerSpec,
        expand_variables: bool,
    ) -> Result<McpServerConfig, ConfigError> {
        let timeout_s = raw.timeout_s.unwrap_or(DEFAULT_MCP_TIMEOUT_S);
        if !(1..=MAX_MCP_TIMEOUT_S).contains(&timeout_s) {
            return Err(self.invalid(
                format!("{key}.timeout_s"),
                format!("must be at least 1 and at most {MAX_MCP_TIMEOUT_S} (a day)"),
            ));
        }
        let unsandboxed = match raw.sandbox.as_deref() {
            None => false,
            Some(_) if !expand_variables => {
                return Err(self.invalid(
                    format!("{key}.sandbox"),
                    "only the service's config file may take a server out of the sandbox",
                ));
            }
            Some("off") if raw.url.is_none() => true,
            Some("off") => {
                return Err(self.invalid(
                    format!("{key}.sandbox"),
                    "only a `command` server runs in a sandbox",
                ));
            }
            Some(other) => {
                return Err(self.invalid(
                    format!("{key}.sandbox"),
                    format!(
                        "`{other}` is not \"off\" (leave it out to run the server in the \
                         sandbox of the agent that uses it)"
                    ),
                ));
            }
        };
        let transport = match (raw.command, raw.url) {
            (Some(_), Some(_)) => {
                return Err(self.invalid(key, "give either `command` or `url`, not both"));
            }
            (None, None) => {
                return Err(self.invalid(
                    key,
                    "give `command` (a server started as a child process) or `url` \
                     (a streamable HTTP server)",
                ));
            }
            (Some(command), None) => {
                if raw.headers.is_some() {
                    return Err(self.invalid(
                        format!("{key}.headers"),
                        "only a `url` server takes headers",
                    ));
                }
                if command.trim().is_empty() {
                    return Err(self.invalid(format!("{key}.command"), "is empty"));
                }
                let env = raw.env.unwrap_or_default();
                if let Some(name) = env
                    .keys()
                    .find(|name| name.is_empty() || name.contains(['=', '\0']))
                {
                    return Err(self.invalid(
                        format!("{key}.env.{}", name.escape_debug()),
                        "is not a variable name (empty, or holds `=` or NUL)",
                    ));
                }
                McpTransport::Stdio {
                    command,
                    args: raw.args.unwrap_or_default(),
                    env,
                    cwd: raw.cwd,
                }
            }
            (None, Some(url)) => {
                let only_command = [
                    ("args", raw.args.is_some()),
                    ("env", raw.env.is_some()),
                    ("cwd", raw.cwd.is_some()),
                ];
                if let Some((field, _)) = only_command.iter().find(|(_, given)| *given) {
                    return Err(
                        self.invalid(format!("{key}.{field}"), "only a `command` server takes it")
                    );
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(
                        self.invalid(format!("{key}.url"), "must start with http:// or https://")
                    );
                }
                let headers = raw.headers.unwrap_or_default();
                for (name, value) in &headers {
                    // A name or value with CR, LF or NUL could add headers of its own.
                    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                        return Err(self.invalid(
                            format!("{key}.headers.{}", name.escape_debug()),
                            "is not a valid HTTP header name (letters, digits and \
                             !#$%&'*+-.^_`|~ only)",
                        ));
                    }
                    if reqwest::header::HeaderValue::from_str(value).is_err() {
                        return Err(self.invalid(
                            format!("{key}.headers.{}", name.escape_debug()),
                            "is not a valid HTTP header value (no line breaks or control \
                             characters)",
                        ));
                    }
                }
                McpTransport::Http { url, headers }
            }
        };
        if expand_variables {
            for (field, text) in referenced_texts(&transport) {
                if let Some(problem) = bad_reference(text) {
                    return Err(self.invalid(format!("{key}.{field}"), problem));
                }
            }
        }
        Ok(McpServerConfig {
            transport,
            timeout: Duration::from_secs(timeout_s),
            expand_variables,
            unsandboxed,
        })
    }
}

/// Every value that may hold `${VAR}`, with the key it is at.
fn referenced_texts(transport: &McpTransport) -> Vec<(String, &str)> {
    match transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut texts = vec![("command".to_owned(), command.as_str())];
            texts.extend(args.iter().map(|arg| ("args".to_owned(), arg.as_str())));
            texts.extend(env.iter().map(|(k, v)| (format!("env.{k}"), v.as_str())));
            texts.extend(cwd.iter().map(|cwd| ("cwd".to_owned(), cwd.as_str())));
            texts
        }
        McpTransport::Http { url, headers } => {
            let mut texts = vec![("url".to_owned(), url.as_str())];
            texts.extend(
                headers
                    .iter()
                    .map(|(k, v)| (format!("headers.{k}"), v.as_str())),
            );
            texts
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{Config, ConfigError};

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Some(Path::new("config.toml")))
    }

    fn error(text: &str) -> (String, String) {
        let error = parse(text).unwrap_err();
        (
            error.key().unwrap_or_default().to_owned(),
            error.to_string(),
        )
    }

    #[test]
    fn both_transports_parse_with_their_defaults() {
        let config = parse(
            r#"
[mcp.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]
env = { LOG_LEVEL = "warn" }

[mcp.search]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }
timeout_s = 30

[agents.default]
description = "d"
model = "demo"
mcp = ["files", "search"]
"#,
        )
        .unwrap();
        let files = &config.mcp["files"];
        assert_eq!(files.timeout, Duration::from_secs(DEFAULT_MCP_TIMEOUT_S));
        let McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } = &files.transport
        else {
            panic!("{files:?}");
        };
        assert_eq!(command, "npx");
        assert_eq!(args.len(), 3);
        assert_eq!(env["LOG_LEVEL"], "warn");
        assert_eq!(cwd, &None);
        let search = &config.mcp["search"];
        assert_eq!(search.timeout, Duration::from_secs(30));
        let McpTransport::Http { headers, .. } = &search.transport else {
            panic!("{search:?}");
        };
        // Kept as written: expanded only when the server starts.
        assert_eq!(headers["Authorization"], "Bearer ${SEARCH_TOKEN}");
        assert_eq!(config.default_agent().mcp, ["files", "search"]);
    }

    #[test]
    fn an_agent_uses_no_server_unless_it_names_one() {
        let config = parse("[mcp.files]\ncommand = \"x\"\n").unwrap();
        assert!(config.default_agent().mcp.is_empty());
        assert!(Config::builtin().mcp.is_empty());
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[mcp.a]\n", "mcp.a", "give `command`"),
            (
                "[mcp.a]\ncommand = \"x\"\nurl = \"http://h\"\n",
                "mcp.a",
                "not both",
            ),
            (
                "[mcp.a]\ncommand = \"x\"\ntimeout_s = 0\n",
                "mcp.a.timeout_s",
                "at least 1",
            ),
            ("[mcp.a]\nurl = \"ftp://h\"\n", "mcp.a.url", "http://"),
            (
                "[mcp.a]\nurl = \"http://h\"\nargs = []\n",
                "mcp.a.args",
                "`command`",
            ),
            (
                "[mcp.a]\ncommand = \"x\"\nheaders = {}\n",
                "mcp.a.headers",
                "`url`",
            ),
            ("[mcp.a__b]\ncommand = \"x\"\n", "mcp.a__b", "without `__`"),
            (
                "[mcp.a]\nurl = \"http://h\"\nheaders = { X = \"${TOKEN\" }\n",
                "mcp.a.headers.X",
                "closing",
            ),
            (
                "[mcp.a]\ncommand = \"${}\"\n",
                "mcp.a.command",
                "not a variable name",
            ),
            (
                "[mcp.a]\ncommand = \"x\"\n[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\nmcp = [\"b\"]\n",
                "agents.default.mcp",
                "unknown MCP server `b` (servers: a)",
            ),
        ];
        for (text, key, message) in cases {
            let (found_key, found) = error(text);
            assert_eq!(found_key, key, "{text}: {found}");
            assert!(found.contains(message), "{text}: {found}");
        }
        // An unknown field is toml's error, naming the key.
        let error = parse("[mcp.a]\ncommand = \"x\"\nenviron = {}\n").unwrap_err();
        assert!(error.to_string().contains("environ"), "{error}");
    }

    #[test]
    fn a_clients_servers_are_taken_as_written_and_run_in_the_conversations_directory() {
        let specs: BTreeMap<String, McpServerSpec> = serde_json::from_value(serde_json::json!({
            "files": {"command": "npx", "args": ["${HOME}"], "env": {"TOKEN": "${SECRET}"}},
            "own": {"command": "x", "cwd": "/srv"},
            "search": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer t"}},
        }))
        .unwrap();
        let servers = conversation_servers(&specs, "/work/project").unwrap();
        let McpTransport::Stdio { args, cwd, .. } = &servers["files"].transport else {
            panic!("{servers:?}");
        };
        assert_eq!(args, &["${HOME}"]);
        assert_eq!(cwd.as_deref(), Some("/work/project"));
        assert!(!servers["files"].expand_variables);
        let McpTransport::Stdio { cwd, .. } = &servers["own"].transport else {
            panic!("{servers:?}");
        };
        assert_eq!(cwd.as_deref(), Some("/srv"));
        // What may be shown hides every env and header value, keeping the keys.
        let shown = specs["search"].shown();
        assert_eq!(shown.headers.unwrap()["Authorization"], HIDDEN);
        assert_eq!(specs["files"].shown().env.unwrap()["TOKEN"], HIDDEN);
        assert_eq!(specs["files"].secret_values(), ["${SECRET}"]);
    }

    #[test]
    fn timeout_s_is_a_whole_number_written_either_way() {
        let spec = |json: serde_json::Value| serde_json::from_value::<McpServerSpec>(json);
        let seconds = |json| spec(json).unwrap().timeout_s;
        assert_eq!(seconds(serde_json::json!({"timeout_s": 30})), Some(30));
        assert_eq!(
            seconds(serde_json::json!({"timeout_s": 1281073.0})),
            Some(1281073)
        );
        assert_eq!(
            seconds(serde_json::json!({"timeout_s": 1e30})),
            Some(u64::MAX)
        );
        assert_eq!(seconds(serde_json::json!({})), None);
        assert!(spec(serde_json::json!({"timeout_s": 1.5})).is_err());
        assert!(spec(serde_json::json!({"timeout_s": -2})).is_err());
        assert!(spec(serde_json::json!({"timeout_s": "30"})).is_err());
        let config = parse("[mcp.a]\ncommand = \"x\"\ntimeout_s = 30\n").unwrap();
        assert_eq!(config.mcp["a"].timeout, Duration::from_secs(30));
    }

    #[test]
    fn server_names() {
        for good in ["files", "my-server", "a_b", "A1"] {
            assert!(valid_server_name(good), "{good}");
        }
        for bad in [
            "",
            "a__b",
            "a.b",
            "a b",
            "_a",
            "a_",
            &"x".repeat(MAX_SERVER_NAME + 1),
        ] {
            assert!(!valid_server_name(bad), "{bad}");
        }
    }
}
