//! What a remembered shell rule may be: never one that allows every command or every use of a
//! program that runs other programs (a shell, an interpreter, git), and, shown beside a broader
//! rule before it is kept, examples of what else it would allow.

use super::runners;

/// Why `pattern` may not be remembered for a shell command, if it may not: it would allow
/// every command (`*`, or a pattern starting with a wildcard), or every use of a shell, an
/// interpreter or git (`python3*`, `git *`).
pub fn refuse_shell_rule(pattern: &str) -> Option<String> {
    let pattern = pattern.trim();
    if pattern.starts_with(['*', '?']) {
        return Some(format!(
            "the rule \"{pattern}\" would allow every command: name the program"
        ));
    }
    let program = pattern.split([' ', '*', '?']).next().unwrap_or("");
    let words: Vec<String> = vec![program.to_owned(), "x".to_owned()];
    let runs_code =
        runners::program_runs_code(&words).is_some() || runners::base_name(program) == "git";
    (runs_code && !names_exact_use(pattern)).then(|| {
        format!(
            "the rule \"{pattern}\" would allow every use of {program}, which runs other \
             programs: name one use (\"{program} SOMETHING*\" or the exact command)"
        )
    })
}

/// Examples of what else `pattern` would allow besides the call it was made for, written in
/// the rules' own language: shown beside a broader rule before it is kept.
pub fn also_allows(pattern: &str) -> Vec<String> {
    let Some(prefix) = pattern.strip_suffix('*') else {
        return Vec::new();
    };
    [" --force", " ../elsewhere", "-more"]
        .iter()
        .map(|tail| format!("{prefix}{tail}"))
        .collect()
}

/// Whether `pattern` names one use of a program rather than the program whatever it is given:
/// it has no wildcard, or before its first wildcard the program is followed by at least one
/// whole word that is not an option (`python3 -m pytest*`, `git push*`, `make test`; never
/// `python3*`, `python3 *` nor `python3 -c*`).
pub fn names_exact_use(pattern: &str) -> bool {
    let Some(wildcard) = pattern.find(['*', '?']) else {
        return true;
    };
    let literal = &pattern[..wildcard];
    let words: Vec<&str> = literal.split(' ').collect();
    let complete = if literal.ends_with(' ') {
        &words[..words.len() - 1]
    } else {
        &words[..]
    };
    complete
        .iter()
        .skip(1)
        .any(|word| !word.is_empty() && !word.starts_with('-'))
}
