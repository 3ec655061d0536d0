//! The sandbox's rules for the file tools, applied in-process: a path is judged by where it
//! really leads, the way the kernel judges a shell command's writes. Symlinks are followed
//! (a link in the workspace that points outside is outside), `..` is resolved after them, and a
//! path that does not exist yet is judged by its nearest existing parent.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::sandbox::{SandboxPolicy, WRITABLE_DEVICES, writable_roots};
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

/// Where a `write_file` of `path` may write, under `policy`: the resolved path, or the message
/// for the model when the sandbox blocks it.
pub(super) fn check_write(
    policy: &SandboxPolicy,
    cwd: &Path,
    path: &Path,
) -> Result<PathBuf, String> {
    check_write_under(policy, writable_roots(policy.mode, cwd), cwd, path)
}

/// [`check_write`] with the writable directories given.
fn check_write_under(
    policy: &SandboxPolicy,
    mut allowed: Vec<PathBuf>,
    cwd: &Path,
    path: &Path,
) -> Result<PathBuf, String> {
    let target = resolve(cwd, path)?;
    allowed.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
    let inside = allowed
        .iter()
        .any(|root| resolve(Path::new("/"), root).is_ok_and(|root| target.starts_with(root)));
    if inside {
        return Ok(target);
    }
    let what = match policy.mode {
        SandboxMode::ReadOnly => "no writes allowed".to_owned(),
        _ => format!("write outside {}", cwd.display()),
    };
    let shown = if target == cwd.join(path) {
        String::new()
    } else {
        format!(": {} leads to {}", path.display(), target.display())
    };
    Err(format!(
        "blocked by the sandbox: {what} ({}){shown}",
        policy.setting()
    ))
}

/// Whether `read_file` may read `path`: everything but a process's environment
/// (`/proc/PID/environ`): `read_file` runs in the service, whose own environment holds the
/// providers' API keys.
pub(super) fn check_read(policy: &SandboxPolicy, cwd: &Path, path: &Path) -> Result<(), String> {
    let target = resolve(cwd, path)?;
    if target.starts_with("/proc") && target.file_name().is_some_and(|name| name == "environ") {
        return Err(format!(
            "blocked by the sandbox: {} is a process's environment ({})",
            path.display(),
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

    /// `check_write` with only the workspace writable (no temp directory).
    fn check_write(policy: &SandboxPolicy, cwd: &Path, path: &Path) -> Result<PathBuf, String> {
        let roots = match policy.mode {
            SandboxMode::WorkspaceWrite => vec![cwd.to_path_buf()],
            _ => Vec::new(),
        };
        check_write_under(policy, roots, cwd, path)
    }

    #[test]
    fn writes_stay_in_the_workspace() {
        let (_w, workspace, _o, outside) = dirs();
        symlink(&outside, workspace.join("out")).unwrap();
        // A dangling link counts where it points.
        symlink(outside.join("new.txt"), workspace.join("dangling")).unwrap();
        let policy = SandboxPolicy::default();
        assert_eq!(
            check_write(&policy, &workspace, Path::new("a/b.txt")),
            Ok(workspace.join("a/b.txt"))
        );
        assert_eq!(
            check_write(&policy, &workspace, Path::new("/dev/null")),
            Ok(PathBuf::from("/dev/null"))
        );
        let blocked = format!(
            "blocked by the sandbox: write outside {} (sandbox = \"workspace_write\")",
            workspace.display()
        );
        let outside_file = outside.join("x.txt");
        assert_eq!(
            check_write(&policy, &workspace, &outside_file),
            Err(blocked.clone())
        );
        for path in [
            "out/x.txt",
            "dangling",
            "../escape.txt",
            "missing/../out/x.txt",
        ] {
            let error = check_write(&policy, &workspace, Path::new(path)).unwrap_err();
            assert!(error.starts_with(&blocked), "{path}: {error}");
            assert!(error.contains(&format!(": {path} leads to ")), "{error}");
        }
    }

    #[test]
    fn read_only_blocks_writes_inside_too() {
        let (_w, workspace, _o, _) = dirs();
        let policy = SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            ..SandboxPolicy::default()
        };
        assert_eq!(
            check_write(&policy, &workspace, Path::new("a.txt")),
            Err("blocked by the sandbox: no writes allowed (sandbox = \"read_only\")".to_owned())
        );
        assert!(check_write(&policy, &workspace, Path::new("/dev/null")).is_ok());
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
