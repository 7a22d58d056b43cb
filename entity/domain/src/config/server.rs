//! `[server]`: the API listener's timeouts and connection cap, and where it serves metrics.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// `[server]`: how long the API waits on a client and how many connections it holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// A client must send a request's complete header block within this time (counted from
    /// when the connection starts waiting for it), else the connection is closed (slowloris).
    pub header_read_timeout_ms: u64,
    /// A request whose response is not ready within this time gets 504 `request_timeout`.
    pub request_timeout_ms: u64,
    /// A keep-alive connection with no request in flight is closed after this long idle.
    pub idle_timeout_ms: u64,
    /// Connections held at once; further clients wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Where the `api` binary serves Prometheus `GET /metrics` (rate limiting: requests refused
    /// per class, rate-limit store failures). Unset: not served. An operator address, kept off
    /// the public listener.
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            header_read_timeout_ms: 10_000,
            request_timeout_ms: 30_000,
            idle_timeout_ms: 5_000,
            max_connections: 1024,
            metrics_listen: None,
        }
    }
}

impl ServerConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (key, ms) in [
            ("server.header_read_timeout_ms", self.header_read_timeout_ms),
            ("server.request_timeout_ms", self.request_timeout_ms),
            ("server.idle_timeout_ms", self.idle_timeout_ms),
        ] {
            if ms == 0 {
                return invalid(key, "must be at least 1");
            }
        }
        if self.max_connections == 0 {
            return invalid("server.max_connections", "must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::Config;
    use super::*;

    #[test]
    fn server_section_sets_timeouts_and_refuses_zero() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("c.toml", "[server]\nheader_read_timeout_ms = 2000\nmax_connections = 7\n")?;
            jail.set_env("PAYGATE_SERVER__IDLE_TIMEOUT_MS", "1500");
            let cfg = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(cfg.server.header_read_timeout_ms, 2000);
            assert_eq!(cfg.server.idle_timeout_ms, 1500);
            assert_eq!(cfg.server.max_connections, 7);
            assert_eq!(cfg.server.request_timeout_ms, ServerConfig::default().request_timeout_ms);
            Ok(())
        });
        for (var, key) in [
            ("PAYGATE_SERVER__REQUEST_TIMEOUT_MS", "server.request_timeout_ms"),
            ("PAYGATE_SERVER__MAX_CONNECTIONS", "server.max_connections"),
        ] {
            figment::Jail::expect_with(|jail| {
                jail.set_env(var, "0");
                let err = Config::from_figment(Config::figment(std::path::Path::new("none.toml"))).unwrap_err();
                assert!(err.to_string().contains(key), "{err}");
                Ok(())
            });
        }
    }
}
