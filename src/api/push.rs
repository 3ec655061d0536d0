//! Push notifications on the wire: the service's public key, and the subscriptions browsers
//! hand over (`PushSubscription.toJSON()`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::Timestamp;

/// `GET /api/push/key`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PushKey {
    /// The VAPID public key, base64url (a 65-byte uncompressed P-256 point): the
    /// `applicationServerKey` of `pushManager.subscribe`.
    pub public_key: String,
}

/// `POST /api/push/subscriptions`: what `PushSubscription.toJSON()` gives.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct NewSubscription {
    /// The push service's URL for this browser: https (plain http only on loopback), at most
    /// 2,048 characters.
    #[schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://", max_length = 2048)]
    pub endpoint: String,
    /// Ignored.
    #[serde(default, rename = "expirationTime")]
    #[schema(value_type = Option<f64>)]
    pub expiration_time: Option<serde_json::Value>,
    pub keys: NewSubscriptionKeys,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct NewSubscriptionKeys {
    /// The browser's P-256 public key (65 bytes, uncompressed), base64url.
    #[schema(pattern = "^B[A-P][A-Za-z0-9_-]{84}[AEIMQUYcgkosw048]=?$")]
    pub p256dh: String,
    /// Its 16-byte authentication secret, base64url.
    #[schema(pattern = "^[A-Za-z0-9_-]{21}[AQgw](==)?$")]
    pub auth: String,
}

/// A subscription kept: `201` when new, `200` when the endpoint was known.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Subscribed {
    /// `ps_…`.
    pub id: String,
}

/// A subscription as listed: where it goes, not its keys.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionInfo {
    pub id: String,
    /// The push service (`https://fcm.googleapis.com`, …), not the whole endpoint.
    pub push_service: String,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub created_at: Timestamp,
}

/// `GET /api/push/subscriptions`: this device's subscriptions.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionList {
    pub subscriptions: Vec<SubscriptionInfo>,
}
