//! Web Push: notifications sent to the browsers that subscribed (an approval waits, a turn
//! ended), through each browser's own push service. The service speaks the three standards a
//! push service takes: the message is POSTed to the subscription's endpoint (RFC 8030),
//! encrypted for that browser alone with the `aes128gcm` content coding (RFC 8291, RFC 8188),
//! and signed with the service's VAPID key (RFC 8292), which the browser named when it
//! subscribed. Everything runs on ring, the crypto the service's TLS already uses.
//!
//! - `vapid.rs` — the service's VAPID key (made once, kept in the data directory) and the
//!   `Authorization` header it signs.
//! - `encrypt.rs` — a subscription's keys, checked, and a payload encrypted for them.
//! - `subscription.rs` — the browser's `PushSubscription` JSON, and the checks before use.
//! - `send.rs` — one POST to a push service, and what its answer means for the subscription.
//!
//! - `store.rs` — the subscriptions, each tied to the device that made it.
//! - `dispatch.rs` — which list events become notifications, and for which devices.

pub mod dispatch;
mod encrypt;
mod send;
pub mod store;
mod subscription;
mod vapid;

pub use encrypt::{ClientKeys, EncryptError, KeyError, MAX_PLAINTEXT, encrypt};
pub use send::{SendOutcome, TIMEOUT, Urgency, client, send};
pub use subscription::{Subscription, SubscriptionError, SubscriptionKeys};
pub use vapid::{KEY_FILE, TOKEN_LIFETIME_S, VapidError, VapidKey};

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// base64url without padding, as browsers write keys and as JWTs are written.
fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// base64url read with or without padding: browsers leave it out, some libraries put it in.
fn decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(text)
}
