//! `[bitcoin]`: the live Bitcoin network's node (Bitcoin Core's JSON-RPC, the node operators
//! already run for BTCPay), read by the deposit scanner and the confirmation tracker for
//! `bitcoin`. The watch set lives in our database: the node needs no wallet, but `txindex=1`.

use serde::{Deserialize, Serialize};

use super::{ConfigError, Redacted, invalid};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BitcoinConfig {
    /// The node's JSON-RPC URL (`http://bitcoind:8332`). Empty: Bitcoin is not watched in live
    /// (its gate is offline).
    pub rpc_url: String,
    /// `rpcauth`/`rpcuser` credentials, sent as HTTP basic auth; the password is never logged.
    pub rpc_user: Option<String>,
    pub rpc_password: Option<Redacted>,
    pub request_timeout_ms: u64,
    /// A failed call is retried this many times, the delay doubling from `retry_backoff_ms`.
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    /// Blocks before the cursor re-read by every scan, on top of the blocks a reorganisation
    /// replaced (found by block hash). Default 6.
    pub rescan_blocks: u64,
    /// Whether deposits still in the mempool are shown (`confirming`, 0 confirmations).
    pub mempool: bool,
}

impl Default for BitcoinConfig {
    fn default() -> Self {
        BitcoinConfig {
            rpc_url: String::new(),
            rpc_user: None,
            rpc_password: None,
            request_timeout_ms: 30_000,
            max_retries: 5,
            retry_backoff_ms: 200,
            rescan_blocks: 6,
            mempool: true,
        }
    }
}

impl BitcoinConfig {
    /// Whether a node is configured (the Bitcoin gate can be watched in live).
    pub fn configured(&self) -> bool {
        !self.rpc_url.is_empty()
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !self.configured() {
            return Ok(());
        }
        super::check_node("bitcoin", "rpc_url", &self.rpc_url, self.request_timeout_ms)?;
        if self.rpc_password.is_some() && self.rpc_user.is_none() {
            return invalid("bitcoin.rpc_user", "must be set with bitcoin.rpc_password");
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::Config;

    #[test]
    fn the_bitcoin_node_is_checked_and_optional() {
        figment::Jail::expect_with(|jail| {
            assert!(!Config::load().unwrap().bitcoin.configured());
            jail.set_env("PAYGATE_BITCOIN__RPC_URL", "tcp://node");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("bitcoin.rpc_url"), "{err}");
            jail.set_env("PAYGATE_BITCOIN__RPC_URL", "http://node:8332");
            jail.set_env("PAYGATE_BITCOIN__RPC_PASSWORD", "hunter2");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("bitcoin.rpc_user"), "{err}");
            jail.set_env("PAYGATE_BITCOIN__RPC_USER", "paygate");
            let cfg = Config::load().unwrap();
            assert!(cfg.bitcoin.configured());
            assert_eq!(cfg.bitcoin.rescan_blocks, 6);
            assert!(!format!("{:?}", cfg.bitcoin).contains("hunter2"));
            Ok(())
        });
    }
}
