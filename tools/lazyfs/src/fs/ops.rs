//! The FUSE requests, each answered from [`LazyFs`]'s own operations.

use super::*;

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
