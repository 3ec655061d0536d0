//! What clients send: the request bodies as the service reads them (unknown fields are refused,
//! 400) and the query parameters of the routes that take some. The OpenAPI document shows these
//! very types, and the project's own clients send them (hence `Serialize`).

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::{IntoParams, ToSchema};

use crate::domain::{Image, MessageMode};

/// `POST /api/conversations`. `text` may be empty only when `images` or a `command` are given.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    /// The first message; it starts the first turn. Not blank, unless images or a `command`
    /// are given: then it may be left out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schema(pattern = "\\S")]
    pub text: String,
    /// A repository command (`GET /api/commands` lists them for `cwd`) to send instead of
    /// `text`: its prompt, with `arguments` filled in, is the first message. Its `agent` and
    /// `model` apply unless this request names its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The command's arguments (`$ARGUMENTS`, `$1` … `$9` in its prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// A configured agent; default: the configured `default_agent`.
    #[serde(default)]
    pub agent: Option<String>,
    /// A configured model; default: the agent's model.
    #[serde(default)]
    pub model: Option<String>,
    /// An absolute path to an existing directory; default: the service's working directory.
    #[serde(default)]
    #[schema(pattern = "^/")]
    pub cwd: Option<String>,
    #[serde(default)]
    #[schema(value_type = Vec<ImageInput>, max_items = 20)]
    pub images: Vec<Image>,
    /// MCP servers for this conversation only, by name (the shape of a config file's
    /// `[mcp.<name>]`; values are taken as written, `${VAR}` is not expanded). They are stored
    /// with the conversation (and go with its forks); `env` and `headers` values are never
    /// shown back. A child server runs in the conversation's `cwd` unless it names its own.
    /// The conversation's agents use them beside their configured ones; one of the same name
    /// as a configured server takes its place here. At most 16.
    #[serde(default)]
    pub mcp: std::collections::BTreeMap<String, crate::config::McpServerSpec>,
    /// The conversation's own spending limits; each given one takes the place of the agent's.
    /// `max_cost` needs a `price` on the model (and on its fallbacks).
    #[serde(default)]
    pub budget: crate::domain::Budget,
}

/// The image types the providers accept (OpenAI, Anthropic): the same four everywhere.
pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/// At most this many images in one message (Anthropic takes 100 per request in all, and a
/// message is one part of a request). The schemas' `max_items` say the same.
pub const MAX_IMAGES: usize = 20;

/// `POST /api/conversations/{id}/messages`. `text` may be empty only when `images` or a
/// `command` are given.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    /// The message. Not blank, unless images or a `command` are given: then it may be left
    /// out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schema(pattern = "\\S")]
    pub text: String,
    /// A repository command of the conversation's `cwd` to send instead of `text`: its
    /// prompt, with `arguments` filled in, is the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The command's arguments (`$ARGUMENTS`, `$1` … `$9` in its prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// What to do when a turn is running: join it (`steer`), wait for it (`queue`) or cut it
    /// short (`interrupt`).
    #[serde(default)]
    #[schema(default = "steer")]
    pub mode: MessageMode,
    /// The session to send to; default: the root session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Images, inline as base64 `data` or by `url`.
    #[serde(default)]
    #[schema(value_type = Vec<ImageInput>, max_items = 20)]
    pub images: Vec<Image>,
}

/// `PATCH /api/conversations/{id}`: only the given fields change.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationPatch {
    /// A new title (at most 200 characters, at least one visible); sets `title_custom`. Line
    /// breaks and other control characters become spaces, and the ends are trimmed.
    #[serde(default)]
    #[schema(pattern = "[^\\s\\x00-\\x1F\\x7F-\\x9F]", max_length = 200)]
    pub title: Option<String>,
    #[serde(default)]
    pub archived: Option<bool>,
    /// Switches the conversation to another configured model.
    #[serde(default)]
    pub model: Option<String>,
    /// Switches the root agent to another configured agent (its tools, permissions and
    /// instructions) from the next turn; the model stays unless `model` is given too.
    /// Refused while the root agent works.
    #[serde(default)]
    pub agent: Option<String>,
    /// Repoints a moved conversation to an existing absolute directory.
    #[serde(default)]
    #[schema(pattern = "^/")]
    pub cwd: Option<String>,
    /// The conversation's new spending limits, in place of all the old ones (`{}` leaves only
    /// the agent's). A running turn checks them before its next model call.
    #[serde(default)]
    pub budget: Option<crate::domain::Budget>,
}

/// `PATCH /api/conversations/{id}/pending/{message_id}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PendingPatch {
    /// The new text of the waiting message (not blank).
    #[serde(default)]
    #[schema(pattern = "\\S")]
    pub text: Option<String>,
    /// `steer` moves a queued message into the running turn; `interrupt` cuts in.
    #[serde(default)]
    pub mode: Option<MessageMode>,
}

/// `POST /api/conversations/{id}/interrupt`; an empty body means the root session.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InterruptRequest {
    /// The session whose turn to interrupt; default: the root session.
    pub session_id: Option<String>,
}

/// `POST /api/conversations/{id}/retry`; an empty body means the root session.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    /// The session whose failed turn to run again; default: the root session.
    pub session_id: Option<String>,
}

/// `POST /api/conversations/{id}/fork`; an empty body is `{}`.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// Also make a copy of the working tree as it is now, in a new directory (a linked git
    /// worktree when the directory is in a git repository with a commit, else a plain copy),
    /// and run the fork there, so both can go on without touching each other's files.
    /// Refused with 409 while a turn runs in the working directory.
    #[serde(default)]
    pub worktree: bool,
}

/// `POST /api/conversations/{id}/rewind`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RewindRequest {
    /// A `user_message` item of the root session: the copy stops just before it.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,100}$")]
    pub message_id: String,
    /// Also put back the files this conversation changed since that message's turn, as they
    /// were just before it (only those paths). Refused with 409 while a turn runs in the
    /// working directory.
    #[serde(default)]
    pub restore_files: bool,
    /// With `restore_files`: overwrite paths changed since by someone else (the user, another
    /// conversation) too, instead of keeping them as conflicts.
    #[serde(default)]
    pub force: bool,
    /// With `restore_files`: only answer what would be restored and which paths are
    /// conflicts; nothing is stored or changed (`conversation` is null).
    #[serde(default)]
    pub dry_run: bool,
}

/// `POST /api/conversations/{id}/restores/{restore_id}/undo`; an empty body is `{}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoRestoreRequest {
    /// Overwrite paths changed since the restore too, instead of keeping them as conflicts.
    #[serde(default)]
    pub force: bool,
}

/// `{}`: the operation takes no parameters (the body of `fork` and `compact`, which may also
/// be absent).
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyRequest {}

/// An image sent with a message: its `media_type` and exactly one of `data` (base64) or
/// `url`. The service reads images as [`Image`], where both are optional in form (that is how
/// they are stored), and refuses any other combination while validating the message; this
/// schema states that rule, which a derived schema of `Image` cannot.
pub struct ImageInput;

impl utoipa::PartialSchema for ImageInput {
    fn schema() -> RefOr<Schema> {
        let media_type = || {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(IMAGE_MEDIA_TYPES))
                .description(Some("The image's type: one the models accept."))
        };
        let data = ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(4))
            .content_encoding("base64")
            // Canonical base64 only: the unused bits of the last character are zero.
            .pattern(Some(
                "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$",
            ))
            .description(Some(
                "The image's bytes, base64 (standard alphabet, padded, canonical).",
            ));
        let url = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(
                "^(https://[^\\x00-\\x1F\\x7F-\\x9F]+|data:image/(png|jpeg|gif|webp);base64,(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?)$",
            ))
            .description(Some(
                "Where the model fetches the image (`https:`), or the image itself (`data:`).",
            ));
        let with = |field: &str, property: ObjectBuilder| {
            ObjectBuilder::new()
                .property("media_type", media_type())
                .property(field, property)
                .required("media_type")
                .required(field)
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        };
        OneOfBuilder::new()
            .item(with("data", data))
            .item(with("url", url))
            .description(Some(
                "An image: `media_type` and exactly one of `data` (base64) or `url`.",
            ))
            .into()
    }
}

impl ToSchema for ImageInput {}

/// The query of `GET /api/conversations`. An unknown parameter is refused, so that a
/// misspelled one (`limt=5`) gets a 400 instead of being silently ignored; `access_token` is
/// the one exception.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListConversationsQuery {
    /// Which conversations: active (`false`), archived (`true`) or `all`.
    // Read as text and parsed with `ArchivedFilter::parse`, so that a wrong value is refused
    // with a sentence naming the three choices.
    #[param(inline, value_type = Option<ArchivedFilter>, default = "false")]
    pub archived: Option<String>,
    /// Searches titles and message text: conversations holding every word (at most 32
    /// different words; no NUL character).
    #[param(pattern = "^[^\\x00]*$")]
    pub q: Option<String>,
    #[param(default = 50, minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page (empty: the first page).
    #[param(pattern = "^(-?[0-9]{1,18}[.].*)?$")]
    pub cursor: Option<String>,
    /// Checked by the security middleware (a browser's EventSource cannot send headers, so
    /// the UI passes the token in the query); accepted here only so that it is not an unknown
    /// parameter.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}

/// The `archived` parameter of `GET /api/conversations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
pub enum ArchivedFilter {
    #[serde(rename = "false")]
    Active,
    #[serde(rename = "true")]
    Archived,
    #[serde(rename = "all")]
    All,
}

impl ArchivedFilter {
    /// The filter a parameter value names; absent means `false` (the active conversations).
    pub fn parse(value: Option<&str>) -> Result<ArchivedFilter, String> {
        match value {
            None | Some("false") => Ok(ArchivedFilter::Active),
            Some("true") => Ok(ArchivedFilter::Archived),
            Some("all") => Ok(ArchivedFilter::All),
            Some(other) => Err(format!(
                "archived must be false, true or all, not `{other}`"
            )),
        }
    }
}

/// The query of `GET /api/conversations/{id}/items`: unknown parameters are refused as in
/// [`ListConversationsQuery`], except `access_token`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ItemsQuery {
    /// The session whose history to read; default: the root session.
    pub session: Option<String>,
    /// Only items with a larger `seq` (the `next_after_seq` of the previous page).
    // Signed as the document says (an int64): larger numbers are refused, not accepted.
    #[param(default = 0, minimum = 0, maximum = 9223372036854775807_i64)]
    pub after_seq: Option<i64>,
    // Read wider than the document's int32, so that any too large number gets the range
    // message rather than the parser's.
    #[param(value_type = Option<u32>, default = 200, minimum = 1, maximum = 2000)]
    pub limit: Option<usize>,
    /// Checked by the security middleware, ignored here.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}

/// The query of `GET /api/conversations/{id}/turns`: unknown parameters are refused as in
/// [`ListConversationsQuery`], except `access_token`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TurnsQuery {
    /// The session whose turns to list; default: the root session.
    pub session: Option<String>,
    /// Only turns that started after this one (the `next_after` of the previous page).
    pub after: Option<String>,
    #[param(value_type = Option<u32>, default = 200, minimum = 1, maximum = 2000)]
    pub limit: Option<usize>,
    /// Checked by the security middleware, ignored here.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}

/// The query of `GET /api/webhooks/deliveries`: unknown parameters are refused as in
/// [`ListConversationsQuery`], except `access_token`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WebhookDeliveriesQuery {
    /// Only the deliveries of this status; default: all.
    #[param(inline)]
    pub status: Option<crate::api::responses::WebhookDeliveryStatus>,
    // Read wider than the document's int32, so that any too large number gets the range
    // message rather than the parser's.
    #[param(value_type = Option<u32>, default = 100, minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// Checked by the security middleware, ignored here.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}

/// The query of `GET /api/conversations/{id}/processes/{process_id}/output`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ProcessOutputQuery {
    /// The cursor of the last read (`next`); 0 or absent: from the start.
    #[param(value_type = Option<u64>, minimum = 0)]
    pub since: Option<u64>,
    /// Wait up to this many seconds (at most 60) for new output or the end.
    #[param(value_type = Option<f64>, minimum = 0, maximum = 60)]
    pub wait_s: Option<f64>,
    /// Checked by the security middleware, ignored here.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}

/// The query of `GET /api/skills`, `/api/commands` and `/api/agents`: the working directory
/// whose files (and whose repository's) to read.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CwdQuery {
    /// An absolute path to an existing directory; default: the service's working directory.
    #[param(pattern = "^/")]
    pub cwd: Option<String>,
    /// Checked by the security middleware, ignored here.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}

/// What an export is written as.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    Markdown,
}

/// The query of `GET /api/conversations/{id}/export`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// The only format: `markdown` (the default).
    #[param(inline)]
    pub format: Option<ExportFormat>,
    /// Checked by the security middleware, ignored here.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}

/// The query of `GET /api/conversations/{id}/turns/{turn_id}/changes`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ChangesQuery {
    /// Only what this tool call (an item of the turn) changed, from just before it to just
    /// after it.
    pub item_id: Option<String>,
    /// Also each text file's whole content before and after (`old_text`, `new_text`), for
    /// clients that show a diff of their own. Counted against the same size cap.
    pub contents: Option<bool>,
    /// Checked by the security middleware, ignored here.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}

/// The query of `GET /api/conversations/{id}/usage`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// The session whose context to measure; default: the root session.
    pub session: Option<String>,
    /// Checked by the security middleware, ignored here.
    #[serde(rename = "access_token")]
    #[param(ignore)]
    _access_token: Option<IgnoredAny>,
}
