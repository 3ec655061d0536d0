//! The `[cluster]` table: the shared PostgreSQL database, the lease length and the address the
//! other instances reach this one at.

use serde::Deserialize;

use super::validator::{ConfigError, Validator};

/// Cluster mode: the shared PostgreSQL database and the conversation leases.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `postgres://…`; may hold a password, so it is never logged or shown.
    pub database_url: String,
    /// How long a lease lasts without renewal: a dead instance's conversations are taken over
    /// this long after its last renewal.
    pub lease_ms: u64,
    /// `host:port` at which the other instances reach this one, when that is not the address
    /// it listens on (it listens on every interface, or behind a NAT) [default: that address].
    pub advertise_addr: Option<String>,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("database_url", &"…")
            .field("lease_ms", &self.lease_ms)
            .field("advertise_addr", &self.advertise_addr)
            .finish()
    }
}

impl ClusterConfig {
    pub const DEFAULT_LEASE_MS: u64 = 10_000;

    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lease_ms)
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    database_url: Option<String>,
    lease_ms: Option<u64>,
    advertise_addr: Option<String>,
}

/// A database URL must name PostgreSQL (the cluster's engine); the message names the problem
/// without repeating the URL, which may hold a password.
pub fn check_database_url(url: &str) -> Result<(), String> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(())
    } else {
        Err("must be a PostgreSQL URL (postgres://user@host:port/database)".to_owned())
    }
}

/// An instance's advertised address is `host:port` (a name, an IPv4 address or a bracketed
/// IPv6 one), which the other instances put after `http://`; an address of every interface
/// names no machine.
pub fn check_advertise_addr(addr: &str) -> Result<(), String> {
    let shape = || format!("must be host:port (10.0.0.5:7341, node-1.internal:7341), got `{addr}`");
    let (host, port) = addr.rsplit_once(':').ok_or_else(shape)?;
    let port_ok = port.parse::<u16>().is_ok_and(|port| port != 0);
    let host_ok = !host.is_empty()
        && !host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '@' | '?' | '#'));
    if !port_ok || !host_ok {
        return Err(shape());
    }
    let ip = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if ip
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
    {
        return Err(format!(
            "names every interface, not this machine: give an address the other instances can reach, got `{addr}`"
        ));
    }
    Ok(())
}

impl Validator<'_> {
    pub(super) fn cluster(&self, raw: RawCluster) -> Result<ClusterConfig, ConfigError> {
        let database_url = raw.database_url.ok_or_else(|| {
            self.invalid("cluster.database_url", "is required in a [cluster] table")
        })?;
        check_database_url(&database_url)
            .map_err(|message| self.invalid("cluster.database_url", message))?;
        let lease_ms = raw.lease_ms.unwrap_or(ClusterConfig::DEFAULT_LEASE_MS);
        if !(1_000..=600_000).contains(&lease_ms) {
            return Err(self.invalid(
                "cluster.lease_ms",
                "must be between 1000 and 600000 (1 s to 10 min)",
            ));
        }
        if let Some(addr) = &raw.advertise_addr {
            check_advertise_addr(addr)
                .map_err(|message| self.invalid("cluster.advertise_addr", message))?;
        }
        Ok(ClusterConfig {
            database_url,
            lease_ms,
            advertise_addr: raw.advertise_addr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_addresses_name_a_host_and_a_port() {
        for addr in ["10.0.0.5:7341", "node-1.internal:7341", "[fd00::1]:7341"] {
            assert_eq!(check_advertise_addr(addr), Ok(()), "{addr}");
        }
        for addr in [
            "node-1",
            ":7341",
            "node 1:7341",
            "user@node:7341",
            "[::]:7341",
        ] {
            assert!(check_advertise_addr(addr).is_err(), "{addr}");
        }
    }
}
