//! The command line, as clap reads it, and how a command finds the data directory and the
//! service.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::client::api::Api;
use crate::credential::ClientKind;
use crate::store::Store;
use crate::store::lock;

/// The version and the git commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("OPENVAALA_COMMIT"),
    ")"
);

/// OpenVaala: an agent runtime service. Conversations live here; every client sees them live.
#[derive(Parser)]
#[command(name = "openvaala", version = VERSION)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
    /// The API tokens of a data directory: `token show` prints the local one, which every
    /// API request carries (tool processes cannot read it), `token url` the link that signs a
    /// browser in with it; `token add|list|revoke` manage named tokens for scripts, other
    /// machines and read-only followers.
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
    /// Print a one-time link, and its QR code, that signs a browser in (a phone, another
    /// computer) with a new device token. It works once, within 10 minutes; the device shows
    /// in the web UI's list of signed-in devices, where it can be signed out.
    Pair {
        /// What the device may do: `full`, or `read` (follow and list only).
        #[arg(long, default_value = "full", value_parser = ["full", "read"])]
        scope: String,
        /// The service's address as the device reaches it [default: the running service's
        /// address]. Behind a reverse proxy, its public URL (`https://agents.example.com`).
        #[arg(long)]
        url: Option<String>,
        /// Print the link only, no QR code.
        #[arg(long)]
        no_qr: bool,
        #[command(flatten)]
        data: DataDirArg,
    },
    /// Print a completion script for a shell (for example: `openvaala completions bash >
    /// ~/.local/share/bash-completion/completions/openvaala`).
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff; `openvaala man | man -l -`).
    Man,
    /// Check what makes a first run fail or quietly unsafe here (the config, providers and
    /// their keys, the sandbox, the data directory, open files, PostgreSQL, MCP programs, the
    /// address against the token), each with its fix. Exit code 0: all good, 1: warnings,
    /// 2: failures.
    Doctor {
        /// Config file [default: $OPENVAALA_CONFIG, else ~/.config/openvaala/config.toml].
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        data: DataDirArg,
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct AcpArgs {
    /// The bearer token the service wants off loopback [default: $OPENVAALA_TOKEN].
    #[arg(long)]
    pub(crate) token: Option<String>,
    #[command(flatten)]
    pub(crate) service: ServiceArgs,
}

#[derive(Args)]
pub struct ChatArgs {
    /// A conversation to continue (its id); otherwise the first message starts a new one.
    pub(crate) conversation: Option<String>,
    /// A line-by-line client instead of the full-screen one (the default when stdin or
    /// stdout is not a terminal, or TERM is `dumb`).
    #[arg(long)]
    pub(crate) plain: bool,
    #[command(flatten)]
    pub(crate) service: ServiceArgs,
}

#[derive(Args)]
pub struct SendArgs {
    /// The message; `-` reads it from stdin.
    pub(crate) text: String,
    /// The conversation to send to (its id); otherwise the message starts a new one.
    #[arg(long)]
    pub(crate) conversation: Option<String>,
    /// How the message joins a running turn.
    #[arg(long, value_enum)]
    pub(crate) mode: Option<SendMode>,
    /// The working directory of a new conversation [default: the current directory].
    #[arg(long, conflicts_with = "conversation")]
    pub(crate) cwd: Option<PathBuf>,
    /// The model of a new conversation [default: its agent's].
    #[arg(long, conflicts_with = "conversation")]
    pub(crate) model: Option<String>,
    /// The agent of a new conversation [default: the configured default agent].
    #[arg(long, conflicts_with = "conversation")]
    pub(crate) agent: Option<String>,
    /// Write every event of the conversation as a JSON line ({"id", "event", "data"}) instead
    /// of the reply's text (and an unanswered approval as {"type":"approval.requested", …}).
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) service: ServiceArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum SendMode {
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
pub struct ServiceArgs {
    #[arg(long, help = URL_HELP)]
    pub(crate) url: Option<String>,
    #[command(flatten)]
    pub(crate) data: DataDirArg,
}

#[derive(Subcommand)]
pub enum TokenAction {
    /// Print the token (for `Authorization: Bearer <token>`).
    Show,
    /// Print the browser's sign-in link for the service running for the data directory.
    Url,
    /// Make a named token and print it (this once; only its hash is kept).
    Add {
        /// What to call it (shown in lists, and as who answered an approval).
        name: String,
        /// `full`, or `read`: it can follow and list, not send, answer or change anything.
        #[arg(long, default_value = "full", value_parser = ["full", "read"])]
        scope: String,
    },
    /// List the named tokens and signed-in devices (never the tokens themselves).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a named token or sign a device out, by id or by name; at once, open event
    /// streams included.
    Revoke { id_or_name: String },
}

#[derive(Subcommand)]
pub enum ServeAction {
    /// Ask the running service to stop gracefully; returns once it has.
    Stop {
        #[command(flatten)]
        data: DataDirArg,
    },
}

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on [default: server.addr from the config, else 127.0.0.1:7341].
    #[arg(long)]
    pub(crate) addr: Option<SocketAddr>,
    #[command(flatten)]
    pub(crate) data: DataDirArg,
    /// Config file [default: $OPENVAALA_CONFIG, else ~/.config/openvaala/config.toml].
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Cluster mode: the PostgreSQL database this instance shares with the others
    /// (postgres://…) [default: cluster.database_url from the config; none: embedded].
    #[arg(long)]
    pub(crate) database_url: Option<String>,
    /// Cluster mode: the host:port at which the other instances reach this one, when it is
    /// not the address it listens on (--addr 0.0.0.0:7341, a NAT) [default:
    /// cluster.advertise_addr from the config, else the --addr].
    #[arg(long)]
    pub(crate) advertise_addr: Option<String>,
}

#[derive(Args)]
pub struct DataDirArg {
    /// Data directory [default: $OPENVAALA_HOME, else $XDG_DATA_HOME/openvaala, else
    /// ~/.local/share/openvaala].
    #[arg(long, global = true)]
    pub(crate) data_dir: Option<PathBuf>,
}

impl DataDirArg {
    pub(crate) fn resolve(&self) -> anyhow::Result<PathBuf> {
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

impl ServiceArgs {
    /// A client of the service these arguments name, with `$OPENVAALA_TOKEN` if set, else the
    /// data directory's local token.
    pub(crate) fn api(&self) -> Api {
        let token = std::env::var("OPENVAALA_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
        self.api_with(token, ClientKind::Cli)
    }

    /// Whether the address comes from the user (--url, $OPENVAALA_URL) rather than from the
    /// data directory: then no service is started for it.
    pub(crate) fn explicit_url(&self) -> bool {
        self.url.is_some()
            || (self.data.data_dir.is_none()
                && std::env::var("OPENVAALA_URL").is_ok_and(|url| !url.is_empty()))
    }

    /// The address in the order of `URL_HELP`; the token given, else the data directory's
    /// local token (when this user may read it), as the token of a client of `kind` derived
    /// from it, so the service records which kind of client answered.
    pub(crate) fn api_with(&self, token: Option<String>, kind: ClientKind) -> Api {
        let token = token
            .or_else(|| {
                let dir = self.data.resolve().ok()?;
                crate::credential::read(&dir).ok().flatten()
            })
            .map(|base| crate::credential::client_token(&base, kind));
        let running_for = |dir: &Path| {
            lock::holder(&Store::lock_path_in(dir))
                .ok()
                .flatten()
                .and_then(|owner| owner.url())
        };
        let default = || format!("http://{}", crate::server::DEFAULT_ADDR);
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
