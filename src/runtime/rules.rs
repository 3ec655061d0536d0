//! The rules users remembered (`allow_conversation`, `allow_always`), kept in `rules.jsonl` in the
//! data directory: an append-only log of added and deleted rules, fsynced before an answer is
//! acknowledged, so a remembered rule survives a restart or a crash.
//!
//! Several instances may share the data directory (cluster mode): each change takes an exclusive
//! lock on `rules.lock`, appends through a writer opened for it, and a reader reads the log again
//! whenever its length changed, so a rule kept on one instance applies on every other.
//!
//! Each line carries an integrity mark: an HMAC of the record with a key only the service holds
//! (`rules-key` beside the log; tools never see the data directory). A line without a valid
//! mark, or that does not parse, was not written by the service and is ignored with a warning:
//! a planted line cannot make a command run silently nor claim who made it. A log from before
//! the marks (no line has one) is marked once when the service starts.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::api::approvals::{Rule, RuleScope};
use crate::domain::{Timestamp, new_id, now};
use crate::permissions::policy::{names_exact_use, pattern_matches};
use crate::store::records::Envelope;
use crate::store::{JsonlWriter, StoreError, jsonl};

/// The file of the key the marks are made with.
const KEY_FILE: &str = "rules-key";

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

/// A line as written: the record and its mark (hex HMAC-SHA256 of the record's JSON).
#[derive(Serialize, Deserialize)]
struct Marked {
    #[serde(flatten)]
    record: RuleRecord,
    #[serde(default)]
    mark: Option<String>,
}

/// The mark of a record under `key`.
fn mac(key: &[u8], record: &RuleRecord) -> Result<Hmac<Sha256>, StoreError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(&serde_json::to_vec(record).map_err(StoreError::Encode)?);
    Ok(mac)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
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
    data_dir: PathBuf,
    key: OnceLock<Vec<u8>>,
    read: Mutex<ReadRules>,
}

/// The rules as last read, and how long the log was then.
#[derive(Default)]
struct ReadRules {
    rules: Vec<Rule>,
    len: u64,
}

impl RuleStore {
    /// The log in `data_dir`, read when first used (start-up calls `prepare`, so a file that
    /// cannot be read stops the service with its reason).
    pub fn open(data_dir: &Path) -> RuleStore {
        RuleStore {
            path: data_dir.join("rules.jsonl"),
            lock_path: data_dir.join("rules.lock"),
            data_dir: data_dir.to_owned(),
            key: OnceLock::new(),
            read: Mutex::new(ReadRules::default()),
        }
    }

    /// At start-up: marks a log written before the marks, so its rules stay in force (only
    /// when no line has a mark: a marked log never takes unmarked lines), then reads it.
    pub fn prepare(&self) -> Result<Vec<Rule>, StoreError> {
        let _lock = self.lock()?;
        // A torn tail a crash left is cut now, kept aside (`JsonlWriter::open` does both), so
        // the log is whole again before anything reads or rewrites it.
        if self.path.exists() {
            JsonlWriter::open(&self.path)?;
        }
        let content = match std::fs::read(&self.path) {
            Ok(content) => content,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(StoreError::io(&self.path, error)),
        };
        let lines = complete_lines(&content);
        let mut unparsed = Vec::new();
        let parsed: Vec<Marked> = lines
            .iter()
            .filter_map(
                |line| match serde_json::from_slice::<Envelope<Marked>>(line) {
                    Ok(envelope) => Some(envelope.record),
                    Err(_) => {
                        unparsed.extend_from_slice(line);
                        unparsed.push(b'\n');
                        None
                    }
                },
            )
            .collect();
        if !parsed.is_empty() && parsed.iter().all(|line| line.mark.is_none()) {
            // The rewrite below keeps only the lines that parse: the others are kept aside
            // first, never dropped unseen.
            if !unparsed.is_empty() {
                let aside = jsonl::keep_aside(&self.path, &unparsed)?;
                tracing::warn!(aside = %aside.display(), "kept the lines of the remembered rules that do not parse aside");
            }
            let key = self.key()?;
            let marked = parsed
                .into_iter()
                .map(|line| {
                    let mark = hex(&mac(key, &line.record)?.finalize().into_bytes());
                    Ok(Marked {
                        record: line.record,
                        mark: Some(mark),
                    })
                })
                .collect::<Result<Vec<Marked>, StoreError>>()?;
            let bytes = jsonl::encode_lines(&marked, None)?;
            let temporary = self.path.with_extension("jsonl.marking");
            jsonl::write_bytes(&temporary, &bytes)?;
            std::fs::rename(&temporary, &self.path)
                .and_then(|()| File::open(&self.data_dir)?.sync_all())
                .map_err(|error| StoreError::io(&self.path, error))?;
            tracing::info!(
                lines = marked.len(),
                "marked the remembered rules written before integrity marks"
            );
        }
        self.current()
    }

    /// The key the marks are made with, made on first use.
    fn key(&self) -> Result<&[u8], StoreError> {
        if let Some(key) = self.key.get() {
            return Ok(key);
        }
        let key = crate::credential::load_or_create_secret(&self.data_dir, KEY_FILE)
            .map_err(|error| StoreError::io(&self.data_dir.join(KEY_FILE), error))?;
        Ok(self.key.get_or_init(|| key.into_bytes()))
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

    /// Appends under the lock, each record with its mark: the writer is opened for this
    /// append, so it starts from the file's length as every instance left it.
    fn append_locked(&self, records: &[RuleRecord]) -> Result<(), StoreError> {
        let key = self.key()?;
        let marked = records
            .iter()
            .map(|record| {
                Ok(Marked {
                    mark: Some(hex(&mac(key, record)?.finalize().into_bytes())),
                    record: record.clone(),
                })
            })
            .collect::<Result<Vec<Marked>, StoreError>>()?;
        JsonlWriter::open(&self.path)?.append(&marked)?;
        self.current()?;
        Ok(())
    }

    /// An exclusive lock across processes, held while the log is read and appended to.
    fn lock(&self) -> Result<File, StoreError> {
        crate::store::disk::hold_lock(&self.lock_path)
            .map_err(|source| StoreError::io(&self.lock_path, source))
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
            let content = match std::fs::read(&self.path) {
                Ok(content) => content,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(error) => return Err(StoreError::io(&self.path, error)),
            };
            let key = self.key()?;
            let mut rules: Vec<Rule> = Vec::new();
            for (index, line) in complete_lines(&content).into_iter().enumerate() {
                let Some(record) = self.checked(key, index + 1, line) else {
                    continue;
                };
                match record {
                    RuleRecord::Added { rule } => rules.push(rule),
                    RuleRecord::Deleted { id, .. } => rules.retain(|rule| rule.id != id),
                }
            }
            *read = ReadRules {
                rules,
                len: content.len() as u64,
            };
        }
        Ok(read.rules.clone())
    }

    /// A line's record if it parses and carries its valid mark; else a warning, and nothing.
    fn checked(&self, key: &[u8], line_number: usize, line: &[u8]) -> Option<RuleRecord> {
        let warn = |why: &str| {
            tracing::warn!(path = %self.path.display(), line = line_number, "ignoring a remembered rule: {why}");
        };
        let marked = match serde_json::from_slice::<Envelope<Marked>>(line) {
            Ok(envelope) if envelope.v <= crate::store::records::SCHEMA_VERSION => envelope.record,
            Ok(envelope) => {
                warn(&format!(
                    "schema version {} is newer than this service's",
                    envelope.v
                ));
                return None;
            }
            Err(error) => {
                warn(&format!("the line does not parse ({error})"));
                return None;
            }
        };
        let Some(mark) = marked.mark.as_deref().and_then(unhex) else {
            warn("the line has no integrity mark: the service did not write it");
            return None;
        };
        if mac(key, &marked.record).is_ok_and(|mac| mac.verify_slice(&mark).is_ok()) {
            return Some(marked.record);
        }
        warn(
            "its integrity mark does not match: something other than the service wrote or changed it",
        );
        None
    }
}

/// The complete lines of a log before its torn tail (left by a crash during an append: see
/// `store::jsonl`), blank ones left out.
fn complete_lines(content: &[u8]) -> Vec<&[u8]> {
    content[..jsonl::torn_start(content)]
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;

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

        // After a power cut the torn tail can end in a newline: NUL bytes, then the end of a
        // line. The start cuts it and keeps it aside; the rules stay.
        let path = dir.path().join("rules.jsonl");
        let whole = std::fs::read(&path).unwrap();
        let torn = b"\0\0\0\0\0\0\0\0\",\"created_by\":\"x\"}\n\0\0\n";
        file.write_all(torn).unwrap();
        let restarted = RuleStore::open(dir.path());
        assert_eq!(restarted.prepare().unwrap().len(), 2);
        assert_eq!(std::fs::read(&path).unwrap(), whole);
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.to_string_lossy().contains("rules.jsonl.torn-"))
            .collect();
        assert_eq!(aside.len(), 2, "{aside:?}");
        assert!(
            aside
                .iter()
                .any(|path| std::fs::read(path).unwrap() == torn)
        );
    }

    fn append_line(dir: &Path, line: &str) {
        use std::io::Write;
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(dir.join("rules.jsonl"))
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }

    #[test]
    fn lines_the_service_did_not_write_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = RuleStore::open(dir.path());
        let scope = RuleScope::Always {
            agent: "default".to_owned(),
            cwd: "/w".to_owned(),
        };
        store.add("shell", "ls", scope, "cli", None).unwrap();
        let written = std::fs::read_to_string(dir.path().join("rules.jsonl")).unwrap();
        assert!(written.contains("\"mark\":\""), "{written}");
        // A copy of the valid line that allows everything, claims the web UI made it, or has
        // no mark; and a line that does not parse.
        let widened = written
            .trim()
            .replace("\"pattern\":\"ls\"", "\"pattern\":\"*\"");
        let claimed = written
            .trim()
            .replace("\"created_by\":\"cli\"", "\"created_by\":\"web\"");
        let unmarked = written.trim().split(",\"mark\"").next().unwrap().to_owned() + "}";
        for line in [
            &widened,
            &claimed,
            &unmarked,
            "{\"v\":1,\"type\":\"added\"}",
            "not json",
        ] {
            append_line(dir.path(), line);
        }
        let reopened = RuleStore::open(dir.path());
        let rules = reopened.prepare().unwrap();
        assert_eq!(rules.len(), 1, "{rules:?}");
        assert_eq!(rules[0].pattern, "ls");
        assert_eq!(rules[0].created_by, "cli");
        assert!(
            !reopened
                .allows(call("c_1"), "shell", "rm -rf /", false)
                .unwrap()
        );
        // The log stays usable: a new rule is kept and read back.
        let scope = RuleScope::Conversation {
            conversation_id: "c_1".to_owned(),
        };
        reopened.add("shell", "make", scope, "web", None).unwrap();
        assert_eq!(RuleStore::open(dir.path()).list().unwrap().len(), 2);
    }

    #[test]
    fn a_log_from_before_the_marks_is_marked_once() {
        let dir = tempfile::tempdir().unwrap();
        let rule = Rule {
            id: "r_1".to_owned(),
            tool: "shell".to_owned(),
            pattern: "cargo test".to_owned(),
            scope: RuleScope::Conversation {
                conversation_id: "c_1".to_owned(),
            },
            created_at: now(),
            created_by: "Mozilla/5.0".to_owned(),
            approval_id: None,
        };
        let legacy = jsonl::encode_lines(&[RuleRecord::Added { rule }], None).unwrap();
        std::fs::write(dir.path().join("rules.jsonl"), legacy).unwrap();
        let store = RuleStore::open(dir.path());
        assert_eq!(store.prepare().unwrap().len(), 1);
        assert!(
            store
                .allows(call("c_1"), "shell", "cargo test", false)
                .unwrap()
        );
        // Once marked, an unmarked line added later does not count.
        let unmarked = RuleRecord::Added {
            rule: Rule {
                id: "r_2".to_owned(),
                pattern: "*".to_owned(),
                ..store.list().unwrap()[0].clone()
            },
        };
        let line = String::from_utf8(jsonl::encode_lines(&[unmarked], None).unwrap()).unwrap();
        append_line(dir.path(), line.trim());
        let reopened = RuleStore::open(dir.path());
        assert_eq!(reopened.prepare().unwrap().len(), 1);
    }
}
