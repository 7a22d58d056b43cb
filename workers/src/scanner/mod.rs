//! Deposit scanner: reads each gate's new blocks in bounded batches, matches every transfer to
//! invoice and static addresses with one indexed lookup per batch, and records each matching
//! transfer as a payment exactly once (unique per environment, gate, tx hash and output index).
//! Recording happens in one transaction with the cursor move, the `pending` balance posting and
//! the invoice's `confirming` transition.
//!
//! Reading the chain and moving the cursor are here; what a batch's transfers write (payments,
//! the invoices' moves, unclaimed deposits) is in `record`; what each recorded deposit does to
//! its invoice and pending balance, in `deposit`; a reversed payment whose transfer is on the
//! chain again is revived by `revive`.
//!
//! A batch is written at once, not transfer by transfer: the new payments in multi-row inserts
//! (`RETURNING` tells which were new; a transfer recorded before, or returned twice by the node,
//! takes the one-by-one path of rescans and revivals), the invoices in one guarded
//! `UPDATE … WHERE status = 'pending'` within their window (an invoice it did not move is looked
//! at alone: expired first, a late deposit), their events in one multi-row insert, and one
//! `ledger::post` per merchant. The cursor move is guarded: of two scanners on one range one
//! wins, the other rolls back. [`Scanner`] reads the next batch while the last one is recorded;
//! the read ahead assumes the cursor the recorded batch leaves, so if another scanner moved it,
//! that batch's guard fails and nothing is written.
//!
//! A transfer to a static address first creates its invoice (id derived from the transfer, so a
//! replay finds the same one, `source = static_address`). A transfer of another asset to one of
//! our addresses (`other_gate`), or an XRP payment to the operator's account that matches no
//! invoice (`no_invoice`), credits nobody and is recorded as an unclaimed deposit in the same
//! transaction. The payments whose confirmations the scanned blocks completed go to the tracker
//! as `TrackDue` jobs ([`due_payments`]); a payment the batch brings to its depth is left to the
//! tracker, so the two never update the same rows.

mod deposit;
pub mod job;
mod record;
mod revive;

use chrono::Utc;
use entity::{Environment, PaymentStatus, payment, scan_cursor};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect};
use uuid::Uuid;

use crate::chain::{Chain, Transfer};
use crate::pipeline::PipelineError;
use domain::db::open_rows;
use record::{Seen, record_transfers};

pub(crate) use revive::revive_on_chain;

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

/// The confirmations of a transfer read in block `height` with the chain at `tip`, as the
/// chain's `status` counts them ([`Chain::depth_counts_blocks`]): the blocks from its own to the
/// tip, so 0 for a transfer not in a block yet (a mempool transfer's height is the block after
/// the tip); 0 where the depth is a finality only the node can tell (the tracker asks it).
fn depth(chain: &dyn Chain, tip: u64, height: u64) -> i32 {
    if !chain.depth_counts_blocks() {
        return 0;
    }
    i32::try_from(tip.saturating_add(1).saturating_sub(height)).unwrap_or(i32::MAX)
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
    // transaction: it locks nothing else. Only where the depth counts blocks ([`depth`]).
    if chain.depth_counts_blocks() {
        domain::payments::tracking::refresh_depths(db, env, gate.id, to as i64).await?;
    }
    Ok(Some(ScanReport { from, to, transfers: report_len, recorded }))
}

/// Records the deposits among the transactions that entered the gate's mempool since the last
/// look (adapters that read a mempool: Bitcoin), with 0 confirmations and no block: the invoice
/// shows `confirming` before the first block, and the payment 0 confirmations until a scan
/// reads it in a block (which records that block, and hands it to the tracker once its
/// confirmations are complete). Returns the payments newly recorded.
pub async fn scan_pending(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    env: Environment,
) -> Result<Vec<Uuid>, PipelineError> {
    let transfers = chain.pending().await?;
    // Not in a block yet: each counts 0 confirmations (`Seen::at`); its height is a guess, the
    // block after the tip it was seen at.
    let Some(tip) = transfers.iter().map(|t| t.block_height.saturating_sub(1)).min() else {
        return Ok(Vec::new());
    };
    let txn = domain::db::begin_write(db).await?;
    let recorded = record_transfers(&txn, env, chain, tip, &transfers, Seen::InMempool).await?;
    txn.commit().await?;
    Ok(recorded)
}

/// Payments of the gate that blocks `from..=to` (the blocks a scan just read) brought to a
/// milestone: unconfirmed ones whose required confirmations they completed, and confirmed ones
/// whose final depth (`pipeline::final_depth`, until which a reversal is watched for) they
/// completed, where that is deeper than the confirmation. The tracker should look at them now rather than at its next poll.
pub async fn due_payments(
    db: &DatabaseConnection,
    env: Environment,
    gate: &domain::gates::Gate,
    from: u64,
    to: u64,
) -> Result<Vec<Uuid>, PipelineError> {
    Ok(due_payments_query(env, gate, from, to).into_tuple().all(db).await?)
}

/// The ids [`due_payments`] reads, among the payments still watched
/// (`open_rows::OPEN_PAYMENTS_WATCHED`, through their index by gate and height): a scan costs the
/// payments in flight, not the gate's history.
pub fn due_payments_query(
    env: Environment,
    gate: &domain::gates::Gate,
    from: u64,
    to: u64,
) -> sea_orm::Select<payment::Entity> {
    // A depth of `d` confirmations completes at block `block_height + d - 1`.
    let completed = |status: PaymentStatus, depth: i32| {
        let back = i64::from(depth.max(1)) - 1;
        Condition::all()
            .add(payment::Column::Status.eq(status))
            .add(payment::Column::BlockHeight.between(from as i64 - back, to as i64 - back))
    };
    let required = i32::try_from(gate.confirmations).unwrap_or(i32::MAX);
    let until = crate::pipeline::final_depth(gate.id, required);
    let mut milestones = Condition::any().add(completed(PaymentStatus::Confirming, required));
    if until > required {
        milestones = milestones.add(completed(PaymentStatus::Confirmed, until));
    }
    payment::Entity::find()
        .select_only()
        .column(payment::Column::Id)
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate.id))
        .filter(Expr::cust(open_rows::OPEN_PAYMENTS_WATCHED))
        .filter(milestones)
}
