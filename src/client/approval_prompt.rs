//! Asking the user about a tool call that waits for approval, for `chat` and for `send` at a
//! terminal: show what the agent wants to do, read the answer (`Dialog`, pure, so it is tested
//! without a terminal), post it, and drop the question as soon as another client has answered
//! (its `approval.resolved`, or a `409` with the outcome), since the first answer wins.

use std::future::Future;

use serde_json::Value;

use super::api::{Api, ApiError};
use super::endpoints::Answered;
use crate::api::approvals::{
    Approval, ApprovalAnswer, ApprovalDecision, ApprovalStatus, ApprovalSubject, RuleScope,
};
use crate::text::visible;

/// What the user typed, or why no answer will come from this terminal.
pub enum Input {
    Line(String),
    /// The input ended (end of file, Ctrl-D).
    NoInput,
    /// Someone else settled the approval first (its `approval.resolved`): the outcome.
    Settled(Box<Approval>),
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
pub async fn ask(api: &Api, approval: &Approval, console: &mut impl Console) -> Asked {
    let id = &approval.id;
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
        let answer = match dialog.line(&line) {
            Next::Ask(question) => {
                console.show(&question);
                continue;
            }
            Next::Answer(answer) => answer,
        };
        match api.answer_approval(id, &answer).await {
            Ok(Answered::Settled(settled)) => {
                console.show(&outcome(&settled, true));
                return Asked::Done;
            }
            Ok(Answered::AlreadyDecided(settled)) => {
                console.show(&outcome(&settled, false));
                return Asked::Done;
            }
            Err(error @ ApiError::Service { status: 404, .. }) => {
                console.show(&format!("[{error}]\n"));
                return Asked::Done;
            }
            // A rule that does not match the call, say: the question starts again.
            Err(error @ ApiError::Service { .. }) => {
                console.show(&format!("[the answer was refused: {error}]\n"));
            }
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
pub async fn waiting(api: &Api, approval: &Approval) -> Waiting {
    let Ok(view) = api.conversation(&approval.conversation_id).await else {
        return Waiting {
            pending: true,
            asker: None,
        };
    };
    let pending = view
        .approvals
        .iter()
        .any(|waiting| waiting.id == approval.id);
    let session = &approval.session_id;
    let asker = (*session != view.conversation.root_session_id)
        .then(|| {
            let found = view.sessions.iter().find(|s| s.id == *session)?;
            Some(format!("sub-agent `{}` ({session})", found.agent))
        })
        .flatten();
    Waiting { pending, asker }
}

/// The outcome of an approval that was settled before it could be asked.
async fn settled_before(api: &Api, approval: &Approval) -> String {
    let settled = api
        .all_approvals()
        .await
        .ok()
        .and_then(|list| list.approvals.into_iter().find(|a| a.id == approval.id));
    match settled {
        Some(settled) if settled.status != ApprovalStatus::Pending => outcome(&settled, false),
        _ => format!("[approval {} no longer waits]\n", approval.id),
    }
}

/// What the agent wants to do, and why it asks.
pub fn describe(approval: &Approval, asker: Option<&str>) -> String {
    if let Some(question) = &approval.question {
        let mut out = format!(
            "[question {}] {}",
            approval.id,
            super::question_form::describe(question)
        );
        if let Some(expires) = &approval.expires_at {
            out += &format!(
                "  declined unless answered by {}\n",
                super::wire_text(expires)
            );
        }
        return out;
    }
    let subject = &approval.subject;
    let mut out = format!(
        "[approval {}] {} asks to use `{}`:\n",
        approval.id,
        asker.unwrap_or("the agent"),
        approval.tool
    );
    out += &format!("  {}\n", subject_line(subject));
    out += &format!("  in {}\n", visible(&subject.cwd));
    if let Some(why) = &approval.escalate {
        out += &format!("  OUTSIDE the sandbox, because: {}\n", visible(why));
    }
    out += &format!("  asked because: {}", visible(&approval.reason));
    match &approval.setting {
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
    if let Some(expires) = &approval.expires_at {
        out += &format!(
            "  denied unless answered by {}\n",
            super::wire_text(expires)
        );
    }
    out
}

/// The call on one line: a command as `$ command`, a file tool's path, or other arguments, with
/// anything a terminal would interpret written out (`crate::text::visible`).
pub fn subject_line(subject: &ApprovalSubject) -> String {
    if let Some(command) = &subject.command {
        format!("$ {}", visible(command))
    } else if let Some(path) = &subject.path {
        format!("path: {}", visible(path))
    } else {
        let arguments = subject.arguments.as_ref().unwrap_or(&Value::Null);
        format!("arguments: {}", visible(&arguments.to_string()))
    }
}

/// A suggested rule: the exact one, and the broader one offered beside it with what else it
/// allows.
pub type Suggested = (String, Option<(String, Vec<String>)>);

/// The approval's suggested rules. An approval from an older service has only
/// `suggested_rule`.
pub fn suggested_rules(approval: &Approval) -> Vec<Suggested> {
    let listed: Vec<Suggested> = approval
        .suggested_rules
        .iter()
        .map(|choice| {
            let broader = choice
                .broader
                .as_ref()
                .map(|broader| (broader.rule.clone(), broader.also_allows.clone()));
            (choice.rule.clone(), broader)
        })
        .collect();
    if listed.is_empty()
        && let Some(rule) = &approval.suggested_rule
    {
        return vec![(rule.clone(), None)];
    }
    listed
}

/// How a settled approval ended, as a line; `ours` when this terminal's answer settled it.
pub fn outcome(approval: &Approval, ours: bool) -> String {
    let id = &approval.id;
    let resolution = approval.resolution.as_ref();
    let rule = resolution.and_then(|resolution| resolution.rule.as_ref());
    let pattern = |pattern: &str| format!("\"{}\"", visible(pattern));
    let kept: Vec<String> = match resolution.map(|resolution| &resolution.rules) {
        Some(rules) if !rules.is_empty() => {
            rules.iter().map(|rule| pattern(&rule.pattern)).collect()
        }
        _ => vec![pattern(
            rule.map(|rule| rule.pattern.as_str()).unwrap_or_default(),
        )],
    };
    let (the_rules, are) = match kept.len() {
        1 => ("the rule", "is"),
        _ => ("the rules", "are"),
    };
    let kept = kept.join(", ");
    let decision = resolution.and_then(|resolution| resolution.decision);
    let what = match (approval.status, decision) {
        (ApprovalStatus::Allowed, Some(ApprovalDecision::AllowConversation)) => {
            format!("allowed; {the_rules} {kept} {are} kept for this conversation")
        }
        (ApprovalStatus::Allowed, Some(ApprovalDecision::AllowAlways)) => {
            let cwd = match rule.map(|rule| &rule.scope) {
                Some(RuleScope::Always { cwd, .. }) => cwd.as_str(),
                _ => "",
            };
            format!(
                "allowed; {the_rules} {kept} {are} kept for this agent in {}",
                visible(cwd)
            )
        }
        (ApprovalStatus::Allowed, _) => match approval.question.as_ref() {
            Some(question) => format!(
                "answered: {}",
                super::question_form::answered(&question.answer.clone().unwrap_or_default())
            ),
            None => "allowed once".to_owned(),
        },
        (ApprovalStatus::Denied, _) if approval.question.is_some() => "declined".to_owned(),
        (ApprovalStatus::Expired, _) if approval.question.is_some() => {
            "expired unanswered, so declined".to_owned()
        }
        (ApprovalStatus::Denied, _) => match resolution.and_then(|r| r.message.as_deref()) {
            Some(message) => format!("denied: {}", visible(message)),
            None => "denied".to_owned(),
        },
        (ApprovalStatus::Expired, _) => "expired unanswered, so denied".to_owned(),
        (ApprovalStatus::Cancelled, _) => {
            "cancelled: its turn was interrupted or the service stopped".to_owned()
        }
        (ApprovalStatus::Pending, _) => super::wire_text(&approval.status),
    };
    match resolution {
        Some(resolution) if !ours && decision.is_some() => format!(
            "[approval {id} was answered by {}: {what}]\n",
            resolution.decided_by
        ),
        _ => format!("[approval {id}: {what}]\n"),
    }
}

/// How another client answers it: a `curl` line (with the token header when one is used), or
/// `openvaala chat` on the conversation.
pub fn how_to_answer(api: &Api, approval: &Approval) -> String {
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
        api.base, approval.id, approval.conversation_id
    )
}

/// The question and its follow-ups (which rules to keep, a message with a denial), one line of
/// input at a time.
pub struct Dialog {
    /// An escalation (running outside the sandbox), a spending limit or what an MCP server
    /// asks is allowed once or denied, never kept.
    escalation: bool,
    /// An escalation proper: said when a remembering answer is refused.
    outside_sandbox: bool,
    /// An MCP server's question: its fields, asked one at a time after a yes, and the values
    /// typed so far.
    form: Vec<super::question_form::Field>,
    content: serde_json::Map<String, Value>,
    /// Each part's exact rule, and its broader one if offered.
    rules: Vec<(String, Option<String>)>,
    step: Step,
}

#[derive(Clone, Copy)]
enum Step {
    Choice,
    /// Which rules `allow_conversation` or `allow_always` keeps.
    Rule(ApprovalDecision),
    /// The message a denial tells the model.
    Message,
    /// A question's field, by its place in the form.
    Field(usize),
}

/// What a line of input leads to.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// Another question.
    Ask(String),
    /// The answer for `POST /api/approvals/{id}`.
    Answer(ApprovalAnswer),
}

impl Dialog {
    pub fn new(approval: &Approval) -> Dialog {
        Dialog {
            outside_sandbox: approval.escalate.is_some(),
            escalation: approval.escalate.is_some()
                || approval.is_spending_limit()
                || approval.is_from_mcp_server(),
            form: approval
                .question
                .as_ref()
                .map(super::question_form::fields)
                .unwrap_or_default(),
            content: serde_json::Map::new(),
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
            Step::Choice if self.is_question() => "Answer? [y]es / [n]o, decline: ".to_owned(),
            Step::Choice if self.escalation => "Allow? [y]es once / [n]o: ".to_owned(),
            Step::Field(at) => self.form[at].prompt(),
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
                    "y" | "yes" if self.is_question() => return self.next_field(0),
                    "y" | "yes" => return Next::Answer(answer(ApprovalDecision::AllowOnce)),
                    "n" | "no" if self.is_question() => {
                        return Next::Answer(answer(ApprovalDecision::Deny));
                    }
                    "n" | "no" => {
                        self.step = Step::Message;
                        return Next::Ask(self.question());
                    }
                    "c" | "conversation" => ApprovalDecision::AllowConversation,
                    "a" | "always" => ApprovalDecision::AllowAlways,
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
                    let what = match self.outside_sandbox {
                        true => "running outside the sandbox",
                        false => "this answer",
                    };
                    return Next::Ask(format!(
                        "[{what} is never remembered: answer y or n] {}",
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
                    typed => {
                        return Next::Answer(ApprovalAnswer {
                            rule: Some(typed.to_owned()),
                            ..answer(decision)
                        });
                    }
                };
                Next::Answer(ApprovalAnswer {
                    rules: Some(rules),
                    ..answer(decision)
                })
            }
            Step::Field(at) => match self.form[at].read(line) {
                Ok(value) => {
                    if let Some(value) = value {
                        self.content.insert(self.form[at].name.clone(), value);
                    }
                    self.next_field(at + 1)
                }
                Err(why) => Next::Ask(format!("[{why}] {}", self.question())),
            },
            Step::Message if line.is_empty() => Next::Answer(answer(ApprovalDecision::Deny)),
            Step::Message => Next::Answer(ApprovalAnswer {
                message: Some(line.to_owned()),
                ..answer(ApprovalDecision::Deny)
            }),
        }
    }
}

impl Dialog {
    fn is_question(&self) -> bool {
        !self.form.is_empty()
    }

    /// The field at `at`, or the form's answer once every field has one.
    fn next_field(&mut self, at: usize) -> Next {
        if at < self.form.len() {
            self.step = Step::Field(at);
            return Next::Ask(self.question());
        }
        Next::Answer(ApprovalAnswer {
            content: Some(std::mem::take(&mut self.content)),
            ..answer(ApprovalDecision::AllowOnce)
        })
    }
}

/// An answer with the decision alone.
pub fn answer(decision: ApprovalDecision) -> ApprovalAnswer {
    ApprovalAnswer {
        decision,
        rule: None,
        rules: None,
        message: None,
        content: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::approvals::{ApprovalResolution, BroaderRule, Rule, SuggestedRule};
    use crate::client::fixtures::at;
    use ApprovalDecision::*;

    fn shell(escalate: Option<&str>, suggested: Option<&str>) -> Approval {
        Approval {
            id: "ap_1".to_owned(),
            conversation_id: "c_1".to_owned(),
            session_id: "s_1".to_owned(),
            subject: ApprovalSubject {
                command: Some("touch ran.txt".to_owned()),
                path: None,
                arguments: None,
                cwd: "/srv/app".to_owned(),
            },
            escalate: escalate.map(str::to_owned),
            suggested_rule: suggested.map(str::to_owned),
            suggested_rules: Vec::new(),
            reason: "the tool's setting is ask".to_owned(),
            setting: None,
            ..Approval::example()
        }
    }

    #[test]
    fn a_servers_question_is_answered_field_by_field_or_declined() {
        let approval = Approval {
            tool: crate::api::approvals::MCP_QUESTION.to_owned(),
            question: Some(crate::api::approvals::ApprovalQuestion {
                server: "asker".to_owned(),
                message: "Where to?".to_owned(),
                schema: serde_json::json!({
                    "type": "object",
                    "properties": {
                        "environment": {"type": "string", "enum": ["staging", "production"]},
                        "replicas": {"type": "integer", "maximum": 10}
                    },
                    "required": ["environment"]
                }),
                answer: None,
            }),
            ..shell(None, None)
        };
        assert_eq!(
            Dialog::new(&approval).question(),
            "Answer? [y]es / [n]o, decline: "
        );
        let steps = answers(&approval, &["a", "y", "moon", "2", "50", "3"]);
        assert!(
            matches!(&steps[0], Next::Ask(q) if q.starts_with("[this answer is never remembered"))
        );
        assert_eq!(
            steps[1],
            Next::Ask("environment [1 staging | 2 production]: ".to_owned())
        );
        assert!(matches!(&steps[2], Next::Ask(q) if q.starts_with("[answer one of")));
        assert_eq!(
            steps[3],
            Next::Ask("replicas, Enter to leave it out: ".to_owned())
        );
        assert!(
            matches!(&steps[4], Next::Ask(q) if q.starts_with("[answer a whole number of at most 10]"))
        );
        let content = serde_json::json!({"environment": "production", "replicas": 3});
        assert_eq!(
            steps[5],
            Next::Answer(ApprovalAnswer {
                content: content.as_object().cloned(),
                ..answer(ApprovalDecision::AllowOnce)
            })
        );
        assert_eq!(
            answers(&approval, &["n"]),
            [Next::Answer(answer(ApprovalDecision::Deny))]
        );
        let described = describe(&approval, None);
        assert!(
            described.starts_with("[question ap_1] the MCP server `asker` asks: Where to?\n"),
            "{described}"
        );
    }

    fn answers(approval: &Approval, lines: &[&str]) -> Vec<Next> {
        let mut dialog = Dialog::new(approval);
        lines.iter().map(|line| dialog.line(line)).collect()
    }

    fn rules(decision: ApprovalDecision, rules: &[&str]) -> Next {
        let rules = rules.iter().map(|rule| (*rule).to_owned()).collect();
        Next::Answer(ApprovalAnswer {
            rules: Some(rules),
            ..answer(decision)
        })
    }

    fn rule(decision: ApprovalDecision, rule: &str) -> Next {
        Next::Answer(ApprovalAnswer {
            rule: Some(rule.to_owned()),
            ..answer(decision)
        })
    }

    #[test]
    fn yes_allows_once_and_no_asks_for_an_optional_message() {
        let approval = shell(None, Some("touch*"));
        assert_eq!(
            answers(&approval, &[" Y "]),
            [Next::Answer(answer(AllowOnce))]
        );
        let denied = answers(&approval, &["n", "use the make target"]);
        assert!(matches!(&denied[0], Next::Ask(q) if q.starts_with("Message to the agent")));
        assert_eq!(
            denied[1],
            Next::Answer(ApprovalAnswer {
                message: Some("use the make target".to_owned()),
                ..answer(Deny)
            })
        );
        assert_eq!(
            answers(&approval, &["no", ""])[1],
            Next::Answer(answer(Deny))
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
        assert_eq!(kept[1], rules(AllowAlways, &["touch*"]));
        assert_eq!(
            answers(&approval, &["c", "touch *.txt"])[1],
            rule(AllowConversation, "touch *.txt")
        );
        // With nothing suggested, an empty line asks again.
        let unsuggested = answers(&shell(None, None), &["a", "", "ls*"]);
        assert!(matches!(&unsuggested[1], Next::Ask(q) if q.starts_with("Rule to keep (")));
        assert_eq!(unsuggested[2], rule(AllowAlways, "ls*"));
    }

    #[test]
    fn a_compound_command_keeps_a_rule_per_part_or_the_broader_ones() {
        let mut approval = shell(None, Some("git push origin"));
        approval.subject.command = Some("git push origin && make\u{1b}[2K".to_owned());
        approval.reason = "r".to_owned();
        approval.suggested_rules = vec![
            SuggestedRule {
                rule: "git push origin".to_owned(),
                broader: Some(BroaderRule {
                    rule: "git push*".to_owned(),
                    also_allows: vec!["git push --force".to_owned()],
                }),
            },
            SuggestedRule {
                rule: "make".to_owned(),
                broader: None,
            },
        ];
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
        assert_eq!(kept[1], rules(AllowAlways, &["git push origin", "make"]));
        assert_eq!(
            answers(&approval, &["c", "b"])[1],
            rules(AllowConversation, &["git push*", "make"])
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
        assert_eq!(dialog.line("y"), Next::Answer(answer(AllowOnce)));
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
        let resolution = |decision: Option<ApprovalDecision>, by: &str| ApprovalResolution {
            decision,
            rule: None,
            rules: Vec::new(),
            message: None,
            decided_at: at(),
            decided_by: by.to_owned(),
        };
        approval.status = ApprovalStatus::Allowed;
        approval.resolution = Some(ApprovalResolution {
            rule: Some(Rule {
                id: "r_1".to_owned(),
                tool: "shell".to_owned(),
                pattern: "touch *".to_owned(),
                scope: RuleScope::Always {
                    agent: "default".to_owned(),
                    cwd: "/srv/app".to_owned(),
                },
                created_at: at(),
                created_by: "web".to_owned(),
                approval_id: None,
            }),
            ..resolution(Some(AllowAlways), "web")
        });
        assert_eq!(
            outcome(&approval, false),
            "[approval ap_1 was answered by web: allowed; the rule \"touch *\" is kept for this \
             agent in /srv/app]\n"
        );
        approval.status = ApprovalStatus::Expired;
        approval.resolution = Some(resolution(None, "service"));
        assert_eq!(
            outcome(&approval, false),
            "[approval ap_1: expired unanswered, so denied]\n"
        );
        approval.status = ApprovalStatus::Denied;
        approval.resolution = Some(ApprovalResolution {
            message: Some("not now".to_owned()),
            ..resolution(Some(Deny), "cli")
        });
        assert_eq!(
            outcome(&approval, true),
            "[approval ap_1: denied: not now]\n"
        );
    }
}
