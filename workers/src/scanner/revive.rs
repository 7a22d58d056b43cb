//! A reversed payment whose transfer is on the chain again (a reorganisation back to the fork
//! that holds it, or the transaction mined again) is recorded again as if new.

use chrono::Utc;
use entity::{Environment, payment};
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait};

use super::deposit::{Recorded, invoice_sees_deposit, post_seen};
use crate::chain::Transfer;
use crate::pipeline::PipelineError;
use domain::payments::lifecycle;

/// The tracker's side of a revival: a reversed payment's transaction is on the chain again in
/// block `block_height`, possibly one the scanner has passed (a reorganisation switched back to
/// the fork that holds it), with `confirmations` as the chain reports them. Revives it as the
/// scanner would, in one transaction. Returns whether it was revived (`false`: it was not
/// reversed any more).
pub(crate) async fn revive_on_chain(
    db: &DatabaseConnection,
    p: &payment::Model,
    block_height: u64,
    confirmations: i32,
) -> Result<bool, PipelineError> {
    let t = Transfer {
        tx_hash: p.tx_hash.clone(),
        output_index: p.output_index,
        address_key: String::new(),
        amount: p.amount.0,
        block_height,
    };
    let txn = domain::db::begin_write(db).await?;
    let at = (i64::try_from(block_height).ok(), confirmations);
    let Some(seen) = revive(&txn, p.environment, &p.gate_id, &t, at).await? else {
        txn.rollback().await?;
        return Ok(false);
    };
    post_seen(&txn, p.environment, &p.gate_id, std::slice::from_ref(&seen)).await?;
    txn.commit().await?;
    Ok(true)
}

/// A transfer already recorded is seen again. If its payment was reversed (the transaction
/// vanished long enough, then a reorganisation brought it back or it was mined again), the
/// payment is revived: recorded again as if new (`confirming`, its amount back in `pending`,
/// nothing credited: the reversal took back any credit), so it confirms and is credited once
/// more by the usual path, with the usual events. Its invoice follows the PRODUCT.md table: a
/// `pending` one becomes `confirming`; an `invalid` or `expired` one takes it as a late deposit.
/// A conversion record the reversal ended is removed, so the converter quotes it afresh. It is
/// recorded where the scan or the tracker saw it: `(block_height, confirmations)` (no block: in
/// the mempool). `Ok(None)` when the payment is live (nothing to do).
pub(super) async fn revive<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    t: &Transfer,
    (block_height, confirmations): (Option<i64>, i32),
) -> Result<Option<Recorded>, PipelineError> {
    let now = Utc::now();
    let seen = lifecycle::SeenAt { block_height, confirmations };
    let revived = lifecycle::revive(txn, env, gate_id, (&t.tx_hash, t.output_index), seen, now).await?;
    let Some(p) = revived else { return Ok(None) };
    tracing::info!(payment_id = %p.id, tx_hash = %p.tx_hash, "reversed deposit is on chain again; revived");
    entity::settlement_conversion::Entity::delete_by_id(p.id).exec(txn).await?;
    let inv = invoice_sees_deposit(txn, &p).await?;
    Ok(Some(Recorded { merchant_id: inv.merchant_id, payment_id: p.id, amount: p.amount.0 }))
}
