//! A transfer the chain no longer shows: when to believe it (missing over enough blocks and
//! checks), the reversal of its payment (and of any credit), and the watch for its return.

use std::time::Duration;

use chrono::Utc;
use domain::payments::tracking;
use entity::{Amount, Bucket, EntryType, InvoiceStatus, InvoiceTrigger, PaymentStatus, invoice, payment};
use rust_decimal::Decimal;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
};
use uuid::Uuid;

use super::credit::add_static_total;
use super::seen_at;
use crate::chain::{Chain, TxStatus};
use crate::pipeline::{PipelineError, final_depth};
use domain::config::PipelineConfig;
use domain::events::{self, EventKind};
use domain::invoices::lifecycle::transition;
use domain::ledger::{self, Posting};

/// The chain says the transaction is gone. One such answer proves nothing (a node behind, a
/// load balancer switching nodes, a transaction briefly out of the mempool during a
/// reorganisation), so the payment keeps its state until the transaction stayed missing over
/// `gone_after_blocks` new blocks (default: the chain's `gone_span`, the gate's confirmation
/// depth unless the chain says otherwise) and on
/// `gone_min_checks` checks at distinct tip heights; only then is it reversed. Chains whose
/// `Gone` is authoritative (the sandbox) reverse at once. Returns whether it was reversed.
pub(super) async fn on_missing(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    cfg: &PipelineConfig,
    p: &payment::Model,
) -> Result<bool, PipelineError> {
    if chain.gone_is_final() {
        reverse(db, p).await?;
        return Ok(true);
    }
    let tip = i64::try_from(chain.tip().await?).unwrap_or(i64::MAX);
    let span = i64::try_from(cfg.gone_after_blocks.unwrap_or_else(|| chain.gone_span())).unwrap_or(i64::MAX);
    let min_checks = i32::try_from(cfg.gone_min_checks.max(1)).unwrap_or(i32::MAX);
    let (since, checks) = note_missing(db, p, tip).await?;
    if checks >= min_checks && tip.saturating_sub(since) >= span {
        reverse(db, p).await?;
        return Ok(true);
    }
    tracing::info!(payment_id = %p.id, since, checks, tip, "transaction missing on chain; not reversed yet");
    Ok(false)
}

/// A reversed payment on a live chain is still watched until the chain is `final_depth` blocks
/// past its last missing check: if its transaction is in a block again (a reorganisation back to
/// the fork that holds it, at a height the scanner may have passed), it is revived
/// (`scanner::revive_on_chain`). A transfer mined again in a new block is revived by the scanner
/// whenever it comes. The sandbox's reversals are final.
pub(super) async fn watch_reversed(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    p: &payment::Model,
    interval: Duration,
) -> Result<Option<Duration>, PipelineError> {
    let Some(last) = p.missing_last_height.filter(|_| !chain.gone_is_final()) else { return Ok(None) };
    let status = chain.status(&p.tx_hash, p.output_index, seen_at(p)).await?;
    let tip = chain.tip().await?;
    if let TxStatus::Confirmations(n) = status
        && n > 0
    {
        let confirmations = i32::try_from(n).unwrap_or(i32::MAX);
        crate::scanner::revive_on_chain(db, p, tip.saturating_sub(n - 1), confirmations).await?;
        return Ok(Some(interval));
    }
    let until = last.saturating_add(i64::from(final_depth(&p.gate_id, p.required_confirmations)));
    Ok((i64::try_from(tip).unwrap_or(i64::MAX) < until).then_some(interval))
}

/// Counts a check that found the transaction missing (once per new tip height), with a guarded
/// update; returns (missing since height, checks) as stored.
async fn note_missing(db: &DatabaseConnection, p: &payment::Model, tip: i64) -> Result<(i64, i32), PipelineError> {
    let (since, checks) = match (p.missing_since_height, p.missing_last_height) {
        (Some(since), Some(last)) if tip <= last => return Ok((since, p.missing_checks)),
        (Some(since), _) => (since, p.missing_checks.saturating_add(1)),
        (None, _) => (tip, 1),
    };
    if tracking::note_missing(db, p, (since, checks), tip).await? {
        return Ok((since, checks));
    }
    // Another tracker stored this check (or the transaction was seen again): use its state.
    let now = payment::Entity::find_by_id(p.id).one(db).await?;
    Ok(now.and_then(|n| n.missing_since_height.map(|s| (s, n.missing_checks))).unwrap_or((tip, 0)))
}

/// The transaction is on the chain again: forget that it was missing.
pub(super) async fn clear_missing(db: &DatabaseConnection, id: Uuid) -> Result<(), PipelineError> {
    Ok(tracking::clear_missing(db, id.into()).await?)
}

/// The chain no longer shows the transfer. Before credit: the pending amount goes away (a
/// conversion quote is abandoned) and a `confirming` invoice returns to `pending` (or
/// `expired`), a confirmed one becomes `invalid`. After credit: the credit is taken back
/// (`deposit_reversal`, which may leave the merchant owing), the invoice's refundable credit
/// shrinks, and a paid/overpaid/underpaid invoice becomes `invalid`.
async fn reverse(db: &DatabaseConnection, p: &payment::Model) -> Result<(), PipelineError> {
    let txn = domain::db::begin_write(db).await?;
    let now = Utc::now();
    // The row as it is when reversed: whether it was credited is read from here, not from the
    // caller's copy (the settlement converter may have credited it meanwhile).
    let Some(p_after) = domain::payments::lifecycle::reverse(&txn, p, now).await? else {
        txn.rollback().await?;
        return Ok(());
    };
    let inv = lock_invoice(&txn, p.invoice_id).await?;
    let reference = Some(("payment", p.id));
    match (p.status, p_after.credited_at) {
        (PaymentStatus::Confirming | PaymentStatus::Confirmed, None) => {
            crate::converter::abandon(&txn, p.id).await?;
            let posting = Posting {
                bucket: Bucket::Pending,
                amount: -p.amount.0,
                entry_type: EntryType::DepositReversal,
                reference,
                description: Some("uncredited deposit reversed".into()),
            };
            ledger::post(&txn, ledger::Account::of(inv.merchant_id.into(), inv.environment, &p.gate_id), &[posting])
                .await?;
            if p.status == PaymentStatus::Confirmed {
                // Confirmed, awaiting its conversion: it counted as paid.
                if let Some(sa) = inv.static_address_id {
                    add_static_total(&txn, sa, -p.amount.0).await?;
                }
                let inv = refresh_amount_paid(&txn, &inv).await?;
                announce_invalid(&txn, &inv, &p_after).await?;
            } else if inv.status == InvoiceStatus::Confirming && !has_unconfirmed(&txn, inv.id).await? {
                // Its only unconfirmed deposit: back to `pending`, or `expired` past its window
                // (PRODUCT.md), announced with the status it moved to.
                let late = inv.expires_at.is_some_and(|e| e < now);
                let trigger =
                    if late { InvoiceTrigger::UnconfirmedReversedLate } else { InvoiceTrigger::UnconfirmedReversed };
                let after = transition(&txn, &inv, trigger).await?;
                let now_is = after.as_ref().unwrap_or(&inv);
                events::emit_invoice(&txn, EventKind::InvoiceDepositReversed, now_is, Some(&p_after)).await?;
                if let Some(expired) = after.filter(|a| a.status == InvoiceStatus::Expired) {
                    events::emit_invoice(&txn, EventKind::InvoiceExpired, &expired, Some(&p_after)).await?;
                }
            } else {
                events::emit_invoice(&txn, EventKind::InvoiceDepositReversed, &inv, Some(&p_after)).await?;
            }
        }
        (PaymentStatus::Confirmed, Some(_)) => {
            let gate = p_after.credited_gate_id.clone().unwrap_or_else(|| p.gate_id.clone());
            let credited = p_after.credited_amount.map_or(p.amount.0, |a| a.0);
            let posting = Posting {
                bucket: Bucket::Available,
                amount: -credited,
                entry_type: EntryType::DepositReversal,
                reference,
                description: Some("credited deposit reversed".into()),
            };
            if let Some(sa) = inv.static_address_id {
                add_static_total(&txn, sa, -p.amount.0).await?;
            }
            ledger::post_allowing_debt(
                &txn,
                ledger::Account::of(inv.merchant_id.into(), inv.environment, &gate),
                &[posting],
            )
            .await?;
            shrink_invoice_credit(&txn, inv.id, &gate, credited).await?;
            let inv = refresh_amount_paid(&txn, &inv).await?;
            announce_invalid(&txn, &inv, &p_after).await?;
        }
        (PaymentStatus::Confirming, Some(_)) => {
            return Err(PipelineError::Invariant(format!("payment {} credited before confirmation", p.id)));
        }
        (PaymentStatus::Reversed, _) => {}
    }
    txn.commit().await?;
    Ok(())
}

/// A deposit that counted as paid is reversed: a paid, overpaid or underpaid invoice becomes
/// `invalid` (PRODUCT.md). `invoice.deposit_reversed` carries the status after the change
/// (unchanged where the trigger does not apply), then `invoice.invalid` if it moved.
async fn announce_invalid<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
    cause: &payment::Model,
) -> Result<(), PipelineError> {
    let after = transition(txn, inv, InvoiceTrigger::CreditedReversed).await?;
    events::emit_invoice(txn, EventKind::InvoiceDepositReversed, after.as_ref().unwrap_or(inv), Some(cause)).await?;
    if let Some(after) = after {
        events::emit_invoice(txn, EventKind::InvoiceInvalid, &after, Some(cause)).await?;
    }
    Ok(())
}

/// Takes the invoice's row lock (a no-op update) and reads it: the first lock after the
/// payment's, before any balance.
async fn lock_invoice<C: ConnectionTrait>(txn: &C, id: Uuid) -> Result<invoice::Model, PipelineError> {
    invoice::Entity::update_many()
        .col_expr(invoice::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(invoice::Column::Id.eq(id))
        .exec_with_returning(txn)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| PipelineError::Invariant(format!("invoice {id} missing")))
}

/// `amount_paid` = the sum of the invoice's confirmed payments. Called with the gate's balance
/// locked, so two confirmations of one invoice never interleave here.
async fn refresh_amount_paid<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
) -> Result<invoice::Model, PipelineError> {
    let paid: Decimal = payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(inv.id))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirmed))
        .all(txn)
        .await?
        .iter()
        .map(|p| p.amount.0)
        .sum();
    let mut row: invoice::ActiveModel = inv.clone().into();
    row.amount_paid = Set(Amount::new(paid));
    row.updated_at = Set(Utc::now());
    Ok(row.update(txn).await?)
}

async fn has_unconfirmed<C: ConnectionTrait>(txn: &C, invoice_id: Uuid) -> Result<bool, PipelineError> {
    Ok(payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(invoice_id))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirming))
        .one(txn)
        .await?
        .is_some())
}

async fn shrink_invoice_credit<C: ConnectionTrait>(
    txn: &C,
    invoice_id: Uuid,
    gate_id: &str,
    amount: Decimal,
) -> Result<(), PipelineError> {
    use entity::invoice_credit;
    let Some(c) = invoice_credit::Entity::find_by_id((invoice_id, gate_id.to_owned())).one(txn).await? else {
        return Ok(());
    };
    let credited = c.credited.0.checked_sub(amount).ok_or(ledger::LedgerError::Overflow)?;
    let mut row: invoice_credit::ActiveModel = c.into();
    row.credited = Set(Amount::new(credited));
    row.updated_at = Set(Utc::now());
    row.update(txn).await?;
    Ok(())
}
