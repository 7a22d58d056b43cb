//! The sweeper re-derives work from the database, so nothing depends on a job surviving in the
//! queue: it expires invoices and drafts whose time has passed, and lists payments that still
//! need tracking but were not looked at recently (a lost job, a crash between commit and
//! enqueue, a flushed Redis).

use chrono::{Duration, Utc};
use entity::{InvoiceStatus, InvoiceTrigger, PaymentStatus, invoice, payment};
use sea_orm::sea_query::{Condition, Expr};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select};
use uuid::Uuid;

use crate::pipeline::{PipelineError, short_of_final};
use domain::db::open_rows;
use domain::events::{self, EventKind};
use domain::invoices::lifecycle::transition;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub expired: usize,
    pub drafts_expired: usize,
    /// Payments to hand (back) to the tracker.
    pub stale_payments: Vec<Uuid>,
}

/// A payment whose tracker job chain is lost: its scheduled check (`next_check_at`, stored by
/// the tracker with each recheck it enqueues) is overdue by the margin, or, with no chain
/// scheduled (recorded by the scanner, whose hand-over may have been lost), it was not checked
/// within the margin. A payment with a live chain is never listed, so the sweeper starts a
/// second chain only for a payment whose first is gone (and the tracker ends the older one if
/// it comes back: `tracker::Next::Superseded`).
fn overdue(stale: chrono::DateTime<Utc>) -> Condition {
    let unscheduled = Condition::all()
        .add(payment::Column::NextCheckAt.is_null())
        .add(Condition::any().add(payment::Column::CheckedAt.is_null()).add(payment::Column::CheckedAt.lt(stale)));
    Condition::any().add(unscheduled).add(payment::Column::NextCheckAt.lt(stale))
}

/// Most rows one sweep handles per kind; the next sweep continues.
const SWEEP_LIMIT: u64 = 500;

/// What the sweeper expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Pending invoices past `expires_at`.
    Pending,
    /// Drafts past `draft_expires_at`.
    Draft,
}

/// The invoices of `kind` whose time has passed at `now`, soonest first, at most one sweep's
/// worth. Each reads its partial index (`open_rows`: pending or draft invoices only), so its
/// cost follows the open invoices, not the paid and expired history.
pub fn expiring(kind: Expiry, now: chrono::DateTime<Utc>) -> Select<invoice::Entity> {
    let (status, open, col) = match kind {
        Expiry::Pending => (InvoiceStatus::Pending, open_rows::OPEN_PENDING, invoice::Column::ExpiresAt),
        Expiry::Draft => (InvoiceStatus::Draft, open_rows::OPEN_DRAFT, invoice::Column::DraftExpiresAt),
    };
    invoice::Entity::find()
        .filter(invoice::Column::Status.eq(status))
        .filter(Expr::cust(open))
        .filter(col.lt(now))
        .order_by_asc(col)
        .limit(SWEEP_LIMIT)
}

pub async fn sweep(db: &DatabaseConnection, stale_after: std::time::Duration) -> Result<SweepReport, PipelineError> {
    let now = Utc::now();
    let mut report = SweepReport::default();
    for inv in expiring(Expiry::Pending, now).all(db).await? {
        let txn = domain::db::begin_write(db).await?;
        if let Some(after) = transition(&txn, &inv, InvoiceTrigger::Expire).await? {
            events::emit_invoice(&txn, EventKind::InvoiceExpired, &after, None).await?;
            report.expired += 1;
        }
        txn.commit().await?;
    }
    for inv in expiring(Expiry::Draft, now).all(db).await? {
        let txn = domain::db::begin_write(db).await?;
        if let Some(after) = transition(&txn, &inv, InvoiceTrigger::DraftExpire).await? {
            events::emit_invoice(&txn, EventKind::InvoiceDraftExpired, &after, None).await?;
            report.drafts_expired += 1;
        }
        txn.commit().await?;
    }
    let stale = now - Duration::from_std(stale_after).unwrap_or(Duration::seconds(30));
    let candidates = payment::Entity::find()
        .filter(overdue(stale))
        // Every unconfirmed payment, whatever its stored confirmations (a tracker may have died
        // between storing them and crediting), and credited ones short of their final depth
        // (`pipeline::final_depth`: still watched for reversal) or
        // with a check asked for (a sandbox reversal wakes the tracker however deep: the
        // tracker clears `next_check_at` when it stops watching).
        .filter(
            Condition::any().add(payment::Column::Status.eq(PaymentStatus::Confirming)).add(
                Condition::all()
                    .add(payment::Column::Status.eq(PaymentStatus::Confirmed))
                    .add(Condition::any().add(short_of_final()).add(payment::Column::NextCheckAt.is_not_null())),
            ),
        )
        .order_by_asc(payment::Column::CheckedAt)
        .limit(SWEEP_LIMIT)
        .all(db)
        .await?;
    report.stale_payments = candidates.into_iter().map(|p| p.id).collect();
    Ok(report)
}
