//! The small pieces every request uses: errors as errno values, paths through `/proc`,
//! attributes from `stat`, and the control file's.

use super::*;

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in one request must not wedge every later one.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn errno(error: io::Error) -> Errno {
    Errno::from(error)
}

pub(super) fn last_error() -> Errno {
    errno(io::Error::last_os_error())
}

pub(super) fn cstr(name: &OsStr) -> Result<CString, Errno> {
    CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)
}

/// The path through which the kernel reopens what an `O_PATH` descriptor names.
pub(super) fn proc_path(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}

pub(super) fn fstat(fd: &OwnedFd) -> Result<libc::stat, Errno> {
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

pub(super) fn kind_of(mode: libc::mode_t) -> FileType {
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

pub(super) fn time(secs: i64, nanos: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nanos as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + Duration::from_nanos(nanos as u64)
    }
}

pub(super) fn timespec(at: Option<TimeOrNow>) -> libc::timespec {
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

pub(super) fn attr_of(ino: u64, st: &libc::stat, data: Option<&FileData>) -> FileAttr {
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

pub(super) fn control_attr() -> FileAttr {
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

pub(super) fn is_control(parent: INodeNo, name: &OsStr) -> bool {
    parent == INodeNo::ROOT && name == OsStr::new(CONTROL_NAME)
}
