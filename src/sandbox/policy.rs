//! What an agent's tool processes may touch and see ([`SandboxPolicy`]), and the devices every
//! sandbox lets a shell write. Kept apart from the front (`sandbox/mod.rs`), which starts the
//! launcher, so that the layers that read a policy (`spec.rs`, `paths.rs`) use no module that
//! uses them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::limits::ProcessLimits;
use super::protected::Protected;
use crate::config::SandboxMode;

/// What an agent's tool processes may touch and see. The turn builds it from the agent's
/// configuration; an approval can lift the sandbox for one call (`escalated`).
#[derive(Debug, Clone)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// Tool processes may reach the network (TCP and UDP; never the service's API, which needs
    /// a credential no tool can read).
    pub network: bool,
    /// Runs this one call outside the sandbox (the environment stays allow-listed). Only an
    /// approved escalation sets it.
    pub escalated: bool,
    /// What one call (and everything it starts) may take.
    pub limits: ProcessLimits,
    /// Variables added to the allow-listed environment: the agent's `env`.
    pub env: Arc<[(String, String)]>,
    /// The service's own state, out of every tool's reach.
    pub protected: Arc<Protected>,
}

impl Default for SandboxPolicy {
    /// The configuration's default: writes in the workspace, no network.
    fn default() -> SandboxPolicy {
        SandboxPolicy {
            mode: SandboxMode::default(),
            network: false,
            escalated: false,
            limits: ProcessLimits::default(),
            env: Arc::from([]),
            protected: Arc::new(Protected::default()),
        }
    }
}

impl SandboxPolicy {
    /// Whether this call runs sandboxed.
    pub fn enforced(&self) -> bool {
        self.mode != SandboxMode::Off && !self.escalated
    }

    /// The setting as written in the file, for messages: `sandbox = "workspace_write"`.
    pub fn setting(&self) -> String {
        format!("sandbox = \"{}\"", self.mode.name())
    }

    /// The stricter of two policies: a sub-agent never gets more than its parent. The stricter
    /// mode, network only if both allow it, the lower of each limit, both environments (the
    /// child's values win).
    pub fn stricter(&self, other: &SandboxPolicy) -> SandboxPolicy {
        let mode = match (self.mode, other.mode) {
            (SandboxMode::ReadOnly, _) | (_, SandboxMode::ReadOnly) => SandboxMode::ReadOnly,
            (SandboxMode::WorkspaceWrite, _) | (_, SandboxMode::WorkspaceWrite) => {
                SandboxMode::WorkspaceWrite
            }
            (SandboxMode::Off, SandboxMode::Off) => SandboxMode::Off,
        };
        let mut env: Vec<(String, String)> = self.env.to_vec();
        for (key, value) in other.env.iter() {
            env.retain(|(known, _)| known != key);
            env.push((key.clone(), value.clone()));
        }
        SandboxPolicy {
            mode,
            network: self.network && other.network,
            escalated: false,
            limits: self.limits.lower(&other.limits),
            env: env.into(),
            protected: self.protected.clone(),
        }
    }

    /// One line for a shell result whose command hit a permission error under the sandbox.
    pub fn hint(&self, cwd: &Path) -> String {
        let writes = match self.mode {
            SandboxMode::ReadOnly => "no writes".to_owned(),
            _ => format!("writes only under {} and the temp directory", cwd.display()),
        };
        let network = if self.network {
            ""
        } else {
            "; network = false blocks the network"
        };
        format!(
            "[the sandbox may have blocked this: {} allows {writes}{network}]",
            self.setting()
        )
    }

    /// The directories a command may write under: the working directory and the temp directory
    /// (`/tmp` and `$TMPDIR`), or none in a read-only sandbox.
    pub fn writable_roots(&self, cwd: &Path) -> Vec<PathBuf> {
        match self.mode {
            SandboxMode::WorkspaceWrite => {
                let mut roots = vec![cwd.to_path_buf(), PathBuf::from("/tmp")];
                if let Some(tmpdir) = std::env::var_os("TMPDIR").filter(|dir| !dir.is_empty()) {
                    roots.push(PathBuf::from(tmpdir));
                }
                roots
            }
            SandboxMode::ReadOnly | SandboxMode::Off => Vec::new(),
        }
    }
}

/// Devices a shell needs to write even in a read-only sandbox (`2>/dev/null`, a terminal).
pub const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: SandboxMode, network: bool) -> SandboxPolicy {
        SandboxPolicy {
            mode,
            network,
            ..SandboxPolicy::default()
        }
    }

    #[test]
    fn the_hint_names_the_setting_and_the_workspace() {
        let cwd = Path::new("/srv/app");
        assert_eq!(
            policy(SandboxMode::WorkspaceWrite, false).hint(cwd),
            "[the sandbox may have blocked this: sandbox = \"workspace_write\" allows writes \
             only under /srv/app and the temp directory; network = false blocks the network]"
        );
        assert_eq!(
            policy(SandboxMode::ReadOnly, true).hint(cwd),
            "[the sandbox may have blocked this: sandbox = \"read_only\" allows no writes]"
        );
    }

    #[test]
    fn escalation_and_off_run_unsandboxed() {
        assert!(SandboxPolicy::default().enforced());
        assert!(!policy(SandboxMode::Off, false).enforced());
        let escalated = SandboxPolicy {
            escalated: true,
            ..SandboxPolicy::default()
        };
        assert!(!escalated.enforced());
    }

    #[test]
    fn the_stricter_policy_takes_the_least_of_each() {
        let loose = SandboxPolicy {
            mode: SandboxMode::Off,
            network: true,
            limits: ProcessLimits {
                background_max_s: 24 * 60 * 60,
                processes: 4000,
                memory_mb: 100,
                file_size_mb: 9000,
                cpu_s: 3600,
            },
            env: Arc::from([("A".to_owned(), "1".to_owned())]),
            ..SandboxPolicy::default()
        };
        let strict = SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            network: false,
            limits: ProcessLimits {
                background_max_s: 24 * 60 * 60,
                processes: 500,
                memory_mb: 8000,
                file_size_mb: 10,
                cpu_s: 60,
            },
            env: Arc::from([("A".to_owned(), "2".to_owned())]),
            ..SandboxPolicy::default()
        };
        for (parent, child) in [(&loose, &strict), (&strict, &loose)] {
            let merged = parent.stricter(child);
            assert_eq!(merged.mode, SandboxMode::ReadOnly);
            assert!(!merged.network);
            assert_eq!(
                merged.limits,
                ProcessLimits {
                    background_max_s: 24 * 60 * 60,
                    processes: 500,
                    memory_mb: 100,
                    file_size_mb: 10,
                    cpu_s: 60,
                }
            );
        }
        assert_eq!(&*loose.stricter(&strict).env, [("A".into(), "2".into())]);
        let workspace = policy(SandboxMode::WorkspaceWrite, true);
        let merged = workspace.stricter(&policy(SandboxMode::Off, true));
        assert_eq!(
            (merged.mode, merged.network),
            (SandboxMode::WorkspaceWrite, true)
        );
    }
}
