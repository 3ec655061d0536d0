//! Asking the user about a tool call that waits for approval, for `chat` and for `send` at a
//! terminal: show what the agent wants to do, read the answer (`Dialog`, pure, so it is tested
//! without a terminal), post it, and drop the question as soon as another client has answered
//! (its `approval.resolved`, or a `409` with the outcome), since the first answer wins.

use std::future::Future;

use serde_json::{Value, json};

use super::api::{Api, service_error_value};
use crate::text::visible;

/// What the user typed, or why no answer will come from this terminal.
pub enum Input {
    Line(String),
    /// The input ended (end of file, Ctrl-D).
    NoInput,
    /// Someone else settled the approval first (its `approval.resolved`): the outcome.
    Settled(Value),
    /// The conversation's event stream ended.
    Ended,
    /// The client showed something else (chat's `/agents`): the question is asked again.
    Aside,
}

/// A client's terminal: where the question is shown and the answer read.
pub trait Console {
    fn show(&mut self, text: &str);

    /// The next line typed, or the approval `id`'s settlement if it comes first (events of
    /// the conversation that arrive meanwhile are kept for the client to show afterwards).
    fn next(&mut self, id: &str) -> impl Future<Output = Input>;
}

/// How a question ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// Settled (by this answer or another client's), gone, or no longer followed.
    Done,
    /// The input ended before an answer: the approval still waits.
    NoInput,
}

/// Asks about `approval` until it is answered here or settled elsewhere.
pub async fn ask(api: &Api, approval: &Value, console: &mut impl Console) -> Asked {
    let id = text(&approval["id"]);
    let now = waiting(api, approval).await;
    if !now.pending {
        // Settled before the question could be shown (the events were replayed, say).
        console.show(&settled_before(api, approval).await);
        return Asked::Done;
    }
    let mut dialog = Dialog::new(approval);
    console.show(&(describe(approval, now.asker.as_deref()) + &dialog.question()));
    loop {
        let line = match console.next(id).await {
            Input::Line(line) => line,
            Input::Settled(settled) => {
                console.show(&format!("\n{}", outcome(&settled, false)));
                return Asked::Done;
            }
            Input::NoInput => {
                console.show(&format!(
                    "\n[no answer given: approval {id} still waits; {}]\n",
                    how_to_answer(api, approval)
                ));
                return Asked::NoInput;
            }
            Input::Aside => {
                console.show(&dialog.question());
                continue;
            }
            Input::Ended => {
                console.show(&format!(
                    "\n[the conversation is no longer followed; approval {id} may still wait]\n"
                ));
                return Asked::Done;
            }
        };
        let body = match dialog.line(&line) {
            Next::Ask(question) => {
                console.show(&question);
                continue;
            }
            Next::Answer(body) => body,
        };
        match api
            .post_answer(&format!("/api/approvals/{id}"), &body)
            .await
        {
            Ok((200, settled)) => {
                console.show(&outcome(&settled, true));
                return Asked::Done;
            }
            Ok((409, answer)) if answer["approval"].is_object() => {
                console.show(&outcome(&answer["approval"], false));
                return Asked::Done;
            }
            Ok((404, answer)) => {
                console.show(&format!("[{}]\n", service_error_value(404, &answer)));
                return Asked::Done;
            }
            // A rule that does not match the call, say: the question starts again.
            Ok((status, answer)) => console.show(&format!(
                "[the answer was refused: {}]\n",
                service_error_value(status, &answer)
            )),
            Err(error) => console.show(&format!("[the answer was not sent: {error}]\n")),
        }
        dialog = Dialog::new(approval);
        console.show(&dialog.question());
    }
}

/// Whether an approval still waits, and who asks when it is not the root agent.
pub struct Waiting {
    pub pending: bool,
    /// `sub-agent `name` (s_…)`.
    pub asker: Option<String>,
}

/// Looks the approval up in its conversation. When that fails it is taken as waiting (an
/// answer will tell).
pub async fn waiting(api: &Api, approval: &Value) -> Waiting {
    let path = format!("/api/conversations/{}", text(&approval["conversation_id"]));
    let Ok(view) = api.get(&path).await else {
        return Waiting {
            pending: true,
            asker: None,
        };
    };
    let pending = view["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|waiting| waiting["id"] == approval["id"]);
    let session = &approval["session_id"];
    let asker = (*session != view["root_session_id"])
        .then(|| {
            let sessions = view["sessions"].as_array()?;
            let found = sessions.iter().find(|s| s["id"] == *session)?;
            Some(format!(
                "sub-agent `{}` ({})",
                text(&found["agent"]),
                text(session)
            ))
        })
        .flatten();
    Waiting { pending, asker }
}

/// The outcome of an approval that was settled before it could be asked.
async fn settled_before(api: &Api, approval: &Value) -> String {
    let settled = api
        .get("/api/approvals?status=all")
        .await
        .ok()
        .and_then(|list| {
            list["approvals"]
                .as_array()?
                .iter()
                .find(|a| a["id"] == approval["id"])
                .cloned()
        });
    match settled {
        Some(settled) if settled["status"] != "pending" => outcome(&settled, false),
        _ => format!("[approval {} no longer waits]\n", text(&approval["id"])),
    }
}

/// What the agent wants to do, and why it asks.
pub fn describe(approval: &Value, asker: Option<&str>) -> String {
    let subject = &approval["subject"];
    let mut out = format!(
        "[approval {}] {} asks to use `{}`:\n",
        text(&approval["id"]),
        asker.unwrap_or("the agent"),
        text(&approval["tool"])
    );
    out += &format!("  {}\n", subject_line(subject));
    out += &format!("  in {}\n", visible(text(&subject["cwd"])));
    if let Some(why) = approval["escalate"].as_str() {
        out += &format!("  OUTSIDE the sandbox, because: {}\n", visible(why));
    }
    out += &format!("  asked because: {}", visible(text(&approval["reason"])));
    match approval["setting"].as_str() {
        Some(setting) => out += &format!(" ({})\n", visible(setting)),
        None => out.push('\n'),
    }
    let rules = suggested_rules(approval);
    if !rules.is_empty() {
        let exact: Vec<String> = rules
            .iter()
            .map(|(rule, _)| format!("`{}`", visible(rule)))
            .collect();
        out += &format!(
            "  rule{} an always/conversation answer keeps: {} (only this)\n",
            if exact.len() > 1 { "s" } else { "" },
            exact.join(", ")
        );
        for (_, broader) in rules
            .iter()
            .filter_map(|(rule, broader)| Some((rule, broader.as_ref()?)))
        {
            out += &format!(
                "  or, answering `b`, the broader `{}`, which also allows: {}\n",
                visible(&broader.0),
                broader
                    .1
                    .iter()
                    .map(|example| format!("`{}`", visible(example)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if let Some(expires) = approval["expires_at"].as_str() {
        out += &format!("  denied unless answered by {expires}\n");
    }
    out
}

/// The call on one line: a command as `$ command`, a file tool's path, or other arguments, with
/// anything a terminal would interpret written out (`crate::text::visible`).
pub fn subject_line(subject: &Value) -> String {
    if let Some(command) = subject["command"].as_str() {
        format!("$ {}", visible(command))
    } else if let Some(path) = subject["path"].as_str() {
        format!("path: {}", visible(path))
    } else {
        format!("arguments: {}", visible(&subject["arguments"].to_string()))
    }
}

/// A suggested rule: the exact one, and the broader one offered beside it with what else it
/// allows.
pub type Suggested = (String, Option<(String, Vec<String>)>);

/// The approval's suggested rules. An approval from an older service has only
/// `suggested_rule`.
pub fn suggested_rules(approval: &Value) -> Vec<Suggested> {
    let listed: Vec<_> = approval["suggested_rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|choice| {
            let rule = choice["rule"].as_str()?.to_owned();
            let broader = choice["broader"]["rule"].as_str().map(|broader| {
                let examples = choice["broader"]["also_allows"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect();
                (broader.to_owned(), examples)
            });
            Some((rule, broader))
        })
        .collect();
    if listed.is_empty()
        && let Some(rule) = approval["suggested_rule"].as_str()
    {
        return vec![(rule.to_owned(), None)];
    }
    listed
}

/// How a settled approval ended, as a line; `ours` when this terminal's answer settled it.
pub fn outcome(approval: &Value, ours: bool) -> String {
    let id = text(&approval["id"]);
    let resolution = &approval["resolution"];
    let rule = &resolution["rule"];
    let kept: Vec<String> = match resolution["rules"].as_array() {
        Some(rules) if !rules.is_empty() => rules
            .iter()
            .map(|rule| format!("\"{}\"", visible(text(&rule["pattern"]))))
            .collect(),
        _ => vec![format!("\"{}\"", visible(text(&rule["pattern"])))],
    };
    let (the_rules, are) = match kept.len() {
        1 => ("the rule", "is"),
        _ => ("the rules", "are"),
    };
    let kept = kept.join(", ");
    let what = match (text(&approval["status"]), text(&resolution["decision"])) {
        ("allowed", "allow_conversation") => {
            format!("allowed; {the_rules} {kept} {are} kept for this conversation")
        }
        ("allowed", "allow_always") => format!(
            "allowed; {the_rules} {kept} {are} kept for this agent in {}",
            visible(text(&rule["scope"]["cwd"]))
        ),
        ("allowed", _) => "allowed once".to_owned(),
        ("denied", _) => match resolution["message"].as_str() {
            Some(message) => format!("denied: {}", visible(message)),
            None => "denied".to_owned(),
        },
        ("expired", _) => "expired unanswered, so denied".to_owned(),
        ("cancelled", _) => "cancelled: its turn was interrupted or the service stopped".to_owned(),
        (status, _) => status.to_owned(),
    };
    if ours || resolution["decision"].is_null() {
        format!("[approval {id}: {what}]\n")
    } else {
        format!(
            "[approval {id} was answered by {}: {what}]\n",
            text(&resolution["decided_by"])
        )
    }
}

/// How another client answers it: a `curl` line (with the token header when one is used), or
/// `openvaala chat` on the conversation.
pub fn how_to_answer(api: &Api, approval: &Value) -> String {
    // The token as the user has it: in their environment, or in the data directory.
    let auth = match (
        api.has_token(),
        std::env::var_os("OPENVAALA_TOKEN").is_some(),
    ) {
        (false, _) => "",
        (true, true) => " -H \"Authorization: Bearer $OPENVAALA_TOKEN\"",
        (true, false) => " -H \"Authorization: Bearer $(openvaala token show)\"",
    };
    format!(
        "answer it with `curl -X POST {}/api/approvals/{}{auth} -H 'Content-Type: application/json' \
         -d '{{\"decision\":\"allow_once\"}}'` (or \"deny\", \"allow_conversation\", \
         \"allow_always\"), or in `openvaala chat {}`",
        api.base,
        text(&approval["id"]),
        text(&approval["conversation_id"])
    )
}

/// The question and its follow-ups (which rules to keep, a message with a denial), one line of
/// input at a time.
pub struct Dialog {
    /// An escalation (running outside the sandbox) is allowed once or denied, never kept.
    escalation: bool,
    /// Each part's exact rule, and its broader one if offered.
    rules: Vec<(String, Option<String>)>,
    step: Step,
}

#[derive(Clone, Copy)]
enum Step {
    Choice,
    /// Which rules `allow_conversation` or `allow_always` keeps.
    Rule(&'static str),
    /// The message a denial tells the model.
    Message,
}

/// What a line of input leads to.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// Another question.
    Ask(String),
    /// The answer's body for `POST /api/approvals/{id}`.
    Answer(Value),
}

impl Dialog {
    pub fn new(approval: &Value) -> Dialog {
        Dialog {
            escalation: !approval["escalate"].is_null(),
            rules: suggested_rules(approval)
                .into_iter()
                .map(|(rule, broader)| (rule, broader.map(|(broader, _)| broader)))
                .collect(),
            step: Step::Choice,
        }
    }

    /// The question of the current step.
    pub fn question(&self) -> String {
        match self.step {
            Step::Choice if self.escalation => "Allow? [y]es once / [n]o: ".to_owned(),
            Step::Choice => "Allow? [y]es once / [c]onversation / [a]lways / [n]o: ".to_owned(),
            Step::Rule(_) if self.rules.is_empty() => {
                "Rule to keep (`*` matches any text): ".to_owned()
            }
            Step::Rule(_) => {
                let exact: Vec<String> = self
                    .rules
                    .iter()
                    .map(|(rule, _)| visible(rule).into_owned())
                    .collect();
                let broader = if self.rules.iter().any(|(_, broader)| broader.is_some()) {
                    ", b keeps the broader one"
                } else {
                    ""
                };
                format!(
                    "Rule{} to keep [{}] (Enter keeps {}{broader}, or type another): ",
                    if exact.len() > 1 { "s" } else { "" },
                    exact.join(" | "),
                    if exact.len() > 1 { "them" } else { "it" },
                )
            }
            Step::Message => "Message to the agent (optional, Enter for none): ".to_owned(),
        }
    }

    pub fn line(&mut self, line: &str) -> Next {
        let line = line.trim();
        match self.step {
            Step::Choice => {
                let remembered = match line.to_lowercase().as_str() {
                    "y" | "yes" => return Next::Answer(json!({ "decision": "allow_once" })),
                    "n" | "no" => {
                        self.step = Step::Message;
                        return Next::Ask(self.question());
                    }
                    "c" | "conversation" => "allow_conversation",
                    "a" | "always" => "allow_always",
                    _ => {
                        let choices = if self.escalation {
                            "y or n"
                        } else {
                            "y, c, a or n"
                        };
                        return Next::Ask(format!("[answer {choices}] {}", self.question()));
                    }
                };
                if self.escalation {
                    return Next::Ask(format!(
                        "[running outside the sandbox is never remembered: answer y or n] {}",
                        self.question()
                    ));
                }
                self.step = Step::Rule(remembered);
                Next::Ask(self.question())
            }
            Step::Rule(decision) => {
                let rules: Vec<String> = match line {
                    "" if self.rules.is_empty() => return Next::Ask(self.question()),
                    "" => self.rules.iter().map(|(rule, _)| rule.clone()).collect(),
                    "b" if self.rules.iter().any(|(_, broader)| broader.is_some()) => self
                        .rules
                        .iter()
                        .map(|(rule, broader)| broader.clone().unwrap_or_else(|| rule.clone()))
                        .collect(),
                    typed => return Next::Answer(json!({ "decision": decision, "rule": typed })),
                };
                Next::Answer(json!({ "decision": decision, "rules": rules }))
            }
            Step::Message if line.is_empty() => Next::Answer(json!({ "decision": "deny" })),
            Step::Message => Next::Answer(json!({ "decision": "deny", "message": line })),
        }
    }
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(escalate: Option<&str>, suggested: Option<&str>) -> Value {
        json!({
            "id": "ap_1", "conversation_id": "c_1", "session_id": "s_1", "tool": "shell",
            "subject": { "command": "touch ran.txt", "cwd": "/srv/app" },
            "escalate": escalate, "suggested_rule": suggested,
            "reason": "the tool's setting is ask", "status": "pending", "resolution": null,
        })
    }

    fn answers(approval: &Value, lines: &[&str]) -> Vec<Next> {
        let mut dialog = Dialog::new(approval);
        lines.iter().map(|line| dialog.line(line)).collect()
    }

    #[test]
    fn yes_allows_once_and_no_asks_for_an_optional_message() {
        let approval = shell(None, Some("touch*"));
        assert_eq!(
            answers(&approval, &[" Y "]),
            [Next::Answer(json!({"decision": "allow_once"}))]
        );
        let denied = answers(&approval, &["n", "use the make target"]);
        assert!(matches!(&denied[0], Next::Ask(q) if q.starts_with("Message to the agent")));
        assert_eq!(
            denied[1],
            Next::Answer(json!({"decision": "deny", "message": "use the make target"}))
        );
        assert_eq!(
            answers(&approval, &["no", ""])[1],
            Next::Answer(json!({"decision": "deny"}))
        );
    }

    #[test]
    fn remembering_answers_keep_the_suggested_rule_or_the_one_typed() {
        let approval = shell(None, Some("touch*"));
        let kept = answers(&approval, &["a", ""]);
        assert_eq!(
            kept[0],
            Next::Ask("Rule to keep [touch*] (Enter keeps it, or type another): ".to_owned())
        );
        assert_eq!(
            kept[1],
            Next::Answer(json!({"decision": "allow_always", "rules": ["touch*"]}))
        );
        assert_eq!(
            answers(&approval, &["c", "touch *.txt"])[1],
            Next::Answer(json!({"decision": "allow_conversation", "rule": "touch *.txt"}))
        );
        // With nothing suggested, an empty line asks again.
        let unsuggested = answers(&shell(None, None), &["a", "", "ls*"]);
        assert!(matches!(&unsuggested[1], Next::Ask(q) if q.starts_with("Rule to keep (")));
        assert_eq!(
            unsuggested[2],
            Next::Answer(json!({"decision": "allow_always", "rule": "ls*"}))
        );
    }

    #[test]
    fn a_compound_command_keeps_a_rule_per_part_or_the_broader_ones() {
        let approval = json!({
            "id": "ap_1", "conversation_id": "c_1", "session_id": "s_1", "tool": "shell",
            "subject": { "command": "git push origin && make\u{1b}[2K", "cwd": "/srv/app" },
            "escalate": null, "suggested_rule": "git push origin",
            "suggested_rules": [
                {"rule": "git push origin", "broader": {"rule": "git push*", "also_allows": ["git push --force"]}},
                {"rule": "make", "broader": null},
            ],
            "reason": "r", "status": "pending", "resolution": null,
        });
        let shown = describe(&approval, None);
        assert!(
            shown.contains("$ git push origin && make\\x1b[2K"),
            "{shown}"
        );
        assert!(
            shown.contains(
                "rules an always/conversation answer keeps: `git push origin`, `make` (only this)"
            ),
            "{shown}"
        );
        assert!(
            shown.contains("the broader `git push*`, which also allows: `git push --force`"),
            "{shown}"
        );
        let kept = answers(&approval, &["a", ""]);
        assert_eq!(
            kept[0],
            Next::Ask(
                "Rules to keep [git push origin | make] (Enter keeps them, b keeps the broader \
                 one, or type another): "
                    .to_owned()
            )
        );
        assert_eq!(
            kept[1],
            Next::Answer(json!({"decision": "allow_always", "rules": ["git push origin", "make"]}))
        );
        assert_eq!(
            answers(&approval, &["c", "b"])[1],
            Next::Answer(json!({"decision": "allow_conversation", "rules": ["git push*", "make"]}))
        );
    }

    #[test]
    fn an_escalation_is_only_allowed_once_or_denied() {
        let approval = shell(Some("writes the shared report"), None);
        let mut dialog = Dialog::new(&approval);
        assert_eq!(dialog.question(), "Allow? [y]es once / [n]o: ");
        assert!(matches!(dialog.line("a"), Next::Ask(q) if q.contains("never remembered")));
        assert!(matches!(dialog.line("c"), Next::Ask(q) if q.contains("never remembered")));
        assert!(matches!(dialog.line("maybe"), Next::Ask(q) if q.starts_with("[answer y or n]")));
        assert_eq!(
            dialog.line("y"),
            Next::Answer(json!({"decision": "allow_once"}))
        );
        let shown = describe(&approval, Some("sub-agent `default` (s_2)"));
        assert!(
            shown.starts_with("[approval ap_1] sub-agent `default` (s_2) asks to use `shell`:\n"),
            "{shown}"
        );
        assert!(
            shown.contains("  $ touch ran.txt\n  in /srv/app\n  OUTSIDE the sandbox, because: writes the shared report\n"),
            "{shown}"
        );
        assert!(!shown.contains("rule an always"), "{shown}");
    }

    #[test]
    fn outcomes_say_who_answered_and_what_was_kept() {
        let mut approval = shell(None, Some("touch*"));
        approval["status"] = json!("allowed");
        approval["resolution"] = json!({
            "decision": "allow_always", "decided_by": "web",
            "rule": { "pattern": "touch *", "scope": { "kind": "always", "cwd": "/srv/app" } },
        });
        assert_eq!(
            outcome(&approval, false),
            "[approval ap_1 was answered by web: allowed; the rule \"touch *\" is kept for this \
             agent in /srv/app]\n"
        );
        approval["status"] = json!("expired");
        approval["resolution"] = json!({ "decision": null, "decided_by": "service" });
        assert_eq!(
            outcome(&approval, false),
            "[approval ap_1: expired unanswered, so denied]\n"
        );
        approval["status"] = json!("denied");
        approval["resolution"] = json!({ "decision": "deny", "message": "not now" });
        assert_eq!(
            outcome(&approval, true),
            "[approval ap_1: denied: not now]\n"
        );
    }
}
