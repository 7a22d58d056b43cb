//! Payout rules: validation, fees, reservation, approval and cancellation.

use chrono::{Duration, Utc};
use entity::{
    Amount, Bucket, EntryType, Environment, FeeAllocation, PayoutStatus, PayoutTrigger, merchant_env_settings, payout,
};
use rust_decimal::Decimal;
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use super::types::CreatePayoutRequest;
use crate::chain::address::{ChainNet, validate_address};
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::gates::{self, Gate};
use crate::keys::Principal;
use crate::ledger::{self, LedgerError, Posting};
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
    merchant_id: Uuid,
    env: Environment,
) -> Result<merchant_env_settings::Model, sea_orm::DbErr> {
    Ok(merchant_env_settings::Entity::find_by_id((merchant_id, env)).one(db).await?.unwrap_or(
        merchant_env_settings::Model {
            merchant_id,
            environment: env,
            payout_auto_approve: false,
            payout_delay_secs: 0,
            payout_fee_allocation: FeeAllocation::Customer,
            network_fee_allocation: FeeAllocation::Customer,
            // Refunds: the merchant pays the refund and network fees, the payer gets the full
            // refunded amount (spec 2.6).
            refund_fee_allocation: FeeAllocation::Merchant,
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
                    C::UpdatedAt,
                ])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

pub(crate) fn required<'a>(p: &mut Vec<String>, name: &str, v: &'a Option<String>, max: usize) -> Option<&'a str> {
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

struct Checked<'a> {
    currency: &'a str,
    amount: &'a str,
    destination: &'a str,
}

/// Spec 4.5 bounds; violations are 422 `validation_error`, all reported at once.
fn check_bounds(req: &CreatePayoutRequest) -> DomainResult<Checked<'_>> {
    let mut p = Vec::new();
    let currency = required(&mut p, "currency", &req.currency, 20);
    let amount = required(&mut p, "amount", &req.amount, 50);
    let destination = required(&mut p, "destination", &req.destination, 256);
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
    match (currency, amount, destination, p.is_empty()) {
        (Some(currency), Some(amount), Some(destination), true) => Ok(Checked { currency, amount, destination }),
        _ => Err(DomainError::unprocessable_many(ErrorCode::ValidationError, p)),
    }
}

pub(crate) fn parse_amount(gate: &Gate, s: &str) -> DomainResult<Decimal> {
    let d = crate::invoices::service::parse_amount("amount", s)
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
    Ok(payout::Entity::find()
        .filter(payout::Column::MerchantId.eq(who.merchant_id))
        .filter(payout::Column::Environment.eq(who.environment))
        .filter(payout::Column::IdempotencyKey.eq(key))
        .one(db)
        .await?)
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

/// The payout path shared by payouts and refunds: gate online with a payout signer, amount within the gate's range,
/// destination (and tag) valid for the chain, fees priced with the merchant's allocation and
/// the status its approval setting gives. Nothing is written.
pub async fn prepare(state: &AppState, who: &Principal, spec: PayoutSpec<'_>) -> DomainResult<payout::Model> {
    let (env, gate, amount) = (who.environment, spec.gate, spec.amount);
    state.ensure_online(env, gate)?;
    state.ensure_payable(env, gate)?;
    state.check_amount_range(env, gate, amount)?;
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
    let (status, approved_at, executable_at) = if s.payout_auto_approve {
        (PayoutStatus::Approved, Some(now), Some(now + Duration::seconds(s.payout_delay_secs)))
    } else {
        (PayoutStatus::PendingApproval, None, None)
    };
    Ok(payout::Model {
        id: Uuid::now_v7(),
        merchant_id: who.merchant_id,
        environment: env,
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
        tx_hash: None,
        idempotency_key: spec.idempotency_key,
        description: spec.description,
        metadata: spec.metadata,
        failure_reason: None,
        executable_at,
        approved_at,
        completed_at: None,
        cancelled_at: None,
        created_at: now,
        updated_at: now,
        signed_tx: None,
        queued_at: None,
        broadcast_at: None,
        checked_at: None,
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
    ledger::post(txn, p.merchant_id, p.environment, gate.id, &reserve).await.map_err(|e| ledger_error(e, gate))?;
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

pub async fn get(state: &AppState, who: &Principal, id: Uuid) -> DomainResult<payout::Model> {
    payout::Entity::find_by_id(id)
        .filter(payout::Column::MerchantId.eq(who.merchant_id))
        .filter(payout::Column::Environment.eq(who.environment))
        .one(&state.db)
        .await?
        .ok_or_else(|| DomainError::not_found("payout"))
}

pub async fn list(
    state: &AppState,
    who: &Principal,
    status: Option<PayoutStatus>,
    limit: u64,
    offset: u64,
) -> DomainResult<(Vec<payout::Model>, u64)> {
    let mut q = payout::Entity::find()
        .filter(payout::Column::MerchantId.eq(who.merchant_id))
        .filter(payout::Column::Environment.eq(who.environment));
    if let Some(s) = status {
        q = q.filter(payout::Column::Status.eq(s));
    }
    let total = q.clone().count(&state.db).await?;
    let rows = q
        .order_by_desc(payout::Column::CreatedAt)
        .order_by_desc(payout::Column::Id)
        .limit(limit)
        .offset(offset)
        .all(&state.db)
        .await?;
    Ok((rows, total))
}

/// Moves a payout out of a reservation-holding status with a guarded update and releases the
/// reservation in the same transaction. `Ok(None)` when the guard did not match.
pub async fn end_with_release(
    db: &impl crate::db::WriteDb,
    p: &payout::Model,
    trigger: PayoutTrigger,
    failure_reason: Option<&str>,
) -> Result<Option<payout::Model>, ReleaseError> {
    end_guarded(db, p, trigger, failure_reason, false).await
}

/// Why ending a payout with its release failed: nothing a caller did wrong.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error("payout {0} vanished while it was ended")]
    Vanished(Uuid),
}

impl From<ReleaseError> for DomainError {
    fn from(e: ReleaseError) -> Self {
        DomainError::internal(e)
    }
}

/// [`end_with_release`]; with `unsigned` the guard also requires that no signed transaction
/// was stored meanwhile (an operator ending a payout the executor may be signing right now).
async fn end_guarded(
    db: &impl crate::db::WriteDb,
    p: &payout::Model,
    trigger: PayoutTrigger,
    failure_reason: Option<&str>,
    unsigned: bool,
) -> Result<Option<payout::Model>, ReleaseError> {
    let Some(next) = p.status.on(trigger) else { return Ok(None) };
    let now = Utc::now();
    let txn = crate::db::begin_write(db).await?;
    let mut update = payout::Entity::update_many()
        .col_expr(payout::Column::Status, Expr::value(next.as_str()))
        .col_expr(payout::Column::UpdatedAt, Expr::value(now))
        .filter(payout::Column::Id.eq(p.id))
        .filter(payout::Column::Status.eq(p.status));
    if unsigned {
        update = update.filter(payout::Column::SignedTx.is_null());
    }
    if next == PayoutStatus::Cancelled {
        update = update.col_expr(payout::Column::CancelledAt, Expr::value(now));
    }
    if let Some(r) = failure_reason {
        update = update.col_expr(payout::Column::FailureReason, Expr::value(r));
    }
    if update.exec(&txn).await?.rows_affected == 0 {
        txn.rollback().await?;
        return Ok(None);
    }
    let debit = p.merchant_debit_amount.0;
    let release = [
        Posting {
            bucket: Bucket::Reserved,
            amount: -debit,
            entry_type: EntryType::PayoutRelease,
            reference: Some(("payout", p.id)),
            description: None,
        },
        Posting {
            bucket: Bucket::Available,
            amount: debit,
            entry_type: EntryType::PayoutRelease,
            reference: Some(("payout", p.id)),
            description: None,
        },
    ];
    ledger::post(&txn, p.merchant_id, p.environment, &p.gate_id, &release).await?;
    let after = payout::Entity::find_by_id(p.id).one(&txn).await?.ok_or(ReleaseError::Vanished(p.id))?;
    crate::refunds::service::mirror_payout(&txn, &after).await?;
    if after.status == PayoutStatus::Failed {
        crate::events::emit_payout(&txn, crate::events::kind::PAYOUT_FAILED, &after).await?;
    }
    txn.commit().await?;
    Ok(Some(after))
}

fn not_cancellable(status: PayoutStatus) -> DomainError {
    DomainError::conflict(
        ErrorCode::PayoutNotCancellable,
        format!("only pending_approval or approved payouts can be cancelled; this one is {}", status.as_str()),
    )
}

/// Merchant cancel (spec 4.8): from `pending_approval`/`approved`, releasing the reservation.
pub async fn cancel(state: &AppState, who: &Principal, id: Uuid) -> DomainResult<payout::Model> {
    let p = get(state, who, id).await?;
    match end_with_release(&state.db, &p, PayoutTrigger::Cancel, None).await? {
        Some(after) => Ok(after),
        None => Err(not_cancellable(get(state, who, id).await?.status)),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("payout {0} not found")]
    NotFound(Uuid),
    #[error("payout {id} is {status}, not pending_approval")]
    WrongStatus { id: Uuid, status: &'static str },
    #[error("{0}")]
    Failed(String),
}

impl From<ReleaseError> for OperatorError {
    fn from(e: ReleaseError) -> Self {
        OperatorError::Failed(e.to_string())
    }
}

impl From<sea_orm::DbErr> for OperatorError {
    fn from(e: sea_orm::DbErr) -> Self {
        OperatorError::Failed(e.to_string())
    }
}

/// A payout by id, for operator commands.
pub async fn load(db: &impl ConnectionTrait, id: Uuid) -> Result<payout::Model, OperatorError> {
    payout::Entity::find_by_id(id).one(db).await?.ok_or(OperatorError::NotFound(id))
}

/// Operator approval (`ops payouts approve`): `executable_at` = now + the merchant's delay.
pub async fn approve(db: &impl ConnectionTrait, id: Uuid) -> Result<payout::Model, OperatorError> {
    let p = load(db, id).await?;
    let wrong = |p: &payout::Model| OperatorError::WrongStatus { id, status: p.status.as_str() };
    let Some(next) = p.status.on(PayoutTrigger::Approve) else { return Err(wrong(&p)) };
    let delay = settings(db, p.merchant_id, p.environment).await?.payout_delay_secs;
    let now = Utc::now();
    let res = payout::Entity::update_many()
        .col_expr(payout::Column::Status, Expr::value(next.as_str()))
        .col_expr(payout::Column::ApprovedAt, Expr::value(now))
        .col_expr(payout::Column::ExecutableAt, Expr::value(now + Duration::seconds(delay)))
        .col_expr(payout::Column::UpdatedAt, Expr::value(now))
        .filter(payout::Column::Id.eq(id))
        .filter(payout::Column::Status.eq(p.status))
        .exec(db)
        .await?;
    let after = load(db, id).await?;
    if res.rows_affected == 0 {
        return Err(wrong(&after));
    }
    Ok(after)
}

/// Operator rejection (`ops payouts reject`): `failed` with the reason; reservation released.
pub async fn reject(db: &impl crate::db::WriteDb, id: Uuid, reason: &str) -> Result<payout::Model, OperatorError> {
    let p = load(db, id).await?;
    match end_with_release(db, &p, PayoutTrigger::Reject, Some(&format!("rejected by operator: {reason}"))).await? {
        Some(after) => Ok(after),
        None => Err(OperatorError::WrongStatus { id, status: load(db, id).await?.status.as_str() }),
    }
}

/// Operator failure (`ops payouts fail`) of an `approved` or `queued` payout that has no signed
/// transaction (so nothing of it can ever be mined): `failed` with the operator's reason,
/// reservation released (a refund follows), `payout.failed` emitted. A payout with a stored
/// signed transaction is refused: it may be in a mempool; `ops payouts replace` ends it safely.
pub async fn fail_unsent(db: &impl crate::db::WriteDb, id: Uuid, reason: &str) -> Result<payout::Model, OperatorError> {
    let p = load(db, id).await?;
    if let Some(hash) = p.tx_hash.as_deref().filter(|_| p.signed_tx.is_some()) {
        return Err(OperatorError::Failed(format!(
            "payout {id} has a signed transaction ({hash}) that may be mined; use `ops payouts replace {id}` instead"
        )));
    }
    if !matches!(p.status, PayoutStatus::Approved | PayoutStatus::Queued) {
        return Err(OperatorError::Failed(format!(
            "payout {id} is {}; only approved or queued payouts that were never signed can be failed",
            p.status.as_str()
        )));
    }
    let reason = format!("failed by operator: {reason}");
    match end_guarded(db, &p, PayoutTrigger::Fail, Some(&reason), true).await? {
        Some(after) => Ok(after),
        None => {
            let now = load(db, id).await?;
            Err(OperatorError::Failed(format!(
                "payout {id} changed meanwhile (now {}{}); nothing done",
                now.status.as_str(),
                if now.signed_tx.is_some() { ", signed" } else { "" }
            )))
        }
    }
}

/// Records that payout `payout_id`'s transaction is to be replaced (once; a second request
/// keeps the first). The executor signs and sends the replacement.
pub async fn insert_replacement<C: ConnectionTrait>(
    db: &C,
    payout_id: Uuid,
    reason: &str,
) -> Result<(), sea_orm::DbErr> {
    use entity::payout_replacement;
    let row = payout_replacement::Model {
        payout_id,
        requested_at: Utc::now(),
        reason: reason.to_owned(),
        tx_hash: None,
        signed_tx: None,
        broadcast_at: None,
    };
    payout_replacement::Entity::insert(payout_replacement::ActiveModel::from(row))
        .on_conflict(OnConflict::column(payout_replacement::Column::PayoutId).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// Operator request (`ops payouts replace`) to replace a payout's signed transaction that is
/// not mined: the payout executor sends a zero-value transaction to the hot wallet with the
/// same nonce and a higher fee; once that one is mined to the gate's depth the payout fails and
/// its funds are released (if the original is mined first, the payout completes as usual).
pub async fn request_replace(
    db: &impl crate::db::WriteDb,
    id: Uuid,
) -> Result<entity::payout_replacement::Model, OperatorError> {
    let p = load(db, id).await?;
    let replaceable = matches!(p.status, PayoutStatus::Queued | PayoutStatus::Processing) && p.signed_tx.is_some();
    if !replaceable {
        return Err(OperatorError::Failed(format!(
            "payout {id} is {}{}; only a queued or processing payout with a signed transaction can be replaced",
            p.status.as_str(),
            if p.signed_tx.is_none() { " without a signed transaction (use `ops payouts fail`)" } else { "" }
        )));
    }
    // Only a transaction ordered by an account nonce (EVM) can be displaced by another one.
    if p.signed_tx.as_deref().and_then(crate::chain::evm_tx::signed_terms).is_none() {
        return Err(OperatorError::Failed(format!(
            "payout {id} on {}: its transaction has no account nonce, so it cannot be replaced",
            p.gate_id
        )));
    }
    insert_replacement(db, id, "replaced by operator: transaction not mined").await?;
    entity::payout_replacement::Entity::find_by_id(id)
        .one(db)
        .await?
        .ok_or_else(|| OperatorError::Failed("replacement request vanished".into()))
}

/// Payouts with a signed transaction that have waited longer than `older_than` since their
/// broadcast (or, never accepted by the node, since they were queued), oldest first: the
/// candidates of `ops payouts stuck` (which asks the chain which of them are mined).
pub async fn stuck_candidates(
    db: &sea_orm::DatabaseConnection,
    older_than: Duration,
) -> Result<Vec<payout::Model>, sea_orm::DbErr> {
    use sea_orm::sea_query::Condition;
    let before = Utc::now() - older_than;
    payout::Entity::find()
        .filter(payout::Column::SignedTx.is_not_null())
        .filter(
            Condition::any()
                .add(
                    Condition::all()
                        .add(payout::Column::Status.eq(PayoutStatus::Processing))
                        .add(payout::Column::BroadcastAt.lt(before)),
                )
                .add(
                    Condition::all()
                        .add(payout::Column::Status.eq(PayoutStatus::Queued))
                        .add(payout::Column::QueuedAt.lt(before)),
                ),
        )
        .order_by_asc(payout::Column::QueuedAt)
        .all(db)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use FeeAllocation::{Customer, Merchant};

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
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
