//! The shared domain: the rules over the data model (`entity`) that the HTTP face (`api`), the
//! worker stages (`workers`) and the operator CLI (`ops`) all call. Configuration, the database
//! connection, API keys and permissions, gates and their availability, exchange rates, deposit
//! address derivation and validation, the ledger, the events outbox, each resource's service
//! and types (invoices, static addresses, payouts, refunds), the webhook endpoints, secrets and
//! signatures. Nothing here knows HTTP: services return `domain_error::DomainError` (a kind and
//! the stable `error.code`), which `api::error` maps to a status and the envelope.

pub mod addresses;
pub mod audit;
pub mod availability;
pub mod cache;
pub mod chain;
pub mod config;
pub mod db;
pub mod domain_error;
pub mod events;
pub mod gates;
pub mod invoices;
pub mod keys;
pub mod ledger;
pub mod merchants;
pub mod messages;
pub mod owned;
pub mod payments;
pub mod payouts;
pub mod rates;
pub mod refunds;
pub mod sandbox_payments;
pub mod settlement;
pub mod shutdown;
pub mod state;
pub mod static_addresses;
pub mod telemetry;
pub mod unclaimed;
pub mod webhooks;

pub use entity::ids::{
    ApiKeyId, DeliveryId, EventId, InvoiceId, MerchantId, PaymentId, PayoutId, RefundId, SandboxTransferId,
    StaticAddressId, UnclaimedDepositId,
};

use config::Config;
use state::AppState;

/// Connects, migrates, builds the state and starts the rates refresher: everything a process
/// that serves merchants needs before it listens.
pub async fn bootstrap(config: Config) -> anyhow::Result<AppState> {
    let db = db::connect(&config).await?;
    db::migrate(&db).await?;
    let state = AppState::new(db, config)?;
    availability::log_live_gates(&state.config, &state.addresses);
    state.rates.start().await;
    Ok(state)
}
