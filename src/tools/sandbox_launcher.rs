//! The sandbox's launcher: the service binary started again as a small process that applies
//! the sandbox to itself and then becomes `sh -c COMMAND`.
//!
//! Applying Landlock between fork and exec would make every shell command a full fork of the
//! service, whose cost grows with the service's memory (tens of milliseconds for a few hundred
//! megabytes). Started this way the child is spawned like an unsandboxed one (no copy of the
//! service's memory) and the ruleset is built in a fresh single-threaded process. A binary
//! enables it by calling [`launcher_main`] first thing in `main`; elsewhere (unit tests) the
//! shell tool applies the sandbox between fork and exec instead.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use super::sandbox::{self, SandboxPolicy};
use crate::config::SandboxMode;

/// The first argument that makes the binary a launcher.
const LAUNCHER_ARG: &str = "__openvaala_sandbox_exec";
/// Exit codes of a launcher that could not do its work, as a shell's for a command that could
/// not run (126) or was not found (127).
const SANDBOX_FAILED: u8 = 126;
const EXEC_FAILED: u8 = 127;

/// Set when this process's binary runs [`launcher_main`], so it can be its own launcher.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Call first thing in `main`: in a launcher started by the shell tool this applies the
/// sandbox and becomes `sh` (it returns only the exit code of a failure); anywhere else it
/// returns `None` and lets the shell tool start its sandboxed commands through this binary.
pub fn launcher_main() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|first| first != LAUNCHER_ARG) {
        ENABLED.store(true, Ordering::Relaxed);
        return None;
    }
    Some(launch(args.collect()))
}

/// The command that runs `command` sandboxed under `policy` in `cwd` through a launcher, when
/// this binary can be one.
pub(super) fn command(
    policy: &SandboxPolicy,
    cwd: &Path,
    command: &str,
) -> Option<tokio::process::Command> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    // The running binary itself, even if its file was replaced since it started.
    let mut launcher = tokio::process::Command::new("/proc/self/exe");
    launcher
        .arg(LAUNCHER_ARG)
        .arg(policy.mode.name())
        .arg(if policy.network {
            "network"
        } else {
            "no-network"
        })
        .arg(cwd)
        .arg(command);
    Some(launcher)
}

/// The launcher's work: MODE NETWORK CWD COMMAND.
fn launch(args: Vec<OsString>) -> ExitCode {
    let [mode, network, cwd, command] = &args[..] else {
        return failed(SANDBOX_FAILED, "openvaala: bad launcher arguments");
    };
    let Some(mode) = mode.to_str().and_then(SandboxMode::from_name) else {
        return failed(SANDBOX_FAILED, "openvaala: unknown sandbox mode");
    };
    let policy = SandboxPolicy {
        mode,
        network: network == "network",
        ..SandboxPolicy::default()
    };
    let restricted = sandbox::build(&policy, Path::new(cwd))
        .map_err(|error| error.to_string())
        .and_then(|mut prepared| prepared.restrict().map_err(|error| error.to_string()));
    if let Err(error) = restricted {
        return failed(
            SANDBOX_FAILED,
            &format!(
                "openvaala: the sandbox could not be applied ({error}); the command did not run"
            ),
        );
    }
    let error = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .exec();
    failed(
        EXEC_FAILED,
        &format!("openvaala: could not start sh: {error}"),
    )
}

fn failed(code: u8, message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(code)
}
