//! `[xrp]`: the live XRP Ledger's node (rippled's JSON-RPC), read by the deposit scanner and the
//! confirmation tracker for `xrp`. Deposits go to the operator's address
//! (`addresses.live.xrp_address`) with each invoice's destination tag. The payout hot wallet's
//! seed is read by the payout executor only.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Redacted, invalid};

/// The widest validity window a payout transaction may get (`last_ledger_offset`): rippled
/// keeps at least 256 validated ledgers, and the executor must find a transaction (or be told it
/// searched them all) over the whole window before it signs the payout again.
pub const MAX_LAST_LEDGER_OFFSET: u32 = 200;

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
    /// The payout hot wallet: an XRP Ledger family seed (`s…`, secp256k1; `sEd…`, ed25519), or
    /// a file holding it. Its account pays every payout and refund; it may be the deposit
    /// address itself or an account of its own. Only the payout executor reads it; without one,
    /// live XRP payouts are refused (`gate_offline`).
    pub hot_wallet_key: Option<Redacted>,
    pub hot_wallet_key_file: Option<PathBuf>,
    /// The most a payout transaction pays in fees, in drops (each payout is further capped by
    /// its configured network fee). Default 1000 (0.001 XRP; the base fee is 10).
    pub max_fee_drops: u64,
    /// A payout transaction may enter a ledger up to this many ledgers after the newest
    /// validated one when it was signed (`LastLedgerSequence`); one that expired unseen is
    /// signed again with the same `Sequence`. Default 20 (about a minute).
    pub last_ledger_offset: u32,
}

impl Default for XrpConfig {
    fn default() -> Self {
        XrpConfig {
            rpc_url: String::new(),
            request_timeout_ms: 10_000,
            max_retries: 5,
            retry_backoff_ms: 200,
            page_size: 200,
            hot_wallet_key: None,
            hot_wallet_key_file: None,
            max_fee_drops: 1_000,
            last_ledger_offset: 20,
        }
    }
}

impl XrpConfig {
    /// The section's own checks, when a node is configured (`node_sections!` checks the URL).
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.page_size == 0 {
            return invalid("xrp.page_size", "must be at least 1");
        }
        if self.max_fee_drops < 10 {
            return invalid("xrp.max_fee_drops", "must be at least 10 (the base fee)");
        }
        if !(3..=MAX_LAST_LEDGER_OFFSET).contains(&self.last_ledger_offset) {
            return invalid("xrp.last_ledger_offset", &format!("must be from 3 to {MAX_LAST_LEDGER_OFFSET}"));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::{Config, assert_refused};

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
            assert!(!cfg.xrp.has_hot_wallet());
            assert_refused(jail, "PAYGATE_XRP__LAST_LEDGER_OFFSET", ("201", "20"), "xrp.last_ledger_offset");
            assert_refused(jail, "PAYGATE_XRP__MAX_FEE_DROPS", ("9", "500"), "xrp.max_fee_drops");
            jail.set_env("PAYGATE_XRP__HOT_WALLET_KEY_FILE", "/run/secrets/xrp-seed");
            assert!(Config::load().unwrap().xrp.has_hot_wallet());
            Ok(())
        });
    }
}
