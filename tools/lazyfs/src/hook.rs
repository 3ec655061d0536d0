//! `syncfs` and `sync` for a program run on the lazy file system. The kernel does not pass
//! either to a FUSE server (it sends `FUSE_SYNCFS` to virtiofs only), so a program that makes
//! its files durable with one `syncfs` would lose them at every cut, which a disk would not do.
//! [`run`] starts the program under a seccomp filter that hands those two calls to this
//! process first: it writes every pending byte of the mount out (what `syncfs` does on a
//! disk), then lets the call go on. Children of the program inherit the filter.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use crate::CONTROL_NAME;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

fn op(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// syncfs and sync go to the listener; everything else, and any other architecture's calls,
/// run as they would.
fn filter() -> [libc::sock_filter; 7] {
    const LOAD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    const RET: u32 = libc::BPF_RET | libc::BPF_K;
    // Offsets in `struct seccomp_data`: nr at 0, arch at 4.
    [
        op(LOAD, 0, 0, 4),
        op(JEQ, 0, 3, AUDIT_ARCH),
        op(LOAD, 0, 0, 0),
        op(JEQ, 2, 0, libc::SYS_syncfs as u32),
        op(JEQ, 1, 0, libc::SYS_sync as u32),
        op(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
        op(RET, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
    ]
}

/// In the child, between fork and exec: installs the filter and sends its listener to the
/// parent over `socket`. Only async-signal-safe calls, nothing allocated.
fn install(socket: RawFd, program: &[libc::sock_filter; 7]) -> io::Result<()> {
    let empty: libc::sigset_t = unsafe {
        let mut set = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    };
    // SAFETY: a valid set; the parent blocks the signals it forwards, the program must not.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) };
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    let install = || unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    let mut listener = install();
    if listener < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EACCES) {
        // Without CAP_SYS_ADMIN a filter needs no_new_privs.
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
        listener = install();
    }
    if listener < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // Room for one descriptor's control message, aligned as cmsghdr needs.
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; the control buffer is larger than CMSG_SPACE(4) and
    // aligned; CMSG_FIRSTHDR of a buffer that large is not null.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(size_of::<RawFd>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
        libc::CMSG_DATA(header)
            .cast::<RawFd>()
            .write_unaligned(listener as RawFd);
        if libc::sendmsg(socket, &msg, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
        libc::close(listener as RawFd);
    }
    Ok(())
}

fn receive(socket: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 4];
    // SAFETY: as in `install`; the descriptor received is owned from here on.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control) as _;
        if libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) <= 0 {
            return Err(io::Error::other(
                "the program did not hand over its seccomp listener",
            ));
        }
        let header = libc::CMSG_FIRSTHDR(&msg);
        if header.is_null() || (*header).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other("no descriptor in the listener's message"));
        }
        let fd = libc::CMSG_DATA(header).cast::<RawFd>().read_unaligned();
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Whether descriptor `fd` of process `pid` is on the file system whose device is `dev`.
fn on_device(pid: u32, fd: u64, dev: u64) -> bool {
    fs::metadata(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|meta| meta.dev() == dev)
}

/// Answers the filter's notifications until the program and its children are gone.
fn serve(listener: OwnedFd, control: PathBuf, dev: u64) {
    loop {
        // SAFETY: a zeroed notification buffer (the kernel requires it zeroed).
        let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut request,
            )
        };
        if rc < 0 {
            match io::Error::last_os_error().raw_os_error() {
                // Interrupted, or the caller went away before it was read.
                Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                _ => return,
            }
        }
        let whole_system = request.data.nr as libc::c_long == libc::SYS_sync;
        if whole_system || on_device(request.pid, request.data.args[0], dev) {
            let done = OpenOptions::new()
                .write(true)
                .open(&control)
                .and_then(|mut file| file.write_all(b"sync"));
            if let Err(error) = done {
                eprintln!("lazyfs run: cannot sync the mount: {error}");
            }
        }
        // Then the call itself runs (a no-op on FUSE). A caller killed meanwhile makes this
        // fail, which is no error.
        let mut response = libc::seccomp_notif_resp {
            id: request.id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        };
        unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut response,
            )
        };
    }
}

/// Runs `program` with `args`, its `syncfs` and `sync` calls making the lazy file system
/// mounted on `mountpoint` write out its pending data. SIGTERM, SIGINT and SIGHUP sent to
/// this process go to the program; answers its exit status.
pub fn run(mountpoint: &Path, program: &OsStr, args: &[&OsStr]) -> io::Result<ExitStatus> {
    let control = mountpoint.join(CONTROL_NAME);
    fs::metadata(&control).map_err(|error| {
        io::Error::new(
            error.kind(),
            format!("{} is not a lazyfs mount: {error}", mountpoint.display()),
        )
    })?;
    let dev = fs::metadata(mountpoint)?.dev();
    let forwarded = block_signals();
    let (ours, theirs) = UnixStream::pair()?;
    let theirs_fd = theirs.as_raw_fd();
    let filter = filter();
    let mut command = Command::new(program);
    command.args(args);
    // SAFETY: `install` makes only async-signal-safe calls and allocates nothing.
    unsafe { command.pre_exec(move || install(theirs_fd, &filter)) };
    let mut child = command.spawn()?;
    drop(theirs);
    let listener = receive(&ours)?;
    std::thread::spawn(move || serve(listener, control, dev));
    let pid = child.id() as libc::pid_t;
    std::thread::spawn(move || {
        loop {
            let mut signal = 0;
            // SAFETY: a valid set and an out parameter; kill of the child's pid.
            if unsafe { libc::sigwait(&forwarded, &mut signal) } == 0 {
                unsafe { libc::kill(pid, signal) };
            }
        }
    });
    child.wait()
}

fn block_signals() -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}
