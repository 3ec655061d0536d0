//! Named, revocable tokens and one-time pairing codes, kept in `tokens.json` in the data
//! directory (readable by the service's user only; the sandbox hides the data directory from
//! tools).
//!
//! Only a SHA-256 hash of each token is stored: a token is 256 random bits, so a hash cannot
//! be turned back, and checking one is a hash and a map lookup (no slow password hash needed).
//! The file is replaced whole (written under another name, flushed, renamed, the folder
//! flushed) under an exclusive lock on `tokens.lock`, so `openvaala token add` and the running
//! service can both change it. The service notices a change made by another process at the
//! next check (one `stat`), so a token revoked from the command line stops working at once.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// The file in the data directory.
pub const FILE: &str = "tokens.json";
const LOCK_FILE: &str = "tokens.lock";
/// What a token starts with, so one found in a log or a paste is recognisable.
pub const TOKEN_PREFIX: &str = "ovt_";
/// How long a pairing link works.
pub const PAIRING_VALID_S: i64 = 10 * 60;
/// `last_used_at` is written down at most this often per token: a request is never held up
/// by a write, and a minute is precise enough to tell a device that is still in use.
const LAST_USE_PRECISION_S: i64 = 60;
/// The longest name a token may have.
pub const MAX_NAME_CHARS: usize = 80;
/// More than this many live tokens is a mistake (a script minting one per run).
pub const MAX_TOKENS: usize = 1000;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Follow and list: `GET` requests and event streams only.
    Read,
    /// Everything a user can do.
    Full,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Full => "full",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        match text {
            "read" => Some(Scope::Read),
            "full" => Some(Scope::Full),
            _ => None,
        }
    }
}

/// How a token came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    /// Made by `openvaala token add` or `POST /api/tokens`, for a script or a client.
    Token,
    /// A browser signed in through a pairing link; its token lives in a cookie.
    Device,
}

impl TokenKind {
    pub fn name(self) -> &'static str {
        match self {
            TokenKind::Token => "token",
            TokenKind::Device => "device",
        }
    }
}

/// A token as kept: never the token itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub id: String,
    pub name: String,
    pub scope: Scope,
    pub kind: TokenKind,
    /// Lowercase hex SHA-256 of the token.
    pub hash: String,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub last_used_at: Option<DateTime<Utc>>,
}

impl TokenRecord {
    /// What an approval's `decided_by` and a rule's `created_by` record for this token:
    /// `token:NAME` or `device:NAME`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.kind.name(), self.name)
    }
}

/// A pairing link not used yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pairing {
    /// Lowercase hex SHA-256 of the code.
    hash: String,
    scope: Scope,
    expires_at: DateTime<Utc>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Kept {
    #[serde(default)]
    tokens: Vec<TokenRecord>,
    #[serde(default)]
    pairings: Vec<Pairing>,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{0}")]
    Invalid(String),
    #[error("no token {0}")]
    NotFound(String),
    /// `MAX_TOKENS` are kept already.
    #[error("{0}")]
    Full(String),
    #[error("this sign-in link was used already or has expired: run `openvaala pair` again")]
    PairingUsed,
    #[error("cannot use {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// A new token, shown once.
#[derive(Debug, Clone)]
pub struct Minted {
    pub record: TokenRecord,
    pub token: String,
}

/// The file's identity when last read: a change by another process changes one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Stamp {
    inode: u64,
    modified_ns: i128,
    len: u64,
}

#[derive(Debug, Default)]
struct Cache {
    stamp: Option<Stamp>,
    kept: Kept,
    by_hash: HashMap<String, usize>,
    /// Last use seen per token id, written to the file now and then.
    used: HashMap<String, DateTime<Utc>>,
}

impl Cache {
    fn set(&mut self, stamp: Option<Stamp>, kept: Kept) {
        self.by_hash = kept
            .tokens
            .iter()
            .enumerate()
            .map(|(at, record)| (record.hash.clone(), at))
            .collect();
        self.stamp = stamp;
        self.kept = kept;
    }
}

/// The tokens of one data directory. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
    cache: Arc<Mutex<Cache>>,
    /// Bumped at every change this process makes or notices: event streams of a revoked token
    /// end on it.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// Open event streams per device (a named token's id, else the caller's label): a device
    /// following the service is not sent push notifications.
    looking: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open event stream of a device, counted until dropped.
#[derive(Debug)]
pub struct Looking {
    looking: Arc<Mutex<HashMap<String, usize>>>,
    device: String,
}

impl Drop for Looking {
    fn drop(&mut self) {
        let mut looking = self.looking.lock().expect("looking");
        if let Some(count) = looking.get_mut(&self.device) {
            *count -= 1;
            if *count == 0 {
                looking.remove(&self.device);
            }
        }
    }
}

impl TokenStore {
    pub fn open(data_dir: &Path) -> TokenStore {
        TokenStore {
            dir: data_dir.to_owned(),
            cache: Arc::default(),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
            looking: Arc::default(),
        }
    }

    /// Counts an open event stream of `device` until the result is dropped.
    pub fn looking(&self, device: &str) -> Looking {
        *self
            .looking
            .lock()
            .expect("looking")
            .entry(device.to_owned())
            .or_default() += 1;
        Looking {
            looking: self.looking.clone(),
            device: device.to_owned(),
        }
    }

    /// Whether `device` has an event stream open now.
    pub fn is_looking(&self, device: &str) -> bool {
        self.looking.lock().expect("looking").contains_key(device)
    }

    fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    fn io(&self, source: io::Error) -> TokenError {
        TokenError::Io {
            path: self.path(),
            source,
        }
    }

    /// The record of `token`, if it is a live token of this store. Reads the file again only
    /// when it changed.
    pub fn check(&self, token: &str) -> Option<TokenRecord> {
        if !token.starts_with(TOKEN_PREFIX) {
            return None;
        }
        let hash = hash_hex(token);
        self.refresh();
        let mut cache = self.cache.lock().expect("token cache");
        let record = cache.kept.tokens.get(*cache.by_hash.get(&hash)?)?.clone();
        cache.used.insert(record.id.clone(), Utc::now());
        Some(record)
    }

    /// Whether the token `id` is still live (event streams ask this as they run).
    pub fn is_live(&self, id: &str) -> bool {
        self.refresh();
        let cache = self.cache.lock().expect("token cache");
        cache.kept.tokens.iter().any(|record| record.id == id)
    }

    /// Waits until the token `id` is revoked: at once when this process revokes it, within
    /// `poll` when another process does.
    pub async fn revoked(&self, id: &str, poll: std::time::Duration) {
        let mut changes = self.changed.subscribe();
        loop {
            if !self.is_live(id) {
                return;
            }
            let _ = tokio::time::timeout(poll, changes.changed()).await;
        }
    }

    /// The live tokens, oldest first, with their last use as known to this process.
    pub fn list(&self) -> Result<Vec<TokenRecord>, TokenError> {
        self.refresh_or_fail()?;
        let cache = self.cache.lock().expect("token cache");
        Ok(cache
            .kept
            .tokens
            .iter()
            .map(|record| {
                let mut record = record.clone();
                if let Some(used) = cache.used.get(&record.id) {
                    record.last_used_at = record.last_used_at.max(Some(*used));
                }
                record
            })
            .collect())
    }

    /// A new token named `name`.
    pub fn add(&self, name: &str, scope: Scope, kind: TokenKind) -> Result<Minted, TokenError> {
        let name = valid_name(name)?;
        self.change(|kept| {
            if kept.tokens.len() >= MAX_TOKENS {
                return Err(TokenError::Full(format!(
                    "there are {MAX_TOKENS} tokens and signed-in devices already: revoke some \
                     first"
                )));
            }
            Ok(mint(kept, name, scope, kind))
        })
    }

    /// Revokes the token `id` (or the only token named `id`); returns its record.
    pub fn revoke(&self, id: &str) -> Result<TokenRecord, TokenError> {
        self.change(|kept| {
            let at = kept
                .tokens
                .iter()
                .position(|record| record.id == id)
                .or_else(|| {
                    let named: Vec<usize> = (0..kept.tokens.len())
                        .filter(|at| kept.tokens[*at].name == id)
                        .collect();
                    (named.len() == 1).then(|| named[0])
                })
                .ok_or_else(|| TokenError::NotFound(id.to_owned()))?;
            Ok(kept.tokens.remove(at))
        })
    }

    /// A one-time pairing code, valid for [`PAIRING_VALID_S`], that signs a browser in with a
    /// new device token of `scope`.
    pub fn add_pairing(&self, scope: Scope) -> Result<String, TokenError> {
        let code = random_hex(16).map_err(|error| self.io(error))?;
        let hash = hash_hex(&code);
        self.change(|kept| {
            kept.pairings.push(Pairing {
                hash,
                scope,
                expires_at: Utc::now() + chrono::Duration::seconds(PAIRING_VALID_S),
            });
            Ok(())
        })?;
        Ok(code)
    }

    /// Uses the pairing `code` (once): a new device token named `name`.
    pub fn redeem(&self, code: &str, name: &str) -> Result<Minted, TokenError> {
        let name = valid_name(name)?;
        let hash = hash_hex(code.trim());
        self.change(|kept| {
            let at = kept
                .pairings
                .iter()
                .position(|pairing| pairing.hash == hash && pairing.expires_at > Utc::now())
                .ok_or(TokenError::PairingUsed)?;
            let pairing = kept.pairings.remove(at);
            Ok(mint(kept, name, pairing.scope, TokenKind::Device))
        })
    }

    /// Writes down the last uses seen since the last write, when any is a minute newer than
    /// the file's. Called now and then, off the request path.
    pub fn save_last_uses(&self) -> Result<(), TokenError> {
        let due: HashMap<String, DateTime<Utc>> = {
            let cache = self.cache.lock().expect("token cache");
            cache
                .used
                .iter()
                .filter(|(id, used)| {
                    cache.kept.tokens.iter().any(|record| {
                        &record.id == *id
                            && record.last_used_at.is_none_or(|last| {
                                (**used - last).num_seconds() >= LAST_USE_PRECISION_S
                            })
                    })
                })
                .map(|(id, used)| (id.clone(), *used))
                .collect()
        };
        if due.is_empty() {
            return Ok(());
        }
        self.change(|kept| {
            for record in &mut kept.tokens {
                if let Some(used) = due.get(&record.id) {
                    record.last_used_at = record.last_used_at.max(Some(*used));
                }
            }
            Ok(())
        })
    }

    /// Runs `edit` on the file's content under the lock and writes the result; expired
    /// pairings are dropped on the way.
    fn change<T>(
        &self,
        edit: impl FnOnce(&mut Kept) -> Result<T, TokenError>,
    ) -> Result<T, TokenError> {
        let lock = crate::store::disk::hold_lock(&self.dir.join(LOCK_FILE))
            .map_err(|error| self.io(error))?;
        let (_, mut kept) = self.read()?;
        let now = Utc::now();
        kept.pairings.retain(|pairing| pairing.expires_at > now);
        let result = edit(&mut kept)?;
        let bytes = serde_json::to_vec_pretty(&kept).expect("tokens are plain JSON");
        crate::store::disk::wait_for(|| {
            crate::store::disk::replace_privately(&self.path(), &bytes)
        })
        .map_err(|error| self.io(error))?;
        let stamp = self.stamp().map_err(|error| self.io(error))?;
        self.cache.lock().expect("token cache").set(stamp, kept);
        drop(lock);
        self.changed.send_modify(|generation| *generation += 1);
        Ok(result)
    }

    fn stamp(&self) -> io::Result<Option<Stamp>> {
        match fs::metadata(self.path()) {
            Ok(metadata) => Ok(Some(Stamp {
                inode: metadata.ino(),
                modified_ns: i128::from(metadata.mtime()) * 1_000_000_000
                    + i128::from(metadata.mtime_nsec()),
                len: metadata.len(),
            })),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn read(&self) -> Result<(Option<Stamp>, Kept), TokenError> {
        let stamp = self.stamp().map_err(|error| self.io(error))?;
        if stamp.is_none() {
            return Ok((None, Kept::default()));
        }
        let mut text = String::new();
        File::open(self.path())
            .and_then(|mut file| file.read_to_string(&mut text))
            .map_err(|error| self.io(error))?;
        let kept = serde_json::from_str(&text).map_err(|error| {
            self.io(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a token file: {error}"),
            ))
        })?;
        Ok((stamp, kept))
    }

    fn refresh_or_fail(&self) -> Result<(), TokenError> {
        let stamp = self.stamp().map_err(|error| self.io(error))?;
        if self.cache.lock().expect("token cache").stamp == stamp && stamp.is_some() {
            return Ok(());
        }
        let (stamp, kept) = self.read()?;
        let mut cache = self.cache.lock().expect("token cache");
        if cache.stamp != stamp {
            cache.set(stamp, kept);
            drop(cache);
            self.changed.send_modify(|generation| *generation += 1);
        }
        Ok(())
    }

    /// Reads the file again if another process changed it. A file that cannot be read leaves
    /// no named token working (the local credential still does), and says why once.
    fn refresh(&self) {
        if let Err(error) = self.refresh_or_fail() {
            let mut cache = self.cache.lock().expect("token cache");
            if cache.stamp.is_some() || !cache.kept.tokens.is_empty() {
                tracing::error!(%error, "the named tokens cannot be read; none is accepted");
                cache.set(None, Kept::default());
                drop(cache);
                self.changed.send_modify(|generation| *generation += 1);
            }
        }
    }
}

fn mint(kept: &mut Kept, name: String, scope: Scope, kind: TokenKind) -> Minted {
    let token = format!(
        "{TOKEN_PREFIX}{}",
        random_hex(32).expect("the system's random source")
    );
    let record = TokenRecord {
        id: format!("tok_{}", random_hex(8).expect("the system's random source")),
        name,
        scope,
        kind,
        hash: hash_hex(&token),
        created_at: Utc::now(),
        last_used_at: None,
    };
    kept.tokens.push(record.clone());
    Minted { record, token }
}

fn valid_name(name: &str) -> Result<String, TokenError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(TokenError::Invalid("a token needs a name".to_owned()));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(TokenError::Invalid(format!(
            "a token's name has at most {MAX_NAME_CHARS} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(TokenError::Invalid(
            "a token's name cannot hold control characters".to_owned(),
        ));
    }
    Ok(name.to_owned())
}

/// Lowercase hex SHA-256 of `text`.
pub fn hash_hex(text: &str) -> String {
    hex(&sha2::Sha256::digest(text.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

pub(crate) fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buffer = vec![0u8; bytes];
    File::open("/dev/urandom")?.read_exact(&mut buffer)?;
    Ok(hex(&buffer))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_token_works_until_revoked_and_only_its_hash_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path());
        let minted = store.add("phone", Scope::Read, TokenKind::Token).unwrap();
        assert!(minted.token.starts_with(TOKEN_PREFIX));
        assert_eq!(minted.token.len(), TOKEN_PREFIX.len() + 64);
        let found = store.check(&minted.token).unwrap();
        assert_eq!(found.name, "phone");
        assert_eq!(found.scope, Scope::Read);
        assert_eq!(found.label(), "token:phone");
        let file = fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(!file.contains(&minted.token[TOKEN_PREFIX.len()..]));
        assert!(file.contains(&hash_hex(&minted.token)));
        let mode = fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(store.check("ovt_nothing").is_none());
        assert!(store.check(&minted.token[..20]).is_none());

        // Another process (another store on the same folder) revokes it, by name.
        TokenStore::open(dir.path()).revoke("phone").unwrap();
        assert!(store.check(&minted.token).is_none());
        assert!(!store.is_live(&found.id));
        assert!(matches!(
            store.revoke(&found.id),
            Err(TokenError::NotFound(_))
        ));
    }

    #[test]
    fn names_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path());
        for bad in ["", "   ", "a\nb", &"x".repeat(81)] {
            assert!(
                matches!(
                    store.add(bad, Scope::Full, TokenKind::Token),
                    Err(TokenError::Invalid(_))
                ),
                "{bad:?}"
            );
        }
        assert!(!dir.path().join(FILE).exists(), "nothing was written");
    }

    #[test]
    fn a_pairing_code_works_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path());
        let code = store.add_pairing(Scope::Full).unwrap();
        assert!(matches!(
            store.redeem("0000", "laptop"),
            Err(TokenError::PairingUsed)
        ));
        let minted = TokenStore::open(dir.path())
            .redeem(&code, "laptop")
            .unwrap();
        assert_eq!(minted.record.kind, TokenKind::Device);
        assert_eq!(minted.record.label(), "device:laptop");
        assert!(store.check(&minted.token).is_some());
        assert!(matches!(
            store.redeem(&code, "again"),
            Err(TokenError::PairingUsed)
        ));
    }

    #[test]
    fn an_expired_pairing_code_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path());
        let code = store.add_pairing(Scope::Read).unwrap();
        store
            .change(|kept| {
                kept.pairings[0].expires_at = Utc::now() - chrono::Duration::seconds(1);
                Ok(())
            })
            .unwrap();
        assert!(matches!(
            store.redeem(&code, "late"),
            Err(TokenError::PairingUsed)
        ));
    }

    #[test]
    fn last_use_is_written_down_now_and_then() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path());
        let minted = store.add("ci", Scope::Full, TokenKind::Token).unwrap();
        assert_eq!(store.list().unwrap()[0].last_used_at, None);
        store.check(&minted.token).unwrap();
        assert!(store.list().unwrap()[0].last_used_at.is_some());
        store.save_last_uses().unwrap();
        let other = TokenStore::open(dir.path());
        assert!(other.list().unwrap()[0].last_used_at.is_some());
    }

    #[tokio::test]
    async fn waiting_for_a_revocation_ends_when_it_comes() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path());
        let minted = store.add("tab", Scope::Full, TokenKind::Device).unwrap();
        let waiting = {
            let store = store.clone();
            let id = minted.record.id.clone();
            tokio::spawn(
                async move { store.revoked(&id, std::time::Duration::from_secs(60)).await },
            )
        };
        store.revoke(&minted.record.id).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .expect("the wait ends at the revocation, not at the poll")
            .unwrap();
    }
}
