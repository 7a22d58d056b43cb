//! The merchant API: configuration, storage, authentication and the HTTP resources.
//! Workers and `ops` reuse its services.

pub mod addresses;
pub mod app;
pub mod audit;
pub mod auth;
pub mod availability;
pub mod balances;
pub mod cache;
pub mod chain;
pub mod checkout;
pub mod config;
pub mod db;
pub mod domain_error;
pub mod envelope;
pub mod error;
pub mod events;
pub mod extract;
pub mod gates;
pub mod invoices;
pub mod keys;
pub mod ledger;
pub mod merchants;
pub mod openapi;
pub mod payouts;
pub mod public;
pub mod ratelimit;
pub mod rates;
pub mod refunds;
pub mod sandbox_payments;
pub mod settlement;
pub mod state;
pub mod static_addresses;
pub mod telemetry;
pub mod test_helpers;
pub mod webhooks;

use config::Config;
use state::AppState;

/// Connects, migrates, builds the state and starts the rates refresher: everything the API
/// needs before it listens.
pub async fn bootstrap(config: Config) -> anyhow::Result<AppState> {
    let db = db::connect(&config).await?;
    db::migrate(&db).await?;
    let state = AppState::new(db, config)?;
    availability::log_live_gates(&state.config, &state.addresses);
    state.rates.start().await;
    Ok(state)
}
