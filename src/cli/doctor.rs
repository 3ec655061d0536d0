//! `openvaala doctor`: checks what makes a first run fail, or quietly unsafe, on this machine,
//! and prints each finding with its fix. Exit code 0 when all is well, 1 with warnings, 2 with
//! failures; `--json` prints the same as one JSON object.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::config::{Config, McpTransport, Protocol, SandboxMode};

/// How long a provider or PostgreSQL may take to answer.
const REACH_TIMEOUT: Duration = Duration::from_secs(5);
/// Less free space than this on the data directory's file system is a warning.
const LOW_SPACE_BYTES: u64 = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Ok,
    Warning,
    Failure,
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked (`config`, `provider openai`, `sandbox`, …).
    pub name: String,
    pub level: Level,
    pub detail: String,
    /// What to do about it; absent when all is well.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            level: Level::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            level: Level::Warning,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            level: Level::Failure,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Every check, in order; the config's failure stops the ones that need it.
pub fn run(config_path: Option<&Path>, data_dir: &Path) -> Vec<Check> {
    let mut checks = Vec::new();
    let config = match Config::load(config_path) {
        Ok(config) => {
            let source = config.source.as_ref().map_or(
                "no config file: the built-in demo model".to_owned(),
                |path| format!("{} parses", path.display()),
            );
            checks.push(Check::ok("config", source));
            config
        }
        Err(error) => {
            checks.push(Check::fail(
                "config",
                error.to_string(),
                "correct the key the error names (docs/configuration.md lists every key)",
            ));
            return checks;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the checks that reach the network");
    checks.extend(runtime.block_on(providers(&config)));
    checks.extend(sandbox(&config));
    checks.extend(data_directory(data_dir));
    checks.push(open_files(&config));
    if let Some(cluster) = &config.cluster {
        checks.push(runtime.block_on(postgres(&cluster.database_url)));
    }
    checks.extend(mcp_programs(&config));
    checks.push(bind_address(&config));
    checks
}

/// The exit code for `checks`: 0, 1 with warnings, 2 with failures.
pub fn exit_code(checks: &[Check]) -> u8 {
    match checks.iter().map(|check| check.level).max() {
        Some(Level::Failure) => 2,
        Some(Level::Warning) => 1,
        _ => 0,
    }
}

/// The checks as a person reads them.
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for check in checks {
        let mark = match check.level {
            Level::Ok => "ok  ",
            Level::Warning => "WARN",
            Level::Failure => "FAIL",
        };
        out += &format!("[{mark}] {}: {}\n", check.name, check.detail);
        if let Some(fix) = &check.fix {
            out += &format!("       fix: {fix}\n");
        }
    }
    let failures = checks.iter().filter(|c| c.level == Level::Failure).count();
    let warnings = checks.iter().filter(|c| c.level == Level::Warning).count();
    out += &format!("{failures} failure(s), {warnings} warning(s)\n");
    out
}

/// Each provider a model uses: its key set (never printed) and its address answering.
async fn providers(config: &Config) -> Vec<Check> {
    let client = crate::tls::client_builder()
        .timeout(REACH_TIMEOUT)
        .build()
        .expect("an HTTP client");
    let mut checks = Vec::new();
    for (name, provider) in &config.providers {
        if provider.protocol == Protocol::Demo
            || !config.models.values().any(|model| &model.provider == name)
        {
            continue;
        }
        let label = format!("provider {name}");
        if let Some(variable) = &provider.api_key_env {
            let set = std::env::var(variable).is_ok_and(|value| !value.trim().is_empty());
            if !set {
                checks.push(Check::fail(
                    label.clone(),
                    format!("its key variable {variable} is not set"),
                    format!("export {variable}=<your key> in the service's environment"),
                ));
                continue;
            }
        }
        match client.get(&provider.base_url).send().await {
            Ok(answer) => checks.push(Check::ok(
                label,
                format!(
                    "{} answers (HTTP {}); its key is set",
                    provider.base_url,
                    answer.status().as_u16()
                ),
            )),
            Err(error) => checks.push(Check::fail(
                label,
                format!(
                    "{} cannot be reached: {}",
                    provider.base_url,
                    reach_error(&error)
                ),
                format!("check providers.{name}.base_url, the network and any proxy (HTTPS_PROXY)"),
            )),
        }
    }
    checks
}

/// Why a request got no answer, without the URL again.
fn reach_error(error: &reqwest::Error) -> String {
    let mut cause: Option<&dyn std::error::Error> = Some(error);
    let mut last = error.to_string();
    while let Some(current) = cause {
        last = current.to_string();
        cause = current.source();
    }
    if error.is_timeout() {
        format!("no answer within {} s", REACH_TIMEOUT.as_secs())
    } else {
        last
    }
}

/// The sandbox of tool commands on this kernel, and whether each agent's can be enforced.
fn sandbox(config: &Config) -> Vec<Check> {
    let support = crate::sandbox::support();
    let mut checks = Vec::new();
    let layers: Vec<String> = support
        .layers()
        .into_iter()
        .map(|layer| format!("{} {}", layer.name, if layer.active { "on" } else { "off" }))
        .collect();
    let landlock = match support.landlock_abi {
        Some(abi) => format!("Landlock ABI {abi}"),
        None => "no Landlock".to_owned(),
    };
    if support.available() {
        checks.push(Check::ok(
            "sandbox",
            format!("{landlock}; {}", layers.join(", ")),
        ));
    } else {
        let sandboxed: Vec<&String> = config
            .agents
            .iter()
            .filter(|(_, agent)| agent.sandbox != SandboxMode::Off)
            .map(|(name, _)| name)
            .collect();
        checks.push(Check::fail(
            "sandbox",
            format!(
                "tool commands cannot be sandboxed here ({landlock}: {}); the tool calls of {} \
                 would fail",
                support.error.as_deref().unwrap_or("unknown reason"),
                if sandboxed.is_empty() {
                    "no agent".to_owned()
                } else {
                    sandboxed
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            "run on Linux 5.19 or later with Landlock enabled (lsm=…,landlock on the kernel's \
             command line); in a container, allow the landlock_* and unshare system calls",
        ));
    }
    if support.root {
        checks.push(Check::warn(
            "user",
            "this runs as root: a command that escapes the sandbox would run as root",
            "run the service as a user of its own (contrib/openvaala.service)",
        ));
    }
    checks
}

/// The data directory: usable, writable, its file system, free space, and who holds it.
fn data_directory(dir: &Path) -> Vec<Check> {
    let name = "data directory";
    if dir.exists() && !dir.is_dir() {
        return vec![Check::fail(
            name,
            format!("{} is not a directory", dir.display()),
            "point --data-dir or OPENVAALA_HOME at a directory",
        )];
    }
    if let Err(error) = std::fs::create_dir_all(dir) {
        return vec![Check::fail(
            name,
            format!("{} cannot be created: {error}", dir.display()),
            "create it, owned by the user the service runs as",
        )];
    }
    let probe = dir.join(format!(".doctor-{}", std::process::id()));
    let writable = std::fs::write(&probe, b"probe").and_then(|()| std::fs::remove_file(&probe));
    if let Err(error) = writable {
        return vec![Check::fail(
            name,
            format!("{} is not writable: {error}", dir.display()),
            "give the service's user write access to it (or mount it read-write)",
        )];
    }
    let mut checks = Vec::new();
    match filesystem(dir) {
        Some((kind, free)) if free < LOW_SPACE_BYTES => checks.push(Check::warn(
            name,
            format!(
                "{} ({kind}) has {} MiB free",
                dir.display(),
                free / (1024 * 1024)
            ),
            "free some space: a full disk refuses new messages (503) until it has room",
        )),
        Some((kind, free)) => checks.push(Check::ok(
            name,
            format!(
                "{} is writable ({kind}, {} GiB free)",
                dir.display(),
                free / (1024 * 1024 * 1024)
            ),
        )),
        None => checks.push(Check::ok(name, format!("{} is writable", dir.display()))),
    }
    let lock = crate::store::Store::lock_path_in(dir);
    match crate::store::lock::holder(&lock) {
        Ok(Some(owner)) => checks.push(Check::warn(
            "instance",
            format!("another instance holds this data directory ({owner})"),
            "stop it (`openvaala serve stop`) or use another --data-dir",
        )),
        Ok(None) => checks.push(Check::ok("instance", "no other instance holds it")),
        Err(error) => checks.push(Check::warn(
            "instance",
            format!("its lock cannot be checked: {error}"),
            "check the permissions of the data directory",
        )),
    }
    checks
}

/// The file system's type name and the bytes free to this user.
fn filesystem(dir: &Path) -> Option<(String, u64)> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statfs writes only the struct it is given; the path is a valid C string.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    let kind = match stat.f_type as i64 {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x2FC1_2FC1 => "zfs",
        _ => "other",
    };
    #[allow(clippy::unnecessary_cast)]
    let free = stat.f_bavail as u64 * stat.f_bsize as u64;
    Some((kind.to_owned(), free))
}

/// The open-file limit against the live conversations the config asks for.
fn open_files(config: &Config) -> Check {
    let limit = crate::limits::raise_open_file_limit();
    let caps = crate::limits::caps(limit, &config.server);
    let needed = crate::limits::RESERVED_FILES
        + caps.max_live_conversations as u64 * crate::limits::FILES_PER_CONVERSATION;
    if needed > limit {
        return Check::warn(
            "open files",
            format!(
                "the limit is {limit}, but {} live conversations need about {needed}",
                caps.max_live_conversations
            ),
            "raise `ulimit -n` (LimitNOFILE= in a unit) or lower server.max_live_conversations",
        );
    }
    Check::ok(
        "open files",
        format!(
            "limit {limit}: up to {} live conversations and {} connections",
            caps.max_live_conversations, caps.max_connections
        ),
    )
}

/// Cluster mode: PostgreSQL answers, and its index's migrations are applied.
async fn postgres(url: &str) -> Check {
    let name = "postgresql";
    let connected = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(REACH_TIMEOUT)
        .connect(url)
        .await;
    let pool = match connected {
        Ok(pool) => pool,
        Err(error) => {
            return Check::fail(
                name,
                format!(
                    "cannot connect: {}",
                    crate::redact::redact(&error.to_string())
                ),
                "check cluster.database_url, that PostgreSQL runs and accepts this user",
            );
        }
    };
    let migrator = crate::index::migrations::postgres();
    let applied: Result<Vec<i64>, _> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(&pool)
            .await;
    let applied = applied.unwrap_or_default();
    let missing: Vec<i64> = migrator
        .iter()
        .map(|migration| migration.version)
        .filter(|version| !applied.contains(version))
        .collect();
    if missing.is_empty() {
        Check::ok(name, "reachable; the index's migrations are applied")
    } else {
        Check::warn(
            name,
            format!("reachable; {} migration(s) not applied yet", missing.len()),
            "the first instance that starts applies them (or run `openvaala reindex`)",
        )
    }
}

/// The programs stdio MCP servers start (`node`, `npx`, …) are on the PATH.
fn mcp_programs(config: &Config) -> Vec<Check> {
    config
        .mcp
        .iter()
        .filter_map(|(name, server)| match &server.transport {
            McpTransport::Stdio { command, .. } if !command.contains("${") => Some((name, command)),
            _ => None,
        })
        .map(|(name, command)| {
            let label = format!("mcp {name}");
            match find_program(command) {
                Some(path) => Check::ok(label, format!("`{command}` is {}", path.display())),
                None => Check::fail(
                    label,
                    format!("`{command}` is not found on the PATH"),
                    if command == "node" || command == "npx" {
                        "install Node.js (Debian: apt install nodejs npm)".to_owned()
                    } else {
                        format!("install `{command}`, or give its absolute path")
                    },
                ),
            }
        })
        .collect()
}

fn find_program(command: &str) -> Option<PathBuf> {
    let path = Path::new(command);
    if path.is_absolute() || command.contains('/') {
        return path.is_file().then(|| path.to_owned());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
}

/// The address it listens on against the token that must guard it off loopback.
fn bind_address(config: &Config) -> Check {
    let addr: SocketAddr = config.server.addr.unwrap_or_else(|| {
        crate::server::DEFAULT_ADDR
            .parse()
            .expect("the default address")
    });
    if addr.ip().is_loopback() {
        return Check::ok("address", format!("{addr}: loopback, with the local token"));
    }
    match std::env::var("OPENVAALA_TOKEN") {
        Ok(token) => match crate::http::security::weak_token(&token) {
            Some(why) => Check::fail(
                "address",
                format!("{addr} faces the network, and {why}"),
                "set OPENVAALA_TOKEN to a long random value (openssl rand -hex 32)",
            ),
            None => Check::ok(
                "address",
                format!("{addr} faces the network, guarded by OPENVAALA_TOKEN"),
            ),
        },
        Err(_) => Check::fail(
            "address",
            format!("{addr} faces the network, and OPENVAALA_TOKEN is not set"),
            "set OPENVAALA_TOKEN to a long random value (openssl rand -hex 32), or listen on \
             127.0.0.1",
        ),
    }
}
