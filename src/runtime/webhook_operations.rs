//! `GET /api/webhooks/deliveries`: the notification webhooks' outbox as the API shows it.

use super::service::Runtime;
use crate::api::responses::{WebhookDelivery, WebhookDeliveryList, WebhookDeliveryStatus};
use crate::hooks::outbox::Status;

impl Runtime {
    /// The outbox's deliveries, newest first: of `status` if given, at most `limit`.
    pub fn webhook_deliveries(
        &self,
        status: Option<WebhookDeliveryStatus>,
        limit: usize,
    ) -> WebhookDeliveryList {
        let status = status.map(|status| match status {
            WebhookDeliveryStatus::Pending => Status::Pending,
            WebhookDeliveryStatus::Delivered => Status::Delivered,
            WebhookDeliveryStatus::Failed => Status::Failed,
        });
        let deliveries = self
            .shared
            .hooks
            .outbox
            .list(status, limit)
            .into_iter()
            .map(|delivery| WebhookDelivery {
                id: delivery.id,
                hook: delivery.hook,
                event: delivery.event,
                conversation_id: delivery.conversation_id,
                status: match delivery.state.status {
                    Status::Pending => WebhookDeliveryStatus::Pending,
                    Status::Delivered => WebhookDeliveryStatus::Delivered,
                    Status::Failed => WebhookDeliveryStatus::Failed,
                },
                attempts: delivery.state.attempts,
                created_at: delivery.created_at,
                last_attempt_at: delivery.state.last_attempt_at,
                next_attempt_at: delivery.state.next_attempt_at,
                last_error: delivery.state.last_error,
            })
            .collect();
        WebhookDeliveryList { deliveries }
    }
}
