//! Sandbox payments of the test environment: transfers into the next block of a gate's sandbox
//! chain. The test helpers (`POST /v1/test/deposits`) and the checkout page's test-mode buttons
//! both pay through here.

use entity::sandbox_transfer;
use rust_decimal::Decimal;

use crate::chain::sandbox::SandboxChain;
use crate::domain_error::{DomainError, DomainResult};
use crate::gates::Gate;
use crate::state::AppState;

/// `gate`'s sandbox chain, with the block interval configured for it.
pub fn chain(state: &AppState, gate: &'static Gate) -> SandboxChain {
    SandboxChain::new(state.db.clone(), gate, state.config.sandbox.interval_ms(gate.id))
}

/// Puts a transfer of `amount` to `address_key` into the next block of `gate`'s sandbox chain
/// (test environment only; the caller checks).
pub async fn deposit_to(
    state: &AppState,
    gate: &'static Gate,
    address_key: &str,
    amount: Decimal,
    tx_hash: Option<&str>,
) -> DomainResult<sandbox_transfer::Model> {
    chain(state, gate).deposit(address_key, amount, tx_hash).await.map_err(DomainError::internal)
}
