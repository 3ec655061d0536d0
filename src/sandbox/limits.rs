//! What one tool call may take, and the privileges it gives up. Applied in the launcher just
//! before the program starts, so they hold for it and everything it starts:
//! - resource limits (`setrlimit`): processes, memory (the data segment: heap and private
//!   mappings, so a runtime's large reservations of address space still work), file size and
//!   CPU time; no core files;
//! - in a PID namespace the namespace's own `pid_max` caps its processes too, and unlike
//!   `RLIMIT_NPROC` it holds when the service runs as root (`namespaces.rs` sets it);
//! - no capabilities, in every set and the bounding set, the root user's special treatment off
//!   and `no_new_privs`, so that neither a set-uid program nor a file capability gives any back.

use std::io;

pub use crate::config::ProcessLimits;

const MIB: u64 = 1024 * 1024;

impl ProcessLimits {
    /// The resource limits, applied to the calling process (inherited by its children).
    pub(super) fn apply(&self) -> io::Result<()> {
        set_limit(libc::RLIMIT_NPROC, u64::from(self.processes), 0)?;
        set_limit(libc::RLIMIT_DATA, self.memory_mb.saturating_mul(MIB), 0)?;
        set_limit(libc::RLIMIT_FSIZE, self.file_size_mb.saturating_mul(MIB), 0)?;
        // SIGXCPU at the soft limit (a program may end cleanly), SIGKILL a little later.
        set_limit(libc::RLIMIT_CPU, self.cpu_s, 5)?;
        set_limit(libc::RLIMIT_CORE, 0, 0)
    }

    /// The note for a command that a limit stopped, from how it ended and what it printed.
    pub fn note(&self, signal: Option<i32>, output: &str) -> Option<String> {
        match signal {
            Some(libc::SIGXFSZ) => {
                return Some(format!(
                    "[stopped: a file reached the size limit of {} MiB (limits.file_size_mb)]",
                    self.file_size_mb
                ));
            }
            Some(libc::SIGXCPU) => {
                return Some(format!(
                    "[stopped: a process used its {} s of CPU time (limits.cpu_s)]",
                    self.cpu_s
                ));
            }
            _ => {}
        }
        const NO_FORK: [&str; 3] = [
            "fork: Resource temporarily unavailable",
            "Cannot fork",
            "fork: retry: Resource temporarily unavailable",
        ];
        const NO_MEMORY: [&str; 4] = [
            "Cannot allocate memory",
            "MemoryError",
            "out of memory",
            "memory allocation of",
        ];
        // A shell reports a command the file size limit stopped.
        if output.contains("File size limit exceeded") {
            return self.note(Some(libc::SIGXFSZ), "");
        }
        if NO_FORK.iter().any(|text| output.contains(text)) {
            return Some(format!(
                "[the command reached its limit of {} processes (limits.processes)]",
                self.processes
            ));
        }
        if NO_MEMORY.iter().any(|text| output.contains(text)) {
            return Some(format!(
                "[the command may have reached its memory limit of {} MiB per process \
                 (limits.memory_mb)]",
                self.memory_mb
            ));
        }
        None
    }
}

/// Lowers one limit to `value` (soft) and `value + hard_extra` (hard), never above the hard
/// limit the process already has.
fn set_limit(resource: libc::__rlimit_resource_t, value: u64, hard_extra: u64) -> io::Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(resource, &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let hard = value.saturating_add(hard_extra).min(current.rlim_max);
    let wanted = libc::rlimit {
        rlim_cur: value.min(hard),
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct it is given.
    if unsafe { libc::setrlimit(resource, &wanted) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives up every privilege for good: `no_new_privs`, the bounding and ambient sets, the root
/// user's special treatment, then the effective, permitted and inheritable sets. Without
/// `CAP_SETPCAP` (an unprivileged service outside a namespace) the calls that need it fail,
/// which is fine as long as no capability is left; the final check makes sure none is.
pub(super) fn drop_privileges() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only changes this process's flags.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    for capability in 0..64 {
        // SAFETY: as above; EINVAL past the last capability the kernel knows.
        let dropped = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) };
        if dropped != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            break;
        }
    }
    // SAFETY: as above.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
    // Root (uid 0, in a namespace or not) would get every capability back at exec; these bits
    // turn that off, and lock it.
    const NOROOT: libc::c_ulong = 1 << 0;
    const NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const KEEP_CAPS: libc::c_ulong = 1 << 4;
    const NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
    // Each bit's lock is the bit after it.
    let bits = NOROOT | NO_SETUID_FIXUP | NO_CAP_AMBIENT_RAISE;
    let locks = (NOROOT | NO_SETUID_FIXUP | KEEP_CAPS | NO_CAP_AMBIENT_RAISE) << 1;
    // SAFETY: as above; fails without CAP_SETPCAP, which then no capability needs.
    unsafe {
        libc::prctl(libc::PR_SET_SECUREBITS, bits | locks, 0, 0, 0);
    }
    set_capabilities(&[Caps::default(); 2])?;
    let mut now = [Caps::default(); 2];
    get_capabilities(&mut now)?;
    if now
        .iter()
        .any(|caps| caps.effective | caps.permitted | caps.inheritable != 0)
    {
        return Err(io::Error::other(
            "capabilities are left after dropping them",
        ));
    }
    Ok(())
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Caps {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

#[repr(C)]
struct CapsHeader {
    version: u32,
    pid: libc::c_int,
}

/// The 64-bit capability sets (two 32-bit halves).
const CAPS_VERSION_3: u32 = 0x2008_0522;

fn set_capabilities(caps: &[Caps; 2]) -> io::Result<()> {
    let mut header = CapsHeader {
        version: CAPS_VERSION_3,
        pid: 0,
    };
    // SAFETY: capset reads a version-3 header and two data structs, which these are.
    let result = unsafe { libc::syscall(libc::SYS_capset, &mut header, caps.as_ptr()) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn get_capabilities(caps: &mut [Caps; 2]) -> io::Result<()> {
    let mut header = CapsHeader {
        version: CAPS_VERSION_3,
        pid: 0,
    };
    // SAFETY: capget writes two data structs for a version-3 header.
    let result = unsafe { libc::syscall(libc::SYS_capget, &mut header, caps.as_mut_ptr()) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_that_stopped_a_command_is_named() {
        let limits = ProcessLimits::default();
        assert_eq!(
            limits.note(Some(libc::SIGXFSZ), "").unwrap(),
            "[stopped: a file reached the size limit of 8192 MiB (limits.file_size_mb)]"
        );
        assert!(
            limits
                .note(Some(libc::SIGXCPU), "")
                .unwrap()
                .contains("limits.cpu_s")
        );
        let forks = limits.note(None, "sh: 1: Cannot fork\n").unwrap();
        assert!(forks.contains("limit of 1024 processes"), "{forks}");
        let memory = limits.note(None, "MemoryError\n").unwrap();
        assert!(memory.contains("memory limit of 8192 MiB"), "{memory}");
        assert_eq!(limits.note(Some(libc::SIGKILL), "done\n"), None);
    }
}
