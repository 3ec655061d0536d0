//! Asking the user about a tool call that waits for approval, for `chat` and for `send` at a
//! terminal: show what the agent wants to do, read the answer (`Dialog`, pure, so it is tested
//! without a terminal), post it, and drop the question as soon as another client has answered
//! (its `approval.resolved`, or a `409` with the outcome), since the first answer wins.

use std::future::Future;

use serde_json::{Value, json};

use super::api::{Api, service_error};

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
                console.show(&format!("[{}]\n", service_error(404, &answer)));
                return Asked::Done;
            }
            // A rule that does not match the call, say: the question starts again.
            Ok((status, answer)) => console.show(&format!(
                "[the answer was refused: {}]\n",
                service_error(status, &answer)
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
    out += &format!("  in {}\n", text(&subject["cwd"]));
    if let Some(why) = approval["escalate"].as_str() {
        out += &format!("  OUTSIDE the sandbox, because: {why}\n");
    }
    out += &format!("  asked because: {}\n", text(&approval["reason"]));
    if let Some(rule) = approval["suggested_rule"].as_str() {
        out += &format!("  rule an always/conversation answer keeps: {rule}\n");
    }
    if let Some(expires) = approval["expires_at"].as_str() {
        out += &format!("  denied unless answered by {expires}\n");
    }
    out
}

/// The call on one line: a command as `$ command`, a file tool's path, or other arguments.
pub fn subject_line(subject: &Value) -> String {
    if let Some(command) = subject["command"].as_str() {
        format!("$ {command}")
    } else if let Some(path) = subject["path"].as_str() {
        format!("path: {path}")
    } else {
        format!("arguments: {}", subject["arguments"])
    }
}

/// How a settled approval ended, as a line; `ours` when this terminal's answer settled it.
pub fn outcome(approval: &Value, ours: bool) -> String {
    let id = text(&approval["id"]);
    let resolution = &approval["resolution"];
    let rule = &resolution["rule"];
    let what = match (text(&approval["status"]), text(&resolution["decision"])) {
        ("allowed", "allow_conversation") => format!(
            "allowed; the rule \"{}\" is kept for this conversation",
            text(&rule["pattern"])
        ),
        ("allowed", "allow_always") => format!(
            "allowed; the rule \"{}\" is kept for this agent in {}",
            text(&rule["pattern"]),
            text(&rule["scope"]["cwd"])
        ),
        ("allowed", _) => "allowed once".to_owned(),
        ("denied", _) => match resolution["message"].as_str() {
            Some(message) => format!("denied: {message}"),
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

/// The question and its follow-ups (which rule to keep, a message with a denial), one line of
/// input at a time.
pub struct Dialog {
    /// An escalation (running outside the sandbox) is allowed once or denied, never kept.
    escalation: bool,
    suggested_rule: Option<String>,
    step: Step,
}

#[derive(Clone, Copy)]
enum Step {
    Choice,
    /// Which rule `allow_conversation` or `allow_always` keeps.
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
            suggested_rule: approval["suggested_rule"].as_str().map(str::to_owned),
            step: Step::Choice,
        }
    }

    /// The question of the current step.
    pub fn question(&self) -> String {
        match self.step {
            Step::Choice if self.escalation => "Allow? [y]es once / [n]o: ".to_owned(),
            Step::Choice => "Allow? [y]es once / [c]onversation / [a]lways / [n]o: ".to_owned(),
            Step::Rule(_) => match &self.suggested_rule {
                Some(rule) => format!("Rule to keep [{rule}] (Enter keeps it, or type another): "),
                None => "Rule to keep (`*` matches any text): ".to_owned(),
            },
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
                let rule = match (line, &self.suggested_rule) {
                    ("", Some(suggested)) => suggested.clone(),
                    ("", None) => return Next::Ask(self.question()),
                    (typed, _) => typed.to_owned(),
                };
                Next::Answer(json!({ "decision": decision, "rule": rule }))
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
            Next::Answer(json!({"decision": "allow_always", "rule": "touch*"}))
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
