//! `runtime.lock`: the running service holds an exclusive OS lock on it and writes its pid and
//! address into it. The OS drops the lock when the process dies, so a file left by `kill -9`
//! blocks nothing.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Who holds the lock, as written in the file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LockOwner {
    pub pid: u32,
    pub addr: Option<String>,
    /// Serving HTTPS (`[server] tls_cert`).
    #[serde(default)]
    pub tls: bool,
}

impl LockOwner {
    /// The service's base URL on its address, once it listens.
    pub fn url(&self) -> Option<String> {
        let scheme = if self.tls { "https" } else { "http" };
        Some(format!("{scheme}://{}", self.addr.as_ref()?))
    }
}

impl std::fmt::Display for LockOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.addr {
            Some(addr) => write!(f, "pid {}, address {addr}", self.pid),
            None => write!(f, "pid {}, still starting", self.pid),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another openvaala is serving this data directory ({owner})")]
    Held { owner: LockOwner },
    #[error("cannot use lock file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The held lock. Dropping it releases the lock.
#[derive(Debug)]
pub struct RuntimeLock {
    file: File,
    path: PathBuf,
}

impl RuntimeLock {
    /// Takes the lock without waiting, or says who holds it.
    pub fn acquire(path: &Path) -> Result<RuntimeLock, LockError> {
        RuntimeLock::take(path, File::try_lock)
    }

    /// Takes the lock in shared mode (cluster mode: several instances serve one data
    /// directory; an embedded service or a `reindex`, which need it alone, are kept out).
    pub fn acquire_shared(path: &Path) -> Result<RuntimeLock, LockError> {
        RuntimeLock::take(path, File::try_lock_shared)
    }

    fn take(
        path: &Path,
        try_lock: fn(&File) -> Result<(), TryLockError>,
    ) -> Result<RuntimeLock, LockError> {
        let io = |source| LockError::Io {
            path: path.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        match try_lock(&file) {
            Ok(()) => Ok(RuntimeLock {
                file,
                path: path.to_owned(),
            }),
            Err(TryLockError::WouldBlock) => Err(LockError::Held {
                owner: read_owner(path).unwrap_or_default(),
            }),
            Err(TryLockError::Error(source)) => Err(io(source)),
        }
    }

    /// Records who holds the lock, once the address is known.
    pub fn write_owner(&mut self, owner: &LockOwner) -> Result<(), LockError> {
        let text = serde_json::to_string(owner).expect("lock owner serializes");
        self.file
            .set_len(0)
            .and_then(|()| self.file.seek(SeekFrom::Start(0)).map(drop))
            .and_then(|()| self.file.write_all(text.as_bytes()))
            .and_then(|()| self.file.sync_data())
            .map_err(|source| LockError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// Reads the owner written in the lock file, if any (it may be stale when nobody holds the lock).
pub fn read_owner(path: &Path) -> Option<LockOwner> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether some process holds the lock now, and who.
pub fn holder(path: &Path) -> Result<Option<LockOwner>, LockError> {
    match RuntimeLock::acquire(path) {
        Ok(_lock) => Ok(None),
        Err(LockError::Held { owner }) => Ok(Some(owner)),
        Err(error) => Err(error),
    }
}

/// Waits (blocking) until nobody holds the lock, up to `timeout`. Returns whether it is free.
pub fn wait_until_free(path: &Path, timeout: std::time::Duration) -> bool {
    let path = path.to_owned();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let free = File::open(&path).and_then(|file| file.lock()).is_ok();
        let _ = sender.send(free);
    });
    receiver.recv_timeout(timeout).unwrap_or(false)
}

/// Cluster mode: where an instance says who it is (`instances/<id>/runtime.json`), since the
/// shared lock file cannot say it for several.
pub fn instance_owner_path(data_dir: &Path, instance: &str) -> PathBuf {
    data_dir
        .join("instances")
        .join(instance)
        .join("runtime.json")
}

/// Cluster mode: the instances of this machine serving `data_dir` now (their process exists).
pub fn instance_owners(data_dir: &Path) -> Vec<LockOwner> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("instances")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| read_owner(&entry.path().join("runtime.json")))
        .filter(|owner| {
            // Alive, and an openvaala (a pid is reused once its process is gone).
            owner.pid > 1 && process_runs(owner.pid)
        })
        .collect()
}

/// Whether a process runs (it exists and is not a zombie) and is an openvaala: a pid is
/// reused once its process is gone.
pub fn process_runs(pid: u32) -> bool {
    let running = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    });
    running
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("openvaala"))
}
