//! `[solana]`: the live Solana cluster's JSON-RPC node, read by the deposit scanner and the
//! confirmation tracker for `solana` and `solana_usdc`, and the payout hot wallet's key (read
//! by the payout executor only).

use serde::{Deserialize, Serialize};

use super::{ConfigError, Redacted, invalid};
use crate::chain::address::{AddressFamily, ChainNet, validate_address};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SolanaConfig {
    /// The node's JSON-RPC URL (http or https). Empty: Solana is not watched in live (its gates
    /// are offline).
    pub rpc_url: String,
    pub request_timeout_ms: u64,
    /// A failed call is retried this many times, the delay doubling from `retry_backoff_ms`.
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    /// Slots before the cursor re-read by every scan (a transaction a fork moved to another
    /// slot is still recorded; payments are unique, so nothing twice). Default 32.
    pub rescan_slots: u64,
    /// The USDC mint; default the mainnet mint.
    pub usdc_mint: Option<String>,
    /// The payout hot wallet: an ed25519 keypair as the Solana CLI writes it (a JSON array of
    /// 64 bytes), or base58 of those 64 bytes; or a file holding either. Its account pays every
    /// SOL and USDC payout and refund, their fees, and the rent of a recipient's USDC token
    /// account it creates. Only the payout executor reads it; without one, live Solana payouts
    /// are refused (`gate_offline`).
    pub hot_wallet_key: Option<Redacted>,
    pub hot_wallet_key_file: Option<std::path::PathBuf>,
    /// Priority fee of payout transactions, in micro-lamports per compute unit (0: none). A SOL
    /// payout's is lowered to fit its configured network fee (`[fees.solana] network_fee`); a
    /// USDC payout's is paid by the hot wallet in SOL.
    pub priority_fee_micro_lamports: u64,
    /// The deposit addresses' keys for sweeping (`[treasury]`): a file with one keypair per
    /// line (as `hot_wallet_key`), each the key of an `addresses.live.solana_pool` address.
    /// Loaded only by the payout executor's process, which refuses a key of no pool address.
    pub deposit_keys_file: Option<std::path::PathBuf>,
}

impl Default for SolanaConfig {
    fn default() -> Self {
        SolanaConfig {
            rpc_url: String::new(),
            request_timeout_ms: 10_000,
            max_retries: 5,
            retry_backoff_ms: 200,
            rescan_slots: 32,
            usdc_mint: None,
            hot_wallet_key: None,
            hot_wallet_key_file: None,
            priority_fee_micro_lamports: 0,
            deposit_keys_file: None,
        }
    }
}

impl SolanaConfig {
    /// The section's own checks, when a node is configured (`node_sections!` checks the URL).
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.priority_fee_micro_lamports > 100_000_000 {
            return invalid(
                "solana.priority_fee_micro_lamports",
                "at most 100000000 (0.1 SOL per million compute units)",
            );
        }
        if let Some(mint) = &self.usdc_mint
            && validate_address(AddressFamily::Solana, ChainNet::Mainnet, mint, None).is_err()
        {
            return invalid("solana.usdc_mint", "must be a base58 Solana address");
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::Config;

    #[test]
    fn the_solana_node_is_checked_and_optional() {
        figment::Jail::expect_with(|jail| {
            assert!(!Config::load().unwrap().solana.configured());
            jail.set_env("PAYGATE_SOLANA__RPC_URL", "ws://node");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("solana.rpc_url"), "{err}");
            jail.set_env("PAYGATE_SOLANA__RPC_URL", "http://node:8899");
            jail.set_env("PAYGATE_SOLANA__USDC_MINT", "0xabc");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("solana.usdc_mint"), "{err}");
            jail.set_env("PAYGATE_SOLANA__USDC_MINT", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
            let cfg = Config::load().unwrap();
            assert!(cfg.solana.configured());
            assert_eq!(cfg.solana.rescan_slots, 32);
            assert!(!cfg.solana.has_hot_wallet());
            jail.set_env("PAYGATE_SOLANA__HOT_WALLET_KEY_FILE", "/run/secrets/solana.json");
            assert!(Config::load().unwrap().solana.has_hot_wallet());
            assert_eq!(cfg.solana.priority_fee_micro_lamports, 0);
            super::super::assert_refused(
                jail,
                "PAYGATE_SOLANA__PRIORITY_FEE_MICRO_LAMPORTS",
                ("100000001", "50000"),
                "solana.priority_fee_micro_lamports",
            );
            Ok(())
        });
    }
}
