//! `openvaala repair <id>`: what makes a conversation with damage in the middle of a file open
//! again. The reader never skips such a line by itself (it may be an acknowledged change), so
//! the conversation cannot open until someone decides; this is that decision, taken with the
//! service stopped. Every line that is not a record is moved aside, with any torn tail, into
//! a `.torn-` file beside its log (`jsonl::keep_aside`); the records stay, in their order.

use std::fs;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::disk::sync_dir;
use super::records::{MetaRecord, SessionRecord};
use super::{METADATA_FILE, Store, StoreError, jsonl};

/// What the repair of one file moved aside.
#[derive(Debug)]
pub struct RepairedFile {
    pub path: PathBuf,
    /// The damaged lines (numbered from 1, as they were in the file).
    pub lines: Vec<usize>,
    /// The bytes of a torn tail moved aside with them.
    pub torn_bytes: usize,
    /// Where they are now.
    pub aside: PathBuf,
}

impl Store {
    /// Repairs every log of a conversation; only the files that needed it are returned. A
    /// line of a newer schema version stops the repair before anything is changed in its
    /// file: it is no damage, this build is too old for it. The service must be stopped:
    /// nothing else may write the files meanwhile.
    pub fn repair_conversation(&self, id: &str) -> Result<Vec<RepairedFile>, StoreError> {
        let dir = self.conversation_dir(id);
        let mut logs = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| StoreError::io(&dir, e))? {
            let path = entry.map_err(|e| StoreError::io(&dir, e))?.path();
            if path
                .extension()
                .is_some_and(|extension| extension == "jsonl")
            {
                logs.push(path);
            }
        }
        logs.sort();
        let mut repaired = Vec::new();
        for path in logs {
            let outcome = if path.file_name().is_some_and(|name| name == METADATA_FILE) {
                repair_log::<MetaRecord>(&path)?
            } else {
                repair_log::<SessionRecord>(&path)?
            };
            repaired.extend(outcome);
        }
        Ok(repaired)
    }
}

/// Moves the lines of one log that are not records `R`, and its torn tail, aside; then writes
/// the rest whole beside the log and renames it over it, so a crash leaves the old file or the
/// new one.
fn repair_log<R: DeserializeOwned>(path: &Path) -> Result<Option<RepairedFile>, StoreError> {
    let content = fs::read(path).map_err(|e| StoreError::io(path, e))?;
    let intact = jsonl::torn_start(&content);
    let mut kept = Vec::with_capacity(intact);
    let mut aside = Vec::new();
    let mut lines = Vec::new();
    // `torn_start` is at the start of a line: everything before it is whole lines.
    for (index, line) in content[..intact]
        .split_inclusive(|b| *b == b'\n')
        .enumerate()
    {
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        let blank = text.iter().all(u8::is_ascii_whitespace);
        if blank || jsonl::parse_line::<R>(path, text)?.is_ok() {
            kept.extend_from_slice(line);
        } else {
            aside.extend_from_slice(line);
            lines.push(index + 1);
        }
    }
    let torn_bytes = content.len() - intact;
    if lines.is_empty() && torn_bytes == 0 {
        return Ok(None);
    }
    aside.extend_from_slice(&content[intact..]);
    let aside = jsonl::keep_aside(path, &aside)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".repairing");
    let temporary = PathBuf::from(temporary);
    // Left by a repair that was cut short: the log itself was not replaced yet.
    let _ = fs::remove_file(&temporary);
    jsonl::write_bytes(&temporary, &kept)?;
    fs::rename(&temporary, path).map_err(|e| StoreError::io(path, e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))?;
    tracing::warn!(path = %path.display(), lines = ?lines, torn_bytes, aside = %aside.display(), "moved damaged lines aside");
    Ok(Some(RepairedFile {
        path: path.to_owned(),
        lines,
        torn_bytes,
        aside,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Acceptance;

    #[test]
    fn a_repair_moves_damaged_lines_and_the_torn_tail_aside_and_keeps_the_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = "c_1";
        std::fs::create_dir_all(store.conversation_dir(id)).unwrap();
        let session = store.session_path(id, "s_1");
        let item = |n: u32| {
            format!(r#"{{"v":1,"type":"output","item_id":"i_{n}","output":"{n}"}}"#,) + "\n"
        };
        let content = [
            item(1),
            "\0\0\0\0 the end of a line\n".to_owned(),
            item(2),
            "\0\0\n".to_owned(),
        ]
        .concat();
        std::fs::write(&session, &content).unwrap();
        let metadata = store.metadata_path(id);
        std::fs::write(&metadata, "").unwrap();

        let error = jsonl::read_log::<SessionRecord>(&session, &Acceptance::default()).unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");

        let repaired = store.repair_conversation(id).unwrap();
        assert_eq!(repaired.len(), 1, "{repaired:?}");
        assert_eq!(repaired[0].lines, [2]);
        assert_eq!(repaired[0].torn_bytes, 3);
        assert_eq!(
            std::fs::read(&repaired[0].aside).unwrap(),
            b"\0\0\0\0 the end of a line\n\0\0\n"
        );
        assert_eq!(
            std::fs::read_to_string(&session).unwrap(),
            item(1) + &item(2)
        );
        let log = jsonl::read_log::<SessionRecord>(&session, &Acceptance::default()).unwrap();
        assert_eq!(log.records.len(), 2);
        // Nothing left to do the second time.
        assert!(store.repair_conversation(id).unwrap().is_empty());

        // A newer schema version is not damage: the file is left as it is.
        let newer = item(3) + "{\"v\":9,\"type\":\"later\"}\n" + "not json\n" + &item(4);
        std::fs::write(&session, &newer).unwrap();
        let error = store.repair_conversation(id).unwrap_err();
        assert!(error.to_string().contains("schema version 9"), "{error}");
        assert_eq!(std::fs::read_to_string(&session).unwrap(), newer);
    }
}
