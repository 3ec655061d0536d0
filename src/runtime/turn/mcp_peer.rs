//! What an MCP server asks while one of the turn's calls to it runs, answered for that call:
//! a question goes to the users as an approval of that call (declined when it runs out), and
//! a request for a completion is written by the turn's own model (after a user allowed it,
//! with `mcp_sampling = "ask"`) and counted among the turn's model calls.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::spec::ModelSetup;
use crate::api::approvals::{MCP_QUESTION, MCP_SAMPLING};
use crate::config::McpSampling;
use crate::domain::{Item, ItemKind, ItemStatus, new_id, now, request_item};
use crate::mcp::{Answer, CallPeer, Question, SampleRequest, Sampled};
use crate::model::ModelRequest;
use crate::runtime::approvals::{ApprovalOutcome, ApprovalRequest};
use crate::runtime::link::{ActorLink, TurnMsg};

/// The most a sampling request may ask the model to write, whatever the server asks.
const MAX_SAMPLED_TOKENS: u32 = 4_096;
/// How long the model may take to write it.
const SAMPLING_TIMEOUT: Duration = Duration::from_secs(120);

/// Answers for the call `item_id` of a turn.
pub(super) struct TurnPeer {
    pub link: ActorLink,
    pub item_id: String,
    pub timeout: Option<Duration>,
    pub sampling: McpSampling,
    /// The model that answers now (the session's, or the fallback the turn moved to).
    pub model: SamplingModel,
    pub cancel: CancellationToken,
}

/// The turn's model, as sampling calls it.
#[derive(Clone)]
pub(super) struct SamplingModel {
    pub client: Arc<dyn crate::model::ModelClient>,
    /// Its name in the configuration (what usage and prices count it by).
    pub id: String,
    /// The provider's name of it.
    pub name: String,
}

impl SamplingModel {
    pub fn of(setup: &ModelSetup) -> SamplingModel {
        SamplingModel {
            client: setup.client.clone(),
            id: setup.id.clone(),
            name: setup.name.clone(),
        }
    }
}

impl TurnPeer {
    /// Asks the users through an approval of the call; `Cancelled` when the turn ends first.
    async fn ask_users(
        link: ActorLink,
        cancel: CancellationToken,
        request: ApprovalRequest,
    ) -> ApprovalOutcome {
        tokio::select! {
            outcome = link.ask_approval(request) => outcome,
            () = cancel.cancelled() => ApprovalOutcome::Cancelled,
        }
    }
}

impl CallPeer for TurnPeer {
    fn ask(&self, question: Question) -> BoxFuture<'static, Answer> {
        let request = ApprovalRequest {
            item_id: self.item_id.clone(),
            tool: MCP_QUESTION.to_owned(),
            arguments: json!({}),
            reason: crate::permissions::Reason {
                text: format!(
                    "the MCP server `{}` asks: {}",
                    question.server, question.message
                ),
                setting: None,
            },
            suggested_rules: Vec::new(),
            escalate: None,
            timeout: self.timeout,
            question: Some(question),
        };
        let (link, cancel) = (self.link.clone(), self.cancel.clone());
        async move {
            match TurnPeer::ask_users(link, cancel, request).await {
                ApprovalOutcome::Answered { content } => Answer::Accepted(content),
                // Allowed without content cannot come from a question's answer: none given.
                ApprovalOutcome::Allowed => Answer::Accepted(Default::default()),
                ApprovalOutcome::Denied { .. } | ApprovalOutcome::Expired { .. } => {
                    Answer::Declined
                }
                ApprovalOutcome::Cancelled => Answer::Cancelled,
            }
        }
        .boxed()
    }

    fn sample(&self, request: SampleRequest) -> BoxFuture<'static, Result<Sampled, String>> {
        let (link, cancel) = (self.link.clone(), self.cancel.clone());
        let (sampling, timeout, item_id) = (self.sampling, self.timeout, self.item_id.clone());
        let model = self.model.clone();
        async move {
            match sampling {
                McpSampling::Deny => {
                    return Err(
                        "this agent does not let MCP servers use its model (mcp_sampling = \
                         \"deny\")"
                            .to_owned(),
                    );
                }
                McpSampling::Ask => {
                    let asked = ApprovalRequest {
                        item_id,
                        tool: MCP_SAMPLING.to_owned(),
                        arguments: sampling_subject(&request),
                        reason: crate::permissions::Reason {
                            text: format!(
                                "the MCP server `{}` asks to have the agent's model write for it",
                                request.server
                            ),
                            setting: Some("mcp_sampling".to_owned()),
                        },
                        suggested_rules: Vec::new(),
                        escalate: None,
                        timeout,
                        question: None,
                    };
                    match TurnPeer::ask_users(link.clone(), cancel.clone(), asked).await {
                        ApprovalOutcome::Allowed | ApprovalOutcome::Answered { .. } => {}
                        ApprovalOutcome::Denied { .. } => {
                            return Err("a user declined the request for the model".to_owned());
                        }
                        ApprovalOutcome::Expired { after } => {
                            return Err(format!(
                                "nobody allowed the request for the model within {} s",
                                after.as_secs()
                            ));
                        }
                        ApprovalOutcome::Cancelled => {
                            return Err("the turn ended before the request was answered".to_owned());
                        }
                    }
                }
                McpSampling::Allow => {}
            }
            let written = tokio::select! {
                written = super::super::one_shot::write(
                    model.client.clone(),
                    model_request(&model, &request),
                    SAMPLING_TIMEOUT,
                    "the model",
                ) => written?,
                () = cancel.cancelled() => {
                    return Err("the turn ended before the model answered".to_owned());
                }
            };
            // One of the turn's model calls: counted, priced and held to its spending limits.
            link.send(TurnMsg::ModelAnswered {
                usage: written.usage,
                model: model.id.clone(),
            });
            Ok(Sampled {
                model: model.name.clone(),
                text: written.text,
            })
        }
        .boxed()
    }
}

/// What users are shown of a sampling request.
fn sampling_subject(request: &SampleRequest) -> serde_json::Value {
    let messages: Vec<serde_json::Value> = request
        .messages
        .iter()
        .map(|(role, text)| json!({ "role": role, "text": text }))
        .collect();
    let mut subject = json!({
        "server": request.server,
        "messages": messages,
        "max_tokens": request.max_tokens,
    });
    if let Some(system) = &request.system_prompt {
        subject["system_prompt"] = json!(system);
    }
    subject
}

/// The request the model gets: the server's system prompt and messages, no tools.
fn model_request(model: &SamplingModel, request: &SampleRequest) -> ModelRequest {
    let history = request
        .messages
        .iter()
        .map(|(role, text)| match role.as_str() {
            "assistant" => Item {
                id: new_id("m"),
                session_id: String::new(),
                turn_id: String::new(),
                seq: 0,
                created_at: now(),
                status: ItemStatus::Completed,
                compacted: false,
                step: None,
                kind: ItemKind::AgentMessage { text: text.clone() },
            },
            _ => request_item(text.clone(), String::new(), String::new()),
        })
        .collect();
    ModelRequest {
        model: model.name.clone(),
        instructions: request.system_prompt.clone(),
        history,
        tools: Vec::new(),
        max_output_tokens: u64::from(request.max_tokens.clamp(1, MAX_SAMPLED_TOKENS)),
        reasoning_context: None,
        cache_key: None,
        compaction: false,
    }
}
