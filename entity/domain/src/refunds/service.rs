//! Refund rules (spec 4.9, 2.6): idempotency by header, the invoice's credit as the cap, and a
//! linked payout created through the payout path in the same transaction.
//!
//! A refund locks the gate's balance first (its payout's reservation through
//! `payouts::service::insert_reserved`), then re-reads the invoice's credit row, checks the cap,
//! raises `refunded` and inserts the refund (`ON CONFLICT DO NOTHING` on the idempotency key), so
//! refunds racing each other and payouts on one invoice serialize on that balance lock.
//! `mirror::mirror_payout` runs inside every payout transition that posts to the balance and
//! moves the refund's status, releasing its amount from `refunded` when the payout fails or is
//! cancelled.

use std::collections::HashMap;

use chrono::Utc;
use entity::{Amount, RefundId, RefundStatus, invoice, invoice_credit, payout, refund};
use rust_decimal::Decimal;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Select};
use uuid::Uuid;

use super::types::CreateRefundRequest;
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::gates::{self, Gate};
use crate::invoices::validate::canonical_hash;
use crate::keys::Principal;
use crate::owned::{self, Filter};
use crate::payouts::service::{self as payouts, FeeKind, PayoutSpec};
use crate::state::AppState;

/// The `Idempotency-Key` header's name, as errors name it.
pub const KEY_HEADER: &str = "Idempotency-Key";

pub enum Created {
    New(refund::Model, payout::Model),
    Replayed(refund::Model, payout::Model),
}

struct Checked {
    invoice_id: Uuid,
    currency: String,
    amount: String,
    destination: String,
}

/// Spec 4.9 bounds: the refunded invoice, then a payout request's bounds (`payouts::check_sent`);
/// violations are 422 `validation_error`, all reported at once.
fn check_bounds(req: &CreateRefundRequest) -> DomainResult<Checked> {
    let mut p = Vec::new();
    if req.invoice_id.is_none() {
        p.push("invoice_id: required".to_owned());
    }
    let payout = req.as_payout_request();
    let sent = payouts::check_sent(&mut p, &payout);
    match (req.invoice_id, sent, p.is_empty()) {
        (Some(invoice_id), Some(s), true) => Ok(Checked {
            invoice_id,
            currency: s.currency.to_owned(),
            amount: s.amount.to_owned(),
            destination: s.destination.to_owned(),
        }),
        _ => Err(DomainError::unprocessable_many(ErrorCode::ValidationError, p)),
    }
}

async fn find_by_key<C: ConnectionTrait>(db: &C, who: &Principal, key: &str) -> DomainResult<Option<refund::Model>> {
    Ok(who.rows::<refund::Entity>().filter(refund::Column::IdempotencyKey.eq(key)).one(db).await?)
}

async fn linked_payout<C: ConnectionTrait>(db: &C, r: &refund::Model) -> DomainResult<payout::Model> {
    payout::Entity::find_by_id(r.payout_id).one(db).await?.ok_or_else(|| DomainError::internal("refund without payout"))
}

/// The recorded refund for a replayed key, or 409 when the key came with another body.
async fn replay_or_mismatch<C: ConnectionTrait>(db: &C, existing: refund::Model, hash: &str) -> DomainResult<Created> {
    if existing.request_hash != hash {
        return Err(DomainError::conflict(
            ErrorCode::IdempotencyKeyMismatch,
            "this Idempotency-Key was already used with a different request body",
        )
        .with_details(vec![format!("{KEY_HEADER}: already used with a different request body")]));
    }
    let p = linked_payout(db, &existing).await?;
    Ok(Created::Replayed(existing, p))
}

/// What is left to refund of `credit`.
fn refundable(credit: &invoice_credit::Model) -> Decimal {
    credit.credited.0.checked_sub(credit.refunded.0).unwrap_or(Decimal::ZERO).max(Decimal::ZERO)
}

fn exceeds_credit(amount: Decimal, credit: &invoice_credit::Model, gate: &Gate) -> DomainError {
    DomainError::unprocessable(
        ErrorCode::RefundExceedsCredit,
        "amount",
        format!(
            "{amount} {asset} is more than the invoice's refundable {left} {asset} (credited {c}, already refunded {r})",
            asset = gate.asset,
            left = refundable(credit).normalize(),
            c = credit.credited.0.normalize(),
            r = credit.refunded.0.normalize(),
        ),
    )
}

/// Picks the invoice credit the refund draws on: the requested asset must be one the invoice
/// credited.
fn matching_credit<'a>(
    credits: &'a [invoice_credit::Model],
    gate: &Gate,
    invoice_id: Uuid,
) -> DomainResult<&'a invoice_credit::Model> {
    if credits.is_empty() {
        return Err(DomainError::unprocessable(
            ErrorCode::RefundExceedsCredit,
            "invoice_id",
            format!("invoice {invoice_id} has no credited payment to refund"),
        ));
    }
    credits.iter().find(|c| c.gate_id == gate.id).ok_or_else(|| {
        let credited: Vec<String> = credits
            .iter()
            .filter_map(|c| gates::find(&c.gate_id))
            .map(|g| format!("{} on {}", g.asset, g.network))
            .collect();
        DomainError::unprocessable(
            ErrorCode::RefundCurrencyMismatch,
            "currency",
            format!(
                "refunds are paid in the asset the invoice credited ({}), not {} on {}",
                credited.join(", "),
                gate.asset,
                gate.network
            ),
        )
    })
}

/// Creates a refund and its payout (reserving the debit) in one transaction, or returns the
/// recorded refund for a replayed `Idempotency-Key`.
pub async fn create(
    state: &AppState,
    who: &Principal,
    key: &str,
    req: &CreateRefundRequest,
    raw: &serde_json::Value,
) -> DomainResult<Created> {
    let hash = canonical_hash(raw);
    if let Some(existing) = find_by_key(&state.db, who, key).await? {
        return replay_or_mismatch(&state.db, existing, &hash).await;
    }
    let a = accept(state, who, req).await?;
    if a.amount > refundable(&a.credit) {
        // A retry of a request that has just taken this credit is answered with that refund:
        // the credit read above already shows its commit, so its key is visible now.
        if let Some(existing) = find_by_key(&state.db, who, key).await? {
            return replay_or_mismatch(&state.db, existing, &hash).await;
        }
        return Err(exceeds_credit(a.amount, &a.credit, a.gate));
    }
    let refund_id = Uuid::now_v7();
    let p = prepare_payout(state, who, req, &a, refund_id).await?;
    let r = refund_row(who, key, hash, req, &a, refund_id, &p);
    write(state, who, &a, r, p).await
}

/// A refund request that passed its checks: the caller's invoice, the gate, the invoice credit
/// it draws on (as read before the write) and the amount.
struct Accepted {
    invoice_id: Uuid,
    gate: &'static Gate,
    credit: invoice_credit::Model,
    amount: Decimal,
    destination: String,
}

/// Checks the request: its bounds, the invoice (the caller's, else 404), the gate, an invoice
/// credit in that asset, and the amount in the gate's precision. Whether the credit covers the
/// amount is left to the caller, which answers a retry of a request that took it first.
async fn accept(state: &AppState, who: &Principal, req: &CreateRefundRequest) -> DomainResult<Accepted> {
    let c = check_bounds(req)?;
    let inv = owned::get::<invoice::Entity>(&state.db, who, c.invoice_id.into()).await?;
    let gate = gates::resolve(&c.currency, req.network.as_deref())?;
    let credits =
        invoice_credit::Entity::find().filter(invoice_credit::Column::InvoiceId.eq(inv.id)).all(&state.db).await?;
    let credit = matching_credit(&credits, gate, inv.id)?.clone();
    let amount = payouts::parse_amount(gate, &c.amount)?;
    Ok(Accepted { invoice_id: inv.id, gate, credit, amount, destination: c.destination })
}

/// The refund's payout, prepared through the payout path (fees, checks), not yet written.
async fn prepare_payout(
    state: &AppState,
    who: &Principal,
    req: &CreateRefundRequest,
    a: &Accepted,
    refund_id: Uuid,
) -> DomainResult<payout::Model> {
    let spec = PayoutSpec {
        gate: a.gate,
        amount: a.amount,
        destination: &a.destination,
        destination_tag: req.destination_tag.as_deref(),
        description: Some(format!("refund {refund_id} of invoice {}", a.invoice_id)),
        metadata: None,
        idempotency_key: None,
        fee_kind: FeeKind::Refund,
    };
    payouts::prepare(state, who, spec).await
}

/// The refund row, mirroring its payout's amounts, fees, destination and status.
fn refund_row(
    who: &Principal,
    key: &str,
    hash: String,
    req: &CreateRefundRequest,
    a: &Accepted,
    refund_id: Uuid,
    p: &payout::Model,
) -> refund::Model {
    let now = Utc::now();
    refund::Model {
        id: refund_id,
        merchant_id: who.merchant_id.into(),
        environment: who.environment,
        invoice_id: a.invoice_id,
        payout_id: p.id,
        gate_id: a.gate.id.into(),
        currency: a.gate.asset.into(),
        network: a.gate.network.into(),
        amount: p.amount,
        recipient_amount: p.recipient_amount,
        merchant_debit_amount: p.merchant_debit_amount,
        refund_fee: p.fee_amount,
        refund_fee_allocation: p.payout_fee_allocation,
        configured_network_fee_amount: p.configured_network_fee_amount,
        network_fee_allocation: p.network_fee_allocation,
        destination: p.destination.clone(),
        destination_tag: p.destination_tag.clone(),
        status: RefundStatus::mirroring(p.status),
        idempotency_key: key.to_owned(),
        request_hash: hash,
        description: req.description.clone(),
        metadata: req.metadata.clone().map(serde_json::Value::Object),
        created_at: now,
        updated_at: now,
    }
}

/// Writes the refund `r`, its payout `p` with the reserved debit, and the invoice credit's
/// refunded amount in one transaction; a key claimed meanwhile is answered as a replay, and a
/// credit taken meanwhile is refused with nothing written.
async fn write(
    state: &AppState,
    who: &Principal,
    a: &Accepted,
    r: refund::Model,
    p: payout::Model,
) -> DomainResult<Created> {
    let txn = crate::db::begin_write(&state.db).await?;
    // The refund row goes in first: it claims the key before any balance or credit is touched,
    // so a concurrent request with the same key waits on the unique index until this
    // transaction ends and then replays it, instead of failing on the credit or balance this
    // one takes.
    if !claim_key(&txn, &r).await? {
        txn.rollback().await?;
        let existing = find_by_key(&state.db, who, &r.idempotency_key)
            .await?
            .ok_or_else(|| DomainError::internal("idempotent refund vanished"))?;
        return replay_or_mismatch(&state.db, existing, &r.request_hash).await;
    }
    // Locks the gate's balance: every change to this invoice's credit row happens under that
    // lock, so the cap below is checked against the latest committed refunds.
    if !payouts::insert_reserved(&txn, &p).await? {
        return Err(DomainError::internal("a refund's payout has no idempotency key to collide on"));
    }
    let credit = invoice_credit::Entity::find_by_id((a.invoice_id, a.gate.id.to_owned()))
        .one(&txn)
        .await?
        .ok_or_else(|| DomainError::internal("invoice credit vanished"))?;
    if a.amount > refundable(&credit) {
        txn.rollback().await?;
        return Err(exceeds_credit(a.amount, &credit, a.gate));
    }
    let refunded = credit.refunded.0.checked_add(a.amount).ok_or_else(|| DomainError::internal("refund overflow"))?;
    let mut row: invoice_credit::ActiveModel = credit.into();
    row.refunded = Set(Amount::new(refunded));
    // The refund's own time.
    row.updated_at = Set(r.updated_at);
    row.update(&txn).await?;
    txn.commit().await?;
    Ok(Created::New(r, p))
}

/// Inserts the refund row unless its idempotency key is taken (`false`; nothing written).
async fn claim_key<C: ConnectionTrait>(txn: &C, r: &refund::Model) -> DomainResult<bool> {
    let inserted = refund::Entity::insert(refund::ActiveModel::from(r.clone()))
        .on_conflict(
            OnConflict::columns([
                refund::Column::MerchantId,
                refund::Column::Environment,
                refund::Column::IdempotencyKey,
            ])
            .do_nothing()
            .to_owned(),
        )
        .exec_without_returning(txn)
        .await?;
    Ok(inserted == 1)
}

pub async fn get(state: &AppState, who: &Principal, id: RefundId) -> DomainResult<(refund::Model, payout::Model)> {
    let r = owned::get::<refund::Entity>(&state.db, who, id).await?;
    let p = linked_payout(&state.db, &r).await?;
    Ok((r, p))
}

pub struct ListFilter {
    pub status: Option<RefundStatus>,
    pub invoice_id: Option<Uuid>,
}

impl Filter<refund::Entity> for ListFilter {
    fn apply(&self, mut q: Select<refund::Entity>) -> Select<refund::Entity> {
        if let Some(s) = self.status {
            q = q.filter(refund::Column::Status.eq(s));
        }
        if let Some(id) = self.invoice_id {
            q = q.filter(refund::Column::InvoiceId.eq(id));
        }
        q
    }

    fn tally(&self) -> Option<crate::list_counts::Tally> {
        use crate::list_counts::{Key, List, Tally};
        let key = Key { status: self.status.map(|s| sea_orm::ActiveEnum::to_value(&s)), ..Key::default() };
        self.invoice_id.is_none().then(|| Tally::new(List::Refunds, key))
    }
}

/// Each of `rows` (a page of refunds) with its linked payout.
pub async fn with_payouts(
    db: &impl ConnectionTrait,
    rows: Vec<refund::Model>,
) -> DomainResult<Vec<(refund::Model, payout::Model)>> {
    let mut payouts: HashMap<Uuid, payout::Model> = payout::Entity::find()
        .filter(payout::Column::Id.is_in(rows.iter().map(|r| r.payout_id)))
        .all(db)
        .await?
        .into_iter()
        .map(|p| (p.id, p))
        .collect();
    rows.into_iter()
        .map(|r| {
            let p = payouts.remove(&r.payout_id).ok_or_else(|| DomainError::internal("refund without payout"))?;
            Ok((r, p))
        })
        .collect()
}
