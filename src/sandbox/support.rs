//! What this machine lets the sandbox do, found out once: the kernel's Landlock ABI, asked
//! directly, and the rest by starting the launcher for real: first with every layer (a program
//! that reads the namespace's process cap), then, if that fails, without namespaces. A kernel
//! that cannot do even the second gets no sandboxed command at all.

use std::path::PathBuf;
use std::sync::LazyLock;

use super::landlock::{NET_ABI, SCOPE_ABI, WRITE_ABI};
use super::launcher;
use super::limits::ProcessLimits;
use super::policy::SandboxPolicy;
use super::spec::LaunchSpec;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Support {
    /// The kernel's Landlock ABI; `None` without Landlock.
    pub landlock_abi: Option<u32>,
    /// This binary can start sandboxed programs (it calls `launcher_main` first).
    pub launcher: bool,
    /// The launcher ran a program with every layer, namespaces included.
    pub namespaces: bool,
    /// The namespace's `pid_max` caps its processes (Linux 6.14 and later).
    pub pid_cap: bool,
    /// The launcher ran a program with every layer but namespaces; when false no sandboxed
    /// program runs, and `error` says why.
    pub confined: bool,
    /// Why the launcher could not run a program with namespaces, or at all.
    pub error: Option<String>,
    /// The service runs as root, which it should not: a command that escapes runs as root.
    pub root: bool,
}

/// One layer of the sandbox as `/api/health` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub name: &'static str,
    pub active: bool,
    /// What it stops here, or why it is not in force.
    pub detail: String,
}

static SUPPORT: LazyLock<Support> = LazyLock::new(|| {
    let support = detect();
    if support.confined {
        tracing::info!(
            landlock_abi = support.landlock_abi,
            namespaces = support.namespaces,
            pid_cap = support.pid_cap,
            "tool sandbox"
        );
    } else {
        tracing::warn!(
            reason = support.error.as_deref().unwrap_or(""),
            "the tool sandbox cannot be set up on this machine: sandboxed tool commands are refused (set sandbox = \"off\" to run them unsandboxed)"
        );
    }
    if let (true, Some(error)) = (support.confined && !support.namespaces, &support.error) {
        tracing::warn!(reason = %error, "tool sandbox without namespaces");
    }
    if support.root {
        tracing::warn!("the service runs as root: run it as a user of its own");
    }
    support
});

/// What this machine allows, found out on the first call (it starts the launcher twice at
/// most, a few milliseconds): call it once at start.
pub fn support() -> Support {
    SUPPORT.clone()
}

fn detect() -> Support {
    let landlock_abi = landlock_abi();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut support = Support {
        landlock_abi,
        launcher: launcher::enabled(),
        root,
        ..Support::default()
    };
    if !support.launcher {
        support.error = Some("this program cannot start sandboxed commands".to_owned());
        return support;
    }
    let Some(abi) = landlock_abi.filter(|&abi| abi >= WRITE_ABI) else {
        support.error = Some(missing_landlock(landlock_abi));
        return support;
    };
    let limits = ProcessLimits {
        processes: 500,
        ..ProcessLimits::default()
    };
    let probe = |namespaces: bool, argv: &[&str]| {
        let spec = LaunchSpec {
            cwd: PathBuf::from("/"),
            writable: Vec::new(),
            network: false,
            hidden: vec![std::env::temp_dir()],
            visible: Vec::new(),
            namespaces,
            landlock_abi: abi,
            limits,
            argv: argv.iter().map(ToString::to_string).collect(),
        };
        launcher::run_to_end(&spec)
    };
    match probe(true, &["cat", "/proc/sys/kernel/pid_max"]) {
        Ok(pid_max) => {
            support.namespaces = true;
            support.confined = true;
            support.pid_cap = pid_max.trim() == (limits.processes + 1).to_string();
        }
        Err(error) => {
            support.error = Some(format!("namespaces: {error}"));
            match probe(false, &["true"]) {
                Ok(_) => support.confined = true,
                Err(error) => support.error = Some(error),
            }
        }
    }
    support
}

fn missing_landlock(abi: Option<u32>) -> String {
    match abi {
        None => "this kernel has no Landlock (Linux 6.2 or later with Landlock enabled is needed)"
            .to_owned(),
        Some(abi) => format!(
            "this kernel's Landlock is ABI {abi}, and restricting writes needs ABI {WRITE_ABI}"
        ),
    }
}

fn landlock_abi() -> Option<u32> {
    // A test stands in for a kernel without Landlock.
    if crate::testhooks::landlock_hidden() {
        return None;
    }
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, a zero size and the VERSION flag the call only returns the
    // ABI version (or -1 with EOPNOTSUPP / ENOSYS); it touches no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).ok().filter(|&abi| abi > 0)
}

impl Support {
    /// Whether a sandboxed program can run at all.
    pub fn available(&self) -> bool {
        self.confined
    }

    /// Whether `policy` can be enforced here; `Err` says why not, naming the setting.
    pub fn check(&self, policy: &SandboxPolicy) -> Result<(), String> {
        if self.confined {
            return Ok(());
        }
        Err(format!(
            "refused: the sandbox cannot be set up on this machine: {}. Commands never run \
             without it; set sandbox = \"off\" for this agent to run them unsandboxed ({} now)",
            self.error.as_deref().unwrap_or("unknown reason"),
            policy.setting()
        ))
    }

    /// Each layer, in force or not, with what it does.
    pub fn layers(&self) -> Vec<Layer> {
        let abi = self.landlock_abi.unwrap_or(0);
        let layer = |name, active, detail: String| Layer {
            name,
            active,
            detail,
        };
        let state = if self.namespaces {
            "hidden by a mount namespace"
        } else {
            "unreadable through Landlock"
        };
        let mut layers = vec![layer(
            "filesystem",
            self.confined,
            format!(
                "writes only under the working directory and the temp directory (Landlock ABI \
                 {abi}); the data directory, the config and the session's daemons {state}"
            ),
        )];
        layers.push(if self.namespaces {
            layer(
                "network",
                true,
                "network = false: a network namespace with only its own loopback; raw, packet, \
                 MPTCP and SCTP sockets refused by seccomp"
                    .to_owned(),
            )
        } else {
            layer(
                "network",
                self.confined,
                format!(
                    "network = false: no socket but UNIX (seccomp){}",
                    if abi >= NET_ABI {
                        ", no TCP (Landlock)"
                    } else {
                        ""
                    }
                ),
            )
        });
        layers.push(layer(
            "api",
            true,
            "every API request needs a credential kept in the data directory, which no tool \
             can read"
                .to_owned(),
        ));
        layers.push(if self.namespaces {
            layer(
                "pid",
                true,
                "a PID namespace per call: the service is out of sight and reach, and every \
                 process a call starts ends with it"
                    .to_owned(),
            )
        } else {
            layer(
                "pid",
                abi >= SCOPE_ABI,
                format!(
                    "no PID namespace ({}): {}; a process started with setsid may outlive an \
                     interrupted call",
                    self.error.as_deref().unwrap_or("not available"),
                    if abi >= SCOPE_ABI {
                        "Landlock's signal scope keeps the service from being signalled"
                    } else {
                        "the service can be signalled"
                    }
                ),
            )
        });
        layers.push(layer(
            "limits",
            self.confined,
            format!(
                "per call: processes ({}), memory per process, file size and CPU time \
                 (rlimits); no cgroup",
                if self.pid_cap {
                    "the namespace's pid_max and RLIMIT_NPROC"
                } else {
                    "RLIMIT_NPROC, which does not hold for root"
                }
            ),
        ));
        layers.push(layer(
            "privileges",
            self.confined && !self.root,
            if self.root {
                "the service runs as root: commands run without capabilities and with \
                 no_new_privs, but one that escapes runs as root; run the service as a user of \
                 its own"
                    .to_owned()
            } else {
                "no capabilities, no_new_privs".to_owned()
            },
        ));
        layers
    }
}
