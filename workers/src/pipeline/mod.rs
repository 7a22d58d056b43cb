//! The deposit pipeline's rules, independent of how jobs reach them: the scanner records
//! transfers to watched addresses as payments (exactly once), the tracker follows each payment's
//! confirmations to its credit or reversal and moves the invoice through the PRODUCT.md table,
//! and the sweeper re-derives forgotten work (expiries, payments nobody is tracking) from the
//! database. Every function here is idempotent: running it twice, or concurrently in two
//! processes, changes nothing the first run did not.

pub mod scanner;
pub mod sweeper;
pub mod tracker;

use chrono::Utc;
use domain::chain::address::AddressFamily;
use domain::gates::GATES;
use entity::{InvoiceStatus, InvoiceTrigger, invoice, payment};
use sea_orm::sea_query::{Expr, ExprTrait, Func};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use crate::chain::ChainError;
use domain::ledger::LedgerError;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(transparent)]
    Db(#[from] DbErr),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("{0}")]
    Invariant(String),
}

/// Whether a payment of the gate is final once it has its required confirmations: where the
/// chain's own answer is finality (Solana's `finalized` commitment, which its adapter reports
/// as the gate's confirmations and never deeper; an XRP validated ledger, which is never
/// replaced). Not where a block can still be replaced however deep it is (Bitcoin, EVM, TRON).
/// A gate's sandbox chain follows the gate's rule.
pub fn final_at_confirmation(gate_id: &str) -> bool {
    match domain::gates::find(gate_id).map(|g| g.family) {
        Some(AddressFamily::Solana | AddressFamily::Xrp) => true,
        Some(AddressFamily::Bitcoin | AddressFamily::Evm | AddressFamily::Tron) | None => false,
    }
}

/// The depth (as the chain's `status` reports it) until which a confirmed payment of the gate is
/// still watched for a reversal; past it no tracker looks at it again. Its required
/// confirmations where they are finality ([`final_at_confirmation`]), else twice them.
pub fn final_depth(gate_id: &str, required: i32) -> i32 {
    if final_at_confirmation(gate_id) { required } else { required.saturating_mul(2) }
}

/// [`final_depth`] as SQL over `payments`: the rows whose stored confirmations are short of
/// their final depth.
pub(crate) fn short_of_final() -> Condition {
    let at_confirmation: Vec<&str> = GATES.iter().filter(|g| final_at_confirmation(g.id)).map(|g| g.id).collect();
    let confirmations = || Expr::col(payment::Column::Confirmations);
    let required = || Expr::col(payment::Column::RequiredConfirmations);
    Condition::any()
        .add(
            Condition::all()
                .add(payment::Column::GateId.is_in(at_confirmation.iter().copied()))
                .add(confirmations().lt(required())),
        )
        .add(
            Condition::all()
                .add(payment::Column::GateId.is_not_in(at_confirmation.iter().copied()))
                .add(confirmations().lt(required().mul(2))),
        )
}

/// Applies `trigger` to the invoice with a guarded update (`WHERE status = <from>`) and returns
/// the invoice after it, or `None` when the trigger does not apply or another writer moved the
/// invoice first. `paid_at` is set on the way to paid/overpaid.
pub(crate) async fn transition<C: ConnectionTrait>(
    txn: &C,
    inv: &invoice::Model,
    trigger: InvoiceTrigger,
) -> Result<Option<invoice::Model>, DbErr> {
    Ok(transition_many(txn, inv.status, trigger, &[inv.id]).await?.into_iter().next())
}

/// [`transition`] of the invoices `ids`, all in status `from`, by one guarded update (500 a
/// statement); returns those it moved (the others did not take the trigger or were moved first
/// by another writer). `paid_at` is set on the way to paid/overpaid unless it was set before.
pub(crate) async fn transition_many<C: ConnectionTrait>(
    txn: &C,
    from: InvoiceStatus,
    trigger: InvoiceTrigger,
    ids: &[Uuid],
) -> Result<Vec<invoice::Model>, DbErr> {
    let Some(next) = from.on(trigger) else { return Ok(Vec::new()) };
    let now = Utc::now();
    let mut moved = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let mut update = invoice::Entity::update_many()
            .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
            .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
            .filter(invoice::Column::Id.is_in(chunk.iter().copied()))
            .filter(invoice::Column::Status.eq(from));
        if matches!(trigger, InvoiceTrigger::ConfirmedExact | InvoiceTrigger::ConfirmedOver) {
            let paid_at = Func::coalesce([Expr::col(invoice::Column::PaidAt), Expr::value(now)]);
            update = update.col_expr(invoice::Column::PaidAt, paid_at.into());
        }
        moved.extend(update.exec_with_returning(txn).await?);
    }
    Ok(moved)
}
