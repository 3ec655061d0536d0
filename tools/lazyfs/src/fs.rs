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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in one request must not wedge every later one.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn errno(error: io::Error) -> Errno {
    Errno::from(error)
}

fn last_error() -> Errno {
    errno(io::Error::last_os_error())
}

fn cstr(name: &OsStr) -> Result<CString, Errno> {
    CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)
}

/// The path through which the kernel reopens what an `O_PATH` descriptor names.
fn proc_path(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}

fn fstat(fd: &OwnedFd) -> Result<libc::stat, Errno> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let empty = c"";
    // SAFETY: a valid descriptor, an empty path with AT_EMPTY_PATH, and a buffer of the type.
    let rc = unsafe {
        libc::fstatat(
            fd.as_raw_fd(),
            empty.as_ptr(),
            &mut st,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 { Ok(st) } else { Err(last_error()) }
}

fn kind_of(mode: libc::mode_t) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn time(secs: i64, nanos: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nanos as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + Duration::from_nanos(nanos as u64)
    }
}

fn timespec(at: Option<TimeOrNow>) -> libc::timespec {
    match at {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(at)) => {
            let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec {
                tv_sec: since.as_secs() as libc::time_t,
                tv_nsec: since.subsec_nanos() as libc::c_long,
            }
        }
    }
}

fn attr_of(ino: u64, st: &libc::stat, data: Option<&FileData>) -> FileAttr {
    let mut size = st.st_size as u64;
    let mut mtime = time(st.st_mtime, st.st_mtime_nsec);
    let mut ctime = time(st.st_ctime, st.st_ctime_nsec);
    if let Some(data) = data {
        size = size.max(data.pending.end());
        if let Some(pending) = data.mtime {
            mtime = mtime.max(pending);
            ctime = ctime.max(pending);
        }
    }
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime,
        ctime,
        crtime: UNIX_EPOCH,
        kind: kind_of(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: 4096,
        flags: 0,
    }
}

fn control_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(CONTROL_INO),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0o600,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn is_control(parent: INodeNo, name: &OsStr) -> bool {
    parent == INodeNo::ROOT && name == OsStr::new(CONTROL_NAME)
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

/// A reply for the result of a call that answers an entry.
fn entry(reply: ReplyEntry, result: Result<FileAttr, Errno>) {
    match result {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(error) => reply.error(error),
    }
}

fn empty(reply: ReplyEmpty, rc: i32) {
    if rc < 0 {
        reply.error(last_error())
    } else {
        reply.ok()
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if is_control(parent, name) {
            return reply.entry(&TTL, &control_attr(), Generation(0));
        }
        entry(reply, self.look_up(parent, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.forget_node(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(error) => reply.error(error),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let changes = Changes {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.set_attr(ino, changes) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(error) => reply.error(error),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let fd = match self.fd(ino) {
            Ok(fd) => fd,
            Err(error) => return reply.error(error),
        };
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        let empty = c"";
        // SAFETY: a valid descriptor, an empty path (the link itself) and a buffer of its size.
        let n = unsafe {
            libc::readlinkat(
                fd.as_raw_fd(),
                empty.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return reply.error(last_error());
        }
        reply.data(&buf[..n as usize]);
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let result = self.make(parent, name, |dir, name| {
            // SAFETY: a valid directory descriptor and a NUL-terminated name.
            unsafe { libc::mknodat(dir, name.as_ptr(), mode & !umask, libc::dev_t::from(rdev)) }
        });
        entry(reply, result);
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let result = self.make(parent, name, |dir, name| {
            // SAFETY: a valid directory descriptor and a NUL-terminated name.
            unsafe { libc::mkdirat(dir, name.as_ptr(), mode & !umask) }
        });
        entry(reply, result);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if is_control(parent, name) {
            return reply.error(Errno::EPERM);
        }
        let (dir, cname) = match self.fd(parent).and_then(|dir| Ok((dir, cstr(name)?))) {
            Ok(found) => found,
            Err(error) => return reply.error(error),
        };
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        empty(reply, unsafe {
            libc::unlinkat(dir.as_raw_fd(), cname.as_ptr(), 0)
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (dir, cname) = match self.fd(parent).and_then(|dir| Ok((dir, cstr(name)?))) {
            Ok(found) => found,
            Err(error) => return reply.error(error),
        };
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        empty(reply, unsafe {
            libc::unlinkat(dir.as_raw_fd(), cname.as_ptr(), libc::AT_REMOVEDIR)
        });
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = match cstr(target.as_os_str()) {
            Ok(target) => target,
            Err(error) => return reply.error(error),
        };
        let result = self.make(parent, link_name, |dir, name| {
            // SAFETY: NUL-terminated strings and a valid directory descriptor.
            unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) }
        });
        entry(reply, result);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if is_control(parent, name) || is_control(newparent, newname) {
            return reply.error(Errno::EPERM);
        }
        let found = (|| {
            Ok::<_, Errno>((
                self.fd(parent)?,
                cstr(name)?,
                self.fd(newparent)?,
                cstr(newname)?,
            ))
        })();
        let (from_dir, from, to_dir, to) = match found {
            Ok(found) => found,
            Err(error) => return reply.error(error),
        };
        // SAFETY: valid directory descriptors and NUL-terminated names.
        empty(reply, unsafe {
            libc::renameat2(
                from_dir.as_raw_fd(),
                from.as_ptr(),
                to_dir.as_raw_fd(),
                to.as_ptr(),
                flags.bits(),
            )
        });
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let source = match self.fd(ino) {
            Ok(fd) => proc_path(&fd),
            Err(error) => return reply.error(error),
        };
        let result = self.make(newparent, newname, |dir, name| {
            // SAFETY: NUL-terminated paths and a valid directory descriptor.
            unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    source.as_ptr(),
                    dir,
                    name.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            }
        });
        entry(reply, result);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == CONTROL_INO {
            // Never cached: each read asks for the figures of the moment.
            return reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
        }
        // Data goes through the node, not a handle; no flag keeps the kernel's cached pages
        // of an earlier open (a cut may have changed them).
        match self.fd(ino) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(error) => reply.error(error),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 == CONTROL_INO {
            let text = self.control_text().into_bytes();
            let start = (offset as usize).min(text.len());
            let end = (start + size as usize).min(text.len());
            return reply.data(&text[start..end]);
        }
        let (fd, data) = match self.data(ino) {
            Ok(found) => found,
            Err(error) => return reply.error(error),
        };
        let mut data = lock(&data);
        let st = match fstat(&fd) {
            Ok(st) => st,
            Err(error) => return reply.error(error),
        };
        let size_now = (st.st_size as u64).max(data.pending.end());
        if offset >= size_now {
            return reply.data(&[]);
        }
        let mut buf = vec![0; (size as u64).min(size_now - offset) as usize];
        let file = match Self::open_backing(&fd, &mut data) {
            Ok(file) => file,
            Err(error) => return reply.error(error),
        };
        // What the backing file holds (a short read leaves zeros: a hole, or a range only
        // pending data covers), then the pending data over it.
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return reply.error(errno(error)),
            }
        }
        data.pending.overlay(offset, &mut buf);
        reply.data(&buf);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        bytes: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino.0 == CONTROL_INO {
            return match self.control(bytes) {
                Ok(()) => reply.written(bytes.len() as u32),
                Err(error) => reply.error(error),
            };
        }
        let (_, data) = match self.data(ino) {
            Ok(found) => found,
            Err(error) => return reply.error(error),
        };
        let mut data = lock(&data);
        data.pending.write(offset, bytes);
        data.mtime = Some(SystemTime::now());
        reply.written(bytes.len() as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() makes nothing durable.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if ino.0 == CONTROL_INO {
            return reply.ok();
        }
        let (fd, data) = match self.data(ino) {
            Ok(found) => found,
            Err(error) => return reply.error(error),
        };
        let written = Self::persist(&fd, &mut lock(&data));
        match written {
            Ok(written) => {
                lock(&self.figures).synced_bytes += written;
                reply.ok();
            }
            Err(error) => reply.error(error),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.list(ino) {
            Ok(listing) => {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                lock(&self.listings).insert(fh, listing);
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(error) => reply.error(error),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let listings = lock(&self.listings);
        let Some(listing) = listings.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (index, (ino, kind, name)) in listing.iter().enumerate().skip(offset as usize) {
            // The offset given is where the next call starts.
            if reply.add(INodeNo(*ino), index as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.listings).remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Names are on disk as soon as they change.
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let path = match CString::new(self.root.as_os_str().as_bytes()) {
            Ok(path) => path,
            Err(_) => return reply.error(Errno::EINVAL),
        };
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a buffer of the type.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } < 0 {
            return reply.error(last_error());
        }
        reply.statfs(
            st.f_blocks,
            st.f_bfree,
            st.f_bavail,
            st.f_files,
            st.f_ffree,
            st.f_bsize as u32,
            st.f_namemax as u32,
            st.f_frsize as u32,
        );
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let truncate = flags & libc::O_TRUNC != 0;
        let result = self.make(parent, name, |dir, name| {
            let flags = libc::O_CREAT
                | libc::O_WRONLY
                | libc::O_CLOEXEC
                | (flags & (libc::O_EXCL | libc::O_TRUNC));
            // SAFETY: a valid directory descriptor and a NUL-terminated name.
            let fd = unsafe { libc::openat(dir, name.as_ptr(), flags, mode & !umask) };
            if fd >= 0 {
                unsafe { libc::close(fd) };
            }
            fd
        });
        let attr = match result {
            Ok(attr) if truncate => {
                // An existing file truncated by the open loses its pending data too.
                if let Ok((_, data)) = self.data(attr.ino) {
                    let mut data = lock(&data);
                    data.pending.clear();
                    data.mtime = None;
                }
                self.attr(attr.ino)
            }
            other => other,
        };
        match attr {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(error) => reply.error(error),
        }
    }
}
