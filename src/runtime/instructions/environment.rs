//! The environment block: where the agent is and what binds it (working directory, system,
//! shell, date, git, sandbox, network, approvals, model). It is worked out once per session and
//! kept, the date changing it at most daily, so that every request of a conversation starts
//! with the same bytes (a provider's prompt cache depends on it).
//!
//! Git is asked through the sandbox, read-only and without network, whatever the agent's own
//! sandbox: a repository's configuration can name programs git runs (a file system monitor, a
//! filter), and the model may have written it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::SandboxMode;
use crate::sandbox::{Program, SandboxPolicy};

/// The longest `git status` may take; past it the block goes without the count.
const GIT_TIMEOUT: Duration = Duration::from_secs(3);

/// What the block says, gathered when a turn starts.
#[derive(Debug, Clone)]
pub struct Facts {
    pub cwd: PathBuf,
    /// The provider's name of the model.
    pub model: String,
    /// The session's sandbox: its mode and network are described, and git runs behind it
    /// (read-only).
    pub sandbox: SandboxPolicy,
    /// Tools that ask a user first, and tools the permissions refuse, among those offered.
    pub asking: Vec<String>,
    pub denied: Vec<String>,
    /// Shell command patterns that ask or are refused (`git push*`), with the permission.
    pub shell_rules: Vec<(String, &'static str)>,
}

/// One session's block, kept while its conversation is loaded.
#[derive(Debug, Default)]
pub struct EnvironmentCell {
    kept: Mutex<Option<Kept>>,
}

/// What git said on a date, and the block last given.
#[derive(Debug)]
struct Kept {
    date: String,
    git: Git,
    text: Arc<str>,
}

impl EnvironmentCell {
    /// The block worked out last, if any (for the usage meter's estimate).
    pub fn current(&self) -> Option<Arc<str>> {
        self.lock().as_ref().map(|kept| kept.text.clone())
    }

    /// Today's block for these facts: git is asked once a day; the rest (a fallback model's
    /// name, say) is written from the facts each time.
    pub async fn describe(&self, facts: &Facts) -> Arc<str> {
        let today = today();
        let git = match self.lock().as_ref() {
            Some(kept) if kept.date == today => Some(kept.git.clone()),
            _ => None,
        };
        let git = match git {
            Some(git) => git,
            None => git_summary(&facts.cwd, &facts.sandbox).await,
        };
        let text = render(facts, &today, &git);
        let mut kept = self.lock();
        match kept.as_ref() {
            // The same bytes as before: the same allocation too.
            Some(same) if same.date == today && *same.text == *text => same.text.clone(),
            _ => {
                let text: Arc<str> = text.into();
                *kept = Some(Kept {
                    date: today,
                    git,
                    text: text.clone(),
                });
                text
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn today() -> String {
    chrono::Local::now().format("%Y-%m-%d").to_string()
}

/// What git says of the working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Git {
    NotARepository,
    Repository {
        branch: Option<String>,
        changed: Option<usize>,
    },
}

fn render(facts: &Facts, today: &str, git: &Git) -> String {
    let mut lines = vec![
        "# Environment".to_owned(),
        format!("- Working directory: {}", facts.cwd.display()),
        format!("- Operating system: {}", operating_system()),
        format!("- Shell: commands run with `sh -c`{}", shell_name()),
        format!("- Today's date: {today}"),
        format!("- Git: {}", describe_git(git)),
        format!("- Sandbox: {}", describe_sandbox(&facts.sandbox)),
        format!(
            "- Network: {}",
            if facts.sandbox.network || facts.sandbox.mode == SandboxMode::Off {
                "commands may use the network"
            } else {
                "off for commands and file tools (connections fail)"
            }
        ),
        format!("- Approvals: {}", describe_approvals(facts)),
        format!("- Model: {}", facts.model),
    ];
    lines.retain(|line| !line.is_empty());
    lines.join("\n")
}

fn operating_system() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let release = release.trim();
    let os = std::env::consts::OS;
    let arch = std::env::consts::ARCH;
    if release.is_empty() {
        format!("{os} ({arch})")
    } else {
        format!("{os} {release} ({arch})")
    }
}

/// Which shell `/bin/sh` is, when it is a link to one (dash, bash, busybox).
fn shell_name() -> String {
    match std::fs::canonicalize("/bin/sh") {
        Ok(path) if path != Path::new("/bin/sh") && path != Path::new("/usr/bin/sh") => {
            let name = path.file_name().map_or_else(
                || path.display().to_string(),
                |name| name.to_string_lossy().into_owned(),
            );
            format!(" (/bin/sh is {name})")
        }
        _ => String::new(),
    }
}

fn describe_git(git: &Git) -> String {
    match git {
        Git::NotARepository => "not a git repository".to_owned(),
        Git::Repository { branch, changed } => {
            let mut text = "a git repository".to_owned();
            match branch {
                Some(branch) => text.push_str(&format!(", branch `{branch}`")),
                None => text.push_str(", no branch checked out"),
            }
            if let Some(changed) = changed {
                let files = if *changed == 1 { "file" } else { "files" };
                text.push_str(&format!(
                    ", {changed} changed {files} (uncommitted or untracked) when this session \
                     started"
                ));
            }
            text
        }
    }
}

fn describe_sandbox(policy: &SandboxPolicy) -> String {
    match policy.mode {
        SandboxMode::ReadOnly => "read_only: commands and file tools may read but not write \
                                  (except devices such as /dev/null)"
            .to_owned(),
        SandboxMode::WorkspaceWrite => "workspace_write: commands and file tools may write only \
                                        under the working directory and the temp directory"
            .to_owned(),
        SandboxMode::Off => "off: commands run with the service's rights".to_owned(),
    }
}

fn describe_approvals(facts: &Facts) -> String {
    let mut parts = Vec::new();
    if !facts.asking.is_empty() {
        parts.push(format!(
            "{} ask a user first",
            backticked(&facts.asking).join(", ")
        ));
    }
    if !facts.denied.is_empty() {
        parts.push(format!(
            "{} are refused",
            backticked(&facts.denied).join(", ")
        ));
    }
    if !facts.shell_rules.is_empty() {
        let rules: Vec<String> = facts
            .shell_rules
            .iter()
            .map(|(pattern, permission)| format!("`{pattern}` ({permission})"))
            .collect();
        parts.push(format!("shell commands matching {}", rules.join(", ")));
    }
    parts.push("escalating a command out of the sandbox always asks".to_owned());
    if facts.asking.is_empty() && facts.denied.is_empty() && facts.shell_rules.is_empty() {
        parts.insert(0, "your tools run without asking".to_owned());
    }
    parts.join("; ")
}

fn backticked(names: &[String]) -> Vec<String> {
    names.iter().map(|name| format!("`{name}`")).collect()
}

/// The branch and the count of changed files, from `git status` run in the sandbox; the
/// branch from `.git/HEAD` when git cannot be run.
async fn git_summary(cwd: &Path, policy: &SandboxPolicy) -> Git {
    let Some(top) = super::project::repository_top(cwd) else {
        return Git::NotARepository;
    };
    match git_status(cwd, policy).await {
        Some(git) => git,
        None => Git::Repository {
            branch: head_branch(&top),
            changed: None,
        },
    }
}

async fn git_status(cwd: &Path, policy: &SandboxPolicy) -> Option<Git> {
    // Read-only and offline, whatever the agent may do; never lifted by an escalation.
    let policy = SandboxPolicy {
        mode: SandboxMode::ReadOnly,
        network: false,
        escalated: false,
        ..policy.clone()
    };
    let args: Vec<String> = [
        "-c",
        "core.fsmonitor=false",
        "--no-optional-locks",
        "status",
        "--porcelain=v1",
        "--branch",
        "-z",
        "--untracked-files=normal",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut command = crate::sandbox::command(
        &policy,
        cwd,
        Program::Exec {
            program: "git",
            args: &args,
        },
    )
    .ok()?;
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(GIT_TIMEOUT, command.output())
        .await
        .ok()?
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(parse_status(&String::from_utf8_lossy(&output.stdout)))
}

/// `git status --porcelain=v1 --branch -z`: a `## branch...upstream` entry, then one entry per
/// changed path (a rename or copy followed by its source path).
fn parse_status(output: &str) -> Git {
    let mut entries = output.split('\0').filter(|entry| !entry.is_empty());
    let mut branch = None;
    let mut changed = 0;
    while let Some(entry) = entries.next() {
        if let Some(head) = entry.strip_prefix("## ") {
            branch = branch_of(head);
            continue;
        }
        changed += 1;
        if entry.starts_with('R') || entry.starts_with('C') {
            entries.next();
        }
    }
    Git::Repository {
        branch,
        changed: Some(changed),
    }
}

/// The branch of a `## ` line: `main...origin/main [ahead 1]`, `No commits yet on main`, or
/// `HEAD (no branch)` when detached.
fn branch_of(head: &str) -> Option<String> {
    let head = head.strip_prefix("No commits yet on ").unwrap_or(head);
    if head.starts_with("HEAD (no branch)") {
        return None;
    }
    let name = head.split("...").next().unwrap_or(head);
    let name = name.split(' ').next().unwrap_or(name);
    (!name.is_empty()).then(|| name.to_owned())
}

/// The branch `.git/HEAD` names (`ref: refs/heads/<branch>`).
fn head_branch(top: &Path) -> Option<String> {
    let head = std::fs::read_to_string(top.join(".git").join("HEAD")).ok()?;
    head.trim()
        .strip_prefix("ref: refs/heads/")
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(cwd: &Path) -> Facts {
        Facts {
            cwd: cwd.to_path_buf(),
            model: "gpt-test".into(),
            sandbox: SandboxPolicy::default(),
            asking: vec!["shell".into()],
            denied: Vec::new(),
            shell_rules: vec![("git push*".into(), "deny")],
        }
    }

    #[test]
    fn porcelain_status_gives_the_branch_and_the_count() {
        let output =
            "## main...origin/main [ahead 1]\0 M src/a.rs\0R  new.rs\0old.rs\0?? notes.txt\0";
        assert_eq!(
            parse_status(output),
            Git::Repository {
                branch: Some("main".into()),
                changed: Some(3)
            }
        );
        assert_eq!(branch_of("No commits yet on trunk"), Some("trunk".into()));
        assert_eq!(branch_of("HEAD (no branch)"), None);
        assert_eq!(branch_of("feature"), Some("feature".into()));
    }

    #[test]
    fn the_block_names_what_binds_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let text = render(
            &facts(dir.path()),
            "2026-12-06",
            &Git::Repository {
                branch: Some("main".into()),
                changed: Some(1),
            },
        );
        assert!(text.starts_with("# Environment\n"));
        assert!(text.contains(&format!("- Working directory: {}", dir.path().display())));
        assert!(text.contains("- Today's date: 2026-12-06"));
        assert!(text.contains("branch `main`, 1 changed file "));
        assert!(text.contains("workspace_write"));
        assert!(text.contains("off for commands"));
        assert!(text.contains("`shell` ask a user first"));
        assert!(text.contains("`git push*` (deny)"));
        assert!(text.contains("- Model: gpt-test"));
    }

    #[tokio::test]
    async fn a_session_keeps_its_block_within_a_day() {
        let dir = tempfile::tempdir().unwrap();
        let cell = EnvironmentCell::default();
        assert_eq!(cell.current(), None);
        let first = cell.describe(&facts(dir.path())).await;
        assert!(first.contains("not a git repository"), "{first}");
        // A change of the directory does not change the block of a running session.
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let second = cell.describe(&facts(dir.path())).await;
        assert_eq!(first, second);
        assert_eq!(cell.current().as_deref(), Some(&*first));
    }
}
