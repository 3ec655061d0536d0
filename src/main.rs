//! The `openvaala` command: parse the command line, then hand over to the library.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use openvaala::client::api::Api;
use openvaala::config::Config;
use openvaala::credential::ClientKind;
use openvaala::runtime::RuntimeSettings;
use openvaala::server::{self, ServeOptions, Service};
use openvaala::store::Store;
use openvaala::store::lock::{self, LockError, RuntimeLock};

/// OpenVaala: an agent runtime service. Conversations live here; every client sees them live.
#[derive(Parser)]
#[command(name = "openvaala", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service (or `serve stop` to stop the running one).
    #[command(args_conflicts_with_subcommands = true)]
    Serve {
        #[command(subcommand)]
        action: Option<ServeAction>,
        #[command(flatten)]
        args: ServeArgs,
    },
    /// Rebuild metadata.db from the conversation directories (the service must be stopped).
    Reindex {
        #[command(flatten)]
        data: DataDirArg,
        /// Rebuild a cluster's PostgreSQL index (every instance stopped) instead of the
        /// embedded metadata.db [default: cluster.database_url from the config, if any].
        #[arg(long)]
        database_url: Option<String>,
        /// Config file, for its [cluster] table [default: $OPENVAALA_CONFIG, else
        /// ~/.config/openvaala/config.toml].
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Drop the checkpoint snapshots and file contents no conversation needs any more (the
    /// service must be stopped; it also does this once a day while it runs).
    Gc {
        #[command(flatten)]
        data: DataDirArg,
    },
    /// Move the damaged lines of a conversation's files aside (into a `.torn-<time>` file
    /// beside each), so that it opens again; the service must be stopped. For a conversation
    /// the service answers `conversation_damaged` for.
    Repair {
        /// The conversation's id.
        conversation: String,
        #[command(flatten)]
        data: DataDirArg,
    },
    /// Talk to the agent in this terminal: full-screen at a terminal, else line by line (type
    /// /help inside). Finds the service as --url describes.
    Chat(ChatArgs),
    /// Send one message and print the agent's reply as it streams (for scripts and editors).
    ///
    /// Exits 0 when the turn completed, 1 when it failed, 130 when it was interrupted, 2 on a
    /// usage error, 69 when the service cannot be reached or the event stream was lost and
    /// could not be opened again, 4 when a tool call waits for approval and stdin or stderr is
    /// not a terminal (how to answer it goes to stderr, or with --json a last line
    /// {"type":"approval.requested","approval":…} to stdout); at a terminal it asks instead.
    /// Ctrl-C interrupts the turn and exits 130 once it has ended; a second Ctrl-C exits at
    /// once. The conversation id goes to stderr.
    Send(SendArgs),
    /// The local API token of a data directory, which every API request carries (tool
    /// processes cannot read it): `token show` prints it, `token url` the link that signs a
    /// browser in to the service running for the directory.
    Token {
        #[command(subcommand)]
        action: TokenAction,
        #[command(flatten)]
        data: DataDirArg,
    },
    /// Be an Agent Client Protocol agent on stdin and stdout, for editors (Zed, JetBrains,
    /// Neovim, Emacs): every ACP session is a conversation of the service. Finds the running
    /// service like `chat`; with no --url, starts one for the data directory if none runs.
    Acp(AcpArgs),
}

#[derive(Args)]
struct AcpArgs {
    /// The bearer token the service wants off loopback [default: $OPENVAALA_TOKEN].
    #[arg(long)]
    token: Option<String>,
    #[command(flatten)]
    service: ServiceArgs,
}

#[derive(Args)]
struct ChatArgs {
    /// A conversation to continue (its id); otherwise the first message starts a new one.
    conversation: Option<String>,
    /// A line-by-line client instead of the full-screen one (the default when stdin or
    /// stdout is not a terminal, or TERM is `dumb`).
    #[arg(long)]
    plain: bool,
    #[command(flatten)]
    service: ServiceArgs,
}

#[derive(Args)]
struct SendArgs {
    /// The message; `-` reads it from stdin.
    text: String,
    /// The conversation to send to (its id); otherwise the message starts a new one.
    #[arg(long)]
    conversation: Option<String>,
    /// How the message joins a running turn.
    #[arg(long, value_enum)]
    mode: Option<SendMode>,
    /// The working directory of a new conversation [default: the current directory].
    #[arg(long, conflicts_with = "conversation")]
    cwd: Option<PathBuf>,
    /// The model of a new conversation [default: its agent's].
    #[arg(long, conflicts_with = "conversation")]
    model: Option<String>,
    /// The agent of a new conversation [default: the configured default agent].
    #[arg(long, conflicts_with = "conversation")]
    agent: Option<String>,
    /// Write every event of the conversation as a JSON line ({"id", "event", "data"}) instead
    /// of the reply's text (and an unanswered approval as {"type":"approval.requested", …}).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    service: ServiceArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SendMode {
    Steer,
    Queue,
    Interrupt,
}

/// How a client finds the service: the one order `ServiceArgs::api_with` follows, written
/// the same way in docs/clients.md.
const URL_HELP: &str = "The service's address; `host:port` means http://host:port. Without it: \
given --data-dir, the address the service running for that directory wrote there (none \
running: http://127.0.0.1:7341); else $OPENVAALA_URL; else the address of the service running \
for the default data directory; else http://127.0.0.1:7341";

/// How a client finds the service.
#[derive(Args)]
struct ServiceArgs {
    #[arg(long, help = URL_HELP)]
    url: Option<String>,
    #[command(flatten)]
    data: DataDirArg,
}

#[derive(Subcommand)]
enum TokenAction {
    /// Print the token (for `Authorization: Bearer <token>`).
    Show,
    /// Print the browser's sign-in link for the service running for the data directory.
    Url,
}

#[derive(Subcommand)]
enum ServeAction {
    /// Ask the running service to stop gracefully; returns once it has.
    Stop {
        #[command(flatten)]
        data: DataDirArg,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on [default: server.addr from the config, else 127.0.0.1:7341].
    #[arg(long)]
    addr: Option<SocketAddr>,
    #[command(flatten)]
    data: DataDirArg,
    /// Config file [default: $OPENVAALA_CONFIG, else ~/.config/openvaala/config.toml].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Cluster mode: the PostgreSQL database this instance shares with the others
    /// (postgres://…) [default: cluster.database_url from the config; none: embedded].
    #[arg(long)]
    database_url: Option<String>,
    /// Cluster mode: the host:port at which the other instances reach this one, when it is
    /// not the address it listens on (--addr 0.0.0.0:7341, a NAT) [default:
    /// cluster.advertise_addr from the config, else the --addr].
    #[arg(long)]
    advertise_addr: Option<String>,
}

#[derive(Args)]
struct DataDirArg {
    /// Data directory [default: $OPENVAALA_HOME, else $XDG_DATA_HOME/openvaala, else
    /// ~/.local/share/openvaala].
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

impl DataDirArg {
    fn resolve(&self) -> anyhow::Result<PathBuf> {
        if let Some(dir) = &self.data_dir {
            return Ok(dir.clone());
        }
        let env = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        if let Some(home) = env("OPENVAALA_HOME") {
            return Ok(home);
        }
        if let Some(xdg) = env("XDG_DATA_HOME") {
            return Ok(xdg.join("openvaala"));
        }
        let home = env("HOME")
            .context("cannot find the data directory: set --data-dir, OPENVAALA_HOME or HOME")?;
        Ok(home.join(".local/share/openvaala"))
    }
}

fn main() -> ExitCode {
    // Tool processes start sandboxed through this binary (see `sandbox::launcher`).
    if let Some(code) = openvaala::sandbox::launcher_main() {
        return code;
    }
    openvaala::memory::keep_big_blocks_apart();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("OPENVAALA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx::query=error")),
        )
        .with_writer(|| openvaala::redact::RedactingWriter(std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve {
            action: Some(ServeAction::Stop { data }),
            ..
        } => data.resolve().and_then(|dir| stop(&dir)),
        Command::Serve { action: None, args } => serve(args),
        Command::Reindex {
            data,
            database_url,
            config,
        } => data
            .resolve()
            .and_then(|dir| reindex(&dir, database_url, config.as_deref())),
        Command::Gc { data } => data.resolve().and_then(|dir| gc(&dir)),
        Command::Repair { conversation, data } => {
            data.resolve().and_then(|dir| repair(&dir, &conversation))
        }
        Command::Chat(args) => chat(args),
        Command::Send(args) => return send(args),
        Command::Acp(args) => acp(args),
        Command::Token { action, data } => data.resolve().and_then(|dir| token(action, &dir)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("openvaala: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(url) = args.database_url {
        openvaala::config::check_database_url(&url)
            .map_err(|message| anyhow::anyhow!("--database-url {message}"))?;
        let (lease_ms, advertise_addr) = config.cluster.take().map_or(
            (openvaala::config::ClusterConfig::DEFAULT_LEASE_MS, None),
            |c| (c.lease_ms, c.advertise_addr),
        );
        config.cluster = Some(openvaala::config::ClusterConfig {
            database_url: url,
            lease_ms,
            advertise_addr,
        });
    }
    if let Some(addr) = args.advertise_addr {
        openvaala::config::check_advertise_addr(&addr)
            .map_err(|message| anyhow::anyhow!("--advertise-addr {message}"))?;
        let cluster = config.cluster.as_mut().ok_or_else(|| {
            anyhow::anyhow!(
                "--advertise-addr is for cluster mode: give --database-url (or a [cluster] table) too"
            )
        })?;
        cluster.advertise_addr = Some(addr);
    }
    let data_dir = args.data.resolve()?;
    let addr = match (args.addr, config.server.addr) {
        (Some(addr), _) | (None, Some(addr)) => addr,
        (None, None) => server::DEFAULT_ADDR.parse().expect("default address"),
    };
    let token = std::env::var("OPENVAALA_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let idle_unload_s = config.server.idle_unload_s;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let service = Service::start(ServeOptions {
            data_dir,
            addr,
            config,
            token,
            settings: RuntimeSettings {
                idle_unload: Duration::from_secs(idle_unload_s),
                ..RuntimeSettings::default()
            },
        })
        .await?;
        eprintln!("openvaala is serving on http://{}", service.addr);
        // The link carries the local token: shown to a person at a terminal, never logged.
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!("sign in from a browser: {}", service.sign_in_url());
        } else {
            eprintln!("sign in from a browser with the link `openvaala token url` prints");
        }
        service.run(server::stop_signal()).await
    })
}

impl ServiceArgs {
    /// A client of the service these arguments name, with `$OPENVAALA_TOKEN` if set, else the
    /// data directory's local token.
    fn api(&self) -> Api {
        let token = std::env::var("OPENVAALA_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
        self.api_with(token, ClientKind::Cli)
    }

    /// Whether the address comes from the user (--url, $OPENVAALA_URL) rather than from the
    /// data directory: then no service is started for it.
    fn explicit_url(&self) -> bool {
        self.url.is_some()
            || (self.data.data_dir.is_none()
                && std::env::var("OPENVAALA_URL").is_ok_and(|url| !url.is_empty()))
    }

    /// The address in the order of `URL_HELP`; the token given, else the data directory's
    /// local token (when this user may read it), as the token of a client of `kind` derived
    /// from it, so the service records which kind of client answered.
    fn api_with(&self, token: Option<String>, kind: ClientKind) -> Api {
        let token = token
            .or_else(|| {
                let dir = self.data.resolve().ok()?;
                openvaala::credential::read(&dir).ok().flatten()
            })
            .map(|base| openvaala::credential::client_token(&base, kind));
        let running_for = |dir: &Path| {
            lock::holder(&Store::lock_path_in(dir))
                .ok()
                .flatten()
                .and_then(|owner| owner.addr)
                .map(|addr| format!("http://{addr}"))
        };
        let default = || format!("http://{}", server::DEFAULT_ADDR);
        let env_url = || {
            std::env::var("OPENVAALA_URL")
                .ok()
                .filter(|url| !url.is_empty())
        };
        let url = if let Some(url) = &self.url {
            url.clone()
        } else if let Some(dir) = &self.data.data_dir {
            running_for(dir).unwrap_or_else(default)
        } else if let Some(url) = env_url() {
            url
        } else {
            self.data
                .resolve()
                .ok()
                .and_then(|dir| running_for(&dir))
                .unwrap_or_else(default)
        };
        Api::new(&url, token)
    }
}

/// `openvaala token show|url`.
fn token(action: TokenAction, data_dir: &Path) -> anyhow::Result<()> {
    let token = openvaala::credential::read(data_dir)
        .with_context(|| format!("cannot read the token of {}", data_dir.display()))?
        .with_context(|| {
            format!(
                "{} has no token yet: the service makes it when it first starts",
                data_dir.display()
            )
        })?;
    match action {
        TokenAction::Show => println!("{token}"),
        TokenAction::Url => {
            let addr = lock::holder(&Store::lock_path_in(data_dir))
                .ok()
                .flatten()
                .and_then(|owner| owner.addr)
                .unwrap_or_else(|| server::DEFAULT_ADDR.to_owned());
            let web = openvaala::credential::client_token(&token, ClientKind::Web);
            println!("http://{addr}/#token={web}");
        }
    }
    Ok(())
}

/// `openvaala acp`: stdout carries the protocol, so everything else goes to stderr.
fn acp(args: AcpArgs) -> anyhow::Result<()> {
    let token = args.token.clone().or_else(|| {
        std::env::var("OPENVAALA_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut api = args.service.api_with(token.clone(), ClientKind::Acp);
        if !openvaala::acp::service::answers(&api).await {
            if args.service.explicit_url() {
                anyhow::bail!("no service answers at {}", api.base);
            }
            let data_dir = args.service.data.resolve()?;
            api = openvaala::acp::service::start(&data_dir, token).await?;
        }
        openvaala::acp::run(api).await
    })
}

fn chat(args: ChatArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let cwd = std::env::current_dir()
        .context("cannot read the current directory")?
        .display()
        .to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let dumb = std::env::var("TERM").is_ok_and(|term| term == "dumb");
    if terminal && !dumb && !args.plain {
        return runtime.block_on(openvaala::client::tui::run(
            args.service.api(),
            cwd,
            args.conversation,
        ));
    }
    runtime.block_on(openvaala::client::chat::run(
        openvaala::client::chat::ChatOptions {
            api: args.service.api(),
            resume: args.conversation,
            cwd,
            interactive: std::io::stdin().is_terminal(),
        },
    ))
}

/// `openvaala send`: the exit code tells how the turn ended (see `client::send`).
fn send(args: SendArgs) -> ExitCode {
    use openvaala::client::send::{self, SendError, SendOptions};
    use std::io::IsTerminal;
    let options = (|| {
        let usage = |message: String| SendError {
            code: send::EXIT_USAGE,
            message,
        };
        let text = if args.text == "-" {
            std::io::read_to_string(std::io::stdin())
                .map_err(|error| usage(format!("cannot read the message from stdin: {error}")))?
        } else {
            args.text.clone()
        };
        let cwd = match &args.cwd {
            Some(dir) => std::path::absolute(dir),
            None => std::env::current_dir(),
        }
        .map_err(|error| usage(format!("cannot resolve the working directory: {error}")))?;
        let api = args.service.api();
        if let Err(error) = reqwest::Url::parse(&api.base) {
            return Err(usage(format!(
                "{} is not a usable address: {error}",
                api.base
            )));
        }
        Ok(SendOptions {
            api,
            text,
            conversation: args.conversation.clone(),
            mode: args.mode.map(|mode| {
                match mode {
                    SendMode::Steer => "steer",
                    SendMode::Queue => "queue",
                    SendMode::Interrupt => "interrupt",
                }
                .to_owned()
            }),
            cwd: cwd.display().to_string(),
            model: args.model.clone(),
            agent: args.agent.clone(),
            json: args.json,
            // Questions go to stderr, since stdout may be the reply an editor reads.
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
        })
    })();
    let outcome = options.and_then(|options| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| SendError {
                code: send::EXIT_FAILED,
                message: format!("cannot start: {error}"),
            })?;
        let outcome = runtime.block_on(send::run(options));
        // A question settled by another client leaves a read of stdin that cannot be
        // cancelled: waiting for it would keep `send` until Enter is pressed.
        runtime.shutdown_background();
        outcome
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("openvaala send: {error}");
            ExitCode::from(error.code)
        }
    }
}

fn stop(data_dir: &Path) -> anyhow::Result<()> {
    if !data_dir.is_dir() {
        anyhow::bail!("{} is not a data directory", data_dir.display());
    }
    let lock_path = Store::lock_path_in(data_dir);
    let Some(owner) = lock::holder(&lock_path)? else {
        println!("no openvaala is serving {}", data_dir.display());
        return Ok(());
    };
    if owner.pid == 0 {
        // Cluster instances hold the lock together and each says who it is in its folder.
        return stop_instances(data_dir);
    }
    signal_stop(&owner)?;
    println!("stopping openvaala ({owner})…");
    if !lock::wait_until_free(&lock_path, Duration::from_secs(60)) {
        anyhow::bail!("openvaala ({owner}) did not stop within 60 s");
    }
    println!("stopped");
    Ok(())
}

/// Sends SIGTERM (a graceful stop) to a service.
fn signal_stop(owner: &lock::LockOwner) -> anyhow::Result<()> {
    let pid = libc::pid_t::try_from(owner.pid).context("invalid pid")?;
    // Never a process group or init: 0, 1 and negative pids mean something else to kill(2).
    if pid <= 1 {
        anyhow::bail!("refusing to signal pid {pid} ({owner})");
    }
    // SAFETY: kill(2) with a positive pid read from the data directory and a valid signal.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        anyhow::bail!(
            "cannot signal openvaala ({owner}): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Cluster mode: stops every instance serving this data directory on this machine.
fn stop_instances(data_dir: &Path) -> anyhow::Result<()> {
    let owners = openvaala::store::lock::instance_owners(data_dir);
    if owners.is_empty() {
        println!(
            "no openvaala instance of this machine is serving {}",
            data_dir.display()
        );
        return Ok(());
    }
    for owner in &owners {
        signal_stop(owner)?;
        println!("stopping openvaala ({owner})…");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while owners
        .iter()
        .any(|owner| openvaala::store::lock::process_runs(owner.pid))
    {
        if std::time::Instant::now() > deadline {
            anyhow::bail!("the instances did not stop within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("stopped");
    Ok(())
}

fn gc(data_dir: &Path) -> anyhow::Result<()> {
    let store = Store::open(data_dir)?;
    let _lock = match RuntimeLock::acquire(&store.lock_path()) {
        Ok(lock) => lock,
        Err(LockError::Held { owner }) => anyhow::bail!(
            "the service is running ({owner}); it collects the store itself once a day, or stop \
             it first with `openvaala serve stop`"
        ),
        Err(error) => return Err(error.into()),
    };
    let started = std::time::Instant::now();
    let checkpoints = openvaala::checkpoints::Checkpoints::open(data_dir, Default::default());
    let collected = openvaala::runtime::checkpoint_gc::collect(
        &store,
        &checkpoints,
        openvaala::runtime::checkpoint_gc::Service::Stopped,
    )?;
    println!(
        "removed {} snapshot(s) and {} stored file(s), {:.1} MB, in {:.2} s; {} working \
         director(ies) no longer exist and nothing named their snapshots",
        collected.snapshots,
        collected.blobs,
        collected.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        collected.trees,
    );
    for tree in &collected.unnamed {
        println!(
            "left whole: {} {}; its snapshots are kept (delete its folder to drop them)",
            tree.file.display(),
            tree.reason
        );
    }
    Ok(())
}

fn repair(data_dir: &Path, id: &str) -> anyhow::Result<()> {
    let store = Store::open(data_dir)?;
    let _lock = match RuntimeLock::acquire(&store.lock_path()) {
        Ok(lock) => lock,
        Err(LockError::Held { owner }) => anyhow::bail!(
            "the service is running ({owner}); stop it first with `openvaala serve stop`"
        ),
        Err(error) => return Err(error.into()),
    };
    if !store.exists(id) {
        anyhow::bail!("no conversation {id} in {}", data_dir.display());
    }
    let repaired = store.repair_conversation(id)?;
    if repaired.is_empty() {
        println!("nothing to repair in {id}");
        return Ok(());
    }
    for file in &repaired {
        println!(
            "{}: moved damaged line(s) {} and {} byte(s) of torn tail to {}",
            file.path.display(),
            numbers(&file.lines),
            file.torn_bytes,
            file.aside.display()
        );
    }
    // The embedded index learns of the shorter files at the next start (a cluster's
    // instances compare file lengths at every start anyway).
    openvaala::index::note_for_reindex(&store, &[id])?;
    Ok(())
}

fn numbers(lines: &[usize]) -> String {
    if lines.is_empty() {
        return "none".to_owned();
    }
    let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
    lines.join(", ")
}

fn reindex(
    data_dir: &Path,
    database_url: Option<String>,
    config: Option<&Path>,
) -> anyhow::Result<()> {
    let database_url = match database_url {
        Some(url) => Some(url),
        None => Config::load(config)?
            .cluster
            .map(|cluster| cluster.database_url),
    };
    if let Some(url) = &database_url {
        openvaala::config::check_database_url(url)
            .map_err(|message| anyhow::anyhow!("--database-url {message}"))?;
    }
    let store = Store::open(data_dir)?;
    let _lock = match RuntimeLock::acquire(&store.lock_path()) {
        Ok(lock) => lock,
        Err(LockError::Held { owner }) => anyhow::bail!(
            "the service is running ({owner}); stop it first with `openvaala serve stop`"
        ),
        Err(error) => return Err(error.into()),
    };
    let started = std::time::Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        match &database_url {
            Some(url) => openvaala::index::rebuild::reindex_postgres(&store, url).await,
            None => openvaala::index::rebuild::reindex(&store).await,
        }
    })?;
    if database_url.is_none() {
        // The index is now this binary's derivation of the files: the directory is upgraded.
        store.stamp_format()?;
    }
    let seconds = started.elapsed().as_secs_f64();
    for id in &report.finished_deletes {
        println!("finished the interrupted delete of {id}");
    }
    for path in &report.torn_files {
        println!("skipped a torn tail in {}", path.display());
    }
    for (id, path, lines) in &report.damaged_files {
        println!(
            "damaged line(s) {} in {}: {id} is listed but cannot open; run `openvaala repair {id}`",
            numbers(lines),
            path.display()
        );
    }
    if report.closed_turns > 0 {
        println!(
            "closed {} turn(s) left running as interrupted",
            report.closed_turns
        );
    }
    for (id, reason) in &report.skipped {
        println!("skipped {id}: {reason}");
    }
    println!(
        "indexed {} conversation(s), skipped {}, in {seconds:.2} s",
        report.indexed,
        report.skipped.len()
    );
    Ok(())
}
