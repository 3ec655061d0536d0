//! The file system: every request but a file's data goes straight to the backing directory;
//! a file's data waits in memory ([`Extents`]) until an fsync of that file writes it there.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, FileExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    Notifier, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::extents::Extents;

mod ops;
mod support;

use support::*;

/// The control file, in the root of the mount: write `cut` to drop every unsynced byte (a
/// power cut), `sync` to write them all out; read it for the figures. The write returns once
/// it is done, so a caller needs no other sign. Not listed by readdir, so a walk of the mount
/// never meets it.
pub const CONTROL_NAME: &str = ".lazyfs-control";
const CONTROL_INO: u64 = 2;

/// Nothing is cached by the kernel past the request that fetched it: after a cut, sizes and
/// names must come from here again, not from what the kernel saw before it.
const TTL: Duration = Duration::ZERO;

/// One object of the backing directory the kernel knows by a number.
struct Node {
    /// An `O_PATH` descriptor: the `*at` calls start from it, so renames elsewhere never
    /// leave a stale path behind, and it keeps the backing inode (and its number) alive.
    fd: Arc<OwnedFd>,
    /// The backing (device, inode): a name looked up again finds the same node, hard links
    /// included.
    key: (u64, u64),
    /// How many times the kernel was handed this number and has not forgotten it.
    lookups: u64,
    /// Regular files only: the unsynced data.
    data: Option<Arc<Mutex<FileData>>>,
}

#[derive(Default)]
struct FileData {
    pending: Extents,
    /// The modification time of the newest unsynced write, reported until it is synced (a
    /// scan that compares stat fields must see the file changed).
    mtime: Option<SystemTime>,
    /// The backing file opened for reading and writing, at first need.
    file: Option<File>,
}

struct Table {
    nodes: HashMap<u64, Node>,
    by_key: HashMap<(u64, u64), u64>,
    next_ino: u64,
}

/// What a setattr request changes (`None`: left as it is).
struct Changes {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

/// What `opendir` read: the entries, served by offset.
type Listing = Vec<(u64, FileType, OsString)>;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    pub pending_files: u64,
    pub pending_bytes: u64,
    pub cuts: u64,
    pub dropped_bytes: u64,
    pub synced_bytes: u64,
}

pub struct LazyFs {
    root: PathBuf,
    /// Lock order: `table` before any file's data, never the other way round.
    table: Mutex<Table>,
    listings: Mutex<HashMap<u64, Listing>>,
    next_fh: AtomicU64,
    figures: Mutex<Figures>,
    /// Set once mounted: a cut tells the kernel to forget the pages and sizes it cached of the
    /// files whose data it dropped.
    notifier: Arc<OnceLock<Notifier>>,
}

impl LazyFs {
    /// A file system over `root` (an existing directory).
    pub fn new(root: &Path) -> io::Result<Self> {
        let path = CString::new(root.as_os_str().as_bytes())?;
        // SAFETY: a NUL-terminated path; the descriptor is owned from here on.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let st = fstat(&fd).map_err(|e| io::Error::from_raw_os_error(e.code()))?;
        let root_node = Node {
            fd: Arc::new(fd),
            key: (st.st_dev, st.st_ino),
            lookups: 1,
            data: None,
        };
        let mut table = Table {
            nodes: HashMap::new(),
            by_key: HashMap::new(),
            next_ino: CONTROL_INO + 1,
        };
        table.by_key.insert(root_node.key, INodeNo::ROOT.0);
        table.nodes.insert(INodeNo::ROOT.0, root_node);
        Ok(Self {
            root: root.to_owned(),
            table: Mutex::new(table),
            listings: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            figures: Mutex::new(Figures::default()),
            notifier: Arc::new(OnceLock::new()),
        })
    }

    /// Where the mount's session puts its notifier, so a cut can invalidate the kernel's cache.
    pub fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.notifier.clone()
    }

    fn fd(&self, ino: INodeNo) -> Result<Arc<OwnedFd>, Errno> {
        lock(&self.table)
            .nodes
            .get(&ino.0)
            .map(|node| node.fd.clone())
            .ok_or(Errno::ENOENT)
    }

    fn data(&self, ino: INodeNo) -> Result<(Arc<OwnedFd>, Arc<Mutex<FileData>>), Errno> {
        let table = lock(&self.table);
        let node = table.nodes.get(&ino.0).ok_or(Errno::ENOENT)?;
        let data = node.data.clone().ok_or(Errno::EISDIR)?;
        Ok((node.fd.clone(), data))
    }

    /// Finds `name` in `parent`, makes it known (one more lookup) and answers its attributes.
    fn look_up(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
        let dir = self.fd(parent)?;
        let cname = cstr(name)?;
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let raw = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                cname.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(last_error());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let st = fstat(&fd)?;
        let key = (st.st_dev, st.st_ino);
        let mut table = lock(&self.table);
        if let Some(&ino) = table.by_key.get(&key) {
            let node = table.nodes.get_mut(&ino).expect("a keyed node exists");
            node.lookups += 1;
            let data = node.data.clone();
            drop(table);
            let guard = data.as_ref().map(|data| lock(data));
            return Ok(attr_of(ino, &st, guard.as_deref()));
        }
        let ino = table.next_ino;
        table.next_ino += 1;
        let regular = kind_of(st.st_mode) == FileType::RegularFile;
        let data = regular.then(|| Arc::new(Mutex::new(FileData::default())));
        table.nodes.insert(
            ino,
            Node {
                fd: Arc::new(fd),
                key,
                lookups: 1,
                data,
            },
        );
        table.by_key.insert(key, ino);
        Ok(attr_of(ino, &st, None))
    }

    fn attr(&self, ino: INodeNo) -> Result<FileAttr, Errno> {
        if ino.0 == CONTROL_INO {
            return Ok(control_attr());
        }
        let (fd, data) = {
            let table = lock(&self.table);
            let node = table.nodes.get(&ino.0).ok_or(Errno::ENOENT)?;
            (node.fd.clone(), node.data.clone())
        };
        let st = fstat(&fd)?;
        let guard = data.as_ref().map(|data| lock(data));
        Ok(attr_of(ino.0, &st, guard.as_deref()))
    }

    /// Drops a node the kernel no longer knows, unless it still holds unsynced data of a file
    /// that has a name: that data must outlive the kernel's reference, as a page cache's would.
    fn forget_node(&self, ino: u64, count: u64) {
        let mut table = lock(&self.table);
        let Some(node) = table.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(count);
        if node.lookups > 0 || ino == INodeNo::ROOT.0 {
            return;
        }
        let keep = node.data.as_ref().is_some_and(|data| {
            let pending = !lock(data).pending.is_empty();
            pending && fstat(&node.fd).is_ok_and(|st| st.st_nlink > 0)
        });
        if !keep {
            let node = table.nodes.remove(&ino).expect("just seen");
            table.by_key.remove(&node.key);
        }
    }

    fn open_backing<'a>(fd: &OwnedFd, data: &'a mut FileData) -> Result<&'a File, Errno> {
        if data.file.is_none() {
            let path = proc_path(fd);
            // SAFETY: a NUL-terminated path; the descriptor is owned from here on.
            let mut raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
            if raw < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ETXTBSY) {
                // A program running from the file: it can still be read.
                raw = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            }
            if raw < 0 {
                return Err(last_error());
            }
            data.file = Some(unsafe { File::from_raw_fd(raw) });
        }
        Ok(data.file.as_ref().expect("opened above"))
    }

    /// Writes a file's unsynced data to the backing file: what an fsync makes durable.
    fn persist(fd: &OwnedFd, data: &mut FileData) -> Result<u64, Errno> {
        if data.pending.is_empty() && data.mtime.is_none() {
            return Ok(0);
        }
        let pending = std::mem::take(&mut data.pending);
        let mtime = data.mtime.take();
        let file = Self::open_backing(fd, data)?;
        for (offset, bytes) in pending.iter() {
            file.write_all_at(bytes, offset).map_err(errno)?;
        }
        if let Some(mtime) = mtime {
            let times = [
                timespec(None),
                timespec(Some(TimeOrNow::SpecificTime(mtime))),
            ];
            // SAFETY: an open descriptor and two timespecs.
            unsafe { libc::futimens(file.as_raw_fd(), times.as_ptr()) };
        }
        Ok(pending.len())
    }

    fn regular_files(&self) -> Vec<(u64, Arc<OwnedFd>, Arc<Mutex<FileData>>)> {
        lock(&self.table)
            .nodes
            .iter()
            .filter_map(|(ino, node)| Some((*ino, node.fd.clone(), node.data.clone()?)))
            .collect()
    }

    /// The power cut: every unsynced byte of every file is forgotten. Files keep what was
    /// synced; one created and never synced is empty.
    pub fn cut(&self) -> u64 {
        let mut dropped = 0;
        let mut touched = Vec::new();
        for (ino, _, data) in self.regular_files() {
            let mut data = lock(&data);
            if !data.pending.is_empty() || data.mtime.is_some() {
                dropped += data.pending.len();
                data.pending.clear();
                data.mtime = None;
                touched.push(ino);
            }
        }
        self.drop_orphans();
        // The kernel may hold pages and a size of what was just dropped: it must read them
        // again. Nothing else runs on the mount during a cut (the caller stopped every writer),
        // so invalidating here cannot wait on a request of this file system.
        if let Some(notifier) = self.notifier.get() {
            for ino in touched {
                let _ = notifier.inval_inode(INodeNo(ino), 0, 0);
            }
        }
        let mut figures = lock(&self.figures);
        figures.cuts += 1;
        figures.dropped_bytes += dropped;
        dropped
    }

    /// Writes every file's unsynced data out, as `sync` would on a disk.
    pub fn sync_all(&self) -> Result<u64, Errno> {
        let mut written = 0;
        for (_, fd, data) in self.regular_files() {
            written += Self::persist(&fd, &mut lock(&data))?;
        }
        self.drop_orphans();
        lock(&self.figures).synced_bytes += written;
        Ok(written)
    }

    /// Nodes the kernel forgot that were kept only for their unsynced data, now gone.
    fn drop_orphans(&self) {
        let mut table = lock(&self.table);
        let orphans: Vec<u64> = table
            .nodes
            .iter()
            .filter(|(ino, node)| {
                node.lookups == 0
                    && **ino != INodeNo::ROOT.0
                    && node
                        .data
                        .as_ref()
                        .is_none_or(|data| lock(data).pending.is_empty())
            })
            .map(|(ino, _)| *ino)
            .collect();
        for ino in orphans {
            let node = table.nodes.remove(&ino).expect("just listed");
            table.by_key.remove(&node.key);
        }
    }

    pub fn figures(&self) -> Figures {
        let mut figures = *lock(&self.figures);
        for (_, _, data) in self.regular_files() {
            let data = lock(&data);
            if !data.pending.is_empty() {
                figures.pending_files += 1;
                figures.pending_bytes += data.pending.len();
            }
        }
        figures
    }

    fn control_text(&self) -> String {
        let f = self.figures();
        format!(
            "pending_files {}\npending_bytes {}\ncuts {}\ndropped_bytes {}\nsynced_bytes {}\n",
            f.pending_files, f.pending_bytes, f.cuts, f.dropped_bytes, f.synced_bytes
        )
    }

    fn control(&self, command: &[u8]) -> Result<(), Errno> {
        match command.trim_ascii() {
            b"cut" => {
                self.cut();
                Ok(())
            }
            b"sync" => self.sync_all().map(drop),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Runs a `*at` call that makes a new name in `parent`, then looks the name up.
    fn make(
        &self,
        parent: INodeNo,
        name: &OsStr,
        call: impl FnOnce(i32, &CString) -> i32,
    ) -> Result<FileAttr, Errno> {
        if is_control(parent, name) {
            return Err(Errno::EEXIST);
        }
        let dir = self.fd(parent)?;
        let cname = cstr(name)?;
        if call(dir.as_raw_fd(), &cname) < 0 {
            return Err(last_error());
        }
        self.look_up(parent, name)
    }

    fn set_attr(&self, ino: INodeNo, changes: Changes) -> Result<FileAttr, Errno> {
        let Changes {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = changes;
        if ino.0 == CONTROL_INO {
            // `echo cut > control` truncates it first: nothing to do.
            return Ok(control_attr());
        }
        let (fd, data) = {
            let table = lock(&self.table);
            let node = table.nodes.get(&ino.0).ok_or(Errno::ENOENT)?;
            (node.fd.clone(), node.data.clone())
        };
        let path = proc_path(&fd);
        if let Some(mode) = mode {
            // SAFETY: a NUL-terminated path.
            if unsafe { libc::chmod(path.as_ptr(), mode & 0o7777) } < 0 {
                return Err(last_error());
            }
        }
        if uid.is_some() || gid.is_some() {
            let empty = c"";
            let (uid, gid) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
            // SAFETY: a valid descriptor and an empty path with AT_EMPTY_PATH.
            let rc = unsafe {
                libc::fchownat(
                    fd.as_raw_fd(),
                    empty.as_ptr(),
                    uid,
                    gid,
                    libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            if rc < 0 {
                return Err(last_error());
            }
        }
        if let Some(size) = size {
            let data = data.as_ref().ok_or(Errno::EISDIR)?;
            let mut data = lock(data);
            // A truncation is metadata: it is on disk at once, whatever it leaves pending.
            let file = Self::open_backing(&fd, &mut data)?;
            file.set_len(size).map_err(errno)?;
            data.pending.truncate(size);
        }
        if atime.is_some() || mtime.is_some() {
            let times = [timespec(atime), timespec(mtime)];
            // SAFETY: a NUL-terminated path and two timespecs.
            if unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) } < 0 {
                return Err(last_error());
            }
            if let (Some(data), Some(_)) = (&data, mtime) {
                // A time set by hand is the file's from now on, not the last write's.
                let mut data = lock(data);
                if data.mtime.is_some() {
                    let st = fstat(&fd)?;
                    data.mtime = Some(time(st.st_mtime, st.st_mtime_nsec));
                }
            }
        }
        self.attr(ino)
    }

    fn list(&self, ino: INodeNo) -> Result<Listing, Errno> {
        let fd = self.fd(ino)?;
        let path = PathBuf::from(OsStr::from_bytes(proc_path(&fd).as_bytes()));
        let mut entries = vec![
            (ino.0, FileType::Directory, OsString::from(".")),
            (ino.0, FileType::Directory, OsString::from("..")),
        ];
        for entry in std::fs::read_dir(&path).map_err(errno)? {
            let entry = entry.map_err(errno)?;
            let kind = entry.file_type().map_err(errno)?;
            let kind = if kind.is_dir() {
                FileType::Directory
            } else if kind.is_symlink() {
                FileType::Symlink
            } else if kind.is_file() {
                FileType::RegularFile
            } else {
                FileType::NamedPipe
            };
            entries.push((entry.ino(), kind, entry.file_name()));
        }
        Ok(entries)
    }
}
