//! The event outbox (spec section 6): events are rows written in the transaction of the change
//! that caused them, so a committed change always has its event and a rolled back one never
//! does. The webhook deliverer reads them from here. `dedupe_key` (unique) makes a replayed
//! stage unable to write an event twice. `query` reads them back for `GET /v1/events`.

mod facts;
mod kind;
pub mod query;

pub use facts::InvoiceFacts;
pub use kind::{EventKind, Subject};

use chrono::Utc;
use entity::{EventId, MerchantId, event, invoice, payment, payout};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ConnectionTrait, DbErr, EntityTrait};
use serde_json::{Value, json};

use crate::invoices::types::ts;

/// Writes an event unless one with the same `dedupe_key` exists. Returns the new event's id
/// (`None` when the `dedupe_key` existed).
pub async fn emit<C: ConnectionTrait>(
    txn: &C,
    merchant_id: MerchantId,
    env: entity::Environment,
    kind: EventKind,
    dedupe_key: String,
    payload: Value,
) -> Result<Option<EventId>, DbErr> {
    let row = event::Model::new(merchant_id.into(), env, kind.as_str(), dedupe_key, payload, Utc::now());
    let id = row.id;
    let n = event::Entity::insert(event::ActiveModel::from(row))
        .on_conflict(OnConflict::column(event::Column::DedupeKey).do_nothing().to_owned())
        .exec_without_returning(txn)
        .await?;
    Ok((n == 1).then_some(id.into()))
}

fn amount(a: Option<entity::Amount>) -> Value {
    a.map_or(Value::Null, |a| Value::String(a.0.normalize().to_string()))
}

/// `data` of every invoice event ([`InvoiceFacts::data`]) for the invoice `inv`.
pub fn invoice_data(inv: &invoice::Model, cause: Option<&payment::Model>) -> Value {
    InvoiceFacts::from(inv).data(cause)
}

/// `data` of `payout.completed` and `payout.failed`: the payout as it is after the change.
/// A refund's payout carries the refund id in `refund_id` (set by the caller when known).
pub fn payout_data(p: &payout::Model) -> Value {
    json!({
        "payout_id": p.id,
        "environment": p.environment.as_str(),
        "status": p.status.as_str(),
        "currency": p.currency,
        "network": p.network,
        "amount": amount(Some(p.amount)),
        "recipient_amount": amount(Some(p.recipient_amount)),
        "merchant_debit_amount": amount(Some(p.merchant_debit_amount)),
        "fee_amount": amount(Some(p.fee_amount)),
        "network_fee": amount(Some(p.network_fee)),
        "destination": p.destination,
        "destination_tag": p.destination_tag,
        "tx_hash": p.tx_hash,
        "failure_reason": p.failure_reason,
        "completed_at": p.completed_at.map(ts),
    })
}

/// Emits a payout event, once per payout and type.
pub async fn emit_payout<C: ConnectionTrait>(txn: &C, kind: EventKind, p: &payout::Model) -> Result<bool, DbErr> {
    let key = format!("{kind}:{}", p.id);
    Ok(emit(txn, p.merchant_id.into(), p.environment, kind, key, payout_data(p)).await?.is_some())
}

/// How a payment's credit came out (`balance.credited` data).
#[derive(Debug, Clone, Copy)]
pub struct Credit<'a> {
    /// `target_credited` or `source_credited`.
    pub outcome: &'static str,
    /// `not_required` for passthrough, the reason when a conversion did not happen, `None`
    /// when it did.
    pub failure_class: Option<&'a str>,
    pub credited_gate: &'static crate::gates::Gate,
    pub credited_amount: rust_decimal::Decimal,
}

/// `balance.credited` for payment `p` of invoice `inv`: once per payment, written in the
/// transaction of the credit.
pub async fn emit_balance_credited<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
    p: &payment::Model,
    credit: Credit<'_>,
) -> Result<bool, DbErr> {
    Ok(emit_balance_credits(txn, &[(inv, p, credit)]).await? == 1)
}

/// [`emit_balance_credited`] for many payments in multi-row inserts. Returns how many were new.
pub async fn emit_balance_credits<C: ConnectionTrait>(
    txn: &C,
    credits: &[(&invoice::Model, &payment::Model, Credit<'_>)],
) -> Result<u64, DbErr> {
    let now = Utc::now();
    let rows = credits.iter().map(|(inv, p, credit)| {
        let key = format!("{}:{}", EventKind::BalanceCredited, payment_tag(p));
        let data = balance_credited_data(inv, p, *credit);
        event::Model::new(inv.merchant_id, inv.environment, EventKind::BalanceCredited.as_str(), key, data, now)
    });
    insert_new(txn, rows).await
}

/// `data` of `balance.credited`.
pub fn balance_credited_data(inv: &invoice::Model, p: &payment::Model, credit: Credit<'_>) -> Value {
    let source = crate::gates::find(&p.gate_id);
    json!({
        "invoice_id": inv.id,
        "payment_id": p.id,
        "external_id": inv.external_id,
        "outcome": credit.outcome,
        "failure_class": credit.failure_class,
        "source_amount": p.amount.0.normalize().to_string(),
        "source_currency": source.map(|g| g.asset),
        "source_network": source.map(|g| g.network),
        "credited_amount": credit.credited_amount.normalize().to_string(),
        "credited_currency": credit.credited_gate.asset,
        "credited_network": credit.credited_gate.network,
    })
}

/// A payment in event keys: its id, with the revival round once it was revived after a
/// reversal (the same transfer back on chain is credited again, with events of its own).
fn payment_tag(p: &payment::Model) -> String {
    match p.revivals {
        0 => p.id.to_string(),
        n => format!("{}:r{n}", p.id),
    }
}

/// Emits an invoice event keyed by type, invoice and the causing payment or, without one, the
/// activation number: each activation of a draft has its own `invoice.activated` and
/// `invoice.expired`, while a replayed stage still cannot write one twice.
pub async fn emit_invoice<C: ConnectionTrait>(
    txn: &C,
    kind: EventKind,
    inv: &invoice::Model,
    cause: Option<&payment::Model>,
) -> Result<bool, DbErr> {
    let inv = InvoiceFacts::from(inv);
    let key = invoice_dedupe_key(kind, &inv, cause);
    Ok(emit(txn, inv.merchant_id.into(), inv.environment, kind, key, inv.data(cause)).await?.is_some())
}

/// [`emit_invoice`] for many events in one batch (a scan's; [`crate::bulk`]), each written unless
/// its `dedupe_key` exists. Returns how many were new.
pub async fn emit_invoices<C: ConnectionTrait>(
    txn: &C,
    events: &[(EventKind, InvoiceFacts, Option<&payment::Model>)],
) -> Result<u64, DbErr> {
    let now = Utc::now();
    let rows = events.iter().map(|(kind, inv, cause)| {
        let key = invoice_dedupe_key(*kind, inv, *cause);
        event::Model::new(inv.merchant_id, inv.environment, kind.as_str(), key, inv.data(*cause), now)
    });
    insert_new(txn, rows).await
}

/// Inserts `rows` ([`crate::bulk`]), each unless its `dedupe_key` exists; returns how many were
/// new.
async fn insert_new<C: ConnectionTrait>(txn: &C, rows: impl Iterator<Item = event::Model>) -> Result<u64, DbErr> {
    crate::bulk::insert::<event::Entity, _>(txn, rows.collect(), &[event::Column::DedupeKey]).await
}

fn invoice_dedupe_key(kind: EventKind, inv: &InvoiceFacts, cause: Option<&payment::Model>) -> String {
    let tag = cause.map_or_else(|| format!("activation-{}", inv.activation_count), payment_tag);
    format!("{kind}:{}:{tag}", inv.id)
}

#[cfg(test)]
mod tests {
    use entity::{Amount, Environment, PayoutStatus};
    use rust_decimal::Decimal;

    use super::*;
    use uuid::Uuid;

    #[test]
    fn payout_data_fields_are_stable() {
        let now = Utc::now();
        let a = |s: &str| Amount(s.parse::<Decimal>().unwrap());
        let p = payout::Model {
            gate_id: "bitcoin".into(),
            currency: "BTC".into(),
            network: "bitcoin".into(),
            amount: a("0.50"),
            recipient_amount: a("0.5"),
            merchant_debit_amount: a("0.5002"),
            fee_amount: a("0.0001"),
            network_fee: a("0.0001"),
            configured_network_fee_amount: a("0.0001"),
            destination: "tb1qexample".into(),
            status: PayoutStatus::Failed,
            failure_reason: Some("destination rejected".into()),
            ..payout::Model::blank(Uuid::now_v7(), Uuid::now_v7(), Environment::Test, now)
        };
        let d = payout_data(&p);
        let mut keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "amount",
                "completed_at",
                "currency",
                "destination",
                "destination_tag",
                "environment",
                "failure_reason",
                "fee_amount",
                "merchant_debit_amount",
                "network",
                "network_fee",
                "payout_id",
                "recipient_amount",
                "status",
                "tx_hash"
            ]
        );
        assert_eq!(d["amount"], "0.5", "amounts are normalised decimal strings");
        assert_eq!(d["status"], "failed");
        assert_eq!(d["failure_reason"], "destination rejected");
    }
}
