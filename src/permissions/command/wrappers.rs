//! Seeing through the programs that run another program (`sudo`, `env`, `timeout`, `setsid`,
//! `flock`, `busybox`, …) and the shells that run a script (`bash -c`, `eval`, `su -c`), so that
//! a rule for `rm*` sees the `rm` in `sudo -u bob setsid timeout 5 rm x`. Some of these count
//! as running other programs all the same (`runners.rs`): what they were is kept.

use super::shells::Shell;
use crate::permissions::runners::{STARTERS, base_name, variable_runs_code};

/// What a command's words run once the wrappers around them are seen through.
pub(super) enum Unwrapped {
    Command(Vec<String>),
    /// `sh -c SCRIPT`, `eval WORDS`, `trap ACTION`: the script to split in place of the
    /// command, and the shell that runs it (none: the one running the command).
    Script(String, Option<Shell>),
}

/// What `unwrap` found: what runs, and why what it saw through runs other programs (a starter
/// like `setsid`, `env -S`, a variable like `BASH_ENV` set for it), if it does.
pub(super) struct Seen {
    pub unwrapped: Unwrapped,
    pub runner: Option<String>,
}

/// The options of a wrapper program: short ones taking an argument, as the next word or
/// attached (`-u bob`, `-ubob`), short ones taking it only attached (`xargs -i{}`), and long
/// ones taking one (`--user bob`, `--user=bob`), space-separated.
struct Options(&'static str, &'static str, &'static str);

const NO_OPTIONS: Options = Options("", "", "");
const SUDO: Options = Options(
    "aCcDgpRrTtUu",
    "h",
    "auth-type chdir chroot close-from command-timeout group host login-class other-user \
     prompt role type user",
);
const ENV: Options = Options("aCPSu", "", "argv0 chdir split-string unset");
const TIMEOUT: Options = Options("ks", "", "kill-after signal");
const NICE: Options = Options("n", "", "adjustment");
const EXEC: Options = Options("a", "", "");
const TIME: Options = Options("fo", "", "format output");
const STDBUF: Options = Options("eio", "", "error input output");
const XARGS: Options = Options(
    "adEILnPs",
    "eil",
    "arg-file delimiter max-args max-chars max-procs process-slot-var",
);
const SHELL: Options = Options("oO", "", "init-file rcfile");
const IONICE: Options = Options("cnpPu", "", "class classdata pid pgid uid");
const CHRT: Options = Options("TPD", "", "sched-runtime sched-period sched-deadline");
const FLOCK: Options = Options("wEc", "", "timeout conflict-exit-code command");
const STRACE: Options = Options(
    "abeEIoOpPsSuUX",
    "",
    "attach columns env output signal string-limit user trace",
);
const UNSHARE: Options = Options(
    "GRSTtwW",
    "",
    "map-user map-group root setgid setuid target wd",
);
const CHROOT: Options = Options("", "", "groups userspec");
const WATCH: Options = Options("n", "", "interval");
const SCRIPT: Options = Options(
    "cTIOBEo",
    "t",
    "command echo log-in log-io log-out log-timing output-limit",
);
const SU: Options = Options(
    "cgGsuw",
    "",
    "command group session-command shell supp-group user whitelist-environment",
);

impl Options {
    /// Reads the options after `words[0]` as getopt does, stopping at the first operand.
    /// Returns where the operands start and the options seen, with their arguments.
    fn read(&self, words: &[String]) -> (usize, Vec<(String, Option<String>)>) {
        let mut seen = Vec::new();
        let mut at = 1;
        while let Some(word) = words.get(at) {
            at += 1;
            if word == "--" {
                break;
            }
            if let Some(long) = word.strip_prefix("--") {
                let (name, mut value) = match long.split_once('=') {
                    Some((name, value)) => (name, Some(value.to_owned())),
                    None => (long, None),
                };
                if value.is_none() && self.2.split(' ').any(|takes| takes == name) {
                    value = words.get(at).cloned();
                    at += 1;
                }
                seen.push((name.to_owned(), value));
                continue;
            }
            // Shells take `+o name` as well as `-o name`; no other program here runs a `+…`.
            if word.len() < 2 || !word.starts_with(['-', '+']) {
                at -= 1;
                break;
            }
            for (index, flag) in word.char_indices().skip(1) {
                let attached = &word[index + flag.len_utf8()..];
                if self.0.contains(flag) && attached.is_empty() {
                    seen.push((flag.to_string(), words.get(at).cloned()));
                    at += 1;
                    break;
                }
                if self.0.contains(flag) || self.1.contains(flag) {
                    seen.push((flag.to_string(), Some(attached.to_owned())));
                    break;
                }
                seen.push((flag.to_string(), None));
            }
        }
        (at.min(words.len()), seen)
    }
}

/// What the command `words` runs, seeing through wrappers around wrappers.
pub(super) fn unwrap(mut words: Vec<String>) -> Seen {
    let mut runner: Option<String> = None;
    loop {
        let Some(program) = words.first() else {
            return Seen {
                unwrapped: Unwrapped::Command(words),
                runner,
            };
        };
        let name = base_name(program).to_owned();
        if STARTERS.contains(&name.as_str()) {
            note(
                &mut runner,
                format!("{name} starts the program in its arguments"),
            );
        }
        let operands = |(at, _): &(usize, _)| words[*at..].to_vec();
        let seen = |read: &(usize, Vec<(String, Option<String>)>), names: &[&str]| {
            read.1
                .iter()
                .any(|(name, _)| names.contains(&name.as_str()))
        };
        let value = |read: &(usize, Vec<(String, Option<String>)>), names: &[&str]| {
            read.1
                .iter()
                .find(|(name, _)| names.contains(&name.as_str()))
                .and_then(|(_, value)| value.clone())
        };
        let script = |script: String, shell: Option<Shell>| Unwrapped::Script(script, shell);
        let inner = match name.as_str() {
            "sudo" | "doas" => {
                let read = SUDO.read(&words);
                // `sudo -e FILE` edits files; it runs no command of the user's.
                if seen(&read, &["e", "edit"]) {
                    None
                } else {
                    Some(without_assignments(operands(&read), &mut runner))
                }
            }
            "env" => {
                let read = ENV.read(&words);
                // `env -S 'rm -rf /'` splits its argument into the command's first words.
                let mut inner: Vec<String> = read
                    .1
                    .iter()
                    .filter(|(name, _)| name == "S" || name == "split-string")
                    .flat_map(|(_, value)| value.iter().flat_map(|v| v.split_whitespace()))
                    .map(str::to_owned)
                    .collect();
                if !inner.is_empty() {
                    note(
                        &mut runner,
                        "env -S splits a string into a command".to_owned(),
                    );
                }
                inner.extend(operands(&read).into_iter().skip_while(|word| word == "-"));
                Some(without_assignments(inner, &mut runner))
            }
            "timeout" => Some(
                operands(&TIMEOUT.read(&words))
                    .into_iter()
                    .skip(1)
                    .collect(),
            ),
            "nice" => Some(operands(&NICE.read(&words))),
            "exec" => Some(operands(&EXEC.read(&words))),
            "time" => Some(operands(&TIME.read(&words))),
            "stdbuf" => Some(operands(&STDBUF.read(&words))),
            "xargs" => Some(operands(&XARGS.read(&words))),
            "nohup" | "setsid" | "busybox" | "valgrind" => Some(operands(&NO_OPTIONS.read(&words))),
            "taskset" => {
                let read = NO_OPTIONS.read(&words);
                (!seen(&read, &["p", "pid"])).then(|| operands(&read).into_iter().skip(1).collect())
            }
            "ionice" => {
                let read = IONICE.read(&words);
                (!seen(&read, &["p", "P", "u", "pid", "pgid", "uid"])).then(|| operands(&read))
            }
            "chrt" => {
                let read = CHRT.read(&words);
                (!seen(&read, &["p", "m", "pid", "max"]))
                    .then(|| operands(&read).into_iter().skip(1).collect())
            }
            "flock" => {
                let read = FLOCK.read(&words);
                if let Some(command) = value(&read, &["c", "command"]) {
                    return Seen {
                        unwrapped: script(command, None),
                        runner,
                    };
                }
                Some(operands(&read).into_iter().skip(1).collect())
            }
            "strace" | "ltrace" => Some(operands(&STRACE.read(&words))),
            "unshare" | "nsenter" => Some(operands(&UNSHARE.read(&words))),
            "chroot" => Some(operands(&CHROOT.read(&words)).into_iter().skip(1).collect()),
            "watch" => {
                let read = WATCH.read(&words);
                if seen(&read, &["x", "exec"]) {
                    Some(operands(&read))
                } else {
                    // watch hands its words to `sh -c`.
                    return Seen {
                        unwrapped: script(operands(&read).join(" "), Some(Shell::Sh)),
                        runner,
                    };
                }
            }
            "script" | "su" | "runuser" => {
                let read = if name == "script" {
                    SCRIPT.read(&words)
                } else {
                    SU.read(&words)
                };
                if let Some(command) = value(&read, &["c", "command", "session-command"]) {
                    return Seen {
                        unwrapped: script(command, None),
                        runner,
                    };
                }
                // `runuser -u USER -- COMMAND…`.
                (name == "runuser" && seen(&read, &["u", "user"])).then(|| operands(&read))
            }
            // `command -v git` only looks `git` up.
            "command" => {
                let read = NO_OPTIONS.read(&words);
                (!seen(&read, &["v", "V"])).then(|| operands(&read))
            }
            // `trap 'rm -f $tmp' EXIT` runs its first operand when the script exits.
            "trap" => match operands(&NO_OPTIONS.read(&words)).first() {
                Some(action) if action != "-" => {
                    return Seen {
                        unwrapped: script(action.clone(), None),
                        runner,
                    };
                }
                _ => None,
            },
            "eval" => {
                let read = NO_OPTIONS.read(&words);
                return Seen {
                    unwrapped: script(operands(&read).join(" "), None),
                    runner,
                };
            }
            "sh" | "dash" | "ash" | "bash" | "zsh" | "ksh" | "mksh" => {
                let read = SHELL.read(&words);
                let shell = match name.as_str() {
                    "sh" | "dash" | "ash" => Shell::Sh,
                    _ => Shell::Bash,
                };
                // `bash -c SCRIPT NAME ARGS…`; without `-c` it runs a file or its input.
                match words.get(read.0) {
                    Some(text) if seen(&read, &["c"]) => {
                        return Seen {
                            unwrapped: script(text.clone(), Some(shell)),
                            runner,
                        };
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        match inner {
            // A wrapper with nothing to run (`sudo -s`, `xargs`) is what runs.
            Some(inner) if !inner.is_empty() => words = inner,
            _ => {
                return Seen {
                    unwrapped: Unwrapped::Command(words),
                    runner,
                };
            }
        }
    }
}

/// Keeps the first reason found for running other programs.
fn note(runner: &mut Option<String>, reason: String) {
    runner.get_or_insert(reason);
}

/// Drops leading `NAME=value` words, which `env` and `sudo` put into the environment; one that
/// makes programs run other code (`BASH_ENV=…`) is noted.
fn without_assignments(words: Vec<String>, runner: &mut Option<String>) -> Vec<String> {
    let assigned = |word: &String| -> Option<String> {
        word.split_once('=').and_then(|(name, _)| {
            let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            valid.then(|| name.to_owned())
        })
    };
    let mut words = words.into_iter().peekable();
    while let Some(name) = words.peek().and_then(assigned) {
        if let Some(reason) = variable_runs_code(&name) {
            note(runner, reason);
        }
        words.next();
    }
    words.collect()
}
