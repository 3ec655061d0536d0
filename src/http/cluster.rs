//! Cluster mode at the HTTP edge: a request for a conversation another instance owns is
//! forwarded there (`cluster::forward`), so a client never needs to know which instance owns
//! what. A read of a conversation nobody owns is answered here from its files; anything else
//! takes the conversation for this instance when it is free. Embedded, this passes every
//! request through.

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use crate::cluster::Route;
use crate::cluster::forward::{self, FORWARDED};

pub async fn route_to_owner(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(cluster) = state.runtime.cluster().cloned() else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    let Some(id) = conversation_id(path) else {
        return next.run(request).await;
    };
    // Following the events needs the conversation live somewhere: it counts as taking it.
    let writes = request.method() != Method::GET || path.ends_with("/events");
    let id = id.to_owned();
    match state.runtime.route(&id, writes).await {
        None | Some(Ok(Route::Local(_))) => next.run(request).await,
        Some(Ok(Route::Remote(_))) if request.headers().contains_key(FORWARDED) => {
            // The sender thought this instance owned it: ownership is moving. Never forward
            // twice.
            forward::unavailable("the conversation's owner is changing; retry in a moment")
        }
        Some(Ok(Route::Remote(addr))) => {
            forward::forward(cluster.http(), &addr, cluster.instance_id(), request).await
        }
        Some(Err(error)) => forward::unavailable(&error.to_string()),
    }
}

/// The conversation a path is about: `/api/conversations/{id}` and everything under it.
fn conversation_id(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/conversations/")?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversation_is_the_path_segment_after_conversations() {
        assert_eq!(conversation_id("/api/conversations/c_1"), Some("c_1"));
        assert_eq!(
            conversation_id("/api/conversations/c_1/events"),
            Some("c_1")
        );
        assert_eq!(conversation_id("/api/conversations"), None);
        assert_eq!(conversation_id("/api/conversations/"), None);
        assert_eq!(conversation_id("/api/health"), None);
    }
}
