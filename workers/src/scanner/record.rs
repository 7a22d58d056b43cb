//! What a scan's transfers write, in the scan's transaction: a payment per matching transfer
//! (exactly once), the invoices' moves to `confirming`, the `pending` balance postings, and an
//! unclaimed deposit for money of ours that credits nobody.

use std::collections::{HashMap, HashSet};

use chrono::{Duration, Utc};
use entity::{
    Amount, Environment, InvoiceId, InvoiceStatus, UnclaimedReason, UnclaimedStatus, UnclaimedTrigger, invoice,
    payment, static_address, unclaimed_deposit,
};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use uuid::Uuid;

use super::deposit::{Recorded, invoice_sees_deposit, post_seen};
use super::depth;
use super::revive::revive;
use crate::chain::{Chain, Transfer};
use crate::pipeline::PipelineError;
use domain::events::{self, EventKind};

/// Where a scan saw its transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    /// In blocks: their heights are the chain's.
    InBlock,
    /// In the mempool: their height is a guess (the next block).
    InMempool,
}

impl Seen {
    /// Where a transfer of a scan at `tip` stands: the block a payment records (none for one
    /// still in the mempool, whose block is not known: the scan that reads it in a block sets
    /// it) and its depth ([`depth`]: 0 in the mempool).
    fn at(self, chain: &dyn Chain, tip: u64, t: &Transfer) -> (Option<i64>, i32) {
        match self {
            Seen::InBlock => (i64::try_from(t.block_height).ok(), depth(chain, tip, t.block_height)),
            Seen::InMempool => (None, 0),
        }
    }
}

/// Matches the batch's transfers to watched addresses (one `IN` lookup on the unique
/// `address_key` indexes per table, whatever the number of watched addresses) and records them.
/// A transfer that reached an address of ours but matches no invoice of its gate (another
/// asset or network sent to a deposit address; where [`Chain::transfers_are_ours`], every
/// transfer the chain returned was sent to us, so one matching nothing is money nobody is
/// credited for) is recorded as an unclaimed deposit for the operator.
pub(super) async fn record_transfers<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    chain: &dyn Chain,
    tip: u64,
    transfers: &[Transfer],
    seen: Seen,
) -> Result<Vec<Uuid>, PipelineError> {
    let (gate_id, ours) = (chain.gate().id, chain.transfers_are_ours());
    let keys: Vec<&str> =
        transfers.iter().map(|t| t.address_key.as_str()).collect::<HashSet<_>>().into_iter().collect();
    let mut invoices: HashMap<String, Payee> = HashMap::new();
    let mut statics: HashMap<String, static_address::Model> = HashMap::new();
    for chunk in keys.chunks(500) {
        for (key, inv) in Payee::by_address_keys(txn, env, chunk).await? {
            invoices.insert(key, inv);
        }
        for a in static_address::Entity::find()
            .filter(static_address::Column::Environment.eq(env))
            .filter(static_address::Column::AddressKey.is_in(chunk.iter().copied()))
            .all(txn)
            .await?
        {
            statics.insert(a.address_key.clone(), a);
        }
    }
    let mut matched = Vec::with_capacity(transfers.len());
    for t in transfers {
        let target = match (invoices.get(&t.address_key), statics.get(&t.address_key)) {
            (Some(inv), _) if inv.gate_id.as_deref() == Some(gate_id) => inv.clone(),
            (None, Some(a)) if a.gate_id == gate_id => Payee::from(static_invoice(txn, a, t).await?),
            // Another asset or network sent to one of our addresses: no deposit of this gate.
            (Some(_), _) | (None, Some(_)) => {
                let seen_as = (seen.at(chain, tip, t).1, seen);
                unclaimed(txn, env, gate_id, t, UnclaimedReason::OtherGate, seen_as).await?;
                continue;
            }
            (None, None) if ours => {
                let seen_as = (seen.at(chain, tip, t).1, seen);
                unclaimed(txn, env, gate_id, t, UnclaimedReason::NoInvoice, seen_as).await?;
                continue;
            }
            // Not ours.
            (None, None) => continue,
        };
        matched.push(Matched::new(target, t, seen.at(chain, tip, t))?);
    }
    // All new payments in a few multi-row inserts; a transfer recorded before (a rescan, a
    // replay, a payment the chain took back and gave again) is looked at one by one.
    let inserted = insert_payments(txn, &matched).await?;
    let mut recorded = Vec::new();
    let mut fresh = Vec::with_capacity(inserted.len());
    for m in matched {
        if inserted.contains(&m.payment.id) {
            fresh.push(m);
            continue;
        }
        let at = seen.at(chain, tip, m.transfer);
        if let (Some(height), confirmations) = at {
            settle_height(txn, env, gate_id, m.transfer, height, confirmations).await?;
        }
        if let Some(r) = revive(txn, env, gate_id, m.transfer, at).await? {
            recorded.push(r);
        }
    }
    invoices_see_deposits(txn, &fresh).await?;
    recorded.extend(fresh.iter().map(|m| Recorded {
        merchant_id: m.invoice.merchant_id,
        payment_id: m.payment.id,
        amount: m.payment.amount.0,
    }));
    // Balances last, in a fixed order: every writer takes invoice rows before balance rows. One
    // posting call per merchant: its balance row is locked and written once for the batch.
    recorded.sort_by_key(|s| (s.merchant_id, s.payment_id));
    for same_merchant in recorded.chunk_by(|a, b| a.merchant_id == b.merchant_id) {
        post_seen(txn, env, gate_id, same_merchant).await?;
    }
    Ok(recorded.into_iter().map(|s| s.payment_id).collect())
}

/// What recording a deposit reads of the invoice it pays: the lookup by address reads these
/// columns alone (by position), not the whole row; whatever else a rare path needs (an invoice
/// the batch's guarded update did not move) it reads again.
#[derive(Debug, Clone)]
struct Payee {
    id: Uuid,
    merchant_id: Uuid,
    environment: Environment,
    gate_id: Option<String>,
    status: InvoiceStatus,
}

impl Payee {
    /// The invoices of `env` watching `keys` (one `IN` lookup on the unique `address_key`
    /// index), by address key.
    async fn by_address_keys<C: ConnectionTrait>(
        txn: &C,
        env: Environment,
        keys: &[&str],
    ) -> Result<Vec<(String, Self)>, PipelineError> {
        /// Address key, id, merchant, gate, status: the columns the lookup reads, in order.
        type Row = (Option<String>, Uuid, Uuid, Option<String>, InvoiceStatus);
        let rows: Vec<Row> = invoice::Entity::find()
            .select_only()
            .columns([
                invoice::Column::AddressKey,
                invoice::Column::Id,
                invoice::Column::MerchantId,
                invoice::Column::GateId,
                invoice::Column::Status,
            ])
            .filter(invoice::Column::Environment.eq(env))
            .filter(invoice::Column::AddressKey.is_in(keys.iter().copied()))
            .into_tuple()
            .all(txn)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(key, id, merchant_id, gate_id, status)| {
                Some((key?, Self { id, merchant_id, environment: env, gate_id, status }))
            })
            .collect())
    }
}

impl From<invoice::Model> for Payee {
    fn from(inv: invoice::Model) -> Self {
        Self {
            id: inv.id,
            merchant_id: inv.merchant_id,
            environment: inv.environment,
            gate_id: inv.gate_id,
            status: inv.status,
        }
    }
}

/// A transfer matched to the invoice it pays, with the payment that records it.
struct Matched<'a> {
    invoice: Payee,
    payment: payment::Model,
    transfer: &'a Transfer,
}

impl<'a> Matched<'a> {
    /// `(block_height, confirmations)`: where the scan saw the transfer ([`Seen::at`]).
    fn new(
        invoice: Payee,
        t: &'a Transfer,
        (block_height, confirmations): (Option<i64>, i32),
    ) -> Result<Self, PipelineError> {
        let gate_id = invoice.gate_id.clone().ok_or_else(|| PipelineError::Invariant("invoice without gate".into()))?;
        let gate = domain::gates::find(&gate_id).ok_or_else(|| PipelineError::Invariant("unknown gate".into()))?;
        let now = Utc::now();
        let payment = payment::Model {
            confirmations,
            required_confirmations: gate.confirmations as i32,
            block_height,
            // Seen now: the tracker takes it when a scan completes its confirmations (or the
            // sweeper, if that hand-over is lost).
            checked_at: Some(now),
            ..payment::Model::detected(
                invoice.id,
                invoice.environment,
                gate_id,
                t.tx_hash.clone(),
                t.output_index,
                Amount::new(t.amount),
                now,
            )
        };
        Ok(Self { invoice, payment, transfer: t })
    }
}

/// Inserts the payments not recorded yet (unique per environment, gate, tx hash and output
/// index; a conflicting row, or a second copy of one transfer in the batch, is skipped) and
/// returns the ids of those inserted.
async fn insert_payments<C: ConnectionTrait>(txn: &C, matched: &[Matched<'_>]) -> Result<HashSet<Uuid>, PipelineError> {
    let rows = matched.iter().map(|m| m.payment.clone()).collect();
    let key =
        [payment::Column::Environment, payment::Column::GateId, payment::Column::TxHash, payment::Column::OutputIndex];
    let ids: Vec<Uuid> =
        domain::bulk::insert_returning::<payment::Entity, _, _>(txn, rows, &key, payment::Column::Id).await?;
    Ok(ids.into_iter().collect())
}

/// New payments move their `pending` invoices to `confirming`, each with the first of its new
/// payments as the cause of `invoice.confirming`: one guarded update for the batch (`WHERE
/// status = 'pending'`, within the payment window) and one multi-row event insert. An invoice
/// the update did not move (past its window, or moved by another writer since it was read) is
/// looked at again on its own.
async fn invoices_see_deposits<C: ConnectionTrait>(txn: &C, fresh: &[Matched<'_>]) -> Result<(), PipelineError> {
    let mut causes: HashMap<Uuid, &Matched<'_>> = HashMap::new();
    for m in fresh.iter().filter(|m| m.invoice.status == InvoiceStatus::Pending) {
        causes.entry(m.invoice.id).or_insert(m);
    }
    let ids: Vec<InvoiceId> = causes.keys().copied().map(InvoiceId::from).collect();
    let moved = domain::invoices::lifecycle::see_deposits(txn, &ids, Utc::now()).await?;
    let events: Vec<_> = moved
        .into_iter()
        .filter_map(|after| causes.remove(&after.id).map(|m| (EventKind::InvoiceConfirming, after, Some(&m.payment))))
        .collect();
    events::emit_invoices(txn, &events).await?;
    // Not moved: past the window (expired first, a late deposit) or no longer pending.
    let mut rest: Vec<&Matched<'_>> = causes.into_values().collect();
    rest.sort_by_key(|m| m.payment.id);
    for m in rest {
        invoice_sees_deposit(txn, &m.payment).await?;
    }
    Ok(())
}

/// `ON CONFLICT DO NOTHING` on a table's one-row-per-transfer key (environment, gate, tx hash,
/// output index): a rescan or replay finds the row there and writes nothing.
fn once_per_transfer<C: sea_orm::sea_query::IntoIden>(key: [C; 4]) -> OnConflict {
    OnConflict::columns(key).do_nothing().to_owned()
}

/// Records money that reached us but credits nobody, once per transfer (rescans and replays
/// find the row already there), at the depth the scan saw it (`confirmations`: `confirming`
/// until the tracker, which follows it, sees it at the gate's depth), and tells the operator
/// the first time. A transfer recorded before and read in a block again takes that block's
/// height while still short of its depth, and is followed again if it was gone.
async fn unclaimed<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    t: &Transfer,
    reason: UnclaimedReason,
    (confirmations, seen): (i32, Seen),
) -> Result<(), PipelineError> {
    let row = unclaimed_deposit::Model {
        id: Uuid::now_v7(),
        environment: env,
        gate_id: gate_id.to_owned(),
        tx_hash: t.tx_hash.clone(),
        output_index: t.output_index,
        address_key: t.address_key.clone(),
        amount: Amount(t.amount),
        block_height: i64::try_from(t.block_height).unwrap_or(i64::MAX),
        reason,
        seen_at: Utc::now(),
        status: UnclaimedStatus::Confirming,
        confirmations,
        checked_at: None,
        missing_since_height: None,
        missing_last_height: None,
        missing_checks: 0,
        resolved_at: None,
        resolution: None,
    };
    let inserted = unclaimed_deposit::Entity::insert(unclaimed_deposit::ActiveModel::from(row))
        .on_conflict(once_per_transfer([
            unclaimed_deposit::Column::Environment,
            unclaimed_deposit::Column::GateId,
            unclaimed_deposit::Column::TxHash,
            unclaimed_deposit::Column::OutputIndex,
        ]))
        .exec_without_returning(txn)
        .await?;
    if inserted > 0 {
        metrics::counter!("paygate_unclaimed_deposits_total", "gate" => gate_id.to_owned(), "reason" => reason.as_str())
            .increment(1);
        tracing::warn!(%env, gate = gate_id, tx_hash = %t.tx_hash, output_index = t.output_index,
            address_key = %t.address_key, amount = %t.amount, %reason,
            "money reached an address of ours but credits no invoice; see `ops deposits unclaimed` and refund it by hand");
    } else if seen == Seen::InBlock {
        seen_in_block(txn, env, gate_id, t, confirmations).await?;
    }
    Ok(())
}

/// An unclaimed deposit recorded before, read in block `t.block_height` again: one still short of
/// its depth (first seen in the mempool, or moved by a reorganisation) takes that block's height
/// and depth; a gone one is followed again from there (`SeenAgain`). Guarded on its status.
async fn seen_in_block<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    t: &Transfer,
    confirmations: i32,
) -> Result<(), PipelineError> {
    let height = i64::try_from(t.block_height).unwrap_or(i64::MAX);
    let row = || {
        unclaimed_deposit::Entity::update_many()
            .col_expr(unclaimed_deposit::Column::BlockHeight, Expr::value(height))
            .col_expr(unclaimed_deposit::Column::Confirmations, Expr::value(confirmations))
            .filter(unclaimed_deposit::Column::Environment.eq(env))
            .filter(unclaimed_deposit::Column::GateId.eq(gate_id))
            .filter(unclaimed_deposit::Column::TxHash.eq(&t.tx_hash))
            .filter(unclaimed_deposit::Column::OutputIndex.eq(t.output_index))
    };
    row()
        .filter(unclaimed_deposit::Column::Status.eq(UnclaimedStatus::Confirming))
        .filter(unclaimed_deposit::Column::BlockHeight.ne(height))
        .exec(txn)
        .await?;
    if let Some(next) = UnclaimedStatus::Gone.on(UnclaimedTrigger::SeenAgain) {
        let revived = row()
            .col_expr(unclaimed_deposit::Column::Status, Expr::value(next.as_str()))
            .col_expr(unclaimed_deposit::Column::MissingSinceHeight, Expr::value(Option::<i64>::None))
            .col_expr(unclaimed_deposit::Column::MissingLastHeight, Expr::value(Option::<i64>::None))
            .col_expr(unclaimed_deposit::Column::MissingChecks, Expr::value(0))
            .filter(unclaimed_deposit::Column::Status.eq(UnclaimedStatus::Gone))
            .exec(txn)
            .await?;
        if revived.rows_affected > 0 {
            tracing::info!(%env, gate = gate_id, tx_hash = %t.tx_hash, "unclaimed deposit back on chain; followed again");
        }
    }
    Ok(())
}

/// The invoice a static address deposit creates: one per transfer, with an id derived from the
/// transfer so a replayed scan finds the same invoice instead of making another.
async fn static_invoice<C: ConnectionTrait>(
    txn: &C,
    a: &static_address::Model,
    t: &Transfer,
) -> Result<invoice::Model, PipelineError> {
    let name = format!("{}:{}:{}:{}", a.environment.as_str(), a.gate_id, t.tx_hash, t.output_index);
    let id = Uuid::new_v5(&Uuid::NAMESPACE_OID, name.as_bytes());
    if let Some(existing) = invoice::Entity::find_by_id(id).one(txn).await? {
        return Ok(existing);
    }
    let now = Utc::now();
    let inv = invoice::Model {
        gate_id: Some(a.gate_id.clone()),
        currency: Some(a.currency.clone()),
        network: Some(a.network.clone()),
        amount_requested: Some(Amount::new(t.amount)),
        deposit_address: Some(a.address.clone()),
        deposit_address_tag: a.address_tag.clone(),
        derivation_index: Some(a.derivation_index),
        description: a.label.clone(),
        source: "static_address".into(),
        static_address_id: Some(a.id),
        expires_at: Some(now + Duration::days(3650)),
        // No address_key: the static address keeps the lookup key; this invoice is found through it.
        ..invoice::Model::blank(id, a.merchant_id, a.environment, now)
    };
    let inserted = invoice::Entity::insert(invoice::ActiveModel::from(inv.clone()))
        .on_conflict(OnConflict::column(invoice::Column::Id).do_nothing().to_owned())
        .exec_without_returning(txn)
        .await?;
    if inserted == 1 {
        static_address::Entity::update_many()
            .col_expr(
                static_address::Column::InvoiceCount,
                sea_orm::sea_query::ExprTrait::add(Expr::col(static_address::Column::InvoiceCount), 1),
            )
            .col_expr(static_address::Column::UpdatedAt, Expr::value(now))
            .filter(static_address::Column::Id.eq(a.id))
            .exec(txn)
            .await?;
    }
    Ok(inv)
}

/// A confirming payment found in block `height`, not the one it was recorded at (first seen in
/// the mempool, at no block, or moved by a reorganisation), takes that block's height and depth
/// (`confirmations`), so its displayed confirmations and the scan's hand-over to the tracker
/// follow the real block.
async fn settle_height<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    t: &Transfer,
    height: i64,
    confirmations: i32,
) -> Result<(), PipelineError> {
    domain::payments::tracking::settle_height(txn, env, gate_id, (&t.tx_hash, t.output_index), height, confirmations)
        .await?;
    Ok(())
}
