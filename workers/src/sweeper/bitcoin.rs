//! Bitcoin sweeping: many deposit addresses in one transaction.
//!
//! A round first follows the batch in flight (one at a time): at the gate's confirmations its
//! rows are `confirmed` and its fee is the house's `sweep_fee`; unknown to the node, the stored
//! transaction is sent again; failed or double-spent at depth, its rows fail and its outputs are
//! free again. With no batch in flight, it plans one: the confirmed unspent outputs (at the
//! gate's confirmations: never a deposit that could still leave the chain) of every settled
//! deposit address, less those a batch already spends, are spent in one transaction to the hot
//! wallet (or the cold address past `float_target`) at the node's fee rate, once together they
//! hold at least `min_sweep`. The transaction is signed and stored (one `sweeps` row per address,
//! created `sending` with it, and a `wallet_spends` row per output under the deposit account's
//! scope, unique: two sweepers can never sign over one output) before it is sent.

use chrono::Utc;
use entity::{Amount, Bucket, EntryType, Environment, SweepStatus, SweepTrigger, sweep, wallet_spend};
use rust_decimal::Decimal;
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use super::{SweepError, Sweeper, transition};
use crate::chain::{Broadcast, Outgoing, SignedTx};
use domain::config::TreasuryGateConfig;
use domain::gates::Gate;
use domain::ledger::Posting;

/// The `wallet_spends` scope of the deposit account's outputs.
const SCOPE: &str = "bitcoin:deposits";
/// Inputs of one batch at most (a standard transaction stays far below the size limit).
const MAX_INPUTS: usize = 200;

fn sats_to_btc(sats: u64, gate: &Gate) -> Decimal {
    Decimal::from_i128_with_scale(i128::from(sats), gate.decimals).normalize()
}

impl Sweeper {
    pub(super) async fn bitcoin_round(&self, gate: &'static Gate, cfg: &TreasuryGateConfig) -> Result<(), SweepError> {
        let open = sweep::Entity::find()
            .filter(sweep::Column::GateId.eq(gate.id))
            .filter(sweep::Column::Status.eq(SweepStatus::Sending))
            .order_by_asc(sweep::Column::Id)
            .all(&self.db)
            .await?;
        if let Some(first) = open.first() {
            let batch: Vec<&sweep::Model> = open.iter().filter(|s| s.tx_hash == first.tx_hash).collect();
            return self.follow_batch(gate, &batch).await;
        }
        self.plan_batch(gate, cfg).await
    }

    async fn follow_batch(&self, gate: &'static Gate, batch: &[&sweep::Model]) -> Result<(), SweepError> {
        let first = batch[0];
        let (Some(hash), Some(raw)) = (first.tx_hash.clone(), first.signed_tx.clone()) else {
            return Err(SweepError::Other(format!("sweep {} sends without a transaction", first.id)));
        };
        let tx = SignedTx { tx_hash: hash, raw };
        let chain = self.chain(gate)?;
        match chain.outgoing(&tx).await? {
            Outgoing::Confirmations { confirmations, fee } if confirmations >= u64::from(gate.confirmations) => {
                self.confirm_batch(gate, first, &tx, fee.unwrap_or_default()).await
            }
            Outgoing::Confirmations { .. } => Ok(()),
            Outgoing::Unknown => match chain.broadcast(&tx).await? {
                Broadcast::Displaced(reason) => self.fail_batch(first, &tx, &reason).await,
                answer => {
                    tracing::info!(sweep = %first.id, tx = %tx.tx_hash, ?answer, "bitcoin sweep sent again");
                    Ok(())
                }
            },
            Outgoing::Failed(reason) => self.fail_batch(first, &tx, &reason).await,
            Outgoing::Expired => self.fail_batch(first, &tx, "expired").await,
        }
    }

    /// Every row of the batch `confirmed` (guarded on its status and transaction), and the fee
    /// booked to the house once, in one database transaction.
    async fn confirm_batch(
        &self,
        gate: &'static Gate,
        first: &sweep::Model,
        tx: &SignedTx,
        fee: Decimal,
    ) -> Result<(), SweepError> {
        let next = transition(SweepStatus::Sending, SweepTrigger::Confirm)?;
        let now = Utc::now();
        let txn = domain::db::begin_write(&self.db).await?;
        let moved = sweep::Entity::update_many()
            .col_expr(sweep::Column::Status, Expr::value(next.as_str()))
            .col_expr(sweep::Column::ConfirmedAt, Expr::value(now))
            .col_expr(sweep::Column::UpdatedAt, Expr::value(now))
            .filter(sweep::Column::GateId.eq(gate.id))
            .filter(sweep::Column::TxHash.eq(tx.tx_hash.as_str()))
            .filter(sweep::Column::Status.eq(SweepStatus::Sending))
            .exec(&txn)
            .await?;
        if moved.rows_affected == 0 {
            txn.rollback().await?;
            return Ok(());
        }
        sweep::Entity::update_many()
            .col_expr(sweep::Column::Fee, Expr::value(Amount::new(fee)))
            .filter(sweep::Column::Id.eq(first.id))
            .exec(&txn)
            .await?;
        if fee > Decimal::ZERO {
            let posting = Posting {
                bucket: Bucket::Available,
                amount: -fee,
                entry_type: EntryType::SweepFee,
                reference: Some(("sweep", first.id)),
                description: Some(format!("sweeping {} addresses in {}", moved.rows_affected, tx.tx_hash)),
            };
            domain::treasury::post_expense(&txn, Environment::Live, gate.id, &[posting]).await?;
        }
        txn.commit().await?;
        tracing::info!(tx = %tx.tx_hash, addresses = moved.rows_affected, %fee, "bitcoin sweep confirmed");
        Ok(())
    }

    /// The batch's rows fail and its outputs are free again (its transaction can never be mined).
    async fn fail_batch(&self, first: &sweep::Model, tx: &SignedTx, reason: &str) -> Result<(), SweepError> {
        let next = transition(SweepStatus::Sending, SweepTrigger::Fail)?;
        let txn = domain::db::begin_write(&self.db).await?;
        sweep::Entity::update_many()
            .col_expr(sweep::Column::Status, Expr::value(next.as_str()))
            .col_expr(sweep::Column::FailureReason, Expr::value(reason))
            .col_expr(sweep::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(sweep::Column::TxHash.eq(tx.tx_hash.as_str()))
            .filter(sweep::Column::Status.eq(SweepStatus::Sending))
            .exec(&txn)
            .await?;
        wallet_spend::Entity::delete_many()
            .filter(wallet_spend::Column::Scope.eq(SCOPE))
            .filter(wallet_spend::Column::PayoutId.eq(first.id))
            .exec(&txn)
            .await?;
        txn.commit().await?;
        tracing::warn!(tx = %tx.tx_hash, reason, "bitcoin sweep failed; its outputs are swept again later");
        Ok(())
    }

    async fn plan_batch(&self, gate: &'static Gate, cfg: &TreasuryGateConfig) -> Result<(), SweepError> {
        let wallet = self.bitcoin.clone().ok_or_else(|| SweepError::Other("no bitcoin deposit key".into()))?;
        let hot = cfg.hot_address.clone().ok_or_else(|| SweepError::Other("no hot_address".into()))?;
        let addresses: Vec<(String, u32)> = domain::treasury::sweepable(&self.db, Environment::Live, gate.id)
            .await?
            .into_iter()
            .filter_map(|(a, i)| u32::try_from(i).ok().map(|i| (a, i)))
            .collect();
        if addresses.is_empty() {
            return Ok(());
        }
        let busy: std::collections::HashSet<String> = wallet_spend::Entity::find()
            .filter(wallet_spend::Column::Scope.eq(SCOPE))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|w| w.outpoint)
            .collect();
        let mut inputs: Vec<_> = wallet
            .unspent(&addresses)
            .await?
            .into_iter()
            .filter(|o| o.confirmations >= u64::from(gate.confirmations) && !busy.contains(&o.outpoint))
            .collect();
        inputs.truncate(MAX_INPUTS);
        let total: u64 = inputs.iter().map(|o| o.sats).sum();
        if inputs.is_empty() || sats_to_btc(total, gate) < cfg.min_sweep {
            return Ok(());
        }
        let to_cold = match (&cfg.cold_address, cfg.float_target) {
            (Some(_), Some(float)) => self.chain(gate)?.balance(&hot).await? >= float,
            _ => false,
        };
        let destination = if to_cold { cfg.cold_address.clone().unwrap_or_else(|| hot.clone()) } else { hot };
        let rate = wallet.fee_rate().await?;
        let (signed, amount, fee) = wallet.sign_batch(&inputs, &destination, rate)?;
        if !self.fee_allowed(gate, &format!("{} addresses", addresses.len()), sats_to_btc(fee, gate)) {
            return Ok(());
        }

        // Stored before it is sent: one row per address, and its outputs taken, or nothing.
        let now = Utc::now();
        let mut rows: Vec<sweep::ActiveModel> = Vec::new();
        let mut first_id = None;
        for (address, index) in &addresses {
            let mine: u64 = inputs.iter().filter(|o| &o.address == address).map(|o| o.sats).sum();
            if mine == 0 {
                continue;
            }
            let id = Uuid::now_v7();
            first_id.get_or_insert(id);
            rows.push(sweep::ActiveModel {
                id: Set(id),
                environment: Set(Environment::Live),
                gate_id: Set(gate.id.to_owned()),
                address: Set(address.clone()),
                derivation_index: Set(i64::from(*index)),
                destination: Set(destination.clone()),
                planned_amount: Set(Amount::new(sats_to_btc(mine, gate))),
                amount: Set(Some(Amount::new(sats_to_btc(mine, gate)))),
                status: Set(SweepStatus::Sending),
                topup_amount: Set(None),
                topup_tx_hash: Set(None),
                topup_signed_tx: Set(None),
                tx_hash: Set(Some(signed.tx_hash.clone())),
                signed_tx: Set(Some(signed.raw.clone())),
                fee: Set(None),
                failure_reason: Set(None),
                parent_id: Set(None),
                created_at: Set(now),
                updated_at: Set(now),
                confirmed_at: Set(None),
            });
        }
        let Some(batch_id) = first_id else { return Ok(()) };
        let txn = domain::db::begin_write(&self.db).await?;
        let n_rows = rows.len();
        // An address already in an open sweep (another sweeper's batch): nothing stored.
        let inserted = sweep::Entity::insert_many(rows)
            .on_conflict(OnConflict::new().do_nothing().to_owned())
            .exec_without_returning(&txn)
            .await?;
        let spends = inputs.iter().map(|o| {
            wallet_spend::ActiveModel::from(wallet_spend::Model {
                scope: SCOPE.to_owned(),
                outpoint: o.outpoint.clone(),
                payout_id: batch_id,
                created_at: now,
            })
        });
        let taken = wallet_spend::Entity::insert_many(spends)
            .on_conflict(
                OnConflict::columns([wallet_spend::Column::Scope, wallet_spend::Column::Outpoint])
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(&txn)
            .await?;
        if inserted != n_rows as u64 || taken != inputs.len() as u64 {
            txn.rollback().await?;
            return Ok(());
        }
        txn.commit().await?;
        fail::fail_point!("sweep-after-persist");
        tracing::info!(tx = %signed.tx_hash, inputs = inputs.len(), sats = amount, %destination, "bitcoin sweep stored and sent");
        let answer = self.chain(gate)?.broadcast(&signed).await?;
        fail::fail_point!("sweep-after-broadcast");
        if !matches!(answer, Broadcast::Accepted | Broadcast::AlreadyKnown) {
            tracing::warn!(tx = %signed.tx_hash, ?answer, "the node did not take the bitcoin sweep now; sent again next round");
        }
        Ok(())
    }
}
