//! Confirmation tracker: follows one payment on its chain until it is credited and final, or
//! reversed. Crediting, reversal and every invoice transition happen in one transaction each,
//! behind a guarded update of the payment's status, so a replayed or concurrent job changes
//! nothing twice.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::Utc;
use entity::{
    Amount, Bucket, EntryType, Environment, InvoiceStatus, InvoiceTrigger, PaymentStatus, invoice, payment,
    static_address,
};
use rust_decimal::Decimal;
use sea_orm::sea_query::{CaseStatement, Expr};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect,
};
use uuid::Uuid;

use super::{PipelineError, final_depth, transition, transition_many};
use crate::chain::{Chain, Chains, Look, TxStatus};
use domain::config::PipelineConfig;
use domain::events::{self, kind};
use domain::ledger::{self, Credit, Posting};

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
    let (mut due, mut finals) = (Vec::new(), Vec::new());
    for (p, n) in looks {
        match p.status {
            PaymentStatus::Confirming if n >= p.required_confirmations => due.push((p, n)),
            PaymentStatus::Confirmed if n >= final_depth(p.required_confirmations) => finals.push((p.id, n)),
            PaymentStatus::Confirming | PaymentStatus::Confirmed | PaymentStatus::Reversed => {}
        }
    }
    let (confirmed, mut first) = match confirm_many(db, &due).await {
        Ok(moved) => (moved, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let mut out = Vec::with_capacity(payment_ids.len());
    let mut note = |r: Result<Vec<(Uuid, Next)>, PipelineError>| match r {
        Ok(nexts) => out.extend(nexts),
        Err(e) => {
            first.get_or_insert(e);
        }
    };
    // Confirmed here: the next look, at final depth, comes with the scan of the block that
    // completes it; stored, so the sweeper takes the payment should that hand-over be lost.
    let interval = Duration::from_millis(cfg.track_interval_ms);
    let mut waits: BTreeMap<Option<Duration>, Vec<Uuid>> = BTreeMap::new();
    for p in &confirmed {
        waits.entry(next_look(interval, p.confirmations, p.required_confirmations)).or_default().push(p.id);
    }
    for (again, ids) in waits {
        note(await_hand_over(db, &ids, again).await);
    }
    // At final depth: watched no more.
    let mut depths: BTreeMap<i32, Vec<Uuid>> = BTreeMap::new();
    for (id, n) in &finals {
        depths.entry(*n).or_default().push(*id);
    }
    for (n, ids) in depths {
        note(finish(db, &ids, n).await);
    }
    // The others as their own track does (not due after all, gone, or confirmed by another).
    let handled: std::collections::HashSet<Uuid> =
        confirmed.iter().map(|p| p.id).chain(finals.iter().map(|(id, _)| *id)).collect();
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

/// Stores when to look at `ids` again (none: never) without a job: the scanner hands each over
/// with the block that completes its next milestone, and the sweeper takes it should that be
/// lost. Their older job chains end (`Superseded`).
async fn await_hand_over(
    db: &DatabaseConnection,
    ids: &[Uuid],
    again: Option<Duration>,
) -> Result<Vec<(Uuid, Next)>, PipelineError> {
    let at = again.map(|after| Utc::now() + chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX));
    payment::Entity::update_many()
        .col_expr(payment::Column::TrackToken, Expr::value(Option::<Uuid>::None))
        .col_expr(payment::Column::NextCheckAt, Expr::value(at))
        .filter(payment::Column::Id.is_in(ids.iter().copied()))
        .exec(db)
        .await?;
    let next = if again.is_some() { Next::AwaitsHandOver } else { Next::Done };
    Ok(ids.iter().map(|id| (*id, next)).collect())
}

/// Confirmed payments the chain shows at `confirmations`, their final depth: stored, and
/// watched no more (deeper than that, a reversal is not watched for).
async fn finish(db: &DatabaseConnection, ids: &[Uuid], confirmations: i32) -> Result<Vec<(Uuid, Next)>, PipelineError> {
    payment::Entity::update_many()
        .col_expr(payment::Column::Confirmations, Expr::value(confirmations))
        .col_expr(payment::Column::CheckedAt, Expr::value(Utc::now()))
        .col_expr(payment::Column::TrackToken, Expr::value(Option::<Uuid>::None))
        .col_expr(payment::Column::NextCheckAt, Expr::value(Option::<chrono::DateTime<Utc>>::None))
        .filter(payment::Column::Id.is_in(ids.iter().copied()))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirmed))
        .exec(db)
        .await?;
    Ok(ids.iter().map(|id| (*id, Next::Done)).collect())
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
    payment::Entity::update_many()
        .col_expr(payment::Column::TrackToken, Expr::value(token))
        .col_expr(payment::Column::NextCheckAt, Expr::value(at))
        .filter(payment::Column::Id.is_in(ids.iter().copied()))
        .exec(db)
        .await?;
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
        payment::Entity::update_many()
            .col_expr(payment::Column::Confirmations, Expr::value(confirmations))
            .col_expr(payment::Column::CheckedAt, Expr::value(now))
            .filter(payment::Column::Id.eq(p.id))
            .filter(payment::Column::Status.ne(PaymentStatus::Reversed))
            .exec(db)
            .await?;
    }
    match p.status {
        PaymentStatus::Confirming if due => {
            confirm(db, p, confirmations).await?;
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
    Ok(next_look(interval, confirmations, p.required_confirmations))
}

/// When to look at a payment with `confirmations` of `required` again: when its next milestone
/// is due, assuming about one block per `interval` (`track_interval_ms`): confirmation (the
/// scanner also triggers it when the block arrives), then final depth (a reversal is still
/// noticed up to there); never once it is final.
fn next_look(interval: Duration, confirmations: i32, required: i32) -> Option<Duration> {
    if confirmations >= final_depth(required) {
        return None;
    }
    let target = if confirmations < required { required } else { final_depth(required) };
    let blocks = u32::try_from(target - confirmations).unwrap_or(1).clamp(1, 60);
    Some(interval.saturating_mul(blocks))
}

/// The chain says the transaction is gone. One such answer proves nothing (a node behind, a
/// load balancer switching nodes, a transaction briefly out of the mempool during a
/// reorganisation), so the payment keeps its state until the transaction stayed missing over
/// `gone_after_blocks` new blocks (default: the chain's `gone_span`, the gate's confirmation
/// depth unless the chain says otherwise) and on
/// `gone_min_checks` checks at distinct tip heights; only then is it reversed. Chains whose
/// `Gone` is authoritative (the sandbox) reverse at once. Returns whether it was reversed.
async fn on_missing(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    cfg: &PipelineConfig,
    p: &payment::Model,
) -> Result<bool, PipelineError> {
    if chain.gone_is_final() {
        reverse(db, p).await?;
        return Ok(true);
    }
    let tip = i64::try_from(chain.tip().await?).unwrap_or(i64::MAX);
    let span = i64::try_from(cfg.gone_after_blocks.unwrap_or_else(|| chain.gone_span())).unwrap_or(i64::MAX);
    let min_checks = i32::try_from(cfg.gone_min_checks.max(1)).unwrap_or(i32::MAX);
    let (since, checks) = note_missing(db, p, tip).await?;
    if checks >= min_checks && tip.saturating_sub(since) >= span {
        reverse(db, p).await?;
        return Ok(true);
    }
    tracing::info!(payment_id = %p.id, since, checks, tip, "transaction missing on chain; not reversed yet");
    Ok(false)
}

/// A reversed payment on a live chain is still watched until the chain is `final_depth` blocks
/// past its last missing check: if its transaction is in a block again (a reorganisation back to
/// the fork that holds it, at a height the scanner may have passed), it is revived
/// (`scanner::revive_on_chain`). A transfer mined again in a new block is revived by the scanner
/// whenever it comes. The sandbox's reversals are final.
async fn watch_reversed(
    db: &DatabaseConnection,
    chain: &dyn Chain,
    p: &payment::Model,
    interval: Duration,
) -> Result<Option<Duration>, PipelineError> {
    let Some(last) = p.missing_last_height.filter(|_| !chain.gone_is_final()) else { return Ok(None) };
    let status = chain.status(&p.tx_hash, p.output_index, seen_at(p)).await?;
    let tip = chain.tip().await?;
    if let TxStatus::Confirmations(n) = status
        && n > 0
    {
        super::scanner::revive_on_chain(db, p, tip.saturating_sub(n - 1), tip).await?;
        return Ok(Some(interval));
    }
    let until = last.saturating_add(i64::from(final_depth(p.required_confirmations)));
    Ok((i64::try_from(tip).unwrap_or(i64::MAX) < until).then_some(interval))
}

/// Counts a check that found the transaction missing (once per new tip height), with a guarded
/// update; returns (missing since height, checks) as stored.
async fn note_missing(db: &DatabaseConnection, p: &payment::Model, tip: i64) -> Result<(i64, i32), PipelineError> {
    let (since, checks) = match (p.missing_since_height, p.missing_last_height) {
        (Some(since), Some(last)) if tip <= last => return Ok((since, p.missing_checks)),
        (Some(since), _) => (since, p.missing_checks.saturating_add(1)),
        (None, _) => (tip, 1),
    };
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
    if update.exec(db).await?.rows_affected == 1 {
        return Ok((since, checks));
    }
    // Another tracker stored this check (or the transaction was seen again): use its state.
    let now = payment::Entity::find_by_id(p.id).one(db).await?;
    Ok(now.and_then(|n| n.missing_since_height.map(|s| (s, n.missing_checks))).unwrap_or((tip, 0)))
}

/// The transaction is on the chain again: forget that it was missing.
async fn clear_missing(db: &DatabaseConnection, id: Uuid) -> Result<(), PipelineError> {
    payment::Entity::update_many()
        .col_expr(payment::Column::MissingSinceHeight, Expr::value(Option::<i64>::None))
        .col_expr(payment::Column::MissingLastHeight, Expr::value(Option::<i64>::None))
        .col_expr(payment::Column::MissingChecks, Expr::value(0))
        .filter(payment::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// Confirmation: the payment moves to `confirmed`, the invoice moves per the PRODUCT.md table
/// (or records a late deposit), and, for passthrough settlement, its pending amount is credited
/// to the available balance and `balance.credited` follows. A payment to an invoice that
/// converts into another asset is confirmed but not credited here: the settlement converter
/// credits it (`crate::settlement`).
async fn confirm(db: &DatabaseConnection, p: &payment::Model, confirmations: i32) -> Result<(), PipelineError> {
    confirm_many(db, &[(p.clone(), confirmations)]).await.map(drop)
}

/// [`confirm`] for many payments (each with the confirmations the chain reported, at least its
/// required ones) in one transaction, so that a merchant's balance row is locked once for all
/// of them. Payments of one invoice in a batch count together: the invoice's `amount_paid`
/// includes all of them from the first, so its transition names the first as its cause. Should
/// the batch fail, each payment is confirmed in a transaction of its own, so one bad payment
/// holds up no other; the first error is returned after all were tried.
pub async fn confirm_many(
    db: &DatabaseConnection,
    due: &[(payment::Model, i32)],
) -> Result<Vec<payment::Model>, PipelineError> {
    let e = match confirm_together(db, due).await {
        Ok(moved) => return Ok(moved),
        Err(e) if due.len() < 2 => return Err(e),
        Err(e) => e,
    };
    tracing::warn!(error = %e, payments = due.len(), "a batch of confirmations failed; confirming one by one");
    let (mut moved, mut first) = (Vec::new(), None);
    for item in due {
        match confirm_together(db, std::slice::from_ref(item)).await {
            Ok(m) => moved.extend(m),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    first.map_or(Ok(moved), Err)
}

/// Locks are taken in the order every writer uses (payments, invoices one by one in id order,
/// balances, invoice credits) and the merchants' balance rows, which all of a merchant's
/// credits, payouts and refunds in that asset share, only at the end, each once, so they are
/// held for a few statements however many payments the batch confirms.
async fn confirm_together(
    db: &DatabaseConnection,
    due: &[(payment::Model, i32)],
) -> Result<Vec<payment::Model>, PipelineError> {
    if due.is_empty() {
        return Ok(Vec::new());
    }
    // The settlement target never changes once an invoice has payments.
    let invoice_ids: Vec<Uuid> = due.iter().map(|(p, _)| p.invoice_id).collect();
    let invoices: HashMap<Uuid, invoice::Model> = invoice::Entity::find()
        .filter(invoice::Column::Id.is_in(invoice_ids))
        .all(db)
        .await?
        .into_iter()
        .map(|i| (i.id, i))
        .collect();
    let converting = |p: &payment::Model| -> Result<bool, PipelineError> {
        let inv = invoices
            .get(&p.invoice_id)
            .ok_or_else(|| PipelineError::Invariant(format!("invoice {} missing", p.invoice_id)))?;
        Ok(domain::settlement::converting_target(inv, p).is_some())
    };
    let mut groups: BTreeMap<(bool, i32), Vec<Uuid>> = BTreeMap::new();
    for (p, confirmations) in due {
        groups.entry((converting(p)?, *confirmations)).or_default().push(p.id);
    }
    let txn = domain::db::begin_write(db).await?;
    let now = Utc::now();
    // Confirmed (and, for passthrough, stamped credited) by guarded updates: of two trackers,
    // one moves each payment.
    let mut moved = Vec::with_capacity(due.len());
    for ((converting, confirmations), ids) in groups {
        let mut update = payment::Entity::update_many()
            .col_expr(payment::Column::Status, Expr::value(PaymentStatus::Confirmed.as_str()))
            .col_expr(payment::Column::ConfirmedAt, Expr::value(now))
            .col_expr(payment::Column::Confirmations, Expr::value(confirmations))
            .col_expr(payment::Column::CheckedAt, Expr::value(now));
        if !converting {
            update = update
                .col_expr(payment::Column::CreditedAt, Expr::value(now))
                .col_expr(payment::Column::CreditedGateId, Expr::col(payment::Column::GateId))
                .col_expr(payment::Column::CreditedAmount, Expr::col(payment::Column::Amount));
        }
        let rows = update
            .filter(payment::Column::Id.is_in(ids))
            .filter(payment::Column::Status.eq(PaymentStatus::Confirming))
            .filter(payment::Column::CreditedAt.is_null())
            .exec_with_returning(&txn)
            .await?;
        moved.extend(rows.into_iter().map(|p| (p, converting)));
    }
    if moved.is_empty() {
        // All confirmed before (a replay, or another tracker): nothing to write.
        txn.rollback().await?;
        return Ok(Vec::new());
    }
    moved.sort_by_key(|(p, _)| (p.invoice_id, p.id));
    let invoices = invoices_see_confirmations(&txn, &moved, now).await?;
    // After the invoices' own events: `balance.credited` follows each payment it credits.
    let mut credited = Vec::with_capacity(moved.len());
    for (p, converting) in &moved {
        if *converting {
            continue;
        }
        let inv = invoices.get(&p.invoice_id).ok_or_else(|| PipelineError::Invariant("invoice not locked".into()))?;
        let gate = domain::gates::find(&p.gate_id).ok_or_else(|| PipelineError::Invariant("unknown gate".into()))?;
        let credit = events::Credit {
            outcome: "source_credited",
            failure_class: Some("not_required"),
            credited_gate: gate,
            credited_amount: p.amount.0,
        };
        credited.push((inv, p, credit));
    }
    events::emit_balance_credits(&txn, &credited).await?;
    // Last: the balances (pending released and available credited, one posting per balance).
    let credits: Vec<Credit<'_>> = credited
        .iter()
        .map(|(inv, p, _)| Credit {
            payment: p,
            merchant_id: inv.merchant_id,
            gate: &p.gate_id,
            amount: p.amount.0,
            release_pending: true,
        })
        .collect();
    ledger::post_credits(&txn, &credits).await?;
    txn.commit().await?;
    Ok(moved.into_iter().map(|(p, _)| p).collect())
}

/// Invoices per statement where a batch reads or writes them by id.
const INVOICES_PER_STATEMENT: usize = 200;

/// The invoices' side of the confirmations of `moved` (confirmed by the caller's transaction,
/// sorted by invoice): each invoice is locked (in id order; the lock serializes an invoice's
/// confirmations and reversals) and read, its static address's total grows by each payment,
/// `amount_paid` becomes the sum of its confirmed payments, and it moves per the PRODUCT.md
/// table with its event, caused by its first payment here, or records each payment as a late
/// deposit. Returns the invoices as of before their transitions (their id and external id name
/// the credits' events).
async fn invoices_see_confirmations<C: ConnectionTrait>(
    txn: &C,
    moved: &[(payment::Model, bool)],
    now: chrono::DateTime<Utc>,
) -> Result<HashMap<Uuid, invoice::Model>, PipelineError> {
    let mut ids: Vec<Uuid> = moved.iter().map(|(p, _)| p.invoice_id).collect();
    ids.dedup();
    let mut invoices = HashMap::with_capacity(ids.len());
    let (mut paid, mut unconfirmed) = (HashMap::<Uuid, Decimal>::new(), std::collections::HashSet::new());
    for chunk in ids.chunks(INVOICES_PER_STATEMENT) {
        let mut lock = invoice::Entity::find().filter(invoice::Column::Id.is_in(chunk.iter().copied()));
        if txn.get_database_backend() == sea_orm::DatabaseBackend::Postgres {
            // (SQLite: the write transaction is the only writer.)
            lock = lock.order_by_asc(invoice::Column::Id).lock_exclusive();
        }
        invoices.extend(lock.all(txn).await?.into_iter().map(|inv| (inv.id, inv)));
        let payments = payment::Entity::find()
            .filter(payment::Column::InvoiceId.is_in(chunk.iter().copied()))
            .filter(payment::Column::Status.is_in([PaymentStatus::Confirmed, PaymentStatus::Confirming]))
            .all(txn)
            .await?;
        for p in payments {
            match p.status {
                PaymentStatus::Confirmed => {
                    let sum = paid.entry(p.invoice_id).or_default();
                    *sum = sum.checked_add(p.amount.0).ok_or(ledger::LedgerError::Overflow)?;
                }
                PaymentStatus::Confirming => {
                    unconfirmed.insert(p.invoice_id);
                }
                PaymentStatus::Reversed => {}
            }
        }
    }
    if invoices.len() != ids.len() {
        return Err(PipelineError::Invariant("a confirmed payment's invoice is missing".into()));
    }
    for (p, _) in moved {
        if let Some(sa) = invoices[&p.invoice_id].static_address_id {
            add_static_total(txn, sa, p.amount.0).await?;
        }
    }
    for chunk in ids.chunks(INVOICES_PER_STATEMENT) {
        let mut amount_paid = CaseStatement::new();
        for id in chunk {
            let sum = Amount::new(paid.get(id).copied().unwrap_or_default());
            amount_paid = amount_paid.case(invoice::Column::Id.eq(*id), Expr::value(sum));
            if let Some(inv) = invoices.get_mut(id) {
                inv.amount_paid = sum;
            }
        }
        invoice::Entity::update_many()
            .col_expr(invoice::Column::AmountPaid, amount_paid.finally(Expr::col(invoice::Column::AmountPaid)).into())
            .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
            .filter(invoice::Column::Id.is_in(chunk.iter().copied()))
            .exec(txn)
            .await?;
    }
    let merchants: Vec<Uuid> = invoices.values().map(|i| i.merchant_id).collect();
    let tolerance_pct: HashMap<Uuid, Decimal> = entity::merchant::Entity::find()
        .filter(entity::merchant::Column::Id.is_in(merchants))
        .all(txn)
        .await?
        .into_iter()
        .map(|m| (m.id, m.underpayment_tolerance_percent.0))
        .collect();

    // Per invoice: its late deposits, or the transition its payments make.
    let mut late = Vec::new();
    let mut transitions: Vec<((InvoiceStatus, InvoiceTrigger), Vec<Uuid>)> = Vec::new();
    let mut caused = HashMap::new();
    for (p, _) in moved {
        let inv = invoices.get(&p.invoice_id).ok_or_else(|| PipelineError::Invariant("invoice not locked".into()))?;
        let expired = inv.expires_at.is_some_and(|e| e < now);
        if inv.status.takes_late_deposits() || (inv.status == InvoiceStatus::Underpaid && expired) {
            late.push(p);
            continue;
        }
        if caused.contains_key(&inv.id)
            || !matches!(inv.status, InvoiceStatus::Pending | InvoiceStatus::Confirming | InvoiceStatus::Underpaid)
        {
            continue;
        }
        let requested = inv.amount_requested.map_or(Decimal::ZERO, |a| a.0);
        let pct = tolerance_pct.get(&inv.merchant_id).copied().unwrap_or_default();
        let tolerance =
            requested.checked_mul(pct).and_then(|v| v.checked_div(Decimal::ONE_HUNDRED)).unwrap_or_default();
        let paid = inv.amount_paid.0;
        let trigger = if paid > requested + tolerance {
            Some((InvoiceTrigger::ConfirmedOver, kind::INVOICE_OVERPAID))
        } else if paid >= requested - tolerance {
            Some((InvoiceTrigger::ConfirmedExact, kind::INVOICE_PAID))
        } else if !unconfirmed.contains(&inv.id) {
            Some((InvoiceTrigger::ConfirmedShort, kind::INVOICE_UNDERPAID))
        } else {
            None
        };
        if let Some((trigger, event)) = trigger {
            match transitions.iter_mut().find(|(key, _)| *key == (inv.status, trigger)) {
                Some((_, ids)) => ids.push(inv.id),
                None => transitions.push(((inv.status, trigger), vec![inv.id])),
            }
            caused.insert(inv.id, (event, p));
        }
    }
    let mut after = Vec::new();
    for ((from, trigger), ids) in transitions {
        after.extend(transition_many(txn, from, trigger, &ids).await?);
    }
    let mut events: Vec<(&str, &invoice::Model, Option<&payment::Model>)> = Vec::with_capacity(moved.len());
    for p in late {
        events.push((kind::INVOICE_LATE_DEPOSIT, &invoices[&p.invoice_id], Some(p)));
    }
    for inv in &after {
        let (event, cause) = caused[&inv.id];
        events.push((event, inv, Some(cause)));
    }
    events::emit_invoices(txn, &events).await?;
    Ok(invoices)
}

/// A deposit seen but not confirmed within the monitoring window makes a `confirming` invoice
/// `invalid`. The payment is still tracked: if it confirms later it is credited all the same.
async fn invalidate_unconfirmed(db: &DatabaseConnection, p: &payment::Model) -> Result<(), PipelineError> {
    let txn = domain::db::begin_write(db).await?;
    let inv = load_invoice(&txn, p.invoice_id).await?;
    if let Some(after) = transition(&txn, &inv, InvoiceTrigger::MonitorTimeout).await? {
        events::emit_invoice(&txn, kind::INVOICE_INVALID, &after, Some(p)).await?;
    }
    txn.commit().await?;
    Ok(())
}

/// The chain no longer shows the transfer. Before credit: the pending amount goes away (a
/// conversion quote is abandoned) and a `confirming` invoice returns to `pending` (or
/// `expired`), a confirmed one becomes `invalid`. After credit: the credit is taken back
/// (`deposit_reversal`, which may leave the merchant owing), the invoice's refundable credit
/// shrinks, and a paid/overpaid/underpaid invoice becomes `invalid`.
async fn reverse(db: &DatabaseConnection, p: &payment::Model) -> Result<(), PipelineError> {
    let txn = domain::db::begin_write(db).await?;
    let now = Utc::now();
    // The row as it is when reversed: whether it was credited is read from here, not from the
    // caller's copy (the settlement converter may have credited it meanwhile).
    let moved = payment::Entity::update_many()
        .col_expr(payment::Column::Status, Expr::value(PaymentStatus::Reversed.as_str()))
        .col_expr(payment::Column::ReversedAt, Expr::value(now))
        .filter(payment::Column::Id.eq(p.id))
        .filter(payment::Column::Status.eq(p.status))
        .exec_with_returning(&txn)
        .await?;
    let Some(p_after) = moved.into_iter().next() else {
        txn.rollback().await?;
        return Ok(());
    };
    let inv = lock_invoice(&txn, p.invoice_id).await?;
    let reference = Some(("payment", p.id));
    match (p.status, p_after.credited_at) {
        (PaymentStatus::Confirming | PaymentStatus::Confirmed, None) => {
            crate::settlement::abandon(&txn, p.id).await?;
            let posting = Posting {
                bucket: Bucket::Pending,
                amount: -p.amount.0,
                entry_type: EntryType::DepositReversal,
                reference,
                description: Some("uncredited deposit reversed".into()),
            };
            ledger::post(&txn, ledger::Account::of(inv.merchant_id, inv.environment, &p.gate_id), &[posting]).await?;
            if p.status == PaymentStatus::Confirmed {
                // Confirmed, awaiting its conversion: it counted as paid.
                if let Some(sa) = inv.static_address_id {
                    add_static_total(&txn, sa, -p.amount.0).await?;
                }
                let inv = refresh_amount_paid(&txn, &inv).await?;
                events::emit_invoice(&txn, kind::INVOICE_DEPOSIT_REVERSED, &inv, Some(&p_after)).await?;
                if let Some(after) = transition(&txn, &inv, InvoiceTrigger::CreditedReversed).await? {
                    events::emit_invoice(&txn, kind::INVOICE_INVALID, &after, Some(&p_after)).await?;
                }
            } else {
                events::emit_invoice(&txn, kind::INVOICE_DEPOSIT_REVERSED, &inv, Some(&p_after)).await?;
                if inv.status == InvoiceStatus::Confirming && !has_unconfirmed(&txn, inv.id).await? {
                    let late = inv.expires_at.is_some_and(|e| e < now);
                    let trigger = if late {
                        InvoiceTrigger::UnconfirmedReversedLate
                    } else {
                        InvoiceTrigger::UnconfirmedReversed
                    };
                    transition(&txn, &inv, trigger).await?;
                }
            }
        }
        (PaymentStatus::Confirmed, Some(_)) => {
            let gate = p_after.credited_gate_id.clone().unwrap_or_else(|| p.gate_id.clone());
            let credited = p_after.credited_amount.map_or(p.amount.0, |a| a.0);
            let posting = Posting {
                bucket: Bucket::Available,
                amount: -credited,
                entry_type: EntryType::DepositReversal,
                reference,
                description: Some("credited deposit reversed".into()),
            };
            if let Some(sa) = inv.static_address_id {
                add_static_total(&txn, sa, -p.amount.0).await?;
            }
            ledger::post_allowing_debt(&txn, ledger::Account::of(inv.merchant_id, inv.environment, &gate), &[posting])
                .await?;
            shrink_invoice_credit(&txn, inv.id, &gate, credited).await?;
            let inv = refresh_amount_paid(&txn, &inv).await?;
            events::emit_invoice(&txn, kind::INVOICE_DEPOSIT_REVERSED, &inv, Some(&p_after)).await?;
            if let Some(after) = transition(&txn, &inv, InvoiceTrigger::CreditedReversed).await? {
                events::emit_invoice(&txn, kind::INVOICE_INVALID, &after, Some(&p_after)).await?;
            }
        }
        (PaymentStatus::Confirming, Some(_)) => {
            return Err(PipelineError::Invariant(format!("payment {} credited before confirmation", p.id)));
        }
        (PaymentStatus::Reversed, _) => {}
    }
    txn.commit().await?;
    Ok(())
}

/// Takes the invoice's row lock (a no-op update) and reads it: the first lock after the
/// payment's, before any balance.
async fn lock_invoice<C: ConnectionTrait>(txn: &C, id: Uuid) -> Result<invoice::Model, PipelineError> {
    invoice::Entity::update_many()
        .col_expr(invoice::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(invoice::Column::Id.eq(id))
        .exec_with_returning(txn)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| PipelineError::Invariant(format!("invoice {id} missing")))
}

async fn load_invoice<C: ConnectionTrait>(txn: &C, id: Uuid) -> Result<invoice::Model, PipelineError> {
    invoice::Entity::find_by_id(id)
        .one(txn)
        .await?
        .ok_or_else(|| PipelineError::Invariant(format!("invoice {id} missing")))
}

/// `amount_paid` = the sum of the invoice's confirmed payments. Called with the gate's balance
/// locked, so two confirmations of one invoice never interleave here.
async fn refresh_amount_paid<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
) -> Result<invoice::Model, PipelineError> {
    let paid: Decimal = payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(inv.id))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirmed))
        .all(txn)
        .await?
        .iter()
        .map(|p| p.amount.0)
        .sum();
    let mut row: invoice::ActiveModel = inv.clone().into();
    row.amount_paid = Set(Amount::new(paid));
    row.updated_at = Set(Utc::now());
    Ok(row.update(txn).await?)
}

async fn has_unconfirmed<C: ConnectionTrait>(txn: &C, invoice_id: Uuid) -> Result<bool, PipelineError> {
    Ok(payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(invoice_id))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirming))
        .one(txn)
        .await?
        .is_some())
}

/// Adds `delta` to a static address's `total_received` in the caller's write transaction. The
/// row is read and written under its lock: `SELECT … FOR UPDATE` on PostgreSQL (concurrent
/// confirmations of the address's many invoices queue here instead of losing an update); on
/// SQLite the write transaction is the only writer. (Not `SET x = x + $1`: on SQLite the column
/// is TEXT, and SQL arithmetic on it would go through a lossy double.)
async fn add_static_total<C: ConnectionTrait>(txn: &C, id: Uuid, delta: Decimal) -> Result<(), PipelineError> {
    let mut query = static_address::Entity::find_by_id(id);
    if txn.get_database_backend() == sea_orm::DatabaseBackend::Postgres {
        query = query.lock_exclusive();
    }
    let Some(a) = query.one(txn).await? else { return Ok(()) };
    let total = a.total_received.0.checked_add(delta).ok_or(ledger::LedgerError::Overflow)?;
    static_address::Entity::update_many()
        .col_expr(static_address::Column::TotalReceived, Expr::value(Amount::new(total)))
        .col_expr(static_address::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(static_address::Column::Id.eq(id))
        .exec(txn)
        .await?;
    Ok(())
}

async fn shrink_invoice_credit<C: ConnectionTrait>(
    txn: &C,
    invoice_id: Uuid,
    gate_id: &str,
    amount: Decimal,
) -> Result<(), PipelineError> {
    use entity::invoice_credit;
    let Some(c) = invoice_credit::Entity::find_by_id((invoice_id, gate_id.to_owned())).one(txn).await? else {
        return Ok(());
    };
    let credited = c.credited.0.checked_sub(amount).ok_or(ledger::LedgerError::Overflow)?;
    let mut row: invoice_credit::ActiveModel = c.into();
    row.credited = Set(Amount::new(credited));
    row.updated_at = Set(Utc::now());
    row.update(txn).await?;
    Ok(())
}

/// The block (ledger) a payment was recorded in, for [`Chain::status`].
fn seen_at(p: &payment::Model) -> Option<u64> {
    p.block_height.and_then(|h| u64::try_from(h).ok())
}
