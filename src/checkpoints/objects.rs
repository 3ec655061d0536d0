//! The content-addressed blob store shared by every working tree: a file's bytes under the hex
//! SHA-256 of those bytes (`objects/ab/cdef…`). A blob is written once, to a temporary name
//! then renamed, so a reader never sees half of one; identical content is stored once.

use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

#[derive(Debug, Clone)]
pub struct Objects {
    dir: PathBuf,
    /// Blobs written since the last flush without being made durable: a flush with none
    /// (a snapshot that stored nothing new) costs nothing.
    unflushed: Arc<AtomicUsize>,
}

/// The hex SHA-256 of some bytes: a blob's name.
pub fn hash_bytes(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

impl Objects {
    pub fn open(dir: PathBuf) -> io::Result<Objects> {
        fs::create_dir_all(&dir)?;
        Ok(Objects {
            dir,
            unflushed: Arc::new(AtomicUsize::new(0)),
        })
    }

    fn path(&self, hash: &str) -> PathBuf {
        let (fan, rest) = hash.split_at(2.min(hash.len()));
        self.dir.join(fan).join(rest)
    }

    pub fn contains(&self, hash: &str) -> bool {
        valid_hash(hash) && self.path(hash).is_file()
    }

    /// Stores `bytes` and answers their hash. A blob already stored is reused only when it is
    /// whole (a power cut can leave one empty or short); a damaged one is written again.
    /// `durable`: the blob and its name are on disk before answering (a blob a restore journal
    /// names must survive a power cut, not only a crash of this process); otherwise the caller
    /// flushes a batch with [`Objects::flush`] before anything names them.
    pub fn put(&self, bytes: &[u8], durable: bool) -> io::Result<String> {
        let hash = hash_bytes(bytes);
        let path = self.path(&hash);
        match fs::read(&path) {
            Ok(stored) if stored == bytes => {
                if durable {
                    fs::File::open(&path)?.sync_all()?;
                }
                return Ok(hash);
            }
            Ok(stored) => tracing::warn!(
                blob = %hash,
                stored = stored.len(),
                expected = bytes.len(),
                "a stored blob is damaged; writing it again"
            ),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let parent = path.parent().expect("a blob has a fan-out directory");
        fs::create_dir_all(parent)?;
        let tmp = parent.join(format!(".{}.{}.tmp", &hash[2..], std::process::id()));
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        drop(file);
        fs::rename(&tmp, &path)?;
        if durable {
            fs::File::open(parent)?.sync_all()?;
        } else {
            // Counted once written: a flush that starts after this covers it.
            self.unflushed.fetch_add(1, Ordering::SeqCst);
        }
        Ok(hash)
    }

    /// Makes every blob stored so far durable, with their names: one `syncfs` for a batch
    /// instead of an fsync per blob and folder, and none when nothing was written since.
    pub fn flush(&self) -> io::Result<()> {
        let pending = self.unflushed.swap(0, Ordering::SeqCst);
        if pending == 0 {
            return Ok(());
        }
        let synced = fs::File::open(&self.dir).and_then(|dir| Ok(rustix::fs::syncfs(&dir)?));
        if synced.is_err() {
            // Not flushed after all: the next flush must try again.
            self.unflushed.fetch_add(pending, Ordering::SeqCst);
        }
        synced
    }

    /// Whether the blob `hash` is stored whole (its bytes hash to its name).
    pub fn verify(&self, hash: &str) -> io::Result<()> {
        self.get(hash).map(drop)
    }

    /// A blob's bytes, checked against its name: a damaged blob is an error, never wrong content.
    pub fn get(&self, hash: &str) -> io::Result<Vec<u8>> {
        if !valid_hash(hash) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a blob name",
            ));
        }
        let bytes = fs::read(self.path(hash))?;
        if hash_bytes(&bytes) != hash {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("blob {hash} is damaged"),
            ));
        }
        Ok(bytes)
    }
}

impl Objects {
    /// Removes every blob not in `keep` that was stored before `before` (a blob stored since
    /// may belong to a snapshot the caller did not see), and temporary files left by a crash.
    /// Answers how many blobs went and their bytes.
    pub fn sweep(
        &self,
        keep: &std::collections::HashSet<String>,
        before: std::time::SystemTime,
    ) -> io::Result<(usize, u64)> {
        let (mut removed, mut bytes) = (0, 0);
        for fan in fs::read_dir(&self.dir)?.flatten() {
            let fan_name = fan.file_name();
            let Some(fan_name) = fan_name.to_str().filter(|name| name.len() == 2) else {
                continue;
            };
            for blob in fs::read_dir(fan.path())?.flatten() {
                let Ok(meta) = blob.metadata() else {
                    continue;
                };
                if meta.modified().is_ok_and(|modified| modified >= before) {
                    continue;
                }
                let name = blob.file_name();
                let name = name.to_string_lossy();
                let hash = format!("{fan_name}{name}");
                let orphan = name.starts_with('.') && name.ends_with(".tmp");
                if (orphan || valid_hash(&hash)) && !keep.contains(&hash) {
                    fs::remove_file(blob.path())?;
                    removed += 1;
                    bytes += meta.len();
                }
            }
        }
        Ok((removed, bytes))
    }
}

fn valid_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_stored_once_under_its_hash_and_a_damaged_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::open(dir.path().join("objects")).unwrap();
        let hash = objects.put(b"hello", false).unwrap();
        assert_eq!(
            hash,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(objects.put(b"hello", true).unwrap(), hash);
        assert_eq!(objects.get(&hash).unwrap(), b"hello");
        fs::write(objects.path(&hash), b"jello").unwrap();
        assert_eq!(
            objects.get(&hash).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert!(objects.verify(&hash).is_err());
        assert!(!objects.contains("../../etc/passwd"));
    }

    #[test]
    fn a_blob_a_power_cut_left_empty_or_short_is_written_again_when_stored_again() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::open(dir.path().join("objects")).unwrap();
        for damaged in [&b""[..], b"hel", b"hellp"] {
            let hash = objects.put(b"hello", true).unwrap();
            fs::write(objects.path(&hash), damaged).unwrap();
            for durable in [false, true] {
                assert_eq!(objects.put(b"hello", durable).unwrap(), hash);
                assert_eq!(objects.get(&hash).unwrap(), b"hello");
                fs::write(objects.path(&hash), damaged).unwrap();
            }
        }
    }
}
