//! Ways a model could try to run what a rule refuses, or to run unasked what a rule asks about:
//! every one must be refused or asked, never allowed silently. The forms an outside audit
//! used, and more of the same kinds: wrappers and starters, interpreters and shells reading
//! code, programs that run others (`find -exec`, `xargs`, `git` aliases, `tar`, `sed e`,
//! `make`), globbed and look-alike program names, scripts written then run, variables that
//! run code, and the syntax between commands (newlines, CR, comments, continuations).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use super::policy::{Permission, Permissions, Verdict};

/// Commands that would remove `victim`, push, or reach the network with curl.
const ATTEMPTS: &[&str] = &[
    // Plain, and through wrappers the splitter sees through.
    "rm victim",
    "/bin/rm victim",
    "\\rm victim",
    "r\\m victim",
    "'r''m' victim",
    "\"rm\" victim",
    "command rm victim",
    "command -p rm victim",
    "env rm victim",
    "env -i PATH=/bin rm victim",
    "sudo rm victim",
    "nice -n 5 rm victim",
    "timeout 5 rm victim",
    "exec -a x rm victim",
    "nohup rm victim",
    "time -p rm victim",
    "stdbuf -o0 rm victim",
    // Programs that run other programs.
    "find . -name victim -exec rm {} \\;",
    "find . -name victim -execdir rm {} +",
    "find . -ok rm {} \\;",
    "find . -name victim -delete",
    "echo victim | xargs rm",
    "xargs -a list rm",
    "xargs -0 rm < list",
    "printf victim | xargs -I{} sh -c 'rm {}'",
    "busybox rm victim",
    "make -f Makefile.evil",
    "make clean",
    "tar --to-command='rm victim' -xf a.tar",
    "tar -I 'rm victim' -xf a.tar",
    "tar --checkpoint=1 --checkpoint-action=exec='rm victim' -cf /dev/null .",
    "sed -n '1e rm victim' file",
    "sed 's/.*/rm victim/e' file",
    "sed -f evil.sed file",
    "git -c alias.x='!rm victim' x",
    "git -C . push",
    "git --no-pager push",
    "git -c core.pager=cat push",
    "git --git-dir=.git push origin main",
    "git x",
    "/lib64/ld-linux-x86-64.so.2 /bin/rm victim",
    // Interpreters and shells reading code.
    "python3 -c \"import os; os.remove('victim')\"",
    "python3.11 -c 'import shutil'",
    "perl -e 'unlink \"victim\"'",
    "awk 'BEGIN{system(\"rm victim\")}'",
    "awk '{print | \"sh\"}' cmds",
    "node -e \"require('fs').unlinkSync('victim')\"",
    "ruby -e 'File.delete(\"victim\")'",
    "php -r 'unlink(\"victim\");'",
    "tclsh script.tcl",
    "echo 'rm victim' | sh",
    "echo rm victim | bash",
    "sh < script",
    "sh <<'EOF'\nrm victim\nEOF",
    "bash <<< 'rm victim'",
    "source ./script",
    ". ./script",
    "eval \"rm victim\"",
    "alias x=rm; x victim",
    "printf 'rm victim' > s.sh; sh s.sh",
    "chmod +x s.sh; ./s.sh",
    // Program names decided when the command runs.
    "/bin/r? victim",
    "/???/r? victim",
    "/usr/bin/[r]m victim",
    "bash -c '{rm,victim}'",
    "$'\\x72m' victim",
    "$CMD victim",
    "$(echo rm) victim",
    // Starters, and variables that run code.
    "setsid rm victim",
    "taskset 1 rm victim",
    "ionice -c3 rm victim",
    "chrt 0 rm victim",
    "flock /tmp/l rm victim",
    "flock -c 'rm victim' /tmp/l",
    "strace -o /dev/null rm victim",
    "unshare rm victim",
    "script -qc 'rm victim' /dev/null",
    "su -c 'rm victim'",
    "runuser -u me -- rm victim",
    "watch rm victim",
    "BASH_ENV=evil bash -c true",
    "env BASH_ENV=evil bash -c true",
    "export BASH_ENV=evil; bash -c true",
    "GIT_SSH_COMMAND='rm victim' git fetch",
    // Between commands.
    "ls\nrm victim",
    "ls;rm victim",
    "ls&&rm victim",
    "ls||rm victim",
    "ls|rm victim",
    "ls # comment\nrm victim",
    "r\\\nm victim",
    "echo $(rm victim)",
    "echo `rm victim`",
    "cat <(rm victim)",
    "ls\rrm victim",
    // Look-alike and invisible characters.
    "ｒｍ victim",
    "r\u{200b}m victim",
    "r\u{0430}m victim",
    // The network.
    "curl http://example.com",
    "env curl http://example.com",
    "python3 -c 'import urllib.request'",
];

fn policy(permission: Permission) -> Permissions {
    Permissions {
        agent: "default".to_owned(),
        tools: BTreeMap::from([("shell".to_owned(), Permission::Allow)]),
        shell_rules: ["rm *", "curl *", "git push*"]
            .iter()
            .map(|pattern| (pattern.to_string(), permission))
            .collect(),
        approval_timeout: None,
    }
}

fn verdict(policy: &Permissions, command: &str) -> Verdict {
    policy.check(
        "shell",
        &json!({"command": command}),
        Path::new("/w"),
        &|_, _| false,
    )
}

#[test]
fn nothing_runs_past_a_deny_rule() {
    let deny = policy(Permission::Deny);
    let allowed: Vec<&str> = ATTEMPTS
        .iter()
        .copied()
        .filter(|command| verdict(&deny, command) == Verdict::Allow)
        .collect();
    assert_eq!(allowed, Vec::<&str>::new(), "allowed past a deny rule");
}

#[test]
fn nothing_runs_unasked_past_an_ask_rule() {
    let ask = policy(Permission::Ask);
    let allowed: Vec<&str> = ATTEMPTS
        .iter()
        .copied()
        .filter(|command| verdict(&ask, command) == Verdict::Allow)
        .collect();
    assert_eq!(allowed, Vec::<&str>::new(), "ran unasked past an ask rule");
}

#[test]
fn plain_removals_and_pushes_are_refused_not_only_asked() {
    let deny = policy(Permission::Deny);
    for command in [
        "rm victim",
        "/bin/rm victim",
        "sudo nice rm victim",
        "git -C . push",
        "git --no-pager push",
        "setsid rm victim",
        "flock -c 'rm victim' /tmp/l",
        "find . -exec rm {} \\;",
        "echo victim | xargs rm",
        "busybox rm victim",
        "bash -c 'rm victim'",
        "ls;rm victim",
    ] {
        assert!(
            matches!(verdict(&deny, command), Verdict::Deny { .. }),
            "{command}: {:?}",
            verdict(&deny, command)
        );
    }
}

#[test]
fn ordinary_commands_still_run_and_a_question_says_why() {
    let deny = policy(Permission::Deny);
    for command in [
        "ls -la",
        "git status",
        "git -C . log -1",
        "cargo test --lib",
        "grep -rn victim src",
        "awk '{print $1}' file",
        "sed -n 1,3p file",
        "tar -xf a.tar",
        "find . -name '*.rs'",
        "python3 --version",
    ] {
        assert_eq!(verdict(&deny, command), Verdict::Allow, "{command}");
    }
    let Verdict::Ask {
        reason,
        suggested_rules,
    } = verdict(&deny, "python3 -c 'print(1)'")
    else {
        panic!("an interpreter asks");
    };
    assert!(
        reason.text.contains("runs other programs (an interpreter"),
        "{reason}"
    );
    assert_eq!(suggested_rules[0].rule, "python3 -c print(1)");
    assert_eq!(suggested_rules[0].broader, None);
    // A rule that names the use lets it run; one for the bare interpreter does not.
    let mut named = deny.clone();
    named
        .shell_rules
        .push(("python3 -m pytest*".to_owned(), Permission::Allow));
    named
        .shell_rules
        .push(("node *".to_owned(), Permission::Allow));
    assert_eq!(verdict(&named, "python3 -m pytest -q"), Verdict::Allow);
    assert!(matches!(verdict(&named, "node -e 1"), Verdict::Ask { .. }));
}
