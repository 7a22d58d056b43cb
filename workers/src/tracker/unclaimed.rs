//! Unclaimed deposits (money that reached an address of ours but credits no invoice) followed on
//! their chain as payments are: a reorganisation can remove one, so the operator may return it
//! only once the chain shows it at the gate's confirmations (`UnclaimedStatus::deep_enough`, not
//! missing meanwhile). Each look stores the depth the chain reports; the deposit is followed
//! until its final depth (`pipeline::final_depth`), or until it stayed missing over the gate's
//! span of blocks and checks (`gone`: nothing to return). Nothing is credited, so nothing else
//! moves.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use entity::{Environment, UnclaimedStatus, UnclaimedTrigger, unclaimed_deposit};
use sea_orm::sea_query::{Condition, Expr};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::chain::{Chain, Chains, Look, TxStatus};
use crate::pipeline::{PipelineError, final_depth};
use domain::config::PipelineConfig;

/// Most deposits one round looks at (oldest first); the next round continues.
const FOLLOW_LIMIT: u64 = 500;

/// One round: every unresolved unclaimed deposit still followed (`confirming`, `confirmed`) is
/// looked at on its chain, one `Chain::statuses` call per gate, and what the chain says is
/// stored. A failed look changes nothing (the next round looks again). Returns how many were
/// looked at.
pub async fn follow_unclaimed(
    db: &DatabaseConnection,
    chains: &Chains,
    cfg: &PipelineConfig,
) -> Result<usize, PipelineError> {
    let open = unclaimed_deposit::Entity::find()
        .filter(unclaimed_deposit::Column::Status.is_in([UnclaimedStatus::Confirming, UnclaimedStatus::Confirmed]))
        .filter(unclaimed_deposit::Column::ResolvedAt.is_null())
        .order_by_asc(unclaimed_deposit::Column::SeenAt)
        .limit(FOLLOW_LIMIT)
        .all(db)
        .await?;
    let mut by_chain: HashMap<(Environment, String), Vec<unclaimed_deposit::Model>> = HashMap::new();
    for d in open {
        by_chain.entry((d.environment, d.gate_id.clone())).or_default().push(d);
    }
    let mut looked = 0;
    for ((env, gate_id), deposits) in by_chain {
        let Some(chain) = chains.get(env, &gate_id) else { continue };
        looked += deposits.len();
        follow(db, chain.as_ref(), cfg, &deposits).await?;
    }
    Ok(looked)
}

/// One gate's deposits: their looks in one batch, each answer stored.
async fn follow(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    cfg: &PipelineConfig,
    deposits: &[unclaimed_deposit::Model],
) -> Result<(), PipelineError> {
    let started = Utc::now();
    let looks: Vec<Look<'_>> = deposits
        .iter()
        .map(|d| Look {
            tx_hash: &d.tx_hash,
            output_index: d.output_index,
            seen_at: u64::try_from(d.block_height).ok(),
        })
        .collect();
    let answers = chain.statuses(&looks).await;
    let mut tip = None;
    for (d, answer) in deposits.iter().zip(answers) {
        match answer {
            Ok(TxStatus::Confirmations(n)) => seen(db, d, i32::try_from(n).unwrap_or(i32::MAX), started).await?,
            Ok(TxStatus::Gone) => {
                let at = match tip {
                    Some(at) => at,
                    None => match chain.tip().await {
                        Ok(at) => *tip.insert(i64::try_from(at).unwrap_or(i64::MAX)),
                        Err(e) => {
                            tracing::warn!(gate = %d.gate_id, error = %e,
                                "could not read the tip for a missing unclaimed deposit; looked at again next round");
                            continue;
                        }
                    },
                };
                missing(db, chain, cfg, d, at, started).await?;
            }
            Err(e) => {
                tracing::warn!(id = %d.id, gate = %d.gate_id, tx_hash = %d.tx_hash, error = %e,
                    "could not look at an unclaimed deposit; looked at again next round");
            }
        }
    }
    Ok(())
}

/// The guarded update of one look: the row still in the status it was read in, and no look
/// started after this one stored first (two trackers looking at once: the later look wins).
fn guarded(d: &unclaimed_deposit::Model, started: DateTime<Utc>) -> sea_orm::UpdateMany<unclaimed_deposit::Entity> {
    unclaimed_deposit::Entity::update_many()
        .col_expr(unclaimed_deposit::Column::CheckedAt, Expr::value(started))
        .filter(unclaimed_deposit::Column::Id.eq(d.id))
        .filter(unclaimed_deposit::Column::Status.eq(d.status))
        .filter(unclaimed_deposit::Column::ResolvedAt.is_null())
        .filter(
            Condition::any()
                .add(unclaimed_deposit::Column::CheckedAt.is_null())
                .add(unclaimed_deposit::Column::CheckedAt.lt(started)),
        )
}

/// On the chain with `confirmations`: stored, no longer missing, and its status follows its
/// depth (`final` past the final depth: followed no more).
async fn seen(
    db: &DatabaseConnection,
    d: &unclaimed_deposit::Model,
    confirmations: i32,
    started: DateTime<Utc>,
) -> Result<(), PipelineError> {
    let required =
        domain::gates::find(&d.gate_id).map_or(i32::MAX, |g| i32::try_from(g.confirmations).unwrap_or(i32::MAX));
    let trigger = if confirmations >= final_depth(&d.gate_id, required) {
        UnclaimedTrigger::Settled
    } else if confirmations >= required {
        UnclaimedTrigger::Deep
    } else {
        UnclaimedTrigger::Shallow
    };
    let Some(next) = d.status.on(trigger) else { return Ok(()) };
    guarded(d, started)
        .col_expr(unclaimed_deposit::Column::Status, Expr::value(next.as_str()))
        .col_expr(unclaimed_deposit::Column::Confirmations, Expr::value(confirmations))
        .col_expr(unclaimed_deposit::Column::MissingSinceHeight, Expr::value(Option::<i64>::None))
        .col_expr(unclaimed_deposit::Column::MissingLastHeight, Expr::value(Option::<i64>::None))
        .col_expr(unclaimed_deposit::Column::MissingChecks, Expr::value(0))
        .exec(db)
        .await?;
    Ok(())
}

/// Missing at tip `tip`: not refundable while missing; `gone` once it stayed missing over the
/// chain's span of blocks (`[pipeline] gone_after_blocks`, else `Chain::gone_span`) on at least
/// `gone_min_checks` looks at distinct tips, as a payment is reversed (at once where the chain's
/// `Gone` is final: the sandbox).
async fn missing(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    cfg: &PipelineConfig,
    d: &unclaimed_deposit::Model,
    tip: i64,
    started: DateTime<Utc>,
) -> Result<(), PipelineError> {
    let (since, checks) = match (d.missing_since_height, d.missing_last_height) {
        (Some(since), Some(last)) if tip <= last => (since, d.missing_checks),
        (Some(since), _) => (since, d.missing_checks.saturating_add(1)),
        (None, _) => (tip, 1),
    };
    let span = i64::try_from(cfg.gone_after_blocks.unwrap_or_else(|| chain.gone_span())).unwrap_or(i64::MAX);
    let min_checks = i32::try_from(cfg.gone_min_checks.max(1)).unwrap_or(i32::MAX);
    let vanished = chain.gone_is_final() || (checks >= min_checks && tip.saturating_sub(since) >= span);
    let mut update = guarded(d, started)
        .col_expr(unclaimed_deposit::Column::MissingSinceHeight, Expr::value(since))
        .col_expr(unclaimed_deposit::Column::MissingLastHeight, Expr::value(tip))
        .col_expr(unclaimed_deposit::Column::MissingChecks, Expr::value(checks));
    if vanished && let Some(next) = d.status.on(UnclaimedTrigger::Vanished) {
        update = update.col_expr(unclaimed_deposit::Column::Status, Expr::value(next.as_str()));
        tracing::info!(id = %d.id, gate = %d.gate_id, tx_hash = %d.tx_hash, since, checks,
            "unclaimed deposit gone from the chain: nothing to return");
    }
    update.exec(db).await?;
    Ok(())
}
