//! Exchange rates: a provider per environment (static for test, a CoinGecko-compatible HTTP
//! API for live), cached in memory and refreshed in the background. A rate older than
//! `max_age_secs` is stale and not served for pricing.
//!
//! A failed refresh backs off (up to 8× the period) and never gives up. Without a fresh rate,
//! fiat-priced invoices are refused with 503 `rates_unavailable`; crypto-priced invoices still
//! work, without USD values. The settlement converter's sandbox venue prices from the same
//! provider.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use entity::Environment;
use rust_decimal::Decimal;

use sea_orm::{DatabaseConnection, DbErr, EntityTrait};

use crate::config::{RatesConfig, RatesProviderKind, RatesSourceConfig};

#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    pub currency: String,
    pub fiat_currency: String,
    pub rate: Decimal,
    pub source: String,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Holds the error without its URL (a provider's API key may be in it).
    #[error("rates request failed: {0}")]
    Http(reqwest::Error),
    #[error("rates response not understood: {0}")]
    Shape(String),
}

impl From<reqwest::Error> for FetchError {
    fn from(e: reqwest::Error) -> Self {
        FetchError::Http(e.without_url())
    }
}

/// Where rates come from.
pub enum Provider {
    Static { rates: Vec<(String, String, Decimal)> },
    Http { client: reqwest::Client, url: String, coin_ids: Vec<(String, String)>, fiats: Vec<String> },
}

impl Provider {
    pub fn from_config(cfg: &RatesSourceConfig) -> Provider {
        match cfg.provider {
            RatesProviderKind::Static => Provider::Static {
                rates: cfg
                    .static_rates
                    .iter()
                    .flat_map(|(a, fiats)| {
                        fiats.iter().map(move |(f, r)| (a.to_ascii_uppercase(), f.to_ascii_uppercase(), *r))
                    })
                    .collect(),
            },
            RatesProviderKind::Http => Provider::Http {
                client: reqwest::Client::builder()
                    .timeout(Duration::from_secs(cfg.request_timeout_secs))
                    .user_agent("paygate-rates/1")
                    .build()
                    .unwrap_or_default(),
                url: cfg.url.trim_end_matches('/').to_owned(),
                coin_ids: cfg.coin_ids.iter().map(|(a, id)| (a.to_ascii_uppercase(), id.clone())).collect(),
                fiats: cfg.fiats.iter().map(|f| f.to_ascii_uppercase()).collect(),
            },
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Provider::Static { .. } => "static",
            Provider::Http { .. } => "coingecko",
        }
    }

    pub async fn fetch(&self) -> Result<Vec<Rate>, FetchError> {
        let now = Utc::now();
        match self {
            Provider::Static { rates } => Ok(rates
                .iter()
                .map(|(a, f, r)| Rate {
                    currency: a.clone(),
                    fiat_currency: f.clone(),
                    rate: *r,
                    source: "static".into(),
                    updated_at: now,
                })
                .collect()),
            Provider::Http { client, url, coin_ids, fiats } => {
                let ids: Vec<&str> = coin_ids.iter().map(|(_, id)| id.as_str()).collect();
                let vs: Vec<String> = fiats.iter().map(|f| f.to_ascii_lowercase()).collect();
                let mut endpoint =
                    url::Url::parse(&format!("{url}/simple/price")).map_err(|e| FetchError::Shape(e.to_string()))?;
                endpoint
                    .query_pairs_mut()
                    .append_pair("ids", &ids.join(","))
                    .append_pair("vs_currencies", &vs.join(","))
                    .append_pair("include_last_updated_at", "true");
                let body: serde_json::Value = client.get(endpoint).send().await?.error_for_status()?.json().await?;
                let obj = body.as_object().ok_or_else(|| FetchError::Shape("top level is not an object".into()))?;
                let mut out = Vec::new();
                for (asset, id) in coin_ids {
                    let Some(prices) = obj.get(id).and_then(|v| v.as_object()) else {
                        continue;
                    };
                    let updated_at = prices
                        .get("last_updated_at")
                        .and_then(|v| v.as_i64())
                        .and_then(|t| DateTime::<Utc>::from_timestamp(t, 0))
                        .unwrap_or(now);
                    for fiat in fiats {
                        let Some(n) = prices.get(&fiat.to_ascii_lowercase()) else {
                            continue;
                        };
                        // Parse the JSON number's text, never through f64 arithmetic.
                        let text = n.to_string();
                        let rate = text
                            .parse::<Decimal>()
                            .or_else(|_| Decimal::from_scientific(&text))
                            .map_err(|e| FetchError::Shape(format!("{id}.{fiat}: {e}")))?;
                        if rate > Decimal::ZERO {
                            out.push(Rate {
                                currency: asset.clone(),
                                fiat_currency: fiat.clone(),
                                rate,
                                source: "coingecko".into(),
                                updated_at,
                            });
                        }
                    }
                }
                Ok(out)
            }
        }
    }
}

struct Source {
    provider: Provider,
    refresh: Duration,
    max_age: chrono::Duration,
    cache: RwLock<HashMap<(String, String), Rate>>,
}

impl Source {
    fn fresh(&self, r: &Rate) -> bool {
        Utc::now().signed_duration_since(r.updated_at) <= self.max_age
    }
}

/// Rates for both environments.
#[derive(Clone)]
pub struct Rates {
    test: Arc<Source>,
    live: Arc<Source>,
}

impl Rates {
    pub fn new(cfg: &RatesConfig) -> Rates {
        let mk = |c: &RatesSourceConfig| {
            Arc::new(Source {
                provider: Provider::from_config(c),
                refresh: Duration::from_secs(c.refresh_secs),
                max_age: chrono::Duration::seconds(c.max_age_secs as i64),
                cache: RwLock::new(HashMap::new()),
            })
        };
        Rates { test: mk(&cfg.test), live: mk(&cfg.live) }
    }

    fn source(&self, env: Environment) -> &Arc<Source> {
        match env {
            Environment::Test => &self.test,
            Environment::Live => &self.live,
        }
    }

    /// Fetches once for an environment and stores what came back.
    pub async fn refresh(&self, env: Environment) -> Result<usize, FetchError> {
        let src = self.source(env);
        let rates = src.provider.fetch().await?;
        let n = rates.len();
        let mut cache = src.cache.write().unwrap_or_else(|p| p.into_inner());
        for r in rates {
            cache.insert((r.currency.clone(), r.fiat_currency.clone()), r);
        }
        Ok(n)
    }

    /// Refreshes both environments now, then keeps refreshing in the background. Each refresh
    /// is also published to `exchange_rates` in `db` ([`Rates::publish`]), where a credit made
    /// by any process reads its fiat value.
    pub async fn start(&self, db: &DatabaseConnection) {
        for env in [Environment::Test, Environment::Live] {
            if let Err(e) = self.refresh(env).await {
                tracing::warn!(environment = %env, error = %e, "initial rates refresh failed");
            }
            self.publish_or_warn(db, env).await;
            let (this, db) = (self.clone(), db.clone());
            tokio::spawn(async move {
                let period = this.source(env).refresh;
                let mut failures = 0u32;
                loop {
                    // Back off on failures (up to 8x the period), never give up.
                    let wait = period.saturating_mul(2u32.saturating_pow(failures.min(3)));
                    tokio::time::sleep(wait).await;
                    match this.refresh(env).await {
                        Ok(_) => {
                            failures = 0;
                            this.publish_or_warn(&db, env).await;
                        }
                        Err(e) => {
                            failures += 1;
                            tracing::warn!(environment = %env, error = %e, "rates refresh failed");
                        }
                    }
                }
            });
        }
    }

    async fn publish_or_warn(&self, db: &DatabaseConnection, env: Environment) {
        if let Err(e) = self.publish(db, env).await {
            tracing::warn!(environment = %env, error = %e, "could not publish rates to the database");
        }
    }

    /// Writes the environment's fresh rates to `exchange_rates`, each valid until its provider
    /// time plus `max_age_secs`. A row is only replaced by a rate at least as new, so of several
    /// processes publishing, an older fetch never overwrites a newer one. Returns the rows
    /// written.
    pub async fn publish(&self, db: &DatabaseConnection, env: Environment) -> Result<usize, DbErr> {
        use entity::exchange_rate::{ActiveModel, Column, Entity};
        use sea_orm::sea_query::{Alias, Expr, ExprTrait, OnConflict};
        let max_age = self.source(env).max_age;
        let rows: Vec<ActiveModel> = self
            .list(env, None, None)
            .into_iter()
            .map(|r| {
                ActiveModel::from(entity::exchange_rate::Model {
                    environment: env,
                    expires_at: r.updated_at + max_age,
                    currency: r.currency,
                    fiat_currency: r.fiat_currency,
                    rate: entity::Amount::new(r.rate),
                    source: r.source,
                    updated_at: r.updated_at,
                })
            })
            .collect();
        let n = rows.len();
        if n == 0 {
            return Ok(0);
        }
        let newer = Expr::col((Alias::new("excluded"), Column::UpdatedAt)).gte(Expr::col((Entity, Column::UpdatedAt)));
        Entity::insert_many(rows)
            .on_conflict(
                OnConflict::columns([Column::Environment, Column::Currency, Column::FiatCurrency])
                    .update_columns([Column::Rate, Column::Source, Column::UpdatedAt, Column::ExpiresAt])
                    .action_and_where(newer)
                    .to_owned(),
            )
            .exec_without_returning(db)
            .await?;
        Ok(n)
    }

    /// A fresh rate for one unit of `asset` in `fiat`, if there is one.
    pub fn get(&self, env: Environment, asset: &str, fiat: &str) -> Option<Rate> {
        let src = self.source(env);
        let cache = src.cache.read().unwrap_or_else(|p| p.into_inner());
        cache.get(&(asset.to_ascii_uppercase(), fiat.to_ascii_uppercase())).filter(|r| src.fresh(r)).cloned()
    }

    /// Fresh rates, optionally filtered, sorted by currency then fiat.
    pub fn list(&self, env: Environment, asset: Option<&str>, fiat: Option<&str>) -> Vec<Rate> {
        let src = self.source(env);
        let cache = src.cache.read().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<Rate> = cache
            .values()
            .filter(|r| src.fresh(r))
            .filter(|r| asset.is_none_or(|a| r.currency.eq_ignore_ascii_case(a)))
            .filter(|r| fiat.is_none_or(|f| r.fiat_currency.eq_ignore_ascii_case(f)))
            .cloned()
            .collect();
        out.sort_by(|a, b| (&a.currency, &a.fiat_currency).cmp(&(&b.currency, &b.fiat_currency)));
        out
    }

    pub fn provider_name(&self, env: Environment) -> &'static str {
        self.source(env).provider.name()
    }
}
