//! What the deposit pipeline's two stages share: the scanner ([`crate::scanner`]) records
//! transfers to watched addresses as payments (exactly once) and the tracker
//! ([`crate::tracker`]) follows each payment's confirmations to its credit or reversal. Both
//! report [`PipelineError`], and both read finality the same way ([`final_at_confirmation`],
//! [`final_depth`]). Every function of the two stages is idempotent: running it twice, or
//! concurrently in two processes, changes nothing the first run did not.

use domain::chain::address::AddressFamily;
use domain::gates::GATES;
use domain::ledger::LedgerError;
use entity::payment;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, Condition, DbErr};

use crate::chain::ChainError;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The watched payments' partial index names the gates whose confirmation is final: a gate
    /// added to that rule needs a migration that recreates the index with it.
    #[test]
    fn the_watched_index_knows_the_final_gates() {
        let final_gates: Vec<&str> = GATES.iter().filter(|g| final_at_confirmation(g.id)).map(|g| g.id).collect();
        assert_eq!(final_gates, domain::db::open_rows::FINAL_AT_CONFIRMATION);
    }
}
