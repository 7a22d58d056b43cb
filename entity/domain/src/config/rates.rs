//! `[rates]`: where each environment's exchange rates come from.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RatesConfig {
    pub test: RatesSourceConfig,
    pub live: RatesSourceConfig,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RatesProviderKind {
    /// Fixed rates from `static_rates` (the test environment's default).
    Static,
    /// A CoinGecko-compatible `simple/price` endpoint.
    Http,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RatesSourceConfig {
    pub provider: RatesProviderKind,
    /// For `http`: base URL; the provider calls `{url}/simple/price?ids=…&vs_currencies=…`.
    pub url: String,
    pub refresh_secs: u64,
    /// Rates older than this are stale: fiat-priced invoices are refused (503 rates_unavailable).
    pub max_age_secs: u64,
    pub request_timeout_secs: u64,
    /// Fiat currencies to fetch.
    pub fiats: Vec<String>,
    /// For `http`: asset code -> the provider's coin id.
    pub coin_ids: BTreeMap<String, String>,
    /// For `static`: asset code -> fiat code -> price of one unit.
    pub static_rates: BTreeMap<String, BTreeMap<String, Decimal>>,
}

impl RatesSourceConfig {
    fn with_provider(provider: RatesProviderKind) -> Self {
        RatesSourceConfig {
            provider,
            url: "https://api.coingecko.com/api/v3".into(),
            refresh_secs: 60,
            max_age_secs: 600,
            request_timeout_secs: 10,
            fiats: vec!["USD".into(), "EUR".into(), "GBP".into()],
            coin_ids: default_coin_ids(),
            static_rates: default_static_rates(),
        }
    }
}

impl Default for RatesSourceConfig {
    fn default() -> Self {
        Self::with_provider(RatesProviderKind::Static)
    }
}

impl Default for RatesConfig {
    fn default() -> Self {
        RatesConfig {
            test: RatesSourceConfig::with_provider(RatesProviderKind::Static),
            live: RatesSourceConfig::with_provider(RatesProviderKind::Http),
        }
    }
}

impl RatesConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (env, src) in [("test", &self.test), ("live", &self.live)] {
            if src.refresh_secs == 0 {
                return invalid(&format!("rates.{env}.refresh_secs"), "must be at least 1");
            }
            if src.provider == RatesProviderKind::Http && url::Url::parse(&src.url).is_err() {
                return invalid(&format!("rates.{env}.url"), "must be an absolute URL");
            }
            for (asset, fiats) in &src.static_rates {
                for (fiat, rate) in fiats {
                    if *rate <= Decimal::ZERO {
                        return invalid(&format!("rates.{env}.static_rates.{asset}.{fiat}"), "must be positive");
                    }
                }
            }
        }
        Ok(())
    }
}

fn default_coin_ids() -> BTreeMap<String, String> {
    [
        ("BTC", "bitcoin"),
        ("ETH", "ethereum"),
        ("SOL", "solana"),
        ("BNB", "binancecoin"),
        ("TRX", "tron"),
        ("POL", "polygon-ecosystem-token"),
        ("XRP", "ripple"),
        ("USDT", "tether"),
        ("USDC", "usd-coin"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect()
}

/// Sandbox prices: round numbers so tests and demos are easy to follow.
fn default_static_rates() -> BTreeMap<String, BTreeMap<String, Decimal>> {
    let prices = |usd: Decimal, eur: Decimal, gbp: Decimal| {
        BTreeMap::from([("USD".to_owned(), usd), ("EUR".to_owned(), eur), ("GBP".to_owned(), gbp)])
    };
    // EUR and GBP at 0.9 and 0.8 of the USD price.
    let usd_eur = |usd: i64| {
        let usd = Decimal::from(usd);
        prices(usd, usd * Decimal::new(9, 1), usd * Decimal::new(8, 1))
    };
    BTreeMap::from([
        ("BTC".to_owned(), usd_eur(60_000)),
        ("ETH".to_owned(), usd_eur(3_000)),
        ("SOL".to_owned(), usd_eur(150)),
        ("BNB".to_owned(), usd_eur(600)),
        ("TRX".to_owned(), prices(Decimal::new(25, 2), Decimal::new(225, 3), Decimal::new(2, 1))),
        ("POL".to_owned(), prices(Decimal::new(5, 1), Decimal::new(45, 2), Decimal::new(4, 1))),
        ("XRP".to_owned(), prices(Decimal::new(2, 0), Decimal::new(18, 1), Decimal::new(16, 1))),
        ("USDT".to_owned(), prices(Decimal::ONE, Decimal::new(9, 1), Decimal::new(8, 1))),
        ("USDC".to_owned(), prices(Decimal::ONE, Decimal::new(9, 1), Decimal::new(8, 1))),
    ])
}
