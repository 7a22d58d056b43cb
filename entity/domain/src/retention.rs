//! Pruning what has served its purpose (`[retention]`), in batches of `batch_size` rows, each
//! its own statement (a short transaction), so a year of backlog never holds a long lock:
//! webhook attempts' response excerpts past `attempt_bodies_days` (the attempt rows stay), and
//! dashboard sessions and unaccepted invitations ended more than `ended_sessions_days` ago.
//! The books (ledger, payments, invoices, payouts, refunds), events and the audit log are never
//! touched (docs/operations.md, "Retention").

use chrono::{DateTime, Duration, Utc};
use entity::{dashboard_invitation, dashboard_session, webhook_attempt};
use sea_orm::sea_query::{Condition, Expr};
use sea_orm::{ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QuerySelect};
use uuid::Uuid;

use crate::config::RetentionConfig;
use crate::db::open_rows;

/// What one run pruned.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub attempt_bodies: u64,
    pub sessions: u64,
    pub invitations: u64,
}

/// Prunes everything due at `now`, batch after batch, until nothing is left.
pub async fn prune(db: &DatabaseConnection, cfg: &RetentionConfig, now: DateTime<Utc>) -> Result<Pruned, DbErr> {
    let mut done = Pruned::default();
    if let Some(cutoff) = cutoff(now, cfg.attempt_bodies_days) {
        done.attempt_bodies = batches(cfg.batch_size, || attempt_bodies(db, cutoff, cfg.batch_size)).await?;
    }
    if let Some(cutoff) = cutoff(now, cfg.ended_sessions_days) {
        done.sessions = batches(cfg.batch_size, || sessions(db, cutoff, cfg.batch_size)).await?;
        done.invitations = batches(cfg.batch_size, || invitations(db, cutoff, cfg.batch_size)).await?;
    }
    Ok(done)
}

fn cutoff(now: DateTime<Utc>, days: u32) -> Option<DateTime<Utc>> {
    (days > 0).then(|| now - Duration::days(i64::from(days)))
}

/// Runs `batch` until it prunes fewer than a full batch; the rows pruned in all.
async fn batches<F, Fut>(size: u64, mut batch: F) -> Result<u64, DbErr>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64, DbErr>>,
{
    let mut total = 0;
    loop {
        let n = batch().await?;
        total += n;
        if n < size {
            return Ok(total);
        }
        // Let other writers in between batches.
        tokio::task::yield_now().await;
    }
}

/// One batch of attempts' response excerpts older than `cutoff` cleared: read through the
/// partial index of attempts still holding one (`open_rows::OPEN_ATTEMPT_BODIES`).
async fn attempt_bodies(db: &DatabaseConnection, cutoff: DateTime<Utc>, size: u64) -> Result<u64, DbErr> {
    let held = Condition::all()
        .add(Expr::cust(open_rows::OPEN_ATTEMPT_BODIES))
        .add(webhook_attempt::Column::StartedAt.lt(cutoff));
    let ids = batch_ids::<webhook_attempt::Entity>(db, webhook_attempt::Column::Id, held, size).await?;
    if ids.is_empty() {
        return Ok(0);
    }
    let r = webhook_attempt::Entity::update_many()
        .col_expr(webhook_attempt::Column::ResponseBody, Expr::value(None::<String>))
        .filter(webhook_attempt::Column::Id.is_in(ids))
        .exec(db)
        .await?;
    Ok(r.rows_affected)
}

/// The ids of at most `size` rows of `E` matching `which`.
async fn batch_ids<E: EntityTrait>(
    db: &DatabaseConnection,
    id: E::Column,
    which: Condition,
    size: u64,
) -> Result<Vec<Uuid>, DbErr> {
    E::find().select_only().column(id).filter(which).limit(size).into_tuple().all(db).await
}

/// Deletes one batch of at most `size` rows of `E` matching `which`; the rows deleted.
async fn delete_batch<E: EntityTrait>(
    db: &DatabaseConnection,
    id: E::Column,
    which: Condition,
    size: u64,
) -> Result<u64, DbErr> {
    let ids = batch_ids::<E>(db, id, which, size).await?;
    if ids.is_empty() {
        return Ok(0);
    }
    Ok(E::delete_many().filter(id.is_in(ids)).exec(db).await?.rows_affected)
}

async fn sessions(db: &DatabaseConnection, cutoff: DateTime<Utc>, size: u64) -> Result<u64, DbErr> {
    use dashboard_session::Column as C;
    let ended = Condition::any().add(C::ExpiresAt.lt(cutoff)).add(C::RevokedAt.lt(cutoff));
    delete_batch::<dashboard_session::Entity>(db, C::Id, ended, size).await
}

async fn invitations(db: &DatabaseConnection, cutoff: DateTime<Utc>, size: u64) -> Result<u64, DbErr> {
    use dashboard_invitation::Column as C;
    let ended = Condition::all()
        .add(C::AcceptedAt.is_null())
        .add(Condition::any().add(C::ExpiresAt.lt(cutoff)).add(C::RevokedAt.lt(cutoff)));
    delete_batch::<dashboard_invitation::Entity>(db, C::Id, ended, size).await
}
