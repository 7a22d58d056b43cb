//! The confirmation tracker's bookkeeping on a payment, beside its status: the depth readers
//! see, the checks that found its transaction missing, and when its job chain looks next. None
//! of these moves a status or money; the guards keep a stale writer from undoing a newer one.

use chrono::{DateTime, Utc};
use entity::{Environment, PaymentId, PaymentStatus, payment};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use uuid::Uuid;

/// Stores the depth a check read (`confirmations`, checked `now`) on a payment not reversed.
pub async fn store_depth<C: ConnectionTrait>(
    db: &C,
    id: PaymentId,
    confirmations: i32,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    payment::Entity::update_many()
        .col_expr(payment::Column::Confirmations, Expr::value(confirmations))
        .col_expr(payment::Column::CheckedAt, Expr::value(now))
        .filter(payment::Column::Id.eq(id))
        .filter(payment::Column::Status.ne(PaymentStatus::Reversed))
        .exec(db)
        .await?;
    Ok(())
}

/// A confirming payment found in block `height` (not the one it was recorded at: first seen
/// in the mempool, or moved by a reorganisation) takes that block's height and depth.
pub async fn settle_height<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    (tx_hash, output_index): (&str, i64),
    height: i64,
    confirmations: i32,
) -> Result<(), DbErr> {
    payment::Entity::update_many()
        .col_expr(payment::Column::BlockHeight, Expr::value(height))
        .col_expr(payment::Column::Confirmations, Expr::value(confirmations))
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate_id))
        .filter(payment::Column::TxHash.eq(tx_hash))
        .filter(payment::Column::OutputIndex.eq(output_index))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirming))
        .filter(
            Condition::any().add(payment::Column::BlockHeight.is_null()).add(payment::Column::BlockHeight.ne(height)),
        )
        .exec(txn)
        .await?;
    Ok(())
}

/// After a scan up to block `to`, the depth of the gate's confirming payments in the last
/// blocks that are still short of their required confirmations (one statement; integer
/// arithmetic, not money). A payment these blocks bring to its depth is left to the tracker,
/// which confirms it and writes what it reads. A payment that already shows this depth (the
/// scan that recorded it wrote it) is not written again: an update of a row writes a new
/// version of it even when nothing changes. Returns the payments written.
pub async fn refresh_depths<C: ConnectionTrait>(
    db: &C,
    env: Environment,
    gate_id: &str,
    to: i64,
) -> Result<u64, DbErr> {
    Ok(refresh_depths_update(env, gate_id, to).exec(db).await?.rows_affected)
}

/// The statement of [`refresh_depths`]: among the payments still watched (every confirming one
/// is), through their index by gate and height (`open_rows::OPEN_PAYMENTS_WATCHED`), so it costs
/// the payments in flight, not the gate's history.
pub fn refresh_depths_update(env: Environment, gate_id: &str, to: i64) -> sea_orm::UpdateMany<payment::Entity> {
    let depth = Expr::val(to + 1).sub(Expr::col(payment::Column::BlockHeight));
    payment::Entity::update_many()
        .col_expr(payment::Column::Confirmations, depth.clone())
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate_id))
        .filter(Expr::cust(crate::db::open_rows::OPEN_PAYMENTS_WATCHED))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirming))
        .filter(payment::Column::BlockHeight.lte(to))
        .filter(depth.clone().lt(Expr::col(payment::Column::RequiredConfirmations)))
        .filter(depth.ne(Expr::col(payment::Column::Confirmations)))
}

/// A check that found `p`'s transaction missing at tip `tip`, stored as (missing since height,
/// checks) with a guard on the status and the last check `p` holds. `false`: another tracker
/// stored this check first (or the transaction was seen again): re-read the row.
pub async fn note_missing<C: ConnectionTrait>(
    db: &C,
    p: &payment::Model,
    (since, checks): (i64, i32),
    tip: i64,
) -> Result<bool, DbErr> {
    let mut update = payment::Entity::update_many()
        .col_expr(payment::Column::MissingSinceHeight, Expr::value(since))
        .col_expr(payment::Column::MissingLastHeight, Expr::value(tip))
        .col_expr(payment::Column::MissingChecks, Expr::value(checks))
        .col_expr(payment::Column::CheckedAt, Expr::value(Utc::now()))
        .filter(payment::Column::Id.eq(p.id))
        .filter(payment::Column::Status.eq(p.status));
    update = match p.missing_last_height {
        Some(last) => update.filter(payment::Column::MissingLastHeight.eq(last)),
        None => update.filter(payment::Column::MissingLastHeight.is_null()),
    };
    Ok(update.exec(db).await?.rows_affected == 1)
}

/// The transaction is on the chain again: forget that it was missing.
pub async fn clear_missing<C: ConnectionTrait>(db: &C, id: PaymentId) -> Result<(), DbErr> {
    payment::Entity::update_many()
        .col_expr(payment::Column::MissingSinceHeight, Expr::value(Option::<i64>::None))
        .col_expr(payment::Column::MissingLastHeight, Expr::value(Option::<i64>::None))
        .col_expr(payment::Column::MissingChecks, Expr::value(0))
        .filter(payment::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// Stores when the payments `ids` are looked at next (`at`; none: never) and the token of their
/// live job chain (`token`; none: no job, a scan hands them over or the sweeper takes them).
/// A job carrying an older token ends without doing anything.
pub async fn schedule<C: ConnectionTrait>(
    db: &C,
    ids: &[PaymentId],
    token: Option<Uuid>,
    at: Option<DateTime<Utc>>,
) -> Result<(), DbErr> {
    payment::Entity::update_many()
        .col_expr(payment::Column::TrackToken, Expr::value(token))
        .col_expr(payment::Column::NextCheckAt, Expr::value(at))
        .filter(payment::Column::Id.is_in(ids.iter().copied()))
        .exec(db)
        .await?;
    Ok(())
}

/// Confirmed payments the chain shows at `confirmations`, their final depth: stored, and watched
/// no more (no job chain, no next look).
pub async fn finish<C: ConnectionTrait>(db: &C, ids: &[PaymentId], confirmations: i32) -> Result<(), DbErr> {
    payment::Entity::update_many()
        .col_expr(payment::Column::Confirmations, Expr::value(confirmations))
        .col_expr(payment::Column::CheckedAt, Expr::value(Utc::now()))
        .col_expr(payment::Column::TrackToken, Expr::value(Option::<Uuid>::None))
        .col_expr(payment::Column::NextCheckAt, Expr::value(Option::<DateTime<Utc>>::None))
        .filter(payment::Column::Id.is_in(ids.iter().copied()))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirmed))
        .exec(db)
        .await?;
    Ok(())
}

/// Makes the check of the live payment holding transfer `tx_hash` on the gate due at once
/// (`next_check_at` in the past), however deep it is: the sweeper lists it and the tracker
/// looks at the chain again. A reversed payment is not touched.
pub async fn wake<C: ConnectionTrait>(db: &C, env: Environment, gate_id: &str, tx_hash: &str) -> Result<(), DbErr> {
    payment::Entity::update_many()
        .col_expr(payment::Column::NextCheckAt, Expr::value(DateTime::<Utc>::UNIX_EPOCH))
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate_id))
        .filter(payment::Column::TxHash.eq(tx_hash))
        .filter(payment::Column::Status.ne(PaymentStatus::Reversed))
        .exec(db)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payments::lifecycle::tests::{holding, seen};

    #[tokio::test]
    async fn a_depth_refresh_writes_only_the_payments_whose_depth_changed() {
        let mut p = seen();
        (p.block_height, p.confirmations, p.required_confirmations) = (Some(10), 1, 3);
        let db = holding(&p).await;
        let depth = |db| async move { payment::Entity::find_by_id(p.id).one(db).await.unwrap().unwrap().confirmations };
        assert_eq!(refresh_depths(&db, Environment::Test, "bitcoin", 10).await.unwrap(), 0, "recorded at this depth");
        assert_eq!(refresh_depths(&db, Environment::Test, "bitcoin", 11).await.unwrap(), 1);
        assert_eq!(depth(&db).await, 2);
        assert_eq!(refresh_depths(&db, Environment::Test, "bitcoin", 11).await.unwrap(), 0, "a second scan of the tip");
        assert_eq!(refresh_depths(&db, Environment::Test, "bitcoin", 12).await.unwrap(), 0, "due: the tracker's");
        assert_eq!(depth(&db).await, 2);
    }
}
