//! Payout rules: validation, fees, reservation, approval and cancellation.
//!
//! `create` validates (spec bounds, gate, limits, the destination with the chain's own address
//! rules), quotes fees per gate and allocation, then in one transaction posts the reservation
//! (`available` → `reserved`, two `payout_reserve` entries; refused below zero) and inserts the
//! payout (`ON CONFLICT DO NOTHING` on the partial idempotency index: a concurrent duplicate
//! rolls back its reservation and returns the winner). Status changes follow
//! `PayoutStatus::on(trigger)` (exhaustive) with a guarded `UPDATE … WHERE status = <from>`;
//! leaving a reservation-holding status (cancel, operator reject) releases the reservation in
//! the same transaction (`lifecycle`). Execution (`queued` → `processing` →
//! `completed`/`failed`) is the payout executor's (`workers::executor`).

use chrono::{Duration, Utc};
use entity::{
    Amount, Bucket, EntryType, Environment, FeeAllocation, MerchantId, PayoutId, PayoutStatus, PayoutTrigger,
    merchant_env_settings, payout,
};
use rust_decimal::Decimal;
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Select};
use uuid::Uuid;

use super::lifecycle::end_with_release;
use super::types::CreatePayoutRequest;
use crate::chain::address::{ChainNet, validate_address};
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::gates::{self, Gate};
use crate::keys::Principal;
use crate::ledger::{self, LedgerError, Posting};
use crate::owned::{self, Filter};
use crate::state::AppState;

pub enum Created {
    New(payout::Model),
    Replayed(payout::Model),
}

/// What a payout costs and delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    pub recipient_amount: Decimal,
    pub merchant_debit_amount: Decimal,
}

/// `customer` fees come out of what the recipient gets; `merchant` fees are added to what
/// leaves the balance. `None` when the customer's share leaves nothing to send.
pub fn quote(
    amount: Decimal,
    fee: Decimal,
    fee_alloc: FeeAllocation,
    network_fee: Decimal,
    net_alloc: FeeAllocation,
) -> Option<Quote> {
    let mut recipient = amount;
    let mut debit = amount;
    for (f, a) in [(fee, fee_alloc), (network_fee, net_alloc)] {
        match a {
            FeeAllocation::Customer => recipient = recipient.checked_sub(f)?,
            FeeAllocation::Merchant => debit = debit.checked_add(f)?,
        }
    }
    (recipient > Decimal::ZERO).then_some(Quote { recipient_amount: recipient, merchant_debit_amount: debit })
}

pub fn chain_net(env: Environment) -> ChainNet {
    match env {
        Environment::Test => ChainNet::Testnet,
        Environment::Live => ChainNet::Mainnet,
    }
}

/// The merchant's per-environment payout settings (defaults when never set).
pub async fn settings<C: ConnectionTrait>(
    db: &C,
    merchant_id: MerchantId,
    env: Environment,
) -> Result<merchant_env_settings::Model, sea_orm::DbErr> {
    Ok(merchant_env_settings::Entity::find_by_id((merchant_id.0, env)).one(db).await?.unwrap_or(
        merchant_env_settings::Model {
            merchant_id: merchant_id.into(),
            environment: env,
            payout_auto_approve: false,
            payout_delay_secs: 0,
            payout_fee_allocation: FeeAllocation::Customer,
            network_fee_allocation: FeeAllocation::Customer,
            // Refunds: the merchant pays the refund and network fees, the payer gets the full
            // refunded amount (spec 2.6).
            refund_fee_allocation: FeeAllocation::Merchant,
            merchant_approves: false,
            auto_approve_limit: None,
            updated_at: Utc::now(),
        },
    ))
}

pub async fn save_settings(db: &impl ConnectionTrait, s: merchant_env_settings::Model) -> Result<(), sea_orm::DbErr> {
    use merchant_env_settings::Column as C;
    merchant_env_settings::Entity::insert(merchant_env_settings::ActiveModel::from(s))
        .on_conflict(
            OnConflict::columns([C::MerchantId, C::Environment])
                .update_columns([
                    C::PayoutAutoApprove,
                    C::PayoutDelaySecs,
                    C::PayoutFeeAllocation,
                    C::NetworkFeeAllocation,
                    C::RefundFeeAllocation,
                    C::MerchantApproves,
                    C::AutoApproveLimit,
                    C::UpdatedAt,
                ])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

fn required<'a>(p: &mut Vec<String>, name: &str, v: &'a Option<String>, max: usize) -> Option<&'a str> {
    match v.as_deref() {
        None | Some("") => {
            p.push(format!("{name}: required"));
            None
        }
        Some(s) if s.chars().count() > max => {
            p.push(format!("{name}: at most {max} characters"));
            None
        }
        Some(s) => Some(s),
    }
}

/// What a payout or refund request sends where: its required fields, within bounds.
pub(crate) struct Sent<'a> {
    pub currency: &'a str,
    pub amount: &'a str,
    pub destination: &'a str,
}

/// Spec 4.5 bounds (a refund's, spec 4.9, are the same, without an idempotency key of its
/// own). Each violation is added to `p`, so a request learns all of them at once; `None` when a
/// required field is missing or too long.
pub(crate) fn check_sent<'a>(p: &mut Vec<String>, req: &'a CreatePayoutRequest) -> Option<Sent<'a>> {
    let currency = required(p, "currency", &req.currency, 20);
    let amount = required(p, "amount", &req.amount, 50);
    let destination = required(p, "destination", &req.destination, 256);
    for (name, v, max) in [
        ("network", &req.network, 64),
        ("destination_tag", &req.destination_tag, 256),
        ("description", &req.description, 1000),
        ("idempotency_key", &req.idempotency_key, 255),
    ] {
        if v.as_ref().is_some_and(|s| s.chars().count() > max) {
            p.push(format!("{name}: at most {max} characters"));
        }
    }
    if req.idempotency_key.as_deref() == Some("") {
        p.push("idempotency_key: must not be empty".into());
    }
    if req.metadata.as_ref().is_some_and(|m| m.len() > 50) {
        p.push("metadata: at most 50 properties".into());
    }
    Some(Sent { currency: currency?, amount: amount?, destination: destination? })
}

/// Spec 4.5 bounds; violations are 422 `validation_error`, all reported at once.
fn check_bounds(req: &CreatePayoutRequest) -> DomainResult<Sent<'_>> {
    let mut p = Vec::new();
    match check_sent(&mut p, req) {
        Some(sent) if p.is_empty() => Ok(sent),
        _ => Err(DomainError::unprocessable_many(ErrorCode::ValidationError, p)),
    }
}

pub fn parse_amount(gate: &Gate, s: &str) -> DomainResult<Decimal> {
    let d = crate::invoices::validate::parse_amount("amount", s)
        .map_err(|e| DomainError::unprocessable(ErrorCode::ValidationError, "amount", e))?;
    if d.scale() > gate.decimals {
        return Err(DomainError::unprocessable(
            ErrorCode::ValidationError,
            "amount",
            format!("at most {} decimal places for the {} gate", gate.decimals, gate.id),
        ));
    }
    Ok(d)
}

async fn find_by_key<C: ConnectionTrait>(db: &C, who: &Principal, key: &str) -> DomainResult<Option<payout::Model>> {
    Ok(who.rows::<payout::Entity>().filter(payout::Column::IdempotencyKey.eq(key)).one(db).await?)
}

fn ledger_error(e: LedgerError, gate: &Gate) -> DomainError {
    match e {
        LedgerError::Insufficient { has, needed, .. } => DomainError::unprocessable(
            ErrorCode::InsufficientBalance,
            "amount",
            format!("{needed} {} needed, {has} available", gate.asset),
        ),
        other => DomainError::internal(other),
    }
}

/// Which fee the payout path charges: a payout's own fee or, for a refund's payout, the
/// refund fee (each with its own allocation setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeeKind {
    Payout,
    Refund,
}

/// A payout to price and validate: from `POST /v1/payouts` or from a refund.
pub struct PayoutSpec<'a> {
    pub gate: &'static Gate,
    pub amount: Decimal,
    pub destination: &'a str,
    pub destination_tag: Option<&'a str>,
    pub description: Option<String>,
    pub metadata: Option<serde_json::Value>,
    pub idempotency_key: Option<String>,
    pub fee_kind: FeeKind,
}

/// The payout path shared by payouts and refunds: gate online with a payout signer, amount
/// within the gate's range (payouts only), destination (and tag) valid for the chain, fees priced
/// with the merchant's allocation and the status its approval setting gives. Nothing is written.
///
/// The gate's min/max (spec 2.10) are per-invoice amounts. A payout keeps them as its own bounds
/// (no withdrawal so small that its network fee is most of it); a refund is bounded by the
/// invoice's refundable credit instead (spec 2.6, checked by `refunds::service`), so an
/// overpayment's surplus below the invoice minimum can be paid back. Either must cover the fees
/// taken from it (`quote`: customer allocation), the network fee included.
pub async fn prepare(state: &AppState, who: &Principal, spec: PayoutSpec<'_>) -> DomainResult<payout::Model> {
    let (env, gate, amount) = (who.environment, spec.gate, spec.amount);
    state.ensure_online(env, gate)?;
    state.ensure_payable(env, gate)?;
    match spec.fee_kind {
        FeeKind::Payout => state.check_amount_range(env, gate, amount)?,
        FeeKind::Refund => {}
    }
    if let Err(e) = validate_address(gate.family, chain_net(env), spec.destination, None) {
        return Err(DomainError::unprocessable(ErrorCode::ValidationError, "destination", e.to_string()));
    }
    // An empty tag is no tag (clients often send `""` for "none", on any chain).
    let destination_tag = spec.destination_tag.filter(|t| !t.is_empty());
    if let Some(tag) = destination_tag
        && let Err(e) = validate_address(gate.family, chain_net(env), spec.destination, Some(tag))
    {
        return Err(DomainError::unprocessable(ErrorCode::ValidationError, "destination_tag", e.to_string()));
    }

    let s = settings(&state.db, who.merchant_id, env).await?;
    let fees = state.config.fees.get(gate.id).cloned().unwrap_or_default();
    // A refund's `refund_fee_allocation` covers both of its fees (spec 2.6: the merchant is
    // charged the refund, its fee and the network fee, unless the operator chose otherwise).
    let (fee, fee_alloc, net_alloc, fee_name) = match spec.fee_kind {
        FeeKind::Payout => (fees.payout_fee, s.payout_fee_allocation, s.network_fee_allocation, "payout fee"),
        FeeKind::Refund => (fees.refund_fee, s.refund_fee_allocation, s.refund_fee_allocation, "refund fee"),
    };
    let q = quote(amount, fee, fee_alloc, fees.network_fee, net_alloc).ok_or_else(|| {
        DomainError::unprocessable(
            ErrorCode::AmountOutOfRange,
            "amount",
            format!(
                "{amount} {} does not cover the fees ({fee} {fee_name}, {} network fee)",
                gate.asset, fees.network_fee
            ),
        )
    })?;
    let merchant = state.merchant(who.merchant_id).await?;
    let amount_in_base = state
        .rates
        .get(env, gate.asset, &merchant.base_currency)
        .and_then(|r| amount.checked_mul(r.rate))
        .map(Amount::fiat);
    let now = Utc::now();
    let (status, approved_at, executable_at) = if starts_approved(&s, amount_in_base.map(|a| a.0)) {
        (PayoutStatus::Approved, Some(now), Some(now + Duration::seconds(s.payout_delay_secs)))
    } else {
        (PayoutStatus::PendingApproval, None, None)
    };
    Ok(payout::Model {
        gate_id: gate.id.into(),
        currency: gate.asset.into(),
        network: gate.network.into(),
        amount: Amount::new(amount),
        amount_in_base_currency: amount_in_base,
        recipient_amount: Amount::new(q.recipient_amount),
        merchant_debit_amount: Amount::new(q.merchant_debit_amount),
        fee_amount: Amount::new(fee),
        payout_fee_allocation: fee_alloc,
        network_fee: Amount::new(fees.network_fee),
        configured_network_fee_amount: Amount::new(fees.network_fee),
        network_fee_allocation: net_alloc,
        destination: spec.destination.into(),
        destination_tag: destination_tag.map(str::to_owned),
        status,
        idempotency_key: spec.idempotency_key,
        description: spec.description,
        metadata: spec.metadata,
        executable_at,
        approved_at,
        ..payout::Model::blank(Uuid::now_v7(), who.merchant_id.into(), env, now)
    })
}

/// Inserts the payout and reserves its `merchant_debit_amount`, in the caller's transaction.
/// The row goes in first: it claims the idempotency key (a concurrent request with the same key
/// waits on the unique index until this transaction ends, then finds the key taken) before any
/// balance is touched, so a retry in flight replays instead of failing on the balance the first
/// request reserved. `Ok(false)`: a payout with the same idempotency key already exists (nothing
/// was written; the caller rolls back and replays it).
pub async fn insert_reserved<C: ConnectionTrait>(txn: &C, p: &payout::Model) -> DomainResult<bool> {
    let gate = gates::find(&p.gate_id).ok_or_else(|| DomainError::internal("payout on an unknown gate"))?;
    let inserted = payout::Entity::insert(payout::ActiveModel::from(p.clone()))
        .on_conflict(
            OnConflict::columns([
                payout::Column::MerchantId,
                payout::Column::Environment,
                payout::Column::IdempotencyKey,
            ])
            .target_and_where(Expr::col(payout::Column::IdempotencyKey).is_not_null())
            .do_nothing()
            .to_owned(),
        )
        .exec_without_returning(txn)
        .await?;
    if inserted != 1 {
        return Ok(false);
    }
    let debit = p.merchant_debit_amount.0;
    let reserve = [
        Posting {
            bucket: Bucket::Available,
            amount: -debit,
            entry_type: EntryType::PayoutReserve,
            reference: Some(("payout", p.id)),
            description: None,
        },
        Posting {
            bucket: Bucket::Reserved,
            amount: debit,
            entry_type: EntryType::PayoutReserve,
            reference: Some(("payout", p.id)),
            description: None,
        },
    ];
    ledger::post(txn, ledger::Account::of(p.merchant_id.into(), p.environment, gate.id), &reserve)
        .await
        .map_err(|e| ledger_error(e, gate))?;
    Ok(true)
}

/// Creates a payout and reserves `merchant_debit_amount` in the same transaction.
pub async fn create(state: &AppState, who: &Principal, req: &CreatePayoutRequest) -> DomainResult<Created> {
    let c = check_bounds(req)?;
    if let Some(key) = &req.idempotency_key
        && let Some(existing) = find_by_key(&state.db, who, key).await?
    {
        return Ok(Created::Replayed(existing));
    }
    let gate = gates::resolve(c.currency, req.network.as_deref())?;
    let amount = parse_amount(gate, c.amount)?;
    let spec = PayoutSpec {
        gate,
        amount,
        destination: c.destination,
        destination_tag: req.destination_tag.as_deref(),
        description: req.description.clone(),
        metadata: req.metadata.clone().map(serde_json::Value::Object),
        idempotency_key: req.idempotency_key.clone(),
        fee_kind: FeeKind::Payout,
    };
    let model = prepare(state, who, spec).await?;
    let txn = crate::db::begin_write(&state.db).await?;
    if !insert_reserved(&txn, &model).await? {
        // A concurrent request with the same key won (nothing of ours was written): return theirs.
        txn.rollback().await?;
        let key = req.idempotency_key.as_deref().unwrap_or_default();
        let existing = find_by_key(&state.db, who, key)
            .await?
            .ok_or_else(|| DomainError::internal("idempotent payout vanished"))?;
        return Ok(Created::Replayed(existing));
    }
    txn.commit().await?;
    Ok(Created::New(model))
}

pub async fn get(state: &AppState, who: &Principal, id: PayoutId) -> DomainResult<payout::Model> {
    owned::get::<payout::Entity>(&state.db, who, id).await
}

/// A payout list's filter: its status, if given.
pub struct ListFilter {
    pub status: Option<PayoutStatus>,
}

impl Filter<payout::Entity> for ListFilter {
    fn apply(&self, q: Select<payout::Entity>) -> Select<payout::Entity> {
        match self.status {
            Some(s) => q.filter(payout::Column::Status.eq(s)),
            None => q,
        }
    }

    fn tally(&self) -> Option<crate::list_counts::Tally> {
        use crate::list_counts::{Key, List, Tally};
        Some(Tally::new(
            List::Payouts,
            Key { status: self.status.map(|s| sea_orm::ActiveEnum::to_value(&s)), ..Key::default() },
        ))
    }
}

fn not_cancellable(status: PayoutStatus) -> DomainError {
    DomainError::conflict(
        ErrorCode::PayoutNotCancellable,
        format!("only pending_approval or approved payouts can be cancelled; this one is {}", status.as_str()),
    )
}

/// Merchant cancel (spec 4.8): from `pending_approval`/`approved`, releasing the reservation.
pub async fn cancel(state: &AppState, who: &Principal, id: PayoutId) -> DomainResult<payout::Model> {
    let p = get(state, who, id).await?;
    match end_with_release(&state.db, &p, PayoutTrigger::Cancel, None).await? {
        Some(after) => Ok(after),
        None => Err(not_cancellable(get(state, who, id).await?.status)),
    }
}

/// Whether a new payout skips `pending_approval`: the operator's auto-approve, or, where the
/// merchant approves its payouts, a payout worth at most the merchant's `auto_approve_limit` in
/// its base currency (a payout whose worth is unknown, with no rate, waits).
pub fn starts_approved(s: &merchant_env_settings::Model, amount_in_base: Option<Decimal>) -> bool {
    if s.payout_auto_approve {
        return true;
    }
    match (s.merchant_approves, s.auto_approve_limit, amount_in_base) {
        (true, Some(limit), Some(worth)) => worth <= limit.0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FeeAllocation::{Customer, Merchant};

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn the_auto_approve_limit_applies_only_where_the_merchant_approves() {
        let mut s = merchant_env_settings::Model {
            merchant_id: Uuid::nil(),
            environment: entity::Environment::Test,
            payout_auto_approve: false,
            payout_delay_secs: 0,
            payout_fee_allocation: Customer,
            network_fee_allocation: Customer,
            refund_fee_allocation: Merchant,
            merchant_approves: false,
            auto_approve_limit: Some(Amount::new(d("100"))),
            updated_at: Utc::now(),
        };
        assert!(!starts_approved(&s, Some(d("5"))), "the operator approves: the merchant's limit is not used");
        s.merchant_approves = true;
        assert!(starts_approved(&s, Some(d("100"))));
        assert!(!starts_approved(&s, Some(d("100.01"))));
        assert!(!starts_approved(&s, None), "no rate, no known worth: waits");
        s.auto_approve_limit = None;
        assert!(!starts_approved(&s, Some(d("1"))));
        s.payout_auto_approve = true;
        assert!(starts_approved(&s, None));
    }

    #[test]
    fn fee_allocation_rules() {
        let q = |f, fa, n, na| quote(d("10"), d(f), fa, d(n), na);
        assert_eq!(
            q("0.5", Customer, "0.2", Customer),
            Some(Quote { recipient_amount: d("9.3"), merchant_debit_amount: d("10") })
        );
        assert_eq!(
            q("0.5", Merchant, "0.2", Merchant),
            Some(Quote { recipient_amount: d("10"), merchant_debit_amount: d("10.7") })
        );
        assert_eq!(
            q("0.5", Customer, "0.2", Merchant),
            Some(Quote { recipient_amount: d("9.5"), merchant_debit_amount: d("10.2") })
        );
        assert_eq!(
            q("0.5", Merchant, "0.2", Customer),
            Some(Quote { recipient_amount: d("9.8"), merchant_debit_amount: d("10.5") })
        );
        assert_eq!(q("9.8", Customer, "0.2", Customer), None);
        assert_eq!(
            q("0", Customer, "0", Customer),
            Some(Quote { recipient_amount: d("10"), merchant_debit_amount: d("10") })
        );
    }
}
