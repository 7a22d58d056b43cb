//! `[gates]`: per environment, per gate overrides; and `[fees]`: per gate fees.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatesConfig {
    pub test: BTreeMap<String, GateOverride>,
    pub live: BTreeMap<String, GateOverride>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateOverride {
    pub status: Option<GateStatus>,
    /// Narrow the spec's per-invoice minimum/maximum for this deployment.
    pub min_amount: Option<Decimal>,
    pub max_amount: Option<Decimal>,
    /// Decimals a fiat-priced quote is rounded up to (default `Gate::default_quote_decimals`;
    /// at most the asset's decimals).
    pub quote_decimals: Option<u32>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateStatus {
    Online,
    Offline,
}

impl GatesConfig {
    /// Every override names a known gate.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (env, gates) in [("test", &self.test), ("live", &self.live)] {
            for id in gates.keys() {
                let Some(g) = crate::gates::find(id) else {
                    return invalid(&format!("gates.{env}.{id}"), "unknown gate id");
                };
                if let Some(q) = gates[id].quote_decimals
                    && q > g.decimals
                {
                    return invalid(
                        &format!("gates.{env}.{id}.quote_decimals"),
                        &format!("at most the asset's {} decimals", g.decimals),
                    );
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GateFees {
    /// Charged per payout.
    pub payout_fee: Decimal,
    /// Network fee estimate reserved at creation (the actual fee is settled on completion).
    pub network_fee: Decimal,
    /// Charged per refund.
    pub refund_fee: Decimal,
}

/// Network fee estimates per gate (payout and refund fees default to zero).
pub(super) fn default_fees() -> BTreeMap<String, GateFees> {
    [
        ("bitcoin", Decimal::new(5, 5)),
        ("ethereum", Decimal::new(5, 4)),
        ("solana", Decimal::new(5, 6)),
        ("ethereum_usdt", Decimal::new(2, 0)),
        ("ethereum_usdc", Decimal::new(2, 0)),
        ("bsc", Decimal::new(2, 4)),
        ("bsc_usdt", Decimal::new(2, 1)),
        ("tron", Decimal::new(1, 0)),
        ("tron_usdt", Decimal::new(2, 0)),
        ("base", Decimal::new(2, 5)),
        ("arbitrum", Decimal::new(5, 5)),
        ("arbitrum_usdt", Decimal::new(2, 1)),
        ("arbitrum_usdc", Decimal::new(2, 1)),
        ("polygon", Decimal::new(5, 2)),
        ("polygon_usdt", Decimal::new(5, 2)),
        ("polygon_usdc", Decimal::new(5, 2)),
        ("solana_usdc", Decimal::new(1, 2)),
        ("xrp", Decimal::new(1, 5)),
    ]
    .into_iter()
    .map(|(g, n)| (g.to_owned(), GateFees { network_fee: n, ..GateFees::default() }))
    .collect()
}

/// `[fees]`: every entry names a known gate; each fee is non-negative, in the gate's precision.
pub(super) fn validate_fees(fees: &BTreeMap<String, GateFees>) -> Result<(), ConfigError> {
    for (gate, f) in fees {
        let Some(g) = crate::gates::find(gate) else {
            return invalid(&format!("fees.{gate}"), "unknown gate id");
        };
        for (name, v) in [("payout_fee", f.payout_fee), ("network_fee", f.network_fee), ("refund_fee", f.refund_fee)] {
            if v < Decimal::ZERO || v.scale() > g.decimals {
                return invalid(
                    &format!("fees.{gate}.{name}"),
                    &format!("must be >= 0 with at most {} decimals", g.decimals),
                );
            }
        }
    }
    Ok(())
}
