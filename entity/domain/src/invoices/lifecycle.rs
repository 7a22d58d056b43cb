//! An invoice's status moves, written once. The rules (which trigger takes which status where)
//! are `entity::InvoiceStatus::on`, an exhaustive table; this module persists a move with a
//! guarded update (`… WHERE status = <from>`), so of two writers racing on one invoice only one
//! applies it, and returns the rows it moved. Every stage and the HTTP face move invoices
//! through these functions.

use chrono::{DateTime, Utc};
use entity::{InvoiceStatus, InvoiceTrigger, invoice};
use sea_orm::sea_query::{Expr, Func};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use uuid::Uuid;

/// Rows a guarded update names at once (bind parameters stay well under SQLite's limit).
const IDS_PER_UPDATE: usize = 500;

/// Applies `trigger` to the invoice with a guarded update (`WHERE status = <from>`) and returns
/// the invoice after it, or `None` when the trigger does not apply or another writer moved the
/// invoice first. `paid_at` is set on the way to paid/overpaid.
pub async fn transition<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
    trigger: InvoiceTrigger,
) -> Result<Option<invoice::Model>, DbErr> {
    Ok(transition_many(txn, inv.status, trigger, &[inv.id]).await?.into_iter().next())
}

/// [`transition`] of the invoices `ids`, all in status `from`, by one guarded update (500 a
/// statement); returns those it moved (the others did not take the trigger or were moved first
/// by another writer). `paid_at` is set on the way to paid/overpaid unless it was set before.
pub async fn transition_many<C: ConnectionTrait>(
    txn: &C,
    from: InvoiceStatus,
    trigger: InvoiceTrigger,
    ids: &[Uuid],
) -> Result<Vec<invoice::Model>, DbErr> {
    let Some(next) = from.on(trigger) else { return Ok(Vec::new()) };
    let now = Utc::now();
    let mut moved = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_UPDATE) {
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

/// `pending` → `confirming` for the invoices `ids` that a deposit reached within their payment
/// window (`expires_at` not before `now`); returns those it moved. An invoice past its window or
/// no longer pending is left as it is, for the caller to look at on its own.
pub async fn see_deposits<C: ConnectionTrait>(
    txn: &C,
    ids: &[Uuid],
    now: DateTime<Utc>,
) -> Result<Vec<invoice::Model>, DbErr> {
    let Some(next) = InvoiceStatus::Pending.on(InvoiceTrigger::DepositSeen) else {
        return Err(DbErr::Custom("invariant: a pending invoice must take a deposit".into()));
    };
    let mut moved = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_UPDATE) {
        moved.extend(
            invoice::Entity::update_many()
                .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
                .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
                .filter(invoice::Column::Id.is_in(chunk.iter().copied()))
                .filter(invoice::Column::Status.eq(InvoiceStatus::Pending))
                .filter(
                    Condition::any().add(invoice::Column::ExpiresAt.is_null()).add(invoice::Column::ExpiresAt.gte(now)),
                )
                .exec_with_returning(txn)
                .await?,
        );
    }
    Ok(moved)
}
