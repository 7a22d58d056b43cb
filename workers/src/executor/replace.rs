//! Replacing a payout's transaction on account-based chains: a zero-value transaction to the
//! hot wallet (on the XRP Ledger a no-op `AccountSet`) with the payout's nonce, so a refused or
//! stuck transaction never leaves a gap before later payouts.

use std::time::Duration;

use chrono::Utc;
use entity::{PayoutStatus, PayoutTrigger, payout, payout_replacement};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::{ExecError, Executor, Next, Step};
use crate::chain::{Broadcast, Chain, Outgoing, SignedTx};
use domain::payouts::lifecycle::{Judged, replace_judged};

impl Executor {
    /// The node refused the transaction for good. Without a nonce the payout fails now; with one
    /// (an account-based chain) the nonce must not stay a gap before later payouts: a
    /// zero-value transaction to the hot wallet takes it, and the payout fails once that one is
    /// mined (see [`Executor::replace`]). Either only while the payout still holds `tx`.
    pub(super) async fn refused(&self, p: &payout::Model, tx: &SignedTx, reason: &str) -> Result<Step, ExecError> {
        let judged = Judged::Tx(&tx.tx_hash);
        let signer = self.signers.get(p.environment, &p.gate_id);
        let has_nonce = signer.is_some_and(|s| s.signed_terms(&tx.raw).is_some());
        if !has_nonce {
            return self.fail(p, judged, reason).await;
        }
        if replace_judged(&self.db, p, judged, &format!("{reason} (nonce filled)")).await? {
            tracing::warn!(payout = %p.id, reason, "payout transaction refused for good; its nonce is filled by a zero-value transaction, then the payout fails");
        }
        Ok(Step::Again)
    }

    pub(super) async fn replacement(&self, id: Uuid) -> Result<Option<payout_replacement::Model>, sea_orm::DbErr> {
        payout_replacement::Entity::find_by_id(id).one(&self.db).await
    }

    /// A payout whose transaction is being replaced (operator request, or a refused
    /// transaction's nonce being filled): the replacement, a zero-value transaction to the hot
    /// wallet with the same nonce and a higher fee, is signed and stored once, then broadcast.
    /// Only one of the two can be mined: if the original is, the payout goes on as usual; once
    /// the replacement is at the gate's depth the payout fails and its funds are released
    /// (the replacement's gas is the hot wallet's cost, not the merchant's).
    pub(super) async fn replace(
        &self,
        p: &payout::Model,
        chain: &dyn Chain,
        r: payout_replacement::Model,
    ) -> Result<Step, ExecError> {
        let gate = chain.gate();
        let (Some(original), Some(raw)) = (p.tx_hash.as_deref(), p.signed_tx.as_deref()) else {
            return Err(ExecError::Other(format!("payout {}: no signed transaction to replace", p.id)));
        };
        // Every verdict below is about the payout's transaction as read (the replacement takes
        // its nonce).
        let judged = Judged::Tx(original);
        match chain.outgoing(&SignedTx { tx_hash: original.to_owned(), raw: raw.to_owned() }).await? {
            Outgoing::Confirmations { confirmations, .. } if confirmations > 0 => {
                tracing::info!(payout = %p.id, "the original payout transaction was mined; its replacement cannot be");
                if p.status == PayoutStatus::Queued {
                    self.transition(p, PayoutTrigger::Broadcast, payout::Column::BroadcastAt, judged).await?;
                    return Ok(Step::Again);
                }
                return self.follow(p, chain).await;
            }
            Outgoing::Failed(reason) => return self.fail(p, judged, &reason).await,
            Outgoing::Confirmations { .. } | Outgoing::Unknown | Outgoing::Expired => {}
        }
        let rtx = match (r.tx_hash, r.signed_tx) {
            (Some(tx_hash), Some(raw)) => SignedTx { tx_hash, raw },
            _ => {
                let Some(signer) = self.signers.get(p.environment, &p.gate_id) else {
                    return Err(ExecError::Other(format!("payout {}: no signer to sign its replacement", p.id)));
                };
                let (nonce, fees) = signer
                    .signed_terms(raw)
                    .ok_or_else(|| ExecError::Other(format!("payout {}: its transaction cannot be replaced", p.id)))?;
                // Network read first; the replacement is then signed locally and stored once.
                let fees = signer.replacement_fees(fees).await?;
                let rtx = signer.sign_replacement(nonce, fees).await?;
                let stored = payout_replacement::Entity::update_many()
                    .col_expr(payout_replacement::Column::TxHash, Expr::value(rtx.tx_hash.clone()))
                    .col_expr(payout_replacement::Column::SignedTx, Expr::value(rtx.raw.clone()))
                    .filter(payout_replacement::Column::PayoutId.eq(p.id))
                    .filter(payout_replacement::Column::SignedTx.is_null())
                    .exec(&self.db)
                    .await?;
                if stored.rows_affected == 0 {
                    return Ok(Step::Again);
                }
                tracing::info!(payout = %p.id, nonce, replacement = %rtx.tx_hash, ?fees, "replacement transaction signed");
                rtx
            }
        };
        match chain.outgoing(&rtx).await? {
            Outgoing::Confirmations { confirmations, .. } if confirmations >= u64::from(gate.confirmations) => {
                let reason = format!("{} (replaced by {})", r.reason, rtx.tx_hash);
                self.fail(p, judged, &reason).await
            }
            Outgoing::Confirmations { .. } => Ok(Step::Stop(Next::After(self.recheck))),
            Outgoing::Unknown => match chain.broadcast(&rtx).await? {
                Broadcast::Accepted | Broadcast::AlreadyKnown => {
                    payout_replacement::Entity::update_many()
                        .col_expr(payout_replacement::Column::BroadcastAt, Expr::value(Utc::now()))
                        .filter(payout_replacement::Column::PayoutId.eq(p.id))
                        .filter(payout_replacement::Column::BroadcastAt.is_null())
                        .exec(&self.db)
                        .await?;
                    Ok(Step::Stop(Next::After(self.recheck)))
                }
                Broadcast::Retry(reason) => Ok(self.retry_later(p, &reason)),
                // Neither the original (checked above) nor the replacement has the nonce.
                Broadcast::Displaced(reason) => self.fail(p, judged, &reason).await,
                Broadcast::Rejected(reason) => {
                    tracing::error!(payout = %p.id, reason, "the replacement transaction was refused for good; the payout waits for an operator");
                    Ok(Step::Stop(Next::After(self.recheck.max(Duration::from_secs(60)))))
                }
            },
            Outgoing::Failed(reason) => {
                tracing::error!(payout = %p.id, reason, "the replacement transaction failed on chain; the payout waits for an operator");
                Ok(Step::Stop(Next::After(self.recheck.max(Duration::from_secs(60)))))
            }
            // Expired unseen, its nonce unused: cleared (guarded), so it is signed again with
            // the same nonce and fresh terms on the next step.
            Outgoing::Expired => {
                payout_replacement::Entity::update_many()
                    .col_expr(payout_replacement::Column::TxHash, Expr::value(Option::<String>::None))
                    .col_expr(payout_replacement::Column::SignedTx, Expr::value(Option::<String>::None))
                    .col_expr(
                        payout_replacement::Column::BroadcastAt,
                        Expr::value(Option::<chrono::DateTime<Utc>>::None),
                    )
                    .filter(payout_replacement::Column::PayoutId.eq(p.id))
                    .filter(payout_replacement::Column::TxHash.eq(rtx.tx_hash.as_str()))
                    .exec(&self.db)
                    .await?;
                Ok(Step::Again)
            }
        }
    }
}
