//! `[xrp]`: the live XRP Ledger's node (rippled's JSON-RPC), read by the deposit scanner and the
//! confirmation tracker for `xrp`. Deposits go to the operator's address
//! (`addresses.live.xrp_address`) with each invoice's destination tag.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct XrpConfig {
    /// The node's JSON-RPC URL (`http://rippled:5005`). Empty: XRP is not watched in live (its
    /// gate is offline).
    pub rpc_url: String,
    pub request_timeout_ms: u64,
    /// A failed call is retried this many times, the delay doubling from `retry_backoff_ms`.
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    /// Transactions per `account_tx` page (rippled caps it; the scanner follows the marker).
    pub page_size: u32,
}

impl Default for XrpConfig {
    fn default() -> Self {
        XrpConfig {
            rpc_url: String::new(),
            request_timeout_ms: 10_000,
            max_retries: 5,
            retry_backoff_ms: 200,
            page_size: 200,
        }
    }
}

impl XrpConfig {
    /// Whether a node is configured (the XRP gate can be watched in live).
    pub fn configured(&self) -> bool {
        !self.rpc_url.is_empty()
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !self.configured() {
            return Ok(());
        }
        super::check_node("xrp", "rpc_url", &self.rpc_url, self.request_timeout_ms)?;
        if self.page_size == 0 {
            return invalid("xrp.page_size", "must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::Config;

    #[test]
    fn the_xrp_node_is_checked_and_optional() {
        figment::Jail::expect_with(|jail| {
            assert!(!Config::load().unwrap().xrp.configured());
            jail.set_env("PAYGATE_XRP__RPC_URL", "wss://s1.ripple.com");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("xrp.rpc_url"), "{err}");
            jail.set_env("PAYGATE_XRP__RPC_URL", "http://rippled:5005");
            jail.set_env("PAYGATE_XRP__PAGE_SIZE", "0");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("xrp.page_size"), "{err}");
            jail.set_env("PAYGATE_XRP__PAGE_SIZE", "50");
            let cfg = Config::load().unwrap();
            assert!(cfg.xrp.configured());
            assert_eq!(cfg.xrp.page_size, 50);
            Ok(())
        });
    }
}
