//! Shared application state handed to every handler.

use std::sync::Arc;
use std::time::Duration;

use sea_orm::DatabaseConnection;

use crate::addresses::AddressBook;
use crate::config::Config;
use crate::keys::KeyCache;
use crate::rates::Rates;

#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub config: Arc<Config>,
    pub keys: Arc<KeyCache>,
    pub rates: Rates,
    pub addresses: Arc<AddressBook>,
    pub merchants: Arc<crate::cache::TtlCache<uuid::Uuid, Arc<entity::merchant::Model>>>,
    pub invoice_writer: crate::invoices::writer::InvoiceWriter,
}

impl AppState {
    pub fn new(db: DatabaseConnection, config: Config) -> anyhow::Result<AppState> {
        let addresses = AddressBook::new(&config)?;
        Ok(AppState {
            db: db.clone(),
            keys: Arc::new(KeyCache::new(Duration::from_secs(config.auth.cache_ttl_secs))),
            rates: Rates::new(&config.rates),
            addresses: Arc::new(addresses),
            merchants: Arc::new(crate::cache::TtlCache::new(Duration::from_secs(config.auth.cache_ttl_secs))),
            invoice_writer: crate::invoices::writer::InvoiceWriter::spawn(db.clone(), &config),
            config: Arc::new(config),
        })
    }
}

impl AppState {
    /// `offline` when configured so, when the gate's address family has no keys, or (live) when
    /// no chain adapter watches its network (`crate::availability`).
    pub fn gate_status(&self, env: entity::Environment, gate: &crate::gates::Gate) -> crate::config::GateStatus {
        crate::availability::status(&self.config, &self.addresses, env, gate)
    }

    /// Per-invoice (min, max): the spec's bounds, narrowed (never widened) by configuration.
    pub fn gate_limits(
        &self,
        env: entity::Environment,
        gate: &crate::gates::Gate,
    ) -> (rust_decimal::Decimal, rust_decimal::Decimal) {
        let o = self.gate_override(env, gate);
        let min = o.and_then(|o| o.min_amount).map_or(gate.min_amount(), |m| m.max(gate.min_amount()));
        let max = o.and_then(|o| o.max_amount).map_or(gate.max_amount(), |m| m.min(gate.max_amount()));
        (min, max)
    }

    /// Decimals a fiat-priced quote on `gate` is rounded up to in `env`.
    pub fn quote_decimals(&self, env: entity::Environment, gate: &crate::gates::Gate) -> u32 {
        self.gate_override(env, gate).and_then(|o| o.quote_decimals).unwrap_or_else(|| gate.default_quote_decimals())
    }

    /// 503 `gate_offline` unless the gate takes deposits in `env`.
    pub fn ensure_online(
        &self,
        env: entity::Environment,
        gate: &crate::gates::Gate,
    ) -> Result<(), crate::domain_error::DomainError> {
        crate::availability::deposits(&self.config, &self.addresses, env, gate).map_err(|why| offline(env, gate, why))
    }

    /// 503 `gate_offline` unless payouts and refunds can be signed and followed on the gate in
    /// `env` (a payout accepted where no executor can sign would wait forever).
    pub fn ensure_payable(
        &self,
        env: entity::Environment,
        gate: &crate::gates::Gate,
    ) -> Result<(), crate::domain_error::DomainError> {
        crate::availability::payouts(&self.config, env, gate).map_err(|why| offline(env, gate, why))
    }

    /// 422 `amount_out_of_range` unless `amount` is within the gate's limits for `env`.
    pub fn check_amount_range(
        &self,
        env: entity::Environment,
        gate: &crate::gates::Gate,
        amount: rust_decimal::Decimal,
    ) -> Result<(), crate::domain_error::DomainError> {
        let (min, max) = self.gate_limits(env, gate);
        if amount < min || amount > max {
            return Err(crate::domain_error::DomainError::unprocessable(
                crate::domain_error::ErrorCode::AmountOutOfRange,
                "amount",
                format!("{} {amount} is outside the {} gate's range {min} to {max}", gate.asset, gate.id),
            ));
        }
        Ok(())
    }

    fn gate_override(
        &self,
        env: entity::Environment,
        gate: &crate::gates::Gate,
    ) -> Option<&crate::config::GateOverride> {
        let map = match env {
            entity::Environment::Test => &self.config.gates.test,
            entity::Environment::Live => &self.config.gates.live,
        };
        map.get(gate.id)
    }

    /// Fiat codes the environment's rates provider prices.
    pub fn rates_fiats(&self, env: entity::Environment) -> Vec<String> {
        let src = match env {
            entity::Environment::Test => &self.config.rates.test,
            entity::Environment::Live => &self.config.rates.live,
        };
        match src.provider {
            crate::config::RatesProviderKind::Http => src.fiats.iter().map(|f| f.to_ascii_uppercase()).collect(),
            crate::config::RatesProviderKind::Static => {
                let mut v: Vec<String> =
                    src.static_rates.values().flat_map(|m| m.keys().map(|k| k.to_ascii_uppercase())).collect();
                v.sort();
                v.dedup();
                v
            }
        }
    }

    /// The merchant's settings, cached like API keys (same TTL).
    pub async fn merchant(
        &self,
        id: entity::MerchantId,
    ) -> Result<Arc<entity::merchant::Model>, crate::domain_error::DomainError> {
        let id = uuid::Uuid::from(id);
        if let Some(m) = self.merchants.get(&id) {
            return Ok(m);
        }
        use sea_orm::EntityTrait;
        let m = entity::merchant::Entity::find_by_id(id).one(&self.db).await?.ok_or_else(|| {
            crate::domain_error::DomainError::internal(format!("merchant {id} of a valid key is missing"))
        })?;
        let m = Arc::new(m);
        self.merchants.put(id, m.clone());
        Ok(m)
    }
}

fn offline(
    env: entity::Environment,
    gate: &crate::gates::Gate,
    why: crate::availability::Offline,
) -> crate::domain_error::DomainError {
    crate::domain_error::DomainError::unavailable(
        crate::domain_error::ErrorCode::GateOffline,
        format!("the {} gate is offline in the {env} environment: {why}", gate.id),
    )
}
