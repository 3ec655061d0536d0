//! The source of truth on disk: one self-contained directory of JSONL files per conversation
//! (the layout is below). Every change is appended and fsynced here before anything else learns
//! of it (invariant 1, write-ahead). The store knows nothing about HTTP, the index or running
//! turns.
//!
//! ```text
//! <data>/conversations/<id>/metadata.jsonl      the conversation, sessions, turns
//! <data>/conversations/<id>/<session-id>.jsonl  one agent's items
//! <data>/tmp/<id>/      a conversation being built (create, fork); renamed into place when whole
//! <data>/trash/<id>/    a conversation being deleted; `reindex` and start-up finish the removal
//! <data>/format         the directory's format version (`format.rs`: which binaries open it)
//! ```

pub mod disk;
mod error;
pub mod fence;
pub mod format;
pub mod jsonl;
pub mod lock;
pub mod records;
pub mod repair;
pub mod state;

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::domain::{Item, ItemKind};
use disk::sync_dir;
pub use error::StoreError;
pub use fence::{Acceptance, FenceError, WriteFence};
pub use jsonl::{JsonlWriter, ReadLog};
use records::{MetaRecord, SessionRecord};

/// The data directory. Cheap to clone: it is only a path.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

pub const METADATA_FILE: &str = "metadata.jsonl";

impl Store {
    /// Opens (and creates if needed) the data directory layout. A directory of a newer format
    /// is refused before anything in it is created or written (`format::check`).
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        format::check(root)?;
        for dir in [
            root.to_owned(),
            root.join("conversations"),
            root.join("tmp"),
            root.join("trash"),
        ] {
            fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        }
        Ok(Store {
            root: root.to_owned(),
        })
    }

    /// Whether the directory was written by an older binary (no stamp, or an older one): its
    /// index is rebuilt before it is stamped (`format.rs`).
    pub fn format_is_older(&self) -> Result<bool, StoreError> {
        Ok(format::check(&self.root)?.is_none_or(|stamp| stamp.version < format::FORMAT_VERSION))
    }

    /// Stamps the directory with this binary's format unless it has it (`format::stamp`): with
    /// the lock held, once its index is this binary's derivation of the files.
    pub fn stamp_format(&self) -> Result<(), StoreError> {
        format::stamp(&self.root)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn index_path(&self) -> PathBuf {
        self.root.join("metadata.db")
    }

    pub fn lock_path(&self) -> PathBuf {
        Store::lock_path_in(&self.root)
    }

    /// Where the runtime lock of the data directory `root` is, without opening (or creating)
    /// the directory: for commands that only look for a running service.
    pub fn lock_path_in(root: &Path) -> PathBuf {
        root.join("runtime.lock")
    }

    pub fn conversations_dir(&self) -> PathBuf {
        self.root.join("conversations")
    }

    pub fn conversation_dir(&self, id: &str) -> PathBuf {
        self.conversations_dir().join(id)
    }

    pub fn metadata_path(&self, id: &str) -> PathBuf {
        self.conversation_dir(id).join(METADATA_FILE)
    }

    pub fn session_path(&self, id: &str, session_id: &str) -> PathBuf {
        self.conversation_dir(id)
            .join(format!("{session_id}.jsonl"))
    }

    pub fn exists(&self, id: &str) -> bool {
        is_valid_id(id) && self.metadata_path(id).is_file()
    }

    /// Builds a whole conversation directory out of sight in `tmp/`, fsyncs it, then renames it
    /// into `conversations/`: a crash leaves either no conversation or a complete one. Returns
    /// the length of the new `metadata.jsonl`. `epoch`: the lease it is written under
    /// (cluster mode).
    pub fn create_conversation(
        &self,
        id: &str,
        metadata: &[MetaRecord],
        sessions: &[(&str, &[SessionRecord])],
        epoch: Option<u64>,
    ) -> Result<u64, StoreError> {
        let encoded: Vec<(&str, Vec<u8>)> = sessions
            .iter()
            .map(|(session_id, records)| {
                Ok((
                    *session_id,
                    jsonl::encode_lines(records, epoch.map(fence::Stamp::epoch_only))?,
                ))
            })
            .collect::<Result<_, StoreError>>()?;
        let raw: Vec<(&str, &[u8])> = encoded
            .iter()
            .map(|(id, bytes)| (*id, bytes.as_slice()))
            .collect();
        self.create_conversation_raw(id, metadata, &raw, epoch)
    }

    /// Like `create_conversation`, with session files given as ready JSONL bytes (a fork copies
    /// its history this way: one sequential write, no per-item work).
    pub fn create_conversation_raw(
        &self,
        id: &str,
        metadata: &[MetaRecord],
        sessions: &[(&str, &[u8])],
        epoch: Option<u64>,
    ) -> Result<u64, StoreError> {
        // Four fsyncs: the runtime's worker is not held while they wait.
        disk::wait_for(|| self.build_conversation(id, metadata, sessions, epoch))
    }

    fn build_conversation(
        &self,
        id: &str,
        metadata: &[MetaRecord],
        sessions: &[(&str, &[u8])],
        epoch: Option<u64>,
    ) -> Result<u64, StoreError> {
        let building = self.root.join("tmp").join(id);
        fs::create_dir(&building).map_err(|e| StoreError::io(&building, e))?;
        let meta_len = jsonl::write_new(&building.join(METADATA_FILE), metadata, epoch)?;
        for (session_id, bytes) in sessions {
            jsonl::write_bytes(&building.join(format!("{session_id}.jsonl")), bytes)?;
        }
        sync_dir(&building)?;
        let target = self.conversation_dir(id);
        fs::rename(&building, &target).map_err(|e| StoreError::io(&target, e))?;
        sync_dir(&self.conversations_dir())?;
        Ok(meta_len)
    }

    /// Deletes a conversation: one atomic rename out of `conversations/` (after which it is gone
    /// for every reader), then the removal of its files. A crash between the two is finished by
    /// `finish_deletes`.
    pub fn delete_conversation(&self, id: &str) -> Result<(), StoreError> {
        let source = self.conversation_dir(id);
        let trashed = self.root.join("trash").join(id);
        if trashed.exists() {
            fs::remove_dir_all(&trashed).map_err(|e| StoreError::io(&trashed, e))?;
        }
        match fs::rename(&source, &trashed) {
            Ok(()) => {}
            // Already gone: in cluster mode another instance may finish an accepted delete at
            // the same moment.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(&source, e)),
        }
        sync_dir(&self.conversations_dir())?;
        match fs::remove_dir_all(&trashed) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(StoreError::io(&trashed, e)),
            _ => Ok(()),
        }
    }

    /// Removes what a crash left half-done: deletes cut short (returns their ids, so the index
    /// can drop them) and conversations that were never completely built.
    pub fn finish_interrupted_work(&self) -> Result<Vec<String>, StoreError> {
        let mut deleted = Vec::new();
        for (dir, is_delete) in [
            (self.root.join("trash"), true),
            (self.root.join("tmp"), false),
        ] {
            for entry in fs::read_dir(&dir).map_err(|e| StoreError::io(&dir, e))? {
                let entry = entry.map_err(|e| StoreError::io(&dir, e))?;
                fs::remove_dir_all(entry.path()).map_err(|e| StoreError::io(&entry.path(), e))?;
                if is_delete {
                    deleted.push(entry.file_name().to_string_lossy().into_owned());
                }
            }
        }
        Ok(deleted)
    }

    /// Every conversation directory's id, in no particular order.
    pub fn conversation_ids(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.conversations_dir();
        let mut ids = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| StoreError::io(&dir, e))? {
            let entry = entry.map_err(|e| StoreError::io(&dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_valid_id(&name) && entry.file_type().is_ok_and(|t| t.is_dir()) {
                ids.push(name);
            }
        }
        Ok(ids)
    }

    /// The conversation's metadata records (those that count, by `acceptance`).
    pub fn read_metadata(
        &self,
        id: &str,
        acceptance: &Acceptance,
    ) -> Result<ReadLog<MetaRecord>, StoreError> {
        jsonl::read_log(&self.existing_metadata(id)?, acceptance)
    }

    /// `read_metadata` that skips damaged lines and reports them (for the index only: see
    /// `jsonl::parse_log_salvaging`).
    pub fn read_metadata_salvaging(
        &self,
        id: &str,
        acceptance: &Acceptance,
    ) -> Result<ReadLog<MetaRecord>, StoreError> {
        jsonl::read_log_salvaging(&self.existing_metadata(id)?, acceptance)
    }

    fn existing_metadata(&self, id: &str) -> Result<PathBuf, StoreError> {
        let path = self.metadata_path(id);
        if !path.is_file() {
            return Err(StoreError::Invalid {
                path,
                message: "missing".to_owned(),
            });
        }
        Ok(path)
    }

    /// The items of one session in `seq` order, each as its last stored snapshot.
    pub fn read_items(
        &self,
        id: &str,
        session_id: &str,
        acceptance: &Acceptance,
    ) -> Result<Vec<Item>, StoreError> {
        let log = jsonl::read_log::<SessionRecord>(&self.session_path(id, session_id), acceptance)?;
        Ok(fold_items(log.records))
    }

    pub fn open_metadata_writer(&self, id: &str) -> Result<JsonlWriter, StoreError> {
        JsonlWriter::open(&self.metadata_path(id))
    }

    pub fn open_session_writer(
        &self,
        id: &str,
        session_id: &str,
    ) -> Result<JsonlWriter, StoreError> {
        JsonlWriter::open(&self.session_path(id, session_id))
    }
}

/// Collapses item snapshots to the last one per id, ordered by `seq`.
pub fn fold_items(records: Vec<SessionRecord>) -> Vec<Item> {
    let mut position: HashMap<String, usize> = HashMap::new();
    let mut items: Vec<Item> = Vec::new();
    for record in records {
        match record {
            SessionRecord::Item { item } => match position.get(&item.id) {
                Some(&index) => items[index] = item,
                None => {
                    position.insert(item.id.clone(), items.len());
                    items.push(item);
                }
            },
            SessionRecord::Output { item_id, output } => {
                if let Some(&index) = position.get(&item_id)
                    && let ItemKind::ToolCall { output: so_far, .. } = &mut items[index].kind
                {
                    so_far.push_str(&output);
                }
            }
        }
    }
    items.sort_by_key(|item| item.seq);
    // `compacted` is derived from the latest summary, never stored item by item.
    crate::domain::mark_compacted(&mut items);
    items
}

/// Ids come from URLs and name directories: only letters, digits, `_` and `-` are accepted, so
/// an id can never point outside the data directory.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
