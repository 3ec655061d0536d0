//! The service's VAPID key (RFC 8292): the P-256 key pair a push service knows the service by.
//! A browser subscribes naming the public key (`applicationServerKey`), and its push service
//! then takes only messages signed with the matching private key. The pair is made at first
//! use and kept in the data directory: a new key would orphan every subscription, so the file
//! is written whole or not at all, and two processes starting at once agree on one key.

use std::fs;
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use ring::rand::{SecureRandom as _, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};

use super::encode;

/// The key's file in the data directory: its PKCS#8 document, readable by the owner only.
pub const KEY_FILE: &str = "push-vapid-key";

/// How long a signed token holds. RFC 8292 allows at most 24 hours; push services that
/// measure from their own clock take 12 hours with room to spare.
pub const TOKEN_LIFETIME_S: u64 = 12 * 60 * 60;

/// ES256 with the signature as r‖s, the form JWS takes (not ASN.1).
static ALGORITHM: &signature::EcdsaSigningAlgorithm = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;

/// A PKCS#8 document of a P-256 key is about 140 bytes; a file far larger is not one.
const MOST_FILE_BYTES: u64 = 4096;

/// Why a request could not be signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VapidError {
    #[error("the endpoint {0:?} is not a URL with an origin")]
    Endpoint(String),
    #[error("the VAPID subject {0:?} is neither a mailto: nor an https: URL")]
    Subject(String),
    #[error("the VAPID token could not be signed")]
    Sign,
}

/// The service's VAPID key pair.
pub struct VapidKey {
    pair: EcdsaKeyPair,
    /// The public key as browsers and push services take it: the uncompressed point
    /// (65 bytes), base64url without padding.
    public: String,
}

impl std::fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VapidKey")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl VapidKey {
    /// The key kept in `data_dir`, made there first if there is none (or the file is not a
    /// whole key, which is replaced). It is written under a temporary name, fsynced, then
    /// hard-linked into place: a crash leaves no half file, and of two processes making it at
    /// once, the one that links second takes the first one's key.
    pub fn load_or_create(data_dir: &Path) -> io::Result<VapidKey> {
        let path = data_dir.join(KEY_FILE);
        if let Some(key) = read_key(&path)? {
            return Ok(key);
        }
        match fs::remove_file(&path) {
            Ok(()) => tracing::warn!(
                "{} was not a whole VAPID key; made a new one (browsers subscribed with the old \
                 one must subscribe again)",
                path.display()
            ),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let random = SystemRandom::new();
        let document = EcdsaKeyPair::generate_pkcs8(ALGORITHM, &random)
            .map_err(|_| io::Error::other("could not make a VAPID key"))?;
        let mut tag = [0u8; 8];
        random
            .fill(&mut tag)
            .map_err(|_| io::Error::other("the system's random generator failed"))?;
        // A name no other process or thread uses: each links its own whole file or none.
        let temporary = data_dir.join(format!(
            "{KEY_FILE}.{}.{}.tmp",
            std::process::id(),
            u64::from_le_bytes(tag)
        ));
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        let written = file
            .write_all(document.as_ref())
            .and_then(|()| file.sync_all());
        drop(file);
        let linked = written.and_then(|()| fs::hard_link(&temporary, &path));
        fs::remove_file(&temporary)?;
        match linked {
            Ok(()) => {
                fs::File::open(data_dir)?.sync_all()?;
                parse(document.as_ref())
                    .ok_or_else(|| io::Error::other("ring refused the key it made"))
            }
            // Another process made it first: theirs counts.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => read_key(&path)?
                .ok_or_else(|| io::Error::other(format!("{} is not a whole key", path.display()))),
            Err(error) => Err(error),
        }
    }

    /// The public key as a browser takes it for `applicationServerKey`: the uncompressed
    /// point, base64url without padding.
    pub fn public_key_base64url(&self) -> &str {
        &self.public
    }

    /// The `Authorization` header of a POST to `endpoint`: `vapid t=<JWT>, k=<public key>`.
    /// The token (ES256) names the endpoint's origin as its audience, `subject` as the
    /// contact a push service may write to (`mailto:` or `https:`), and expires
    /// [`TOKEN_LIFETIME_S`] after `now_unix`.
    pub fn authorization(
        &self,
        endpoint: &str,
        subject: &str,
        now_unix: u64,
    ) -> Result<String, VapidError> {
        let origin = reqwest::Url::parse(endpoint)
            .ok()
            .map(|url| url.origin())
            .filter(|origin| origin.is_tuple())
            .ok_or_else(|| VapidError::Endpoint(endpoint.to_owned()))?;
        if !(subject.starts_with("mailto:") || subject.starts_with("https://")) {
            return Err(VapidError::Subject(subject.to_owned()));
        }
        let header = encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({
            "aud": origin.ascii_serialization(),
            "exp": now_unix + TOKEN_LIFETIME_S,
            "sub": subject,
        });
        let signed = format!("{header}.{}", encode(claims.to_string().as_bytes()));
        let signature = self
            .pair
            .sign(&SystemRandom::new(), signed.as_bytes())
            .map_err(|_| VapidError::Sign)?;
        Ok(format!(
            "vapid t={signed}.{}, k={}",
            encode(signature.as_ref()),
            self.public
        ))
    }
}

/// The key in `path`, if it holds a whole one. A file others may read is made private.
fn read_key(path: &Path) -> io::Result<Option<VapidKey>> {
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    }
    let mut document = Vec::new();
    file.take(MOST_FILE_BYTES).read_to_end(&mut document)?;
    Ok(parse(&document))
}

fn parse(document: &[u8]) -> Option<VapidKey> {
    let pair = EcdsaKeyPair::from_pkcs8(ALGORITHM, document, &SystemRandom::new()).ok()?;
    let public = encode(pair.public_key().as_ref());
    Some(VapidKey { pair, public })
}

#[cfg(test)]
mod tests {
    use super::super::decode;
    use super::*;

    const ENDPOINT: &str = "https://push.example.net:8443/wpush/v2/abc?x=1";
    const SUBJECT: &str = "mailto:ops@example.org";
    const NOW: u64 = 1_700_000_000;

    fn json_part(part: &str) -> serde_json::Value {
        serde_json::from_slice(&decode(part).unwrap()).unwrap()
    }

    #[test]
    fn the_key_is_made_once_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let made = VapidKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let public = decode(made.public_key_base64url()).unwrap();
        assert_eq!(public.len(), 65);
        assert_eq!(public[0], 0x04);

        let again = VapidKey::load_or_create(dir.path()).unwrap();
        assert_eq!(again.public_key_base64url(), made.public_key_base64url());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, [KEY_FILE], "no temporary file is left");
    }

    #[test]
    fn a_key_file_others_may_read_is_made_private() {
        let dir = tempfile::tempdir().unwrap();
        let made = VapidKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let read = VapidKey::load_or_create(dir.path()).unwrap();
        assert_eq!(read.public_key_base64url(), made.public_key_base64url());
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_file_that_is_not_a_whole_key_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let made = VapidKey::load_or_create(dir.path()).unwrap();
        let document = fs::read(&path).unwrap();
        fs::write(&path, &document[..document.len() / 2]).unwrap();
        let remade = VapidKey::load_or_create(dir.path()).unwrap();
        assert_ne!(remade.public_key_base64url(), made.public_key_base64url());
        let kept = VapidKey::load_or_create(dir.path()).unwrap();
        assert_eq!(kept.public_key_base64url(), remade.public_key_base64url());
    }

    #[test]
    fn threads_making_the_key_at_once_agree_on_one() {
        let dir = tempfile::tempdir().unwrap();
        let keys: Vec<String> = std::thread::scope(|scope| {
            let makers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| VapidKey::load_or_create(dir.path()).unwrap()))
                .collect();
            makers
                .into_iter()
                .map(|maker| maker.join().unwrap().public_key_base64url().to_owned())
                .collect()
        });
        assert!(keys.iter().all(|key| *key == keys[0]), "{keys:?}");
        let kept = VapidKey::load_or_create(dir.path()).unwrap();
        assert_eq!(kept.public_key_base64url(), keys[0]);
    }

    #[test]
    fn the_token_names_the_origin_and_expires_in_12_hours_and_its_signature_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let key = VapidKey::load_or_create(dir.path()).unwrap();
        let header = key.authorization(ENDPOINT, SUBJECT, NOW).unwrap();

        let rest = header.strip_prefix("vapid t=").unwrap();
        let (token, public) = rest.split_once(", k=").unwrap();
        assert_eq!(public, key.public_key_base64url());
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "{token}");
        assert_eq!(
            json_part(parts[0]),
            serde_json::json!({"typ": "JWT", "alg": "ES256"})
        );
        assert_eq!(
            json_part(parts[1]),
            serde_json::json!({
                "aud": "https://push.example.net:8443",
                "exp": NOW + 12 * 3600,
                "sub": SUBJECT,
            })
        );
        let signature = decode(parts[2]).unwrap();
        assert_eq!(signature.len(), 64, "r‖s, not ASN.1");
        let signed = format!("{}.{}", parts[0], parts[1]);
        let verifier = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            decode(public).unwrap(),
        );
        verifier.verify(signed.as_bytes(), &signature).unwrap();
        assert!(
            verifier.verify(b"something else", &signature).is_err(),
            "the check can fail"
        );
    }

    #[test]
    fn the_audience_leaves_out_a_default_port_and_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let key = VapidKey::load_or_create(dir.path()).unwrap();
        for (endpoint, audience) in [
            (
                "https://fcm.googleapis.com:443/fcm/send/x",
                "https://fcm.googleapis.com",
            ),
            ("http://127.0.0.1:9000/push/1", "http://127.0.0.1:9000"),
            ("https://[::1]/p", "https://[::1]"),
        ] {
            let header = key.authorization(endpoint, SUBJECT, NOW).unwrap();
            let token = header.strip_prefix("vapid t=").unwrap();
            let claims = json_part(token.split('.').nth(1).unwrap());
            assert_eq!(claims["aud"], audience, "{endpoint}");
        }
    }

    #[test]
    fn a_bad_endpoint_or_subject_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = VapidKey::load_or_create(dir.path()).unwrap();
        assert_eq!(
            key.authorization("not a url", SUBJECT, NOW).unwrap_err(),
            VapidError::Endpoint("not a url".into())
        );
        assert_eq!(
            key.authorization("data:text/plain,hi", SUBJECT, NOW)
                .unwrap_err()
                .to_string(),
            "the endpoint \"data:text/plain,hi\" is not a URL with an origin"
        );
        assert_eq!(
            key.authorization(ENDPOINT, "ops@example.org", NOW)
                .unwrap_err()
                .to_string(),
            "the VAPID subject \"ops@example.org\" is neither a mailto: nor an https: URL"
        );
    }
}
