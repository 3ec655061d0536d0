//! Seeing through the programs that run another program (`sudo`, `env`, `timeout`, …) and
//! the shells that run a script (`bash -c`, `eval`), so that a rule for `rm*` sees the `rm` in
//! `sudo -u bob timeout 5 rm x`.

use super::shells::Shell;

/// What a command's words run once the wrappers around them are seen through.
pub(super) enum Unwrapped {
    Command(Vec<String>),
    /// `sh -c SCRIPT`, `eval WORDS`, `trap ACTION`: the script to split in place of the
    /// command, and the shell that runs it (none: the one running the command).
    Script(String, Option<Shell>),
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
pub(super) fn unwrap(mut words: Vec<String>) -> Unwrapped {
    loop {
        let Some(program) = words.first() else {
            return Unwrapped::Command(words);
        };
        let name = program.rsplit('/').next().unwrap_or(program);
        let operands = |(at, _): &(usize, _)| words[*at..].to_vec();
        let seen = |read: &(usize, Vec<(String, Option<String>)>), names: &[&str]| {
            read.1
                .iter()
                .any(|(name, _)| names.contains(&name.as_str()))
        };
        let inner = match name {
            "sudo" | "doas" => {
                let read = SUDO.read(&words);
                // `sudo -e FILE` edits files; it runs no command of the user's.
                if seen(&read, &["e", "edit"]) {
                    None
                } else {
                    Some(without_assignments(operands(&read)))
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
                inner.extend(operands(&read).into_iter().skip_while(|word| word == "-"));
                Some(without_assignments(inner))
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
            "nohup" => Some(operands(&NO_OPTIONS.read(&words))),
            // `command -v git` only looks `git` up.
            "command" => {
                let read = NO_OPTIONS.read(&words);
                (!seen(&read, &["v", "V"])).then(|| operands(&read))
            }
            // `trap 'rm -f $tmp' EXIT` runs its first operand when the script exits.
            "trap" => match operands(&NO_OPTIONS.read(&words)).first() {
                Some(action) if action != "-" => return Unwrapped::Script(action.clone(), None),
                _ => None,
            },
            "eval" => {
                let read = NO_OPTIONS.read(&words);
                return Unwrapped::Script(operands(&read).join(" "), None);
            }
            "sh" | "dash" | "ash" | "bash" | "zsh" | "ksh" | "mksh" => {
                let read = SHELL.read(&words);
                let shell = match name {
                    "sh" | "dash" | "ash" => Shell::Sh,
                    _ => Shell::Bash,
                };
                // `bash -c SCRIPT NAME ARGS…`; without `-c` it runs a file or its input.
                match words.get(read.0) {
                    Some(script) if seen(&read, &["c"]) => {
                        return Unwrapped::Script(script.clone(), Some(shell));
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        match inner {
            // A wrapper with nothing to run (`sudo -s`, `xargs`) is what runs.
            Some(inner) if !inner.is_empty() => words = inner,
            _ => return Unwrapped::Command(words),
        }
    }
}

/// Drops leading `NAME=value` words, which `env` and `sudo` put into the environment.
fn without_assignments(words: Vec<String>) -> Vec<String> {
    let is_assignment = |word: &String| {
        word.split_once('=').is_some_and(|(name, _)| {
            name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    words.into_iter().skip_while(is_assignment).collect()
}
