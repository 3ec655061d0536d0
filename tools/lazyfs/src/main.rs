//! The lazy file system's command line.
//!
//! - `lazyfs mount BACKING MOUNTPOINT`: mounts BACKING lazily on MOUNTPOINT and serves it until
//!   unmounted (`umount MOUNTPOINT`) or sent SIGTERM or SIGINT, which unmount it. Prints
//!   `mounted` on a line of its own once the mount answers. Needs /dev/fuse and root.
//! - `lazyfs run MOUNTPOINT PROGRAM [ARG...]`: runs PROGRAM with its `syncfs` and `sync`
//!   calls writing out the mount's pending data (see `hook.rs`); exits as PROGRAM does.
//!
//! Write `cut` to MOUNTPOINT/.lazyfs-control to drop every unsynced byte, `sync` to write them
//! out; read it for the figures.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str =
    "usage: lazyfs mount BACKING MOUNTPOINT | lazyfs run MOUNTPOINT PROGRAM [ARG...]";

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|command| command.to_str()) {
        Some("mount") if args.len() == 3 => mount(Path::new(&args[1]), Path::new(&args[2])),
        Some("run") if args.len() >= 3 => {
            let rest: Vec<&std::ffi::OsStr> = args[3..].iter().map(OsString::as_os_str).collect();
            match lazyfs::hook::run(Path::new(&args[1]), &args[2], &rest) {
                // A program killed by a signal exits as a shell reports it: 128 + the signal.
                Ok(status) => ExitCode::from(
                    status
                        .code()
                        .or(status.signal().map(|signal| 128 + signal))
                        .unwrap_or(1) as u8,
                ),
                Err(error) => {
                    eprintln!("lazyfs run: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn mount(backing: &Path, mountpoint: &Path) -> ExitCode {
    // Modes are the caller's (the kernel sends its umask), never ours on top.
    // SAFETY: umask cannot fail.
    unsafe { libc::umask(0) };
    raise_file_limit();
    // The signals are taken by one thread with sigwait: blocked here, before any thread
    // starts, so every thread inherits the mask.
    let signals = blocked_signals();
    let mut session = match lazyfs::session(backing, mountpoint) {
        Ok(session) => session,
        Err(error) => {
            eprintln!("lazyfs: cannot mount {}: {error}", mountpoint.display());
            return ExitCode::FAILURE;
        }
    };
    let mut unmounter = session.unmount_callable();
    std::thread::spawn(move || {
        let mut signal = 0;
        // SAFETY: a valid signal set and an out parameter.
        unsafe { libc::sigwait(&signals, &mut signal) };
        let _ = unmounter.unmount();
    });
    println!("mounted");
    match session.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lazyfs: {error}");
            ExitCode::FAILURE
        }
    }
}

fn blocked_signals() -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Every node the kernel knows holds a descriptor: allow as many as the system does (root may
/// raise the hard limit up to `fs.nr_open`), else as the hard limit does.
fn raise_file_limit() {
    let most = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|text| text.trim().parse::<libc::rlim_t>().ok());
    // SAFETY: a buffer of the type for getrlimit, then values for setrlimit.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return;
        }
        if let Some(most) = most.filter(|most| *most > limit.rlim_max) {
            let raised = libc::rlimit {
                rlim_cur: most,
                rlim_max: most,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return;
            }
        }
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
}
