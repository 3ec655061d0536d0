//! The terminal client (`openvaala chat`): a plain client of the public API, like
//! the web UI. `api.rs` speaks HTTP and SSE; `render.rs` turns events into terminal text;
//! `chat.rs` is the read–send–follow loop and its slash commands; `send.rs` is `openvaala
//! send`, one message from a script or an editor.

pub mod api;
pub mod chat;
pub mod render;
pub mod send;
