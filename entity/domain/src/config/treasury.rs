//! `[treasury]`: the operator's wallets per gate, watch-only (addresses, never keys), and the
//! reconciliation's tolerance (`ops treasury report|check`, `paygate_treasury_difference`).

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};
use crate::chain::address::{AddressFamily, ChainNet, validate_address};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TreasuryConfig {
    /// How often the payout executor's process recomputes the reconciliation metric (0: never).
    pub report_interval_secs: u64,
    /// How often the payout executor's process plans and advances sweeps.
    pub sweep_interval_ms: u64,
    /// Per live gate id (`bitcoin`, `tron_usdt`, …).
    pub gates: BTreeMap<String, TreasuryGateConfig>,
}

impl Default for TreasuryConfig {
    fn default() -> Self {
        TreasuryConfig { report_interval_secs: 300, sweep_interval_ms: 10_000, gates: BTreeMap::new() }
    }
}

/// One gate's wallets, read (never spent) by the reconciliation.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TreasuryGateConfig {
    /// The hot wallet's address (the payout executor's signer of this gate).
    pub hot_address: Option<String>,
    /// The cold address: watch-only, its balance is read, never spent.
    pub cold_address: Option<String>,
    /// How far holdings may fall short of what is owed before `ops treasury check` fails (a
    /// deposit in the mempool is owed as `pending` before a balance read counts it).
    pub tolerance: Decimal,
    /// Sweep this gate's deposit addresses automatically (the deposit keys must be configured
    /// for its family: `evm.deposit_key_file`, `bitcoin.deposit_key_file`,
    /// `tron.deposit_key_file`, `solana.deposit_keys_file`). Not XRP: its deposits arrive on one
    /// account, which should be the hot wallet.
    pub sweep: bool,
    /// The least balance worth sweeping, in the gate's asset.
    pub min_sweep: Decimal,
    /// Sweeps go to the hot wallet until it holds this much, the rest to `cold_address`
    /// (everything to the hot wallet without a cold address).
    pub float_target: Option<Decimal>,
    /// The fee ceiling: the most one sweep may cost, in the network's native coin (a token
    /// address's gas top-up included; a Bitcoin batch's whole fee). While the network asks more,
    /// the sweep waits, planned, and is signed once fees come down: an address is left until
    /// its balance is worth the fee. None: no ceiling.
    pub max_fee: Option<Decimal>,
}

impl TreasuryConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (gate_id, g) in &self.gates {
            let key = |k: &str| format!("treasury.gates.{gate_id}.{k}");
            let Some(gate) = crate::gates::find(gate_id) else {
                return invalid(&format!("treasury.gates.{gate_id}"), "is not a gate id");
            };
            if g.tolerance < Decimal::ZERO {
                return invalid(&key("tolerance"), "must not be negative");
            }
            if g.min_sweep < Decimal::ZERO || g.float_target.is_some_and(|f| f < Decimal::ZERO) {
                return invalid(
                    &key(if g.min_sweep < Decimal::ZERO { "min_sweep" } else { "float_target" }),
                    "must not be negative",
                );
            }
            if g.max_fee.is_some_and(|f| f <= Decimal::ZERO) {
                return invalid(&key("max_fee"), "must be positive (leave it out for no ceiling)");
            }
            if g.sweep && g.hot_address.is_none() {
                return invalid(&key("hot_address"), "is required to sweep (sweeps go to the hot wallet first)");
            }
            // Bitcoin's network (main, test, regtest, Litecoin's) is the node's: it refuses a
            // wrong one at the first read; the other families' formats do not depend on it.
            for (k, addr) in [("hot_address", &g.hot_address), ("cold_address", &g.cold_address)] {
                let Some(a) = addr else { continue };
                let checked = match gate.family {
                    AddressFamily::Bitcoin if a.trim().is_empty() => Err("empty".to_owned()),
                    AddressFamily::Bitcoin => Ok(()),
                    family => validate_address(family, ChainNet::Mainnet, a, None).map_err(|e| e.to_string()),
                };
                if let Err(e) = checked {
                    return invalid(&key(k), &format!("is not an address of the gate's network: {e}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::Config;

    #[test]
    fn treasury_wallets_are_checked_per_gate() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "c.toml",
                "[treasury.gates.ethereum_usdt]\nhot_address = \"0x9858EfFD232B4033E47d90003D41EC34EcaEda94\"\ntolerance = \"0.5\"\n",
            )?;
            let c = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(c.treasury.gates["ethereum_usdt"].tolerance, rust_decimal::Decimal::new(5, 1));
            assert_eq!(c.treasury.report_interval_secs, 300);
            for (toml, key) in [
                ("[treasury.gates.nowhere]\ntolerance = \"1\"\n", "treasury.gates.nowhere"),
                ("[treasury.gates.tron]\ntolerance = \"-1\"\n", "treasury.gates.tron.tolerance"),
                (
                    "[treasury.gates.tron]\ncold_address = \"0x9858EfFD232B4033E47d90003D41EC34EcaEda94\"\n",
                    "treasury.gates.tron.cold_address",
                ),
                ("[treasury.gates.bitcoin]\nhot_address = \" \"\n", "treasury.gates.bitcoin.hot_address"),
                ("[treasury.gates.tron]\nmax_fee = \"0\"\n", "treasury.gates.tron.max_fee"),
            ] {
                jail.create_file("c.toml", toml)?;
                let err = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap_err();
                assert!(err.to_string().contains(key), "{toml}: {err}");
            }
            Ok(())
        });
    }
}
