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

/// Runs `command` with its standard output a pipe whose reading end is already closed, so
/// every write meets a broken pipe: how it ended, and its standard error.
fn into_a_closed_pipe(command: &mut Command) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = command
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{command:?}: {stderr}");
    (output.status, stderr)
}

/// A reader that stops early (`| head`, `| grep -q`) closes the pipe; the generators then end
/// quietly with success instead of panicking on the broken pipe.
#[test]
fn generated_text_into_a_closed_pipe_is_not_a_crash() {
    for args in [&["completions", "bash"][..], &["man"][..]] {
        let (status, stderr) = into_a_closed_pipe(Command::new(binary()).args(args));
        assert!(status.success(), "openvaala {args:?}: {stderr}");
    }
}

/// The commands that only print end by SIGPIPE, as any Unix filter does, when their reader
/// has gone, never with a panic.
#[test]
fn a_printing_command_into_a_closed_pipe_ends_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (status, stderr) = into_a_closed_pipe(
        Command::new(binary())
            .args(["doctor", "--data-dir"])
            .arg(data.path())
            .env("OPENVAALA_CONFIG", "/dev/null"),
    );
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{stderr}");
}

/// The commands that change files finish their work when their reader has gone, and end
/// with success, not a panic, although their report cannot be written.
#[test]
fn a_command_that_changes_files_finishes_into_a_closed_pipe() {
    let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for args in [&["reindex"][..], &["gc"], &["serve", "stop"]] {
        let (status, stderr) = into_a_closed_pipe(
            Command::new(binary())
                .args(args)
                .arg("--data-dir")
                .arg(data.path())
                .env("OPENVAALA_CONFIG", "/dev/null"),
        );
        assert!(status.success(), "openvaala {args:?}: {stderr}");
    }
    // The reindex was done: it built the index.
    assert!(data.path().join("metadata.db").is_file());
}

/// `openvaala doctor --json` with `config` (a file's text) and `env`, on `data_dir`: its exit
/// code and findings by name.
fn doctor(
    config: &str,
    data_dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (i32, Vec<serde_json::Value>, String) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config).unwrap();
    let output = Command::new(binary())
        .args(["doctor", "--json", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("OPENVAALA_TOKEN")
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let parsed: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}"));
    let code = output.status.code().unwrap();
    assert_eq!(parsed["exit_code"], code, "{stdout}");
    let text = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    (code, parsed["checks"].as_array().unwrap().clone(), text)
}

fn finding<'a>(checks: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    checks
        .iter()
        .find(|check| check["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` finding: {checks:?}"))
}

/// A provider on a port nothing listens on, its key in `KEY_VAR`.
fn provider_config(port: u16) -> String {
    format!(
        "[providers.remote]\nprotocol = \"openai_chat\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
         api_key_env = \"DOCTOR_KEY\"\n\n[models.m]\nprovider = \"remote\"\nname = \"m\"\n\
         context_window = 1000\nmax_output_tokens = 100\n\n[agents.default]\n\
         description = \"d\"\nmodel = \"m\"\n"
    )
}

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn the_doctor_passes_a_good_set_up_and_names_each_broken_one_with_its_fix() {
    let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // A provider that answers (any HTTP answer will do), its key set.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut buffer = [0; 1024];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let secret = "sk-doctor-never-printed-0123456789";
    let good = provider_config(port);
    let (code, checks, text) = doctor(&good, data.path(), &[("DOCTOR_KEY", secret)]);
    // Good, but for the warning that the tests may run as root.
    assert!(code <= 1, "{text}");
    assert!(
        checks.iter().all(|check| check["level"] != "failure"),
        "{checks:?}"
    );
    assert!(
        !checks
            .iter()
            .any(|c| c["level"] == "warning" && c["name"] != "user"),
        "{checks:?}"
    );
    assert_eq!(finding(&checks, "provider remote")["level"], "ok");
    assert_eq!(finding(&checks, "data directory")["level"], "ok");
    assert_eq!(finding(&checks, "sandbox")["level"], "ok");
    assert!(!text.contains(secret), "the key was printed: {text}");

    // A provider nothing answers for.
    let unreachable = provider_config(closed_port());
    let (code, checks, _) = doctor(&unreachable, data.path(), &[("DOCTOR_KEY", secret)]);
    assert_eq!(code, 2);
    let provider = finding(&checks, "provider remote");
    assert_eq!(provider["level"], "failure");
    assert!(
        provider["detail"]
            .as_str()
            .unwrap()
            .contains("cannot be reached"),
        "{provider}"
    );
    assert!(
        provider["fix"]
            .as_str()
            .unwrap()
            .contains("providers.remote.base_url")
    );

    // Its key missing.
    let (code, checks, _) = doctor(&good, data.path(), &[]);
    assert_eq!(code, 2);
    let provider = finding(&checks, "provider remote");
    assert_eq!(
        provider["detail"], "its key variable DOCTOR_KEY is not set",
        "{provider}"
    );

    // No Landlock on this kernel (as a test makes it look).
    let (code, checks, _) = doctor(
        &good,
        data.path(),
        &[("DOCTOR_KEY", secret), ("OPENVAALA_TEST_NO_LANDLOCK", "1")],
    );
    assert_eq!(code, 2);
    let sandbox = finding(&checks, "sandbox");
    assert_eq!(sandbox["level"], "failure", "{sandbox}");
    assert!(
        sandbox["detail"].as_str().unwrap().contains("no Landlock"),
        "{sandbox}"
    );
    assert!(
        sandbox["detail"].as_str().unwrap().contains("`default`"),
        "{sandbox}"
    );

    // Listening on every interface without a token.
    let exposed = format!("{good}\n[server]\naddr = \"0.0.0.0:7341\"\n");
    let (code, checks, _) = doctor(&exposed, data.path(), &[("DOCTOR_KEY", secret)]);
    assert_eq!(code, 2);
    assert!(
        finding(&checks, "address")["detail"]
            .as_str()
            .unwrap()
            .contains("OPENVAALA_TOKEN is not set")
    );

    // A config that does not parse stops there, naming the key.
    let (code, checks, _) = doctor("[server]\nadress = 1\n", data.path(), &[]);
    assert_eq!(code, 2);
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert!(
        checks[0]["detail"].as_str().unwrap().contains("adress"),
        "{checks:?}"
    );
}

#[test]
fn the_doctor_fails_a_data_directory_it_cannot_write() {
    let parent = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = parent.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // Root writes through permissions: a read-only mount stands in for them then.
    let _mounted = if root {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
            .arg(&data)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mounting a read-only tmpfs");
        Some(Unmount(data.clone()))
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o500)).unwrap();
        None
    };
    let (code, checks, _) = doctor("", &data, &[]);
    assert_eq!(code, 2);
    let found = finding(&checks, "data directory");
    assert_eq!(found["level"], "failure", "{found}");
    assert!(
        found["detail"]
            .as_str()
            .unwrap()
            .contains("is not writable"),
        "{found}"
    );
}

/// Unmounts a test's mount when dropped.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
