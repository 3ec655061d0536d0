//! The launcher: the service's own binary started again (`/proc/self/exe`) as a small process
//! that sets the sandbox up and then becomes the program. A fresh, single-threaded process can
//! make namespaces, and it costs the same whatever the service's memory (a fork of the service
//! would copy its page tables).
//!
//! With namespaces, three processes take part:
//! 1. the launcher, started by the service and leading the call's process group, enters the
//!    new namespaces, forks, waits, and ends as the program ended (the same exit code, or the
//!    same signal), so the service sees the program's end;
//! 2. its child is the PID namespace's first process (`init`): it mounts the namespace's
//!    `/proc`, leaves the terminal's session, forks the program, reaps whatever is orphaned in
//!    the namespace, and reports the program's end; when it exits the kernel kills everything
//!    left in the namespace. It dies with the launcher (`PR_SET_PDEATHSIG`), so a kill of the
//!    call's process group ends the whole namespace;
//! 3. the program, confined (limits, Landlock, no privileges, seccomp) and then executed.
//!
//! Without namespaces the launcher forks the confined program itself, as a subreaper, and when
//! the program ends it kills whatever the program left behind.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use super::spec::LaunchSpec;
use super::{landlock, limits, namespaces, seccomp};

/// The first argument that makes the binary a launcher.
const LAUNCHER_ARG: &str = "__openvaala_sandbox_exec";
/// Exit codes of a launcher that could not do its work, as a shell's for a command that could
/// not run (126) or was not found (127).
const SANDBOX_FAILED: i32 = 126;
const EXEC_FAILED: i32 = 127;

/// Set when this process's binary runs [`launcher_main`], so it can be its own launcher.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Call first thing in `main`, before any thread starts: in a launcher this sets the sandbox up
/// and becomes the program (it returns only the exit code of the program, or of a failure);
/// anywhere else it returns `None` and lets the service start sandboxed programs through this
/// binary.
pub fn launcher_main() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|first| first != LAUNCHER_ARG) {
        ENABLED.store(true, Ordering::Relaxed);
        return None;
    }
    Some(launch(args.next()))
}

/// Whether this binary can be its own launcher.
pub(super) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The command that runs `spec` through a launcher.
pub(super) fn command(spec: &LaunchSpec) -> Result<tokio::process::Command, String> {
    let mut launcher = tokio::process::Command::new("/proc/self/exe");
    launcher.arg(LAUNCHER_ARG).arg(encode(spec)?);
    Ok(launcher)
}

/// Runs `spec` through a launcher and waits: its standard output, or why it failed.
pub(super) fn run_to_end(spec: &LaunchSpec) -> Result<String, String> {
    let output = std::process::Command::new("/proc/self/exe")
        .arg(LAUNCHER_ARG)
        .arg(encode(spec)?)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(super::env::tool_environment(&[]))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|error| format!("could not start the launcher: {error}"))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
}

fn encode(spec: &LaunchSpec) -> Result<String, String> {
    serde_json::to_string(spec).map_err(|error| format!("the sandbox's settings: {error}"))
}

/// The launcher's work: the spec is the one argument.
fn launch(argument: Option<OsString>) -> ExitCode {
    let spec: Option<LaunchSpec> = argument
        .and_then(|text| text.into_string().ok())
        .and_then(|text| serde_json::from_str(&text).ok());
    let Some(spec) = spec else {
        eprintln!("openvaala: bad launcher arguments");
        return ExitCode::from(SANDBOX_FAILED as u8);
    };
    let ended = if spec.namespaces {
        in_namespaces(&spec)
    } else {
        supervised(&spec)
    };
    match ended {
        Ok(status) => end_as(status),
        Err(error) => {
            eprintln!(
                "openvaala: the sandbox could not be set up ({error}); the command did not run"
            );
            ExitCode::from(SANDBOX_FAILED as u8)
        }
    }
}

/// Enters the namespaces and runs the program under the namespace's init; the program's wait
/// status.
fn in_namespaces(spec: &LaunchSpec) -> io::Result<libc::c_int> {
    namespaces::enter(spec)?;
    // The init reports the program's end through `status`; `alive` tells it the launcher still
    // runs (it reads the end of the pipe once the launcher is gone).
    let (status_read, status_write) = pipe()?;
    let (alive_read, alive_write) = pipe()?;
    match fork()? {
        0 => {
            drop(status_read);
            drop(alive_write);
            init(spec, status_write, alive_read)
        }
        init_pid => {
            drop(status_write);
            drop(alive_read);
            let init_status = wait_for(init_pid)?;
            let mut reported = [0u8; 4];
            // SAFETY: reads at most 4 bytes into the buffer.
            let read =
                unsafe { libc::read(status_read.as_raw_fd(), reported.as_mut_ptr().cast(), 4) };
            drop(alive_write);
            Ok(if read == 4 {
                libc::c_int::from_ne_bytes(reported)
            } else {
                init_status
            })
        }
    }
}

/// The PID namespace's first process. Never returns: it exits when the program has ended, and
/// the kernel then kills everything else in the namespace.
fn init(spec: &LaunchSpec, status: OwnedFd, alive: OwnedFd) -> ! {
    // SAFETY: prctl and setsid only change this process's own state.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        // Out of the terminal's session: no program of the call can open the service's
        // terminal and type into it.
        libc::setsid();
    }
    // The launcher may have died before the line above took effect.
    if launcher_gone(&alive) {
        exit(SANDBOX_FAILED);
    }
    if let Err(error) = namespaces::init_pid_namespace(spec.limits.processes) {
        eprintln!("openvaala: the sandbox could not be set up ({error}); the command did not run");
        exit(SANDBOX_FAILED);
    }
    let program = match fork() {
        Ok(0) => {
            drop(status);
            drop(alive);
            exec_confined(spec)
        }
        Ok(pid) => pid,
        Err(error) => {
            eprintln!("openvaala: could not start the command: {error}");
            exit(SANDBOX_FAILED);
        }
    };
    // This process keeps no privilege while it waits.
    let _ = limits::drop_privileges();
    loop {
        let mut wait_status = 0;
        // SAFETY: waits for any child of this process.
        let pid = unsafe { libc::waitpid(-1, &mut wait_status, 0) };
        if pid == program {
            let bytes = wait_status.to_ne_bytes();
            // SAFETY: writes 4 bytes from the buffer.
            unsafe { libc::write(status.as_raw_fd(), bytes.as_ptr().cast(), 4) };
            exit(0);
        }
        if pid < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            exit(SANDBOX_FAILED);
        }
    }
}

fn launcher_gone(alive: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: alive.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one descriptor without waiting.
    unsafe { libc::poll(&mut poll, 1, 0) != 0 }
}

/// Without namespaces: the program as a child of this subreaper, and whatever it leaves behind
/// killed when it ends.
fn supervised(spec: &LaunchSpec) -> io::Result<libc::c_int> {
    // SAFETY: marks this process as the reaper of its orphaned descendants.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
    let program = match fork()? {
        0 => exec_confined(spec),
        pid => pid,
    };
    let status = wait_for(program)?;
    kill_descendants();
    Ok(status)
}

/// Kills this process's children until none is left: each killed child's own children become
/// this subreaper's, and are found in the next round.
fn kill_descendants() {
    loop {
        let children =
            std::fs::read_to_string(format!("/proc/self/task/{}/children", std::process::id()))
                .unwrap_or_default();
        let pids: Vec<libc::pid_t> = children
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            // SAFETY: signals and reaps a child of this process.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// Confines this process and becomes the program; exits 126 if the sandbox cannot be applied
/// and 127 if the program cannot be started.
fn exec_confined(spec: &LaunchSpec) -> ! {
    if let Err(error) = confine(spec) {
        eprintln!("openvaala: the sandbox could not be applied ({error}); the command did not run");
        exit(SANDBOX_FAILED);
    }
    let error = std::process::Command::new(&spec.argv[0])
        .args(&spec.argv[1..])
        .exec();
    eprintln!("openvaala: could not start {}: {error}", spec.argv[0]);
    exit(EXEC_FAILED)
}

/// Every layer that applies to the program itself, the system-call filter last so that the
/// steps before it are not filtered.
fn confine(spec: &LaunchSpec) -> Result<(), String> {
    spec.limits
        .apply()
        .map_err(|error| format!("limits: {error}"))?;
    std::env::set_current_dir(&spec.cwd)
        .map_err(|error| format!("the working directory {}: {error}", spec.cwd.display()))?;
    // SAFETY: prctl with integer arguments; Landlock needs no_new_privs without privileges.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    landlock::restrict(spec)?;
    limits::drop_privileges().map_err(|error| format!("privileges: {error}"))?;
    // Only the standard streams go on: whatever else the service left open stays behind.
    // SAFETY: closes descriptors of this process only.
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    seccomp::install(spec)
}

/// Ends this process the way the program ended.
fn end_as(status: libc::c_int) -> ExitCode {
    if libc::WIFEXITED(status) {
        return ExitCode::from(libc::WEXITSTATUS(status) as u8);
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: resets one signal's handler and sends it to this process; no core file.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
        }
        return ExitCode::from((128 + signal) as u8);
    }
    ExitCode::from(SANDBOX_FAILED as u8)
}

fn wait_for(pid: libc::pid_t) -> io::Result<libc::c_int> {
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(status);
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
}

fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: the launcher is single-threaded, so the child may do anything the parent could.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: pipe2 writes two descriptors, owned from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened and are owned once.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn exit(code: i32) -> ! {
    // SAFETY: ends this process at once, as a forked child should.
    unsafe { libc::_exit(code) }
}
