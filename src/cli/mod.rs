//! The `openvaala` command line: its arguments (`args.rs`) and what each command does. The
//! binary (`src/main.rs`) only sets up logging, parses and calls [`run`].

/// `println!` for a command that changes files (`reindex`, `gc`, `repair`, `serve stop`):
/// those keep SIGPIPE ignored so a reader that goes away cannot cut their work short, and a
/// line that cannot be written (a closed pipe, a full disk) is dropped rather than panicking
/// after the work is done.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod args;
mod clients;
pub mod doctor;
mod maintenance;
mod service;

use std::process::ExitCode;

pub use args::*;

/// Runs a parsed command; answers the process's exit code.
pub fn run(cli: Cli) -> ExitCode {
    if !matches!(cli.command, Command::Serve { action: None, .. }) {
        crate::telemetry::init_plain();
    }
    if matches!(
        cli.command,
        Command::Token { .. } | Command::Pair { .. } | Command::Doctor { .. } | Command::Send(_)
    ) {
        end_quietly_on_a_closed_pipe();
    }
    let result = match cli.command {
        Command::Serve {
            action: Some(ServeAction::Stop { data }),
            ..
        } => data.resolve().and_then(|dir| service::stop(&dir)),
        Command::Serve { action: None, args } => service::serve(args),
        Command::Reindex {
            data,
            database_url,
            config,
        } => data
            .resolve()
            .and_then(|dir| maintenance::reindex(&dir, database_url, config.as_deref())),
        Command::Gc { data } => data.resolve().and_then(|dir| maintenance::gc(&dir)),
        Command::Repair { conversation, data } => data
            .resolve()
            .and_then(|dir| maintenance::repair(&dir, &conversation)),
        Command::Chat(args) => clients::chat(args),
        Command::Send(args) => return clients::send(args),
        Command::Acp(args) => clients::acp(args),
        Command::Token { action, data } => data
            .resolve()
            .and_then(|dir| maintenance::token(action, &dir)),
        Command::Pair {
            scope,
            url,
            no_qr,
            data,
        } => data
            .resolve()
            .and_then(|dir| maintenance::pair(&dir, &scope, url.as_deref(), !no_qr)),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "openvaala", &mut script);
            write_stdout(&script)
        }
        Command::Doctor { config, data, json } => {
            let dir = match data.resolve() {
                Ok(dir) => dir,
                Err(error) => {
                    eprintln!("openvaala: {error:#}");
                    return ExitCode::from(2);
                }
            };
            let checks = doctor::run(config.as_deref(), &dir);
            let text = if json {
                let text = serde_json::json!({
                    "checks": checks,
                    "exit_code": doctor::exit_code(&checks),
                });
                format!("{text:#}\n")
            } else {
                doctor::render(&checks)
            };
            // A reader that went away (`| head`) is no reason to fail.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
            return ExitCode::from(doctor::exit_code(&checks));
        }
        Command::Man => {
            let command = <Cli as clap::CommandFactory>::command();
            let mut page = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut page)
                .map_err(anyhow::Error::from)
                .and_then(|()| write_stdout(&page))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("openvaala: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes generated text (completions, the man page) to standard output. A reader that stops
/// early (`| head`, `| grep -q`) closes the pipe: that is its choice, not a failure, so a
/// broken pipe ends the command quietly instead of panicking in the generator.
fn write_stdout(text: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text).and_then(|()| out.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(anyhow::Error::from),
    }
}

/// For the commands that only print (a token list, a pairing link, the doctor's findings, an
/// answer as it streams): a reader that stops early (`| head`) ends the command the way it ends
/// any Unix filter, by SIGPIPE, instead of `println!` panicking on the broken pipe. The Rust
/// runtime ignores SIGPIPE at start; the service and the commands that write files keep that.
/// Sockets are unaffected: they write with `MSG_NOSIGNAL`.
fn end_quietly_on_a_closed_pipe() {
    // SAFETY: setting a signal's disposition to its default touches no memory of this
    // process; it runs before any thread of this command starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
