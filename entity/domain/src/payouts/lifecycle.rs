//! Ending a payout that holds a reservation (cancel, reject, fail) with its release in one
//! transaction, and replacement requests: shared by the API, the operator commands and the
//! payout executor.

use chrono::Utc;
use entity::{Bucket, EntryType, PayoutId, PayoutStatus, PayoutTrigger, payout};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::domain_error::DomainError;
use crate::events::EventKind;
use crate::ledger::{self, Posting};

/// Moves a payout that has no transaction yet (`pending_approval`, `approved`: cancel, reject)
/// out of its reservation-holding status with a guarded update on its status and releases the
/// reservation in the same transaction. `Ok(None)` when the guard did not match.
pub async fn end_with_release(
    db: &impl crate::db::WriteDb,
    p: &payout::Model,
    trigger: PayoutTrigger,
    failure_reason: Option<&str>,
) -> Result<Option<payout::Model>, ReleaseError> {
    end_guarded(db, p, trigger, failure_reason, None).await
}

/// The transaction of a payout that a verdict was reached about. A transition that ends a
/// payout, re-signs it or moves it on because of what the chain said about one transaction
/// applies only while the payout still holds that transaction: two jobs on one payout are
/// normal (a stale job still holding an older transaction may answer after a newer one was
/// signed and sent), and a guard that no longer matches means "look again", never "done".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged<'a> {
    /// Nothing was signed for the payout (`signed_tx IS NULL`).
    Unsigned,
    /// The payout's stored transaction with this hash.
    Tx(&'a str),
}

impl Judged<'_> {
    /// The guard of an update on `payout` that requires the judged transaction to be current.
    pub fn guard(self, update: sea_orm::UpdateMany<payout::Entity>) -> sea_orm::UpdateMany<payout::Entity> {
        match self {
            Judged::Unsigned => update.filter(payout::Column::SignedTx.is_null()),
            Judged::Tx(hash) => update.filter(payout::Column::TxHash.eq(hash)),
        }
    }

    /// Whether `p` still holds the judged transaction.
    pub fn holds(self, p: &payout::Model) -> bool {
        match self {
            Judged::Unsigned => p.signed_tx.is_none(),
            Judged::Tx(hash) => p.signed_tx.is_some() && p.tx_hash.as_deref() == Some(hash),
        }
    }
}

/// Fails a payout because of what the chain said about transaction `judged` (or, `Unsigned`,
/// before anything was signed), releasing its reservation in the same transaction. `Ok(None)`:
/// the payout moved on meanwhile (another status, or another transaction now): look again.
pub async fn fail_judged(
    db: &impl crate::db::WriteDb,
    p: &payout::Model,
    judged: Judged<'_>,
    reason: &str,
) -> Result<Option<payout::Model>, ReleaseError> {
    end_guarded(db, p, PayoutTrigger::Fail, Some(reason), Some(judged)).await
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

/// [`end_with_release`]; with `judged` the guard also requires that the payout still holds
/// the judged transaction (or none), see [`Judged`].
pub(crate) async fn end_guarded(
    db: &impl crate::db::WriteDb,
    p: &payout::Model,
    trigger: PayoutTrigger,
    failure_reason: Option<&str>,
    judged: Option<Judged<'_>>,
) -> Result<Option<payout::Model>, ReleaseError> {
    let Some(next) = p.status.on(trigger) else { return Ok(None) };
    let now = Utc::now();
    let txn = crate::db::begin_write(db).await?;
    let mut update = payout::Entity::update_many()
        .col_expr(payout::Column::Status, Expr::value(next.as_str()))
        .col_expr(payout::Column::UpdatedAt, Expr::value(now))
        .filter(payout::Column::Id.eq(p.id))
        .filter(payout::Column::Status.eq(p.status));
    if let Some(judged) = judged {
        update = judged.guard(update);
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
    ledger::post(&txn, ledger::Account::of(p.merchant_id.into(), p.environment, &p.gate_id), &release).await?;
    let after = payout::Entity::find_by_id(p.id).one(&txn).await?.ok_or(ReleaseError::Vanished(p.id))?;
    crate::refunds::mirror::mirror_payout(&txn, &after).await?;
    if after.status == PayoutStatus::Failed {
        crate::events::emit_payout(&txn, EventKind::PayoutFailed, &after).await?;
    }
    txn.commit().await?;
    Ok(Some(after))
}

/// Records that payout `payout_id`'s transaction is to be replaced (once; a second request
/// keeps the first). The executor signs and sends the replacement.
pub async fn insert_replacement<C: ConnectionTrait>(
    db: &C,
    payout_id: PayoutId,
    reason: &str,
) -> Result<(), sea_orm::DbErr> {
    use entity::payout_replacement;
    let row = payout_replacement::Model {
        payout_id: payout_id.into(),
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

/// [`insert_replacement`] because of what the chain said about transaction `judged`: only while
/// the payout is still in `p`'s status and holds that transaction (a guarded touch of the
/// payout row in the same transaction, which also holds the row until the request is stored).
/// False: the payout moved on meanwhile; look again.
pub async fn replace_judged(
    db: &impl crate::db::WriteDb,
    p: &payout::Model,
    judged: Judged<'_>,
    reason: &str,
) -> Result<bool, sea_orm::DbErr> {
    let txn = crate::db::begin_write(db).await?;
    let touch = payout::Entity::update_many()
        .col_expr(payout::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(payout::Column::Id.eq(p.id))
        .filter(payout::Column::Status.eq(p.status));
    if judged.guard(touch).exec(&txn).await?.rows_affected == 0 {
        txn.rollback().await?;
        return Ok(false);
    }
    insert_replacement(&txn, p.id.into(), reason).await?;
    txn.commit().await?;
    Ok(true)
}
