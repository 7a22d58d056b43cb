//! The payout executor's rules (the `payout-executor` worker runs them as jobs). One call
//! moves a payout as far as it can go now and says when to look again:
//!
//! `approved` → (once `executable_at` passes) `queued` → sign, **store the signed transaction**,
//! broadcast → `processing` → confirmed to the gate's depth → `completed` (reservation settled
//! with the real network fee, `payout.completed`), or → `failed` (reservation released,
//! `payout.failed` with the reason).
//!
//! A payout is broadcast at most once whatever crashes or replays happen: the signed
//! transaction is persisted (guarded, once) before anything is sent, and every later step asks
//! the chain about that transaction before sending it, so a restart re-sends the same bytes at
//! most (which the network treats as the same transaction), never a new one. Every transition
//! is a guarded update; two executors on one payout cannot both apply one.
//!
//! Two jobs on one payout are normal (the poller re-enqueues a payout not looked at for
//! `stale_after_secs`, and a job may wait minutes before its next look), so a job may still hold
//! a transaction that another job has replaced since. Every verdict is therefore about the
//! transaction it judged ([`Judged`]): a transition that ends, re-signs or moves a payout on
//! because of a chain's answer is guarded on that transaction's hash (or, before anything was
//! signed, on `signed_tx IS NULL`), and a guard that no longer matches means "look again".
//!
//! - Signing goes through `chain::signer::Signer` per (environment, gate); the network terms a
//!   signer needs (`Signer::fees`: EVM gas prices, XRP fee and `LastLedgerSequence`, TRON
//!   reference block, Solana blockhash) are read before the write transaction.
//! - Nonces (account-based chains): in the transaction that stores the signed payout, the
//!   executor takes the `nonce_accounts` row's lock, signs with its counter (or the chain's
//!   pending nonce if higher) and advances it (`wallet`); of two executors on one payout the loser
//!   rolls back without consuming a nonce.
//! - Wallet outputs (UTXO chains): in the same transaction the executor drops the outputs other
//!   payouts' transactions spend (`wallet_spends`, except a `failed` payout's), signs over the
//!   rest and records what it spent; the insert is unique per output, so of two executors that
//!   chose one output the second rolls back.
//! - Expiry (XRP, TRON, Solana): on `Outgoing::Expired` the payout is signed again with fresh
//!   terms, replacing the stored transaction with an update guarded on the old hash; the old
//!   one can never be included, so the payout is still sent at most once.
//! - A failure is judged where it is final: a transaction that failed in a block fails its payout
//!   only once that block is at the gate's depth (`chain::settled_failure`; Solana at
//!   `finalized`, XRP at validation). A payout the chain refuses before anything is signed
//!   (`ChainError::Refused`) fails at once.
//! - Completion and failure post their ledger entries, mirror onto a refund
//!   (`domain::refunds::mirror`) and write `payout.completed` / `payout.failed` in the
//!   transition's transaction. The poller (`job`, every `payouts.poll_interval_ms`) enqueues
//!   payouts that are due or that nobody looked at for `stale_after_secs`.

use std::time::Duration;

use chrono::Utc;
use entity::{Bucket, EntryType, FeeAllocation, PayoutStatus, PayoutTrigger, payout, refund};
use rust_decimal::Decimal;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::chain::signer::{PayoutTx, Signers};
use crate::chain::{Broadcast, Chain, ChainError, Chains, Outgoing, SignedTx};
use domain::events::{self, EventKind};
use domain::ledger::{self, LedgerError, Posting};
use domain::payouts::lifecycle::Judged;
pub(crate) use wallet::{advance_nonce, lock_nonce};
use wallet::{take_outputs, unspent};

pub mod job;
pub mod operator;
mod replace;
mod wallet;

/// A broadcast payout not in a block after this long is reported as stuck in the log.
const STUCK_AFTER_MINUTES: i64 = 10;

/// What the caller should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing more to do (final, not approved yet, or gone).
    Done,
    /// Look again after this delay.
    After(Duration),
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("{0}")]
    Other(String),
}

impl From<domain::payouts::lifecycle::ReleaseError> for ExecError {
    fn from(e: domain::payouts::lifecycle::ReleaseError) -> Self {
        ExecError::Other(e.to_string())
    }
}

/// Everything the executor needs besides the database.
#[derive(Clone)]
pub struct Executor {
    pub db: DatabaseConnection,
    pub chains: Chains,
    pub signers: Signers,
    /// Delay between looks at a payout waiting for confirmations.
    pub recheck: Duration,
}

impl Executor {
    /// Moves payout `id` as far as it can go now.
    pub async fn execute(&self, id: Uuid) -> Result<Next, ExecError> {
        // Once per call: the poller skips payouts looked at lately.
        self.stamp(id).await?;
        // A few steps per call at most: approved → queued → processing → completed.
        for _ in 0..6 {
            let Some(p) = payout::Entity::find_by_id(id).one(&self.db).await? else { return Ok(Next::Done) };
            let step = match p.status {
                PayoutStatus::PendingApproval
                | PayoutStatus::Completed
                | PayoutStatus::Failed
                | PayoutStatus::Cancelled => return Ok(Next::Done),
                PayoutStatus::Approved => self.queue(&p).await?,
                PayoutStatus::Queued => self.send(&p).await?,
                PayoutStatus::Processing => self.track(&p).await?,
            };
            match step {
                Step::Again => continue,
                Step::Stop(next) => return Ok(next),
            }
        }
        Ok(Next::After(self.recheck))
    }

    async fn stamp(&self, id: Uuid) -> Result<(), sea_orm::DbErr> {
        payout::Entity::update_many()
            .col_expr(payout::Column::CheckedAt, Expr::value(Utc::now()))
            .filter(payout::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// `approved` → `queued` once `executable_at` has passed, and only when the gate has a
    /// signer (hot wallet) and a chain adapter here: without them the payout stays `approved`
    /// (said once in the log), where the merchant can still cancel it.
    async fn queue(&self, p: &payout::Model) -> Result<Step, ExecError> {
        let now = Utc::now();
        if let Some(at) = p.executable_at
            && at > now
        {
            return Ok(Step::Stop(Next::After((at - now).to_std().unwrap_or_default())));
        }
        let missing = match (self.signers.get(p.environment, &p.gate_id), self.chains.get(p.environment, &p.gate_id)) {
            (Some(_), Some(_)) => None,
            (None, _) => Some("no signer (hot wallet) for this gate"),
            (Some(_), None) => Some("no chain adapter for this gate"),
        };
        if let Some(what) = missing {
            if first_mention(p.id) {
                tracing::warn!(payout = %p.id, gate = %p.gate_id, env = %p.environment,
                    "{what}; the payout stays approved until one is configured");
            }
            return Ok(Step::Stop(Next::After(self.recheck.max(Duration::from_secs(60)))));
        }
        self.transition(p, PayoutTrigger::Queue, payout::Column::QueuedAt, Judged::Unsigned).await?;
        Ok(Step::Again)
    }

    /// A guarded status change stamping `at_column` (guarded on the payout's status and on the
    /// transaction the change was judged on), with the refund (if any) following it in the same
    /// transaction.
    async fn transition(
        &self,
        p: &payout::Model,
        trigger: PayoutTrigger,
        at_column: payout::Column,
        judged: Judged<'_>,
    ) -> Result<bool, ExecError> {
        let next =
            p.status.on(trigger).ok_or_else(|| ExecError::Other(format!("{:?} from {:?}", trigger, p.status)))?;
        let now = Utc::now();
        let txn = domain::db::begin_write(&self.db).await?;
        let update = payout::Entity::update_many()
            .col_expr(payout::Column::Status, Expr::value(next.as_str()))
            .col_expr(at_column, Expr::value(now))
            .col_expr(payout::Column::UpdatedAt, Expr::value(now))
            .filter(payout::Column::Id.eq(p.id))
            .filter(payout::Column::Status.eq(p.status));
        let moved = judged.guard(update).exec_with_returning(&txn).await?;
        let Some(after) = moved.into_iter().next() else {
            txn.rollback().await?;
            return Ok(false);
        };
        domain::refunds::mirror::mirror_payout(&txn, &after).await?;
        txn.commit().await?;
        Ok(true)
    }

    /// `queued`: sign and store once, then make sure the chain has the transaction.
    async fn send(&self, p: &payout::Model) -> Result<Step, ExecError> {
        let Some(chain) = self.chains.get(p.environment, &p.gate_id) else {
            tracing::warn!(payout = %p.id, gate = %p.gate_id, env = %p.environment, "no chain adapter for this gate; the payout waits");
            return Ok(Step::Stop(Next::After(self.recheck.max(Duration::from_secs(60)))));
        };
        if let Some(r) = self.replacement(p.id).await? {
            return self.replace(p, chain.as_ref(), r).await;
        }
        let tx = match (&p.tx_hash, &p.signed_tx) {
            (Some(tx_hash), Some(raw)) => SignedTx { tx_hash: tx_hash.clone(), raw: raw.clone() },
            _ => match self.sign_and_store(p).await? {
                Ok(tx) => tx,
                Err(step) => return Ok(step),
            },
        };
        let judged = Judged::Tx(&tx.tx_hash);
        // Reconcile before sending: a transaction the chain knows is not sent again.
        match chain.outgoing(&tx).await? {
            Outgoing::Unknown => match chain.broadcast(&tx).await? {
                Broadcast::Accepted | Broadcast::AlreadyKnown => {}
                Broadcast::Retry(reason) => return Ok(self.retry_later(p, &reason)),
                Broadcast::Rejected(reason) => return self.refused(p, &tx, &reason).await,
                Broadcast::Displaced(reason) => return self.fail(p, judged, &reason).await,
            },
            Outgoing::Confirmations { .. } => {}
            Outgoing::Failed(reason) => return self.fail(p, judged, &reason).await,
            Outgoing::Expired => return self.sign_again(p, &tx).await,
        }
        fail::fail_point!("payout-after-broadcast");
        self.transition(p, PayoutTrigger::Broadcast, payout::Column::BroadcastAt, judged).await?;
        Ok(Step::Again)
    }

    /// Signs the payout and stores the signed transaction (guarded, once). Every network read
    /// (the chain's pending nonce, the fees) happens first; the write transaction then only
    /// locks the nonce counter, signs locally and stores. `Err(step)`: nothing stored.
    async fn sign_and_store(&self, p: &payout::Model) -> Result<Result<SignedTx, Step>, ExecError> {
        let Some(signer) = self.signers.get(p.environment, &p.gate_id) else {
            tracing::warn!(payout = %p.id, gate = %p.gate_id, env = %p.environment, "no signer for this gate; the payout waits");
            return Ok(Err(Step::Stop(Next::After(self.recheck.max(Duration::from_secs(60))))));
        };
        let mut unsigned = unsigned(p)?;
        // Network reads, before any write transaction (a stale fee is fine: at worst the
        // transaction waits or is replaced).
        let account = signer.nonce_account().await?;
        unsigned.fees = match signer.fees(&unsigned).await {
            // Nothing was signed for it (guarded: unless another executor signed meanwhile):
            // failing it releases funds no transaction can move.
            Err(ChainError::Refused(why)) => return Ok(Err(self.fail(p, Judged::Unsigned, &why).await?)),
            fees => fees?,
        };
        let funding = signer.funding().await?;
        // Stored before anything is sent; of two executors only one stores. On an
        // account-based chain the nonce is taken from its counter in the same transaction,
        // under the counter's row lock: a lost race consumes no nonce.
        let txn = domain::db::begin_write(&self.db).await?;
        let nonce = match &account {
            Some(a) => {
                let next = lock_nonce(&txn, a).await?;
                unsigned.nonce = Some(next);
                Some((a, next))
            }
            None => None,
        };
        if let Some(f) = &funding {
            unsigned.funding = Some(unspent(&txn, f).await?);
        }
        let tx = signer.sign(&unsigned).await?;
        let stored = store_signed(p.id, &tx)
            .filter(payout::Column::Status.eq(PayoutStatus::Queued))
            .filter(payout::Column::SignedTx.is_null())
            .exec(&txn)
            .await?;
        if stored.rows_affected == 0 {
            txn.rollback().await?;
            return Ok(Err(Step::Again));
        }
        if let Some(f) = &funding
            && !take_outputs(&txn, &f.scope, p.id, &signer.spends(&tx.raw)).await?
        {
            // Another executor signed over one of these outputs first: nothing stored.
            txn.rollback().await?;
            return Ok(Err(Step::Again));
        }
        if let Some((a, used)) = nonce {
            advance_nonce(&txn, a, used).await?;
        }
        txn.commit().await?;
        fail::fail_point!("payout-after-persist");
        Ok(Ok(tx))
    }

    /// `processing`: follow the transaction (or its replacement) to the gate's confirmation count.
    async fn track(&self, p: &payout::Model) -> Result<Step, ExecError> {
        let Some(chain) = self.chains.get(p.environment, &p.gate_id) else {
            return Err(ExecError::Other(format!("processing payout {} has no chain", p.id)));
        };
        if let Some(r) = self.replacement(p.id).await? {
            return self.replace(p, chain.as_ref(), r).await;
        }
        self.follow(p, chain.as_ref()).await
    }

    async fn follow(&self, p: &payout::Model, chain: &dyn Chain) -> Result<Step, ExecError> {
        let (Some(tx_hash), Some(raw)) = (p.tx_hash.clone(), p.signed_tx.clone()) else {
            return Err(ExecError::Other(format!("processing payout {} has no transaction", p.id)));
        };
        let gate = chain.gate();
        let tx = SignedTx { tx_hash, raw };
        let judged = Judged::Tx(&tx.tx_hash);
        match chain.outgoing(&tx).await? {
            Outgoing::Confirmations { confirmations, fee } if confirmations >= u64::from(gate.confirmations) => {
                let gas = self.token_gas(p, gate, &tx).await;
                match self.complete(p, judged, fee.unwrap_or(p.configured_network_fee_amount.0), gas).await? {
                    true => Ok(Step::Stop(Next::Done)),
                    // Moved on meanwhile (another job completed it, or holds another transaction).
                    false => Ok(Step::Again),
                }
            }
            Outgoing::Confirmations { confirmations: 0, .. } => {
                // Sent but not in a block: say so once it has waited long (a fee below the
                // market, a nonce gap before it) so an operator can act.
                let waited = p.broadcast_at.map(|t| Utc::now() - t);
                if let Some(w) = waited.filter(|w| *w > chrono::Duration::minutes(STUCK_AFTER_MINUTES)) {
                    tracing::warn!(payout = %p.id, tx = %tx.tx_hash, gate = gate.id, minutes = w.num_minutes(),
                        "payout transaction still not in a block (stuck: fee too low or a nonce gap before it; see `ops payouts stuck`)");
                }
                Ok(Step::Stop(Next::After(self.recheck)))
            }
            Outgoing::Confirmations { .. } => Ok(Step::Stop(Next::After(self.recheck))),
            // Dropped from the mempool: the same signed transaction goes out again (never a new one).
            Outgoing::Unknown => match chain.broadcast(&tx).await? {
                Broadcast::Accepted | Broadcast::AlreadyKnown => Ok(Step::Stop(Next::After(self.recheck))),
                Broadcast::Retry(reason) => Ok(self.retry_later(p, &reason)),
                Broadcast::Rejected(reason) => self.refused(p, &tx, &reason).await,
                Broadcast::Displaced(reason) => self.fail(p, judged, &reason).await,
            },
            Outgoing::Failed(reason) => self.fail(p, judged, &reason).await,
            Outgoing::Expired => self.sign_again(p, &tx).await,
        }
    }

    /// The payout's transaction `old` expired unseen: the chain checked that it is in no block
    /// of its validity window (which has passed) and that its nonce is unused. The payout is
    /// signed again with the same nonce and fresh terms, and the new transaction replaces the
    /// stored one (guarded on the old hash: of two executors one stores). The old one can never
    /// enter the chain, so this sends the payout at most once; its status does not change.
    async fn sign_again(&self, p: &payout::Model, old: &SignedTx) -> Result<Step, ExecError> {
        let Some(signer) = self.signers.get(p.environment, &p.gate_id) else {
            return Err(ExecError::Other(format!("payout {}: no signer to sign its expired transaction again", p.id)));
        };
        let mut unsigned = unsigned(p)?;
        unsigned.nonce = signer.signed_terms(&old.raw).map(|(nonce, _)| nonce);
        unsigned.fees = match signer.fees(&unsigned).await {
            // The old transaction can never enter the chain and no other was signed since
            // (guarded on the old one: another job may have signed its successor meanwhile).
            Err(ChainError::Refused(why)) => return self.fail(p, Judged::Tx(&old.tx_hash), &why).await,
            fees => fees?,
        };
        let tx = signer.sign(&unsigned).await?;
        let stored = store_signed(p.id, &tx)
            .filter(payout::Column::Status.eq(p.status))
            .filter(payout::Column::TxHash.eq(old.tx_hash.as_str()))
            .exec(&self.db)
            .await?;
        if stored.rows_affected == 1 {
            tracing::warn!(payout = %p.id, expired = %old.tx_hash, tx = %tx.tx_hash, nonce = ?unsigned.nonce,
                "payout transaction expired unseen; signed again with the same nonce");
        }
        Ok(Step::Again)
    }

    /// The node refused the transaction before its mempool for a reason that can pass: the
    /// signed transaction is kept (so its nonce is never left as a gap) and sent again after a
    /// delay growing with the time it has waited (a quarter of it, from `recheck` to 5 minutes).
    fn retry_later(&self, p: &payout::Model, reason: &str) -> Step {
        let since = p.broadcast_at.or(p.queued_at).unwrap_or(p.updated_at);
        let waited = (Utc::now() - since).to_std().unwrap_or_default();
        let delay = (waited / 4).min(Duration::from_secs(300)).max(self.recheck);
        tracing::warn!(payout = %p.id, reason, retry_in_ms = delay.as_millis() as u64,
            "the node refused the payout transaction before its mempool; the same transaction is sent again later");
        Step::Stop(Next::After(delay))
    }

    /// Fails the payout because of what the chain said about `judged`, releasing its funds;
    /// if the payout moved on meanwhile (another status, another transaction), looks again.
    async fn fail(&self, p: &payout::Model, judged: Judged<'_>, reason: &str) -> Result<Step, ExecError> {
        if domain::payouts::lifecycle::fail_judged(&self.db, p, judged, reason).await?.is_none() {
            return Ok(Step::Again);
        }
        tracing::info!(payout = %p.id, reason, "payout failed");
        Ok(Step::Stop(Next::Done))
    }

    /// What a live EVM, Solana or TRON token payout's transaction cost in the network's coin,
    /// read from the native gate's adapter (the token gate reports no fee; on Solana it is the
    /// fee and the rent of a recipient's token account the hot wallet created; on TRON the TRX
    /// its energy and bandwidth burnt): the house pays it. `None`
    /// elsewhere, or when the node does not say (then nothing is booked, and the log says so).
    async fn token_gas(
        &self,
        p: &payout::Model,
        gate: &'static domain::gates::Gate,
        tx: &SignedTx,
    ) -> Option<(&'static domain::gates::Gate, Decimal)> {
        use domain::chain::address::AddressFamily;
        let booked = matches!(gate.family, AddressFamily::Evm | AddressFamily::Solana | AddressFamily::Tron);
        if p.environment != entity::Environment::Live || !gate.is_token || !booked {
            return None;
        }
        let native = domain::gates::native_of(gate)?;
        match self.chains.get(p.environment, native.id)?.outgoing(tx).await {
            Ok(Outgoing::Confirmations { fee: Some(fee), .. }) => Some((native, fee)),
            other => {
                tracing::warn!(payout = %p.id, answer = ?other.map(|o| format!("{o:?}")),
                    "the gas of a token payout was not read; not booked to the house");
                None
            }
        }
    }

    /// `processing` → `completed`: the reservation leaves as the payout's debit, its fee and the
    /// network fee estimate; a merchant-paid network fee is then settled at the real fee (the
    /// difference comes back to `available`). One transaction, guarded on the status and on the
    /// transaction found at depth (`judged`); false when that guard did not match.
    ///
    /// In live, the house's books follow in the same transaction (after the merchant's balance,
    /// as every writer locks them): `payout_margin` on the payout's gate is what stayed with the
    /// operator (the merchant's debit less what the recipient got and, on a native gate, the real
    /// network fee: the payout and network fees earned, or a fee overrun paid), and a token
    /// payout's `gas` in the network's coin is `payout_gas`. The reconciliation then stays exact.
    async fn complete(
        &self,
        p: &payout::Model,
        judged: Judged<'_>,
        actual_fee: Decimal,
        gas: Option<(&'static domain::gates::Gate, Decimal)>,
    ) -> Result<bool, ExecError> {
        let real_fee = actual_fee;
        let next = p.status.on(PayoutTrigger::Complete).ok_or_else(|| ExecError::Other("cannot complete".into()))?;
        let estimate = p.configured_network_fee_amount.0;
        // Signers cap the fee at the estimate where the chain lets them (EVM, Bitcoin, XRP); a
        // TRX payout to an account that does not exist yet burns its activation fee on top:
        // the merchant is charged the estimate at most, the hot wallet pays the excess.
        let charged = if actual_fee > estimate {
            tracing::warn!(payout = %p.id, fee = %actual_fee, estimate = %estimate,
                "the network fee exceeded the payout's estimate; the hot wallet paid the difference");
            estimate
        } else {
            actual_fee
        };
        let actual_fee = charged;
        let merchant_pays_network = p.network_fee_allocation == FeeAllocation::Merchant;
        let back = if merchant_pays_network {
            estimate.checked_sub(actual_fee).ok_or_else(|| ExecError::Other("overflow".into()))?
        } else {
            Decimal::ZERO
        };
        let debit = p.merchant_debit_amount.0.checked_sub(back).ok_or_else(|| ExecError::Other("overflow".into()))?;
        let now = Utc::now();
        let txn = domain::db::begin_write(&self.db).await?;
        let update = payout::Entity::update_many()
            .col_expr(payout::Column::Status, Expr::value(next.as_str()))
            .col_expr(payout::Column::NetworkFee, Expr::value(entity::Amount::new(actual_fee)))
            .col_expr(payout::Column::MerchantDebitAmount, Expr::value(entity::Amount::new(debit)))
            .col_expr(payout::Column::CompletedAt, Expr::value(now))
            .col_expr(payout::Column::UpdatedAt, Expr::value(now))
            .filter(payout::Column::Id.eq(p.id))
            .filter(payout::Column::Status.eq(p.status));
        if judged.guard(update).exec(&txn).await?.rows_affected == 0 {
            txn.rollback().await?;
            return Ok(false);
        }
        let is_refund = refund::Entity::find().filter(refund::Column::PayoutId.eq(p.id)).one(&txn).await?.is_some();
        let fee_type = if is_refund { EntryType::RefundFee } else { EntryType::PayoutFee };
        let reference = Some(("payout", p.id));
        let mut postings: Vec<Posting> = [
            (EntryType::PayoutDebit, p.recipient_amount.0),
            (fee_type, p.fee_amount.0),
            (EntryType::NetworkFee, estimate),
        ]
        .into_iter()
        .filter(|(_, a)| !a.is_zero())
        .map(|(entry_type, a)| Posting {
            bucket: Bucket::Reserved,
            amount: -a,
            entry_type,
            reference,
            description: None,
        })
        .collect();
        if !back.is_zero() {
            postings.push(Posting {
                bucket: Bucket::Available,
                amount: back,
                entry_type: EntryType::NetworkFee,
                reference,
                description: Some(format!("network fee {actual_fee}, {estimate} reserved")),
            });
        }
        ledger::post(&txn, ledger::Account::of(p.merchant_id.into(), p.environment, &p.gate_id), &postings).await?;
        if p.environment == entity::Environment::Live {
            let is_token = domain::gates::find(&p.gate_id).is_some_and(|g| g.is_token);
            let network_here = if is_token { Decimal::ZERO } else { real_fee };
            let overflow = || ExecError::Other("overflow".into());
            let margin = debit
                .checked_sub(p.recipient_amount.0)
                .and_then(|m| m.checked_sub(network_here))
                .ok_or_else(overflow)?;
            let house = |amount: Decimal, entry_type: EntryType| Posting {
                bucket: Bucket::Available,
                amount,
                entry_type,
                reference,
                description: None,
            };
            if !margin.is_zero() {
                let posting = house(margin, EntryType::PayoutMargin);
                domain::treasury::post_expense(&txn, p.environment, &p.gate_id, &[posting]).await?;
            }
            if let Some((native, burnt)) = gas.filter(|(_, g)| !g.is_zero()) {
                let posting = house(-burnt, EntryType::PayoutGas);
                domain::treasury::post_expense(&txn, p.environment, native.id, &[posting]).await?;
            }
        }
        let after = payout::Entity::find_by_id(p.id)
            .one(&txn)
            .await?
            .ok_or_else(|| ExecError::Other("payout vanished".into()))?;
        domain::refunds::mirror::mirror_payout(&txn, &after).await?;
        events::emit_payout(&txn, EventKind::PayoutCompleted, &after).await?;
        txn.commit().await?;
        tracing::info!(payout = %p.id, fee = %actual_fee, "payout completed");
        Ok(true)
    }
}

enum Step {
    Again,
    Stop(Next),
}

/// The update storing `tx` as payout `id`'s signed transaction; the caller adds its guards.
fn store_signed(id: Uuid, tx: &SignedTx) -> sea_orm::UpdateMany<payout::Entity> {
    payout::Entity::update_many()
        .col_expr(payout::Column::TxHash, Expr::value(tx.tx_hash.clone()))
        .col_expr(payout::Column::SignedTx, Expr::value(tx.raw.clone()))
        .col_expr(payout::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(payout::Column::Id.eq(id))
}

/// What to sign for payout `p`, before the network's terms (nonce, fees, funding) are known.
fn unsigned(p: &payout::Model) -> Result<PayoutTx<'_>, ExecError> {
    let gate = domain::gates::find(&p.gate_id).ok_or_else(|| ExecError::Other("unknown gate".into()))?;
    Ok(PayoutTx {
        gate,
        payout_id: p.id,
        destination: &p.destination,
        destination_tag: p.destination_tag.as_deref(),
        amount: p.recipient_amount.0,
        max_fee: p.configured_network_fee_amount.0,
        nonce: None,
        fees: None,
        funding: None,
    })
}

/// Whether this process has not mentioned payout `id` yet (for messages said once per payout).
fn first_mention(id: Uuid) -> bool {
    use std::collections::HashSet;
    use std::sync::{LazyLock, Mutex};
    static SEEN: LazyLock<Mutex<HashSet<Uuid>>> = LazyLock::new(Default::default);
    SEEN.lock().map(|mut s| s.insert(id)).unwrap_or(true)
}

/// Ids of payouts the executor should look at: approved and due, or queued/processing and not
/// checked for `stale_after` (their job was lost or is waiting).
pub async fn due(db: &DatabaseConnection, stale_after: Duration, limit: u64) -> Result<Vec<Uuid>, sea_orm::DbErr> {
    use sea_orm::QuerySelect;
    use sea_orm::sea_query::{Condition, ExprTrait};
    let now = Utc::now();
    let stale = now - chrono::Duration::from_std(stale_after).unwrap_or(chrono::Duration::seconds(60));
    let not_checked = payout::Column::CheckedAt.is_null().or(payout::Column::CheckedAt.lt(stale));
    payout::Entity::find()
        .select_only()
        .column(payout::Column::Id)
        .filter(
            Condition::any()
                .add(
                    Condition::all()
                        .add(payout::Column::Status.eq(PayoutStatus::Approved))
                        .add(payout::Column::ExecutableAt.lte(now))
                        .add(not_checked.clone()),
                )
                .add(
                    Condition::all()
                        .add(payout::Column::Status.is_in([PayoutStatus::Queued, PayoutStatus::Processing]))
                        .add(not_checked),
                ),
        )
        .limit(limit)
        .into_tuple()
        .all(db)
        .await
}
