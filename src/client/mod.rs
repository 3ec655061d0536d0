//! The terminal client (`openvaala chat`): a plain client of the public API, like
//! the web UI. `api.rs` speaks HTTP and SSE; `render.rs` turns events into terminal text;
//! `chat.rs` is the read–send–follow loop and its slash commands (`position.rs` keeps its
//! place in the stream, `agents.rs` draws `/agents`); `send.rs` is `openvaala send`, one
//! message from a script or an editor (`stream.rs` keeps its event stream across dropped
//! connections); `approval_prompt.rs` asks the user about a tool call
//! that waits for approval, for both.

pub mod agents;
pub mod api;
pub mod approval_prompt;
pub mod chat;
pub mod files;
pub mod position;
pub mod render;
pub mod send;
pub mod stream;
