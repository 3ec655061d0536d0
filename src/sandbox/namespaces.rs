//! The namespace layer, set up by the launcher before the program starts. The launcher makes a
//! user namespace of its own (no privilege needed, and none gained outside it: the service's
//! user is mapped to itself), and in it:
//! - a mount namespace whose changes never reach the host, where the service's state and the
//!   user's session daemons are covered: a directory by an empty read-only tmpfs, a file or a
//!   socket by `/dev/null`, leaving visible only a working directory inside them;
//! - a PID namespace: its first process (the launcher's own `init`) mounts a `/proc` that shows
//!   only the namespace, and caps its processes with the namespace's `pid_max`; when that init
//!   ends, the kernel kills every process left in the namespace, `setsid` or not;
//! - with the network off, a network namespace whose only interface is its own loopback: the
//!   host's loopback (and the service on it), every other host and every abstract UNIX socket
//!   outside are out of reach, by any protocol;
//! - an IPC namespace, so System V and POSIX message queues are the call's own.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::spec::LaunchSpec;

/// The least `pid_max` a namespace takes (the kernel's floor).
const PID_MAX_FLOOR: u32 = 301;

/// Enters the new namespaces (but the PID namespace, which only the next child enters) and
/// prepares the mounts and the network. Call in the single-threaded launcher.
pub(super) fn enter(spec: &LaunchSpec) -> io::Result<()> {
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut flags =
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    if !spec.network {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare only changes this (single-threaded) process's namespaces.
    check(unsafe { libc::unshare(flags) }, "unshare")?;
    write("/proc/self/setgroups", "deny")?;
    write("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    // Nothing mounted here reaches the host, and nothing the host mounts later comes in.
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    for path in &spec.hidden {
        cover(path, &spec.visible)?;
    }
    if !spec.network {
        loopback_up()?;
    }
    Ok(())
}

/// The PID namespace's side, run by its first process: a `/proc` of the namespace, and the
/// namespace's process cap. Returns whether the cap took (kernels before 6.14 have one
/// `pid_max` for the whole machine, which a namespace cannot change).
pub(super) fn init_pid_namespace(processes: u32) -> io::Result<bool> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount(Some("proc"), Path::new("/proc"), Some("proc"), flags, None)?;
    let cap = processes.saturating_add(1).max(PID_MAX_FLOOR);
    Ok(write("/proc/sys/kernel/pid_max", &cap.to_string()).is_ok())
}

/// Hides `path` unless it is visible: a directory with a visible path beneath it is covered
/// entry by entry, so the way to that path stays.
fn cover(path: &Path, visible: &[PathBuf]) -> io::Result<()> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    if visible.iter().any(|shown| shown == path) {
        return Ok(());
    }
    if metadata.is_dir() && visible.iter().any(|shown| shown.starts_with(path)) {
        for entry in std::fs::read_dir(path)? {
            cover(&entry?.path(), visible)?;
        }
        return Ok(());
    }
    if metadata.is_dir() {
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            flags,
            Some("size=4k,mode=0555"),
        )
    } else {
        mount(Some("/dev/null"), path, None, libc::MS_BIND, None)
    }
}

/// Brings the new network namespace's loopback up, so programs of the call can still talk to
/// each other over `127.0.0.1` (a test suite's local server, say).
fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain socket call; the descriptor is closed below.
    let socket = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(socket, "socket")?;
    // SAFETY: ifreq is plain data, valid when zeroed.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: these ioctls read and write the ifreq given; the flags are the union's member
    // they use.
    let result = unsafe {
        let mut done = libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request);
        if done == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            done = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        }
        done
    };
    let outcome = check(result, "bringing the loopback up");
    // SAFETY: the descriptor is ours and closed once.
    unsafe { libc::close(socket) };
    outcome
}

fn mount(
    source: Option<&str>,
    target: &Path,
    kind: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let text = |text: &str| CString::new(text).map_err(io::Error::other);
    let source = source.map(text).transpose()?;
    let kind = kind.map(text).transpose()?;
    let data = data.map(text).transpose()?;
    let target_c = CString::new(target.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let pointer = |text: &Option<CString>| text.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    let result = unsafe {
        libc::mount(
            pointer(&source),
            target_c.as_ptr(),
            pointer(&kind),
            flags,
            pointer(&data).cast(),
        )
    };
    check(result, &format!("mount on {}", target.display()))
}

fn write(path: &str, content: &str) -> io::Result<()> {
    std::fs::write(path, content)
        .map_err(|error| io::Error::new(error.kind(), format!("writing {path}: {error}")))
}

fn check(result: libc::c_int, what: &str) -> io::Result<()> {
    if result < 0 {
        let error = io::Error::last_os_error();
        return Err(io::Error::new(error.kind(), format!("{what}: {error}")));
    }
    Ok(())
}
