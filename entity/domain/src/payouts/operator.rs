//! Operator commands on payouts (`ops payouts approve|reject|fail|replace|stuck`).

use chrono::{Duration, Utc};
use entity::{PayoutId, PayoutStatus, PayoutTrigger, payout};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use super::lifecycle::{Judged, ReleaseError, end_guarded, end_with_release, insert_replacement};
use super::service::settings;

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("payout {0} not found")]
    NotFound(PayoutId),
    #[error("payout {id} is {status}, not pending_approval")]
    WrongStatus { id: Uuid, status: &'static str },
    #[error("{0}")]
    Failed(String),
}

impl From<ReleaseError> for OperatorError {
    fn from(e: ReleaseError) -> Self {
        OperatorError::Failed(e.to_string())
    }
}

impl From<sea_orm::DbErr> for OperatorError {
    fn from(e: sea_orm::DbErr) -> Self {
        OperatorError::Failed(e.to_string())
    }
}

/// A payout by id, for operator commands.
pub async fn load(db: &impl ConnectionTrait, id: PayoutId) -> Result<payout::Model, OperatorError> {
    payout::Entity::find_by_id(id).one(db).await?.ok_or(OperatorError::NotFound(id))
}

/// Operator approval (`ops payouts approve`): `executable_at` = now + the merchant's delay.
pub async fn approve(db: &impl ConnectionTrait, id: PayoutId) -> Result<payout::Model, OperatorError> {
    let p = load(db, id).await?;
    let wrong = |p: &payout::Model| OperatorError::WrongStatus { id: id.into(), status: p.status.as_str() };
    let Some(next) = p.status.on(PayoutTrigger::Approve) else { return Err(wrong(&p)) };
    let delay = settings(db, p.merchant_id.into(), p.environment).await?.payout_delay_secs;
    let now = Utc::now();
    let res = payout::Entity::update_many()
        .col_expr(payout::Column::Status, Expr::value(next.as_str()))
        .col_expr(payout::Column::ApprovedAt, Expr::value(now))
        .col_expr(payout::Column::ExecutableAt, Expr::value(now + Duration::seconds(delay)))
        .col_expr(payout::Column::UpdatedAt, Expr::value(now))
        .filter(payout::Column::Id.eq(id))
        .filter(payout::Column::Status.eq(p.status))
        .exec(db)
        .await?;
    let after = load(db, id).await?;
    if res.rows_affected == 0 {
        return Err(wrong(&after));
    }
    Ok(after)
}

/// Operator rejection (`ops payouts reject`): `failed` with the reason; reservation released.
pub async fn reject(db: &impl crate::db::WriteDb, id: PayoutId, reason: &str) -> Result<payout::Model, OperatorError> {
    let p = load(db, id).await?;
    match end_with_release(db, &p, PayoutTrigger::Reject, Some(&format!("rejected by operator: {reason}"))).await? {
        Some(after) => Ok(after),
        None => Err(OperatorError::WrongStatus { id: id.into(), status: load(db, id).await?.status.as_str() }),
    }
}

/// What the gate's node said of a payout's signed transaction when the operator asked to fail
/// the payout: it can provably never be mined (read by the caller, before any write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadTx {
    /// The transaction the node was asked about.
    pub tx_hash: String,
    /// Why it can never be mined (expired past its window, its nonce or inputs used by another
    /// transaction at depth, failed at depth).
    pub why: String,
}

/// Operator failure (`ops payouts fail`) of an `approved`, `queued` or `processing` payout:
/// `failed` with the operator's reason, reservation released (a refund follows),
/// `payout.failed` emitted. Allowed when nothing was signed for it, or when its signed
/// transaction is provably dead (`dead`, what the gate's node said of exactly the transaction
/// the payout holds). A payout whose transaction may still be mined is refused. Guarded on the
/// transaction judged: if the executor signed another one meanwhile, nothing is done.
pub async fn fail(
    db: &impl crate::db::WriteDb,
    id: PayoutId,
    reason: &str,
    dead: Option<&DeadTx>,
) -> Result<payout::Model, OperatorError> {
    let p = load(db, id).await?;
    if !matches!(p.status, PayoutStatus::Approved | PayoutStatus::Queued | PayoutStatus::Processing) {
        return Err(OperatorError::Failed(format!(
            "payout {id} is {}; only approved, queued or processing payouts can be failed",
            p.status.as_str()
        )));
    }
    let (judged, reason) = match (p.tx_hash.as_deref().filter(|_| p.signed_tx.is_some()), dead) {
        (None, _) => (Judged::Unsigned, format!("failed by operator: {reason}")),
        (Some(hash), Some(d)) if d.tx_hash == hash => {
            (Judged::Tx(hash), format!("failed by operator: {reason} (transaction {hash}: {})", d.why))
        }
        (Some(hash), _) => {
            return Err(OperatorError::Failed(format!(
                "payout {id} has a signed transaction ({hash}) that may still be mined; it can be failed once \
                 the node shows it can never be (expired past its window, its nonce or inputs used by another \
                 transaction at depth); on EVM `ops payouts replace {id}` ends it sooner"
            )));
        }
    };
    match end_guarded(db, &p, PayoutTrigger::Fail, Some(&reason), Some(judged)).await? {
        Some(after) => Ok(after),
        None => {
            let now = load(db, id).await?;
            Err(OperatorError::Failed(format!(
                "payout {id} changed meanwhile (now {}{}); nothing done",
                now.status.as_str(),
                match now.tx_hash.as_deref() {
                    Some(h) if now.signed_tx.is_some() => format!(", transaction {h}"),
                    _ => String::new(),
                }
            )))
        }
    }
}

/// Operator request (`ops payouts replace`) to replace a payout's signed transaction that is
/// not mined: the payout executor sends a zero-value transaction to the hot wallet with the
/// same nonce and a higher fee; once that one is mined to the gate's depth the payout fails and
/// its funds are released (if the original is mined first, the payout completes as usual).
pub async fn request_replace(
    db: &impl crate::db::WriteDb,
    id: PayoutId,
) -> Result<entity::payout_replacement::Model, OperatorError> {
    let p = load(db, id).await?;
    let replaceable = matches!(p.status, PayoutStatus::Queued | PayoutStatus::Processing) && p.signed_tx.is_some();
    if !replaceable {
        return Err(OperatorError::Failed(format!(
            "payout {id} is {}{}; only a queued or processing payout with a signed transaction can be replaced",
            p.status.as_str(),
            if p.signed_tx.is_none() { " without a signed transaction (use `ops payouts fail`)" } else { "" }
        )));
    }
    // Only a transaction ordered by an account nonce (EVM) can be displaced by another one.
    if p.signed_tx.as_deref().and_then(crate::chain::evm_tx::signed_terms).is_none() {
        return Err(OperatorError::Failed(format!(
            "payout {id} on {}: its transaction has no account nonce, so it cannot be replaced",
            p.gate_id
        )));
    }
    insert_replacement(db, id, "replaced by operator: transaction not mined").await?;
    entity::payout_replacement::Entity::find_by_id(id)
        .one(db)
        .await?
        .ok_or_else(|| OperatorError::Failed("replacement request vanished".into()))
}

/// Payouts in `queued` or `processing` that have waited longer than `older_than` since their
/// broadcast (or, never accepted by a node, since they were queued), signed or not, oldest
/// first: the candidates of `ops payouts stuck` (which asks the chain why each one waits).
pub async fn stuck_candidates(
    db: &sea_orm::DatabaseConnection,
    older_than: Duration,
) -> Result<Vec<payout::Model>, sea_orm::DbErr> {
    use sea_orm::sea_query::Condition;
    let before = Utc::now() - older_than;
    payout::Entity::find()
        .filter(
            Condition::any()
                .add(
                    Condition::all()
                        .add(payout::Column::Status.eq(PayoutStatus::Processing))
                        .add(payout::Column::BroadcastAt.lt(before)),
                )
                .add(
                    Condition::all()
                        .add(payout::Column::Status.eq(PayoutStatus::Queued))
                        .add(payout::Column::QueuedAt.lt(before)),
                ),
        )
        .order_by_asc(payout::Column::QueuedAt)
        .all(db)
        .await
}
