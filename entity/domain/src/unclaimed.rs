//! Unclaimed deposits for the operator (`ops deposits`): money that reached an address of ours
//! but credits no invoice (recorded by the deposit scanner: an untagged XRP payment, another
//! asset sent to a deposit address). The tracker follows each on its chain; the operator returns
//! the money by hand and marks it resolved. A reorganisation can remove a transfer, so one is
//! refundable only once the chain showed it at its gate's confirmations and it is not missing
//! since; until then resolving it is refused, and one gone from the chain has nothing to return.

use chrono::Utc;
use entity::{Environment, UnclaimedDepositId, UnclaimedStatus, unclaimed_deposit};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

use crate::audit::{Entry, record};

/// The confirmations the deposit's gate requires before its money may be returned.
pub fn required_confirmations(d: &unclaimed_deposit::Model) -> i32 {
    crate::gates::find(&d.gate_id).map_or(i32::MAX, |g| i32::try_from(g.confirmations).unwrap_or(i32::MAX))
}

/// Why the deposit's money may not be returned now, or `None` when it may: at its gate's
/// confirmations (`confirmed`, `final`), not missing from the chain since, not resolved.
pub fn not_refundable(d: &unclaimed_deposit::Model) -> Option<String> {
    if let Some(at) = d.resolved_at {
        return Some(format!("unclaimed deposit {} was resolved at {}", d.id, at.to_rfc3339()));
    }
    let missing = |since: i64| {
        format!(
            "unclaimed deposit {} is missing from the {} chain since block {since}: not refundable while the chain \
             does not show it",
            d.id, d.gate_id
        )
    };
    match d.status {
        UnclaimedStatus::Confirmed | UnclaimedStatus::Final => d.missing_since_height.map(missing),
        UnclaimedStatus::Confirming => Some(d.missing_since_height.map_or_else(
            || {
                format!(
                    "unclaimed deposit {} has {} of the {} confirmations {} requires: a reorganisation can still \
                     remove it; return it once it is confirmed",
                    d.id,
                    d.confirmations.max(0),
                    required_confirmations(d),
                    d.gate_id
                )
            },
            missing,
        )),
        UnclaimedStatus::Gone => Some(format!(
            "unclaimed deposit {} is gone from the {} chain (reorganised away or never final): there is nothing to \
             return",
            d.id, d.gate_id
        )),
    }
}

/// The deposit as `ops deposits unclaimed --json` shows it and the audit log records it.
pub fn to_json(d: &unclaimed_deposit::Model) -> Value {
    json!({
        "id": d.id, "environment": d.environment.as_str(), "gate": d.gate_id, "tx_hash": d.tx_hash,
        "output_index": d.output_index, "address_key": d.address_key, "amount": d.amount.0.to_string(),
        "block_height": d.block_height, "reason": d.reason.as_str(), "seen_at": d.seen_at.to_rfc3339(),
        "status": d.status.as_str(), "confirmations": d.confirmations,
        "required_confirmations": required_confirmations(d), "missing_since_height": d.missing_since_height,
        "refundable": not_refundable(d).is_none(),
        "resolved_at": d.resolved_at.map(|t| t.to_rfc3339()), "resolution": d.resolution,
    })
}

/// Unclaimed deposits, oldest first: the unresolved ones still on the chain (`gone` ones have
/// nothing to return), or with `all` every one.
pub async fn list(
    db: &DatabaseConnection,
    env: Option<Environment>,
    all: bool,
) -> Result<Vec<unclaimed_deposit::Model>, DbErr> {
    let mut q = unclaimed_deposit::Entity::find().order_by_asc(unclaimed_deposit::Column::SeenAt);
    if let Some(env) = env {
        q = q.filter(unclaimed_deposit::Column::Environment.eq(env));
    }
    if !all {
        q = q
            .filter(unclaimed_deposit::Column::ResolvedAt.is_null())
            .filter(unclaimed_deposit::Column::Status.ne(UnclaimedStatus::Gone));
    }
    q.all(db).await
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("--reason must not be empty")]
    EmptyReason,
    #[error("no unclaimed deposit {0}")]
    NotFound(UnclaimedDepositId),
    #[error("unclaimed deposit {0} is already resolved")]
    AlreadyResolved(UnclaimedDepositId),
    /// Not at its gate's confirmations, missing or gone: why.
    #[error("{0}")]
    NotRefundable(String),
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// Marks a deposit resolved (its money returned, or otherwise accounted for) with `reason`, and
/// its audit row (`deposit.resolve`), in one transaction; refused for one that is not refundable
/// ([`not_refundable`]). The update is guarded on what made it refundable: of two operators one
/// resolves it, and a tracker that found it missing meanwhile wins (the deposit is read again).
pub async fn resolve(
    db: &DatabaseConnection,
    id: UnclaimedDepositId,
    reason: &str,
    actor: &str,
) -> Result<unclaimed_deposit::Model, ResolveError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(ResolveError::EmptyReason);
    }
    loop {
        if let Some(after) = try_resolve(db, id, reason, actor).await? {
            return Ok(after);
        }
    }
}

/// One attempt of [`resolve`]: `Ok(None)` when the deposit changed between the read and the
/// guarded update (nothing written; read it again).
async fn try_resolve(
    db: &DatabaseConnection,
    id: UnclaimedDepositId,
    reason: &str,
    actor: &str,
) -> Result<Option<unclaimed_deposit::Model>, ResolveError> {
    let txn = crate::db::begin_write(db).await?;
    let before = unclaimed_deposit::Entity::find_by_id(id).one(&txn).await?.ok_or(ResolveError::NotFound(id))?;
    if before.resolved_at.is_some() {
        return Err(ResolveError::AlreadyResolved(id));
    }
    if let Some(why) = not_refundable(&before) {
        return Err(ResolveError::NotRefundable(why));
    }
    let after = unclaimed_deposit::Entity::update_many()
        .col_expr(unclaimed_deposit::Column::ResolvedAt, Expr::value(Utc::now()))
        .col_expr(unclaimed_deposit::Column::Resolution, Expr::value(reason))
        .filter(unclaimed_deposit::Column::Id.eq(id))
        .filter(unclaimed_deposit::Column::ResolvedAt.is_null())
        .filter(unclaimed_deposit::Column::Status.eq(before.status))
        .filter(unclaimed_deposit::Column::MissingSinceHeight.is_null())
        .exec_with_returning(&txn)
        .await?;
    let Some(after) = after.into_iter().next() else {
        txn.rollback().await?;
        return Ok(None);
    };
    let entry = Entry::new(actor, "deposit.resolve", "unclaimed_deposit", id)
        .change(Some(to_json(&before)), Some(to_json(&after)))
        .reason(Some(reason));
    record(&txn, entry).await?;
    txn.commit().await?;
    Ok(Some(after))
}
