//! Solana sweeping: the pool's SOL, and its USDC with the token account closed after it.
//!
//! One transaction per sweep (`planned` → `sending` → `confirmed`), no top-up: a SOL sweep is the
//! deposit address's own transfer of its balance less its fee; a USDC sweep's fees are paid by
//! the hot wallet, which signs it with the deposit address, and its token account's rent comes
//! back to the hot wallet when the account is closed (`chain::solana::deposits`).
//!
//! - Stored signed on its row (guarded on `planned`) before it is sent; a restart sends the same
//!   bytes. Solana has no nonce: a stored transaction that the adapter judges expired (its
//!   blockhash's last valid height passed at finalized, unseen by a node that holds that span)
//!   can never enter a block, so its sweep fails and the address is planned again next round.
//! - Judged at finalized (the gate's confirmations). The books, in the confirmation's database
//!   transaction: a SOL sweep's fee is the house's `sweep_fee` (generic `confirm`); a USDC
//!   sweep's effect on the hot wallet, read from the finalized transaction, is the house's on
//!   the `solana` gate: its fee as `sweep_fee`, the rent back (net of a destination account it
//!   created) as `rent_reclaimed`.

use chrono::Utc;
use entity::{Bucket, EntryType, Environment, SweepStatus, SweepTrigger, sweep};
use rust_decimal::Decimal;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};

use super::{SweepError, Sweeper, guarded, transition};
use crate::chain::signer::base_units;
use crate::chain::solana::deposits::{SignedSweep, SolanaDeposits};
use crate::chain::{Outgoing, SignedTx};
use domain::config::TreasuryGateConfig;
use domain::gates::Gate;
use domain::ledger::Posting;

fn lamports(n: i128, native: &Gate) -> Decimal {
    Decimal::from_i128_with_scale(n, native.decimals).normalize()
}

impl Sweeper {
    /// One round of a Solana gate: follows its open sweeps, then plans new ones (pool addresses
    /// with a key only).
    pub(super) async fn solana_round(&self, gate: &'static Gate, cfg: &TreasuryGateConfig) -> Result<(), SweepError> {
        let keys = self.solana.as_ref().ok_or_else(|| SweepError::Other("no Solana deposit keys".into()))?;
        let hot = keys.hot_address();
        if cfg.hot_address.as_deref() != Some(hot.as_str()) {
            return Err(SweepError::Other(format!(
                "the Solana hot wallet is {hot}, not treasury.gates.{}.hot_address",
                gate.id
            )));
        }
        let open = sweep::Entity::find()
            .filter(sweep::Column::GateId.eq(gate.id))
            .filter(sweep::Column::Status.is_in([SweepStatus::Planned, SweepStatus::ToppingUp, SweepStatus::Sending]))
            .order_by_asc(sweep::Column::Id)
            .all(&self.db)
            .await?;
        for s in &open {
            let step = match s.status {
                SweepStatus::Planned => self.solana_sign(s, gate, keys).await,
                SweepStatus::Sending => self.solana_follow(s, gate, keys).await,
                SweepStatus::ToppingUp => Err(SweepError::Other("a Solana sweep is never topped up".into())),
                SweepStatus::Confirmed | SweepStatus::Failed => Ok(()),
            };
            if let Err(e) = step {
                tracing::warn!(sweep = %s.id, gate = gate.id, error = %e, "sweep step failed; tried again next round");
            }
        }
        self.plan(gate, cfg, |address| keys.holds(address)).await
    }

    /// Signs the sweep of what the address holds now and stores it (`planned` → `sending`,
    /// guarded), then sends it.
    async fn solana_sign(
        &self,
        s: &sweep::Model,
        gate: &'static Gate,
        keys: &SolanaDeposits,
    ) -> Result<(), SweepError> {
        let balance = self.chain(gate)?.balance(&s.address).await?;
        let held = base_units(balance, gate.decimals)?;
        let fee = if gate.is_token { keys.token_fee() } else { keys.sol_fee() };
        if !self.fee_allowed(gate, &s.address, lamports(i128::from(fee), Self::native_of(gate)?)) {
            return Ok(());
        }
        let terms = keys.terms().await?;
        let signed = match gate.is_token {
            true if held > 0 => Some(keys.sign_token(&s.address, &s.destination, held, gate.decimals, &terms)?),
            true => None,
            false => keys.sign_sol(&s.address, &s.destination, held, &terms)?,
        };
        let Some(SignedSweep { tx, units }) = signed else {
            return self.fail(s, SweepStatus::Planned, &format!("{balance} {} is not worth the fee", gate.asset)).await;
        };
        let amount = Decimal::from_i128_with_scale(i128::from(units), gate.decimals).normalize();
        if !Self::store_sweep(&self.db, s, SweepStatus::Planned, amount, &tx).await? {
            return Ok(());
        }
        self.send_stored(s, gate, &tx, "sweep").await
    }

    /// `sending`: finalized, confirmed with its books; unknown, sent again; expired or failed,
    /// the sweep fails (nothing moved) and the address is planned again.
    async fn solana_follow(
        &self,
        s: &sweep::Model,
        gate: &'static Gate,
        keys: &SolanaDeposits,
    ) -> Result<(), SweepError> {
        let (Some(hash), Some(raw)) = (s.tx_hash.clone(), s.signed_tx.clone()) else {
            return Err(SweepError::Other(format!("sweep {} sends without a transaction", s.id)));
        };
        let tx = SignedTx { tx_hash: hash, raw };
        match self.chain(gate)?.outgoing(&tx).await? {
            Outgoing::Confirmations { confirmations, .. }
                if confirmations >= u64::from(gate.confirmations) && gate.is_token =>
            {
                self.confirm_token_sweep(s, gate, keys, &tx.tx_hash).await
            }
            Outgoing::Confirmations { confirmations, fee } if confirmations >= u64::from(gate.confirmations) => {
                self.confirm(s, gate, fee).await
            }
            Outgoing::Confirmations { .. } => Ok(()),
            Outgoing::Unknown => self.send(s, gate, &tx).await,
            Outgoing::Failed(reason) => self.fail(s, SweepStatus::Sending, &reason).await,
            Outgoing::Expired => {
                let why = "its blockhash expired before it entered a block: nothing moved, the address is swept again";
                self.fail(s, SweepStatus::Sending, why).await
            }
        }
    }

    /// A finalized USDC sweep: `sending` → `confirmed` and, in the same transaction, what it did
    /// to the hot wallet's SOL booked to the house on the network's native gate.
    async fn confirm_token_sweep(
        &self,
        s: &sweep::Model,
        gate: &'static Gate,
        keys: &SolanaDeposits,
        signature: &str,
    ) -> Result<(), SweepError> {
        let native = Self::native_of(gate)?;
        let hot = keys.hot_wallet_change(signature).await?;
        let fee = i128::from(hot.fee);
        // What came back beyond the fee: the closed account's rent, less the rent of a
        // destination account the sweep created.
        let rent = hot.change.checked_add(fee).ok_or_else(|| SweepError::Other("overflow".into()))?;
        let next = transition(SweepStatus::Sending, SweepTrigger::Confirm)?;
        let now = Utc::now();
        let txn = domain::db::begin_write(&self.db).await?;
        let moved = guarded(s.id, SweepStatus::Sending)
            .col_expr(sweep::Column::Status, Expr::value(next.as_str()))
            .col_expr(sweep::Column::ConfirmedAt, Expr::value(now))
            .col_expr(sweep::Column::UpdatedAt, Expr::value(now))
            .filter(sweep::Column::TxHash.eq(signature))
            .exec(&txn)
            .await?;
        if moved.rows_affected == 0 {
            txn.rollback().await?;
            return Ok(());
        }
        let house = |lamports_: i128, entry_type: EntryType, description: String| Posting {
            bucket: Bucket::Available,
            amount: lamports(lamports_, native),
            entry_type,
            reference: Some(("sweep", s.id)),
            description: Some(description),
        };
        let mut postings = Vec::new();
        if fee > 0 {
            postings.push(house(-fee, EntryType::SweepFee, format!("sweeping {} from {}", gate.id, s.address)));
        }
        if rent != 0 {
            let what = format!("rent of {}'s token account, closed when swept", s.address);
            postings.push(house(rent, EntryType::RentReclaimed, what));
        }
        if !postings.is_empty() {
            domain::treasury::post_expense(&txn, Environment::Live, native.id, &postings).await?;
        }
        txn.commit().await?;
        tracing::info!(sweep = %s.id, address = %s.address, to = %s.destination, fee_lamports = hot.fee, rent_lamports = %rent, "sweep confirmed");
        Ok(())
    }
}
