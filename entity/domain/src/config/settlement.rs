//! `[settlement]`: the settlement converter and its venues.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SettlementConfig {
    /// How often the converter looks for payments to quote or to settle.
    pub poll_interval_ms: u64,
    /// A quote holds this long after it is taken (`locked_until`); a payment confirmed later
    /// is credited in the paid asset (`quote_expired`).
    pub quote_lock_secs: u64,
    /// The test environment's sandbox venue.
    pub sandbox: SandboxVenueConfig,
    /// The live environment's venue: `none` (invoices asking for a conversion in live are
    /// refused at creation) or `treasury` (the operator's own inventory, `[settlement.treasury]`).
    pub live_venue: String,
    /// The live `treasury` venue: the operator converts from its own inventory.
    pub treasury: TreasuryVenueConfig,
}

impl Default for SettlementConfig {
    fn default() -> Self {
        SettlementConfig {
            poll_interval_ms: 500,
            quote_lock_secs: 900,
            sandbox: SandboxVenueConfig::default(),
            live_venue: "none".into(),
            treasury: TreasuryVenueConfig::default(),
        }
    }
}

impl SettlementConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.poll_interval_ms == 0 {
            return invalid("settlement.poll_interval_ms", "must be at least 1");
        }
        for (key, pct) in [("spread_percent", self.sandbox.spread_percent), ("fee_percent", self.sandbox.fee_percent)] {
            if pct < Decimal::ZERO || pct >= Decimal::ONE_HUNDRED {
                return invalid(&format!("settlement.sandbox.{key}"), "must be at least 0 and below 100");
            }
        }
        match self.live_venue.as_str() {
            "none" | "treasury" => {}
            _ => return invalid("settlement.live_venue", "must be \"none\" or \"treasury\""),
        }
        let t = &self.treasury;
        for (key, pct) in [("spread_percent", t.spread_percent), ("fee_percent", t.fee_percent)] {
            if pct < Decimal::ZERO || pct >= Decimal::ONE_HUNDRED {
                return invalid(&format!("settlement.treasury.{key}"), "must be at least 0 and below 100");
            }
        }
        for (asset, cap) in &t.max_exposure {
            if *cap < Decimal::ZERO {
                return invalid(&format!("settlement.treasury.max_exposure.{asset}"), "must not be negative");
            }
        }
        Ok(())
    }
}

/// Sandbox venue pricing: the rates provider's prices of both assets in `pricing_fiat`, less
/// the spread; then the fee on the gross target amount.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxVenueConfig {
    /// Percent taken off the mid rate (0..100).
    pub spread_percent: Decimal,
    /// Percent of the gross target amount charged as the conversion fee (0..100).
    pub fee_percent: Decimal,
    /// The fiat both prices are read in.
    pub pricing_fiat: String,
}

impl Default for SandboxVenueConfig {
    fn default() -> Self {
        SandboxVenueConfig {
            spread_percent: Decimal::new(5, 1),
            fee_percent: Decimal::new(25, 2),
            pricing_fiat: "USD".into(),
        }
    }
}

/// The live `treasury` venue: quotes priced like the sandbox's (the live rates provider's
/// prices of both assets in `pricing_fiat`, less the spread, then the fee), filled from the house
/// account's inventory of the target gate. `max_exposure` caps, per asset, how much of it the
/// house may hold after taking a payment's asset; an asset without a cap is never taken (its
/// conversions fall back to crediting the paid asset).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TreasuryVenueConfig {
    /// Percent taken off the mid rate (0..100).
    pub spread_percent: Decimal,
    /// Percent of the gross target amount charged as the conversion fee (0..100).
    pub fee_percent: Decimal,
    /// The fiat both prices are read in.
    pub pricing_fiat: String,
    /// Asset (upper case, e.g. `BTC`) → the most of it the house may hold, summed over the
    /// asset's gates.
    pub max_exposure: std::collections::BTreeMap<String, Decimal>,
}

impl Default for TreasuryVenueConfig {
    fn default() -> Self {
        TreasuryVenueConfig {
            spread_percent: Decimal::new(5, 1),
            fee_percent: Decimal::new(25, 2),
            pricing_fiat: "USD".into(),
            max_exposure: Default::default(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::Config;
    use super::*;

    #[test]
    fn settlement_settings_parse_and_are_checked() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "c.toml",
                "[settlement]\nquote_lock_secs = 60\n[settlement.sandbox]\nspread_percent = \"1.5\"\nfee_percent = \"0\"\n",
            )?;
            let c = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(c.settlement.quote_lock_secs, 60);
            assert_eq!(c.settlement.sandbox.spread_percent, Decimal::new(15, 1));
            assert_eq!(c.settlement.sandbox.fee_percent, Decimal::ZERO);
            assert_eq!(c.settlement.live_venue, "none");
            jail.create_file(
                "c.toml",
                "[settlement]\nlive_venue = \"treasury\"\n[settlement.treasury.max_exposure]\nBTC = \"2.5\"\n",
            )?;
            let c = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(c.settlement.live_venue, "treasury");
            assert_eq!(c.settlement.treasury.max_exposure["BTC"], Decimal::new(25, 1));
            for (toml, key) in [
                ("[settlement.sandbox]\nfee_percent = \"100\"\n", "settlement.sandbox.fee_percent"),
                ("[settlement.sandbox]\nspread_percent = \"-1\"\n", "settlement.sandbox.spread_percent"),
                ("[settlement]\nlive_venue = \"binance\"\n", "settlement.live_venue"),
                ("[settlement]\npoll_interval_ms = 0\n", "settlement.poll_interval_ms"),
                ("[settlement.treasury]\nfee_percent = \"100\"\n", "settlement.treasury.fee_percent"),
                ("[settlement.treasury.max_exposure]\nBTC = \"-1\"\n", "settlement.treasury.max_exposure.BTC"),
            ] {
                jail.create_file("c.toml", toml)?;
                let err = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap_err();
                assert!(err.to_string().contains(key), "{toml}: {err}");
            }
            Ok(())
        });
    }
}
