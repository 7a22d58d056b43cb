//! What a payer does on an invoice's checkout page, the rules and the writes: whether an
//! invoice may be (re)activated now, the gates it can be activated with and their prices, the
//! activation itself (the chosen gate's checks, pricing, the guarded move to `pending` through
//! `lifecycle::activate`, the deposit address, `invoice.activated`, one transaction), and the
//! test environment's simulated payments. `api::checkout` serves them and renders the views.

use chrono::{DateTime, Duration, Utc};
use entity::{
    Amount, Environment, InvoiceId, InvoiceStatus, InvoiceTrigger, PaymentStatus, invoice, payment, sandbox_transfer,
};
use rust_decimal::{Decimal, RoundingStrategy};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder};
use serde::Deserialize;
use uuid::Uuid;

use super::lifecycle::{self, Activation};
use crate::addresses::Allocated;
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::events::{self, EventKind};
use crate::gates::{self, Gate};
use crate::sandbox_payments;
use crate::state::AppState;

/// The test-mode buttons: the remaining amount, half of it, or one and a half times it.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Simulated {
    Full,
    Partial,
    Excess,
}

/// Invoice `id`, whoever owns it (the checkout page is addressed by the invoice id alone).
pub async fn load(state: &AppState, id: InvoiceId) -> DomainResult<invoice::Model> {
    invoice::Entity::find_by_id(id).one(&state.db).await?.ok_or_else(|| DomainError::not_found("invoice"))
}

/// The payments made to invoice `id`, oldest first.
pub async fn payments(state: &AppState, id: InvoiceId) -> DomainResult<Vec<payment::Model>> {
    Ok(payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(id))
        .order_by_asc(payment::Column::DetectedAt)
        .all(&state.db)
        .await?)
}

/// Whether the payer may activate `inv` now, and with which trigger.
pub fn activation(inv: &invoice::Model, has_payments: bool, now: DateTime<Utc>) -> Option<InvoiceTrigger> {
    let open = inv.draft_expires_at.is_some_and(|t| t > now);
    match inv.status {
        InvoiceStatus::Draft if open => Some(InvoiceTrigger::Activate),
        InvoiceStatus::Expired if open && inv.is_deferred && inv.activation_count > 0 && !has_payments => {
            Some(InvoiceTrigger::Reactivate)
        }
        _ => None,
    }
}

/// The gates a payer can choose for `inv`: its own gate once it has one (a re-activation keeps
/// the address it was given), else every gate online in its environment that a fresh rate
/// prices within the gate's limits.
pub fn options(state: &AppState, inv: &invoice::Model) -> Vec<(&'static Gate, Decimal)> {
    let fixed = inv.gate_id.as_deref().and_then(gates::find);
    let candidates: Vec<&'static Gate> = match fixed {
        Some(g) => vec![g],
        None => gates::GATES.iter().collect(),
    };
    candidates
        .into_iter()
        .filter(|g| state.ensure_online(inv.environment, g).is_ok())
        .filter_map(|g| price(state, inv, g).ok().map(|a| (g, a)))
        .filter(|(g, a)| state.check_amount_range(inv.environment, g, *a).is_ok())
        .collect()
}

/// The amount `inv` asks in `gate`: its fiat amount at today's rate, or its crypto amount.
fn price(state: &AppState, inv: &invoice::Model, gate: &'static Gate) -> DomainResult<Decimal> {
    match (&inv.amount_fiat, &inv.fiat_currency) {
        (Some(f), Some(fiat)) => Ok(super::service::price_in(state, inv.environment, gate, f.0, fiat)?.0),
        _ => inv.amount_requested.map(|a| a.0).ok_or_else(|| DomainError::internal("invoice without an amount")),
    }
}

/// Activates a draft (or re-activates an unpaid, expired deferred invoice before its
/// `draft_expires_at`) on `gate_id`: the amount is locked (a fiat amount at today's rate), the
/// invoice gets its deposit address (a re-activation keeps the one it had) and a new
/// `expires_at`, moves to `pending` with a guarded update (`lifecycle::activate`), and
/// `invoice.activated` is written in the same transaction.
///
/// The deposit address is taken only after the guarded update succeeded, in its transaction
/// (`AddressBook::allocate_in`): payers activating one draft at once take one address between
/// them, so a finite pool (live Solana) loses no entry to the losers, and nothing is taken when
/// the transaction rolls back. A request that finds the invoice already activated on the gate it
/// asks for (by a concurrent click, or a repeat) answers with that activation, so every caller
/// sees the same invoice and address; asking for another gate then is a conflict.
pub async fn activate(state: &AppState, id: InvoiceId, gate_id: &str) -> DomainResult<invoice::Model> {
    let inv = load(state, id).await?;
    let now = Utc::now();
    let has_payments = payments(state, id).await?.iter().any(|p| p.status != PaymentStatus::Reversed);
    let Some(trigger) = activation(&inv, has_payments, now) else {
        if gates::find(gate_id).is_some_and(|g| activated_on(&inv, g.id)) {
            return Ok(inv);
        }
        return Err(DomainError::conflict(
            ErrorCode::InvoiceNotActivatable,
            format!("an invoice that is {} cannot be activated", inv.status.as_str()),
        ));
    };
    if inv.status.on(trigger).is_none() {
        return Err(DomainError::internal("activation without a transition"));
    }
    let gate = gates::find(gate_id).ok_or_else(|| {
        DomainError::unprocessable(ErrorCode::UnsupportedCurrency, "gate_id", format!("unknown gate {gate_id:?}"))
    })?;
    if let Some(own) = inv.gate_id.as_deref()
        && own != gate.id
    {
        return Err(DomainError::unprocessable(
            ErrorCode::UnsupportedCurrency,
            "gate_id",
            format!("this invoice is payable with {own} only"),
        ));
    }
    state.ensure_online(inv.environment, gate)?;
    let amount = price(state, &inv, gate)?;
    state.check_amount_range(inv.environment, gate, amount)?;
    let merchant = state.merchant(inv.merchant_id.into()).await?;
    let rate_of = |fiat: &str| state.rates.get(inv.environment, gate.asset, fiat).map(|r| r.rate);
    let fiat_value = |fiat: &str| -> Option<Amount> {
        if inv.fiat_currency.as_deref() == Some(fiat) {
            return inv.amount_fiat.map(|a| Amount::fiat(a.0));
        }
        rate_of(fiat).and_then(|r| amount.checked_mul(r)).map(Amount::fiat)
    };
    let activation = Activation {
        trigger,
        gate,
        amount: Amount::new(amount),
        amount_usd: fiat_value("USD"),
        amount_in_base_currency: fiat_value(&merchant.base_currency),
        exchange_rate: inv.fiat_currency.as_deref().and_then(rate_of).map(Amount::new),
        expires_at: now + Duration::seconds(merchant.invoice_lifetime_secs),
        now,
    };
    let txn = crate::db::begin_write(&state.db).await?;
    let Some(mut after) = lifecycle::activate(&txn, &inv, &activation).await? else {
        txn.rollback().await?;
        // Someone else moved the invoice since it was read: look again.
        let now_is = load(state, id).await?;
        if now_is.activation_count > inv.activation_count && activated_on(&now_is, gate.id) {
            return Ok(now_is);
        }
        return Err(DomainError::conflict(ErrorCode::InvoiceNotActivatable, "the invoice changed meanwhile; reload"));
    };
    // The guard held (the row is this transaction's until it ends): now the address, if the
    // invoice has none yet (a re-activation keeps its own).
    if after.deposit_address.is_none() || after.address_key.is_none() {
        let a = state.addresses.allocate_in(&txn, inv.environment, gate.family).await?;
        after =
            give_address(&txn, inv.id, a).await?.ok_or_else(|| DomainError::internal("activated invoice vanished"))?;
    }
    events::emit_invoice(&txn, EventKind::InvoiceActivated, &after, None).await?;
    txn.commit().await?;
    Ok(after)
}

/// Writes the deposit address `a` onto invoice `id` (inside the activation's transaction, after
/// its guarded move); returns the invoice after it.
async fn give_address<C: ConnectionTrait>(txn: &C, id: Uuid, a: Allocated) -> Result<Option<invoice::Model>, DbErr> {
    Ok(invoice::Entity::update_many()
        .col_expr(invoice::Column::DepositAddress, Expr::value(a.address))
        .col_expr(invoice::Column::DepositAddressTag, Expr::value(a.tag))
        .col_expr(invoice::Column::AddressKey, Expr::value(a.key))
        .col_expr(invoice::Column::DerivationIndex, Expr::value(Some(a.index)))
        .filter(invoice::Column::Id.eq(id))
        .exec_with_returning(txn)
        .await?
        .into_iter()
        .next())
}

/// Whether `inv` is a deferred invoice activated on `gate_id` and still waiting for payment
/// with its address: what an activation on that gate would have made of it.
fn activated_on(inv: &invoice::Model, gate_id: &str) -> bool {
    inv.is_deferred
        && inv.activation_count > 0
        && inv.status == InvoiceStatus::Pending
        && inv.gate_id.as_deref() == Some(gate_id)
        && inv.address_key.is_some()
}

/// Test environment only (not found in live, as if the route did not exist): a sandbox deposit
/// of the remaining amount, half of it, or one and a half times it, through the same function
/// as `POST /v1/test/deposits` (`sandbox_payments::deposit`).
pub async fn simulate(state: &AppState, id: InvoiceId, kind: Simulated) -> DomainResult<sandbox_transfer::Model> {
    let inv = load(state, id).await?;
    if inv.environment != Environment::Test {
        return Err(DomainError::not_found("route"));
    }
    let (Some(gate), Some(key), Some(requested)) =
        (inv.gate_id.as_deref().and_then(gates::find), inv.address_key.as_deref(), inv.amount_requested)
    else {
        return Err(DomainError::unprocessable(
            ErrorCode::ValidationError,
            "invoice",
            "choose a payment method first: the invoice has no deposit address yet",
        ));
    };
    let seen: Decimal =
        payments(state, id).await?.iter().filter(|p| p.status != PaymentStatus::Reversed).map(|p| p.amount.0).sum();
    let amount = simulated_amount(kind, requested.0, seen, gate.decimals);
    if amount <= Decimal::ZERO {
        return Err(DomainError::unprocessable(ErrorCode::ValidationError, "kind", "nothing left to pay"));
    }
    sandbox_payments::deposit(&state.db, &state.config.sandbox, gate, key, amount, None).await
}

/// What a test-mode button pays on an invoice asking `requested` with `seen` on its way, in
/// `decimals` (rounded down).
fn simulated_amount(kind: Simulated, requested: Decimal, seen: Decimal, decimals: u32) -> Decimal {
    let due = requested - seen;
    match (kind, due > Decimal::ZERO) {
        (Simulated::Full, true) => due,
        (Simulated::Partial, true) => due / Decimal::TWO,
        (Simulated::Excess, true) => due * Decimal::new(15, 1),
        // Everything is paid (or on its way): an excess is another half of the amount.
        (Simulated::Excess, false) => requested / Decimal::TWO,
        (Simulated::Full | Simulated::Partial, false) => Decimal::ZERO,
    }
    .round_dp_with_strategy(decimals, RoundingStrategy::ToZero)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(status: InvoiceStatus, count: i32, open: bool) -> invoice::Model {
        let now = Utc::now();
        invoice::Model {
            status,
            is_deferred: true,
            draft_expires_at: Some(if open { now + Duration::hours(1) } else { now - Duration::hours(1) }),
            activation_count: count,
            ..invoice::Model::blank(Uuid::nil(), Uuid::nil(), Environment::Test, now)
        }
    }

    #[test]
    fn who_may_activate() {
        let now = Utc::now();
        assert_eq!(activation(&draft(InvoiceStatus::Draft, 0, true), false, now), Some(InvoiceTrigger::Activate));
        assert_eq!(activation(&draft(InvoiceStatus::Draft, 0, false), false, now), None, "past draft_expires_at");
        let expired = draft(InvoiceStatus::Expired, 1, true);
        assert_eq!(activation(&expired, false, now), Some(InvoiceTrigger::Reactivate));
        assert_eq!(activation(&expired, true, now), None, "something was paid");
        assert_eq!(activation(&draft(InvoiceStatus::Expired, 1, false), false, now), None);
        assert_eq!(
            activation(&draft(InvoiceStatus::Expired, 0, true), false, now),
            None,
            "a draft that expired unopened"
        );
        for s in [InvoiceStatus::Pending, InvoiceStatus::Paid, InvoiceStatus::Cancelled, InvoiceStatus::Invalid] {
            assert_eq!(activation(&draft(s, 1, true), false, now), None, "{s:?}");
        }
        let mut not_deferred = draft(InvoiceStatus::Expired, 1, true);
        not_deferred.is_deferred = false;
        assert_eq!(activation(&not_deferred, false, now), None);
    }
}
