//! Ending a payout that holds a reservation (cancel, reject, fail) with its release in one
//! transaction, and replacement requests: shared by the API, the operator commands and the
//! payout executor.

use chrono::Utc;
use entity::{Bucket, EntryType, PayoutStatus, PayoutTrigger, payout};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::domain_error::DomainError;
use crate::ledger::{self, Posting};

/// Moves a payout out of a reservation-holding status with a guarded update and releases the
/// reservation in the same transaction. `Ok(None)` when the guard did not match.
pub async fn end_with_release(
    db: &impl crate::db::WriteDb,
    p: &payout::Model,
    trigger: PayoutTrigger,
    failure_reason: Option<&str>,
) -> Result<Option<payout::Model>, ReleaseError> {
    end_guarded(db, p, trigger, failure_reason, false).await
}

/// Why ending a payout with its release failed: nothing a caller did wrong.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error("payout {0} vanished while it was ended")]
    Vanished(Uuid),
}

impl From<ReleaseError> for DomainError {
    fn from(e: ReleaseError) -> Self {
        DomainError::internal(e)
    }
}

/// [`end_with_release`]; with `unsigned` the guard also requires that no signed transaction
/// was stored meanwhile (an operator ending a payout the executor may be signing right now).
pub(crate) async fn end_guarded(
    db: &impl crate::db::WriteDb,
    p: &payout::Model,
    trigger: PayoutTrigger,
    failure_reason: Option<&str>,
    unsigned: bool,
) -> Result<Option<payout::Model>, ReleaseError> {
    let Some(next) = p.status.on(trigger) else { return Ok(None) };
    let now = Utc::now();
    let txn = crate::db::begin_write(db).await?;
    let mut update = payout::Entity::update_many()
        .col_expr(payout::Column::Status, Expr::value(next.as_str()))
        .col_expr(payout::Column::UpdatedAt, Expr::value(now))
        .filter(payout::Column::Id.eq(p.id))
        .filter(payout::Column::Status.eq(p.status));
    if unsigned {
        update = update.filter(payout::Column::SignedTx.is_null());
    }
    if next == PayoutStatus::Cancelled {
        update = update.col_expr(payout::Column::CancelledAt, Expr::value(now));
    }
    if let Some(r) = failure_reason {
        update = update.col_expr(payout::Column::FailureReason, Expr::value(r));
    }
    if update.exec(&txn).await?.rows_affected == 0 {
        txn.rollback().await?;
        return Ok(None);
    }
    let debit = p.merchant_debit_amount.0;
    let release = [
        Posting {
            bucket: Bucket::Reserved,
            amount: -debit,
            entry_type: EntryType::PayoutRelease,
            reference: Some(("payout", p.id)),
            description: None,
        },
        Posting {
            bucket: Bucket::Available,
            amount: debit,
            entry_type: EntryType::PayoutRelease,
            reference: Some(("payout", p.id)),
            description: None,
        },
    ];
    ledger::post(&txn, ledger::Account::of(p.merchant_id, p.environment, &p.gate_id), &release).await?;
    let after = payout::Entity::find_by_id(p.id).one(&txn).await?.ok_or(ReleaseError::Vanished(p.id))?;
    crate::refunds::mirror::mirror_payout(&txn, &after).await?;
    if after.status == PayoutStatus::Failed {
        crate::events::emit_payout(&txn, crate::events::kind::PAYOUT_FAILED, &after).await?;
    }
    txn.commit().await?;
    Ok(Some(after))
}

/// Records that payout `payout_id`'s transaction is to be replaced (once; a second request
/// keeps the first). The executor signs and sends the replacement.
pub async fn insert_replacement<C: ConnectionTrait>(
    db: &C,
    payout_id: Uuid,
    reason: &str,
) -> Result<(), sea_orm::DbErr> {
    use entity::payout_replacement;
    let row = payout_replacement::Model {
        payout_id,
        requested_at: Utc::now(),
        reason: reason.to_owned(),
        tx_hash: None,
        signed_tx: None,
        broadcast_at: None,
    };
    payout_replacement::Entity::insert(payout_replacement::ActiveModel::from(row))
        .on_conflict(OnConflict::column(payout_replacement::Column::PayoutId).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    Ok(())
}
