//! What the operator's payout commands ask the chains (`ops payouts fail`, `ops payouts stuck`):
//! whether a payout's transaction can still be mined, and why a payout is waiting. Network reads
//! only; the commands write through `domain::payouts::operator`.

use chrono::Utc;
use domain::payouts::operator::DeadTx;
use entity::payout;

use crate::chain::{Chains, Outgoing, SignedTx};

use super::ExecError;

/// The payout's stored transaction, if it has one.
fn signed(p: &payout::Model) -> Option<SignedTx> {
    match (&p.tx_hash, &p.signed_tx) {
        (Some(tx_hash), Some(raw)) => Some(SignedTx { tx_hash: tx_hash.clone(), raw: raw.clone() }),
        _ => None,
    }
}

/// What the gate's node says of payout `p`'s signed transaction: `Some` when it can provably
/// never be mined ([`crate::chain::Chain::dead`]); `None` when it may still be, when `p` has no
/// signed transaction, or when no node of its gate is configured here (nothing is proven).
pub async fn dead_tx(chains: &Chains, p: &payout::Model) -> Result<Option<DeadTx>, ExecError> {
    let (Some(tx), Some(chain)) = (signed(p), chains.get(p.environment, &p.gate_id)) else { return Ok(None) };
    Ok(chain.dead(&tx).await?.map(|why| DeadTx { tx_hash: tx.tx_hash, why }))
}

/// One payout `ops payouts stuck` lists, and why it waits.
#[derive(Debug, Clone)]
pub struct Stuck {
    pub payout: payout::Model,
    /// Minutes since it was broadcast (or queued, or approved).
    pub waiting_minutes: i64,
    pub why: String,
}

/// Payouts in `queued` or `processing` (every chain, both environments) that have waited longer
/// than `older_than`, oldest first, each with what the chain says of it: never signed (and
/// why it may not be), in the mempool, mined but short of its depth, unknown to the node, or
/// provably dead (then `ops payouts fail` ends it).
pub async fn stuck(
    db: &sea_orm::DatabaseConnection,
    chains: &Chains,
    older_than: chrono::Duration,
) -> Result<Vec<Stuck>, ExecError> {
    let now = Utc::now();
    let mut out = Vec::new();
    for p in domain::payouts::operator::stuck_candidates(db, older_than).await? {
        let since = p.broadcast_at.or(p.queued_at).unwrap_or(p.updated_at);
        let why = why(chains, &p).await;
        out.push(Stuck { waiting_minutes: (now - since).num_minutes(), why, payout: p });
    }
    Ok(out)
}

async fn why(chains: &Chains, p: &payout::Model) -> String {
    let Some(chain) = chains.get(p.environment, &p.gate_id) else {
        return "no node configured here for this gate".into();
    };
    let Some(tx) = signed(p) else {
        return "never signed: no hot wallet configured for this gate, or its node refused the fee or \
                nonce reads (the payout executor's log says which)"
            .into();
    };
    let required = u64::from(chain.gate().confirmations);
    match chain.outgoing(&tx).await {
        Ok(Outgoing::Confirmations { confirmations: 0, .. }) => {
            "in the mempool, not in a block (fee below the market or a nonce gap before it)".into()
        }
        Ok(Outgoing::Confirmations { confirmations, .. }) => {
            format!("mined, {confirmations} of {required} confirmations")
        }
        Ok(Outgoing::Expired) => "expired unseen: the executor signs it again (or `ops payouts fail` ends it)".into(),
        Ok(Outgoing::Failed(reason)) => format!("failed on chain ({reason}): the executor fails it"),
        Ok(Outgoing::Unknown) => match chain.dead(&tx).await {
            Ok(Some(dead)) => format!("unknown to the node and provably dead ({dead}): `ops payouts fail` ends it"),
            Ok(None) => "unknown to the node (dropped or never accepted): the executor sends it again".into(),
            Err(_) => "unknown to the node; the node did not answer whether it can still be mined".into(),
        },
        // The error may name the endpoint (and a provider key in its URL): not printed.
        Err(_) => "the node did not answer".into(),
    }
}
