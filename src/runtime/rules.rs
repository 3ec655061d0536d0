//! The rules users remembered (`allow_conversation`, `allow_always`), kept in `rules.jsonl` in the
//! data directory: an append-only log of added and deleted rules, fsynced before an answer is
//! acknowledged, so a remembered rule survives a restart or a crash.
//!
//! Several instances may share the data directory (cluster mode): each change takes an exclusive
//! lock on `rules.lock`, appends through a writer opened for it, and a reader reads the log again
//! whenever its length changed, so a rule kept on one instance applies on every other.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::api::approvals::{Rule, RuleScope};
use crate::domain::{Timestamp, new_id, now};
use crate::permissions::policy::{names_exact_use, pattern_matches};
use crate::store::{JsonlWriter, StoreError, jsonl};

/// One line of `rules.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RuleRecord {
    Added {
        rule: Rule,
    },
    Deleted {
        id: String,
        at: Timestamp,
        by: String,
    },
}

/// Where a call runs, to find the rules that apply to it.
#[derive(Debug, Clone, Copy)]
pub struct CallScope<'a> {
    pub conversation_id: &'a str,
    pub agent: &'a str,
    pub cwd: &'a str,
}

impl RuleScope {
    fn applies_to(&self, call: CallScope<'_>) -> bool {
        match self {
            RuleScope::Conversation { conversation_id } => conversation_id == call.conversation_id,
            RuleScope::Always { agent, cwd } => agent == call.agent && cwd == call.cwd,
        }
    }
}

pub struct RuleStore {
    path: PathBuf,
    lock_path: PathBuf,
    read: Mutex<ReadRules>,
}

/// The rules as last read, and how long the log was then.
#[derive(Default)]
struct ReadRules {
    rules: Vec<Rule>,
    len: u64,
}

impl RuleStore {
    /// The log in `data_dir`, read when first used (start-up reads it with `list`, so a
    /// damaged file stops the service with its reason).
    pub fn open(data_dir: &Path) -> RuleStore {
        RuleStore {
            path: data_dir.join("rules.jsonl"),
            lock_path: data_dir.join("rules.lock"),
            read: Mutex::new(ReadRules::default()),
        }
    }

    /// Every rule in force, oldest first.
    pub fn list(&self) -> Result<Vec<Rule>, StoreError> {
        self.current()
    }

    /// Whether a rule for `tool` in the call's scope matches `text`; with `exact`, only a rule
    /// that names one use of a program (`names_exact_use`) counts.
    pub fn allows(
        &self,
        call: CallScope<'_>,
        tool: &str,
        text: &str,
        exact: bool,
    ) -> Result<bool, StoreError> {
        Ok(self.current()?.iter().any(|rule| {
            rule.tool == tool
                && rule.scope.applies_to(call)
                && pattern_matches(&rule.pattern, text)
                && (!exact || names_exact_use(&rule.pattern))
        }))
    }

    /// Keeps a new rule (durable when this returns).
    pub fn add(
        &self,
        tool: &str,
        pattern: &str,
        scope: RuleScope,
        created_by: &str,
        approval_id: Option<&str>,
    ) -> Result<Rule, StoreError> {
        let rule = Rule {
            id: new_id("r"),
            tool: tool.to_owned(),
            pattern: pattern.to_owned(),
            scope,
            created_at: now(),
            created_by: created_by.to_owned(),
            approval_id: approval_id.map(str::to_owned),
        };
        self.append(&[RuleRecord::Added { rule: rule.clone() }])?;
        Ok(rule)
    }

    /// Deletes a rule; `None` if there is none by that id.
    pub fn delete(&self, id: &str, by: &str) -> Result<Option<Rule>, StoreError> {
        let _lock = self.lock()?;
        let Some(rule) = self.current()?.into_iter().find(|rule| rule.id == id) else {
            return Ok(None);
        };
        self.append_locked(&[RuleRecord::Deleted {
            id: id.to_owned(),
            at: now(),
            by: by.to_owned(),
        }])?;
        Ok(Some(rule))
    }

    /// A fork starts with its source's conversation rules.
    pub fn copy_conversation(&self, from: &str, to: &str) -> Result<(), StoreError> {
        let _lock = self.lock()?;
        let copies: Vec<RuleRecord> = self
            .conversation_rules(from)?
            .map(|rule| RuleRecord::Added {
                rule: Rule {
                    id: new_id("r"),
                    scope: RuleScope::Conversation {
                        conversation_id: to.to_owned(),
                    },
                    ..rule
                },
            })
            .collect();
        if copies.is_empty() {
            return Ok(());
        }
        self.append_locked(&copies)
    }

    /// A deleted conversation's rules go with it.
    pub fn drop_conversation(&self, id: &str) -> Result<(), StoreError> {
        let _lock = self.lock()?;
        let at = now();
        let deletes: Vec<RuleRecord> = self
            .conversation_rules(id)?
            .map(|rule| RuleRecord::Deleted {
                id: rule.id,
                at,
                by: "service".to_owned(),
            })
            .collect();
        if deletes.is_empty() {
            return Ok(());
        }
        self.append_locked(&deletes)
    }

    /// The rules kept for one conversation.
    fn conversation_rules(&self, id: &str) -> Result<impl Iterator<Item = Rule>, StoreError> {
        let id = id.to_owned();
        Ok(self.current()?.into_iter().filter(move |rule| {
            matches!(&rule.scope, RuleScope::Conversation { conversation_id } if *conversation_id == id)
        }))
    }

    fn append(&self, records: &[RuleRecord]) -> Result<(), StoreError> {
        let _lock = self.lock()?;
        self.append_locked(records)
    }

    /// Appends under the lock: the writer is opened for this append, so it starts from the
    /// file's length as every instance left it.
    fn append_locked(&self, records: &[RuleRecord]) -> Result<(), StoreError> {
        JsonlWriter::open(&self.path)?.append(records)?;
        self.current()?;
        Ok(())
    }

    /// An exclusive lock across processes, held while the log is read and appended to.
    fn lock(&self) -> Result<File, StoreError> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .map_err(|source| StoreError::io(&self.lock_path, source))?;
        file.lock()
            .map_err(|source| StoreError::io(&self.lock_path, source))?;
        Ok(file)
    }

    /// The rules in force, read again if the log changed since the last read.
    fn current(&self) -> Result<Vec<Rule>, StoreError> {
        let len = match std::fs::metadata(&self.path) {
            Ok(metadata) => metadata.len(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
            Err(error) => return Err(StoreError::io(&self.path, error)),
        };
        let mut read = self
            .read
            .lock()
            .expect("the rules are never left half read");
        if len != read.len {
            let log = jsonl::read_log::<RuleRecord>(&self.path, &Default::default())?;
            let mut rules: Vec<Rule> = Vec::new();
            for record in log.records {
                match record {
                    RuleRecord::Added { rule } => rules.push(rule),
                    RuleRecord::Deleted { id, .. } => rules.retain(|rule| rule.id != id),
                }
            }
            *read = ReadRules { rules, len };
        }
        Ok(read.rules.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(conversation_id: &'a str) -> CallScope<'a> {
        CallScope {
            conversation_id,
            agent: "default",
            cwd: "/w",
        }
    }

    #[test]
    fn rules_survive_a_reopen_and_apply_in_their_scope() {
        let dir = tempfile::tempdir().unwrap();
        let store = RuleStore::open(dir.path());
        let conversation = RuleScope::Conversation {
            conversation_id: "c_1".to_owned(),
        };
        let always = RuleScope::Always {
            agent: "default".to_owned(),
            cwd: "/w".to_owned(),
        };
        store
            .add("shell", "cargo test*", conversation, "ui", Some("ap_1"))
            .unwrap();
        let kept = store.add("shell", "ls*", always, "ui", None).unwrap();

        let reopened = RuleStore::open(dir.path());
        assert_eq!(reopened.list().unwrap().len(), 2);
        assert!(
            reopened
                .allows(call("c_1"), "shell", "cargo test --lib", false)
                .unwrap()
        );
        assert!(
            !reopened
                .allows(call("c_2"), "shell", "cargo test", false)
                .unwrap()
        );
        assert!(
            reopened
                .allows(call("c_2"), "shell", "ls -la", false)
                .unwrap()
        );
        assert!(
            !reopened
                .allows(call("c_2"), "write_file", "ls", false)
                .unwrap()
        );
        let elsewhere = CallScope {
            cwd: "/other",
            ..call("c_2")
        };
        assert!(!reopened.allows(elsewhere, "shell", "ls", false).unwrap());

        // A change by another instance (here: the first handle) is seen by the second.
        assert_eq!(store.delete(&kept.id, "ui").unwrap(), Some(kept.clone()));
        assert!(!reopened.allows(call("c_2"), "shell", "ls", false).unwrap());
        assert_eq!(reopened.delete(&kept.id, "ui").unwrap(), None);
    }

    #[test]
    fn forks_copy_conversation_rules_and_deletes_drop_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = RuleStore::open(dir.path());
        let scope = RuleScope::Conversation {
            conversation_id: "c_1".to_owned(),
        };
        store.add("shell", "make*", scope, "cli", None).unwrap();
        store.copy_conversation("c_1", "c_2").unwrap();
        assert!(
            store
                .allows(call("c_2"), "shell", "make all", false)
                .unwrap()
        );
        store.drop_conversation("c_1").unwrap();
        assert!(!store.allows(call("c_1"), "shell", "make", false).unwrap());
        assert!(store.allows(call("c_2"), "shell", "make", false).unwrap());
        assert_eq!(store.list().unwrap().len(), 1);
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = RuleStore::open(dir.path());
        let scope = RuleScope::Conversation {
            conversation_id: "c_1".to_owned(),
        };
        store.add("shell", "a*", scope.clone(), "x", None).unwrap();
        use std::io::Write;
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join("rules.jsonl"))
            .unwrap();
        file.write_all(b"{\"v\":1,\"type\":\"added\",\"ru").unwrap();
        let reopened = RuleStore::open(dir.path());
        assert_eq!(reopened.list().unwrap().len(), 1);
        reopened.add("shell", "b*", scope, "x", None).unwrap();
        assert_eq!(RuleStore::open(dir.path()).list().unwrap().len(), 2);
    }
}
