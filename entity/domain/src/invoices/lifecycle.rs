//! An invoice's status moves, written once. The rules (which trigger takes which status where)
//! are `entity::InvoiceStatus::on`, an exhaustive table; this module persists a move with a
//! guarded update (`… WHERE status = <from>`), so of two writers racing on one invoice only one
//! applies it, and returns the rows it moved: the pipeline's moves (`transition`,
//! `transition_many`, `see_deposits`), a payer's activation on the checkout page (`activate`), and
//! a merchant's cancel (`cancel`) and resolve (`resolve`). Every stage, the services and the HTTP face move invoices
//! through these functions.

use chrono::{DateTime, Utc};
use entity::{Amount, InvoiceId, InvoiceStatus, InvoiceTrigger, invoice};
use sea_orm::sea_query::{CaseStatement, Expr, Func, Query};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryTrait};

use crate::events::InvoiceFacts;
use crate::gates::Gate;

/// Rows a guarded update names at once (bind parameters stay well under SQLite's limit).
const IDS_PER_UPDATE: usize = 500;

/// Applies `trigger` to the invoice with a guarded update (`WHERE status = <from>`) and returns
/// the invoice after it, or `None` when the trigger does not apply or another writer moved the
/// invoice first. `paid_at` is set on the way to paid/overpaid.
pub async fn transition<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
    trigger: InvoiceTrigger,
) -> Result<Option<invoice::Model>, DbErr> {
    Ok(transition_many(txn, inv.status, trigger, &[inv.id.into()]).await?.into_iter().next())
}

/// [`transition`] of the invoices `ids`, all in status `from`, by one guarded update (500 a
/// statement); returns those it moved (the others did not take the trigger or were moved first
/// by another writer). `paid_at` is set on the way to paid/overpaid unless it was set before.
pub async fn transition_many<C: ConnectionTrait>(
    txn: &C,
    from: InvoiceStatus,
    trigger: InvoiceTrigger,
    ids: &[InvoiceId],
) -> Result<Vec<invoice::Model>, DbErr> {
    let Some(next) = from.on(trigger) else { return Ok(Vec::new()) };
    let now = Utc::now();
    let mut moved = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_UPDATE) {
        moved.extend(moving(from, trigger, next, chunk, now).exec_with_returning(txn).await?);
    }
    Ok(moved)
}

/// Invoices an update of `amount_paid` names at once (each its own `CASE` arm).
const PAID_PER_UPDATE: usize = 200;

/// The `amount_paid` of each of `paid`, by id, as one `CASE` (the others keep theirs).
fn amount_paid_case(paid: &[(InvoiceId, Amount)]) -> sea_orm::sea_query::SimpleExpr {
    let mut case = CaseStatement::new();
    for (id, sum) in paid {
        case = case.case(invoice::Column::Id.eq(*id), Expr::value(*sum));
    }
    case.finally(Expr::col(invoice::Column::AmountPaid)).into()
}

/// A confirmation's move: [`transition_many`] of the invoices of `paid` (all in status `from`),
/// each also taking its `amount_paid` (the sum of its confirmed payments) in the same update, so
/// the invoice is written once; returns those it moved as their events read them. An invoice not
/// moved (another writer moved it first; under the caller's row lock, none) keeps its old
/// `amount_paid`: the caller stores it with [`store_paid`].
pub async fn transition_paid<C: ConnectionTrait>(
    txn: &C,
    from: InvoiceStatus,
    trigger: InvoiceTrigger,
    paid: &[(InvoiceId, Amount)],
    now: DateTime<Utc>,
) -> Result<Vec<InvoiceFacts>, DbErr> {
    let Some(next) = from.on(trigger) else { return Ok(Vec::new()) };
    let mut moved = Vec::with_capacity(paid.len());
    for chunk in paid.chunks(PAID_PER_UPDATE) {
        let ids: Vec<InvoiceId> = chunk.iter().map(|(id, _)| *id).collect();
        let mut update = moving(from, trigger, next, &ids, now)
            .col_expr(invoice::Column::AmountPaid, amount_paid_case(chunk))
            .into_query();
        update.returning(Query::returning().columns(InvoiceFacts::COLUMNS));
        for row in txn.query_all(&update).await? {
            moved.push(InvoiceFacts::from_row(&row)?);
        }
    }
    Ok(moved)
}

/// Stores each invoice's `amount_paid` of `paid` (no move), in updates of 200.
pub async fn store_paid<C: ConnectionTrait>(
    txn: &C,
    paid: &[(InvoiceId, Amount)],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    for chunk in paid.chunks(PAID_PER_UPDATE) {
        invoice::Entity::update_many()
            .col_expr(invoice::Column::AmountPaid, amount_paid_case(chunk))
            .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
            .filter(invoice::Column::Id.is_in(chunk.iter().map(|(id, _)| *id)))
            .exec(txn)
            .await?;
    }
    Ok(())
}

/// The guarded update of `from` → `next` by `trigger` for `ids` (`paid_at` set on the way to
/// paid/overpaid unless it was set before).
fn moving(
    from: InvoiceStatus,
    trigger: InvoiceTrigger,
    next: InvoiceStatus,
    ids: &[InvoiceId],
    now: DateTime<Utc>,
) -> sea_orm::UpdateMany<invoice::Entity> {
    let mut update = invoice::Entity::update_many()
        .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
        .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
        .filter(invoice::Column::Id.is_in(ids.iter().copied()))
        .filter(invoice::Column::Status.eq(from));
    if matches!(trigger, InvoiceTrigger::ConfirmedExact | InvoiceTrigger::ConfirmedOver) {
        let paid_at = Func::coalesce([Expr::col(invoice::Column::PaidAt), Expr::value(now)]);
        update = update.col_expr(invoice::Column::PaidAt, paid_at.into());
    }
    update
}

/// `pending` → `confirming` for the invoices `ids` that a deposit reached within their payment
/// window (`expires_at` not before `now`); returns those it moved, as their events read them
/// ([`InvoiceFacts`]: a scan's batch moves thousands, and whole rows cost several times as much
/// to return and decode). An invoice past its window or no longer pending is left as it is, for
/// the caller to look at on its own.
pub async fn see_deposits<C: ConnectionTrait>(
    txn: &C,
    ids: &[InvoiceId],
    now: DateTime<Utc>,
) -> Result<Vec<InvoiceFacts>, DbErr> {
    let Some(next) = InvoiceStatus::Pending.on(InvoiceTrigger::DepositSeen) else {
        return Err(DbErr::Custom("invariant: a pending invoice must take a deposit".into()));
    };
    let mut moved = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_UPDATE) {
        let mut update = invoice::Entity::update_many()
            .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
            .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
            .filter(invoice::Column::Id.is_in(chunk.iter().copied()))
            .filter(invoice::Column::Status.eq(InvoiceStatus::Pending))
            .filter(Condition::any().add(invoice::Column::ExpiresAt.is_null()).add(invoice::Column::ExpiresAt.gte(now)))
            .into_query();
        update.returning(Query::returning().columns(InvoiceFacts::COLUMNS));
        for row in txn.query_all(&update).await? {
            moved.push(InvoiceFacts::from_row(&row)?);
        }
    }
    Ok(moved)
}

/// What an activation writes onto the invoice besides its new status: the chosen gate, the
/// locked amount and its fiat values, the new payment window.
#[derive(Debug, Clone)]
pub struct Activation {
    /// `Activate` (a draft) or `Reactivate` (an unpaid, expired deferred invoice).
    pub trigger: InvoiceTrigger,
    pub gate: &'static Gate,
    pub amount: Amount,
    pub amount_usd: Option<Amount>,
    pub amount_in_base_currency: Option<Amount>,
    /// Left as it is when `None`.
    pub exchange_rate: Option<Amount>,
    pub expires_at: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// Activates `inv` on `a.gate` (`draft`/`expired` → `pending`) with a guarded update on its
/// status and activation count, which it increments, so of two payers activating one invoice
/// at once only one moves it. Returns the invoice after it, or `None` when the trigger does not
/// apply or another writer moved the invoice first. The deposit address is not written here.
pub async fn activate<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
    a: &Activation,
) -> Result<Option<invoice::Model>, DbErr> {
    let Some(next) = inv.status.on(a.trigger) else { return Ok(None) };
    let mut update = invoice::Entity::update_many()
        .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
        .col_expr(invoice::Column::GateId, Expr::value(a.gate.id))
        .col_expr(invoice::Column::Currency, Expr::value(a.gate.asset))
        .col_expr(invoice::Column::Network, Expr::value(a.gate.network))
        .col_expr(invoice::Column::AmountRequested, Expr::value(a.amount))
        .col_expr(invoice::Column::AmountUsd, Expr::value(a.amount_usd))
        .col_expr(invoice::Column::AmountInBaseCurrency, Expr::value(a.amount_in_base_currency))
        .col_expr(invoice::Column::ExpiresAt, Expr::value(a.expires_at))
        .col_expr(invoice::Column::ActivatedAt, Expr::value(a.now))
        .col_expr(invoice::Column::ActivationCount, Expr::value(inv.activation_count + 1))
        .col_expr(invoice::Column::UpdatedAt, Expr::value(a.now));
    if let Some(r) = a.exchange_rate {
        update = update.col_expr(invoice::Column::ExchangeRate, Expr::value(r));
    }
    Ok(update
        .filter(invoice::Column::Id.eq(inv.id))
        .filter(invoice::Column::Status.eq(inv.status))
        .filter(invoice::Column::ActivationCount.eq(inv.activation_count))
        .exec_with_returning(txn)
        .await?
        .into_iter()
        .next())
}

/// Cancels `inv` (`pending` → `cancelled`, with `cancelled_at`) with a guarded update on its
/// status, so a payment racing the cancel can never be overwritten: only one of them moves the
/// invoice out of `pending`. Returns the invoice after it, or `None` when the trigger does not
/// apply or another writer moved the invoice first.
pub async fn cancel<C: ConnectionTrait>(db: &C, inv: &invoice::Model) -> Result<Option<invoice::Model>, DbErr> {
    let Some(next) = inv.status.on(InvoiceTrigger::Cancel) else { return Ok(None) };
    let now = Utc::now();
    Ok(invoice::Entity::update_many()
        .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
        .col_expr(invoice::Column::CancelledAt, Expr::value(now))
        .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
        .filter(invoice::Column::Id.eq(inv.id))
        .filter(invoice::Column::Status.eq(inv.status))
        .exec_with_returning(db)
        .await?
        .into_iter()
        .next())
}

/// Resolves `inv` (underpaid, overpaid, or expired or cancelled with late deposits → `paid`,
/// with `paid_at` when it had none), guarded on its status and on the `amount_paid` the merchant
/// accepted, so a deposit credited meanwhile makes it refuse instead of accepting an amount the
/// merchant never saw. `None` when the trigger does not apply, nothing was received, or another
/// writer moved the invoice first.
pub async fn resolve<C: ConnectionTrait>(db: &C, inv: &invoice::Model) -> Result<Option<invoice::Model>, DbErr> {
    let Some(next) = inv.status.on(InvoiceTrigger::Resolve) else { return Ok(None) };
    if inv.amount_paid.0 <= rust_decimal::Decimal::ZERO {
        return Ok(None);
    }
    let now = Utc::now();
    Ok(invoice::Entity::update_many()
        .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
        .col_expr(invoice::Column::PaidAt, Expr::value(inv.paid_at.unwrap_or(now)))
        .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
        .filter(invoice::Column::Id.eq(inv.id))
        .filter(invoice::Column::Status.eq(inv.status))
        .filter(invoice::Column::AmountPaid.eq(inv.amount_paid))
        .exec_with_returning(db)
        .await?
        .into_iter()
        .next())
}
