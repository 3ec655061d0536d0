//! The store's error: what reading or writing the data directory can fail with. Kept apart
//! from the front (`store/mod.rs`), which calls into the files that return it, so that they use
//! no module that uses them.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: line {line} is not a valid record: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: unknown schema version {version} (this build reads up to {max})", max = super::records::SCHEMA_VERSION)]
    UnknownVersion { path: PathBuf, version: u32 },
    #[error(
        "{path}: this data directory is in format {version}, written by {written_by}; this \
         openvaala reads formats up to {max}: run a newer openvaala on it"
    )]
    NewerFormat {
        path: PathBuf,
        version: u32,
        written_by: String,
        /// The newest format this binary reads (`format::FORMAT_VERSION`), carried here rather
        /// than named so that this file uses no sibling that returns its errors.
        max: u32,
    },
    #[error("cannot encode a record: {0}")]
    Encode(serde_json::Error),
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: not written: this instance no longer owns the conversation (its lease ended)")]
    NotOwner { path: PathBuf },
    /// Cluster mode: the line is durable but the coordinator did not confirm it; whether it
    /// counts is settled by whoever loads the conversation next.
    #[error(
        "{path}: the write was not confirmed by the database ({reason}); its outcome is unknown"
    )]
    Unconfirmed { path: PathBuf, reason: String },
}

impl StoreError {
    /// Cluster mode: the write was refused or not confirmed by the lease's fence. The
    /// conversation is (or may be) another instance's now.
    pub fn is_fence(&self) -> bool {
        matches!(
            self,
            StoreError::NotOwner { .. } | StoreError::Unconfirmed { .. }
        )
    }

    pub fn io(path: &Path, source: io::Error) -> StoreError {
        StoreError::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(super) fn unknown_version(path: &Path, version: u32) -> StoreError {
        StoreError::UnknownVersion {
            path: path.to_owned(),
            version,
        }
    }
}
