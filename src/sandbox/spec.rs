//! What the service tells the launcher: one JSON argument with everything it needs to set up the
//! layers, worked out in the service (paths made canonical, the kernel's support known), so the
//! launcher decides nothing on its own.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::limits::ProcessLimits;
use super::policy::{SandboxPolicy, WRITABLE_DEVICES};
use super::protected::canonical;

/// What runs in the sandbox.
#[derive(Debug, Clone, Copy)]
pub enum Program<'a> {
    /// `sh -c COMMAND`.
    Shell(&'a str),
    /// A program found on `PATH`, with its arguments (a command MCP server).
    Exec {
        program: &'a str,
        args: &'a [String],
    },
}

impl Program<'_> {
    fn argv(&self) -> Vec<String> {
        match self {
            Program::Shell(command) => vec!["sh".into(), "-c".into(), (*command).into()],
            Program::Exec { program, args } => {
                let mut argv = vec![(*program).to_owned()];
                argv.extend(args.iter().cloned());
                argv
            }
        }
    }

    /// The program started directly, outside any sandbox, found on `path` (the `PATH` it will
    /// have). Found here rather than by the standard library: a program looked up in a `PATH`
    /// that the child's environment sets makes it fork the whole service instead of spawning
    /// it (`posix_spawn`), and a fork costs as much as the service's memory.
    pub(super) fn direct(&self, path: Option<&std::ffi::OsStr>) -> tokio::process::Command {
        let argv = self.argv();
        let mut command = tokio::process::Command::new(find_program(&argv[0], path));
        command.args(&argv[1..]);
        command
    }
}

/// `name` as a path: itself when it has a slash, else the first executable file of that name
/// in `path`'s directories (itself when there is none, for the spawn's error to name).
fn find_program(name: &str, path: Option<&std::ffi::OsStr>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if name.contains('/') {
        return PathBuf::from(name);
    }
    std::env::split_paths(path.unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from(name))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct LaunchSpec {
    /// Where the program runs.
    pub cwd: PathBuf,
    /// Directories (and devices) it may write under; none but devices in a read-only sandbox.
    pub writable: Vec<PathBuf>,
    pub network: bool,
    /// Hidden from it: the service's state and the user's session daemons.
    pub hidden: Vec<PathBuf>,
    /// Kept visible although under a hidden path: a working directory in a fork's tree.
    pub visible: Vec<PathBuf>,
    /// Whether the namespace layer is set up (the kernel allows it, checked at start).
    pub namespaces: bool,
    /// The kernel's Landlock ABI.
    pub landlock_abi: u32,
    pub limits: ProcessLimits,
    /// The program and its arguments, found on `PATH`.
    pub argv: Vec<String>,
}

impl LaunchSpec {
    /// The spec of `program` in `cwd` under `policy`, on a machine where the namespaces can be
    /// set up (`namespaces`) and whose Landlock is `landlock_abi`.
    pub fn new(
        policy: &SandboxPolicy,
        cwd: &Path,
        (namespaces, landlock_abi): (bool, u32),
        program: Program<'_>,
    ) -> LaunchSpec {
        let cwd = canonical(cwd);
        let mut writable: Vec<PathBuf> = policy
            .writable_roots(&cwd)
            .iter()
            .map(|root| canonical(root))
            .collect();
        writable.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
        let mut hidden: Vec<PathBuf> = policy.protected.paths().map(Path::to_path_buf).collect();
        if namespaces {
            hidden.extend(session_daemons());
        }
        hidden.sort();
        hidden.dedup();
        // A path under another hidden one is hidden with it.
        let all = hidden.clone();
        hidden.retain(|path| {
            !all.iter()
                .any(|other| other != path && path.starts_with(other))
        });
        // Landlock cannot take a part out of a writable place: without a mount namespace to
        // cover the state, a writable place that holds it (a data directory under /tmp) is
        // not writable at all.
        if !namespaces {
            writable.retain(|root| !hidden.iter().any(|path| path.starts_with(root)));
        }
        let visible = if hidden.iter().any(|path| cwd.starts_with(path)) {
            vec![cwd.clone()]
        } else {
            Vec::new()
        };
        LaunchSpec {
            cwd,
            writable,
            network: policy.network,
            hidden,
            visible,
            namespaces,
            landlock_abi,
            limits: policy.limits,
            argv: program.argv(),
        }
    }
}

/// The sockets and folders through which a program could ask a daemon of the user's session to
/// run something for it outside the sandbox: the user's runtime directory (the systemd user
/// instance, the session bus), the system bus, container engines, terminal multiplexers and X.
/// Those that exist, canonical.
fn session_daemons() -> Vec<PathBuf> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let candidates = [
        format!("/run/user/{uid}"),
        "/run/dbus/system_bus_socket".to_owned(),
        "/var/run/dbus/system_bus_socket".to_owned(),
        "/run/docker.sock".to_owned(),
        "/var/run/docker.sock".to_owned(),
        "/run/containerd".to_owned(),
        "/run/podman".to_owned(),
        "/run/screen".to_owned(),
        format!("/tmp/tmux-{uid}"),
        "/tmp/.X11-unix".to_owned(),
    ];
    candidates
        .iter()
        .map(Path::new)
        .filter(|path| path.symlink_metadata().is_ok())
        .map(canonical)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SandboxMode;
    use crate::sandbox::Protected;
    use std::sync::Arc;

    fn support(namespaces: bool) -> (bool, u32) {
        (namespaces, 7)
    }

    #[test]
    fn the_spec_hides_the_state_and_keeps_a_worktree_visible() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let data = home.join("data");
        let worktree = data.join("worktrees/c_1");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::create_dir_all(home.join("project")).unwrap();
        let policy = SandboxPolicy {
            protected: Arc::new(Protected::new(&data, Some(&home.join("config.toml")))),
            ..SandboxPolicy::default()
        };
        let spec = LaunchSpec::new(
            &policy,
            &home.join("project"),
            support(false),
            Program::Shell("ls"),
        );
        assert_eq!(spec.hidden, [home.join("config.toml"), data.clone()]);
        assert!(spec.visible.is_empty());
        assert_eq!(spec.argv, ["sh", "-c", "ls"]);
        assert_eq!(spec.writable[0], home.join("project"));
        assert!(spec.writable.contains(&PathBuf::from("/dev/null")));

        let spec = LaunchSpec::new(&policy, &worktree, support(true), Program::Shell("ls"));
        assert_eq!(spec.visible, std::slice::from_ref(&worktree));
        assert!(spec.namespaces);

        let read_only = SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            ..policy.clone()
        };
        let args = ["--stdio".to_owned()];
        let spec = LaunchSpec::new(
            &read_only,
            &home.join("project"),
            support(false),
            Program::Exec {
                program: "server",
                args: &args,
            },
        );
        assert!(spec.writable.iter().all(|path| path.starts_with("/dev")));
        assert_eq!(spec.argv, ["server", "--stdio"]);
    }
}
