//! Cluster mode at the HTTP edge: a request for a conversation another instance owns is
//! forwarded there (`cluster::forward`), so a client never needs to know which instance owns
//! what. A read of a conversation nobody owns is answered here from its files; anything else
//! takes the conversation for this instance when it is free. An answer to an approval goes
//! to the instance that runs its conversation (the approval's id names it), and the list of
//! pending approvals is gathered from every instance. Embedded, this passes every request
//! through.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::Response;

use super::state::AppState;
use crate::api::approvals::{Approval, ApprovalFilter, ApprovalList, approval_conversation};
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
    let (id, writes) = if let Some(id) = conversation_id(path) {
        // Following the events needs the conversation live somewhere: it counts as taking it.
        let writes = request.method() != Method::GET || path.ends_with("/events");
        (id.to_owned(), writes)
    } else if let Some(id) = approval_path(path).and_then(approval_conversation) {
        // A pending approval lives where its turn runs; one nobody owns is answered (404 or
        // 409) here, without taking its conversation.
        (id, false)
    } else {
        return next.run(request).await;
    };
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

/// The approval of `/api/approvals/{id}`.
fn approval_path(path: &str) -> Option<&str> {
    let id = path.strip_prefix("/api/approvals/")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// The pending (or, with `status=all`, recent) approvals the other instances hold, asked with
/// the client's own credentials; an instance that does not answer in time is left out (and
/// logged): its approvals show once it answers again.
pub async fn other_instances_approvals(
    cluster: &crate::cluster::Cluster,
    headers: &HeaderMap,
    status: ApprovalFilter,
) -> Vec<Approval> {
    let addrs = match cluster.other_instances().await {
        Ok(addrs) => addrs,
        Err(error) => {
            tracing::warn!(%error, "cannot list the other instances for their approvals");
            return Vec::new();
        }
    };
    let status = match status {
        ApprovalFilter::Pending => "pending",
        ApprovalFilter::All => "all",
    };
    let asks = addrs.into_iter().map(|addr| async move {
        let mut request = cluster
            .http()
            .get(format!("http://{addr}/api/approvals?status={status}"))
            .timeout(OTHERS_TIMEOUT)
            .header(FORWARDED.as_str(), cluster.instance_id());
        if let Some(authorization) = headers.get(header::AUTHORIZATION) {
            request = request.header(header::AUTHORIZATION.as_str(), authorization.as_bytes());
        }
        let answer = match request.send().await {
            Ok(answer) if answer.status().is_success() => answer.json::<ApprovalList>().await,
            Ok(answer) => {
                tracing::warn!(%addr, status = %answer.status(), "an instance refused to list its approvals");
                return Vec::new();
            }
            Err(error) => Err(error),
        };
        answer.map(|list| list.approvals).unwrap_or_else(|error| {
            tracing::warn!(%addr, %error, "an instance did not list its approvals");
            Vec::new()
        })
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// How long another instance may take to list its approvals.
const OTHERS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

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

    #[test]
    fn an_approval_id_names_its_conversation() {
        let id = crate::api::approvals::new_approval_id("c_0123abcd");
        assert_eq!(
            approval_path(&format!("/api/approvals/{id}")),
            Some(id.as_str())
        );
        assert_eq!(approval_conversation(&id).as_deref(), Some("c_0123abcd"));
        assert_eq!(approval_path("/api/approvals"), None);
        assert_eq!(approval_path("/api/approvals/a/b"), None);
        for id in ["ap_0", "ap__x", "ap_x_", "r_1_2", "ap_a/b_c"] {
            assert_eq!(approval_conversation(id), None, "{id}");
        }
    }
}
