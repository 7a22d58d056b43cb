//! The merchant API. Two layers in one library:
//! - the shared domain (always built): configuration, database, keys, gates and their
//!   availability, rates, address derivation, the ledger, the events outbox, and each
//!   resource's `service` and `types`; the worker stages and `ops` call it too;
//! - the HTTP face (feature `http`, on by default): `app`, `auth` (extractors), `error`
//!   (`ApiError`, every mapping from domain errors), `extract`, `envelope`, `openapi`,
//!   `ratelimit`, the checkout page, the public and test-helper routes and each resource's
//!   `routes`. The worker binaries build the library without it.

pub mod addresses;
#[cfg(feature = "http")]
pub mod app;
pub mod audit;
#[cfg(feature = "http")]
pub mod auth;
pub mod availability;
#[cfg(feature = "http")]
pub mod balances;
pub mod cache;
pub mod chain;
#[cfg(feature = "http")]
pub mod checkout;
pub mod config;
pub mod db;
pub mod domain_error;
#[cfg(feature = "http")]
pub mod envelope;
#[cfg(feature = "http")]
pub mod error;
pub mod events;
#[cfg(feature = "http")]
pub mod extract;
pub mod gates;
pub mod invoices;
pub mod keys;
pub mod ledger;
pub mod merchants;
#[cfg(feature = "http")]
pub mod openapi;
pub mod payouts;
#[cfg(feature = "http")]
pub mod public;
#[cfg(feature = "http")]
pub mod ratelimit;
pub mod rates;
pub mod refunds;
pub mod sandbox_payments;
pub mod settlement;
pub mod shutdown;
pub mod state;
pub mod static_addresses;
pub mod telemetry;
#[cfg(feature = "http")]
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
