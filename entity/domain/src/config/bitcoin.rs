//! `[bitcoin]`: the live Bitcoin network's node (Bitcoin Core's JSON-RPC, the node operators
//! already run for BTCPay), read by the deposit scanner and the confirmation tracker for
//! `bitcoin`. The watch set lives in our database: the node needs no wallet, but `txindex=1`.
//! The payout hot wallet's key is read by the payout executor only.

use std::path::PathBuf;

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
    /// The payout hot wallet: a BIP32 extended private key (`xprv…`), or a file holding it. The
    /// wallet is its first BIP84 address (`m/84'/0'/0'/0/0`), change included. Only the payout
    /// executor reads it; without one, live Bitcoin payouts are refused (`gate_offline`).
    pub hot_wallet_key: Option<Redacted>,
    pub hot_wallet_key_file: Option<PathBuf>,
    /// Confirmation target of `estimatesmartfee`, in blocks.
    pub fee_target_blocks: u16,
    /// Fee rate (sat/vB) when the node has no estimate (a new node, regtest).
    pub fallback_fee_rate_sat_vb: u64,
    /// The most a payout transaction pays per vbyte; each payout is further capped by its
    /// configured network fee.
    pub max_fee_rate_sat_vb: u64,
    /// Timeout of `scantxoutset`, which reads the node's whole UTXO set to find the hot
    /// wallet's outputs (minutes on mainnet).
    pub wallet_scan_timeout_ms: u64,
    /// The deposit account's private key for sweeping (`[treasury]`): a file holding the
    /// account-level xprv (`m/84'/0'/0'`) whose xpub is `addresses.live.bitcoin_xpub`. Loaded
    /// only by the payout executor's process, which checks it derives the xpub's addresses.
    pub deposit_key_file: Option<PathBuf>,
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
            hot_wallet_key: None,
            hot_wallet_key_file: None,
            fee_target_blocks: 3,
            fallback_fee_rate_sat_vb: 10,
            max_fee_rate_sat_vb: 500,
            wallet_scan_timeout_ms: 600_000,
            deposit_key_file: None,
        }
    }
}

impl BitcoinConfig {
    /// The section's own checks, when a node is configured (`node_sections!` checks the URL).
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.fallback_fee_rate_sat_vb == 0 || self.fallback_fee_rate_sat_vb > self.max_fee_rate_sat_vb {
            return invalid(
                "bitcoin.fallback_fee_rate_sat_vb",
                "must be at least 1 and at most bitcoin.max_fee_rate_sat_vb",
            );
        }
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
            assert!(!cfg.bitcoin.has_hot_wallet());
            jail.set_env("PAYGATE_BITCOIN__FALLBACK_FEE_RATE_SAT_VB", "0");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("bitcoin.fallback_fee_rate_sat_vb"), "{err}");
            Ok(())
        });
    }
}
