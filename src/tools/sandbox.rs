//! The sandbox of tool commands (invariant 8, secure by default): what an agent's shell commands
//! may write and whether they may use the network, enforced by the kernel's Landlock LSM in the
//! command's process before `sh` starts; and which environment variables they never see.
//!
//! The ruleset is built in the service (opening the allowed directories) and only applied in the
//! child between fork and exec, where nothing may allocate. A kernel that cannot enforce the
//! whole policy gets no command at all: the shell tool refuses with the reason, never runs
//! unsandboxed. The file tools apply the same rules in-process (`sandbox_paths`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use landlock::{
    ABI, AccessFs, AccessNet, CompatLevel, Compatible, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
};

use crate::config::{AgentConfig, Config, SandboxMode};

/// The Landlock ABI whose write rights the sandbox handles: ABI 3 added `truncate`, without
/// which a command could empty any file it can read.
const FS_ABI: ABI = ABI::V3;
/// TCP `bind` and `connect` rules came with ABI 4.
const NET_ABI: u32 = 4;

/// Devices a shell needs to write even in a read-only sandbox (`2>/dev/null`, a terminal).
pub(super) const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// What an agent's tool commands may touch and see. The turn builds it from the agent's
/// configuration; an approval layer can change it for one call (see `escalated`).
#[derive(Debug, Clone)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// TCP connections and binds are allowed.
    pub network: bool,
    /// Runs this one call outside the sandbox (the key variables stay hidden). For an approval
    /// layer that lets a user allow one command; nothing sets it yet.
    pub escalated: bool,
    /// Environment variables tool processes do not inherit: every provider's `api_key_env`, so
    /// that `env` in a command cannot copy a key into the history.
    pub hidden_env: Arc<[String]>,
}

impl Default for SandboxPolicy {
    /// The configuration's default: writes in the workspace, no network.
    fn default() -> SandboxPolicy {
        SandboxPolicy {
            mode: SandboxMode::default(),
            network: false,
            escalated: false,
            hidden_env: Arc::from([]),
        }
    }
}

impl SandboxPolicy {
    /// The policy of `agent`'s tools, hiding the key variables of every configured provider.
    pub fn for_agent(config: &Config, agent: &AgentConfig) -> SandboxPolicy {
        let hidden_env: Vec<String> = config
            .providers
            .values()
            .filter_map(|provider| provider.api_key_env.clone())
            .collect();
        SandboxPolicy {
            mode: agent.sandbox,
            network: agent.network,
            escalated: false,
            hidden_env: hidden_env.into(),
        }
    }

    /// Whether this call runs sandboxed.
    pub fn enforced(&self) -> bool {
        self.mode != SandboxMode::Off && !self.escalated
    }

    /// The setting as written in the file, for messages: `sandbox = "workspace_write"`.
    pub fn setting(&self) -> String {
        format!("sandbox = \"{}\"", self.mode.name())
    }

    /// One line for a shell result whose command hit a permission error under the sandbox.
    pub(super) fn hint(&self, cwd: &Path) -> String {
        let writes = match self.mode {
            SandboxMode::ReadOnly => "no writes".to_owned(),
            _ => format!("writes only under {} and the temp directory", cwd.display()),
        };
        let network = if self.network {
            ""
        } else {
            "; network = false blocks TCP connections"
        };
        format!(
            "[the sandbox may have blocked this: {} allows {writes}{network}]",
            self.setting()
        )
    }
}

/// What the kernel offers, detected once: Landlock's ABI version, `None` without Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxSupport {
    pub landlock_abi: Option<u32>,
}

impl SandboxSupport {
    /// Whether the default policy (workspace writes, no network) can be enforced.
    pub fn available(self) -> bool {
        self.landlock_abi.is_some_and(|abi| abi >= NET_ABI)
    }
}

static SUPPORT: LazyLock<SandboxSupport> = LazyLock::new(|| {
    let support = SandboxSupport {
        landlock_abi: landlock_abi(),
    };
    match support.landlock_abi {
        Some(abi) => tracing::info!(landlock_abi = abi, "tool sandbox"),
        None => tracing::warn!(
            "the kernel has no Landlock: sandboxed tool commands are refused (set sandbox = \"off\" to run them unsandboxed)"
        ),
    }
    support
});

/// The kernel's sandbox support, asked once per process.
pub fn support() -> SandboxSupport {
    *SUPPORT
}

fn landlock_abi() -> Option<u32> {
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

/// A ruleset ready to be applied in the child, between fork and exec.
pub(super) struct PreparedSandbox {
    ruleset: Option<RulesetCreated>,
}

impl PreparedSandbox {
    /// Applies the ruleset to the calling process. Runs after fork: it only makes system calls
    /// (prctl no_new_privs, landlock_restrict_self, close) and allocates nothing.
    pub(super) fn restrict(&mut self) -> std::io::Result<()> {
        let Some(ruleset) = self.ruleset.take() else {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        };
        match ruleset.restrict_self() {
            Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => Ok(()),
            _ => Err(std::io::Error::from_raw_os_error(libc::EPERM)),
        }
    }
}

/// Builds the ruleset for one command run in `cwd`; `Err` says why the kernel cannot enforce
/// `policy`, naming the setting that would run the command anyway.
/// Call [`check_support`] first.
pub(super) fn prepare(policy: &SandboxPolicy, cwd: &Path) -> Result<PreparedSandbox, String> {
    build(policy, cwd).map_err(|error| {
        format!(
            "refused: the sandbox could not be set up ({error}); commands never run without it \
             ({}; set sandbox = \"off\" for this agent to run them unsandboxed)",
            policy.setting()
        )
    })
}

/// Whether the kernel can enforce `policy`; `Err` says why not, naming the setting.
pub(super) fn check_support(policy: &SandboxPolicy, support: SandboxSupport) -> Result<(), String> {
    let needed = if policy.network {
        FS_ABI as u32
    } else {
        NET_ABI
    };
    let missing = match support.landlock_abi {
        None => "this kernel has no Landlock (Linux 6.7 or later with Landlock enabled is needed)"
            .to_owned(),
        Some(abi) if abi < needed => format!(
            "this kernel's Landlock is ABI {abi}, and {} needs ABI {needed}",
            if policy.network {
                "restricting writes"
            } else {
                "blocking the network (network = false)"
            }
        ),
        Some(_) => return Ok(()),
    };
    Err(format!(
        "refused: the kernel cannot enforce the sandbox: {missing}. Commands never run without \
         it; set sandbox = \"off\" for this agent to run them unsandboxed ({} now)",
        policy.setting()
    ))
}

/// The directories a command may write under: the working directory and the temp directory
/// (`/tmp` and `$TMPDIR`), or none in a read-only sandbox.
pub(super) fn writable_roots(mode: SandboxMode, cwd: &Path) -> Vec<PathBuf> {
    match mode {
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

pub(super) fn build(
    policy: &SandboxPolicy,
    cwd: &Path,
) -> Result<PreparedSandbox, landlock::RulesetError> {
    let write = AccessFs::from_write(FS_ABI);
    // A hard requirement: anything the kernel cannot enforce is an error here, not a
    // silently weaker sandbox.
    let mut ruleset = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(write)?;
    if !policy.network {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    // Paths that do not exist (no $TMPDIR, no /dev/tty) are skipped.
    let ruleset = ruleset
        .create()?
        .add_rules(path_beneath_rules(writable_roots(policy.mode, cwd), write))?
        .add_rules(path_beneath_rules(WRITABLE_DEVICES, write))?;
    Ok(PreparedSandbox {
        ruleset: Some(ruleset),
    })
}

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
    fn an_older_kernel_is_refused_with_the_reason_and_the_setting() {
        let workspace = policy(SandboxMode::WorkspaceWrite, false);
        let none = SandboxSupport { landlock_abi: None };
        let error = check_support(&workspace, none).unwrap_err();
        assert!(error.contains("this kernel has no Landlock"), "{error}");
        assert!(error.contains("sandbox = \"off\""), "{error}");
        assert!(
            error.contains("(sandbox = \"workspace_write\" now)"),
            "{error}"
        );

        let abi3 = SandboxSupport {
            landlock_abi: Some(3),
        };
        let error = check_support(&workspace, abi3).unwrap_err();
        assert!(
            error.contains("ABI 3, and blocking the network (network = false) needs ABI 4"),
            "{error}"
        );
        // With the network allowed, ABI 3 restricts writes well enough.
        assert_eq!(
            check_support(&policy(SandboxMode::WorkspaceWrite, true), abi3),
            Ok(())
        );
        let abi2 = SandboxSupport {
            landlock_abi: Some(2),
        };
        assert!(check_support(&policy(SandboxMode::ReadOnly, true), abi2).is_err());
        assert!(!abi3.available());
        assert!(
            SandboxSupport {
                landlock_abi: Some(7)
            }
            .available()
        );
    }

    #[test]
    fn the_hint_names_the_setting_and_the_workspace() {
        let cwd = Path::new("/srv/app");
        assert_eq!(
            policy(SandboxMode::WorkspaceWrite, false).hint(cwd),
            "[the sandbox may have blocked this: sandbox = \"workspace_write\" allows writes \
             only under /srv/app and the temp directory; network = false blocks TCP connections]"
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
    fn the_policy_hides_every_providers_key_variable() {
        let text = "[providers.a]\nprotocol = \"openai_chat\"\nbase_url = \"http://a\"\n\
                    api_key_env = \"A_KEY\"\n[providers.b]\nprotocol = \"openai_chat\"\n\
                    base_url = \"http://b\"\napi_key_env = \"B_KEY\"\n\
                    [agents.default]\ndescription = \"d\"\nmodel = \"demo\"\nsandbox = \"read_only\"\n";
        let config = Config::from_toml_str(text, None).unwrap();
        let policy = SandboxPolicy::for_agent(&config, config.default_agent());
        assert_eq!(&*policy.hidden_env, ["A_KEY", "B_KEY"]);
        assert_eq!(policy.mode, SandboxMode::ReadOnly);
        assert!(!policy.network);
    }
}
