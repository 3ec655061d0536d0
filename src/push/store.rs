//! The browsers subscribed to push notifications, kept in `push-subscriptions.json` in the data
//! directory (private to the service's user), each tied to the device (token) that subscribed:
//! revoking that token drops its subscriptions, and a push service that answers 404 or 410
//! drops one. Replaced whole under a lock, like the tokens.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::subscription::Subscription;

pub const FILE: &str = "push-subscriptions.json";
const LOCK_FILE: &str = "push-subscriptions.lock";
/// Subscriptions kept at most (a few per device is the usual; more is a mistake or abuse).
pub const MAX_SUBSCRIPTIONS: usize = 200;
/// The longest endpoint accepted (push services' URLs are a few hundred characters).
pub const MAX_ENDPOINT_CHARS: usize = 2048;

/// What the push routes need, made at start: the service's key and the subscriptions.
#[derive(Debug, Clone)]
pub struct PushState {
    pub key: std::sync::Arc<super::vapid::VapidKey>,
    pub subscriptions: SubscriptionStore,
}

/// A subscription as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    /// `ps_…`.
    pub id: String,
    pub subscription: Subscription,
    /// The device that subscribed: a named token's id (`tok_…`), else the kind of client of the
    /// local credential (`web`).
    pub device: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Kept {
    #[serde(default)]
    subscriptions: Vec<Stored>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Invalid(String),
    /// `MAX_SUBSCRIPTIONS` are kept already.
    #[error("{0}")]
    Full(String),
    /// A subscription the service could not send to (its endpoint or its keys).
    #[error("{0}")]
    Unusable(String),
    #[error("cannot use {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// The subscriptions of one data directory. Cheap to clone; one writer at a time (a lock
/// file). Read from the file at each use: pushes are rare, and in a cluster another instance
/// may have changed it.
#[derive(Debug, Clone)]
pub struct SubscriptionStore {
    dir: PathBuf,
}

impl SubscriptionStore {
    pub fn open(data_dir: &Path) -> SubscriptionStore {
        SubscriptionStore {
            dir: data_dir.to_owned(),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    fn io(&self, source: io::Error) -> StoreError {
        StoreError::Io {
            path: self.path(),
            source,
        }
    }

    /// Keeps `subscription` for `device`; the same endpoint again replaces the earlier one
    /// (new keys, perhaps another device) under its id. Returns the id and whether it is new.
    pub fn add(
        &self,
        subscription: Subscription,
        device: &str,
    ) -> Result<(String, bool), StoreError> {
        if subscription.endpoint.chars().count() > MAX_ENDPOINT_CHARS {
            return Err(StoreError::Invalid(format!(
                "the endpoint is longer than {MAX_ENDPOINT_CHARS} characters"
            )));
        }
        subscription
            .check()
            .map_err(|error| StoreError::Unusable(error.to_string()))?;
        self.change(|kept| {
            if let Some(known) = kept
                .iter_mut()
                .find(|stored| stored.subscription.endpoint == subscription.endpoint)
            {
                known.subscription = subscription;
                known.device = device.to_owned();
                return Ok((known.id.clone(), false));
            }
            if kept.len() >= MAX_SUBSCRIPTIONS {
                return Err(StoreError::Full(format!(
                    "there are {MAX_SUBSCRIPTIONS} push subscriptions already: sign out devices \
                     that no longer need them"
                )));
            }
            let id = format!(
                "ps_{}",
                crate::auth::tokens::random_hex(8).map_err(|error| self.io(error))?
            );
            kept.push(Stored {
                id: id.clone(),
                subscription,
                device: device.to_owned(),
                created_at: Utc::now(),
            });
            Ok((id, true))
        })
    }

    /// Drops the subscriptions `drop` picks; returns how many.
    pub fn remove_where(&self, drop: impl Fn(&Stored) -> bool) -> Result<usize, StoreError> {
        if self.list()?.iter().all(|stored| !drop(stored)) {
            return Ok(0);
        }
        self.change(|kept| {
            let before = kept.len();
            kept.retain(|stored| !drop(stored));
            Ok(before - kept.len())
        })
    }

    /// Every subscription.
    pub fn list(&self) -> Result<Vec<Stored>, StoreError> {
        Ok(self.read()?.subscriptions)
    }

    fn read(&self) -> Result<Kept, StoreError> {
        let mut text = String::new();
        match File::open(self.path()) {
            Ok(mut file) => file
                .read_to_string(&mut text)
                .map_err(|error| self.io(error))?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Kept::default()),
            Err(error) => return Err(self.io(error)),
        };
        serde_json::from_str(&text).map_err(|error| {
            self.io(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a subscription file: {error}"),
            ))
        })
    }

    fn change<T>(
        &self,
        edit: impl FnOnce(&mut Vec<Stored>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let _lock = crate::store::disk::hold_lock(&self.dir.join(LOCK_FILE))
            .map_err(|error| self.io(error))?;
        let mut kept = self.read()?;
        let result = edit(&mut kept.subscriptions)?;
        let bytes = serde_json::to_vec_pretty(&kept).expect("subscriptions are plain JSON");
        crate::store::disk::wait_for(|| {
            crate::store::disk::replace_privately(&self.path(), &bytes)
        })
        .map_err(|error| self.io(error))?;
        Ok(result)
    }
}
