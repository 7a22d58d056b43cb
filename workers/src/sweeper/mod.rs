//! Sweeping: the operator's own funds moved from deposit addresses to the gate's hot wallet
//! (until it holds `float_target`) or cold address, run by the payout executor's process (the
//! one that holds the hot wallets' keys and, with `evm.deposit_key_file`, the deposit account's).
//! EVM networks (the native coin and ERC-20 tokens, address by address), Bitcoin (many
//! addresses in one transaction: `bitcoin`), TRON (`tron`: TRX, and TRC-20 USDT with its energy
//! topped up; no nonce: a stored transaction that expired unseen fails its sweep and the address
//! is planned again) and Solana (`solana`: one transaction per sweep, the hot wallet paying a
//! USDC sweep's fees and getting the closed token account's rent).
//!
//! With the payout executor's guarantees:
//! - **Stored signed before it is sent.** A transaction (a token address's gas top-up, the
//!   sweep) is signed and stored on its `sweeps` row in the database transaction that takes its
//!   nonce (`nonce_accounts`: the hot wallet's counter, shared with payouts, for a top-up; the
//!   deposit address's own for the sweep), guarded on the row's status. Only then is it sent; a
//!   restart finds it stored and sends the same bytes again (`Chain::outgoing` first), never new
//!   ones.
//! - **At most one open sweep per address** (a partial unique index), every status change a
//!   guarded `UPDATE … WHERE status = <from>` with `SweepStatus::on`.
//! - **Only settled money.** An address is planned only when none of its payments is still
//!   confirming, and at least `min_sweep` is there.
//! - **Tokens**: the address first gets exactly the gas of one token transfer from the hot wallet
//!   (`token_gas_limit` × the fee cap it is signed with, less what it already holds), the top-up
//!   in a block, then the token transfer; once that is confirmed, what the top-up left over goes
//!   back to the hot wallet (a native sweep with `parent_id`) when it is worth more than its gas.
//! - **The books**: merchant balances are never touched. A native sweep's fee is the house's
//!   `sweep_fee`; a token address's top-up is the house's `gas_topup` (it left the hot wallet to
//!   be burnt as gas), both on the network's native gate, so the reconciliation stays exact.
//! - A node's refusal is never taken as final while the nonce may be unused (a gap would block
//!   every later transaction of the account): the stored transaction is sent again later and the
//!   operator is told in the log. A sweep fails only when its nonce went to another transaction
//!   at depth, or its transaction failed in a block at depth.

mod bitcoin;
mod solana;
mod tron;

use std::sync::Arc;

use chrono::Utc;
use entity::{Amount, Bucket, EntryType, Environment, SweepStatus, SweepTrigger, sweep};
use rust_decimal::Decimal;
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ActiveValue::Set, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, UpdateMany};
use uuid::Uuid;

use crate::chain::evm::{DepositKeys, signer_for_key, transfer_gas};
use crate::chain::signer::{PayoutTx, Signer, Signers};
use crate::chain::{Broadcast, Chain, ChainError, Chains, Outgoing, SignedTx};
use domain::chain::address::AddressFamily;
use domain::config::{Config, TreasuryGateConfig};
use domain::gates::{self, Gate};
use domain::ledger::Posting;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
    #[error(transparent)]
    Ledger(#[from] domain::ledger::LedgerError),
    #[error(transparent)]
    Exec(#[from] crate::executor::ExecError),
    #[error("{0}")]
    Other(String),
}

/// Everything sweeping needs; built in the payout executor's process only.
#[derive(Clone)]
pub struct Sweeper {
    pub db: DatabaseConnection,
    pub chains: Chains,
    /// The hot wallets (a top-up is a payout-like transfer from them).
    pub signers: Signers,
    pub deposit: Option<Arc<DepositKeys>>,
    /// The Bitcoin deposit account (`[bitcoin] deposit_key_file`), when `bitcoin` is swept.
    pub bitcoin: Option<Arc<crate::chain::bitcoin::deposits::DepositWallet>>,
    /// The TRON deposit account (`[tron] deposit_key_file`), when `tron` or `tron_usdt` is swept.
    pub tron: Option<Arc<crate::chain::tron::deposits::TronDeposits>>,
    /// The Solana pool's keys (`[solana] deposit_keys_file`), when `solana` or `solana_usdc` is
    /// swept.
    pub solana: Option<Arc<crate::chain::solana::deposits::SolanaDeposits>>,
    pub config: Arc<Config>,
}

/// The gates configured to be swept, in gate order.
fn swept_gates(config: &Config) -> Vec<(&'static Gate, &TreasuryGateConfig)> {
    gates::GATES.iter().filter_map(|g| config.treasury.gates.get(g.id).filter(|t| t.sweep).map(|t| (g, t))).collect()
}

impl Sweeper {
    /// The sweeper of `config`, or `None` when no gate is swept. Loads the deposit account's key
    /// (`evm.deposit_key_file`) and checks it derives `addresses.live.evm_xpub`'s addresses.
    pub fn from_config(
        db: &DatabaseConnection,
        chains: &Chains,
        signers: &Signers,
        config: &Config,
    ) -> anyhow::Result<Option<Sweeper>> {
        let swept = swept_gates(config);
        if swept.is_empty() {
            return Ok(None);
        }
        if let Some((g, _)) = swept.iter().find(|(g, _)| g.family == AddressFamily::Xrp) {
            anyhow::bail!(
                "treasury.gates.{}.sweep: XRP deposits arrive on one account (addresses.live.xrp_address, \
                 told apart by destination tag): make it the hot wallet and nothing needs sweeping",
                g.id
            );
        }
        let deriver = domain::chain::address::AddressDeriver::from_config(
            &config.addresses.live,
            domain::chain::address::ChainNet::Mainnet,
            "live",
        )
        .ok();
        let first = |family| deriver.as_ref().and_then(|d| d.derive(family, 0).ok()).map(|a| a.address);
        let sweeps = |family| swept.iter().any(|(g, _)| g.family == family);
        let deposit = match sweeps(AddressFamily::Evm) {
            true => Some(Arc::new(DepositKeys::load(&config.evm, first(AddressFamily::Evm).as_deref())?.ok_or_else(
                || anyhow::anyhow!("sweeping EVM gates needs evm.deposit_key_file (the deposit account's xprv)"),
            )?)),
            false => None,
        };
        let bitcoin = match sweeps(AddressFamily::Bitcoin) {
            true => {
                let first = first(AddressFamily::Bitcoin);
                let wallet = crate::chain::bitcoin::deposits::DepositWallet::load(&config.bitcoin, first.as_deref())?
                    .ok_or_else(|| {
                    anyhow::anyhow!("sweeping bitcoin needs bitcoin.deposit_key_file (the deposit account's xprv)")
                })?;
                Some(Arc::new(wallet))
            }
            false => None,
        };
        let tron = match sweeps(AddressFamily::Tron) {
            true => {
                let first = first(AddressFamily::Tron);
                let keys = crate::chain::tron::deposits::TronDeposits::load(&config.tron, first.as_deref())?
                    .ok_or_else(|| {
                        anyhow::anyhow!("sweeping TRON gates needs tron.deposit_key_file (the deposit account's xprv)")
                    })?;
                Some(Arc::new(keys))
            }
            false => None,
        };
        let solana = match sweeps(AddressFamily::Solana) {
            true => {
                let pool = &config.addresses.live.solana_pool;
                let keys =
                    crate::chain::solana::deposits::SolanaDeposits::load(&config.solana, pool)?.ok_or_else(|| {
                        anyhow::anyhow!("sweeping Solana gates needs solana.deposit_keys_file (the pool's keypairs)")
                    })?;
                Some(Arc::new(keys))
            }
            false => None,
        };
        Ok(Some(Sweeper {
            db: db.clone(),
            chains: chains.clone(),
            signers: signers.clone(),
            deposit,
            bitcoin,
            tron,
            solana,
            config: Arc::new(config.clone()),
        }))
    }

    /// One round: plan new sweeps, then move every open one as far as it goes now.
    pub async fn tick(&self) -> Result<(), SweepError> {
        for (gate, cfg) in swept_gates(&self.config) {
            let planned = match gate.family {
                AddressFamily::Bitcoin => self.bitcoin_round(gate, cfg).await,
                AddressFamily::Tron => self.tron_round(gate, cfg).await,
                AddressFamily::Solana => self.solana_round(gate, cfg).await,
                AddressFamily::Evm | AddressFamily::Xrp => self.plan(gate, cfg, |_| true).await,
            };
            if let Err(e) = planned {
                tracing::warn!(gate = gate.id, error = %e, "sweep round failed");
            }
        }
        let open = sweep::Entity::find()
            .filter(sweep::Column::Status.is_in([SweepStatus::Planned, SweepStatus::ToppingUp, SweepStatus::Sending]))
            .order_by_asc(sweep::Column::Id)
            .all(&self.db)
            .await?;
        // Bitcoin, TRON and Solana sweeps move in their family's own round.
        let evm = |s: &sweep::Model| gates::find(&s.gate_id).is_some_and(|g| g.family == AddressFamily::Evm);
        for s in open.into_iter().filter(evm) {
            if let Err(e) = self.advance(&s).await {
                tracing::warn!(sweep = %s.id, gate = %s.gate_id, error = %e, "sweep step failed; tried again next round");
            }
        }
        Ok(())
    }

    /// Plans a sweep of every settled deposit address of `gate` holding at least `min_sweep`
    /// and not being swept already, to the hot wallet until it holds `float_target`, then to the
    /// cold address.
    /// `keep` says which addresses this sweeper can sweep (the Solana pool's with a key).
    async fn plan(
        &self,
        gate: &'static Gate,
        cfg: &TreasuryGateConfig,
        keep: impl Fn(&str) -> bool,
    ) -> Result<(), SweepError> {
        let chain = self.chain(gate)?;
        let hot = cfg.hot_address.clone().ok_or_else(|| SweepError::Other("no hot_address".into()))?;
        let open: std::collections::HashSet<String> = sweep::Entity::find()
            .filter(sweep::Column::GateId.eq(gate.id))
            .filter(sweep::Column::Status.is_in([SweepStatus::Planned, SweepStatus::ToppingUp, SweepStatus::Sending]))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|s| s.address)
            .collect();
        let candidates: Vec<(String, i64)> = domain::treasury::sweepable(&self.db, Environment::Live, gate.id)
            .await?
            .into_iter()
            .filter(|(a, _)| !open.contains(a) && !a.eq_ignore_ascii_case(&hot) && keep(a))
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        let asked: Vec<&str> = candidates.iter().map(|(a, _)| a.as_str()).collect();
        let balances = chain.balances(&asked).await;
        let mut hot_holds = chain.balance(&hot).await?;
        let now = Utc::now();
        for ((address, index), balance) in candidates.iter().zip(balances) {
            let balance = match balance {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(gate = gate.id, %address, error = %e, "deposit balance not read; planned later");
                    continue;
                }
            };
            if balance <= Decimal::ZERO || balance < cfg.min_sweep {
                continue;
            }
            let to_cold = match (&cfg.cold_address, cfg.float_target) {
                (Some(_), Some(float)) => hot_holds >= float,
                _ => false,
            };
            let destination =
                if to_cold { cfg.cold_address.clone().unwrap_or_else(|| hot.clone()) } else { hot.clone() };
            if !to_cold {
                hot_holds = hot_holds.checked_add(balance).unwrap_or(Decimal::MAX);
            }
            let row = sweep::ActiveModel {
                id: Set(Uuid::now_v7()),
                environment: Set(Environment::Live),
                gate_id: Set(gate.id.to_owned()),
                address: Set(address.clone()),
                derivation_index: Set(*index),
                destination: Set(destination.clone()),
                planned_amount: Set(Amount::new(balance)),
                amount: Set(None),
                status: Set(SweepStatus::Planned),
                topup_amount: Set(None),
                topup_tx_hash: Set(None),
                topup_signed_tx: Set(None),
                tx_hash: Set(None),
                signed_tx: Set(None),
                fee: Set(None),
                failure_reason: Set(None),
                parent_id: Set(None),
                created_at: Set(now),
                updated_at: Set(now),
                confirmed_at: Set(None),
            };
            // The partial unique index keeps one open sweep per address: another planner's row wins.
            sweep::Entity::insert(row)
                .on_conflict(OnConflict::new().do_nothing().to_owned())
                .exec_without_returning(&self.db)
                .await?;
            tracing::info!(gate = gate.id, %address, %balance, %destination, "sweep planned");
        }
        Ok(())
    }

    fn chain(&self, gate: &Gate) -> Result<Arc<dyn Chain>, SweepError> {
        self.chains
            .get(Environment::Live, gate.id)
            .ok_or_else(|| SweepError::Other(format!("no live chain adapter for {}", gate.id)))
    }

    /// The network's native gate (gas is paid in it).
    fn native_of(gate: &'static Gate) -> Result<&'static Gate, SweepError> {
        gates::native_of(gate).ok_or_else(|| SweepError::Other(format!("no native gate on {}", gate.network)))
    }

    /// Moves sweep `s` as far as it goes now.
    async fn advance(&self, s: &sweep::Model) -> Result<(), SweepError> {
        let gate = gates::find(&s.gate_id).ok_or_else(|| SweepError::Other(format!("unknown gate {}", s.gate_id)))?;
        match s.status {
            SweepStatus::Planned if gate.is_token => self.top_up_or_send(s, gate).await,
            SweepStatus::Planned => self.sign_sweep(s, gate, SweepStatus::Planned, Decimal::ZERO).await,
            SweepStatus::ToppingUp => self.follow_top_up(s, gate).await,
            SweepStatus::Sending => self.follow_sweep(s, gate).await,
            SweepStatus::Confirmed | SweepStatus::Failed => Ok(()),
        }
    }

    fn deposit_signer(&self, s: &sweep::Model, gate: &'static Gate) -> Result<Arc<dyn Signer>, SweepError> {
        let deposit = self.deposit.as_ref().ok_or_else(|| SweepError::Other("no deposit key".into()))?;
        let index = u32::try_from(s.derivation_index).map_err(|e| SweepError::Other(e.to_string()))?;
        let key = deposit.key(index)?;
        let derived = format!("{:#x}", key.address());
        if !derived.eq_ignore_ascii_case(&s.address) {
            return Err(SweepError::Other(format!("deposit key {index} derives {derived}, not {}", s.address)));
        }
        signer_for_key(&self.config.evm, gate, key)
            .ok_or_else(|| SweepError::Other(format!("{} is not configured (evm.networks, evm.tokens)", gate.id)))
    }

    /// A token address: tops it up with the gas of one token transfer (what it lacks of it), or,
    /// when it holds enough, signs the token transfer right away.
    async fn top_up_or_send(&self, s: &sweep::Model, gate: &'static Gate) -> Result<(), SweepError> {
        let native = Self::native_of(gate)?;
        let deposit = self.deposit_signer(s, gate)?;
        let probe = self.unsigned(s, gate, s.planned_amount.0, None);
        let fees = deposit.fees(&probe).await?.ok_or_else(|| SweepError::Other("no gas prices".into()))?.gas()?;
        let gas = u128::from(transfer_gas(&self.config.evm, gate));
        let needed_wei = gas.saturating_mul(fees.max_fee_per_gas);
        let needed = Decimal::from_i128_with_scale(i128::try_from(needed_wei).unwrap_or(i128::MAX), native.decimals);
        if !self.fee_allowed(gate, &s.address, needed) {
            return Ok(());
        }
        let holds = self.chain(native)?.balance(&s.address).await?;
        if holds >= needed {
            return self.sign_sweep(s, gate, SweepStatus::Planned, Decimal::ZERO).await;
        }
        let top_up = needed.checked_sub(holds).ok_or_else(|| SweepError::Other("overflow".into()))?.normalize();
        let hot = self
            .signers
            .get(Environment::Live, native.id)
            .ok_or_else(|| SweepError::Other(format!("no hot wallet on {}", native.id)))?;
        let account = hot.nonce_account().await?.ok_or_else(|| SweepError::Other("no hot nonce account".into()))?;
        self.check_hot(gate, &account.scope)?;
        let mut tx = PayoutTx {
            gate: native,
            payout_id: s.id,
            destination: &s.address,
            destination_tag: None,
            amount: top_up,
            // A top-up of 21 000 gas: at most its own amount in fees.
            max_fee: top_up,
            nonce: None,
            fees: None,
            funding: None,
        };
        tx.fees = hot.fees(&tx).await?;
        let txn = domain::db::begin_write(&self.db).await?;
        let nonce = crate::executor::lock_nonce(&txn, &account).await?;
        tx.nonce = Some(nonce);
        let signed = hot.sign(&tx).await?;
        if !Self::store_top_up(&txn, s, top_up, &signed).await? {
            txn.rollback().await?;
            return Ok(());
        }
        crate::executor::advance_nonce(&txn, &account, nonce).await?;
        txn.commit().await?;
        self.send_stored(s, native, &signed, "gas top-up").await
    }

    /// The top-up in a block: the token transfer is signed (and the top-up booked to the house).
    async fn follow_top_up(&self, s: &sweep::Model, gate: &'static Gate) -> Result<(), SweepError> {
        let native = Self::native_of(gate)?;
        let (Some(hash), Some(raw)) = (s.topup_tx_hash.clone(), s.topup_signed_tx.clone()) else {
            return Err(SweepError::Other(format!("sweep {} tops up without a transaction", s.id)));
        };
        let tx = SignedTx { tx_hash: hash, raw };
        match self.chain(native)?.outgoing(&tx).await? {
            Outgoing::Confirmations { confirmations, fee } if confirmations >= 1 => {
                self.sign_sweep(s, gate, SweepStatus::ToppingUp, fee.unwrap_or_default()).await
            }
            Outgoing::Confirmations { .. } => Ok(()),
            Outgoing::Unknown => self.send(s, native, &tx).await,
            Outgoing::Failed(reason) => {
                self.fail(s, SweepStatus::ToppingUp, &format!("gas top-up failed: {reason}")).await
            }
            Outgoing::Expired => self.fail(s, SweepStatus::ToppingUp, "gas top-up expired").await,
        }
    }

    /// Signs the sweep transaction from the deposit address and stores it (status `from` →
    /// `sending`, guarded), then sends it. A native sweep sends the balance less the most its gas
    /// can cost; a token sweep the whole token balance. A token sweep leaving `topping_up` books
    /// the top-up and `topup_fee` (what its own transaction cost the hot wallet) to the house in
    /// the same transaction.
    async fn sign_sweep(
        &self,
        s: &sweep::Model,
        gate: &'static Gate,
        from: SweepStatus,
        topup_fee: Decimal,
    ) -> Result<(), SweepError> {
        let native = Self::native_of(gate)?;
        let signer = self.deposit_signer(s, gate)?;
        let balance = self.chain(gate)?.balance(&s.address).await?;
        let account = signer.nonce_account().await?.ok_or_else(|| SweepError::Other("no nonce account".into()))?;
        let mut tx = self.unsigned(s, gate, balance, None);
        let fees = signer.fees(&tx).await?.ok_or_else(|| SweepError::Other("no gas prices".into()))?;
        let gas = u128::from(transfer_gas(&self.config.evm, gate));
        let most_wei = gas.saturating_mul(fees.gas()?.max_fee_per_gas);
        let most = Decimal::from_i128_with_scale(i128::try_from(most_wei).unwrap_or(i128::MAX), native.decimals);
        // A token sweep leaving `topping_up` goes whatever the price now: its gas is paid for.
        if from == SweepStatus::Planned && !self.fee_allowed(gate, &s.address, most) {
            return Ok(());
        }
        let amount =
            if gate.is_token { balance } else { balance.checked_sub(most).unwrap_or(Decimal::ZERO).normalize() };
        if amount <= Decimal::ZERO {
            return self.fail(s, from, &format!("{balance} {} is not worth the fee", gate.asset)).await;
        }
        tx.amount = amount;
        tx.max_fee = balance;
        tx.fees = Some(fees);
        let txn = domain::db::begin_write(&self.db).await?;
        let nonce = crate::executor::lock_nonce(&txn, &account).await?;
        tx.nonce = Some(nonce);
        let signed = signer.sign(&tx).await?;
        if !Self::store_sweep(&txn, s, from, amount, &signed).await? {
            txn.rollback().await?;
            return Ok(());
        }
        crate::executor::advance_nonce(&txn, &account, nonce).await?;
        Self::book_top_up(&txn, s, from, topup_fee, gate).await?;
        txn.commit().await?;
        self.send_stored(s, gate, &signed, "sweep").await
    }

    /// `sending`: follows the sweep transaction to the gate's confirmations, then books its fee.
    async fn follow_sweep(&self, s: &sweep::Model, gate: &'static Gate) -> Result<(), SweepError> {
        let (Some(hash), Some(raw)) = (s.tx_hash.clone(), s.signed_tx.clone()) else {
            return Err(SweepError::Other(format!("sweep {} sends without a transaction", s.id)));
        };
        let tx = SignedTx { tx_hash: hash, raw };
        match self.chain(gate)?.outgoing(&tx).await? {
            Outgoing::Confirmations { confirmations, fee } if confirmations >= u64::from(gate.confirmations) => {
                self.confirm(s, gate, fee).await
            }
            Outgoing::Confirmations { .. } => Ok(()),
            Outgoing::Unknown => {
                // Reorganised away (or dropped): a token sweep's gas top-up may be gone with it,
                // and the transfer cannot be mined without it. Both stored transactions go out
                // again, the top-up first; the node answers `already known` for one it still has.
                if let (Some(hash), Some(raw)) = (s.topup_tx_hash.clone(), s.topup_signed_tx.clone()) {
                    let native = Self::native_of(gate)?;
                    let answer = self.chain(native)?.broadcast(&SignedTx { tx_hash: hash, raw }).await?;
                    tracing::info!(sweep = %s.id, ?answer, "gas top-up sent again with its sweep");
                }
                self.send(s, gate, &tx).await
            }
            Outgoing::Failed(reason) => self.fail(s, SweepStatus::Sending, &reason).await,
            Outgoing::Expired => self.fail(s, SweepStatus::Sending, "sweep transaction expired").await,
        }
    }

    /// `sending` → `confirmed`, with the house's books in the same transaction: a native sweep's
    /// fee (`sweep_fee`); for one returning a top-up's leftover, what reached the hot wallet
    /// (`gas_topup`, positive: the top-up was booked whole and its leftover was counted nowhere).
    /// A token sweep whose address was topped up plans that leftover's return (a native sweep
    /// with `parent_id`, sent when its balance is worth more than its gas).
    async fn confirm(&self, s: &sweep::Model, gate: &'static Gate, fee: Option<Decimal>) -> Result<(), SweepError> {
        let next = transition(SweepStatus::Sending, SweepTrigger::Confirm)?;
        let now = Utc::now();
        let txn = domain::db::begin_write(&self.db).await?;
        let moved = guarded(s.id, SweepStatus::Sending)
            .col_expr(sweep::Column::Status, Expr::value(next.as_str()))
            .col_expr(sweep::Column::Fee, Expr::value(fee.map(Amount::new)))
            .col_expr(sweep::Column::ConfirmedAt, Expr::value(now))
            .col_expr(sweep::Column::UpdatedAt, Expr::value(now))
            .filter(sweep::Column::TxHash.eq(s.tx_hash.clone()))
            .exec(&txn)
            .await?;
        if moved.rows_affected == 0 {
            txn.rollback().await?;
            return Ok(());
        }
        let house = |amount: Decimal, entry_type: EntryType, description: String| Posting {
            bucket: Bucket::Available,
            amount,
            entry_type,
            reference: Some(("sweep", s.id)),
            description: Some(description),
        };
        match (s.parent_id, s.amount) {
            (Some(_), Some(returned)) => {
                let posting =
                    house(returned.0, EntryType::GasTopup, format!("gas left over on {}, returned", s.address));
                domain::treasury::post_expense(&txn, Environment::Live, gate.id, &[posting]).await?;
            }
            _ => {
                if let Some(fee) = fee.filter(|f| !gate.is_token && *f > Decimal::ZERO) {
                    let posting = house(-fee, EntryType::SweepFee, format!("sweeping {} from {}", gate.id, s.address));
                    domain::treasury::post_expense(&txn, Environment::Live, gate.id, &[posting]).await?;
                }
            }
        }
        let hot = self.config.treasury.gates.get(gate.id).and_then(|g| g.hot_address.clone());
        if let (true, Some(_), Some(hot)) = (gate.is_token, s.topup_amount, hot) {
            let native = Self::native_of(gate)?;
            let leftover = sweep::ActiveModel {
                id: Set(Uuid::now_v7()),
                environment: Set(s.environment),
                gate_id: Set(native.id.to_owned()),
                address: Set(s.address.clone()),
                derivation_index: Set(s.derivation_index),
                destination: Set(hot),
                planned_amount: Set(Amount::ZERO),
                amount: Set(None),
                status: Set(SweepStatus::Planned),
                topup_amount: Set(None),
                topup_tx_hash: Set(None),
                topup_signed_tx: Set(None),
                tx_hash: Set(None),
                signed_tx: Set(None),
                fee: Set(None),
                failure_reason: Set(None),
                parent_id: Set(Some(s.id)),
                created_at: Set(now),
                updated_at: Set(now),
                confirmed_at: Set(None),
            };
            sweep::Entity::insert(leftover)
                .on_conflict(OnConflict::new().do_nothing().to_owned())
                .exec_without_returning(&txn)
                .await?;
        }
        txn.commit().await?;
        tracing::info!(sweep = %s.id, address = %s.address, to = %s.destination, "sweep confirmed");
        Ok(())
    }

    /// Stores the signed sweep transaction of `s` (status `from` → `sending`, guarded, only
    /// while none is stored) in the caller's database transaction; false when another writer
    /// moved the row first.
    async fn store_sweep(
        txn: &impl sea_orm::ConnectionTrait,
        s: &sweep::Model,
        from: SweepStatus,
        amount: Decimal,
        signed: &SignedTx,
    ) -> Result<bool, SweepError> {
        let next = transition(from, SweepTrigger::Send)?;
        let stored = guarded(s.id, from)
            .col_expr(sweep::Column::Status, Expr::value(next.as_str()))
            .col_expr(sweep::Column::Amount, Expr::value(Amount::new(amount)))
            .col_expr(sweep::Column::TxHash, Expr::value(signed.tx_hash.clone()))
            .col_expr(sweep::Column::SignedTx, Expr::value(signed.raw.clone()))
            .col_expr(sweep::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(sweep::Column::SignedTx.is_null())
            .exec(txn)
            .await?;
        Ok(stored.rows_affected == 1)
    }

    /// Stores the signed gas top-up of `s` (`planned` → `topping_up`, guarded, only while none
    /// is stored); false when another writer moved the row first.
    async fn store_top_up(
        txn: &impl sea_orm::ConnectionTrait,
        s: &sweep::Model,
        top_up: Decimal,
        signed: &SignedTx,
    ) -> Result<bool, SweepError> {
        let next = transition(SweepStatus::Planned, SweepTrigger::TopUp)?;
        let stored = guarded(s.id, SweepStatus::Planned)
            .col_expr(sweep::Column::Status, Expr::value(next.as_str()))
            .col_expr(sweep::Column::TopupAmount, Expr::value(Amount::new(top_up)))
            .col_expr(sweep::Column::TopupTxHash, Expr::value(signed.tx_hash.clone()))
            .col_expr(sweep::Column::TopupSignedTx, Expr::value(signed.raw.clone()))
            .col_expr(sweep::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(sweep::Column::TopupSignedTx.is_null())
            .exec(txn)
            .await?;
        Ok(stored.rows_affected == 1)
    }

    /// A token sweep leaving `topping_up`: its top-up and `topup_fee` (what the top-up's own
    /// transaction cost the hot wallet) booked to the house as `gas_topup` on the network's
    /// native gate, in the caller's database transaction. Nothing from any other status.
    async fn book_top_up(
        txn: &impl sea_orm::ConnectionTrait,
        s: &sweep::Model,
        from: SweepStatus,
        topup_fee: Decimal,
        gate: &'static Gate,
    ) -> Result<(), SweepError> {
        let (SweepStatus::ToppingUp, Some(top_up)) = (from, s.topup_amount) else { return Ok(()) };
        let spent = top_up.0.checked_add(topup_fee).ok_or_else(|| SweepError::Other("overflow".into()))?;
        let posting = Posting {
            bucket: Bucket::Available,
            amount: -spent,
            entry_type: EntryType::GasTopup,
            reference: Some(("sweep", s.id)),
            description: Some(format!("gas for sweeping {} from {}", gate.id, s.address)),
        };
        domain::treasury::post_expense(txn, Environment::Live, Self::native_of(gate)?.id, &[posting]).await?;
        Ok(())
    }

    /// Sends a transaction just stored on `s` (on `gate`'s chain), between the fail points the
    /// kill tests stop at.
    async fn send_stored(
        &self,
        s: &sweep::Model,
        gate: &'static Gate,
        signed: &SignedTx,
        what: &str,
    ) -> Result<(), SweepError> {
        fail::fail_point!("sweep-after-persist");
        let sent = self.send(s, gate, signed).await;
        fail::fail_point!("sweep-after-broadcast");
        tracing::info!(sweep = %s.id, address = %s.address, to = %s.destination, tx = %signed.tx_hash, "{what} stored and sent");
        sent
    }

    /// Sends a stored transaction. A refusal that may pass (or any refusal: the nonce must not be
    /// left as a gap) keeps it for the next round; a nonce another transaction took at depth
    /// fails the sweep (nothing of it can be mined).
    async fn send(&self, s: &sweep::Model, gate: &'static Gate, tx: &SignedTx) -> Result<(), SweepError> {
        match self.chain(gate)?.broadcast(tx).await? {
            Broadcast::Accepted | Broadcast::AlreadyKnown => Ok(()),
            Broadcast::Retry(reason) => {
                tracing::warn!(sweep = %s.id, tx = %tx.tx_hash, reason, "the node refused the sweep transaction for now; sent again next round");
                Ok(())
            }
            Broadcast::Rejected(reason) => {
                tracing::error!(sweep = %s.id, tx = %tx.tx_hash, reason,
                    "the node rejected a stored sweep transaction; it is kept (its nonce must not be left as a gap) and sent again next round: look at it");
                Ok(())
            }
            Broadcast::Displaced(reason) => self.fail(s, s.status, &reason).await,
        }
    }

    async fn fail(&self, s: &sweep::Model, from: SweepStatus, reason: &str) -> Result<(), SweepError> {
        let next = transition(from, SweepTrigger::Fail)?;
        let moved = guarded(s.id, from)
            .col_expr(sweep::Column::Status, Expr::value(next.as_str()))
            .col_expr(sweep::Column::FailureReason, Expr::value(reason))
            .col_expr(sweep::Column::UpdatedAt, Expr::value(Utc::now()))
            .exec(&self.db)
            .await?;
        if moved.rows_affected == 1 {
            tracing::warn!(sweep = %s.id, address = %s.address, reason, "sweep failed");
        }
        Ok(())
    }

    fn unsigned<'a>(
        &self,
        s: &'a sweep::Model,
        gate: &'static Gate,
        amount: Decimal,
        nonce: Option<u64>,
    ) -> PayoutTx<'a> {
        PayoutTx {
            gate,
            payout_id: s.id,
            destination: &s.destination,
            destination_tag: None,
            amount,
            max_fee: amount,
            nonce,
            fees: None,
            funding: None,
        }
    }

    /// The fee ceiling (`treasury.gates.<gate>.max_fee`, in the network's coin): whether a
    /// sweep from `address` costing `fee` may go now. Above it the sweep waits, planned, and is
    /// priced again next round.
    fn fee_allowed(&self, gate: &Gate, address: &str, fee: Decimal) -> bool {
        match self.config.treasury.gates.get(gate.id).and_then(|g| g.max_fee) {
            Some(max) if fee > max => {
                tracing::info!(gate = gate.id, %address, %fee, %max,
                    "sweep waits: the network asks more than treasury.gates.<gate>.max_fee");
                false
            }
            Some(_) | None => true,
        }
    }

    /// The hot wallet the executor signs with (its nonce account's `<network>:<address>`) must be
    /// the swept gate's configured `hot_address`: what the planner sends to and the
    /// reconciliation reads.
    fn check_hot(&self, swept: &Gate, scope: &str) -> Result<(), SweepError> {
        let signing = scope.rsplit(':').next().unwrap_or_default();
        let configured = self.config.treasury.gates.get(swept.id).and_then(|g| g.hot_address.as_deref());
        match configured {
            Some(h) if h.eq_ignore_ascii_case(signing) => Ok(()),
            _ => Err(SweepError::Other(format!(
                "the hot wallet signing on {} is {signing}, not treasury.gates.{}.hot_address",
                swept.network, swept.id
            ))),
        }
    }
}

/// The stored transaction an open sweep waits on (its top-up while topping up, else the
/// sweep's), with the gate whose chain carries it.
pub fn waiting_on(s: &sweep::Model) -> Option<(&'static Gate, SignedTx)> {
    let gate = gates::find(&s.gate_id)?;
    let (hash, raw, gate) = match s.status {
        SweepStatus::ToppingUp => {
            (s.topup_tx_hash.clone()?, s.topup_signed_tx.clone()?, Sweeper::native_of(gate).ok()?)
        }
        SweepStatus::Sending => (s.tx_hash.clone()?, s.signed_tx.clone()?, gate),
        SweepStatus::Planned | SweepStatus::Confirmed | SweepStatus::Failed => return None,
    };
    Some((gate, SignedTx { tx_hash: hash, raw }))
}

/// `ops sweeps retry`: sends an open sweep's stored transaction again now (no key needed) and
/// returns the node's answer; `None` when nothing is stored yet (the next round signs it).
pub async fn resend(chains: &Chains, s: &sweep::Model) -> Result<Option<Broadcast>, SweepError> {
    let Some((gate, tx)) = waiting_on(s) else { return Ok(None) };
    let chain = chains
        .get(s.environment, gate.id)
        .ok_or_else(|| SweepError::Other(format!("no chain adapter for {} here", gate.id)))?;
    Ok(Some(chain.broadcast(&tx).await?))
}

/// `ops sweeps fail`: ends an open sweep whose transaction can never be mined: nothing signed
/// yet, or its stored transaction provably dead as the node shows (`Chain::dead`). Refused while
/// it may still be mined. Guarded on the status (and the transaction) it judged.
pub async fn fail_by_operator(
    db: &DatabaseConnection,
    chains: &Chains,
    id: Uuid,
    reason: &str,
) -> Result<(sweep::Model, sweep::Model), SweepError> {
    let s = sweep::Entity::find_by_id(id).one(db).await?.ok_or_else(|| SweepError::Other(format!("no sweep {id}")))?;
    if !s.status.is_open() {
        return Err(SweepError::Other(format!("sweep {id} is {}, not open", s.status.as_str())));
    }
    let mut update = guarded(s.id, s.status);
    if let Some((gate, tx)) = waiting_on(&s) {
        let chain = chains.get(s.environment, gate.id).ok_or_else(|| {
            SweepError::Other(format!("no chain adapter for {} here: nothing can be proven", gate.id))
        })?;
        let Some(why) = chain.dead(&tx).await? else {
            return Err(SweepError::Other(format!(
                "sweep {id}'s transaction {} may still be mined: refused",
                tx.tx_hash
            )));
        };
        tracing::info!(sweep = %id, tx = %tx.tx_hash, %why, "sweep transaction provably dead");
        update = match s.status {
            SweepStatus::ToppingUp => update.filter(sweep::Column::TopupTxHash.eq(tx.tx_hash)),
            _ => update.filter(sweep::Column::TxHash.eq(tx.tx_hash)),
        };
    }
    let next = transition(s.status, SweepTrigger::Fail)?;
    let moved = update
        .col_expr(sweep::Column::Status, Expr::value(next.as_str()))
        .col_expr(sweep::Column::FailureReason, Expr::value(format!("by the operator: {reason}")))
        .col_expr(sweep::Column::UpdatedAt, Expr::value(Utc::now()))
        .exec(db)
        .await?;
    if moved.rows_affected == 0 {
        return Err(SweepError::Other(format!("sweep {id} moved meanwhile; look again")));
    }
    let after = sweep::Entity::find_by_id(id).one(db).await?.ok_or_else(|| SweepError::Other("gone".into()))?;
    Ok((s, after))
}

fn transition(from: SweepStatus, trigger: SweepTrigger) -> Result<SweepStatus, SweepError> {
    from.on(trigger).ok_or_else(|| SweepError::Other(format!("{trigger:?} from {from:?}")))
}

/// An update of sweep `id` guarded on its status.
fn guarded(id: Uuid, from: SweepStatus) -> UpdateMany<sweep::Entity> {
    sweep::Entity::update_many().filter(sweep::Column::Id.eq(id)).filter(sweep::Column::Status.eq(from))
}
