//! Confirmation tracker: follows one payment on its chain until it is credited and final, or
//! reversed. Crediting, reversal and every invoice transition happen in one transaction each,
//! behind a guarded update of the payment's status, so a replayed or concurrent job changes
//! nothing twice.
//!
//! The tracker's looks and schedule are here; what a confirmation writes (the credit) is in
//! `credit`, what a transfer gone from the chain does (when to believe it, the reversal) in
//! `reversal`; unclaimed deposits, followed until they are final so that only confirmed ones
//! are returned, in `unclaimed`.
//!
//! A `TrackDue` batch asks the chain about its payments in one `Chain::statuses` call per gate
//! and confirms those at their required depth together (`confirm_many`: one transaction, each
//! merchant's balance locked once; should the batch fail, each payment is confirmed on its own).
//! A payment confirmed this way needs no job until its final depth (`pipeline::final_depth`),
//! when the scan of the block that completes it hands it over again. Others continue as their
//! own `TrackPayment` chain, re-enqueued every `track_interval_ms` until the final depth, then
//! stop. Past the monitoring window an unconfirmed deposit makes a `confirming` invoice
//! `invalid` (the payment is still credited if it confirms). For an invoice that converts, the
//! tracker confirms without crediting: the settlement converter credits. The sweeper (in the
//! same process) expires invoices and drafts and re-enqueues payments not looked at for
//! 10 × `track_interval_ms` (at least 5 s), so a crash between commit and enqueue, a killed
//! worker or a flushed Redis is harmless.

mod credit;
pub mod job;
mod reversal;
pub mod sweeper;
mod unclaimed;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::Utc;
use domain::payments::tracking;
use entity::{Environment, InvoiceTrigger, PaymentId, PaymentStatus, invoice, payment};
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::chain::{Chains, Look, TxStatus};
use crate::pipeline::{PipelineError, final_depth};
use domain::config::PipelineConfig;
use domain::events::{self, EventKind};
use domain::invoices::lifecycle::transition;

use credit::confirm;
pub use credit::confirm_many;
use reversal::{clear_missing, on_missing, watch_reversed};
pub use unclaimed::follow_unclaimed;

/// What to do with the payment's job next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing left to watch.
    Done,
    /// Look again after `after`, with a job carrying `token`: the payment's job chain token,
    /// stored on the row with the time of that check (`next_check_at`).
    Recheck { after: Duration, token: Uuid },
    /// The job belonged to a chain another job took over (a newer token is on the row): it
    /// ends here, so a payment never has two live job chains.
    Superseded,
    /// No job: the scanner hands the payment over with the block that completes its next
    /// milestone (the sweeper, once `next_check_at` is overdue, should that be lost).
    AwaitsHandOver,
}

/// [`track_payment_chain`] as the start of a new job chain (a scan's hand-over, the sweeper, a
/// test): it takes the payment over from any chain scheduled before.
pub async fn track_payment(
    db: &DatabaseConnection,
    chains: &Chains,
    cfg: &PipelineConfig,
    payment_id: Uuid,
) -> Result<Next, PipelineError> {
    track_payment_chain(db, chains, cfg, payment_id, None).await
}

/// One look at a payment. `token` is the chain token of a scheduled recheck (`None` for a new
/// chain): when the row holds another token, a newer chain owns the payment and this job ends
/// (`Superseded`). Otherwise the payment is tracked and, when it needs another look, the new
/// token and the time of that look are stored before the recheck is returned.
pub async fn track_payment_chain(
    db: &DatabaseConnection,
    chains: &Chains,
    cfg: &PipelineConfig,
    payment_id: Uuid,
    token: Option<Uuid>,
) -> Result<Next, PipelineError> {
    let Some(p) = payment::Entity::find_by_id(payment_id).one(db).await? else { return Ok(Next::Done) };
    if token.is_some() && p.track_token != token {
        return Ok(Next::Superseded);
    }
    let again = track(db, chains, cfg, &p).await?;
    schedule(db, p.id, again).await
}

/// The scanner's hand-over: payments whose confirmations the scanned blocks completed, as one
/// batch. Those the chain confirms are confirmed together ([`confirm_many`]: one transaction,
/// each balance locked once); then each payment is tracked on as [`track_payment`] does, as a new
/// job chain (a confirmed one is watched for reversal until its final depth). Every payment is
/// tried: returns what to do next with each payment tracked, and the first error met (a retry
/// of the batch repeats nothing done).
pub async fn track_due(
    db: &DatabaseConnection,
    chains: &Chains,
    cfg: &PipelineConfig,
    payment_ids: &[Uuid],
) -> (Vec<(Uuid, Next)>, Option<PipelineError>) {
    use futures::StreamExt;
    let found = payment::Entity::find().filter(payment::Column::Id.is_in(payment_ids.iter().copied())).all(db).await;
    let payments = match found {
        Ok(payments) => payments,
        Err(e) => return (Vec::new(), Some(e.into())),
    };
    // What the chain says of each: at its required depth (to confirm), at its final depth (to
    // stop watching), or anything else (its own track below). One batch of looks per chain.
    let mut by_chain: HashMap<(Environment, String), Vec<payment::Model>> = HashMap::new();
    for p in payments {
        let watched = matches!(p.status, PaymentStatus::Confirming | PaymentStatus::Confirmed);
        if watched && p.missing_since_height.is_none() {
            by_chain.entry((p.environment, p.gate_id.clone())).or_default().push(p);
        }
    }
    let mut looks: Vec<(payment::Model, i32)> = Vec::new();
    for ((env, gate_id), payments) in by_chain {
        let Some(chain) = chains.get(env, &gate_id) else { continue };
        let asked: Vec<Look<'_>> = payments
            .iter()
            .map(|p| Look { tx_hash: &p.tx_hash, output_index: p.output_index, seen_at: seen_at(p) })
            .collect();
        let answers = chain.statuses(&asked).await;
        // A failed look (or a gone transfer) is taken again by the payment's own track below.
        for (p, answer) in payments.into_iter().zip(answers) {
            if let Ok(TxStatus::Confirmations(n)) = answer {
                looks.push((p, i32::try_from(n).unwrap_or(i32::MAX)));
            }
        }
    }
    let (mut due, mut finals, mut scheduled) = (Vec::new(), Vec::new(), Vec::new());
    for (p, n) in looks {
        match p.status {
            PaymentStatus::Confirming if n >= p.required_confirmations => due.push((p, n)),
            PaymentStatus::Confirmed if n >= final_depth(&p.gate_id, p.required_confirmations) => {
                finals.push((p.id, n))
            }
            // Confirmed and on the chain, short of its final depth, its next look stored (by
            // its confirmation, or its job chain's): handed over again (two scans of one gate
            // both hand over the blocks they peeked at, one records them). Nothing to do: the
            // block that completes its final depth hands it over, the sweeper should that be
            // lost. (Tracked one by one, each such duplicate cost a job chain per payment.)
            PaymentStatus::Confirmed if p.next_check_at.is_some() => scheduled.push(p.id),
            PaymentStatus::Confirming | PaymentStatus::Confirmed | PaymentStatus::Reversed => {}
        }
    }
    let interval = Duration::from_millis(cfg.track_interval_ms);
    let (confirmed, mut first) = match confirm_many(db, &due, interval).await {
        Ok(moved) => (moved, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    if first.is_none() {
        // Due here, on the chain, but moved by another tracker meanwhile (the same hand-over
        // twice, both at once): confirmed with its next look stored, it needs nothing either.
        let moved: std::collections::HashSet<Uuid> = confirmed.iter().map(|p| p.id).collect();
        let raced: Vec<Uuid> = due.iter().map(|(p, _)| p.id).filter(|id| !moved.contains(id)).collect();
        if !raced.is_empty() {
            match payment::Entity::find().filter(payment::Column::Id.is_in(raced)).all(db).await {
                Ok(rows) => scheduled.extend(
                    rows.into_iter()
                        .filter(|p| p.status == PaymentStatus::Confirmed && p.next_check_at.is_some())
                        .map(|p| p.id),
                ),
                Err(e) => first = Some(e.into()),
            }
        }
    }
    let mut out = Vec::with_capacity(payment_ids.len());
    // Confirmed here: the next look, at final depth, comes with the scan of the block that
    // completes it; the confirmation stored when, so the sweeper takes the payment should that
    // hand-over be lost.
    for p in &confirmed {
        let depths = (p.confirmations, p.required_confirmations, final_depth(&p.gate_id, p.required_confirmations));
        let next = if next_look(interval, depths).is_some() { Next::AwaitsHandOver } else { Next::Done };
        out.push((p.id, next));
    }
    out.extend(scheduled.iter().map(|id| (*id, Next::AwaitsHandOver)));
    let mut note = |r: Result<Vec<(Uuid, Next)>, PipelineError>| match r {
        Ok(nexts) => out.extend(nexts),
        Err(e) => {
            first.get_or_insert(e);
        }
    };
    // At final depth: watched no more.
    let mut depths: BTreeMap<i32, Vec<Uuid>> = BTreeMap::new();
    for (id, n) in &finals {
        depths.entry(*n).or_default().push(*id);
    }
    for (n, ids) in depths {
        note(finish(db, &ids, n).await);
    }
    // The others as their own track does (not due after all, gone, confirmed by another
    // meanwhile, or confirmed with no next look stored).
    let handled: std::collections::HashSet<Uuid> = confirmed
        .iter()
        .map(|p| p.id)
        .chain(finals.iter().map(|(id, _)| *id))
        .chain(scheduled.iter().copied())
        .collect();
    let rest = payment_ids.iter().copied().filter(|id| !handled.contains(id));
    let tracked: Vec<(Uuid, Result<Next, PipelineError>)> = futures::stream::iter(rest)
        .map(|id| async move { (id, track_payment(db, chains, cfg, id).await) })
        .buffer_unordered(TRACKS_AT_ONCE)
        .collect()
        .await;
    for (id, r) in tracked {
        match r {
            Ok(next) => out.push((id, next)),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    (out, first)
}

/// Confirmed payments the chain shows at `confirmations`, their final depth: stored, and
/// watched no more (deeper than that, a reversal is not watched for).
async fn finish(db: &DatabaseConnection, ids: &[Uuid], confirmations: i32) -> Result<Vec<(Uuid, Next)>, PipelineError> {
    tracking::finish(db, &payment_ids(ids), confirmations).await?;
    Ok(ids.iter().map(|id| (*id, Next::Done)).collect())
}

/// The tracker's job ids (row ids, as the jobs carry them) as the domain's payment ids.
fn payment_ids(ids: &[Uuid]) -> Vec<PaymentId> {
    ids.iter().copied().map(PaymentId::from).collect()
}

/// Payment tracks of one batch in flight at once.
const TRACKS_AT_ONCE: usize = crate::chain::LOOKS_AT_ONCE;

/// Stores the chain's next look (or that there is none) on the payment.
async fn schedule(db: &DatabaseConnection, id: Uuid, again: Option<Duration>) -> Result<Next, PipelineError> {
    schedule_many(db, &[id], again).await
}

/// [`schedule`] for payments that all need their next look at the same time, in one update
/// (one chain token shared by their new job chains: a chain is a payment and its token).
async fn schedule_many(db: &DatabaseConnection, ids: &[Uuid], again: Option<Duration>) -> Result<Next, PipelineError> {
    let (next, token, at) = match again {
        Some(after) => {
            let token = Uuid::now_v7();
            let at = Utc::now() + chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX);
            (Next::Recheck { after, token }, Some(token), Some(at))
        }
        None => (Next::Done, None, None),
    };
    tracking::schedule(db, &payment_ids(ids), token, at).await?;
    Ok(next)
}

/// Looks at the payment on its chain and applies what changed; returns when to look again.
async fn track(
    db: &DatabaseConnection,
    chains: &Chains,
    cfg: &PipelineConfig,
    p: &payment::Model,
) -> Result<Option<Duration>, PipelineError> {
    let interval = Duration::from_millis(cfg.track_interval_ms);
    let Some(chain) = chains.get(p.environment, &p.gate_id) else {
        // No adapter for this network (yet): the sweeper brings the payment back later.
        return Ok(None);
    };
    if p.status == PaymentStatus::Reversed {
        return watch_reversed(db, chain.as_ref(), p, interval).await;
    }
    let confirmations = match chain.status(&p.tx_hash, p.output_index, seen_at(p)).await? {
        TxStatus::Gone => {
            let reversed = on_missing(db, chain.as_ref(), cfg, p).await?;
            // Missing but not long enough, or reversed on a chain where it may come back: look
            // again about a block later.
            return Ok((!reversed || !chain.gone_is_final()).then_some(interval));
        }
        TxStatus::Confirmations(n) => i32::try_from(n).unwrap_or(i32::MAX),
    };
    if p.missing_since_height.is_some() {
        clear_missing(db, p.id).await?;
    }
    let now = Utc::now();
    let due = p.status == PaymentStatus::Confirming && confirmations >= p.required_confirmations;
    if !due {
        // (A confirmation stores these itself.)
        tracking::store_depth(db, p.id.into(), confirmations, now).await?;
    }
    match p.status {
        PaymentStatus::Confirming if due => {
            confirm(db, p, confirmations, interval).await?;
        }
        PaymentStatus::Confirming => {
            let window = chrono::Duration::seconds(cfg.monitor_window_secs as i64);
            if now - p.detected_at > window {
                invalidate_unconfirmed(db, p).await?;
            }
        }
        PaymentStatus::Confirmed => {}
        PaymentStatus::Reversed => return Ok(None),
    }
    let until = final_depth(&p.gate_id, p.required_confirmations);
    Ok(next_look(interval, (confirmations, p.required_confirmations, until)))
}

/// When to look at a payment with `(confirmations, required, final)` depths again: when its next
/// milestone is due, assuming about one block per `interval` (`track_interval_ms`): confirmation
/// (the scanner also triggers it when the block arrives), then its final depth (a reversal is
/// still noticed up to there); never once it is final.
fn next_look(interval: Duration, (confirmations, required, until): (i32, i32, i32)) -> Option<Duration> {
    if confirmations >= until {
        return None;
    }
    let target = if confirmations < required { required } else { until };
    let blocks = u32::try_from(target - confirmations).unwrap_or(1).clamp(1, 60);
    Some(interval.saturating_mul(blocks))
}

/// A deposit seen but not confirmed within the monitoring window makes a `confirming` invoice
/// `invalid`. The payment is still tracked: if it confirms later it is credited all the same.
async fn invalidate_unconfirmed(db: &DatabaseConnection, p: &payment::Model) -> Result<(), PipelineError> {
    let txn = domain::db::begin_write(db).await?;
    let inv = load_invoice(&txn, p.invoice_id).await?;
    if let Some(after) = transition(&txn, &inv, InvoiceTrigger::MonitorTimeout).await? {
        events::emit_invoice(&txn, EventKind::InvoiceInvalid, &after, Some(p)).await?;
    }
    txn.commit().await?;
    Ok(())
}

async fn load_invoice<C: ConnectionTrait>(txn: &C, id: Uuid) -> Result<invoice::Model, PipelineError> {
    invoice::Entity::find_by_id(id)
        .one(txn)
        .await?
        .ok_or_else(|| PipelineError::Invariant(format!("invoice {id} missing")))
}

/// The block (ledger) a payment was recorded in, for [`Chain::status`].
fn seen_at(p: &payment::Model) -> Option<u64> {
    p.block_height.and_then(|h| u64::try_from(h).ok())
}
