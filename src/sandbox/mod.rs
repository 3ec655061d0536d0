//! The sandbox of tool processes (invariant 8, secure by default): the model's tool calls are
//! treated as written by an attacker, so every shell command and every command MCP server runs
//! behind kernel-enforced layers, never behind parsing:
//!
//! - **namespaces** (`namespaces.rs`): a user namespace of its own, holding a mount namespace
//!   that hides the service's state (the data directory, the config) and the user's session
//!   daemons, a PID namespace (the service cannot be seen or signalled, and when the call ends
//!   every process it started dies with the namespace), and, with `network = false`, a network
//!   namespace with only its own loopback;
//! - **Landlock** (`landlock.rs`): writes only under the working directory and the temp
//!   directory; without namespaces, reads of the service's state refused and TCP blocked; the
//!   signal and abstract-socket scopes where the kernel has them;
//! - **seccomp** (`seccomp.rs`): sockets of the families and protocols a command may use, no
//!   io_uring (which opens sockets behind the filter's back), no new namespaces;
//! - **limits** (`limits.rs`): processes, memory, file size and CPU time; no capabilities, no
//!   new privileges;
//! - **environment** (`env.rs`): an allow-list, so no credential of the service reaches a tool.
//!
//! The service starts each sandboxed program through its own binary (`launcher.rs`), which sets
//! the layers up in a fresh single-threaded process and then becomes the program. A kernel that
//! cannot enforce the policy gets no command at all: the call is refused with the reason, never
//! run unsandboxed. The file tools, which run in the service, apply the same rules in-process
//! (`paths.rs`) and write through directory handles that no symlink can redirect (`beneath.rs`).

pub mod beneath;
mod env;
mod landlock;
mod launcher;
mod limits;
mod namespaces;
pub mod paths;
mod policy;
mod protected;
mod seccomp;
mod spec;
mod support;

use std::path::Path;

pub use env::tool_environment;
pub use launcher::launcher_main;
pub use limits::ProcessLimits;
pub use policy::{SandboxPolicy, WRITABLE_DEVICES};
pub use protected::Protected;
pub use spec::Program;
pub use support::{Layer, Support, support};

/// The command that runs `program` in `cwd` under `policy`: through the launcher when the
/// policy is enforced, else directly; either way with the allow-listed environment. The
/// caller sets stdio, the process group and `kill_on_drop`. `Err` says why the sandbox cannot
/// be set up, naming the setting that would run the program anyway.
pub fn command(
    policy: &SandboxPolicy,
    cwd: &Path,
    program: Program<'_>,
) -> Result<tokio::process::Command, String> {
    let environment = tool_environment(&policy.env);
    let mut command = if policy.enforced() {
        let support = support();
        support.check(policy)?;
        if let Some(cwd_error) = policy.protected.refuses_cwd(cwd) {
            return Err(format!("refused: {cwd_error}"));
        }
        let machine = (support.namespaces, support.landlock_abi.unwrap_or(0));
        let spec = spec::LaunchSpec::new(policy, cwd, machine, program);
        launcher::command(&spec)?
    } else {
        let path = environment.iter().find(|(name, _)| name == "PATH");
        program.direct(path.map(|(_, value)| value.as_os_str()))
    };
    command.current_dir(cwd).env_clear();
    command.envs(environment);
    Ok(command)
}
