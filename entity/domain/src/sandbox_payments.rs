//! Sandbox payments of the test environment: transfers into the next block of a gate's sandbox
//! chain, their reversal, and mining blocks. Every write the test helpers (`POST
//! /v1/test/deposits`, `…/reverse`, `/v1/test/blocks`), the checkout page's test-mode buttons
//! and `ops sandbox` make goes through here.

use entity::{Environment, SandboxTransferId, sandbox_transfer};
use rust_decimal::Decimal;
use sea_orm::DatabaseConnection;

use crate::chain::sandbox::SandboxChain;
use crate::config::SandboxConfig;
use crate::domain_error::{DomainError, DomainResult};
use crate::gates::Gate;

/// `gate`'s sandbox chain on `db`, with the block interval `sandbox` configures for it.
pub fn chain(db: &DatabaseConnection, sandbox: &SandboxConfig, gate: &'static Gate) -> SandboxChain {
    SandboxChain::new(db.clone(), gate, sandbox.interval_ms(gate.id))
}

/// Puts a transfer of `amount` to `address_key` into the next block of `gate`'s sandbox chain
/// (test environment only; the caller checks). A `tx_hash` already on the chain gets the
/// transaction's next output index. The API's test helper, the checkout page's test-mode
/// buttons and `ops sandbox deposit` all call this.
pub async fn deposit(
    db: &DatabaseConnection,
    sandbox: &SandboxConfig,
    gate: &'static Gate,
    address_key: &str,
    amount: Decimal,
    tx_hash: Option<&str>,
) -> DomainResult<sandbox_transfer::Model> {
    chain(db, sandbox, gate).deposit(address_key, amount, tx_hash).await.map_err(DomainError::internal)
}

/// Mines `count` blocks at once on `gate`'s sandbox chain; returns the new tip. The API's test
/// helper and `ops sandbox mine` both call this (the caller bounds `count`).
pub async fn mine(
    db: &DatabaseConnection,
    sandbox: &SandboxConfig,
    gate: &'static Gate,
    count: u64,
) -> DomainResult<u64> {
    chain(db, sandbox, gate).mine(count).await.map_err(DomainError::internal)
}

/// Takes a transfer off `gate`'s sandbox chain, as a reorganisation or a double spend would,
/// and wakes the confirmation tracker for the payment it made, however deep that payment is:
/// its check becomes due at once (`next_check_at` in the past), the sweeper lists a payment with
/// a due check whatever its depth, and the tracker then finds the transfer gone and reverses
/// the payment (invoice, ledger, events). Without the wake-up a payment deeper than the
/// tracker's watch (twice its confirmations) would never be looked at again. Idempotent: a
/// repeated call wakes the tracker again, and a reversed payment is not touched. `None`: no such
/// transfer on this chain. The API's test helper and `ops sandbox reverse` both call this (the
/// caller checks who may).
pub async fn reverse(
    db: &DatabaseConnection,
    sandbox: &SandboxConfig,
    gate: &'static Gate,
    transfer_id: SandboxTransferId,
) -> DomainResult<Option<sandbox_transfer::Model>> {
    let Some(t) = chain(db, sandbox, gate).reverse(transfer_id).await.map_err(DomainError::internal)? else {
        return Ok(None);
    };
    crate::payments::tracking::wake(db, Environment::Test, gate.id, &t.tx_hash).await?;
    Ok(Some(t))
}
