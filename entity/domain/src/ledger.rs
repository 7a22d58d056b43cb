//! The ledger: the only place balances change.
//!
//! `post` applies signed postings to one balance inside the caller's transaction: it locks the
//! balance row (an upsert that creates the zero row on first use and otherwise takes the row
//! lock: `FOR UPDATE` semantics on PostgreSQL, the write lock on SQLite), checks every bucket
//! stays >= 0 with checked `Decimal` arithmetic, inserts one immutable entry per posting with
//! the bucket's value after it, and writes the new bucket values. Concurrent postings to one
//! balance serialize on that lock, so no interleaving can take a bucket below zero, and the
//! balance row always equals the sum of its entries. Money columns are TEXT on SQLite, so no
//! arithmetic happens in SQL.
//!
//! `credit_payment` is how a confirmed payment reaches a balance, exactly once: a guarded
//! `UPDATE payments SET credited_at … WHERE id = ? AND credited_at IS NULL` (a second call
//! changes nothing and returns `false`), the `invoice_credit` entry on the credited gate's
//! balance, and the invoice's `invoice_credits(invoice_id, gate_id)` row grown by the credited
//! amount, all in the caller's transaction (`post_credits` does the same for a batch). That row
//! is the refund cap (`credited`, `refunded`). Every writer of `invoice_credits` (credit, refund,
//! refund release) holds the gate's balance lock first, so the lock order is always
//! payment/payout row → balance → invoice credit.

use chrono::Utc;
use entity::{Amount, Bucket, EntryType, Environment, InvoiceId, MerchantId, balance, ledger_entry};
use rust_decimal::Decimal;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ActiveModelTrait, ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};
use uuid::Uuid;

use crate::list_counts::{Key, List, Tally};

/// One signed change of one bucket.
#[derive(Debug, Clone)]
pub struct Posting {
    pub bucket: Bucket,
    pub amount: Decimal,
    pub entry_type: EntryType,
    /// What caused it: (`invoice`|`payment`|`payout`|`refund`|`adjustment`, id).
    pub reference: Option<(&'static str, Uuid)>,
    pub description: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("insufficient {bucket:?} balance: {has} available, {needed} needed")]
    Insufficient { bucket: Bucket, has: Decimal, needed: Decimal },
    #[error("amount overflow")]
    Overflow,
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// Whose balance postings change: one merchant's balance of one gate in one environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account<'a> {
    pub merchant_id: Uuid,
    pub env: Environment,
    pub gate_id: &'a str,
}

impl<'a> Account<'a> {
    pub fn of(merchant_id: MerchantId, env: Environment, gate_id: &'a str) -> Self {
        Account { merchant_id: merchant_id.into(), env, gate_id }
    }
}

/// Ledger entries per multi-row insert.
const ENTRIES_PER_INSERT: usize = 1000;

/// Locks (creating if needed) the balance row and returns its current values.
async fn lock_balance<C: ConnectionTrait>(txn: &C, account: Account<'_>) -> Result<balance::Model, DbErr> {
    let Account { merchant_id, env, gate_id } = account;
    let now = Utc::now();
    let row = balance::ActiveModel {
        id: Set(Uuid::now_v7()),
        merchant_id: Set(merchant_id),
        environment: Set(env),
        gate_id: Set(gate_id.to_owned()),
        available: Set(Amount::ZERO),
        pending: Set(Amount::ZERO),
        reserved: Set(Amount::ZERO),
        created_at: Set(now),
        updated_at: Set(now),
    };
    // Insert the zero row, or touch the existing one: either way this statement holds the row
    // (PostgreSQL) or the database write lock (SQLite) until the transaction ends.
    balance::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([balance::Column::MerchantId, balance::Column::Environment, balance::Column::GateId])
                .update_column(balance::Column::UpdatedAt)
                .to_owned(),
        )
        .exec_with_returning(txn)
        .await
}

/// One currency's ledger (and, when given, one entry type) as the list counters key it: what
/// `GET /v1/balances/{currency}/ledger` without a time window totals.
pub fn tally(gate_id: &str, entry_type: Option<EntryType>) -> Tally {
    let kind = entry_type.map(|t| sea_orm::ActiveEnum::to_value(&t));
    Tally::new(List::Ledger, Key { gate_id: Some(gate_id.to_owned()), kind, ..Key::default() })
}

/// Applies `postings` to the balance of `account` in the caller's transaction. All or nothing:
/// on error nothing is written (the caller rolls back).
pub async fn post<C: ConnectionTrait>(
    txn: &C,
    account: Account<'_>,
    postings: &[Posting],
) -> Result<balance::Model, LedgerError> {
    post_with(txn, account, postings, false).await
}

/// `post`, but `available` may go below zero. Only the reversal of an already credited deposit
/// uses it: the chain took back money the merchant may have spent, and the debt must show.
pub async fn post_allowing_debt<C: ConnectionTrait>(
    txn: &C,
    account: Account<'_>,
    postings: &[Posting],
) -> Result<balance::Model, LedgerError> {
    post_with(txn, account, postings, true).await
}

async fn post_with<C: ConnectionTrait>(
    txn: &C,
    account: Account<'_>,
    postings: &[Posting],
    allow_debt: bool,
) -> Result<balance::Model, LedgerError> {
    let current = lock_balance(txn, account).await?;
    let Account { merchant_id, env, gate_id } = account;
    let (mut available, mut pending, mut reserved) = (current.available.0, current.pending.0, current.reserved.0);
    let now = Utc::now();
    let mut entries = Vec::with_capacity(postings.len());
    for p in postings {
        let slot = match p.bucket {
            Bucket::Available => &mut available,
            Bucket::Pending => &mut pending,
            Bucket::Reserved => &mut reserved,
        };
        let next = slot.checked_add(p.amount).ok_or(LedgerError::Overflow)?;
        if next < Decimal::ZERO && !(allow_debt && p.bucket == Bucket::Available) {
            return Err(LedgerError::Insufficient { bucket: p.bucket, has: *slot, needed: -p.amount });
        }
        *slot = next;
        entries.push(ledger_entry::Model {
            id: Uuid::now_v7(),
            merchant_id,
            environment: env,
            gate_id: gate_id.to_owned(),
            bucket: p.bucket,
            entry_type: p.entry_type,
            amount: Amount::new(p.amount),
            balance_after: Amount::new(next),
            reference_type: p.reference.map(|(t, _)| t.to_owned()),
            reference_id: p.reference.map(|(_, id)| id),
            description: p.description.clone(),
            created_at: now,
        });
    }
    // A scan posts a whole batch's deposits of one merchant at once.
    crate::bulk::insert::<ledger_entry::Entity, _>(txn, entries, &[]).await?;
    let mut row: balance::ActiveModel = current.into();
    row.available = Set(Amount::new(available));
    row.pending = Set(Amount::new(pending));
    row.reserved = Set(Amount::new(reserved));
    row.updated_at = Set(now);
    Ok(row.update(txn).await?)
}

/// An operator adjustment of the available balance (`ops ledger adjust`): positive credits,
/// negative debits (refused below zero). Returns the balance after it.
pub async fn adjust(
    db: &impl crate::db::WriteDb,
    merchant_id: MerchantId,
    env: Environment,
    gate: &crate::gates::Gate,
    amount: Decimal,
    reason: &str,
) -> Result<balance::Model, LedgerError> {
    if amount.is_zero() {
        return Err(LedgerError::Invalid("an adjustment must not be zero".into()));
    }
    if amount.scale() > gate.decimals {
        return Err(LedgerError::Invalid(format!("{} allows at most {} decimal places", gate.id, gate.decimals)));
    }
    let txn = crate::db::begin_write(db).await?;
    let posting = Posting {
        bucket: Bucket::Available,
        amount,
        entry_type: EntryType::Adjustment,
        reference: Some(("adjustment", Uuid::now_v7())),
        description: Some(reason.to_owned()),
    };
    let after = post(&txn, Account::of(merchant_id, env, gate.id), &[posting]).await?;
    txn.commit().await?;
    Ok(after)
}

/// Credits a confirmed payment to its merchant's available balance, exactly once, in the
/// caller's transaction: the payment row is stamped `credited_at` with a guarded update (no
/// second stamp can succeed), the `invoice_credit` entry is posted to the credited gate's
/// balance (with `release_pending`, the payment's `pending` amount is released in the same
/// posting), and the invoice's per-asset credit (the refund cap) grows by the same amount.
/// Returns `false` when the payment was already credited (nothing is written).
///
/// Lock order: the balance row is taken here, after whatever the caller locked before (payment,
/// invoice), and the invoice's credit row after it, as every other writer of that row does.
pub async fn credit_payment<C: ConnectionTrait>(txn: &C, c: &Credit<'_>) -> Result<bool, LedgerError> {
    let Credit { payment, gate: credited_gate, amount, .. } = *c;
    if amount <= Decimal::ZERO {
        return Err(LedgerError::Invalid(format!("a credit must be positive, got {amount}")));
    }
    if crate::payments::lifecycle::credit(txn, payment.id.into(), credited_gate, amount, Utc::now()).await?.is_none() {
        return Ok(false);
    }
    post_credits(txn, std::slice::from_ref(c)).await?;
    Ok(true)
}

/// A confirmed payment's credit to its merchant's available balance.
#[derive(Debug, Clone, Copy)]
pub struct Credit<'a> {
    pub payment: &'a entity::payment::Model,
    pub merchant_id: Uuid,
    /// The paid gate or, after a settlement conversion, the target gate.
    pub gate: &'a str,
    pub amount: Decimal,
    /// Release the payment's `pending` amount in the same posting.
    pub release_pending: bool,
}

/// The postings of credits whose payments the caller has just stamped `credited_at` (with a
/// guarded update in the same transaction, as `credit_payment` does): the `invoice_credit`
/// entries, then the invoices' per-asset credits. Each balance is locked and posted to once, with
/// its entries in the order of `credits`, and balances are taken in a fixed order (merchant,
/// gate, environment), so a batch holds each balance row for a few statements however many
/// credits it carries, and two batches never wait on each other crosswise.
pub async fn post_credits<C: ConnectionTrait>(txn: &C, credits: &[Credit<'_>]) -> Result<(), LedgerError> {
    fn add<'a>(accounts: &mut Vec<(Account<'a>, Vec<Posting>)>, account: Account<'a>, posting: Posting) {
        match accounts.iter_mut().find(|(a, _)| *a == account) {
            Some((_, postings)) => postings.push(posting),
            None => accounts.push((account, vec![posting])),
        }
    }
    let mut accounts = Vec::new();
    let mut invoice_credits = Vec::with_capacity(credits.len());
    for c in credits {
        let (payment, env) = (c.payment, c.payment.environment);
        let reference = Some(("payment", payment.id));
        if c.release_pending {
            let release = Posting {
                bucket: Bucket::Pending,
                amount: -payment.amount.0,
                entry_type: EntryType::InvoiceCredit,
                reference,
                description: Some("deposit confirmed".into()),
            };
            add(&mut accounts, Account::of(c.merchant_id.into(), env, &payment.gate_id), release);
        }
        let credit = Posting {
            bucket: Bucket::Available,
            amount: c.amount,
            entry_type: EntryType::InvoiceCredit,
            reference,
            description: None,
        };
        add(&mut accounts, Account::of(c.merchant_id.into(), env, c.gate), credit);
        invoice_credits.push(InvoiceCredit {
            invoice_id: payment.invoice_id,
            merchant_id: c.merchant_id,
            env,
            gate_id: c.gate,
            amount: c.amount,
        });
    }
    accounts.sort_by(|(a, _), (b, _)| {
        (a.merchant_id, a.gate_id, a.env.as_str()).cmp(&(b.merchant_id, b.gate_id, b.env.as_str()))
    });
    for (account, postings) in &accounts {
        post(txn, *account, postings).await?;
    }
    add_invoice_credits(txn, &invoice_credits).await
}

/// A growth of one invoice's credit in one gate (the refund cap).
#[derive(Debug, Clone, Copy)]
pub struct InvoiceCredit<'a> {
    pub invoice_id: Uuid,
    pub merchant_id: Uuid,
    pub env: Environment,
    pub gate_id: &'a str,
    pub amount: Decimal,
}

/// Grows (or creates) each invoice's credit in its gate, in one read and one multi-row upsert.
/// Call with those gates' balances locked.
pub async fn add_invoice_credits<C: ConnectionTrait>(
    txn: &C,
    credits: &[InvoiceCredit<'_>],
) -> Result<(), LedgerError> {
    use entity::invoice_credit;
    use sea_orm::{ColumnTrait, QueryFilter};
    if credits.is_empty() {
        return Ok(());
    }
    let now = Utc::now();
    let ids: Vec<Uuid> = credits.iter().map(|c| c.invoice_id).collect();
    let mut existing: Vec<invoice_credit::Model> = Vec::new();
    for chunk in ids.chunks(ENTRIES_PER_INSERT) {
        existing.extend(
            invoice_credit::Entity::find()
                .filter(invoice_credit::Column::InvoiceId.is_in(chunk.iter().copied()))
                .all(txn)
                .await?,
        );
    }
    // The rows after these credits: an invoice credited twice in one batch grows twice.
    let mut rows: Vec<invoice_credit::Model> = Vec::new();
    for c in credits {
        let same = |r: &invoice_credit::Model| r.invoice_id == c.invoice_id && r.gate_id == c.gate_id;
        let i = match rows.iter().position(same) {
            Some(i) => i,
            None => {
                rows.push(existing.iter().find(|r| same(r)).cloned().unwrap_or_else(|| invoice_credit::Model {
                    invoice_id: c.invoice_id,
                    gate_id: c.gate_id.to_owned(),
                    merchant_id: c.merchant_id,
                    environment: c.env,
                    credited: Amount::ZERO,
                    refunded: Amount::ZERO,
                    updated_at: now,
                }));
                rows.len() - 1
            }
        };
        rows[i].credited = Amount::new(rows[i].credited.0.checked_add(c.amount).ok_or(LedgerError::Overflow)?);
        rows[i].updated_at = now;
    }
    for chunk in rows.chunks(ENTRIES_PER_INSERT) {
        invoice_credit::Entity::insert_many(chunk.iter().cloned().map(invoice_credit::ActiveModel::from))
            .on_conflict(
                OnConflict::columns([invoice_credit::Column::InvoiceId, invoice_credit::Column::GateId])
                    .update_columns([invoice_credit::Column::Credited, invoice_credit::Column::UpdatedAt])
                    .to_owned(),
            )
            .exec_without_returning(txn)
            .await?;
    }
    Ok(())
}

/// [`add_invoice_credits`] of one invoice and gate.
pub async fn add_invoice_credit<C: ConnectionTrait>(
    txn: &C,
    invoice_id: InvoiceId,
    merchant_id: MerchantId,
    env: Environment,
    gate_id: &str,
    amount: Decimal,
) -> Result<(), LedgerError> {
    let (invoice_id, merchant_id) = (invoice_id.into(), merchant_id.into());
    add_invoice_credits(txn, &[InvoiceCredit { invoice_id, merchant_id, env, gate_id, amount }]).await
}
