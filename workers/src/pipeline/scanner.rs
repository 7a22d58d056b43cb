//! Deposit scanner: reads each gate's new blocks in bounded batches, matches every transfer to
//! invoice and static addresses with one indexed lookup per batch, and records each matching
//! transfer as a payment exactly once (unique per environment, gate, tx hash and output index).
//! Recording happens in one transaction with the cursor move, the `pending` balance posting and
//! the invoice's `confirming` transition.

use std::collections::{HashMap, HashSet};

use chrono::{Duration, Utc};
use entity::{
    Amount, Bucket, EntryType, Environment, InvoiceStatus, InvoiceTrigger, PaymentStatus, UnclaimedReason, invoice,
    payment, scan_cursor, static_address, unclaimed_deposit,
};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, TryInsertResult};
use uuid::Uuid;

use super::{PipelineError, transition};
use crate::chain::{Chain, Transfer};
use domain::events::{self, kind};
use domain::ledger::{self, Posting};

/// One batch's outcome: the blocks read and the payments newly recorded (to hand to tracking).
#[derive(Debug, Default)]
pub struct ScanReport {
    pub from: u64,
    pub to: u64,
    pub transfers: usize,
    pub recorded: Vec<Uuid>,
}

/// Where a new gate's scan starts: the sandbox from its first block; a live chain at its tip
/// (history before the service watched it holds no invoices).
fn first_height(env: Environment, tip: u64) -> u64 {
    match env {
        Environment::Test => 1,
        Environment::Live => tip,
    }
}

/// Scans at most `batch` blocks after the gate's cursor. `Ok(None)` when there is nothing new.
pub async fn scan_gate(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    env: Environment,
    batch: u64,
) -> Result<Option<ScanReport>, PipelineError> {
    match read_next(db, chain, env, batch).await? {
        Some(read) => record(db, chain, env, read).await,
        None => Ok(None),
    }
}

/// Blocks read from the chain and not recorded yet: `from..=to`, read when the cursor stood at
/// `cursor` (`None`: no cursor yet).
struct Read {
    cursor: Option<i64>,
    from: u64,
    to: u64,
    transfers: Vec<Transfer>,
}

/// Reads the (at most `batch`) blocks after the gate's cursor. `Ok(None)` when there are none.
async fn read_next(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    env: Environment,
    batch: u64,
) -> Result<Option<Read>, PipelineError> {
    let tip = chain.tip().await?;
    let cursor = scan_cursor::Entity::find_by_id((env, chain.gate().id.to_owned())).one(db).await?;
    let from = cursor.as_ref().map_or_else(|| first_height(env, tip), |c| c.next_height as u64);
    read_from(chain, cursor.map(|c| c.next_height), from, tip, batch).await
}

async fn read_from(
    chain: &dyn Chain,
    cursor: Option<i64>,
    from: u64,
    tip: u64,
    batch: u64,
) -> Result<Option<Read>, PipelineError> {
    if from > tip {
        return Ok(None);
    }
    let to = tip.min(from + batch.max(1) - 1);
    let transfers = chain.transfers(from, to).await?;
    Ok(Some(Read { cursor, from, to, transfers }))
}

/// Scans a gate batch after batch, reading the next batch from the chain while the last one is
/// recorded (the two overlap; each batch still commits alone, with its cursor move). The read
/// ahead assumes the cursor where the recorded batch leaves it: if another scanner moved it
/// meanwhile, recording that batch finds the guard failed and writes nothing.
pub struct Scanner<'a> {
    db: &'a DatabaseConnection,
    chain: &'a dyn Chain,
    env: Environment,
    batch: u64,
    ahead: Option<Read>,
}

impl<'a> Scanner<'a> {
    pub fn new(db: &'a DatabaseConnection, chain: &'a dyn Chain, env: Environment, batch: u64) -> Self {
        Self { db, chain, env, batch, ahead: None }
    }

    /// The blocks (`from..=to`) the next call to [`Scanner::next`] records, read from the chain
    /// now if they were not read ahead. `Ok(None)` when there are none.
    pub async fn peek(&mut self) -> Result<Option<(u64, u64)>, PipelineError> {
        if self.ahead.is_none() {
            self.ahead = read_next(self.db, self.chain, self.env, self.batch).await?;
        }
        Ok(self.ahead.as_ref().map(|r| (r.from, r.to)))
    }

    /// Records the next batch. `Ok(None)` when there is nothing new (or another scanner took it).
    pub async fn next(&mut self) -> Result<Option<ScanReport>, PipelineError> {
        self.peek().await?;
        let Some(read) = self.ahead.take() else { return Ok(None) };
        let next_from = read.to + 1;
        let ahead = async {
            let tip = self.chain.tip().await?;
            read_from(self.chain, i64::try_from(next_from).ok(), next_from, tip, self.batch).await
        };
        let (report, ahead) = tokio::join!(record(self.db, self.chain, self.env, read), ahead);
        let report = report?;
        // A failed read ahead is read again at the next call; nothing of it was recorded.
        self.ahead = if report.is_some() { ahead.ok().flatten() } else { None };
        Ok(report)
    }
}

/// Records what `read` holds, moving the cursor past it in the same transaction, guarded by the
/// cursor the read started from. `Ok(None)` when another scanner moved the cursor first.
async fn record(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    env: Environment,
    read: Read,
) -> Result<Option<ScanReport>, PipelineError> {
    let gate = chain.gate();
    let Read { cursor, from, to, transfers } = read;
    let report_len = transfers.len();

    let txn = domain::db::begin_write(db).await?;
    // Move the cursor first, guarded: of two scanners on one range, one wins and the other
    // rolls back everything it did.
    let moved = match cursor {
        Some(next_height) => {
            scan_cursor::Entity::update_many()
                .col_expr(scan_cursor::Column::NextHeight, Expr::value((to + 1) as i64))
                .col_expr(scan_cursor::Column::UpdatedAt, Expr::value(Utc::now()))
                .filter(scan_cursor::Column::Environment.eq(env))
                .filter(scan_cursor::Column::GateId.eq(gate.id))
                .filter(scan_cursor::Column::NextHeight.eq(next_height))
                .exec(&txn)
                .await?
                .rows_affected
        }
        None => {
            let row = scan_cursor::Model {
                environment: env,
                gate_id: gate.id.into(),
                next_height: (to + 1) as i64,
                updated_at: Utc::now(),
            };
            scan_cursor::Entity::insert(scan_cursor::ActiveModel::from(row))
                .on_conflict(
                    OnConflict::columns([scan_cursor::Column::Environment, scan_cursor::Column::GateId])
                        .do_nothing()
                        .to_owned(),
                )
                .exec_without_returning(&txn)
                .await?
        }
    };
    if moved == 0 {
        txn.rollback().await?;
        return Ok(None);
    }
    let recorded = record_transfers(&txn, env, chain, to, &transfers, Seen::InBlock).await?;
    txn.commit().await?;
    // Keep unconfirmed payments' confirmations current for readers while they stay short of
    // the depth they need (one statement per scan; integer arithmetic, not money). A payment
    // these blocks bring to its depth is the tracker's, which confirms it and writes what it
    // reads, possibly at this moment: the two never lock the same rows. Bounded by the payments
    // of the last blocks, not by every payment still waiting for its credit. Outside the
    // transaction: it locks nothing else.
    let depth = sea_orm::sea_query::ExprTrait::sub(Expr::val((to + 1) as i64), Expr::col(payment::Column::BlockHeight));
    payment::Entity::update_many()
        .col_expr(payment::Column::Confirmations, depth.clone())
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate.id))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirming))
        .filter(payment::Column::BlockHeight.lte(to as i64))
        .filter(sea_orm::sea_query::ExprTrait::lt(depth, Expr::col(payment::Column::RequiredConfirmations)))
        .exec(db)
        .await?;
    Ok(Some(ScanReport { from, to, transfers: report_len, recorded }))
}

/// Records the deposits among the transactions that entered the gate's mempool since the last
/// look (adapters that read a mempool: Bitcoin), with 0 confirmations: the invoice shows
/// `confirming` before the first block. Returns the payments newly recorded.
pub async fn scan_pending(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    env: Environment,
) -> Result<Vec<Uuid>, PipelineError> {
    let transfers = chain.pending().await?;
    // Each counts 0 confirmations: its height is the block after the tip it was seen at.
    let Some(tip) = transfers.iter().map(|t| t.block_height.saturating_sub(1)).min() else {
        return Ok(Vec::new());
    };
    let txn = domain::db::begin_write(db).await?;
    let recorded = record_transfers(&txn, env, chain, tip, &transfers, Seen::InMempool).await?;
    txn.commit().await?;
    Ok(recorded)
}

/// Where a scan saw its transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// In blocks: their heights are the chain's.
    InBlock,
    /// In the mempool: their height is a guess (the next block).
    InMempool,
}

/// Matches the batch's transfers to watched addresses (one `IN` lookup on the unique
/// `address_key` indexes per table, whatever the number of watched addresses) and records them.
/// A transfer that reached an address of ours but matches no invoice of its gate (another
/// asset or network sent to a deposit address; where [`Chain::transfers_are_ours`], every
/// transfer the chain returned was sent to us, so one matching nothing is money nobody is
/// credited for) is recorded as an unclaimed deposit for the operator.
async fn record_transfers<C: ConnectionTrait>(
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
    let mut invoices: HashMap<String, invoice::Model> = HashMap::new();
    let mut statics: HashMap<String, static_address::Model> = HashMap::new();
    for chunk in keys.chunks(500) {
        for inv in invoice::Entity::find()
            .filter(invoice::Column::Environment.eq(env))
            .filter(invoice::Column::AddressKey.is_in(chunk.iter().copied()))
            .all(txn)
            .await?
        {
            if let Some(k) = inv.address_key.clone() {
                invoices.insert(k, inv);
            }
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
            (None, Some(a)) if a.gate_id == gate_id => static_invoice(txn, a, t).await?,
            // Another asset or network sent to one of our addresses: no deposit of this gate.
            (Some(_), _) | (None, Some(_)) => {
                unclaimed(txn, env, gate_id, t, UnclaimedReason::OtherGate).await?;
                continue;
            }
            (None, None) if ours => {
                unclaimed(txn, env, gate_id, t, UnclaimedReason::NoInvoice).await?;
                continue;
            }
            // Not ours.
            (None, None) => continue,
        };
        matched.push(Matched::new(target, t, tip)?);
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
        if seen == Seen::InBlock {
            settle_height(txn, env, gate_id, m.transfer, tip).await?;
        }
        if let Some(r) = revive(txn, env, gate_id, m.transfer, tip).await? {
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

/// Rows per multi-row insert: far below PostgreSQL's 65,535 and SQLite's 32,766 bound
/// parameters for the widest row written this way (a payment, 25 columns).
const ROWS_PER_INSERT: usize = 500;

/// A transfer matched to the invoice it pays, with the payment that records it.
struct Matched<'a> {
    invoice: invoice::Model,
    payment: payment::Model,
    transfer: &'a Transfer,
}

impl<'a> Matched<'a> {
    fn new(invoice: invoice::Model, t: &'a Transfer, tip: u64) -> Result<Self, PipelineError> {
        let gate_id = invoice.gate_id.clone().ok_or_else(|| PipelineError::Invariant("invoice without gate".into()))?;
        let gate = domain::gates::find(&gate_id).ok_or_else(|| PipelineError::Invariant("unknown gate".into()))?;
        let now = Utc::now();
        let payment = payment::Model {
            confirmations: i32::try_from(tip.saturating_sub(t.block_height) + 1).unwrap_or(i32::MAX),
            required_confirmations: gate.confirmations as i32,
            block_height: Some(t.block_height as i64),
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
    let mut inserted = HashSet::with_capacity(matched.len());
    for chunk in matched.chunks(ROWS_PER_INSERT) {
        let rows = chunk.iter().map(|m| payment::ActiveModel::from(m.payment.clone()));
        let ids = payment::Entity::insert_many(rows)
            .on_conflict(once_per_transfer([
                payment::Column::Environment,
                payment::Column::GateId,
                payment::Column::TxHash,
                payment::Column::OutputIndex,
            ]))
            .try_insert()
            .exec_with_returning_keys(txn)
            .await?;
        if let TryInsertResult::Inserted(ids) = ids {
            inserted.extend(ids);
        }
    }
    Ok(inserted)
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
    let Some(next) = InvoiceStatus::Pending.on(InvoiceTrigger::DepositSeen) else {
        return Err(PipelineError::Invariant("a pending invoice must take a deposit".into()));
    };
    let ids: Vec<Uuid> = causes.keys().copied().collect();
    let now = Utc::now();
    let mut moved = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(ROWS_PER_INSERT) {
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
    let events: Vec<_> = moved
        .iter()
        .filter_map(|after| causes.remove(&after.id).map(|m| (after, &m.payment)))
        .map(|(after, cause)| (kind::INVOICE_CONFIRMING, after, Some(cause)))
        .collect();
    events::emit_invoices(txn, &events).await?;
    // Not moved: past the window (expired first, a late deposit) or no longer pending.
    let mut rest: Vec<&Matched<'_>> = causes.into_values().collect();
    rest.sort_by_key(|m| m.payment.id);
    for m in rest {
        invoice_sees_deposit(txn, &m.invoice, &m.payment).await?;
    }
    Ok(())
}

/// `ON CONFLICT DO NOTHING` on a table's one-row-per-transfer key (environment, gate, tx hash,
/// output index): a rescan or replay finds the row there and writes nothing.
fn once_per_transfer<C: sea_orm::sea_query::IntoIden>(key: [C; 4]) -> OnConflict {
    OnConflict::columns(key).do_nothing().to_owned()
}

/// Records money that reached us but credits nobody, once per transfer (rescans and replays
/// find the row already there), and tells the operator the first time.
async fn unclaimed<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    t: &Transfer,
    reason: UnclaimedReason,
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
    }
    Ok(())
}

/// Seen deposits' amounts go to their merchant's `pending` balance: one entry each, the balance
/// row locked and written once. `seen` all belong to one merchant.
async fn post_seen<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    seen: &[Recorded],
) -> Result<(), PipelineError> {
    let Some(first) = seen.first() else { return Ok(()) };
    let postings: Vec<Posting> = seen
        .iter()
        .map(|s| Posting {
            bucket: Bucket::Pending,
            amount: s.amount,
            entry_type: EntryType::InvoiceCredit,
            reference: Some(("payment", s.payment_id)),
            description: Some("deposit seen, awaiting confirmations".into()),
        })
        .collect();
    ledger::post(txn, ledger::Account::of(first.merchant_id, env, gate_id), &postings).await?;
    Ok(())
}

/// The tracker's side of a revival: a reversed payment's transaction is on the chain again in
/// block `block_height`, possibly one the scanner has passed (a reorganisation switched back to
/// the fork that holds it). Revives it as the scanner would, in one transaction. Returns
/// whether it was revived (`false`: it was not reversed any more).
pub(crate) async fn revive_on_chain(
    db: &DatabaseConnection,
    p: &payment::Model,
    block_height: u64,
    tip: u64,
) -> Result<bool, PipelineError> {
    let t = Transfer {
        tx_hash: p.tx_hash.clone(),
        output_index: p.output_index,
        address_key: String::new(),
        amount: p.amount.0,
        block_height,
    };
    let txn = domain::db::begin_write(db).await?;
    let Some(seen) = revive(&txn, p.environment, &p.gate_id, &t, tip).await? else {
        txn.rollback().await?;
        return Ok(false);
    };
    post_seen(&txn, p.environment, &p.gate_id, std::slice::from_ref(&seen)).await?;
    txn.commit().await?;
    Ok(true)
}

/// A payment recorded by this scan, whose amount is still to be posted to `pending`.
struct Recorded {
    merchant_id: Uuid,
    payment_id: Uuid,
    amount: rust_decimal::Decimal,
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

/// A confirming payment found in a block other than the one it was recorded at (first seen in
/// the mempool, or moved by a reorganisation) takes that block's height, so its displayed
/// confirmations and the scan's hand-over to the tracker follow the real block.
async fn settle_height<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    t: &Transfer,
    tip: u64,
) -> Result<(), PipelineError> {
    let height = t.block_height as i64;
    payment::Entity::update_many()
        .col_expr(payment::Column::BlockHeight, Expr::value(height))
        .col_expr(
            payment::Column::Confirmations,
            Expr::value(i32::try_from(tip.saturating_sub(t.block_height) + 1).unwrap_or(i32::MAX)),
        )
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate_id))
        .filter(payment::Column::TxHash.eq(&t.tx_hash))
        .filter(payment::Column::OutputIndex.eq(t.output_index))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirming))
        .filter(payment::Column::BlockHeight.ne(height))
        .exec(txn)
        .await?;
    Ok(())
}

/// A recorded deposit moves a `pending` invoice to `confirming` (or, past its window, to
/// `expired` first: it is then a late deposit).
async fn invoice_sees_deposit<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
    p: &payment::Model,
) -> Result<(), PipelineError> {
    let now = Utc::now();
    let inv = invoice::Entity::find_by_id(inv.id).one(txn).await?.unwrap_or_else(|| inv.clone());
    if inv.status == InvoiceStatus::Pending {
        if inv.expires_at.is_some_and(|e| e < now) {
            // The window closed before the sweeper noticed: expire first; this is a late deposit.
            if let Some(after) = transition(txn, &inv, InvoiceTrigger::Expire).await? {
                events::emit_invoice(txn, kind::INVOICE_EXPIRED, &after, None).await?;
            }
        } else if let Some(after) = transition(txn, &inv, InvoiceTrigger::DepositSeen).await? {
            events::emit_invoice(txn, kind::INVOICE_CONFIRMING, &after, Some(p)).await?;
        }
    }
    Ok(())
}

/// A transfer already recorded is seen again. If its payment was reversed (the transaction
/// vanished long enough, then a reorganisation brought it back or it was mined again), the
/// payment is revived: recorded again as if new (`confirming`, its amount back in `pending`,
/// nothing credited: the reversal took back any credit), so it confirms and is credited once
/// more by the usual path, with the usual events. Its invoice follows the PRODUCT.md table: a
/// `pending` one becomes `confirming`; an `invalid` or `expired` one takes it as a late deposit.
/// A conversion record the reversal ended is removed, so the converter quotes it afresh. `Ok(None)`
/// when the payment is live (nothing to do).
async fn revive<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    t: &Transfer,
    tip: u64,
) -> Result<Option<Recorded>, PipelineError> {
    let now = Utc::now();
    let null = || Expr::cust("NULL");
    let revived = payment::Entity::update_many()
        .col_expr(payment::Column::Status, Expr::value(PaymentStatus::Confirming.as_str()))
        .col_expr(payment::Column::BlockHeight, Expr::value(t.block_height as i64))
        .col_expr(
            payment::Column::Confirmations,
            Expr::value(i32::try_from(tip.saturating_sub(t.block_height) + 1).unwrap_or(i32::MAX)),
        )
        .col_expr(payment::Column::DetectedAt, Expr::value(now))
        .col_expr(payment::Column::CheckedAt, Expr::value(now))
        .col_expr(payment::Column::ConfirmedAt, null())
        .col_expr(payment::Column::CreditedAt, null())
        .col_expr(payment::Column::CreditedGateId, null())
        .col_expr(payment::Column::CreditedAmount, null())
        .col_expr(payment::Column::ReversedAt, null())
        .col_expr(payment::Column::MissingSinceHeight, null())
        .col_expr(payment::Column::MissingLastHeight, null())
        .col_expr(payment::Column::MissingChecks, Expr::value(0))
        .col_expr(payment::Column::NextCheckAt, null())
        .col_expr(payment::Column::TrackToken, null())
        .col_expr(
            payment::Column::Revivals,
            sea_orm::sea_query::ExprTrait::add(Expr::col(payment::Column::Revivals), 1),
        )
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate_id))
        .filter(payment::Column::TxHash.eq(&t.tx_hash))
        .filter(payment::Column::OutputIndex.eq(t.output_index))
        .filter(payment::Column::Status.eq(PaymentStatus::Reversed))
        .exec_with_returning(txn)
        .await?;
    let Some(p) = revived.into_iter().next() else { return Ok(None) };
    tracing::info!(payment_id = %p.id, tx_hash = %p.tx_hash, "reversed deposit is on chain again; revived");
    entity::settlement_conversion::Entity::delete_by_id(p.id).exec(txn).await?;
    let inv = invoice::Entity::find_by_id(p.invoice_id)
        .one(txn)
        .await?
        .ok_or_else(|| PipelineError::Invariant(format!("invoice of payment {} missing", p.id)))?;
    invoice_sees_deposit(txn, &inv, &p).await?;
    Ok(Some(Recorded { merchant_id: inv.merchant_id, payment_id: p.id, amount: p.amount.0 }))
}

/// Payments of the gate that blocks `from..=to` (the blocks a scan just read) brought to a
/// milestone: unconfirmed ones whose required confirmations they completed, and confirmed ones
/// whose final depth (twice the required confirmations, until which a reversal is watched for)
/// they completed. The tracker should look at them now rather than at its next poll.
pub async fn due_payments(
    db: &DatabaseConnection,
    env: Environment,
    gate: &domain::gates::Gate,
    from: u64,
    to: u64,
) -> Result<Vec<Uuid>, PipelineError> {
    // A depth of `d` confirmations completes at block `block_height + d - 1`.
    let completed = |status: PaymentStatus, depth: i32| {
        let back = i64::from(depth.max(1)) - 1;
        Condition::all()
            .add(payment::Column::Status.eq(status))
            .add(payment::Column::BlockHeight.between(from as i64 - back, to as i64 - back))
    };
    let required = i32::try_from(gate.confirmations).unwrap_or(i32::MAX);
    Ok(payment::Entity::find()
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate.id))
        .filter(
            Condition::any()
                .add(completed(PaymentStatus::Confirming, required))
                .add(completed(PaymentStatus::Confirmed, super::final_depth(required))),
        )
        .all(db)
        .await?
        .into_iter()
        .map(|p| p.id)
        .collect())
}
