//! Programs that run other programs, or code, that a rule matched against the command line
//! cannot see: an interpreter given a script, a shell reading a file or its input, `find -exec`,
//! `xargs`, `make`, `git` with `-c` or an alias, `tar --to-command`, `sed`'s `e`, `setsid` and
//! its kind, a program named by a glob, a variable like `BASH_ENV`. When an agent has rules for
//! its shell commands, such a part asks (or is refused by a deny rule that matches it), unless a
//! rule names that use exactly; the sandbox, not this list, is what bounds what runs.
//!
//! The reasons are short phrases for the approval's question: "`python3 -c …` runs other
//! programs (an interpreter running code given to it)".

/// Interpreters: any use but asking their version or help runs code they are given.
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "perl",
    "ruby",
    "irb",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "expect",
    "Rscript",
    "R",
    "julia",
    "osascript",
    "guile",
    "racket",
    "sbcl",
    "ghci",
    "runghc",
    "scala",
    "groovy",
    "jshell",
    "java",
    "pwsh",
    "powershell",
    "gdb",
    "lldb",
];

/// Shells: with `-c` the splitter reads their script; without, they run a file or their input.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash",
];

/// Programs that run commands of a file the rules cannot see, or defined elsewhere.
const COMMAND_FILES: &[&str] = &[
    "make",
    "gmake",
    "just",
    "rake",
    "ninja",
    "npx",
    "pnpx",
    "source",
    ".",
    "alias",
    "hash",
    "enable",
    "parallel",
    "entr",
    "at",
    "batch",
    "crontab",
    "systemd-run",
    "pkexec",
    "chpst",
];

/// Programs that start another program given in their arguments, seen through by the
/// splitter (`wrappers.rs`) but counted here as running other programs.
pub const STARTERS: &[&str] = &[
    "setsid", "su", "runuser", "script", "strace", "ltrace", "unshare", "nsenter", "watch",
    "flock", "taskset", "ionice", "chrt", "chroot", "valgrind", "xargs", "busybox",
];

/// Variables that make a program run code: a shell's start-up file, a dynamic library loaded
/// into every program, a pager or editor, git's and the interpreters' hooks.
const CODE_VARIABLES: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_EXEC_PATH",
    "GIT_ASKPASS",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "SSH_ASKPASS",
    "LESSOPEN",
    "MANPAGER",
    "SYSTEMD_PAGER",
];

/// git's own commands: any other name is an alias (which may run a shell command) or a
/// `git-NAME` program found on the path.
const GIT_COMMANDS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "backfill",
    "bisect",
    "blame",
    "branch",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "describe",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "fetch",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "hash-object",
    "help",
    "init",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-tree",
    "mktag",
    "mktree",
    "mv",
    "name-rev",
    "notes",
    "prune",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "remote",
    "repack",
    "replace",
    "replay",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-branch",
    "show-ref",
    "sparse-checkout",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "update-index",
    "update-ref",
    "var",
    "verify-commit",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// git's options before its command: those taking a value as the next word.
const GIT_VALUED: &[&str] = &[
    "-C",
    "-c",
    "--exec-path",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
    "--attr-source",
    "--list-cmds",
];

/// The program's name without its directory.
pub fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Why the command `words` (wrappers seen through) runs code a rule on its line cannot see;
/// `None` when it does not.
pub fn program_runs_code(words: &[String]) -> Option<String> {
    let (program, arguments) = words.split_first()?;
    if program.contains(['*', '?', '[', ']', '{', '}']) {
        return Some(
            "its program is named by a pattern, so which one runs is decided when it runs"
                .to_owned(),
        );
    }
    if program.chars().any(|c| c.is_control() || !c.is_ascii()) {
        return Some("its program's name has unusual characters".to_owned());
    }
    let name = base_name(program);
    let asks_only_about_itself = |arguments: &[String]| matches!(arguments, [one] if matches!(one.as_str(), "--version" | "-V" | "-v" | "--help" | "-h"));
    if is_interpreter(name) && !asks_only_about_itself(arguments) {
        return Some("an interpreter running code given to it".to_owned());
    }
    if SHELLS.contains(&name) && !asks_only_about_itself(arguments) {
        return Some("a shell running a script from a file or its input".to_owned());
    }
    if COMMAND_FILES.contains(&name) {
        return Some("it runs commands kept elsewhere (a file, a definition)".to_owned());
    }
    if STARTERS.contains(&name) {
        return Some("it starts the program in its arguments".to_owned());
    }
    match name {
        "find" => find_runs(arguments),
        "awk" | "gawk" | "mawk" | "nawk" => awk_runs(arguments),
        "git" => git_runs(arguments),
        "tar" | "bsdtar" | "gtar" => tar_runs(arguments),
        "sed" | "gsed" => sed_runs(arguments),
        "npm" | "yarn" | "pnpm" => package_script(arguments),
        "env" => env_runs(arguments),
        "export" | "declare" | "typeset" | "local" | "readonly" => arguments
            .iter()
            .filter_map(|word| word.split_once('=').map(|(name, _)| name))
            .find_map(variable_runs_code),
        name if name.starts_with("ld-linux") || name.starts_with("ld.so") => {
            Some("the dynamic loader running a program".to_owned())
        }
        _ => None,
    }
}

fn is_interpreter(name: &str) -> bool {
    INTERPRETERS.contains(&name)
        // python3.12, perl5.36, lua5.4, tclsh8.6, pypy3.10
        || ["python", "perl", "lua", "tclsh", "wish", "pypy", "ruby", "php", "node"]
            .iter()
            .any(|family| {
                name.strip_prefix(family).is_some_and(|version| {
                    !version.is_empty() && version.chars().all(|c| c.is_ascii_digit() || c == '.')
                })
            })
}

/// Why a variable assigned for a command (`BASH_ENV=x sh`) makes it run other code.
pub fn variable_runs_code(name: &str) -> Option<String> {
    (CODE_VARIABLES.contains(&name) || name.starts_with("GIT_CONFIG_"))
        .then(|| format!("it sets {name}, which makes programs run other code"))
}

/// Whether an awk program can run a command: `system()`, a pipe to or from one, `getline`
/// from one, an extension loaded, or a program read from a file.
fn awk_runs(arguments: &[String]) -> Option<String> {
    let mut at = 0;
    while let Some(word) = arguments.get(at) {
        at += 1;
        match word.as_str() {
            "-f" | "--file" | "-E" | "--exec" | "-i" | "--include" | "-l" | "--load" => {
                return Some("awk runs a program from a file".to_owned());
            }
            "-F" | "-v" | "--field-separator" | "--assign" => at += 1,
            "--" => {}
            _ if word.starts_with('-') && word.len() > 1 => {}
            program => {
                let runs = ["system", "|", "getline", "@load"]
                    .iter()
                    .any(|needle| program.contains(needle));
                return runs.then(|| "its awk program can run a command".to_owned());
            }
        }
    }
    None
}

/// The commands `find` runs for each file (`-exec rm {} ;`), each as its words.
pub fn find_commands(words: &[String]) -> Vec<Vec<String>> {
    if words
        .first()
        .is_none_or(|program| base_name(program) != "find")
    {
        return Vec::new();
    }
    let mut commands = Vec::new();
    let mut rest = &words[1..];
    while let Some(start) = rest
        .iter()
        .position(|word| matches!(word.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
    {
        let after = &rest[start + 1..];
        let end = after
            .iter()
            .position(|word| word == ";" || word == "+")
            .unwrap_or(after.len());
        if end > 0 {
            commands.push(after[..end].to_vec());
        }
        rest = &after[(end + 1).min(after.len())..];
    }
    commands
}

fn find_runs(arguments: &[String]) -> Option<String> {
    arguments.iter().find_map(|word| match word.as_str() {
        "-exec" | "-execdir" | "-ok" | "-okdir" => {
            Some(format!("find {word} runs a program for each file it finds"))
        }
        "-delete" => Some("find -delete deletes the files it finds".to_owned()),
        _ => None,
    })
}

/// git's command after its global options, and the options that change what runs.
pub fn git_command(arguments: &[String]) -> (Option<usize>, Vec<&str>) {
    let mut changes = Vec::new();
    let mut at = 0;
    while let Some(word) = arguments.get(at) {
        let option = word.split('=').next().unwrap_or(word);
        if !word.starts_with('-') {
            return (Some(at), changes);
        }
        if matches!(option, "-c" | "--config-env" | "--exec-path") {
            changes.push(option_name(option));
        }
        at += if GIT_VALUED.contains(&option) && !word.contains('=') {
            2
        } else {
            1
        };
    }
    (None, changes)
}

fn option_name(option: &str) -> &'static str {
    match option {
        "-c" => "-c",
        "--config-env" => "--config-env",
        _ => "--exec-path",
    }
}

fn git_runs(arguments: &[String]) -> Option<String> {
    let (command, changes) = git_command(arguments);
    if let Some(option) = changes.first() {
        return Some(format!("git {option} can make git run any program"));
    }
    let command = arguments.get(command?)?;
    (!GIT_COMMANDS.contains(&command.as_str())).then(|| {
        format!("git {command} is not one of git's commands: an alias or a git-{command} program")
    })
}

fn tar_runs(arguments: &[String]) -> Option<String> {
    const RUNNING: &[&str] = &[
        "--to-command",
        "--use-compress-program",
        "--checkpoint-action",
        "--info-script",
        "--new-volume-script",
        "--rsh-command",
        "--rmt-command",
    ];
    arguments.iter().find_map(|word| {
        let option = word.split('=').next().unwrap_or(word);
        let short = !word.starts_with("--")
            && word.starts_with('-')
            && (word.contains('I') || word.contains('F'));
        (RUNNING.contains(&option) || short).then(|| format!("tar {option} runs a program"))
    })
}

/// Whether `sed`'s script runs a command: its `e` command or the `e` flag of `s`, or a script
/// read from a file.
fn sed_runs(arguments: &[String]) -> Option<String> {
    let mut scripts: Vec<&str> = Vec::new();
    let mut at = 0;
    let mut script_given = false;
    while let Some(word) = arguments.get(at) {
        at += 1;
        match word.as_str() {
            "-f" | "--file" => return Some("sed -f runs a script from a file".to_owned()),
            _ if word.starts_with("--file=") => {
                return Some("sed -f runs a script from a file".to_owned());
            }
            "-e" | "--expression" => {
                scripts.extend(arguments.get(at).map(String::as_str));
                at += 1;
                script_given = true;
            }
            _ if word.starts_with("--expression=") => {
                scripts.push(&word["--expression=".len()..]);
                script_given = true;
            }
            _ if word.starts_with('-') && word.len() > 1 => {}
            _ if !script_given => {
                scripts.push(word);
                script_given = true;
            }
            _ => {}
        }
    }
    scripts
        .iter()
        .any(|script| sed_script_runs(script))
        .then(|| "sed's `e` runs a shell command".to_owned())
}

/// Looks at each command of a sed script for `e` (a command) or an `s` whose flags hold `e`.
fn sed_script_runs(script: &str) -> bool {
    let chars: Vec<char> = script.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        // Skip separators and an address (`1`, `$`, `/re/`, `\%re%`, `1,3`, `!`).
        while at < chars.len()
            && (chars[at].is_whitespace()
                || chars[at] == ';'
                || chars[at] == '{'
                || chars[at] == '}')
        {
            at += 1;
        }
        loop {
            match chars.get(at) {
                Some(c)
                    if c.is_ascii_digit()
                        || *c == '$'
                        || *c == ','
                        || *c == '!'
                        || *c == '~'
                        || *c == '+' =>
                {
                    at += 1
                }
                Some('/') => at = skip_delimited(&chars, at + 1, '/'),
                Some('\\') => match chars.get(at + 1) {
                    Some(&delimiter) => at = skip_delimited(&chars, at + 2, delimiter),
                    None => return false,
                },
                _ => break,
            }
        }
        match chars.get(at) {
            None => return false,
            Some('e') => return true,
            Some('s') | Some('y') => {
                let command = chars[at];
                let Some(&delimiter) = chars.get(at + 1) else {
                    return false;
                };
                at = skip_delimited(&chars, at + 2, delimiter);
                at = skip_delimited(&chars, at, delimiter);
                let flags_end = chars[at..]
                    .iter()
                    .position(|c| *c == ';' || *c == '\n' || *c == '}')
                    .map_or(chars.len(), |end| at + end);
                if command == 's' && chars[at..flags_end].contains(&'e') {
                    return true;
                }
                at = flags_end;
            }
            // Commands taking the rest of the line as text or a file name.
            Some('a' | 'i' | 'c' | 'r' | 'R' | 'w' | 'W' | 'b' | 't' | 'T' | ':') => {
                at = chars[at..]
                    .iter()
                    .position(|c| *c == '\n')
                    .map_or(chars.len(), |end| at + end);
            }
            Some(_) => at += 1,
        }
    }
    false
}

/// The index after the next unescaped `delimiter` from `at`.
fn skip_delimited(chars: &[char], mut at: usize, delimiter: char) -> usize {
    while let Some(&c) = chars.get(at) {
        at += 1;
        if c == '\\' {
            at += 1;
        } else if c == delimiter {
            break;
        }
    }
    at.min(chars.len())
}

/// `npm run`, `npm exec`, `yarn dlx`…: the package's scripts or another package's program.
fn package_script(arguments: &[String]) -> Option<String> {
    let command = arguments.iter().find(|word| !word.starts_with('-'))?;
    matches!(
        command.as_str(),
        "run"
            | "run-script"
            | "rum"
            | "urn"
            | "exec"
            | "x"
            | "dlx"
            | "test"
            | "t"
            | "tst"
            | "start"
            | "stop"
            | "restart"
            | "install-test"
            | "it"
    )
    .then(|| format!("{command} runs a package's scripts or programs"))
}

fn env_runs(arguments: &[String]) -> Option<String> {
    arguments
        .iter()
        .any(|word| {
            word == "-S"
                || word.starts_with("--split-string")
                || (word.starts_with("-S") && word.len() > 2)
        })
        .then(|| "env -S splits a string into a command".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(line: &str) -> Option<String> {
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        program_runs_code(&words)
    }

    #[test]
    fn programs_that_run_other_programs_are_named() {
        for line in [
            "python3 -c print(1)",
            "python3.12 script.py",
            "perl -e system",
            "node -e x",
            "awk BEGIN{system(\"rm\")}",
            "awk -f prog.awk",
            "awk {print|\"sh\"}",
            "tclsh",
            "sh",
            "bash script.sh",
            "source ./x",
            ". ./x",
            "make",
            "busybox rm x",
            "find . -exec rm {} ;",
            "find . -delete",
            "git -c alias.x=!rm x",
            "git --exec-path=/tmp push",
            "git x",
            "tar --to-command=sh -xf a",
            "tar -I sh -xf a",
            "sed e",
            "sed -e 1e",
            "sed s/a/b/e",
            "sed -f script",
            "setsid rm x",
            "xargs rm",
            "env -S rm",
            "/???/r?",
            "{rm,victim}",
            "npm run build",
            "alias x=rm",
            "/lib64/ld-linux-x86-64.so.2 /bin/rm",
            "flock /tmp/l rm",
            "watch rm",
        ] {
            assert!(runs(line).is_some(), "{line}");
        }
        for line in [
            "ls -la",
            "python3 --version",
            "git push",
            "git -C . push",
            "git --no-pager log",
            "git status",
            "tar -xf a.tar",
            "sed s/a/b/g",
            "sed -n 1,3p",
            "sed -i s/e/E/ file",
            "find . -name *.rs",
            "cat file",
            "npm install",
            "cargo test",
            "echo rm",
            "awk {print$1}",
            "awk -F: {print$2} /etc/passwd",
        ] {
            assert_eq!(runs(line), None, "{line}");
        }
    }

    #[test]
    fn git_commands_are_found_after_global_options() {
        let words: Vec<String> = "-C dir --no-pager -c a=b push origin"
            .split(' ')
            .map(str::to_owned)
            .collect();
        let (command, changes) = git_command(&words);
        assert_eq!(command, Some(5));
        assert_eq!(changes, ["-c"]);
        assert_eq!(
            git_command(&["--git-dir=x".to_owned(), "log".to_owned()]).0,
            Some(1)
        );
    }

    #[test]
    fn code_variables_are_named() {
        assert!(variable_runs_code("BASH_ENV").is_some());
        assert!(variable_runs_code("GIT_CONFIG_KEY_0").is_some());
        assert_eq!(variable_runs_code("LANG"), None);
    }
}
