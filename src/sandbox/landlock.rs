//! The Landlock layer, applied in the launcher to the program about to start: writes only under
//! the writable roots; without namespaces, no reads of the service's state and no TCP when the
//! network is off; the signal and abstract-socket scopes where the kernel has them (ABI 6), and
//! pathname UNIX sockets only in the working directory with the network off (ABI 9).
//!
//! Every right asked for is a hard requirement: a kernel that cannot enforce one is an error,
//! never a silently weaker sandbox.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, AccessFs, AccessNet, CompatLevel, Compatible, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};

use super::spec::LaunchSpec;

/// The write rights handled: ABI 3 added `truncate`, without which a command could empty any
/// file it can read.
pub(super) const WRITE_ABI: u32 = 3;
/// TCP `bind` and `connect` rules came with ABI 4.
pub(super) const NET_ABI: u32 = 4;
/// The signal and abstract UNIX socket scopes came with ABI 6.
pub(super) const SCOPE_ABI: u32 = 6;
/// Connecting to pathname UNIX sockets became a right with ABI 9.
const RESOLVE_UNIX_ABI: u32 = 9;

pub(super) fn restrict(spec: &LaunchSpec) -> Result<(), String> {
    match rules(spec) {
        Ok(RulesetStatus::FullyEnforced) => Ok(()),
        Ok(status) => Err(format!("Landlock is not fully enforced ({status:?})")),
        Err(error) => Err(format!("Landlock: {error}")),
    }
}

fn rules(spec: &LaunchSpec) -> Result<RulesetStatus, landlock::RulesetError> {
    let abi = spec.landlock_abi;
    let write = AccessFs::from_write(ABI::V3);
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let hide_here = !spec.namespaces && !spec.hidden.is_empty();
    let resolve_unix = !spec.network && abi >= RESOLVE_UNIX_ABI;
    let mut handled = write;
    if hide_here {
        handled |= read;
    }
    if resolve_unix {
        handled |= AccessFs::ResolveUnix;
    }
    let mut ruleset = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)?;
    // Without a network namespace of its own, TCP is refused here too (seccomp refuses every
    // other family).
    if !spec.network && !spec.namespaces && abi >= NET_ABI {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    if abi >= SCOPE_ABI {
        ruleset = ruleset.scope(Scope::Signal | Scope::AbstractUnixSocket)?;
    }
    let mut created = ruleset
        .create()?
        .add_rules(path_beneath_rules(&spec.writable, write))?;
    if hide_here {
        created = created.add_rules(path_beneath_rules(
            readable(&spec.hidden, &spec.visible),
            read,
        ))?;
    }
    if resolve_unix {
        created = created.add_rules(path_beneath_rules([&spec.cwd], AccessFs::ResolveUnix))?;
    }
    Ok(created.restrict_self()?.ruleset)
}

/// What may be read when reads are handled here: everything but the hidden paths, except the
/// visible paths beneath them. Landlock only allows, so this lists, from the root down, every
/// entry beside the way to a hidden path. A directory on that way cannot be listed itself (its
/// entries can be read), and an entry made after the program started cannot be read.
pub(super) fn readable(hidden: &[PathBuf], visible: &[PathBuf]) -> Vec<PathBuf> {
    let mut allowed = Vec::new();
    cover(Path::new("/"), hidden, visible, &mut allowed);
    allowed
}

fn cover(dir: &Path, hidden: &[PathBuf], visible: &[PathBuf], allowed: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if hidden.contains(&path) {
            allowed.extend(visible.iter().filter(|v| v.starts_with(&path)).cloned());
        } else if hidden.iter().any(|h| h.starts_with(&path)) {
            cover(&path, hidden, visible, allowed);
        } else {
            allowed.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_is_readable_but_the_hidden_paths() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        for dir in [
            "data/conversations",
            "data/worktrees/c_1/src",
            "data/worktrees/c_2",
            "project",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("data/local-token"), "x").unwrap();
        std::fs::write(root.join("config.toml"), "x").unwrap();
        let hidden = [root.join("data"), root.join("config.toml")];
        let visible = [root.join("data/worktrees/c_1")];
        let allowed = readable(&hidden, &visible);
        assert!(allowed.contains(&root.join("project")));
        assert!(allowed.contains(&root.join("data/worktrees/c_1")));
        assert!(allowed.contains(&PathBuf::from("/usr")));
        for path in &allowed {
            let under_hidden = hidden.iter().any(|h| path.starts_with(h));
            assert!(
                !under_hidden || path.starts_with(&visible[0]),
                "{}",
                path.display()
            );
        }
        assert!(!allowed.contains(&root));
    }
}
