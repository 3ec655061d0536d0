//! The format version of the data directory as a whole, in `<data>/format`
//! (`{"version":2,"written_by":"openvaala 0.1.0"}`): which binaries may open it. The per-line
//! `"v"` of `records.rs` stays as it is; this version covers everything the directory holds
//! (the layout, every file's records, what counts and how, what the index derives).
//!
//! Policy:
//! - **What needs a new version**: a change that a binary of the current version would misread,
//!   taking something for something else or missing what counts: a new record type or a new
//!   value of a stored enum (an older reader rejects the line, or skips it, as `Output` lines
//!   would have been), a field that changes which lines count (the `(epoch, commit)` stamp: a
//!   reader ignoring it counts a stale writer's lines), a field whose meaning changes, a file
//!   moved or renamed, a file whose rules an older binary would not honour; and a change of
//!   what the index derives (a listed field added, a rule of `updated_at` changed), so that
//!   the next start rebuilds it. What does not: an optional field whose absence keeps its old
//!   meaning (a turn's usage), and derived data that is rebuilt or done without (checkpoints).
//! - **An older directory is read as it is**: every reader keeps accepting what every earlier
//!   version wrote (records only gain optional fields and new kinds, never reuse a name), and
//!   `tests/fixtures/` holds directories written by earlier commits that every later binary
//!   must open (`tests/it/data_format.rs`). Its index is rebuilt from the files at the first
//!   start, under the lock and before anything reads it (an older binary derived its rows), and
//!   only then is the directory stamped: a crash before the stamp upgrades it again. A directory
//!   without this file was written before it existed, and is upgraded so. If a change ever
//!   cannot be read as it is, the same place upgrades the files: new files beside the old,
//!   fsynced, the stamp raised last.
//! - **A newer directory is refused**, never misread: `Store::open` fails naming its version and
//!   the newest this binary reads, before anything in it is created or written (`serve`,
//!   `reindex` and `gc` alike).
//! - A single service's start and `reindex` stamp the directory; cluster mode refuses a newer
//!   directory too but stamps nothing: its index is PostgreSQL's, rebuilt by
//!   `reindex --database-url` with every instance stopped. An older binary that knows this file
//!   refuses a directory once a newer one has run in it; binaries from before this file do not
//!   look at it, and nothing can stop them.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::StoreError;

/// The format this binary writes, and the newest it reads. 1: the first stamped format;
/// 2: `plan` items (an older binary would take their lines for damaged ones).
pub const FORMAT_VERSION: u32 = 2;

pub const FORMAT_FILE: &str = "format";

/// Who wrote a stamp, for the message of a binary that must refuse it.
const WRITTEN_BY: &str = concat!("openvaala ", env!("CARGO_PKG_VERSION"));

/// The content of `<data>/format`. Fields a newer version adds are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_by: Option<String>,
}

pub fn path(root: &Path) -> PathBuf {
    root.join(FORMAT_FILE)
}

/// The directory's stamp (none when the directory, or its stamp, does not exist yet), refused
/// when it is newer than this binary reads or not a stamp at all (a damaged file might hide a
/// newer version: it is not guessed at). Reads only.
pub fn check(root: &Path) -> Result<Option<Stamp>, StoreError> {
    let path = path(root);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(StoreError::io(&path, error)),
    };
    let stamp: Stamp = serde_json::from_str(&text).map_err(|error| StoreError::Invalid {
        path: path.clone(),
        message: format!("not a data directory format this openvaala reads ({error})"),
    })?;
    if stamp.version > FORMAT_VERSION {
        return Err(StoreError::NewerFormat {
            path,
            version: stamp.version,
            written_by: stamp
                .written_by
                .unwrap_or_else(|| "a newer openvaala".to_owned()),
            max: FORMAT_VERSION,
        });
    }
    Ok(Some(stamp))
}

/// Stamps the directory with this binary's version unless it has it already: the file is
/// written whole, fsynced and renamed into place, then the directory is fsynced, so a crash
/// leaves either the stamp it had or a whole new one. Called with the data directory's lock
/// held, once the directory is upgraded (its index rebuilt).
pub fn stamp(root: &Path) -> Result<(), StoreError> {
    if check(root)?.is_some_and(|found| found.version == FORMAT_VERSION) {
        return Ok(());
    }
    let stamp = Stamp {
        version: FORMAT_VERSION,
        written_by: Some(WRITTEN_BY.to_owned()),
    };
    let mut bytes = serde_json::to_vec(&stamp).map_err(StoreError::Encode)?;
    bytes.push(b'\n');
    let target = path(root);
    super::disk::replace_durably(&target, &bytes).map_err(|error| StoreError::io(&target, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unstamped_directory_is_stamped_once_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check(dir.path()).unwrap(), None);
        stamp(dir.path()).unwrap();
        let stamped = fs::read_to_string(path(dir.path())).unwrap();
        assert_eq!(
            check(dir.path()).unwrap(),
            Some(Stamp {
                version: FORMAT_VERSION,
                written_by: Some(WRITTEN_BY.to_owned()),
            })
        );
        // Stamping again changes nothing, and no temporary file is left.
        stamp(dir.path()).unwrap();
        assert_eq!(fs::read_to_string(path(dir.path())).unwrap(), stamped);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_newer_directory_is_refused_naming_both_versions_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let newer = format!(
            r#"{{"version":{},"written_by":"openvaala 9.0.0","more":"a later field"}}"#,
            FORMAT_VERSION + 1
        );
        fs::write(path(dir.path()), &newer).unwrap();
        for error in [
            check(dir.path()).unwrap_err(),
            stamp(dir.path()).unwrap_err(),
        ] {
            let message = error.to_string();
            assert!(
                message.contains(&format!("format {}", FORMAT_VERSION + 1))
                    && message.contains("openvaala 9.0.0")
                    && message.contains(&format!("reads formats up to {FORMAT_VERSION}")),
                "{message}"
            );
        }
        assert_eq!(fs::read_to_string(path(dir.path())).unwrap(), newer);
    }

    #[test]
    fn a_stamp_that_does_not_parse_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(path(dir.path()), "version 7\n").unwrap();
        let message = stamp(dir.path()).unwrap_err().to_string();
        assert!(message.contains("not a data directory format"), "{message}");
        assert_eq!(fs::read_to_string(path(dir.path())).unwrap(), "version 7\n");
    }
}
