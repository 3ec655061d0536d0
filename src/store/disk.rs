//! Waiting for the disk without holding up the async runtime.
//!
//! An fsync takes a millisecond or more on an ordinary disk. The actors call the store from
//! async tasks, so an fsync blocked one of the runtime's worker threads (two on a two-core
//! machine): only that many conversations could be waiting for the disk at once, and the
//! others' fsyncs queued behind them, though the disk takes many at once and its journal
//! commits concurrent fsyncs together. `wait_for` hands the worker's other tasks to another
//! thread for the duration, so the fsyncs of concurrent conversations overlap. The caller still
//! returns only once its own fsync has returned: acknowledged still means on disk.
//!
//! Small files replaced whole (a tree's name, a manifest) go through `replace_durably`, private
//! ones (tokens, keys) through `replace_privately`, under a `hold_lock` of their own.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use tokio::runtime::{Handle, RuntimeFlavor};

use super::error::StoreError;

/// Runs `call`, a blocking disk operation (write and fsync). On a worker of a multi-threaded
/// tokio runtime (the service's), its other tasks move to another thread meanwhile
/// (`block_in_place`); anywhere else (a single-threaded runtime, a blocking-pool thread, no
/// runtime) it just runs.
pub fn wait_for<T>(call: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(call)
        }
        _ => call(),
    }
}

/// Makes `path` hold `bytes`, durably and all at once: written whole under a temporary name
/// and flushed, renamed over `path`, and the folder flushed so the new name survives a power
/// cut too. A reader sees the old bytes or the new ones, never a mix or an empty file.
pub fn replace_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with_mode(path, bytes, 0o666)
}

/// `replace_durably` for a file only this user may read (tokens, keys): the new file is
/// private from its first byte.
pub fn replace_privately(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with_mode(path, bytes, 0o600)
}

fn replace_with_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no folder", path.display())))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    // A temporary file left by a crash is made again, so it never keeps an older mode.
    let _ = std::fs::remove_file(&temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, path)?;
    File::open(dir)?.sync_all()
}

/// An exclusive lock on the file `path` (made if missing, private), held until the result is
/// dropped: one writer at a time, across processes, of the file it guards. The wait goes
/// through `wait_for`.
pub fn hold_lock(path: &Path) -> io::Result<File> {
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)?;
    wait_for(|| lock.lock())?;
    Ok(lock)
}

/// Fsyncs a directory, so that the names just created, renamed or removed in it survive a
/// power cut.
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::Duration;

    use super::*;

    /// Tasks inside `wait_for` at the same time, and the most there ever were.
    #[derive(Default)]
    struct Inside {
        count: Mutex<(usize, usize)>,
        changed: Condvar,
    }

    /// Four tasks each wait for "the disk" on a runtime with one worker. Each waits until all
    /// four are waiting (at most 5 s): they overlap, where without `block_in_place` the one
    /// worker would hold them one after another.
    #[test]
    fn waits_of_concurrent_tasks_overlap_on_a_single_worker() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let inside = Arc::new(Inside::default());
        runtime.block_on(async {
            let tasks: Vec<_> = (0..4)
                .map(|_| {
                    let inside = inside.clone();
                    tokio::spawn(async move {
                        wait_for(|| {
                            let mut count = inside.count.lock().unwrap();
                            count.0 += 1;
                            count.1 = count.1.max(count.0);
                            inside.changed.notify_all();
                            let (mut count, _) = inside
                                .changed
                                .wait_timeout_while(count, Duration::from_secs(5), |c| c.1 < 4)
                                .unwrap();
                            count.0 -= 1;
                        });
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        });
        assert_eq!(
            inside.count.lock().unwrap().1,
            4,
            "the waits did not overlap"
        );
    }

    #[tokio::test]
    async fn on_a_single_threaded_runtime_it_just_runs() {
        assert_eq!(wait_for(|| 7), 7);
    }
}
