//! `[tron]`: the live TRON network's full node (java-tron HTTP API, or a TronGrid-compatible
//! service), read by the deposit scanner and the confirmation tracker for `tron` and
//! `tron_usdt`. The payout hot wallet's key is read by the payout executor only.

use serde::{Deserialize, Serialize};

use super::{ConfigError, Redacted, invalid};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TronConfig {
    /// Base URL of the node's HTTP API (`http://fullnode:8090`, `https://api.trongrid.io`).
    /// Every call is a `/wallet/*` path, which a java-tron full node serves on its HTTP port
    /// (the solidified block too, from `/wallet/getnodeinfo`): its solidity port is not used.
    /// Empty: TRON is not watched in live (its gates are offline).
    pub api_url: String,
    /// Sent as `TRON-PRO-API-KEY` (TronGrid); never logged.
    pub api_key: Option<Redacted>,
    pub request_timeout_ms: u64,
    /// A failed call is retried this many times, the delay doubling from `retry_backoff_ms`.
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    /// Blocks before the cursor re-read by every scan (a transfer a short fork moved into a
    /// replacement block is still recorded; payments are unique, so nothing twice). Default 3.
    pub rescan_blocks: u64,
    /// The TRC-20 USDT contract (base58, `T…`); default the mainnet contract.
    pub usdt_contract: Option<String>,
    /// The payout hot wallet: a secp256k1 private key (64 hex characters), or a file holding
    /// it. Its account pays every TRX and USDT payout and refund, and the energy and bandwidth
    /// they burn. Only the payout executor reads it; without one, live TRON payouts are refused
    /// (`gate_offline`).
    pub hot_wallet_key: Option<Redacted>,
    pub hot_wallet_key_file: Option<std::path::PathBuf>,
    /// A payout transaction may enter a block until this many seconds after the newest block's
    /// time when it was signed; one that expired unseen is signed again. Default 120.
    pub expiration_secs: u64,
    /// The most TRX (in sun) a USDT payout may burn for energy (`fee_limit`). Default 50 TRX.
    pub fee_limit_sun: u64,
    /// The deposit account's private key for sweeping (`[treasury]`): a file holding the
    /// account-level xprv (`m/44'/195'/0'`) whose xpub is `addresses.live.tron_xpub`. Loaded
    /// only by the payout executor's process, which checks it derives the xpub's addresses
    /// (refusing to start otherwise). Needed when `treasury.gates.tron` or `tron_usdt` sweeps;
    /// a USDT sweep's energy is topped up by the hot wallet, so that needs `hot_wallet_key` too.
    pub deposit_key_file: Option<std::path::PathBuf>,
}

impl Default for TronConfig {
    fn default() -> Self {
        TronConfig {
            api_url: String::new(),
            api_key: None,
            request_timeout_ms: 10_000,
            max_retries: 5,
            retry_backoff_ms: 200,
            rescan_blocks: 3,
            usdt_contract: None,
            hot_wallet_key: None,
            hot_wallet_key_file: None,
            expiration_secs: 120,
            fee_limit_sun: 50_000_000,
            deposit_key_file: None,
        }
    }
}

impl TronConfig {
    /// The section's own checks, when a node is configured (`node_sections!` checks the URL).
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(c) = &self.usdt_contract
            && crate::chain::address::tron::account_id_of(c).is_none()
        {
            return invalid("tron.usdt_contract", "must be a base58 TRON address (T…)");
        }
        if !(3..=3_600).contains(&self.expiration_secs) {
            return invalid("tron.expiration_secs", "must be from 3 to 3600");
        }
        if self.fee_limit_sun == 0 || self.fee_limit_sun > 1_000_000_000 {
            return invalid("tron.fee_limit_sun", "must be from 1 to 1000000000 (1000 TRX)");
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::{Config, assert_refused};

    #[test]
    fn the_tron_node_is_checked_and_optional() {
        figment::Jail::expect_with(|jail| {
            assert!(!Config::load().unwrap().tron.configured());
            jail.set_env("PAYGATE_TRON__API_URL", "ftp://node");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("tron.api_url"), "{err}");
            jail.set_env("PAYGATE_TRON__API_URL", "http://node:8090");
            jail.set_env("PAYGATE_TRON__USDT_CONTRACT", "0xabc");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("tron.usdt_contract"), "{err}");
            jail.set_env("PAYGATE_TRON__USDT_CONTRACT", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t");
            let cfg = Config::load().unwrap();
            assert!(cfg.tron.configured());
            assert_eq!(cfg.tron.rescan_blocks, 3);
            assert!(!cfg.tron.has_hot_wallet());
            assert_refused(jail, "PAYGATE_TRON__EXPIRATION_SECS", ("2", "60"), "tron.expiration_secs");
            assert_refused(jail, "PAYGATE_TRON__FEE_LIMIT_SUN", ("0", "30000000"), "tron.fee_limit_sun");
            jail.set_env("PAYGATE_TRON__HOT_WALLET_KEY_FILE", "/run/secrets/tron-key");
            assert!(Config::load().unwrap().tron.has_hot_wallet());
            assert_eq!(Config::load().unwrap().tron.deposit_key_file, None);
            jail.set_env("PAYGATE_TRON__DEPOSIT_KEY_FILE", "/run/secrets/tron-deposit.xprv");
            let file = Config::load().unwrap().tron.deposit_key_file;
            assert_eq!(file.as_deref(), Some(std::path::Path::new("/run/secrets/tron-deposit.xprv")));
            Ok(())
        });
    }
}
