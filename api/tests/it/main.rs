//! The api crate's integration tests in one binary: each suite is a module, and a filter picks a
//! suite (`cargo test -p api --test it rate_limits`). The suites share this process, so a test
//! that changes process-wide state (environment variables, the working directory) runs in a
//! process of its own (`support::isolated`); ports come from `testkit::fleet::free_port`, unique
//! per process.

mod api_keys;
mod audit;
mod auth;
mod bad_input;
mod checkout;
mod cursors;
mod dashboard;
mod events;
mod exports;
// CHECK constraints and immutable ledger rows exist on PostgreSQL only.
#[cfg(feature = "pg-tests")]
mod integrity;
mod invoices;
mod ledger;
mod list_counts;
mod live_gates;
mod metrics;
mod money_properties;
mod payouts;
mod public;
mod rate_limits;
mod refunds;
mod server_timeouts;
mod settings;
mod static_addresses;
mod support;
mod webhook_endpoints;
