//! The merchant API: the HTTP face over the shared domain (`domain`). One module per resource
//! (its handlers, router, OpenAPI paths and envelopes: `invoices`, `static_addresses`,
//! `payouts`, `refunds`, `balances`, `public`, `checkout`, `test_helpers`), the merchant dashboard's pages (`dashboard`), the extractors
//! (`auth`, `extract`), the error envelope (`error`: `ApiError` and every mapping from domain
//! errors; `envelope`), the OpenAPI document (`openapi`), rate limiting (`ratelimit`) and the
//! server loop (`app`). The worker stages do not depend on this crate.

pub mod api_keys;
pub mod app;
pub mod auth;
pub mod balances;
pub mod checkout;
pub mod dashboard;
pub mod envelope;
pub mod error;
pub mod events;
pub mod exports;
pub mod extract;
pub mod invoices;
pub mod openapi;
pub mod payouts;
pub mod public;
pub mod ratelimit;
pub mod refunds;
pub mod routes;
pub mod settings;
pub mod state;
pub mod static_addresses;
pub mod test_helpers;
pub mod webhook_deliveries;
pub mod webhook_endpoints;
pub mod webhooks;

use domain::config::Config;
use state::HttpState;

/// Everything the API needs before it listens: the domain's bootstrap (connect, migrate, state,
/// rates refresher) plus the rate limiter.
pub async fn bootstrap(config: Config) -> anyhow::Result<HttpState> {
    HttpState::new(domain::bootstrap(config).await?)
}
