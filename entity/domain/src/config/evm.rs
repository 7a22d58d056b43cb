//! `[evm]`: the live EVM networks (JSON-RPC endpoints, fees, hot wallets) and token contracts.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Redacted, invalid};
use crate::chain::address::AddressFamily;
use crate::gates::{self, Gate};

/// `[evm.networks.<network>]` per EVM network the live environment watches (ethereum, bsc,
/// base, arbitrum, polygon), and `[evm.tokens.<gate>]` to override a token gate's contract and
/// decimals (defaults: the mainnet contracts, `gates::token_contract`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvmConfig {
    pub networks: BTreeMap<String, EvmNetworkConfig>,
    pub tokens: BTreeMap<String, EvmTokenConfig>,
    /// The deposit account's private key for sweeping (`[treasury]`): the account-level xprv
    /// (`m/44'/60'/0'`) whose xpub is `addresses.live.evm_xpub`, in a file. Loaded only by the
    /// payout executor's process, which checks at start that it derives the xpub's addresses.
    pub deposit_key_file: Option<PathBuf>,
}

impl EvmConfig {
    /// A token gate's contract and decimals: `[evm.tokens.<gate>]`, else the mainnet contract
    /// (`gates::token_contract`) and the gate's decimals. `None` for a native gate, or when the
    /// contract is not a valid address.
    pub fn token(&self, gate: &Gate) -> Option<(alloy_primitives::Address, u32)> {
        if !gate.is_token {
            return None;
        }
        let over = self.tokens.get(gate.id);
        let contract = over.map(|t| t.contract.as_str()).or_else(|| gates::token_contract(gate))?;
        let contract = contract.parse::<alloy_primitives::Address>().ok()?;
        Some((contract, over.and_then(|t| t.decimals).unwrap_or(gate.decimals)))
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (network, net) in &self.networks {
            let known = gates::GATES.iter().any(|g| g.network == network && g.family == AddressFamily::Evm);
            if !known {
                return invalid(
                    &format!("evm.networks.{network}"),
                    "not an EVM network (ethereum, bsc, base, arbitrum, polygon)",
                );
            }
            super::check_node(&format!("evm.networks.{network}"), "rpc_url", &net.rpc_url, net.request_timeout_ms)?;
            if !(1..=64).contains(&net.fetch_concurrency) {
                return invalid(&format!("evm.networks.{network}.fetch_concurrency"), "must be from 1 to 64");
            }
        }
        for (gate, t) in &self.tokens {
            let ok = gates::find(gate).is_some_and(|g| g.is_token && g.family == AddressFamily::Evm);
            if !ok {
                return invalid(&format!("evm.tokens.{gate}"), "not an EVM token gate");
            }
            if t.contract.parse::<alloy_primitives::Address>().is_err() {
                return invalid(&format!("evm.tokens.{gate}.contract"), "must be a 0x-prefixed 20-byte address");
            }
            if t.decimals.is_some_and(|d| d > 28) {
                return invalid(&format!("evm.tokens.{gate}.decimals"), "at most 28");
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvmNetworkConfig {
    /// The node's JSON-RPC URL (http or https).
    pub rpc_url: String,
    pub request_timeout_ms: u64,
    /// A failed call is retried this many times, the delay doubling from `retry_backoff_ms`.
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    /// Blocks before the cursor re-read by every scan (reorganisation look-back). Default: the
    /// gate's confirmation count.
    pub rescan_blocks: Option<u64>,
    /// Block requests the scanner keeps in flight (`eth_getBlockByNumber`, read in order).
    /// Default 8; lower it for a provider that limits concurrent requests.
    pub fetch_concurrency: usize,
    /// The payout hot wallet's private key (64 hex characters), or a file holding it. Only the
    /// payout executor reads it; without one, live payouts on this network wait in `queued`.
    pub hot_wallet_key: Option<Redacted>,
    pub hot_wallet_key_file: Option<PathBuf>,
    /// EIP-155 chain id; default the network's mainnet id.
    pub chain_id: Option<u64>,
    /// Fee cap per gas unit, in gwei (EIP-1559 `maxFeePerGas`); a native payout is further
    /// capped by its configured network fee.
    pub max_fee_per_gas_gwei: u64,
    /// Tip per gas unit, in gwei (`maxPriorityFeePerGas`).
    pub priority_fee_gwei: u64,
    /// Gas limit of an ERC-20 transfer (a native transfer uses 21,000).
    pub token_gas_limit: u64,
}

impl Default for EvmNetworkConfig {
    fn default() -> Self {
        EvmNetworkConfig {
            rpc_url: String::new(),
            request_timeout_ms: 10_000,
            max_retries: 5,
            retry_backoff_ms: 200,
            rescan_blocks: None,
            fetch_concurrency: 8,
            hot_wallet_key: None,
            hot_wallet_key_file: None,
            chain_id: None,
            max_fee_per_gas_gwei: 200,
            priority_fee_gwei: 2,
            token_gas_limit: 100_000,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvmTokenConfig {
    /// The ERC-20 contract address.
    pub contract: String,
    /// Decimals of the contract, when they differ from the gate's.
    pub decimals: Option<u32>,
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::Config;

    #[test]
    fn evm_networks_and_tokens_are_checked() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "c.toml",
                "[evm.networks.ethereum]\nrpc_url = \"http://127.0.0.1:8545\"\n[evm.tokens.ethereum_usdt]\ncontract = \"0xdAC17F958D2ee523a2206206994597C13D831ec7\"\n",
            )?;
            let c = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(c.evm.networks["ethereum"].max_retries, 5);
            assert_eq!(c.evm.networks["ethereum"].fetch_concurrency, 8);
            assert_eq!(c.evm.tokens["ethereum_usdt"].decimals, None);
            for (toml, key) in [
                ("[evm.networks.bitcoin]\nrpc_url = \"http://x\"\n", "evm.networks.bitcoin"),
                ("[evm.networks.base]\nrpc_url = \"ws://x\"\n", "evm.networks.base.rpc_url"),
                (
                    "[evm.tokens.tron_usdt]\ncontract = \"0xdAC17F958D2ee523a2206206994597C13D831ec7\"\n",
                    "evm.tokens.tron_usdt",
                ),
                ("[evm.tokens.bsc_usdt]\ncontract = \"0x12\"\n", "evm.tokens.bsc_usdt.contract"),
                (
                    "[evm.networks.ethereum]\nrpc_url = \"http://x\"\nfetch_concurrency = 0\n",
                    "evm.networks.ethereum.fetch_concurrency",
                ),
            ] {
                jail.create_file("c.toml", toml)?;
                let err = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap_err();
                assert!(err.to_string().contains(key), "{toml}: {err}");
            }
            Ok(())
        });
    }
}
