//! The deposit pipeline's rules, independent of how jobs reach them: the scanner records
//! transfers to watched addresses as payments (exactly once), the tracker follows each payment's
//! confirmations to its credit or reversal and moves the invoice through the PRODUCT.md table,
//! and the sweeper re-derives forgotten work (expiries, payments nobody is tracking) from the
//! database. Every function here is idempotent: running it twice, or concurrently in two
//! processes, changes nothing the first run did not.

pub mod scanner;
pub mod sweeper;
pub mod tracker;

use chrono::Utc;
use entity::{InvoiceStatus, InvoiceTrigger, invoice};
use sea_orm::sea_query::{Expr, Func};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use crate::chain::ChainError;
use domain::ledger::LedgerError;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(transparent)]
    Db(#[from] DbErr),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("{0}")]
    Invariant(String),
}

/// Until this depth a credited payment is still watched for reversal: twice its required
/// confirmations.
pub fn final_depth(required: i32) -> i32 {
    required.saturating_mul(2)
}

/// Applies `trigger` to the invoice with a guarded update (`WHERE status = <from>`) and returns
/// the invoice after it, or `None` when the trigger does not apply or another writer moved the
/// invoice first. `paid_at` is set on the way to paid/overpaid.
pub(crate) async fn transition<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
    trigger: InvoiceTrigger,
) -> Result<Option<invoice::Model>, DbErr> {
    Ok(transition_many(txn, inv.status, trigger, &[inv.id]).await?.into_iter().next())
}

/// [`transition`] of the invoices `ids`, all in status `from`, by one guarded update (500 a
/// statement); returns those it moved (the others did not take the trigger or were moved first
/// by another writer). `paid_at` is set on the way to paid/overpaid unless it was set before.
pub(crate) async fn transition_many<C: ConnectionTrait>(
    txn: &C,
    from: InvoiceStatus,
    trigger: InvoiceTrigger,
    ids: &[Uuid],
) -> Result<Vec<invoice::Model>, DbErr> {
    let Some(next) = from.on(trigger) else { return Ok(Vec::new()) };
    let now = Utc::now();
    let mut moved = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let mut update = invoice::Entity::update_many()
            .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
            .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
            .filter(invoice::Column::Id.is_in(chunk.iter().copied()))
            .filter(invoice::Column::Status.eq(from));
        if matches!(trigger, InvoiceTrigger::ConfirmedExact | InvoiceTrigger::ConfirmedOver) {
            let paid_at = Func::coalesce([Expr::col(invoice::Column::PaidAt), Expr::value(now)]);
            update = update.col_expr(invoice::Column::PaidAt, paid_at.into());
        }
        moved.extend(update.exec_with_returning(txn).await?);
    }
    Ok(moved)
}
