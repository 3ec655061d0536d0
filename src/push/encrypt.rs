//! A push message encrypted for one browser (RFC 8291, with the `aes128gcm` content coding of
//! RFC 8188). The push service carries the message but cannot read it: the key comes from an
//! ECDH agreement between a key pair made for this message alone and the subscription's
//! `p256dh` key, mixed with the subscription's `auth` secret, which only the browser knows.
//!
//! The body is one record: a header (salt, record size, the sender's public key) and the
//! plaintext with its last-record delimiter, sealed with AES-128-GCM.

use ring::rand::SecureRandom as _;
use ring::{aead, agreement, hkdf, rand};

use super::{decode, encode};

/// An uncompressed P-256 point: 0x04, then x and y.
const POINT_BYTES: usize = 65;
/// The `auth` secret of a subscription.
const AUTH_BYTES: usize = 16;
const SALT_BYTES: usize = 16;
/// The record size written in the header: the whole message fits one record of this size.
const RECORD_SIZE: u32 = 4096;
/// salt | rs (4) | idlen (1) | keyid (the sender's public key).
const HEADER_BYTES: usize = SALT_BYTES + 4 + 1 + POINT_BYTES;
/// The delimiter after the plaintext of the last (here: only) record.
const LAST_RECORD: u8 = 0x02;
const TAG_BYTES: usize = 16;
/// The body a push service must accept (RFC 8030 §7.2); larger ones some refuse.
const MAX_BODY: usize = 4096;

/// The largest plaintext one message carries: what is left of 4,096 bytes of body after the
/// header, the delimiter and the tag.
pub const MAX_PLAINTEXT: usize = MAX_BODY - HEADER_BYTES - 1 - TAG_BYTES;

/// Why a subscription's keys cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("keys.{field} is not base64url: {reason}")]
    NotBase64 { field: &'static str, reason: String },
    #[error("keys.{field} has {got} bytes; it should have {expected}")]
    WrongLength {
        field: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("keys.p256dh is not an uncompressed P-256 point (it starts with {0:#04x}, not 0x04)")]
    NotUncompressed(u8),
    #[error("keys.p256dh is not a point on the P-256 curve")]
    NotOnCurve,
    #[error("the system's random generator failed, so keys.p256dh could not be checked")]
    NoRandom,
}

/// Why a message was not encrypted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncryptError {
    #[error("the payload has {got} bytes; a push message carries at most {max}")]
    TooLarge { got: usize, max: usize },
    #[error("the system's random generator failed")]
    NoRandom,
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// A subscription's keys, decoded and checked: the browser's public key `p256dh` (a point on
/// P-256) and its `auth` secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientKeys {
    p256dh: [u8; POINT_BYTES],
    auth: [u8; AUTH_BYTES],
}

impl std::fmt::Debug for ClientKeys {
    /// The public key only: the auth secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientKeys")
            .field("p256dh", &encode(&self.p256dh))
            .finish_non_exhaustive()
    }
}

impl ClientKeys {
    /// Decodes the `keys` of a `PushSubscription` (base64url, padded or not) and checks them:
    /// lengths, the point's form, and that it lies on the curve (by an agreement with a
    /// throwaway key, which fails for any other point).
    pub fn decode(p256dh: &str, auth: &str) -> Result<Self, KeyError> {
        let p256dh: [u8; POINT_BYTES] = decode_exact("p256dh", p256dh)?;
        let auth: [u8; AUTH_BYTES] = decode_exact("auth", auth)?;
        if p256dh[0] != 0x04 {
            return Err(KeyError::NotUncompressed(p256dh[0]));
        }
        let throwaway = agreement::EphemeralPrivateKey::generate(
            &agreement::ECDH_P256,
            &rand::SystemRandom::new(),
        )
        .map_err(|_| KeyError::NoRandom)?;
        let peer = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, &p256dh);
        agreement::agree_ephemeral(throwaway, &peer, |_| ()).map_err(|_| KeyError::NotOnCurve)?;
        Ok(ClientKeys { p256dh, auth })
    }
}

fn decode_exact<const N: usize>(field: &'static str, text: &str) -> Result<[u8; N], KeyError> {
    let bytes = decode(text.trim()).map_err(|error| KeyError::NotBase64 {
        field,
        reason: error.to_string(),
    })?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| KeyError::WrongLength {
        field,
        expected: N,
        got: bytes.len(),
    })
}

/// `plaintext` encrypted for the browser holding `keys`: the body of the POST, to be sent with
/// `Content-Encoding: aes128gcm`. A fresh key pair and salt make every message different.
pub fn encrypt(keys: &ClientKeys, plaintext: &[u8]) -> Result<Vec<u8>, EncryptError> {
    let random = rand::SystemRandom::new();
    let mut salt = [0u8; SALT_BYTES];
    random.fill(&mut salt).map_err(|_| EncryptError::NoRandom)?;
    let sender = agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &random)
        .map_err(|_| EncryptError::NoRandom)?;
    encrypt_with(keys, plaintext, sender, &salt)
}

/// The encryption with the sender's key and salt given, so a test can reproduce RFC 8291's
/// worked example byte for byte.
fn encrypt_with(
    keys: &ClientKeys,
    plaintext: &[u8],
    sender: agreement::EphemeralPrivateKey,
    salt: &[u8; SALT_BYTES],
) -> Result<Vec<u8>, EncryptError> {
    if plaintext.len() > MAX_PLAINTEXT {
        return Err(EncryptError::TooLarge {
            got: plaintext.len(),
            max: MAX_PLAINTEXT,
        });
    }
    let sender_public = sender
        .compute_public_key()
        .expect("a generated key has a public key");
    let sender_public = sender_public.as_ref();
    // RFC 8291 §3.3: IKM = HKDF(auth, ECDH secret, "WebPush: info\0" | ua_public | as_public).
    let peer = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, &keys.p256dh);
    let ikm: [u8; 32] = agreement::agree_ephemeral(sender, &peer, |shared| {
        hkdf_sha256(
            &keys.auth,
            shared,
            &[b"WebPush: info\0", &keys.p256dh, sender_public],
        )
    })
    .map_err(|_| KeyError::NotOnCurve)?;
    // RFC 8188 §2.2 and §2.3: the content key and the nonce, from the salt.
    let cek: [u8; 16] = hkdf_sha256(salt, &ikm, &[b"Content-Encoding: aes128gcm\0"]);
    let nonce: [u8; aead::NONCE_LEN] = hkdf_sha256(salt, &ikm, &[b"Content-Encoding: nonce\0"]);

    let mut body = Vec::with_capacity(HEADER_BYTES + plaintext.len() + 1 + TAG_BYTES);
    body.extend_from_slice(salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(POINT_BYTES as u8);
    body.extend_from_slice(sender_public);
    body.extend_from_slice(plaintext);
    body.push(LAST_RECORD);
    let key =
        aead::UnboundKey::new(&aead::AES_128_GCM, &cek).expect("a 16-byte key is an AES-128 key");
    // The first record's nonce is the derived nonce itself (sequence number 0).
    let tag = aead::LessSafeKey::new(key)
        .seal_in_place_separate_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::empty(),
            &mut body[HEADER_BYTES..],
        )
        .expect("one record is far below AES-GCM's limit");
    body.extend_from_slice(tag.as_ref());
    Ok(body)
}

/// HKDF-SHA-256 (RFC 5869) of `ikm` with `salt`, expanded with `info` to `N` bytes.
fn hkdf_sha256<const N: usize>(salt: &[u8], ikm: &[u8], info: &[&[u8]]) -> [u8; N] {
    struct Length(usize);
    impl hkdf::KeyType for Length {
        fn len(&self) -> usize {
            self.0
        }
    }
    let mut out = [0u8; N];
    hkdf::Salt::new(hkdf::HKDF_SHA256, salt)
        .extract(ikm)
        .expand(info, Length(N))
        .and_then(|okm| okm.fill(&mut out))
        .expect("HKDF-SHA-256 gives up to 8,160 bytes");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8291, Appendix A.
    const PLAINTEXT: &str = "When I grow up, I want to be a watermelon";
    const AS_PRIVATE: &str = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw";
    const AS_PUBLIC: &str =
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8";
    const UA_PUBLIC: &str =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
    const SALT: &str = "DGv6ra1nlYgDCS1FRnbzlw";
    const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";
    const BODY: &str = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN";

    /// The RFC's sender key. ring makes an ephemeral key only from its random generator, so
    /// the generator is one that returns the RFC's private scalar (ring's own known-answer
    /// tests do the same; the type is kept for them, hence deprecated).
    #[allow(deprecated)]
    fn rfc_sender_key() -> agreement::EphemeralPrivateKey {
        let private = decode(AS_PRIVATE).unwrap();
        let fixed = ring::test::rand::FixedSliceRandom { bytes: &private };
        agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &fixed).unwrap()
    }

    fn rfc_keys() -> ClientKeys {
        ClientKeys::decode(UA_PUBLIC, AUTH).unwrap()
    }

    #[test]
    fn reproduces_the_worked_example_of_rfc_8291() {
        let sender = rfc_sender_key();
        assert_eq!(
            encode(sender.compute_public_key().unwrap().as_ref()),
            AS_PUBLIC,
            "the sender key is the RFC's"
        );
        let salt: [u8; 16] = decode(SALT).unwrap().try_into().unwrap();
        let body = encrypt_with(&rfc_keys(), PLAINTEXT.as_bytes(), sender, &salt).unwrap();
        assert_eq!(encode(&body), BODY);
    }

    #[test]
    fn a_message_has_the_header_and_one_record_and_is_new_each_time() {
        let keys = rfc_keys();
        let first = encrypt(&keys, b"hello").unwrap();
        let second = encrypt(&keys, b"hello").unwrap();
        assert_eq!(first.len(), HEADER_BYTES + 5 + 1 + TAG_BYTES);
        assert_eq!(&first[16..20], &4096u32.to_be_bytes(), "rs");
        assert_eq!(first[20], 65, "idlen");
        assert_eq!(first[21], 0x04, "keyid is an uncompressed point");
        assert_ne!(first[..16], second[..16], "a fresh salt");
        assert_ne!(first[21..86], second[21..86], "a fresh sender key");
    }

    #[test]
    fn the_largest_payload_fills_4096_bytes_and_one_more_is_refused() {
        let keys = rfc_keys();
        assert_eq!(MAX_PLAINTEXT, 3993);
        let body = encrypt(&keys, &[b'x'; MAX_PLAINTEXT]).unwrap();
        assert_eq!(body.len(), 4096);
        let error = encrypt(&keys, &[b'x'; MAX_PLAINTEXT + 1]).unwrap_err();
        assert_eq!(
            error,
            EncryptError::TooLarge {
                got: 3994,
                max: 3993
            }
        );
        assert_eq!(
            error.to_string(),
            "the payload has 3994 bytes; a push message carries at most 3993"
        );
    }

    #[test]
    fn keys_are_read_with_or_without_padding() {
        let padded = ClientKeys::decode(&format!("{UA_PUBLIC}="), &format!("{AUTH}==")).unwrap();
        assert_eq!(padded, rfc_keys());
    }

    #[test]
    fn bad_keys_are_refused_saying_why() {
        let cases = [
            (
                ClientKeys::decode("not base64!", AUTH),
                "keys.p256dh is not base64url: Invalid symbol 32, offset 3.",
            ),
            (
                ClientKeys::decode(UA_PUBLIC, "a+b/"),
                "keys.auth is not base64url: Invalid symbol 43, offset 1.",
            ),
            (
                ClientKeys::decode(&encode(&[4u8; 33]), AUTH),
                "keys.p256dh has 33 bytes; it should have 65",
            ),
            (
                ClientKeys::decode(UA_PUBLIC, &encode(&[1u8; 15])),
                "keys.auth has 15 bytes; it should have 16",
            ),
            (
                ClientKeys::decode(&encode(&[2u8; 65]), AUTH),
                "keys.p256dh is not an uncompressed P-256 point (it starts with 0x02, not 0x04)",
            ),
        ];
        for (result, expected) in cases {
            assert_eq!(result.unwrap_err().to_string(), expected);
        }
        // The RFC's point with one coordinate changed is off the curve.
        let mut off_curve = decode(UA_PUBLIC).unwrap();
        off_curve[64] ^= 1;
        assert_eq!(
            ClientKeys::decode(&encode(&off_curve), AUTH).unwrap_err(),
            KeyError::NotOnCurve
        );
    }

    #[test]
    fn the_auth_secret_stays_out_of_debug_output() {
        let shown = format!("{:?}", rfc_keys());
        assert!(shown.contains(UA_PUBLIC), "{shown}");
        assert!(!shown.contains(AUTH), "{shown}");
    }
}
