//! What a confirmation writes: the payments confirmed, their invoices moved per the PRODUCT.md
//! table, and (passthrough settlement) their amounts credited with their fiat value at that
//! moment, in one transaction.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::Utc;
use entity::{
    Amount, InvoiceId, InvoiceStatus, InvoiceTrigger, PaymentId, PaymentStatus, invoice, payment, static_address,
};
use rust_decimal::Decimal;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use super::next_look;
use crate::pipeline::{PipelineError, final_depth};
use domain::events::{self, EventKind, InvoiceFacts};
use domain::invoices::lifecycle::{store_paid, transition_paid};
use domain::ledger::{self, Credit};
use domain::payments::{fiat, lifecycle};

/// Confirmation: the payment moves to `confirmed`, the invoice moves per the PRODUCT.md table
/// (or records a late deposit), and, for passthrough settlement, its pending amount is credited
/// to the available balance and `balance.credited` follows. A payment to an invoice that
/// converts into another asset is confirmed but not credited here: the settlement converter
/// credits it (`crate::converter`).
pub(super) async fn confirm(
    db: &DatabaseConnection,
    p: &payment::Model,
    confirmations: i32,
    interval: Duration,
) -> Result<(), PipelineError> {
    confirm_many(db, &[(p.clone(), confirmations)], interval).await.map(drop)
}

/// [`confirm`] for many payments (each with the confirmations the chain reported, at least its
/// required ones) in one transaction, so that a merchant's balance row is locked once for all
/// of them. Payments of one invoice in a batch count together: the invoice's `amount_paid`
/// includes all of them from the first, so its transition names the first as its cause. Should
/// the batch fail, each payment is confirmed in a transaction of its own, so one bad payment
/// holds up no other; the first error is returned after all were tried. Each confirmed payment
/// awaits its hand-over at its next milestone (`super::next_look` with `interval`), stored by the
/// confirmation's own update.
pub async fn confirm_many(
    db: &DatabaseConnection,
    due: &[(payment::Model, i32)],
    interval: Duration,
) -> Result<Vec<payment::Model>, PipelineError> {
    let e = match confirm_together(db, due, interval).await {
        Ok(moved) => return Ok(moved),
        Err(e) if due.len() < 2 => return Err(e),
        Err(e) => e,
    };
    tracing::warn!(error = %e, payments = due.len(), "a batch of confirmations failed; confirming one by one");
    let (mut moved, mut first) = (Vec::new(), None);
    for item in due {
        match confirm_together(db, std::slice::from_ref(item), interval).await {
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
    interval: Duration,
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
    let now = Utc::now();
    // Payments confirmed alike by one update: converting or not, their depth, their next look.
    type Alike = (bool, i32, Option<chrono::DateTime<Utc>>);
    let mut groups: BTreeMap<Alike, Vec<PaymentId>> = BTreeMap::new();
    let mut credited_now = Vec::with_capacity(due.len());
    for (p, confirmations) in due {
        let converting = converting(p)?;
        let depths = (*confirmations, p.required_confirmations, final_depth(&p.gate_id, p.required_confirmations));
        let next_at = next_look(interval, depths)
            .map(|after| now + chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX));
        groups.entry((converting, *confirmations, next_at)).or_default().push(p.id.into());
        if !converting {
            credited_now.push(fiat::Credited {
                payment_id: p.id,
                environment: p.environment,
                invoice: &invoices[&p.invoice_id],
                gate: &p.gate_id,
                amount: p.amount.0,
            });
        }
    }
    let txn = domain::db::begin_write(db).await?;
    // Each credit's fiat value on the day, written by the confirmation's update.
    let fiat_values = fiat::values(&txn, &credited_now).await?;
    // Confirmed (and, for passthrough, stamped credited) by guarded updates: of two trackers,
    // one moves each payment.
    let mut moved = Vec::with_capacity(due.len());
    for ((converting, confirmations, next_check_at), ids) in groups {
        let credit = if converting { lifecycle::Credit::Later } else { lifecycle::Credit::Now };
        let how = lifecycle::Confirmation { confirmations, credit, next_check_at, fiat: &fiat_values };
        let rows = lifecycle::confirm_many(&txn, &ids, how, now).await?;
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
    let (mut paid, mut unconfirmed) = (HashMap::<Uuid, Decimal>::new(), HashSet::new());
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
    // Each invoice's `amount_paid` becomes the sum of its confirmed payments, written below with
    // its move (or alone where it does not move).
    for id in &ids {
        if let Some(inv) = invoices.get_mut(id) {
            inv.amount_paid = Amount::new(paid.get(id).copied().unwrap_or_default());
        }
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
    // Each move (from, trigger) with the invoices that make it and their new `amount_paid`.
    type Moves = Vec<((InvoiceStatus, InvoiceTrigger), Vec<(InvoiceId, Amount)>)>;
    let mut transitions: Moves = Vec::new();
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
            Some((InvoiceTrigger::ConfirmedOver, EventKind::InvoiceOverpaid))
        } else if paid >= requested - tolerance {
            Some((InvoiceTrigger::ConfirmedExact, EventKind::InvoicePaid))
        } else if !unconfirmed.contains(&inv.id) {
            Some((InvoiceTrigger::ConfirmedShort, EventKind::InvoiceUnderpaid))
        } else {
            None
        };
        if let Some((trigger, event)) = trigger {
            let moving = (InvoiceId::from(inv.id), inv.amount_paid);
            match transitions.iter_mut().find(|(key, _)| *key == (inv.status, trigger)) {
                Some((_, ids)) => ids.push(moving),
                None => transitions.push(((inv.status, trigger), vec![moving])),
            }
            caused.insert(inv.id, (event, p));
        }
    }
    // One write per invoice: its move with its `amount_paid`, or its `amount_paid` alone.
    let mut after = Vec::new();
    for ((from, trigger), paid) in transitions {
        after.extend(transition_paid(txn, from, trigger, &paid, now).await?);
    }
    let moved_ids: HashSet<Uuid> = after.iter().map(|f| f.id).collect();
    let unmoved: Vec<(InvoiceId, Amount)> = ids
        .iter()
        .filter(|id| !moved_ids.contains(id))
        .map(|id| (InvoiceId::from(*id), invoices[id].amount_paid))
        .collect();
    store_paid(txn, &unmoved, now).await?;
    let mut events: Vec<(EventKind, InvoiceFacts, Option<&payment::Model>)> = Vec::with_capacity(moved.len());
    for p in late {
        events.push((EventKind::InvoiceLateDeposit, InvoiceFacts::from(&invoices[&p.invoice_id]), Some(p)));
    }
    for facts in after {
        let (event, cause) = caused[&facts.id];
        events.push((event, facts, Some(cause)));
    }
    events::emit_invoices(txn, &events).await?;
    Ok(invoices)
}

/// Adds `delta` to a static address's `total_received` in the caller's write transaction. The
/// row is read and written under its lock: `SELECT … FOR UPDATE` on PostgreSQL (concurrent
/// confirmations of the address's many invoices queue here instead of losing an update); on
/// SQLite the write transaction is the only writer. (Not `SET x = x + $1`: on SQLite the column
/// is TEXT, and SQL arithmetic on it would go through a lossy double.)
pub(super) async fn add_static_total<C: ConnectionTrait>(
    txn: &C,
    id: Uuid,
    delta: Decimal,
) -> Result<(), PipelineError> {
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
