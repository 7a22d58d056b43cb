//! What a recorded deposit does beside its payment row, whether new or revived: its invoice
//! moves to `confirming` (or, past its window, expires first), and its amount goes to the
//! merchant's `pending` balance.

use chrono::Utc;
use entity::{Bucket, EntryType, Environment, InvoiceStatus, InvoiceTrigger, invoice, payment};
use sea_orm::{ConnectionTrait, EntityTrait};
use uuid::Uuid;

use crate::pipeline::PipelineError;
use domain::events::{self, EventKind};
use domain::invoices::lifecycle::transition;
use domain::ledger::{self, Posting};

/// A payment recorded by this scan, whose amount is still to be posted to `pending`.
pub(super) struct Recorded {
    pub(super) merchant_id: Uuid,
    pub(super) payment_id: Uuid,
    pub(super) amount: rust_decimal::Decimal,
}

/// Seen deposits' amounts go to their merchant's `pending` balance: one entry each, the balance
/// row locked and written once. `seen` all belong to one merchant.
pub(super) async fn post_seen<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    seen: &[Recorded],
) -> Result<(), PipelineError> {
    let Some(first) = seen.first() else { return Ok(()) };
    let postings: Vec<Posting> = seen
        .iter()
        .map(|s| Posting {
            bucket: Bucket::Pending,
            amount: s.amount,
            entry_type: EntryType::InvoiceCredit,
            reference: Some(("payment", s.payment_id)),
            description: Some("deposit seen, awaiting confirmations".into()),
        })
        .collect();
    ledger::post(txn, ledger::Account::of(first.merchant_id.into(), env, gate_id), &postings).await?;
    Ok(())
}

/// A recorded deposit moves a `pending` invoice to `confirming` (or, past its window, to
/// `expired` first: it is then a late deposit). Returns the invoice as it read it, before the move.
pub(super) async fn invoice_sees_deposit<C: ConnectionTrait>(
    txn: &C,
    p: &payment::Model,
) -> Result<invoice::Model, PipelineError> {
    let now = Utc::now();
    let inv = invoice::Entity::find_by_id(p.invoice_id)
        .one(txn)
        .await?
        .ok_or_else(|| PipelineError::Invariant(format!("invoice of payment {} missing", p.id)))?;
    if inv.status == InvoiceStatus::Pending {
        if inv.expires_at.is_some_and(|e| e < now) {
            // The window closed before the sweeper noticed: expire first; this is a late deposit.
            if let Some(after) = transition(txn, &inv, InvoiceTrigger::Expire).await? {
                events::emit_invoice(txn, EventKind::InvoiceExpired, &after, None).await?;
            }
        } else if let Some(after) = transition(txn, &inv, InvoiceTrigger::DepositSeen).await? {
            events::emit_invoice(txn, EventKind::InvoiceConfirming, &after, Some(p)).await?;
        }
    }
    Ok(inv)
}
