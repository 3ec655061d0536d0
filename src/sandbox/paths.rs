//! The sandbox's rules for the file tools, applied in the service: a read is judged by where
//! the path really leads (symlinks followed, then `..`), and checked again on the file once it
//! is open; a write is judged by its path as written, which must lie under a writable root and
//! is then written beneath that root without following any symlink (`beneath.rs`), so what was
//! judged is what is written. Nothing of the service's own state is read or written.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::policy::{SandboxPolicy, WRITABLE_DEVICES};
use super::protected::canonical;
use crate::config::SandboxMode;

/// Past this many symlinks a path is a loop, as for the kernel (`ELOOP`).
const MAX_SYMLINKS: usize = 40;

/// Where `path` (relative to `cwd`, or absolute) really leads: every symlink that exists is
/// followed, `..` then removes the component before it, and components that do not exist are
/// kept as written.
pub(super) fn resolve(cwd: &Path, path: &Path) -> Result<PathBuf, String> {
    let full = cwd.join(path);
    // Components still to walk, the next one last.
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, &full);
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    while let Some(component) = pending.pop() {
        if component == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&component);
        let is_link = std::fs::symlink_metadata(&candidate)
            .is_ok_and(|metadata| metadata.file_type().is_symlink());
        if !is_link {
            resolved = candidate;
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return Err(format!(
                "{}: too many levels of symbolic links",
                path.display()
            ));
        }
        let target = std::fs::read_link(&candidate)
            .map_err(|error| format!("cannot read the link {}: {error}", candidate.display()))?;
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        push_components(&mut pending, &target);
    }
    Ok(resolved)
}

/// Pushes `path`'s components so that its first one is popped first.
fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    let start = pending.len();
    for component in path.components() {
        match component {
            Component::Normal(name) => pending.push(name.to_owned()),
            Component::ParentDir => pending.push("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    pending[start..].reverse();
}

/// Where a write of `path` goes under `policy`: the writable root it lies under and the path
/// beneath that root, or the message for the model when the sandbox blocks it. The path is
/// taken as written, `..` resolved without looking at the disk: the write then refuses to
/// follow any symlink, so the two agree.
pub fn write_target(
    policy: &SandboxPolicy,
    cwd: &Path,
    path: &Path,
) -> Result<(PathBuf, PathBuf), String> {
    let cwd = canonical(cwd);
    let target = lexical(&cwd.join(path));
    let mut roots: Vec<PathBuf> = policy
        .writable_roots(&cwd)
        .iter()
        .map(|r| canonical(r))
        .collect();
    roots.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
    let blocked = |what: String| {
        let shown = if target == cwd.join(path) {
            String::new()
        } else {
            format!(": {} is {}", path.display(), target.display())
        };
        Err(format!(
            "blocked by the sandbox: {what} ({}){shown}",
            policy.setting()
        ))
    };
    if policy.protected.covers(&target) {
        return blocked("the service's own files are out of reach".to_owned());
    }
    // The deepest root that holds it: the working directory may be inside the temp directory.
    let root = roots
        .iter()
        .filter(|root| target.starts_with(root))
        .max_by_key(|root| root.components().count());
    match root {
        Some(root) => {
            let relative = target
                .strip_prefix(root)
                .unwrap_or(Path::new(""))
                .to_path_buf();
            Ok((root.clone(), relative))
        }
        None => blocked(match policy.mode {
            SandboxMode::ReadOnly => "no writes allowed".to_owned(),
            _ => format!("write outside {}", cwd.display()),
        }),
    }
}

/// `path` (absolute) with `.` dropped and each `..` removing the component before it.
fn lexical(path: &Path) -> PathBuf {
    let mut normal = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => normal.push(name),
            Component::ParentDir => {
                normal.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    normal
}

/// Whether a file tool may read `path`: anything but the service's own state and a process's
/// environment (`/proc/PID/environ`: the service's own holds its credentials).
pub fn check_read(policy: &SandboxPolicy, cwd: &Path, path: &Path) -> Result<(), String> {
    let target = resolve(cwd, path)?;
    check_real(policy, path, &target)
}

/// The same rules for a file already open, by the path the kernel gives its descriptor (so a
/// link swapped in after the check above changes nothing).
pub fn check_opened(
    policy: &SandboxPolicy,
    shown: &Path,
    file: &impl std::os::fd::AsRawFd,
) -> Result<(), String> {
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|error| format!("could not read {}: {error}", shown.display()))?;
    check_real(policy, shown, &real)
}

/// The same rules for a path known to be real (no link on the way): one a walk that follows
/// no link found below a real start. `shown` is the path the message names.
pub fn check_real(policy: &SandboxPolicy, shown: &Path, real: &Path) -> Result<(), String> {
    if real.starts_with("/proc") && real.file_name().is_some_and(|name| name == "environ") {
        return Err(format!(
            "blocked by the sandbox: {} is a process's environment ({})",
            shown.display(),
            policy.setting()
        ));
    }
    if policy.protected.covers(real) {
        return Err(format!(
            "blocked by the sandbox: {} is the service's own state ({})",
            shown.display(),
            policy.setting()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A workspace and an outside directory, both canonical (the temp directory may be a link).
    /// Both are in the temp directory, so the write checks below allow only the workspace.
    fn dirs() -> (tempfile::TempDir, PathBuf, tempfile::TempDir, PathBuf) {
        let workspace = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let (w, o) = (
            workspace.path().canonicalize().unwrap(),
            outside.path().canonicalize().unwrap(),
        );
        (workspace, w, outside, o)
    }

    #[test]
    fn resolve_follows_links_and_dot_dot() {
        let (_w, workspace, _o, outside) = dirs();
        std::fs::create_dir(workspace.join("sub")).unwrap();
        symlink(&outside, workspace.join("out")).unwrap();
        symlink("sub/../out", workspace.join("relative")).unwrap();
        let check = |path: &str, expected: PathBuf| {
            assert_eq!(
                resolve(&workspace, Path::new(path)).unwrap(),
                expected,
                "{path}"
            );
        };
        check("a.txt", workspace.join("a.txt"));
        check("./sub/./a.txt", workspace.join("sub/a.txt"));
        check("sub/../a.txt", workspace.join("a.txt"));
        check("out/x", outside.join("x"));
        check("relative/x", outside.join("x"));
        // `..` after a link leaves the link's target, not the link's directory.
        check("out/../y", outside.parent().unwrap().join("y"));
        // Not existing yet: judged by the nearest existing parent, through links.
        check("new/deeper/x", workspace.join("new/deeper/x"));
        check("missing/../out/x", outside.join("x"));
        check(outside.join("z").to_str().unwrap(), outside.join("z"));
    }

    #[test]
    fn resolve_stops_at_a_loop() {
        let (_w, workspace, _o, _) = dirs();
        symlink("b", workspace.join("a")).unwrap();
        symlink("a", workspace.join("b")).unwrap();
        let error = resolve(&workspace, Path::new("a/x")).unwrap_err();
        assert!(
            error.contains("too many levels of symbolic links"),
            "{error}"
        );
    }

    /// A workspace outside the temp directory (which is writable too).
    fn scratch() -> (tempfile::TempDir, PathBuf) {
        // `target/` is not there when the build goes elsewhere (`CARGO_TARGET_DIR`).
        let parent = concat!(env!("CARGO_MANIFEST_DIR"), "/target");
        std::fs::create_dir_all(parent).unwrap();
        let dir = tempfile::tempdir_in(parent).unwrap();
        let path = dir.path().canonicalize().unwrap();
        (dir, path)
    }

    #[test]
    fn writes_stay_in_the_workspace_as_written() {
        let (_w, workspace) = scratch();
        let (_o, outside) = scratch();
        let policy = SandboxPolicy::default();
        let target = |path: &str| write_target(&policy, &workspace, Path::new(path));
        assert_eq!(
            target("a/b.txt"),
            Ok((workspace.clone(), PathBuf::from("a/b.txt")))
        );
        assert_eq!(
            target("sub/../a.txt"),
            Ok((workspace.clone(), PathBuf::from("a.txt")))
        );
        assert_eq!(
            target("/dev/null"),
            Ok((PathBuf::from("/dev/null"), PathBuf::new()))
        );
        // Judged as written: a link on the way is refused by the write itself.
        symlink(&outside, workspace.join("out")).unwrap();
        assert_eq!(
            target("out/x"),
            Ok((workspace.clone(), PathBuf::from("out/x")))
        );
        let blocked = format!(
            "blocked by the sandbox: write outside {} (sandbox = \"workspace_write\")",
            workspace.display()
        );
        assert_eq!(
            target(outside.join("x").to_str().unwrap()),
            Err(blocked.clone())
        );
        let error = target("../escape.txt").unwrap_err();
        assert!(error.starts_with(&blocked), "{error}");
        assert!(error.contains(": ../escape.txt is "), "{error}");
    }

    #[test]
    fn the_services_state_is_never_a_target() {
        let (_w, workspace) = scratch();
        let policy = SandboxPolicy {
            protected: std::sync::Arc::new(super::super::Protected::new(
                &workspace.join("data"),
                None,
            )),
            ..SandboxPolicy::default()
        };
        let error = write_target(&policy, &workspace, Path::new("data/rules.jsonl")).unwrap_err();
        assert!(
            error.contains("the service's own files are out of reach"),
            "{error}"
        );
        let error = check_read(&policy, &workspace, Path::new("data/local-token")).unwrap_err();
        assert!(error.contains("is the service's own state"), "{error}");
    }

    #[test]
    fn read_only_blocks_writes_inside_too() {
        let (_w, workspace) = scratch();
        let policy = SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            ..SandboxPolicy::default()
        };
        assert_eq!(
            write_target(&policy, &workspace, Path::new("a.txt")),
            Err("blocked by the sandbox: no writes allowed (sandbox = \"read_only\")".to_owned())
        );
        assert!(write_target(&policy, &workspace, Path::new("/dev/null")).is_ok());
    }

    #[test]
    fn reads_are_allowed_except_a_process_environment() {
        let (_w, workspace, _o, _) = dirs();
        let policy = SandboxPolicy::default();
        assert_eq!(
            check_read(&policy, &workspace, Path::new("/etc/hostname")),
            Ok(())
        );
        for path in [
            "/proc/self/environ",
            "/proc/1/environ",
            "/proc/thread-self/environ",
        ] {
            let error = check_read(&policy, &workspace, Path::new(path)).unwrap_err();
            assert!(error.contains("is a process's environment"), "{error}");
        }
    }
}
