//! An agent's configured permissions (`[agents.<name>.permissions]`) and the check of one tool
//! call against them and against the rules users remembered.
//!
//! Precedence: `deny` beats `ask`, and `ask` beats `allow`. A shell command is split into the
//! simple commands it runs (`command.rs`): each part is matched on its own and the strictest
//! wins. A remembered rule only answers the question a tool's own setting asks (`shell = "ask"`):
//! it never overrides a configured `deny`, nor an `ask` that a configured pattern gives, nor an
//! escalation, which always asks.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wildmatch::WildMatch;

use super::command::{CommandPart, command_parts};
pub use super::rule_shape::{also_allows, names_exact_use, refuse_shell_rule};
use super::runners;

/// What a configured setting says of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    Allow,
    Ask,
    Deny,
}

impl Permission {
    /// Every permission by its name in the file.
    pub const NAMES: [(&'static str, Permission); 3] = [
        ("allow", Permission::Allow),
        ("ask", Permission::Ask),
        ("deny", Permission::Deny),
    ];

    pub fn from_name(name: &str) -> Option<Permission> {
        Permission::NAMES
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, permission)| *permission)
    }

    pub fn name(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
        }
    }
}

/// The tools whose setting, when not configured, is `ask` rather than `allow`: tools from
/// outside the service (MCP servers) whose effects it cannot sandbox.
const ASK_BY_DEFAULT: &[&str] = &["mcp"];

/// How the model sees an MCP server's tool: `mcp__<server>__<tool>`. A setting for such a name
/// (or a pattern of them, `mcp__files__*`) beats the `mcp` setting of every MCP tool.
pub const MCP_PREFIX: &str = "mcp__";

/// One agent's permissions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Permissions {
    /// The agent's name, to point at the setting in messages.
    pub agent: String,
    /// Per tool; a tool not named is allowed (except those in [`ASK_BY_DEFAULT`]).
    pub tools: BTreeMap<String, Permission>,
    /// Patterns of shell commands (in any order: the strictest match wins).
    pub shell_rules: Vec<(String, Permission)>,
    /// An approval not answered within this is denied; `None`: it waits for its turn's end.
    pub approval_timeout: Option<Duration>,
}

/// Why a call asks or is refused: in plain words, and the setting that decides it (a
/// configuration key such as `agents.default.permissions.shell_rules`) where one does. Shown
/// as `text (setting)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reason {
    pub text: String,
    pub setting: Option<String>,
}

impl Reason {
    pub fn plain(text: impl Into<String>) -> Reason {
        Reason {
            text: text.into(),
            setting: None,
        }
    }

    fn set_by(text: impl Into<String>, setting: String) -> Reason {
        Reason {
            text: text.into(),
            setting: Some(setting),
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.setting {
            Some(setting) => write!(f, "{} ({setting})", self.text),
            None => f.write_str(&self.text),
        }
    }
}

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused by configuration, without asking; the reason reaches the model.
    Deny {
        reason: Reason,
    },
    /// A user must answer first.
    Ask {
        reason: Reason,
        /// The rules an answer that remembers would keep: one per part of a shell command that
        /// asks, each its exact text; none when the answer may not be remembered (escalation).
        suggested_rules: Vec<RuleChoice>,
    },
}

/// A rule an answer could remember for one part of a call: its exact text, and a broader one
/// offered beside it when there is a sensible one (`git push*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleChoice {
    pub rule: String,
    pub broader: Option<String>,
}

impl RuleChoice {
    fn exact(rule: String) -> RuleChoice {
        RuleChoice {
            rule,
            broader: None,
        }
    }
}

/// The tools that change files in place: the `write_file` setting, and the rules remembered for
/// it, decide for them. (`str_replace_based_edit_tool` is Anthropic's text editor, whose `view`
/// command only reads; see [`setting_for_call`].)
pub const EDIT_TOOLS: &[&str] = &["edit_file", "apply_patch", "str_replace_based_edit_tool"];

/// The tools that only read files, decided by the `read_file` setting.
pub const SEARCH_TOOLS: &[&str] = &["grep", "glob"];

/// The tool whose setting (and remembered rules) decides for `tool`: `write_file` for the edit
/// tools, `read_file` for the search tools, else the tool itself.
pub fn setting_of(tool: &str) -> &str {
    if EDIT_TOOLS.contains(&tool) {
        "write_file"
    } else if SEARCH_TOOLS.contains(&tool) {
        "read_file"
    } else {
        tool
    }
}

/// As [`setting_of`], for one call: the text editor's `view` command reads.
pub fn setting_for_call<'a>(tool: &'a str, arguments: &Value) -> &'a str {
    if tool == "str_replace_based_edit_tool"
        && arguments.get("command").and_then(Value::as_str) == Some("view")
    {
        return "read_file";
    }
    setting_of(tool)
}

/// What a rule of the user's could be matched against for a call: for `shell`, each part of the
/// command; for the file tools, the absolute path; for other tools, the empty text.
pub fn rule_subjects(tool: &str, arguments: &Value, cwd: &Path) -> Vec<String> {
    match tool {
        "shell" => match command_parts(shell_command(arguments)) {
            Ok(parts) => parts.iter().map(CommandPart::text).collect(),
            Err(_) => Vec::new(),
        },
        "read_file" | "write_file" | "list_dir" => match arguments.get("paths") {
            // An edit or a search seen as a `write_file` or `read_file` call (see
            // `setting_of`): every path it touches.
            Some(Value::Array(paths)) => paths
                .iter()
                .filter_map(Value::as_str)
                .map(|path| cwd.join(path).to_string_lossy().into_owned())
                .collect(),
            _ => vec![absolute_path(arguments, cwd)],
        },
        _ => vec![String::new()],
    }
}

/// Whether `pattern` matches `text` (`*` any text, `?` one character).
pub fn pattern_matches(pattern: &str, text: &str) -> bool {
    WildMatch::new(pattern).matches(text)
}

impl Permissions {
    /// The tool's own setting.
    /// Adds `parent`'s `ask` and `deny` settings to these (a sub-agent's, so that it is never
    /// looser than the agent that started it): per tool the stricter of the two, and the
    /// parent's stricter shell patterns beside these (the strictest match wins anyway).
    pub fn inherit(&mut self, parent: &Permissions) {
        for (tool, permission) in &parent.tools {
            if *permission == Permission::Allow {
                continue;
            }
            if *permission > self.tool(tool) {
                self.tools.insert(tool.clone(), *permission);
            }
        }
        for (pattern, permission) in &parent.shell_rules {
            if *permission != Permission::Allow
                && !self.shell_rules.contains(&(pattern.clone(), *permission))
            {
                self.shell_rules.push((pattern.clone(), *permission));
            }
        }
    }

    pub fn tool(&self, tool: &str) -> Permission {
        if let Some(permission) = self.tools.get(tool) {
            return *permission;
        }
        if tool.starts_with(MCP_PREFIX) {
            return match self.mcp_pattern(tool) {
                Some((_, permission)) => permission,
                None => self.tool("mcp"),
            };
        }
        if ASK_BY_DEFAULT.contains(&tool) {
            Permission::Ask
        } else {
            Permission::Allow
        }
    }

    /// The strictest configured `mcp__…` pattern that matches an MCP tool's name.
    fn mcp_pattern(&self, tool: &str) -> Option<(&str, Permission)> {
        self.tools
            .iter()
            .filter(|(pattern, _)| {
                pattern.starts_with(MCP_PREFIX) && pattern_matches(pattern, tool)
            })
            .max_by_key(|(_, permission)| **permission)
            .map(|(pattern, permission)| (pattern.as_str(), *permission))
    }

    /// Checks a call. `remembered(text, exact)` says whether a rule the user kept for this
    /// tool matches `text` (one of [`rule_subjects`]); with `exact`, only a rule that names one
    /// use of a program counts.
    pub fn check(
        &self,
        tool: &str,
        arguments: &Value,
        cwd: &Path,
        remembered: Remembered<'_>,
    ) -> Verdict {
        match tool {
            "shell" => self.check_shell(arguments, cwd, remembered),
            _ => {
                let subjects = rule_subjects(tool, arguments, cwd);
                // A call that touches several paths is answered by rules only if they cover
                // every one.
                let all_remembered = !subjects.is_empty()
                    && subjects.iter().all(|subject| remembered(subject, false));
                let mut suggested: Vec<RuleChoice> = Vec::new();
                for subject in &subjects {
                    let choice = RuleChoice::exact(suggest_for_path(tool, subject));
                    if !suggested.contains(&choice) {
                        suggested.push(choice);
                    }
                }
                match self.tool(tool) {
                    Permission::Allow => Verdict::Allow,
                    Permission::Deny => Verdict::Deny {
                        reason: Reason::set_by(
                            format!("this agent may not use `{tool}`"),
                            self.key(tool),
                        ),
                    },
                    Permission::Ask if all_remembered => Verdict::Allow,
                    Permission::Ask => Verdict::Ask {
                        reason: Reason::set_by(
                            format!("this agent asks before each `{tool}` call"),
                            self.key(tool),
                        ),
                        suggested_rules: suggested,
                    },
                }
            }
        }
    }

    /// The setting that decides for `tool`.
    fn key(&self, tool: &str) -> String {
        let setting = if !tool.starts_with(MCP_PREFIX) || self.tools.contains_key(tool) {
            tool
        } else {
            self.mcp_pattern(tool).map_or("mcp", |(pattern, _)| pattern)
        };
        format!("agents.{}.permissions.{setting}", self.agent)
    }

    fn check_shell(&self, arguments: &Value, cwd: &Path, remembered: Remembered<'_>) -> Verdict {
        let command = shell_command(arguments);
        let escalate = escalation(arguments);
        let tool_setting = self.tool("shell");
        // Nothing to match against: the tool's own setting decides, without reading the
        // command (the first run's defaults: every command allowed inside the sandbox).
        if self.shell_rules.is_empty() && tool_setting != Permission::Ask {
            return match (tool_setting, escalate) {
                (Permission::Deny, _) => Verdict::Deny {
                    reason: self.tool_reason(tool_setting),
                },
                (_, Some(why)) => escalation_verdict(why),
                _ => Verdict::Allow,
            };
        }
        let mut verdict = Strictest::default();
        match command_parts(command) {
            Err(error) => {
                // Nothing can be matched: the strictest a rule could say, short of a deny.
                verdict.add(
                    tool_setting.max(Permission::Ask),
                    Reason::plain(format!(
                        "the command could not be read to match the rules ({})",
                        error.0
                    )),
                    None,
                );
            }
            Ok(parts) if parts.is_empty() => {
                verdict.add(tool_setting, self.tool_reason(tool_setting), None);
            }
            Ok(parts) => {
                for part in parts {
                    let (permission, reason) =
                        self.judge_part(&part, cwd, tool_setting, remembered);
                    let choice = RuleChoice {
                        rule: part.suggested_rule(),
                        broader: part.broader_rule(),
                    };
                    verdict.add(permission, reason, Some(choice));
                }
            }
        }
        match (verdict.permission, escalate) {
            (Permission::Deny, _) => Verdict::Deny {
                reason: verdict.reason,
            },
            (_, Some(why)) => escalation_verdict(why),
            (Permission::Ask, None) => Verdict::Ask {
                reason: verdict.reason,
                suggested_rules: verdict.suggested_rules,
            },
            (Permission::Allow, None) => Verdict::Allow,
        }
    }

    /// What the rules say of one part of a command, and why. A part that runs other programs
    /// (`runners.rs`), or a program by a path that is not the one its name finds, asks unless a
    /// rule names that use exactly; a deny that matches it refuses it all the same.
    fn judge_part(
        &self,
        part: &CommandPart,
        cwd: &Path,
        tool_setting: Permission,
        remembered: Remembered<'_>,
    ) -> (Permission, Reason) {
        let text = part.text();
        if is_expansion(part.words.first().map_or("", String::as_str)) {
            // `$CMD args`: which program runs is only known when it runs.
            return (
                tool_setting.max(Permission::Ask),
                Reason::plain(format!(
                    "`{text}` names its program by an expansion, so no rule can match it"
                )),
            );
        }
        // `/usr/bin/git push` is matched as `git push` too, and `git -C x push` as `git push`.
        let mut texts = match_texts(&part.words);
        let runner = part
            .runner
            .clone()
            .or_else(|| not_the_program_found(&part.words, cwd));
        if runner.is_some() {
            // What `xargs` or `find -exec` starts gets more arguments when it runs: `rm *`
            // must see `xargs rm` as the `rm …` it will be.
            let more: Vec<String> = texts.iter().map(|text| format!("{text} …")).collect();
            texts.extend(more);
        }
        let matched = self
            .shell_rules
            .iter()
            .filter(|(pattern, _)| texts.iter().any(|text| pattern_matches(pattern, text)))
            .max_by_key(|(_, permission)| *permission);
        let rule_reason = |pattern: &str, permission: Permission| {
            let says = match permission {
                Permission::Deny => "which refuses it",
                Permission::Ask => "which asks first",
                Permission::Allow => "which allows it",
            };
            Reason::set_by(
                format!("`{text}` matches the rule \"{pattern}\", {says}"),
                format!("agents.{}.permissions.shell_rules", self.agent),
            )
        };
        match (matched, runner) {
            (Some((pattern, Permission::Deny)), _) => {
                (Permission::Deny, rule_reason(pattern, Permission::Deny))
            }
            (Some((pattern, permission)), None) => (*permission, rule_reason(pattern, *permission)),
            (matched, Some(why)) => {
                // Only a rule that names this use, configured or remembered, lets it run.
                let named = matched.is_some_and(|(pattern, permission)| {
                    *permission == Permission::Allow && names_exact_use(pattern)
                }) || texts.iter().any(|text| remembered(text, true));
                if named {
                    return (Permission::Allow, Reason::default());
                }
                let asked = matched.map_or(tool_setting, |(_, permission)| *permission);
                (
                    asked.max(Permission::Ask),
                    Reason::plain(format!(
                        "`{text}` runs other programs ({why}), so a rule on its command line \
                         cannot see all it does; no rule names this use of it"
                    )),
                )
            }
            // Only the tool's own `ask` may be answered by a remembered rule.
            (None, None)
                if tool_setting == Permission::Ask
                    && texts.iter().any(|text| remembered(text, false)) =>
            {
                (Permission::Allow, Reason::default())
            }
            (None, None) => (tool_setting, self.tool_reason(tool_setting)),
        }
    }

    fn tool_reason(&self, setting: Permission) -> Reason {
        let text = match setting {
            Permission::Deny => "this agent may not run shell commands",
            Permission::Ask => "this agent asks before every shell command",
            Permission::Allow => "this agent runs shell commands without asking",
        };
        Reason::set_by(text, self.key("shell"))
    }
}

/// An escalation always asks, and its answer is never remembered.
fn escalation_verdict(why: &str) -> Verdict {
    Verdict::Ask {
        reason: Reason::plain(format!(
            "the agent asks to run this outside the sandbox: {why}"
        )),
        suggested_rules: Vec::new(),
    }
}

/// Whether a command's program is an expansion (`$CMD`, `` `which rm` ``, `$(…)`).
fn is_expansion(program: &str) -> bool {
    program.contains('$') || program.contains('`')
}

/// Whether a remembered rule of the user's matches a text; with `true`, only one that names
/// an exact use (`names_exact_use`).
pub type Remembered<'a> = &'a dyn Fn(&str, bool) -> bool;

/// The texts a part is matched against: as written, with its program by name alone when it
/// was given by path, and git's with its options before the command left out.
fn match_texts(words: &[String]) -> Vec<String> {
    let mut texts = vec![words.join(" ")];
    texts.extend(by_program_name(words));
    if words
        .first()
        .is_some_and(|program| runners::base_name(program) == "git")
        && let (Some(command), _) = runners::git_command(&words[1..])
        && command > 0
    {
        let rest = words[1 + command..].join(" ");
        texts.push(format!("git {rest}"));
    }
    texts
}

/// Why a program given by path is not the program of that name the path would find (a `./rm`,
/// `/tmp/x/git`, a script written in the working directory), if it is not.
fn not_the_program_found(words: &[String], cwd: &Path) -> Option<String> {
    let program = words.first()?;
    if !program.contains('/') {
        return None;
    }
    let name = runners::base_name(program);
    let given = cwd.join(program).canonicalize().ok();
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
            .and_then(|candidate| candidate.canonicalize().ok())
    });
    match (given, found) {
        (Some(given), Some(found)) if given == found => None,
        (_, Some(found)) => Some(format!(
            "it runs {program}, not the {name} found on the path ({})",
            found.display()
        )),
        (_, None) => Some(format!("it runs {program}, a program not on the path")),
    }
}

/// The command with its program by name alone, when it was given by path (`/bin/rm -rf x` →
/// `rm -rf x`).
fn by_program_name(words: &[String]) -> Option<String> {
    let (program, rest) = words.split_first()?;
    let name = program.rsplit('/').next().filter(|name| !name.is_empty())?;
    (name != program).then(|| {
        std::iter::once(name)
            .chain(rest.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// The strictest permission seen so far, with the reason of its first occurrence, and the rule
/// each part that asks could be remembered by.
struct Strictest {
    permission: Permission,
    reason: Reason,
    suggested_rules: Vec<RuleChoice>,
}

impl Default for Strictest {
    fn default() -> Strictest {
        Strictest {
            permission: Permission::Allow,
            reason: Reason::default(),
            suggested_rules: Vec::new(),
        }
    }
}

impl Strictest {
    fn add(&mut self, permission: Permission, reason: Reason, suggested_rule: Option<RuleChoice>) {
        // The first reason of the strictest permission is kept (starting from `allow`).
        if (self.reason.text.is_empty() && !reason.text.is_empty()) || permission > self.permission
        {
            self.permission = permission;
            self.reason = reason;
        }
        // Every part that asks gets its rule: one answer then covers the whole command.
        if permission == Permission::Ask
            && let Some(rule) = suggested_rule
            && !self
                .suggested_rules
                .iter()
                .any(|known| known.rule == rule.rule)
        {
            self.suggested_rules.push(rule);
        }
    }
}

/// The `command` argument of a shell call ("" if missing: the tool itself reports that).
pub fn shell_command(arguments: &Value) -> &str {
    arguments
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The `escalate` argument of a shell call: why the agent asks to run outside the sandbox.
pub fn escalation(arguments: &Value) -> Option<&str> {
    arguments
        .get("escalate")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|why| !why.is_empty())
}

fn absolute_path(arguments: &Value, cwd: &Path) -> String {
    let path = arguments.get("path").and_then(Value::as_str).unwrap_or("");
    cwd.join(path).to_string_lossy().into_owned()
}

/// For the file tools: everything under the path's directory; else any call.
fn suggest_for_path(tool: &str, subject: &str) -> String {
    match tool {
        "read_file" | "write_file" | "list_dir" => match Path::new(subject).parent() {
            Some(parent) if parent != Path::new("/") => format!("{}/*", parent.display()),
            _ => "/*".to_owned(),
        },
        _ => "*".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn permissions(shell: Permission, rules: &[(&str, Permission)]) -> Permissions {
        Permissions {
            agent: "default".to_owned(),
            tools: BTreeMap::from([("shell".to_owned(), shell)]),
            shell_rules: rules
                .iter()
                .map(|(pattern, permission)| (pattern.to_string(), *permission))
                .collect(),
            approval_timeout: None,
        }
    }

    fn shell(command: &str) -> Value {
        json!({"command": command})
    }

    fn check(permissions: &Permissions, arguments: &Value) -> Verdict {
        permissions.check("shell", arguments, Path::new("/w"), &|_, _| false)
    }

    fn is_ask(verdict: &Verdict) -> bool {
        matches!(verdict, Verdict::Ask { .. })
    }

    #[test]
    fn deny_beats_ask_and_ask_beats_allow() {
        let rules = [
            ("git *", Permission::Allow),
            ("git push*", Permission::Ask),
            ("git push --force*", Permission::Deny),
        ];
        let policy = permissions(Permission::Allow, &rules);
        assert_eq!(check(&policy, &shell("git status")), Verdict::Allow);
        assert!(is_ask(&check(&policy, &shell("git push origin"))));
        assert!(matches!(
            check(&policy, &shell("git push --force origin")),
            Verdict::Deny { .. }
        ));
    }

    #[test]
    fn each_part_of_a_list_is_matched_and_the_strictest_wins() {
        let rules = [
            ("rm -rf /*", Permission::Deny),
            ("git push*", Permission::Ask),
        ];
        let policy = permissions(Permission::Allow, &rules);
        assert!(is_ask(&check(&policy, &shell("ls && git push"))));
        let Verdict::Deny { reason } = check(&policy, &shell("git push | sudo rm -rf /")) else {
            panic!("the deny of one part is the verdict");
        };
        assert!(
            reason
                .text
                .contains("the rule \"rm -rf /*\", which refuses it"),
            "{reason}"
        );
        assert!(
            reason.setting.as_deref() == Some("agents.default.permissions.shell_rules"),
            "{reason}"
        );
    }

    #[test]
    fn remembered_rules_answer_only_the_tools_own_ask() {
        let rules = [("git push*", Permission::Ask), ("rm *", Permission::Deny)];
        let policy = permissions(Permission::Ask, &rules);
        let remembered = |text: &str, _exact: bool| pattern_matches("*", text);
        let with =
            |command: &str| policy.check("shell", &shell(command), Path::new("/w"), &remembered);
        assert_eq!(with("cargo test"), Verdict::Allow);
        assert!(
            is_ask(&with("git push")),
            "a configured pattern's ask stays"
        );
        assert!(matches!(with("rm x"), Verdict::Deny { .. }));
        let escalated = json!({"command": "cargo test", "escalate": "needs the network"});
        let verdict = policy.check("shell", &escalated, Path::new("/w"), &remembered);
        assert_eq!(
            verdict,
            Verdict::Ask {
                reason: Reason::plain(
                    "the agent asks to run this outside the sandbox: needs the network"
                ),
                suggested_rules: Vec::new(),
            }
        );
    }

    #[test]
    fn programs_by_path_match_by_name_and_expansions_ask() {
        let policy = permissions(Permission::Allow, &[("rm *", Permission::Deny)]);
        assert!(matches!(
            check(&policy, &shell("/bin/rm -rf x")),
            Verdict::Deny { .. }
        ));
        assert!(is_ask(&check(&policy, &shell("$TOOL -rf x"))));
        assert!(is_ask(&check(&policy, &shell("ls; $(echo rm) x"))));
        assert_eq!(check(&policy, &shell("ls /bin")), Verdict::Allow);
    }

    #[test]
    fn without_rules_the_tools_setting_decides_unread() {
        // Bash-only syntax the splitter refuses does not matter when nothing is matched.
        let allow = permissions(Permission::Allow, &[]);
        assert_eq!(
            check(&allow, &shell("diff <(ls a) <(ls b)")),
            Verdict::Allow
        );
        let deny = permissions(Permission::Deny, &[]);
        assert!(matches!(check(&deny, &shell("ls")), Verdict::Deny { .. }));
        let with_rules = permissions(Permission::Allow, &[("git push*", Permission::Ask)]);
        assert!(is_ask(&check(&with_rules, &shell("diff <(ls a) <(ls b)"))));
        let escalated = json!({"command": "ls", "escalate": "why"});
        assert!(is_ask(&check(&allow, &escalated)));
    }

    #[test]
    fn mcp_tools_follow_their_own_setting_then_patterns_then_mcp() {
        let mut policy = Permissions {
            agent: "a".to_owned(),
            ..Permissions::default()
        };
        let check = |policy: &Permissions, tool: &str| {
            policy.check(tool, &json!({}), Path::new("/"), &|_, _| false)
        };
        // Unconfigured: every MCP tool asks, naming the `mcp` setting.
        assert_eq!(
            check(&policy, "mcp__files__read"),
            Verdict::Ask {
                reason: Reason::set_by(
                    "this agent asks before each `mcp__files__read` call",
                    "agents.a.permissions.mcp".to_owned()
                ),
                suggested_rules: vec![RuleChoice::exact("*".to_owned())],
            }
        );
        policy.tools.insert("mcp".to_owned(), Permission::Allow);
        policy
            .tools
            .insert("mcp__files__*".to_owned(), Permission::Ask);
        policy
            .tools
            .insert("mcp__files__wr*".to_owned(), Permission::Deny);
        policy
            .tools
            .insert("mcp__files__read".to_owned(), Permission::Allow);
        assert_eq!(policy.tool("mcp__search__find"), Permission::Allow);
        assert_eq!(policy.tool("mcp__files__list"), Permission::Ask);
        assert_eq!(policy.tool("mcp__files__read"), Permission::Allow);
        // Of two matching patterns the strictest wins.
        assert_eq!(
            check(&policy, "mcp__files__write"),
            Verdict::Deny {
                reason: Reason::set_by(
                    "this agent may not use `mcp__files__write`",
                    "agents.a.permissions.mcp__files__wr*".to_owned()
                )
            }
        );
    }

    #[test]
    fn an_unknown_tool_setting_allows_and_mcp_asks() {
        let policy = Permissions::default();
        assert_eq!(policy.tool("write_file"), Permission::Allow);
        assert_eq!(policy.tool("mcp"), Permission::Ask);
        assert_eq!(check(&policy, &shell("anything")), Verdict::Allow);
    }

    #[test]
    fn file_tools_suggest_their_directory() {
        let mut policy = Permissions {
            agent: "default".to_owned(),
            ..Permissions::default()
        };
        policy
            .tools
            .insert("write_file".to_owned(), Permission::Ask);
        let verdict = policy.check(
            "write_file",
            &json!({"path": "src/main.rs", "content": ""}),
            Path::new("/w"),
            &|_, _| false,
        );
        assert_eq!(
            verdict,
            Verdict::Ask {
                reason: Reason::set_by(
                    "this agent asks before each `write_file` call",
                    "agents.default.permissions.write_file".to_owned()
                ),
                suggested_rules: vec![RuleChoice::exact("/w/src/*".to_owned())],
            }
        );
        let remembered = |text: &str, _exact: bool| pattern_matches("/w/src/*", text);
        let verdict = policy.check(
            "write_file",
            &json!({"path": "src/lib.rs"}),
            Path::new("/w"),
            &remembered,
        );
        assert_eq!(verdict, Verdict::Allow);
    }
}
