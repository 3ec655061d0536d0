//! The `[server]` table: the listening address, when idle conversations unload, the caps on
//! live conversations, connections, slow request headers and slow request bodies, HTTPS, and
//! what the service accepts from a reverse proxy in front of it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use serde::Deserialize;

use super::validator::{ConfigError, Validator};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// `None` lets the command line or the server pick its default loopback address.
    pub addr: Option<SocketAddr>,
    /// A conversation with no turn, waiting message, subscriber or request for this long is
    /// unloaded from memory (it stays on disk and loads again on the next request).
    pub idle_unload_s: u64,
    /// Conversations held in memory at most (each holds its open log files); `None` derives
    /// it from the process's open-file limit at start.
    pub max_live_conversations: Option<usize>,
    /// HTTP connections served at once; `None` derives it from the open-file limit.
    pub max_connections: Option<usize>,
    /// How long a client may take to send a request's headers.
    pub header_read_timeout_s: u64,
    /// How long a request's body may take to arrive in full, from its headers.
    pub body_timeout_s: u64,
    /// The slowest a request's body may arrive, on average, once `header_read_timeout_s` has
    /// passed since its headers (0: no minimum, only `body_timeout_s`).
    pub body_min_bytes_per_s: u64,
    /// HTTPS: the certificate chain and private key (PEM), read again when either file
    /// changes. Relative paths are relative to the config file's folder.
    pub tls: Option<TlsFiles>,
    /// Reverse proxies whose `X-Forwarded-Proto: https` is believed (a paired browser's
    /// cookie is then marked `Secure`). No other forwarded header is used.
    pub trusted_proxies: Vec<IpAddr>,
    /// Further `Host` values requests may name (`host` or `host:port`), such as the name a
    /// reverse proxy serves the service under.
    pub allowed_hosts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            addr: None,
            idle_unload_s: 60,
            max_live_conversations: None,
            max_connections: None,
            header_read_timeout_s: 10,
            body_timeout_s: 300,
            body_min_bytes_per_s: 1024,
            tls: None,
            trusted_proxies: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    addr: Option<SocketAddr>,
    idle_unload_s: Option<u64>,
    max_live_conversations: Option<usize>,
    max_connections: Option<usize>,
    header_read_timeout_s: Option<u64>,
    body_timeout_s: Option<u64>,
    body_min_bytes_per_s: Option<u64>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    #[serde(default)]
    trusted_proxies: Vec<IpAddr>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
}

impl Validator<'_> {
    pub(super) fn server(&self, raw: RawServer) -> Result<ServerConfig, ConfigError> {
        let defaults = ServerConfig::default();
        let tls = match (raw.tls_cert, raw.tls_key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: self.beside_config(&cert),
                key: self.beside_config(&key),
            }),
            _ => {
                return Err(self.invalid(
                    "server.tls_cert",
                    "HTTPS needs both `tls_cert` and `tls_key` (PEM files)",
                ));
            }
        };
        for host in &raw.allowed_hosts {
            if host.is_empty() || host.contains(['/', ' ', '@']) {
                return Err(self.invalid(
                    "server.allowed_hosts",
                    format!("`{host}` is not a host name (`name` or `name:port`)"),
                ));
            }
        }
        let server = ServerConfig {
            addr: raw.addr,
            idle_unload_s: raw.idle_unload_s.unwrap_or(defaults.idle_unload_s),
            max_live_conversations: raw.max_live_conversations,
            max_connections: raw.max_connections,
            header_read_timeout_s: raw
                .header_read_timeout_s
                .unwrap_or(defaults.header_read_timeout_s),
            body_timeout_s: raw.body_timeout_s.unwrap_or(defaults.body_timeout_s),
            body_min_bytes_per_s: raw
                .body_min_bytes_per_s
                .unwrap_or(defaults.body_min_bytes_per_s),
            tls,
            trusted_proxies: raw.trusted_proxies,
            allowed_hosts: raw.allowed_hosts,
        };
        if server.max_live_conversations == Some(0) {
            return Err(self.invalid("server.max_live_conversations", "must be at least 1"));
        }
        if server.max_connections == Some(0) {
            return Err(self.invalid("server.max_connections", "must be at least 1"));
        }
        if server.header_read_timeout_s == 0 {
            return Err(self.invalid("server.header_read_timeout_s", "must be at least 1"));
        }
        if server.body_timeout_s == 0 {
            return Err(self.invalid("server.body_timeout_s", "must be at least 1"));
        }
        Ok(server)
    }
}
