//! What a person installing the binary gets from it: `--version` naming the commit it was
//! built from, shell completions for bash, zsh and fish, and a manual page, all made from the
//! command line's own definitions.

use std::process::Command;

use crate::harness::binary;

fn run(args: &[&str]) -> String {
    let output = Command::new(binary())
        .args(args)
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "openvaala {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let version = run(&["--version"]);
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(
        version.trim(),
        format!("openvaala {} (commit {head})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn completions_are_made_for_three_shells() {
    let bash = run(&["completions", "bash"]);
    assert!(bash.contains("complete -F _openvaala"), "{bash}");
    for subcommand in ["serve", "chat", "send", "acp", "token", "completions"] {
        assert!(
            bash.contains(subcommand),
            "{subcommand} missing from the bash script"
        );
    }
    // bash itself reads the script without a syntax error.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let script = dir.path().join("openvaala.bash");
    std::fs::write(&script, &bash).unwrap();
    let checked = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    let zsh = run(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef openvaala"), "{zsh}");
    let fish = run(&["completions", "fish"]);
    assert!(fish.contains("complete -c openvaala"), "{fish}");
    assert!(fish.contains("serve"), "{fish}");
    let refused = Command::new(binary())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("possible values"));
}

#[test]
fn the_manual_page_is_roff_with_every_command() {
    let man = run(&["man"]);
    assert!(man.contains(".TH openvaala"), "{man}");
    for subcommand in ["serve", "chat", "completions", "man"] {
        assert!(
            man.contains(subcommand),
            "{subcommand} missing from the manual page"
        );
    }
}
